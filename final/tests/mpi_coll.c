// final/ under mpirun (2, 3 and 4 ranks): minccl.h's AllGather, ReduceScatter, Broadcast and
// Reduce (every dtype x op of the reducing ones on a small count, every root of the rooted ones, in
// place and out of place, a group of several) and Send/Recv between ring neighbours (grouped as
// nccl-tests' sendrecv: counts 0, 1, odd, 64 KiB; to self; a peer beyond the ring's neighbours
// refused). Each rank checks its own output against the CPU reference (fcoll_test_util.h).
#include <stdlib.h>
#include "fcoll_test_util.h"
#include "fmpi_test_util.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"

// One collective on this rank (every rank makes the same one), checked here.
static void runOne(struct fmpiWorld* w, const struct collCall* c) {
  CHECK_STOPPED();
  void *in, *out;
  char what[128], why[200];
  collDescribe(c, what, sizeof(what));
  if (collInBytes(c, w->nranks) > w->bytes || collOutBytes(c, w->nranks) > w->bytes) {
    mcclTestFailAt(__FILE__, __LINE__, "%s: buffers of %zu bytes are too small", what, w->bytes);
    return;
  }
  int line = collPrepare(c, w->rank, w->nranks, w->send, w->recv, w->host, &in, &out);
  if (line) {
    mcclTestFailAt(__FILE__, line, "%s: setting rank %d's buffers up", what, w->rank);
    return;
  }
  EXPECT_OK(fcollIssue(c, in, out, w->comm, w->stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(w->stream));
  if (collVerify(c, w->rank, w->nranks, out, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d: %s", what, w->rank, why);
}

// Reduce and ReduceScatter on every dtype x op (root and placement changing from call to call);
// AllGather and Broadcast on every dtype, in and out of place.
static void everyTypeAndOp(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 37 * 8 * (size_t)mcclTestMpiSize());
  int k = 0;
  for (int f = 0; f < collNumFuncs && !mcclTestStopped(); f++)
    for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
      for (int op = 0; op < (f == collReduce || f == collReduceScatter ? mcclNumOps : 2) && !mcclTestStopped();
           op++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        struct collCall c = {f,  (mcclDataType_t)t, (mcclRedOp_t)op, 37, k % w.nranks,
                             f == collReduce || f == collReduceScatter ? (k >> 1) & 1 : op,
                             mcclTestSeed() + (uint64_t)k};
        runOne(&w, &c);
      }
  fmpiTearDown(&w);
}

// Every root of Broadcast and Reduce, in place and out of place.
static void everyRoot(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 1001 * 4);
  int k = 0;
  for (int f = collBroadcast; f <= collReduce && !mcclTestStopped(); f++)
    for (int root = 0; root < w.nranks && !mcclTestStopped(); root++)
      for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++, k++) {
        struct collCall c = {f, mcclFloat32, mcclSum, 1001, root, inPlace, mcclTestSeed() + (uint64_t)k};
        runOne(&w, &c);
      }
  fmpiTearDown(&w);
}

// Bad input is refused before anything is recorded or launched, naming the argument.
static void badInput(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 64);
  CHECK_STOPPED();
  EXPECT_RES(mcclBroadcast(w.send, w.recv, 4, mcclInt8, w.nranks, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "root") != NULL);
  EXPECT_RES(mcclReduce(w.send, w.recv, 4, mcclInt8, mcclNumOps, 0, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclAllGather(NULL, w.recv, 4, mcclInt8, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "sendbuff") != NULL);
  // count x nranks bytes of int8 is one past SIZE_MAX at every rank count (SIZE_MAX / 2 is not, at 2 ranks).
  EXPECT_RES(mcclReduceScatter(w.send, w.recv, SIZE_MAX / (size_t)w.nranks + 1, mcclInt8, mcclSum, w.comm, w.stream),
             mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "overflows") != NULL);
  EXPECT_RES(mcclAllGather(w.send, w.recv, 4, (mcclDataType_t)mcclNumTypes, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclSend(w.send, 4, mcclInt8, -1, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclRecv(w.recv, 4, mcclInt8, w.nranks, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "peer") != NULL);
  EXPECT_RES(mcclSend(w.send, 4, mcclInt8, 0, NULL, w.stream), mcclInvalidArgument);
  fmpiTearDown(&w);
}

// nccl-tests' sendrecv: every rank sends to its ring's next and receives from its prev in one group.
static void sendRecvRing(void) {
  static const size_t counts[] = {0, 1, 4097, 65536};
  struct fmpiWorld w;
  fmpiSetUp(&w, 65536);
  CHECK_STOPPED();
  int next = 0, prev = 0;
  fcollRingNeighbours(w.rank, w.nranks, w.ndev, &next, &prev);
  char why[160];
  for (int i = 0; i < 4 && !mcclTestStopped(); i++) {
    const size_t bytes = counts[i];
    const uint64_t seed = mcclTestSeed() + (uint64_t)i;
    fcollFillBytes(w.host, bytes, seed, w.rank);
    if (bytes) EXPECT_CUDA_OK(cudaMemcpy(w.send, w.host, bytes, cudaMemcpyHostToDevice));
    EXPECT_CUDA_OK(cudaMemset(w.recv, COLL_POISON, w.bytes));
    EXPECT_OK(mcclGroupStart());
    EXPECT_OK(mcclSend(w.send, bytes, mcclUint8, next, w.comm, w.stream));
    EXPECT_OK(mcclRecv(w.recv, bytes, mcclUint8, prev, w.comm, w.stream));
    EXPECT_OK(mcclGroupEnd());
    EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
    EXPECT_CUDA_OK(cudaMemcpy(w.host, w.recv, w.bytes, cudaMemcpyDeviceToHost));
    if (fcollCheckBytes(w.host, bytes, seed, prev, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "sendrecv %zu bytes: rank %d: %s", bytes, w.rank, why);
    for (size_t b = bytes; b < w.bytes && !mcclTestStopped(); b++)
      if (((unsigned char*)w.host)[b] != COLL_POISON) {
        mcclTestFailAt(__FILE__, __LINE__, "sendrecv %zu bytes: rank %d wrote byte %zu beyond the count", bytes,
                       w.rank, b);
        break;
      }
  }
  // Ungrouped, in stream order: even ring positions send first, odd ones receive first (a send
  // alone and a receive alone, as separate launches), in float32 elements.
  const size_t count = 1001;
  fcollFillBytes(w.host, count * 4, 99, w.rank);
  EXPECT_CUDA_OK(cudaMemcpy(w.send, w.host, count * 4, cudaMemcpyHostToDevice));
  EXPECT_CUDA_OK(cudaMemset(w.recv, COLL_POISON, count * 4));
  if (w.rank % 2 == 0 || w.nranks % 2 == 1) {
    // Odd rings cannot alternate: everyone sends first; the FIFOs hold the 4 KiB.
    EXPECT_OK(mcclSend(w.send, count, mcclFloat32, next, w.comm, w.stream));
    EXPECT_OK(mcclRecv(w.recv, count, mcclFloat32, prev, w.comm, w.stream));
  } else {
    EXPECT_OK(mcclRecv(w.recv, count, mcclFloat32, prev, w.comm, w.stream));
    EXPECT_OK(mcclSend(w.send, count, mcclFloat32, next, w.comm, w.stream));
  }
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  EXPECT_CUDA_OK(cudaMemcpy(w.host, w.recv, count * 4, cudaMemcpyDeviceToHost));
  if (fcollCheckBytes(w.host, count * 4, 99, prev, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "ungrouped send then recv: rank %d: %s", w.rank, why);
  fmpiTearDown(&w);
}

// To itself (a device copy), and the limit: a peer that is not the ring's neighbour.
static void sendRecvSelfAndLimit(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 4096);
  CHECK_STOPPED();
  int next = 0, prev = 0;
  fcollRingNeighbours(w.rank, w.nranks, w.ndev, &next, &prev);
  char why[160];
  fcollFillBytes(w.host, 4000, 7, w.rank);
  EXPECT_CUDA_OK(cudaMemcpy(w.send, w.host, 4000, cudaMemcpyHostToDevice));
  EXPECT_OK(mcclGroupStart());
  EXPECT_OK(mcclSend(w.send, 1000, mcclInt32, w.rank, w.comm, w.stream));
  EXPECT_OK(mcclRecv(w.recv, 1000, mcclInt32, w.rank, w.comm, w.stream));
  EXPECT_OK(mcclGroupEnd());
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  EXPECT_CUDA_OK(cudaMemcpy(w.host, w.recv, 4000, cudaMemcpyDeviceToHost));
  if (fcollCheckBytes(w.host, 4000, 7, w.rank, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "send/recv to self: rank %d: %s", w.rank, why);
  // A send to self without its receive.
  EXPECT_RES(mcclSend(w.send, 10, mcclInt32, w.rank, w.comm, w.stream), mcclInvalidUsage);
  // Beyond the neighbours (only rings of 3 ranks or more have ranks that are not next, or not prev).
  if (w.nranks >= 3) {
    EXPECT_RES(mcclSend(w.send, 10, mcclInt32, prev, w.comm, w.stream), mcclInvalidUsage);
    EXPECT_TRUE(strstr(mcclGetLastError(NULL), "ring's next") != NULL);
    EXPECT_RES(mcclRecv(w.recv, 10, mcclInt32, next, w.comm, w.stream), mcclInvalidUsage);
    EXPECT_TRUE(strstr(mcclGetLastError(NULL), "ring's previous") != NULL);
  }
  fmpiTearDown(&w);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(everyTypeAndOp), MCCL_TEST_CASE(everyRoot), MCCL_TEST_CASE(badInput),
                   MCCL_TEST_CASE(sendRecvRing), MCCL_TEST_CASE(sendRecvSelfAndLimit))
