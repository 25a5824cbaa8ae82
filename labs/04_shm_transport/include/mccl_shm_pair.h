/**
 * @file mccl_shm_pair.h
 * @brief Lab 04: two processes, one SHM connection each way (or one way): the set-up every
 * two-process lab 04 program (example, benchmark, tests) repeats, header-only.
 *
 * Peer records and connect information travel over lab 03 sockets, and so does the fd of a cuMem
 * buffer (attached to the connect-information message, as SCM_RIGHTS). This is what a communicator's
 * bootstrap and lab 05's proxy do for NCCL; in lab 04 the program does it with this helper.
 * Header-only (static inline), so it is in no library.
 *
 * @code
 * struct mcclShmPairEnd e;
 * MCCLCHECK(mcclShmPairConnect(&e, rank, hash, dev, 1, 1, 0, NULL));  // both ways; the peer the same
 * struct mcclProxyOp ops[2];
 * MCCLCHECK(mcclProxyOpInit(&ops[0], &e.conns[1], src, n, NULL));  // to the peer
 * MCCLCHECK(mcclProxyOpInit(&ops[1], &e.conns[0], dst, n, NULL));  // from the peer
 * MCCLCHECK(mcclProxyOpsWait(ops, 2, NULL));
 * MCCLCHECK(mcclShmPairClose(&e));
 * @endcode
 * @ingroup lab04
 */
#ifndef MCCL_SHM_PAIR_H_
#define MCCL_SHM_PAIR_H_

#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_ipcsocket.h"
#include "mccl_shm.h"

/** @addtogroup lab04
 * @{ */

/** @brief One process's end of a two-process SHM pair (filled by mcclShmPairConnect). */
struct mcclShmPairEnd {
  int rank;                       /**< this process: 0 or 1 */
  int peer;                       /**< the other: 1 - rank */
  uint64_t hash;                  /**< names both processes' sockets (mcclIpcSocketInit) */
  mcclIpcSocket sock;             /**< lab 03 socket: peer records, connect information, fds */
  mcclPeerInfo me;                /**< this process (mcclFillPeerInfo) */
  mcclPeerInfo them;              /**< the peer's record, as it sent it */
  struct mcclTransportCtx ctx;    /**< this rank's context for the hooks (rank, 2 ranks, buffer sizes) */
  struct mcclConnector conns[2];  /**< [1] sends to the peer, [0] receives from it */
  int have[2];                    /**< which of conns[] were asked for */
  int pendingFd[2];               /**< fd that came with the peer's connect info for conns[i], until imported */
  mcclShmIpcDesc_t myDesc[2];     /**< what this side offered (for /dev/shm checks) */
};

/// @cond INTERNAL
struct mcclShmPairMsg {
  int fromSend;  // 1: the peer's send connector (for our receive connector)
  struct mcclConnect info;
};

static inline mcclResult_t mcclShmPairGetFd(void* ctx, int peerRank, const void* handle, int handleSize, int* fd) {
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

/// @endcond

/**
 * @brief Connect this process to its peer with SHM: exchange peer records over a lab 03 socket,
 * run setup on each asked-for connector, send its connect information (with the fd of a cuMem
 * buffer attached), connect to the peer's, and wait until both sides have attached.
 * @param[out] e            this end; on failure everything it made is released.
 * @param[in]  rank         0 or 1; the peer calls with the other.
 * @param[in]  hash         the same value in both processes (names the sockets).
 * @param[in]  cudaDev      the device this process drives.
 * @param[in]  doSend       1: set up conns[1], sending to the peer.
 * @param[in]  doRecv       1: set up conns[0], receiving from the peer. The peer asks for the
 *                          mirror image (its doSend = this doRecv).
 * @param[in]  initialStep  first step of the connections (both sides must agree).
 * @param[in]  abortFlag    polled by the socket waits, or NULL: mcclChildWatchStart (mccl_fork.h)
 *                          raises it when the peer process fails, so a dead peer ends the wait.
 * @return mcclSuccess; the first error of a socket, setup or connect call; mcclInvalidUsage when
 *         SHM cannot connect the two; mcclRemoteError when the peer sends something unexpected.
 */
static inline mcclResult_t mcclShmPairConnect(struct mcclShmPairEnd* e, int rank, uint64_t hash, int cudaDev,
                                              int doSend, int doRecv, uint64_t initialStep,
                                              volatile uint32_t* abortFlag) {
  mcclResult_t res = mcclSuccess;
  int ok = 0;
  char b = 1;
  struct mcclConnect theirs[2];
  memset(e, 0, sizeof(*e));
  e->rank = rank;
  e->peer = 1 - rank;
  e->hash = hash;
  e->pendingFd[0] = e->pendingFd[1] = -1;
  e->have[1] = doSend;
  e->have[0] = doRecv;
  MCCLCHECK(mcclTransportCtxInit(&e->ctx, rank, 2, cudaDev));
  e->ctx.abortFlag = abortFlag;
  MCCLCHECK(mcclIpcSocketInit(&e->sock, rank, hash, abortFlag));
  MCCLCHECKGOTO(mcclFillPeerInfo(rank, cudaDev, &e->me), res, fail);
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&e->sock, &e->me, sizeof(e->me), -1, e->peer, hash), res, fail);
  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&e->sock, &e->them, sizeof(e->them), NULL), res, fail);
  MCCLCHECKGOTO(mcclShmTransport.canConnect(&ok, &e->ctx, &e->me, &e->them), res, fail);
  if (!ok) {
    WARN("SHM cannot connect rank %d and rank %d", rank, e->peer);
    res = mcclInvalidUsage;
    goto fail;
  }
  for (int s = 1; s >= 0; s--) {
    if (!e->have[s]) continue;
    struct mcclConnector* c = &e->conns[s];
    MCCLCHECKGOTO(mcclConnectorInit(c, TRANSPORT_SHM, &mcclShmTransport, s, rank), res, fail);
    c->initialStep = initialStep;
    c->getPeerFd = mcclShmPairGetFd;
    c->getPeerFdCtx = &e->pendingFd[s];
    struct mcclShmPairMsg m;
    memset(&m, 0, sizeof(m));
    m.fromSend = s;
    MCCLCHECKGOTO(c->transportComm->setup(&e->ctx, NULL, &e->me, &e->them, &m.info, c, 0, 0), res, fail);
    struct mcclShmConnectInfo ci;
    memcpy(&ci, m.info.data, sizeof(ci));
    e->myDesc[s] = ci.desc;
    int fd = -1;
    if (ci.desc.kind == MCCL_SHM_IPC_CUMEM) MCCLCHECKGOTO(mcclShmExportFd(&ci.desc, &fd), res, fail);
    res = mcclIpcSocketSendMsg(&e->sock, &m, sizeof(m), fd, e->peer, hash);
    if (fd >= 0) close(fd);
    if (res != mcclSuccess) goto fail;
  }
  for (int n = 0; n < e->have[0] + e->have[1]; n++) {
    struct mcclShmPairMsg m;
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
    if (e->have[s]) MCCLCHECKGOTO(e->conns[s].transportComm->connect(&e->ctx, &theirs[s], 1, 0, &e->conns[s]), res,
                    fail);
  // Both sides have attached before either may close: a creator closing first would unlink early.
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

/**
 * @brief Free both connectors (mcclConnectorFree), close fds still pending and the socket.
 * @param[in,out] e  an end mcclShmPairConnect filled.
 * @return mcclSuccess, or the first error (every step is still attempted).
 */
static inline mcclResult_t mcclShmPairClose(struct mcclShmPairEnd* e) {
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

/** @} */

#endif
