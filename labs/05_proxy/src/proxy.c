// The proxy, after NCCL's src/proxy.cc: a service thread answering RPCs from its clients (Init,
// Setup, Connect, Free, Stop) and fd requests from other processes (GetFd, QueryFd), and a progress
// thread that runs the transports' proxyProgress hooks on ops the user thread posts.
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include "mccl_checks.h"
#include "mccl_ipcsocket.h"
#include "mccl_param.h"
#include "mccl_proxy.h"

#define PROXY_ADDR_PREFIX "mccl-proxy-"
#define MAX_CLIENTS 64

// The proxy thread's half of a connection. `conn` comes first: connector->proxyConn points at it,
// so the client side finds the proxy (and the ops find their hooks) from the connector alone.
typedef struct proxyConnEntry {
  struct mcclProxyConnection conn;
  mcclProxyState* proxy;
  int freed;
  struct proxyConnEntry* next;
} proxyConnEntry;

// Stream RPC framing: header then reqSize bytes; response header then respSize bytes.
typedef struct {
  int32_t type, reqSize, respSize, pad;
  uint64_t opId;
  uint64_t conn;  // proxyConnEntry* in this process (Init: unused)
} rpcHeader;
typedef struct {
  uint64_t opId;
  int32_t res, respSize;
} rpcRespHeader;

// Datagram framing for GetFd/QueryFd on the lab 03 socket.
typedef struct {
  int32_t type, clientRank;
  uint64_t clientHash;
  uint64_t opId;
  uint64_t handle;
} udsReq;
typedef struct {
  uint64_t opId;
  int32_t res, rmtFd;
} udsResp;

// A Setup/Connect whose hook said "not done yet" (NCCL's ncclProxyAsyncOp).
typedef struct asyncOp {
  rpcHeader h;
  int client;  // index into clientFds
  // Hooks cast these to their request/response structs: keep them aligned like malloc'd memory.
  _Alignas(16) char req[MCCL_PROXY_MAX_MSG];
  _Alignas(16) char resp[MCCL_PROXY_MAX_MSG];
  struct asyncOp* next;
} asyncOp;

// A response the client read while waiting for another id (NCCL's expectedProxyResponse list).
typedef struct storedResp {
  uint64_t opId;
  int done;
  mcclResult_t res;
  int respSize;
  _Alignas(16) char resp[MCCL_PROXY_MAX_MSG];
  struct storedResp* next;
} storedResp;

enum { SLOT_FREE = 0, SLOT_POSTED = 1, SLOT_DONE = 2 };
typedef struct {
  struct mcclProxyOp op;
  _Atomic int status;
  mcclResult_t result;
} opSlot;

struct mcclProxyState {
  int rank, cudaDev;
  volatile uint32_t* abortFlag;
  char address[MCCL_SOCKET_NAME_LEN];
  uint64_t udsHash;
  int listenFd, wakeFd;
  mcclIpcSocket uds;
  int hasCpuset;
  cpu_set_t cpuset;

  // Client side (the user thread's link to its own service).
  pthread_mutex_t clientLock;
  int clientFd;
  storedResp* expected;
  int nranks;
  uint64_t* peerHash;

  // Service thread only.
  int clientFds[MAX_CLIENTS];
  int nClients;
  asyncOp* asyncOps;
  proxyConnEntry* conns;
  int* keptFds;
  int nKept, capKept;

  // Handles a peer may ask GetFd for: registered by the owner or by a Setup hook (exportHandle).
  pthread_mutex_t exportLock;
  uint64_t* exports;
  int nExports, capExports;

  // Progress: a single-producer/single-consumer ring of slot indices, and the slots.
  opSlot* slots;
  int* ring;
  _Atomic uint64_t ringHead;  // written by the user thread
  _Atomic uint64_t ringTail;  // written by the progress thread
  int* freeSlots;             // user thread only
  int nFree;
  _Atomic int sleeping;
  pthread_mutex_t sleepLock;
  pthread_cond_t sleepCond;

  _Atomic int stopService, stopProgress;
  pthread_t serviceThread, progressThread;
  int serviceStarted, progressStarted, stopped;
  mcclResult_t serviceResult, progressResult;
};

static uint64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int aborted(const mcclProxyState* p) {
  return p->abortFlag != NULL && __atomic_load_n(p->abortFlag, __ATOMIC_ACQUIRE) != 0;
}

static socklen_t abstractAddr(const char* name, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  size_t len = strnlen(name, sizeof(addr->sun_path) - 2);
  memcpy(addr->sun_path + 1, name, len);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

mcclResult_t mcclProxyParseCpuset(const char* list, cpu_set_t* set) {
  MCCL_ARGCHECK(list != NULL && set != NULL, "mcclProxyParseCpuset: NULL argument");
  cpu_set_t s;
  CPU_ZERO(&s);
  const char* p = list;
  int any = 0;
  while (*p) {
    char* end;
    errno = 0;
    long a = strtol(p, &end, 10), b;
    if (end == p || errno || a < 0) goto bad;
    b = a;
    p = end;
    if (*p == '-') {
      p++;
      b = strtol(p, &end, 10);
      if (end == p || errno || b < a) goto bad;
      p = end;
    }
    if (b >= CPU_SETSIZE) goto bad;
    for (long c = a; c <= b; c++) CPU_SET((int)c, &s);
    any = 1;
    if (*p == ',' && p[1] != '\0') p++;
    else if (*p != '\0') goto bad;
  }
  if (!any) goto bad;
  *set = s;
  return mcclSuccess;
bad:
  WARN("Invalid argument: CPU list '%s' (expected e.g. 0-3,8)", list);
  return mcclInvalidArgument;
}

// Both threads: pin (MCCL_PROXY_CPUSET), make the device current, name the thread for gdb.
static mcclResult_t setProxyThreadContext(mcclProxyState* p, const char* name) {
  pthread_setname_np(pthread_self(), name);
  if (p->hasCpuset) PTHREADCHECK(pthread_setaffinity_np(pthread_self(), sizeof(p->cpuset), &p->cpuset));
  CUDACHECK(cudaSetDevice(p->cudaDev));
  return mcclSuccess;
}

// ---- service thread ---------------------------------------------------------------------------

static mcclResult_t writeFull(int fd, const void* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = send(fd, (const char*)buf + done, n - done, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      WARN("Proxy: send failed: %s", strerror(errno));
      return mcclRemoteError;
    }
    done += (size_t)w;
  }
  return mcclSuccess;
}

// Reads n bytes, waiting at most timeoutMs between pieces; 0 bytes at the very start is EOF.
static mcclResult_t readFull(int fd, void* buf, size_t n, int timeoutMs, volatile uint32_t* abortFlag, int* eof) {
  size_t done = 0;
  if (eof) *eof = 0;
  while (done < n) {
    ssize_t r = recv(fd, (char*)buf + done, n - done, MSG_DONTWAIT);
    if (r > 0) { done += (size_t)r; continue; }
    if (r == 0) {
      if (done == 0 && eof) { *eof = 1; return mcclRemoteError; }
      WARN("Proxy: connection closed after %zu of %zu bytes", done, n);
      return mcclRemoteError;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      WARN("Proxy: recv failed: %s", strerror(errno));
      return mcclRemoteError;
    }
    if (abortFlag && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE)) return mcclInternalError;
    struct pollfd pf = {.fd = fd, .events = POLLIN, .revents = 0};
    int pr = poll(&pf, 1, timeoutMs < 100 ? timeoutMs : 100);
    if (pr == 0 && (timeoutMs -= 100) <= 0) {
      WARN("Proxy: timed out reading a message (%zu of %zu bytes)", done, n);
      return mcclTimeout;
    }
  }
  return mcclSuccess;
}

static mcclResult_t respond(mcclProxyState* p, int client, uint64_t opId, mcclResult_t res, const void* resp,
                            int respSize) {
  rpcRespHeader rh = {.opId = opId, .res = res, .respSize = res == mcclSuccess ? respSize : 0};
  int fd = p->clientFds[client];
  if (fd < 0) return mcclSuccess;  // the client left; nothing to answer
  char buf[sizeof(rh) + MCCL_PROXY_MAX_MSG];
  memcpy(buf, &rh, sizeof(rh));
  if (rh.respSize > 0) memcpy(buf + sizeof(rh), resp, (size_t)rh.respSize);
  return writeFull(fd, buf, sizeof(rh) + (size_t)rh.respSize);
}

// Run a Setup/Connect hook once: *done tells whether it finished (NCCL's proxyProgressAsync).
static int exportIndex(mcclProxyState* p, uint64_t handle) {
  for (int i = 0; i < p->nExports; i++)
    if (p->exports[i] == handle) return i;
  return -1;
}

mcclResult_t mcclProxyRegisterExport(mcclProxyState* proxy, CUmemGenericAllocationHandle handle) {
  MCCL_ARGCHECK(proxy != NULL && handle != 0, "proxy %p, handle 0x%llx", (void*)proxy, (unsigned long long)handle);
  mcclResult_t res = mcclSuccess;
  pthread_mutex_lock(&proxy->exportLock);
  if (exportIndex(proxy, (uint64_t)handle) < 0) {
    if (proxy->nExports == proxy->capExports) {
      int cap = proxy->capExports ? 2 * proxy->capExports : 16;
      uint64_t* e = realloc(proxy->exports, sizeof(uint64_t) * (size_t)cap);
      if (e == NULL) {
        WARN("Proxy %d: out of memory registering handle 0x%llx", proxy->rank, (unsigned long long)handle);
        res = mcclSystemError;
        goto unlock;
      }
      proxy->exports = e;
      proxy->capExports = cap;
    }
    proxy->exports[proxy->nExports++] = (uint64_t)handle;
  }
unlock:
  pthread_mutex_unlock(&proxy->exportLock);
  return res;
}

mcclResult_t mcclProxyDeregisterExport(mcclProxyState* proxy, CUmemGenericAllocationHandle handle) {
  MCCL_ARGCHECK(proxy != NULL, "proxy NULL");
  pthread_mutex_lock(&proxy->exportLock);
  int i = exportIndex(proxy, (uint64_t)handle);
  if (i >= 0) proxy->exports[i] = proxy->exports[--proxy->nExports];
  pthread_mutex_unlock(&proxy->exportLock);
  if (i < 0) {
    WARN("Proxy %d: handle 0x%llx was not registered for export", proxy->rank, (unsigned long long)handle);
    return mcclInvalidArgument;
  }
  return mcclSuccess;
}

static int isExported(mcclProxyState* p, uint64_t handle) {
  pthread_mutex_lock(&p->exportLock);
  int found = handle != 0 && exportIndex(p, handle) >= 0;
  pthread_mutex_unlock(&p->exportLock);
  return found;
}

static mcclResult_t runHook(asyncOp* op, int* done) {
  proxyConnEntry* e = (proxyConnEntry*)(uintptr_t)op->h.conn;
  const struct mcclTransportComm* tc = e->conn.tcomm;
  *done = 0;
  if (op->h.type == mcclProxyMsgSetup) {
    if (tc->proxySetup == NULL) { *done = 1; return mcclSuccess; }
    mcclResult_t res = tc->proxySetup(&e->conn, op->req, op->h.reqSize, op->resp, op->h.respSize, done);
    // What the hook allocated for the peer becomes exportable once setup is done.
    if (res == mcclSuccess && *done && e->conn.exportHandle) res = mcclProxyRegisterExport(e->proxy, e->conn.exportHandle);
    return res;
  }
  if (tc->proxyConnect == NULL) { *done = 1; return mcclSuccess; }
  return tc->proxyConnect(&e->conn, op->req, op->h.reqSize, op->resp, op->h.respSize, done);
}

static int findConn(mcclProxyState* p, uint64_t c) {
  for (proxyConnEntry* e = p->conns; e; e = e->next)
    if ((uint64_t)(uintptr_t)e == c && !e->freed) return 1;
  return 0;
}

// One request from client i. Returns non-success only for failures of the service itself.
// noinline: lab.gdb stops here with its arguments intact.
__attribute__((noinline)) static mcclResult_t serviceRequest(mcclProxyState* p, int i) {
  rpcHeader h;
  int eof = 0;
  mcclResult_t r = readFull(p->clientFds[i], &h, sizeof(h), 1000, p->abortFlag, &eof);
  if (r != mcclSuccess) {
    if (!eof) WARN("Proxy: dropping client %d after a bad request", i);
    close(p->clientFds[i]);
    p->clientFds[i] = -1;
    return mcclSuccess;
  }
  if (h.reqSize < 0 || h.reqSize > MCCL_PROXY_MAX_MSG || h.respSize < 0 || h.respSize > MCCL_PROXY_MAX_MSG) {
    WARN("Proxy: request type %d with reqSize=%d respSize=%d (max %d); closing client", h.type, h.reqSize, h.respSize,
         MCCL_PROXY_MAX_MSG);
    close(p->clientFds[i]);
    p->clientFds[i] = -1;
    return mcclSuccess;
  }
  asyncOp* op = calloc(1, sizeof(*op));
  if (op == NULL) { WARN("Proxy: out of memory"); return mcclSystemError; }
  op->h = h;
  op->client = i;
  if (h.reqSize > 0 && readFull(p->clientFds[i], op->req, (size_t)h.reqSize, 1000, p->abortFlag, NULL) != mcclSuccess) {
    free(op);
    close(p->clientFds[i]);
    p->clientFds[i] = -1;
    return mcclSuccess;
  }
  TRACE(MCCL_PROXY, "Proxy %d: request type %d id 0x%llx", p->rank, h.type, (unsigned long long)h.opId);
  switch (h.type) {
    case mcclProxyMsgInit: {
      // The request is the connector's {tcomm, send}: pointers are fine, the client is this process.
      struct { const struct mcclTransportComm* tcomm; int32_t send; } in;
      if (h.reqSize != (int)sizeof(in) || h.respSize != (int)sizeof(uint64_t)) {
        r = respond(p, i, h.opId, mcclInvalidArgument, NULL, 0);
        break;
      }
      memcpy(&in, op->req, sizeof(in));
      proxyConnEntry* e = calloc(1, sizeof(*e));
      if (e == NULL) { r = respond(p, i, h.opId, mcclSystemError, NULL, 0); break; }
      e->conn.send = in.send;
      e->conn.rank = p->rank;
      e->conn.tcomm = in.tcomm;
      e->proxy = p;
      e->next = p->conns;
      p->conns = e;
      uint64_t v = (uint64_t)(uintptr_t)e;
      INFO(MCCL_PROXY, "Proxy %d: Init -> connection %p (%s side)", p->rank, (void*)e, in.send ? "send" : "recv");
      r = respond(p, i, h.opId, mcclSuccess, &v, sizeof(v));
      break;
    }
    case mcclProxyMsgSetup:
    case mcclProxyMsgConnect: {
      if (!findConn(p, h.conn)) {
        WARN("Proxy %d: request type %d names unknown connection 0x%llx", p->rank, h.type, (unsigned long long)h.conn);
        r = respond(p, i, h.opId, mcclInvalidArgument, NULL, 0);
        break;
      }
      int done = 0;
      mcclResult_t hr = runHook(op, &done);
      INFO(MCCL_PROXY, "Proxy %d: %s on connection 0x%llx -> %s", p->rank,
           h.type == mcclProxyMsgSetup ? "Setup" : "Connect", (unsigned long long)h.conn,
           hr != mcclSuccess ? mcclGetErrorString(hr) : done ? "done" : "in progress (async op)");
      if (hr != mcclSuccess || done) {
        r = respond(p, i, h.opId, hr, op->resp, h.respSize);
        break;
      }
      op->next = p->asyncOps;  // retried every loop until done
      p->asyncOps = op;
      return mcclSuccess;
    }
    case mcclProxyMsgFree: {
      mcclResult_t fr = mcclSuccess;
      if (!findConn(p, h.conn)) {
        fr = mcclInvalidArgument;
      } else {
        proxyConnEntry* e = (proxyConnEntry*)(uintptr_t)h.conn;
        if (e->conn.exportHandle) {
          (void)mcclProxyDeregisterExport(p, e->conn.exportHandle);
          e->conn.exportHandle = 0;
        }
        if (e->conn.tcomm->proxyFree) fr = e->conn.tcomm->proxyFree(&e->conn);
        e->freed = 1;
      }
      r = respond(p, i, h.opId, fr, NULL, 0);
      break;
    }
    case mcclProxyMsgStop:
      INFO(MCCL_PROXY, "Proxy %d: Stop", p->rank);
      atomic_store(&p->stopService, 1);
      r = respond(p, i, h.opId, mcclSuccess, NULL, 0);
      break;
    default:
      WARN("Proxy %d: unknown request type %d", p->rank, h.type);
      r = respond(p, i, h.opId, mcclInvalidArgument, NULL, 0);
  }
  free(op);
  if (r != mcclSuccess) {  // the client went away mid-answer: forget it, the service carries on
    close(p->clientFds[i]);
    p->clientFds[i] = -1;
  }
  return mcclSuccess;
}

static void progressAsyncOps(mcclProxyState* p) {
  for (asyncOp **pp = &p->asyncOps, *op = *pp; op; op = *pp) {
    int done = 0;
    mcclResult_t hr = runHook(op, &done);
    if (hr == mcclSuccess && !done) { pp = &op->next; continue; }
    TRACE(MCCL_PROXY, "Proxy %d: async op 0x%llx finished: %d", p->rank, (unsigned long long)op->h.opId, hr);
    if (respond(p, op->client, op->h.opId, hr, op->resp, op->h.respSize) != mcclSuccess && p->clientFds[op->client] >= 0) {
      close(p->clientFds[op->client]);
      p->clientFds[op->client] = -1;
    }
    *pp = op->next;
    free(op);
  }
}

// GetFd / QueryFd from any local process, on the lab 03 datagram socket (NCCL's proxyUDSRecvReq).
__attribute__((noinline)) static void serviceUds(mcclProxyState* p) {
  udsReq q;
  int fd = -1;
  if (mcclIpcSocketRecvMsg(&p->uds, &q, sizeof(q), &fd) != mcclSuccess) return;
  udsResp a = {.opId = q.opId, .res = mcclSuccess, .rmtFd = -1};
  int sendFd = -1;
  if (q.type == mcclProxyMsgGetFd && !isExported(p, q.handle)) {
    // The driver does not validate handles (a bogus one crashes it), and a peer should only reach
    // memory its owner offered: NCCL trusts its peers here, minccl checks.
    WARN("Proxy %d: GetFd from rank %d for handle 0x%llx, which this process never registered for export", p->rank,
         q.clientRank, (unsigned long long)q.handle);
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
         sendFd, q.clientRank);
  } else if (q.type == mcclProxyMsgQueryFd && fd >= 0) {
    if (p->nKept == p->capKept) {
      int cap = p->capKept ? 2 * p->capKept : 16;
      int* k = realloc(p->keptFds, sizeof(int) * (size_t)cap);
      if (k) { p->keptFds = k; p->capKept = cap; }
    }
    if (p->nKept < p->capKept) {
      p->keptFds[p->nKept++] = fd;
      a.rmtFd = fd;
      fd = -1;
    } else {
      a.res = mcclSystemError;
    }
  } else {
    WARN("Proxy %d: unknown fd request type %d", p->rank, q.type);
    a.res = mcclInvalidArgument;
  }
  if (fd >= 0) close(fd);
  (void)mcclIpcSocketSendMsg(&p->uds, &a, sizeof(a), sendFd, q.clientRank, q.clientHash);
  if (sendFd >= 0) close(sendFd);  // the kernel made the client its own copy
}

static void* mcclProxyService(void* arg) {
  mcclProxyState* p = arg;
  mcclResult_t res = setProxyThreadContext(p, "mccl-proxy-svc");
  int udsFd = p->uds.fd;
  while (res == mcclSuccess && !atomic_load(&p->stopService)) {
    if (aborted(p)) {
      INFO(MCCL_PROXY, "Proxy %d: service sees the abort flag", p->rank);
      break;
    }
    struct pollfd pfd[3 + MAX_CLIENTS];
    int map[3 + MAX_CLIENTS];
    int n = 0;
    pfd[n] = (struct pollfd){.fd = p->wakeFd, .events = POLLIN}; map[n++] = -1;
    pfd[n] = (struct pollfd){.fd = p->listenFd, .events = POLLIN}; map[n++] = -2;
    pfd[n] = (struct pollfd){.fd = udsFd, .events = POLLIN}; map[n++] = -3;
    for (int i = 0; i < p->nClients; i++)
      if (p->clientFds[i] >= 0) { pfd[n] = (struct pollfd){.fd = p->clientFds[i], .events = POLLIN}; map[n++] = i; }
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
          if (p->clientFds[i] < 0) { slot = i; break; }
        if (slot < 0 && p->nClients < MAX_CLIENTS) slot = p->nClients++;
        if (slot < 0) { WARN("Proxy %d: too many clients", p->rank); close(c); continue; }
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

// ---- progress thread --------------------------------------------------------------------------

static void finishOp(opSlot* s, mcclResult_t res) {
  s->result = res;
  atomic_store_explicit(&s->status, SLOT_DONE, memory_order_release);
}

// Ops are progressed in posting order; an op waits while an earlier one on the same connection is
// still active, so one connection's messages never overtake each other (NCCL's progressOps walks
// its active list the same way, one connection's ops in order).
static void* mcclProxyProgress(void* arg) {
  mcclProxyState* p = arg;
  mcclResult_t res = setProxyThreadContext(p, "mccl-proxy-prog");
  int* active = malloc(sizeof(int) * MCCL_PROXY_MAX_OPS);
  int nActive = 0;
  if (active == NULL) res = mcclSystemError;
  uint64_t spinNs = (uint64_t)(mcclParamProxySpinUs() > 0 ? mcclParamProxySpinUs() : 0) * 1000;
  uint64_t idleSince = 0;
  while (res == mcclSuccess && !atomic_load(&p->stopProgress)) {
    // Take what the user thread posted.
    uint64_t head = atomic_load_explicit(&p->ringHead, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&p->ringTail, memory_order_relaxed);
    for (; tail != head; tail++) active[nActive++] = p->ring[tail % MCCL_PROXY_MAX_OPS];
    atomic_store_explicit(&p->ringTail, tail, memory_order_release);

    if (aborted(p)) {
      for (int i = 0; i < nActive; i++) finishOp(&p->slots[active[i]], mcclInternalError);
      nActive = 0;
    }
    int moved = 0;
    for (int i = 0; i < nActive;) {
      opSlot* s = &p->slots[active[i]];
      int blocked = 0;
      for (int j = 0; j < i && !blocked; j++) blocked = p->slots[active[j]].op.connection == s->op.connection;
      if (blocked) { i++; continue; }
      uint64_t before = s->op.transmitted + s->op.done;
      int done = 0;
      mcclResult_t r = s->op.connection->tcomm->proxyProgress(&s->op, &done);
      if (r != mcclSuccess || done) {
        TRACE(MCCL_PROXY, "Proxy %d: op %d finished: %d", p->rank, active[i], r);
        finishOp(s, r);
        memmove(&active[i], &active[i + 1], sizeof(int) * (size_t)(nActive - i - 1));
        nActive--;
        moved = 1;
        continue;
      }
      if (s->op.transmitted + s->op.done != before) moved = 1;
      i++;
    }
    if (nActive > 0) {
      idleSince = 0;
      if (!moved) sched_yield();  // waiting on the peer or the copy engine: let others run
      continue;
    }
    // Idle: spin, then yield, then sleep until a post signals us (or 100 ms, for the abort flag).
    uint64_t now = nowNs();
    if (idleSince == 0) idleSince = now;
    if (now - idleSince < spinNs) continue;
    if (now - idleSince < spinNs + 1000000) { sched_yield(); continue; }
    pthread_mutex_lock(&p->sleepLock);
    atomic_store(&p->sleeping, 1);
    if (atomic_load(&p->ringHead) == atomic_load(&p->ringTail) && !atomic_load(&p->stopProgress) && !aborted(p)) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 100 * 1000 * 1000;
      if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
      pthread_cond_timedwait(&p->sleepCond, &p->sleepLock, &ts);
    }
    atomic_store(&p->sleeping, 0);
    pthread_mutex_unlock(&p->sleepLock);
    // Only work earns a fresh spin; a timed-out wait goes straight back to sleep.
    if (atomic_load(&p->ringHead) != atomic_load(&p->ringTail)) idleSince = 0;
  }
  // Stopped: whatever is still in flight or posted fails, so no waiter hangs.
  if (active) {
    uint64_t head = atomic_load(&p->ringHead), tail = atomic_load(&p->ringTail);
    for (; tail != head; tail++) active[nActive++] = p->ring[tail % MCCL_PROXY_MAX_OPS];
    atomic_store(&p->ringTail, tail);
    for (int i = 0; i < nActive; i++) finishOp(&p->slots[active[i]], mcclInternalError);
  }
  free(active);
  p->progressResult = res;
  INFO(MCCL_PROXY, "Proxy %d: progress thread exits (%s)", p->rank, mcclGetErrorString(res));
  return NULL;
}

// ---- create / destroy -------------------------------------------------------------------------

static void closeEverything(mcclProxyState* p) {
  for (asyncOp* op = p->asyncOps; op;) {
    asyncOp* n = op->next;
    free(op);
    op = n;
  }
  for (proxyConnEntry* e = p->conns; e;) {
    proxyConnEntry* n = e->next;
    if (!e->freed && e->conn.tcomm && e->conn.tcomm->proxyFree) {
      mcclResult_t r = e->conn.tcomm->proxyFree(&e->conn);
      if (r != mcclSuccess) WARN("Proxy %d: proxyFree of connection %p failed: %d", p->rank, (void*)e, r);
    }
    free(e);
    e = n;
  }
  for (storedResp* s = p->expected; s;) {
    storedResp* n = s->next;
    free(s);
    s = n;
  }
  for (int i = 0; i < p->nClients; i++)
    if (p->clientFds[i] >= 0) close(p->clientFds[i]);
  for (int i = 0; i < p->nKept; i++) close(p->keptFds[i]);
  free(p->keptFds);
  free(p->exports);
  pthread_mutex_destroy(&p->exportLock);
  if (p->clientFd >= 0) close(p->clientFd);
  if (p->uds.fd >= 0) mcclIpcSocketClose(&p->uds);
  if (p->listenFd >= 0) close(p->listenFd);
  if (p->wakeFd >= 0) close(p->wakeFd);
  pthread_cond_destroy(&p->sleepCond);
  pthread_mutex_destroy(&p->sleepLock);
  pthread_mutex_destroy(&p->clientLock);
  free(p->peerHash);
  free(p->slots);
  free(p->ring);
  free(p->freeSlots);
  free(p);
}

mcclResult_t mcclProxyCreate(int rank, int cudaDev, volatile uint32_t* abortFlag, mcclProxyState** out) {
  MCCL_ARGCHECK(out != NULL, "mcclProxyCreate: out is NULL");
  MCCL_ARGCHECK(rank >= 0, "mcclProxyCreate: rank=%d", rank);
  MCCL_ARGCHECK(cudaDev >= 0, "mcclProxyCreate: cudaDev=%d", cudaDev);
  mcclResult_t res = mcclSuccess;
  mcclProxyState* p = calloc(1, sizeof(*p));
  if (p == NULL) { WARN("Proxy: out of memory"); return mcclSystemError; }
  p->rank = rank;
  p->cudaDev = cudaDev;
  p->abortFlag = abortFlag;
  p->listenFd = p->wakeFd = p->clientFd = p->uds.fd = -1;
  pthread_mutex_init(&p->clientLock, NULL);
  pthread_mutex_init(&p->exportLock, NULL);
  pthread_mutex_init(&p->sleepLock, NULL);
  pthread_cond_init(&p->sleepCond, NULL);
  const char* cpus = mcclParamProxyCpuset();
  if (cpus) {
    MCCLCHECKGOTO(mcclProxyParseCpuset(cpus, &p->cpuset), res, fail);
    p->hasCpuset = 1;
  }
  p->slots = calloc(MCCL_PROXY_MAX_OPS, sizeof(opSlot));
  p->ring = calloc(MCCL_PROXY_MAX_OPS, sizeof(int));
  p->freeSlots = calloc(MCCL_PROXY_MAX_OPS, sizeof(int));
  if (!p->slots || !p->ring || !p->freeSlots) { WARN("Proxy: out of memory"); res = mcclSystemError; goto fail; }
  for (int i = 0; i < MCCL_PROXY_MAX_OPS; i++) p->freeSlots[i] = MCCL_PROXY_MAX_OPS - 1 - i;
  p->nFree = MCCL_PROXY_MAX_OPS;

  if (getrandom(&p->udsHash, sizeof(p->udsHash), 0) != (ssize_t)sizeof(p->udsHash)) {
    WARN("Proxy: getrandom failed: %s", strerror(errno));
    res = mcclSystemError;
    goto fail;
  }
  snprintf(p->address, sizeof(p->address), PROXY_ADDR_PREFIX "%016llx", (unsigned long long)p->udsHash);
  struct sockaddr_un addr;
  socklen_t alen = abstractAddr(p->address, &addr);
  SYSCHECKGOTO(p->listenFd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), res, fail);
  SYSCHECKGOTO(bind(p->listenFd, (struct sockaddr*)&addr, alen), res, fail);
  SYSCHECKGOTO(listen(p->listenFd, 64), res, fail);
  SYSCHECKGOTO(p->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), res, fail);
  // The fd service: a lab 03 datagram socket named (0, udsHash); clients derive it from the address.
  MCCLCHECKGOTO(mcclIpcSocketInit(&p->uds, 0, p->udsHash, abortFlag), res, fail);

  PTHREADCHECKGOTO(pthread_create(&p->serviceThread, NULL, mcclProxyService, p), res, fail);
  p->serviceStarted = 1;
  PTHREADCHECKGOTO(pthread_create(&p->progressThread, NULL, mcclProxyProgress, p), res, stop_threads);
  p->progressStarted = 1;
  INFO(MCCL_PROXY | MCCL_INIT, "Proxy %d: created, listening on @%s", rank, p->address);
  *out = p;
  return mcclSuccess;

stop_threads:
  atomic_store(&p->stopService, 1);
  pthread_join(p->serviceThread, NULL);
fail:
  closeEverything(p);
  return res;
}

const char* mcclProxyGetAddress(const mcclProxyState* proxy) { return proxy ? proxy->address : ""; }

static int parseAddr(const char* a, uint64_t* hash) {
  size_t pl = strlen(PROXY_ADDR_PREFIX);
  if (strncmp(a, PROXY_ADDR_PREFIX, pl) != 0 || strlen(a) != pl + 16) return 0;
  char* end;
  *hash = strtoull(a + pl, &end, 16);
  return *end == '\0';
}

mcclResult_t mcclProxyInit(mcclProxyState* proxy, mcclBootstrap* bs) {
  MCCL_ARGCHECK(proxy != NULL && bs != NULL, "mcclProxyInit: proxy=%p bs=%p", (void*)proxy, (void*)bs);
  int n = mcclBootstrapNRanks(bs);
  uint64_t* h = calloc((size_t)n, sizeof(uint64_t));
  if (h == NULL) { WARN("Proxy: out of memory"); return mcclSystemError; }
  for (int r = 0; r < n; r++) {
    mcclPeerInfo info;
    mcclResult_t res = mcclBootstrapGetPeerInfo(bs, r, &info);
    if (res != mcclSuccess || !parseAddr(info.proxyAddr, &h[r])) {
      free(h);
      WARN("Invalid argument: mcclProxyInit: rank %d's peer record has no proxy address ('%s')", r, info.proxyAddr);
      return mcclInvalidArgument;
    }
  }
  free(proxy->peerHash);
  proxy->peerHash = h;
  proxy->nranks = n;
  return mcclSuccess;
}

mcclResult_t mcclProxyGetThreads(const mcclProxyState* proxy, pthread_t* service, pthread_t* progress) {
  MCCL_ARGCHECK(proxy != NULL, "mcclProxyGetThreads: proxy is NULL");
  if (proxy->stopped) return mcclInvalidUsage;
  if (service) *service = proxy->serviceThread;
  if (progress) *progress = proxy->progressThread;
  return mcclSuccess;
}

// ---- client side of the RPCs ------------------------------------------------------------------

static mcclProxyState* proxyOf(struct mcclConnector* c) {
  return (c && c->proxyConn) ? ((proxyConnEntry*)c->proxyConn)->proxy : NULL;
}

static mcclResult_t clientConnect(mcclProxyState* p) {
  if (p->clientFd >= 0) return mcclSuccess;
  if (p->stopped) { WARN("Proxy %d: stopped; no more requests", p->rank); return mcclInvalidUsage; }
  struct sockaddr_un addr;
  socklen_t alen = abstractAddr(p->address, &addr);
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

static mcclResult_t callAsync(mcclProxyState* p, uint64_t conn, int type, const void* req, int reqSize, int respSize,
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
  if (s == NULL) { WARN("Proxy: out of memory"); res = mcclSystemError; goto out; }
  s->opId = (uint64_t)(uintptr_t)opId;
  s->respSize = respSize;
  rpcHeader h = {.type = type, .reqSize = reqSize, .respSize = respSize, .pad = 0, .opId = s->opId, .conn = conn};
  char buf[sizeof(h) + MCCL_PROXY_MAX_MSG];
  memcpy(buf, &h, sizeof(h));
  if (reqSize) memcpy(buf + sizeof(h), req, (size_t)reqSize);
  res = writeFull(p->clientFd, buf, sizeof(h) + (size_t)reqSize);
  if (res != mcclSuccess) { free(s); goto out; }
  s->next = p->expected;  // expectedProxyResponseEnqueue
  p->expected = s;
out:
  pthread_mutex_unlock(&p->clientLock);
  return res;
}

static mcclResult_t pollResponse(mcclProxyState* p, void* resp, void* opId) {
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
    MCCLCHECKGOTO(readFull(p->clientFd, &rh, sizeof(rh), 1000, NULL, NULL), res, out);
    storedResp* e = p->expected;
    while (e && e->opId != rh.opId) e = e->next;
    char sink[MCCL_PROXY_MAX_MSG];
    if (rh.respSize < 0 || rh.respSize > MCCL_PROXY_MAX_MSG) { res = mcclRemoteError; goto out; }
    MCCLCHECKGOTO(readFull(p->clientFd, e ? e->resp : sink, (size_t)rh.respSize, 1000, NULL, NULL), res, out);
    if (e) { e->done = 1; e->res = (mcclResult_t)rh.res; }
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

static mcclResult_t callBlocking(mcclProxyState* p, uint64_t conn, int type, const void* req, int reqSize, void* resp,
                                 int respSize) {
  char opIdByte;  // any unique address will do
  MCCLCHECK(callAsync(p, conn, type, req, reqSize, respSize, &opIdByte));
  int64_t timeoutMs = mcclParamProxyTimeout();  // <= 0: no deadline (`make gdb`); the abort flag still ends it
  uint64_t deadline = timeoutMs > 0 ? nowNs() + (uint64_t)timeoutMs * 1000000ULL : UINT64_MAX;
  for (int spins = 0;; spins++) {
    mcclResult_t r = pollResponse(p, resp, &opIdByte);
    if (r != mcclInProgress) return r;
    if (aborted(p)) { WARN("Proxy %d: aborted while waiting for request type %d", p->rank, type); goto drop; }
    if (nowNs() > deadline) {
      WARN("Proxy %d: request type %d got no answer in MCCL_PROXY_TIMEOUT=%lld ms", p->rank, type,
           (long long)mcclParamProxyTimeout());
      pollResponse(p, NULL, &opIdByte);
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
  return aborted(p) ? mcclInternalError : mcclTimeout;
}

mcclResult_t mcclProxyConnect(mcclProxyState* proxy, struct mcclConnector* connector) {
  MCCL_ARGCHECK(proxy != NULL, "mcclProxyConnect: proxy is NULL");
  MCCL_ARGCHECK(connector != NULL && connector->transportComm != NULL,
                "mcclProxyConnect: connector=%p has no transport (call mcclConnectorInit first)", (void*)connector);
  struct { const struct mcclTransportComm* tcomm; int32_t send; } in;
  memset(&in, 0, sizeof(in));
  in.tcomm = connector->transportComm;
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
  return callAsync(p, (uint64_t)(uintptr_t)connector->proxyConn, type, req, reqSize, respSize, opId);
}

mcclResult_t mcclPollProxyResponse(struct mcclConnector* connector, void* resp, void* opId) {
  mcclProxyState* p = proxyOf(connector);
  MCCL_ARGCHECK(p != NULL, "mcclPollProxyResponse: connector=%p is not connected to a proxy", (void*)connector);
  return pollResponse(p, resp, opId);
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
  MCCLCHECK(mcclIpcSocketInit(&cli, p->rank + 1, myHash, p->abortFlag));
  q->clientRank = p->rank + 1;
  q->clientHash = myHash;
  q->opId = myHash;
  MCCLCHECKGOTO(mcclIpcSocketSendMsg(&cli, q, sizeof(*q), sendFd, 0, p->peerHash[peerRank]), res, out);
  udsResp got;
  int fd = -1;
  MCCLCHECKGOTO(mcclIpcSocketRecvMsg(&cli, &got, sizeof(got), recvFd ? &fd : NULL), res, out);
  if (got.opId != q->opId) {
    WARN("Proxy %d: fd service of rank %d answered another request", p->rank, peerRank);
    if (fd >= 0) close(fd);
    res = mcclRemoteError;
    goto out;
  }
  *a = got;
  if (recvFd) *recvFd = fd;
out:
  mcclIpcSocketClose(&cli);
  return res;
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
  MCCLCHECK(udsCall(proxy, peerRank, &q, localFd, &a, NULL));
  if (a.res != mcclSuccess) return (mcclResult_t)a.res;
  *rmtFd = a.rmtFd;
  return mcclSuccess;
}

// ---- ops --------------------------------------------------------------------------------------

mcclResult_t mcclProxyPostOp(mcclProxyState* proxy, struct mcclConnector* connector, void* buff, size_t nbytes,
                             mcclProxyRequest* req) {
  MCCL_ARGCHECK(proxy != NULL, "mcclProxyPostOp: proxy is NULL");
  MCCL_ARGCHECK(req != NULL, "mcclProxyPostOp: req is NULL");
  MCCL_ARGCHECK(proxyOf(connector) == proxy, "mcclProxyPostOp: connector=%p is not connected to this proxy",
                (void*)connector);
  if (proxy->stopped || atomic_load(&proxy->stopProgress)) {
    WARN("Proxy %d: stopped; cannot post", proxy->rank);
    return mcclInvalidUsage;
  }
  if (proxy->nFree == 0) {
    WARN("Proxy %d: %d ops in flight, the pool is full", proxy->rank, MCCL_PROXY_MAX_OPS);
    return mcclInvalidUsage;
  }
  int idx = proxy->freeSlots[proxy->nFree - 1];
  opSlot* s = &proxy->slots[idx];
  MCCLCHECK(mcclProxyOpInit(&s->op, connector, buff, nbytes, proxy->abortFlag));
  proxy->nFree--;
  s->result = mcclSuccess;
  atomic_store_explicit(&s->status, SLOT_POSTED, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&proxy->ringHead, memory_order_relaxed);
  proxy->ring[head % MCCL_PROXY_MAX_OPS] = idx;
  atomic_store(&proxy->ringHead, head + 1);  // seq_cst: ordered before the load of `sleeping`
  if (atomic_load(&proxy->sleeping)) {
    pthread_mutex_lock(&proxy->sleepLock);
    pthread_cond_signal(&proxy->sleepCond);
    pthread_mutex_unlock(&proxy->sleepLock);
  }
  *req = idx;
  return mcclSuccess;
}

mcclResult_t mcclProxyTest(mcclProxyState* proxy, mcclProxyRequest req, int* done) {
  MCCL_ARGCHECK(proxy != NULL && done != NULL, "mcclProxyTest: NULL argument");
  MCCL_ARGCHECK(req >= 0 && req < MCCL_PROXY_MAX_OPS, "mcclProxyTest: req=%d", req);
  opSlot* s = &proxy->slots[req];
  int st = atomic_load_explicit(&s->status, memory_order_acquire);
  MCCL_ARGCHECK(st != SLOT_FREE, "mcclProxyTest: req=%d is not a posted op", req);
  if (st != SLOT_DONE) { *done = 0; return mcclSuccess; }
  *done = 1;
  mcclResult_t r = s->result;
  atomic_store_explicit(&s->status, SLOT_FREE, memory_order_relaxed);
  proxy->freeSlots[proxy->nFree++] = req;
  return r;
}

mcclResult_t mcclProxyWait(mcclProxyState* proxy, mcclProxyRequest req) {
  for (int spins = 0;; spins++) {
    int done = 0;
    mcclResult_t r = mcclProxyTest(proxy, req, &done);
    if (r != mcclSuccess || done) return r;
    if (spins > 100) sched_yield();
  }
}

mcclResult_t mcclProxyStop(mcclProxyState* proxy) {
  MCCL_ARGCHECK(proxy != NULL, "mcclProxyStop: proxy is NULL");
  if (proxy->stopped) return mcclSuccess;
  mcclResult_t res = mcclSuccess;
  // The progress thread first: it must not run hooks on connections the service is about to free.
  if (proxy->progressStarted) {
    pthread_mutex_lock(&proxy->sleepLock);
    atomic_store(&proxy->stopProgress, 1);
    pthread_cond_signal(&proxy->sleepCond);
    pthread_mutex_unlock(&proxy->sleepLock);
    pthread_join(proxy->progressThread, NULL);
    proxy->progressStarted = 0;
    if (proxy->progressResult != mcclSuccess) res = proxy->progressResult;
  }
  if (proxy->serviceStarted) {
    // A Stop message, as NCCL's ncclProxyStop sends; when the service is unreachable (aborted,
    // wedged) the flag and the eventfd end it anyway.
    char opId;
    if (!aborted(proxy) && callAsync(proxy, 0, mcclProxyMsgStop, NULL, 0, 0, &opId) == mcclSuccess) {
      uint64_t deadline = nowNs() + 1000000000ULL;
      while (pollResponse(proxy, NULL, &opId) == mcclInProgress && nowNs() < deadline) {
        struct pollfd pf = {.fd = proxy->clientFd, .events = POLLIN, .revents = 0};
        poll(&pf, 1, 10);
      }
    }
    atomic_store(&proxy->stopService, 1);
    uint64_t one = 1;
    ssize_t w = write(proxy->wakeFd, &one, sizeof(one));
    (void)w;
    pthread_join(proxy->serviceThread, NULL);
    proxy->serviceStarted = 0;
    if (proxy->serviceResult != mcclSuccess && res == mcclSuccess) res = proxy->serviceResult;
  }
  proxy->stopped = 1;
  INFO(MCCL_PROXY, "Proxy %d: stopped", proxy->rank);
  return res;
}

mcclResult_t mcclProxyDestroy(mcclProxyState* proxy) {
  if (proxy == NULL) return mcclSuccess;
  mcclResult_t res = mcclProxyStop(proxy);
  // Ops the user never waited for: their slots die with the pool.
  closeEverything(proxy);
  return res;
}
