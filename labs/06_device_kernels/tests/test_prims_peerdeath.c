// A peer that dies mid-transfer. This process (rank 0, device 0) receives a message from a forked
// child (rank 1, device 1) connected through both proxies with mcclDevPairPeerCreate; the child sends
// the first half, then is killed while a kernel of its own spins. The survivor's receive kernel never
// gets the second half: mcclDevWait's deadline aborts it and returns mcclTimeout (an error, not a
// hang), the first half is in place and the second untouched (SIMPLE) or nearly (LL), and freeing the endpoint, the
// bootstrap and the proxy brings the fds back and removes the /dev/shm files it used. SHM and P2P, SIMPLE and
// LL: four children, all forked before this process makes its first CUDA call (a child of a process
// that has initialised CUDA cannot use it), each told by a pipe what it is for.
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_devconn.h"
#include "mccl_fork.h"
#include "mccl_param.h"
#include "mccl_proxy.h"
#include "mccl_test.h"
#include "prims_test_util.h"

#define NCASES 4

typedef struct {
  mcclDevTransport_t which;
  int proto;
  mcclUniqueId id;
  pid_t child;
  int toParent;  // the child writes 'h' once its first half is sent and its last kernel spins, 'e' on error
} deathCase;

// The message: two halves of whole chunks (SIMPLE: 8 chunks of 4 slots, in slices of 2 slots less the room a
// shifted start may take; LL: 8 slots of 32 KiB), one channel, so the child's first send ends exactly where the
// receiver's next chunk starts.
static size_t halfBytes(int proto, int stepSize) {
  if (proto == MCCL_PROTO_LL) return 256 << 10;
  const int slices = MCCL_DEV_DEFAULT_CHUNKSTEPS / MCCL_DEV_DEFAULT_SLICESTEPS;
  return (size_t)8 * slices * MCCL_SIMPLE_SLICE_DATA(stepSize * MCCL_DEV_DEFAULT_SLICESTEPS);
}
#define DEATH_SEED 0x5eedull

static mcclResult_t side(const mcclUniqueId* id, int rank, mcclProxyState** proxy, mcclBootstrap** bs) {
  MCCLCHECK(mcclProxyCreate(rank, rank, NULL, mcclLocalTransports, proxy));
  MCCLCHECK(mcclBootstrapInit(id, rank, 2, rank, mcclProxyGetAddress(*proxy), NULL, bs));
  return mcclProxyInit(*proxy, *bs);
}

// The child: connect, send the first half, launch a receive nobody feeds, say so, wait to be killed.
static mcclResult_t childRun(const deathCase* dc, int fd) {
  CUDACHECK(cudaSetDevice(1));
  mcclProxyState* proxy = NULL;
  mcclBootstrap* bs = NULL;
  MCCLCHECK(side(&dc->id, 1, &proxy, &bs));
  struct mcclDevPairEnd* e = NULL;
  MCCLCHECK(mcclDevPairPeerCreate(bs, proxy, 0, 1, MCCL_DEVPAIR_SEND | MCCL_DEVPAIR_RECV, dc->which, 0, &e));
  struct mcclConnInfo *sc = NULL, *rc = NULL;
  MCCLCHECK(mcclDevConnCreate(e->send, 1, &sc));
  MCCLCHECK(mcclDevConnCreate(e->recv, 1, &rc));
  ptLauncher l, l2;
  MCCLCHECK(ptLauncherInit(&l, 1));
  MCCLCHECK(ptLauncherInit(&l2, 1));
  volatile uint32_t* abortH = NULL;
  uint32_t* abortD = NULL;
  MCCLCHECK(mcclDevAbortFlagCreate(&abortH, &abortD));
  size_t half = halfBytes(dc->proto, e->send[0].conn.stepSize);
  unsigned char* host = malloc(half);
  if (host == NULL) return mcclSystemError;
  ptFill(host, half, DEATH_SEED);
  void *src = NULL, *dst = NULL;
  CUDACHECK(cudaMalloc(&src, half));
  CUDACHECK(cudaMalloc(&dst, half));
  CUDACHECK(mcclTestCopyToDevice(src, host, half));
  struct mcclDevWork s = ptWork(mcclDevOpSend, dc->proto, mcclUint8, mcclSum, half, 1);
  s.src = src;
  s.sendConns = sc;
  MCCLCHECK(ptLaunch(&l, &s, abortD, ptThreads()));
  MCCLCHECK(ptWait(&l, abortH, 60000));
  struct mcclDevWork r = ptWork(mcclDevOpRecv, dc->proto, mcclUint8, mcclSum, half, 1);
  r.dst = dst;
  r.recvConns = rc;
  MCCLCHECK(ptLaunch(&l2, &r, abortD, ptThreads()));
  if (write(fd, "h", 1) != 1) return mcclSystemError;
  for (;;) pause();  // the parent kills us here, the receive kernel still spinning
}

static mcclResult_t forkChildren(deathCase* cases) {
  for (int k = 0; k < NCASES; k++) {
    cases[k].which = k < 2 ? mcclDevTransportShm : mcclDevTransportP2p;
    cases[k].proto = k % 2 ? MCCL_PROTO_LL : MCCL_PROTO_SIMPLE;
    MCCLCHECK(mcclGetUniqueId(&cases[k].id));
    int fds[2];
    SYSCHECK(pipe(fds));
    pid_t pid = mcclForkChild();
    if (pid < 0) return mcclSystemError;
    if (pid == 0) {
      close(fds[0]);
      mcclResult_t r = childRun(&cases[k], fds[1]);
      if (r != mcclSuccess && write(fds[1], "e", 1) != 1) _exit(3);
      _exit(2);
    }
    close(fds[1]);
    cases[k].child = pid;
    cases[k].toParent = fds[0];
  }
  return mcclSuccess;
}

static void reap(deathCase* dc) {
  if (dc->child > 0) {
    kill(dc->child, SIGKILL);
    waitpid(dc->child, NULL, 0);
    dc->child = 0;
  }
  if (dc->toParent >= 0) close(dc->toParent);
  dc->toParent = -1;
}

// The survivor's side of one case.
static void survive(deathCase* dc) {
  const char* name = dc->which == mcclDevTransportShm ? (dc->proto == MCCL_PROTO_LL ? "SHM/LL" : "SHM/SIMPLE")
                                                      : (dc->proto == MCCL_PROTO_LL ? "P2P/LL" : "P2P/SIMPLE");
  if (dc->which == mcclDevTransportP2p && !mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  EXPECT_CUDA_OK(cudaSetDevice(0));
  int fds0 = mcclTestCountFds();
  ptShmSet shm = {0}, shmBase = {0};
  ptShmRecord(&shmBase);
  mcclProxyState* proxy = NULL;
  mcclBootstrap* bs = NULL;
  EXPECT_OK(side(&dc->id, 0, &proxy, &bs));
  struct mcclDevPairEnd* e = NULL;
  EXPECT_OK(mcclDevPairPeerCreate(bs, proxy, 1, 1, MCCL_DEVPAIR_SEND | MCCL_DEVPAIR_RECV, dc->which, 0, &e));
  ptShmRecord(&shm);
  struct mcclConnInfo* rc = NULL;
  EXPECT_OK(mcclDevConnCreate(e->recv, 1, &rc));
  ptLauncher l;
  EXPECT_OK(ptLauncherInit(&l, 0));
  volatile uint32_t* abortH = NULL;
  uint32_t* abortD = NULL;
  EXPECT_OK(mcclDevAbortFlagCreate(&abortH, &abortD));
  size_t half = halfBytes(dc->proto, e->recv[0].conn.stepSize), bytes = 2 * half;
  unsigned char *want = malloc(half), *got = malloc(bytes);
  EXPECT_TRUE(want && got);
  ptFill(want, half, DEATH_SEED);
  void* dst = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&dst, bytes));
  EXPECT_CUDA_OK(mcclTestMemset(dst, PT_POISON, bytes));
  struct mcclDevWork r = ptWork(mcclDevOpRecv, dc->proto, mcclUint8, mcclSum, bytes, 1);
  r.dst = dst;
  r.recvConns = rc;
  EXPECT_OK(ptLaunch(&l, &r, abortD, ptThreads()));
  // The child says when its half is sent (it needed our receiver for that) and its last kernel runs.
  struct pollfd pfd = {dc->toParent, POLLIN, 0};
  char c = 0;
  int ready = poll(&pfd, 1, 60000) == 1 && read(dc->toParent, &c, 1) == 1 && c == 'h';
  usleep(20 * 1000);
  kill(dc->child, SIGKILL);
  int status = 0;
  waitpid(dc->child, &status, 0);
  dc->child = 0;
  const int64_t timeoutMs = 1000;
  int64_t t0 = (int64_t)mcclClockUs();
  mcclResult_t res = ptWait(&l, abortH, timeoutMs);
  int64_t us = (int64_t)mcclClockUs() - t0;
  printf("#   %s: receiver gave up %.1f ms after the sender was killed (timeout %lld ms)\n", name, us / 1000.0,
         (long long)timeoutMs);
  EXPECT_TRUE(ready);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_RES(res, mcclTimeout);
  EXPECT_EQ(*l.statusH, mcclDevStatusAborted);
  EXPECT_GE(us, timeoutMs * 1000);
  EXPECT_LE(us, timeoutMs * 1000 + (PT_ON_SIM ? 10000000 : 20000));
  // Everything the peer sent before it died arrived; nothing else was written.
  EXPECT_CUDA_OK(cudaMemcpy(got, dst, bytes, cudaMemcpyDeviceToHost));
  size_t nbad = 0;
  int64_t bad = ptCompare(got, want, half, &nbad);
  if (bad >= 0)
    mcclTestFailAt(__FILE__, __LINE__, "%s: %zu bytes of the first half differ, first at %lld", name, nbad,
                   (long long)bad);
  CHECK_STOPPED();
  // What the aborted receiver did to the half that never came: SIMPLE copies nothing once a waiter has
  // given up (NCCL: workSize = ncclShmem.aborted ? 0 : sliceSize); LL, as NCCL's readLL, returns the
  // line it was polling when it gave up and stores it: at most one 8-byte line per thread.
  size_t written = 0;
  for (size_t i = half; i < bytes; i++) written += got[i] != PT_POISON;
  if (dc->proto == MCCL_PROTO_SIMPLE)
    EXPECT_EQ(written, 0);
  else
    EXPECT_LE(written, (size_t)ptThreads() * 8);
  // The survivor frees everything; the dead peer is not waited for.
  EXPECT_CUDA_OK(cudaFree(dst));
  free(want);
  free(got);
  EXPECT_OK(mcclDevAbortFlagFree(abortH));
  ptLauncherFree(&l);
  EXPECT_OK(mcclDevConnFree(rc));
  EXPECT_OK(mcclDevPairPeerFree(e));
  EXPECT_OK(mcclBootstrapAbort(bs));
  EXPECT_OK(mcclProxyDestroy(proxy));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  const char* left = NULL;
  if (ptShmLeft(&shm, &shmBase, &left) != 0)
    mcclTestFailAt(__FILE__, __LINE__, "%s: %s is still in /dev/shm", name, left);
  CHECK_STOPPED();
}

static void killedPeerGivesAnError(void) {
  setenv("MCCL_BOOTSTRAP_TIMEOUT", "60000", 1);
  setenv("MCCL_IPC_TIMEOUT", "2000", 1);
  mcclParamResetAll();
  deathCase cases[NCASES];
  memset(cases, 0, sizeof(cases));
  for (int k = 0; k < NCASES; k++) cases[k].toParent = -1;
  mcclResult_t forked = forkChildren(cases);
  int ndev = 0;
  if (forked != mcclSuccess || cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    for (int k = 0; k < NCASES; k++) reap(&cases[k]);
    EXPECT_OK(forked);
    SKIP("needs 2 CUDA devices");
  }
  // CUDA's (and the sim's) own fds and threads exist before any case counts.
  EXPECT_CUDA_OK(cudaSetDevice(0));
  void* p = NULL;
  if (mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1) == mcclSuccess) mcclCuMemFree(p);
  ptLauncher warm;
  if (ptLauncherInit(&warm, 0) == mcclSuccess) ptLauncherFree(&warm);
  for (int k = 0; k < NCASES && !mcclTestStopped(); k++) survive(&cases[k]);
  for (int k = 0; k < NCASES; k++) reap(&cases[k]);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(killedPeerGivesAnError))
