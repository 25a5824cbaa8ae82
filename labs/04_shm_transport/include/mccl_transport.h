/**
 * @file mccl_transport.h
 * @brief Lab 04: what every transport shares: the connection memory (mcclSendMem / mcclRecvMem with
 * head, tail and connFifo, defined in mccl_conn.h), the connector, the proxy-side connection and
 * operation, and the ops table (NCCL's struct ncclTransport).
 * @ingroup lab04
 */
#ifndef MCCL_TRANSPORT_H_
#define MCCL_TRANSPORT_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <sys/types.h>
#include <cuda_runtime.h>
#include "mccl_bootstrap.h"
#include "mccl_conn.h"
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab04
 * @{ */

/** @brief Bytes of the opaque connect information peers exchange (CONNECT_SIZE). */
#define MCCL_CONNECT_SIZE 256

/** @brief Opaque connect information a transport's setup fills and the peer's connect reads. */
struct mcclConnect {
  /** transport-defined (for SHM: struct mcclShmConnectInfo); 8-aligned */
  MCCL_ALIGNAS(8) char data[MCCL_CONNECT_SIZE];
};

struct mcclTransport;
struct mcclTransportComm;
struct mcclConnector;
/** @brief A rank's proxy (lab 05's mcclProxyState; opaque here). Proxy hooks receive it, as NCCL's
 *  receive their ncclProxyState; NULL when lab 04 runs them on the calling thread. */
struct mcclProxyState;

/** @brief Most channels a context connects (NCCL's MAXCHANNELS is 64 in 2.28 too). */
#define MCCL_MAX_CHANNELS 64

/** @brief Index of a transport in a transport table (NCCL's TRANSPORT_* values): none chosen. */
#define TRANSPORT_UNDEFINED -1
/** @brief Transport-table index of P2P (lab 06's transport). */
#define TRANSPORT_P2P 0
/** @brief Transport-table index of SHM (this lab's). */
#define TRANSPORT_SHM 1
/** @brief Transport-table index of NET (lab 08's transport). */
#define TRANSPORT_NET 2
/** @brief Entries of a transport table (NCCL_NUM_TRANSPORTS; minccl has no COLLNET). */
#define MCCL_NUM_TRANSPORTS 3

struct mcclChannelPeer;

/** @brief One channel's connections (the host half of NCCL's struct ncclChannel). Lab 06's
 *  mcclChannelsInit allocates the arrays; mcclTransportP2pSetup connects and copies them. */
struct mcclChannel {
  int id;                              /**< channel index */
  struct mcclChannelPeer* peers;       /**< [nRanks] host connectors, per peer rank */
  struct mcclDevChannelPeer* devPeers; /**< [nRanks] device copy of every connected peer's mcclConnInfo */
};

/**
 * @brief What the transport hooks need to know about the communicator they serve (the parts of
 * NCCL's struct ncclComm that src/transport.cc and src/transport/{p2p,shm}.cc read). Labs 04-06 fill
 * one with mcclTransportCtxInit (and a bootstrap and proxy where they have them); lab 07's
 * communicator embeds one. Buffer sizes come from here, never from a parameter read inside a hook.
 */
struct mcclTransportCtx {
  int rank;                     /**< this rank */
  int nRanks;                   /**< ranks in the communicator */
  int cudaDev;                  /**< the device this rank drives */
  const mcclPeerInfo* peerInfo; /**< [nRanks] every rank's record (may be NULL for a lone pair) */
  /** FIFO bytes per connIndex and protocol (NCCL's comm->buffSizes, one row per connIndex here):
   *  [0] the rings' connections, [1] the point-to-point ones (lab 07's send/receive). */
  int buffSizes[MCCL_MAX_CONNS][MCCL_NUM_PROTOCOLS];
  mcclBootstrap* bootstrap;          /**< to exchange mcclConnect (lab 06's mcclTransportP2pSetup); may be NULL */
  struct mcclProxyState* proxyState; /**< lab 05's proxy, or NULL: proxy calls run on this thread */
  volatile uint32_t* abortFlag;      /**< host abort flag, or NULL */
  /** TRANSPORT_UNDEFINED (mcclTransportCtxInit's value): connections try every transport in order;
   *  TRANSPORT_P2P or TRANSPORT_SHM: only that one (lab 06's pair helpers force one). */
  int onlyTransport;
  /** The transports connections pick from (NCCL's ncclTransports[]): MCCL_NUM_TRANSPORTS entries indexed
   *  by TRANSPORT_*, NULL where the program has no such transport, tried in index order by lab 06's
   *  mcclTransportSetupConnector. Set by whoever builds the context from the table of the layer that
   *  knows its transports (lab 06's mcclLocalTransports, lab 08's mcclTransports); NULL after
   *  mcclTransportCtxInit. */
  struct mcclTransport* const* transports;
  int nChannels;                                  /**< channels in use (lab 06's mcclChannelsInit) */
  struct mcclDevChannelPeer* devPeersAll;         /**< one device allocation: channel c's devPeers at c * nRanks */
  struct mcclChannel channels[MCCL_MAX_CHANNELS]; /**< the channels (NCCL's comm->channels) */
  uint64_t* connectSend; /**< [nRanks] channel masks still to connect sending to each peer (NCCL's comm->connectSend) */
  uint64_t* connectRecv; /**< [nRanks] channel masks still to connect receiving from each peer */
};

/**
 * @brief The proxy-side half of one connection (the lab-04 part of NCCL's ncclProxyConnection).
 *
 * The proxy hooks act on it: proxySetup stores its resources in transportResources, proxyFree
 * releases them, proxyProgress reads them through mcclProxySubArgs::connection. In this lab it lives in
 * the mcclConnector and the hooks run on the calling thread; lab 05's proxy thread keeps its own.
 */
struct mcclProxyConnection {
  int send;                              /**< 1: send side, 0: receive side */
  int rank;                              /**< this process's rank */
  int transport;                         /**< the transport's table index (TRANSPORT_SHM, ...) */
  const struct mcclTransportComm* tcomm; /**< the hooks to call (send or recv half of the table) */
  void* transportResources;              /**< owned by the transport's proxy hooks */
  /** cuMem handle of memory proxySetup allocated for a peer to import (0: none). The proxy (lab 05)
   *  exports an fd only for handles named here or registered with it; any other value a peer sends
   *  is refused before it reaches the driver, which does not validate handles. */
  CUmemGenericAllocationHandle exportHandle;
};

/** @brief mcclProxyArgs::state values (NCCL's ncclProxyOpState). */
enum mcclProxyOpState { mcclProxyOpNone = 0, mcclProxyOpReady = 1, mcclProxyOpProgress = 2 };

/**
 * @brief One operation as it is posted to a proxy (NCCL's ncclProxyOp): what to move on which
 * connection, and nothing of how far it got (that is mcclProxyArgs, the progress thread's).
 *
 * On the kernel-driven paths (SHM's default mode, P2P) no user buffer travels to the proxy: the
 * kernel moves the bytes and the proxy only counts steps. `ceBuff` is the copy-engine mode's extra
 * (lab 04's mcclProxyOpsWait, lab 05's mcclProxyPostOp), where the proxy itself copies between the
 * user's device buffer and the FIFO.
 */
struct mcclProxyOp {
  struct mcclProxyConnection* connection; /**< the connection to progress on */
  ssize_t nbytes;                         /**< message size; 0 is a valid one-step message */
  uint64_t opCount;                       /**< the poster's operation counter (NCCL's opCount); for logs */
  int nsteps;     /**< FIFO steps; 0: the transport derives it from nbytes and its step size at start */
  int chunkSteps; /**< steps per chunk (NCCL's chunkSteps); 1 for one message per op */
  int sliceSteps; /**< steps per slice (NCCL's sliceSteps); 1 for one message per op */
  int protocol;   /**< MCCL_PROTO_SIMPLE or MCCL_PROTO_LL (a proxy never drives LL128) */
  int channelId;  /**< the channel the connection serves (logs) */
  /** Copy-engine mode only: the device buffer the proxy copies from (send) or to (recv); NULL on the
   *  kernel-driven paths. */
  void* ceBuff;
  /** Polled while waiting; non-zero aborts; may be NULL. Lab 04's stand-in for the proxy state's abort
   *  flag (lab 05's mcclProxyPostOp sets its own). */
  volatile uint32_t* abortFlag;
};

/**
 * @brief The progress state of one connection's part of an operation (NCCL's ncclProxySubArgs).
 * Counters count steps relative to base, so they never wrap even when the connection's 64-bit step does.
 */
struct mcclProxySubArgs {
  struct mcclProxyConnection* connection; /**< from the op */
  int channelId;                          /**< from the op */
  ssize_t nbytes;                         /**< from the op */
  void* ceBuff;                           /**< from the op (copy-engine mode only) */
  uint64_t nsteps;                        /**< steps the message uses (at least 1), fixed at start;
                                               MCCL_PROXY_STEPS_UNTIL_FREE: progressed until its connector is freed */
  uint64_t base;                          /**< connection step at which this message starts */
  uint64_t transmitted;                   /**< steps whose copy has been issued */
  uint64_t done;                          /**< steps completed (sender: tail published; receiver: head returned) */
  uint64_t lastProgressNs;                /**< CLOCK_MONOTONIC time of the last step that moved */
};

/** @brief mcclProxySubArgs::nsteps of an op that follows its connection until the connector is freed
 *  (lab 08's NET: its kernels do not tell the host a collective's step count), instead of one message. */
#define MCCL_PROXY_STEPS_UNTIL_FREE UINT64_MAX

/** @brief Sub-operations one mcclProxyArgs groups (NCCL groups up to MAXCHANNELS of one opCount on a
 *  shared connection; minccl progresses one connection per args). */
#define MCCL_PROXY_MAX_SUBS 1

struct mcclProxyArgs;
/** @brief A transport's progress hook (NCCL's proxyProgressFunc_t): advance without blocking; the
 *  operation is finished when it leaves args->state at mcclProxyOpNone. proxyState is lab 05's proxy,
 *  or NULL when lab 04's mcclProxyOpsWait runs the hook on the calling thread. */
typedef mcclResult_t (*mcclProxyProgressFn)(struct mcclProxyState* proxyState, struct mcclProxyArgs* args);

/**
 * @brief An operation being progressed (NCCL's ncclProxyArgs): built from a posted mcclProxyOp by
 * mcclProxyOpToArgs, then owned by whoever progresses it (lab 04's mcclProxyOpsWait, lab 05's
 * progress thread). Callers only read it.
 */
struct mcclProxyArgs {
  struct mcclProxySubArgs subs[MCCL_PROXY_MAX_SUBS]; /**< per-connection state */
  int nsubs;                                         /**< used entries of subs */
  mcclProxyProgressFn progress;                      /**< the connection's transport hook */
  uint64_t opCount;                                  /**< from the op */
  int sliceSteps;                                    /**< from the op */
  int chunkSteps;                                    /**< from the op */
  int protocol;                                      /**< from the op */
  int state;                                         /**< enum mcclProxyOpState */
  int idle;                                          /**< set by progress: 1 when the call moved nothing */
  volatile uint32_t* abortFlag;                      /**< from the op (lab 05: the proxy's) */
  int64_t timeoutMs; /**< no-progress limit, from MCCL_SHM_TIMEOUT; <= 0 waits forever */
  int drainOnClose;  /**< a persistent op whose connector is freed keeps progressing until a call moves nothing
                          and every transmitted step is done (its last sends reach the peer), at most
                          MCCL_PROXY_DRAIN_MS (lab 05); 0: it ends at once */
};

/** @brief Kinds of calls a connector makes to its proxy (NCCL's ncclProxyMsgSetup/Connect/Free). */
enum mcclProxyMsgType { mcclProxyMsgSetup = 1, mcclProxyMsgConnect = 2, mcclProxyMsgFree = 3 };

/**
 * @brief How a connector reaches its proxy: run one proxy hook with a request and a response buffer
 * and return once it is done (NCCL's ncclProxyCallBlocking). mcclProxyCallDirect runs it on the
 * calling thread; lab 05 installs one that asks its proxy thread.
 */
typedef mcclResult_t (*mcclProxyCallFn)(struct mcclConnector* connector, int msgType, const void* req, int reqSize,
                                        void* resp, int respSize);

/**
 * @brief How an importer gets a descriptor for a peer's exported allocation (NCCL's
 * ncclProxyClientGetFdBlocking). `handle`/`handleSize` are the exporter-side bytes the transport put
 * in its connect information (for SHM: mcclShmIpcDesc_t::cumem.handle); the callee returns a new fd
 * the caller closes. In this lab the test or demo supplies it (receiving the fd the peer sent over
 * a lab 03 socket); in lab 05 the peer's proxy service answers it.
 */
typedef mcclResult_t (*mcclGetPeerFdFn)(void* ctx, int peerRank, const void* handle, int handleSize, int* fd);

/** @brief One direction of a connection on the user's side (NCCL's ncclConnector). */
struct mcclConnector {
  int connected;                                 /**< set by connect */
  int send;                                      /**< 1: send side, 0: receive side */
  int transport;                                 /**< table index of the connector's transport (TRANSPORT_SHM, ...) */
  const struct mcclTransportComm* transportComm; /**< send or recv half of the transport's table */
  void* transportResources;                      /**< owned by setup/connect/free */
  struct mcclConnInfo conn;                      /**< filled by connect */
  uint64_t initialStep; /**< first step of the connection (0; tests start near UINT64_MAX); both peers must agree */
  struct mcclProxyConnection* proxyConn;       /**< the proxy half (points at proxyConnStorage by default) */
  struct mcclProxyConnection proxyConnStorage; /**< in-process proxy half used by mcclProxyCallDirect */
  mcclProxyCallFn proxyCall;                   /**< default mcclProxyCallDirect */
  mcclGetPeerFdFn getPeerFd;                   /**< needed only to import cuMem buffers */
  void* getPeerFdCtx;                          /**< passed to getPeerFd */
};

/** @brief One peer of one channel on the host (NCCL's ncclChannelPeer): connectors per direction and connIndex. */
struct mcclChannelPeer {
  struct mcclConnector send[MCCL_MAX_CONNS]; /**< sending to this peer */
  struct mcclConnector recv[MCCL_MAX_CONNS]; /**< receiving from this peer */
};

/** @brief One side's transport hooks (NCCL's ncclTransportComm). */
struct mcclTransportComm {
  /** Allocate this side's resources (through proxyCall(mcclProxyMsgSetup)) and fill connectInfo for the peer.
   *  graph: the ring or graph the connection serves (unused by P2P and SHM; may be NULL). channelId and
   *  connIndex name the connection in logs and, for NCCL, pick per-channel resources. */
  mcclResult_t (*setup)(struct mcclTransportCtx* ctx, const void* graph, const mcclPeerInfo* myInfo,
                        const mcclPeerInfo* peerInfo, struct mcclConnect* connectInfo, struct mcclConnector* connector,
                        int channelId, int connIndex);
  /** Import the peer's resources from its connectInfo (nranks entries from rank `rank` in NCCL; one here:
   *  nranks 1, rank 0); fill connector->conn. */
  mcclResult_t (*connect)(struct mcclTransportCtx* ctx, const struct mcclConnect* connectInfo, int nranks, int rank,
                          struct mcclConnector* connector);
  /** Undo connect and setup's user-side part. */
  mcclResult_t (*free)(struct mcclConnector* connector);
  /** Proxy side of setup: allocate what the peer will import; respond with connect information. */
  mcclResult_t (*proxySetup)(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState, const void* req,
                             int reqSize, void* resp, int respSize, int* done);
  /** Proxy side of connect: create what progress needs (stream, events); learn the mapped addresses. */
  mcclResult_t (*proxyConnect)(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState,
                               const void* req, int reqSize, void* resp, int respSize, int* done);
  /** Release everything proxySetup/proxyConnect made (waits for copies in flight first). */
  mcclResult_t (*proxyFree)(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState);
  /** Advance one operation without blocking; it has completed when args->state is mcclProxyOpNone. */
  mcclProxyProgressFn proxyProgress;
};

/** @brief A transport: a name, a rule for which peers it serves, and both sides' hooks (NCCL's ncclTransport). */
struct mcclTransport {
  const char name[8]; /**< e.g. "SHM" */
  /** *ret = 1 when the two peers can use this transport (ctx: the communicator asking; may be NULL). */
  mcclResult_t (*canConnect)(int* ret, const struct mcclTransportCtx* ctx, const mcclPeerInfo* info1,
                             const mcclPeerInfo* info2);
  struct mcclTransportComm send; /**< sender's hooks */
  struct mcclTransportComm recv; /**< receiver's hooks */
  /** Optional (NULL: nothing to do): called on every rank of a context before its connections are set
   *  up (lab 06's mcclTransportP2pSetup), with ctx->peerInfo filled; collective over the context's
   *  ranks. Lab 08's NET loads and initialises its network plugin here (NCCL's ncclNetInit at
   *  communicator init). Must be idempotent. */
  mcclResult_t (*init)(struct mcclTransportCtx* ctx);
};

/**
 * @brief The index of a transport in a transport table.
 *
 * A transport table is what NCCL's ncclTransports[] is: MCCL_NUM_TRANSPORTS ops tables indexed by
 * TRANSPORT_*, in the order connections try them, NULL where the program has no such transport. NCCL
 * has one, static, in src/transport.cc, beside the code that selects. Here a lab may not name a
 * transport of a lab above it, and no transport registers itself: the table is a static array of the
 * lowest layer that sees every transport a program has (lab 06's mcclLocalTransports, P2P and SHM; lab
 * 08's mcclTransports, with NET), handed down to the layers that use it (struct mcclTransportCtx, lab
 * 05's mcclProxyCreate).
 * @param[in] transports  a transport table, or NULL (no transport).
 * @param[in] transport   e.g. &mcclShmTransport.
 * @return TRANSPORT_P2P, TRANSPORT_SHM, TRANSPORT_NET, or TRANSPORT_UNDEFINED when it is not in the table.
 */
int mcclTransportIndex(struct mcclTransport* const* transports, const struct mcclTransport* transport);

/**
 * @brief Fill a context for one rank: zero it, set rank, nRanks and cudaDev, and the buffer sizes
 * (mcclComputeBuffSizes), onlyTransport TRANSPORT_UNDEFINED. bootstrap, proxyState, peerInfo, abortFlag and
 * transports stay NULL for the caller to set; lab 06's mcclChannelsInit adds the channels.
 * @param[out] ctx      the context.
 * @param[in]  rank     0 .. nRanks-1.
 * @param[in]  nRanks   >= 1.
 * @param[in]  cudaDev  >= 0.
 * @return mcclSuccess; mcclInvalidArgument (NULL ctx, bad rank, nRanks or device, bad MCCL_BUFFSIZE /
 *         MCCL_LL_BUFFSIZE).
 */
mcclResult_t mcclTransportCtxInit(struct mcclTransportCtx* ctx, int rank, int nRanks, int cudaDev);

/**
 * @brief Describe this process for canConnect, without a bootstrap: rank, pid, device, host hash
 * (mcclGetHostHash) and the st_dev of /dev/shm.
 * @param[in]  rank     this process's rank, >= 0.
 * @param[in]  cudaDev  the device it drives, >= 0.
 * @param[out] info     the record (zeroed first); written only on success.
 * @return mcclSuccess; mcclInvalidArgument (NULL info, negative rank or device).
 */
mcclResult_t mcclFillPeerInfo(int rank, int cudaDev, mcclPeerInfo* info);

/**
 * @brief Bytes of each protocol's FIFO in the connections of each connIndex (NCCL's comm->buffSizes,
 * from computeBuffSizes in init.cc): [c][MCCL_PROTO_LL] MCCL_LL_BUFFSIZE; [0][MCCL_PROTO_LL128]
 * MCCL_LL128_BUFFSIZE, [1][MCCL_PROTO_LL128] 0 (only P2P transports allocate it); [0][MCCL_PROTO_SIMPLE]
 * MCCL_BUFFSIZE (mcclShmBuffSize), the rings'; [1][MCCL_PROTO_SIMPLE] MCCL_P2P_BUFFSIZE, the
 * point-to-point connections' (NCCL uses one size for both; a smaller point-to-point FIFO is faster
 * here, see MCCL_P2P_BUFFSIZE). Both peers must agree; connect checks the peer's buffer is large enough.
 * @param[out] buffSizes  MCCL_MAX_CONNS rows of MCCL_NUM_PROTOCOLS sizes, each a multiple of 4096 from 4096 (LL128: 0)
 *                        to 1 GiB.
 * @return mcclSuccess; mcclInvalidArgument naming the parameter and its value.
 */
mcclResult_t mcclComputeBuffSizes(int buffSizes[MCCL_MAX_CONNS][MCCL_NUM_PROTOCOLS]);

/**
 * @brief The FIFO sizes a transport's setup uses for a connection: ctx->buffSizes[connIndex], checked
 * (every transport's setup calls it, so a hook never reads a size it has not checked).
 * @param[in]  ctx        the context (mcclTransportCtxInit).
 * @param[in]  connIndex  0 .. MCCL_MAX_CONNS-1.
 * @param[out] buffSizes  MCCL_NUM_PROTOCOLS sizes; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (NULL ctx or buffSizes, connIndex out of range, a size that
 *         is not a multiple of 4096 from 4096 up), naming the value.
 */
mcclResult_t mcclTransportBuffSizes(const struct mcclTransportCtx* ctx, int connIndex,
                                    int buffSizes[MCCL_NUM_PROTOCOLS]);

/**
 * @brief Prepare a connector for one side of a transport: zero it, pick the send or recv hooks,
 * and route proxy calls to mcclProxyCallDirect (the in-thread proxy of this lab).
 *
 * The transport comes with its table index, as NCCL's transports pass their own TRANSPORT_* to
 * ncclProxyConnect: the index is what lab 05's Init RPC carries, and the proxy finds the hooks at that
 * index of its own table.
 * @param[out] connector  the connector.
 * @param[in]  transport  the transport's index, TRANSPORT_P2P .. MCCL_NUM_TRANSPORTS-1 (TRANSPORT_SHM for SHM).
 * @param[in]  ops        the transport, e.g. &mcclShmTransport.
 * @param[in]  send       1 for the send side, 0 for the receive side.
 * @param[in]  rank       this process's rank (recorded in the proxy connection).
 * @return mcclSuccess; mcclInvalidArgument (NULL pointers, send not 0/1, an index out of range).
 */
mcclResult_t mcclConnectorInit(struct mcclConnector* connector, int transport, const struct mcclTransport* ops,
                               int send, int rank);

/**
 * @brief Run a proxy hook on the calling thread (lab 04's stand-in for lab 05's proxy RPC). Loops
 * while the hook reports not done. mcclProxyMsgFree calls proxyFree and ignores req/resp.
 * @param[in,out] connector  the connector whose proxyConn the hook acts on.
 * @param[in]     msgType    mcclProxyMsgSetup, mcclProxyMsgConnect or mcclProxyMsgFree.
 * @param[in]     req        request bytes for the hook.
 * @param[in]     reqSize    bytes of req.
 * @param[out]    resp       response bytes the hook writes.
 * @param[in]     respSize   bytes of resp.
 * @return the hook's result; mcclInvalidArgument for an unknown msgType or NULL connector.
 */
mcclResult_t mcclProxyCallDirect(struct mcclConnector* connector, int msgType, const void* req, int reqSize, void* resp,
                                 int respSize);

/**
 * @brief Tear a connector down: proxyFree through the connector's proxyCall, then the transport's
 * free (user side), in that order because the proxy side may still use what the user side mapped.
 * Safe after a failed setup or connect, and on a zeroed connector. With lab 05's proxy, ops still
 * in flight on the connector are cancelled first (they end with mcclInvalidUsage).
 * @param[in,out] connector  the connector, or NULL (a no-op).
 * @return mcclSuccess, or the first error (every step is still attempted).
 */
mcclResult_t mcclConnectorFree(struct mcclConnector* connector);

/**
 * @brief Fill a posted operation for one message of the copy-engine mode (NCCL's ncclProxyOp as
 * enqueue fills it): connection, size, one step per chunk and slice, SIMPLE, nsteps left to the
 * transport, the user buffer in ceBuff.
 * @param[out] op          the operation.
 * @param[in]  connector   a connected connector; the op uses connector->proxyConn.
 * @param[in]  buff        device buffer (source for a sender, destination for a receiver); may be
 *                         NULL only when nbytes is 0.
 * @param[in]  nbytes      message size; the receiver must post the same size.
 * @param[in]  abortFlag   polled while waiting, or NULL.
 * @return mcclSuccess; mcclInvalidArgument (NULL op/connector, NULL buff with nbytes > 0, nbytes above
 *         SSIZE_MAX); mcclInvalidUsage (connector not connected).
 */
mcclResult_t mcclProxyOpInit(struct mcclProxyOp* op, struct mcclConnector* connector, void* buff, size_t nbytes,
                             volatile uint32_t* abortFlag);

/**
 * @brief Turn a posted operation into progress state (NCCL's ncclProxyOpToArgs for sub 0): copy what
 * the progress needs, pick the connection's progress hook, state mcclProxyOpReady, the timeout from
 * MCCL_SHM_TIMEOUT.
 * @param[in]  op    from mcclProxyOpInit (or filled by the caller).
 * @param[out] args  the state (zeroed first).
 * @return mcclSuccess; mcclInvalidArgument (NULL, no connection, or a connection without a progress hook).
 */
mcclResult_t mcclProxyOpToArgs(const struct mcclProxyOp* op, struct mcclProxyArgs* args);

/**
 * @brief Progress operations on the calling thread until all are done or one fails: the user-thread
 * progress loop of this lab (lab 05 runs the same hooks on its progress thread).
 * @param[in]  ops   posted operations (mcclProxyOpInit), on different connections.
 * @param[in]  nops  how many, >= 1.
 * @param[out] args  nops progress states (mcclProxyOpToArgs fills them here), left with the final
 *                   counters for the caller to read; or NULL (this call allocates and frees them).
 * @return mcclSuccess; mcclInvalidArgument; mcclSystemError (no memory for args); the first error a
 *         hook returned (mcclTimeout when a peer stopped moving, mcclInternalError when aborted,
 *         mcclRemoteError when the peer broke the protocol).
 *
 * @code
 * struct mcclProxyOp ops[2];
 * MCCLCHECK(mcclProxyOpInit(&ops[0], &sendConn, devSrc, n, NULL));   // to the peer
 * MCCLCHECK(mcclProxyOpInit(&ops[1], &recvConn, devDst, n, NULL));   // from the peer
 * MCCLCHECK(mcclProxyOpsWait(ops, 2, NULL));                          // both ways at once
 * @endcode
 */
mcclResult_t mcclProxyOpsWait(const struct mcclProxyOp* ops, int nops, struct mcclProxyArgs* args);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
