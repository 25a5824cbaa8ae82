// Lab 05, private: what the proxy's source files share (the state of one proxy, the wire formats
// of its two sockets, and the functions one file calls in another). Not installed; not for users.
#ifndef MCCL_PROXY_INTERNAL_H_
#define MCCL_PROXY_INTERNAL_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "mccl_ipcsocket.h"
#include "mccl_proxy.h"
#include "mccl_socket.h"
#include "mccl_utils.h"
#include "proxy_wire.h"  // rpcHeader, rpcRespHeader, proxyInitReq, udsReq, udsResp and their decoders

#define PROXY_ADDR_PREFIX "mccl-proxy-"
#define MAX_CLIENTS 64

// The proxy thread's half of a connection. `conn` comes first: connector->proxyConn points at it,
// so the client side finds the proxy (and the ops find their hooks) from the connector alone.
typedef struct proxyConnEntry {
  struct mcclProxyConnection conn;
  mcclProxyState* proxy;
  int freed;            // service thread only
  _Atomic int nOps;     // ops posted on it and not yet retired by the progress thread
  _Atomic int closing;  // a Free has begun: the progress thread cancels its ops
  struct proxyConnEntry* next;
} proxyConnEntry;

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
// One posted op's progress state (NCCL's ncclProxyArgs, built from the posted ncclProxyOp by
// ncclProxyOpToArgs in ProxyAppend); the posted op itself is not kept.
typedef struct {
  struct mcclProxyArgs args;
  _Atomic int status;
  mcclResult_t result;
  uint64_t drainUntilNs;  // args.drainOnClose: when the drain after its connector's free gives up (0: not yet)
} opSlot;

struct mcclProxyState {
  int rank, cudaDev;
  volatile uint32_t* abortFlag;
  struct mcclTransport* const* transports;  // the table an Init's index picks the hooks from (mcclProxyCreate)
  char address[MCCL_SOCKET_NAME_LEN];
  uint64_t udsHash;
  int listenFd, wakeFd;
  mcclIpcSocket uds;
  int hasCpuset;
  cpu_set_t cpuset;
  pthread_mutex_t startLock;  // nStarted: threads past setProxyThreadContext (mcclProxyCreate waits)
  pthread_cond_t startCond;
  int nStarted;

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
  int* keptFds;   // fds QueryFd requests left here, kept until destroy
  int* keptRank;  // the rank each came from (as its request claims)
  int nKept, capKept;

  // Handles a peer may ask GetFd for: registered by the owner or by a Setup hook (exportHandle).
  // Counted: one allocation may be offered twice at once (two windows on one buffer), and stays
  // offered until both have let go.
  pthread_mutex_t exportLock;
  struct proxyExport {
    uint64_t handle;
    int refs;
  } * exports;
  int nExports, capExports;
  // The last handles withdrawn, and when: a refused GetFd then says whether its handle was offered and
  // withdrawn (a peer asked too late) or never offered here at all (a wrong handle or rank).
  struct {
    uint64_t handle, ms;
  } withdrawn[8];
  int nWithdrawn;

  // Progress: a single-producer/single-consumer ring of slot indices, and the slots.
  opSlot* slots;
  int* ring;
  _Atomic uint64_t ringHead;  // written by the user thread
  _Atomic uint64_t ringTail;  // written by the progress thread
  int* freeSlots;             // user thread only
  int nFree;
  uint64_t nPosted;  // user thread only: the next op's opCount
  _Atomic int sleeping;
  pthread_mutex_t sleepLock;
  pthread_cond_t sleepCond;

  _Atomic int stopService, stopProgress;
  pthread_t serviceThread, progressThread;
  int serviceStarted, progressStarted, stopped;
  mcclResult_t serviceResult, progressResult;
};

// The proxy an Init RPC bound this connector to, or NULL.
static inline mcclProxyState* proxyOf(struct mcclConnector* c) {
  return (c && c->proxyConn) ? ((proxyConnEntry*)c->proxyConn)->proxy : NULL;
}

// proxy.c: thread set-up and the stream framing both ends of an RPC use.
mcclResult_t setProxyThreadContext(mcclProxyState* p, const char* name);
mcclResult_t proxyWriteFull(int fd, const void* buf, size_t n);
mcclResult_t proxyReadFull(int fd, void* buf, size_t n, int timeoutMs, volatile uint32_t* abortFlag, int* eof);

// proxy_service.c: the service thread.
void* mcclProxyService(void* arg);

// proxy_progress.c: the progress thread.
void* mcclProxyProgress(void* arg);

// proxy_client.c: one RPC to this process's own service, sent and collected.
mcclResult_t proxyCallAsync(mcclProxyState* p, uint64_t conn, int type, const void* req, int reqSize, int respSize,
                            void* opId);
mcclResult_t proxyPollResponse(mcclProxyState* p, void* resp, void* opId);
// The clock (ns) a blocking call's MCCL_PROXY_TIMEOUT deadline is measured with; tests replace it.
extern uint64_t (*proxyClientClock)(void);

#endif
