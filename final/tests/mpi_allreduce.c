// final/ under mpirun (2, 3 and 4 ranks, one process each, device rank % devices): mcclCommInitRank
// over an MPI-broadcast id, the queries, windows, and every dtype x op on every
// path (ring SIMPLE and LL, one-shot, two-shot), in and out of place, checked on every rank
// against the CPU reference; PreMulSum operations with each rank's own scalar on the paths that can run
// them (the ring; the symmetric ones are refused when forced); bad input on a live communicator; then
// destroy.
#include <stdlib.h>
#include "../../labs/07_allreduce/tests/ar_test_util.h"
#include "fcoll_test_util.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "minccl.h"

struct world {
  mcclComm_t comm;
  void *send, *recv, *host;
  mcclWindow_t sendWin, recvWin;
  cudaStream_t stream;
};

static void setUp(struct world* w, size_t bytes) {
  memset(w, 0, sizeof(*w));
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) SKIP("no CUDA device");
  int rank = mcclTestMpiRank(), nranks = mcclTestMpiSize();
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (rank == 0) EXPECT_OK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  EXPECT_CUDA_OK(cudaSetDevice(rank % ndev));
  EXPECT_OK(mcclCommInitRank(&w->comm, nranks, id, rank));
  int x = -1;
  EXPECT_OK(mcclCommCount(w->comm, &x));
  EXPECT_EQ(x, nranks);
  EXPECT_OK(mcclCommUserRank(w->comm, &x));
  EXPECT_EQ(x, rank);
  EXPECT_OK(mcclCommCuDevice(w->comm, &x));
  EXPECT_EQ(x, rank % ndev);
  EXPECT_OK(mcclMemAlloc(&w->send, bytes));
  EXPECT_OK(mcclMemAlloc(&w->recv, bytes));
  EXPECT_OK(mcclCommWindowRegister(w->comm, w->send, bytes, &w->sendWin, MCCL_WIN_COLL_SYMMETRIC));
  EXPECT_OK(mcclCommWindowRegister(w->comm, w->recv, bytes, &w->recvWin, MCCL_WIN_COLL_SYMMETRIC));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
  w->host = malloc(bytes);
  EXPECT_TRUE(w->host != NULL);
}

static void tearDown(struct world* w) {
  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the peers' buffers
  if (w->stream) EXPECT_CUDA_OK(cudaStreamDestroy(w->stream));
  if (w->sendWin) EXPECT_OK(mcclCommWindowDeregister(w->comm, w->sendWin));
  if (w->recvWin) EXPECT_OK(mcclCommWindowDeregister(w->comm, w->recvWin));
  if (w->send) EXPECT_OK(mcclMemFree(w->send));
  if (w->recv) EXPECT_OK(mcclMemFree(w->recv));
  if (w->comm) EXPECT_OK(mcclCommDestroy(w->comm));
  free(w->host);
  memset(w, 0, sizeof(*w));
}

// One allreduce, checked. op AR_PREMULSUM: the rank's own PreMulSum operation (host scalar), created for
// the call and destroyed right after it; want is the call's expected result (an error for a symmetric
// algorithm forced with it), after which the output must be untouched.
static void runWant(struct world* w, const struct arPath* path, mcclDataType_t t, mcclRedOp_t op, size_t count,
                    int inPlace, uint64_t seed, mcclResult_t want) {
  if (!arPathRuns(path, mcclTestMpiSize())) return;  // one-shot with SIMPLE: 2 ranks only
  size_t bytes = count * mcclTypeSize(t);
  int rank = mcclTestMpiRank();
  char why[160];
  arForce(path->algo, path->proto);
  if (!inPlace) {
    memset(w->host, 0xa5, bytes);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(w->recv, w->host, bytes));
  }
  arFill(w->host, t, op, count, rank, seed);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(inPlace ? w->recv : w->send, w->host, bytes));
  mcclRedOp_t callOp = op;
  void* dev = NULL;
  if (op == AR_PREMULSUM) EXPECT_OK(fcollPreMulSumCreate(w->comm, rank, t, 0, &callOp, &dev));
  EXPECT_RES(mcclAllReduce(inPlace ? w->recv : w->send, w->recv, count, t, callOp, w->comm, w->stream), want);
  if (op == AR_PREMULSUM) EXPECT_OK(mcclRedOpDestroy(callOp, w->comm));
  EXPECT_CUDA_OK(cudaStreamSynchronize(w->stream));
  if (want != mcclSuccess) {
    if (!inPlace) {
      unsigned char* h = (unsigned char*)w->host;
      EXPECT_CUDA_OK(cudaMemcpy(h, w->recv, bytes, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < bytes; i++)
        if (h[i] != 0xa5) {
          mcclTestFailAt(__FILE__, __LINE__, "%s %s: a refused call wrote byte %zu", path->name, arOpName(op), i);
          return;
        }
    }
    return;
  }
  EXPECT_CUDA_OK(cudaMemcpy(w->host, w->recv, bytes, cudaMemcpyDeviceToHost));
  if (arCheck(w->host, t, op, count, mcclTestMpiSize(), seed, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "%s %s %s count %zu %s: rank %d: %s", path->name, mcclTypeName(t), arOpName(op),
                   count, inPlace ? "in place" : "out of place", rank, why);
}

static void run(struct world* w, const struct arPath* path, mcclDataType_t t, mcclRedOp_t op, size_t count, int inPlace,
                uint64_t seed) {
  runWant(w, path, t, op, count, inPlace, seed, mcclSuccess);
}

// Every dtype x op on every path the mpirun tests take, 2 counts.
static void everyTypeOpAlgorithm(void) {
  static const size_t counts[] = {1, 1031};
  struct world w;
  setUp(&w, 1031 * 8);
  CHECK_STOPPED();
  uint64_t seed = mcclTestSeed();
  int k = 0;
  for (int p = 0; p < AR_NPATHS && !mcclTestMpiAnyStopped(); p++)
    for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++)
      for (int op = 0; op < mcclNumOps && !mcclTestMpiAnyStopped(); op++, k++)
        if (mcclTestSampled((uint64_t)k, 4))
          run(&w, &arPaths[p], (mcclDataType_t)t, (mcclRedOp_t)op, counts[k & 1], (k >> 1) & 1, seed + (uint64_t)k);
  arForce(NULL, NULL);
  mcclResult_t ae = mcclInternalError;
  EXPECT_OK(mcclCommGetAsyncError(w.comm, &ae));
  EXPECT_EQ(ae, mcclSuccess);
  tearDown(&w);
}

// PreMulSum operations (rank r's scalar is arPreMulScalar(r)) on every dtype: on the ring's protocols,
// one-shot (each rank scales its own input before it pushes it) and the table's own choice, at one-shot,
// two-shot and ring sizes; forcing two-shot, which would apply one rank's scalar to every rank's input,
// is refused.
static void preMulSumEveryPath(void) {
  static const size_t counts[] = {1, 1031, 70001};
  static const struct arPath table = {"table", NULL, NULL, 0};
  struct world w;
  setUp(&w, 70001 * 8);
  CHECK_STOPPED();
  uint64_t seed = mcclTestSeed();
  int k = 0;
  for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++)
    for (int c = 0; c < 3 && !mcclTestMpiAnyStopped(); c++, k++) {
      if (c == 2 && t != mcclFloat32 && t != mcclBfloat16) continue;  // ring chunks: the sim is slow
      if (!mcclTestSampled((uint64_t)k, 3)) continue;
      const struct arPath* const paths[4] = {&arPaths[0], &arPaths[1], &arPaths[2], &table};
      int pi = (t + c) % 4;
      if (c == 2 && pi == 2) pi = 3;  // one-shot's LL scratch holds 256 KiB
      const struct arPath* path = paths[pi];
      run(&w, path, (mcclDataType_t)t, AR_PREMULSUM, counts[c], (k >> 1) & 1, seed + (uint64_t)k);
    }
  for (int p = 2; p < AR_NPATHS && !mcclTestMpiAnyStopped(); p++)
    if (arPathRuns(&arPaths[p], mcclTestMpiSize()))
      runWant(&w, &arPaths[p], mcclFloat32, AR_PREMULSUM, 1031, 0, seed,
              strcmp(arPaths[p].algo, "twoshot") == 0 ? mcclInvalidArgument : mcclSuccess);
  arForce(NULL, NULL);
  run(&w, &arPaths[0], mcclFloat32, AR_PREMULSUM, 1031, 1, seed + 1);  // still in step
  tearDown(&w);
}

// The table's own choice (no MCCL_ALGO) over sizes that cross its cut-overs, on buffers outside
// windows (cudaMalloc: ring or one-shot; in windows the table would take two-shot, excluded here).
static void tableChoice(void) {
  static const size_t counts[] = {2, 6000, 40000, 200000};
  struct world w;
  setUp(&w, 64);
  CHECK_STOPPED();
  void *send = w.send, *recv = w.recv, *host = w.host;
  w.host = malloc(200000 * 4);
  EXPECT_CUDA_OK(cudaMalloc(&w.send, 200000 * 4));
  EXPECT_CUDA_OK(cudaMalloc(&w.recv, 200000 * 4));
  static const struct arPath table = {"table", NULL, NULL, 0};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]) && !mcclTestMpiAnyStopped(); i++)
    run(&w, &table, mcclFloat32, mcclSum, counts[i], 0, mcclTestSeed() + i);
  EXPECT_CUDA_OK(cudaFree(w.send));
  EXPECT_CUDA_OK(cudaFree(w.recv));
  free(w.host);
  w.send = send;
  w.recv = recv;
  w.host = host;
  tearDown(&w);
}

// Bad input on a live communicator is refused on the calling rank alone: nothing is launched, so
// the ranks stay in step.
static void badInputOnLiveComm(void) {
  struct world w;
  setUp(&w, 4096);
  CHECK_STOPPED();
  EXPECT_RES(mcclAllReduce(w.send, w.recv, 1, (mcclDataType_t)mcclNumTypes, mcclSum, w.comm, w.stream),
             mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(w.send, w.recv, 1, mcclInt8, (mcclRedOp_t)5, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(w.send, w.recv, SIZE_MAX / 4, mcclFloat64, mcclSum, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclCommWindowRegister(w.comm, w.send, 4096, &w.sendWin, 0x10), mcclInvalidArgument);
  // A forced algorithm that cannot run on these buffers (two-shot needs both in windows).
  arForce("twoshot", NULL);
  void* dev = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&dev, 64));
  EXPECT_RES(mcclAllReduce(dev, dev, 4, mcclInt32, mcclSum, w.comm, w.stream), mcclInvalidArgument);
  arForce(NULL, NULL);
  EXPECT_CUDA_OK(cudaFree(dev));
  run(&w, &arPaths[0], mcclInt32, mcclSum, 1000, 1, mcclTestSeed());  // still in step
  tearDown(&w);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(everyTypeOpAlgorithm), MCCL_TEST_CASE(preMulSumEveryPath),
                   MCCL_TEST_CASE(tableChoice), MCCL_TEST_CASE(badInputOnLiveComm))
