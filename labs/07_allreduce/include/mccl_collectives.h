/**
 * @file mccl_collectives.h
 * @brief Lab 07: NCCL 2.28's calls on the lab communicator (src/collectives.cc, src/group.cc,
 * src/enqueue.cc): the collectives, point-to-point, AlltoAll / Gather / Scatter, groups, and the
 * PreMulSum operations. Every call becomes a task (mccl_enqueue.h); a group's tasks become plans of
 * one kernel launch each when the group ends, and a call outside a group is a group of one.
 * @ingroup lab07
 */
#ifndef MCCL_COLLECTIVES_H_
#define MCCL_COLLECTIVES_H_

#include <stddef.h>
#include <cuda_runtime.h>
#include "mccl_allreduce.h"
#include "mccl_prims.h"
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab07
 * @{ */

/**
 * @name Calls
 * Each call takes NCCL's arguments in NCCL's order and means what the NCCL call means. Every rank of the
 * communicator makes the same collective calls in the same order with the same count, type, operation and
 * root (a PreMulSum operation's scalar may differ between ranks). Arguments are checked when the call is
 * made (NCCL's ArgsCheck): a bad one gives mcclInvalidArgument naming it, and nothing is enqueued.
 * Inside a group the call only enqueues; at the group's end (or at once, outside a group) the tasks are
 * launched on their streams with no host synchronisation. A collective of count 0 enqueues nothing.
 *
 * Errors common to every call: mcclInvalidArgument (NULL comm; type or operation out of range; an
 * operation this communicator did not create, or one destroyed; an operation created for another type;
 * a root or peer out of range; count x type size (x ranks for AllGather, ReduceScatter, AlltoAll, Gather,
 * Scatter) past 2^63 bytes; a NULL buffer the rank reads or writes; overlapping buffers other than the
 * call's in-place form); mcclInvalidUsage (an aborted communicator); the errors of the group's end (below).
 *
 * As in NCCL, the calls of one group may run at the same time: none may read what another one writes.
 *
 * With CTA policy ZERO (comm->ctaPolicy) and the copy-engine collectives (comm->ceColl.ops, lab 10), AllGather,
 * AlltoAll, Gather, Scatter and Broadcast whose recvbuff is in a window run on the copy engines, with no kernel;
 * on other buffers they run as below, with an INFO line. MCCL_ALGO=ce runs AllReduce on the copy engines with
 * a small reduce kernel (lab 10's assisted allreduce).
 *
 * @code
 * // eight allreduces in one kernel launch
 * MCCLCHECK(mcclLabGroupStart());
 * for (int i = 0; i < 8; i++) MCCLCHECK(mcclLabAllReduce(in[i], out[i], 2048, mcclFloat32, mcclSum, comm, stream));
 * MCCLCHECK(mcclLabGroupEnd());
 * @endcode
 * @{
 */

/**
 * @brief AllReduce (NCCL's ncclAllReduce): recvbuff[i] = op over ranks of sendbuff[i].
 * @param[in]  sendbuff  device input, count elements (may equal recvbuff).
 * @param[out] recvbuff  device output, count elements.
 * @param[in]  count     elements.
 * @param[in]  dtype     mcclDataType_t.
 * @param[in]  op        mcclRedOp_t, or an operation from mcclLabRedOpCreatePreMulSum.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return as the calls above; also mcclInvalidArgument for MCCL_ALGO forcing a symmetric algorithm the
 *         buffers or size cannot run.
 */
mcclResult_t mcclLabAllReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, mcclRedOp_t op,
                              mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief Broadcast (NCCL's ncclBroadcast): count elements of the root's sendbuff into every rank's
 * recvbuff, the root's included.
 * @param[in]  sendbuff  device input, count elements; read on the root only (may be NULL elsewhere).
 * @param[out] recvbuff  device output, count elements; in place when equal to sendbuff.
 * @param[in]  count     elements.
 * @param[in]  dtype     mcclDataType_t (the kernel moves bytes: every type is the same to it).
 * @param[in]  root      the rank whose data is sent.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return as the calls above.
 */
mcclResult_t mcclLabBroadcast(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, int root,
                              mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief Reduce (NCCL's ncclReduce): the root's recvbuff[i] = op over ranks of sendbuff[i]; other ranks'
 * recvbuff is not written.
 * @param[in]  sendbuff  device input, count elements.
 * @param[out] recvbuff  device output on the root (may be NULL elsewhere); in place when equal to sendbuff.
 * @param[in]  count     elements.
 * @param[in]  dtype     mcclDataType_t.
 * @param[in]  op        mcclRedOp_t, or an operation from mcclLabRedOpCreatePreMulSum.
 * @param[in]  root      the rank that receives the result.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return as the calls above.
 */
mcclResult_t mcclLabReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, mcclRedOp_t op,
                           int root, mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief AllGather (NCCL's ncclAllGather): every rank's recvbuff holds nRanks blocks of sendcount
 * elements, block r being rank r's sendbuff.
 * @param[in]  sendbuff   device input, sendcount elements; in place when it is recvbuff + rank * sendcount.
 * @param[out] recvbuff   device output, nRanks * sendcount elements.
 * @param[in]  sendcount  elements per rank.
 * @param[in]  dtype      mcclDataType_t (the kernel moves bytes).
 * @param[in]  comm       the communicator.
 * @param[in]  stream     the caller's stream.
 * @return as the calls above.
 */
mcclResult_t mcclLabAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mcclDataType_t dtype,
                              mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief ReduceScatter (NCCL's ncclReduceScatter): rank r's recvbuff[i] = op over ranks of block r of
 * their sendbuff, i.e. sendbuff[r * recvcount + i].
 * @param[in]  sendbuff   device input, nRanks * recvcount elements.
 * @param[out] recvbuff   device output, recvcount elements; in place when it is sendbuff + rank * recvcount.
 * @param[in]  recvcount  elements per rank.
 * @param[in]  dtype      mcclDataType_t.
 * @param[in]  op         mcclRedOp_t, or an operation from mcclLabRedOpCreatePreMulSum.
 * @param[in]  comm       the communicator.
 * @param[in]  stream     the caller's stream.
 * @return as the calls above.
 */
mcclResult_t mcclLabReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mcclDataType_t dtype,
                                  mcclRedOp_t op, mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief Send (NCCL's ncclSend): count elements of sendbuff to rank peer, which calls mcclLabRecv with the
 * same count and type. Sends and receives run when their group ends, all of a communicator's in one
 * launch where they fit (NCCL's schedule: round r pairs the send to rank + r with the receive from
 * rank - r). A peer not connected yet is connected then, on every point-to-point channel (lab 06's
 * mcclTransportP2pSetup on connIndex 1): the group's end blocks until the peer's group connects the
 * other end (or MCCL_BOOTSTRAP_TIMEOUT, or the abort flag). A send to this rank needs the receive from
 * this rank of the same size in the same group (a device copy).
 * @param[in] sendbuff  device bytes (may be NULL when count is 0).
 * @param[in] count     elements.
 * @param[in] dtype     mcclDataType_t.
 * @param[in] peer      the receiving rank.
 * @param[in] comm      the communicator.
 * @param[in] stream    the caller's stream; a group's sends and receives of one communicator share one.
 * @return as the calls above; mcclInvalidUsage at the group's end for a send to this rank without its
 *         receive, for sends and receives of one communicator on several streams, or for two ranks with no
 *         transport between them.
 */
mcclResult_t mcclLabSend(const void* sendbuff, size_t count, mcclDataType_t dtype, int peer, mcclLabComm* comm,
                         cudaStream_t stream);

/**
 * @brief Recv (NCCL's ncclRecv): count elements from rank peer into recvbuff. As mcclLabSend.
 * @param[out] recvbuff  device bytes (may be NULL when count is 0).
 * @param[in]  count     elements.
 * @param[in]  dtype     mcclDataType_t.
 * @param[in]  peer      the sending rank.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return as mcclLabSend.
 */
mcclResult_t mcclLabRecv(void* recvbuff, size_t count, mcclDataType_t dtype, int peer, mcclLabComm* comm,
                         cudaStream_t stream);

/**
 * @brief AlltoAll (NCCL 2.28's ncclAlltoAll): block p of sendbuff (count elements at sendbuff + p * count)
 * goes to rank p, and block p of recvbuff comes from rank p. Enqueued as a send and a receive per rank
 * (NCCL's taskAppend), so it runs as point-to-point works in one launch.
 * @param[in]  sendbuff  device input, nRanks * count elements.
 * @param[out] recvbuff  device output, nRanks * count elements; must not overlap sendbuff partly. Equal
 *                       buffers are taken, as NCCL takes them, but each block is then sent while the
 *                       block from the same peer lands on it: the result is not defined (one rank: a no-op).
 * @param[in]  count     elements per rank pair.
 * @param[in]  dtype     mcclDataType_t.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return as mcclLabSend.
 */
mcclResult_t mcclLabAlltoAll(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype,
                             mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief Gather (NCCL 2.28's ncclGather): every rank's count elements to the root, rank r's at recvbuff +
 * r * count. A send to the root on every rank and, on the root, a receive from every rank.
 * @param[in]  sendbuff  device input, count elements; in place on the root when it is recvbuff + root * count.
 * @param[out] recvbuff  on the root: device output, nRanks * count elements (unused elsewhere).
 * @param[in]  count     elements per rank.
 * @param[in]  dtype     mcclDataType_t.
 * @param[in]  root      the receiving rank.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return as mcclLabSend.
 */
mcclResult_t mcclLabGather(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, int root,
                           mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief Scatter (NCCL 2.28's ncclScatter): block r of the root's sendbuff (count elements at sendbuff +
 * r * count) to rank r's recvbuff. On the root a send to every rank; a receive from the root everywhere.
 * @param[in]  sendbuff  on the root: device input, nRanks * count elements (unused elsewhere).
 * @param[out] recvbuff  device output, count elements; in place on the root when it is sendbuff + root * count.
 * @param[in]  count     elements per rank.
 * @param[in]  dtype     mcclDataType_t.
 * @param[in]  root      the sending rank.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return as mcclLabSend.
 */
mcclResult_t mcclLabScatter(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, int root,
                            mcclLabComm* comm, cudaStream_t stream);

/** @} */

/**
 * @name Groups
 * @{
 */

/**
 * @brief Start a group (NCCL's ncclGroupStart) on this thread: the calls that follow only enqueue their
 * tasks, until the matching mcclLabGroupEnd. Groups nest; the outermost end runs them.
 * @return mcclSuccess.
 */
mcclResult_t mcclLabGroupStart(void);

/**
 * @brief End a group (NCCL's ncclGroupEnd). At the outermost end, for every communicator with tasks: its
 * point-to-point peers are connected, its tasks become plans (consecutive tasks share a launch while the
 * kernel, the stream and the launch's room allow: up to MCCL_DEV_ARGS_BYTES of works, one-shot works up
 * to their scratch), and each plan is launched. Communicators of several devices get their device set for
 * their launches; when more than one must connect peers, they connect on a thread each (the ranks wait
 * for each other). A communicator whose tasks fail keeps its error; the others still run.
 * @return mcclSuccess; mcclInvalidUsage (no group open on this thread; a communicator destroyed while this
 *         group held its tasks; see also mcclLabSend); the first error of a communicator's connections
 *         (mcclTimeout, ...) or launches.
 */
mcclResult_t mcclLabGroupEnd(void);

/**
 * @brief Fail this thread's open group (NCCL's ncclGroupErrCheck): a call made inside it failed its
 * checks, so the group's end runs nothing of it and returns `res`. The calls above do it themselves; a
 * layer above calls it for its own checks (final/'s handle checks). Outside a group it does nothing.
 * @param[in] res  the error.
 */
void mcclLabGroupFail(mcclResult_t res);

/**
 * @brief Take a communicator out of whatever thread's open group holds its tasks (a destroy or an abort
 * from any thread does it before freeing): that group's end then runs its other communicators' tasks and
 * returns mcclInvalidUsage. mcclLabCommDestroy calls it too.
 * @param[in] comm  the communicator.
 */
void mcclLabGroupForget(mcclLabComm* comm);

/**
 * @brief End a group without running it (NCCL's ncclGroupSimulateEnd): the tasks are planned as
 * mcclLabGroupEnd would, nothing is connected or launched, and the tasks are dropped.
 * @param[out] estimatedTimeUs  the tuning model's time for the group's tasks, in microseconds:
 *                              mcclLabEstimateTime summed over each communicator's tasks, the longest
 *                              communicator's sum (one thread's communicators run at once).
 * @return mcclSuccess; mcclInvalidArgument (NULL); mcclInvalidUsage (no group open).
 */
mcclResult_t mcclLabGroupSimulateEnd(float* estimatedTimeUs);

/** @} */

/**
 * @name PreMulSum operations
 * @{
 */

/**
 * @brief Create a PreMulSum operation (NCCL's ncclRedOpCreatePreMulSum): each rank multiplies its input
 * by `scalar`, then the products are summed. The operation belongs to this communicator and to `dtype`.
 * @param[out] op         the new operation (a value from mcclNumOps up); written only on success.
 * @param[in]  scalar     one element of dtype: in host memory (mcclScalarHostImmediate: read now) or in
 *                        device memory (mcclScalarDevice: read by every kernel that uses the operation).
 * @param[in]  dtype      mcclDataType_t of the calls that will use it.
 * @param[in]  residence  mcclScalarHostImmediate or mcclScalarDevice.
 * @param[in]  comm       the communicator.
 * @return mcclSuccess; mcclInvalidArgument (NULL op, scalar or comm; type or residence out of range);
 *         mcclSystemError (out of memory).
 */
mcclResult_t mcclLabRedOpCreatePreMulSum(mcclRedOp_t* op, void* scalar, mcclDataType_t dtype,
                                         mcclScalarResidence_t residence, mcclLabComm* comm);

/**
 * @brief Destroy an operation (NCCL's ncclRedOpDestroy). Tasks already enqueued keep what they need.
 * @param[in] op    from mcclLabRedOpCreatePreMulSum on comm.
 * @param[in] comm  the communicator.
 * @return mcclSuccess; mcclInvalidArgument (a built-in operation; one this communicator did not create, or
 *         one destroyed already; NULL comm).
 */
mcclResult_t mcclLabRedOpDestroy(mcclRedOp_t op, mcclLabComm* comm);

/** @} */
/** @} */

#ifdef __cplusplus
}
#endif
#endif
