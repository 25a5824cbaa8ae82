/**
 * @file mccl_ce.h
 * @brief Lab 10: collectives on the copy engines, with no kernel (NCCL 2.28.9 src/ce_coll.cc): batches of
 * copies between symmetric windows, the ranks synchronised by the streams themselves with memory operations
 * on flags in each other's signal areas.
 * @ingroup lab10
 */
#ifndef MCCL_CE_H_
#define MCCL_CE_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "mccl_collectives.h"
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab10 Lab 10: copy engines
 * @brief AllGather, AlltoAll, Gather, Scatter and Broadcast that use no SM (NCCL 2.28.9 src/ce_coll.cc,
 * NCCL_CTA_POLICY_ZERO): each rank's copy engines push its bytes into the peers' windows with
 * cudaMemcpyBatchAsync (one cudaMemcpyAsync per copy inside a CUDA graph capture, or where the driver has no
 * batch copies), between two synchronisations that the streams run by themselves: each writes a value into a
 * flag of every peer's signal area and waits until every peer has written its flag here (ncclMemOpSync).
 *
 * The functions below run one collective directly. Through lab 07's calls, a communicator runs them when it
 * has the copy-engine collectives and CTA policy ZERO, and the call's recvbuff is in a window:
 * @code
 * comm->ceColl.ops = &mcclCeOps;              // what final/ does for every communicator it creates
 * comm->ctaPolicy = MCCL_CTA_POLICY_ZERO;     // NCCL's config.CTAPolicy (MCCL_CTA_POLICY overrides)
 * MCCLCHECK(mcclLabWindowRegister(comm, buf, bytes, &win));   // collective
 * MCCLCHECK(mcclLabAllGather(in, buf, count, mcclFloat32, comm, stream));  // no kernel: syncs and copies
 * cudaStreamSynchronize(stream);
 * @endcode
 * @{
 */

/** @brief The most copies one collective queues: one per rank (AlltoAll: to every rank, itself included). */
#define MCCL_CE_MAX_COPIES MCCL_SYM_MAX_RANKS

/** @brief Eager synchronisations write values from here up, so that no flag an eager call left can equal the
 *  constant a CUDA graph's replays write (NCCL's GRAPH_SYNC_VALUE, here 1). */
#define MCCL_CE_FIRST_SEQ 2u

/** @brief A batch of copies, queued as one cudaMemcpyBatchAsync (NCCL's ncclCeBatchOpsParams). */
struct mcclCeBatch {
  void* dsts[MCCL_CE_MAX_COPIES];       /**< destinations: this rank's memory or a peer's window as mapped here */
  const void* srcs[MCCL_CE_MAX_COPIES]; /**< sources */
  size_t sizes[MCCL_CE_MAX_COPIES];     /**< bytes of each copy */
  uint8_t local[MCCL_CE_MAX_COPIES];    /**< 1: the copy stays in this rank's memory (its own block) */
  size_t n;                             /**< copies */
};

/**
 * @brief The communicator's side streams and events, made at first use on the communicator's device: the
 * stream the collectives' own-block copies run on, and the assisted allreduce's streams.
 * @param[in,out] comm  the communicator (comm->ceColl's streams and events).
 * @return mcclSuccess; mcclUnhandledCudaError.
 */
mcclResult_t mcclCeSideStreams(mcclLabComm* comm);

/**
 * @brief Synchronise the ranks from the stream, with no kernel and no host wait (NCCL's ncclMemOpSync with
 * ncclPrepUCSync). One cuStreamBatchMemOp: write the next sequence value into this rank's flag in every peer's
 * signal area (the write is ordered after the stream's earlier work, copies included), then wait until every
 * peer's flag in this rank's area holds that value or a later one (a cyclic comparison). Consecutive syncs
 * alternate between two flag arrays (ceReady, ceComplete), so a peer already one sync ahead writes the other
 * array and the value waited for is never overwritten. Inside a CUDA graph capture the value is the constant 1,
 * waited for by equality, and this rank's flags are reset to 0 after the wait, so every replay starts from the
 * same state. Every rank must make the same syncs.
 * @param[in] comm    a communicator with a signal area (comm->signalWin).
 * @param[in] stream  where the operations are queued (the NULL stream too).
 * @return mcclSuccess; mcclInvalidUsage (no signal area); mcclUnhandledCudaError.
 */
mcclResult_t mcclCeMemOpSync(mcclLabComm* comm, cudaStream_t stream);

/**
 * @brief After an abort, release every wait of this rank's eager syncs: the last value they wait for is
 * written into every peer's slot of both flag arrays, from a stream of its own (a stream's waits cannot read the
 * abort flag as kernels do). The streams then run on; what the interrupted collectives leave in the buffers is
 * undefined. Waits captured into a CUDA graph are not released. Lab 07's mcclLabCommWaitLaunches calls it
 * (through mcclCeOps) on an aborted communicator, so destroy never waits for a peer that will not come.
 * @param[in] comm  the communicator.
 */
void mcclCeRelease(mcclLabComm* comm);

/**
 * @brief Queue a batch of copies (NCCL's ncclCeLaunchBatchOps): one cudaMemcpyBatchAsync with the source read
 * in stream order and the hint to overlap with compute; one cudaMemcpyAsync per copy instead inside a CUDA
 * graph capture (batches cannot be captured), on the legacy NULL stream (which batches refuse), where the
 * driver or the runtime is older than 12.8, or with MCCL_CE_BATCH=0.
 * @param[in] comm    the communicator (for the log).
 * @param[in] batch   the copies; an empty batch queues nothing.
 * @param[in] stream  the stream.
 * @return mcclSuccess; mcclUnhandledCudaError.
 */
mcclResult_t mcclCeLaunchBatch(mcclLabComm* comm, const struct mcclCeBatch* batch, cudaStream_t stream);

/**
 * @name The collectives (NCCL's ncclCeAllGather, ncclCeAlltoAll, ncclCeGather, ncclCeScatter)
 * Each is a sync (every peer's stream has reached the call: its recvbuff may be written), one batch of this
 * rank's copies, and a sync (every peer's copies into this rank have landed). Every copy is a push: its source
 * is this rank's memory, its destination this rank's own buffer or a peer's window. A copy within this rank's
 * own memory waits for no sync: outside a graph capture it runs on the communicator's side stream beside the
 * batch, where another copy engine can move it while the batch's copies cross the link. Every rank passes its
 * recvbuff at the same offset of its window (a symmetric call); args->recvWin is that window. In-place forms are
 * NCCL's: nothing is copied onto itself. The arguments are the enqueue layer's (checked there). Each returns
 * mcclSuccess; mcclInvalidUsage (a destination outside its window, more than MCCL_CE_MAX_COPIES ranks, no signal
 * area); mcclUnhandledCudaError.
 * @{
 */
/**
 * @brief AllGather: this rank's sendBuff to block `rank` of every rank's recvBuff, its own included.
 * @param[in] comm    the communicator, with a signal area.
 * @param[in] args    the collective.
 * @param[in] stream  where it is queued.
 * @return mcclSuccess; mcclInvalidUsage; mcclUnhandledCudaError (above).
 */
mcclResult_t mcclCeAllGather(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream);
/**
 * @brief AlltoAll: block p of this rank's sendBuff to block `rank` of rank p's recvBuff.
 * @param[in] comm    the communicator, with a signal area.
 * @param[in] args    the collective.
 * @param[in] stream  where it is queued.
 * @return mcclSuccess; mcclInvalidUsage; mcclUnhandledCudaError (above).
 */
mcclResult_t mcclCeAlltoAll(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream);
/**
 * @brief Gather: this rank's sendBuff to block `rank` of the root's recvBuff (non-roots pass their recvBuff too:
 *  its offset in the window names the root's).
 * @param[in] comm    the communicator, with a signal area.
 * @param[in] args    the collective.
 * @param[in] stream  where it is queued.
 * @return mcclSuccess; mcclInvalidUsage; mcclUnhandledCudaError (above).
 */
mcclResult_t mcclCeGather(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream);
/**
 * @brief Scatter: block p of the root's sendBuff to rank p's recvBuff. In place on the root (recvBuff is its
 *  block of sendBuff), every rank's recvBuff is taken to be its own block of a sendBuff at the root's offset.
 * @param[in] comm    the communicator, with a signal area.
 * @param[in] args    the collective.
 * @param[in] stream  where it is queued.
 * @return mcclSuccess; mcclInvalidUsage; mcclUnhandledCudaError (above).
 */
mcclResult_t mcclCeScatter(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream);
/**
 * @brief Broadcast: the root's sendBuff to every rank's recvBuff (NCCL 2.28 has no copy-engine Broadcast: it is
 *  Scatter with the same block for every rank).
 * @param[in] comm    the communicator, with a signal area.
 * @param[in] args    the collective.
 * @param[in] stream  where it is queued.
 * @return mcclSuccess; mcclInvalidUsage; mcclUnhandledCudaError (above).
 */
mcclResult_t mcclCeBroadcast(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream);
/** @} */

/**
 * @brief AllReduce with the copy engines carrying the bytes and a small kernel adding them: this lab's own
 * design, not NCCL's (src/ce_allreduce.c). Two-shot's shape in rounds of nRanks chunks, chunk p of a round
 * owned by rank p: the engines (on two streams of the communicator, the reduce-scatter's and the all-gather's,
 * forked from `stream` and joined back) put every rank's chunk p into rank p's output at the sender's own chunk
 * position, with a flag per chunk; a kernel of a block per 4 SMs (at most MCCL_CE_AR_MAX_BLOCKS) on `stream`
 * waits for each round's flags, reduces the chunks with the rank's own input into its chunk position and
 * signals it; the engines then carry the reduced chunk to every peer's same position, once that peer's kernel
 * has read what was there. Chunks are MCCL_CE_AR_CHUNK bytes (by default a quarter of each rank's share: four
 * rounds); the last round's are shorter; fewer than nRanks elements at the end are reduced by the kernel from
 * every rank's input through the send window. Lab 07 runs it for MCCL_ALGO=ce, or where its tuning table says.
 * @param[in] comm    the communicator, with a signal area.
 * @param[in] args    func AllReduce: sendBuff and recvBuff in windows (sendWin, recvWin), apart, at least 16
 *                    bytes per rank; dtype, redOp (enum mcclDevRedOp) and an immediate redOpArg.
 * @param[in] stream  the caller's stream.
 * @return mcclSuccess; mcclInvalidUsage (a requirement above not met); mcclUnhandledCudaError.
 */
mcclResult_t mcclCeAllReduce(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream);

/**
 * @brief Run one collective on the copy engines by its function (NCCL's ncclLaunchCeColl).
 * @param[in] comm    the communicator.
 * @param[in] args    args->func: AllGather, AlltoAll, Gather, Scatter, Broadcast or AllReduce.
 * @param[in] stream  where it is queued.
 * @return as the collectives; mcclInvalidUsage for another function.
 */
mcclResult_t mcclLaunchCeColl(mcclLabComm* comm, const struct mcclLabCeCollArgs* args, cudaStream_t stream);

/**
 * @brief Whether the copy engines serve a function (NCCL's ncclCeImplemented): AllGather, AlltoAll, Gather,
 * Scatter and Broadcast with no kernel, and AllReduce with a small one, any type, on a driver from CUDA 12.5
 * (stream memory operations without flags to set).
 * @param[in] func   enum mcclFunc.
 * @param[in] dtype  mcclDataType_t (they move bytes: every type).
 * @return 1 or 0.
 */
int mcclCeImplemented(int func, int dtype);

/** @brief The copy-engine collectives as lab 07's enqueue layer takes them (comm->ceColl.ops). */
extern const struct mcclLabCeOps mcclCeOps;

/** @} */

#ifdef __cplusplus
}
#endif
#endif
