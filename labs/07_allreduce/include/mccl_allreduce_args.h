/**
 * @file mccl_allreduce_args.h
 * @brief Lab 07: what one allreduce launch needs (struct mcclAllReduceArgs), in a header that
 * compiles as C11 (the host side fills it), C++ (the sim's kernels) and CUDA (nvcc).
 * @ingroup lab07
 */
#ifndef MCCL_ALLREDUCE_ARGS_H_
#define MCCL_ALLREDUCE_ARGS_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_conn.h"

/** @addtogroup lab07
 * @{ */

/** @brief Allreduce algorithms (NCCL's NCCL_ALGO_RING and its symmetric kernels). */
enum mcclAlgo {
  MCCL_ALGO_RING = 0,    /**< ring over the channels' connections (runRing) */
  MCCL_ALGO_ONESHOT = 1, /**< every rank loads every peer's window after a flag barrier, reduces locally */
  MCCL_ALGO_TWOSHOT = 2, /**< reduce-scatter by loads, all-gather by stores, on the windows */
  MCCL_NUM_ALGOS = 3     /**< number of algorithms */
};

/** @brief Most ranks a lab communicator has (sizes the signal area). */
#define MCCL_LAB_MAX_RANKS 64
/** @brief Barriers one symmetric call may use (e.g. two-shot: after reduce-scatter and after all-gather). */
#define MCCL_SIGNAL_PHASES 4
/** @brief Blocks (channels) of a symmetric kernel that each keep their own barrier slots. */
#define MCCL_SIGNAL_MAX_BLOCKS 64
/**
 * @brief Index of a uint64_t slot in a rank's signal area: slot (phase, block, rank) of rank R's area
 * is written only by `rank` (with the call's sequence number) and read by R. A kernel of rank me
 * signals peer p with `signalPeers[p][MCCL_SIGNAL_IDX(ph, b, me)] = seq` and waits for every peer
 * with `signals[MCCL_SIGNAL_IDX(ph, b, p)] >= seq`.
 */
#define MCCL_SIGNAL_IDX(phase, block, rank) \
  (((size_t)(phase) * MCCL_SIGNAL_MAX_BLOCKS + (size_t)(block)) * MCCL_LAB_MAX_RANKS + (size_t)(rank))
/** @brief Bytes of a rank's signal area (every slot of MCCL_SIGNAL_IDX). */
#define MCCL_SIGNAL_BYTES ((size_t)MCCL_SIGNAL_PHASES * MCCL_SIGNAL_MAX_BLOCKS * MCCL_LAB_MAX_RANKS * sizeof(uint64_t))

/**
 * @brief One allreduce launch (the host side fills it in mcclLabAllReduce; the launch copies it by
 * value into the kernel's argument). Device pointers are valid on the communicator's device.
 */
struct mcclAllReduceArgs {
  int algorithm;            /**< enum mcclAlgo */
  int proto;                /**< MCCL_PROTO_SIMPLE or MCCL_PROTO_LL (ring) */
  int nChannels;            /**< blocks: ring channels, or symmetric blocks (<= MCCL_SIGNAL_MAX_BLOCKS) */
  int rank;                 /**< this rank */
  int nRanks;               /**< ranks */
  int ringIndex;            /**< this rank's position in the ring (userRanks[ringIndex] == rank) */
  int dtype;                /**< mcclDataType_t (lab 06) */
  int op;                   /**< mcclRedOp_t (lab 06) */
  size_t count;             /**< elements per rank */
  const void* sendbuff;     /**< input (device) */
  void* recvbuff;           /**< output (device); == sendbuff in place */
  uint64_t redOpArg;        /**< avg's divisor: nRanks (NCCL's redOpArg); 1 otherwise */
  /** ring: [nChannels] device array, recvConns[c] receives from the ring's prev on channel c */
  struct mcclConnInfo* recvConns;
  /** ring: [nChannels] device array, sendConns[c] sends to the ring's next on channel c */
  struct mcclConnInfo* sendConns;
  int chunkSteps;           /**< SIMPLE: FIFO slots per chunk (0: lab 06's default) */
  int sliceSteps;           /**< SIMPLE: slots per slice (0: lab 06's default) */
  /** symmetric: [nRanks] device array, each rank's sendbuff window mapped here (sendPeers[rank] is the local one) */
  char* const* sendPeers;
  size_t sendOffset;        /**< byte offset of sendbuff in its window (the same on every rank) */
  /** symmetric: [nRanks] device array, each rank's recvbuff window mapped here */
  char* const* recvPeers;
  size_t recvOffset;        /**< byte offset of recvbuff in its window */
  /** symmetric: [nRanks] device array, each rank's signal area (MCCL_SIGNAL_BYTES) mapped here */
  uint64_t* const* signalPeers;
  uint64_t* signals;        /**< this rank's own signal area (== signalPeers[rank]) */
  uint64_t seq;             /**< sequence number of this call (>= 1, +1 per symmetric call of the communicator) */
  volatile uint32_t* abortFlag; /**< device view of the communicator's host-mapped abort flag */
  int* status;              /**< device view of a host-mapped enum mcclDevStatus, or NULL */
};

/** @} */

#endif
