// final/ in one process: every call of minccl.h with bad input (a clear error, nothing built), the
// queries, double destroy, groups (4 devices driven by one thread: mcclCommInitAll and grouped
// mcclCommInitRank; a bad call failing its whole group; a communicator destroyed while a group holds
// its calls; mcclGroupSimulateEnd), allreduce against the CPU reference for every dtype x op on every
// algorithm, AlltoAll, Gather and Scatter on every dtype, PreMulSum operations (host and device
// scalars, per rank) and their misuse, abort (prompt while a kernel waits for a peer that never comes;
// the clique's other members see mcclRemoteError), abort or destroy from a second thread at any moment
// (inside a window registration, a group's connection setup, a non-blocking init, or with work in that
// thread's open group), and nothing leaked.
#include <stdint.h>
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../labs/07_allreduce/tests/ar_test_util.h"
#include "fcoll_test_util.h"
#include "mccl_test.h"
#include "minccl.h"
#include "mccl_param.h"
#include "mccl_utils.h"

#define NDEV 4

// The sim's and the driver's own fds and threads appear on first use: count from after.
static void warmUp(void) {
  for (int d = 0; d < NDEV && d < mcclTestDeviceCount(); d++) {
    cudaSetDevice(d);
    void* p = NULL;
    if (mcclMemAlloc(&p, 1) == mcclSuccess) mcclMemFree(p);
  }
  cudaSetDevice(0);
}

static void versionAndStrings(void) {
  int v = -1;
  EXPECT_OK(mcclGetVersion(&v));
  EXPECT_EQ(v, MCCL_VERSION_CODE);
  EXPECT_RES(mcclGetVersion(NULL), mcclInvalidArgument);
  for (int r = 0; r <= mcclNumResults; r++) EXPECT_TRUE(mcclGetErrorString((mcclResult_t)r) != NULL);
  EXPECT_TRUE(strcmp(mcclGetErrorString(mcclSuccess), "no error") == 0);
  mcclUniqueId a, b;
  EXPECT_OK(mcclGetUniqueId(&a));
  EXPECT_OK(mcclGetUniqueId(&b));
  EXPECT_TRUE(memcmp(&a, &b, sizeof(a)) != 0);
  EXPECT_RES(mcclGetUniqueId(NULL), mcclInvalidArgument);
}

// Every call that takes a communicator refuses NULL, and a made-up handle, with mcclInvalidArgument;
// mcclGetLastError then holds the warning, naming the argument.
static void nullAndBogusComm(void) {
  int x;
  mcclResult_t ae;
  mcclWindow_t w = NULL;
  char buf[64];
  mcclComm_t bogus = (mcclComm_t)(void*)buf;
  mcclComm_t handles[2] = {NULL, bogus};
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
    mcclComm_t c = handles[i];
    EXPECT_RES(mcclCommCount(c, &x), mcclInvalidArgument);
    EXPECT_TRUE(strstr(mcclGetLastError(NULL), "comm") != NULL);
    EXPECT_RES(mcclCommCuDevice(c, &x), mcclInvalidArgument);
    EXPECT_RES(mcclCommUserRank(c, &x), mcclInvalidArgument);
    EXPECT_RES(mcclCommGetAsyncError(c, &ae), mcclInvalidArgument);
    EXPECT_RES(mcclCommWindowRegister(c, buf, 64, &w, 0), mcclInvalidArgument);
    EXPECT_RES(mcclCommWindowDeregister(c, (mcclWindow_t)(void*)buf), mcclInvalidArgument);
    EXPECT_RES(mcclAllReduce(buf, buf, 1, mcclInt8, mcclSum, c, NULL), mcclInvalidArgument);
    EXPECT_RES(mcclAlltoAll(buf, buf + 32, 1, mcclInt8, c, NULL), mcclInvalidArgument);
    EXPECT_RES(mcclGather(buf, buf + 32, 1, mcclInt8, 0, c, NULL), mcclInvalidArgument);
    EXPECT_RES(mcclScatter(buf, buf + 32, 1, mcclInt8, 0, c, NULL), mcclInvalidArgument);
    mcclRedOp_t op = mcclSum;
    float scalar = 2.0f;
    EXPECT_RES(mcclRedOpCreatePreMulSum(&op, &scalar, mcclFloat32, mcclScalarHostImmediate, c), mcclInvalidArgument);
    EXPECT_EQ(op, mcclSum);  // written only on success
    EXPECT_RES(mcclRedOpDestroy((mcclRedOp_t)mcclNumOps, c), mcclInvalidArgument);
    EXPECT_RES(mcclCommRevoke(c), mcclInvalidArgument);
    EXPECT_RES(mcclCommFinalize(c), mcclInvalidArgument);
    mcclComm_t out = NULL;
    EXPECT_RES(mcclCommShrink(c, NULL, 0, &out, MCCL_SHRINK_DEFAULT), mcclInvalidArgument);
    EXPECT_TRUE(out == NULL);
  }
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "not a live communicator") != NULL);
  // As NCCL: destroying or aborting NULL is a no-op; a made-up handle is refused.
  EXPECT_OK(mcclCommDestroy(NULL));
  EXPECT_OK(mcclCommAbort(NULL));
  EXPECT_RES(mcclCommDestroy(bogus), mcclInvalidArgument);
  EXPECT_RES(mcclCommAbort(bogus), mcclInvalidArgument);
  EXPECT_RES(mcclGroupEnd(), mcclInvalidUsage);  // no group started
}

static void initArguments(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no device");
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  mcclComm_t c = (mcclComm_t)(uintptr_t)0x1;
  EXPECT_RES(mcclCommInitRank(NULL, 1, id, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitRank(&c, 0, id, 0), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "nranks 0") != NULL);
  EXPECT_RES(mcclCommInitRank(&c, -3, id, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitRank(&c, 65, id, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitRank(&c, 2, id, 2), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "rank 2") != NULL);
  EXPECT_RES(mcclCommInitRank(&c, 2, id, -1), mcclInvalidArgument);
  EXPECT_TRUE(c == (mcclComm_t)(uintptr_t)0x1);  // outputs written only on success
  mcclComm_t cs[NDEV];
  int dup[2] = {0, 0}, far[1] = {mcclTestDeviceCount()};
  EXPECT_RES(mcclCommInitAll(NULL, 1, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitAll(cs, 0, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitAll(cs, -1, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitAll(cs, 1, far), mcclInvalidArgument);
  if (mcclTestDeviceCount() >= 2) EXPECT_RES(mcclCommInitAll(cs, 2, dup), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitAll(cs, mcclTestDeviceCount() + 1, NULL), mcclInvalidArgument);
}

// One rank: the queries, allreduce and window arguments, double destroy, use after destroy.
static void oneRank(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no device");
  EXPECT_CUDA_OK(cudaSetDevice(mcclTestDeviceCount() - 1));
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  mcclComm_t c = NULL;
  EXPECT_OK(mcclCommInitRank(&c, 1, id, 0));
  int n = -1, d = -1, r = -1;
  EXPECT_OK(mcclCommCount(c, &n));
  EXPECT_OK(mcclCommCuDevice(c, &d));
  EXPECT_OK(mcclCommUserRank(c, &r));
  EXPECT_EQ(n, 1);
  EXPECT_EQ(d, mcclTestDeviceCount() - 1);
  EXPECT_EQ(r, 0);
  EXPECT_RES(mcclCommCount(c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommCuDevice(c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommUserRank(c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommGetAsyncError(c, NULL), mcclInvalidArgument);
  mcclResult_t ae = mcclInternalError;
  EXPECT_OK(mcclCommGetAsyncError(c, &ae));
  EXPECT_EQ(ae, mcclSuccess);

  int32_t* buf = NULL;
  EXPECT_OK(mcclMemAlloc((void**)&buf, 4096));
  EXPECT_RES(mcclAllReduce(buf, buf, 1, (mcclDataType_t)mcclNumTypes, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(buf, buf, 1, (mcclDataType_t)-1, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(buf, buf, 1, mcclInt32, (mcclRedOp_t)mcclNumOps, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(buf, buf, 1, mcclInt32, (mcclRedOp_t)-1, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(buf, buf, SIZE_MAX / 2, mcclInt32, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  EXPECT_RES(mcclAllReduce(buf, buf, (size_t)1 << 63, mcclInt8, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  EXPECT_RES(mcclAllReduce(NULL, buf, 1, mcclInt32, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(buf, NULL, 1, mcclInt32, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_OK(mcclAllReduce(NULL, NULL, 0, mcclInt32, mcclSum, c, NULL));  // nothing to do, as NCCL

  mcclWindow_t w = NULL;
  EXPECT_RES(mcclCommWindowRegister(c, NULL, 4096, &w, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCommWindowRegister(c, buf, 0, &w, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCommWindowRegister(c, buf, 4096, NULL, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCommWindowRegister(c, buf, 4096, &w, 0x6), mcclInvalidArgument);
  EXPECT_RES(mcclCommWindowRegister(c, buf + 1, 64, &w, 0), mcclInvalidArgument);  // not an allocation's start
  EXPECT_TRUE(w == NULL);
  EXPECT_RES(mcclCommWindowDeregister(c, NULL), mcclInvalidArgument);
  EXPECT_OK(mcclCommWindowRegister(c, buf, 4096, &w, MCCL_WIN_COLL_SYMMETRIC));
  EXPECT_TRUE(w != NULL);
  int32_t v = 41;
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaStreamCreate(&s));
  EXPECT_CUDA_OK(mcclTestCopyToDevice(buf, &v, sizeof(v)));
  EXPECT_OK(mcclAllReduce(buf, buf + 1, 1, mcclInt32, mcclSum, c, s));
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  v = 0;
  EXPECT_CUDA_OK(cudaMemcpy(&v, buf + 1, sizeof(v), cudaMemcpyDeviceToHost));
  EXPECT_EQ(v, 41);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_OK(mcclCommWindowDeregister(c, w));
  EXPECT_RES(mcclCommWindowDeregister(c, w), mcclInvalidArgument);  // not a window of c any more

  EXPECT_OK(mcclCommDestroy(c));
  // Double destroy and use after destroy: refused (NCCL leaves them undefined).
  EXPECT_RES(mcclCommDestroy(c), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "destroyed twice") != NULL);
  EXPECT_RES(mcclCommCount(c, &n), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(buf, buf, 1, mcclInt32, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommAbort(c), mcclInvalidArgument);
  EXPECT_OK(mcclMemFree(buf));
  EXPECT_CUDA_OK(cudaSetDevice(0));
}

struct rankBufs {
  void *send, *recv, *host;
  mcclWindow_t sendWin, recvWin;
  cudaStream_t stream;
};

static void setUpBufs(mcclComm_t* comms, struct rankBufs* b, int n, size_t bytes) {
  for (int r = 0; r < n; r++) {
    int d = -1;
    EXPECT_OK(mcclCommCuDevice(comms[r], &d));
    EXPECT_CUDA_OK(cudaSetDevice(d));
    EXPECT_OK(mcclMemAlloc(&b[r].send, bytes));
    EXPECT_OK(mcclMemAlloc(&b[r].recv, bytes));
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&b[r].stream, cudaStreamNonBlocking));
    b[r].host = malloc(bytes);
  }
  // Collective: one thread registers every rank's windows inside a group.
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < n; r++) EXPECT_OK(mcclCommWindowRegister(comms[r], b[r].send, bytes, &b[r].sendWin, 0));
  for (int r = 0; r < n; r++)
    EXPECT_OK(mcclCommWindowRegister(comms[r], b[r].recv, bytes, &b[r].recvWin, MCCL_WIN_COLL_SYMMETRIC));
  EXPECT_OK(mcclGroupEnd());
  for (int r = 0; r < n; r++) EXPECT_TRUE(b[r].sendWin != NULL && b[r].recvWin != NULL);
  EXPECT_CUDA_OK(cudaSetDevice(0));
}

static void tearDown(mcclComm_t* comms, struct rankBufs* b, int n) {
  for (int r = 0; r < n; r++) {
    if (b[r].sendWin) EXPECT_OK(mcclCommWindowDeregister(comms[r], b[r].sendWin));
    if (b[r].recvWin) EXPECT_OK(mcclCommWindowDeregister(comms[r], b[r].recvWin));
    if (b[r].stream) EXPECT_CUDA_OK(cudaStreamDestroy(b[r].stream));
    if (b[r].send) EXPECT_OK(mcclMemFree(b[r].send));
    if (b[r].recv) EXPECT_OK(mcclMemFree(b[r].recv));
    free(b[r].host);
    EXPECT_OK(mcclCommDestroy(comms[r]));
  }
  memset(b, 0, sizeof(*b) * (size_t)n);
}

// One allreduce on every rank (one group), checked on every rank against the CPU reference. op may be
// AR_PREMULSUM, with rank r passing rankOps[r] (then destroyed before the results are waited for: calls
// already made keep their operation).
static void runCheckedOps(mcclComm_t* comms, struct rankBufs* b, int n, const struct arPath* path, mcclDataType_t t,
                          mcclRedOp_t op, const mcclRedOp_t* rankOps, size_t count, int inPlace, uint64_t seed) {
  if (!arPathRuns(path, n)) return;  // one-shot with SIMPLE: 2 ranks only
  size_t bytes = count * mcclTypeSize(t);
  char why[160];
  arForce(path->algo, path->proto);
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    memset(b[r].host, 0xa5, bytes);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].recv, b[r].host, bytes));
    arFill(b[r].host, t, op, count, r, seed);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(inPlace ? b[r].recv : b[r].send, b[r].host, bytes));
  }
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < n; r++)
    EXPECT_OK(mcclAllReduce(inPlace ? b[r].recv : b[r].send, b[r].recv, count, t, rankOps ? rankOps[r] : op, comms[r],
                            b[r].stream));
  EXPECT_OK(mcclGroupEnd());
  for (int r = 0; r < n && rankOps; r++) EXPECT_OK(mcclRedOpDestroy(rankOps[r], comms[r]));
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    EXPECT_CUDA_OK(cudaMemcpy(b[r].host, b[r].recv, bytes, cudaMemcpyDeviceToHost));
    if (arCheck(b[r].host, t, op, count, n, seed, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "%s %s %s count %zu %s: rank %d: %s", path->name, mcclTypeName(t),
                     arOpName(op), count, inPlace ? "in place" : "out of place", r, why);
  }
}

static void runChecked(mcclComm_t* comms, struct rankBufs* b, int n, const struct arPath* path, mcclDataType_t t,
                       mcclRedOp_t op, size_t count, int inPlace, uint64_t seed) {
  runCheckedOps(comms, b, n, path, t, op, NULL, count, inPlace, seed);
}

// mcclCommInitAll over 4 devices; every dtype x op on the algorithms paths[0 .. npaths-1] of
// ar_test_util.h (ring SIMPLE and LL, one-shot, two-shot), in and out of place; nothing leaked.
static void initAllEveryTypeOp(int firstPath, int npaths) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  warmUp();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  long maps0 = mcclTestCountMaps("minccl-sim");
  mcclComm_t comms[NDEV];
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  const size_t count = 1021;
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  for (int r = 0; r < NDEV; r++) {
    int x = -1;
    EXPECT_OK(mcclCommUserRank(comms[r], &x));
    EXPECT_EQ(x, r);
    EXPECT_OK(mcclCommCuDevice(comms[r], &x));
    EXPECT_EQ(x, r);
    EXPECT_OK(mcclCommCount(comms[r], &x));
    EXPECT_EQ(x, NDEV);
  }
  setUpBufs(comms, b, NDEV, count * 8);
  uint64_t seed = mcclTestSeed();
  int k = 0;
  for (int p = firstPath; p < firstPath + npaths && !mcclTestStopped(); p++)
    for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
      for (int op = 0; op < mcclNumOps && !mcclTestStopped(); op++, k++)
        if (mcclTestSampled((uint64_t)k, 4))
          runChecked(comms, b, NDEV, &arPaths[p], (mcclDataType_t)t, (mcclRedOp_t)op, count, k & 1, seed + (uint64_t)k);
  arForce(NULL, NULL);
  for (int r = 0; r < NDEV; r++) {
    mcclResult_t ae = mcclInternalError;
    EXPECT_OK(mcclCommGetAsyncError(comms[r], &ae));
    EXPECT_EQ(ae, mcclSuccess);
  }
  tearDown(comms, b, NDEV);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
}

static void initAllEveryTypeOpRingOneShot(void) {
  initAllEveryTypeOp(0, 3);
}

static void initAllEveryTypeOpTwoShot(void) {
  initAllEveryTypeOp(3, 1);
}

// One thread creates 4 communicators with mcclCommInitRank inside a group (cudaSetDevice before
// each), as NCCL's single-process multi-GPU example; the handles exist at once and report
// mcclInProgress until mcclGroupEnd. Then the table's own choice of algorithm at a few sizes.
static void groupedInitRank(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  mcclComm_t comms[NDEV];
  memset(comms, 0, sizeof(comms));
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++) {
    EXPECT_CUDA_OK(cudaSetDevice(r));
    EXPECT_OK(mcclCommInitRank(&comms[r], NDEV, id, r));
  }
  mcclResult_t ae = mcclSuccess;
  EXPECT_OK(mcclCommGetAsyncError(comms[0], &ae));
  EXPECT_EQ(ae, mcclInProgress);
  EXPECT_OK(mcclGroupEnd());
  EXPECT_CUDA_OK(cudaSetDevice(0));
  for (int r = 0; r < NDEV; r++) {
    int x = -1;
    EXPECT_OK(mcclCommCuDevice(comms[r], &x));
    EXPECT_EQ(x, r);
    EXPECT_OK(mcclCommGetAsyncError(comms[r], &ae));
    EXPECT_EQ(ae, mcclSuccess);
  }
  // A group ended by a refused mcclGroupSimulateEnd ends as a failed group: its creations still run.
  mcclComm_t more[NDEV];
  memset(more, 0, sizeof(more));
  EXPECT_OK(mcclGetUniqueId(&id));
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++) {
    EXPECT_CUDA_OK(cudaSetDevice(r));
    EXPECT_OK(mcclCommInitRank(&more[r], NDEV, id, r));
  }
  mcclSimInfo_t bad = MCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  EXPECT_RES(mcclGroupSimulateEnd(&bad), mcclInvalidArgument);
  for (int r = 0; r < NDEV; r++) {
    EXPECT_OK(mcclCommGetAsyncError(more[r], &ae));
    EXPECT_EQ(ae, mcclSuccess);
    EXPECT_OK(mcclCommDestroy(more[r]));
  }
  EXPECT_CUDA_OK(cudaSetDevice(0));
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  // One-shot, two-shot, then the ring (the table's choices at 4 ranks on these sizes).
  static const size_t counts[] = {1, 8000, 100000, 600000};
  setUpBufs(comms, b, NDEV, counts[3] * 4);
  static const struct arPath table = {"table", NULL, NULL, 0};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]) && !mcclTestStopped(); i++)
    runChecked(comms, b, NDEV, &table, mcclFloat32, mcclSum, counts[i], (int)i & 1, mcclTestSeed() + i);
  tearDown(comms, b, NDEV);
}

// One collective on every rank (one group, one thread), checked on every rank. With rankOps (c->op is
// AR_PREMULSUM), rank r passes rankOps[r], destroyed before the results are waited for.
static void collCheckedOps(mcclComm_t* comms, struct rankBufs* b, int n, const struct enqCall* c,
                           const mcclRedOp_t* rankOps) {
  void *in[NDEV], *out[NDEV];
  char what[128], why[200];
  enqDescribe(c, what, sizeof(what));
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    int line = enqPrepare(c, r, n, b[r].send, b[r].recv, b[r].host, &in[r], &out[r]);
    if (line) mcclTestFailAt(__FILE__, line, "%s: setting rank %d's buffers up", what, r);
  }
  CHECK_STOPPED();
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < n; r++)
    EXPECT_OK(fcollIssueOp(c, rankOps ? rankOps[r] : c->op, in[r], out[r], comms[r], b[r].stream));
  EXPECT_OK(mcclGroupEnd());
  for (int r = 0; r < n && rankOps; r++) EXPECT_OK(mcclRedOpDestroy(rankOps[r], comms[r]));
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    if (enqVerify(c, r, n, out[r], why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "%s%s: rank %d: %s", what, rankOps ? " (premulsum)" : "", r, why);
  }
}

static void collChecked(mcclComm_t* comms, struct rankBufs* b, int n, const struct enqCall* c) {
  collCheckedOps(comms, b, n, c, NULL);
}

// 4 devices, one thread: AllGather, ReduceScatter, Broadcast, Reduce in groups; every dtype x op of
// the reducing ones, every dtype of the others, every root of the rooted ones, in and out of place.
static void initAllCollectives(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  mcclComm_t comms[NDEV];
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  setUpBufs(comms, b, NDEV, 37 * 8 * NDEV);
  int k = 0;
  for (int f = mcclFuncBroadcast; f <= mcclFuncReduceScatter && !mcclTestStopped(); f++) {
    const int reducing = enqReduces(f);
    for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
      for (int op = 0; op < (reducing ? mcclNumOps : 2) && !mcclTestStopped(); op++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        struct enqCall c = {f,
                            (mcclDataType_t)t,
                            (mcclRedOp_t)op,
                            0,
                            37,
                            k % NDEV,
                            reducing ? (k >> 1) & 1 : op,
                            mcclTestSeed() + (uint64_t)k};
        collChecked(comms, b, NDEV, &c);
      }
    if (f == mcclFuncBroadcast || f == mcclFuncReduce)
      for (int root = 0; root < NDEV && !mcclTestStopped(); root++)
        for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++, k++) {
          struct enqCall c = {f, mcclFloat32, mcclMax, 0, 37, root, inPlace, mcclTestSeed() + (uint64_t)k};
          collChecked(comms, b, NDEV, &c);
        }
  }
  tearDown(comms, b, NDEV);
}

// 4 devices, one thread: nccl-tests' sendrecv (each rank sends to rank+1 and receives from rank-1,
// all in one group) on counts 0, 1, odd and 64 KiB; to self; all-to-all in one group; bad peers.
static void initAllSendRecv(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  static const size_t counts[] = {0, 1, 4097, 65536};
  mcclComm_t comms[NDEV];
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  setUpBufs(comms, b, NDEV, 65536);
  char why[160];
  for (int i = 0; i < 4 && !mcclTestStopped(); i++) {
    const size_t bytes = counts[i];
    const uint64_t seed = mcclTestSeed() + (uint64_t)i;
    for (int r = 0; r < NDEV; r++) {
      fcollFillBytes(b[r].host, bytes, seed, r);
      if (bytes) EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].send, b[r].host, bytes));
      EXPECT_CUDA_OK(mcclTestMemset(b[r].recv, ENQ_POISON, 65536));
    }
    EXPECT_OK(mcclGroupStart());
    for (int r = 0; r < NDEV; r++) {
      EXPECT_OK(mcclSend(b[r].send, bytes, mcclInt8, (r + 1) % NDEV, comms[r], b[r].stream));
      EXPECT_OK(mcclRecv(b[r].recv, bytes, mcclInt8, (r + NDEV - 1) % NDEV, comms[r], b[r].stream));
    }
    EXPECT_OK(mcclGroupEnd());
    for (int r = 0; r < NDEV && !mcclTestStopped(); r++) {
      EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
      EXPECT_CUDA_OK(cudaMemcpy(b[r].host, b[r].recv, 65536, cudaMemcpyDeviceToHost));
      if (fcollCheckBytes(b[r].host, bytes, seed, (r + NDEV - 1) % NDEV, why, sizeof(why)))
        mcclTestFailAt(__FILE__, __LINE__, "sendrecv %zu bytes: rank %d: %s", bytes, r, why);
      if (bytes < 65536 && ((unsigned char*)b[r].host)[bytes] != ENQ_POISON)
        mcclTestFailAt(__FILE__, __LINE__, "sendrecv %zu bytes: rank %d wrote beyond the count", bytes, r);
    }
  }
  // Every rank to itself, in a group: a device copy.
  for (int r = 0; r < NDEV; r++) {
    fcollFillBytes(b[r].host, 4000, 5, r);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].send, b[r].host, 4000));
  }
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++) {
    EXPECT_OK(mcclRecv(b[r].recv, 500, mcclFloat64, r, comms[r], b[r].stream));
    EXPECT_OK(mcclSend(b[r].send, 500, mcclFloat64, r, comms[r], b[r].stream));
  }
  EXPECT_OK(mcclGroupEnd());
  for (int r = 0; r < NDEV && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    EXPECT_CUDA_OK(cudaMemcpy(b[r].host, b[r].recv, 4000, cudaMemcpyDeviceToHost));
    if (fcollCheckBytes(b[r].host, 4000, 5, r, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "send/recv to self: rank %d: %s", r, why);
  }
  // All-to-all, every rank to every rank (itself included) in one group of the 4 communicators:
  // the connections beyond the neighbours are made at mcclGroupEnd, one thread per communicator.
  const size_t blk = 4099;
  for (int r = 0; r < NDEV; r++) {
    for (int p = 0; p < NDEV; p++) fcollFillBytes((char*)b[r].host + (size_t)p * blk, blk, 11 * 64 + (uint64_t)p, r);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].send, b[r].host, NDEV * blk));
    EXPECT_CUDA_OK(mcclTestMemset(b[r].recv, ENQ_POISON, 65536));
  }
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++)
    for (int k = 0; k < NDEV; k++) {
      const int p = (r + NDEV - k) % NDEV;  // each rank in its own peer order
      EXPECT_OK(mcclSend((char*)b[r].send + (size_t)p * blk, blk, mcclInt8, p, comms[r], b[r].stream));
      EXPECT_OK(mcclRecv((char*)b[r].recv + (size_t)p * blk, blk, mcclInt8, p, comms[r], b[r].stream));
    }
  EXPECT_OK(mcclGroupEnd());
  for (int r = 0; r < NDEV && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    EXPECT_CUDA_OK(cudaMemcpy(b[r].host, b[r].recv, 65536, cudaMemcpyDeviceToHost));
    for (int p = 0; p < NDEV; p++)
      if (fcollCheckBytes((char*)b[r].host + (size_t)p * blk, blk, 11 * 64 + (uint64_t)r, p, why, sizeof(why)))
        mcclTestFailAt(__FILE__, __LINE__, "all-to-all: rank %d, block from %d: %s", r, p, why);
    if (((unsigned char*)b[r].host)[NDEV * blk] != ENQ_POISON)
      mcclTestFailAt(__FILE__, __LINE__, "all-to-all: rank %d wrote beyond its blocks", r);
  }
  // A peer out of range is refused, naming it; a grouped send to self without its receive makes
  // mcclGroupEnd fail, as in NCCL.
  EXPECT_RES(mcclSend(b[0].send, 4, mcclInt8, NDEV, comms[0], b[0].stream), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "peer") != NULL);
  EXPECT_OK(mcclGroupStart());
  EXPECT_OK(mcclSend(b[0].send, 4, mcclInt8, 0, comms[0], b[0].stream));
  EXPECT_RES(mcclGroupEnd(), mcclInvalidUsage);
  tearDown(comms, b, NDEV);
}

// One AlltoAll, Gather or Scatter on every rank (one group, one thread), checked on every rank: both
// buffers whole (fcoll_test_util.h's images).
static void fa2aChecked(mcclComm_t* comms, struct rankBufs* b, int n, const struct fa2aCall* c) {
  void *in[NDEV], *out[NDEV];
  char what[128], why[200];
  fa2aDescribe(c, what, sizeof(what));
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    int line = fa2aPrepare(c, r, n, b[r].send, b[r].recv, b[r].host);
    if (line) mcclTestFailAt(__FILE__, line, "%s: setting rank %d's buffers up", what, r);
    fa2aPlace(c, r, b[r].send, b[r].recv, &in[r], &out[r]);
  }
  CHECK_STOPPED();
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < n; r++) EXPECT_OK(fa2aIssue(c, in[r], out[r], comms[r], b[r].stream));
  EXPECT_OK(mcclGroupEnd());
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    if (fa2aVerify(c, r, n, b[r].send, b[r].recv, b[r].host, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d: %s", what, r, why);
  }
}

// 4 devices, one thread: AlltoAll, Gather and Scatter on every dtype, counts 1, 7, 1023 and 4099 (blocks
// whose bytes are not a multiple of 16), roots 0 and last, the in-place forms of Gather and Scatter.
static void initAllAlltoAllGatherScatter(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  static const size_t counts[] = {1, 7, 1023, 4099};
  mcclComm_t comms[NDEV];
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  const size_t span = NDEV * 4099 * 8 + FA2A_SLACK;
  setUpBufs(comms, b, NDEV, 4 * span);  // the host scratch holds 4 images
  int k = 0;
  for (int f = 0; f < fa2aNumFuncs && !mcclTestStopped(); f++)
    for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
      for (int i = 0; i < 2 && !mcclTestStopped(); i++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        struct fa2aCall c = {f,
                             (mcclDataType_t)t,
                             counts[(t + f + 2 * i) % 4],
                             (t + i) % 2 ? NDEV - 1 : 0,
                             f != fa2aAlltoAll && (t / 2 + i) % 2,
                             mcclTestSeed() + (uint64_t)k};
        fa2aChecked(comms, b, NDEV, &c);
      }
  // A count of 0 moves nothing (NULL buffers are fine then, as in NCCL).
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++) {
    EXPECT_OK(mcclAlltoAll(NULL, NULL, 0, mcclFloat32, comms[r], b[r].stream));
    EXPECT_OK(mcclGather(NULL, NULL, 0, mcclFloat32, 0, comms[r], b[r].stream));
    EXPECT_OK(mcclScatter(NULL, NULL, 0, mcclFloat32, NDEV - 1, comms[r], b[r].stream));
  }
  EXPECT_OK(mcclGroupEnd());
  tearDown(comms, b, NDEV);
}

// Bad input of AlltoAll, Gather and Scatter is refused on the calling rank, naming the argument, and
// nothing is launched (a lone rank of a 4-rank communicator would wait for the others otherwise).
static void alltoAllGatherScatterBadInput(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  mcclComm_t comms[NDEV];
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  char* buf = NULL;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMalloc((void**)&buf, 4096));
  mcclComm_t c = comms[0];
  // Roots out of range.
  static const int badRoots[] = {-1, NDEV, 1 << 30};
  for (int i = 0; i < 3; i++) {
    EXPECT_RES(mcclGather(buf, buf + 1024, 4, mcclInt8, badRoots[i], c, NULL), mcclInvalidArgument);
    EXPECT_TRUE(strstr(mcclGetLastError(NULL), "root") != NULL);
    EXPECT_RES(mcclScatter(buf, buf + 1024, 4, mcclInt8, badRoots[i], c, NULL), mcclInvalidArgument);
    EXPECT_TRUE(strstr(mcclGetLastError(NULL), "root") != NULL);
  }
  // AlltoAll: a partial overlap is refused (equal buffers are taken, as NCCL takes them).
  EXPECT_RES(mcclAlltoAll(buf, buf + 4 * 4 * NDEV - 1, 4, mcclInt32, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "overlap") != NULL);
  EXPECT_RES(mcclAlltoAll(buf + 4, buf, 4, mcclInt32, c, NULL), mcclInvalidArgument);
  // The root's buffers may overlap only in the in-place form (rank 0 is the root here).
  EXPECT_RES(mcclGather(buf + 1, buf, 4, mcclInt32, 0, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "overlap") != NULL);
  EXPECT_RES(mcclGather(buf + 16, buf, 4, mcclInt32, 0, c, NULL), mcclInvalidArgument);  // block 1, not 0
  EXPECT_RES(mcclScatter(buf, buf + 1, 4, mcclInt32, 0, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "overlap") != NULL);
  // count x type size (x ranks for the root's and AlltoAll's buffers) past 2^63 bytes, or past SIZE_MAX.
  EXPECT_RES(mcclAlltoAll(buf, buf + 2048, (size_t)1 << 63, mcclInt8, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  EXPECT_RES(mcclAlltoAll(buf, buf + 2048, SIZE_MAX / 8 + 1, mcclFloat64, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  EXPECT_RES(mcclAlltoAll(buf, buf + 2048, SIZE_MAX / NDEV + 1, mcclInt8, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclGather(buf, buf + 2048, (size_t)1 << 63, mcclInt8, 0, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  EXPECT_RES(mcclGather(buf, buf + 2048, SIZE_MAX / 2 + 1, mcclFloat16, 0, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclScatter(buf, buf + 2048, (size_t)1 << 62, mcclInt8, 0, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "count") != NULL);
  EXPECT_RES(mcclScatter(buf, buf + 2048, SIZE_MAX / 4 + 1, mcclFloat32, 0, c, NULL), mcclInvalidArgument);
  // NULL buffers where the rank reads or writes, a type out of range.
  EXPECT_RES(mcclAlltoAll(NULL, buf, 4, mcclInt8, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "sendbuff") != NULL);
  EXPECT_RES(mcclAlltoAll(buf, NULL, 4, mcclInt8, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "recvbuff") != NULL);
  EXPECT_RES(mcclGather(buf, NULL, 4, mcclInt8, 0, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "recvbuff") != NULL);
  EXPECT_RES(mcclScatter(NULL, buf, 4, mcclInt8, 0, c, NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "sendbuff") != NULL);
  EXPECT_RES(mcclAlltoAll(buf, buf + 2048, 4, (mcclDataType_t)mcclNumTypes, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclGather(buf, buf + 2048, 4, (mcclDataType_t)-1, 0, c, NULL), mcclInvalidArgument);
  EXPECT_CUDA_OK(cudaFree(buf));
  for (int r = 0; r < NDEV; r++) EXPECT_OK(mcclCommDestroy(comms[r]));
}

// PreMulSum operations, one per rank with its own scalar (host or device memory), on every dtype:
// AllReduce (the ring's protocols, and the table's choice at a one-shot size), ReduceScatter and Reduce,
// in and out of place. Each rank's operation is destroyed as soon as its call is made. The symmetric
// algorithms cannot apply another rank's scalar: forcing them is refused at the group's end.
static void initAllPreMulSum(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  mcclComm_t comms[NDEV];
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  const size_t count = 257;
  setUpBufs(comms, b, NDEV, count * 8 * NDEV);
  int k = 0;
  for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
    for (int onDevice = 0; onDevice < 2 && !mcclTestStopped(); onDevice++)
      for (int f = 0; f < 3 && !mcclTestStopped(); f++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        mcclRedOp_t ops[NDEV];
        void* dev[NDEV];
        memset(dev, 0, sizeof(dev));
        for (int r = 0; r < NDEV; r++) {
          EXPECT_CUDA_OK(cudaSetDevice(r));
          EXPECT_OK(fcollPreMulSumCreate(comms[r], r, (mcclDataType_t)t, onDevice, &ops[r], &dev[r]));
          EXPECT_TRUE(ops[r] >= mcclNumOps);
          for (int q = 0; q < r; q++) EXPECT_NE(ops[q], ops[r]);  // each communicator's own
        }
        EXPECT_CUDA_OK(cudaSetDevice(0));
        const uint64_t seed = mcclTestSeed() + (uint64_t)k;
        if (f == 0) {
          static const struct arPath table = {"table", NULL, NULL, 0};
          const struct arPath* path = (t + onDevice) % 3 == 2 ? &table : &arPaths[(t + onDevice) % 3];
          runCheckedOps(comms, b, NDEV, path, (mcclDataType_t)t, AR_PREMULSUM, ops, count, k & 1, seed);
        } else {
          struct enqCall c = {f == 1 ? mcclFuncReduceScatter : mcclFuncReduce,
                              (mcclDataType_t)t,
                              AR_PREMULSUM,
                              onDevice,
                              count,
                              k % NDEV,
                              (k >> 1) & 1,
                              seed};
          collCheckedOps(comms, b, NDEV, &c, ops);
        }
        for (int r = 0; r < NDEV; r++)
          if (dev[r]) EXPECT_CUDA_OK(cudaFree(dev[r]));
      }
  for (int a = 3; a < 4 && !mcclTestStopped(); a++) {  // two-shot forced (one-shot scales each rank's own input)
    mcclRedOp_t ops[NDEV];
    void* dev[NDEV];
    arForce(arPaths[a].algo, arPaths[a].proto);
    for (int r = 0; r < NDEV; r++) {
      memset(b[r].host, ENQ_POISON, count * 4);
      EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].recv, b[r].host, count * 4));
      EXPECT_CUDA_OK(cudaSetDevice(r));
      EXPECT_OK(fcollPreMulSumCreate(comms[r], r, mcclFloat32, 0, &ops[r], &dev[r]));
    }
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_OK(mcclGroupStart());
    for (int r = 0; r < NDEV; r++)
      EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, count, mcclFloat32, ops[r], comms[r], b[r].stream));
    EXPECT_RES(mcclGroupEnd(), mcclInvalidArgument);
    EXPECT_TRUE(strstr(mcclGetLastError(NULL), "PreMulSum") != NULL);
    for (int r = 0; r < NDEV && !mcclTestStopped(); r++) {
      EXPECT_OK(mcclRedOpDestroy(ops[r], comms[r]));
      EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
      EXPECT_CUDA_OK(cudaMemcpy(b[r].host, b[r].recv, count * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count * 4; i++)
        if (((unsigned char*)b[r].host)[i] != ENQ_POISON) {
          mcclTestFailAt(__FILE__, __LINE__, "%s forced with PreMulSum: rank %d wrote byte %zu", arPaths[a].name, r, i);
          break;
        }
    }
  }
  arForce(NULL, NULL);
  tearDown(comms, b, NDEV);
}

// mcclRedOpCreatePreMulSum's and mcclRedOpDestroy's bad input, and operations used where they do not
// belong: after their destruction, on another communicator, with another type. All refused with
// mcclInvalidArgument naming the argument, before anything runs.
static void preMulSumBadInput(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  mcclComm_t comms[2];
  EXPECT_OK(mcclCommInitAll(comms, 2, NULL));
  float* buf = NULL;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMalloc((void**)&buf, 4096));
  float scalar = 2.0f;
  mcclRedOp_t op = (mcclRedOp_t)-7, op1 = (mcclRedOp_t)-7;
  EXPECT_RES(mcclRedOpCreatePreMulSum(&op, NULL, mcclFloat32, mcclScalarHostImmediate, comms[0]), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "scalar") != NULL);
  EXPECT_RES(mcclRedOpCreatePreMulSum(&op, NULL, mcclFloat32, mcclScalarDevice, comms[0]), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "scalar") != NULL);
  EXPECT_RES(mcclRedOpCreatePreMulSum(NULL, &scalar, mcclFloat32, mcclScalarHostImmediate, comms[0]),
             mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "op") != NULL);
  EXPECT_RES(mcclRedOpCreatePreMulSum(&op, &scalar, (mcclDataType_t)mcclNumTypes, mcclScalarHostImmediate, comms[0]),
             mcclInvalidArgument);
  EXPECT_RES(mcclRedOpCreatePreMulSum(&op, &scalar, mcclFloat32, (mcclScalarResidence_t)2, comms[0]),
             mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "residence") != NULL);
  EXPECT_EQ((int)op, -7);  // written only on success
  EXPECT_OK(mcclRedOpCreatePreMulSum(&op, &scalar, mcclFloat32, mcclScalarHostImmediate, comms[0]));
  EXPECT_OK(mcclRedOpCreatePreMulSum(&op1, &scalar, mcclFloat32, mcclScalarHostImmediate, comms[1]));
  EXPECT_TRUE(op >= mcclNumOps && op1 >= mcclNumOps && op != op1);
  // Another communicator's operation; the right one with another type.
  EXPECT_RES(mcclAllReduce(buf, buf, 4, mcclFloat32, op1, comms[0], NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "op") != NULL);
  EXPECT_RES(mcclReduceScatter(buf, buf + 64, 4, mcclFloat32, op1, comms[0], NULL), mcclInvalidArgument);
  EXPECT_RES(mcclReduce(buf, buf + 64, 4, mcclFloat32, op1, 0, comms[0], NULL), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(buf, buf, 4, mcclFloat16, op, comms[0], NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "op") != NULL);
  EXPECT_RES(mcclRedOpDestroy(op1, comms[0]), mcclInvalidArgument);
  EXPECT_RES(mcclRedOpDestroy(mcclSum, comms[0]), mcclInvalidArgument);
  EXPECT_RES(mcclRedOpDestroy(mcclAvg, comms[0]), mcclInvalidArgument);
  // Destroyed: refused by every reducing call, and by a second destroy.
  EXPECT_OK(mcclRedOpDestroy(op, comms[0]));
  EXPECT_RES(mcclRedOpDestroy(op, comms[0]), mcclInvalidArgument);
  EXPECT_RES(mcclAllReduce(buf, buf, 4, mcclFloat32, op, comms[0], NULL), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "op") != NULL);
  EXPECT_RES(mcclReduceScatter(buf, buf + 64, 4, mcclFloat32, op, comms[0], NULL), mcclInvalidArgument);
  EXPECT_RES(mcclReduce(buf, buf + 64, 4, mcclFloat32, op, 1, comms[0], NULL), mcclInvalidArgument);
  // Inside a group the refusal fails the group: its end launches nothing.
  EXPECT_OK(mcclGroupStart());
  EXPECT_RES(mcclAllReduce(buf, buf, 4, mcclFloat32, op, comms[0], NULL), mcclInvalidArgument);
  EXPECT_RES(mcclGroupEnd(), mcclInvalidArgument);
  EXPECT_OK(mcclCommDestroy(comms[0]));
  // A dead communicator: its operations cannot be destroyed or created any more.
  EXPECT_RES(mcclRedOpDestroy(op1, comms[0]), mcclInvalidArgument);
  EXPECT_RES(mcclRedOpCreatePreMulSum(&op, &scalar, mcclFloat32, mcclScalarHostImmediate, comms[0]),
             mcclInvalidArgument);
  EXPECT_OK(mcclRedOpDestroy(op1, comms[1]));
  EXPECT_OK(mcclCommDestroy(comms[1]));
  EXPECT_CUDA_OK(cudaFree(buf));
}

// Poison the first poisonBytes of every rank's recvbuff, set the inputs up for an allreduce of count float32.
static void poisonAndFill(struct rankBufs* b, int n, size_t count, size_t poisonBytes, uint64_t seed) {
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    memset(b[r].host, ENQ_POISON, poisonBytes);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].recv, b[r].host, poisonBytes));
    arFill(b[r].host, mcclFloat32, mcclSum, count, r, seed);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].send, b[r].host, count * 4));
  }
}
// Every rank's output still poisoned (nothing ran), after waiting for the device.
static void expectUntouched(struct rankBufs* b, int n, size_t bytes, const char* what) {
  unsigned char want[64];
  memset(want, ENQ_POISON, sizeof(want));
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    EXPECT_CUDA_OK(cudaMemcpy(b[r].host, b[r].recv, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i += sizeof(want))
      if (memcmp((char*)b[r].host + i, want, bytes - i < sizeof(want) ? bytes - i : sizeof(want)) != 0) {
        mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d's recvbuff was written near byte %zu", what, r, i);
        return;
      }
  }
}
// Every rank's allreduce sum of count float32 is right.
static void expectSums(struct rankBufs* b, int n, size_t count, uint64_t seed, const char* what) {
  char why[160];
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    EXPECT_CUDA_OK(cudaMemcpy(b[r].host, b[r].recv, count * 4, cudaMemcpyDeviceToHost));
    if (arCheck(b[r].host, mcclFloat32, mcclSum, count, n, seed, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d: %s", what, r, why);
  }
}

// mcclGroupSimulateEnd plans a group's calls and drops them: an estimate above 0, nothing launched
// (the outputs stay poisoned), and the communicators run the same group for real afterwards. Its bad
// input, and outside a group.
static void groupSimulateEnd(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  mcclComm_t comms[NDEV];
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  const size_t count = 5000;
  setUpBufs(comms, b, NDEV, count * 4 * NDEV);
  const uint64_t seed = mcclTestSeed();
  for (int real = 0; real < 2 && !mcclTestStopped(); real++) {
    poisonAndFill(b, NDEV, count, count * 4 * NDEV, seed);
    mcclSimInfo_t sim = MCCL_SIM_INFO_INITIALIZER;
    EXPECT_OK(mcclGroupStart());
    for (int r = 0; r < NDEV; r++)
      EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, count, mcclFloat32, mcclSum, comms[r], b[r].stream));
    for (int r = 0; r < NDEV; r++)  // and point-to-point: the Gather's sends and receives
      EXPECT_OK(mcclGather(b[r].send, (char*)b[r].recv + count * 4, 7, mcclFloat32, NDEV - 1, comms[r], b[r].stream));
    if (real) {
      EXPECT_OK(mcclGroupEnd());
      expectSums(b, NDEV, count, seed, "the group run after its simulation");
    } else {
      EXPECT_OK(mcclGroupSimulateEnd(&sim));
      EXPECT_TRUE(sim.estimatedTime > 0);
      EXPECT_EQ(sim.size, sizeof(mcclSimInfo_t));
      EXPECT_EQ(sim.magic, MCCL_SIM_INFO_MAGIC);
      expectUntouched(b, NDEV, count * 4 * NDEV, "simulated group");
    }
  }
  // A group of one allreduce per rank on a small size is estimated below the same group on a large one.
  float est[2] = {0, 0};
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
    mcclSimInfo_t sim = MCCL_SIM_INFO_INITIALIZER;
    EXPECT_OK(mcclGroupStart());
    for (int r = 0; r < NDEV; r++)
      EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, i ? count * NDEV : 8, mcclFloat32, mcclSum, comms[r], b[r].stream));
    EXPECT_OK(mcclGroupSimulateEnd(&sim));
    est[i] = sim.estimatedTime;
  }
  EXPECT_TRUE(est[0] > 0 && est[0] < est[1]);
  // An empty group: nothing to estimate.
  mcclSimInfo_t empty = MCCL_SIM_INFO_INITIALIZER;
  EXPECT_OK(mcclGroupStart());
  EXPECT_OK(mcclGroupSimulateEnd(&empty));
  EXPECT_TRUE(empty.estimatedTime >= 0 && empty.estimatedTime < est[0]);
  // Bad input: the group still ends, and runs nothing.
  poisonAndFill(b, NDEV, count, count * 4, seed);
  mcclSimInfo_t bad = MCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
    EXPECT_OK(mcclGroupStart());
    for (int r = 0; r < NDEV; r++)
      EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, count, mcclFloat32, mcclSum, comms[r], b[r].stream));
    EXPECT_RES(mcclGroupSimulateEnd(i ? &bad : NULL), mcclInvalidArgument);
    EXPECT_TRUE(strstr(mcclGetLastError(NULL), "simInfo") != NULL);
    EXPECT_RES(mcclGroupEnd(), mcclInvalidUsage);  // the group has ended
  }
  expectUntouched(b, NDEV, count * 4, "group ended by a refused mcclGroupSimulateEnd");
  mcclSimInfo_t sim = MCCL_SIM_INFO_INITIALIZER;
  EXPECT_RES(mcclGroupSimulateEnd(&sim), mcclInvalidUsage);  // no group started
  tearDown(comms, b, NDEV);
}

// Inside a group, a call that fails its checks fails the whole group: mcclGroupEnd returns its error
// and launches nothing, not even the group's valid calls; the next group runs as usual. A collective on
// a communicator whose grouped creation has not run yet is such a call (mcclInvalidUsage).
static void groupFailsOnBadCall(void) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs %d devices", NDEV);
  mcclComm_t comms[NDEV];
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  const size_t count = 3001;
  setUpBufs(comms, b, NDEV, count * 4);
  const uint64_t seed = mcclTestSeed();
  poisonAndFill(b, NDEV, count, count * 4, seed);
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++)
    EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, count, mcclFloat32, mcclSum, comms[r], b[r].stream));
  EXPECT_RES(mcclGather(b[1].send, b[1].recv, 4, mcclFloat32, NDEV, comms[1], b[1].stream), mcclInvalidArgument);
  EXPECT_OK(mcclAllReduce(b[0].send, b[0].recv, 1, mcclFloat32, mcclMax, comms[0], b[0].stream));  // still recorded
  EXPECT_RES(mcclGroupEnd(), mcclInvalidArgument);
  expectUntouched(b, NDEV, count * 4, "failed group");
  // Nested: the failure of an inner group's call fails the outermost.
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++)
    EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, count, mcclFloat32, mcclSum, comms[r], b[r].stream));
  EXPECT_OK(mcclGroupStart());
  EXPECT_RES(mcclAlltoAll(b[2].send, (char*)b[2].send + 1, 4, mcclInt8, comms[2], b[2].stream), mcclInvalidArgument);
  EXPECT_OK(mcclGroupEnd());
  EXPECT_RES(mcclGroupEnd(), mcclInvalidArgument);
  expectUntouched(b, NDEV, count * 4, "failed nested group");
  // The same group without the bad call.
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++)
    EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, count, mcclFloat32, mcclSum, comms[r], b[r].stream));
  EXPECT_OK(mcclGroupEnd());
  expectSums(b, NDEV, count, seed, "the group after a failed one");
  tearDown(comms, b, NDEV);

  // Grouped creation: the communicators exist at once, but a collective before the group's end is
  // refused (mcclInvalidUsage), which fails the group; they are still destroyed cleanly.
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  memset(comms, 0, sizeof(comms));
  int32_t* dev = NULL;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMalloc((void**)&dev, 64));
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < NDEV; r++) {
    EXPECT_CUDA_OK(cudaSetDevice(r));
    EXPECT_OK(mcclCommInitRank(&comms[r], NDEV, id, r));
  }
  EXPECT_RES(mcclAllReduce(dev, dev, 4, mcclInt32, mcclSum, comms[0], NULL), mcclInvalidUsage);
  EXPECT_RES(mcclAllReduce(dev, dev, 1, mcclInt32, (mcclRedOp_t)7, comms[3], NULL), mcclInvalidUsage);
  EXPECT_RES(mcclGather(dev, dev + 4, 1, mcclInt32, 0, comms[1], NULL), mcclInvalidUsage);
  mcclRedOp_t op;
  float scalar = 1.0f;
  EXPECT_RES(mcclRedOpCreatePreMulSum(&op, &scalar, mcclFloat32, mcclScalarHostImmediate, comms[2]), mcclInvalidUsage);
  EXPECT_RES(mcclGroupEnd(), mcclInvalidUsage);
  EXPECT_CUDA_OK(cudaSetDevice(0));
  for (int r = 0; r < NDEV; r++) EXPECT_OK(mcclCommDestroy(comms[r]));
  EXPECT_CUDA_OK(cudaFree(dev));
}

// A communicator destroyed or aborted while this thread's open group holds its calls (collectives, its grouped
// creation, a window registration): that group's end returns mcclInvalidUsage for them and runs the
// rest; nothing crashes. Two independent 1-rank communicators, so the other one's calls can run.
static void destroyWithOpenGroup(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  warmUp();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  mcclComm_t comms[2];
  struct rankBufs b[2];
  memset(b, 0, sizeof(b));
  static const int dev0[1] = {0}, dev1[1] = {1};
  EXPECT_OK(mcclCommInitAll(&comms[0], 1, dev0));
  EXPECT_OK(mcclCommInitAll(&comms[1], 1, dev1));
  const size_t count = 1001, bytes = count * 4 + 64;  // the allreduce's, then a send to self's 16
  for (int r = 0; r < 2; r++) setUpBufs(&comms[r], &b[r], 1, bytes);
  // Collectives and point-to-point calls of both; the first communicator destroyed before the end
  // (its windows with it).
  const uint64_t seed = mcclTestSeed();
  char why[160];
  for (int r = 0; r < 2 && !mcclTestStopped(); r++) {
    memset(b[r].host, ENQ_POISON, bytes);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].recv, b[r].host, bytes));
    arFill(b[r].host, mcclInt32, mcclSum, count, 0, seed);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(b[r].send, b[r].host, count * 4));
  }
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < 2; r++) {
    EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, count, mcclInt32, mcclSum, comms[r], b[r].stream));
    EXPECT_OK(mcclSend(b[r].send, 16, mcclInt8, 0, comms[r], b[r].stream));
    EXPECT_OK(mcclRecv((char*)b[r].recv + count * 4, 16, mcclInt8, 0, comms[r], b[r].stream));
  }
  EXPECT_OK(mcclCommDestroy(comms[0]));
  b[0].sendWin = b[0].recvWin = NULL;
  EXPECT_RES(mcclGroupEnd(), mcclInvalidUsage);
  EXPECT_CUDA_OK(cudaStreamSynchronize(b[1].stream));
  EXPECT_CUDA_OK(cudaMemcpy(b[1].host, b[1].recv, bytes, cudaMemcpyDeviceToHost));
  if (arCheck(b[1].host, mcclInt32, mcclSum, count, 1, seed, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "the other communicator's allreduce: %s", why);
  arFill(b[0].host, mcclInt32, mcclSum, 4, 0, seed);
  EXPECT_MEM_EQ((char*)b[1].host + count * 4, b[0].host, 16);  // its send to self
  EXPECT_EQ(((unsigned char*)b[1].host)[count * 4 + 16], ENQ_POISON);
  CHECK_STOPPED();
  // Its grouped creation with a window registration, destroyed and then aborted; then a window registration and
  // an allreduce of a communicator that exists, likewise.
  mcclWindow_t w = NULL;
  for (int abort = 0; abort < 2; abort++) {
    mcclUniqueId id;
    EXPECT_OK(mcclGetUniqueId(&id));
    mcclComm_t c = NULL;
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_OK(mcclGroupStart());
    EXPECT_OK(mcclCommInitRank(&c, 1, id, 0));
    EXPECT_OK(mcclCommWindowRegister(c, b[0].send, count * 4, &w, MCCL_WIN_COLL_SYMMETRIC));
    EXPECT_OK(abort ? mcclCommAbort(c) : mcclCommDestroy(c));
    EXPECT_RES(mcclGroupEnd(), mcclInvalidUsage);
    EXPECT_TRUE(w == NULL);
    EXPECT_RES(mcclCommDestroy(c), mcclInvalidArgument);  // gone already
  }
  for (int abort = 0; abort < 2; abort++) {
    static const int dev1[1] = {1};
    mcclComm_t c = comms[1];
    if (abort) EXPECT_OK(mcclCommInitAll(&c, 1, dev1));
    EXPECT_OK(mcclGroupStart());
    EXPECT_OK(mcclCommWindowRegister(c, b[1].send, count * 4, &w, 0));
    EXPECT_OK(mcclAllReduce(b[1].send, b[1].recv, count, mcclInt32, mcclSum, c, b[1].stream));
    EXPECT_OK(abort ? mcclCommAbort(c) : mcclCommDestroy(c));
    b[1].sendWin = b[1].recvWin = NULL;
    EXPECT_RES(mcclGroupEnd(), mcclInvalidUsage);
    EXPECT_TRUE(w == NULL);
  }
  for (int r = 0; r < 2; r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    EXPECT_CUDA_OK(cudaStreamDestroy(b[r].stream));
    EXPECT_OK(mcclMemFree(b[r].send));
    EXPECT_OK(mcclMemFree(b[r].recv));
    free(b[r].host);
  }
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
}

// "At once" for an abort that, were it broken, would leave a call waiting out the bootstrap timeout: a
// tenth of that timeout, room for a loaded machine's scheduling delays that keeps the two outcomes apart.
static double abortAtOnceSec(void) {
  return (double)mcclParamBootstrapTimeout() / 1000.0 / 10;
}

// Abort returns promptly while the kernel of rank 0 waits for rank 1, which never launches; the
// other member of the clique then sees mcclRemoteError, and is aborted too.
static void abortWhileWaiting(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  mcclComm_t comms[2];
  EXPECT_OK(mcclCommInitAll(comms, 2, NULL));
  void* buf = NULL;
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_OK(mcclMemAlloc(&buf, 1 << 20));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  arForce("ring", "simple");
  EXPECT_OK(mcclAllReduce(buf, buf, (1 << 20) / 4, mcclFloat32, mcclSum, comms[0], s));
  arForce(NULL, NULL);
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  EXPECT_CUDA(cudaStreamQuery(s), cudaErrorNotReady);  // still waiting for rank 1
  double t0 = mcclClockSec();
  EXPECT_OK(mcclCommAbort(comms[0]));
  double took = mcclClockSec() - t0;
  EXPECT_LT(took, 5.0);
  mcclResult_t ae = mcclSuccess;
  EXPECT_OK(mcclCommGetAsyncError(comms[1], &ae));
  EXPECT_EQ(ae, mcclRemoteError);
  EXPECT_OK(mcclCommAbort(comms[1]));
  EXPECT_CUDA(cudaStreamQuery(s), cudaSuccess);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_OK(mcclMemFree(buf));
}

// The calls this library added beyond the first API (non-blocking init, shrink) refuse bad input with a
// clear error and leave no fd, thread or /dev/shm file behind.
static void newCallsBadInput(void) {
  warmUp();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  mcclComm_t c = NULL;
  EXPECT_RES(mcclCommInitRankAsync(NULL, 1, id, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitRankAsync(&c, 0, id, 0), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "nranks") != NULL);
  EXPECT_RES(mcclCommInitRankAsync(&c, 2, id, 2), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "rank 2") != NULL);
  EXPECT_TRUE(c == NULL);
  // Shrink of a one-rank communicator: a bad list, bad flags, itself excluded, no output.
  EXPECT_OK(mcclCommInitRank(&c, 1, id, 0));
  mcclComm_t out = NULL;
  const int self = 0, outOfRange = 1;
  EXPECT_RES(mcclCommShrink(c, NULL, 0, NULL, MCCL_SHRINK_DEFAULT), mcclInvalidArgument);
  EXPECT_RES(mcclCommShrink(c, NULL, 0, &out, 5), mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "flags") != NULL);
  EXPECT_RES(mcclCommShrink(c, &outOfRange, 1, &out, MCCL_SHRINK_DEFAULT), mcclInvalidArgument);
  EXPECT_RES(mcclCommShrink(c, &self, 1, &out, MCCL_SHRINK_DEFAULT), mcclInvalidArgument);  // none would stay
  EXPECT_RES(mcclCommShrink(c, NULL, 1, &out, MCCL_SHRINK_DEFAULT), mcclInvalidArgument);
  EXPECT_TRUE(out == NULL);
  EXPECT_OK(mcclCommDestroy(c));
  // mcclCommInitAll's communicators have no id to derive the new one from.
  static const int dev0[1] = {0};
  EXPECT_OK(mcclCommInitAll(&c, 1, dev0));
  EXPECT_RES(mcclCommShrink(c, NULL, 0, &out, MCCL_SHRINK_DEFAULT), mcclInvalidUsage);
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "mcclCommInitAll") != NULL);
  EXPECT_TRUE(out == NULL);
  EXPECT_OK(mcclCommDestroy(c));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
}

// ---- a second thread ------------------------------------------------------------------------------
// What the owner thread does while the main thread aborts or destroys its communicator.
enum ownerJob { JOB_WINDOW, JOB_GROUP_SEND, JOB_GROUP_INIT, JOB_GROUP_HELD };

struct owner {
  enum ownerJob job;
  mcclComm_t comm;
  void* buf;
  cudaStream_t stream;
  mcclWindow_t win;
  mcclUniqueId id;  // JOB_GROUP_INIT: the communicator's
  int dev;
  mcclResult_t res;      // what its blocking call returned
  volatile int inside;   // about to enter the blocking call (or: the group holds its work)
  volatile int release;  // JOB_GROUP_HELD: end the group now
};

static void* ownerMain(void* p) {
  struct owner* o = (struct owner*)p;
  cudaSetDevice(o->dev);
  switch (o->job) {
    case JOB_WINDOW:  // collective: rank 1 never registers, so it waits for it
      __atomic_store_n(&o->inside, 1, __ATOMIC_RELEASE);
      o->res = mcclCommWindowRegister(o->comm, o->buf, 4096, &o->win, 0);
      break;
    case JOB_GROUP_SEND:  // the group's end connects to rank 1, which never posts its receive
      mcclGroupStart();
      mcclSend(o->buf, 16, mcclInt8, 1, o->comm, o->stream);
      __atomic_store_n(&o->inside, 1, __ATOMIC_RELEASE);
      o->res = mcclGroupEnd();
      break;
    case JOB_GROUP_INIT:  // rank 0 of 2 created in a group, whose end waits for rank 1, which never comes
      mcclGroupStart();
      mcclCommInitRank(&o->comm, 2, o->id, 0);
      __atomic_store_n(&o->inside, 1, __ATOMIC_RELEASE);
      o->res = mcclGroupEnd();
      break;
    case JOB_GROUP_HELD:  // an allreduce in an open group while the main thread destroys the comm
      mcclGroupStart();
      mcclAllReduce(o->buf, o->buf, 16, mcclFloat32, mcclSum, o->comm, o->stream);
      __atomic_store_n(&o->inside, 1, __ATOMIC_RELEASE);
      while (!__atomic_load_n(&o->release, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
      }
      o->res = mcclGroupEnd();
      break;
  }
  return NULL;
}

// Set the owner up for job on comm (a buffer and a stream of device 0), start it and wait until it is
// (about to be) inside its call, then a little more.
static void ownerStart(struct owner* o, enum ownerJob job, mcclComm_t comm, pthread_t* th) {
  memset(o, 0, sizeof(*o));
  o->job = job;
  o->comm = comm;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_OK(mcclMemAlloc(&o->buf, 4096));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&o->stream, cudaStreamNonBlocking));
  if (job == JOB_GROUP_INIT) EXPECT_OK(mcclGetUniqueId(&o->id));
  EXPECT_EQ(pthread_create(th, NULL, ownerMain, o), 0);
  while (!__atomic_load_n(&o->inside, __ATOMIC_ACQUIRE)) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  struct timespec settle = {0, 100 * 1000 * 1000};
  nanosleep(&settle, NULL);
}

// The owner's stream (its work ended by the abort or never launched) and buffer go.
static void ownerEnd(struct owner* o) {
  EXPECT_CUDA_OK(cudaStreamSynchronize(o->stream));
  EXPECT_CUDA_OK(cudaStreamDestroy(o->stream));
  EXPECT_OK(mcclMemFree(o->buf));
}

// mcclCommAbort from the main thread while the owner thread is blocked inside a window registration,
// inside a group's connection setup, then inside a group's end that creates a communicator whose other rank
// never comes: the blocked call returns an error, abort returns promptly, and nothing freed is touched (the
// ASan and TSan builds run this too).
static void abortFromAnotherThread(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  warmUp();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  static const char* const what[] = {"window registration", "group end's connection", "group end's creation"};
  for (int job = JOB_WINDOW; job <= JOB_GROUP_INIT && !mcclTestStopped(); job++) {
    mcclComm_t comms[2] = {NULL, NULL};
    if (job != JOB_GROUP_INIT) EXPECT_OK(mcclCommInitAll(comms, 2, NULL));
    struct owner o;
    pthread_t th;
    ownerStart(&o, (enum ownerJob)job, comms[0], &th);
    const double t0 = mcclClockSec();
    EXPECT_OK(mcclCommAbort(o.comm));
    const double took = mcclClockSec() - t0;
    printf("# %s: mcclCommAbort from another thread took %.1f ms\n", what[job], took * 1e3);
    EXPECT_TRUE(took < abortAtOnceSec());
    EXPECT_EQ(pthread_join(th, NULL), 0);
    EXPECT_TRUE(o.res != mcclSuccess);
    if (job == JOB_WINDOW) EXPECT_TRUE(o.win == NULL);
    if (comms[1]) EXPECT_OK(mcclCommAbort(comms[1]));
    ownerEnd(&o);
  }
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
}

// A communicator destroyed (then: aborted) from the main thread while another thread's open group
// holds its allreduce: destroy removes the work, and that group's end reports mcclInvalidUsage.
static void destroyHeldByAnotherThread(void) {
  warmUp();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  for (int abort = 0; abort < 2 && !mcclTestStopped(); abort++) {
    static const int dev0[1] = {0};
    mcclComm_t c;
    EXPECT_OK(mcclCommInitAll(&c, 1, dev0));
    struct owner o;
    pthread_t th;
    ownerStart(&o, JOB_GROUP_HELD, c, &th);
    EXPECT_OK(abort ? mcclCommAbort(c) : mcclCommDestroy(c));
    __atomic_store_n(&o.release, 1, __ATOMIC_RELEASE);
    EXPECT_EQ(pthread_join(th, NULL), 0);
    EXPECT_RES(o.res, mcclInvalidUsage);
    EXPECT_TRUE(strstr(mcclGetLastError(NULL), "destroyed or aborted while this group held its calls") != NULL);
    ownerEnd(&o);
  }
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
}

// mcclCommInitRankAsync of rank 0 of 2, whose rank 1 never comes: in progress, other calls refused at
// once, and mcclCommAbort ends it well inside the bootstrap timeout.
static void asyncInitAborted(void) {
  warmUp();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  mcclComm_t c = NULL;
  EXPECT_OK(mcclCommInitRankAsync(&c, 2, id, 0));
  mcclResult_t ae = mcclSuccess;
  EXPECT_OK(mcclCommGetAsyncError(c, &ae));
  EXPECT_EQ(ae, mcclInProgress);
  void* buf = NULL;
  EXPECT_OK(mcclMemAlloc(&buf, 64));
  EXPECT_RES(mcclAllReduce(buf, buf, 4, mcclFloat32, mcclSum, c, NULL), mcclInvalidUsage);
  struct timespec settle = {0, 50 * 1000 * 1000};
  nanosleep(&settle, NULL);
  const double t0 = mcclClockSec();
  EXPECT_OK(mcclCommAbort(c));
  const double took = mcclClockSec() - t0;
  printf("# mcclCommAbort of a non-blocking init in progress took %.1f ms\n", took * 1e3);
  EXPECT_TRUE(took < abortAtOnceSec());
  EXPECT_OK(mcclMemFree(buf));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
}

// Teardown waits for the communicator's own kernels and for nothing else: a host function blocks another
// stream of the same device (an application's unrelated work) while window deregistration, finalize and destroy run;
// they return at once, and the allreduce launched just before each has ended by then. The host function is
// released afterwards (or after BLOCK_LIMIT_S, so a teardown that waits for the device shows as a slow one,
// not a hang). Destroy runs before the release too: the abort flag, status word and launch ring are cuMem
// host memory (lab 06's mcclDevHostCalloc), freed without waiting for the device (cudaFreeHost would).
#define BLOCK_LIMIT_S 10.0
static int unrelatedReleased;  // atomic
static void CUDART_CB blockUntilReleased(void* arg) {
  (void)arg;
  const double t0 = mcclClockSec();
  while (!__atomic_load_n(&unrelatedReleased, __ATOMIC_ACQUIRE) && mcclClockSec() - t0 < BLOCK_LIMIT_S) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

#define TD_NDEV 2  // two devices: the case runs on a 2-GPU host too
// A copy on a stream of its own, waited for: the legacy stream's copies may wait behind the blocked host
// function on a GPU.
static cudaError_t copyOwnStream(int dev, void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  cudaStream_t s;
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return e;
  e = cudaMemcpyAsync(dst, src, bytes, kind, s);
  const cudaError_t w = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return e != cudaSuccess ? e : w;
}

static void teardownWaitsOnlyForItsKernels(void) {
  if (mcclTestDeviceCount() < TD_NDEV) SKIP("needs %d devices", TD_NDEV);
  mcclComm_t comms[TD_NDEV];
  struct rankBufs b[TD_NDEV];
  memset(b, 0, sizeof(b));
  EXPECT_OK(mcclCommInitAll(comms, TD_NDEV, NULL));
  const size_t count = 1 << 14;
  setUpBufs(comms, b, TD_NDEV, count * sizeof(float));
  CHECK_STOPPED();
  // Pinned: a copy from pageable memory is staged by the driver, which may wait behind the host function.
  // Allocated before that blocks: an allocation of pinned memory may wait for the device.
  float* host = NULL;
  EXPECT_CUDA_OK(cudaMallocHost((void**)&host, count * sizeof(float)));
  cudaStream_t unrelated[TD_NDEV];
  __atomic_store_n(&unrelatedReleased, 0, __ATOMIC_RELEASE);
  for (int r = 0; r < TD_NDEV; r++) {
    EXPECT_CUDA_OK(cudaSetDevice(r));
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&unrelated[r], cudaStreamNonBlocking));
    EXPECT_CUDA_OK(cudaLaunchHostFunc(unrelated[r], blockUntilReleased, NULL));
  }
  // Each step launches an allreduce of (rank + 1)s and tears something down right after, without waiting for
  // the stream; the sum must be whole when the teardown returns (the kernel's last block has stored it).
  double took[2] = {0, 0};
  for (int step = 0; step < 2 && !mcclTestStopped(); step++) {
    for (int r = 0; r < TD_NDEV; r++) {
      for (size_t i = 0; i < count; i++) host[i] = (float)(r + 1);
      EXPECT_CUDA_OK(copyOwnStream(r, b[r].send, host, count * sizeof(float), cudaMemcpyHostToDevice));
      memset(host, 0, count * sizeof(float));
      EXPECT_CUDA_OK(copyOwnStream(r, b[r].recv, host, count * sizeof(float), cudaMemcpyHostToDevice));
    }
    EXPECT_OK(mcclGroupStart());
    for (int r = 0; r < TD_NDEV; r++)
      EXPECT_OK(mcclAllReduce(b[r].send, b[r].recv, count, mcclFloat32, mcclSum, comms[r], b[r].stream));
    EXPECT_OK(mcclGroupEnd());
    const double t0 = mcclClockSec();
    for (int r = 0; r < TD_NDEV; r++) {
      if (step == 0) {
        EXPECT_OK(mcclCommWindowDeregister(comms[r], b[r].sendWin));
        b[r].sendWin = NULL;
      } else {
        EXPECT_OK(mcclCommFinalize(comms[r]));
      }
    }
    took[step] = mcclClockSec() - t0;
    for (int r = 0; r < TD_NDEV; r++) {
      EXPECT_CUDA_OK(copyOwnStream(r, host, b[r].recv, count * sizeof(float), cudaMemcpyDeviceToHost));
      size_t wrong = 0;
      for (size_t i = 0; i < count; i++) wrong += host[i] != (float)(TD_NDEV * (TD_NDEV + 1) / 2);
      if (wrong)
        mcclTestFailAt(__FILE__, __LINE__, "step %d rank %d: %zu of %zu sums not there yet", step, r, wrong, count);
    }
  }
  printf("# with another stream of each device blocked: window deregistration %.1f ms, finalize %.1f ms\n",
         took[0] * 1e3, took[1] * 1e3);
  EXPECT_TRUE(took[0] < BLOCK_LIMIT_S / 4);
  EXPECT_TRUE(took[1] < BLOCK_LIMIT_S / 4);
  // Finalized: everything but destroy, abort and the queries is refused.
  EXPECT_RES(mcclAllReduce(b[0].send, b[0].recv, count, mcclFloat32, mcclSum, comms[0], b[0].stream), mcclInvalidUsage);
  EXPECT_RES(mcclCommWindowDeregister(comms[0], b[0].recvWin), mcclInvalidUsage);
  EXPECT_RES(mcclCommFinalize(comms[0]), mcclInvalidUsage);
  int n = 0;
  EXPECT_OK(mcclCommCount(comms[0], &n));
  EXPECT_EQ(n, TD_NDEV);
  // Destroy too, with the unrelated streams still blocked.
  const double t0 = mcclClockSec();
  for (int r = 0; r < TD_NDEV; r++) {
    b[r].recvWin = NULL;  // destroy frees it
    EXPECT_OK(mcclCommDestroy(comms[r]));
  }
  const double destroyS = mcclClockSec() - t0;
  printf("# destroy %.1f ms\n", destroyS * 1e3);
  EXPECT_TRUE(destroyS < BLOCK_LIMIT_S / 4);
  __atomic_store_n(&unrelatedReleased, 1, __ATOMIC_RELEASE);
  for (int r = 0; r < TD_NDEV; r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(unrelated[r]));
    EXPECT_CUDA_OK(cudaStreamDestroy(unrelated[r]));
    EXPECT_CUDA_OK(cudaStreamDestroy(b[r].stream));
    EXPECT_OK(mcclMemFree(b[r].send));
    EXPECT_OK(mcclMemFree(b[r].recv));
    free(b[r].host);
  }
  EXPECT_CUDA_OK(cudaFreeHost(host));
  EXPECT_CUDA_OK(cudaSetDevice(0));
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(versionAndStrings), MCCL_TEST_CASE(nullAndBogusComm), MCCL_TEST_CASE(initArguments),
               MCCL_TEST_CASE(oneRank), MCCL_TEST_CASE(initAllEveryTypeOpRingOneShot),
               MCCL_TEST_CASE(initAllEveryTypeOpTwoShot), MCCL_TEST_CASE(groupedInitRank),
               MCCL_TEST_CASE(initAllCollectives), MCCL_TEST_CASE(initAllSendRecv),
               MCCL_TEST_CASE(initAllAlltoAllGatherScatter), MCCL_TEST_CASE(alltoAllGatherScatterBadInput),
               MCCL_TEST_CASE(initAllPreMulSum), MCCL_TEST_CASE(preMulSumBadInput), MCCL_TEST_CASE(groupSimulateEnd),
               MCCL_TEST_CASE(groupFailsOnBadCall), MCCL_TEST_CASE(destroyWithOpenGroup),
               MCCL_TEST_CASE(abortWhileWaiting), MCCL_TEST_CASE(abortFromAnotherThread),
               MCCL_TEST_CASE(destroyHeldByAnotherThread), MCCL_TEST_CASE(asyncInitAborted),
               MCCL_TEST_CASE(newCallsBadInput), MCCL_TEST_CASE(teardownWaitsOnlyForItsKernels))
