// final/ in one process: every call of minccl.h with bad input (a clear error, nothing built), the
// queries, double destroy, groups (4 devices driven by one thread: mcclCommInitAll and grouped
// mcclCommInitRank), allreduce against the CPU reference for every dtype x op on every algorithm,
// abort (prompt while a kernel waits for a peer that never comes; the clique's other members see
// mcclRemoteError), and nothing leaked.
#include <stdint.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../labs/07_allreduce/tests/ar_test_util.h"
#include "fcoll_test_util.h"
#include "mccl_test.h"
#include "minccl.h"

#define NDEV 4


static int nDevices(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static double nowSec(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// The sim's and the driver's own fds and threads appear on first use: count from after.
static void warmUp(void) {
  for (int d = 0; d < NDEV && d < nDevices(); d++) {
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
  if (nDevices() < 1) SKIP("no device");
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
  int dup[2] = {0, 0}, far[1] = {nDevices()};
  EXPECT_RES(mcclCommInitAll(NULL, 1, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitAll(cs, 0, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitAll(cs, -1, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitAll(cs, 1, far), mcclInvalidArgument);
  if (nDevices() >= 2) EXPECT_RES(mcclCommInitAll(cs, 2, dup), mcclInvalidArgument);
  EXPECT_RES(mcclCommInitAll(cs, nDevices() + 1, NULL), mcclInvalidArgument);
}

// One rank: the queries, allreduce and window arguments, double destroy, use after destroy.
static void oneRank(void) {
  if (nDevices() < 1) SKIP("no device");
  EXPECT_CUDA_OK(cudaSetDevice(nDevices() - 1));
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  mcclComm_t c = NULL;
  EXPECT_OK(mcclCommInitRank(&c, 1, id, 0));
  int n = -1, d = -1, r = -1;
  EXPECT_OK(mcclCommCount(c, &n));
  EXPECT_OK(mcclCommCuDevice(c, &d));
  EXPECT_OK(mcclCommUserRank(c, &r));
  EXPECT_EQ(n, 1);
  EXPECT_EQ(d, nDevices() - 1);
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
  EXPECT_TRUE(strstr(mcclGetLastError(NULL), "overflow") != NULL);
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

// One allreduce on every rank (one group), checked on every rank against the CPU reference.
static void runChecked(mcclComm_t* comms, struct rankBufs* b, int n, const struct arPath* path, mcclDataType_t t,
                       mcclRedOp_t op, size_t count, int inPlace, uint64_t seed) {
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
    EXPECT_OK(mcclAllReduce(inPlace ? b[r].recv : b[r].send, b[r].recv, count, t, op, comms[r], b[r].stream));
  EXPECT_OK(mcclGroupEnd());
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    EXPECT_CUDA_OK(cudaMemcpy(b[r].host, b[r].recv, bytes, cudaMemcpyDeviceToHost));
    if (arCheck(b[r].host, t, op, count, n, seed, why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "%s %s %s count %zu %s: rank %d: %s", path->name, mcclTypeName(t),
                     mcclOpName(op), count, inPlace ? "in place" : "out of place", r, why);
  }
}

// mcclCommInitAll over 4 devices; every dtype x op on the algorithms paths[0 .. npaths-1] of
// ar_test_util.h (ring SIMPLE and LL, one-shot, two-shot), in and out of place; nothing leaked.
static void initAllEveryTypeOp(int firstPath, int npaths) {
  if (nDevices() < NDEV) SKIP("needs %d devices", NDEV);
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
  if (nDevices() < NDEV) SKIP("needs %d devices", NDEV);
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
  EXPECT_RES(mcclAllReduce(&ae, &ae, 1, mcclInt32, (mcclRedOp_t)7, comms[0], NULL), mcclInvalidArgument);
  EXPECT_OK(mcclGroupEnd());
  EXPECT_CUDA_OK(cudaSetDevice(0));
  for (int r = 0; r < NDEV; r++) {
    int x = -1;
    EXPECT_OK(mcclCommCuDevice(comms[r], &x));
    EXPECT_EQ(x, r);
    EXPECT_OK(mcclCommGetAsyncError(comms[r], &ae));
    EXPECT_EQ(ae, mcclSuccess);
  }
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

// One collective on every rank (one group, one thread), checked on every rank.
static void collChecked(mcclComm_t* comms, struct rankBufs* b, int n, const struct collCall* c) {
  void *in[NDEV], *out[NDEV];
  char what[128], why[200];
  collDescribe(c, what, sizeof(what));
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    int line = collPrepare(c, r, n, b[r].send, b[r].recv, b[r].host, &in[r], &out[r]);
    if (line) mcclTestFailAt(__FILE__, line, "%s: setting rank %d's buffers up", what, r);
  }
  CHECK_STOPPED();
  EXPECT_OK(mcclGroupStart());
  for (int r = 0; r < n; r++) EXPECT_OK(fcollIssue(c, in[r], out[r], comms[r], b[r].stream));
  EXPECT_OK(mcclGroupEnd());
  for (int r = 0; r < n && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaStreamSynchronize(b[r].stream));
    if (collVerify(c, r, n, out[r], why, sizeof(why)))
      mcclTestFailAt(__FILE__, __LINE__, "%s: rank %d: %s", what, r, why);
  }
}

// 4 devices, one thread: AllGather, ReduceScatter, Broadcast, Reduce in groups; every dtype x op of
// the reducing ones, every dtype of the others, every root of the rooted ones, in and out of place.
static void initAllCollectives(void) {
  if (nDevices() < NDEV) SKIP("needs %d devices", NDEV);
  mcclComm_t comms[NDEV];
  struct rankBufs b[NDEV];
  memset(b, 0, sizeof(b));
  EXPECT_OK(mcclCommInitAll(comms, NDEV, NULL));
  setUpBufs(comms, b, NDEV, 37 * 8 * NDEV);
  int k = 0;
  for (int f = 0; f < collNumFuncs && !mcclTestStopped(); f++) {
    const int reducing = f == collReduce || f == collReduceScatter;
    for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
      for (int op = 0; op < (reducing ? mcclNumOps : 2) && !mcclTestStopped(); op++, k++) {
        if (!mcclTestSampled((uint64_t)k, 3)) continue;
        struct collCall c = {f,
                             (mcclDataType_t)t,
                             (mcclRedOp_t)op,
                             37,
                             k % NDEV,
                             reducing ? (k >> 1) & 1 : op,
                             mcclTestSeed() + (uint64_t)k};
        collChecked(comms, b, NDEV, &c);
      }
    if (f == collBroadcast || f == collReduce)
      for (int root = 0; root < NDEV && !mcclTestStopped(); root++)
        for (int inPlace = 0; inPlace < 2 && !mcclTestStopped(); inPlace++, k++) {
          struct collCall c = {f, mcclFloat32, mcclMax, 37, root, inPlace, mcclTestSeed() + (uint64_t)k};
          collChecked(comms, b, NDEV, &c);
        }
  }
  tearDown(comms, b, NDEV);
}

// 4 devices, one thread: nccl-tests' sendrecv (each rank sends to rank+1 and receives from rank-1,
// all in one group) on counts 0, 1, odd and 64 KiB; to self; all-to-all in one group; bad peers.
static void initAllSendRecv(void) {
  if (nDevices() < NDEV) SKIP("needs %d devices", NDEV);
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
      EXPECT_CUDA_OK(mcclTestMemset(b[r].recv, COLL_POISON, 65536));
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
      if (bytes < 65536 && ((unsigned char*)b[r].host)[bytes] != COLL_POISON)
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
    EXPECT_CUDA_OK(mcclTestMemset(b[r].recv, COLL_POISON, 65536));
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
    if (((unsigned char*)b[r].host)[NDEV * blk] != COLL_POISON)
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

// Abort returns promptly while the kernel of rank 0 waits for rank 1, which never launches; the
// other member of the clique then sees mcclRemoteError, and is aborted too.
static void abortWhileWaiting(void) {
  if (nDevices() < 2) SKIP("needs 2 devices");
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
  double t0 = nowSec();
  EXPECT_OK(mcclCommAbort(comms[0]));
  double took = nowSec() - t0;
  EXPECT_LT(took, 5.0);
  mcclResult_t ae = mcclSuccess;
  EXPECT_OK(mcclCommGetAsyncError(comms[1], &ae));
  EXPECT_EQ(ae, mcclRemoteError);
  EXPECT_OK(mcclCommAbort(comms[1]));
  EXPECT_CUDA(cudaStreamQuery(s), cudaSuccess);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_OK(mcclMemFree(buf));
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(versionAndStrings), MCCL_TEST_CASE(nullAndBogusComm), MCCL_TEST_CASE(initArguments),
               MCCL_TEST_CASE(oneRank), MCCL_TEST_CASE(initAllEveryTypeOpRingOneShot),
               MCCL_TEST_CASE(initAllEveryTypeOpTwoShot), MCCL_TEST_CASE(groupedInitRank),
               MCCL_TEST_CASE(initAllCollectives), MCCL_TEST_CASE(initAllSendRecv), MCCL_TEST_CASE(abortWhileWaiting))
