/**
 * @file mccl_channel.h
 * @brief Lab 06: channels and the connection machinery that fills them (NCCL 2.28.9 src/transport.cc:
 * selectTransport, ncclTransportP2pConnect, ncclTransportP2pSetup; src/channel.cc initChannel).
 * @ingroup lab06
 */
#ifndef MCCL_CHANNEL_H_
#define MCCL_CHANNEL_H_

#include <stdint.h>
#include "mccl_result.h"
#include "mccl_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab06
 * @{ */

/**
 * @brief The transport table of a program whose highest transport lab is this one (NCCL's
 * ncclTransports[] without NET): [TRANSPORT_P2P] &mcclP2pTransport, [TRANSPORT_SHM] &mcclShmTransport,
 * [TRANSPORT_NET] NULL. Lab 06's pair helpers connect with it, and lab 06's and lab 07's programs pass it
 * to their proxies (mcclProxyCreate) and communicators; lab 08's mcclTransports adds NET. A context
 * selects from the table in struct mcclTransportCtx::transports.
 */
extern struct mcclTransport* const mcclLocalTransports[MCCL_NUM_TRANSPORTS];

/**
 * @brief Give a context nChannels channels: per channel, a host array of nRanks mcclChannelPeer
 * (zeroed connectors) and a device array of nRanks mcclDevChannelPeer on ctx->cudaDev (zeroed), and
 * the connectSend/connectRecv masks (NCCL's initChannel and the comm's connect masks).
 * @param[in,out] ctx        from mcclTransportCtxInit, with no channels yet.
 * @param[in]     nChannels  1 .. MCCL_MAX_CHANNELS.
 * @return mcclSuccess; mcclInvalidArgument; mcclInvalidUsage (channels already there);
 *         mcclSystemError; mcclUnhandledCudaError. Nothing is left allocated on failure.
 */
mcclResult_t mcclChannelsInit(struct mcclTransportCtx* ctx, int nChannels);

/**
 * @brief Free every connector of every channel (mcclConnectorFree, with ctx->cudaDev current), the
 * device arrays and the masks; ctx->nChannels becomes 0. Kernels using them must have ended.
 * @param[in,out] ctx  the context, or NULL (a no-op).
 * @return mcclSuccess, or the first error (everything is still freed).
 */
mcclResult_t mcclChannelsFree(struct mcclTransportCtx* ctx);

/**
 * @brief Pick the transport for one connector and run its setup (NCCL's selectTransport): the
 * first transport of ctx->transports (P2P, then SHM, then NET where the table has it; only
 * ctx->onlyTransport when set) whose canConnect accepts ctx->peerInfo[rank] and ctx->peerInfo[peer];
 * the connector is initialised for it, bound to ctx->proxyState when there is one (lab 05's Init RPC
 * carries the transport's index), and set up with the current device.
 * @param[in]     ctx          with peerInfo and transports, and the proxy when peers live in other processes.
 * @param[in]     graph        the ring or graph (passed to the hooks; may be NULL).
 * @param[in]     peer         the other end's rank (!= ctx->rank, except in a loopback).
 * @param[in]     channelId    for the hooks' logs.
 * @param[in]     connIndex    0 .. MCCL_MAX_CONNS-1.
 * @param[in]     send         1: connector sends to peer; 0: receives from it.
 * @param[in,out] connector    a zeroed or freed connector; initialised here.
 * @param[in]     initialStep  first step of the connection (both ends agree).
 * @param[out]    connectInfo  what the peer's connect needs.
 * @param[out]    transport    the index chosen (TRANSPORT_P2P, TRANSPORT_SHM, ...), or NULL.
 * @return mcclSuccess; mcclInvalidArgument; mcclInvalidUsage (no transport can connect the two);
 *         errors of the transport's setup.
 */
mcclResult_t mcclTransportSetupConnector(struct mcclTransportCtx* ctx, const void* graph, int peer, int channelId,
                                         int connIndex, int send, struct mcclConnector* connector, uint64_t initialStep,
                                         struct mcclConnect* connectInfo, int* transport);

/**
 * @brief Record which channels connect to which peers (NCCL's ncclTransportP2pConnect): channel
 * channelId receives from peerRecv[0..nrecv) and sends to peerSend[0..nsend). Peers that are -1,
 * this rank, or already connected are skipped. Nothing is set up until mcclTransportP2pSetup.
 * @param[in,out] ctx        with channels (mcclChannelsInit).
 * @param[in]     channelId  0 .. ctx->nChannels-1.
 * @param[in]     nrecv      entries of peerRecv.
 * @param[in]     peerRecv   ranks to receive from.
 * @param[in]     nsend      entries of peerSend.
 * @param[in]     peerSend   ranks to send to.
 * @param[in]     connIndex  0 .. MCCL_MAX_CONNS-1.
 * @return mcclSuccess; mcclInvalidArgument (bad channel, connIndex or peer rank).
 */
mcclResult_t mcclTransportP2pConnect(struct mcclTransportCtx* ctx, int channelId, int nrecv, const int* peerRecv,
                                     int nsend, const int* peerSend, int connIndex);

/**
 * @brief Connect everything mcclTransportP2pConnect recorded (NCCL's ncclTransportP2pSetup): give
 * every transport of ctx->transports its init, then for each distance i = 1 .. nRanks-1, with
 * sendPeer = rank + i and recvPeer = rank - i, select and set up a transport for every recorded channel
 * (mcclTransportSetupConnector), swap the mcclConnect records with both peers through ctx->bootstrap,
 * connect, and copy each connector's conn into ctx->channels[c].devPeers[peer].send/recv[connIndex].
 * Collective between the ranks it connects: a send to p recorded here needs p's call with the receive
 * from this rank recorded on the same channels (ranks that record nothing need not call it). It ends
 * with one empty message to and from each peer connected (NCCL's closing exchange), so nobody frees
 * what a peer is still importing. The masks are cleared afterwards. Synchronous (the device copies are
 * complete).
 * @param[in,out] ctx        with channels, peerInfo, transports, bootstrap and proxyState.
 * @param[in]     graph      passed to the hooks (may be NULL).
 * @param[in]     connIndex  0 .. MCCL_MAX_CONNS-1.
 * @return mcclSuccess; mcclInvalidArgument; mcclInvalidUsage (no transport for a pair of ranks);
 *         errors of the transports, the proxy and the bootstrap. Connectors already made stay in the
 *         channels for mcclChannelsFree.
 */
mcclResult_t mcclTransportP2pSetup(struct mcclTransportCtx* ctx, const void* graph, int connIndex);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
