// Two processes, one SHM connection each way (or one way): the set-up every two-process lab 04
// program repeats. Peer records and connect information travel over lab 03 sockets, and so does
// the fd of a cuMem buffer (attached to the connect-information message, as SCM_RIGHTS).
#ifndef SHM_PAIR_H_
#define SHM_PAIR_H_

#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_ipcsocket.h"
#include "mccl_shm.h"

struct shmPairEnd {
  int rank, peer;
  uint64_t hash;
  mcclIpcSocket sock;
  mcclPeerInfo me, them;
  struct mcclConnector conns[2];  // [1] send to the peer, [0] receive from it
  int have[2];
  int pendingFd[2];               // fd that came with the peer's connect info for conns[i]
  mcclShmIpcDesc_t myDesc[2];     // what this side offered (for /dev/shm checks)
};

struct shmPairMsg {
  int fromSend;  // 1: the peer's send connector (for our receive connector)
  struct mcclConnect info;
};

static mcclResult_t shmPairGetFd(void* ctx, int peerRank, const void* handle, int handleSize, int* fd) {
  (void)handle;
  (void)handleSize;
  int* pending = (int*)ctx;
  if (*pending < 0) {
    WARN("No fd arrived from rank %d with its cuMem connect information", peerRank);
    return mcclRemoteError;
  }
  *fd = *pending;
  *pending = -1;
  return mcclSuccess;
}

// Sets up conns[1] if doSend, conns[0] if doRecv; the peer must ask for the mirror image. The socket
// waits poll abortFlag (may be NULL): mcclChildWatchStart raises it when the peer process fails.
static mcclResult_t shmPairConnect(struct shmPairEnd* e, int rank, uint64_t hash, int cudaDev, int doSend, int doRecv,
                                   uint64_t initialStep, volatile uint32_t* abortFlag) {
  mcclResult_t res = mcclSuccess;
  memset(e, 0, sizeof(*e));
  e->rank = rank;
  e->peer = 1 - rank;
  e->hash = hash;
  e->pendingFd[0] = e->pendingFd[1] = -1;
  e->have[1] = doSend;
  e->have[0] = doRecv;
  MCCLCHECK(mcclIpcSocketInit(&e->sock, rank, hash, abortFlag));
  MCCLCHECKGOTO(mcclFillPeerInfo(rank, cudaDev, &e->me), res, fail);
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&e->sock, &e->me, sizeof(e->me), -1, e->peer, hash), res, fail);
  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&e->sock, &e->them, sizeof(e->them), NULL), res, fail);
  int ok = 0;
  MCCLCHECKGOTO(mcclShmTransport.canConnect(&ok, &e->me, &e->them), res, fail);
  if (!ok) {
    WARN("SHM cannot connect rank %d and rank %d", rank, e->peer);
    res = mcclInvalidUsage;
    goto fail;
  }
  for (int s = 1; s >= 0; s--) {
    if (!e->have[s]) continue;
    struct mcclConnector* c = &e->conns[s];
    MCCLCHECKGOTO(mcclConnectorInit(c, &mcclShmTransport, s, rank), res, fail);
    c->initialStep = initialStep;
    c->getPeerFd = shmPairGetFd;
    c->getPeerFdCtx = &e->pendingFd[s];
    struct shmPairMsg m;
    memset(&m, 0, sizeof(m));
    m.fromSend = s;
    MCCLCHECKGOTO(c->transportComm->setup(&e->me, &e->them, &m.info, c), res, fail);
    struct mcclShmConnectInfo ci;
    memcpy(&ci, m.info.data, sizeof(ci));
    e->myDesc[s] = ci.desc;
    int fd = -1;
    if (ci.desc.kind == MCCL_SHM_IPC_CUMEM) MCCLCHECKGOTO(mcclShmExportFd(&ci.desc, &fd), res, fail);
    res = mcclIpcSocketSendMsg(&e->sock, &m, sizeof(m), fd, e->peer, hash);
    if (fd >= 0) close(fd);
    if (res != mcclSuccess) goto fail;
  }
  struct mcclConnect theirs[2];
  for (int n = 0; n < e->have[0] + e->have[1]; n++) {
    struct shmPairMsg m;
    int fd = -1;
    MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&e->sock, &m, sizeof(m), &fd), res, fail);
    int mine = m.fromSend ? 0 : 1;  // the peer's sender talks to our receiver
    if (m.fromSend != 0 && m.fromSend != 1) mine = -1;
    if (mine < 0 || !e->have[mine]) {
      if (fd >= 0) close(fd);
      WARN("Unexpected connect information from rank %d", e->peer);
      res = mcclRemoteError;
      goto fail;
    }
    theirs[mine] = m.info;
    e->pendingFd[mine] = fd;
  }
  for (int s = 1; s >= 0; s--)
    if (e->have[s]) MCCLCHECKGOTO(e->conns[s].transportComm->connect(&theirs[s], &e->conns[s]), res, fail);
  // Both sides have attached before either may close: a creator closing first would unlink early.
  char b = 1;
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&e->sock, &b, 1, -1, e->peer, hash), res, fail);
  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&e->sock, &b, 1, NULL), res, fail);
  return mcclSuccess;
fail:
  for (int s = 0; s < 2; s++) {
    mcclConnectorFree(&e->conns[s]);
    if (e->pendingFd[s] >= 0) close(e->pendingFd[s]);
  }
  mcclIpcSocketClose(&e->sock);
  return res;
}

static mcclResult_t shmPairClose(struct shmPairEnd* e) {
  mcclResult_t res = mcclSuccess;
  for (int s = 0; s < 2; s++) {
    mcclResult_t r = mcclConnectorFree(&e->conns[s]);
    if (r != mcclSuccess && res == mcclSuccess) res = r;
    if (e->pendingFd[s] >= 0) close(e->pendingFd[s]);
    e->pendingFd[s] = -1;
  }
  mcclIpcSocketClose(&e->sock);
  return res;
}

#endif
