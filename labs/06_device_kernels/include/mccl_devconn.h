/**
 * @file mccl_devconn.h
 * @brief Lab 06: connections as kernels see them: a device copy of a connector's mcclConnInfo, the
 * host-mapped abort flag kernels poll, and a helper that connects two endpoints with N channels
 * over P2P or SHM, in one process (two devices) or in two (lab 05 proxy and bootstrap).
 * @ingroup lab06
 */
#ifndef MCCL_DEVCONN_H_
#define MCCL_DEVCONN_H_

#include <stdint.h>
#include "mccl_bootstrap.h"
#include "mccl_channel.h"
#include "mccl_proxy.h"
#include "mccl_result.h"
#include "mccl_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab06 Lab 06: device kernels
 * @brief Kernels that drive connections directly (NCCL 2.28.9 src/device/prims_simple.h,
 * prims_ll.h, primitives.h) over the transports that let them: SHM in NCCL's default mode (the SMs
 * load and store mapped host memory) and P2P (src/transport/p2p.cc: the FIFO in the receiver's
 * device memory, imported by the sender's device).
 *
 * Host side, in order: connect N channels between two endpoints (mcclDevPairLocalCreate for two
 * devices of one process, mcclDevPairPeerCreate for two processes), give each kernel a device copy of
 * its connector's mcclConnInfo (mcclDevConnCreate) and a host-mapped abort flag
 * (mcclDevAbortFlagCreate), launch, then read the step the kernel wrote back (mcclDevConnReadStep).
 *
 * @code
 * struct mcclDevPair* pair;
 * MCCLCHECK(mcclDevPairLocalCreate(0, 1, 2, MCCL_DEVPAIR_SEND, mcclDevTransportAuto, 0, &pair));  // dev 0 -> dev 1
 * struct mcclConnInfo *sendConn, *recvConn;
 * cudaSetDevice(0); MCCLCHECK(mcclDevConnCreate(pair->ends[0].send, 2, &sendConn));
 * cudaSetDevice(1); MCCLCHECK(mcclDevConnCreate(pair->ends[1].recv, 2, &recvConn));
 * // ... launch a sender kernel on device 0 with sendConn, a receiver on device 1 with recvConn ...
 * MCCLCHECK(mcclDevConnReadStep(pair->ends[0].send, 2, sendConn));      // after both kernels ended
 * MCCLCHECK(mcclDevConnFree(sendConn));
 * MCCLCHECK(mcclDevConnFree(recvConn));
 * MCCLCHECK(mcclDevPairLocalFree(pair));
 * @endcode
 * @{
 */

/**
 * @brief Copy the mcclConnInfo of n connected connectors into one device array (cudaMalloc on the
 * current device) for a kernel whose block c drives connection c: NCCL keeps ncclConnInfo in device
 * memory, kernels load it at start and store `step` back when they end.
 * @param[in]  connectors  n connected connectors (e.g. a pair end's send[] or recv[]).
 * @param[in]  n           how many, 1..64.
 * @param[out] devConns    the device array; free it with mcclDevConnFree. Written only on success.
 * @return mcclSuccess; mcclInvalidArgument (NULL, n out of range); mcclInvalidUsage (one is not
 *         connected); mcclUnhandledCudaError.
 */
mcclResult_t mcclDevConnCreate(const struct mcclConnector* connectors, int n, struct mcclConnInfo** devConns);

/**
 * @brief Zeroed device memory for a communicator's own structures, freed without waiting for the device:
 * lab 01's allocator (cuMem when on, whose unmap does not wait for other streams; cudaFree waits for every
 * stream of the device, so a destroy would wait for the application's work). NCCL allocates its device
 * structures through cuMem too (ncclCudaCalloc). Every device may access it.
 * @param[out] ptr    the device address (written only on success).
 * @param[in]  bytes  > 0.
 * @return mcclSuccess; mcclInvalidArgument; mcclUnhandledCudaError.
 */
mcclResult_t mcclDevCalloc(void** ptr, size_t bytes);

/**
 * @brief Free memory from mcclDevCalloc.
 * @param[in] ptr  its address, or NULL (a no-op).
 * @return mcclSuccess; the errors of mcclMemFree.
 */
mcclResult_t mcclDevFree(void* ptr);

/**
 * @brief After the kernel has finished, copy the steps it wrote back into each connector's
 * conn.step, so the next kernel (or mcclDevConnCreate) starts where it stopped. Synchronous.
 * @param[in,out] connectors  the n connectors given to mcclDevConnCreate.
 * @param[in]     n           how many.
 * @param[in]     devConns    from mcclDevConnCreate.
 * @return mcclSuccess; mcclInvalidArgument (NULL, n out of range); mcclUnhandledCudaError.
 */
mcclResult_t mcclDevConnReadStep(struct mcclConnector* connectors, int n, const struct mcclConnInfo* devConns);

/**
 * @brief Free a device array from mcclDevConnCreate (any current device).
 * @param[in] devConns  the array, or NULL (a no-op).
 * @return mcclSuccess; mcclUnhandledCudaError (not a live device allocation).
 */
mcclResult_t mcclDevConnFree(struct mcclConnInfo* devConns);

/**
 * @brief Zeroed pinned host memory that kernels on every device of the process read and write, and that
 * mcclDevHostFree releases without waiting for the device: lab 02's cuMem host memory (mcclHostAlloc) with
 * access granted to every device. Where lab 02's gate is off it is cudaHostAlloc memory, whose free waits
 * for the whole device (as NCCL's fallback does).
 * @param[out] hostPtr  the host address.
 * @param[out] devPtr   the address kernels use (the same under unified addressing).
 * @param[in]  bytes    > 0.
 * @return mcclSuccess; mcclInvalidArgument; mcclUnhandledCudaError. Outputs written only on success.
 */
mcclResult_t mcclDevHostCalloc(void** hostPtr, void** devPtr, size_t bytes);

/**
 * @brief Free memory from mcclDevHostCalloc (after the kernels that use it have ended).
 * @param[in] hostPtr  its host address, or NULL (a no-op).
 * @return mcclSuccess; mcclUnhandledCudaError.
 */
mcclResult_t mcclDevHostFree(void* hostPtr);

/**
 * @brief A zeroed abort flag in mcclDevHostCalloc memory that a kernel polls and the host sets (NCCL's
 * comm->abortFlag / abortFlagDev).
 * @param[out] hostPtr  the host address: store a non-zero value to abort.
 * @param[out] devPtr   the device address to pass to kernels (valid on every device).
 * @return mcclSuccess; mcclInvalidArgument (NULL); mcclUnhandledCudaError. Outputs written only on success.
 */
mcclResult_t mcclDevAbortFlagCreate(volatile uint32_t** hostPtr, uint32_t** devPtr);

/**
 * @brief Free a flag from mcclDevAbortFlagCreate (after the kernels that poll it have ended).
 * @param[in] hostPtr  its host address, or NULL (a no-op).
 * @return mcclSuccess; mcclUnhandledCudaError.
 */
mcclResult_t mcclDevAbortFlagFree(volatile uint32_t* hostPtr);

/** @brief mcclDevPair*Create `dirs` bit: this endpoint (end 0 for a local pair) sends to the other. */
#define MCCL_DEVPAIR_SEND 1
/** @brief mcclDevPair*Create `dirs` bit: this endpoint (end 0 for a local pair) receives from the other. */
#define MCCL_DEVPAIR_RECV 2

/** @brief Which transport a pair uses. */
typedef enum {
  mcclDevTransportAuto = 0, /**< P2P when its canConnect says yes, else SHM (MCCL_P2P_DISABLE=1 forces SHM) */
  mcclDevTransportP2p = 1,  /**< P2P or fail with mcclInvalidUsage */
  mcclDevTransportShm = 2,  /**< SHM or fail with mcclInvalidUsage */
} mcclDevTransport_t;

/** @brief One endpoint of a pair: the connectors one device drives, one per channel and direction. */
struct mcclDevPairEnd {
  int rank;                              /**< this endpoint's rank (0/1 in a local pair) */
  int cudaDev;                           /**< the device its kernels run on */
  const struct mcclTransport* transport; /**< &mcclP2pTransport or &mcclShmTransport */
  int nChannels;                         /**< connectors per direction */
  struct mcclConnector* send;            /**< [nChannels] sending to the other end, or NULL */
  struct mcclConnector* recv;            /**< [nChannels] receiving from the other end, or NULL */
};

/** @brief Two endpoints in one process (mcclDevPairLocalCreate). */
struct mcclDevPair {
  struct mcclDevPairEnd ends[2]; /**< [0] on devA, [1] on devB; ends[0].send[c] feeds ends[1].recv[c] */
};

/**
 * @brief Connect two devices of this process with nChannels independent connections per direction
 * (kernels run one block per channel). Proxy calls run on this thread (mcclProxyCallDirect) with
 * the owning end's device current; P2P fds are exported in-process, SHM uses /dev/shm (as NCCL for
 * peers in one process). The caller's current device is restored.
 * @param[in]  devA       device of end 0 (rank 0).
 * @param[in]  devB       device of end 1 (rank 1); may equal devA.
 * @param[in]  nChannels  1 .. 64.
 * @param[in]  dirs       MCCL_DEVPAIR_SEND (A -> B), MCCL_DEVPAIR_RECV (B -> A), or both.
 * @param[in]  transport  mcclDevTransportAuto, mcclDevTransportP2p or mcclDevTransportShm.
 * @param[in]  initialStep  first step of every connection (0; near UINT64_MAX to test wrapping).
 * @param[out] pair       the pair; free with mcclDevPairLocalFree. Written only on success.
 * @return mcclSuccess; mcclInvalidArgument (a bad device, count, dirs or transport, NULL pair);
 *         mcclInvalidUsage (the forced transport cannot connect these devices); errors of the
 *         transport. Nothing is left allocated on failure.
 */
mcclResult_t mcclDevPairLocalCreate(int devA, int devB, int nChannels, int dirs, mcclDevTransport_t transport,
                                    uint64_t initialStep, struct mcclDevPair** pair);

/**
 * @brief Free every connector of a local pair (each with its device current) and the pair.
 * @param[in] pair  from mcclDevPairLocalCreate, or NULL (a no-op).
 * @return mcclSuccess, or the first error (every connector is still freed).
 */
mcclResult_t mcclDevPairLocalFree(struct mcclDevPair* pair);

/**
 * @brief Connect this process's rank with `peer` (another process, or this one) through lab 05:
 * connectors bound to `proxy` (mcclProxyConnect), connect information exchanged with the peer over
 * the bootstrap, P2P fds fetched from the owner's proxy. The peer makes the mirror call (its dirs
 * with SEND and RECV swapped, the same nChannels and transport) at the same time. The transport
 * choice is checked with the peer: both must pick the same one.
 * @param[in]  bs         an initialised bootstrap whose records carry the proxies' addresses.
 * @param[in]  proxy      this rank's proxy (after mcclProxyInit), created with a table that has the pair's
 *                        transport (mcclLocalTransports); it must outlive the endpoint.
 * @param[in]  peer       the other rank, != this rank.
 * @param[in]  nChannels  1 .. 64.
 * @param[in]  dirs       MCCL_DEVPAIR_SEND (to peer), MCCL_DEVPAIR_RECV (from peer), or both.
 * @param[in]  transport  mcclDevTransportAuto, mcclDevTransportP2p or mcclDevTransportShm.
 * @param[in]  initialStep  first step of every connection; the peer passes the same.
 * @param[out] end        this rank's endpoint; free with mcclDevPairPeerFree. Written only on success.
 * @return mcclSuccess; mcclInvalidArgument; mcclInvalidUsage (the transport cannot connect, or the
 *         peer chose another transport, channel count or direction); errors of the transport, the
 *         proxy and the bootstrap.
 */
mcclResult_t mcclDevPairPeerCreate(mcclBootstrap* bs, mcclProxyState* proxy, int peer, int nChannels, int dirs,
                                   mcclDevTransport_t transport, uint64_t initialStep, struct mcclDevPairEnd** end);

/**
 * @brief Free an endpoint from mcclDevPairPeerCreate (proxyFree runs on the proxy's thread).
 * @param[in] end  the endpoint, or NULL (a no-op).
 * @return mcclSuccess, or the first error (every connector is still freed).
 */
mcclResult_t mcclDevPairPeerFree(struct mcclDevPairEnd* end);

/**
 * @brief The transport `choice` selects between two peers (P2P first, then SHM, for Auto).
 * @param[in]  choice  mcclDevTransportAuto / P2p / Shm.
 * @param[in]  a       one peer's record.
 * @param[in]  b       the other's.
 * @param[out] out     &mcclP2pTransport or &mcclShmTransport. Written only on success.
 * @return mcclSuccess; mcclInvalidArgument; mcclInvalidUsage (no transport, or not the forced one,
 *         can connect them).
 */
mcclResult_t mcclDevSelectTransport(mcclDevTransport_t choice, const mcclPeerInfo* a, const mcclPeerInfo* b,
                                    const struct mcclTransport** out);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
