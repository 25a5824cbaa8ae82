// A peer that dies: fork() a receiver, set up SHM through both proxies, SIGKILL the receiver, and
// check the survivor's send fails with mcclTimeout within MCCL_SHM_TIMEOUT, a GetFd to the dead
// proxy fails within MCCL_IPC_TIMEOUT, and destroy still returns threads and fds to where they were.
// The fork happens before this process makes any CUDA call, so the child starts clean.
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_param.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"
#include "mccl_test.h"
#include "mccl_fork.h"
#include "mccl_utils.h"

// The transports of lab 05's programs: SHM (lab 04's) only; P2P is lab 06's.
static struct mcclTransport* const shmOnly[MCCL_NUM_TRANSPORTS] = {NULL, &mcclShmTransport, NULL};

// Both sides: proxy, bootstrap, one SHM connection 0 -> 1 through the proxies.
static mcclResult_t side(const mcclUniqueId* id, int rank, mcclProxyState** proxy, mcclBootstrap** bs,
                         struct mcclConnector* c) {
  MCCLCHECK(mcclProxyCreate(rank, rank, NULL, shmOnly, proxy));
  MCCLCHECK(mcclBootstrapInit(id, rank, 2, rank, mcclProxyGetAddress(*proxy), NULL, bs));
  MCCLCHECK(mcclProxyInit(*proxy, *bs));
  mcclPeerInfo me, peer;
  MCCLCHECK(mcclBootstrapGetPeerInfo(*bs, rank, &me));
  MCCLCHECK(mcclBootstrapGetPeerInfo(*bs, 1 - rank, &peer));
  struct mcclTransportCtx ctx;
  MCCLCHECK(mcclTransportCtxInit(&ctx, rank, 2, rank));
  ctx.bootstrap = *bs;
  ctx.proxyState = *proxy;
  MCCLCHECK(mcclConnectorInit(c, TRANSPORT_SHM, &mcclShmTransport, rank == 0, rank));
  MCCLCHECK(mcclProxyConnect(*proxy, c));
  struct mcclConnect mine, theirs;
  const struct mcclTransportComm* tc = rank == 0 ? &mcclShmTransport.send : &mcclShmTransport.recv;
  MCCLCHECK(tc->setup(&ctx, NULL, &me, &peer, &mine, c, 0, 0));
  MCCLCHECK(mcclBootstrapSend(*bs, 1 - rank, 0, &mine, sizeof(mine)));
  MCCLCHECK(mcclBootstrapRecv(*bs, 1 - rank, 0, &theirs, sizeof(theirs)));
  MCCLCHECK(tc->connect(&ctx, &theirs, 1, 0, c));
  return mcclBootstrapBarrier(*bs);
}

static void killedPeerTimesOut(void) {
  setenv("MCCL_SHM_TIMEOUT", "1000", 1);
  setenv("MCCL_IPC_TIMEOUT", "500", 1);
  setenv("MCCL_BOOTSTRAP_TIMEOUT", "10000", 1);
  mcclParamResetAll();
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  pid_t child = mcclForkChild();  // dies with this process
  if (child == 0) {
    mcclProxyState* p;
    mcclBootstrap* bs;
    struct mcclConnector c;
    if (side(&id, 1, &p, &bs, &c) != mcclSuccess) _exit(2);
    for (;;) pause();  // the parent kills us here
  }
  EXPECT_GT(child, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    SKIP("needs 2 CUDA devices");
  }
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaFree(NULL));  // CUDA's own threads, if any, exist before we count
  int fds0 = mcclTestCountDir("/proc/self/fd"), th0 = mcclTestCountThreads();
  mcclProxyState* p = NULL;
  mcclBootstrap* bs = NULL;
  struct mcclConnector c;
  mcclResult_t r = side(&id, 0, &p, &bs, &c);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_OK(r);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // More than the FIFO holds: the send needs credits the dead receiver will never return.
  size_t n = 16 << 20;
  void* src = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&src, n));
  mcclProxyRequest req;
  long t0 = mcclClockMs();
  EXPECT_OK(mcclProxyPostOp(p, &c, src, n, &req));
  EXPECT_RES(mcclProxyWait(p, req), mcclTimeout);
  long took = mcclClockMs() - t0;
  printf("# send to a killed peer failed after %ld ms (MCCL_SHM_TIMEOUT=1000)\n", took);
  EXPECT_GE(took, 900);
  EXPECT_LT(took, 5000);
  CUmemGenericAllocationHandle h = 1;
  int fd = -1;
  t0 = mcclClockMs();
  EXPECT_RES(mcclProxyClientGetFdBlocking(p, 1, &h, sizeof(h), &fd), mcclTimeout);
  EXPECT_LT(mcclClockMs() - t0, 3000);
  EXPECT_EQ(fd, -1);
  EXPECT_OK(mcclConnectorFree(&c));
  EXPECT_OK(mcclBootstrapAbort(bs));
  EXPECT_OK(mcclProxyDestroy(p));
  EXPECT_CUDA_OK(cudaFree(src));
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountDir("/proc/self/fd"), fds0);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(killedPeerTimesOut))
