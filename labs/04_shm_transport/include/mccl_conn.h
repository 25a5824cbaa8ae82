/**
 * @file mccl_conn.h
 * @brief Lab 04: the connection memory both sides of a connection read and write (mcclSendMem /
 * mcclRecvMem with head, tail and connFifo) and the view of one direction of it (mcclConnInfo).
 *
 * Host code (C11), the sim's kernels (host C++) and CUDA kernels (nvcc) all include this header and
 * must agree on every byte of these structs: they live in memory two processes and a GPU share. So
 * it uses only what C11, C++17 and CUDA C++ all accept, and pins the layout with static asserts that
 * every one of those compilers checks (`make test` compiles it in all three languages).
 * @ingroup lab04
 */
#ifndef MCCL_CONN_H_
#define MCCL_CONN_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/** @addtogroup lab04
 * @{ */

/** @brief Slots of a connection's FIFO (NCCL_STEPS). A power of two, so `step % MCCL_STEPS` stays
 *  continuous when the 64-bit step counters wrap. */
#define MCCL_STEPS 8
/** @brief Cache line used to keep counters that different processes write apart (CACHE_LINE_SIZE). */
#define MCCL_CACHE_LINE_SIZE 128
/** @brief Size and alignment of mcclSendMem / mcclRecvMem (MEM_ALIGN): one page each. */
#define MCCL_MEM_ALIGN 4096

/** @brief mcclConnFifo::mode values (NCCL_MODE_*): the slot holds the data itself. */
#define MCCL_MODE_NORMAL 0
/** @brief mcclConnFifo::mode: the data is at mcclConnFifo::offset bytes into the FIFO (lab 06: a P2P sender
 *  that shifts a SIMPLE slice to its user buffer's alignment; NCCL: a NET shared buffer). */
#define MCCL_MODE_OFFSET 1
/** @brief mcclConnFifo::mode: the data is at mcclConnFifo::ptr. */
#define MCCL_MODE_PTR 2

/// @cond INTERNAL
// C11 spells these _Alignas/_Static_assert, C++ (and so CUDA) alignas/static_assert.
#ifdef __cplusplus
#define MCCL_ALIGNAS(n) alignas(n)
#define MCCL_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define MCCL_ALIGNAS(n) _Alignas(n)
#define MCCL_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
/// @endcond

/** @brief Per-slot description the producer writes before publishing tail (NCCL's ncclConnFifo). */
struct mcclConnFifo {
  int mode;     /**< MCCL_MODE_NORMAL, or MCCL_MODE_OFFSET where a P2P sender placed the data at `offset` */
  int offset;   /**< MCCL_MODE_OFFSET: byte offset of the slot's data in the FIFO */
  ssize_t size; /**< bytes in the slot; written before the release store of tail */
  void* ptr;    /**< data address for MCCL_MODE_PTR, else NULL */
};

/**
 * @brief The sender's page (NCCL's ncclSendMem): `head` is the credit the receiver returns. The
 * receiver writes it, the sender reads it; nothing else shares its cache line.
 */
struct mcclSendMem {
  union {
    struct {
      uint64_t head;                                      /**< steps the receiver has consumed */
      char pad1[MCCL_CACHE_LINE_SIZE - sizeof(uint64_t)]; /**< head alone on its line */
      void* ptrExchange;                                  /**< direct-pointer exchange (unused here) */
      uint64_t redOpArgExchange[2];                       /**< reduction scalar exchange (unused here) */
      char pad2[MCCL_CACHE_LINE_SIZE - sizeof(void*) - 2 * sizeof(uint64_t)]; /**< to the next line */
      int offsFifo[MCCL_STEPS];                                               /**< per-slot offsets (unused here) */
    };
    char pad3[MCCL_MEM_ALIGN]; /**< one page */
  };
};

/**
 * @brief The receiver's page (NCCL's ncclRecvMem): `tail` is what the sender has published, and
 * connFifo[step % MCCL_STEPS] describes each published slot. The FIFO's data follows this page in
 * the receiver's segment.
 */
struct mcclRecvMem {
  union {
    struct {
      uint64_t tail;                                      /**< steps the sender has published */
      char pad1[MCCL_CACHE_LINE_SIZE - sizeof(uint64_t)]; /**< tail alone on its line */
      struct mcclConnFifo connFifo[MCCL_STEPS];           /**< slot sizes, on their own line(s) */
      int flush;                                          /**< GDRCopy flush word (unused here) */
    };
    char pad4[MCCL_MEM_ALIGN]; /**< one page */
  };
};

/** @brief Index of the LL protocol's buffer in mcclConnInfo::buffs (NCCL_PROTO_LL). */
#define MCCL_PROTO_LL 0
/** @brief Index of the LL128 protocol's buffer (NCCL_PROTO_LL128). Only P2P connections over NVLink have
 *  one: its 128-byte lines rely on NVLink delivering each line of a warp's store whole, which PCIe (a P2P
 *  pair without NVLink), host memory (SHM) and a network (NET) do not promise, so those leave
 *  buffs[MCCL_PROTO_LL128] NULL. */
#define MCCL_PROTO_LL128 1
/** @brief Index of the SIMPLE protocol's buffer (NCCL_PROTO_SIMPLE). */
#define MCCL_PROTO_SIMPLE 2
/** @brief Protocols, so buffers, per connection (NCCL_NUM_PROTOCOLS). */
#define MCCL_NUM_PROTOCOLS 3

/** @brief Bytes of an LL128 line (NCCL_LL128_LINESIZE): 15 words of data and one flag word. */
#define MCCL_LL128_LINESIZE 128
/** @brief 8-byte words per LL128 line (NCCL_LL128_LINEELEMS). */
#define MCCL_LL128_LINEELEMS (MCCL_LL128_LINESIZE / 8)
/** @brief Data words per LL128 line (NCCL_LL128_DATAELEMS): all but the flag. */
#define MCCL_LL128_DATAELEMS (MCCL_LL128_LINEELEMS - 1)
/** @brief Words each thread carries per LL128 slice (NCCL_LL128_SHMEM_ELEMS_PER_THREAD): four 16-byte
 *  stores, so a warp's slice is 16 lines (2 KiB). */
#define MCCL_LL128_ELEMS_PER_SLICE_THREAD 8
/** @brief Bytes of one warp's LL128 slice; an LL128 FIFO slot holds whole slices. */
#define MCCL_LL128_SLICE_BYTES (32 * MCCL_LL128_ELEMS_PER_SLICE_THREAD * 8)

/**
 * @brief One 16-byte line of the LL FIFO (NCCL's union ncclLLFifoLine): two 4-byte data words, each
 * followed by a 4-byte flag the writer sets to the step. The whole line is stored with one 16-byte
 * (or two 8-byte) stores, so a reader that sees both flags equal to its step also sees both data
 * words: no tail is needed to publish it. 16-byte aligned (NCCL adds an int4 member for that; the
 * alignment is spelled here so the header has no CUDA vector types).
 */
union mcclLLFifoLine {
  struct {
    uint32_t data1; /**< first data word */
    uint32_t flag1; /**< its flag */
    uint32_t data2; /**< second data word */
    uint32_t flag2; /**< its flag */
  };
  MCCL_ALIGNAS(16) uint64_t v[2]; /**< the line as two 8-byte words (v[0] = data1|flag1, v[1] = data2|flag2) */
};

/// @cond INTERNAL
#ifdef __CUDACC__
#define MCCL_CONN_HOST_DEVICE __host__ __device__
#else
#define MCCL_CONN_HOST_DEVICE
#endif
/// @endcond

/**
 * @brief The flag of an LL line of `step`. NCCL uses the low 32 bits of step+1 and periodically
 * cleans the buffer so an old line can never carry the flag again; here steps may start anywhere (the
 * wrap tests start them near 2^64), so the flag is 1 + step mod (2^32 - 1): never 0, which a zeroed
 * buffer holds, and the same slot sees a repeated flag only after about 2^32 steps. The kernels
 * (lab 06) write and wait for it; lab 08's proxies check it on the host.
 */
static inline MCCL_CONN_HOST_DEVICE uint32_t mcclLLFlag(uint64_t step) {
  return 1u + (uint32_t)(step % 0xffffffffull);
}

/** @brief A protocol's name as NCCL's logs and MCCL_PROTO spell it ("LL", "LL128", "SIMPLE"; "?" otherwise). */
static inline MCCL_CONN_HOST_DEVICE const char* mcclProtoName(int proto) {
  return proto == MCCL_PROTO_LL       ? "LL"
         : proto == MCCL_PROTO_LL128  ? "LL128"
         : proto == MCCL_PROTO_SIMPLE ? "SIMPLE"
                                      : "?";
}

/**
 * @brief What a kernel (lab 06) or a host progress loop needs to drive one direction of one
 * connection (NCCL's ncclConnInfo, the parts minccl uses). Every address is device-accessible: a
 * kernel on the connector's device loads and stores it directly.
 */
struct mcclConnInfo {
  char* buffs[MCCL_NUM_PROTOCOLS]; /**< FIFOs: [MCCL_PROTO_LL] MCCL_STEPS slots of llStepSize bytes of
                                        mcclLLFifoLine, [MCCL_PROTO_LL128] MCCL_STEPS slots of ll128StepSize
                                        bytes of 128-byte lines (P2P only, else NULL), [MCCL_PROTO_SIMPLE]
                                        MCCL_STEPS slots of stepSize bytes */
  uint64_t* head;                  /**< mcclSendMem::head (own page for a sender, the peer's for a receiver) */
  uint64_t* tail;                  /**< mcclRecvMem::tail (the peer's page for a sender, own for a receiver) */
  struct mcclConnFifo* connFifo;   /**< mcclRecvMem::connFifo */
  int stepSize;                    /**< bytes per SIMPLE slot: MCCL_BUFFSIZE / MCCL_STEPS */
  int llStepSize;                  /**< bytes per LL slot: MCCL_LL_BUFFSIZE / MCCL_STEPS (a multiple of 16) */
  int ll128StepSize;               /**< bytes per LL128 slot: MCCL_LL128_BUFFSIZE / MCCL_STEPS (whole
                                        MCCL_LL128_SLICE_BYTES slices); 0 where buffs[MCCL_PROTO_LL128] is NULL */
  int dataOffsets;                 /**< 1: a SIMPLE slice may start up to 15 bytes into its slot, where connFifo
                                        says (MCCL_MODE_OFFSET): P2P, whose slots no proxy reads */
  uint64_t step;                   /**< where this side is; a kernel writes it back when it ends */
};

/** @brief Connections per peer and direction on one channel (NCCL_MAX_CONNS): connIndex 0 or 1. */
#define MCCL_MAX_CONNS 2
/** @brief The connIndex of point-to-point connections (lab 07's send/receive, as NCCL's p2p ops); 0 is the rings'. */
#define MCCL_P2P_CONN_INDEX 1

/**
 * @brief What a kernel reads about one peer of one channel (NCCL's ncclDevChannelPeer): the device
 * copies of the connections to it, per connIndex. Lab 06's mcclTransportP2pSetup fills one device
 * array of these per channel (indexed by peer rank).
 */
struct mcclDevChannelPeer {
  struct mcclConnInfo send[MCCL_MAX_CONNS]; /**< sending to this peer */
  struct mcclConnInfo recv[MCCL_MAX_CONNS]; /**< receiving from this peer */
};

/** @} */

/// @cond INTERNAL
// The layout is a contract with the peer process and with device code: pin it, in every language
// that includes this header (LP64 Linux on x86-64 and aarch64, host and device alike).
MCCL_STATIC_ASSERT((MCCL_STEPS & (MCCL_STEPS - 1)) == 0, "MCCL_STEPS must be a power of two for wrapping steps");
MCCL_STATIC_ASSERT(sizeof(void*) == 8 && sizeof(ssize_t) == 8, "connection structs assume LP64");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnFifo, mode) == 0, "connFifo.mode at 0");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnFifo, offset) == 4, "connFifo.offset at 4");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnFifo, size) == 8, "connFifo.size at 8");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnFifo, ptr) == 16, "connFifo.ptr at 16");
MCCL_STATIC_ASSERT(sizeof(struct mcclConnFifo) == 24, "connFifo is 24 bytes");
MCCL_STATIC_ASSERT(sizeof(struct mcclSendMem) == MCCL_MEM_ALIGN, "mcclSendMem must be one page");
MCCL_STATIC_ASSERT(sizeof(struct mcclRecvMem) == MCCL_MEM_ALIGN, "mcclRecvMem must be one page");
MCCL_STATIC_ASSERT(offsetof(struct mcclSendMem, head) == 0, "head starts the send page");
MCCL_STATIC_ASSERT(offsetof(struct mcclSendMem, ptrExchange) == MCCL_CACHE_LINE_SIZE, "head alone on its line");
MCCL_STATIC_ASSERT(offsetof(struct mcclSendMem, redOpArgExchange) == MCCL_CACHE_LINE_SIZE + 8, "redOpArgExchange");
MCCL_STATIC_ASSERT(offsetof(struct mcclSendMem, offsFifo) == 2 * MCCL_CACHE_LINE_SIZE, "offsFifo on the third line");
MCCL_STATIC_ASSERT(offsetof(struct mcclRecvMem, tail) == 0, "tail starts the recv page");
MCCL_STATIC_ASSERT(offsetof(struct mcclRecvMem, connFifo) == MCCL_CACHE_LINE_SIZE, "tail alone on its line");
MCCL_STATIC_ASSERT(offsetof(struct mcclRecvMem, flush) == MCCL_CACHE_LINE_SIZE + MCCL_STEPS * 24,
                   "flush after connFifo");
MCCL_STATIC_ASSERT(sizeof(union mcclLLFifoLine) == 16, "an LL line is 16 bytes");
MCCL_STATIC_ASSERT(offsetof(union mcclLLFifoLine, flag1) == 4 && offsetof(union mcclLLFifoLine, data2) == 8 &&
                       offsetof(union mcclLLFifoLine, flag2) == 12,
                   "LL line: data1 flag1 data2 flag2");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnInfo, buffs) == 0, "connInfo.buffs at 0");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnInfo, head) == 8 * MCCL_NUM_PROTOCOLS, "connInfo.head after buffs");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnInfo, tail) == 8 * MCCL_NUM_PROTOCOLS + 8, "connInfo.tail");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnInfo, connFifo) == 8 * MCCL_NUM_PROTOCOLS + 16, "connInfo.connFifo");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnInfo, stepSize) == 8 * MCCL_NUM_PROTOCOLS + 24, "connInfo.stepSize");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnInfo, llStepSize) == 8 * MCCL_NUM_PROTOCOLS + 28, "connInfo.llStepSize");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnInfo, ll128StepSize) == 8 * MCCL_NUM_PROTOCOLS + 32,
                   "connInfo.ll128StepSize");
MCCL_STATIC_ASSERT(offsetof(struct mcclConnInfo, step) == 8 * MCCL_NUM_PROTOCOLS + 40, "connInfo.step");
/// @endcond

#endif
