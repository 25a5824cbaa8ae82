// final/ under mpirun (2, 3 and 4 ranks): minccl.h's AllGather, ReduceScatter, Broadcast and
// Reduce (every dtype x op of the reducing ones on a small count, every root of the rooted ones, in
// place and out of place, a group of several), AlltoAll, Gather and Scatter (every dtype, roots 0 and
// last, in place), PreMulSum operations with each rank's own scalar (host and device memory), and
// Send/Recv to any peer (nccl-tests' sendrecv on counts 0, 1, odd, 64 KiB; to self; all-to-all in one
// group on every dtype up to 1 MiB; rank r to r+2; a send with no receive, ended by mcclCommAbort).
// Each rank checks its own output against the CPU reference (fcoll_test_util.h).
#include <stdlib.h>
#include <time.h>
#include "fcoll_test_util.h"
#include "fmpi_test_util.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "mccl_utils.h"

// One collective on this rank (every rank makes the same one), checked here. With op (c->op is
// AR_PREMULSUM), the rank passes *op, destroyed as soon as the call is made.
static void runOneOp(struct fmpiWorld* w, const struct enqCall* c, const mcclRedOp_t* op) {
  CHECK_STOPPED();
  void *in, *out;
  char what[128], why[200];
  enqDescribe(c, what, sizeof(what));
  if (enqCallBytes(c, w->nranks) > w->bytes) {
    mcclTestFailAt(__FILE__, __LINE__, "%s: buffers of %zu bytes are too small", what, w->bytes);
    return;
  }
  int line = enqPrepare(c, w->rank, w->nranks, w->send, w->recv, w->host, &in, &out);
  if (line) {
    mcclTestFailAt(__FILE__, line, "%s: setting rank %d's buffers up", what, w->rank);
    return;
  }
  EXPECT_OK(fcollIssueOp(c, op ? *op : c->op, in, out, w->comm, w->stream));
  if (op) EXPECT_OK(mcclRedOpDestroy(*op, w->comm));
  EXPECT_CUDA_OK(cudaStreamSynchronize(w->stream));
  if (enqVerify(c, w->rank, w->nranks, out, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "%s%s: rank %d: %s", what, op ? " (premulsum)" : "", w->rank, why);
}
static void runOne(struct fmpiWorld* w, const struct enqCall* c) {
  runOneOp(w, c, NULL);
}

// Reduce and ReduceScatter on every dtype x op (root and placement changing from call to call);
// AllGather and Broadcast on every dtype, in and out of place.
static void everyTypeAndOp(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 37 * 8 * (size_t)mcclTestMpiSize());
  int k = 0;
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduceScatter && !mcclTestMpiAnyStopped(); f++)
    for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++)
      for (int op = 0; op < (enqReduces(f) ? mcclNumOps : 2) && !mcclTestMpiAnyStopped(); op++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        struct enqCall c = {f,
                            (mcclDataType_t)t,
                            (mcclRedOp_t)op,
                            0,
                            37,
                            k % w.nranks,
                            enqReduces(f) ? (k >> 1) & 1 : op,
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
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduce && !mcclTestMpiAnyStopped(); f++)
    for (int root = 0; root < w.nranks && !mcclTestMpiAnyStopped(); root++)
      for (int inPlace = 0; inPlace < 2 && !mcclTestMpiAnyStopped(); inPlace++, k++) {
        struct enqCall c = {f, mcclFloat32, mcclSum, 0, 1001, root, inPlace, mcclTestSeed() + (uint64_t)k};
        runOne(&w, &c);
      }
  fmpiTearDown(&w);
}

// A window registration that one rank refuses up front (size 0 on rank 0), alone and inside a group:
// every rank's fails at once, the others naming rank 0, and the next registration works on every rank
// (a refusal still takes part in the exchange, so the ranks stay in step).
static void windowRefusedByOneRank(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 64);
  CHECK_STOPPED();
  void* buf = NULL;
  EXPECT_OK(mcclMemAlloc(&buf, 4096));
  for (int grouped = 0; grouped < 2 && !mcclTestMpiAnyStopped(); grouped++) {
    mcclWindow_t win = NULL;
    const size_t size = w.rank == 0 ? 0 : 4096;
    const double t0 = mcclClockSec();
    if (grouped) {
      EXPECT_OK(mcclGroupStart());
      EXPECT_RES(mcclCommWindowRegister(w.comm, buf, size, &win, 0), w.rank == 0 ? mcclInvalidArgument : mcclSuccess);
      EXPECT_RES(mcclGroupEnd(), mcclInvalidArgument);
    } else {
      EXPECT_RES(mcclCommWindowRegister(w.comm, buf, size, &win, 0), mcclInvalidArgument);
    }
    EXPECT_TRUE(mcclClockSec() - t0 < 5.0);  // at once, not at the bootstrap's timeout
    if (w.rank != 0) EXPECT_TRUE(strstr(mcclGetLastError(NULL), "rank 0 could not offer its buffer") != NULL);
    EXPECT_TRUE(win == NULL);
    EXPECT_OK(mcclCommWindowRegister(w.comm, buf, 4096, &win, MCCL_WIN_COLL_SYMMETRIC));
    EXPECT_TRUE(win != NULL);
    if (win) EXPECT_OK(mcclCommWindowDeregister(w.comm, win));
  }
  EXPECT_OK(mcclMemFree(buf));
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
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  // 2^63 elements of int8 (past the 2^63 bytes the kernels index), and count x 8 past SIZE_MAX.
  EXPECT_RES(mcclAllReduce(w.send, w.recv, (size_t)1 << 63, mcclInt8, mcclSum, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  EXPECT_RES(mcclBroadcast(w.send, w.recv, SIZE_MAX / 8 + 1, mcclUint64, 0, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclAlltoAll(w.send, w.recv, (size_t)1 << 63, mcclInt8, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  EXPECT_RES(mcclGather(w.send, w.recv, SIZE_MAX / 4 + 1, mcclFloat32, w.rank, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclScatter(w.send, w.recv, (size_t)1 << 63, mcclFloat8e4m3, w.rank, w.comm, w.stream),
             mcclInvalidArgument);
  // AlltoAll, Gather and Scatter: roots out of range, overlapping buffers.
  EXPECT_RES(mcclGather(w.send, w.recv, 4, mcclInt8, w.nranks, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "root") != NULL);
  EXPECT_RES(mcclScatter(w.send, w.recv, 4, mcclInt8, -1, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "root") != NULL);
  EXPECT_RES(mcclAlltoAll(w.send, (char*)w.send + 1, 2, mcclInt8, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "overlap") != NULL);
  // Equal buffers are taken, as NCCL takes them (nccl-tests' in-place rows). On more than one rank what
  // lands is not defined (a block is sent while the peer's block lands on it; the sim's threads really
  // race there, and ThreadSanitizer says so), so the defined case is checked: one rank, its own block.
  int dev = 0;
  EXPECT_CUDA_OK(cudaGetDevice(&dev));
  mcclComm_t one = NULL;
  EXPECT_OK(mcclCommInitAll(&one, 1, &dev));
  unsigned char pattern[4] = {1, 2, 3, 4}, back[4] = {0};
  EXPECT_CUDA_OK(cudaMemcpy(w.recv, pattern, 4, cudaMemcpyHostToDevice));
  EXPECT_OK(mcclAlltoAll(w.recv, w.recv, 4, mcclInt8, one, w.stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  EXPECT_CUDA_OK(cudaMemcpy(back, w.recv, 4, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(back, pattern, 4);
  EXPECT_OK(mcclCommDestroy(one));
  EXPECT_RES(mcclGather((char*)w.recv + 1, w.recv, 2, mcclInt8, w.rank, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "overlap") != NULL);
  // PreMulSum: no scalar; an operation used after its destruction, or with another type.
  mcclRedOp_t op;
  double scalar = 0.5;
  EXPECT_RES(mcclRedOpCreatePreMulSum(&op, NULL, mcclFloat64, mcclScalarHostImmediate, w.comm), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "scalar") != NULL);
  EXPECT_OK(mcclRedOpCreatePreMulSum(&op, &scalar, mcclFloat64, mcclScalarHostImmediate, w.comm));
  EXPECT_RES(mcclAllReduce(w.send, w.recv, 4, mcclFloat32, op, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "op") != NULL);
  EXPECT_OK(mcclRedOpDestroy(op, w.comm));
  EXPECT_RES(mcclAllReduce(w.send, w.recv, 4, mcclFloat64, op, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "op") != NULL);
  EXPECT_RES(mcclRedOpDestroy(op, w.comm), mcclInvalidArgument);
  EXPECT_RES(mcclAllGather(w.send, w.recv, 4, (mcclDataType_t)mcclNumTypes, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclSend(w.send, 4, mcclInt8, -1, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_RES(mcclRecv(w.recv, 4, mcclInt8, w.nranks, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "peer") != NULL);
  EXPECT_RES(mcclSend(w.send, 4, mcclInt8, 0, NULL, w.stream), mcclInvalidArgument);
  fmpiTearDown(&w);
}

// AlltoAll, Gather and Scatter on every dtype: counts 1, 7, 1023 and 4099 (blocks whose bytes are not a
// multiple of 16), roots 0 and last, the in-place forms of Gather and Scatter. Both buffers are checked
// whole: the outputs, and nothing written elsewhere (fcoll_test_util.h's images).
static size_t a2aSpan(void) {
  const struct fa2aCall largest = {fa2aAlltoAll, mcclFloat64, 4099, 0, 0, 0};
  return fa2aImageBytes(&largest, mcclTestMpiSize());
}
static void a2aEvery(struct fmpiWorld* w) {
  static const size_t counts[] = {1, 7, 1023, 4099};
  const int n = mcclTestMpiSize();
  char what[128], why[200];
  int k = 0;
  for (int f = 0; f < fa2aNumFuncs && !mcclTestMpiAnyStopped(); f++)
    for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++)
      for (int i = 0; i < 2 && !mcclTestMpiAnyStopped(); i++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        struct fa2aCall c = {f,
                             (mcclDataType_t)t,
                             counts[(t + f + 2 * i) % 4],
                             (t + i) % 2 ? n - 1 : 0,
                             f != fa2aAlltoAll && (t / 2 + i) % 2,
                             mcclTestSeed() + (uint64_t)k};
        fa2aDescribe(&c, what, sizeof(what));
        int line = fa2aPrepare(&c, w->rank, n, w->send, w->recv, w->host);
        if (line) {
          mcclTestFailAt(__FILE__, line, "%s: setting rank %d's buffers up", what, w->rank);
          break;
        }
        void *in, *out;
        fa2aPlace(&c, w->rank, w->send, w->recv, &in, &out);
        EXPECT_OK(fa2aIssue(&c, in, out, w->comm, w->stream));
        EXPECT_CUDA_OK(cudaStreamSynchronize(w->stream));
        if (fa2aVerify(&c, w->rank, n, w->send, w->recv, w->host, why, sizeof(why)))
          mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d: %s", what, w->rank, why);
      }
}
static void alltoAllGatherScatter(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 4 * a2aSpan());  // the host scratch holds 4 images
  CHECK_STOPPED();
  a2aEvery(&w);
  fmpiTearDown(&w);
}

// The time mcclGroupSimulateEnd gives one AllGather of `count` bytes from in to out on comm.
static float allGatherEstimate(mcclComm_t comm, void* in, void* out, size_t count, cudaStream_t stream) {
  mcclSimInfo_t sim = MCCL_SIM_INFO_INITIALIZER;
  const mcclResult_t a = mcclGroupStart(), b = mcclAllGather(in, out, count, mcclInt8, comm, stream),
                     c = mcclGroupSimulateEnd(&sim);
  if (a != mcclSuccess || b != mcclSuccess || c != mcclSuccess)
    mcclTestFailAt(__FILE__, __LINE__, "a simulated AllGather: %d, %d, %d", (int)a, (int)b, (int)c);
  return sim.estimatedTime;
}

// A communicator made with mcclConfig_t.CTAPolicy = MCCL_CTA_POLICY_ZERO, both buffers in windows: AlltoAll,
// Gather and Scatter as above, AllGather and Broadcast in and out of place, all checked; an AllGather on the
// windows is planned for the copy engines (mcclGroupSimulateEnd costs it otherwise than the default policy
// does), one on plain buffers is not. Configs that are not NCCL's are refused.
static void ctaPolicyZero(void) {
  struct fmpiWorld w, z;
  const size_t span = a2aSpan();
  fmpiSetUp(&w, 4 * span);
  CHECK_STOPPED();
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (w.rank == 0) EXPECT_OK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  mcclConfig_t cfg = MCCL_CONFIG_INITIALIZER;
  mcclComm_t zc = NULL;
  cfg.CTAPolicy = 3;
  EXPECT_RES(mcclCommInitRankConfig(&zc, w.nranks, id, w.rank, &cfg), mcclInvalidArgument);
  cfg.CTAPolicy = MCCL_CTA_POLICY_ZERO;
  cfg.blocking = 2;
  EXPECT_RES(mcclCommInitRankConfig(&zc, w.nranks, id, w.rank, &cfg), mcclInvalidArgument);
  cfg.blocking = 1;
  cfg.magic = 0;
  EXPECT_RES(mcclCommInitRankConfig(&zc, w.nranks, id, w.rank, &cfg), mcclInvalidArgument);
  EXPECT_TRUE(zc == NULL);
  cfg.magic = MCCL_CONFIG_MAGIC;
  EXPECT_OK(mcclCommInitRankConfig(&zc, w.nranks, id, w.rank, &cfg));
  z = w;
  z.comm = zc;
  z.send = z.recv = NULL;
  mcclWindow_t sw = NULL, rw = NULL;
  EXPECT_OK(mcclMemAlloc(&z.send, 4 * span));
  EXPECT_OK(mcclMemAlloc(&z.recv, 4 * span));
  EXPECT_OK(mcclCommWindowRegister(zc, z.send, 4 * span, &sw, MCCL_WIN_COLL_SYMMETRIC));
  EXPECT_OK(mcclCommWindowRegister(zc, z.recv, 4 * span, &rw, MCCL_WIN_COLL_SYMMETRIC));
  a2aEvery(&z);
  for (int k = 0; k < 8 && !mcclTestMpiAnyStopped(); k++) {
    const int f = k % 2 ? mcclFuncBroadcast : mcclFuncAllGather;
    struct enqCall c = {f,           k < 4 ? mcclFloat32 : mcclInt8, mcclSum, 0, 1001 + (size_t)k, k % w.nranks,
                        (k / 2) % 2, mcclTestSeed() + (uint64_t)k};
    runOne(&z, &c);
  }
  const float onWindows = allGatherEstimate(zc, z.send, z.recv, 1 << 16, w.stream);
  const float byDefault = allGatherEstimate(w.comm, z.send, z.recv, 1 << 16, w.stream);
  EXPECT_TRUE(onWindows != byDefault);
  EXPECT_TRUE(allGatherEstimate(zc, w.send, w.recv, 1 << 16, w.stream) ==
              allGatherEstimate(w.comm, w.send, w.recv, 1 << 16, w.stream));
  if (sw) EXPECT_OK(mcclCommWindowDeregister(zc, sw));
  if (rw) EXPECT_OK(mcclCommWindowDeregister(zc, rw));
  EXPECT_OK(mcclMemFree(z.send));
  EXPECT_OK(mcclMemFree(z.recv));
  if (zc) EXPECT_OK(mcclCommDestroy(zc));
  fmpiTearDown(&w);
}

// PreMulSum operations, each rank's with its own scalar (arPreMulScalar(rank), in host memory read at
// creation or in device memory read by the kernels), on every dtype: AllReduce, ReduceScatter and
// Reduce, in and out of place; each operation is destroyed as soon as its call is made.
static void preMulSum(void) {
  const size_t count = 257;
  struct fmpiWorld w;
  fmpiSetUp(&w, count * 8 * (size_t)mcclTestMpiSize());
  CHECK_STOPPED();
  char why[200];
  int k = 0;
  for (int t = 0; t < mcclNumTypes && !mcclTestMpiAnyStopped(); t++)
    for (int onDevice = 0; onDevice < 2 && !mcclTestMpiAnyStopped(); onDevice++)
      for (int f = 0; f < 3 && !mcclTestMpiAnyStopped(); f++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        mcclRedOp_t op;
        void* dev = NULL;
        EXPECT_OK(fcollPreMulSumCreate(w.comm, w.rank, (mcclDataType_t)t, onDevice, &op, &dev));
        const uint64_t seed = mcclTestSeed() + (uint64_t)k;
        if (f == 0) {  // AllReduce
          const int inPlace = k & 1;
          const size_t bytes = count * mcclTypeSize((mcclDataType_t)t);
          memset(w.host, ENQ_POISON, bytes);
          EXPECT_CUDA_OK(mcclTestCopyToDevice(w.recv, w.host, bytes));
          arFill(w.host, (mcclDataType_t)t, AR_PREMULSUM, count, w.rank, seed);
          EXPECT_CUDA_OK(mcclTestCopyToDevice(inPlace ? w.recv : w.send, w.host, bytes));
          EXPECT_OK(mcclAllReduce(inPlace ? w.recv : w.send, w.recv, count, (mcclDataType_t)t, op, w.comm, w.stream));
          EXPECT_OK(mcclRedOpDestroy(op, w.comm));
          EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
          EXPECT_CUDA_OK(cudaMemcpy(w.host, w.recv, bytes, cudaMemcpyDeviceToHost));
          if (arCheck(w.host, (mcclDataType_t)t, AR_PREMULSUM, count, w.nranks, seed, why, sizeof(why)))
            mcclTestFailAt(__FILE__, __LINE__, "AllReduce %s premulsum (%s scalar) %s: rank %d: %s",
                           mcclTypeName((mcclDataType_t)t), onDevice ? "device" : "host",
                           inPlace ? "in place" : "out of place", w.rank, why);
        } else {
          struct enqCall c = {f == 1 ? mcclFuncReduceScatter : mcclFuncReduce,
                              (mcclDataType_t)t,
                              AR_PREMULSUM,
                              onDevice,
                              count,
                              k % w.nranks,
                              (k >> 1) & 1,
                              seed};
          runOneOp(&w, &c, &op);
        }
        if (dev) EXPECT_CUDA_OK(cudaFree(dev));
      }
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
  for (int i = 0; i < 4 && !mcclTestMpiAnyStopped(); i++) {
    const size_t bytes = counts[i];
    const uint64_t seed = mcclTestSeed() + (uint64_t)i;
    fcollFillBytes(w.host, bytes, seed, w.rank);
    if (bytes) EXPECT_CUDA_OK(mcclTestCopyToDevice(w.send, w.host, bytes));
    EXPECT_CUDA_OK(mcclTestMemset(w.recv, ENQ_POISON, w.bytes));
    EXPECT_OK(mcclGroupStart());
    EXPECT_OK(mcclSend(w.send, bytes, mcclUint8, next, w.comm, w.stream));
    EXPECT_OK(mcclRecv(w.recv, bytes, mcclUint8, prev, w.comm, w.stream));
    EXPECT_OK(mcclGroupEnd());
    EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
    EXPECT_CUDA_OK(cudaMemcpy(w.host, w.recv, w.bytes, cudaMemcpyDeviceToHost));
    if (fcollCheckBytes(w.host, bytes, seed, prev, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "sendrecv %zu bytes: rank %d: %s", bytes, w.rank, why);
    for (size_t b = bytes; b < w.bytes && !mcclTestStopped(); b++)
      if (((unsigned char*)w.host)[b] != ENQ_POISON) {
        mcclTestFailAt(__FILE__, __LINE__, "sendrecv %zu bytes: rank %d wrote byte %zu beyond the count", bytes, w.rank,
                       b);
        break;
      }
  }
  // Ungrouped, in stream order: even ring positions send first, odd ones receive first (a send
  // alone and a receive alone, as separate launches), in float32 elements.
  const size_t count = 1001;
  fcollFillBytes(w.host, count * 4, 99, w.rank);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(w.send, w.host, count * 4));
  EXPECT_CUDA_OK(mcclTestMemset(w.recv, ENQ_POISON, count * 4));
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

// To itself (a device copy); a send to self without its receive is refused.
static void sendRecvSelf(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 4096);
  CHECK_STOPPED();
  char why[160];
  fcollFillBytes(w.host, 4000, 7, w.rank);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(w.send, w.host, 4000));
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
  EXPECT_RES(mcclRecv(NULL, 10, mcclInt32, w.rank, w.comm, w.stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "recvbuff") != NULL);
  fmpiTearDown(&w);
}

// What `from` sends to `to`: fcollFillBytes's bytes under a seed of the pair.
static uint64_t pairSeed(uint64_t seed, int to) {
  return seed * 131 + (uint64_t)to;
}

// All-to-all in one group (every rank to every rank, itself included), calls in a scrambled order,
// on every dtype with counts 0, 1, odd and 1 MiB in all.
static void sendRecvAllToAll(void) {
  const int n = mcclTestMpiSize();
  const size_t big = (1u << 20) / (size_t)n;
  struct fmpiWorld w;
  fmpiSetUp(&w, (size_t)n * big);
  CHECK_STOPPED();
  unsigned char* h = (unsigned char*)w.host;
  char why[160];
  for (int ty = 0; ty < mcclNumTypes && !mcclTestMpiAnyStopped(); ty++) {
    const size_t es = mcclTypeSize((mcclDataType_t)ty);
    const size_t counts[4] = {0, 1, 1001, big / es};
    for (int c = 0; c < 4 && !mcclTestMpiAnyStopped(); c++) {
      if (!(ty == 0 || ty == mcclNumTypes - 1 || c == ty % 4)) continue;
      const size_t count = counts[c], bytes = count * es;
      const uint64_t seed = mcclTestSeed() + (uint64_t)(ty * 4 + c);
      for (int p = 0; p < n; p++) fcollFillBytes(h + (size_t)p * bytes, bytes, pairSeed(seed, p), w.rank);
      if (bytes) EXPECT_CUDA_OK(mcclTestCopyToDevice(w.send, h, (size_t)n * bytes));
      EXPECT_CUDA_OK(mcclTestMemset(w.recv, ENQ_POISON, w.bytes));
      EXPECT_OK(mcclGroupStart());
      for (int j = 0; j < 2 * n; j++) {
        const int i = (j * 7 + w.rank) % (2 * n), p = i / 2;  // a permutation: 7 is prime to 2n (n < 7)
        if (i % 2)
          EXPECT_OK(mcclRecv((char*)w.recv + (size_t)p * bytes, count, (mcclDataType_t)ty, p, w.comm, w.stream));
        else
          EXPECT_OK(mcclSend((char*)w.send + (size_t)p * bytes, count, (mcclDataType_t)ty, p, w.comm, w.stream));
      }
      EXPECT_OK(mcclGroupEnd());
      EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
      EXPECT_CUDA_OK(cudaMemcpy(h, w.recv, w.bytes, cudaMemcpyDeviceToHost));
      for (int p = 0; p < n; p++)
        if (fcollCheckBytes(h + (size_t)p * bytes, bytes, pairSeed(seed, w.rank), p, why, sizeof(why))) {
          mcclTestFailAt(__FILE__, __LINE__, "all-to-all %s count %zu: rank %d: %s", mcclTypeName((mcclDataType_t)ty),
                         count, w.rank, why);
          break;
        }
      for (size_t b = (size_t)n * bytes; b < w.bytes; b++)
        if (h[b] != ENQ_POISON) {
          mcclTestFailAt(__FILE__, __LINE__, "all-to-all count %zu: rank %d wrote byte %zu beyond", count, w.rank, b);
          break;
        }
    }
  }
  fmpiTearDown(&w);
}

// Peers out of ring order: rank r sends to r+2 and receives from r-2 (itself with 2 ranks).
static void sendRecvPlusTwo(void) {
  struct fmpiWorld w;
  fmpiSetUp(&w, 30001);
  CHECK_STOPPED();
  const int to = (w.rank + 2) % w.nranks, from = (w.rank - 2 + 2 * w.nranks) % w.nranks;
  char why[160];
  fcollFillBytes(w.host, 30001, pairSeed(5, to), w.rank);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(w.send, w.host, 30001));
  EXPECT_OK(mcclGroupStart());
  EXPECT_OK(mcclRecv(w.recv, 30001, mcclUint8, from, w.comm, w.stream));
  EXPECT_OK(mcclSend(w.send, 30001, mcclUint8, to, w.comm, w.stream));
  EXPECT_OK(mcclGroupEnd());
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  EXPECT_CUDA_OK(cudaMemcpy(w.host, w.recv, 30001, cudaMemcpyDeviceToHost));
  if (fcollCheckBytes(w.host, 30001, pairSeed(5, w.rank), from, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "send to r+2: rank %d: %s", w.rank, why);
  fmpiTearDown(&w);
}

// A send whose receive never comes: as in NCCL the kernel waits (rank 0 sends more than the FIFOs
// hold to rank 1, which posts nothing); mcclCommAbort ends it and frees the communicator. Every
// rank then leaves through mcclCommAbort, its peers' states no longer matching.
static void sendRecvUnmatched(void) {
  arSmallFifos(1);  // 4 KiB FIFOs: 1 MiB is far more than they hold
  struct fmpiWorld w;
  fmpiSetUp(&w, 1 << 20);
  CHECK_STOPPED();
  const int n = w.nranks;
  EXPECT_OK(mcclGroupStart());  // connect rank 0 -> 1 (and the rest of a ring) first
  EXPECT_OK(mcclSend(w.send, 1, mcclUint8, (w.rank + 1) % n, w.comm, w.stream));
  EXPECT_OK(mcclRecv(w.recv, 1, mcclUint8, (w.rank + n - 1) % n, w.comm, w.stream));
  EXPECT_OK(mcclGroupEnd());
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  if (w.rank == 0) {
    EXPECT_OK(mcclSend(w.send, 1 << 20, mcclUint8, 1, w.comm, w.stream));
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    EXPECT_CUDA(cudaStreamQuery(w.stream), cudaErrorNotReady);  // still waiting for rank 1
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_OK(mcclCommAbort(w.comm));
  w.comm = NULL;
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  fmpiTearDown(&w);
  arSmallFifos(0);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(everyTypeAndOp), MCCL_TEST_CASE(everyRoot), MCCL_TEST_CASE(badInput),
                   MCCL_TEST_CASE(windowRefusedByOneRank), MCCL_TEST_CASE(alltoAllGatherScatter),
                   MCCL_TEST_CASE(ctaPolicyZero), MCCL_TEST_CASE(preMulSum), MCCL_TEST_CASE(sendRecvRing),
                   MCCL_TEST_CASE(sendRecvSelf), MCCL_TEST_CASE(sendRecvAllToAll), MCCL_TEST_CASE(sendRecvPlusTwo),
                   MCCL_TEST_CASE(sendRecvUnmatched))
