// Lab 07 device code: the one-shot AllReduce kernels (NCCL 2.28.9 src/device/symmetric/all_reduce.cuh,
// its AGxLL_R kernel for LL), kernels of their own as NCCL's symmetric kernels are apart from its
// generic one: a small body, without the ring's registers and stack, for launches whose whole cost is
// latency. Everything they read of the launch comes straight from the kernel's parameter (constant
// memory on the GPU), with no copy into shared memory and no barrier before the first store to a peer.
//
// A launch carries one or more one-shot works of one type and operation (a group's, planned together),
// laid out one after the other in the launch's scratch (firstLine); the blocks cut that concatenation
// evenly, so eight small allreduces cost about what one of their total size costs. One sequence number
// serves the whole launch.
#ifndef MCCL_ONESHOT_CUH_
#define MCCL_ONESHOT_CUH_

#include "dev_common.cuh"

// Which operations read their argument, and which have a pre step: the others skip both at compile time.
template <typename RedOp>
struct mcclOpUsesArg {
  static constexpr bool value = false;
};
template <typename T>
struct mcclOpUsesArg<FuncPreMulSum<T>> {
  static constexpr bool value = true;
};
template <typename T>
struct mcclOpUsesArg<FuncSumPostDiv<T>> {
  static constexpr bool value = true;
};

// A work's operation, with its argument (a device scalar read now: a one-shot kernel has no barrier
// to share it, and the load hits the cache after the first line).
template <typename T, typename RedOp>
__device__ __forceinline__ RedOp mcclOneShotOp(const struct mcclDevWorkColl& w) {
  RedOp op;
  op.arg = 0;
  if constexpr (mcclOpUsesArg<RedOp>::value) {
    op.arg = w.redOpArg;
    if (w.redOpArgIsPtr) {
      uint64_t bits = 0;
      memcpy(&bits, (const void*)(uintptr_t)w.redOpArg, sizeof(T));
      op.arg = bits;
    }
  }
  return op;
}

// The work of the launch's line (LL) or element (SIMPLE) g: the works are in order of firstLine, and a
// thread's g only grows, so the search goes on from the last answer.
__device__ __forceinline__ int mcclOneShotWorkOf(const struct mcclDevWorkColl* works, int nWorks, int64_t g,
                                                 int64_t unit, int w) {
  while (w + 1 < nWorks && g >= (int64_t)works[w + 1].firstLine * unit) w++;
  return w;
}

// ---- one-shot (LL push) ---------------------------------------------------------------------------
// Each rank writes its input, through the operation's pre step (PreMulSum's own scalar), 8 bytes per
// 16-byte line with the call's flag in both halves, into every peer's scratch at [parity][its rank];
// then each rank waits for every peer's lines in its own scratch and reduces all inputs in rank order
// (so every rank gets the same bits). No fence and no barrier: data and its ready flag travel together. Two parities:
// a rank can start launch k+1 only after every peer has started launch k (it needed their lines), so
// no line of launch k-1 is still being read when launch k+1 overwrites its parity.
__device__ __forceinline__ uint32_t mcclSymFlag(uint64_t seq) {
  return (uint32_t)seq != 0 ? (uint32_t)seq : 1u;  // never 0 (a fresh line); launches k and k-2 differ
}
__device__ __forceinline__ union mcclLLFifoLine* mcclOneShotLines(char* signals, int parity, int src) {
  char* base = signals + sizeof(struct mcclSymSignals);
  return (union mcclLLFifoLine*)base + ((size_t)parity * MCCL_SYM_MAX_RANKS + src) * MCCL_ONESHOT_LINES;
}

// Line g of the launch seen from its work w: the work's line index and how many elements it holds (a
// whole word's, or what is left of the work).
template <typename T>
__device__ __forceinline__ int mcclOneShotLineElts(const struct mcclDevWorkColl& w, int g, int* l) {
  constexpr int EltPerLine = 8 / sizeof(T);
  *l = g - (int)w.firstLine;
  const int left = (int)w.count - *l * EltPerLine;
  return left < EltPerLine ? left : EltPerLine;
}

// One-shot's pull: each trip reads lines base + u * nthreads (u < U) of R ranks at a time (a peer's
// from this rank's scratch, its own from the input), all loads issued before any is waited on, so a
// trip waits about one latency per R ranks (waiting on each peer before loading the next would cost one
// latency per peer). Lines whose flags are not the launch's yet are
// re-read together, then the ranks are reduced in rank order.
template <typename T, typename RedOp, int R, int U>
__device__ __forceinline__ void mcclOneShotPull(const struct mcclDevKernelArgsStorage& p, uint32_t flag, int parity,
                                                int lo, int hi, int tid, int nthreads, int& flags) {
  constexpr int EltPerLine = 8 / sizeof(T);
  const struct mcclDevKernelArgs& a = p.args;
  const struct mcclDevWorkColl* works = (const struct mcclDevWorkColl*)p.works;
  const int nranks = a.nRanks;
  int wCursor = 0;
  for (int base = lo + tid; base < hi && !flags; base += nthreads * U) {
    int wOf[U];
#pragma unroll
    for (int u = 0; u < U; u++) wOf[u] = wCursor = mcclOneShotWorkOf(works, a.nColl, base + u * nthreads, 1, wCursor);
    uint64_t acc[U] = {};
    for (int p0 = 0; p0 < nranks; p0 += R) {
      uint64_t v0[R][U], v1[R][U];
      uint32_t pending = 0;  // bit i * U + u: line u of rank p0 + i has not shown the launch's flag yet
#pragma unroll
      for (int i = 0; i < R; i++) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int r = p0 + i, g = base + u * nthreads;
          v0[i][u] = v1[i][u] = 0;
          if (r >= nranks || g >= hi) continue;
          if (r == a.rank) {
            int l;
            const int n = mcclOneShotLineElts<T>(works[wOf[u]], g, &l);
            v0[i][u] = mcclLoadWord((const T*)works[wOf[u]].sendbuff + l * EltPerLine, n);
          } else {
            load128((const uint64_t*)(mcclOneShotLines(a.signalPeers[a.rank], parity, r) + g), v0[i][u], v1[i][u]);
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
              load128((const uint64_t*)(mcclOneShotLines(a.signalPeers[a.rank], parity, p0 + i) + base + u * nthreads),
                      v0[i][u], v1[i][u]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < R; i++) {
        const int r = p0 + i;
        if (r >= nranks) break;
#pragma unroll
        for (int u = 0; u < U; u++) {
          if (base + u * nthreads >= hi) continue;
          // The peers' lines arrive scaled by their owners; this rank's own input is scaled here.
          const RedOp op = mcclOneShotOp<T, RedOp>(works[wOf[u]]);
          const uint64_t w =
              r == a.rank ? mcclPreWord<T, RedOp>(op, v0[i][u]) : (v0[i][u] & 0xffffffffull) | (v1[i][u] << 32);
          acc[u] = r == 0 ? w : mcclReduceWord<T, RedOp>(op, acc[u], w);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int g = base + u * nthreads;
      if (g >= hi) continue;
      const struct mcclDevWorkColl& w = works[wOf[u]];
      int l;
      const int n = mcclOneShotLineElts<T>(w, g, &l);
      mcclStoreWord((T*)w.recvbuff + l * EltPerLine, mcclPostWord<T, RedOp>(mcclOneShotOp<T, RedOp>(w), acc[u]), n);
    }
  }
}

template <typename T, typename RedOp>
__device__ __forceinline__ bool mcclRunOneShotLL(const struct mcclDevKernelArgsStorage& p, int tid, int nthreads) {
  constexpr int EltPerLine = 8 / sizeof(T);
  const struct mcclDevKernelArgs& a = p.args;
  const struct mcclDevWorkColl* works = (const struct mcclDevWorkColl*)p.works;
  const struct mcclDevWorkColl& last = works[a.nColl - 1];
  // Lines per thread per trip of the push: their loads are all issued before the first is used, so a
  // thread waits for one memory latency per trip, not one per line (the accesses are volatile asm, which
  // the compiler keeps in program order: a load after a store waits for nothing but is issued late).
  // The pull takes its own lines and ranks per trip (mcclOneShotPull).
  constexpr int U = 4;
  // At most MCCL_ONESHOT_MAX_BYTES of the launch's works together: 32-bit index math.
  const int nlines = (int)last.firstLine + mcclDivUp((int)last.count, EltPerLine);
  int64_t lo64, hi64;
  mcclEvenPart(0, nlines, gridDim.x, blockIdx.x, 1, lo64, hi64);
  const int lo = (int)lo64, hi = (int)hi64;
  // Every thread reads the launch's number itself (no barrier before the first store).
  const uint64_t seq = a.seqCounters[blockIdx.x] + 1;
  const uint32_t flag = mcclSymFlag(seq);
  const int parity = (int)(seq & 1);
  int flags = 0;
  // Push: U lines per thread per trip, to every peer.
  int wCursor = 0;
  for (int base = lo + tid; base < hi; base += (int)nthreads * U) {
    uint64_t w[U] = {};
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int g = base + (int)u * nthreads;
      if (g >= hi) continue;
      wCursor = mcclOneShotWorkOf(works, a.nColl, g, 1, wCursor);
      int l;
      const int n = mcclOneShotLineElts<T>(works[wCursor], g, &l);
      // Scaled here, by the rank that owns the input: a PreMulSum scalar may differ between ranks.
      w[u] = mcclPreWord<T, RedOp>(mcclOneShotOp<T, RedOp>(works[wCursor]),
                                   mcclLoadWord((const T*)works[wCursor].sendbuff + l * EltPerLine, n));
    }
    for (int r = 0; r < a.nRanks; r++) {
      if (r == a.rank) continue;
      union mcclLLFifoLine* dst = mcclOneShotLines(a.signalPeers[r], parity, a.rank);
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int g = base + (int)u * nthreads;
        if (g < hi)
          store128((uint64_t*)(dst + g), (w[u] & 0xffffffffull) | ((uint64_t)flag << 32),
                   (w[u] >> 32) | ((uint64_t)flag << 32));
      }
    }
  }
  // Pull what the peers pushed here, reduce in rank order, write the result: 2 ranks take both ranks'
  // lines, two each, per trip; more ranks four ranks' lines, one each (eight ranks' at once made ptxas
  // spill under the 640-thread launch bound for 8-byte and 1-byte types).
  if (a.nRanks <= 2)
    mcclOneShotPull<T, RedOp, 2, 2>(p, flag, parity, lo, hi, tid, nthreads, flags);
  else
    mcclOneShotPull<T, RedOp, 4, 1>(p, flag, parity, lo, hi, tid, nthreads, flags);
  // One barrier ends the launch: after it every thread has read the counter (so it may advance, as
  // mcclSymSeqEnd) and the block agrees on an abort.
  const bool aborted = __syncthreads_or(flags) != 0;
  mcclSymSeqStore(a.seqCounters, seq, tid, nthreads);
  return aborted;
}

// ---- one-shot with SIMPLE (2 ranks) ---------------------------------------------------------------
// One-shot's exchange for sizes where a flag in every line costs more than a flag per block: each
// block stores its part of the inputs, through the operation's pre step, into the peer's scratch (the [parity]
// region after the LL lines of the peer's signal area), then publishes it as prims_simple.h's
// postPeer publishes a step: a barrier, one thread's system-scope fence, then the launch's number in
// the peer's `pushed` slot. It waits for the peer's slot the same way (one thread, acquire, then the
// barrier) and reduces the two inputs in rank order into recvbuff (every rank gets the same bits).
// On two ranks every algorithm moves the whole buffer each way over the link (two-shot half by
// loads, half by stores); this one synchronises once where two-shot waits at two barriers, and, like
// one-shot with LL, needs no window for the user's buffers. Parities as with LL.
__device__ __forceinline__ char* mcclOneShotScratch(char* signals, int parity) {
  return signals + MCCL_SIGNAL_ZEROED_BYTES + (size_t)parity * MCCL_ONESHOT_SIMPLE_MAX_BYTES;
}
template <typename T, typename RedOp>
__device__ __forceinline__ bool mcclRunOneShotSimple(const struct mcclDevKernelArgsStorage& p, int tid, int nthreads) {
  const struct mcclDevKernelArgs& a = p.args;
  const struct mcclDevWorkColl* works = (const struct mcclDevWorkColl*)p.works;
  const int nWorks = a.nColl;
  const int64_t q = 16 / (int64_t)sizeof(T);  // a work starts at a 16-byte pack of the scratch (firstLine)
  const int64_t total = (int64_t)works[nWorks - 1].firstLine * q + (int64_t)works[nWorks - 1].count;
  int64_t lo, hi;  // this block's part of the launch's elements, whole 16-byte packs but the last
  mcclEvenPart(0, total, gridDim.x, blockIdx.x, q, lo, hi);
  const int peer = 1 - a.rank;
  const uint64_t seq = a.seqCounters[blockIdx.x] + 1;  // every thread reads it (no barrier first)
  const int parity = (int)(seq & 1);
  T* theirs = (T*)mcclOneShotScratch(a.signalPeers[peer], parity);
  for (int w = 0; w < nWorks; w++) {  // each work's part of [lo, hi)
    const int64_t first = (int64_t)works[w].firstLine * q, end = first + (int64_t)works[w].count;
    const int64_t from = lo > first ? lo : first, to = hi < end ? hi : end;
    if (to <= from) continue;
    void* src[1] = {(void*)((const T*)works[w].sendbuff + (from - first))};
    void* dst[1] = {(void*)(theirs + from)};
    // The input scaled by this rank's own PreMulSum scalar (the peer's may differ); no post step.
    mcclReduceCopy<4, T, RedOp, 1, 1, 1>(tid, nthreads, mcclOneShotOp<T, RedOp>(works[w]), false, src, dst, to - from);
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
  if (aborted) return true;
  T* mine = (T*)mcclOneShotScratch(a.signalPeers[a.rank], parity);
  for (int w = 0; w < nWorks; w++) {
    const int64_t first = (int64_t)works[w].firstLine * q, end = first + (int64_t)works[w].count;
    const int64_t from = lo > first ? lo : first, to = hi < end ? hi : end;
    if (to <= from) continue;
    void* in = (void*)((const T*)works[w].sendbuff + (from - first));
    void* src[2] = {a.rank == 0 ? in : (void*)(mine + from), a.rank == 0 ? (void*)(mine + from) : in};
    void* dst[1] = {(void*)((T*)works[w].recvbuff + (from - first))};
    // Rank order; only this rank's own input (source `rank`) is scaled here, the peer's came scaled.
    const RedOp op = mcclOneShotOp<T, RedOp>(works[w]);
    if (a.rank == 0)
      mcclReduceCopy<4, T, RedOp, 2, 1, 1>(tid, nthreads, op, true, src, dst, to - from);
    else
      mcclReduceCopy<4, T, RedOp, 2, 1, 2>(tid, nthreads, op, true, src, dst, to - from);
  }
  return false;
}

// A one-shot kernel's body: the works of a launch share one operation (the planner groups them so);
// PDL's wait first (mcclDevLaunchDependent launches it as a dependent grid).
template <typename T, bool Simple>
__device__ __forceinline__ void mcclOneShotMain(const struct mcclDevKernelArgsStorage& p, int tid, int nthreads) {
  mcclDependentGridBegin();
  const bool aborted = mcclWithDevRedOp<T>(((const struct mcclDevWorkColl*)p.works)[0].redOp, [&](auto redOp) {
    if constexpr (Simple)
      return mcclRunOneShotSimple<T, decltype(redOp)>(p, tid, nthreads);
    else
      return mcclRunOneShotLL<T, decltype(redOp)>(p, tid, nthreads);
  });
  mcclReportAbort(p.args.status, aborted, tid);
}

#endif
