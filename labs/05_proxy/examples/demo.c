// Lab 05 demo: two processes (fork, no MPI, so gdb can follow either one), each with a proxy.
// Rank 0 sends to rank 1 through SHM; every setup step is an RPC to the proxy's service thread,
// the cuMem buffers cross with a GetFd round trip to the owner's proxy, and the messages are moved
// by the progress threads while the user threads only post and wait.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_fork.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"

#define SAY(...)                            \
  do {                                      \
    printf("[rank %d] ", rank);             \
    printf(__VA_ARGS__);                    \
    printf("\n");                           \
    fflush(stdout);                         \
  } while (0)

static int rank = -1;

// The transports this program has, by NCCL's index: SHM (lab 04's) only; P2P is lab 06's. The proxy
// finds a connection's hooks here from the index its Init RPC carries.
static struct mcclTransport* const transports[MCCL_NUM_TRANSPORTS] = {NULL, &mcclShmTransport, NULL};

static mcclResult_t runRank(const mcclUniqueId* id, volatile uint32_t* abortFlag) {
  mcclResult_t res = mcclSuccess;
  int dev = rank;
  CUDACHECK(cudaSetDevice(dev));
  mcclProxyState* proxy = NULL;
  mcclBootstrap* bs = NULL;
  struct mcclConnector conn;
  int haveConn = 0;
  char* buf = NULL;
  unsigned char* host = NULL;
  size_t n = 3 << 20;

  MCCLCHECK(mcclProxyCreate(rank, dev, abortFlag, transports, &proxy));
  SAY("proxy created: service thread listening on @%s, progress thread idle", mcclProxyGetAddress(proxy));
  MCCLCHECKGOTO(mcclBootstrapInit(id, rank, 2, dev, mcclProxyGetAddress(proxy), abortFlag, &bs), res, done);
  MCCLCHECKGOTO(mcclProxyInit(proxy, bs), res, done);
  mcclPeerInfo me, peer;
  MCCLCHECKGOTO(mcclBootstrapGetPeerInfo(bs, rank, &me), res, done);
  MCCLCHECKGOTO(mcclBootstrapGetPeerInfo(bs, 1 - rank, &peer), res, done);
  SAY("bootstrap done: peer rank %d is pid %d, its proxy at @%s", peer.rank, peer.pid, peer.proxyAddr);

  // What the hooks read about this rank: its device, the FIFO sizes, its bootstrap and proxy.
  struct mcclTransportCtx ctx;
  MCCLCHECKGOTO(mcclTransportCtxInit(&ctx, rank, 2, dev), res, done);
  ctx.bootstrap = bs;
  ctx.proxyState = proxy;
  ctx.abortFlag = abortFlag;
  int send = rank == 0;
  const struct mcclTransportComm* tc = send ? &mcclShmTransport.send : &mcclShmTransport.recv;
  MCCLCHECKGOTO(mcclConnectorInit(&conn, TRANSPORT_SHM, &mcclShmTransport, send, rank), res, done);
  haveConn = 1;
  MCCLCHECKGOTO(mcclProxyConnect(proxy, &conn), res, done);
  SAY("Init RPC: the proxy made connection %p for the %s side", (void*)conn.proxyConn, send ? "send" : "recv");
  struct mcclConnect mine, theirs;
  MCCLCHECKGOTO(tc->setup(&ctx, NULL, &me, &peer, &mine, &conn, 0, 0), res, done);
  SAY("Setup RPC: the proxy allocated this side's %s (cuMem host memory, exported lazily)",
      send ? "sendMem page" : "recvMem page + FIFO");
  MCCLCHECKGOTO(mcclBootstrapSend(bs, 1 - rank, 0, &mine, sizeof(mine)), res, done);
  MCCLCHECKGOTO(mcclBootstrapRecv(bs, 1 - rank, 0, &theirs, sizeof(theirs)), res, done);
  MCCLCHECKGOTO(tc->connect(&ctx, &theirs, 1, 0, &conn), res, done);
  SAY("connect: GetFd round trip to rank %d's proxy (fd over SCM_RIGHTS), mapped; Connect RPC made the copy stream",
      peer.rank);

  CUDACHECKGOTO(cudaMalloc((void**)&buf, n), res, done);
  host = malloc(n);
  if (host == NULL) { res = mcclSystemError; goto done; }
  for (int msg = 0; msg < 3; msg++) {
    if (send) {
      for (size_t i = 0; i < n; i++) host[i] = (unsigned char)(i * 7 + (size_t)msg);
      CUDACHECKGOTO(cudaMemcpy(buf, host, n, cudaMemcpyHostToDevice), res, done);
      // It may return before the bytes land, and the proxy copies from buf on a stream of its own.
      CUDACHECKGOTO(cudaDeviceSynchronize(), res, done);
    }
    mcclProxyRequest req;
    MCCLCHECKGOTO(mcclProxyPostOp(proxy, &conn, buf, n, &req), res, done);
    SAY("posted %s of %zu bytes (message %d); the user thread now only waits", send ? "send" : "recv", n, msg);
    MCCLCHECKGOTO(mcclProxyWait(proxy, req), res, done);
    if (!send) {
      CUDACHECKGOTO(cudaMemcpy(host, buf, n, cudaMemcpyDeviceToHost), res, done);
      size_t bad = 0;
      for (size_t i = 0; i < n; i++) bad += host[i] != (unsigned char)(i * 7 + (size_t)msg);
      SAY("message %d progressed by the proxy and received: %zu wrong bytes", msg, bad);
      if (bad) res = mcclInternalError;
    } else {
      SAY("message %d progressed by the proxy: copy, event, tail published per slot", msg);
    }
  }
  MCCLCHECKGOTO(mcclBootstrapBarrier(bs), res, done);

done:
  if (haveConn) mcclConnectorFree(&conn);
  if (buf) cudaFree(buf);
  free(host);
  if (bs) mcclBootstrapClose(bs);
  mcclResult_t r = mcclProxyDestroy(proxy);
  SAY("proxy stopped: both threads joined, sockets closed (%s)", mcclGetErrorString(r));
  return res != mcclSuccess ? res : r;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "Lab 05's narrated example: rank 0 sends to a forked rank 1 through SHM, moved by the proxy\n"
                "threads.\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  // No CUDA call before fork(): a child cannot use CUDA once its parent initialised it.
  mcclUniqueId id;
  if (mcclGetUniqueId(&id) != mcclSuccess) return 1;
  printf("Lab 05 demo (%s backend): rank 0 (this process) sends to rank 1 (a forked child) through the proxies\n",
         MCCL_BACKEND_NAME);
  // Rank 1 dies with rank 0 (also when gdb kills it); a failure on either side ends both.
  pid_t child = mcclForkChild();
  if (child < 0) { perror("fork"); return 1; }
  rank = child == 0 ? 1 : 0;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    if (child == 0) _exit(0);
    printf("This demo needs 2 CUDA devices (the sim backend has 4).\n");
    waitpid(child, NULL, 0);
    return 0;
  }
  volatile uint32_t abortFlag = 0;
  mcclChildWatch* watch = NULL;
  if (child != 0 && mcclChildWatchStart(child, &abortFlag, &watch) != mcclSuccess) return 1;
  mcclResult_t r = runRank(&id, &abortFlag);
  if (child == 0) _exit(r == mcclSuccess ? 0 : 1);
  int status = 0;
  int ok = mcclChildWatchEnd(watch, r != mcclSuccess, &status) == mcclSuccess && r == mcclSuccess &&
           WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("Demo %s.\n", ok ? "finished: 3 messages went through SHM, moved by the proxy threads" : "FAILED");
  return ok ? 0 : 1;
}
