// The proxy's service thread (NCCL's ncclProxyService): it polls the listening socket, its
// clients' connections, the lab 03 datagram socket for fd requests and an eventfd; it answers
// Init/Setup/Connect/Free/Stop RPCs, retries Setup/Connect hooks that are not done yet (async ops),
// and hands out fds of registered handles (the export registry) on request.
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cuda.h>
#include "mccl_checks.h"
#include "mccl_param.h"
#include "mccl_utils.h"
#include "proxy_internal.h"

static mcclResult_t respond(mcclProxyState* p, int client, uint64_t opId, mcclResult_t res, const void* resp,
                            int respSize) {
  rpcRespHeader rh = {.opId = opId, .res = res, .respSize = res == mcclSuccess ? respSize : 0};
  int fd = p->clientFds[client];
  if (fd < 0) return mcclSuccess;  // the client left; nothing to answer
  char buf[sizeof(rh) + MCCL_PROXY_MAX_MSG];
  memcpy(buf, &rh, sizeof(rh));
  if (rh.respSize > 0) memcpy(buf + sizeof(rh), resp, (size_t)rh.respSize);
  return proxyWriteFull(fd, buf, sizeof(rh) + (size_t)rh.respSize);
}

static int exportIndex(mcclProxyState* p, uint64_t handle) {
  for (int i = 0; i < p->nExports; i++)
    if (p->exports[i].handle == handle) return i;
  return -1;
}

mcclResult_t mcclProxyRegisterExport(mcclProxyState* proxy, CUmemGenericAllocationHandle handle) {
  MCCL_ARGCHECK(proxy != NULL && handle != 0, "proxy %p, handle 0x%llx", (void*)proxy, (unsigned long long)handle);
  mcclResult_t res = mcclSuccess;
  pthread_mutex_lock(&proxy->exportLock);
  int i = exportIndex(proxy, (uint64_t)handle);
  if (i >= 0) {
    proxy->exports[i].refs++;
    goto unlock;
  }
  if (proxy->nExports == proxy->capExports) {
    int cap = proxy->capExports ? 2 * proxy->capExports : 16;
    struct proxyExport* e = realloc(proxy->exports, sizeof(*e) * (size_t)cap);
    if (e == NULL) {
      WARN("Proxy %d: out of memory registering handle 0x%llx", proxy->rank, (unsigned long long)handle);
      res = mcclSystemError;
      goto unlock;
    }
    proxy->exports = e;
    proxy->capExports = cap;
  }
  proxy->exports[proxy->nExports++] = (struct proxyExport){.handle = (uint64_t)handle, .refs = 1};
unlock:
  pthread_mutex_unlock(&proxy->exportLock);
  return res;
}

mcclResult_t mcclProxyDeregisterExport(mcclProxyState* proxy, CUmemGenericAllocationHandle handle) {
  MCCL_ARGCHECK(proxy != NULL, "proxy NULL");
  pthread_mutex_lock(&proxy->exportLock);
  int i = exportIndex(proxy, (uint64_t)handle);
  if (i >= 0 && --proxy->exports[i].refs == 0) {
    proxy->exports[i] = proxy->exports[--proxy->nExports];
    int k = proxy->nWithdrawn++ % (int)(sizeof(proxy->withdrawn) / sizeof(proxy->withdrawn[0]));
    proxy->withdrawn[k].handle = (uint64_t)handle;
    proxy->withdrawn[k].ms = mcclClockMs();
  }
  pthread_mutex_unlock(&proxy->exportLock);
  if (i < 0) {
    WARN("Proxy %d: handle 0x%llx was not registered for export", proxy->rank, (unsigned long long)handle);
    return mcclInvalidArgument;
  }
  return mcclSuccess;
}

// Whether `handle` is offered now; if not, *agoMs is how long ago it was withdrawn (-1: not lately).
static int isExported(mcclProxyState* p, uint64_t handle, int64_t* agoMs) {
  pthread_mutex_lock(&p->exportLock);
  int found = handle != 0 && exportIndex(p, handle) >= 0;
  *agoMs = -1;
  const int nw = (int)(sizeof(p->withdrawn) / sizeof(p->withdrawn[0]));
  for (int k = 0; !found && k < nw && k < p->nWithdrawn; k++)
    if (p->withdrawn[k].handle == handle) *agoMs = (int64_t)(mcclClockMs() - p->withdrawn[k].ms);
  pthread_mutex_unlock(&p->exportLock);
  return found;
}

// Free a connection's proxy half: no peer may ask for its memory any more, then the transport's
// proxyFree. Only once the progress thread has let go of it (nOps == 0).
static mcclResult_t freeConnection(proxyConnEntry* e) {
  if (e->conn.exportHandle) {
    (void)mcclProxyDeregisterExport(e->proxy, e->conn.exportHandle);
    e->conn.exportHandle = 0;
  }
  mcclResult_t res = e->conn.tcomm->proxyFree ? e->conn.tcomm->proxyFree(&e->conn, e->proxy) : mcclSuccess;
  e->freed = 1;
  return res;
}

// Run a Setup/Connect hook once, or try a Free: *done tells whether it finished (NCCL's
// proxyProgressAsync).
static mcclResult_t runHook(asyncOp* op, int* done) {
  proxyConnEntry* e = (proxyConnEntry*)(uintptr_t)op->h.conn;
  const struct mcclTransportComm* tc = e->conn.tcomm;
  *done = 0;
  if (op->h.type == mcclProxyMsgFree) {
    // Ops of this connection may still be running on the progress thread, on resources proxyFree
    // releases and on the peer's memory the user side unmaps next. `closing` makes the progress
    // thread cancel them; the free waits (as an async op) until it has (NCCL frees its proxy
    // connections only after the progress thread stopped; lab 05 lets a user free one earlier).
    atomic_store_explicit(&e->closing, 1, memory_order_release);
    if (atomic_load_explicit(&e->nOps, memory_order_acquire) > 0) return mcclSuccess;
    *done = 1;
    return freeConnection(e);
  }
  if (op->h.type == mcclProxyMsgSetup) {
    if (tc->proxySetup == NULL) {
      *done = 1;
      return mcclSuccess;
    }
    mcclResult_t res = tc->proxySetup(&e->conn, e->proxy, op->req, op->h.reqSize, op->resp, op->h.respSize, done);
    // What the hook allocated for the peer becomes exportable once setup is done.
    if (res == mcclSuccess && *done && e->conn.exportHandle)
      res = mcclProxyRegisterExport(e->proxy, e->conn.exportHandle);
    return res;
  }
  if (tc->proxyConnect == NULL) {
    *done = 1;
    return mcclSuccess;
  }
  return tc->proxyConnect(&e->conn, e->proxy, op->req, op->h.reqSize, op->resp, op->h.respSize, done);
}

static int findConn(mcclProxyState* p, uint64_t c) {
  for (proxyConnEntry* e = p->conns; e; e = e->next)
    if ((uint64_t)(uintptr_t)e == c && !e->freed) return 1;
  return 0;
}

// One request from client i. Returns non-success only for failures of the service itself.
// noinline: lab.gdb stops here with its arguments intact.
__attribute__((noinline)) static mcclResult_t serviceRequest(mcclProxyState* p, int i) {
  char raw[sizeof(rpcHeader)];
  rpcHeader h;
  int eof = 0;
  mcclResult_t r = proxyReadFull(p->clientFds[i], raw, sizeof(raw), 1000, p->abortFlag, &eof);
  if (r == mcclSuccess) r = mcclProxyRpcHeaderDecode(raw, sizeof(raw), &h);
  if (r != mcclSuccess) {
    // A header that does not decode leaves the stream without framing: the client goes.
    if (!eof) WARN("Proxy: dropping client %d after a bad request", i);
    close(p->clientFds[i]);
    p->clientFds[i] = -1;
    return mcclSuccess;
  }
  // EXERCISE(05.service) STUB: close(p->clientFds[i]); p->clientFds[i] = -1; return mcclExerciseStub("05.service");
  asyncOp* op = calloc(1, sizeof(*op));
  if (op == NULL) {
    WARN("Proxy: out of memory");
    return mcclSystemError;
  }
  op->h = h;
  op->client = i;
  if (h.reqSize > 0 &&
      proxyReadFull(p->clientFds[i], op->req, (size_t)h.reqSize, 1000, p->abortFlag, NULL) != mcclSuccess) {
    free(op);
    close(p->clientFds[i]);
    p->clientFds[i] = -1;
    return mcclSuccess;
  }
  TRACE(MCCL_PROXY, "Proxy %d: request type %d id 0x%llx", p->rank, h.type, (unsigned long long)h.opId);
  switch (h.type) {
    case mcclProxyMsgInit: {
      // The request names the transport by its table index (as NCCL's ncclProxyInitReq carries
      // transport, send, tpLocalRank): the proxy finds the hooks itself, in the table it was created with.
      proxyInitReq in;
      if (mcclProxyInitReqDecode(op->req, (size_t)h.reqSize, &in) != mcclSuccess) {
        r = respond(p, i, h.opId, mcclInvalidArgument, NULL, 0);
        break;
      }
      if (p->transports[in.transport] == NULL) {
        WARN("Proxy %d: Init for transport %d, send %d: no such transport in this proxy's table", p->rank,
             (int)in.transport, (int)in.send);
        r = respond(p, i, h.opId, mcclInvalidArgument, NULL, 0);
        break;
      }
      const struct mcclTransport* tp = p->transports[in.transport];
      proxyConnEntry* e = calloc(1, sizeof(*e));
      if (e == NULL) {
        r = respond(p, i, h.opId, mcclSystemError, NULL, 0);
        break;
      }
      e->conn.send = in.send;
      e->conn.rank = p->rank;
      e->conn.transport = in.transport;
      e->conn.tcomm = in.send ? &tp->send : &tp->recv;
      e->proxy = p;
      e->next = p->conns;
      p->conns = e;
      uint64_t v = (uint64_t)(uintptr_t)e;
      INFO(MCCL_PROXY, "Proxy %d: Init -> connection %p (%s %s side)", p->rank, (void*)e, tp->name,
           in.send ? "send" : "recv");
      r = respond(p, i, h.opId, mcclSuccess, &v, sizeof(v));
      break;
    }
    case mcclProxyMsgSetup:
    case mcclProxyMsgConnect:
    case mcclProxyMsgFree: {
      if (!findConn(p, h.conn)) {
        WARN("Proxy %d: request type %d names unknown connection 0x%llx", p->rank, h.type, (unsigned long long)h.conn);
        r = respond(p, i, h.opId, mcclInvalidArgument, NULL, 0);
        break;
      }
      int done = 0;
      mcclResult_t hr = runHook(op, &done);
      INFO(MCCL_PROXY, "Proxy %d: %s on connection 0x%llx -> %s", p->rank,
           h.type == mcclProxyMsgSetup     ? "Setup"
           : h.type == mcclProxyMsgConnect ? "Connect"
                                           : "Free",
           (unsigned long long)h.conn,
           hr != mcclSuccess ? mcclGetErrorString(hr)
           : done            ? "done"
                             : "in progress (async op)");
      if (hr != mcclSuccess || done) {
        r = respond(p, i, h.opId, hr, op->resp, h.type == mcclProxyMsgFree ? 0 : h.respSize);
        break;
      }
      op->next = p->asyncOps;  // retried every loop until done
      p->asyncOps = op;
      return mcclSuccess;
    }
    case mcclProxyMsgStop:
      INFO(MCCL_PROXY, "Proxy %d: Stop", p->rank);
      atomic_store(&p->stopService, 1);
      r = respond(p, i, h.opId, mcclSuccess, NULL, 0);
      break;
    default:  // mcclProxyRpcHeaderDecode let through only the types above
      r = respond(p, i, h.opId, mcclInternalError, NULL, 0);
  }
  free(op);
  if (r != mcclSuccess) {  // the client went away mid-answer: forget it, the service carries on
    close(p->clientFds[i]);
    p->clientFds[i] = -1;
  }
  return mcclSuccess;
  // END EXERCISE(05.service)
}

static void progressAsyncOps(mcclProxyState* p) {
  for (asyncOp **pp = &p->asyncOps, *op = *pp; op; op = *pp) {
    int done = 0;
    mcclResult_t hr = runHook(op, &done);
    if (hr == mcclSuccess && !done) {
      pp = &op->next;
      continue;
    }
    TRACE(MCCL_PROXY, "Proxy %d: async op 0x%llx finished: %d", p->rank, (unsigned long long)op->h.opId, hr);
    if (respond(p, op->client, op->h.opId, hr, op->resp, op->h.respSize) != mcclSuccess &&
        p->clientFds[op->client] >= 0) {
      close(p->clientFds[op->client]);
      p->clientFds[op->client] = -1;
    }
    *pp = op->next;
    free(op);
  }
}

// How many fds that rank's QueryFd requests left with this proxy.
static int keptBy(const mcclProxyState* p, int rank) {
  int n = 0;
  for (int i = 0; i < p->nKept; i++) n += p->keptRank[i] == rank;
  return n;
}

// GetFd / QueryFd from any local process, on the lab 03 datagram socket (NCCL's proxyUDSRecvReq).
__attribute__((noinline)) static void serviceUds(mcclProxyState* p) {
  char raw[sizeof(udsReq)];
  udsReq q;
  int fd = -1;
  if (mcclIpcSocketRecvMsg(&p->uds, raw, sizeof(raw), &fd) != mcclSuccess) return;
  if (mcclProxyUdsReqDecode(raw, sizeof(raw), &q) != mcclSuccess) {
    // Nobody to answer: the requester's socket is named in the very message that did not decode.
    if (fd >= 0) close(fd);
    return;
  }
  udsResp a = {.opId = q.opId, .res = mcclSuccess, .rmtFd = -1};
  int sendFd = -1;
  const int from = q.clientRank - 1;  // the requester's socket is named with its rank + 1
  const int nranks = __atomic_load_n(&p->nranks, __ATOMIC_ACQUIRE);  // 0 until mcclProxyInit
  if (q.type == mcclProxyMsgGetFd && fd >= 0) {
    // Only a QueryFd brings an fd: one on a GetFd is nobody's to keep.
    close(fd);
    fd = -1;
  }
  int64_t withdrawnMs = -1;
  if (q.type == mcclProxyMsgGetFd && !isExported(p, q.handle, &withdrawnMs)) {
    // The driver does not validate handles (a bogus one crashes it), and a peer should only reach
    // memory its owner offered: NCCL trusts its peers here, minccl checks.
    if (withdrawnMs >= 0)
      WARN(
          "Proxy %d: GetFd from rank %d for handle 0x%llx, which this process withdrew from export %lld ms ago "
          "(the request came after its owner stopped offering it)",
          p->rank, from, (unsigned long long)q.handle, (long long)withdrawnMs);
    else
      WARN("Proxy %d: GetFd from rank %d for handle 0x%llx, which this process never registered for export", p->rank,
           from, (unsigned long long)q.handle);
    a.res = mcclInvalidArgument;
  } else if (q.type == mcclProxyMsgGetFd) {
    // Lazy export, as NCCL's proxyGetFd: only now does the owner turn the handle into an fd.
    CUresult cr = cuMemExportToShareableHandle(&sendFd, (CUmemGenericAllocationHandle)q.handle,
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (cr != CUDA_SUCCESS) {
      WARN("Proxy %d: GetFd: cuMemExportToShareableHandle(handle 0x%llx) failed: %s", p->rank,
           (unsigned long long)q.handle, mcclCuErrorString(cr));
      a.res = mcclUnhandledCudaError;
      sendFd = -1;
    }
    INFO(MCCL_PROXY, "Proxy %d: GetFd handle 0x%llx -> fd %d for rank %d", p->rank, (unsigned long long)q.handle,
         sendFd, from);
  } else if (q.type == mcclProxyMsgQueryFd && fd >= 0 &&
             (nranks > 0 ? from >= nranks || keptBy(p, from) >= MCCL_PROXY_MAX_KEPT_FDS
                         : p->nKept >= MCCL_PROXY_MAX_KEPT_FDS)) {
    // Any process of our uid can send here, so what it leaves with us is capped per rank it claims:
    // a flood costs at most MCCL_PROXY_MAX_KEPT_FDS fds per rank of the job, each closed at once past it.
    // Before mcclProxyInit the job's size is not known yet, while a peer that got through its own init
    // first may already ask: then the cap holds for all senders together.
    INFO(MCCL_PROXY, "Proxy %d: QueryFd from rank %d refused and its fd closed: %s", p->rank, from,
         nranks > 0 && from >= nranks ? "no such rank in this job"
         : nranks > 0                 ? "it already holds MCCL_PROXY_MAX_KEPT_FDS fds here"
                                      : "MCCL_PROXY_MAX_KEPT_FDS fds are held here before the job is known");
    a.res = mcclInvalidUsage;
  } else if (q.type == mcclProxyMsgQueryFd && fd >= 0) {
    if (p->nKept == p->capKept) {
      int cap = p->capKept ? 2 * p->capKept : 16;
      int* k = realloc(p->keptFds, sizeof(int) * (size_t)cap);
      int* r = k ? realloc(p->keptRank, sizeof(int) * (size_t)cap) : NULL;
      if (k) p->keptFds = k;
      if (r) {
        p->keptRank = r;
        p->capKept = cap;
      }
    }
    if (p->nKept < p->capKept) {
      p->keptRank[p->nKept] = from;
      p->keptFds[p->nKept++] = fd;
      a.rmtFd = fd;
      fd = -1;
    } else {
      a.res = mcclSystemError;
    }
  } else {
    WARN("Proxy %d: QueryFd from rank %d carried no fd", p->rank, from);
    a.res = mcclInvalidArgument;
  }
  if (fd >= 0) close(fd);
  // The reply is sent once, as NCCL's proxyGetFd sends it. The requester's socket existed when it
  // sent the request, so "no such socket" now means it has gone (its wait timed out, or it died),
  // never "not yet"; retrying until MCCL_IPC_TIMEOUT would hold up every RPC behind this one. The
  // lab 03 send tries first and retries only while it waits, and a set abort flag ends any wait:
  // with replyOnce as its flag it makes exactly one attempt.
  static uint32_t replyOnce = 1;
  volatile uint32_t* abortFlag = p->uds.abortFlag;
  p->uds.abortFlag = &replyOnce;
  mcclResult_t sr = mcclIpcSocketSendMsg(&p->uds, &a, sizeof(a), sendFd, q.clientRank, q.clientHash);
  p->uds.abortFlag = abortFlag;
  if (sr != mcclSuccess)
    INFO(MCCL_PROXY, "Proxy %d: rank %d's fd requester is gone; reply to request type %d dropped", p->rank, from,
         q.type);
  if (sendFd >= 0) close(sendFd);  // the kernel made the client its own copy
}

void* mcclProxyService(void* arg) {
  mcclProxyState* p = arg;
  mcclResult_t res = setProxyThreadContext(p, "mccl-proxy-svc");
  int udsFd = p->uds.fd;
  while (res == mcclSuccess && !atomic_load(&p->stopService)) {
    if (mcclIsAborted(p->abortFlag)) {
      INFO(MCCL_PROXY, "Proxy %d: service sees the abort flag", p->rank);
      break;
    }
    struct pollfd pfd[3 + MAX_CLIENTS];
    int map[3 + MAX_CLIENTS];
    int n = 0;
    pfd[n] = (struct pollfd){.fd = p->wakeFd, .events = POLLIN};
    map[n++] = -1;
    pfd[n] = (struct pollfd){.fd = p->listenFd, .events = POLLIN};
    map[n++] = -2;
    pfd[n] = (struct pollfd){.fd = udsFd, .events = POLLIN};
    map[n++] = -3;
    for (int i = 0; i < p->nClients; i++)
      if (p->clientFds[i] >= 0) {
        pfd[n] = (struct pollfd){.fd = p->clientFds[i], .events = POLLIN};
        map[n++] = i;
      }
    // Pending async ops are retried right away; otherwise sleep in poll, waking at least every
    // 100 ms to look at the abort flag.
    int pr = poll(pfd, (nfds_t)n, p->asyncOps ? 0 : 100);
    if (pr < 0 && errno != EINTR) {
      WARN("Proxy %d: poll failed: %s", p->rank, strerror(errno));
      res = mcclSystemError;
      break;
    }
    for (int k = 0; pr > 0 && k < n; k++) {
      if (pfd[k].revents == 0) continue;
      if (map[k] == -1) {
        uint64_t v;
        ssize_t rd = read(p->wakeFd, &v, sizeof(v));
        (void)rd;
      } else if (map[k] == -2) {
        int c = accept4(p->listenFd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue;
        // Requests carry pointers into this process: only our own process may connect.
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.pid != getpid()) {
          WARN("Proxy %d: refused a client from pid %d (only this process may connect)", p->rank, (int)cred.pid);
          close(c);
          continue;
        }
        int slot = -1;
        for (int i = 0; i < p->nClients; i++)
          if (p->clientFds[i] < 0) {
            slot = i;
            break;
          }
        if (slot < 0 && p->nClients < MAX_CLIENTS) slot = p->nClients++;
        if (slot < 0) {
          WARN("Proxy %d: too many clients", p->rank);
          close(c);
          continue;
        }
        p->clientFds[slot] = c;
        INFO(MCCL_PROXY, "Proxy %d: client %d connected", p->rank, slot);
      } else if (map[k] == -3) {
        serviceUds(p);
      } else {
        res = serviceRequest(p, map[k]);
        if (res != mcclSuccess) break;
      }
    }
    if (p->asyncOps) {
      progressAsyncOps(p);
      if (p->asyncOps) sched_yield();
    }
  }
  p->serviceResult = res;
  INFO(MCCL_PROXY, "Proxy %d: service thread exits (%s)", p->rank, mcclGetErrorString(res));
  return NULL;
}
