/**
 * @file mccl_collectives.h
 * @brief Lab 07: NCCL's other collectives on the lab communicator's ring: Broadcast, Reduce,
 * AllGather, ReduceScatter (NCCL 2.28.9 src/collectives.cc for the calls, src/device/broadcast.h,
 * reduce.h, all_gather.h, reduce_scatter.h runRing for the kernels).
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

/** @brief The ring collectives use LL up to this many bytes of their larger buffer (AllGather's
 *  output, ReduceScatter's input, Broadcast's and Reduce's one), SIMPLE above: the allreduce ring's
 *  cut-over, a placeholder until measured on the GPU host. */
#define MCCL_COLL_LL_MAX_BYTES (256u << 10)

/**
 * @name Ring collectives
 * Each call takes NCCL's arguments in NCCL's order and means what the NCCL call means. Every rank
 * of the communicator makes the same calls in the same order with the same count, dtype, op and
 * root. Arguments are checked before anything is launched; the kernel runs on `stream` over the
 * ring's channels with no host synchronisation. The ring is the only algorithm (MCCL_ALGO is the
 * allreduce's and is not read); the protocol is LL up to MCCL_COLL_LL_MAX_BYTES of the larger
 * buffer, SIMPLE above, and MCCL_PROTO (simple or ll) overrides. A count of 0 launches nothing.
 *
 * @code
 * // 4 ranks, 1000 floats each: every rank ends with all 4000 (rank r's at recvbuff + r * 1000).
 * MCCLCHECK(mcclLabAllGather(sendbuff, recvbuff, 1000, mcclFloat32, comm, stream));
 * // in place: rank r's input is already at recvbuff + r * 1000
 * MCCLCHECK(mcclLabAllGather((float*)recvbuff + comm->rank * 1000, recvbuff, 1000, mcclFloat32, comm, stream));
 * @endcode
 * @{
 */

/**
 * @brief Broadcast (NCCL's ncclBroadcast): count elements of the root's sendbuff into every rank's
 * recvbuff, the root's included.
 * @param[in]  sendbuff  device input, count elements; read on the root only (may be NULL elsewhere).
 * @param[out] recvbuff  device output, count elements; in place when equal to sendbuff.
 * @param[in]  count     elements; count * size of dtype must not overflow.
 * @param[in]  dtype     mcclDataType_t (the kernel moves bytes: every type is the same to it).
 * @param[in]  root      the rank whose data is sent, 0 .. nRanks-1.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return mcclSuccess; mcclInvalidArgument (NULL comm or buffers, unknown dtype, root out of range,
 *         count overflow, buffers that overlap without being equal); mcclInvalidUsage (aborted
 *         communicator); errors of the launch.
 */
mcclResult_t mcclLabBroadcast(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, int root,
                              mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief Reduce (NCCL's ncclReduce): the root's recvbuff[i] = op over ranks of sendbuff[i] (avg:
 * the sum divided by nRanks); other ranks' recvbuff is not written.
 * @param[in]  sendbuff  device input, count elements.
 * @param[out] recvbuff  device output on the root, count elements (may be NULL elsewhere); in place
 *                       when equal to sendbuff.
 * @param[in]  count     elements; count * size of dtype must not overflow.
 * @param[in]  dtype     mcclDataType_t.
 * @param[in]  op        mcclRedOp_t.
 * @param[in]  root      the rank that receives the result, 0 .. nRanks-1.
 * @param[in]  comm      the communicator.
 * @param[in]  stream    the caller's stream.
 * @return as mcclLabBroadcast, and mcclInvalidArgument for an unknown op.
 */
mcclResult_t mcclLabReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, mcclRedOp_t op,
                           int root, mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief AllGather (NCCL's ncclAllGather): every rank's recvbuff holds nRanks blocks of sendcount
 * elements, block r being rank r's sendbuff.
 * @param[in]  sendbuff   device input, sendcount elements. In place when it is recvbuff + rank *
 *                        sendcount elements (the rank's own block); any other overlap is refused.
 * @param[out] recvbuff   device output, nRanks * sendcount elements.
 * @param[in]  sendcount  elements per rank; nRanks * sendcount * size of dtype must not overflow.
 * @param[in]  dtype      mcclDataType_t (the kernel moves bytes).
 * @param[in]  comm       the communicator.
 * @param[in]  stream     the caller's stream.
 * @return mcclSuccess; mcclInvalidArgument (NULL comm or buffers, unknown dtype, count overflow,
 *         overlap other than in place); mcclInvalidUsage (aborted communicator); errors of the launch.
 */
mcclResult_t mcclLabAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mcclDataType_t dtype,
                              mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief ReduceScatter (NCCL's ncclReduceScatter): rank r's recvbuff[i] = op over ranks of block r
 * of their sendbuff, i.e. sendbuff[r * recvcount + i] (avg: the sum divided by nRanks).
 * @param[in]  sendbuff   device input, nRanks * recvcount elements.
 * @param[out] recvbuff   device output, recvcount elements. In place when it is sendbuff + rank *
 *                        recvcount elements (the rank's own block); any other overlap is refused.
 * @param[in]  recvcount  elements per rank; nRanks * recvcount * size of dtype must not overflow.
 * @param[in]  dtype      mcclDataType_t.
 * @param[in]  op         mcclRedOp_t.
 * @param[in]  comm       the communicator.
 * @param[in]  stream     the caller's stream.
 * @return as mcclLabAllGather, and mcclInvalidArgument for an unknown op.
 */
mcclResult_t mcclLabReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mcclDataType_t dtype,
                                  mcclRedOp_t op, mcclLabComm* comm, cudaStream_t stream);

/** @} */
/** @} */

#ifdef __cplusplus
}
#endif
#endif
