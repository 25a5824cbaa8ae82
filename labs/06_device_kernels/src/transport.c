// Lab 06: channels and the connection machinery, as NCCL 2.28.9 src/transport.cc (ncclTransports[],
// selectTransport, ncclTransportP2pConnect, ncclTransportP2pSetup) and src/channel.cc (initChannel): a
// transport per connector chosen by canConnect in table order, connect information swapped through the
// bootstrap, and each connection's mcclConnInfo copied into the channel's device-side peers.
#include <stdlib.h>
#include <string.h>
#include "mccl_channel.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_devconn.h"
#include "mccl_p2p.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"

// The transport table (NCCL's ncclTransports[], one static array in transport.cc, beside the selection).
// Here each lab links only itself and the labs below it and names no transport of a lab above it, so a
// table of every transport would not link into lab 06's or lab 07's programs; and a transport that put
// itself into a lower lab's table (a constructor) would be there only when something else pulled its
// object into the link, which a layer above then had to force. So the table is a static array of the
// lowest layer that sees every transport a program has, and selection takes it from the context its
// creator filled: this one (P2P and SHM) up to lab 07, lab 08's mcclTransports (with NET) above.
// Index order is preference: P2P, then SHM.
struct mcclTransport* const mcclLocalTransports[MCCL_NUM_TRANSPORTS] = {&mcclP2pTransport, &mcclShmTransport, NULL};

// Bootstrap tags of mcclTransportP2pSetup: (distance << 8) + connIndex, as NCCL's (i << 8) + graph id,
// moved above the tags lab 06's pair helper and the tests use.
#define P2P_SETUP_TAG_BASE 0x70000000

mcclResult_t mcclChannelsInit(struct mcclTransportCtx* ctx, int nChannels) {
  MCCL_ARGCHECK(ctx != NULL, "ctx is NULL");
  MCCL_ARGCHECK(nChannels >= 1 && nChannels <= MCCL_MAX_CHANNELS, "nChannels %d (must be 1 .. %d)", nChannels,
                MCCL_MAX_CHANNELS);
  MCCL_ARGCHECK(ctx->nRanks >= 1 && ctx->rank >= 0 && ctx->rank < ctx->nRanks, "ctx rank %d of %d ranks", ctx->rank,
                ctx->nRanks);
  if (ctx->nChannels != 0 || ctx->connectSend != NULL) {
    WARN("Invalid usage: the context already has %d channels", ctx->nChannels);
    return mcclInvalidUsage;
  }
  mcclResult_t res = mcclSuccess;
  int saved = -1;
  CUDACHECK(cudaGetDevice(&saved));
  CUDACHECKGOTO(cudaSetDevice(ctx->cudaDev), res, fail);
  ctx->connectSend = (uint64_t*)calloc((size_t)ctx->nRanks, sizeof(uint64_t));
  ctx->connectRecv = (uint64_t*)calloc((size_t)ctx->nRanks, sizeof(uint64_t));
  if (ctx->connectSend == NULL || ctx->connectRecv == NULL) goto oom;
  // Every channel's device-side peers in one allocation (mcclDevCalloc: zeroed, and freed without waiting
  // for the device's other streams).
  MCCLCHECKGOTO(mcclDevCalloc((void**)&ctx->devPeersAll,
                              (size_t)nChannels * (size_t)ctx->nRanks * sizeof(struct mcclDevChannelPeer)),
                res, fail);
  for (int c = 0; c < nChannels; c++) {
    struct mcclChannel* ch = &ctx->channels[c];
    memset(ch, 0, sizeof(*ch));
    ch->id = c;
    ctx->nChannels = c + 1;  // mcclChannelsFree sees what exists so far
    ch->peers = (struct mcclChannelPeer*)calloc((size_t)ctx->nRanks, sizeof(struct mcclChannelPeer));
    if (ch->peers == NULL) goto oom;
    ch->devPeers = ctx->devPeersAll + (size_t)c * (size_t)ctx->nRanks;
  }
  cudaSetDevice(saved);
  return mcclSuccess;
oom:
  WARN("Out of memory allocating %d channels of %d peers", nChannels, ctx->nRanks);
  res = mcclSystemError;
fail:
  mcclChannelsFree(ctx);
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclChannelsFree(struct mcclTransportCtx* ctx) {
  if (ctx == NULL) return mcclSuccess;
  mcclResult_t res = mcclSuccess, r;
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  if (ctx->nChannels > 0 && cudaSetDevice(ctx->cudaDev) != cudaSuccess) res = mcclUnhandledCudaError;
  for (int c = 0; c < ctx->nChannels; c++) {
    struct mcclChannel* ch = &ctx->channels[c];
    for (int p = 0; ch->peers && p < ctx->nRanks; p++)
      for (int i = 0; i < MCCL_MAX_CONNS; i++) {
        r = mcclConnectorFree(&ch->peers[p].send[i]);
        if (r != mcclSuccess && res == mcclSuccess) res = r;
        r = mcclConnectorFree(&ch->peers[p].recv[i]);
        if (r != mcclSuccess && res == mcclSuccess) res = r;
      }
    free(ch->peers);
    memset(ch, 0, sizeof(*ch));
  }
  r = mcclDevFree(ctx->devPeersAll);
  if (r != mcclSuccess && res == mcclSuccess) res = r;
  ctx->devPeersAll = NULL;
  ctx->nChannels = 0;
  free(ctx->connectSend);
  free(ctx->connectRecv);
  ctx->connectSend = ctx->connectRecv = NULL;
  if (saved >= 0) cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclTransportSetupConnector(struct mcclTransportCtx* ctx, const void* graph, int peer, int channelId,
                                         int connIndex, int send, struct mcclConnector* connector, uint64_t initialStep,
                                         struct mcclConnect* connectInfo, int* transport) {
  MCCL_ARGCHECK(ctx != NULL && ctx->peerInfo != NULL, "ctx %p has no peerInfo", (void*)ctx);
  MCCL_ARGCHECK(ctx->transports != NULL, "ctx->transports is NULL (a transport table, e.g. mcclLocalTransports)");
  MCCL_ARGCHECK(peer >= 0 && peer < ctx->nRanks, "peer %d (ranks 0 .. %d)", peer, ctx->nRanks - 1);
  MCCL_ARGCHECK(connIndex >= 0 && connIndex < MCCL_MAX_CONNS, "connIndex %d (0 .. %d)", connIndex, MCCL_MAX_CONNS - 1);
  MCCL_ARGCHECK(send == 0 || send == 1, "send %d (0 or 1)", send);
  MCCL_ARGCHECK(connector != NULL && connectInfo != NULL, "connector %p / connectInfo %p is NULL", (void*)connector,
                (void*)connectInfo);
  const mcclPeerInfo* myInfo = &ctx->peerInfo[ctx->rank];
  const mcclPeerInfo* peerInfo = &ctx->peerInfo[peer];
  for (int t = 0; t < MCCL_NUM_TRANSPORTS; t++) {
    struct mcclTransport* tp = ctx->transports[t];
    if (tp == NULL || (ctx->onlyTransport != TRANSPORT_UNDEFINED && ctx->onlyTransport != t)) continue;
    int ok = 0;
    MCCLCHECK(tp->canConnect(&ok, ctx, myInfo, peerInfo));
    if (!ok) continue;
    MCCLCHECK(mcclConnectorInit(connector, t, tp, send, ctx->rank));
    connector->initialStep = initialStep;
    if (ctx->proxyState) MCCLCHECK(mcclProxyConnect((mcclProxyState*)ctx->proxyState, connector));
    const struct mcclTransportComm* tc = send ? &tp->send : &tp->recv;
    MCCLCHECK(tc->setup(ctx, graph, myInfo, peerInfo, connectInfo, connector, channelId, connIndex));
    if (transport) *transport = t;
    return mcclSuccess;
  }
  WARN("Invalid usage: no transport%s%s found for rank %d (dev %d) %s rank %d (dev %d)",
       ctx->onlyTransport != TRANSPORT_UNDEFINED ? " of the forced " : "",
       ctx->onlyTransport == TRANSPORT_P2P   ? "P2P"
       : ctx->onlyTransport == TRANSPORT_SHM ? "SHM"
       : ctx->onlyTransport == TRANSPORT_NET ? "NET"
                                             : "",
       myInfo->rank, myInfo->cudaDev, send ? "->" : "<-", peerInfo->rank, peerInfo->cudaDev);
  return mcclInvalidUsage;
}

mcclResult_t mcclTransportP2pConnect(struct mcclTransportCtx* ctx, int channelId, int nrecv, const int* peerRecv,
                                     int nsend, const int* peerSend, int connIndex) {
  MCCL_ARGCHECK(ctx != NULL && ctx->connectSend != NULL, "ctx %p has no channels (mcclChannelsInit)", (void*)ctx);
  MCCL_ARGCHECK(channelId >= 0 && channelId < ctx->nChannels, "channelId %d (0 .. %d)", channelId, ctx->nChannels - 1);
  MCCL_ARGCHECK(connIndex >= 0 && connIndex < MCCL_MAX_CONNS, "connIndex %d (0 .. %d)", connIndex, MCCL_MAX_CONNS - 1);
  MCCL_ARGCHECK(nrecv >= 0 && (nrecv == 0 || peerRecv != NULL), "nrecv %d with peerRecv %p", nrecv,
                (const void*)peerRecv);
  MCCL_ARGCHECK(nsend >= 0 && (nsend == 0 || peerSend != NULL), "nsend %d with peerSend %p", nsend,
                (const void*)peerSend);
  struct mcclChannel* ch = &ctx->channels[channelId];
  uint64_t mask = 1ULL << ch->id;
  for (int i = 0; i < nrecv; i++) {
    int peer = peerRecv[i];
    MCCL_ARGCHECK(peer >= -1 && peer < ctx->nRanks, "peerRecv[%d] %d (ranks 0 .. %d, or -1)", i, peer, ctx->nRanks - 1);
    if (peer == -1 || peer == ctx->rank || ch->peers[peer].recv[connIndex].connected) continue;
    ctx->connectRecv[peer] |= mask;
  }
  for (int i = 0; i < nsend; i++) {
    int peer = peerSend[i];
    MCCL_ARGCHECK(peer >= -1 && peer < ctx->nRanks, "peerSend[%d] %d (ranks 0 .. %d, or -1)", i, peer, ctx->nRanks - 1);
    if (peer == -1 || peer == ctx->rank || ch->peers[peer].send[connIndex].connected) continue;
    ctx->connectSend[peer] |= mask;
  }
  return mcclSuccess;
}

// One connection connected: its conn goes to the device-side channel peer (NCCL copies on its host
// stream; this private stream never waits for kernels spinning on the device's other streams).
static mcclResult_t connectOne(struct mcclTransportCtx* ctx, struct mcclChannel* ch, int peer, int connIndex, int send,
                               const struct mcclConnect* info, cudaStream_t stream) {
  struct mcclConnector* c = send ? &ch->peers[peer].send[connIndex] : &ch->peers[peer].recv[connIndex];
  MCCLCHECK(c->transportComm->connect(ctx, info, 1, ctx->rank, c));
  struct mcclConnInfo* dst = send ? &ch->devPeers[peer].send[connIndex] : &ch->devPeers[peer].recv[connIndex];
  CUDACHECK(cudaMemcpyAsync(dst, &c->conn, sizeof(c->conn), cudaMemcpyHostToDevice, stream));
  CUDACHECK(cudaStreamSynchronize(stream));  // &c->conn is read by the copy: finish before it may change
  return mcclSuccess;
}

mcclResult_t mcclTransportP2pSetup(struct mcclTransportCtx* ctx, const void* graph, int connIndex) {
  MCCL_ARGCHECK(ctx != NULL && ctx->connectSend != NULL, "ctx %p has no channels (mcclChannelsInit)", (void*)ctx);
  MCCL_ARGCHECK(ctx->peerInfo != NULL, "ctx->peerInfo is NULL");
  MCCL_ARGCHECK(ctx->transports != NULL, "ctx->transports is NULL (a transport table, e.g. mcclLocalTransports)");
  MCCL_ARGCHECK(ctx->bootstrap != NULL || ctx->nRanks == 1, "ctx->bootstrap is NULL with %d ranks", ctx->nRanks);
  MCCL_ARGCHECK(connIndex >= 0 && connIndex < MCCL_MAX_CONNS, "connIndex %d (0 .. %d)", connIndex, MCCL_MAX_CONNS - 1);
  const int n = ctx->nRanks, me = ctx->rank;
  mcclResult_t res = mcclSuccess;
  int saved = -1;
  cudaStream_t stream = NULL;
  struct mcclConnect *sendData = NULL, *recvData = NULL;
  // Every rank gives every transport its start (NCCL's ncclNetInit, run by each rank at init), even a
  // rank with no connection of that transport: its start may be collective (NET's plugin init).
  for (int t = 0; t < MCCL_NUM_TRANSPORTS; t++)
    if (ctx->transports[t] != NULL && ctx->transports[t]->init != NULL) MCCLCHECK(ctx->transports[t]->init(ctx));
  CUDACHECK(cudaGetDevice(&saved));
  CUDACHECKGOTO(cudaSetDevice(ctx->cudaDev), res, out);
  CUDACHECKGOTO(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), res, out);
  // Twice the channels: with one peer on both sides, its receivers' and senders' records share one message.
  sendData = (struct mcclConnect*)calloc(2 * MCCL_MAX_CHANNELS, sizeof(struct mcclConnect));
  recvData = (struct mcclConnect*)calloc(2 * MCCL_MAX_CHANNELS, sizeof(struct mcclConnect));
  if (sendData == NULL || recvData == NULL) {
    WARN("Out of memory for connect information");
    res = mcclSystemError;
    goto out;
  }
  for (int i = 1; i < n; i++) {
    int tag = P2P_SETUP_TAG_BASE + (i << 8) + connIndex;
    int recvPeer = (me - i + n) % n, sendPeer = (me + i) % n;
    uint64_t recvMask = ctx->connectRecv[recvPeer], sendMask = ctx->connectSend[sendPeer];
    int nRecv = 0, nSend = 0;
    // Set up in channel order, packing each direction's records (NCCL's recvData/sendData).
    for (int c = 0; c < ctx->nChannels; c++) {
      struct mcclChannel* ch = &ctx->channels[c];
      if (recvMask & (1ULL << c))
        MCCLCHECKGOTO(mcclTransportSetupConnector(ctx, graph, recvPeer, c, connIndex, 0,
                                                  &ch->peers[recvPeer].recv[connIndex], 0, &recvData[nRecv++], NULL),
                      res, out);
      if (sendMask & (1ULL << c))
        MCCLCHECKGOTO(mcclTransportSetupConnector(ctx, graph, sendPeer, c, connIndex, 1,
                                                  &ch->peers[sendPeer].send[connIndex], 0, &sendData[nSend++], NULL),
                      res, out);
    }
    // My receivers' records go to the peer that sends to me, and come back replaced by its senders'
    // (and the same the other way): each side's connect reads the other side's setup. When one peer is
    // both (two ranks, or i == n/2), both go in one message, receivers' first, as NCCL's
    // ncclTransportP2pSetup does: two messages under one tag would be told apart by their order alone.
    if (recvPeer == sendPeer) {
      if (nRecv + nSend) {
        memcpy(recvData + nRecv, sendData, sizeof(*sendData) * nSend);
        const size_t bytes = sizeof(*recvData) * (size_t)(nRecv + nSend);
        MCCLCHECKGOTO(mcclBootstrapSend(ctx->bootstrap, recvPeer, tag, recvData, bytes), res, out);
        // The peer's receivers (as many as my senders) answer my senders, its senders my receivers.
        MCCLCHECKGOTO(mcclBootstrapRecv(ctx->bootstrap, recvPeer, tag, sendData, bytes), res, out);
        memcpy(recvData, sendData + nSend, sizeof(*recvData) * nRecv);
      }
    } else {
      if (nRecv)
        MCCLCHECKGOTO(mcclBootstrapSend(ctx->bootstrap, recvPeer, tag, recvData, sizeof(*recvData) * nRecv), res,
                      out);
      if (nSend)
        MCCLCHECKGOTO(mcclBootstrapSend(ctx->bootstrap, sendPeer, tag, sendData, sizeof(*sendData) * nSend), res,
                      out);
      if (nSend)
        MCCLCHECKGOTO(mcclBootstrapRecv(ctx->bootstrap, sendPeer, tag, sendData, sizeof(*sendData) * nSend), res,
                      out);
      if (nRecv)
        MCCLCHECKGOTO(mcclBootstrapRecv(ctx->bootstrap, recvPeer, tag, recvData, sizeof(*recvData) * nRecv), res,
                      out);
    }
    int s = 0, r = 0;
    for (int c = 0; c < ctx->nChannels; c++) {
      struct mcclChannel* ch = &ctx->channels[c];
      if (sendMask & (1ULL << c))
        MCCLCHECKGOTO(connectOne(ctx, ch, sendPeer, connIndex, 1, &sendData[s++], stream), res, out);
      if (recvMask & (1ULL << c))
        MCCLCHECKGOTO(connectOne(ctx, ch, recvPeer, connIndex, 0, &recvData[r++], stream), res, out);
    }
  }
  // Nobody may free (and unlink a /dev/shm file) before its peers have attached: each rank syncs
  // with the peers it connected to, and only with them (NCCL's closing exchange), so ranks that
  // connect nothing now (a point-to-point group between two of them) are not waited for.
  for (int i = 1; i < n; i++) {
    int tag = P2P_SETUP_TAG_BASE + (i << 8) + 0x80 + connIndex;
    int recvPeer = (me - i + n) % n, sendPeer = (me + i) % n;
    int toSend = ctx->connectSend[sendPeer] != 0, fromRecv = ctx->connectRecv[recvPeer] != 0;
    if (recvPeer == sendPeer) toSend = fromRecv = toSend || fromRecv;
    if (toSend) MCCLCHECKGOTO(mcclBootstrapSend(ctx->bootstrap, sendPeer, tag, NULL, 0), res, out);
    if (fromRecv && recvPeer != sendPeer)
      MCCLCHECKGOTO(mcclBootstrapSend(ctx->bootstrap, recvPeer, tag, NULL, 0), res, out);
    if (toSend) MCCLCHECKGOTO(mcclBootstrapRecv(ctx->bootstrap, sendPeer, tag, NULL, 0), res, out);
    if (fromRecv && recvPeer != sendPeer)
      MCCLCHECKGOTO(mcclBootstrapRecv(ctx->bootstrap, recvPeer, tag, NULL, 0), res, out);
  }
  for (int p = 0; p < n; p++) ctx->connectSend[p] = ctx->connectRecv[p] = 0;
out:
  free(sendData);
  free(recvData);
  if (stream) cudaStreamDestroy(stream);
  cudaSetDevice(saved);
  return res;
}
