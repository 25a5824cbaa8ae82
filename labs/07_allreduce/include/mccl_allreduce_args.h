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
  MCCL_ALGO_ONESHOT = 1, /**< every rank pushes its input into every peer's signal area; each reduces all: LL lines
                              (any rank count), or on 2 ranks with SIMPLE the bytes themselves and a flag a block */
  MCCL_ALGO_TWOSHOT = 2, /**< reduce-scatter by loads, all-gather by stores, on the registered windows */
  MCCL_NUM_ALGOS = 3     /**< number of algorithms */
};

/** @brief Most ranks a lab communicator has. */
#define MCCL_LAB_MAX_RANKS 64
/** @brief Most ranks the symmetric algorithms serve (the size of their per-peer arrays); more use the ring. */
#define MCCL_SYM_MAX_RANKS 8
/** @brief Channels of a communicator whose ranks span several hosts when neither the caller nor
 *  MCCL_NCHANNELS names a count (lab 08's NET edges: a proxy op and network requests per channel). */
#define MCCL_LAB_MULTIHOST_NCHANNELS 2
/** @brief Most blocks (channels) of an allreduce launch. */
#define MCCL_SIGNAL_MAX_BLOCKS 64
/** @brief Most threads per block of an allreduce launch, the kernels' launch bound. NCCL bounds its
 *  kernels at 640 threads (NCCL_MAX_NTHREADS), which leaves each thread 96 registers; at 1024 the
 *  compiler has 64 and spills in the copy loops. */
#define MCCL_AR_MAX_THREADS 640
/** @brief Bytes of input one-shot handles: a rank's signal area holds, per parity and per source
 *  rank, this many data bytes as LL lines (16 bytes per 8). */
#define MCCL_ONESHOT_MAX_BYTES (256 * 1024)
/** @brief Bytes of input one-shot with SIMPLE handles (2 ranks only): a rank's signal area holds, per
 *  parity, this many bytes of its peer's input (the bytes themselves, no flag in them). */
#define MCCL_ONESHOT_SIMPLE_MAX_BYTES (4 * 1024 * 1024)

/**
 * @brief The barrier slots at the start of a rank's signal area. Slot [b][r] of rank R's area is
 * written only by rank r's block b (with the call's sequence number) and read by R's block b; a
 * sequence number only grows, so slots are never reset. Two-shot: `arrive` (the source's input is
 * ready), `depart` (the source is done with this rank's buffers). One-shot with SIMPLE: `pushed`
 * (the source's block b has stored its part of the input in this rank's scratch).
 */
struct mcclSymSignals {
  uint64_t arrive[MCCL_SIGNAL_MAX_BLOCKS][MCCL_SYM_MAX_RANKS]; /**< two-shot: start barrier */
  uint64_t depart[MCCL_SIGNAL_MAX_BLOCKS][MCCL_SYM_MAX_RANKS]; /**< two-shot: end barrier */
  uint64_t pushed[MCCL_SIGNAL_MAX_BLOCKS][MCCL_SYM_MAX_RANKS]; /**< one-shot (SIMPLE): the source's data is here */
};
/** @brief Lines of one (parity, source rank) one-shot region. */
#define MCCL_ONESHOT_LINES (MCCL_ONESHOT_MAX_BYTES / 8)
/** @brief Bytes at the start of a rank's signal area that must read 0 before the first call: struct
 *  mcclSymSignals, then the one-shot LL lines [parity 2][source rank MCCL_SYM_MAX_RANKS][MCCL_ONESHOT_LINES]
 *  of 16 bytes (a line whose flag is 0 was never written). */
#define MCCL_SIGNAL_ZEROED_BYTES \
  (sizeof(struct mcclSymSignals) + (size_t)2 * MCCL_SYM_MAX_RANKS * MCCL_ONESHOT_LINES * 16)
/** @brief Bytes of a rank's signal area: the zeroed part, then one-shot SIMPLE's scratch [parity 2]
 *  [MCCL_ONESHOT_SIMPLE_MAX_BYTES] (read only after its `pushed` slot says it was written). */
#define MCCL_SIGNAL_BYTES (MCCL_SIGNAL_ZEROED_BYTES + (size_t)2 * MCCL_ONESHOT_SIMPLE_MAX_BYTES)

/**
 * @brief One allreduce launch (the host side fills it in mcclLabAllReduce; the launch copies it by
 * value into the kernel's argument). Device pointers are valid on the communicator's device.
 */
struct mcclAllReduceArgs {
  int algorithm;        /**< enum mcclAlgo */
  int proto;            /**< MCCL_PROTO_SIMPLE or MCCL_PROTO_LL (ring, one-shot) */
  int nChannels;        /**< blocks: ring channels, or symmetric blocks (<= MCCL_SIGNAL_MAX_BLOCKS) */
  int rank;             /**< this rank */
  int nRanks;           /**< ranks */
  int ringIndex;        /**< this rank's position in the ring (userRanks[ringIndex] == rank) */
  int dtype;            /**< mcclDataType_t (lab 06) */
  int op;               /**< mcclRedOp_t (lab 06) */
  size_t count;         /**< elements per rank */
  const void* sendbuff; /**< input (device) */
  void* recvbuff;       /**< output (device); == sendbuff in place */
  uint64_t redOpArg;    /**< avg's divisor: nRanks (NCCL's redOpArg); 1 otherwise */
  /** ring: [nChannels] device array, recvConns[c] receives from the ring's prev on channel c */
  struct mcclConnInfo* recvConns;
  /** ring: [nChannels] device array, sendConns[c] sends to the ring's next on channel c */
  struct mcclConnInfo* sendConns;
  int chunkSteps; /**< SIMPLE: FIFO slots per chunk (0: lab 06's default) */
  int sliceSteps; /**< SIMPLE: slots per slice (0: lab 06's default) */
  int trace;      /**< 1: the ring's role threads narrate their waits and posts (MCCL_KERNEL_TRACE) */
  int pad_;       /**< keeps the layout the same on every compiler */
  /** symmetric: [nRanks] device array, each rank's sendbuff window mapped here (sendPeers[rank] is the local one) */
  char* const* sendPeers;
  size_t sendOffset; /**< byte offset of sendbuff in its window (the same on every rank) */
  /** symmetric: [nRanks] device array, each rank's recvbuff window mapped here */
  char* const* recvPeers;
  size_t recvOffset; /**< byte offset of recvbuff in its window */
  /** symmetric: each rank's signal area (MCCL_SIGNAL_BYTES) as mapped here, by value (entries past
   *  nRanks unused): one-shot reads them from its parameter, with no device-memory load before its
   *  first store to a peer */
  char* signalPeers[MCCL_SYM_MAX_RANKS];
  /** symmetric: [MCCL_SIGNAL_MAX_BLOCKS] device counters of the symmetric calls made so far. The
   *  kernel keeps them (a CUDA graph replays the same arguments, so the host cannot pass the call's
   *  number); every rank makes the same calls, so every rank's counters agree. */
  uint64_t* seqCounters;
  volatile uint32_t* abortFlag; /**< device view of the communicator's host-mapped abort flag */
  int* status;                  /**< device view of a host-mapped enum mcclDevStatus, or NULL */
};

/** @} */

#endif
