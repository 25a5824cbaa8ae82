// Lab 06: connections as kernels see them. Device copies of mcclConnInfo (NCCL keeps ncclConnInfo
// in device memory: ncclDevComm -> channels -> peers -> send/recv[connIndex].conn), the host-mapped
// abort flag (NCCL's abortFlagDev), and a pair helper that sets up N channels between two
// endpoints the way NCCL's ncclTransportP2pSetup does for one peer: select, setup, exchange, connect.
#include <stdlib.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_channel.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_devconn.h"
#include "mccl_host_alloc.h"
#include "mccl_p2p.h"
#include "mccl_shm.h"

#define DEVPAIR_MAX_CHANNELS 64
// Bootstrap tags of the peer exchange; any value distinct from the other users of the bootstrap.
enum { kTagHeader = 0x6d060, kTagSendInfo, kTagRecvInfo, kTagDone };

// ---- device copies of the connection ----------------------------------------------------------

// A small synchronous copy on a private stream: it neither waits for nor is ordered after kernels
// that may be spinning on the device's other streams (the legacy stream would wait for them).
static mcclResult_t copySync(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind) {
  mcclResult_t res = mcclSuccess;
  cudaStream_t s = NULL;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDACHECKGOTO(cudaMemcpyAsync(dst, src, n, kind, s), res, done);
  CUDACHECKGOTO(cudaStreamSynchronize(s), res, done);
done:
  cudaStreamDestroy(s);
  return res;
}

// ---- memory that teardown frees without waiting for the device -------------------------------------

mcclResult_t mcclDevCalloc(void** ptr, size_t bytes) {
  MCCL_ARGCHECK(ptr != NULL && bytes > 0, "ptr %p, bytes %zu", (void*)ptr, bytes);
  void* p = NULL;
  MCCLCHECK(mcclMemAlloc(&p, bytes));
  // On a private stream: the legacy stream's memset may return before it lands, and would wait for the
  // device's blocking streams.
  mcclResult_t res = mcclSuccess;
  cudaStream_t s = NULL;
  CUDACHECKGOTO(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), res, fail);
  CUDACHECKGOTO(cudaMemsetAsync(p, 0, bytes, s), res, fail);
  CUDACHECKGOTO(cudaStreamSynchronize(s), res, fail);
  cudaStreamDestroy(s);
  *ptr = p;
  return mcclSuccess;
fail:
  if (s) cudaStreamDestroy(s);
  mcclMemFree(p);
  return res;
}

mcclResult_t mcclDevFree(void* ptr) {
  return mcclMemFree(ptr);
}

mcclResult_t mcclDevConnCreate(const struct mcclConnector* connectors, int n, struct mcclConnInfo** devConns) {
  MCCL_ARGCHECK(connectors != NULL, "connectors is NULL");
  MCCL_ARGCHECK(n >= 1 && n <= DEVPAIR_MAX_CHANNELS, "n %d is not in 1..%d", n, DEVPAIR_MAX_CHANNELS);
  MCCL_ARGCHECK(devConns != NULL, "devConns is NULL");
  struct mcclConnInfo host[DEVPAIR_MAX_CHANNELS];
  for (int c = 0; c < n; c++) {
    if (!connectors[c].connected) {
      WARN("Invalid usage: connector %d (%p) is not connected", c, (const void*)&connectors[c]);
      return mcclInvalidUsage;
    }
    host[c] = connectors[c].conn;
  }
  struct mcclConnInfo* d = NULL;
  MCCLCHECK(mcclDevCalloc((void**)&d, sizeof(*d) * (size_t)n));
  mcclResult_t res = copySync(d, host, sizeof(*d) * (size_t)n, cudaMemcpyHostToDevice);
  if (res != mcclSuccess) {
    mcclDevFree(d);
    return res;
  }
  *devConns = d;
  return mcclSuccess;
}

mcclResult_t mcclDevConnReadStep(struct mcclConnector* connectors, int n, const struct mcclConnInfo* devConns) {
  MCCL_ARGCHECK(connectors != NULL, "connectors is NULL");
  MCCL_ARGCHECK(n >= 1 && n <= DEVPAIR_MAX_CHANNELS, "n %d is not in 1..%d", n, DEVPAIR_MAX_CHANNELS);
  MCCL_ARGCHECK(devConns != NULL, "devConns is NULL");
  struct mcclConnInfo host[DEVPAIR_MAX_CHANNELS];
  MCCLCHECK(copySync(host, devConns, sizeof(host[0]) * (size_t)n, cudaMemcpyDeviceToHost));
  for (int c = 0; c < n; c++) connectors[c].conn.step = host[c].step;
  return mcclSuccess;
}

mcclResult_t mcclDevConnFree(struct mcclConnInfo* devConns) {
  return mcclDevFree(devConns);
}

mcclResult_t mcclDevHostCalloc(void** hostPtr, void** devPtr, size_t bytes) {
  MCCL_ARGCHECK(hostPtr != NULL && devPtr != NULL && bytes > 0, "hostPtr %p, devPtr %p, bytes %zu", (void*)hostPtr,
                (void*)devPtr, bytes);
  void *h = NULL, *d = NULL;
  // Lab 02's pick: cuMem host memory, or cudaHostAlloc where the gate is off (whose cudaFreeHost waits for
  // the whole device, as NCCL's fallback does too). Both have one address for the host and every device.
  MCCLCHECK(mcclHostAlloc(&h, bytes));
  mcclResult_t res = mcclSuccess;
  if (!mcclCuMemHostEnable()) {
    CUDACHECKGOTO(cudaHostGetDevicePointer(&d, h, 0), res, fail);
  } else {
    // Mapped for the current device and the host: the other devices of the process get access too, so
    // kernels on both ends of a local pair can poll one flag.
    CUmemGenericAllocationHandle handle = 0;
    void* base = NULL;
    size_t size = 0;
    int n = 0, cur = 0;
    MCCLCHECKGOTO(mcclCuMemRetainHandle(h, &handle, NULL, &base, &size), res, fail);
    cuMemRelease(handle);
    CUDACHECKGOTO(cudaGetDeviceCount(&n), res, fail);
    CUDACHECKGOTO(cudaGetDevice(&cur), res, fail);
    for (int dev = 0; dev < n; dev++) {
      if (dev == cur) continue;
      CUmemAccessDesc a;
      memset(&a, 0, sizeof(a));
      a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      a.location.id = dev;
      a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      CUCHECKGOTO(cuMemSetAccess((CUdeviceptr)base, size, &a, 1), res, fail);
    }
    d = h;
  }
  *hostPtr = h;
  *devPtr = d;
  return mcclSuccess;
fail:
  mcclHostFree(h);
  return res;
}

mcclResult_t mcclDevHostFree(void* hostPtr) {
  return mcclHostFree(hostPtr);
}

mcclResult_t mcclDevAbortFlagCreate(volatile uint32_t** hostPtr, uint32_t** devPtr) {
  MCCL_ARGCHECK(hostPtr != NULL, "hostPtr is NULL");
  MCCL_ARGCHECK(devPtr != NULL, "devPtr is NULL");
  void *h = NULL, *d = NULL;
  MCCLCHECK(mcclDevHostCalloc(&h, &d, sizeof(uint32_t)));
  *hostPtr = (volatile uint32_t*)h;
  *devPtr = (uint32_t*)d;
  return mcclSuccess;
}

mcclResult_t mcclDevAbortFlagFree(volatile uint32_t* hostPtr) {
  return mcclDevHostFree((void*)hostPtr);
}

// ---- transport selection ------------------------------------------------------------------------

mcclResult_t mcclDevSelectTransport(mcclDevTransport_t choice, const mcclPeerInfo* a, const mcclPeerInfo* b,
                                    const struct mcclTransport** out) {
  MCCL_ARGCHECK(a != NULL && b != NULL, "peer info %p / %p is NULL", (const void*)a, (const void*)b);
  MCCL_ARGCHECK(out != NULL, "out is NULL");
  MCCL_ARGCHECK(choice == mcclDevTransportAuto || choice == mcclDevTransportP2p || choice == mcclDevTransportShm,
                "transport %d (expected auto %d, P2P %d or SHM %d)", (int)choice, mcclDevTransportAuto,
                mcclDevTransportP2p, mcclDevTransportShm);
  // NCCL's transport order (p2p, shm, net, collnet), in this lab's table: the first whose canConnect says
  // yes wins.
  for (int t = 0; t < MCCL_NUM_TRANSPORTS; t++) {
    struct mcclTransport* tp = mcclLocalTransports[t];
    if (tp == NULL || (choice == mcclDevTransportP2p && t != TRANSPORT_P2P) ||
        (choice == mcclDevTransportShm && t != TRANSPORT_SHM))
      continue;
    int ok = 0;
    MCCLCHECK(tp->canConnect(&ok, NULL, a, b));
    if (ok) {
      *out = tp;
      return mcclSuccess;
    }
  }
  WARN("Invalid usage: %s cannot connect rank %d (dev %d) and rank %d (dev %d)",
       choice == mcclDevTransportAuto  ? "no transport"
       : choice == mcclDevTransportP2p ? "P2P"
                                       : "SHM",
       a->rank, a->cudaDev, b->rank, b->cudaDev);
  return mcclInvalidUsage;
}

static mcclResult_t checkPairArgs(int nChannels, int dirs, mcclDevTransport_t transport) {
  MCCL_ARGCHECK(nChannels >= 1 && nChannels <= DEVPAIR_MAX_CHANNELS, "nChannels %d (must be 1 .. %d)", nChannels,
                DEVPAIR_MAX_CHANNELS);
  MCCL_ARGCHECK(dirs >= 1 && dirs <= (MCCL_DEVPAIR_SEND | MCCL_DEVPAIR_RECV),
                "dirs %d (MCCL_DEVPAIR_SEND, MCCL_DEVPAIR_RECV or both)", dirs);
  MCCL_ARGCHECK(
      transport == mcclDevTransportAuto || transport == mcclDevTransportP2p || transport == mcclDevTransportShm,
      "transport %d (expected auto %d, P2P %d or SHM %d)", (int)transport, mcclDevTransportAuto, mcclDevTransportP2p,
      mcclDevTransportShm);
  return mcclSuccess;
}

static mcclResult_t checkDevice(int dev, const char* name) {
  int n = 0;
  CUDACHECK(cudaGetDeviceCount(&n));
  MCCL_ARGCHECK(dev >= 0 && dev < n, "%s %d (this process sees %d devices)", name, dev, n);
  return mcclSuccess;
}

// Connector arrays of one endpoint; zeroed connectors are safe to mcclConnectorFree.
static mcclResult_t endAlloc(struct mcclDevPairEnd* e, int rank, int dev, const struct mcclTransport* t, int n,
                             int sends, int recvs) {
  e->rank = rank;
  e->cudaDev = dev;
  e->transport = t;
  e->nChannels = n;
  if (sends) e->send = (struct mcclConnector*)calloc((size_t)n, sizeof(struct mcclConnector));
  if (recvs) e->recv = (struct mcclConnector*)calloc((size_t)n, sizeof(struct mcclConnector));
  if ((sends && e->send == NULL) || (recvs && e->recv == NULL)) {
    WARN("Out of memory allocating %d connectors", n);
    return mcclSystemError;
  }
  return mcclSuccess;
}

static mcclResult_t endFree(struct mcclDevPairEnd* e) {
  mcclResult_t res = mcclSuccess;
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  // Each side's memory was allocated (and is freed) with its own device current.
  if ((e->send || e->recv) && cudaSetDevice(e->cudaDev) != cudaSuccess) res = mcclUnhandledCudaError;
  for (int c = 0; c < e->nChannels; c++) {
    mcclResult_t r = e->send ? mcclConnectorFree(&e->send[c]) : mcclSuccess;
    if (r != mcclSuccess && res == mcclSuccess) res = r;
    r = e->recv ? mcclConnectorFree(&e->recv[c]) : mcclSuccess;
    if (r != mcclSuccess && res == mcclSuccess) res = r;
  }
  free(e->send);
  free(e->recv);
  e->send = e->recv = NULL;
  if (saved >= 0) cudaSetDevice(saved);
  return res;
}

// ---- one process, two devices ------------------------------------------------------------------

// One end's view for the hooks: its rank among the two, its device, both records, the chosen transport.
static mcclResult_t endCtx(struct mcclTransportCtx* ctx, const struct mcclDevPairEnd* e, int nRanks,
                           const mcclPeerInfo* info) {
  MCCLCHECK(mcclTransportCtxInit(ctx, e->rank, nRanks, e->cudaDev));
  ctx->peerInfo = info;
  ctx->transports = mcclLocalTransports;
  ctx->onlyTransport = mcclTransportIndex(mcclLocalTransports, e->transport);
  return mcclSuccess;
}

// One direction, one channel: sender on end s, receiver on end r, each hook with its device current.
// The same select-and-setup step as mcclTransportP2pSetup (mcclTransportSetupConnector); the two
// ends' connect information is swapped in memory instead of through a bootstrap.
static mcclResult_t connectLocal(struct mcclDevPair* p, const mcclPeerInfo* info, int s, int r, int c,
                                 uint64_t initialStep) {
  struct mcclConnector* send = &p->ends[s].send[c];
  struct mcclConnector* recv = &p->ends[r].recv[c];
  struct mcclConnect si, ri;
  struct mcclTransportCtx cs, cr;
  MCCLCHECK(endCtx(&cs, &p->ends[s], 2, info));
  MCCLCHECK(endCtx(&cr, &p->ends[r], 2, info));
  CUDACHECK(cudaSetDevice(p->ends[s].cudaDev));
  MCCLCHECK(mcclTransportSetupConnector(&cs, NULL, r, c, 0, 1, send, initialStep, &si, NULL));
  CUDACHECK(cudaSetDevice(p->ends[r].cudaDev));
  MCCLCHECK(mcclTransportSetupConnector(&cr, NULL, s, c, 0, 0, recv, initialStep, &ri, NULL));
  CUDACHECK(cudaSetDevice(p->ends[s].cudaDev));
  MCCLCHECK(send->transportComm->connect(&cs, &ri, 1, s, send));
  CUDACHECK(cudaSetDevice(p->ends[r].cudaDev));
  MCCLCHECK(recv->transportComm->connect(&cr, &si, 1, r, recv));
  return mcclSuccess;
}

mcclResult_t mcclDevPairLocalCreate(int devA, int devB, int nChannels, int dirs, mcclDevTransport_t transport,
                                    uint64_t initialStep, struct mcclDevPair** pair) {
  MCCL_ARGCHECK(pair != NULL, "pair is NULL");
  MCCLCHECK(checkPairArgs(nChannels, dirs, transport));
  MCCLCHECK(checkDevice(devA, "devA"));
  MCCLCHECK(checkDevice(devB, "devB"));
  mcclPeerInfo info[2];
  MCCLCHECK(mcclFillPeerInfo(0, devA, &info[0]));
  MCCLCHECK(mcclFillPeerInfo(1, devB, &info[1]));
  const struct mcclTransport* t = NULL;
  MCCLCHECK(mcclDevSelectTransport(transport, &info[0], &info[1], &t));
  int saved = 0;
  CUDACHECK(cudaGetDevice(&saved));
  mcclResult_t res = mcclSuccess;
  struct mcclDevPair* p = (struct mcclDevPair*)calloc(1, sizeof(*p));
  if (p == NULL) {
    WARN("Out of memory allocating a device pair");
    return mcclSystemError;
  }
  int aToB = (dirs & MCCL_DEVPAIR_SEND) != 0, bToA = (dirs & MCCL_DEVPAIR_RECV) != 0;
  MCCLCHECKGOTO(endAlloc(&p->ends[0], 0, devA, t, nChannels, aToB, bToA), res, fail);
  MCCLCHECKGOTO(endAlloc(&p->ends[1], 1, devB, t, nChannels, bToA, aToB), res, fail);
  for (int c = 0; c < nChannels; c++) {
    if (aToB) MCCLCHECKGOTO(connectLocal(p, info, 0, 1, c, initialStep), res, fail);
    if (bToA) MCCLCHECKGOTO(connectLocal(p, info, 1, 0, c, initialStep), res, fail);
  }
  CUDACHECKGOTO(cudaSetDevice(saved), res, fail);
  INFO(MCCL_INIT, "local pair dev %d <-> dev %d: %d channel(s)%s%s via %s", devA, devB, nChannels, aToB ? " A->B" : "",
       bToA ? " B->A" : "", t->name);
  *pair = p;
  return mcclSuccess;
fail:
  mcclDevPairLocalFree(p);
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclDevPairLocalFree(struct mcclDevPair* pair) {
  if (pair == NULL) return mcclSuccess;
  mcclResult_t res = endFree(&pair->ends[0]);
  mcclResult_t r = endFree(&pair->ends[1]);
  if (res == mcclSuccess) res = r;
  free(pair);
  return res;
}

// ---- two processes, through lab 05 ---------------------------------------------------------------

struct pairHeader {
  char transport[8];
  int32_t nChannels;
  int32_t dirs;
  uint64_t initialStep;
};

static int mirror(int dirs) {
  return ((dirs & MCCL_DEVPAIR_SEND) ? MCCL_DEVPAIR_RECV : 0) | ((dirs & MCCL_DEVPAIR_RECV) ? MCCL_DEVPAIR_SEND : 0);
}

// Set up every connector of one side (send or recv) through the proxy (mcclTransportSetupConnector
// binds each to ctx->proxyState); their connect information goes to the peer in one message.
static mcclResult_t setupSide(struct mcclTransportCtx* ctx, struct mcclDevPairEnd* e, int send, int peer,
                              uint64_t initialStep) {
  struct mcclConnector* conns = send ? e->send : e->recv;
  struct mcclConnect* infos = (struct mcclConnect*)calloc((size_t)e->nChannels, sizeof(struct mcclConnect));
  if (infos == NULL) {
    WARN("Out of memory for %d connect infos", e->nChannels);
    return mcclSystemError;
  }
  mcclResult_t res = mcclSuccess;
  for (int c = 0; c < e->nChannels; c++)
    MCCLCHECKGOTO(mcclTransportSetupConnector(ctx, NULL, peer, c, 0, send, &conns[c], initialStep, &infos[c], NULL),
                  res, done);
  MCCLCHECKGOTO(mcclBootstrapSend(ctx->bootstrap, peer, send ? kTagSendInfo : kTagRecvInfo, infos,
                                  (size_t)e->nChannels * sizeof(*infos)),
                res, done);
done:
  free(infos);
  return res;
}

static mcclResult_t connectSide(struct mcclTransportCtx* ctx, struct mcclDevPairEnd* e, int send, int peer) {
  struct mcclConnector* conns = send ? e->send : e->recv;
  struct mcclConnect* infos = (struct mcclConnect*)calloc((size_t)e->nChannels, sizeof(struct mcclConnect));
  if (infos == NULL) {
    WARN("Out of memory for %d connect infos", e->nChannels);
    return mcclSystemError;
  }
  mcclResult_t res = mcclSuccess;
  const struct mcclTransportComm* tc = send ? &e->transport->send : &e->transport->recv;
  // Our sender reads the peer receiver's information, and the other way round.
  MCCLCHECKGOTO(mcclBootstrapRecv(ctx->bootstrap, peer, send ? kTagRecvInfo : kTagSendInfo, infos,
                                  (size_t)e->nChannels * sizeof(*infos)),
                res, done);
  for (int c = 0; c < e->nChannels; c++) MCCLCHECKGOTO(tc->connect(ctx, &infos[c], 1, ctx->rank, &conns[c]), res, done);
done:
  free(infos);
  return res;
}

mcclResult_t mcclDevPairPeerCreate(mcclBootstrap* bs, mcclProxyState* proxy, int peer, int nChannels, int dirs,
                                   mcclDevTransport_t transport, uint64_t initialStep, struct mcclDevPairEnd** end) {
  MCCL_ARGCHECK(bs != NULL, "bs is NULL");
  MCCL_ARGCHECK(proxy != NULL, "proxy is NULL");
  MCCL_ARGCHECK(end != NULL, "end is NULL");
  MCCLCHECK(checkPairArgs(nChannels, dirs, transport));
  int rank = mcclBootstrapRank(bs), nranks = mcclBootstrapNRanks(bs);
  MCCL_ARGCHECK(peer >= 0 && peer < nranks && peer != rank, "peer %d (must be another rank of 0 .. %d; this is %d)",
                peer, nranks - 1, rank);
  mcclPeerInfo me, them;
  MCCLCHECK(mcclBootstrapGetPeerInfo(bs, rank, &me));
  MCCLCHECK(mcclBootstrapGetPeerInfo(bs, peer, &them));
  const struct mcclTransport* t = NULL;
  mcclResult_t sel = mcclDevSelectTransport(transport, &me, &them, &t);
  // Agree before allocating anything: both sides fail alike on a mismatch instead of one waiting.
  struct pairHeader mine, theirs;
  memset(&mine, 0, sizeof(mine));
  if (sel == mcclSuccess) memcpy(mine.transport, t->name, sizeof(mine.transport));
  mine.nChannels = nChannels;
  mine.dirs = dirs;
  mine.initialStep = initialStep;
  MCCLCHECK(mcclBootstrapSend(bs, peer, kTagHeader, &mine, sizeof(mine)));
  MCCLCHECK(mcclBootstrapRecv(bs, peer, kTagHeader, &theirs, sizeof(theirs)));
  if (sel != mcclSuccess) return sel;
  if (memcmp(mine.transport, theirs.transport, sizeof(mine.transport)) != 0 || theirs.nChannels != nChannels ||
      theirs.dirs != mirror(dirs) || theirs.initialStep != initialStep) {
    WARN(
        "Invalid usage: rank %d asks %.8s, %d channels, dirs %d, initial step %llu; peer %d asks %.8s, %d channels, "
        "dirs %d (mirror of ours: %d), initial step %llu",
        rank, mine.transport, nChannels, dirs, (unsigned long long)initialStep, peer,
        theirs.transport[0] ? theirs.transport : "(none)", theirs.nChannels, theirs.dirs, mirror(dirs),
        (unsigned long long)theirs.initialStep);
    return mcclInvalidUsage;
  }
  int saved = 0;
  CUDACHECK(cudaGetDevice(&saved));
  mcclResult_t res = mcclSuccess;
  struct mcclDevPairEnd* e = (struct mcclDevPairEnd*)calloc(1, sizeof(*e));
  if (e == NULL) {
    WARN("Out of memory allocating a pair endpoint");
    return mcclSystemError;
  }
  int sends = (dirs & MCCL_DEVPAIR_SEND) != 0, recvs = (dirs & MCCL_DEVPAIR_RECV) != 0;
  struct mcclTransportCtx ctx;
  mcclPeerInfo* all = (mcclPeerInfo*)calloc((size_t)nranks, sizeof(mcclPeerInfo));
  if (all == NULL) {
    WARN("Out of memory for %d peer records", nranks);
    res = mcclSystemError;
    goto fail;
  }
  for (int r = 0; r < nranks; r++) MCCLCHECKGOTO(mcclBootstrapGetPeerInfo(bs, r, &all[r]), res, fail);
  MCCLCHECKGOTO(endAlloc(e, rank, me.cudaDev, t, nChannels, sends, recvs), res, fail);
  MCCLCHECKGOTO(endCtx(&ctx, e, nranks, all), res, fail);
  ctx.bootstrap = bs;
  ctx.proxyState = proxy;
  // connect maps the peer's memory for the current device: this rank's.
  CUDACHECKGOTO(cudaSetDevice(me.cudaDev), res, fail);
  if (sends) MCCLCHECKGOTO(setupSide(&ctx, e, 1, peer, initialStep), res, fail);
  if (recvs) MCCLCHECKGOTO(setupSide(&ctx, e, 0, peer, initialStep), res, fail);
  if (sends) MCCLCHECKGOTO(connectSide(&ctx, e, 1, peer), res, fail);
  if (recvs) MCCLCHECKGOTO(connectSide(&ctx, e, 0, peer), res, fail);
  // Both sides have mapped before either may free: a /dev/shm creator closing first would unlink
  // the file the peer still has to open.
  char b = 1;
  MCCLCHECKGOTO(mcclBootstrapSend(bs, peer, kTagDone, &b, 1), res, fail);
  MCCLCHECKGOTO(mcclBootstrapRecv(bs, peer, kTagDone, &b, 1), res, fail);
  cudaSetDevice(saved);
  free(all);
  INFO(MCCL_INIT, "rank %d <-> rank %d: %d channel(s)%s%s via %s", rank, peer, nChannels, sends ? " send" : "",
       recvs ? " recv" : "", t->name);
  *end = e;
  return mcclSuccess;
fail:
  mcclDevPairPeerFree(e);
  free(all);
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclDevPairPeerFree(struct mcclDevPairEnd* end) {
  if (end == NULL) return mcclSuccess;
  mcclResult_t res = endFree(end);
  free(end);
  return res;
}
