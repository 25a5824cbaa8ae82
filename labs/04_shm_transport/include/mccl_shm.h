/**
 * @file mccl_shm.h
 * @brief Lab 04: the SHM transport: shareable host buffers (a /dev/shm file or cuMem host-NUMA
 * memory) and the send/recv FIFO between two processes (NCCL's src/transport/shm.cc and shm.h).
 * @ingroup lab04
 */
#ifndef MCCL_SHM_H_
#define MCCL_SHM_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include "mccl_result.h"
#include "mccl_shmutils.h"
#include "mccl_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab04 Lab 04: SHM transport
 * @brief Two processes on one host move a message through pinned host memory they both map: a
 * FIFO of MCCL_STEPS slots, a `tail` the sender publishes and a `head` the receiver returns as
 * credit, each on its own cache line (NCCL 2.28.9 src/transport/shm.cc, src/misc/shmutils.cc,
 * src/include/comm.h ncclSendMem/ncclRecvMem, src/include/collectives.h ncclConnFifo).
 *
 * Set-up follows NCCL: each side's setup asks its proxy (proxyCall) to allocate a shareable
 * buffer (the sender one mcclSendMem page, the receiver one mcclRecvMem page followed by the
 * MCCL_LL_BUFFSIZE LL FIFO and the MCCL_BUFFSIZE SIMPLE FIFO: NCCL's default SHM_LOCALITY, receiver
 * side), and returns connect information holding its descriptor; the peers swap it, and each side's
 * connect imports the other's buffer.
 *
 * After connect, mcclConnector::conn holds device addresses of that mapped host memory (both FIFOs,
 * head, tail, connFifo): a kernel (lab 06) loads and stores them directly, NCCL's default SHM mode.
 *
 * This lab moves data on the host instead (NCCL 2.28's optional SHM_USE_CUDA_MEMCPY mode, which
 * NCCL 2.30 removed; SIMPLE FIFO only, no GPU kernel): the sender
 * copies each slot from its device buffer into the FIFO with cudaMemcpyAsync, records an event, and
 * when the event completes writes the slot size in connFifo and publishes tail; the receiver waits
 * for tail, copies the slot to its device buffer, and when that copy completes returns head. Both
 * are non-blocking state machines (proxyProgress) with up to MCCL_STEPS copies in flight.
 *
 * @code
 * mcclPeerInfo me, peer;                 // peer's record comes from the other process
 * struct mcclTransportCtx ctx;           // rank, ranks, device, buffer sizes
 * MCCLCHECK(mcclTransportCtxInit(&ctx, rank, 2, dev));
 * MCCLCHECK(mcclFillPeerInfo(rank, dev, &me));
 * int ok; MCCLCHECK(mcclShmTransport.canConnect(&ok, &ctx, &me, &peer));
 * struct mcclConnector c; struct mcclConnect mine, theirs;
 * MCCLCHECK(mcclConnectorInit(&c, TRANSPORT_SHM, &mcclShmTransport, 1, rank));  // sender
 * c.getPeerFd = myGetFd; c.getPeerFdCtx = ctx;                        // for cuMem buffers
 * MCCLCHECK(c.transportComm->setup(&ctx, NULL, &me, &peer, &mine, &c, 0, 0));  // channel 0, connIndex 0
 * // send `mine` to the peer (and the fd of mcclShmExportFd when it is a cuMem descriptor),
 * // receive `theirs`
 * MCCLCHECK(c.transportComm->connect(&ctx, &theirs, 1, 0, &c));
 * struct mcclProxyOp op;
 * MCCLCHECK(mcclProxyOpInit(&op, &c, devBuf, nbytes, NULL));
 * MCCLCHECK(mcclProxyOpsWait(&op, 1, NULL));
 * MCCLCHECK(mcclConnectorFree(&c));
 * @endcode
 * @{
 */

/** @brief mcclShmIpcDesc_t::kind: a /dev/shm file (NCCL's legacy path). */
#define MCCL_SHM_IPC_LEGACY 1
/** @brief mcclShmIpcDesc_t::kind: cuMem host-NUMA memory exported as a POSIX fd. */
#define MCCL_SHM_IPC_CUMEM 2

/**
 * @brief A shareable host buffer, tagged with how it was made (NCCL's ncclShmIpcDesc_t). The
 * importer acts on `kind`. Fields marked "local" mean something only in the process that made the
 * descriptor; the rest travel to the peer inside the connect information.
 */
typedef struct {
  int kind; /**< MCCL_SHM_IPC_LEGACY or MCCL_SHM_IPC_CUMEM; 0 for an empty descriptor */
  union {
    /** MCCL_SHM_IPC_LEGACY */
    struct {
      char shmSuffix[7];       /**< the six random characters after MCCL_SHM_PREFIX, NUL-terminated */
      size_t shmSize;          /**< usable bytes */
      mcclShmHandle_t handle;  /**< local: the open segment */
    } legacy;
    /** MCCL_SHM_IPC_CUMEM; the fd travels separately (SCM_RIGHTS) */
    struct {
      CUmemAllocationHandleType type;      /**< CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
      size_t size;                         /**< bytes (rounded to granularity by the exporter) */
      CUmemGenericAllocationHandle handle; /**< the exporter's handle, meaningful to the exporter only */
      void* ptr;                           /**< local: the mapping to free */
    } cumem;
  };
} mcclShmIpcDesc_t;

/**
 * @brief Allocate size bytes of host memory another process can map (NCCL's
 * ncclShmAllocateShareableBuffer): cuMem host-NUMA (lab 02) when mcclCuMemEnable() and
 * mcclCuMemHostEnable() and !legacy, else a /dev/shm segment from mcclShmOpen (registered for the
 * device). A /dev/shm segment reads as zeros; cuMem memory is not cleared.
 * @param[in]  size     bytes, > 0.
 * @param[in]  legacy   non-zero forces the /dev/shm path (NCCL does for peers in one process), for
 *                      importers in this process only: the name is unlinked before this returns, and
 *                      mcclShmImportShareableBuffer here opens the segment through its creator's fd
 *                      (/proc/self/fd/N), so a kill at any later moment leaves no file. Zero with cuMem
 *                      off gives a named segment that another process can attach (its last attacher
 *                      unlinks it).
 * @param[out] descOut  the tagged descriptor (local fields set).
 * @param[out] hptr     host address.
 * @param[out] dptr     device address, or NULL.
 * @return mcclSuccess; mcclInvalidArgument; mcclSystemError; mcclUnhandledCudaError. Outputs are
 *         written only on success.
 */
mcclResult_t mcclShmAllocateShareableBuffer(size_t size, int legacy, mcclShmIpcDesc_t* descOut, void** hptr,
                                            void** dptr);

/**
 * @brief A new POSIX fd for a cuMem descriptor's allocation (cuMemExportToShareableHandle), to
 * send to the importer; the caller closes it after sending. Exporter side only.
 * @param[in]  desc  a MCCL_SHM_IPC_CUMEM descriptor made in this process.
 * @param[out] fd    the descriptor.
 * @return mcclSuccess; mcclInvalidArgument (NULL, a legacy or empty descriptor);
 *         mcclUnhandledCudaError.
 */
mcclResult_t mcclShmExportFd(const mcclShmIpcDesc_t* desc, int* fd);

/**
 * @brief Map a peer's shareable buffer (NCCL's ncclShmImportShareableBuffer), acting on desc->kind:
 * LEGACY attaches the /dev/shm file (mcclShmOpen with refcount -1, which unlinks it when last), or,
 * for a segment this process made with legacy forced, the creator's open fd through /proc/self/fd;
 * CUMEM imports fd (cuMemImportFromShareableHandle), maps it at a new address and grants the
 * current device and the host read/write access.
 * @param[in]  desc     the peer's descriptor, as received.
 * @param[in]  fd       for CUMEM the fd the exporter sent (the caller keeps and closes it); -1 for LEGACY.
 * @param[out] hptr     host address.
 * @param[out] dptr     device address, or NULL.
 * @param[out] descOut  this side's descriptor of the mapping, for mcclShmIpcClose.
 * @return mcclSuccess; mcclInvalidArgument (bad kind, suffix, size, type or fd; named in the
 *         WARN); mcclSystemError (the file is gone); mcclUnhandledCudaError.
 */
mcclResult_t mcclShmImportShareableBuffer(const mcclShmIpcDesc_t* desc, int fd, void** hptr, void** dptr,
                                          mcclShmIpcDesc_t* descOut);

/**
 * @brief Release an allocated or imported buffer (NCCL's ncclShmIpcClose): mcclShmClose for
 * LEGACY, unmap/release for CUMEM. The descriptor is emptied (kind 0); an empty one is a no-op.
 * @param[in,out] desc  from mcclShmAllocateShareableBuffer or mcclShmImportShareableBuffer, or NULL.
 * @return mcclSuccess; the first error met (every step is still attempted).
 */
mcclResult_t mcclShmIpcClose(mcclShmIpcDesc_t* desc);

/** @brief The SHM transport's connect information (NCCL's shmConnectInfo): what `setup` writes into
 *  struct mcclConnect and the peer's `connect` reads. buf holds the owner's own addresses. */
struct mcclShmConnectInfo {
  int rank;               /**< the owner's rank (whom to ask for the fd) */
  mcclShmIpcDesc_t desc;  /**< the owner's buffer */
  /** the owner's own addresses of the buffer, returned to its setup (meaningless to the peer) */
  struct {
    void* hptr;           /**< owner's host address */
    void* dptr;           /**< owner's device address */
  } buf;
};
/// @cond INTERNAL
MCCL_STATIC_ASSERT(sizeof(struct mcclShmConnectInfo) <= MCCL_CONNECT_SIZE, "SHM connect info must fit mcclConnect");
/// @endcond

/** @brief Request the setup hook sends to proxySetup (NCCL's shmRequest, plus the FIFO and step). */
struct mcclShmRequest {
  size_t size;           /**< bytes to allocate: the page, plus the LL and SIMPLE FIFOs on the receive side */
  int legacy;            /**< force the /dev/shm path */
  int buffSize;          /**< SIMPLE FIFO bytes (MCCL_BUFFSIZE) */
  int llBuffSize;        /**< LL FIFO bytes (MCCL_LL_BUFFSIZE), zeroed by proxySetup; 0 on the send side */
  uint64_t initialStep;  /**< the starting head (sender page) or tail (receiver page) */
};

/** @brief Request the connect hook sends to proxyConnect (NCCL's shmProxyInfo in): mapped host addresses. */
struct mcclShmProxyConnectReq {
  char* shmFifo;                /**< host address of the SIMPLE FIFO (own for a receiver, the peer's for a sender) */
  struct mcclSendMem* sendMem;  /**< host address of the sender's page */
  struct mcclRecvMem* recvMem;  /**< host address of the receiver's page */
};

/**
 * @brief The SHM transport (NCCL's shmTransport): name "SHM"; canConnect is 1 when both peers have
 * the same host hash and the same /dev/shm device (st_dev) and MCCL_SHM_DISABLE is not 1.
 */
extern struct mcclTransport mcclShmTransport;

/** @brief Largest MCCL_BUFFSIZE mcclShmBuffSize accepts: 1 GiB (each connection's segment is this
 *  plus two pages, in /dev/shm or pinned host memory). */
#define MCCL_SHM_MAX_BUFFSIZE (1LL << 30)

/**
 * @brief Bytes of the FIFO each connection gets: MCCL_BUFFSIZE, checked.
 * @param[out] buffSize  the value: a multiple of 4096 from 4096 to 1 GiB (MCCL_SHM_MAX_BUFFSIZE).
 * @return mcclSuccess; mcclInvalidArgument naming MCCL_BUFFSIZE and its value.
 */
mcclResult_t mcclShmBuffSize(int* buffSize);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
