// Lab 07 host side in one process driving 4 devices (mcclLabCommInitAll): rings in device order,
// every channel connected (what a rank stores through its send view, the next rank reads through
// its recv view), windows mapped from every rank, the allreduce's argument checks and algorithm
// table, abort, and nothing leaked (fds, threads, mappings, /dev/shm).
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "comm_test_util.h"
#include "mccl_alloc.h"
#include "mccl_debug.h"
#include "mccl_param.h"

#define NDEV 4

static void setParam(const char* name, const char* value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  mcclParamResetAll();
}

// The driver opens fds and starts threads of its own the first time: count from after.
static void warmUp(void) {
  for (int d = 0; d < NDEV && d < mcclTestDeviceCount(); d++) {
    cudaSetDevice(d);
    void* p = NULL;
    if (mcclMemAlloc(&p, 1) == mcclSuccess) mcclMemFree(p);
  }
  cudaSetDevice(0);
}

struct winArg {
  mcclLabComm* comm;
  void* buf;
  size_t size;
  mcclLabWindow* win;
  mcclResult_t res;
};
static void* registerThread(void* p) {
  struct winArg* a = (struct winArg*)p;
  a->res = mcclLabWindowRegister(a->comm, a->buf, a->size, &a->win);
  return NULL;
}
// Window registration is collective: one thread per rank.
static void registerAll(struct winArg* a, int n) {
  pthread_t th[NDEV];
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, registerThread, &a[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static void ringsChannelsWindows(int nChannels, const char* p2pDisable) {
  if (mcclTestDeviceCount() < NDEV) SKIP("needs 4 devices");
  warmUp();
  setParam("MCCL_P2P_DISABLE", p2pDisable);
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  long maps0 = mcclTestCountMaps("minccl-sim");
  int devs[NDEV] = {3, 1, 0, 2};  // rank i on devs[i]: the ring must follow device order, not rank order
  mcclLabComm* comms[NDEV] = {NULL};
  EXPECT_OK(mcclLabCommInitAll(comms, NDEV, devs, nChannels, mcclLocalTransports));
  int line = 0;
  for (int r = 0; r < NDEV && !line; r++) {
    EXPECT_EQ(comms[r]->rank, r);
    EXPECT_EQ(comms[r]->nRanks, NDEV);
    EXPECT_EQ(comms[r]->cudaDev, devs[r]);
    EXPECT_EQ(comms[r]->nChannels, nChannels);
    line = ctRingLine(comms[r]);
    // devices 0,1,2,3 are ranks 2,1,3,0: rank 2 is first
    EXPECT_EQ(comms[r]->ring.userRanks[0], 2);
    EXPECT_EQ(comms[r]->ring.userRanks[3], 0);
    for (int c = 0; c < nChannels; c++) EXPECT_EQ(comms[r]->transport[c], p2pDisable ? TRANSPORT_SHM : TRANSPORT_P2P);
  }
  EXPECT_EQ(line, 0);
  for (int r = 0; r < NDEV && !line; r++) line = ctWriteSends(comms[r]);
  EXPECT_EQ(line, 0);
  for (int r = 0; r < NDEV && !line; r++) line = ctReadRecvs(comms[r]);
  EXPECT_EQ(line, 0);
  // A window of 4 KiB on each device, mapped by every rank.
  struct winArg wa[NDEV];
  memset(wa, 0, sizeof(wa));
  for (int r = 0; r < NDEV; r++) {
    EXPECT_CUDA_OK(cudaSetDevice(devs[r]));
    EXPECT_OK(mcclMemAlloc(&wa[r].buf, 4096));
    wa[r].comm = comms[r];
    wa[r].size = 4096;
    EXPECT_EQ(ctWindowFill(comms[r], wa[r].buf, 256), 0);
  }
  registerAll(wa, NDEV);
  for (int r = 0; r < NDEV; r++) EXPECT_OK(wa[r].res);
  for (int r = 0; r < NDEV && !line; r++) line = ctWindowCheck(comms[r], wa[r].win, 256);
  EXPECT_EQ(line, 0);
  // The signal area is a window too, zeroed, and every rank sees every other's.
  for (int r = 0; r < NDEV; r++) {
    EXPECT_TRUE(comms[r]->signalWin != NULL);
    uint64_t z = 1;
    EXPECT_CUDA_OK(cudaSetDevice(devs[r]));
    EXPECT_CUDA_OK(cudaMemcpy(&z, comms[r]->signalWin->peerPtrs[(r + 1) % NDEV], 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ(z, 0);
  }
  size_t off = 99;
  mcclLabWindow* found = NULL;
  EXPECT_OK(mcclLabWindowFind(comms[0], (char*)wa[0].buf + 1024, 1024, &found, &off));
  EXPECT_TRUE(found == wa[0].win);
  EXPECT_EQ(off, 1024);
  EXPECT_OK(mcclLabWindowFind(comms[0], (char*)wa[0].buf + 1024, 4096, &found, &off));  // runs past the end
  EXPECT_TRUE(found == NULL);
  for (int r = 0; r < NDEV; r++) EXPECT_OK(mcclLabWindowDeregister(comms[r], wa[r].win));
  EXPECT_RES(mcclLabWindowDeregister(comms[0], wa[1].win), mcclInvalidArgument);  // freed already
  for (int r = 0; r < NDEV; r++) EXPECT_OK(mcclMemFree(wa[r].buf));
  for (int r = 0; r < NDEV; r++) EXPECT_OK(mcclLabCommDestroy(comms[r]));
  setParam("MCCL_P2P_DISABLE", NULL);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
}

static void p2pOneChannel(void) {
  ringsChannelsWindows(1, NULL);
}
static void p2pFourChannels(void) {
  ringsChannelsWindows(4, NULL);
}
static void shmTwoChannels(void) {
  ringsChannelsWindows(2, "1");
}

// The ring from the peer records alone: host, then device, then rank; every rank's position and neighbours;
// one rank is its own neighbour; bad input leaves the output alone.
static void ringOrderFromPeerRecords(void) {
  enum { N = 8 };
  // Rank r on host hosts[r] (two hosts, 0xB listed first), device devs[r]; two ranks share device 1 of 0xA.
  const uint64_t hosts[N] = {0xB, 0xA, 0xA, 0xB, 0xA, 0xB, 0xA, 0xB};
  const int devs[N] = {1, 1, 0, 0, 1, 3, 2, 2};
  const int want[N] = {2, 1, 4, 6, 3, 0, 7, 5};  // 0xA: dev 0 (2), dev 1 (1, 4), dev 2 (6); then 0xB: 3, 0, 7, 5
  mcclPeerInfo info[N];
  memset(info, 0, sizeof(info));
  for (int r = 0; r < N; r++) {
    info[r].rank = r;
    info[r].hostHash = hosts[r];
    info[r].cudaDev = devs[r];
  }
  for (int r = 0; r < N; r++) {
    struct mcclLabRing ring = {-1, -1, -1, NULL};
    EXPECT_OK(mcclLabRingBuild(info, N, r, &ring));
    CHECK_STOPPED();
    EXPECT_MEM_EQ(ring.userRanks, want, sizeof(want));
    EXPECT_EQ(ring.userRanks[ring.index], r);
    EXPECT_EQ(ring.next, want[(ring.index + 1) % N]);
    EXPECT_EQ(ring.prev, want[(ring.index + N - 1) % N]);
    free(ring.userRanks);
  }
  // Devices scrambled on one host, as test_comm's communicators: the ring follows the devices.
  const int scrambled[4] = {3, 1, 0, 2};
  for (int r = 0; r < 4; r++) {
    info[r].hostHash = 0xA;
    info[r].cudaDev = scrambled[r];
  }
  struct mcclLabRing ring = {-1, -1, -1, NULL};
  EXPECT_OK(mcclLabRingBuild(info, 4, 0, &ring));
  const int want4[4] = {2, 1, 3, 0};
  if (ring.userRanks) EXPECT_MEM_EQ(ring.userRanks, want4, sizeof(want4));
  EXPECT_EQ(ring.index, 3);
  EXPECT_EQ(ring.next, 2);
  EXPECT_EQ(ring.prev, 3);
  free(ring.userRanks);
  ring = (struct mcclLabRing){-1, -1, -1, NULL};
  EXPECT_OK(mcclLabRingBuild(info, 1, 0, &ring));
  EXPECT_TRUE(ring.userRanks != NULL && ring.userRanks[0] == 0);
  EXPECT_EQ(ring.index, 0);
  EXPECT_EQ(ring.prev, 0);
  EXPECT_EQ(ring.next, 0);
  free(ring.userRanks);
  ring = (struct mcclLabRing){-1, -1, -1, NULL};
  EXPECT_RES(mcclLabRingBuild(NULL, 4, 0, &ring), mcclInvalidArgument);
  EXPECT_RES(mcclLabRingBuild(info, 0, 0, &ring), mcclInvalidArgument);
  EXPECT_RES(mcclLabRingBuild(info, 4, 4, &ring), mcclInvalidArgument);
  EXPECT_RES(mcclLabRingBuild(info, 4, 0, NULL), mcclInvalidArgument);
  info[2].rank = 5;
  EXPECT_RES(mcclLabRingBuild(info, 4, 0, &ring), mcclInvalidArgument);
  EXPECT_TRUE(ring.userRanks == NULL && ring.index == -1);
}

// Communicators whose channels go over SHM (cuMem off: no P2P, and no signal area, so no window either):
// each rank's device arrays of its ring connections are copies of its connectors, recv from prev and send
// to next on every channel, and what a rank stores through its send view the next reads through its own.
static void ringConnsWithoutCuMem(void) {
  if (mcclTestDeviceCount() < 3) SKIP("needs 3 devices");
  warmUp();
  setParam("MCCL_CUMEM_ENABLE", "0");
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  int devs[3] = {2, 0, 1};
  mcclLabComm* comms[3] = {NULL};
  EXPECT_OK(mcclLabCommInitAll(comms, 3, devs, 2, mcclLocalTransports));
  int line = 0;
  for (int r = 0; r < 3 && comms[r] && !line; r++) {
    line = ctRingLine(comms[r]);
    EXPECT_TRUE(comms[r]->signalWin == NULL);
    for (int c = 0; c < 2; c++) EXPECT_EQ(comms[r]->transport[c], TRANSPORT_SHM);
  }
  EXPECT_EQ(line, 0);
  for (int r = 0; r < 3 && comms[r] && !line; r++) line = ctWriteSends(comms[r]);
  EXPECT_EQ(line, 0);
  for (int r = 0; r < 3 && comms[r] && !line; r++) line = ctReadRecvs(comms[r]);
  EXPECT_EQ(line, 0);
  for (int r = 0; r < 3; r++) EXPECT_OK(mcclLabCommDestroy(comms[r]));
  setParam("MCCL_CUMEM_ENABLE", NULL);
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
}

static void initArguments(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no CUDA device");
  mcclLabComm* c = NULL;
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  EXPECT_RES(mcclLabCommInit(NULL, 1, &id, 0, 0, 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInit(&c, 1, NULL, 0, 0, 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInit(&c, 0, &id, 0, 0, 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInit(&c, MCCL_LAB_MAX_RANKS + 1, &id, 0, 0, 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInit(&c, 2, &id, 2, 0, 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInit(&c, 1, &id, 0, mcclTestDeviceCount(), 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInit(&c, 1, &id, 0, 0, MCCL_SIGNAL_MAX_BLOCKS + 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInit(&c, 1, &id, 0, 0, -1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInit(&c, 1, &id, 0, 0, 1, NULL), mcclInvalidArgument);  // no transport table
  EXPECT_TRUE(c == NULL);
  int dup[2] = {0, 0};
  mcclLabComm* cs[2] = {NULL, NULL};
  EXPECT_RES(mcclLabCommInitAll(cs, 2, dup, 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInitAll(cs, 0, NULL, 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInitAll(NULL, 1, NULL, 1, mcclLocalTransports), mcclInvalidArgument);
  EXPECT_RES(mcclLabCommInitAll(cs, 1, NULL, 1, NULL), mcclInvalidArgument);
  EXPECT_TRUE(cs[0] == NULL && cs[1] == NULL);
  EXPECT_OK(mcclLabCommDestroy(NULL));
}

// Every bad argument is refused before anything is launched; the launch itself is the lead's.
static void allReduceArguments(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  warmUp();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  mcclLabComm* cs[2] = {NULL, NULL};
  EXPECT_OK(mcclLabCommInitAll(cs, 2, NULL, 1, mcclLocalTransports));
  EXPECT_CUDA_OK(cudaSetDevice(0));
  void *a = NULL, *b = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&a, 4096));
  EXPECT_CUDA_OK(cudaMalloc(&b, 4096));
  mcclLabComm* c = cs[0];
  EXPECT_RES(mcclLabAllReduce(a, b, 16, mcclFloat32, mcclSum, NULL, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllReduce(NULL, b, 16, mcclFloat32, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllReduce(a, NULL, 16, mcclFloat32, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllReduce(a, b, 16, (mcclDataType_t)mcclNumTypes, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllReduce(a, b, 16, (mcclDataType_t)-1, mcclSum, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllReduce(a, b, 16, mcclFloat32, (mcclRedOp_t)mcclNumOps, c, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclLabAllReduce(a, b, SIZE_MAX / 2, mcclFloat32, mcclSum, c, NULL), mcclInvalidArgument);  // overflow
  // A forced one-shot beyond its scratch, a forced two-shot on buffers outside any window, and a
  // bad name are refused (nothing is launched: the other rank makes no call).
  setParam("MCCL_ALGO", "oneshot");
  EXPECT_RES(mcclLabAllReduce(a, b, MCCL_ONESHOT_SIMPLE_MAX_BYTES / 4 + 1, mcclFloat32, mcclSum, c, NULL),
             mcclInvalidArgument);
  setParam("MCCL_PROTO", "ll");  // one-shot's LL lines end at MCCL_ONESHOT_MAX_BYTES
  EXPECT_RES(mcclLabAllReduce(a, b, MCCL_ONESHOT_MAX_BYTES / 4 + 1, mcclFloat32, mcclSum, c, NULL),
             mcclInvalidArgument);
  setParam("MCCL_PROTO", NULL);
  setParam("MCCL_ALGO", "twoshot");
  EXPECT_RES(mcclLabAllReduce(a, b, 16, mcclFloat32, mcclSum, c, NULL), mcclInvalidArgument);
  setParam("MCCL_ALGO", "tree");
  EXPECT_RES(mcclLabAllReduce(a, b, 16, mcclFloat32, mcclSum, c, NULL), mcclInvalidArgument);
  setParam("MCCL_ALGO", NULL);
  setParam("MCCL_PROTO", "ll256");
  EXPECT_RES(mcclLabAllReduce(a, b, 16, mcclFloat32, mcclSum, c, NULL), mcclInvalidArgument);
  setParam("MCCL_PROTO", NULL);
  // An aborted communicator launches nothing.
  EXPECT_OK(mcclLabCommAbort(c));
  EXPECT_RES(mcclLabAllReduce(a, b, 16, mcclFloat32, mcclSum, c, NULL), mcclInvalidUsage);
  EXPECT_CUDA_OK(cudaFree(a));
  EXPECT_CUDA_OK(cudaFree(b));
  // Destroy after abort frees everything (the other rank was not aborted).
  EXPECT_OK(mcclLabCommDestroy(cs[0]));
  EXPECT_OK(mcclLabCommDestroy(cs[1]));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
}

// mcclLabSelectAlgorithm(AllReduce, n, bytes, symmetric) succeeds with this algorithm and protocol (-1: not
// checked).
#define EXPECT_CHOICE(n, bytes, symmetric, algo, proto)                                        \
  do {                                                                                         \
    int a_ = -1, p_ = -1;                                                                      \
    EXPECT_OK(mcclLabSelectAlgorithm(mcclFuncAllReduce, (n), (bytes), (symmetric), &a_, &p_)); \
    if ((algo) >= 0) EXPECT_EQ(a_, (algo));                                                    \
    if ((proto) >= 0) EXPECT_EQ(p_, (proto));                                                  \
  } while (0)
// mcclLabSelectAlgorithm(AllReduce, n, bytes, symmetric) refuses: mcclInvalidArgument.
#define EXPECT_REFUSED(n, bytes, symmetric)                                                                          \
  do {                                                                                                               \
    int a_ = -1, p_ = -1;                                                                                            \
    EXPECT_RES(mcclLabSelectAlgorithm(mcclFuncAllReduce, (n), (bytes), (symmetric), &a_, &p_), mcclInvalidArgument); \
  } while (0)

// The table and the overrides.
static void algorithmTable(void) {
  int a = -1, p = -1;
  EXPECT_CHOICE(2, 1024, 2, MCCL_ALGO_ONESHOT, MCCL_PROTO_LL);
  EXPECT_CHOICE(2, 1024, 1, MCCL_ALGO_ONESHOT, -1);  // one-shot needs no window, only the signal area
  EXPECT_CHOICE(2, 256 << 10, 2, MCCL_ALGO_ONESHOT, MCCL_PROTO_LL);
  // 2 ranks: one-shot with SIMPLE above LL's range, with or without windows, up to 4 MiB
  EXPECT_CHOICE(2, (256 << 10) + 1, 2, MCCL_ALGO_ONESHOT, MCCL_PROTO_SIMPLE);
  EXPECT_CHOICE(2, 1 << 20, 1, MCCL_ALGO_ONESHOT, MCCL_PROTO_SIMPLE);
  EXPECT_CHOICE(2, 4 << 20, 2, MCCL_ALGO_ONESHOT, MCCL_PROTO_SIMPLE);
  EXPECT_CHOICE(2, 1 << 20, 0, MCCL_ALGO_RING, MCCL_PROTO_LL);  // no signal area: the ring, LL up to 1 MiB
  EXPECT_CHOICE(2, (4 << 20) + 1, 2, MCCL_ALGO_TWOSHOT, -1);
  EXPECT_CHOICE(2, 8 << 20, 1, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE);  // two-shot needs both buffers in windows
  EXPECT_CHOICE(2, 64 << 20, 2, MCCL_ALGO_TWOSHOT, -1);
  EXPECT_CHOICE(2, 128 << 20, 2, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE);  // the ring from 128 MiB (its 1 MiB FIFO)
  EXPECT_CHOICE(2, 512 << 20, 2, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE);
  // 3-4 ranks (src/tuning.def): one-shot to 128 KiB, two-shot from there to 16 MiB, then the ring
  // with SIMPLE; where two-shot cannot run (a buffer outside the windows), one-shot with LL to 256 KiB,
  // then the ring with LL up to 2 MiB.
  EXPECT_CHOICE(4, 128 << 10, 2, MCCL_ALGO_ONESHOT, -1);
  EXPECT_CHOICE(4, 256 << 10, 2, MCCL_ALGO_TWOSHOT, -1);
  EXPECT_CHOICE(4, 256 << 10, 1, MCCL_ALGO_ONESHOT, MCCL_PROTO_LL);
  EXPECT_CHOICE(3, 256 << 10, 1, MCCL_ALGO_ONESHOT, MCCL_PROTO_LL);
  EXPECT_CHOICE(4, (256 << 10) + 4, 1, MCCL_ALGO_RING, MCCL_PROTO_LL);
  EXPECT_CHOICE(4, 256 << 10, 0, MCCL_ALGO_RING, MCCL_PROTO_LL);  // no signal area: no one-shot either
  EXPECT_CHOICE(8, 32 << 10, 1, MCCL_ALGO_RING, MCCL_PROTO_LL);   // 5-8 ranks: one-shot to 16 KiB either way
  EXPECT_CHOICE(4, 512 << 10, 2, MCCL_ALGO_TWOSHOT, -1);
  EXPECT_CHOICE(4, 512 << 10, 1, MCCL_ALGO_RING, MCCL_PROTO_LL);
  EXPECT_CHOICE(4, 2 << 20, 2, MCCL_ALGO_TWOSHOT, -1);
  EXPECT_CHOICE(4, 1 << 20, 0, MCCL_ALGO_RING, MCCL_PROTO_LL);
  EXPECT_CHOICE(4, (1 << 20) + 4, 0, MCCL_ALGO_RING, MCCL_PROTO_LL128);  // the ring's LL128 band on 4 ranks
  EXPECT_CHOICE(3, 8 << 20, 1, MCCL_ALGO_RING, MCCL_PROTO_LL128);
  EXPECT_CHOICE(4, (8 << 20) + 4, 1, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE);
  EXPECT_CHOICE(4, 2 << 20, 2, MCCL_ALGO_TWOSHOT, MCCL_PROTO_SIMPLE);  // two-shot inside the band: not the ring's
  EXPECT_CHOICE(2, 2 << 20, 0, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE);     // 2 ranks: no LL128 band
  EXPECT_CHOICE(4, 16 << 20, 2, MCCL_ALGO_TWOSHOT, -1);
  EXPECT_CHOICE(4, 32 << 20, 2, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE);
  EXPECT_CHOICE(8, 512 << 10, 0, -1, MCCL_PROTO_SIMPLE);  // 5-8 ranks: LL only up to 256 KiB
  EXPECT_CHOICE(2, 1024, 0, MCCL_ALGO_RING, -1);          // no signal area: the ring
  EXPECT_CHOICE(16, 1024, 2, MCCL_ALGO_RING, -1);         // beyond 8 ranks: the ring
  EXPECT_CHOICE(1, 1024, 2, MCCL_ALGO_RING, -1);
  setParam("MCCL_ALGO", "RING");
  setParam("MCCL_PROTO", "simple");
  EXPECT_CHOICE(2, 1024, 2, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE);
  setParam("MCCL_ALGO", "twoshot");
  setParam("MCCL_PROTO", "ll");
  EXPECT_CHOICE(4, 64 << 20, 2, MCCL_ALGO_TWOSHOT, MCCL_PROTO_LL);
  EXPECT_REFUSED(4, 1024, 1);  // forced, no windows
  setParam("MCCL_ALGO", "oneshot");
  setParam("MCCL_PROTO", NULL);
  EXPECT_CHOICE(2, 1024, 1, MCCL_ALGO_ONESHOT, MCCL_PROTO_LL);
  EXPECT_CHOICE(4, 256 << 10, 1, MCCL_ALGO_ONESHOT, MCCL_PROTO_LL);    // above the 4-rank row's LL size: still LL
  EXPECT_CHOICE(2, 1 << 20, 1, MCCL_ALGO_ONESHOT, MCCL_PROTO_SIMPLE);  // 2 ranks: SIMPLE above LL's lines
  EXPECT_REFUSED(2, (4 << 20) + 1, 1);                                 // beyond its scratch
  EXPECT_REFUSED(4, 1 << 20, 1);                                       // SIMPLE: 2 ranks only
  EXPECT_REFUSED(2, 1024, 0);                                          // no signal area
  setParam("MCCL_PROTO", "simple");                                    // forced both ways
  EXPECT_CHOICE(2, 1024, 1, MCCL_ALGO_ONESHOT, MCCL_PROTO_SIMPLE);
  EXPECT_REFUSED(4, 1024, 1);
  setParam("MCCL_PROTO", "ll");
  EXPECT_REFUSED(2, 1 << 20, 1);
  // Only the protocol forced: a table's one-shot that cannot run it gives way to the ring.
  setParam("MCCL_ALGO", NULL);
  EXPECT_CHOICE(2, 1 << 20, 2, MCCL_ALGO_RING, MCCL_PROTO_LL);
  setParam("MCCL_PROTO", "simple");
  EXPECT_CHOICE(2, 1024, 2, MCCL_ALGO_ONESHOT, MCCL_PROTO_SIMPLE);
  EXPECT_CHOICE(4, 1024, 2, MCCL_ALGO_RING, MCCL_PROTO_SIMPLE);
  setParam("MCCL_ALGO", "bogus");
  EXPECT_REFUSED(2, 1024, 2);
  setParam("MCCL_ALGO", NULL);
  setParam("MCCL_PROTO", NULL);
  EXPECT_REFUSED(0, 1, 1);
  EXPECT_RES(mcclLabSelectAlgorithm(mcclFuncAllReduce, 2, 1, 1, NULL, &p), mcclInvalidArgument);
  EXPECT_REFUSED(2, 1, 4);
  // The copy-engine allreduce (lab 10): forced, it needs level 3; the table takes it on 2 ranks from 256 MiB
  // (MCCL_TUNE_CE_AR_MIN), and below that, or on more ranks, level 3 chooses as level 2 does.
  EXPECT_CHOICE(2, 64 << 20, 3, MCCL_ALGO_TWOSHOT, -1);
  EXPECT_CHOICE(2, (256 << 20) - 16, 3, MCCL_ALGO_RING, -1);
  EXPECT_CHOICE(2, (size_t)256 << 20, 2, MCCL_ALGO_RING, -1);
  EXPECT_CHOICE(2, (size_t)256 << 20, 3, MCCL_ALGO_CE, -1);
  EXPECT_CHOICE(3, (size_t)1 << 30, 3, MCCL_ALGO_RING, -1);
  EXPECT_CHOICE(4, (size_t)1 << 30, 3, MCCL_ALGO_RING, -1);
  setParam("MCCL_ALGO", "ce");
  EXPECT_CHOICE(2, 64 << 20, 3, MCCL_ALGO_CE, -1);
  EXPECT_REFUSED(2, 64 << 20, 2);
  setParam("MCCL_ALGO", NULL);
  // Only the collectives have a choice to make: point-to-point and values past them are refused.
  EXPECT_RES(mcclLabSelectAlgorithm(-1, 2, 1024, 1, &a, &p), mcclInvalidArgument);
  EXPECT_RES(mcclLabSelectAlgorithm(mcclFuncSendRecv, 2, 1024, 1, &a, &p), mcclInvalidArgument);
  EXPECT_RES(mcclLabSelectAlgorithm(mcclNumFuncs, 2, 1024, 1, &a, &p), mcclInvalidArgument);
  // The other collectives' ring, with their function's row of tuning.def (bytes of the larger buffer): LL, then
  // LL128, then SIMPLE; 3 ranks take the 4-rank rows; beyond 4 ranks LL up to 256 KiB and no LL128. Broadcast and
  // Reduce run it whatever the signal area; AllGather and ReduceScatter where there is none (one-shot below);
  // AllReduce's ring takes its own row where the table gives it the ring (no signal area).
  const struct {
    int func, nRanks;
    size_t llMax, ll128Max;
  } rows[] = {
      {mcclFuncAllGather, 2, 1 << 20, 4 << 20}, {mcclFuncReduceScatter, 2, 1 << 20, 4 << 20},
      {mcclFuncBroadcast, 2, 1 << 20, 0},       {mcclFuncReduce, 2, 256 << 10, 4 << 20},
      {mcclFuncAllGather, 3, 1 << 20, 4 << 20}, {mcclFuncReduceScatter, 4, 1 << 20, 4 << 20},
      {mcclFuncBroadcast, 4, 1 << 20, 4 << 20}, {mcclFuncReduce, 4, 256 << 10, 4 << 20},
      {mcclFuncAllGather, 5, 256 << 10, 0},     {mcclFuncReduce, MCCL_LAB_MAX_RANKS, 256 << 10, 0},
      {mcclFuncAllReduce, 2, 1 << 20, 0},       {mcclFuncAllReduce, 4, 1 << 20, 8 << 20},
      {mcclFuncAllReduce, 3, 1 << 20, 8 << 20}, {mcclFuncAllReduce, 6, 256 << 10, 0},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    const int f = rows[i].func, n = rows[i].nRanks;
    // No signal area (AllReduce, AllGather, ReduceScatter): the ring at every size.
    const int sym = f == mcclFuncBroadcast || f == mcclFuncReduce ? 2 : 0;
    const size_t top = rows[i].ll128Max > rows[i].llMax ? rows[i].ll128Max : rows[i].llMax;
    a = p = -1;
    EXPECT_OK(mcclLabSelectAlgorithm(f, n, rows[i].llMax, sym, &a, &p));
    EXPECT_EQ(a, MCCL_ALGO_RING);
    EXPECT_EQ(p, MCCL_PROTO_LL);
    EXPECT_OK(mcclLabSelectAlgorithm(f, n, rows[i].llMax + 1, 0, &a, &p));
    EXPECT_EQ(a, MCCL_ALGO_RING);
    EXPECT_EQ(p, rows[i].ll128Max > rows[i].llMax ? MCCL_PROTO_LL128 : MCCL_PROTO_SIMPLE);
    EXPECT_OK(mcclLabSelectAlgorithm(f, n, top, sym, &a, &p));
    EXPECT_EQ(p, rows[i].ll128Max > rows[i].llMax ? MCCL_PROTO_LL128 : MCCL_PROTO_LL);
    EXPECT_OK(mcclLabSelectAlgorithm(f, n, top + 1, sym, &a, &p));
    EXPECT_EQ(p, MCCL_PROTO_SIMPLE);
    // Buffers off a 16-byte boundary: LL128's band is LL up to twice the LL cut-over, SIMPLE above; the rest kept.
    for (int q = MCCL_PROTO_LL; q <= MCCL_PROTO_SIMPLE; q++)
      if (q != MCCL_PROTO_LL128) EXPECT_EQ(mcclLabMisalignedProto(f, n, rows[i].llMax + 1, q), q);
    EXPECT_EQ(mcclLabMisalignedProto(f, n, rows[i].llMax + 1, MCCL_PROTO_LL128), MCCL_PROTO_LL);
    EXPECT_EQ(mcclLabMisalignedProto(f, n, 2 * rows[i].llMax, MCCL_PROTO_LL128), MCCL_PROTO_LL);
    EXPECT_EQ(mcclLabMisalignedProto(f, n, 2 * rows[i].llMax + 1, MCCL_PROTO_LL128), MCCL_PROTO_SIMPLE);
  }
  // AllGather and ReduceScatter with a signal area: one-shot with LL up to their row's one-shot size (2 ranks 512
  // KiB, 3 and 4 ranks 1 MiB, at most 256 KiB per rank; beyond 4 ranks none), then the ring as above.
  // MCCL_ALGO=oneshot forces it where it fits and is refused elsewhere, as is a protocol other than LL with it;
  // =ring forces the ring; a protocol other than LL asked alone gives the ring.
  for (int f = mcclFuncAllGather; f <= mcclFuncReduceScatter; f++) {
    static const struct {
      int nRanks;
      size_t top;  // the largest one-shot size
    } bands[] = {{2, 512 << 10}, {3, 768 << 10}, {4, 1 << 20}};
    for (size_t i = 0; i < sizeof(bands) / sizeof(bands[0]); i++) {
      const int n = bands[i].nRanks;
      const size_t top = bands[i].top;
      EXPECT_OK(mcclLabSelectAlgorithm(f, n, (size_t)n, 1, &a, &p));
      EXPECT_EQ(a, MCCL_ALGO_ONESHOT);
      EXPECT_EQ(p, MCCL_PROTO_LL);
      EXPECT_OK(mcclLabSelectAlgorithm(f, n, top, 2, &a, &p));
      EXPECT_EQ(a, MCCL_ALGO_ONESHOT);
      EXPECT_OK(mcclLabSelectAlgorithm(f, n, top + (size_t)n, 1, &a, &p));
      EXPECT_EQ(a, MCCL_ALGO_RING);
      EXPECT_OK(mcclLabSelectAlgorithm(f, n, top, 0, &a, &p));  // no signal area
      EXPECT_EQ(a, MCCL_ALGO_RING);
      setParam("MCCL_ALGO", "ring");
      EXPECT_OK(mcclLabSelectAlgorithm(f, n, 1024, 1, &a, &p));
      EXPECT_EQ(a, MCCL_ALGO_RING);
      EXPECT_EQ(p, MCCL_PROTO_LL);
      setParam("MCCL_ALGO", "oneshot");
      EXPECT_OK(mcclLabSelectAlgorithm(f, n, top, 1, &a, &p));
      EXPECT_EQ(a, MCCL_ALGO_ONESHOT);
      EXPECT_RES(mcclLabSelectAlgorithm(f, n, top + (size_t)n, 1, &a, &p), mcclInvalidArgument);
      EXPECT_RES(mcclLabSelectAlgorithm(f, n, 1024, 0, &a, &p), mcclInvalidArgument);
      setParam("MCCL_PROTO", "simple");
      EXPECT_RES(mcclLabSelectAlgorithm(f, n, 1024, 1, &a, &p), mcclInvalidArgument);
      setParam("MCCL_ALGO", NULL);
      EXPECT_OK(mcclLabSelectAlgorithm(f, n, 1024, 1, &a, &p));
      EXPECT_EQ(a, MCCL_ALGO_RING);
      EXPECT_EQ(p, MCCL_PROTO_SIMPLE);
      setParam("MCCL_PROTO", "ll");
      EXPECT_OK(mcclLabSelectAlgorithm(f, n, 1024, 1, &a, &p));
      EXPECT_EQ(a, MCCL_ALGO_ONESHOT);
      setParam("MCCL_PROTO", NULL);
    }
    EXPECT_OK(mcclLabSelectAlgorithm(f, 5, 5, 1, &a, &p));  // beyond 4 ranks: the ring
    EXPECT_EQ(a, MCCL_ALGO_RING);
  }
  // Broadcast and Reduce have no one-shot: MCCL_ALGO is the others' business.
  setParam("MCCL_ALGO", "oneshot");
  EXPECT_OK(mcclLabSelectAlgorithm(mcclFuncBroadcast, 2, 1024, 1, &a, &p));
  EXPECT_EQ(a, MCCL_ALGO_RING);
  setParam("MCCL_ALGO", NULL);
  for (int f = mcclFuncBroadcast; f < mcclFuncAllReduce; f++) {  // one rank copies: LL or SIMPLE, never LL128
    EXPECT_OK(mcclLabSelectAlgorithm(f, 1, 2 << 20, 2, &a, &p));
    EXPECT_EQ(p, MCCL_PROTO_SIMPLE);
    EXPECT_OK(mcclLabSelectAlgorithm(f, 1, 1024, 2, &a, &p));
    EXPECT_EQ(p, MCCL_PROTO_LL);
  }
  // Where one-shot's scratch ends, per protocol.
  EXPECT_EQ(mcclLabOneShotFits(4, MCCL_ONESHOT_MAX_BYTES, MCCL_PROTO_LL), 1);
  EXPECT_EQ(mcclLabOneShotFits(4, MCCL_ONESHOT_MAX_BYTES + 1, MCCL_PROTO_LL), 0);
  EXPECT_EQ(mcclLabOneShotFits(2, MCCL_ONESHOT_SIMPLE_MAX_BYTES, MCCL_PROTO_SIMPLE), 1);
  EXPECT_EQ(mcclLabOneShotFits(2, MCCL_ONESHOT_SIMPLE_MAX_BYTES + 1, MCCL_PROTO_SIMPLE), 0);
  EXPECT_EQ(mcclLabOneShotFits(3, 1024, MCCL_PROTO_SIMPLE), 0);
  EXPECT_EQ(mcclLabOneShotFits(1, (size_t)1 << 30, MCCL_PROTO_LL), 1);  // one rank copies
}

// A buffer that is not a VMM allocation (or NULL, or of another size than the peers') cannot be a window,
// and every rank refuses it together.
static void windowArguments(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  mcclLabComm* cs[2] = {NULL, NULL};
  EXPECT_OK(mcclLabCommInitAll(cs, 2, NULL, 1, mcclLocalTransports));
  struct winArg wa[2];
  memset(wa, 0, sizeof(wa));
  for (int r = 0; r < 2; r++) {
    EXPECT_CUDA_OK(cudaSetDevice(r));
    EXPECT_OK(mcclMemAlloc(&wa[r].buf, 4096));
    wa[r].comm = cs[r];
    wa[r].size = 4096;
  }
  void* plain = wa[1].buf;
  EXPECT_CUDA_OK(cudaSetDevice(1));
  EXPECT_CUDA_OK(cudaMalloc(&wa[1].buf, 4096));  // rank 1 offers cudaMalloc memory
  registerAll(wa, 2);
  EXPECT_RES(wa[0].res, mcclInvalidArgument);
  EXPECT_RES(wa[1].res, mcclInvalidArgument);
  EXPECT_CUDA_OK(cudaFree(wa[1].buf));
  wa[1].buf = plain;
  wa[1].size = 2048;  // sizes that differ
  registerAll(wa, 2);
  EXPECT_RES(wa[0].res, mcclInvalidArgument);
  EXPECT_RES(wa[1].res, mcclInvalidArgument);
  // A NULL buffer on one rank: it takes part as a refusal, so both fail at once (not at the bootstrap's
  // timeout), and the next registration finds both ranks in step.
  wa[1].size = 4096;
  void* kept = wa[0].buf;
  wa[0].buf = NULL;
  registerAll(wa, 2);
  EXPECT_RES(wa[0].res, mcclInvalidArgument);
  EXPECT_RES(wa[1].res, mcclInvalidArgument);
  EXPECT_TRUE(strstr(mcclDebugLastError(), "could not offer its buffer") != NULL ||
              strstr(mcclDebugLastError(), "rank 0's window") != NULL);
  wa[0].buf = kept;
  EXPECT_RES(mcclLabWindowRegister(NULL, wa[0].buf, 4096, &wa[0].win), mcclInvalidArgument);
  EXPECT_TRUE(cs[0]->windows == NULL && cs[1]->windows == NULL);
  registerAll(wa, 2);
  EXPECT_OK(wa[0].res);
  EXPECT_OK(wa[1].res);
  for (int r = 0; r < 2; r++) EXPECT_OK(mcclLabWindowDeregister(cs[r], wa[r].win));
  for (int r = 0; r < 2; r++) EXPECT_OK(mcclMemFree(wa[r].buf));
  for (int r = 0; r < 2; r++) EXPECT_OK(mcclLabCommDestroy(cs[r]));
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(ringOrderFromPeerRecords), MCCL_TEST_CASE(ringConnsWithoutCuMem),
               MCCL_TEST_CASE(initArguments), MCCL_TEST_CASE(p2pOneChannel), MCCL_TEST_CASE(p2pFourChannels),
               MCCL_TEST_CASE(shmTwoChannels), MCCL_TEST_CASE(algorithmTable), MCCL_TEST_CASE(allReduceArguments),
               MCCL_TEST_CASE(windowArguments))
