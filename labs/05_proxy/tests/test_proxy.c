// Tests of the proxy in one process: RPCs through the service thread (with a test transport whose
// hooks report "in progress"), ops through the progress thread (ordering, many at once, abort,
// stop), idle CPU and wake-up, CPU pinning, thread/fd counts, and SHM send/recv driven by the proxy.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_bootstrap.h"
#include "mccl_checks.h"
#include "mccl_fork.h"
#include "mccl_param.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"
#include "mccl_test.h"
#include "../src/proxy_internal.h"  // the fd service's wire format, for a hand-made requester
#include "mccl_utils.h"

static long threadCpuUs(pthread_t t) {
  clockid_t c;
  struct timespec ts;
  if (pthread_getcpuclockid(t, &c) != 0 || clock_gettime(c, &ts) != 0) return -1;
  return (long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

// ---- a test transport: hooks that count, report "not done" a few times, and record order ------

static pthread_t hookThread;
static atomic_int setupCalls, connectCalls, freeCalls, orderErrors;
static int busy[8];  // per connection: an op has started and not finished (progress thread only)
static int logSeq[8][2048], logLen[8];

typedef struct {
  int conn, seq, calls;  // calls: proxyProgress calls the op needs
} fakeMsg;

static mcclResult_t fakeSetup(struct mcclProxyConnection* c, struct mcclProxyState* ps, const void* req, int reqSize,
                              void* resp, int respSize, int* done) {
  (void)c;
  (void)ps;
  hookThread = pthread_self();
  int n = atomic_fetch_add(&setupCalls, 1) + 1;
  if (reqSize != sizeof(int) || respSize != sizeof(int)) return mcclInvalidArgument;
  *done = n % 4 == 0;  // "in progress" three times, then done: an async op on the service thread
  if (*done) *(int*)resp = *(const int*)req * 2;
  return mcclSuccess;
}
static mcclResult_t fakeConnect(struct mcclProxyConnection* c, struct mcclProxyState* ps, const void* req, int reqSize,
                                void* resp, int respSize, int* done) {
  (void)c;
  (void)ps;
  (void)req;
  (void)reqSize;
  (void)resp;
  (void)respSize;
  atomic_fetch_add(&connectCalls, 1);
  *done = 1;
  return mcclRemoteError;  // an error from a hook travels back to the caller
}
static mcclResult_t fakeFree(struct mcclProxyConnection* c, struct mcclProxyState* ps) {
  (void)c;
  (void)ps;
  atomic_fetch_add(&freeCalls, 1);
  return mcclSuccess;
}
static mcclResult_t fakeProgress(struct mcclProxyState* ps, struct mcclProxyArgs* args) {
  struct mcclProxySubArgs* sub = &args->subs[0];
  fakeMsg* m = sub->ceBuff;
  if (ps == NULL || args->nsubs != 1) atomic_fetch_add(&orderErrors, 1);  // the progress thread passes its proxy
  if (m->calls < 0) return mcclSuccess;                                   // never finishes: for abort and stop
  if (args->state == mcclProxyOpReady) {
    if (busy[m->conn]) atomic_fetch_add(&orderErrors, 1);
    busy[m->conn] = 1;
    args->state = mcclProxyOpProgress;
  }
  sub->transmitted++;
  if ((int)sub->transmitted >= m->calls) {
    busy[m->conn] = 0;
    logSeq[m->conn][logLen[m->conn]++] = m->seq;
    args->state = mcclProxyOpNone;
  }
  return mcclSuccess;
}
static struct mcclTransport fakeTransport = {"FAKE",
                                             NULL,
                                             {NULL, NULL, NULL, fakeSetup, fakeConnect, fakeFree, fakeProgress},
                                             {NULL, NULL, NULL, fakeSetup, fakeConnect, fakeFree, fakeProgress},
                                             NULL};

// The transport table every proxy of this test is created with: SHM (lab 04's) at its index, and the P2P
// slot, which lab 05 has no transport for (P2P is lab 06's), for a test transport: the Init RPC then
// carries TRANSPORT_P2P, and the proxy finds these hooks in its table like any other transport's.
static struct mcclTransport* testTransports[MCCL_NUM_TRANSPORTS] = {NULL, &mcclShmTransport, NULL};

static const struct mcclTransport* inSlot(struct mcclTransport* t) {
  testTransports[TRANSPORT_P2P] = t;
  return t;
}

static void resetFake(void) {
  atomic_store(&setupCalls, 0);
  atomic_store(&connectCalls, 0);
  atomic_store(&freeCalls, 0);
  atomic_store(&orderErrors, 0);
  memset(busy, 0, sizeof(busy));
  memset(logLen, 0, sizeof(logLen));
}

static void createDestroyCounts(void) {
  // The CUDA driver starts threads of its own at initialisation: count from after it.
  EXPECT_CUDA_OK(cudaFree(NULL));
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  EXPECT_EQ(mcclTestWaitThreads(th0 + 2, MCCL_TEST_THREADS_SETTLE_MS), th0 + 2);
  EXPECT_TRUE(strncmp(mcclProxyGetAddress(p), "mccl-proxy-", 11) == 0);
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  mcclProxyState* q = (mcclProxyState*)0x1;
  EXPECT_RES(mcclProxyCreate(-1, 0, NULL, testTransports, &q), mcclInvalidArgument);
  EXPECT_RES(mcclProxyCreate(0, -2, NULL, testTransports, &q), mcclInvalidArgument);
  EXPECT_RES(mcclProxyCreate(0, 0, NULL, testTransports, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclProxyCreate(0, 0, NULL, NULL, &q), mcclInvalidArgument);  // no transport table
  EXPECT_TRUE(q == (mcclProxyState*)0x1);
  EXPECT_OK(mcclProxyDestroy(NULL));
}

// mcclProxyCreate on its own: both threads running and pinned to MCCL_PROXY_CPUSET when it returns, in a
// proxy with an address, and an abort ends them without a message to the service thread (so that this
// needs no other exercise of the lab), leaving no thread and no fd behind.
static void createStartsPinnedThreads(void) {
  EXPECT_CUDA_OK(cudaFree(NULL));  // the CUDA driver's own threads start at its initialisation
  cpu_set_t mine;
  EXPECT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  int first = 0;
  while (first < CPU_SETSIZE - 1 && !CPU_ISSET(first, &mine)) first++;
  char list[16];
  snprintf(list, sizeof(list), "%d", first);
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  uint32_t abortFlag = 0;  // atomic: the proxy's threads read it
  setenv("MCCL_PROXY_CPUSET", list, 1);
  mcclParamResetAll();
  mcclProxyState* p = NULL;
  mcclResult_t r = mcclProxyCreate(0, 0, &abortFlag, testTransports, &p);
  unsetenv("MCCL_PROXY_CPUSET");
  mcclParamResetAll();
  EXPECT_OK(r);
  EXPECT_EQ(mcclTestCountThreads(), th0 + 2);  // both started before the call returned
  EXPECT_TRUE(strncmp(mcclProxyGetAddress(p), "mccl-proxy-", 11) == 0);
  pthread_t t[2];
  EXPECT_OK(mcclProxyGetThreads(p, &t[0], &t[1]));
  EXPECT_TRUE(!pthread_equal(t[0], t[1]));
  for (int i = 0; i < 2; i++) {
    cpu_set_t got;
    EXPECT_EQ(pthread_getaffinity_np(t[i], sizeof(got), &got), 0);
    EXPECT_EQ(CPU_COUNT(&got), 1);
    EXPECT_TRUE(CPU_ISSET(first, &got));
  }
  __atomic_store_n(&abortFlag, 1, __ATOMIC_RELEASE);
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// The export registry: only registered handles are offered to peers (GetFd refuses the rest, see
// mpi_proxy); registering needs a live proxy and a non-zero handle, and is counted (two windows on one
// buffer: the first one's deregistration must not withdraw the second's).
static void exportRegistry(void) {
  EXPECT_CUDA_OK(cudaFree(NULL));
  int fds0 = mcclTestCountFds();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  CUmemGenericAllocationHandle h = (CUmemGenericAllocationHandle)0x1234;  // never given to the driver
  EXPECT_RES(mcclProxyRegisterExport(NULL, h), mcclInvalidArgument);
  EXPECT_RES(mcclProxyRegisterExport(p, 0), mcclInvalidArgument);
  EXPECT_RES(mcclProxyDeregisterExport(p, h), mcclInvalidArgument);
  for (int i = 0; i < 40; i++) EXPECT_OK(mcclProxyRegisterExport(p, h + (CUmemGenericAllocationHandle)i));  // grows
  EXPECT_OK(mcclProxyRegisterExport(p, h));  // again: counted
  EXPECT_OK(mcclProxyDeregisterExport(p, h));
  EXPECT_OK(mcclProxyDeregisterExport(p, h));  // the second registration's
  EXPECT_RES(mcclProxyDeregisterExport(p, h), mcclInvalidArgument);
  for (int i = 1; i < 40; i++) EXPECT_OK(mcclProxyDeregisterExport(p, h + (CUmemGenericAllocationHandle)i));
  EXPECT_RES(mcclProxyDeregisterExport(NULL, h), mcclInvalidArgument);
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// Init, Setup (async: in progress three times), Connect (hook error), Free, all on the service thread.
static void setupRpcs(void) {
  resetFake();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  struct mcclConnector c;
  // An index whose slot of the proxy's table is empty (NET, lab 08's) is refused before any RPC.
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_NET, &fakeTransport, 1, 0));
  EXPECT_RES(mcclProxyConnect(p, &c), mcclInvalidArgument);
  EXPECT_TRUE(c.proxyConn == &c.proxyConnStorage);
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_P2P, inSlot(&fakeTransport), 1, 0));
  EXPECT_OK(mcclProxyConnect(p, &c));
  EXPECT_TRUE(c.proxyConn != &c.proxyConnStorage);
  EXPECT_TRUE(c.proxyCall == mcclProxyCallBlocking);
  int in = 21, out = 0;
  EXPECT_OK(c.proxyCall(&c, mcclProxyMsgSetup, &in, sizeof(in), &out, sizeof(out)));
  EXPECT_EQ(out, 42);
  EXPECT_EQ(atomic_load(&setupCalls), 4);
  pthread_t svc;
  EXPECT_OK(mcclProxyGetThreads(p, &svc, NULL));
  EXPECT_TRUE(pthread_equal(hookThread, svc));
  // Async form: the first polls answer mcclInProgress, the response arrives later.
  int in2 = 5, out2 = 0, sawInProgress = 0;
  char opId;
  EXPECT_OK(mcclProxyCallAsync(&c, mcclProxyMsgSetup, &in2, sizeof(in2), sizeof(out2), &opId));
  mcclResult_t r;
  while ((r = mcclPollProxyResponse(&c, &out2, &opId)) == mcclInProgress) sawInProgress = 1;
  EXPECT_RES(r, mcclSuccess);
  EXPECT_EQ(out2, 10);
  EXPECT_EQ(sawInProgress, 1);
  EXPECT_RES(mcclPollProxyResponse(&c, &out2, &opId), mcclInvalidArgument);  // already collected
  EXPECT_RES(c.proxyCall(&c, mcclProxyMsgConnect, NULL, 0, NULL, 0), mcclRemoteError);
  EXPECT_RES(c.proxyCall(&c, 99, NULL, 0, NULL, 0), mcclInvalidArgument);
  EXPECT_RES(c.proxyCall(&c, mcclProxyMsgSetup, &in, MCCL_PROXY_MAX_MSG + 1, &out, sizeof(out)), mcclInvalidArgument);
  EXPECT_OK(c.proxyCall(&c, mcclProxyMsgFree, NULL, 0, NULL, 0));
  EXPECT_EQ(atomic_load(&freeCalls), 1);
  // A connection the user never freed is freed by destroy.
  struct mcclConnector d;
  EXPECT_OK(mcclConnectorInit(&d, TRANSPORT_P2P, inSlot(&fakeTransport), 0, 0));
  EXPECT_OK(mcclProxyConnect(p, &d));
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_EQ(atomic_load(&freeCalls), 2);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// 4 connections, 800 ops of random length: every op completes, per connection in posting order,
// and no op starts before the previous one on its connection finished.
static void manyOpsInOrder(void) {
  resetFake();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  struct mcclConnector c[4];
  for (int i = 0; i < 4; i++) {
    EXPECT_OK(mcclConnectorInit(&c[i], TRANSPORT_P2P, inSlot(&fakeTransport), i % 2, 0));
    EXPECT_OK(mcclProxyConnect(p, &c[i]));
    c[i].connected = 1;
  }
  enum { N = 800 };
  static fakeMsg msgs[N];
  static mcclProxyRequest reqs[N];
  int seq[4] = {0};
  int posted = 0, waited = 0;
  while (waited < N) {
    // Post in bursts of up to 300, so the pool and the ring both fill and drain.
    int burst = 1 + (int)(mcclTestRand() % 300);
    for (int b = 0; b < burst && posted < N; b++, posted++) {
      int k = (int)(mcclTestRand() % 4);
      msgs[posted] = (fakeMsg){k, seq[k]++, 1 + (int)(mcclTestRand() % 5)};
      EXPECT_OK(mcclProxyPostOp(p, &c[k], &msgs[posted], 1, &reqs[posted]));
    }
    for (; waited < posted; waited++) EXPECT_OK(mcclProxyWait(p, reqs[waited]));
  }
  EXPECT_EQ(atomic_load(&orderErrors), 0);
  for (int k = 0; k < 4; k++) {
    EXPECT_EQ(logLen[k], seq[k]);
    for (int i = 0; i < logLen[k]; i++) EXPECT_EQ(logSeq[k][i], i);
  }
  EXPECT_OK(mcclProxyDestroy(p));
}

static void badOpArguments(void) {
  resetFake();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  struct mcclConnector c, other;
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_P2P, inSlot(&fakeTransport), 1, 0));
  EXPECT_OK(mcclConnectorInit(&other, TRANSPORT_P2P, inSlot(&fakeTransport), 1, 0));
  EXPECT_OK(mcclProxyConnect(p, &c));
  mcclProxyRequest r = -7;
  fakeMsg m = {0, 0, 1};
  EXPECT_RES(mcclProxyPostOp(p, &c, &m, 1, &r), mcclInvalidUsage);  // not connected yet
  c.connected = 1;
  other.connected = 1;
  EXPECT_RES(mcclProxyPostOp(p, &other, &m, 1, &r), mcclInvalidArgument);  // not this proxy's
  EXPECT_RES(mcclProxyPostOp(p, &c, NULL, 1, &r), mcclInvalidArgument);
  EXPECT_RES(mcclProxyPostOp(NULL, &c, &m, 1, &r), mcclInvalidArgument);
  EXPECT_EQ(r, -7);
  int done = 0;
  EXPECT_RES(mcclProxyTest(p, 5, &done), mcclInvalidArgument);  // never posted
  EXPECT_RES(mcclProxyTest(p, MCCL_PROXY_MAX_OPS, &done), mcclInvalidArgument);
  EXPECT_OK(mcclProxyDestroy(p));
}

static volatile uint32_t abortFlag;

// Ops that never finish; the abort flag makes each fail with mcclInternalError, and destroy
// still joins and closes everything.
static void abortInFlight(void) {
  resetFake();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  abortFlag = 0;
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, &abortFlag, testTransports, &p));
  struct mcclConnector c[2];
  static fakeMsg m[16];
  mcclProxyRequest r[16];
  for (int i = 0; i < 2; i++) {
    EXPECT_OK(mcclConnectorInit(&c[i], TRANSPORT_P2P, inSlot(&fakeTransport), 1, 0));
    EXPECT_OK(mcclProxyConnect(p, &c[i]));
    c[i].connected = 1;
  }
  for (int i = 0; i < 16; i++) {
    m[i] = (fakeMsg){i % 2, i / 2, -1};
    EXPECT_OK(mcclProxyPostOp(p, &c[i % 2], &m[i], 1, &r[i]));
  }
  mcclSleepMs(20);
  int done = 1;
  EXPECT_OK(mcclProxyTest(p, r[0], &done));
  EXPECT_EQ(done, 0);
  long t0 = mcclClockUs();
  __atomic_store_n(&abortFlag, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 16; i++) EXPECT_RES(mcclProxyWait(p, r[i]), mcclInternalError);
  EXPECT_LT(mcclClockUs() - t0, 1000000);
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_EQ(atomic_load(&freeCalls), 2);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// Stop with ops in flight: they fail, nobody hangs, a later post is refused.
static void stopInFlight(void) {
  resetFake();
  int th0 = mcclTestCountThreads();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  struct mcclConnector c;
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_P2P, inSlot(&fakeTransport), 1, 0));
  EXPECT_OK(mcclProxyConnect(p, &c));
  c.connected = 1;
  fakeMsg m[3] = {{0, 0, -1}, {0, 1, -1}, {0, 2, -1}};
  mcclProxyRequest r[3];
  for (int i = 0; i < 3; i++) EXPECT_OK(mcclProxyPostOp(p, &c, &m[i], 1, &r[i]));
  EXPECT_OK(mcclProxyStop(p));
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  for (int i = 0; i < 3; i++) EXPECT_RES(mcclProxyWait(p, r[i]), mcclInternalError);
  EXPECT_RES(mcclProxyPostOp(p, &c, &m[0], 1, &r[0]), mcclInvalidUsage);
  EXPECT_OK(c.proxyCall(&c, mcclProxyMsgFree, NULL, 0, NULL, 0));  // after stop: left to destroy
  EXPECT_OK(mcclProxyStop(p));
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_EQ(atomic_load(&freeCalls), 1);
}

// An idle proxy costs little: both threads together use < 5% of one core over one second.
// Then a post wakes the sleeping progress thread: its sleep is set to 20 s here, so a wake-up well inside
// that can only be the post's signal, however loaded the machine.
#define WAKE_SLEEP_MS 20000
static void idleCpuAndWakeup(void) {
  resetFake();
  setenv("MCCL_PROXY_SLEEP_MS", "20000", 1);
  mcclParamResetAll();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  pthread_t svc, prog;
  EXPECT_OK(mcclProxyGetThreads(p, &svc, &prog));
  mcclSleepMs(50);  // past the spin and yield phases
  long c0 = threadCpuUs(svc) + threadCpuUs(prog), t0 = mcclClockUs();
  mcclSleepMs(1000);
  long cpu = threadCpuUs(svc) + threadCpuUs(prog) - c0, wall = mcclClockUs() - t0;
  printf("# idle proxy: %ld us CPU in %ld us (%.2f%% of one core)\n", cpu, wall, 100.0 * (double)cpu / (double)wall);
  EXPECT_LT(cpu * 100, wall * 5);
  struct mcclConnector c;
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_P2P, inSlot(&fakeTransport), 1, 0));
  EXPECT_OK(mcclProxyConnect(p, &c));
  c.connected = 1;
  long worst = 0;
  for (int i = 0; i < 5; i++) {
    mcclSleepMs(30);  // asleep on the condition variable again
    fakeMsg m = {0, i, 1};
    mcclProxyRequest r;
    long s = mcclClockUs();
    EXPECT_OK(mcclProxyPostOp(p, &c, &m, 1, &r));
    EXPECT_OK(mcclProxyWait(p, r));
    long lat = mcclClockUs() - s;
    if (lat > worst) worst = lat;
  }
  printf("# wake-up after idle: worst %ld us over 5 posts (sleeps of up to %d ms)\n", worst, WAKE_SLEEP_MS);
  EXPECT_LT(worst, (long)WAKE_SLEEP_MS * 1000 / 4);  // the post's signal woke it, not the sleep's end
  unsetenv("MCCL_PROXY_SLEEP_MS");
  mcclParamResetAll();
  EXPECT_OK(mcclProxyDestroy(p));
}

static void cpusetPinning(void) {
  cpu_set_t s;
  EXPECT_OK(mcclProxyParseCpuset("0-3,8", &s));
  EXPECT_EQ(CPU_COUNT(&s), 5);
  EXPECT_TRUE(CPU_ISSET(8, &s) && CPU_ISSET(0, &s) && !CPU_ISSET(4, &s));
  EXPECT_RES(mcclProxyParseCpuset("3-1", &s), mcclInvalidArgument);
  EXPECT_RES(mcclProxyParseCpuset("a", &s), mcclInvalidArgument);
  EXPECT_RES(mcclProxyParseCpuset("", &s), mcclInvalidArgument);
  EXPECT_RES(mcclProxyParseCpuset("1,", &s), mcclInvalidArgument);
  cpu_set_t mine;
  EXPECT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  int last = -1;
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (CPU_ISSET(i, &mine)) last = i;
  char list[16];
  snprintf(list, sizeof(list), "%d", last);
  setenv("MCCL_PROXY_CPUSET", list, 1);
  mcclParamResetAll();
  mcclProxyState* p = NULL;
  mcclResult_t r = mcclProxyCreate(0, 0, NULL, testTransports, &p);
  unsetenv("MCCL_PROXY_CPUSET");
  mcclParamResetAll();
  EXPECT_OK(r);
  pthread_t t[2];  // pinned before they first run: no need to give them time
  EXPECT_OK(mcclProxyGetThreads(p, &t[0], &t[1]));
  for (int i = 0; i < 2; i++) {
    cpu_set_t got;
    EXPECT_EQ(pthread_getaffinity_np(t[i], sizeof(got), &got), 0);
    EXPECT_EQ(CPU_COUNT(&got), 1);
    EXPECT_TRUE(CPU_ISSET(last, &got));
  }
  EXPECT_OK(mcclProxyDestroy(p));
  setenv("MCCL_PROXY_CPUSET", "0-x", 1);
  mcclParamResetAll();
  p = (mcclProxyState*)0x1;
  r = mcclProxyCreate(0, 0, NULL, testTransports, &p);
  unsetenv("MCCL_PROXY_CPUSET");
  mcclParamResetAll();
  EXPECT_RES(r, mcclInvalidArgument);
  EXPECT_TRUE(p == (mcclProxyState*)0x1);
}

// SHM send/recv inside one process (the /dev/shm path), both directions driven by one proxy.
static void shmSendRecvInProcess(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) SKIP("no CUDA device");
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  mcclPeerInfo me;
  EXPECT_OK(mcclFillPeerInfo(0, 0, &me));
  struct mcclTransportCtx ctx;
  EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 1, 0));
  ctx.proxyState = p;
  struct mcclConnector s, r;
  EXPECT_OK(mcclConnectorInit(&s, TRANSPORT_SHM, &mcclShmTransport, 1, 0));
  EXPECT_OK(mcclConnectorInit(&r, TRANSPORT_SHM, &mcclShmTransport, 0, 0));
  EXPECT_OK(mcclProxyConnect(p, &s));
  EXPECT_OK(mcclProxyConnect(p, &r));
  struct mcclConnect si, ri;
  EXPECT_OK(mcclShmTransport.send.setup(&ctx, NULL, &me, &me, &si, &s, 0, 0));
  EXPECT_OK(mcclShmTransport.recv.setup(&ctx, NULL, &me, &me, &ri, &r, 0, 0));
  EXPECT_OK(mcclShmTransport.send.connect(&ctx, &ri, 1, 0, &s));
  EXPECT_OK(mcclShmTransport.recv.connect(&ctx, &si, 1, 0, &r));
  size_t max = 3 << 20;
  char *src = NULL, *dst = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&src, max));
  EXPECT_CUDA_OK(cudaMalloc((void**)&dst, max));
  unsigned char* h = malloc(max);
  unsigned char* back = malloc(max);
  for (int it = 0; it < 6; it++) {
    size_t n = it == 0 ? 0 : it == 1 ? 1 : (size_t)(mcclTestRand() % max);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(mcclTestRand() >> 11);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(src, h, n));
    EXPECT_CUDA_OK(mcclTestMemset(dst, 0, max));
    EXPECT_CUDA_OK(cudaDeviceSynchronize());  // the proxy's stream is non-blocking: fills must be done
    mcclProxyRequest rs, rr;
    EXPECT_OK(mcclProxyPostOp(p, &r, dst, n, &rr));
    EXPECT_OK(mcclProxyPostOp(p, &s, src, n, &rs));
    EXPECT_OK(mcclProxyWait(p, rs));
    EXPECT_OK(mcclProxyWait(p, rr));
    EXPECT_CUDA_OK(cudaMemcpy(back, dst, n, cudaMemcpyDeviceToHost));
    EXPECT_MEM_EQ(back, h, n);
  }
  free(h);
  free(back);
  EXPECT_OK(mcclConnectorFree(&s));
  EXPECT_OK(mcclConnectorFree(&r));
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_CUDA_OK(cudaFree(src));
  EXPECT_CUDA_OK(cudaFree(dst));
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// Freeing a connector while the progress thread still runs one of its ops (a 64 MiB send with no
// receiver: the FIFO fills, the op waits for credit). The op ends with mcclInvalidUsage, nothing
// crashes, and the connection's resources are gone once mcclConnectorFree returns.
static void freeConnectorWithOpInFlight(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) SKIP("no CUDA device");
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  mcclPeerInfo me;
  EXPECT_OK(mcclFillPeerInfo(0, 0, &me));
  struct mcclTransportCtx ctx;
  EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 1, 0));
  ctx.proxyState = p;
  struct mcclConnector s, r;
  EXPECT_OK(mcclConnectorInit(&s, TRANSPORT_SHM, &mcclShmTransport, 1, 0));
  EXPECT_OK(mcclConnectorInit(&r, TRANSPORT_SHM, &mcclShmTransport, 0, 0));
  EXPECT_OK(mcclProxyConnect(p, &s));
  EXPECT_OK(mcclProxyConnect(p, &r));
  struct mcclConnect si, ri;
  EXPECT_OK(mcclShmTransport.send.setup(&ctx, NULL, &me, &me, &si, &s, 0, 0));
  EXPECT_OK(mcclShmTransport.recv.setup(&ctx, NULL, &me, &me, &ri, &r, 0, 0));
  EXPECT_OK(mcclShmTransport.send.connect(&ctx, &ri, 1, 0, &s));
  EXPECT_OK(mcclShmTransport.recv.connect(&ctx, &si, 1, 0, &r));
  size_t n = 64 << 20;
  char* src = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&src, n));
  EXPECT_CUDA_OK(mcclTestMemset(src, 0x5a, n));
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  mcclProxyRequest rs;
  EXPECT_OK(mcclProxyPostOp(p, &s, src, n, &rs));
  mcclSleepMs(50);  // the progress thread has filled the FIFO and polls head for credit
  int done = 1;
  EXPECT_OK(mcclProxyTest(p, rs, &done));
  EXPECT_EQ(done, 0);
  EXPECT_OK(mcclConnectorFree(&s));
  EXPECT_RES(mcclProxyWait(p, rs), mcclInvalidUsage);
  mcclSleepMs(20);  // a progress thread still touching the freed connection would crash here
  EXPECT_OK(mcclConnectorFree(&r));
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_CUDA_OK(cudaFree(src));
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// One GetFd request to the proxy's fd service from a lab 03 socket of our own. With `wait`, the
// answer is read into *got; without, the request names a reply socket that is already closed: a
// requester that went away (its own wait timed out, or it died) before the proxy answered.
static mcclResult_t getFdRequest(mcclProxyState* p, uint64_t handle, int wait, udsResp* got) {
  uint64_t proxyHash = strtoull(mcclProxyGetAddress(p) + strlen("mccl-proxy-"), NULL, 16);
  uint64_t myHash = mcclTestRand(), goneHash = mcclTestRand();
  mcclIpcSocket cli, gone;
  MCCLCHECK(mcclIpcSocketInit(&gone, 7, goneHash, NULL));
  mcclIpcSocketClose(&gone);
  MCCLCHECK(mcclIpcSocketInit(&cli, 7, myHash, NULL));
  udsReq q = {
      .type = mcclProxyMsgGetFd, .clientRank = 7, .clientHash = wait ? myHash : goneHash, .opId = 0, .handle = handle};
  q.opId = q.clientHash;
  mcclResult_t res = mcclIpcSocketSendMsg(&cli, &q, sizeof(q), -1, 0, proxyHash);
  if (res == mcclSuccess && wait) res = mcclIpcSocketRecvMsg(&cli, got, sizeof(*got), NULL);
  mcclIpcSocketClose(&cli);
  return res;
}

// A GetFd requester that has gone away costs the proxy nothing: its reply is dropped at once, so
// neither this rank's own RPCs nor the next requester wait for MCCL_IPC_TIMEOUT. The timeout is long
// (GONE_IPC_TIMEOUT_MS) so that "at once" may take a loaded machine's scheduling delays and still
// stay a tenth of it.
#define GONE_IPC_TIMEOUT_MS 20000
static void goneRequesterDoesNotStall(void) {
  resetFake();
  char timeout[16];
  snprintf(timeout, sizeof(timeout), "%d", GONE_IPC_TIMEOUT_MS);
  setenv("MCCL_IPC_TIMEOUT", timeout, 1);
  mcclParamResetAll();
  int fds0 = mcclTestCountFds();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  struct mcclConnector c;
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_P2P, inSlot(&fakeTransport), 1, 0));
  EXPECT_OK(mcclProxyConnect(p, &c));
  for (int i = 0; i < 2; i++) EXPECT_OK(getFdRequest(p, 0x1234 + (uint64_t)i, 0, NULL));
  mcclSleepMs(20);  // the service has both requests and tries to answer them
  long t0 = mcclClockUs();
  EXPECT_RES(c.proxyCall(&c, mcclProxyMsgConnect, NULL, 0, NULL, 0), mcclRemoteError);  // the hook's answer
  long rpcUs = mcclClockUs() - t0;
  udsResp a;
  memset(&a, 0, sizeof(a));
  t0 = mcclClockUs();
  EXPECT_OK(getFdRequest(p, 0x4321, 1, &a));  // a live requester: answered (refused: never registered)
  long fdUs = mcclClockUs() - t0;
  EXPECT_EQ(a.res, mcclInvalidArgument);
  // The refusal names the requester by its rank (its socket carries rank + 1: clientRank 7 is rank 6).
  if (strstr(mcclDebugLastError(), "GetFd from rank 6 for handle 0x4321") == NULL)
    mcclTestFailAt(__FILE__, __LINE__, "the refusal's WARN: %s", mcclDebugLastError());
  printf("# after 2 gone requesters: Connect RPC %ld us, next GetFd %ld us (MCCL_IPC_TIMEOUT=%d ms)\n", rpcUs, fdUs,
         GONE_IPC_TIMEOUT_MS);
  EXPECT_LT(rpcUs, GONE_IPC_TIMEOUT_MS * 1000L / 10);
  EXPECT_LT(fdUs, GONE_IPC_TIMEOUT_MS * 1000L / 10);
  EXPECT_OK(mcclConnectorFree(&c));
  EXPECT_OK(mcclProxyDestroy(p));
  unsetenv("MCCL_IPC_TIMEOUT");
  mcclParamResetAll();
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// A response that arrives exactly at the caller's deadline is used: the hook ran, so its answer
// counts, whatever the clock says by the time the caller looks. The Setup hook takes 50 ms; the
// caller's clock (proxyClientClock) waits 200 ms on its second reading, by when the answer is in the
// socket, and then reports a time far past MCCL_PROXY_TIMEOUT.
static mcclResult_t slowSetup(struct mcclProxyConnection* c, struct mcclProxyState* ps, const void* req, int reqSize,
                              void* resp, int respSize, int* done) {
  (void)c;
  (void)ps;
  if (reqSize != sizeof(int) || respSize != sizeof(int)) return mcclInvalidArgument;
  mcclSleepMs(50);
  *(int*)resp = *(const int*)req * 3;
  *done = 1;
  return mcclSuccess;
}
static struct mcclTransport slowTransport = {"SLOW",
                                             NULL,
                                             {NULL, NULL, NULL, slowSetup, NULL, NULL, NULL},
                                             {NULL, NULL, NULL, slowSetup, NULL, NULL, NULL},
                                             NULL};
static int clockReadings;
static uint64_t clockAtDeadline(void) {
  const uint64_t now = mcclClockNano();
  if (clockReadings++ == 0) return now;  // the deadline is set from this one
  mcclSleepMs(200);
  return now + 3600ULL * 1000000000ULL;  // an hour later: past any MCCL_PROXY_TIMEOUT
}

static void responseAtDeadlineIsUsed(void) {
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  struct mcclConnector c;
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_P2P, inSlot(&slowTransport), 1, 0));
  EXPECT_OK(mcclProxyConnect(p, &c));
  int in = 7, out = 0;
  clockReadings = 0;
  uint64_t (*realClock)(void) = proxyClientClock;
  proxyClientClock = clockAtDeadline;
  mcclResult_t r = c.proxyCall(&c, mcclProxyMsgSetup, &in, sizeof(in), &out, sizeof(out));
  proxyClientClock = realClock;
  EXPECT_RES(r, mcclSuccess);
  EXPECT_EQ(out, 21);
  EXPECT_GE(clockReadings, 2);
  // A response that comes too late is still a timeout: 1 ms for a hook of 50 ms, on the real clock.
  struct mcclConnector d;
  EXPECT_OK(mcclConnectorInit(&d, TRANSPORT_P2P, inSlot(&slowTransport), 1, 0));
  EXPECT_OK(mcclProxyConnect(p, &d));
  setenv("MCCL_PROXY_TIMEOUT", "1", 1);
  mcclParamResetAll();
  r = d.proxyCall(&d, mcclProxyMsgSetup, &in, sizeof(in), &out, sizeof(out));
  unsetenv("MCCL_PROXY_TIMEOUT");
  mcclParamResetAll();
  EXPECT_RES(r, mcclTimeout);
  EXPECT_OK(mcclConnectorFree(&c));
  EXPECT_OK(mcclConnectorFree(&d));
  EXPECT_OK(mcclProxyDestroy(p));
}

// A neighbour of our uid floods the fd socket: 3000 datagrams that each carry an fd, as QueryFd
// claiming to come from rank 0 (the only rank of this job), from ranks that are not in it, as GetFd,
// and as garbage. The service keeps at most MCCL_PROXY_MAX_KEPT_FDS of them (rank 0's share) and
// closes every other at once: this process's fd count stays bounded while the flood runs and after,
// rank 0's own QueryFd is then refused, and destroy gives every kept fd back.
enum { FLOOD_MSGS = 3000 };
static int floodChild(uint64_t proxyHash) {
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  mcclIpcSocket s;
  const uint64_t myHash = 0x5eed0000u + (uint64_t)getpid();
  if (devnull < 0 || mcclIpcSocketInit(&s, 4, myHash, NULL) != mcclSuccess) return 1;
  for (int i = 0; i < FLOOD_MSGS; i++) {
    udsReq q = {.type = i % 4 == 2 ? mcclProxyMsgGetFd : mcclProxyMsgQueryFd,
                .clientRank = i % 4 == 1 ? 2 + i % 7 : 1,
                .clientHash = myHash,
                .opId = (uint64_t)i,
                .handle = 0x77};
    if (i % 4 == 3) q.type = 99;  // garbage: no such request
    if (mcclIpcSocketSendMsg(&s, &q, sizeof(q), devnull, 0, proxyHash) != mcclSuccess) return 2;
  }
  mcclIpcSocketClose(&s);
  return 0;
}

static void fdFloodBounded(void) {
  resetFake();
  setenv("MCCL_IPC_TIMEOUT", "10000", 1);
  mcclParamResetAll();
  int fds0 = mcclTestCountFds();
  mcclProxyState* p = NULL;
  EXPECT_OK(mcclProxyCreate(0, 0, NULL, testTransports, &p));
  mcclUniqueId id;
  mcclBootstrap* bs = NULL;
  EXPECT_OK(mcclGetUniqueId(&id));
  EXPECT_OK(mcclBootstrapInit(&id, 0, 1, 0, mcclProxyGetAddress(p), NULL, &bs));
  EXPECT_OK(mcclProxyInit(p, bs));
  CHECK_STOPPED();
  const int fds1 = mcclTestCountFds();  // with the bootstrap's listeners
  uint64_t proxyHash = strtoull(mcclProxyGetAddress(p) + strlen("mccl-proxy-"), NULL, 16);
  fflush(NULL);
  pid_t child = mcclForkChild();
  if (child == 0) _exit(floodChild(proxyHash));
  int most = 0, status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    int n = mcclTestCountFds();
    most = n > most ? n : most;
    mcclSleepMs(1);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The last datagrams may still sit in the socket: wait for the service to drain them.
  int n = 0;
  for (int i = 0; i < 200 && (n = mcclTestCountFds()) != fds1 + MCCL_PROXY_MAX_KEPT_FDS; i++) mcclSleepMs(10);
  most = n > most ? n : most;
  printf("# %d datagrams with an fd each: fds %d before, %d at most during the flood, %d after\n", FLOOD_MSGS, fds1,
         most, n);
  EXPECT_EQ(n, fds1 + MCCL_PROXY_MAX_KEPT_FDS);         // rank 0's share, nothing more
  EXPECT_LE(most, fds1 + MCCL_PROXY_MAX_KEPT_FDS + 8);  // a few in flight in the socket at a time
  int rmt = -1, mine = open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_RES(mcclProxyClientQueryFdBlocking(p, 0, mine, &rmt), mcclInvalidUsage);  // its share is used up
  close(mine);
  EXPECT_OK(mcclBootstrapClose(bs));
  EXPECT_OK(mcclProxyDestroy(p));
  unsetenv("MCCL_IPC_TIMEOUT");
  mcclParamResetAll();
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(createStartsPinnedThreads), MCCL_TEST_CASE(createDestroyCounts),
               MCCL_TEST_CASE(exportRegistry), MCCL_TEST_CASE(setupRpcs), MCCL_TEST_CASE(manyOpsInOrder),
               MCCL_TEST_CASE(badOpArguments), MCCL_TEST_CASE(abortInFlight), MCCL_TEST_CASE(stopInFlight),
               MCCL_TEST_CASE(idleCpuAndWakeup), MCCL_TEST_CASE(cpusetPinning), MCCL_TEST_CASE(shmSendRecvInProcess),
               MCCL_TEST_CASE(freeConnectorWithOpInFlight), MCCL_TEST_CASE(goneRequesterDoesNotStall),
               MCCL_TEST_CASE(responseAtDeadlineIsUsed), MCCL_TEST_CASE(fdFloodBounded))
