// Lab 07: the allreduce kernels (NCCL 2.28.9 src/device/all_reduce.h runRing; the symmetric kernels
// of src/device/symmetric/all_reduce.cuh for one-shot and two-shot). As in lab 06, kernels per
// element type (allreduce_<type>.cu: the ring / two-shot one and one-shot's own), all from this
// file, for nvcc and for the sim's g++.
#ifndef MCCL_ALLREDUCE_CUH_
#define MCCL_ALLREDUCE_CUH_

#include "device/primitives.cuh"
#include "mccl_allreduce_args.h"

// The launch's argument, copied into shared memory by the block's threads (lab 06 copies its
// mcclDevWork the same way), with the peers' addresses the symmetric algorithms use (loaded once
// from the device arrays the argument points at). Lab 06's mcclShmem.work carries what its
// Primitives read: the abort flag and the trace switch. The ring and two-shot use it; one-shot
// reads its parameter directly (mcclOneShotMain).
struct mcclArShmem {
  struct mcclAllReduceArgs args;
  uint64_t seq;
  char* peerSend[MCCL_SYM_MAX_RANKS];     // two-shot: each rank's sendbuff as mapped here
  char* peerRecv[MCCL_SYM_MAX_RANKS];     // two-shot: each rank's recvbuff as mapped here
  char* peerSignals[MCCL_SYM_MAX_RANKS];  // two-shot: each rank's signal area as mapped here
};
MCCL_SHMEM_DEFINE(struct mcclArShmem, arShmem);

__device__ __forceinline__ void mcclArLoadArgs(const struct mcclAllReduceArgs* a, int tid, int nthreads) {
  static_assert(sizeof(struct mcclAllReduceArgs) % sizeof(uint32_t) == 0, "copied in 4-byte words");
  const uint32_t* src = (const uint32_t*)a;
  uint32_t* dst = (uint32_t*)&arShmem.args;
  for (int i = tid; i < (int)(sizeof(*a) / sizeof(uint32_t)); i += nthreads) dst[i] = src[i];
  if (tid == 0) {
    mcclShmem.work.abortFlag = a->abortFlag;
    mcclShmem.work.trace = a->trace;
    mcclShmem.work.op = mcclDevOpNone;
  }
  if (a->algorithm != MCCL_ALGO_RING && tid < a->nRanks) {
    arShmem.peerSignals[tid] = a->signalPeers[tid];
    if (a->algorithm == MCCL_ALGO_TWOSHOT) {
      arShmem.peerSend[tid] = a->sendPeers[tid] + a->sendOffset;
      arShmem.peerRecv[tid] = a->recvPeers[tid] + a->recvOffset;
    }
  }
  __syncthreads();
}

// ---- ring (runRing) -------------------------------------------------------------------------------
// Each channel owns a contiguous part of the buffer (NCCL's ncclCollCbdPart: cut at 512-byte
// multiples here, as lab 06), walked nranks chunks at a time. For chunk indices the ring position
// (ringIx) counts, not the rank: step 0 sends chunk ringIx-1, the middle steps reduce and pass on,
// step n-1 produces the final chunk ringIx (postOp: avg divides), the rest pass it around.
template <typename T, typename RedOp, typename Proto>
__device__ bool mcclRunRing(int tid, int nthreads) {
  const struct mcclAllReduceArgs& a = arShmem.args;
  const int nranks = a.nRanks;
  const int ringIx = a.ringIndex;
  const int ch = blockIdx.x;
  const int64_t count = (int64_t)a.count;
  int64_t per =
      mcclDivUp(mcclDivUp(count * (int64_t)sizeof(T), (int64_t)a.nChannels), (int64_t)512) * 512 / (int64_t)sizeof(T);
  int64_t chLo = (int64_t)ch * per < count ? (int64_t)ch * per : count;
  int64_t chHi = chLo + per < count ? chLo + per : count;
  const int64_t channelCount = chHi - chLo;
  bool aborted;
  {
    Primitives<T, RedOp, Proto> prims(tid, nthreads, a.recvConns + ch, a.sendConns + ch, a.sendbuff, a.recvbuff,
                                      a.redOpArg, 0, a.chunkSteps / a.sliceSteps, a.sliceSteps);
    int64_t chunkCount = prims.chunkElems();
    const int64_t loopCount = (int64_t)nranks * chunkCount;
    auto modRanks = [nranks](int r) -> int { return r - (r >= nranks ? nranks : 0); };
    for (int64_t elemOffset = 0; elemOffset < channelCount && !prims.aborted(); elemOffset += loopCount) {
      const int64_t remCount = channelCount - elemOffset;
      // The last round spreads what is left evenly over the ranks, in 256-byte pieces.
      if (remCount < loopCount) {
        const int64_t q = 256 / (int64_t)sizeof(T);
        chunkCount = mcclDivUp(mcclDivUp(remCount, (int64_t)nranks), q) * q;
      }
      auto at = [&](int chunk, int64_t* offset) -> int {
        int64_t chunkOffset = chunk * chunkCount;
        *offset = chLo + elemOffset + chunkOffset;
        int64_t n = remCount - chunkOffset;
        return (int)(n < chunkCount ? (n < 0 ? 0 : n) : chunkCount);
      };
      int64_t offset;
      int nelem = at(modRanks(ringIx + nranks - 1), &offset);
      prims.send(offset, nelem);
      for (int j = 2; j < nranks; ++j) {
        nelem = at(modRanks(ringIx + nranks - j), &offset);
        prims.recvReduceSend(offset, nelem);
      }
      nelem = at(ringIx, &offset);
      prims.recvReduceCopySend(offset, offset, nelem, /*postOp=*/true);
      for (int j = 1; j < nranks - 1; ++j) {
        nelem = at(modRanks(ringIx + nranks - j), &offset);
        prims.recvCopySend(offset, nelem);
      }
      nelem = at(modRanks(ringIx + 1), &offset);
      prims.recv(offset, nelem);
    }
    aborted = prims.aborted();
  }
  return aborted;
}

// One rank: the result is the input (avg divides by 1). The copy still goes through the workers'
// loop so every type and alignment is handled the same way.
template <typename T, typename RedOp>
__device__ void mcclRunSelf(int tid, int nthreads) {
  const struct mcclAllReduceArgs& a = arShmem.args;
  int64_t count = (int64_t)a.count;
  int64_t per = mcclDivUp(count, (int64_t)a.nChannels);
  int64_t lo = (int64_t)blockIdx.x * per < count ? (int64_t)blockIdx.x * per : count;
  int64_t hi = lo + per < count ? lo + per : count;
  if (hi <= lo || a.sendbuff == a.recvbuff) return;
  RedOp op;
  op.arg = a.redOpArg;
  void* src[1] = {(void*)((const T*)a.sendbuff + lo)};
  void* dst[1] = {(void*)((T*)a.recvbuff + lo)};
  mcclReduceCopy<4, T, RedOp, 1, 1>(tid, nthreads, op, true, src, dst, hi - lo);
}

// ---- symmetric kernels: sequence numbers and barriers --------------------------------------------
// Every block keeps the number of symmetric calls in device memory (a CUDA graph replays the same
// arguments, so the host cannot pass it). Block 0 also advances the counters of the blocks this
// launch does not use, so all counters stay equal and every block of every rank agrees on seq.
// Two-shot reads it with one thread before its barrier; one-shot has every thread read it beside
// its first input loads, so the two latencies overlap, and advances it after its one closing barrier.
// Part `index` of [from, to) cut into `parts` equal parts of whole multiples of q elements (16 bytes
// for the symmetric kernels' packs): the last part shorter, parts past the end empty.
__device__ __forceinline__ void mcclEvenPart(int64_t from, int64_t to, int64_t parts, int64_t index, int64_t q,
                                             int64_t& lo, int64_t& hi) {
  const int64_t per = mcclDivUp(mcclDivUp(to - from, parts), q) * q;
  lo = from + index * per < to ? from + index * per : to;
  hi = lo + per < to ? lo + per : to;
}

__device__ __forceinline__ void mcclSymSeqBegin(int tid) {
  if (tid == 0) arShmem.seq = arShmem.args.seqCounters[blockIdx.x] + 1;
  __syncthreads();
}
// Store the call's number as this block's counter (block 0 also those of the blocks not launched);
// every thread of the block must have read the counter before (a barrier).
__device__ __forceinline__ void mcclSymSeqStore(uint64_t* c, uint64_t seq, int tid, int nthreads) {
  if (tid == 0) c[blockIdx.x] = seq;
  if (blockIdx.x == 0)
    for (int b = gridDim.x + tid; b < MCCL_SIGNAL_MAX_BLOCKS; b += nthreads) c[b] = seq;
}
__device__ __forceinline__ void mcclSymSeqEnd(int tid, int nthreads) {
  __syncthreads();
  mcclSymSeqStore(arShmem.args.seqCounters, arShmem.seq, tid, nthreads);
}

__device__ __forceinline__ struct mcclSymSignals* mcclSymSignalsOf(int rank) {
  return (struct mcclSymSignals*)arShmem.peerSignals[rank];
}

// A barrier of this block with the same block of every rank: thread p < nranks stores seq into
// rank p's slot for us (p's mapped signal area), then waits (acquire) until our slot for p has reached
// seq. As NCCL's LSA barrier (src/include/nccl_device/impl/lsa_barrier__funcs.h, used by its
// RSxLD_AGxST kernel): the arrive at the start is a relaxed store with no fence (this block has written
// nothing yet; what earlier grids wrote is visible once cudaGridDependencySynchronize returns, and the
// previous call's accesses ended at its depart), and the depart publishes the block's stores into the
// peers' buffers with one system-scope fence after syncthreads, then a relaxed store.
template <bool Arrive>
__device__ bool mcclSymBarrier(int tid) {
  const struct mcclAllReduceArgs& a = arShmem.args;
  const uint64_t seq = arShmem.seq;
  int flags = 0;
  struct mcclSpin spins;
  __syncthreads();
  if (tid < a.nRanks) {
    struct mcclSymSignals* theirs = mcclSymSignalsOf(tid);
    uint64_t* slot = Arrive ? &theirs->arrive[blockIdx.x][a.rank] : &theirs->depart[blockIdx.x][a.rank];
    if (!Arrive) fence_acq_rel_sys();
    st_relaxed_sys_global(slot, seq);
    struct mcclSymSignals* mine = mcclSymSignalsOf(a.rank);
    uint64_t* wait = Arrive ? &mine->arrive[blockIdx.x][tid] : &mine->depart[blockIdx.x][tid];
    while (ld_acquire_sys_global(wait) < seq) {
      if (mcclCheckAbort(flags, 1, spins)) break;
    }
  }
  return __syncthreads_or(flags) != 0;
}

// ---- the launch's op and its end, for both kernels -----------------------------------------------
// Calls run(FuncX<T>()) for the launch's reduction op (its functor type chosen at run time).
template <typename T, typename Run>
__device__ __forceinline__ bool mcclWithRedOp(int op, const Run& run) {
  switch (op) {
    case mcclSum: return run(FuncSum<T>());
    case mcclProd: return run(FuncProd<T>());
    case mcclMax: return run(FuncMax<T>());
    case mcclMin: return run(FuncMin<T>());
    default: return run(FuncAvg<T>());
  }
}
// A block that agreed it was aborted tells the host (the communicator's status word).
__device__ __forceinline__ void mcclArReportAbort(int* status, bool aborted, int tid) {
  if (aborted && tid == 0 && status != NULL) st_relaxed_sys_global((uint32_t*)status, (uint32_t)mcclDevStatusAborted);
}

// ---- one-shot (LL push) ---------------------------------------------------------------------------
// Each rank writes its input, 8 bytes per 16-byte line with the call's flag in both halves, into
// every peer's scratch at [parity][its rank]; then each rank waits for every peer's lines in its own
// scratch and reduces all inputs in rank order (so every rank gets the same bits). No fence and no
// barrier: data and its ready flag travel together. Two parities: a rank can start call k+1 only
// after every peer has started call k (it needed their lines), so no line of call k-1 is still
// being read when call k+1 overwrites its parity.
__device__ __forceinline__ uint32_t mcclSymFlag(uint64_t seq) {
  return (uint32_t)seq != 0 ? (uint32_t)seq : 1u;  // never 0 (a fresh line); calls k and k-2 differ
}
__device__ __forceinline__ union mcclLLFifoLine* mcclOneShotLines(const struct mcclAllReduceArgs& a, int owner,
                                                                   int parity, int src) {
  char* base = a.signalPeers[owner] + sizeof(struct mcclSymSignals);
  return (union mcclLLFifoLine*)base + ((size_t)parity * MCCL_SYM_MAX_RANKS + src) * MCCL_ONESHOT_LINES;
}

// An 8-byte word seen as elements of T: reduce two words, apply the post step, load and store
// a word's first n elements (a full, aligned word in one access).
template <typename T, typename RedOp>
__device__ __forceinline__ uint64_t mcclReduceWord(const RedOp& op, uint64_t a, uint64_t b) {
  uint64_t r;
#pragma unroll
  for (int i = 0; i < (int)(8 / sizeof(T)); i++) {
    T x, y;
    memcpy((void*)&x, (const char*)&a + i * sizeof(T), sizeof(T));
    memcpy((void*)&y, (const char*)&b + i * sizeof(T), sizeof(T));
    x = op.apply(x, y);
    memcpy((char*)&r + i * sizeof(T), (const void*)&x, sizeof(T));
  }
  return r;
}
template <typename T, typename RedOp>
__device__ __forceinline__ uint64_t mcclPostWord(const RedOp& op, uint64_t a) {
  uint64_t r;
#pragma unroll
  for (int i = 0; i < (int)(8 / sizeof(T)); i++) {
    T x;
    memcpy((void*)&x, (const char*)&a + i * sizeof(T), sizeof(T));
    x = op.post(x);
    memcpy((char*)&r + i * sizeof(T), (const void*)&x, sizeof(T));
  }
  return r;
}
template <typename T>
__device__ __forceinline__ uint64_t mcclLoadWord(const T* p, int n) {
  if (n == (int)(8 / sizeof(T)) && ((uintptr_t)p & 7) == 0) return *(const uint64_t*)p;
  uint64_t w = 0;
  for (int i = 0; i < n; i++) {
    T x = mcclLoadElt(p + i);
    memcpy((char*)&w + i * sizeof(T), (const void*)&x, sizeof(T));
  }
  return w;
}
template <typename T>
__device__ __forceinline__ void mcclStoreWord(T* p, uint64_t w, int n) {
  if (n == (int)(8 / sizeof(T)) && ((uintptr_t)p & 7) == 0) {
    *(uint64_t*)p = w;
    return;
  }
  for (int i = 0; i < n; i++) {
    T x;
    memcpy((void*)&x, (const char*)&w + i * sizeof(T), sizeof(T));
    mcclStoreElt(p + i, x);
  }
}

// Elements of T in one-shot's line l of a count-element input: a whole word's, or what is left.
template <typename T>
__device__ __forceinline__ int mcclOneShotLineElts(int count, int l) {
  constexpr int EltPerLine = 8 / sizeof(T);
  return count - l * EltPerLine < EltPerLine ? count - l * EltPerLine : EltPerLine;
}

// One-shot's pull: each trip reads lines base + u * nthreads (u < U) of R ranks at a time (a peer's
// from this rank's scratch, its own from the input), all loads issued before any is waited on, so a
// trip waits about one latency per R ranks. Waiting on each peer before loading the next cost one
// latency per peer: 8 B in a graph on 4x H100 took 2.52 us on 2 ranks, 3.00 on 3, 3.46 on 4.
// Lines whose flags are not the call's yet are re-read together, then the ranks are reduced in rank order.
template <typename T, typename RedOp, int R, int U>
__device__ __forceinline__ void mcclOneShotPull(const struct mcclAllReduceArgs& a, const RedOp& op, const T* in, T* out,
                                                uint32_t flag, int parity, int lo, int hi, int tid, int nthreads,
                                                int& flags) {
  constexpr int EltPerLine = 8 / sizeof(T);
  const int count = (int)a.count;
  const int nranks = a.nRanks;
  for (int base = lo + tid; base < hi && !flags; base += nthreads * U) {
    uint64_t acc[U] = {};
    for (int p0 = 0; p0 < nranks; p0 += R) {
      uint64_t v0[R][U], v1[R][U];
      uint32_t pending = 0;  // bit i * U + u: line u of rank p0 + i has not shown the call's flag yet
#pragma unroll
      for (int i = 0; i < R; i++) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int p = p0 + i, l = base + u * nthreads;
          v0[i][u] = v1[i][u] = 0;
          if (p >= nranks || l >= hi) continue;
          if (p == a.rank) {
            v0[i][u] = mcclLoadWord(in + l * EltPerLine, mcclOneShotLineElts<T>(count, l));
          } else {
            load128((const uint64_t*)(mcclOneShotLines(a, a.rank, parity, p) + l), v0[i][u], v1[i][u]);
            pending |= 1u << (i * U + u);
          }
        }
      }
      // Check every pending line, then re-read all that are still pending at once: a round waits one
      // latency however many peers are late.
      struct mcclSpin spins;
      while (pending) {
#pragma unroll
        for (int i = 0; i < R; i++) {
#pragma unroll
          for (int u = 0; u < U; u++) {
            if ((pending >> (i * U + u) & 1) && (uint32_t)(v0[i][u] >> 32) == flag &&
                (uint32_t)(v1[i][u] >> 32) == flag)
              pending &= ~(1u << (i * U + u));
          }
        }
        if (!pending || mcclCheckAbortAt(flags, 1, spins, a.abortFlag)) break;
#pragma unroll
        for (int i = 0; i < R; i++) {
#pragma unroll
          for (int u = 0; u < U; u++) {
            if (pending >> (i * U + u) & 1)
              load128((const uint64_t*)(mcclOneShotLines(a, a.rank, parity, p0 + i) + base + u * nthreads), v0[i][u],
                      v1[i][u]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < R; i++) {
        const int p = p0 + i;
        if (p >= nranks) break;
#pragma unroll
        for (int u = 0; u < U; u++) {
          if (base + u * nthreads >= hi) continue;
          const uint64_t w = p == a.rank ? v0[i][u] : (v0[i][u] & 0xffffffffull) | (v1[i][u] << 32);
          acc[u] = p == 0 ? w : mcclReduceWord<T, RedOp>(op, acc[u], w);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int l = base + u * nthreads;
      if (l < hi)
        mcclStoreWord(out + l * EltPerLine, mcclPostWord<T, RedOp>(op, acc[u]), mcclOneShotLineElts<T>(count, l));
    }
  }
}

template <typename T, typename RedOp>
__device__ __forceinline__ bool mcclRunOneShot(const struct mcclAllReduceArgs& a, int tid, int nthreads) {
  constexpr int EltPerLine = 8 / sizeof(T);
  // Lines per thread per trip of the push: their loads are all issued before the first is used, so a
  // thread waits for one memory latency per trip, not one per line (the accesses are volatile asm, which
  // the compiler keeps in program order: a load after a store waits for nothing but is issued late).
  // The pull takes its own lines and ranks per trip (mcclOneShotPull).
  constexpr int U = 4;
  const int count = (int)a.count;  // at most MCCL_ONESHOT_MAX_BYTES: 32-bit index math
  const int nlines = mcclDivUp(count, (int)EltPerLine);
  const int per = mcclDivUp(nlines, (int)gridDim.x);
  const int lo = (int)blockIdx.x * per < nlines ? (int)blockIdx.x * per : nlines;
  const int hi = lo + per < nlines ? lo + per : nlines;
  // Every thread reads the call's number itself (no barrier before the first store).
  const uint64_t seq = a.seqCounters[blockIdx.x] + 1;
  const uint32_t flag = mcclSymFlag(seq);
  const int parity = (int)(seq & 1);
  const T* in = (const T*)a.sendbuff;
  T* out = (T*)a.recvbuff;
  RedOp op;
  op.arg = a.redOpArg;
  int flags = 0;
  // Push: U lines per thread per trip, to every peer.
  for (int base = lo + tid; base < hi; base += (int)nthreads * U) {
    uint64_t w[U] = {};
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int l = base + (int)u * nthreads;
      if (l < hi) w[u] = mcclLoadWord(in + l * EltPerLine, mcclOneShotLineElts<T>(count, l));
    }
    for (int p = 0; p < a.nRanks; p++) {
      if (p == a.rank) continue;
      union mcclLLFifoLine* dst = mcclOneShotLines(a, p, parity, a.rank);
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int l = base + (int)u * nthreads;
        if (l < hi)
          store128((uint64_t*)(dst + l), (w[u] & 0xffffffffull) | ((uint64_t)flag << 32),
                   (w[u] >> 32) | ((uint64_t)flag << 32));
      }
    }
  }
  // Pull what the peers pushed here, reduce in rank order, write the result: 2 ranks take both ranks'
  // lines, two each, per trip; more ranks four ranks' lines, one each (eight ranks' at once made ptxas
  // spill under the 640-thread launch bound for 8-byte and 1-byte types).
  if (a.nRanks <= 2)
    mcclOneShotPull<T, RedOp, 2, 2>(a, op, in, out, flag, parity, lo, hi, tid, nthreads, flags);
  else
    mcclOneShotPull<T, RedOp, 4, 1>(a, op, in, out, flag, parity, lo, hi, tid, nthreads, flags);
  // One barrier ends the call: after it every thread has read the counter (so it may advance, as
  // mcclSymSeqEnd) and the block agrees on an abort.
  const bool aborted = __syncthreads_or(flags) != 0;
  mcclSymSeqStore(a.seqCounters, seq, tid, nthreads);
  return aborted;
}

// ---- one-shot with SIMPLE (2 ranks) ---------------------------------------------------------------
// One-shot's exchange for sizes where a flag in every line costs more than a flag per block: each
// block stores its part of the input, the bytes themselves, into the peer's scratch (the [parity]
// region after the LL lines of the peer's signal area), then publishes it as prims_simple.h's
// postPeer publishes a step: a barrier, one thread's system-scope fence, then the call's number in
// the peer's `pushed` slot. It waits for the peer's slot the same way (one thread, acquire, then the
// barrier) and reduces the two inputs in rank order into recvbuff (every rank gets the same bits).
// On two ranks every algorithm moves the whole buffer each way over the link (two-shot half by
// loads, half by stores); this one synchronises once where two-shot waits at two barriers, and, like
// one-shot with LL, needs no window for the user's buffers and reads its launch from the kernel's
// parameter (no copy into shared memory first). Parities as with LL: a rank starts call k+1 only
// after its peer started call k, so the peer's reads of call k-1's scratch are over.
__device__ __forceinline__ char* mcclOneShotScratch(char* signals, int parity) {
  return signals + MCCL_SIGNAL_ZEROED_BYTES + (size_t)parity * MCCL_ONESHOT_SIMPLE_MAX_BYTES;
}
template <typename T, typename RedOp>
__device__ __forceinline__ bool mcclRunOneShotSimple(const struct mcclAllReduceArgs& a, int tid, int nthreads) {
  int64_t lo, hi;  // this block's part of the input, whole 16-byte packs but the last
  mcclEvenPart(0, (int64_t)a.count, gridDim.x, blockIdx.x, 16 / (int64_t)sizeof(T), lo, hi);
  const int peer = 1 - a.rank;
  const uint64_t seq = a.seqCounters[blockIdx.x] + 1;  // every thread reads it (no barrier first)
  const int parity = (int)(seq & 1);
  RedOp op;
  op.arg = a.redOpArg;
  void* in = (void*)((const T*)a.sendbuff + lo);
  if (hi > lo) {
    void* src[1] = {in};
    void* dst[1] = {(void*)((T*)mcclOneShotScratch(a.signalPeers[peer], parity) + lo)};
    mcclReduceCopy<4, T, RedOp, 1, 1>(tid, nthreads, op, false, src, dst, hi - lo);
  }
  int flags = 0;
  __syncthreads();
  if (tid == 0) {
    fence_acq_rel_sys();
    st_relaxed_sys_global(&((struct mcclSymSignals*)a.signalPeers[peer])->pushed[blockIdx.x][a.rank], seq);
    uint64_t* wait = &((struct mcclSymSignals*)a.signalPeers[a.rank])->pushed[blockIdx.x][peer];
    struct mcclSpin spins;
    while (ld_acquire_sys_global(wait) < seq) {
      if (mcclCheckAbortAt(flags, 1, spins, a.abortFlag)) break;
    }
  }
  // After this barrier every thread has read the counter, so it may advance (as mcclSymSeqEnd).
  const bool aborted = __syncthreads_or(flags) != 0;
  mcclSymSeqStore(a.seqCounters, seq, tid, nthreads);
  if (aborted || hi <= lo) return aborted;
  void* theirs = (void*)((T*)mcclOneShotScratch(a.signalPeers[a.rank], parity) + lo);
  void* src[2] = {a.rank == 0 ? in : theirs, a.rank == 0 ? theirs : in};
  void* dst[1] = {(void*)((T*)a.recvbuff + lo)};
  mcclReduceCopy<4, T, RedOp, 2, 1>(tid, nthreads, op, true, src, dst, hi - lo);
  return false;
}

// One-shot's kernel body: everything it reads of the launch comes straight from the kernel's
// parameter (constant memory on the GPU), with no copy into shared memory and no barrier before its
// first store to a peer. On one H100 that prologue measured 0.53 us of a 1.50 us launch floor in a
// graph (docs/results/2026-11-25-h100-peerwatch.md); one-shot is the latency path, so it skips it.
// It is a kernel of its own (as NCCL's symmetric kernels are apart from ncclDevKernel_*): a small
// body, without the ring's registers and stack, for a launch whose whole cost is latency.
// One kernel per protocol (Simple): with both in one kernel LL's path took more registers (float32
// 68 -> 73) and ran 0.03-0.07 us slower per call in a CUDA graph on 2x H100.
template <typename T, bool Simple>
__device__ __forceinline__ void mcclOneShotMain(const struct mcclAllReduceArgs& a, int tid, int nthreads) {
  mcclDependentGridBegin();  // launch.c launches it as a dependent grid
  const bool aborted = mcclWithRedOp<T>(a.op, [&](auto redOp) {
    if constexpr (Simple)
      return mcclRunOneShotSimple<T, decltype(redOp)>(a, tid, nthreads);
    else
      return mcclRunOneShot<T, decltype(redOp)>(a, tid, nthreads);
  });
  mcclArReportAbort(a.status, aborted, tid);
}

// ---- two-shot (reduce-scatter by loads, all-gather by stores) -------------------------------------
// Rank r owns chunk r of the buffer. After a barrier (every rank's input is ready), each block reads
// its slice of chunk r from every rank's sendbuff (16-byte volatile loads over NVLink, or the sim's
// shared mappings), reduces in rank order, and stores the result into every rank's recvbuff. A
// second barrier keeps every rank in the kernel until all stores into its recvbuff have landed and
// no peer still reads its sendbuff.

// Two-shot's 16-byte packs of [lo, lo + npacks * 16 bytes): each trip loads U packs from R ranks
// before it uses any, so a trip waits for one memory latency, not one per rank (a peer's pack is a
// load over NVLink); more than R ranks are taken R at a time (NCCL's allreduceDeep unrolls over peers
// the same way, src/device/symmetric/all_reduce.cuh). The reduction stays in rank order; the result
// goes to every rank's recvbuff.
template <typename T, typename RedOp, int R, int U>
__device__ __forceinline__ void mcclTwoShotPacks(const RedOp& op, int64_t lo, int64_t npacks, int tid, int nthreads) {
  const int nranks = arShmem.args.nRanks;
  for (int64_t base = 0; base < npacks; base += (int64_t)nthreads * U) {
    mcclPack<T> acc[U] = {};  // set by rank 0's packs; zeroed for the host compiler's sake
    for (int p0 = 0; p0 < nranks; p0 += R) {
      mcclPack<T> x[R][U];
#pragma unroll
      for (int i = 0; i < R; i++) {
        if (p0 + i >= nranks) break;
        const uint64_t* src = (const uint64_t*)((const T*)arShmem.peerSend[p0 + i] + lo);
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int64_t k = base + (int64_t)u * nthreads + tid;
          if (k < npacks) load128(src + 2 * k, x[i][u].u[0], x[i][u].u[1]);
        }
      }
#pragma unroll
      for (int i = 0; i < R; i++) {
        if (p0 + i >= nranks) break;
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int64_t k = base + (int64_t)u * nthreads + tid;
          if (k < npacks) acc[u] = p0 + i == 0 ? x[i][u] : mcclApplyPack<T>(op, acc[u], x[i][u]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int64_t k = base + (int64_t)u * nthreads + tid;
      if (k < npacks) acc[u] = mcclPostPack<T>(op, acc[u]);
    }
    for (int p = 0; p < nranks; p++) {
      uint64_t* dst = (uint64_t*)((T*)arShmem.peerRecv[p] + lo);
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int64_t k = base + (int64_t)u * nthreads + tid;
        if (k < npacks) store128(dst + 2 * k, acc[u].u[0], acc[u].u[1]);
      }
    }
  }
}

template <typename T, typename RedOp>
__device__ bool mcclRunTwoShot(int tid, int nthreads) {
  const struct mcclAllReduceArgs& a = arShmem.args;
  const int64_t count = (int64_t)a.count;
  const int nranks = a.nRanks;
  const int64_t q = 16 / (int64_t)sizeof(T);
  int64_t cLo, cHi, lo, hi;  // this rank's chunk, then this block's part of it
  mcclEvenPart(0, count, nranks, a.rank, q, cLo, cHi);
  mcclEvenPart(cLo, cHi, gridDim.x, blockIdx.x, q, lo, hi);
  RedOp op;
  op.arg = a.redOpArg;
  if (mcclSymBarrier<true>(tid)) return true;
  const int64_t n = hi - lo;
  uintptr_t misaligned = 0;
  for (int p = 0; p < nranks; p++) misaligned |= (uintptr_t)arShmem.peerSend[p] | (uintptr_t)arShmem.peerRecv[p];
  int64_t done = 0;
  // lo is a multiple of 16 bytes, so the peers' base addresses decide.
  if ((misaligned & 15) == 0) {
    const int64_t npacks = n / q;
    // Four packs in flight per thread, as before the loads came from several ranks at once: two
    // ranks' two each, or four ranks' one each (the 640-thread bound leaves 96 registers a thread).
    if (nranks <= 2)
      mcclTwoShotPacks<T, RedOp, 2, 2>(op, lo, npacks, tid, nthreads);
    else
      mcclTwoShotPacks<T, RedOp, 4, 1>(op, lo, npacks, tid, nthreads);
    done = npacks * q;
  }
  for (int64_t i = done + tid; i < n; i += nthreads) {
    T acc = mcclLoadElt((const T*)arShmem.peerSend[0] + lo + i);
    for (int p = 1; p < nranks; p++) acc = op.apply(acc, mcclLoadElt((const T*)arShmem.peerSend[p] + lo + i));
    acc = op.post(acc);
    for (int p = 0; p < nranks; p++) mcclStoreElt((T*)arShmem.peerRecv[p] + lo + i, acc);
  }
  return mcclSymBarrier<false>(tid);
}

// ---- dispatch -------------------------------------------------------------------------------------
template <typename T, typename RedOp>
__device__ bool mcclRunAllReduce(int tid, int nthreads) {
  const struct mcclAllReduceArgs& a = arShmem.args;
  if (a.nRanks == 1) {
    mcclRunSelf<T, RedOp>(tid, nthreads);
    return false;
  }
  if (a.algorithm == MCCL_ALGO_RING) {
    return a.proto == MCCL_PROTO_LL ? mcclRunRing<T, RedOp, ProtoLL>(tid, nthreads)
                                    : mcclRunRing<T, RedOp, ProtoSimple>(tid, nthreads);
  }
  // Two-shot (one-shot has its kernel of its own: mcclAllReduceOneShotKernel_*).
  mcclSymSeqBegin(tid);
  const bool aborted = mcclRunTwoShot<T, RedOp>(tid, nthreads);
  mcclSymSeqEnd(tid, nthreads);
  return aborted;
}

template <typename T>
__device__ __forceinline__ void mcclAllReduceMain(const struct mcclAllReduceArgs& args) {
  const int tid = threadIdx.x;
  const int nthreads = blockDim.x;
  mcclDependentGridBegin();  // launch.c launches it as a dependent grid
  mcclArLoadArgs(&args, tid, nthreads);
  const bool aborted = mcclWithRedOp<T>(
      arShmem.args.op, [&](auto redOp) { return mcclRunAllReduce<T, decltype(redOp)>(tid, nthreads); });
  mcclArReportAbort(arShmem.args.status, __syncthreads_or(aborted) != 0, tid);
}

// Three kernels per type: the ring, two-shot and one rank; one-shot with LL; one-shot with SIMPLE
// (launch.c picks the last two for MCCL_ALGO_ONESHOT with 2 ranks or more).
#define MCCL_DEFINE_ALLREDUCE_KERNEL(suffix, T)                                  \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS)              \
      mcclAllReduceKernel_##suffix(struct mcclAllReduceArgs args) {              \
    mcclAllReduceMain<T>(args);                                                  \
  }                                                                              \
  MCCL_KERNEL_REGISTER(mcclAllReduceKernel_##suffix);                            \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS)              \
      mcclAllReduceOneShotKernel_##suffix(struct mcclAllReduceArgs args) {       \
    mcclOneShotMain<T, false>(args, threadIdx.x, blockDim.x);                    \
  }                                                                              \
  MCCL_KERNEL_REGISTER(mcclAllReduceOneShotKernel_##suffix);                     \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS)              \
      mcclAllReduceOneShotSimpleKernel_##suffix(struct mcclAllReduceArgs args) { \
    mcclOneShotMain<T, true>(args, threadIdx.x, blockDim.x);                     \
  }                                                                              \
  MCCL_KERNEL_REGISTER(mcclAllReduceOneShotSimpleKernel_##suffix)

#endif
