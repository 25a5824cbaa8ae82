/**
 * @file mccl_dev_work.h
 * @brief Lab 07: what a kernel launch carries (NCCL 2.28.9 src/include/device.h): the work items of a
 * plan, collective (struct mcclDevWorkColl, NCCL's ncclDevWorkColl) and point-to-point (struct
 * mcclDevWorkP2p, NCCL's ncclDevWorkP2p), the launch's argument that holds them (struct
 * mcclDevKernelArgs, NCCL's ncclDevKernelArgs with its works in the argument space), the communicator's
 * device half (struct mcclKernelComm, NCCL's ncclKernelComm with its channels), and the layout of the
 * symmetric kernels' signal area. A header that compiles as C11 (the planner fills it), C++ (the sim's
 * kernels) and CUDA (nvcc).
 * @ingroup lab07
 */
#ifndef MCCL_DEV_WORK_H_
#define MCCL_DEV_WORK_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_conn.h"

/** @addtogroup lab07
 * @{ */

/** @brief The functions a task can be (values of NCCL's ncclFunc_t). AlltoAll, Gather and Scatter become
 *  Send and Recv tasks when they are enqueued, as in NCCL; a plan's works are collectives (Broadcast ..
 *  AllReduce) or point-to-point (SendRecv). */
enum mcclFunc {
  mcclFuncBroadcast = 0,     /**< the root's buffer to every rank */
  mcclFuncReduce = 1,        /**< every rank's buffer reduced on the root */
  mcclFuncAllGather = 2,     /**< every rank's buffer to every rank, side by side */
  mcclFuncReduceScatter = 3, /**< block r of every rank's buffer reduced on rank r */
  mcclFuncAllReduce = 4,     /**< every rank's buffer reduced on every rank */
  mcclFuncSendRecv = 5,      /**< a point-to-point work (a round's send and receive) */
  mcclFuncSend = 6,          /**< a task: bytes to one peer */
  mcclFuncRecv = 7,          /**< a task: bytes from one peer */
  mcclFuncAlltoAll = 8,      /**< block p of every rank's buffer to rank p */
  mcclFuncScatter = 9,       /**< block p of the root's buffer to rank p */
  mcclFuncGather = 10,       /**< every rank's buffer to the root, side by side */
  mcclNumFuncs = 11          /**< number of functions */
};

/** @brief Algorithms (NCCL's NCCL_ALGO_RING and its symmetric kernels). */
enum mcclAlgo {
  MCCL_ALGO_RING = 0,    /**< ring over the channels' connections (runRing) */
  MCCL_ALGO_ONESHOT = 1, /**< AllReduce: every rank pushes its input into every peer's signal area; each reduces all:
                              LL lines (any rank count), or on 2 ranks with SIMPLE the bytes themselves */
  MCCL_ALGO_TWOSHOT = 2, /**< AllReduce: reduce-scatter by loads, all-gather by stores, on the registered windows */
  MCCL_ALGO_CE = 3,      /**< no kernel: the copy engines move the bytes between windows, the streams synchronise the
                              ranks with memory operations (lab 10; NCCL's CTA policy ZERO, src/ce_coll.cc) */
  MCCL_NUM_ALGOS = 4     /**< number of algorithms */
};

/** @brief Most ranks a lab communicator has. */
#define MCCL_LAB_MAX_RANKS 64
/** @brief Most ranks the symmetric algorithms serve (the size of their per-peer arrays); more use the ring. */
#define MCCL_SYM_MAX_RANKS 8
/** @brief Channels of a communicator whose ranks span several hosts when neither the caller nor
 *  MCCL_NCHANNELS names a count (lab 08's NET edges: a proxy op and network requests per channel). */
#define MCCL_LAB_MULTIHOST_NCHANNELS 2
/** @brief Most blocks (channels) of a launch. */
#define MCCL_SIGNAL_MAX_BLOCKS 64
/** @brief Most threads per block of a launch, the kernels' launch bound. NCCL bounds its kernels at 640
 *  threads (NCCL_MAX_NTHREADS), which leaves each thread 96 registers; at 1024 the compiler has 64 and
 *  spills in the copy loops. */
#define MCCL_AR_MAX_THREADS 640
/** @brief Bytes of input one one-shot launch handles with LL: a rank's signal area holds, per parity and
 *  per source rank, this many data bytes as LL lines (16 bytes per 8); a group's one-shot works share it. */
#define MCCL_ONESHOT_MAX_BYTES (256 * 1024)
/** @brief Bytes of input one one-shot launch handles with SIMPLE (2 ranks only): a rank's signal area
 *  holds, per parity, this many bytes of its peer's input (the bytes themselves, no flag in them). */
#define MCCL_ONESHOT_SIMPLE_MAX_BYTES (4 * 1024 * 1024)

/** @brief Flags of lab 10's copy-engine-assisted allreduce: rounds in flight per flag array (a round's flag is
 *  slot round % MCCL_CE_AR_SLOTS; values only grow, so a slot is reused without a reset). */
#define MCCL_CE_AR_SLOTS 8
/** @brief Blocks of the assisted allreduce's reduce kernel at most (each tells block 0 it has reduced its part of a
 *  round through a flag of its own, so the flags have room for this many). */
#define MCCL_CE_AR_MAX_BLOCKS 32

/**
 * @brief The barrier slots at the start of a rank's signal area. Slot [b][r] of rank R's area is
 * written only by rank r's block b (with the call's sequence number) and read by R's block b; a
 * sequence number only grows, so slots are never reset. Two-shot: `arrive` (the source's input is
 * ready), `depart` (the source is done with this rank's buffers). One-shot with SIMPLE: `pushed`
 * (the source's block b has stored its part of the input in this rank's scratch). The copy-engine
 * collectives (lab 10) synchronise through `ceReady` and `ceComplete` in turn: slot r is written by rank r's
 * stream (a stream memory operation), waited on by this rank's (NCCL's ncclCeColl ready/complete arrays).
 */
struct mcclSymSignals {
  uint64_t arrive[MCCL_SIGNAL_MAX_BLOCKS][MCCL_SYM_MAX_RANKS]; /**< two-shot: start barrier */
  uint64_t depart[MCCL_SIGNAL_MAX_BLOCKS][MCCL_SYM_MAX_RANKS]; /**< two-shot: end barrier */
  uint64_t pushed[MCCL_SIGNAL_MAX_BLOCKS][MCCL_SYM_MAX_RANKS]; /**< one-shot (SIMPLE): the source's data is here */
  uint32_t ceReady[MCCL_SYM_MAX_RANKS];    /**< copy engines: the odd syncs' flags, one per source rank */
  uint32_t ceComplete[MCCL_SYM_MAX_RANKS]; /**< copy engines: the even syncs' flags, one per source rank */
  /** assisted allreduce: [source][slot], the source's stream wrote its chunk of the round into this rank's output */
  uint64_t ceArArrived[MCCL_SYM_MAX_RANKS][MCCL_CE_AR_SLOTS];
  /** assisted allreduce: [consumer][slot], the consumer's kernel (its block 0, for all blocks) has read this rank's
   *  chunk */
  uint64_t ceArConsumed[MCCL_SYM_MAX_RANKS][MCCL_CE_AR_SLOTS];
  /** assisted allreduce: [block][slot], this rank's kernel block has reduced its part of the round; [0][slot], set by
   *  block 0 once every block has, is the whole round's, which the all-gather stream waits on */
  uint64_t ceArReduced[MCCL_CE_AR_MAX_BLOCKS][MCCL_CE_AR_SLOTS];
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
 * @brief One collective of a launch (NCCL's ncclDevWorkColl). In the generic kernel a work runs on
 * channels [channelLo, channelLo + nChannels) of its own, so a launch's works run side by side, each
 * block running at most one (as NCCL's channels); the one-shot kernels cut the concatenation of their
 * works over their blocks. Device pointers.
 */
struct mcclDevWorkColl {
  uint8_t func;          /**< enum mcclFunc: Broadcast .. AllReduce */
  uint8_t algorithm;     /**< enum mcclAlgo */
  uint8_t protocol;      /**< MCCL_PROTO_SIMPLE or MCCL_PROTO_LL (the ring, one-shot) */
  uint8_t redOp;         /**< enum mcclDevRedOp (lab 06) */
  uint8_t redOpArgIsPtr; /**< 1: redOpArg is the device address of the PreMulSum scalar (mcclScalarDevice) */
  uint8_t nWarps;        /**< the block's threads that run it, / 32 (the launch has the most of its works') */
  uint8_t channelLo;     /**< the generic kernel: the first channel (block) that runs it (NCCL's channelLo) */
  uint8_t nChannels;     /**< the generic kernel: how many channels run it, from channelLo (the works of a launch
                              run side by side on channels of their own) */
  int32_t root;          /**< Broadcast, Reduce: the root's rank */
  uint32_t firstLine; /**< one-shot: where the work starts in the launch's scratch (LL lines; SIMPLE: 16-byte packs) */
  uint32_t seqOffset; /**< two-shot: its symmetric call's number within the launch (0, 1, ...) */
  uint32_t pad_;      /**< keeps the layout the same on every compiler */
  uint64_t count;     /**< elements per rank (AllGather: sendcount, ReduceScatter: recvcount); Broadcast and
                           AllGather move bytes: their count is in bytes */
  const void* sendbuff; /**< input */
  void* recvbuff;       /**< output; equal to sendbuff (or the rank's block) in place */
  uint64_t redOpArg;    /**< PreMulSum's scalar bits (or its address), SumPostDiv's divisor */
  /** two-shot: [nRanks] device array, each rank's sendbuff window as mapped here */
  char* const* sendPeers;
  /** two-shot: [nRanks] device array, each rank's recvbuff window as mapped here */
  char* const* recvPeers;
  uint64_t sendOffset; /**< two-shot: sendbuff's byte offset in its window (the same on every rank) */
  uint64_t recvOffset; /**< two-shot: recvbuff's byte offset in its window */
};

/**
 * @brief One point-to-point work (NCCL's ncclDevWorkP2p): a round of the schedule, a send to sendRank and a
 * receive from recvRank, each cut into parts spread over the channels channelBase, channelBase + 1, ...
 * (modulo the point-to-point channels). sendRank == the launch's rank: a copy of sendBytes from sendAddr
 * to recvAddr.
 */
struct mcclDevWorkP2p {
  const void* sendAddr; /**< bytes sent */
  void* recvAddr;       /**< bytes received */
  uint64_t sendBytes;   /**< send size */
  uint64_t recvBytes;   /**< receive size */
  int32_t sendRank;     /**< -1: no send in this round */
  int32_t recvRank;     /**< -1: no receive in this round */
  int32_t nSendParts;   /**< channels the send is cut over (0: no bytes) */
  int32_t nRecvParts;   /**< channels the receive is cut over (0: no bytes) */
  int32_t channelBase;  /**< channel of part 0; a copy to oneself: its first block, after the channels' */
  int32_t llMask;       /**< MCCL_P2P_SEND_LL | MCCL_P2P_RECV_LL: the directions that use LL (else SIMPLE) */
};
/** @brief mcclDevWorkP2p::llMask: the send moves as LL lines (NCCL's addP2pToPlan: protoLL when bytes <=
 *  nChannels * NCCL_P2P_LL_THRESHOLD); both ends decide from the same byte count, so they agree. */
#define MCCL_P2P_SEND_LL 1
/** @brief mcclDevWorkP2p::llMask: the receive moves as LL lines. */
#define MCCL_P2P_RECV_LL 2
/** @brief Parts of a point-to-point direction start at multiples of this (NCCL's ncclP2pPartBounds: 4 KiB). */
#define MCCL_P2P_PART_ALIGN 4096
/** @brief A copy to oneself (AlltoAll's, Gather's or Scatter's own block) runs on blocks of its own, launched after
 *  the channels' blocks, at most this many (and at most the point-to-point channels): it needs no connection,
 *  and beside the transfers to the peers it costs no time of theirs (NCCL runs a batch's works side by side in
 *  a block's warps to the same end). */
#define MCCL_P2P_SELF_MAX_BLOCKS 16
/** @brief Bytes of a copy to oneself per block, below MCCL_P2P_SELF_MAX_BLOCKS blocks. */
#define MCCL_P2P_SELF_BLOCK_BYTES (512 * 1024)

/**
 * @brief The communicator's device half (NCCL's ncclKernelComm and its ncclDevChannel array), in device
 * memory, written once when the communicator is made. A kernel copies it into shared memory.
 */
struct mcclKernelComm {
  int32_t rank;         /**< this rank */
  int32_t nRanks;       /**< ranks */
  int32_t nChannels;    /**< ring channels */
  int32_t nP2pChannels; /**< point-to-point channels: a power of two, at most nChannels */
  int32_t ringIndex;    /**< this rank's position in the ring */
  int32_t pad_;         /**< keeps the layout the same on every compiler */
  /** the ring seen from this rank (NCCL's ncclRing::userRanks): [0] this rank, [1] the next, [nRanks-1] the previous */
  int32_t ringRanks[MCCL_LAB_MAX_RANKS];
  struct mcclConnInfo* ringRecv; /**< [nChannels] device array: channel c receives from the ring's previous rank */
  struct mcclConnInfo* ringSend; /**< [nChannels] device array: channel c sends to the ring's next rank */
  /** per point-to-point channel: its [nRanks] peers' connections (connIndex MCCL_P2P_CONN_INDEX) */
  struct mcclDevChannelPeer* p2pPeers[MCCL_SIGNAL_MAX_BLOCKS];
};

/** @brief Bytes of a kernel's parameter: the header and its works (NCCL's 4 KiB ncclDevKernelArgs4K); a
 *  launch passes only the header and the works it carries. */
#define MCCL_DEV_ARGS_BYTES 4096

/**
 * @brief A launch's argument (NCCL's ncclDevKernelArgs, its works in the argument space), by value: the
 * header, then nColl struct mcclDevWorkColl, then nP2p struct mcclDevWorkP2p, in `works`. In the generic
 * kernel each block runs the collective work whose channels include it, then every point-to-point work
 * in order (blocks of the point-to-point channels). The one-shot kernels read it
 * straight from the parameter (no copy first: their whole cost is latency); the generic kernel copies
 * the header, its works and the communicator's device half into shared memory.
 */
struct mcclDevKernelArgs {
  const struct mcclKernelComm* comm;     /**< device: the communicator's device half */
  volatile uint32_t* abortFlag;          /**< device view of the communicator's host-mapped abort flag */
  uint32_t* status;                      /**< device view of the host-mapped status word (enum mcclDevStatus):
                                              a block that aborted writes mcclDevStatusAborted */
  uint64_t* seqCounters;                 /**< [MCCL_SIGNAL_MAX_BLOCKS] device: the symmetric calls so far */
  char* signalPeers[MCCL_SYM_MAX_RANKS]; /**< every rank's signal area as mapped here (entries past nRanks unused) */
  int32_t rank;                          /**< this rank */
  int32_t nRanks;                        /**< ranks */
  int16_t nColl;                         /**< collective works */
  int16_t nP2p;                          /**< point-to-point works, after them */
  int16_t chunkSteps;                    /**< SIMPLE: FIFO slots per chunk */
  int16_t sliceSteps;                    /**< SIMPLE: slots per slice */
  int32_t trace;                         /**< 1: the role threads narrate their waits and posts (MCCL_KERNEL_TRACE) */
  int32_t nSym;                          /**< the generic kernel: its two-shot works, the symmetric calls it makes */
  uint64_t pad;                          /**< unused: the header is a whole number of 16-byte units */
};

/** @brief The kernels' parameter: the header and room for the works (MCCL_DEV_ARGS_BYTES in all). */
struct mcclDevKernelArgsStorage {
  struct mcclDevKernelArgs args;                                                /**< the header */
  uint64_t works[(MCCL_DEV_ARGS_BYTES - sizeof(struct mcclDevKernelArgs)) / 8]; /**< the works' bytes */
};

/** @} */

#endif
