/**
 * @file mccl_proxy.h
 * @brief Lab 05: the proxy: a service thread that answers setup RPCs and hands out fds on request,
 *        and a progress thread that drives transport operations posted by the user thread.
 * @ingroup lab05
 */
#ifndef MCCL_PROXY_H_
#define MCCL_PROXY_H_

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include "mccl_bootstrap.h"
#include "mccl_result.h"
#include "mccl_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab05 Lab 05: proxy thread
 * @brief NCCL 2.28.9 src/proxy.cc: ncclProxyCreate, ncclProxyService, proxyProgressAsync,
 * ncclProxyProgress / progressOps, and the UDS fd service (ncclProxyServiceUDS, proxyGetFd,
 * ncclProxyClientGetFdBlocking, ncclProxyClientQueryFdBlocking).
 *
 * Each process (rank) runs one proxy with two threads:
 * - the **service thread** polls a listening abstract stream socket (the proxy address, published
 *   in the bootstrap peer record), the connections of its clients, a lab 03 datagram socket for fd
 *   requests from other processes, and an eventfd. Requests carry an id and a type (Init, Setup,
 *   Connect, Free, Stop; GetFd and QueryFd on the datagram socket). A Setup or Connect hook that
 *   reports "not done" becomes an async op, retried every loop until it completes; then the
 *   response goes back with the request's id.
 * - the **progress thread** takes operations (a send or a receive of one message on one
 *   connection) that the user thread posts into a lock-free single-producer/single-consumer ring,
 *   and calls the transport's proxyProgress hook on each until it is done, in posting order per
 *   connection. Idle, it spins MCCL_PROXY_SPIN_US, then yields, then sleeps on a condition variable
 *   that the next post signals.
 *
 * Both threads check the abort flag on every loop and are pinned to MCCL_PROXY_CPUSET when set.
 *
 * @code
 * mcclProxyState* proxy;
 * struct mcclTransport* const transports[MCCL_NUM_TRANSPORTS] = {NULL, &mcclShmTransport, NULL};  // SHM only
 * MCCLCHECK(mcclProxyCreate(rank, cudaDev, abortFlag, transports, &proxy));
 * MCCLCHECK(mcclBootstrapInit(&id, rank, nranks, cudaDev, mcclProxyGetAddress(proxy), abortFlag, &bs));
 * MCCLCHECK(mcclProxyInit(proxy, bs));                 // learn every peer's proxy address
 * struct mcclConnector send;
 * MCCLCHECK(mcclConnectorInit(&send, TRANSPORT_SHM, &mcclShmTransport, 1, rank));
 * MCCLCHECK(mcclProxyConnect(proxy, &send));           // Init RPC; setup/connect now go to the proxy
 * // ... transport setup, exchange connect info with the peer, transport connect ...
 * mcclProxyRequest req;
 * MCCLCHECK(mcclProxyPostOp(proxy, &send, devBuf, nbytes, &req));
 * MCCLCHECK(mcclProxyWait(proxy, req));
 * MCCLCHECK(mcclConnectorFree(&send));                 // proxyFree runs on the service thread
 * MCCLCHECK(mcclProxyDestroy(proxy));                  // Stop, join both threads, close everything
 * @endcode
 * @{
 */

/** @brief Request types of the proxy service (NCCL's ncclProxyMsgType, plus the lab 04 values). */
enum mcclProxyServiceMsg {
  mcclProxyMsgInit = 10,    /**< create a proxy-side connection for a connector */
  mcclProxyMsgStop = 11,    /**< end the service loop */
  mcclProxyMsgGetFd = 12,   /**< (datagram) export a cuMem handle and send its fd back */
  mcclProxyMsgQueryFd = 13, /**< (datagram) take an fd, keep it, answer its number in the proxy */
};

/** @brief Most operations in flight at once per proxy (the op pool). */
#define MCCL_PROXY_MAX_OPS 1024
/** @brief Most fds one rank's QueryFd requests may leave with a proxy; past it a QueryFd gets
 * mcclInvalidUsage and its fd is closed at once (any process of the user can send to the fd socket). */
#define MCCL_PROXY_MAX_KEPT_FDS 64
/** @brief Longest request or response body of one RPC, in bytes. */
#define MCCL_PROXY_MAX_MSG 4096

/** @brief One rank's proxy (opaque; NCCL's ncclProxyState). */
typedef struct mcclProxyState mcclProxyState;

/** @brief Handle of one posted operation, from mcclProxyPostOp. */
typedef int mcclProxyRequest;

/**
 * @brief Start the proxy: listening sockets, then the service and progress threads (NCCL's
 * ncclProxyCreate + ncclProxyProgressCreate).
 * @param[in]  rank        this process's rank, >= 0 (for logs and proxy connections).
 * @param[in]  cudaDev     device the threads make current (cudaSetDevice) before any CUDA call.
 * @param[in]  abortFlag   polled by both threads every loop, or NULL.
 * @param[in]  transports  the program's transport table (mcclTransportIndex says what one is): an Init
 *                         RPC names a transport by its index, and the service takes the hooks from here
 *                         (NCCL's proxy reads ncclTransports[]). It must outlive the proxy.
 * @param[out] out         the proxy; written only on success.
 * @return mcclSuccess; mcclInvalidArgument; mcclSystemError; mcclUnhandledCudaError.
 */
mcclResult_t mcclProxyCreate(int rank, int cudaDev, volatile uint32_t* abortFlag,
                             struct mcclTransport* const* transports, mcclProxyState** out);

/**
 * @brief The abstract socket name the service listens on; put it in the bootstrap peer record.
 * @param[in] proxy from mcclProxyCreate.
 * @return a NUL-terminated name shorter than MCCL_SOCKET_NAME_LEN, or "" for NULL.
 */
const char* mcclProxyGetAddress(const mcclProxyState* proxy);

/**
 * @brief Learn every peer's proxy address from the bootstrap's peer records (NCCL's ncclProxyInit).
 * @param[in] proxy from mcclProxyCreate.
 * @param[in] bs    an initialized bootstrap whose records carry mcclProxyGetAddress of each rank.
 * @return mcclSuccess; mcclInvalidArgument (NULL, or a peer record without an address).
 */
mcclResult_t mcclProxyInit(mcclProxyState* proxy, mcclBootstrap* bs);

/**
 * @brief Create the proxy half of a connector (Init RPC, NCCL's ncclProxyConnect) and route the
 * connector's proxy calls and peer-fd requests through this proxy.
 *
 * Afterwards connector->proxyConn is the proxy thread's connection, connector->proxyCall is
 * mcclProxyCallBlocking and connector->getPeerFd is mcclProxyClientGetFdBlocking.
 * @param[in]     proxy      from mcclProxyCreate.
 * @param[in,out] connector  from mcclConnectorInit, not yet set up.
 * @return mcclSuccess; mcclInvalidArgument; mcclTimeout / mcclRemoteError if the service is gone.
 */
mcclResult_t mcclProxyConnect(mcclProxyState* proxy, struct mcclConnector* connector);

/**
 * @brief Send a request and return without waiting (NCCL's ncclProxyCallAsync).
 * @param[in] connector connected with mcclProxyConnect.
 * @param[in] type      mcclProxyMsgSetup, mcclProxyMsgConnect or mcclProxyMsgFree.
 * @param[in] req       reqSize bytes (<= MCCL_PROXY_MAX_MSG), may be NULL when reqSize is 0.
 * @param[in] reqSize   request bytes.
 * @param[in] respSize  response bytes expected (<= MCCL_PROXY_MAX_MSG).
 * @param[in] opId      any non-NULL value identifying the request; unique among outstanding ones.
 * @return mcclSuccess; mcclInvalidArgument; mcclRemoteError (service gone).
 */
mcclResult_t mcclProxyCallAsync(struct mcclConnector* connector, int type, const void* req, int reqSize, int respSize,
                                void* opId);

/**
 * @brief Collect the response of an async call (NCCL's ncclPollProxyResponse).
 * @param[in]  connector  the connector of the call.
 * @param[out] resp       respSize bytes of the call; written only when the response is here.
 * @param[in]  opId       the call's id.
 * @return mcclSuccess (resp written); mcclInProgress (not yet: call again); the hook's error;
 *         mcclRemoteError (service gone).
 */
mcclResult_t mcclPollProxyResponse(struct mcclConnector* connector, void* resp, void* opId);

/**
 * @brief Async call and poll until its response, MCCL_PROXY_TIMEOUT at most (NCCL's
 * ncclProxyCallBlocking). Has the mcclProxyCallFn signature of lab 04.
 * @param[in]  connector a connector bound to this process's proxy by mcclProxyConnect.
 * @param[in]  msgType   mcclProxyMsgSetup, mcclProxyMsgConnect or mcclProxyMsgFree.
 * @param[in]  req       request bytes for the transport's proxy hook.
 * @param[in]  reqSize   their size (at most MCCL_PROXY_MAX_MSG).
 * @param[out] resp      where the hook's response is copied.
 * @param[in]  respSize  its size (at most MCCL_PROXY_MAX_MSG).
 * @return the proxy hook's result; mcclTimeout; mcclRemoteError; mcclInternalError (aborted).
 */
mcclResult_t mcclProxyCallBlocking(struct mcclConnector* connector, int msgType, const void* req, int reqSize,
                                   void* resp, int respSize);

/**
 * @brief Offer a cuMem allocation to peers: GetFd requests naming `handle` will be answered.
 *
 * GetFd for any handle not registered (here, or by a transport's proxySetup through
 * mcclProxyConnection::exportHandle) is refused with mcclInvalidArgument before it reaches the
 * driver. NCCL's proxy trusts its peers; minccl checks, because the driver does not validate
 * handles.
 * @param[in] proxy this process's proxy.
 * @param[in] handle a live handle of this process (non-zero).
 * Registrations are counted: a handle registered twice stays offered until deregistered twice.
 * @return mcclSuccess, mcclInvalidArgument, mcclSystemError.
 */
mcclResult_t mcclProxyRegisterExport(mcclProxyState* proxy, CUmemGenericAllocationHandle handle);

/**
 * @brief Withdraw a handle registered with mcclProxyRegisterExport (call before freeing it).
 * @param[in] proxy this process's proxy.
 * @param[in] handle the registered handle.
 * @return mcclSuccess, or mcclInvalidArgument if it was not registered.
 */
mcclResult_t mcclProxyDeregisterExport(mcclProxyState* proxy, CUmemGenericAllocationHandle handle);

/**
 * @brief Ask peer's proxy for an fd of its cuMem allocation `handle` (NCCL's
 * ncclProxyClientGetFdBlocking). Has the mcclGetPeerFdFn signature of lab 04.
 *
 * The request goes to the peer proxy's lab 03 datagram socket; that proxy calls
 * cuMemExportToShareableHandle, sends the fd back with SCM_RIGHTS and closes its copy.
 * @param[in]  ctx         the mcclProxyState (after mcclProxyInit).
 * @param[in]  peerRank    owner of the allocation.
 * @param[in]  handle      the owner's CUmemGenericAllocationHandle value, handleSize bytes.
 * @param[in]  handleSize  sizeof(CUmemGenericAllocationHandle).
 * @param[out] fd          a new fd the caller closes; written only on success.
 * @return mcclSuccess; mcclInvalidArgument; mcclUnhandledCudaError (the owner could not export it:
 *         reported by the owner); mcclTimeout (the owner's proxy did not answer in MCCL_IPC_TIMEOUT).
 */
mcclResult_t mcclProxyClientGetFdBlocking(void* ctx, int peerRank, const void* handle, int handleSize, int* fd);

/**
 * @brief Give peer's proxy an fd and learn the number it has there (NCCL's
 * ncclProxyClientQueryFdBlocking). The proxy keeps that fd until it is destroyed.
 * @param[in]  proxy     this rank's proxy (after mcclProxyInit).
 * @param[in]  peerRank  whose proxy receives the fd (may be this rank).
 * @param[in]  localFd   an open fd; the caller keeps it.
 * @param[out] rmtFd     the fd's number in the peer proxy's process.
 * @return mcclSuccess; mcclInvalidArgument; mcclTimeout; mcclRemoteError.
 */
mcclResult_t mcclProxyClientQueryFdBlocking(mcclProxyState* proxy, int peerRank, int localFd, int* rmtFd);

/**
 * @brief Post one message (send or receive, per the connector's side) to the progress thread.
 *
 * The message is posted as lab 04's struct mcclProxyOp (mcclProxyOpInit: the copy-engine mode, with
 * `buff` as the op's ceBuff and this proxy's abort flag); the progress thread keeps only the progress
 * state built from it (mcclProxyOpToArgs: NCCL's ProxyAppend / ncclProxyOpToArgs) and calls the
 * transport's proxyProgress(proxy, args) until args->state is mcclProxyOpNone.
 *
 * Lock-free: the op goes into a single-producer ring, so call it from one user thread per proxy.
 * Messages on one connector complete in posting order. Freeing the connector (mcclConnectorFree)
 * while some of its ops are in flight cancels them: they end with mcclInvalidUsage, and the free
 * returns once the progress thread has let go of the connection, then releases it.
 * @param[in]  proxy      from mcclProxyCreate.
 * @param[in]  connector  connected, with mcclProxyConnect.
 * @param[in]  buff       device buffer (source or destination); NULL only when nbytes is 0.
 * @param[in]  nbytes     message size; the peer posts the same.
 * @param[out] req        the handle for mcclProxyTest / mcclProxyWait.
 * @return mcclSuccess; mcclInvalidArgument; mcclInvalidUsage (pool full: MCCL_PROXY_MAX_OPS in
 *         flight, or the proxy stopped).
 */
mcclResult_t mcclProxyPostOp(mcclProxyState* proxy, struct mcclConnector* connector, void* buff, size_t nbytes,
                             mcclProxyRequest* req);

/**
 * @brief Whether a posted op finished; a finished op's handle is released.
 * @param[in]  proxy from mcclProxyCreate.
 * @param[in]  req   from mcclProxyPostOp.
 * @param[out] done  1 when finished (the return value is then the op's result), else 0.
 * @return mcclSuccess or the op's error when done; mcclInvalidArgument for a bad handle.
 */
mcclResult_t mcclProxyTest(mcclProxyState* proxy, mcclProxyRequest req, int* done);

/**
 * @brief Wait for a posted op (spin briefly, then yield) and release its handle.
 * @param[in] proxy from mcclProxyCreate.
 * @param[in] req   from mcclProxyPostOp.
 * @return the op's result (mcclInvalidUsage if its connector was freed while it was in flight);
 *         mcclInvalidArgument for a bad handle.
 */
mcclResult_t mcclProxyWait(mcclProxyState* proxy, mcclProxyRequest req);

/**
 * @brief Stop both threads (Stop message to the service, flag and signal to progress) and join them
 * (NCCL's ncclProxyStop). Ops still in flight finish with mcclInternalError. Idempotent.
 * @param[in] proxy from mcclProxyCreate.
 * @return mcclSuccess, or the first error a thread reported.
 */
mcclResult_t mcclProxyStop(mcclProxyState* proxy);

/**
 * @brief Stop if needed, free every proxy connection (proxyFree), close every socket and fd and
 * free the proxy (NCCL's ncclProxyDestroy). Safe after abort and after a peer died.
 * @param[in] proxy from mcclProxyCreate, or NULL (no-op).
 * @return mcclSuccess, or the first error seen while stopping.
 */
mcclResult_t mcclProxyDestroy(mcclProxyState* proxy);

/**
 * @brief The two threads, e.g. to read their CPU time (pthread_getcpuclockid) or affinity.
 * @param[in]  proxy        from mcclProxyCreate.
 * @param[out] service      the service thread (may be NULL).
 * @param[out] progress     the progress thread (may be NULL).
 * @return mcclSuccess; mcclInvalidArgument; mcclInvalidUsage after mcclProxyStop.
 */
mcclResult_t mcclProxyGetThreads(const mcclProxyState* proxy, pthread_t* service, pthread_t* progress);

/**
 * @brief Parse a CPU list such as "0-3,8" (the MCCL_PROXY_CPUSET syntax).
 * @param[in]  list  the text.
 * @param[out] set   the CPUs; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (malformed, empty, or CPU >= CPU_SETSIZE).
 */
mcclResult_t mcclProxyParseCpuset(const char* list, cpu_set_t* set);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
