/**
 * @file minccl.h
 * @brief libminccl: NCCL's API with the mccl prefix, over labs 01-07 (NCCL 2.28.9 src/nccl.h.in).
 * @ingroup final
 *
 * Every call has the name, the signature and the semantics of its NCCL twin with `nccl` replaced by
 * `mccl` (docs/final-api.md maps them one by one), so a program moves between the two by renaming,
 * and the NCCL drop-in (libnccl.so.2) forwards each ncclX to mcclX unchanged. The types come from
 * mccl_result.h (mcclResult_t, NCCL's values 0..7, plus mcclTimeout and mcclNotImplemented) and mccl_types.h
 * (mcclUniqueId, mcclDataType_t, mcclRedOp_t with NCCL's values); both are installed with this header.
 */
#ifndef MINCCL_H_
#define MINCCL_H_

#include <stddef.h>
#include <cuda_runtime.h>
#include "mccl_result.h"
#include "mccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup final final: libminccl, the integrated library
 * @brief NCCL's communicator API over the labs: a communicator owns the bootstrap (common), the
 * proxy (lab 05), the ring channels and their P2P/SHM connections (labs 03, 04, 06) and the
 * symmetric windows (lab 07); mcclAllReduce runs lab 07's ring, one-shot or two-shot kernels.
 *
 * One process per device (under mpirun), as with NCCL:
 * @code
 * mcclUniqueId id;
 * if (rank == 0) mcclGetUniqueId(&id);
 * MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
 * cudaSetDevice(localRank);
 * mcclComm_t comm;
 * mcclCommInitRank(&comm, nranks, id, rank);
 * mcclAllReduce(sendbuff, recvbuff, count, mcclFloat32, mcclSum, comm, stream);  // asynchronous
 * cudaStreamSynchronize(stream);
 * mcclCommDestroy(comm);
 * @endcode
 * One process driving several devices: collective calls on several communicators go between
 * mcclGroupStart and mcclGroupEnd, which runs them together (window registration is collective and
 * blocking, so one thread could not make it rank by rank):
 * @code
 * mcclComm_t comms[4];
 * mcclCommInitAll(comms, 4, NULL);
 * mcclGroupStart();
 * for (int i = 0; i < 4; i++) mcclCommWindowRegister(comms[i], buf[i], bytes, &win[i], MCCL_WIN_COLL_SYMMETRIC);
 * mcclGroupEnd();
 * mcclGroupStart();
 * for (int i = 0; i < 4; i++) mcclAllReduce(buf[i], buf[i], count, mcclFloat32, mcclSum, comms[i], stream[i]);
 * mcclGroupEnd();
 * @endcode
 * @{
 */

/** @brief minccl's major version. */
#define MCCL_MAJOR 0
/** @brief minccl's minor version. */
#define MCCL_MINOR 1
/** @brief minccl's patch level. */
#define MCCL_PATCH 0
/** @brief A version code from its parts (NCCL's NCCL_VERSION for releases after 2.8). */
#define MCCL_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
/** @brief This header's version, as mcclGetVersion reports the library's. */
#define MCCL_VERSION_CODE MCCL_VERSION(MCCL_MAJOR, MCCL_MINOR, MCCL_PATCH)

/** @brief Opaque communicator handle (NCCL's ncclComm_t). */
typedef struct mcclComm* mcclComm_t;
/** @brief Opaque registered window (NCCL 2.28's ncclWindow_t). */
typedef struct mcclWindow_vidmem* mcclWindow_t;

/** @brief Window flags (NCCL's NCCL_WIN_DEFAULT): a plain registration; minccl maps it symmetrically all the same. */
#define MCCL_WIN_DEFAULT 0x00
/** @brief Window flags (NCCL's NCCL_WIN_COLL_SYMMETRIC): every rank registers a buffer of the same size. */
#define MCCL_WIN_COLL_SYMMETRIC 0x01

/**
 * @brief The library's version (NCCL's ncclGetVersion).
 * @param[out] version  MCCL_VERSION_CODE of the library.
 * @return mcclSuccess; mcclInvalidArgument (NULL).
 */
mcclResult_t mcclGetVersion(int* version);

/** @cond MCCL_REDECLARED (documented where they are defined; repeated so minccl.h stands alone) */
/* mcclGetUniqueId (NCCL's ncclGetUniqueId), documented in mccl_bootstrap.h: a fresh id on rank 0's
 * host, then handed to every rank (MPI_Bcast). mcclSuccess; mcclInvalidArgument (NULL, or
 * MCCL_SOCKET_IFNAME / MCCL_SOCKET_FAMILY selecting no interface); mcclSystemError. */
mcclResult_t mcclGetUniqueId(mcclUniqueId* uniqueId);
/** @endcond */

/**
 * @brief Create this rank's communicator on the current device (NCCL's ncclCommInitRank).
 * Collective: blocks until all nranks ranks have called it with the same id. Between
 * mcclGroupStart and mcclGroupEnd it only records the call (*comm is written at once, usable in the
 * same group) and mcclGroupEnd creates the group's communicators together, one thread each: one
 * thread may then create the communicators of several devices (cudaSetDevice before each call).
 * @param[out] comm    the communicator; written only on success.
 * @param[in]  nranks  number of ranks, 1 .. 64.
 * @param[in]  commId  from mcclGetUniqueId, the same bytes on every rank.
 * @param[in]  rank    this rank, 0 .. nranks-1.
 * @return mcclSuccess; mcclInvalidArgument (NULL comm, nranks or rank out of range, named in the
 *         WARN); mcclInvalidUsage (ranks that disagree on nranks, a duplicate rank); mcclTimeout (a
 *         rank never arrived, MCCL_BOOTSTRAP_TIMEOUT); mcclRemoteError; mcclUnhandledCudaError;
 *         mcclSystemError. Nothing is left behind on failure.
 */
mcclResult_t mcclCommInitRank(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank);

/**
 * @brief One process, ndev devices: one communicator per device, rank i on devlist[i] (NCCL's
 * ncclCommInitAll). Runs at once, also inside a group.
 * @param[out] comms    ndev communicators; written only if all were created.
 * @param[in]  ndev     1 .. 64, at most the devices present.
 * @param[in]  devlist  ndev distinct device ordinals, or NULL for 0 .. ndev-1.
 * @return mcclSuccess; mcclInvalidArgument (NULL comms, ndev out of range, a device out of range
 *         or repeated); errors of the initialisation (every communicator is then undone).
 */
mcclResult_t mcclCommInitAll(mcclComm_t* comms, int ndev, const int* devlist);

/**
 * @brief Wait for the communicator's outstanding operations, then free everything it owns
 * (NCCL's ncclCommDestroy; not collective). Windows still registered are deregistered.
 * @param[in] comm  the communicator, or NULL (mcclSuccess, as NCCL).
 * @return mcclSuccess; mcclInvalidArgument (a handle that is not a live communicator: destroyed
 *         twice, or never created; NCCL leaves this undefined, minccl detects it unless the address
 *         was reused by a later communicator); the first error met while freeing (everything is
 *         still freed).
 */
mcclResult_t mcclCommDestroy(mcclComm_t comm);

/**
 * @brief Abort the communicator's operations and free it (NCCL's ncclCommAbort): raises the abort
 * flag that kernels, the proxy and the bootstrap poll, so it returns promptly even while a kernel
 * spins on a dead peer, then frees everything as mcclCommDestroy. The handle is invalid afterwards.
 * @param[in] comm  the communicator, or NULL (mcclSuccess, as NCCL).
 * @return mcclSuccess; mcclInvalidArgument (not a live communicator).
 */
mcclResult_t mcclCommAbort(mcclComm_t comm);

/**
 * @brief Number of ranks (NCCL's ncclCommCount).
 * @param[in]  comm   the communicator.
 * @param[out] count  its rank count.
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL count).
 */
mcclResult_t mcclCommCount(const mcclComm_t comm, int* count);

/**
 * @brief The CUDA device of the communicator (NCCL's ncclCommCuDevice).
 * @param[in]  comm    the communicator.
 * @param[out] device  its device ordinal.
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL device).
 */
mcclResult_t mcclCommCuDevice(const mcclComm_t comm, int* device);

/**
 * @brief This rank in the communicator (NCCL's ncclCommUserRank).
 * @param[in]  comm  the communicator.
 * @param[out] rank  its rank.
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL rank).
 */
mcclResult_t mcclCommUserRank(const mcclComm_t comm, int* rank);

/**
 * @brief An error that happened outside any call (NCCL's ncclCommGetAsyncError): poll it while
 * waiting on a stream, and call mcclCommAbort when it is not mcclSuccess.
 * @param[in]  comm        the communicator.
 * @param[out] asyncError  mcclSuccess; mcclInProgress (created inside a group whose mcclGroupEnd has
 *                         not run); mcclRemoteError (a peer process on this machine exited: one whose
 *                         pid names a process here, posed hosts included; or a communicator of the
 *                         same clique in this process was aborted); the error of a failed grouped
 *                         initialisation; mcclInternalError (the abort flag is raised).
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL asyncError).
 */
mcclResult_t mcclCommGetAsyncError(mcclComm_t comm, mcclResult_t* asyncError);

/** @cond MCCL_REDECLARED (documented where they are defined; repeated so minccl.h stands alone) */
/* mcclGetErrorString (NCCL's ncclGetErrorString), documented in mccl_result.h: a static string for
 * any result code, never NULL. */
const char* mcclGetErrorString(mcclResult_t result);
/** @endcond */

/**
 * @brief The text of the last warning the library printed, in any thread (NCCL's ncclGetLastError:
 * one buffer per process, comm is not used), e.g. "Invalid argument: comm is NULL".
 * @param[in] comm  ignored (may be NULL), as in NCCL.
 * @return a static string, "" when nothing went wrong yet; overwritten by the next warning.
 */
const char* mcclGetLastError(mcclComm_t comm);

/** @cond MCCL_REDECLARED (documented where they are defined; repeated so minccl.h stands alone) */
/* mcclMemAlloc / mcclMemFree (NCCL's ncclMemAlloc / ncclMemFree), documented in lab 01's
 * mccl_alloc.h: device memory on the current device that peers can map (cuMem, with fd and fabric
 * handles), the memory to register as a window. mcclSuccess; mcclInvalidArgument;
 * mcclUnhandledCudaError. */
mcclResult_t mcclMemAlloc(void** ptr, size_t size);
/* See mcclMemAlloc. ptr NULL is a no-op. */
mcclResult_t mcclMemFree(void* ptr);
/** @endcond */

/**
 * @brief Register a buffer as a symmetric window (NCCL 2.28's ncclCommWindowRegister): collective;
 * every rank maps every peer's buffer, and allreduces whose buffers lie in windows may run the
 * one-shot and two-shot kernels. Inside a group the registration runs at mcclGroupEnd (one thread
 * per communicator) and *win is written then.
 * @param[in]  comm      the communicator.
 * @param[in]  buff      the start of an mcclMemAlloc allocation (the same size on every rank).
 * @param[in]  size      bytes, > 0 and at most the allocation.
 * @param[out] win       the window; written only on success.
 * @param[in]  winFlags  MCCL_WIN_DEFAULT or MCCL_WIN_COLL_SYMMETRIC (both map symmetrically).
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL buff or win, size 0, unknown
 *         flags, not the start of an mcclMemAlloc allocation, sizes that differ between ranks);
 *         errors of the proxy and the bootstrap.
 */
mcclResult_t mcclCommWindowRegister(mcclComm_t comm, void* buff, size_t size, mcclWindow_t* win, int winFlags);

/**
 * @brief Unmap the peers' buffers of a window and free it (NCCL's ncclCommWindowDeregister). Not
 * collective; the buffer stays the caller's (mcclMemFree). Waits for the communicator's
 * outstanding operations first.
 * @param[in] comm  the communicator.
 * @param[in] win   from mcclCommWindowRegister on comm.
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL win, not a window of comm).
 */
mcclResult_t mcclCommWindowDeregister(mcclComm_t comm, mcclWindow_t win);

/**
 * @brief Allreduce (NCCL's ncclAllReduce): recvbuff[i] = op over all ranks of sendbuff[i]; in place
 * when sendbuff == recvbuff. Stream-ordered and asynchronous: the call enqueues a kernel on
 * `stream` and returns; inside a group the launch happens at mcclGroupEnd. The algorithm comes from
 * lab 07's table (ring; one-shot on the signal area for small sizes; two-shot when both buffers are
 * in windows), MCCL_ALGO / MCCL_PROTO override it. Every rank passes the same count, dtype and op:
 * a mismatch is not detected (as in NCCL) and gives wrong results or a hang.
 * @param[in]  sendbuff  device input, count elements.
 * @param[out] recvbuff  device output, count elements.
 * @param[in]  count     elements; count * size of dtype must not overflow size_t.
 * @param[in]  datatype  mcclDataType_t (NCCL's fp8 types are refused).
 * @param[in]  op        mcclRedOp_t.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL buffers with count > 0, count
 *         overflow, unknown datatype or op, a forced algorithm that cannot run); mcclInvalidUsage
 *         (an aborted communicator); errors of the launch.
 */
mcclResult_t mcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, mcclRedOp_t op,
                           mcclComm_t comm, cudaStream_t stream);

/**
 * @brief AllGather (NCCL's ncclAllGather): every rank's recvbuff holds nranks blocks of sendcount
 * elements, block r being rank r's sendbuff. In place when sendbuff is recvbuff + rank * sendcount
 * elements. Lab 07's ring (LL up to 256 KiB of output, SIMPLE above); stream-ordered, asynchronous,
 * recorded inside a group and launched at mcclGroupEnd in call order, as mcclAllReduce.
 * @param[in]  sendbuff   device input, sendcount elements.
 * @param[out] recvbuff   device output, nranks * sendcount elements.
 * @param[in]  sendcount  elements per rank; nranks * sendcount * size of datatype must not overflow.
 * @param[in]  datatype   mcclDataType_t.
 * @param[in]  comm       the communicator.
 * @param[in]  stream     a stream of the communicator's device.
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL buffers with sendcount > 0, count
 *         overflow, unknown datatype, buffers that overlap other than in place); mcclInvalidUsage (an
 *         aborted communicator); errors of the launch.
 */
mcclResult_t mcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mcclDataType_t datatype,
                           mcclComm_t comm, cudaStream_t stream);

/**
 * @brief ReduceScatter (NCCL's ncclReduceScatter): rank r's recvbuff[i] = op over all ranks of
 * sendbuff[r * recvcount + i]. In place when recvbuff is sendbuff + rank * recvcount elements.
 * Lab 07's ring; semantics and group behaviour as mcclAllReduce.
 * @param[in]  sendbuff   device input, nranks * recvcount elements.
 * @param[out] recvbuff   device output, recvcount elements.
 * @param[in]  recvcount  elements per rank; nranks * recvcount * size of datatype must not overflow.
 * @param[in]  datatype   mcclDataType_t.
 * @param[in]  op         mcclRedOp_t.
 * @param[in]  comm       the communicator.
 * @param[in]  stream     a stream of the communicator's device.
 * @return as mcclAllGather, and mcclInvalidArgument for an unknown op.
 */
mcclResult_t mcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mcclDataType_t datatype,
                               mcclRedOp_t op, mcclComm_t comm, cudaStream_t stream);

/**
 * @brief Broadcast (NCCL's ncclBroadcast): count elements of the root's sendbuff into every rank's
 * recvbuff, the root's included; in place when sendbuff == recvbuff. Lab 07's ring; semantics and
 * group behaviour as mcclAllReduce.
 * @param[in]  sendbuff  device input, count elements; read on the root only.
 * @param[out] recvbuff  device output, count elements.
 * @param[in]  count     elements; count * size of datatype must not overflow.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  root      the rank whose data is sent, 0 .. nranks-1.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as mcclAllGather, and mcclInvalidArgument for a root out of range.
 */
mcclResult_t mcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, int root,
                           mcclComm_t comm, cudaStream_t stream);

/**
 * @brief Reduce (NCCL's ncclReduce): the root's recvbuff[i] = op over all ranks of sendbuff[i];
 * other ranks' recvbuff is not written. In place when sendbuff == recvbuff. Lab 07's ring;
 * semantics and group behaviour as mcclAllReduce.
 * @param[in]  sendbuff  device input, count elements.
 * @param[out] recvbuff  device output on the root, count elements.
 * @param[in]  count     elements; count * size of datatype must not overflow.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  op        mcclRedOp_t.
 * @param[in]  root      the rank that receives the result, 0 .. nranks-1.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as mcclBroadcast, and mcclInvalidArgument for an unknown op.
 */
mcclResult_t mcclReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, mcclRedOp_t op,
                        int root, mcclComm_t comm, cudaStream_t stream);

/**
 * @brief Send count elements to any peer (NCCL's ncclSend); peer calls mcclRecv with the same count
 * and type. At mcclGroupEnd (a call outside a group is a group of one), a communicator's sends and
 * receives go together to lab 07's mcclLabSendRecv: peers not yet connected get point-to-point
 * connections on every channel (connIndex 1, P2P else SHM, kept until mcclCommDestroy), made with the
 * peer's matching call, then NCCL's schedule (round r: the send to rank + r with the receive from
 * rank - r) runs in one kernel launch per 16 rounds. A send and its receive must be in groups that
 * both ranks reach (a ring's send to next and receive from prev in one group each, as nccl-tests'
 * sendrecv; all-to-all in one group). To self is a device copy, which needs the mcclRecv from self of
 * the same size in the same group. A communicator's grouped sends and receives must share one stream.
 *
 * A send whose receive never comes waits, as in NCCL: at mcclGroupEnd while connecting (until
 * MCCL_BOOTSTRAP_TIMEOUT, mcclTimeout) or, once connected, in the kernel; mcclCommAbort ends it.
 * @param[in] sendbuff  device input, count elements.
 * @param[in] count     elements; count * size of datatype must not overflow.
 * @param[in] datatype  mcclDataType_t (bytes are moved).
 * @param[in] peer      the receiving rank, 0 .. nranks-1 (this rank: a copy).
 * @param[in] comm      the communicator.
 * @param[in] stream    a stream of the communicator's device.
 * @return mcclSuccess; mcclInvalidArgument (NULL or dead comm, NULL sendbuff with count > 0, count
 *         overflow, unknown datatype, peer out of range); mcclInvalidUsage (an unpaired send to self,
 *         a group's sends and receives of one communicator on several streams, an aborted
 *         communicator); errors of the connection setup (mcclTimeout, ...) and of the launch.
 */
mcclResult_t mcclSend(const void* sendbuff, size_t count, mcclDataType_t datatype, int peer, mcclComm_t comm,
                      cudaStream_t stream);

/**
 * @brief Receive count elements from any peer (NCCL's ncclRecv), the counterpart of its mcclSend;
 * connections, schedule and group behaviour as mcclSend.
 * @param[out] recvbuff  device output, count elements.
 * @param[in]  count     elements.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  peer      the sending rank, 0 .. nranks-1 (this rank: a copy).
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as mcclSend (NULL recvbuff with count > 0; an unpaired receive from self).
 */
mcclResult_t mcclRecv(void* recvbuff, size_t count, mcclDataType_t datatype, int peer, mcclComm_t comm,
                      cudaStream_t stream);

/**
 * @brief Start a group (NCCL's ncclGroupStart): until the matching mcclGroupEnd, mcclCommInitRank,
 * mcclCommWindowRegister and the collectives and point-to-point calls of this thread only check
 * their arguments and record the call. Groups nest; only the outermost mcclGroupEnd runs them.
 * @return mcclSuccess.
 */
mcclResult_t mcclGroupStart(void);

/**
 * @brief End a group (NCCL's ncclGroupEnd): at the outermost one, create the recorded
 * communicators together (one thread each), then register the recorded windows together, then
 * launch the recorded collectives in call order, then each communicator's sends and receives
 * together (connecting new peers first; one thread per communicator, as the ranks wait for each
 * other). Returns when all are launched, not finished.
 * @return mcclSuccess; mcclInvalidUsage (no group started in this thread); the first error of a
 *         recorded call (the others still ran; a failed communicator reports it through
 *         mcclCommGetAsyncError and must be destroyed).
 */
mcclResult_t mcclGroupEnd(void);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
