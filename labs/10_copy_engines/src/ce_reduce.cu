// Lab 10: the small kernel of the copy-engine-assisted allreduce (ce_allreduce.c). It runs on the caller's
// stream beside the copies on two more streams of the communicator. For each round: wait until every peer's
// engines have put their chunk of this rank's part into its output (one flag per peer and round, written by the
// peer's stream), reduce them with this rank's own input into its part, then say so twice: to this rank's
// all-gather stream (the reduced part may go out) and to every peer (its chunk has been read: its engines may
// overwrite it with the reduced part of its own). Block g takes slice g of every round; block 0 signals for all.
#include "ce_allreduce.h"
#include "mccl_prims.h"
#include "device/reduce_kernel.cuh"

// How many spins on a flag between two reads of the abort flag.
#define CE_AR_SPINS_PER_ABORT_CHECK 1024

__device__ __forceinline__ struct mcclSymSignals* ceSignals(const struct mcclCeArArgs& a, int r) {
  return (struct mcclSymSignals*)a.signals[r];
}

// Wait until *flag reaches v (cyclic); true once the abort flag is set.
__device__ __forceinline__ bool ceWaitFlag(const struct mcclCeArArgs& a, uint64_t* flag, uint64_t v) {
  for (int spins = 0; (int64_t)(ld_acquire_sys_global(flag) - v) < 0; spins++) {
    mcclSpinHint();
    if (spins % CE_AR_SPINS_PER_ABORT_CHECK == CE_AR_SPINS_PER_ABORT_CHECK - 1 && ld_volatile_global(a.abortFlag) != 0)
      return true;
  }
  return false;
}

// Every peer's chunk of round `v - base` has arrived (this thread waits for peer `tid`); false once aborted.
__device__ __forceinline__ bool ceWaitArrived(const struct mcclCeArArgs& a, int slot, uint64_t v) {
  const int tid = threadIdx.x;
  bool aborted = false;
  if (tid < a.nRanks && tid != a.rank) aborted = ceWaitFlag(a, &ceSignals(a, a.rank)->ceArArrived[tid][slot], v);
  return !__syncthreads_or(aborted);
}

// Packs of 16 bytes a thread keeps in flight per trip: the kernel has a few SMs for the whole buffer, so each
// of them needs many loads outstanding to keep up with the engines.
#define CE_AR_UNROLL 4

template <typename T>
__device__ __forceinline__ mcclPack<T> loadPack(const T* p) {
  mcclPack<T> x;
  x.load(p);
  return x;
}

// Rank s's element i: this rank's own input, or what peer s's engines put here.
template <typename T>
__device__ __forceinline__ const T* ceSrc(const struct mcclCeArArgs& a, const T* mine, const char* const* others,
                                          int s) {
  return s == a.rank ? mine : (const T*)others[s];
}

// out[i] = op over ranks, in rank order, of rank s's element i, for i in [lo, hi) (one element per thread).
template <typename T, typename RedOp>
__device__ __forceinline__ void ceReduceElts(const struct mcclCeArArgs& a, RedOp op, T* out, const T* mine,
                                             const char* const* others, size_t lo, size_t hi) {
  for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    T acc = op.pre(mcclLoadElt(ceSrc(a, mine, others, 0) + i));
    for (int s = 1; s < a.nRanks; s++) acc = op.apply(acc, op.pre(mcclLoadElt(ceSrc(a, mine, others, s) + i)));
    out[i] = op.post(acc);
  }
}

// The same over [lo, hi) in 16-byte packs (lab 06's reduceCopy body, with every rank's source), where every
// pointer is at the same offset modulo 16: the elements before the first whole pack and after the last go one
// by one. Elsewhere (a user's buffers at offsets that disagree) every element goes one by one.
template <typename T, typename RedOp>
__device__ __forceinline__ void ceReduce(const struct mcclCeArArgs& a, RedOp op, T* out, const T* mine,
                                         const char* const* others, size_t lo, size_t hi) {
  typedef mcclPack<T> Pack;
  uintptr_t disagree = 0;
  for (int s = 0; s < a.nRanks; s++) disagree |= (uintptr_t)ceSrc(a, mine, others, s) ^ (uintptr_t)out;
  if ((disagree & 15) != 0 || hi <= lo) {
    ceReduceElts<T>(a, op, out, mine, others, lo, hi);
    return;
  }
  const size_t headElts = ((16 - ((uintptr_t)(out + lo) & 15)) & 15) / sizeof(T);
  const size_t head = headElts < hi - lo ? headElts : hi - lo, from = lo + head;
  const size_t nPacks = (hi - from) / Pack::N, packsEnd = from + nPacks * Pack::N;
  for (size_t base = threadIdx.x; base < nPacks; base += (size_t)blockDim.x * CE_AR_UNROLL) {
    Pack acc[CE_AR_UNROLL];
#pragma unroll
    for (int u = 0; u < CE_AR_UNROLL; u++) {
      const size_t p = base + (size_t)u * blockDim.x;
      if (p < nPacks) acc[u] = mcclPrePack<T>(op, loadPack<T>(ceSrc(a, mine, others, 0) + from + p * Pack::N));
    }
    for (int s = 1; s < a.nRanks; s++) {
#pragma unroll
      for (int u = 0; u < CE_AR_UNROLL; u++) {
        const size_t p = base + (size_t)u * blockDim.x;
        if (p < nPacks)
          acc[u] = mcclApplyPack<T>(
              op, acc[u], mcclPrePack<T>(op, loadPack<T>(ceSrc(a, mine, others, s) + from + p * Pack::N)));
      }
    }
#pragma unroll
    for (int u = 0; u < CE_AR_UNROLL; u++) {
      const size_t p = base + (size_t)u * blockDim.x;
      if (p < nPacks) mcclPostPack<T>(op, acc[u]).store(out + from + p * Pack::N);
    }
  }
  ceReduceElts<T>(a, op, out, mine, others, lo, from);
  ceReduceElts<T>(a, op, out, mine, others, packsEnd, hi);
}

template <typename T, typename RedOp>
__device__ __forceinline__ void ceArMain(const struct mcclCeArArgs& a, RedOp op) {
  const int n = a.nRanks, me = a.rank, g = blockIdx.x, G = gridDim.x;
  const int nRounds = a.nFull + (a.lastChunk > 0 ? 1 : 0);
  const char* others[MCCL_SYM_MAX_RANKS];
  for (int r = 0; r < nRounds; r++) {
    const int slot = r % MCCL_CE_AR_SLOTS;
    const uint64_t v = a.base + (uint64_t)r;
    if (!ceWaitArrived(a, slot, v)) return;
    // The tail, before round 0 is signalled: once every peer has arrived, their inputs are ready, and they keep
    // them until this rank's last sync, which comes after that signal.
    if (r == 0 && g == 0 && a.tailBytes > 0) {
      for (int s = 0; s < n; s++) others[s] = a.peerSend[s] + a.tailOffset;
      ceReduce<T>(a, op, (T*)(a.recv + a.tailOffset), (const T*)(a.send + a.tailOffset), others, 0,
                  a.tailBytes / sizeof(T));
    }
    const uint64_t len = r < a.nFull ? a.chunk : a.lastChunk;
    const uint64_t at = (uint64_t)(r < a.nFull ? r : a.nFull) * (uint64_t)n * a.chunk;
    for (int s = 0; s < n; s++) others[s] = a.recv + at + (uint64_t)s * len;  // peer s's chunk, as it arrived
    const size_t count = len / sizeof(T), per = (count + G - 1) / G;
    const size_t lo = (size_t)g * per < count ? (size_t)g * per : count, hi = lo + per < count ? lo + per : count;
    ceReduce<T>(a, op, (T*)(a.recv + at + (uint64_t)me * len), (const T*)(a.send + at + (uint64_t)me * len), others, lo,
                hi);
    __syncthreads();
    // Block 0 speaks for the grid: once every other block has said it reduced its slice (a flag each, in this
    // rank's memory), one flag to this rank's all-gather stream and one to each peer, so that a stream waits on
    // one flag per rank and round, not one per block (each wait is a memory operation of its own).
    bool aborted = false;
    if (g > 0 && threadIdx.x == 0) {
      __threadfence_system();  // the block's stores before its flag: block 0's flags vouch for them
      st_release_sys_global(&ceSignals(a, me)->ceArReduced[g][slot], v);
    } else if (g == 0 && threadIdx.x > 0 && (int)threadIdx.x < G) {
      aborted = ceWaitFlag(a, &ceSignals(a, me)->ceArReduced[threadIdx.x][slot], v);
    }
    if (g == 0) {
      if (__syncthreads_or(aborted)) return;
      if (threadIdx.x == 0) {
        __threadfence_system();  // every block's stores before the grid's flags, for the engines and the peers
        st_release_sys_global(&ceSignals(a, me)->ceArReduced[0][slot], v);
        for (int q = 0; q < n; q++)
          if (q != me) st_release_sys_global(&ceSignals(a, q)->ceArConsumed[me][slot], v);
      }
    }
  }
}

template <typename T>
__device__ __forceinline__ void ceArKernel(const struct mcclCeArArgs& a) {
  mcclWithDevRedOp<T>(a.redOp, [&](auto op) {
    op.arg = a.redOpArg;
    ceArMain<T>(a, op);
  });
}

#define CE_AR_KERNEL(suffix, T)                                    \
  extern "C" __global__ void __launch_bounds__(MCCL_CE_AR_THREADS) \
      mcclCeReduceKernel_##suffix(struct mcclCeArArgs args) {      \
    ceArKernel<T>(args);                                           \
  }                                                                \
  MCCL_KERNEL_REGISTER(mcclCeReduceKernel_##suffix);
CE_AR_KERNEL(i8, int8_t)
CE_AR_KERNEL(u8, uint8_t)
CE_AR_KERNEL(i32, int32_t)
CE_AR_KERNEL(u32, uint32_t)
CE_AR_KERNEL(i64, int64_t)
CE_AR_KERNEL(u64, uint64_t)
CE_AR_KERNEL(f16, __half)
CE_AR_KERNEL(f32, float)
CE_AR_KERNEL(f64, double)
CE_AR_KERNEL(bf16, __nv_bfloat16)
CE_AR_KERNEL(f8e4m3, __nv_fp8_e4m3)
CE_AR_KERNEL(f8e5m2, __nv_fp8_e5m2)
