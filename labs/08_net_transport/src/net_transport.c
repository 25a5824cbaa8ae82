// Lab 08: the NET transport (NCCL 2.28.9 src/transport/net.cc: canConnect, sendSetup/recvSetup,
// sendConnect/recvConnect, sendProxySetup/recvProxySetup, sendProxyConnect/recvProxyConnect,
// sendProxyProgress/recvProxyProgress). Ranks on different hosts share no memory, so each side keeps
// its own FIFO in pinned host memory (lab 02) and the proxy's progress thread (lab 05) moves the
// slots through the network plugin:
//   sender: the kernel fills a slot and publishes tail (as for SHM); the proxy sees tail move,
//           isends the slot, and when the send completes publishes head (the slot is free again);
//   receiver: the proxy irecvs into every slot the kernel has freed (head), and when a receive
//           completes publishes tail; the kernel reads the slot and returns it with head.
// The kernels (lab 06) cannot tell: a connector has buffs, head, tail and connFifo, as for SHM.
//
// One difference from NCCL: NCCL posts a proxy op per collective with its step count and protocol;
// minccl's kernels do not tell the host how many steps a collective takes, so each NET connector has
// one proxy op for its whole life, which follows tail and head as they move. The sender learns where a
// slice starts from connFifo[slot].size (the kernel writes it at a slice's first step; the proxy
// resets it to -1 once read), and sends every step as its own message (the rest of the slice, at most
// a slot; 0 bytes for steps a kernel skipped), so the receiver publishes one step per message.
//
// LL steps (NCCL sends LL over the network too, for small messages): an LL kernel publishes no tail,
// only connFifo[slot].size (the bytes of lines) and then the lines, each carrying the step's flag. So
// the sender's proxy takes a step as LL when its size is announced and every line of the slot in the
// LL FIFO carries mcclLLFlag(step), as NCCL's sendProxyProgress checks the flags of an LL step. Not
// knowing the protocol of the steps to come (NCCL's op says it), the receiver's proxy receives every
// step into the SIMPLE slot; when one arrives whose lines all carry that step's flag it copies them
// into the LL slot, where an LL kernel waits for them, and it publishes tail for every step, which a
// SIMPLE kernel waits for. A SIMPLE payload that happened to look like lines of its own step's flag is
// copied too, harmlessly: no LL kernel waits for the flag of a SIMPLE step. An LL step must fit a
// SIMPLE slot (llStepSize <= stepSize, true of the defaults); lab 07 keeps a communicator whose NET
// connections do not fit on SIMPLE (mcclLabComm::simpleOnly).
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_host_alloc.h"
#include "mccl_net.h"
#include "mccl_p2p.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"

// Everything one side of a NET connection owns. The user side allocates it; the proxy side (a
// thread of the same process) uses the same object through connection->transportResources.
struct netResources {
  int send;                     // 1: send side
  int peer;                     // the peer's rank (logs)
  int channelId;                // logs
  char* hostMem;                // one pinned allocation: sendMem page, recvMem page, LL FIFO, SIMPLE FIFO
  struct mcclSendMem* sendMem;  // head: the sender's proxy writes it (send side), the kernel writes it (recv side)
  struct mcclRecvMem* recvMem;  // tail and connFifo: the kernel writes them (send side), the proxy (recv side)
  char* llBuff;                 // LL FIFO: send side, the kernel's lines; recv side, the proxy copies them here
  char* buff;                   // SIMPLE FIFO, MCCL_STEPS slots of stepSize bytes
  int buffSize, llBuffSize, stepSize;
  uint64_t initialStep;
  // Proxy side.
  const mcclNet_t* net;
  char handle[MCCL_NET_HANDLE_MAXSIZE];  // recv: from listen; send: the peer's, kept across connect calls
  void* listenComm;
  void* netComm;  // sendComm or recvComm
  void* mhandle;
  void* llMhandle;  // send: the LL FIFO's registration (LL steps are sent from it)
  uint64_t posted, done;       // steps posted to the plugin / completed (absolute)
  int64_t remaining;           // send: bytes of the current slice not yet sent
  int ll[MCCL_STEPS];          // send: per slot, 1 when the step in flight went as LL lines
  uint64_t llSteps, simpleSteps;  // steps moved as LL lines / otherwise (mcclNetGetStats; atomics)
  void* requests[MCCL_STEPS];  // per slot: the plugin request in flight
  int started;
  // User side: the persistent proxy op.
  mcclProxyState* proxy;
  mcclProxyRequest opReq;
  int opPosted;
  // Who frees this object (atomics): the user side, unless the proxy half still holds it when the user
  // side lets go. After an abort, the proxy is stopped first and the connectors free only their user
  // half; the proxy halves are freed later by mcclProxyDestroy, which must not find this object gone.
  int proxyHolds;  // set by netProxySetup, cleared at the end of netProxyFree
  int userGone;    // set by netFree when the proxy half still holds it
};

// ---- canConnect: NET serves any pair; it is last in the transport table, so only pairs P2P and SHM
// refuse (ranks on different hosts) reach it (NCCL's netCanConnect answers 1 too). -------------
static mcclResult_t netCanConnect(int* ret, const struct mcclTransportCtx* ctx, const mcclPeerInfo* info1,
                                  const mcclPeerInfo* info2) {
  (void)ctx;
  MCCL_ARGCHECK(ret != NULL && info1 != NULL && info2 != NULL, "netCanConnect: NULL argument");
  *ret = 1;
  return mcclSuccess;
}

// Every rank of a context that spans several hosts loads the plugin: its init is collective.
static mcclResult_t netInit(struct mcclTransportCtx* ctx) {
  MCCL_ARGCHECK(ctx != NULL && ctx->peerInfo != NULL, "netInit: ctx %p has no peerInfo", (void*)ctx);
  int multiHost = 0;
  for (int r = 1; r < ctx->nRanks; r++) multiHost |= ctx->peerInfo[r].hostHash != ctx->peerInfo[0].hostHash;
  if (!multiHost) return mcclSuccess;
  const mcclNet_t* net = NULL;
  return mcclNetGet(&net);
}

static void netResourcesFree(struct netResources* r) {
  if (r == NULL) return;
  if (r->hostMem) (void)mcclHostFree(r->hostMem);
  free(r);
}

// The user side of setup (both directions): the FIFO in pinned host memory, then the proxy's half.
static mcclResult_t netSetup(struct mcclTransportCtx* ctx, const mcclPeerInfo* peerInfo,
                             struct mcclConnect* connectInfo, struct mcclConnector* connector, int channelId,
                             int connIndex, int send) {
  MCCL_ARGCHECK(ctx != NULL && peerInfo != NULL && connectInfo != NULL && connector != NULL,
                "NET setup: NULL argument");
  if (ctx->proxyState == NULL) {
    WARN("Invalid usage: the NET transport needs a proxy thread (ctx->proxyState is NULL): rank %d %s rank %d",
         ctx->rank, send ? "->" : "<-", peerInfo->rank);
    return mcclInvalidUsage;
  }
  int buffSizes[MCCL_NUM_PROTOCOLS];
  MCCLCHECK(mcclTransportBuffSizes(ctx, connIndex, buffSizes));
  const mcclNet_t* net = NULL;
  MCCLCHECK(mcclNetGet(&net));
  struct netResources* r = (struct netResources*)calloc(1, sizeof(*r));
  if (r == NULL) {
    WARN("Out of memory for NET resources");
    return mcclSystemError;
  }
  mcclResult_t res = mcclSuccess;
  r->send = send;
  r->peer = peerInfo->rank;
  r->channelId = channelId;
  r->net = net;
  r->buffSize = buffSizes[MCCL_PROTO_SIMPLE];
  r->llBuffSize = buffSizes[MCCL_PROTO_LL];
  r->stepSize = r->buffSize / MCCL_STEPS;
  r->initialStep = connector->initialStep;
  r->proxy = (mcclProxyState*)ctx->proxyState;
  size_t bytes = 2 * (size_t)MCCL_MEM_ALIGN + (size_t)r->llBuffSize + (size_t)r->buffSize;
  MCCLCHECKGOTO(mcclHostAlloc((void**)&r->hostMem, bytes), res, fail);
  r->sendMem = (struct mcclSendMem*)r->hostMem;
  r->recvMem = (struct mcclRecvMem*)(r->hostMem + MCCL_MEM_ALIGN);
  r->llBuff = r->hostMem + 2 * MCCL_MEM_ALIGN;
  r->buff = r->llBuff + r->llBuffSize;
  memset(r->llBuff, 0, (size_t)r->llBuffSize);  // flag 0: no step's (mcclLLFlag is never 0)
  r->sendMem->head = r->initialStep;
  r->recvMem->tail = r->initialStep;
  for (int i = 0; i < MCCL_STEPS; i++) r->recvMem->connFifo[i].size = -1;  // no slice announced
  connector->transportResources = r;
  memset(connectInfo, 0, sizeof(*connectInfo));
  // The proxy learns the resources; a receiver's proxy listens and answers the handle for the peer.
  char handle[MCCL_NET_HANDLE_MAXSIZE];
  MCCLCHECKGOTO(connector->proxyCall(connector, mcclProxyMsgSetup, &r, sizeof(r), send ? NULL : handle,
                                     send ? 0 : (int)sizeof(handle)),
                res, fail);
  if (!send) memcpy(connectInfo->data, handle, sizeof(handle));
  INFO(MCCL_NET | MCCL_INIT, "Channel %02d : %d %s %d via NET/%s", channelId, ctx->rank, send ? "->" : "<-",
       peerInfo->rank, net->name);
  return mcclSuccess;
fail:
  connector->transportResources = NULL;
  netResourcesFree(r);
  return res;
}

static mcclResult_t netSendSetup(struct mcclTransportCtx* ctx, const void* graph, const mcclPeerInfo* myInfo,
                                 const mcclPeerInfo* peerInfo, struct mcclConnect* connectInfo,
                                 struct mcclConnector* connector, int channelId, int connIndex) {
  (void)graph, (void)myInfo;
  return netSetup(ctx, peerInfo, connectInfo, connector, channelId, connIndex, 1);
}

static mcclResult_t netRecvSetup(struct mcclTransportCtx* ctx, const void* graph, const mcclPeerInfo* myInfo,
                                 const mcclPeerInfo* peerInfo, struct mcclConnect* connectInfo,
                                 struct mcclConnector* connector, int channelId, int connIndex) {
  (void)graph, (void)myInfo;
  return netSetup(ctx, peerInfo, connectInfo, connector, channelId, connIndex, 0);
}

// The user side of connect: the proxy connects (sender, with the receiver's handle) or accepts
// (receiver), then the kernel's view of the FIFO, and the connection's proxy op is posted.
static mcclResult_t netConnect(struct mcclTransportCtx* ctx, const struct mcclConnect* connectInfo, int nranks,
                               int rank, struct mcclConnector* connector) {
  (void)nranks, (void)rank;
  MCCL_ARGCHECK(ctx != NULL && connectInfo != NULL && connector != NULL, "NET connect: NULL argument");
  struct netResources* r = (struct netResources*)connector->transportResources;
  if (r == NULL || connector->connected) {
    WARN("Invalid usage: NET connector %p is %s", (void*)connector, r ? "already connected" : "not set up");
    return mcclInvalidUsage;
  }
  MCCLCHECK(connector->proxyCall(connector, mcclProxyMsgConnect, connectInfo->data, MCCL_NET_HANDLE_MAXSIZE, NULL, 0));
  struct mcclConnInfo* c = &connector->conn;
  c->buffs[MCCL_PROTO_LL] = r->llBuff;
  c->buffs[MCCL_PROTO_SIMPLE] = r->buff;
  c->head = &r->sendMem->head;
  c->tail = &r->recvMem->tail;
  c->connFifo = r->send ? r->recvMem->connFifo : NULL;
  c->stepSize = r->stepSize;
  c->llStepSize = r->llBuffSize / MCCL_STEPS;
  c->step = connector->initialStep;
  connector->connected = 1;
  MCCLCHECK(mcclProxyPostOp(r->proxy, connector, NULL, 0, &r->opReq));
  r->opPosted = 1;
  return mcclSuccess;
}

// The user side of free (after the proxy's): collect the cancelled op, free the FIFO.
static mcclResult_t netFree(struct mcclConnector* connector) {
  struct netResources* r = (struct netResources*)connector->transportResources;
  if (r == NULL) return mcclSuccess;
  if (r->opPosted) {
    // The op ended when its connection was freed (cancelled) or the proxy stopped: either ends the
    // op with an error that is the expected end of a persistent op, not a failure of this free.
    // mcclConnectorFree freed the proxy half first, which ends the op at once; this only collects it.
    (void)mcclProxyWait(r->proxy, r->opReq);
    r->opPosted = 0;
  }
  connector->transportResources = NULL;
  // After an abort the proxy half was not freed (the stopped proxy answers no RPC): it still uses r, and
  // mcclProxyDestroy's netProxyFree frees it. No thread runs that half now (the proxy has stopped).
  if (__atomic_load_n(&r->proxyHolds, __ATOMIC_ACQUIRE))
    __atomic_store_n(&r->userGone, 1, __ATOMIC_RELEASE);
  else
    netResourcesFree(r);
  return mcclSuccess;
}

// ---- proxy side ---------------------------------------------------------------------------
static mcclResult_t netProxySetup(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState,
                                  const void* req, int reqSize, void* resp, int respSize, int* done) {
  (void)proxyState;
  MCCL_ARGCHECK(req != NULL && reqSize == (int)sizeof(struct netResources*), "NET proxySetup: request of %d bytes",
                reqSize);
  struct netResources* r;
  memcpy(&r, req, sizeof(r));
  connection->transportResources = r;
  __atomic_store_n(&r->proxyHolds, 1, __ATOMIC_RELEASE);
  if (!connection->send) {
    MCCL_ARGCHECK(resp != NULL && respSize == MCCL_NET_HANDLE_MAXSIZE, "NET proxySetup: response of %d bytes",
                  respSize);
    MCCLCHECK(r->net->listen(0, r->handle, &r->listenComm));
    memcpy(resp, r->handle, MCCL_NET_HANDLE_MAXSIZE);
  }
  *done = 1;
  return mcclSuccess;
}

// Connect and accept may need several calls (the peer's side may not be there yet): not done until
// the plugin gives a comm; lab 05's service calls again later (NCCL's async proxy ops).
static mcclResult_t netProxyConnect(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState,
                                    const void* req, int reqSize, void* resp, int respSize, int* done) {
  (void)proxyState, (void)resp, (void)respSize;
  struct netResources* r = (struct netResources*)connection->transportResources;
  MCCL_ARGCHECK(r != NULL, "NET proxyConnect before setup");
  if (r->netComm == NULL) {
    if (connection->send) {
      MCCL_ARGCHECK(req != NULL && reqSize == MCCL_NET_HANDLE_MAXSIZE, "NET proxyConnect: handle of %d bytes", reqSize);
      if (!r->started) memcpy(r->handle, req, MCCL_NET_HANDLE_MAXSIZE);  // the plugin keeps its stage in it
      r->started = 1;
      MCCLCHECK(r->net->connect(0, r->handle, &r->netComm));
    } else {
      MCCLCHECK(r->net->accept(r->listenComm, &r->netComm));
    }
    if (r->netComm == NULL) {
      *done = 0;
      return mcclSuccess;
    }
  }
  MCCLCHECK(r->net->regMr(r->netComm, r->buff, (size_t)r->buffSize, MCCL_PTR_HOST, &r->mhandle));
  if (connection->send)
    MCCLCHECK(r->net->regMr(r->netComm, r->llBuff, (size_t)r->llBuffSize, MCCL_PTR_HOST, &r->llMhandle));
  r->started = 0;
  *done = 1;
  return mcclSuccess;
}

static mcclResult_t netProxyFree(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState) {
  (void)proxyState;
  struct netResources* r = (struct netResources*)connection->transportResources;
  if (r == NULL) return mcclSuccess;
  mcclResult_t res = mcclSuccess, x;
  if (r->mhandle && (x = r->net->deregMr(r->netComm, r->mhandle)) != mcclSuccess) res = x;
  if (r->llMhandle && (x = r->net->deregMr(r->netComm, r->llMhandle)) != mcclSuccess && res == mcclSuccess) res = x;
  if (r->netComm) {
    x = connection->send ? r->net->closeSend(r->netComm) : r->net->closeRecv(r->netComm);
    if (x != mcclSuccess && res == mcclSuccess) res = x;
  }
  if (r->listenComm && (x = r->net->closeListen(r->listenComm)) != mcclSuccess && res == mcclSuccess) res = x;
  r->mhandle = r->llMhandle = r->netComm = r->listenComm = NULL;
  connection->transportResources = NULL;
  __atomic_store_n(&r->proxyHolds, 0, __ATOMIC_RELEASE);
  if (__atomic_load_n(&r->userGone, __ATOMIC_ACQUIRE)) netResourcesFree(r);  // else the user side frees it
  return res;
}

static int64_t stepDiff(uint64_t a, uint64_t b) {
  return (int64_t)(a - b);
}

// Sender: the LL step of `slot` is complete when its announced size fits an LL slot and every line
// carries the step's flag (NCCL's sendProxyProgress reads flag1 and flag2 of each line). The GPU
// stores a line with one 16-byte store, so a half whose flag is the step's holds its data; the
// acquire loads order the plugin's reads of the lines after these.
static size_t llStepBytes(const struct netResources* r) {
  return (size_t)r->llBuffSize / MCCL_STEPS;
}

// `size` bytes can be a step of LL lines: whole lines, within an LL slot.
static int llSizeFits(const struct netResources* r, int64_t size) {
  return size >= 0 && (size_t)size <= llStepBytes(r) && size % (int64_t)sizeof(union mcclLLFifoLine) == 0;
}

static int llStepReady(const struct netResources* r, int slot, ssize_t size) {
  if (!llSizeFits(r, size)) return 0;
  const uint32_t flag = mcclLLFlag(r->posted);
  union mcclLLFifoLine* lines = (union mcclLLFifoLine*)(r->llBuff + (size_t)slot * llStepBytes(r));
  for (ssize_t i = 0; i < size / (ssize_t)sizeof(union mcclLLFifoLine); i++)
    if (__atomic_load_n(&lines[i].flag1, __ATOMIC_ACQUIRE) != flag ||
        __atomic_load_n(&lines[i].flag2, __ATOMIC_ACQUIRE) != flag)
      return 0;
  return 1;
}

// Receiver: when the `size` bytes received into step's SIMPLE slot are LL lines of that step (every
// flag is mcclLLFlag(step)), copy them into the LL slot and return 1. Each 8-byte half (a data word
// and its flag) is stored whole, so the kernel spinning on the line never takes a flag without its
// data; a 0-byte step is no LL step (nothing to copy; tail serves both protocols).
static int llLinesCopy(struct netResources* r, int slot, uint64_t step, int size) {
  const int nLines = size / (int)sizeof(union mcclLLFifoLine);
  if (size == 0 || !llSizeFits(r, size)) return 0;
  const union mcclLLFifoLine* in = (const union mcclLLFifoLine*)(r->buff + (size_t)slot * (size_t)r->stepSize);
  const uint32_t flag = mcclLLFlag(step);
  for (int i = 0; i < nLines; i++)
    if (in[i].flag1 != flag || in[i].flag2 != flag) return 0;
  union mcclLLFifoLine* out = (union mcclLLFifoLine*)(r->llBuff + (size_t)slot * llStepBytes(r));
  for (int i = 0; i < nLines; i++) {
    __atomic_store_n(&out[i].v[0], in[i].v[0], __ATOMIC_RELAXED);
    __atomic_store_n(&out[i].v[1], in[i].v[1], __ATOMIC_RELAXED);
  }
  return 1;
}

static void progressStart(struct mcclProxyArgs* args, struct netResources* r) {
  if (args->state != mcclProxyOpReady) return;
  r->posted = r->done = r->initialStep;
  r->remaining = 0;
  args->subs[0].base = r->initialStep;
  args->subs[0].nsteps = MCCL_PROXY_STEPS_UNTIL_FREE;  // ends when the connector is freed
  args->state = mcclProxyOpProgress;
}

// Sender: isend every step the kernel has published (tail), at most MCCL_STEPS in flight; as sends
// complete, in order, give the slots back to the kernel (head).
static mcclResult_t netSendProxyProgress(struct mcclProxyState* proxyState, struct mcclProxyArgs* args) {
  (void)proxyState;
  struct netResources* r = (struct netResources*)args->subs[0].connection->transportResources;
  progressStart(args, r);
  // The kernel may end (and its communicator be destroyed) before the network took its last steps,
  // which the peer's kernel still waits for: a freed send connector drains first (lab 05).
  args->drainOnClose = 1;
  // A stub here ends the process: this op lives as long as its connector and nobody waits for it, so an
  // error would reach neither the kernel nor the peers that wait on its slots (mpirun then ends the job).
  // EXERCISE(08.send_progress) STUB: mcclExerciseStub("08.send_progress"); _exit(1);
  args->idle = 1;
  uint64_t tail = __atomic_load_n(&r->recvMem->tail, __ATOMIC_ACQUIRE);
  while (stepDiff(r->posted, r->done) < MCCL_STEPS) {
    int slot = (int)(r->posted % MCCL_STEPS);
    ssize_t* sizep = &r->recvMem->connFifo[slot].size;
    ssize_t size = __atomic_load_n(sizep, __ATOMIC_ACQUIRE);
    // SIMPLE publishes tail; LL announces a size and writes lines that carry the step's flag.
    int ll = stepDiff(tail, r->posted) <= 0 && r->remaining == 0 && size >= 0 && llStepReady(r, slot, size);
    if (!ll && stepDiff(tail, r->posted) <= 0) break;
    if (!ll && size >= 0) r->remaining = size;  // a SIMPLE slice starts at this step
    size_t n = ll ? (size_t)size : r->remaining < r->stepSize ? (size_t)r->remaining : (size_t)r->stepSize;
    char* data = ll ? r->llBuff + (size_t)slot * llStepBytes(r)
                    : r->buff + (size_t)slot * (size_t)r->stepSize;
    void* req = NULL;
    MCCLCHECK(r->net->isend(r->netComm, data, n, 0, ll ? r->llMhandle : r->mhandle, &req));
    if (req == NULL) break;  // the plugin is out of requests: again on the next call
    if (size >= 0) __atomic_store_n(sizep, (ssize_t)-1, __ATOMIC_RELAXED);
    if (!ll) r->remaining -= (int64_t)n;
    r->ll[slot] = ll && n > 0;  // the stats count steps that carried lines (an empty step serves both)
    r->requests[slot] = req;
    r->posted++;
    args->subs[0].transmitted++;
    args->idle = 0;
  }
  while (stepDiff(r->posted, r->done) > 0) {
    int slot = (int)(r->done % MCCL_STEPS), d = 0, sz = 0;
    MCCLCHECK(r->net->test(r->requests[slot], &d, &sz));
    if (!d) break;
    r->requests[slot] = NULL;
    __atomic_fetch_add(r->ll[slot] ? &r->llSteps : &r->simpleSteps, 1, __ATOMIC_RELAXED);
    r->done++;
    args->subs[0].done++;
    __atomic_store_n(&r->sendMem->head, r->done, __ATOMIC_RELEASE);
    args->idle = 0;
  }
  return mcclSuccess;
  // END EXERCISE(08.send_progress)
}

// Receiver: irecv into every slot the kernel has returned (head), at most MCCL_STEPS in flight; as
// receives complete, in order, publish them to the kernel (tail).
static mcclResult_t netRecvProxyProgress(struct mcclProxyState* proxyState, struct mcclProxyArgs* args) {
  (void)proxyState;
  struct netResources* r = (struct netResources*)args->subs[0].connection->transportResources;
  progressStart(args, r);
  // A stub here ends the process: this op lives as long as its connector and nobody waits for it, so an
  // error would reach neither the kernel nor the peers that wait on its slots (mpirun then ends the job).
  // EXERCISE(08.recv_progress) STUB: mcclExerciseStub("08.recv_progress"); _exit(1);
  args->idle = 1;
  uint64_t head = __atomic_load_n(&r->sendMem->head, __ATOMIC_ACQUIRE);
  while (stepDiff(head + MCCL_STEPS, r->posted) > 0 && stepDiff(r->posted, r->done) < MCCL_STEPS) {
    int slot = (int)(r->posted % MCCL_STEPS), tag = 0;
    void* data = r->buff + (size_t)slot * (size_t)r->stepSize;
    size_t size = (size_t)r->stepSize;
    void* req = NULL;
    MCCLCHECK(r->net->irecv(r->netComm, 1, &data, &size, &tag, &r->mhandle, &req));
    if (req == NULL) break;
    r->requests[slot] = req;
    r->posted++;
    args->subs[0].transmitted++;
    args->idle = 0;
  }
  while (stepDiff(r->posted, r->done) > 0) {
    int slot = (int)(r->done % MCCL_STEPS), d = 0, sz = 0;
    MCCLCHECK(r->net->test(r->requests[slot], &d, &sz));
    if (!d) break;
    if (sz > r->stepSize) {
      WARN("NET channel %d: %d bytes from rank %d for a slot of %d", r->channelId, sz, r->peer, r->stepSize);
      return mcclRemoteError;
    }
    r->requests[slot] = NULL;
    int ll = llLinesCopy(r, slot, r->done, sz);  // an LL step's lines into the LL slot, where its kernel waits
    __atomic_fetch_add(ll ? &r->llSteps : &r->simpleSteps, 1, __ATOMIC_RELAXED);
    r->recvMem->connFifo[slot].size = sz;
    r->done++;
    args->subs[0].done++;
    __atomic_store_n(&r->recvMem->tail, r->done, __ATOMIC_RELEASE);
    args->idle = 0;
  }
  return mcclSuccess;
  // END EXERCISE(08.recv_progress)
}

struct mcclTransport mcclNetTransport = {
    "NET",
    netCanConnect,
    {netSendSetup, netConnect, netFree, netProxySetup, netProxyConnect, netProxyFree, netSendProxyProgress},
    {netRecvSetup, netConnect, netFree, netProxySetup, netProxyConnect, netProxyFree, netRecvProxyProgress},
    netInit,
};

// The transport table of every program that has NET (NCCL's ncclTransports[], one static array in
// transport.cc): this lab is the lowest layer that sees all three transports, so the table lives here,
// and the layers below take it as an argument (lab 07's communicator, lab 05's proxy, lab 06's selection
// through the context) rather than have NET put itself into a table of theirs. Lab 06 keeps the table
// of programs without NET (mcclLocalTransports), which lab 06's and lab 07's own programs use. NET is last:
// it serves any pair, so only the pairs P2P and SHM refuse reach it.
struct mcclTransport* const mcclTransports[MCCL_NUM_TRANSPORTS] = {&mcclP2pTransport, &mcclShmTransport,
                                                                   &mcclNetTransport};

mcclResult_t mcclNetRingTransports(const mcclLabComm* comm, int channel, int* send, int* recv) {
  MCCL_ARGCHECK(comm != NULL && send != NULL && recv != NULL, "mcclNetRingTransports: NULL argument");
  MCCL_ARGCHECK(comm->nRanks > 1, "mcclNetRingTransports: a communicator of %d rank has no ring edges", comm->nRanks);
  MCCL_ARGCHECK(channel >= 0 && channel < comm->nChannels, "channel %d (0 .. %d)", channel, comm->nChannels - 1);
  const struct mcclChannel* ch = &comm->ctx.channels[channel];
  *send = ch->peers[comm->ring.next].send[0].transport;
  *recv = ch->peers[comm->ring.prev].recv[0].transport;
  return mcclSuccess;
}

mcclResult_t mcclNetCommHosts(const mcclLabComm* comm, int* nHosts) {
  MCCL_ARGCHECK(comm != NULL && nHosts != NULL, "mcclNetCommHosts: NULL argument");
  int n = 0;
  for (int r = 0; r < comm->nRanks; r++) {
    int seen = 0;
    for (int q = 0; q < r && !seen; q++) seen = comm->peerInfo[q].hostHash == comm->peerInfo[r].hostHash;
    n += !seen;
  }
  *nHosts = n;
  return mcclSuccess;
}

mcclResult_t mcclNetGetStats(const mcclLabComm* comm, mcclNetStats* sent, mcclNetStats* received) {
  MCCL_ARGCHECK(comm != NULL, "mcclNetGetStats: comm is NULL");
  mcclNetStats st[2];
  memset(st, 0, sizeof(st));
  for (int c = 0; comm->nRanks > 1 && c < comm->nChannels; c++) {
    const struct mcclChannel* ch = &comm->ctx.channels[c];
    const struct mcclConnector* conns[2] = {&ch->peers[comm->ring.next].send[0], &ch->peers[comm->ring.prev].recv[0]};
    for (int d = 0; d < 2; d++) {
      const struct netResources* r = (const struct netResources*)conns[d]->transportResources;
      if (conns[d]->transport != TRANSPORT_NET || r == NULL) continue;
      st[d].llSteps += __atomic_load_n(&r->llSteps, __ATOMIC_RELAXED);
      st[d].simpleSteps += __atomic_load_n(&r->simpleSteps, __ATOMIC_RELAXED);
    }
  }
  if (sent) *sent = st[0];
  if (received) *received = st[1];
  return mcclSuccess;
}
