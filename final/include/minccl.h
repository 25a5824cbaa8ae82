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

#include <limits.h>
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
/** mcclCommShrink's flag (NCCL_SHRINK_DEFAULT): the parent's work is left alone. */
#define MCCL_SHRINK_DEFAULT 0x00
/** mcclCommShrink's flag (NCCL_SHRINK_ABORT): the parent's abort flag is raised first (its kernels may wait on an
 * excluded rank that died). */
#define MCCL_SHRINK_ABORT 0x01

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
 * mcclGroupStart and mcclGroupEnd it only records the call (*comm is written at once: its windows may be
 * registered in the same group, its collectives called after it) and mcclGroupEnd creates the group's
 * communicators together, one thread each: one thread may then create the communicators of several
 * devices (cudaSetDevice before each call).
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
 * @brief mcclCommInitRank without waiting (NCCL's ncclCommInitRankConfig with config.blocking = 0): the
 * handle is written at once and a thread of its own initialises it. mcclCommGetAsyncError gives
 * mcclInProgress until it is done, then mcclSuccess or the initialisation's error; any other call before
 * then fails with mcclInvalidUsage. mcclCommAbort (or mcclCommDestroy) ends it at any point: the waits
 * of the initialisation poll the communicator's abort flag.
 * @param[out] comm    the communicator; written only on success.
 * @param[in]  nranks  number of ranks, 1 .. 64.
 * @param[in]  commId  from mcclGetUniqueId, the same bytes on every rank.
 * @param[in]  rank    this rank, 0 .. nranks-1.
 * @return mcclSuccess (the initialisation runs); mcclInvalidArgument (as mcclCommInitRank);
 *         mcclUnhandledCudaError; mcclSystemError. The initialisation's own errors come through
 *         mcclCommGetAsyncError.
 */
mcclResult_t mcclCommInitRankAsync(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank);

/** @name The communicator's configuration (NCCL's ncclConfig_t, the fields minccl serves)
 * @{ */
/** @brief A field the caller left to the library (NCCL's NCCL_CONFIG_UNDEF_INT). */
#define MCCL_CONFIG_UNDEF_INT INT_MIN
/** @brief What SMs the communicator may use (NCCL's NCCL_CTA_POLICY_DEFAULT): kernels, as the tuning says. */
#define MCCL_CTA_POLICY_DEFAULT 0x00
/** @brief NCCL's NCCL_CTA_POLICY_EFFICIENCY (fewer CTAs on registered buffers): kernels, as the default, here. */
#define MCCL_CTA_POLICY_EFFICIENCY 0x01
/** @brief NCCL's NCCL_CTA_POLICY_ZERO: AllGather, AlltoAll, Gather, Scatter and Broadcast whose recvbuff is in a
 *  window run on the copy engines, with no kernel (lab 10); every other call, and those on other buffers, as before. */
#define MCCL_CTA_POLICY_ZERO 0x02
/** @brief mcclConfig_t's magic (NCCL's NCCL_CONFIG_INITIALIZER's). */
#define MCCL_CONFIG_MAGIC 0xcafebeefu
/** @brief A communicator's configuration; set it from MCCL_CONFIG_INITIALIZER, then the fields wanted. */
typedef struct {
  size_t size;          /**< sizeof(mcclConfig_t) */
  unsigned int magic;   /**< MCCL_CONFIG_MAGIC */
  unsigned int version; /**< MCCL_VERSION_CODE of the header it was made with */
  int blocking;         /**< 1 (or undefined): the init returns when done; 0: as mcclCommInitRankAsync */
  int CTAPolicy;        /**< MCCL_CTA_POLICY_*, or undefined: the default; MCCL_CTA_POLICY overrides it */
} mcclConfig_t;
/** @brief Initialise an mcclConfig_t (NCCL's NCCL_CONFIG_INITIALIZER). */
#define MCCL_CONFIG_INITIALIZER \
  { sizeof(mcclConfig_t), MCCL_CONFIG_MAGIC, MCCL_VERSION_CODE, MCCL_CONFIG_UNDEF_INT, MCCL_CONFIG_UNDEF_INT }
/** @} */

/**
 * @brief mcclCommInitRank with a configuration (NCCL's ncclCommInitRankConfig): config->blocking = 0 is
 * mcclCommInitRankAsync (outside a group; a group defers any init), config->CTAPolicy sets the policy (the
 * environment's MCCL_CTA_POLICY, when set, overrides it, as NCCL_CTA_POLICY does).
 * @param[out] comm    the communicator; written only on success.
 * @param[in]  nranks  number of ranks, 1 .. 64.
 * @param[in]  commId  from mcclGetUniqueId, the same bytes on every rank.
 * @param[in]  rank    this rank, 0 .. nranks-1.
 * @param[in]  config  from MCCL_CONFIG_INITIALIZER, or NULL (every field undefined).
 * @return as mcclCommInitRank (or mcclCommInitRankAsync); mcclInvalidArgument also for a config without
 *         MCCL_CONFIG_INITIALIZER's magic, blocking other than 0 or 1, a CTA policy that is none of the three.
 */
mcclResult_t mcclCommInitRankConfig(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank, mcclConfig_t* config);

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
 * @brief Wait for the communicator's outstanding operations, and for nothing else on the device, then
 * mark it finished (NCCL's ncclCommFinalize): later calls but mcclCommDestroy, mcclCommAbort and the
 * queries fail with mcclInvalidUsage. The operations waited for are the kernels it launched outside a CUDA
 * graph capture (they run on the caller's streams; other work there is not waited for).
 * @param[in] comm  the communicator.
 * @return mcclSuccess; mcclInvalidArgument (NULL or not a live communicator); mcclInvalidUsage (revoked,
 *         finalized already, or not initialised yet); mcclUnhandledCudaError (the device failed meanwhile).
 */
mcclResult_t mcclCommFinalize(mcclComm_t comm);

/**
 * @brief Wait for the communicator's outstanding operations (its own kernels, as mcclCommFinalize), then
 * free everything it owns (NCCL's ncclCommDestroy; not collective). Windows still registered are deregistered.
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
 *
 * Any thread, any moment: a call another thread is inside (an initialisation, a window registration,
 * a connection setup at a group's end, a collective) returns an error (mcclRemoteError, mcclTimeout
 * or mcclInvalidUsage) and the memory it uses is freed only once it has left. Work this communicator
 * has in a group not yet ended (its calls, a window registration, a grouped init), on this thread or
 * another, is removed: that group's end reports mcclInvalidUsage for it and runs the rest. The same
 * holds for mcclCommDestroy, which raises no flag and so waits for calls inside to end by themselves.
 * @param[in] comm  the communicator, or NULL (mcclSuccess, as NCCL).
 * @return mcclSuccess; mcclInvalidArgument (not a live communicator).
 */
mcclResult_t mcclCommAbort(mcclComm_t comm);

/**
 * @brief Stop the communicator's work and keep the handle (NCCL's ncclCommRevoke): raises the abort
 * flag as mcclCommAbort does, so calls inside on any thread and kernels end with an error, and every
 * later call but mcclCommDestroy, mcclCommAbort and the queries fails. Nothing is freed.
 * @param[in] comm  the communicator.
 * @return mcclSuccess; mcclInvalidArgument (NULL or not a live communicator).
 */
mcclResult_t mcclCommRevoke(mcclComm_t comm);

/**
 * @brief A new communicator of the ranks of comm not in excludeRanks (NCCL's ncclCommShrink), in their
 * order: rank r becomes r minus the excluded ranks below it. Collective over the survivors only: the
 * excluded ranks do not call it (one may be dead). No message crosses comm: the new id is derived from
 * comm's own (mcclBootstrapDeriveId), so it works on a revoked communicator and after a rank's death.
 * Typical recovery: mcclCommGetAsyncError says mcclRemoteError, mcclCommRevoke (or MCCL_SHRINK_ABORT),
 * mcclCommShrink, mcclCommAbort of the parent, then go on with the new one. Inside a group the new
 * communicator is created at mcclGroupEnd, as mcclCommInitRank's.
 * @param[in]  comm          a communicator made with mcclCommInitRank (mcclCommInitAll's have no id).
 * @param[in]  excludeRanks  nExclude distinct ranks of comm, not this one.
 * @param[in]  nExclude      0 .. nranks - 1.
 * @param[out] newcomm       the new communicator, on the same device.
 * @param[in]  flags         MCCL_SHRINK_DEFAULT, or MCCL_SHRINK_ABORT (raise comm's abort flag first).
 * @return mcclSuccess; mcclInvalidArgument (bad list or flags); mcclInvalidUsage (this rank excluded,
 *         comm from mcclCommInitAll, the new rank 0 not on the host that made comm's id); the errors of
 *         mcclCommInitRank.
 */
mcclResult_t mcclCommShrink(mcclComm_t comm, const int* excludeRanks, int nExclude, mcclComm_t* newcomm, int flags);

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
 *                         not run, or by mcclCommInitRankAsync still initialising); mcclRemoteError (a
 *                         peer process on this machine exited: one whose pid names a process here, posed
 *                         hosts included; or a communicator of the same clique in this process was
 *                         aborted); the error of a failed grouped or non-blocking initialisation;
 *                         mcclInternalError (the abort flag is raised); the watchdog's, when a collective
 *                         has not completed within MCCL_WATCHDOG_TIMEOUT (its WARN line names why):
 *                         mcclInvalidUsage (the ranks' calls differ in function, count, type, operation or
 *                         root), mcclRemoteError (a rank has not made the call, or the calls agree and still
 *                         do not complete).
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
 * per communicator) and *win is written then. A rank whose arguments are refused still takes part in
 * the exchange, as a refusal, there and then (or at its group's end): every rank's registration fails
 * at once, the others' naming that rank, and the ranks stay in step for the next one. NCCL leaves the
 * peers waiting instead.
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
 * @name Collectives and point-to-point
 * Each call has its NCCL twin's arguments and meaning, and runs lab 07's enqueue layer: the call is
 * checked and becomes a task; at the outermost mcclGroupEnd (at once, outside a group) a communicator's
 * tasks become plans of one kernel launch each (a group of eight small allreduces is one launch), on
 * their streams, asynchronously. The algorithm and protocol come from lab 07's tuning table (AllReduce:
 * one-shot on the signal area for small sizes, two-shot when both buffers are in windows, else the ring;
 * the others: the ring); MCCL_ALGO (AllReduce) and MCCL_PROTO override it. Every rank passes the same
 * count, type, operation and root: a mismatch is not detected (as in NCCL) and gives wrong results or a
 * hang. As in NCCL, the calls of one group may run at the same time: none may read what another writes.
 *
 * Errors of every call: mcclInvalidArgument (NULL or dead comm; type or operation out of range; an
 * operation comm did not create, or one destroyed, or created for another type; root or peer out of
 * range; count x type size (x ranks for the multi-block buffers) past 2^63; a NULL buffer the rank reads
 * or writes with count > 0; buffers that overlap other than in the call's in-place form, named in the
 * WARN); mcclInvalidUsage (an aborted communicator, or one whose grouped initialisation has not run);
 * errors of mcclGroupEnd's run (connections, launches). Inside a group a call that fails its checks fails
 * the whole group: its mcclGroupEnd launches nothing and returns the error.
 * @{
 */

/**
 * @brief Allreduce (NCCL's ncclAllReduce): recvbuff[i] = op over all ranks of sendbuff[i]; in place
 * when sendbuff == recvbuff. mcclAvg of a floating type multiplies each input by 1/nranks and sums (as
 * NCCL's PreMulSum: a half-precision average does not overflow where the sum would); of an integer
 * type it sums and divides.
 * @param[in]  sendbuff  device input, count elements.
 * @param[out] recvbuff  device output, count elements.
 * @param[in]  count     elements.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  op        mcclRedOp_t, or an operation from mcclRedOpCreatePreMulSum.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as the calls above; also mcclInvalidArgument for a forced algorithm that cannot run.
 */
mcclResult_t mcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, mcclRedOp_t op,
                           mcclComm_t comm, cudaStream_t stream);

/**
 * @brief AllGather (NCCL's ncclAllGather): every rank's recvbuff holds nranks blocks of sendcount
 * elements, block r being rank r's sendbuff. In place when sendbuff is recvbuff + rank * sendcount.
 * @param[in]  sendbuff   device input, sendcount elements.
 * @param[out] recvbuff   device output, nranks * sendcount elements.
 * @param[in]  sendcount  elements per rank.
 * @param[in]  datatype   mcclDataType_t.
 * @param[in]  comm       the communicator.
 * @param[in]  stream     a stream of the communicator's device.
 * @return as the calls above.
 */
mcclResult_t mcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mcclDataType_t datatype,
                           mcclComm_t comm, cudaStream_t stream);

/**
 * @brief ReduceScatter (NCCL's ncclReduceScatter): rank r's recvbuff[i] = op over all ranks of
 * sendbuff[r * recvcount + i]. In place when recvbuff is sendbuff + rank * recvcount.
 * @param[in]  sendbuff   device input, nranks * recvcount elements.
 * @param[out] recvbuff   device output, recvcount elements.
 * @param[in]  recvcount  elements per rank.
 * @param[in]  datatype   mcclDataType_t.
 * @param[in]  op         mcclRedOp_t, or an operation from mcclRedOpCreatePreMulSum.
 * @param[in]  comm       the communicator.
 * @param[in]  stream     a stream of the communicator's device.
 * @return as the calls above.
 */
mcclResult_t mcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mcclDataType_t datatype,
                               mcclRedOp_t op, mcclComm_t comm, cudaStream_t stream);

/**
 * @brief Broadcast (NCCL's ncclBroadcast): count elements of the root's sendbuff into every rank's
 * recvbuff, the root's included; in place when sendbuff == recvbuff.
 * @param[in]  sendbuff  device input, count elements; read on the root only.
 * @param[out] recvbuff  device output, count elements.
 * @param[in]  count     elements.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  root      the rank whose data is sent.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as the calls above.
 */
mcclResult_t mcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, int root,
                           mcclComm_t comm, cudaStream_t stream);

/**
 * @brief Reduce (NCCL's ncclReduce): the root's recvbuff[i] = op over all ranks of sendbuff[i];
 * other ranks' recvbuff is not written. In place when sendbuff == recvbuff.
 * @param[in]  sendbuff  device input, count elements.
 * @param[out] recvbuff  device output on the root, count elements.
 * @param[in]  count     elements.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  op        mcclRedOp_t, or an operation from mcclRedOpCreatePreMulSum.
 * @param[in]  root      the rank that receives the result.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as the calls above.
 */
mcclResult_t mcclReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, mcclRedOp_t op,
                        int root, mcclComm_t comm, cudaStream_t stream);

/**
 * @brief Send count elements to any peer (NCCL's ncclSend); peer calls mcclRecv with the same count
 * and type. At mcclGroupEnd, peers not yet connected get point-to-point connections on every channel
 * (connIndex 1, P2P else SHM, kept until mcclCommDestroy), made with the peer's matching group; then
 * NCCL's schedule (round r: the send to rank + r with the receive from rank - r) runs as point-to-point
 * works, all of a group's in one launch where they fit. A send and its receive must be in groups both
 * ranks reach. To self is a device copy, which needs the mcclRecv from self of the same size in the same
 * group. A communicator's grouped sends and receives share one stream.
 *
 * A send whose receive never comes waits, as in NCCL: at mcclGroupEnd while connecting (until
 * MCCL_BOOTSTRAP_TIMEOUT, mcclTimeout) or, once connected, in the kernel; mcclCommAbort ends it.
 * @param[in] sendbuff  device input, count elements.
 * @param[in] count     elements.
 * @param[in] datatype  mcclDataType_t (bytes are moved).
 * @param[in] peer      the receiving rank (this rank: a copy).
 * @param[in] comm      the communicator.
 * @param[in] stream    a stream of the communicator's device.
 * @return as the calls above; mcclInvalidUsage at mcclGroupEnd for an unpaired send to self or a group's
 *         sends and receives on several streams.
 */
mcclResult_t mcclSend(const void* sendbuff, size_t count, mcclDataType_t datatype, int peer, mcclComm_t comm,
                      cudaStream_t stream);

/**
 * @brief Receive count elements from any peer (NCCL's ncclRecv), the counterpart of its mcclSend.
 * @param[out] recvbuff  device output, count elements.
 * @param[in]  count     elements.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  peer      the sending rank (this rank: a copy).
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as mcclSend.
 */
mcclResult_t mcclRecv(void* recvbuff, size_t count, mcclDataType_t datatype, int peer, mcclComm_t comm,
                      cudaStream_t stream);

/**
 * @brief AlltoAll (NCCL 2.28's ncclAlltoAll): count elements at sendbuff + p * count go to rank p, and
 * those at recvbuff + p * count come from rank p. Enqueued as a send and a receive per rank, as NCCL.
 * @param[in]  sendbuff  device input, nranks * count elements.
 * @param[out] recvbuff  device output, nranks * count elements; must not overlap sendbuff partly. Equal
 *                       buffers are taken, as NCCL takes them, but each block is then sent while the
 *                       block from the same peer lands on it: the result is not defined (one rank: a no-op).
 * @param[in]  count     elements per rank pair.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as mcclSend.
 */
mcclResult_t mcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, mcclComm_t comm,
                          cudaStream_t stream);

/**
 * @brief Gather (NCCL 2.28's ncclGather): each rank's count elements go to the root, rank r's at
 * recvbuff + r * count. In place on the root when sendbuff is recvbuff + root * count.
 * @param[in]  sendbuff  device input, count elements.
 * @param[out] recvbuff  on the root: device output, nranks * count elements (unused elsewhere).
 * @param[in]  count     elements per rank.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  root      the receiving rank.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as mcclSend.
 */
mcclResult_t mcclGather(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, int root,
                        mcclComm_t comm, cudaStream_t stream);

/**
 * @brief Scatter (NCCL 2.28's ncclScatter): the root's count elements at sendbuff + r * count go to rank
 * r's recvbuff. In place on the root when recvbuff is sendbuff + root * count.
 * @param[in]  sendbuff  on the root: device input, nranks * count elements (unused elsewhere).
 * @param[out] recvbuff  device output, count elements.
 * @param[in]  count     elements per rank.
 * @param[in]  datatype  mcclDataType_t.
 * @param[in]  root      the sending rank.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    a stream of the communicator's device.
 * @return as mcclSend.
 */
mcclResult_t mcclScatter(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, int root,
                         mcclComm_t comm, cudaStream_t stream);

/** @} */

/**
 * @brief Create a PreMulSum operation (NCCL's ncclRedOpCreatePreMulSum): each rank's input is multiplied
 * by `scalar`, then the products are summed. The operation belongs to comm and to datatype.
 * @param[out] op         the operation (from mcclNumOps up); written only on success.
 * @param[in]  scalar     one element of datatype: host memory (mcclScalarHostImmediate, read now) or device
 *                        memory (mcclScalarDevice, read by each kernel that uses the operation).
 * @param[in]  datatype   mcclDataType_t of the calls that use it.
 * @param[in]  residence  mcclScalarHostImmediate or mcclScalarDevice.
 * @param[in]  comm       the communicator.
 * @return mcclSuccess; mcclInvalidArgument (NULL op or scalar, dead comm, datatype or residence out of range);
 *         mcclInvalidUsage (a comm whose grouped creation has not run yet, or that failed).
 */
mcclResult_t mcclRedOpCreatePreMulSum(mcclRedOp_t* op, void* scalar, mcclDataType_t datatype,
                                      mcclScalarResidence_t residence, mcclComm_t comm);

/**
 * @brief Destroy an operation from mcclRedOpCreatePreMulSum (NCCL's ncclRedOpDestroy); calls already made
 * with it are unaffected.
 * @param[in] op    the operation.
 * @param[in] comm  the communicator that created it.
 * @return mcclSuccess; mcclInvalidArgument (a built-in operation, one comm did not create or already
 *         destroyed, a dead comm); mcclInvalidUsage (a comm whose grouped creation has not run yet, or that
 *         failed).
 */
mcclResult_t mcclRedOpDestroy(mcclRedOp_t op, mcclComm_t comm);

/**
 * @brief Start a group (NCCL's ncclGroupStart): until the matching mcclGroupEnd, mcclCommInitRank,
 * mcclCommWindowRegister and the collectives and point-to-point calls of this thread only check their
 * arguments and record the call. Groups nest; only the outermost mcclGroupEnd runs them. As in NCCL, a
 * communicator created in a group is used by collective calls only after the group ends.
 * @return mcclSuccess.
 */
mcclResult_t mcclGroupStart(void);

/**
 * @brief End a group (NCCL's ncclGroupEnd): at the outermost one, create the recorded communicators
 * together (one thread each), register the recorded windows together, then run every communicator's
 * tasks: point-to-point peers connected (a thread per communicator when several connect, as the ranks
 * wait for each other), then the plans launched, a communicator's tasks sharing launches where they fit.
 * Returns when all are launched, not finished.
 * @return mcclSuccess; mcclInvalidUsage (no group started in this thread; a communicator destroyed while
 *         this group held its calls); the error of a call that failed its checks in the group (nothing
 *         ran); else the first error of a recorded call or communicator (the others still ran; a failed
 *         communicator reports it through mcclCommGetAsyncError and must be destroyed).
 */
mcclResult_t mcclGroupEnd(void);

/** @brief What mcclGroupSimulateEnd fills (NCCL's ncclSimInfo_t, the same layout). */
typedef struct {
  size_t size;          /**< sizeof(mcclSimInfo_t) (MCCL_SIM_INFO_INITIALIZER sets it) */
  unsigned int magic;   /**< MCCL_SIM_INFO_MAGIC (MCCL_SIM_INFO_INITIALIZER sets it) */
  unsigned int version; /**< the header's version code */
  float estimatedTime;  /**< out: microseconds the group's calls would take, by lab 07's tuning model */
} mcclSimInfo_t;
/** @brief mcclSimInfo_t's magic (NCCL's). */
#define MCCL_SIM_INFO_MAGIC 0x74685283
/** @brief Initialise an mcclSimInfo_t before mcclGroupSimulateEnd (NCCL's NCCL_SIM_INFO_INITIALIZER). */
#define MCCL_SIM_INFO_INITIALIZER \
  { sizeof(mcclSimInfo_t), MCCL_SIM_INFO_MAGIC, MCCL_VERSION_CODE, -1.0f }

/**
 * @brief End a group without running its collective and point-to-point calls (NCCL's
 * ncclGroupSimulateEnd): they are planned as mcclGroupEnd would plan them and dropped; grouped
 * communicator creations and window registrations still run.
 * @param[in,out] simInfo  initialised with MCCL_SIM_INFO_INITIALIZER; estimatedTime is set.
 * @return mcclSuccess; mcclInvalidArgument (NULL simInfo, a wrong size or magic: the group then ends as
 *         one whose call failed); as mcclGroupEnd.
 */
mcclResult_t mcclGroupSimulateEnd(mcclSimInfo_t* simInfo);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
