// The user thread's side of the proxy (NCCL's ncclProxyConnect, ncclProxyCallAsync,
// ncclPollProxyResponse, ncclProxyCallBlocking, ncclProxyClientGetFdBlocking/QueryFdBlocking):
// RPCs over a stream socket to this process's own service, fd requests over a datagram socket to
// any local process's proxy.
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cuda.h>
#include "mccl_checks.h"
#include "mccl_param.h"
#include "proxy_internal.h"

static mcclResult_t clientConnect(mcclProxyState* p) {
  if (p->clientFd >= 0) return mcclSuccess;
  if (p->stopped) {
    WARN("Proxy %d: stopped; no more requests", p->rank);
    return mcclInvalidUsage;
  }
  struct sockaddr_un addr;
  socklen_t alen = mcclSocketAbstractAddr(p->address, &addr);
  int fd;
  SYSCHECK(fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connect(fd, (struct sockaddr*)&addr, alen) != 0) {
    WARN("Proxy %d: cannot reach the service at @%s: %s", p->rank, p->address, strerror(errno));
    close(fd);
    return mcclRemoteError;
  }
  p->clientFd = fd;
  return mcclSuccess;
}

mcclResult_t proxyCallAsync(mcclProxyState* p, uint64_t conn, int type, const void* req, int reqSize, int respSize,
                            void* opId) {
  MCCL_ARGCHECK(reqSize >= 0 && reqSize <= MCCL_PROXY_MAX_MSG, "proxy call: reqSize=%d", reqSize);
  MCCL_ARGCHECK(respSize >= 0 && respSize <= MCCL_PROXY_MAX_MSG, "proxy call: respSize=%d", respSize);
  MCCL_ARGCHECK(req != NULL || reqSize == 0, "proxy call: req is NULL with reqSize=%d", reqSize);
  MCCL_ARGCHECK(opId != NULL, "proxy call: opId is NULL");
  mcclResult_t res = mcclSuccess;
  pthread_mutex_lock(&p->clientLock);
  storedResp* s = NULL;
  MCCLCHECKGOTO(clientConnect(p), res, out);
  s = calloc(1, sizeof(*s));
  if (s == NULL) {
    WARN("Proxy: out of memory");
    res = mcclSystemError;
    goto out;
  }
  s->opId = (uint64_t)(uintptr_t)opId;
  s->respSize = respSize;
  rpcHeader h = {.type = type, .reqSize = reqSize, .respSize = respSize, .pad = 0, .opId = s->opId, .conn = conn};
  char buf[sizeof(h) + MCCL_PROXY_MAX_MSG];
  memcpy(buf, &h, sizeof(h));
  if (reqSize) memcpy(buf + sizeof(h), req, (size_t)reqSize);
  res = proxyWriteFull(p->clientFd, buf, sizeof(h) + (size_t)reqSize);
  if (res != mcclSuccess) {
    free(s);
    goto out;
  }
  s->next = p->expected;  // expectedProxyResponseEnqueue
  p->expected = s;
out:
  pthread_mutex_unlock(&p->clientLock);
  return res;
}

mcclResult_t proxyPollResponse(mcclProxyState* p, void* resp, void* opId) {
  mcclResult_t res = mcclInProgress;
  uint64_t id = (uint64_t)(uintptr_t)opId;
  pthread_mutex_lock(&p->clientLock);
  storedResp** ps = &p->expected;
  while (*ps && (*ps)->opId != id) ps = &(*ps)->next;
  if (*ps == NULL) {
    WARN("Invalid argument: no outstanding proxy call with opId %p", opId);
    res = mcclInvalidArgument;
    goto out;
  }
  // Read whatever responses are waiting; each goes to its own entry.
  while (!(*ps)->done && p->clientFd >= 0) {
    rpcRespHeader rh;
    ssize_t n = recv(p->clientFd, &rh, sizeof(rh), MSG_DONTWAIT | MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    if (n == 0 || n < 0) {
      WARN("Proxy %d: the service closed the connection", p->rank);
      res = mcclRemoteError;
      goto out;
    }
    if (n < (ssize_t)sizeof(rh)) break;  // the rest is on its way
    char raw[sizeof(rpcRespHeader)];
    MCCLCHECKGOTO(proxyReadFull(p->clientFd, raw, sizeof(raw), 1000, NULL, NULL), res, out);
    MCCLCHECKGOTO(mcclProxyRpcRespDecode(raw, sizeof(raw), &rh), res, out);
    storedResp* e = p->expected;
    while (e && e->opId != rh.opId) e = e->next;
    char sink[MCCL_PROXY_MAX_MSG];
    MCCLCHECKGOTO(proxyReadFull(p->clientFd, e ? e->resp : sink, (size_t)rh.respSize, 1000, NULL, NULL), res, out);
    if (e) {
      e->done = 1;
      e->res = (mcclResult_t)rh.res;
    }
  }
  if ((*ps)->done) {
    storedResp* s = *ps;
    *ps = s->next;
    res = s->res;
    if (res == mcclSuccess && s->respSize > 0 && resp) memcpy(resp, s->resp, (size_t)s->respSize);
    free(s);
  }
out:
  pthread_mutex_unlock(&p->clientLock);
  return res;
}

// The clock callBlocking measures its deadline with. A variable only so that a test can make a
// response arrive exactly at the deadline (proxy_internal.h); nothing else changes it.
uint64_t (*proxyClientClock)(void) = mcclClockNano;

static mcclResult_t callBlocking(mcclProxyState* p, uint64_t conn, int type, const void* req, int reqSize, void* resp,
                                 int respSize) {
  char opIdByte;  // any unique address will do
  MCCLCHECK(proxyCallAsync(p, conn, type, req, reqSize, respSize, &opIdByte));
  int64_t timeoutMs = mcclParamProxyTimeout();  // <= 0: no deadline (`make gdb`); the abort flag still ends it
  uint64_t deadline = timeoutMs > 0 ? proxyClientClock() + (uint64_t)timeoutMs * 1000000ULL : UINT64_MAX;
  for (int spins = 0;; spins++) {
    // The clock is read before the poll, and a response the poll finds is used whatever the clock
    // said: only a poll that began after the deadline and found nothing is a timeout.
    int late = proxyClientClock() > deadline;
    mcclResult_t r = proxyPollResponse(p, resp, &opIdByte);
    if (r != mcclInProgress) return r;
    if (mcclIsAborted(p->abortFlag)) {
      WARN("Proxy %d: aborted while waiting for request type %d", p->rank, type);
      goto drop;
    }
    if (late) {
      WARN("Proxy %d: request type %d got no answer in MCCL_PROXY_TIMEOUT=%lld ms", p->rank, type,
           (long long)mcclParamProxyTimeout());
      goto timeout;
    }
    if (spins > 1000) {
      struct pollfd pf = {.fd = p->clientFd, .events = POLLIN, .revents = 0};
      poll(&pf, 1, 10);
    }
  }
drop:
timeout:
  // Forget the entry so a late answer is read into the sink.
  pthread_mutex_lock(&p->clientLock);
  for (storedResp** ps = &p->expected; *ps; ps = &(*ps)->next)
    if ((*ps)->opId == (uint64_t)(uintptr_t)&opIdByte) {
      storedResp* s = *ps;
      *ps = s->next;
      free(s);
      break;
    }
  pthread_mutex_unlock(&p->clientLock);
  return mcclIsAborted(p->abortFlag) ? mcclInternalError : mcclTimeout;
}

mcclResult_t mcclProxyConnect(mcclProxyState* proxy, struct mcclConnector* connector) {
  MCCL_ARGCHECK(proxy != NULL, "mcclProxyConnect: proxy is NULL");
  MCCL_ARGCHECK(connector != NULL && connector->transportComm != NULL,
                "mcclProxyConnect: connector=%p has no transport (call mcclConnectorInit first)", (void*)connector);
  MCCL_ARGCHECK(connector->transport >= 0 && connector->transport < MCCL_NUM_TRANSPORTS &&
                    proxy->transports[connector->transport] != NULL,
                "mcclProxyConnect: connector=%p names transport %d, which is not in the proxy's transport table",
                (void*)connector, connector->transport);
  proxyInitReq in;
  memset(&in, 0, sizeof(in));
  in.transport = connector->transport;
  in.send = connector->send;
  uint64_t conn = 0;
  MCCLCHECK(callBlocking(proxy, 0, mcclProxyMsgInit, &in, sizeof(in), &conn, sizeof(conn)));
  connector->proxyConn = (struct mcclProxyConnection*)(uintptr_t)conn;
  connector->proxyCall = mcclProxyCallBlocking;
  connector->getPeerFd = mcclProxyClientGetFdBlocking;
  connector->getPeerFdCtx = proxy;
  return mcclSuccess;
}

mcclResult_t mcclProxyCallAsync(struct mcclConnector* connector, int type, const void* req, int reqSize, int respSize,
                                void* opId) {
  mcclProxyState* p = proxyOf(connector);
  MCCL_ARGCHECK(p != NULL, "mcclProxyCallAsync: connector=%p is not connected to a proxy", (void*)connector);
  MCCL_ARGCHECK(type == mcclProxyMsgSetup || type == mcclProxyMsgConnect || type == mcclProxyMsgFree,
                "mcclProxyCallAsync: type=%d", type);
  return proxyCallAsync(p, (uint64_t)(uintptr_t)connector->proxyConn, type, req, reqSize, respSize, opId);
}

mcclResult_t mcclPollProxyResponse(struct mcclConnector* connector, void* resp, void* opId) {
  mcclProxyState* p = proxyOf(connector);
  MCCL_ARGCHECK(p != NULL, "mcclPollProxyResponse: connector=%p is not connected to a proxy", (void*)connector);
  return proxyPollResponse(p, resp, opId);
}

mcclResult_t mcclProxyCallBlocking(struct mcclConnector* connector, int msgType, const void* req, int reqSize,
                                   void* resp, int respSize) {
  mcclProxyState* p = proxyOf(connector);
  MCCL_ARGCHECK(p != NULL, "mcclProxyCallBlocking: connector=%p is not connected to a proxy", (void*)connector);
  MCCL_ARGCHECK(msgType == mcclProxyMsgSetup || msgType == mcclProxyMsgConnect || msgType == mcclProxyMsgFree,
                "mcclProxyCallBlocking: msgType=%d", msgType);
  if (msgType == mcclProxyMsgFree && p->stopped) {
    // The service is gone: destroy frees what is left. Mark nothing here.
    return mcclSuccess;
  }
  return callBlocking(p, (uint64_t)(uintptr_t)connector->proxyConn, msgType, req, reqSize, resp, respSize);
}

// One datagram round trip to peer's fd service, from a fresh socket of our own.
static mcclResult_t udsCall(mcclProxyState* p, int peerRank, udsReq* q, int sendFd, udsResp* a, int* recvFd) {
  mcclResult_t res = mcclSuccess;
  mcclIpcSocket cli;
  uint64_t myHash;
  if (getrandom(&myHash, sizeof(myHash), 0) != (ssize_t)sizeof(myHash)) {
    WARN("Proxy: getrandom failed: %s", strerror(errno));
    return mcclSystemError;
  }
  // EXERCISE(05.udscall)
  MCCLCHECK(mcclIpcSocketInit(&cli, p->rank + 1, myHash, p->abortFlag));
  q->clientRank = p->rank + 1;
  q->clientHash = myHash;
  q->opId = myHash;
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&cli, q, sizeof(*q), sendFd, 0, p->peerHash[peerRank]), res, out);
  char raw[sizeof(udsResp)];
  udsResp got;
  int fd = -1;
  // Our socket's name can be read in /proc/net/unix, so any process of our uid may send to it. A
  // datagram that is not the answer to this request is dropped, its fd closed at once, and the wait
  // goes on, within the one MCCL_IPC_TIMEOUT of the whole call.
  const int64_t timeout = mcclParamIpcTimeout();
  const uint64_t t0 = mcclClockMs();
  for (;;) {
    fd = -1;
    res = mcclIpcSocketRecvMsg(&cli, raw, sizeof(raw), recvFd ? &fd : NULL);
    if (res == mcclSuccess && mcclProxyUdsRespDecode(raw, sizeof(raw), q->opId, &got) == mcclSuccess) break;
    if (fd >= 0) close(fd);
    if (res == mcclTimeout || res == mcclInternalError || res == mcclInvalidArgument || res == mcclSystemError)
      goto out;
    const int64_t ms = (int64_t)(mcclClockMs() - t0);
    if (timeout > 0 && ms >= timeout) {
      WARN("Proxy %d: no answer from the fd service of rank %d within MCCL_IPC_TIMEOUT=%lld ms", p->rank, peerRank,
           (long long)timeout);
      res = mcclTimeout;
      goto out;
    }
    INFO(MCCL_PROXY, "Proxy %d: dropped a datagram that does not answer our request to rank %d", p->rank, peerRank);
  }
  res = mcclSuccess;
  *a = got;
  if (recvFd) *recvFd = fd;
out:
  mcclIpcSocketClose(&cli);
  return res;
  // END EXERCISE(05.udscall)
}

mcclResult_t mcclProxyClientGetFdBlocking(void* ctx, int peerRank, const void* handle, int handleSize, int* fd) {
  mcclProxyState* p = ctx;
  MCCL_ARGCHECK(p != NULL && p->peerHash != NULL, "mcclProxyClientGetFdBlocking: proxy=%p has no peers (mcclProxyInit)",
                ctx);
  MCCL_ARGCHECK(peerRank >= 0 && peerRank < p->nranks, "mcclProxyClientGetFdBlocking: peerRank=%d (nranks=%d)",
                peerRank, p->nranks);
  MCCL_ARGCHECK(handle != NULL && handleSize == (int)sizeof(CUmemGenericAllocationHandle),
                "mcclProxyClientGetFdBlocking: handleSize=%d (want %zu)", handleSize,
                sizeof(CUmemGenericAllocationHandle));
  MCCL_ARGCHECK(fd != NULL, "mcclProxyClientGetFdBlocking: fd is NULL");
  udsReq q;
  memset(&q, 0, sizeof(q));
  q.type = mcclProxyMsgGetFd;
  memcpy(&q.handle, handle, sizeof(q.handle));
  udsResp a;
  memset(&a, 0, sizeof(a));  // udsCall fills it only when it succeeds
  int got = -1;
  MCCLCHECK(udsCall(p, peerRank, &q, -1, &a, &got));
  if (a.res != mcclSuccess || got < 0) {
    if (got >= 0) close(got);
    WARN("Proxy %d: rank %d's proxy could not export handle 0x%llx: %s", p->rank, peerRank,
         (unsigned long long)q.handle, mcclGetErrorString((mcclResult_t)a.res));
    return a.res != mcclSuccess ? (mcclResult_t)a.res : mcclRemoteError;
  }
  INFO(MCCL_PROXY, "Proxy %d: GetFd from rank %d: handle 0x%llx -> local fd %d", p->rank, peerRank,
       (unsigned long long)q.handle, got);
  *fd = got;
  return mcclSuccess;
}

mcclResult_t mcclProxyClientQueryFdBlocking(mcclProxyState* proxy, int peerRank, int localFd, int* rmtFd) {
  MCCL_ARGCHECK(proxy != NULL && proxy->peerHash != NULL, "mcclProxyClientQueryFdBlocking: proxy has no peers");
  MCCL_ARGCHECK(peerRank >= 0 && peerRank < proxy->nranks, "mcclProxyClientQueryFdBlocking: peerRank=%d", peerRank);
  MCCL_ARGCHECK(localFd >= 0, "mcclProxyClientQueryFdBlocking: localFd=%d", localFd);
  MCCL_ARGCHECK(rmtFd != NULL, "mcclProxyClientQueryFdBlocking: rmtFd is NULL");
  udsReq q;
  memset(&q, 0, sizeof(q));
  q.type = mcclProxyMsgQueryFd;
  udsResp a;
  memset(&a, 0, sizeof(a));  // udsCall fills it only when it succeeds
  MCCLCHECK(udsCall(proxy, peerRank, &q, localFd, &a, NULL));
  if (a.res != mcclSuccess) {
    WARN("Proxy %d: rank %d's proxy refused to keep our fd: %s (at most MCCL_PROXY_MAX_KEPT_FDS=%d per rank)",
         proxy->rank, peerRank, mcclGetErrorString((mcclResult_t)a.res), MCCL_PROXY_MAX_KEPT_FDS);
    return (mcclResult_t)a.res;
  }
  *rmtFd = a.rmtFd;
  return mcclSuccess;
}
