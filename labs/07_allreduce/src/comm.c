// Lab 07: the lab's communicator (NCCL's ncclCommInitRank / ncclCommInitAll / commDestroy, in small):
// a proxy and a bootstrap (labs 05 and common), the peer records, one ring over all ranks
// (src/graph/rings.cc: here ranks in device order), nChannels channels connected send -> next and
// recv <- prev by lab 06's mcclTransportP2pConnect/P2pSetup (src/transport.cc), device arrays of the
// per-channel connections and the kernels' view of the communicator (struct mcclKernelComm), a host-mapped
// abort flag and status word, and a signal area every rank maps.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "enqueue_internal.h"
#include "mccl_alloc.h"
#include "mccl_channel.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_devconn.h"
#include "mccl_param.h"
#include "mccl_utils.h"

// Ring order (NCCL's rings.cc builds it from the topology): by host, then device, then rank, so
// that the ranks of one host are neighbours and only two edges of the ring cross hosts (those take
// lab 08's NET; the others keep P2P/SHM), one process driving several devices gets them in device
// order, and mpirun ranks on distinct devices get rank order.
static const mcclPeerInfo* sortInfo;
static int byDevice(const void* a, const void* b) {
  const mcclPeerInfo *x = &sortInfo[*(const int*)a], *y = &sortInfo[*(const int*)b];
  if (x->hostHash != y->hostHash) return x->hostHash < y->hostHash ? -1 : 1;
  if (x->cudaDev != y->cudaDev) return x->cudaDev < y->cudaDev ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

mcclResult_t mcclLabRingBuild(const mcclPeerInfo* peerInfo, int nRanks, int rank, struct mcclLabRing* ring) {
  MCCL_ARGCHECK(peerInfo != NULL, "peerInfo is NULL");
  MCCL_ARGCHECK(nRanks >= 1 && nRanks <= MCCL_LAB_MAX_RANKS, "nRanks %d (must be 1 .. %d)", nRanks, MCCL_LAB_MAX_RANKS);
  MCCL_ARGCHECK(rank >= 0 && rank < nRanks, "rank %d (must be 0 .. %d)", rank, nRanks - 1);
  MCCL_ARGCHECK(ring != NULL, "ring is NULL");
  for (int r = 0; r < nRanks; r++)
    MCCL_ARGCHECK(peerInfo[r].rank == r, "peerInfo[%d].rank is %d: the records must be in rank order", r,
                  peerInfo[r].rank);
  // EXERCISE(07.ring)
  int n = nRanks;
  int* order = (int*)calloc((size_t)n, sizeof(int));
  if (order == NULL) {
    WARN("Out of memory for a ring of %d ranks", n);
    return mcclSystemError;
  }
  for (int r = 0; r < n; r++) order[r] = r;
  static pthread_mutex_t sortLock = PTHREAD_MUTEX_INITIALIZER;  // qsort has no context argument in C11
  pthread_mutex_lock(&sortLock);
  sortInfo = peerInfo;
  qsort(order, (size_t)n, sizeof(int), byDevice);
  pthread_mutex_unlock(&sortLock);
  int index = 0;
  for (int i = 0; i < n; i++)
    if (order[i] == rank) index = i;
  ring->userRanks = order;
  ring->index = index;
  ring->prev = order[(index + n - 1) % n];
  ring->next = order[(index + 1) % n];
  return mcclSuccess;
  // END EXERCISE(07.ring)
}

// The kernels' view of the ring connections: channel c's recv-from-prev and send-to-next, one
// device array each (lab 06's mcclDevWork takes arrays indexed by channel).
static mcclResult_t ringConns(mcclLabComm* comm) {
  // EXERCISE(07.ring_conns)
  struct mcclConnInfo recv[MCCL_MAX_CHANNELS], send[MCCL_MAX_CHANNELS];
  for (int c = 0; c < comm->nChannels; c++) {
    struct mcclChannelPeer* prev = &comm->ctx.channels[c].peers[comm->ring.prev];
    struct mcclChannelPeer* next = &comm->ctx.channels[c].peers[comm->ring.next];
    if (!prev->recv[0].connected || !next->send[0].connected) {
      WARN("Internal error: channel %d of rank %d is not connected to its ring neighbours", c, comm->rank);
      return mcclInternalError;
    }
    recv[c] = prev->recv[0].conn;
    send[c] = next->send[0].conn;
    comm->transport[c] = next->send[0].transport;
  }
  // One allocation for both arrays (lab 06's mcclDevCalloc: freed without waiting for the device); the
  // send array follows the receive array.
  size_t bytes = sizeof(struct mcclConnInfo) * (size_t)comm->nChannels;
  MCCLCHECK(mcclDevCalloc((void**)&comm->devRecvConns, 2 * bytes));
  comm->devSendConns = comm->devRecvConns + comm->nChannels;
  CUDACHECK(cudaMemcpy(comm->devRecvConns, recv, bytes, cudaMemcpyHostToDevice));
  CUDACHECK(cudaMemcpy(comm->devSendConns, send, bytes, cudaMemcpyHostToDevice));
  // A copy from pageable memory may return before it lands, and the first kernel runs on the caller's
  // stream, which need not wait for the NULL stream (non-blocking): wait for the copies here.
  CUDACHECK(cudaStreamSynchronize(cudaStreamLegacy));
  return mcclSuccess;
  // END EXERCISE(07.ring_conns)
}

// NET's receiving proxy takes every step into a SIMPLE slot and copies LL lines on to the LL slot
// (lab 08), so an LL step must fit a SIMPLE slot. Where it does not (a small MCCL_BUFFSIZE), the
// communicator stays on SIMPLE, and every rank must agree: a rank without a NET edge of its own (one
// in the middle of a host) would otherwise pick LL while its neighbours send SIMPLE.
// LL128 needs an LL128 FIFO on every ring connection of every rank (P2P over NVLink only, mccl_conn.h says
// why): the ranks agree on that too, and remember the first rank and transport that lacks one, to name it
// (a P2P edge without one is a pair over PCIe).
#define AGREE_SIMPLE_ONLY 1
#define AGREE_NO_LL128 2
static mcclResult_t agreeProtocols(mcclLabComm* comm) {
  int hasNet = 0, noLl128 = 0, noLl128Transport = TRANSPORT_P2P;
  for (int c = 0; c < comm->nChannels; c++) {
    const struct mcclChannelPeer* prev = &comm->ctx.channels[c].peers[comm->ring.prev];
    const struct mcclChannelPeer* next = &comm->ctx.channels[c].peers[comm->ring.next];
    hasNet |= next->send[0].transport == TRANSPORT_NET || prev->recv[0].transport == TRANSPORT_NET;
    const struct mcclConnector* edges[2] = {&next->send[0], &prev->recv[0]};
    for (int e = 0; e < 2 && comm->nRanks > 1; e++)
      if (edges[e]->conn.buffs[MCCL_PROTO_LL128] == NULL && !noLl128) {
        noLl128 = 1;
        noLl128Transport = edges[e]->transport;
      }
  }
  int* all = (int*)calloc((size_t)comm->nRanks * 2, sizeof(int));
  if (all == NULL) {
    WARN("Out of memory agreeing on the protocols of %d ranks", comm->nRanks);
    return mcclSystemError;
  }
  int* mine = all + 2 * comm->rank;
  mine[0] =
      (hasNet && comm->ctx.buffSizes[0][MCCL_PROTO_LL] > comm->ctx.buffSizes[0][MCCL_PROTO_SIMPLE] ? AGREE_SIMPLE_ONLY
                                                                                                   : 0) |
      (noLl128 ? AGREE_NO_LL128 : 0);
  mine[1] = noLl128Transport;
  mcclResult_t res = mcclBootstrapAllGather(comm->bootstrap, all, 2 * sizeof(int));
  comm->ll128Ok = comm->nRanks > 1;
  comm->noLl128Rank = -1;
  for (int r = 0; res == mcclSuccess && r < comm->nRanks; r++) {
    comm->simpleOnly |= (all[2 * r] & AGREE_SIMPLE_ONLY) != 0;
    if ((all[2 * r] & AGREE_NO_LL128) && comm->noLl128Rank < 0) {
      comm->ll128Ok = 0;
      comm->noLl128Rank = r;
      comm->noLl128Transport = all[2 * r + 1];
    }
  }
  free(all);
  if (res == mcclSuccess && comm->simpleOnly)
    INFO(MCCL_INIT, "rank %d: a NET edge's LL slot (%d B) is larger than its SIMPLE slot (%d B): SIMPLE only",
         comm->rank, comm->ctx.buffSizes[0][MCCL_PROTO_LL] / MCCL_STEPS,
         comm->ctx.buffSizes[0][MCCL_PROTO_SIMPLE] / MCCL_STEPS);
  return res;
}

// Point-to-point channels: a power of two (NCCL's p2pnChannels, rounded down here: only the
// communicator's channels exist).
static int p2pNChannels(int nChannels) {
  int n = 1;
  while (n * 2 <= nChannels) n *= 2;
  return n;
}

// The kernels' view of the communicator (NCCL's ncclKernelComm and its channels in device memory),
// written once: every launch's argument points at it, and the generic kernel copies it into shared memory.
static mcclResult_t devCommCreate(mcclLabComm* comm) {
  struct mcclKernelComm dc;
  memset(&dc, 0, sizeof(dc));
  dc.rank = comm->rank;
  dc.nRanks = comm->nRanks;
  dc.nChannels = comm->nChannels;
  dc.nP2pChannels = comm->nP2pChannels;
  dc.ringIndex = comm->ring.index;
  for (int k = 0; k < comm->nRanks; k++) dc.ringRanks[k] = comm->ring.userRanks[(comm->ring.index + k) % comm->nRanks];
  dc.ringRecv = comm->devRecvConns;
  dc.ringSend = comm->devSendConns;
  for (int c = 0; c < comm->nP2pChannels; c++) dc.p2pPeers[c] = comm->ctx.channels[c].devPeers;
  MCCLCHECK(mcclDevCalloc((void**)&comm->devComm, sizeof(dc)));
  CUDACHECK(cudaMemcpy(comm->devComm, &dc, sizeof(dc), cudaMemcpyHostToDevice));
  // As ringConns: the first kernel's stream need not wait for the NULL stream's copy.
  CUDACHECK(cudaStreamSynchronize(cudaStreamLegacy));
  return mcclSuccess;
}

static mcclResult_t signalArea(mcclLabComm* comm) {
  if (comm->multiHost) {
    INFO(MCCL_INIT, "rank %d: ranks on several hosts share no memory: no signal area, only the ring", comm->rank);
    return mcclSuccess;
  }
  if (comm->nRanks > MCCL_SYM_MAX_RANKS) {
    INFO(MCCL_INIT, "rank %d: %d ranks, more than the symmetric kernels serve (%d): no signal area, only the ring",
         comm->rank, comm->nRanks, MCCL_SYM_MAX_RANKS);
    return mcclSuccess;
  }
  if (!mcclCuMemEnable()) {
    INFO(MCCL_INIT, "rank %d: cuMem allocations are off, MCCL_CUMEM_ENABLE: no signal area, only the ring algorithm",
         comm->rank);
    return mcclSuccess;
  }
  void* sig = NULL;
  MCCLCHECK(mcclMemAlloc(&sig, MCCL_SIGNAL_BYTES));
  mcclResult_t res = mcclSuccess;
  MCCLCHECKGOTO(mcclDevCalloc((void**)&comm->seqCounters, sizeof(uint64_t) * MCCL_SIGNAL_MAX_BLOCKS), res, fail);
  CUDACHECKGOTO(cudaMemset(sig, 0, MCCL_SIGNAL_ZEROED_BYTES), res, fail);
  CUDACHECKGOTO(cudaDeviceSynchronize(), res, fail);
  MCCLCHECKGOTO(labWindowMap(comm, sig, MCCL_SIGNAL_BYTES, &comm->signalWin), res, fail);
  return mcclSuccess;
fail:
  mcclDevFree(comm->seqCounters);
  comm->seqCounters = NULL;
  mcclMemFree(sig);
  return res;
}

static mcclResult_t commFree(mcclLabComm* comm) {
  mcclResult_t res = mcclSuccess, r;
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  cudaSetDevice(comm->cudaDev);
  int aborted = mcclIsAborted(comm->abortFlag);
#define KEEP_FIRST(call)                                 \
  do {                                                   \
    r = (call);                                          \
    if (r != mcclSuccess && res == mcclSuccess) res = r; \
  } while (0)
  // The kernels read what is freed below: wait for this communicator's own, not for the device's other work.
  if (comm->launches.events) KEEP_FIRST(mcclLabCommWaitLaunches(comm));
  mcclLabWatchdogFree(comm);  // its thread reads the communicator
  // No barrier: what this rank frees, peers hold through their own mappings (the driver counts
  // them; a /dev/shm file stays mapped after its unlink), so destroy is not collective, and one
  // thread may destroy the communicators of mcclLabCommInitAll one after the other.
  while (comm->windows) {
    mcclLabWindow* w = comm->windows;
    comm->windows = w->next;
    KEEP_FIRST(labWindowUnmap(comm, w));
  }
  // The assisted allreduce's stream and events (lab 10 made them; its work ended with the launches above).
  if (comm->ceColl.stream) cudaStreamDestroy(comm->ceColl.stream);
  if (comm->ceColl.agStream) cudaStreamDestroy(comm->ceColl.agStream);
  if (comm->ceColl.fork) cudaEventDestroy(comm->ceColl.fork);
  if (comm->ceColl.agDone) cudaEventDestroy(comm->ceColl.agDone);
  if (comm->ceColl.rsRound) cudaEventDestroy(comm->ceColl.rsRound);
  if (comm->ceColl.join) cudaEventDestroy(comm->ceColl.join);
  if (comm->signalWin) {
    void* sig = comm->signalWin->buff;
    KEEP_FIRST(labWindowUnmap(comm, comm->signalWin));
    KEEP_FIRST(mcclMemFree(sig));
  }
  // The tasks of a group that still holds this communicator are dropped (that group's end says so).
  mcclLabGroupForget(comm);
  mcclLabTasksFree(comm);
  mcclLabUserOpsFree(comm);
  mcclLabLaunchesFree(comm);
  // Lab 06's allocator throughout: no free below waits for the device's other streams.
  KEEP_FIRST(mcclDevFree(comm->seqCounters));
  KEEP_FIRST(mcclDevFree(comm->devComm));
  KEEP_FIRST(mcclDevFree(comm->devRecvConns));  // devSendConns lives in the same allocation
  // Connectors before the proxy: their proxy halves are freed through it. After an abort the proxy
  // answers no more RPCs: stop it first, so the connectors free only their user side and
  // mcclProxyDestroy frees the proxy halves.
  if (aborted && comm->proxy) (void)mcclProxyStop(comm->proxy);
  KEEP_FIRST(mcclChannelsFree(&comm->ctx));
  KEEP_FIRST(mcclProxyDestroy(comm->proxy));
  if (comm->bootstrap) KEEP_FIRST(aborted ? mcclBootstrapAbort(comm->bootstrap) : mcclBootstrapClose(comm->bootstrap));
  KEEP_FIRST(mcclDevAbortFlagFree(comm->abortFlag));
  KEEP_FIRST(mcclDevAbortFlagFree(comm->status));
#undef KEEP_FIRST
  free(comm->peerInfo);
  free(comm->ring.userRanks);
  free(comm);
  if (saved >= 0) cudaSetDevice(saved);
  return res;
}

int mcclLabCtaPolicy(int rank, int configured) {
  const int64_t env = mcclParamCtaPolicy();
  if (env == -1) return configured;
  // As NCCL: the environment overrides the config, and a value it does not know is the default.
  if (env < MCCL_CTA_POLICY_DEFAULT || env > MCCL_CTA_POLICY_ZERO) {
    INFO(MCCL_ENV, "rank %d: MCCL_CTA_POLICY=%lld is not a CTA policy (0, 1 or 2): the default", rank, (long long)env);
    return MCCL_CTA_POLICY_DEFAULT;
  }
  if (env != configured && configured != MCCL_CTA_POLICY_DEFAULT)
    INFO(MCCL_ENV, "rank %d: the configured CTA policy %d is reset to MCCL_CTA_POLICY=%lld", rank, configured,
         (long long)env);
  return (int)env;
}

mcclResult_t mcclLabCommAlloc(mcclLabComm** out, int nranks, int rank, int cudaDev,
                              struct mcclTransport* const* transports) {
  MCCL_ARGCHECK(out != NULL, "comm is NULL");
  MCCL_ARGCHECK(transports != NULL, "transports is NULL (a transport table, e.g. mcclLocalTransports)");
  MCCL_ARGCHECK(nranks >= 1 && nranks <= MCCL_LAB_MAX_RANKS, "nranks %d (must be 1 .. %d)", nranks, MCCL_LAB_MAX_RANKS);
  MCCL_ARGCHECK(rank >= 0 && rank < nranks, "rank %d (must be 0 .. %d)", rank, nranks - 1);
  int ndev = 0;
  CUDACHECK(cudaGetDeviceCount(&ndev));
  MCCL_ARGCHECK(cudaDev >= 0 && cudaDev < ndev, "cudaDev %d (this process sees %d devices)", cudaDev, ndev);
  int saved = 0;
  CUDACHECK(cudaGetDevice(&saved));
  mcclResult_t res = mcclSuccess;
  mcclLabComm* comm = (mcclLabComm*)calloc(1, sizeof(*comm));
  if (comm == NULL) {
    WARN("Out of memory allocating a communicator");
    return mcclSystemError;
  }
  comm->rank = rank;
  comm->nRanks = nranks;
  comm->cudaDev = cudaDev;
  comm->ctaPolicy = mcclLabCtaPolicy(rank, MCCL_CTA_POLICY_DEFAULT);
  mcclLabThreadThresholds(comm);
  CUDACHECKGOTO(cudaSetDevice(cudaDev), res, fail);
  MCCLCHECKGOTO(mcclDevLoadKernels(cudaDev), res, fail);
  MCCLCHECKGOTO(mcclTransportCtxInit(&comm->ctx, rank, nranks, cudaDev), res, fail);
  // The table of the layer that knows every transport of this program: lab 07 names none itself.
  comm->ctx.transports = transports;
  MCCLCHECKGOTO(mcclDevAbortFlagCreate(&comm->abortFlag, &comm->abortFlagDev), res, fail);
  // The status word is a host-mapped word like the flag (lab 06's allocator): kernels write it, the host reads it.
  MCCLCHECKGOTO(mcclDevAbortFlagCreate((volatile uint32_t**)&comm->status, &comm->statusDev), res, fail);
  cudaSetDevice(saved);
  *out = comm;
  return mcclSuccess;
fail:
  commFree(comm);
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclLabCommInitRank(mcclLabComm* comm, const mcclUniqueId* id, int nChannels) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  MCCL_ARGCHECK(id != NULL, "id is NULL");
  MCCL_ARGCHECK(comm->bootstrap == NULL && comm->proxy == NULL, "rank %d's communicator is initialised already",
                comm->rank);
  if (nChannels == 0) nChannels = (int)mcclParamNchannels();
  const int chosen = nChannels == 0;  // the default, which depends on the hosts (after the peer records)
  // A channel per two SMs the device reports, at most 64: on an H100 or H200 (132 SMs) 64 channels, as
  // over NVLink each block's copy rate is bounded and large collectives gain from more blocks than 32 (the
  // channel sweep in src/tuning-basis.md); on the sim (4 SMs, its CPU threads) 2.
  if (nChannels == 0) {
    int sms = 0;
    CUDACHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, comm->cudaDev));
    nChannels = sms / 2 < 1 ? 1 : sms / 2 > 64 ? 64 : sms / 2;
  }
  MCCL_ARGCHECK(nChannels >= 1 && nChannels <= MCCL_SIGNAL_MAX_BLOCKS,
                "nChannels %d (must be 1 .. %d; 0 reads "
                "MCCL_NCHANNELS)",
                nChannels, MCCL_SIGNAL_MAX_BLOCKS);
  const int rank = comm->rank, nranks = comm->nRanks, cudaDev = comm->cudaDev;
  int saved = 0;
  CUDACHECK(cudaGetDevice(&saved));
  mcclResult_t res = mcclSuccess;
  CUDACHECKGOTO(cudaSetDevice(cudaDev), res, fail);
  MCCLCHECKGOTO(mcclProxyCreate(rank, cudaDev, comm->abortFlag, comm->ctx.transports, &comm->proxy), res, fail);
  MCCLCHECKGOTO(
      mcclBootstrapInit(id, rank, nranks, cudaDev, mcclProxyGetAddress(comm->proxy), comm->abortFlag, &comm->bootstrap),
      res, fail);
  MCCLCHECKGOTO(mcclProxyInit(comm->proxy, comm->bootstrap), res, fail);
  comm->peerInfo = (mcclPeerInfo*)calloc((size_t)nranks, sizeof(mcclPeerInfo));
  if (comm->peerInfo == NULL) {
    WARN("Out of memory for %d peer records", nranks);
    res = mcclSystemError;
    goto fail;
  }
  for (int r = 0; r < nranks; r++)
    MCCLCHECKGOTO(mcclBootstrapGetPeerInfo(comm->bootstrap, r, &comm->peerInfo[r]), res, fail);
  MCCLCHECKGOTO(mcclLabRingBuild(comm->peerInfo, nranks, rank, &comm->ring), res, fail);
  // Ranks on several hosts: the ring's edges between them are lab 08's NET connections, each channel a
  // proxy op and network requests of its own, which one progress thread serves in turn; NCCL too runs
  // few channels per NIC: on the net path a few channels beat many both in latency and in bandwidth
  // (docs/results, the net run).
  for (int r = 1; r < nranks; r++) comm->multiHost |= comm->peerInfo[r].hostHash != comm->peerInfo[0].hostHash;
  if (chosen && comm->multiHost) nChannels = MCCL_LAB_MULTIHOST_NCHANNELS;
  comm->ctx.peerInfo = comm->peerInfo;
  comm->ctx.bootstrap = comm->bootstrap;
  comm->ctx.proxyState = comm->proxy;
  comm->ctx.abortFlag = comm->abortFlag;
  MCCLCHECKGOTO(mcclChannelsInit(&comm->ctx, nChannels), res, fail);
  comm->nChannels = nChannels;
  comm->nP2pChannels = p2pNChannels(nChannels);
  if (nranks > 1) {
    for (int c = 0; c < nChannels; c++)
      MCCLCHECKGOTO(mcclTransportP2pConnect(&comm->ctx, c, 1, &comm->ring.prev, 1, &comm->ring.next, 0), res, fail);
    MCCLCHECKGOTO(mcclTransportP2pSetup(&comm->ctx, NULL, 0), res, fail);
    MCCLCHECKGOTO(ringConns(comm), res, fail);
    MCCLCHECKGOTO(agreeProtocols(comm), res, fail);
  }
  MCCLCHECKGOTO(devCommCreate(comm), res, fail);
  MCCLCHECKGOTO(signalArea(comm), res, fail);
  MCCLCHECKGOTO(mcclLabLaunchesInit(comm), res, fail);
  MCCLCHECKGOTO(mcclLabWatchdogInit(comm), res, fail);
  INFO(MCCL_INIT, "rank %d/%d on dev %d: ring prev %d next %d, %d channel(s) via %s", rank, nranks, cudaDev,
       comm->ring.prev, comm->ring.next, nChannels,
       nranks == 1                           ? "none"
       : comm->transport[0] == TRANSPORT_P2P ? "P2P"
       : comm->transport[0] == TRANSPORT_NET ? "NET"
                                             : "SHM");
  cudaSetDevice(saved);
  return mcclSuccess;
fail:
  // A peer may be waiting on this rank: raise the flag so our proxy and bootstrap stop at once.
  __atomic_store_n(comm->abortFlag, 1, __ATOMIC_RELEASE);
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclLabCommInit(mcclLabComm** out, int nranks, const mcclUniqueId* id, int rank, int cudaDev,
                             int nChannels, struct mcclTransport* const* transports) {
  MCCL_ARGCHECK(out != NULL, "comm is NULL");
  mcclLabComm* comm = NULL;
  MCCLCHECK(mcclLabCommAlloc(&comm, nranks, rank, cudaDev, transports));
  mcclResult_t res = mcclLabCommInitRank(comm, id, nChannels);
  if (res != mcclSuccess) {
    commFree(comm);
    return res;
  }
  *out = comm;
  return mcclSuccess;
}

struct initAllArg {
  mcclLabComm* comm;
  const mcclUniqueId* id;
  int ndev, rank, dev, nChannels;
  struct mcclTransport* const* transports;
  mcclResult_t res;
};

static void* initAllThread(void* p) {
  struct initAllArg* a = (struct initAllArg*)p;
  a->res = cudaSetDevice(a->dev) == cudaSuccess ? mcclSuccess : mcclUnhandledCudaError;
  if (a->res == mcclSuccess)
    a->res = mcclLabCommInit(&a->comm, a->ndev, a->id, a->rank, a->dev, a->nChannels, a->transports);
  return NULL;
}

mcclResult_t mcclLabCommInitAll(mcclLabComm** comms, int ndev, const int* devlist, int nChannels,
                                struct mcclTransport* const* transports) {
  MCCL_ARGCHECK(comms != NULL, "comms is NULL");
  MCCL_ARGCHECK(transports != NULL, "transports is NULL (a transport table, e.g. mcclLocalTransports)");
  MCCL_ARGCHECK(ndev >= 1 && ndev <= MCCL_LAB_MAX_RANKS, "ndev %d (must be 1 .. %d)", ndev, MCCL_LAB_MAX_RANKS);
  int visible = 0;
  CUDACHECK(cudaGetDeviceCount(&visible));
  for (int i = 0; i < ndev; i++) {
    int d = devlist ? devlist[i] : i;
    MCCL_ARGCHECK(d >= 0 && d < visible, "devlist[%d] %d (this process sees %d devices)", i, d, visible);
    for (int j = 0; j < i; j++)
      MCCL_ARGCHECK(!devlist || devlist[j] != d, "devlist[%d] and devlist[%d] are both device %d", j, i, d);
  }
  mcclUniqueId id;
  MCCLCHECK(mcclGetUniqueId(&id));
  struct initAllArg a[MCCL_LAB_MAX_RANKS];
  pthread_t th[MCCL_LAB_MAX_RANKS];
  int started = 0;
  mcclResult_t res = mcclSuccess;
  memset(a, 0, sizeof(a));
  // One thread per rank: the ranks' initialisations wait on each other (bootstrap, connections).
  for (; started < ndev; started++) {
    int dev = devlist ? devlist[started] : started;
    a[started] = (struct initAllArg){NULL, &id, ndev, started, dev, nChannels, transports, mcclSuccess};
    if (pthread_create(&th[started], NULL, initAllThread, &a[started]) != 0) {
      WARN("pthread_create failed for rank %d of %d", started, ndev);
      res = mcclSystemError;
      break;
    }
  }
  // Threads that could not start leave the others waiting for them until MCCL_BOOTSTRAP_TIMEOUT.
  for (int i = 0; i < started; i++) {
    pthread_join(th[i], NULL);
    if (a[i].res != mcclSuccess && res == mcclSuccess) res = a[i].res;
  }
  if (res != mcclSuccess) {
    for (int i = 0; i < started; i++)
      if (a[i].comm) {
        mcclLabCommAbort(a[i].comm);
        commFree(a[i].comm);
      }
    return res;
  }
  for (int i = 0; i < ndev; i++) comms[i] = a[i].comm;
  return mcclSuccess;
}

mcclResult_t mcclLabCommAbort(mcclLabComm* comm) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  __atomic_store_n(comm->abortFlag, 1, __ATOMIC_RELEASE);
  return mcclSuccess;
}

mcclResult_t mcclLabCommDestroy(mcclLabComm* comm) {
  if (comm == NULL) return mcclSuccess;
  return commFree(comm);
}
