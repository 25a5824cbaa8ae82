// Lab 07 device code: the one-shot kernels (NCCL 2.28.9 src/device/symmetric/all_reduce.cuh, its AGxLL_R
// kernel for LL; all_gather.cuh and reduce_scatter.cuh's LL kernels for the other two): AllReduce with LL or
// SIMPLE, AllGather and ReduceScatter with LL, kernels of their own as NCCL's symmetric kernels are apart from its
// generic one: a small body, without the ring's registers and stack, for launches whose whole cost is
// latency. Everything they read of the launch comes straight from the kernel's parameter (constant
// memory on the GPU), with no copy into shared memory and no barrier before the first store to a peer.
//
// A launch carries one or more one-shot works of one function, type and operation (a group's, planned together),
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
// 16-byte line with the call's flag in both halves, into every peer's scratch at [parity][its rank]
// (ReduceScatter: block p of its input into rank p's); then each rank waits for every peer's lines in its own
// scratch and reduces all inputs in rank order (so every rank gets the same bits), or, for AllGather, stores each
// rank's lines into that rank's block of its output. No fence and no barrier: data and its ready flag travel
// together. Two parities:
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

// Where this rank's own input of line g's work starts: AllReduce's and AllGather's whole sendbuff, ReduceScatter's
// block `dest` (the block it sends to rank dest, or reduces itself when dest is this rank).
template <typename T>
__device__ __forceinline__ const T* mcclOneShotInput(const struct mcclDevWorkColl& w, int dest) {
  return (const T*)w.sendbuff + (w.func == mcclFuncReduceScatter ? (int64_t)dest * (int64_t)w.count : 0);
}

// One trip's lines from R ranks at a time (ranks p0 .. p0 + R - 1): lines base + u * nthreads (u < U), a peer's
// from this rank's scratch, this rank's own from its input; all loads issued before any is waited on, so a trip
// waits about one latency per R ranks (waiting on each peer before loading the next would cost one latency per
// peer). Lines whose flags are not the launch's yet are re-read together. On return v0/v1 hold every line (v0 the
// whole word of this rank's own), unless the abort was seen.
template <typename T, int R, int U>
__device__ __forceinline__ void mcclOneShotLoadLines(const struct mcclDevKernelArgsStorage& p, uint32_t flag,
                                                     int parity, int p0, int base, int hi, int nthreads,
                                                     const int (&wOf)[U], uint64_t (&v0)[R][U], uint64_t (&v1)[R][U],
                                                     int& flags) {
  constexpr int EltPerLine = 8 / sizeof(T);
  const struct mcclDevKernelArgs& a = p.args;
  const struct mcclDevWorkColl* works = (const struct mcclDevWorkColl*)p.works;
  uint32_t pending = 0;  // bit i * U + u: line u of rank p0 + i has not shown the launch's flag yet
#pragma unroll
  for (int i = 0; i < R; i++) {
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int r = p0 + i, g = base + u * nthreads;
      v0[i][u] = v1[i][u] = 0;
      if (r >= a.nRanks || g >= hi) continue;
      if (r == a.rank) {
        int l;
        const int n = mcclOneShotLineElts<T>(works[wOf[u]], g, &l);
        v0[i][u] = mcclLoadWord(mcclOneShotInput<T>(works[wOf[u]], a.rank) + l * EltPerLine, n);
      } else {
        load128((const uint64_t*)(mcclOneShotLines(a.signalPeers[a.rank], parity, r) + g), v0[i][u], v1[i][u]);
        pending |= 1u << (i * U + u);
      }
    }
  }
  // Check every pending line, then re-read all that are still pending at once: a round waits one latency however
  // many peers are late.
  struct mcclSpin spins;
  while (pending) {
#pragma unroll
    for (int i = 0; i < R; i++) {
#pragma unroll
      for (int u = 0; u < U; u++) {
        if ((pending >> (i * U + u) & 1) && (uint32_t)(v0[i][u] >> 32) == flag && (uint32_t)(v1[i][u] >> 32) == flag)
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
  for (int i = 0; i < R; i++) {  // a peer's line to its data word (this rank's own is one already)
#pragma unroll
    for (int u = 0; u < U; u++)
      if (p0 + i != a.rank) v0[i][u] = (v0[i][u] & 0xffffffffull) | (v1[i][u] << 32);
  }
}

// One-shot's pull for AllReduce and ReduceScatter: U lines per thread per trip from R ranks at a time
// (mcclOneShotLoadLines), reduced in rank order (so every rank gets the same bits), the result written.
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
      mcclOneShotLoadLines<T, R, U>(p, flag, parity, p0, base, hi, nthreads, wOf, v0, v1, flags);
#pragma unroll
      for (int i = 0; i < R; i++) {
        const int r = p0 + i;
        if (r >= nranks) break;
#pragma unroll
        for (int u = 0; u < U; u++) {
          if (base + u * nthreads >= hi) continue;
          // The peers' lines arrive scaled by their owners; this rank's own input is scaled here.
          const RedOp op = mcclOneShotOp<T, RedOp>(works[wOf[u]]);
          const uint64_t w = r == a.rank ? mcclPreWord<T, RedOp>(op, v0[i][u]) : v0[i][u];
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

// One-shot's pull for AllGather (bytes: a 1-byte T): every rank's lines, its own from its input, each stored into
// the rank's block of recvbuff. Nothing is reduced, so no operation.
template <typename T, int R, int U>
__device__ __forceinline__ void mcclOneShotGather(const struct mcclDevKernelArgsStorage& p, uint32_t flag, int parity,
                                                  int lo, int hi, int tid, int nthreads, int& flags) {
  constexpr int EltPerLine = 8 / sizeof(T);
  const struct mcclDevKernelArgs& a = p.args;
  const struct mcclDevWorkColl* works = (const struct mcclDevWorkColl*)p.works;
  int wCursor = 0;
  for (int base = lo + tid; base < hi && !flags; base += nthreads * U) {
    int wOf[U];
#pragma unroll
    for (int u = 0; u < U; u++) wOf[u] = wCursor = mcclOneShotWorkOf(works, a.nColl, base + u * nthreads, 1, wCursor);
    for (int p0 = 0; p0 < a.nRanks && !flags; p0 += R) {
      uint64_t v0[R][U], v1[R][U];
      mcclOneShotLoadLines<T, R, U>(p, flag, parity, p0, base, hi, nthreads, wOf, v0, v1, flags);
#pragma unroll
      for (int i = 0; i < R; i++) {
        const int r = p0 + i;
        if (r >= a.nRanks) break;
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int g = base + u * nthreads;
          if (g >= hi) continue;
          const struct mcclDevWorkColl& w = works[wOf[u]];
          int l;
          const int n = mcclOneShotLineElts<T>(w, g, &l);
          mcclStoreWord((T*)w.recvbuff + (int64_t)r * (int64_t)w.count + l * EltPerLine, v0[i][u], n);
        }
      }
    }
  }
}

// One-shot with LL lines: AllReduce, ReduceScatter, or AllGather (Gather: a 1-byte T; its works move bytes).
// Each rank pushes its lines to every peer (ReduceScatter: block r of its input to rank r), then pulls what
// its peers pushed here.
template <typename T, typename RedOp, bool Gather>
__device__ __forceinline__ bool mcclRunOneShotLL(const struct mcclDevKernelArgsStorage& p, int tid, int nthreads) {
  constexpr int EltPerLine = 8 / sizeof(T);
  const struct mcclDevKernelArgs& a = p.args;
  const struct mcclDevWorkColl* works = (const struct mcclDevWorkColl*)p.works;
  const struct mcclDevWorkColl& last = works[a.nColl - 1];
  // The launch's works are all of one function (the planner groups them so).
  const bool scatter = works[0].func == mcclFuncReduceScatter;
  // Lines per thread per trip of the push: their loads are all issued before the first is used, so a
  // thread waits for one memory latency per trip, not one per line (the accesses are volatile asm, which
  // the compiler keeps in program order: a load after a store waits for nothing but is issued late).
  // The pull takes its own lines and ranks per trip (mcclOneShotLoadLines).
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
  // Push: U lines per thread per trip, to every peer, starting with the next rank (the peers' scratch fills
  // evenly); ReduceScatter loads each peer's own block, the others load once for all.
  int wCursor = 0;
  for (int base = lo + tid; base < hi; base += (int)nthreads * U) {
    int wOf[U];
#pragma unroll
    for (int u = 0; u < U; u++) wOf[u] = wCursor = mcclOneShotWorkOf(works, a.nColl, base + u * nthreads, 1, wCursor);
    uint64_t w[U] = {};
    for (int k = 1; k < a.nRanks; k++) {
      const int r = a.rank + k < a.nRanks ? a.rank + k : a.rank + k - a.nRanks;
      if (k == 1 || scatter) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int g = base + (int)u * nthreads;
          if (g >= hi) continue;
          int l;
          const int n = mcclOneShotLineElts<T>(works[wOf[u]], g, &l);
          const uint64_t word = mcclLoadWord(mcclOneShotInput<T>(works[wOf[u]], r) + l * EltPerLine, n);
          // Scaled here, by the rank that owns the input: a PreMulSum scalar may differ between ranks.
          if constexpr (Gather)
            w[u] = word;
          else
            w[u] = mcclPreWord<T, RedOp>(mcclOneShotOp<T, RedOp>(works[wOf[u]]), word);
        }
      }
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
  // Pull what the peers pushed here: 2 ranks take both ranks' lines, two each, per trip; more ranks four ranks'
  // lines, one each (eight ranks' at once made ptxas spill under the 640-thread launch bound for 8-byte and
  // 1-byte types).
  if constexpr (Gather) {
    if (a.nRanks <= 2)
      mcclOneShotGather<T, 2, 2>(p, flag, parity, lo, hi, tid, nthreads, flags);
    else
      mcclOneShotGather<T, 4, 1>(p, flag, parity, lo, hi, tid, nthreads, flags);
  } else {
    if (a.nRanks <= 2)
      mcclOneShotPull<T, RedOp, 2, 2>(p, flag, parity, lo, hi, tid, nthreads, flags);
    else
      mcclOneShotPull<T, RedOp, 4, 1>(p, flag, parity, lo, hi, tid, nthreads, flags);
  }
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
  const struct mcclDevWorkColl& w0 = ((const struct mcclDevWorkColl*)p.works)[0];
  bool aborted;
  // AllGather moves bytes: the planner launches it on a 1-byte type's kernel, and it reduces nothing.
  if constexpr (!Simple && sizeof(T) == 1) {
    if (w0.func == mcclFuncAllGather) {
      aborted = mcclRunOneShotLL<T, FuncSum<T>, true>(p, tid, nthreads);
      mcclReportAbort(p.args.status, aborted, tid);
      return;
    }
  }
  aborted = mcclWithDevRedOp<T>(w0.redOp, [&](auto redOp) {
    if constexpr (Simple)
      return mcclRunOneShotSimple<T, decltype(redOp)>(p, tid, nthreads);
    else
      return mcclRunOneShotLL<T, decltype(redOp), false>(p, tid, nthreads);
  });
  mcclReportAbort(p.args.status, aborted, tid);
}

#endif
