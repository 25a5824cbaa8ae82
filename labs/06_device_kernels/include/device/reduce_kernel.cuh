// Lab 06 device code: the reduction operations and the copy/reduce loop the workers run
// (NCCL 2.28.9 src/device/reduce_kernel.h for the operations, common_kernel.h's reduceCopy for the
// loop). Every operation is a small class: pre(x) is what a rank does to its own input before it
// joins the reduction (PreMulSum multiplies it by the operation's scalar, as NCCL's FuncPreMulSum),
// apply(a, b) combines two elements, post(x) is what postOp does to the final value (SumPostDiv
// divides by the number of contributions, as NCCL's FuncSumPostDiv). Integers wrap (computed
// unsigned), half and bfloat16 compute in float and round once, fp8 computes in half as NCCL's.
#ifndef MCCL_DEVICE_REDUCE_KERNEL_CUH_
#define MCCL_DEVICE_REDUCE_KERNEL_CUH_

#include <stdint.h>
#include <string.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

// ---- element arithmetic per type ----------------------------------------------------------------
template <typename T>
struct mcclArith;

template <typename T, typename U>  // integers: wrap like the hardware, never signed overflow
struct mcclIntArith {
  static __device__ __forceinline__ T add(T a, T b) { return (T)(U)((U)a + (U)b); }
  static __device__ __forceinline__ T mul(T a, T b) { return (T)(U)((U)a * (U)b); }
  static __device__ __forceinline__ T max(T a, T b) { return a < b ? b : a; }
  static __device__ __forceinline__ T min(T a, T b) { return a < b ? a : b; }
  static __device__ __forceinline__ T div(T a, uint64_t n) { return (T)(a / (T)n); }
};
template <>
struct mcclArith<int8_t> : mcclIntArith<int8_t, uint32_t> {};
template <>
struct mcclArith<uint8_t> : mcclIntArith<uint8_t, uint32_t> {};
template <>
struct mcclArith<int32_t> : mcclIntArith<int32_t, uint32_t> {};
template <>
struct mcclArith<uint32_t> : mcclIntArith<uint32_t, uint32_t> {};
template <>
struct mcclArith<int64_t> : mcclIntArith<int64_t, uint64_t> {};
template <>
struct mcclArith<uint64_t> : mcclIntArith<uint64_t, uint64_t> {};

template <typename T>
struct mcclFloatArith {
  static __device__ __forceinline__ T add(T a, T b) { return a + b; }
  static __device__ __forceinline__ T mul(T a, T b) { return a * b; }
  static __device__ __forceinline__ T max(T a, T b) { return a < b ? b : a; }
  static __device__ __forceinline__ T min(T a, T b) { return a < b ? a : b; }
  static __device__ __forceinline__ T div(T a, uint64_t n) { return a / (T)n; }
};
template <>
struct mcclArith<float> : mcclFloatArith<float> {};
template <>
struct mcclArith<double> : mcclFloatArith<double> {};

// 16-bit floats: convert to float, compute, round back to nearest (what NCCL's generic path does
// on architectures without native half arithmetic).
template <typename T, typename Conv>
struct mcclHalfArith {
  static __device__ __forceinline__ T add(T a, T b) { return Conv::from(Conv::to(a) + Conv::to(b)); }
  static __device__ __forceinline__ T mul(T a, T b) { return Conv::from(Conv::to(a) * Conv::to(b)); }
  static __device__ __forceinline__ T max(T a, T b) { return Conv::to(a) < Conv::to(b) ? b : a; }
  static __device__ __forceinline__ T min(T a, T b) { return Conv::to(a) < Conv::to(b) ? a : b; }
  static __device__ __forceinline__ T div(T a, uint64_t n) { return Conv::from(Conv::to(a) / (float)n); }
};
struct mcclHalfConv {
  static __device__ __forceinline__ float to(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from(float x) { return __float2half_rn(x); }
};
struct mcclBf16Conv {
  static __device__ __forceinline__ float to(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
};
template <>
struct mcclArith<__half> : mcclHalfArith<__half, mcclHalfConv> {};
template <>
struct mcclArith<__nv_bfloat16> : mcclHalfArith<__nv_bfloat16, mcclBf16Conv> {};

// fp8: NCCL converts to half, computes in half and converts back with saturation (its
// SPECIALIZE_REDUCE(FuncSum, __nv_fp8_e4m3, ...) uses __hadd on halves). A product or sum of two fp8
// values is exact in float, so rounding it to half once gives half's own result, then fp8's.
template <typename T>
struct mcclFp8Arith {
  static __device__ __forceinline__ float f(T x) { return __half2float(__half(x)); }
  static __device__ __forceinline__ T r(float x) { return T(__float2half_rn(x)); }
  static __device__ __forceinline__ T add(T a, T b) { return r(f(a) + f(b)); }
  static __device__ __forceinline__ T mul(T a, T b) { return r(f(a) * f(b)); }
  static __device__ __forceinline__ T max(T a, T b) { return f(a) < f(b) ? b : a; }
  static __device__ __forceinline__ T min(T a, T b) { return f(a) < f(b) ? a : b; }
  static __device__ __forceinline__ T div(T a, uint64_t n) { return r(f(a) / (float)n); }
};
template <>
struct mcclArith<__nv_fp8_e4m3> : mcclFp8Arith<__nv_fp8_e4m3> {};
template <>
struct mcclArith<__nv_fp8_e5m2> : mcclFp8Arith<__nv_fp8_e5m2> {};

// ---- the operations (NCCL's FuncSum, FuncProd, FuncMinMax, FuncPreMulSum, FuncSumPostDiv) ---------
// `arg` is the operation's 64-bit argument (NCCL's redOpArg): PreMulSum's scalar, its bits in the
// low bytes as an element of T; SumPostDiv's divisor. The others ignore it.
template <typename T>
struct FuncSum {
  uint64_t arg;
  __device__ __forceinline__ T pre(T x) const { return x; }
  __device__ __forceinline__ T apply(T a, T b) const { return mcclArith<T>::add(a, b); }
  __device__ __forceinline__ T post(T x) const { return x; }
};
template <typename T>
struct FuncProd {
  uint64_t arg;
  __device__ __forceinline__ T pre(T x) const { return x; }
  __device__ __forceinline__ T apply(T a, T b) const { return mcclArith<T>::mul(a, b); }
  __device__ __forceinline__ T post(T x) const { return x; }
};
template <typename T>
struct FuncMax {
  uint64_t arg;
  __device__ __forceinline__ T pre(T x) const { return x; }
  __device__ __forceinline__ T apply(T a, T b) const { return mcclArith<T>::max(a, b); }
  __device__ __forceinline__ T post(T x) const { return x; }
};
template <typename T>
struct FuncMin {
  uint64_t arg;
  __device__ __forceinline__ T pre(T x) const { return x; }
  __device__ __forceinline__ T apply(T a, T b) const { return mcclArith<T>::min(a, b); }
  __device__ __forceinline__ T post(T x) const { return x; }
};
template <typename T>
struct FuncPreMulSum {  // each rank's input times the scalar, then the sum
  uint64_t arg;
  __device__ __forceinline__ T pre(T x) const {
    // From a local copy: the address of the member itself would keep the whole operation (and the
    // Primitives object that holds it) in local memory.
    const uint64_t bits = arg;
    T s;
    memcpy((void*)&s, &bits, sizeof(T));
    return mcclArith<T>::mul(x, s);
  }
  __device__ __forceinline__ T apply(T a, T b) const { return mcclArith<T>::add(a, b); }
  __device__ __forceinline__ T post(T x) const { return x; }
};
template <typename T>
struct FuncSumPostDiv {  // the sum, then divided by arg (the number of contributions)
  uint64_t arg;
  __device__ __forceinline__ T pre(T x) const { return x; }
  __device__ __forceinline__ T apply(T a, T b) const { return mcclArith<T>::add(a, b); }
  __device__ __forceinline__ T post(T x) const { return mcclArith<T>::div(x, arg); }
};

// Calls run(FuncX<T>()) with the functor of a device operation (enum mcclDevRedOp), its type chosen
// at run time: every kernel that reduces dispatches through here.
template <typename T, typename Run>
__device__ __forceinline__ auto mcclWithDevRedOp(int op, const Run& run) -> decltype(run(FuncSum<T>())) {
  switch (op) {
    case mcclDevSum:
      return run(FuncSum<T>());
    case mcclDevProd:
      return run(FuncProd<T>());
    case mcclDevMax:
      return run(FuncMax<T>());
    case mcclDevMin:
      return run(FuncMin<T>());
    case mcclDevPreMulSum:
      return run(FuncPreMulSum<T>());
    default:
      return run(FuncSumPostDiv<T>());
  }
}

// ---- loads and stores of elements and 16-byte packs ---------------------------------------------
// Data in a FIFO slot was written by another GPU (or the host) since this block last looked: read
// it with volatile loads so no stale L1 line is used (NCCL: "make sure reduceCopy loads data using
// volatile"). Elements go through same-sized unsigned integers so any type, half included, works.
template <int Bytes>
struct mcclUint;
template <>
struct mcclUint<1> {
  typedef uint8_t Type;
};
template <>
struct mcclUint<2> {
  typedef uint16_t Type;
};
template <>
struct mcclUint<4> {
  typedef uint32_t Type;
};
template <>
struct mcclUint<8> {
  typedef uint64_t Type;
};

template <typename T>
__device__ __forceinline__ T mcclLoadElt(const T* p) {
  typedef typename mcclUint<sizeof(T)>::Type U;
  U u = *(const volatile U*)p;
  T x;
  memcpy((void*)&x, &u, sizeof(T));
  return x;
}
template <typename T>
__device__ __forceinline__ void mcclStoreElt(T* p, T x) {
  typedef typename mcclUint<sizeof(T)>::Type U;
  U u;
  memcpy(&u, &x, sizeof(T));
  *(volatile U*)p = u;
}

// Whether an operation has a pre step (PreMulSum's scalar): the others skip it without a loop.
template <typename RedOp>
struct mcclOpHasPre {
  static constexpr bool value = false;
};
template <typename T>
struct mcclOpHasPre<FuncPreMulSum<T>> {
  static constexpr bool value = true;
};

// An 8-byte word seen as elements of T (an LL line's payload, an LL128 word): the operation's pre step, the reduction
// of two words, the post step; a word's first n elements loaded and stored (a full, aligned word in one access).
template <typename T, typename RedOp>
__device__ __forceinline__ uint64_t mcclPreWord(const RedOp& op, uint64_t a) {
  if constexpr (!mcclOpHasPre<RedOp>::value) {
    return a;
  } else {
    uint64_t r;
#pragma unroll
    for (int i = 0; i < (int)(8 / sizeof(T)); i++) {
      T x;
      memcpy((void*)&x, (const char*)&a + i * sizeof(T), sizeof(T));
      x = op.pre(x);
      memcpy((char*)&r + i * sizeof(T), (const void*)&x, sizeof(T));
    }
    return r;
  }
}
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
// ---- any-alignment accesses of up to 16 bytes ---------------------------------------------------
// A user buffer may start anywhere (a PyTorch view of a tensor is a pointer into it), so the pieces at
// its edges cannot always use one vector access. These move n bytes (1..16) at any address with the
// fewest naturally aligned accesses (an address off by 1 takes 1 + 2 + 4 + 8 + 1 bytes), the bytes in
// order in a 128-bit value (both backends are little-endian: the first byte is the lowest). Never a
// byte outside [p, p + n): the bytes around a buffer may be another buffer's, being written.
typedef unsigned __int128 mcclU128;
// n bytes at c (n and c whole words of W), every word loaded before the first is used: one trip to memory, where
// the general loop below waits for each load in turn.
template <typename W>
__device__ __forceinline__ mcclU128 mcclLoadWords(const char* c, int n) {
  constexpr int N = 16 / (int)sizeof(W);
  W w[N];
#pragma unroll
  for (int i = 0; i < N; i++) w[i] = i * (int)sizeof(W) < n ? *(const volatile W*)(c + i * sizeof(W)) : (W)0;
  mcclU128 v = 0;
#pragma unroll
  for (int i = 0; i < N; i++) v |= (mcclU128)w[i] << (8 * (int)sizeof(W) * i);
  return v;
}
// Whole 4-byte or 2-byte words (a float or bf16 buffer some elements off) go through mcclLoadWords.
__device__ inline mcclU128 mcclLoadBytes(const void* p, int n) {
  const char* c = (const char*)p;
  if ((((uintptr_t)c | (uintptr_t)n) & 3) == 0) return mcclLoadWords<uint32_t>(c, n);
  if ((((uintptr_t)c | (uintptr_t)n) & 1) == 0) return mcclLoadWords<uint16_t>(c, n);
  mcclU128 v = 0;
  for (int off = 0; off < n;) {
    const uintptr_t a = (uintptr_t)(c + off);
    const int left = n - off;
    if ((a & 7) == 0 && left >= 8) {
      v |= (mcclU128)(*(const volatile uint64_t*)(c + off)) << (8 * off);
      off += 8;
    } else if ((a & 3) == 0 && left >= 4) {
      v |= (mcclU128)(*(const volatile uint32_t*)(c + off)) << (8 * off);
      off += 4;
    } else if ((a & 1) == 0 && left >= 2) {
      v |= (mcclU128)(*(const volatile uint16_t*)(c + off)) << (8 * off);
      off += 2;
    } else {
      v |= (mcclU128)(*(const volatile uint8_t*)(c + off)) << (8 * off);
      off += 1;
    }
  }
  return v;
}
__device__ inline void mcclStoreBytes(void* p, mcclU128 v, int n) {
  char* c = (char*)p;
  for (int off = 0; off < n;) {
    const uintptr_t a = (uintptr_t)(c + off);
    const int left = n - off;
    const mcclU128 x = v >> (8 * off);
    if ((a & 7) == 0 && left >= 8) {
      *(volatile uint64_t*)(c + off) = (uint64_t)x;
      off += 8;
    } else if ((a & 3) == 0 && left >= 4) {
      *(volatile uint32_t*)(c + off) = (uint32_t)x;
      off += 4;
    } else if ((a & 1) == 0 && left >= 2) {
      *(volatile uint16_t*)(c + off) = (uint16_t)x;
      off += 2;
    } else {
      *(volatile uint8_t*)(c + off) = (uint8_t)x;
      off += 1;
    }
  }
}
// A word's first n elements (an LL line's payload): one access when whole and 8-byte aligned, two or three
// straight-line accesses when whole and only 4- or 2-byte aligned (a float or half buffer one element off, as
// nccl-tests -u 1 and views into tensors give), else the aligned pieces above.
template <typename T>
__device__ __forceinline__ uint64_t mcclLoadWord(const T* p, int n) {
  const uintptr_t a = (uintptr_t)p;
  if (n == (int)(8 / sizeof(T))) {
    if ((a & 7) == 0) return *(const uint64_t*)p;
    const char* c = (const char*)p;
    if ((a & 3) == 0) return (uint64_t)*(const uint32_t*)c | (uint64_t)*(const uint32_t*)(c + 4) << 32;
    if ((a & 1) == 0)
      return (uint64_t)*(const uint16_t*)c | (uint64_t)*(const uint32_t*)(c + 2) << 16 |
             (uint64_t)*(const uint16_t*)(c + 6) << 48;
  }
  return (uint64_t)mcclLoadBytes(p, n * (int)sizeof(T));
}
template <typename T>
__device__ __forceinline__ void mcclStoreWord(T* p, uint64_t w, int n) {
  const uintptr_t a = (uintptr_t)p;
  if (n == (int)(8 / sizeof(T))) {
    char* c = (char*)p;
    if ((a & 7) == 0) {
      *(uint64_t*)p = w;
      return;
    }
    if ((a & 3) == 0) {
      *(uint32_t*)c = (uint32_t)w;
      *(uint32_t*)(c + 4) = (uint32_t)(w >> 32);
      return;
    }
    if ((a & 1) == 0) {
      *(uint16_t*)c = (uint16_t)w;
      *(uint32_t*)(c + 2) = (uint32_t)(w >> 16);
      *(uint16_t*)(c + 6) = (uint16_t)(w >> 48);
      return;
    }
  }
  mcclStoreBytes(p, (mcclU128)w, n * (int)sizeof(T));
}

// A pack of 16 bytes seen as elements of T, with the one volatile vector access that moves it.
template <typename T>
struct mcclPack {
  static constexpr int N = 16 / sizeof(T);
  uint64_t u[2];
  __device__ __forceinline__ T get(int i) const {
    T x;
    memcpy((void*)&x, (const char*)u + i * sizeof(T), sizeof(T));
    return x;
  }
  __device__ __forceinline__ void set(int i, T x) { memcpy((char*)u + i * sizeof(T), &x, sizeof(T)); }
  __device__ __forceinline__ void load(const T* p) {
    mcclCheckAligned(p, 16);
    load128((const uint64_t*)p, u[0], u[1]);
  }
  __device__ __forceinline__ void store(T* p) const {
    mcclCheckAligned(p, 16);
    store128((uint64_t*)p, u[0], u[1]);
  }
};

template <typename T, typename RedOp>
__device__ __forceinline__ mcclPack<T> mcclApplyPack(const RedOp& op, const mcclPack<T>& a, const mcclPack<T>& b) {
  mcclPack<T> r;
#pragma unroll
  for (int i = 0; i < mcclPack<T>::N; i++) r.set(i, op.apply(a.get(i), b.get(i)));
  return r;
}
template <typename T, typename RedOp>
__device__ __forceinline__ mcclPack<T> mcclPrePack(const RedOp& op, const mcclPack<T>& a) {
  mcclPack<T> r;
#pragma unroll
  for (int i = 0; i < mcclPack<T>::N; i++) r.set(i, op.pre(a.get(i)));
  return r;
}
template <typename T, typename RedOp>
__device__ __forceinline__ mcclPack<T> mcclPostPack(const RedOp& op, const mcclPack<T>& a) {
  mcclPack<T> r;
#pragma unroll
  for (int i = 0; i < mcclPack<T>::N; i++) r.set(i, op.post(a.get(i)));
  return r;
}

// ---- the workers' loop (NCCL's reduceCopy) ------------------------------------------------------
// dsts[d][i] = post?(pre?(srcs[0][i]) op pre?(srcs[1][i]) ...) for i < nelem, by threads tid of
// nworkers, where pre applies to the sources whose bit is set in PreOpMask: the calling rank's own input,
// which it scales with its own PreMulSum scalar (NCCL's PreOpSrcs counts them from the first source;
// a mask also serves a kernel that reduces in rank order, its own input not always first).
//
// Head, body, tail. The body moves 16-byte packs: each thread Unroll packs per trip, all loads issued before
// the first store, a warp's lanes on consecutive packs. The packs are cut where the first source's address is
// a multiple of 16; the head, the elements before, and the tail, those after the last whole pack, go element
// by element. Where every pointer agrees modulo 16 (all aligned, or a buffer and its in-place twin) each pack
// is one aligned access in every buffer. Where one does not (a user buffer one bfloat16 element off beside an
// aligned one), no head aligns them all, and the loop takes packs of one element, as NCCL's does. A P2P ring
// step rarely gets there: its sender starts the slice at the user buffer's offset (prims_simple.cuh).

// The aligned body: npacks packs from element `from` on, every pointer 16-byte aligned there.
template <int Unroll, typename T, typename RedOp, int NSrcs, int NDsts, int PreOpMask>
__device__ __forceinline__ void mcclReduceCopyPacks(int tid, int nworkers, const RedOp& op, bool postOp,
                                                    const T* const* srcs, T* const* dsts, int64_t from,
                                                    int64_t npacks) {
  typedef mcclPack<T> Pack;
  constexpr int EltPerPack = Pack::N;
  const int64_t perTrip = (int64_t)nworkers * Unroll;
  for (int64_t base = 0; base < npacks; base += perTrip) {
    Pack acc[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; u++) {
      int64_t p = base + (int64_t)u * nworkers + tid;
      if (p < npacks) acc[u].load(srcs[0] + from + p * EltPerPack);
    }
    if (PreOpMask & 1) {
#pragma unroll
      for (int u = 0; u < Unroll; u++) acc[u] = mcclPrePack<T>(op, acc[u]);
    }
#pragma unroll
    for (int s = 1; s < NSrcs; s++) {
#pragma unroll
      for (int u = 0; u < Unroll; u++) {
        int64_t p = base + (int64_t)u * nworkers + tid;
        if (p < npacks) {
          Pack x;
          x.load(srcs[s] + from + p * EltPerPack);
          if (PreOpMask >> s & 1) x = mcclPrePack<T>(op, x);
          acc[u] = mcclApplyPack<T>(op, acc[u], x);
        }
      }
    }
    if (postOp) {
#pragma unroll
      for (int u = 0; u < Unroll; u++) acc[u] = mcclPostPack<T>(op, acc[u]);
    }
#pragma unroll
    for (int d = 0; d < NDsts; d++) {
#pragma unroll
      for (int u = 0; u < Unroll; u++) {
        int64_t p = base + (int64_t)u * nworkers + tid;
        if (p < npacks) acc[u].store(dsts[d] + from + p * EltPerPack);
      }
    }
  }
}

// Packs of one element, elements [from, to): where some pointer is off the first source's 16-byte grid (NCCL's
// reduceCopy falls back to the same), and for the head and the tail around the aligned body. EltUnroll elements
// a thread and trip, every load issued before the first store, a warp's lanes on consecutive elements. Timed
// alone, this moves more than 16-byte packs whose bytes the lanes trade with shuffles
// (docs/lab06-device-kernels.md), and each thread touches only its own elements.
template <int EltUnroll, typename T, typename RedOp, int NSrcs, int NDsts, int PreOpMask>
__device__ __forceinline__ void mcclReduceCopyElts(int tid, int nworkers, const RedOp& op, bool postOp,
                                                   const T* const* srcs, T* const* dsts, int64_t from, int64_t to) {
  const int64_t perTrip = (int64_t)nworkers * EltUnroll;
  for (int64_t base = from; base < to; base += perTrip) {
    T acc[EltUnroll] = {};  // only the elements below `to` are read (g++ cannot prove it once inlined)
#pragma unroll
    for (int u = 0; u < EltUnroll; u++) {
      const int64_t i = base + (int64_t)u * nworkers + tid;
      if (i < to) {
        acc[u] = mcclLoadElt(srcs[0] + i);
        if (PreOpMask & 1) acc[u] = op.pre(acc[u]);
      }
    }
#pragma unroll
    for (int s = 1; s < NSrcs; s++) {
#pragma unroll
      for (int u = 0; u < EltUnroll; u++) {
        const int64_t i = base + (int64_t)u * nworkers + tid;
        if (i < to) {
          const T y = mcclLoadElt(srcs[s] + i);
          acc[u] = op.apply(acc[u], (PreOpMask >> s & 1) ? op.pre(y) : y);
        }
      }
    }
    if (postOp) {
#pragma unroll
      for (int u = 0; u < EltUnroll; u++)
        if (base + (int64_t)u * nworkers + tid < to) acc[u] = op.post(acc[u]);
    }
#pragma unroll
    for (int d = 0; d < NDsts; d++) {
#pragma unroll
      for (int u = 0; u < EltUnroll; u++) {
        const int64_t i = base + (int64_t)u * nworkers + tid;
        if (i < to) mcclStoreElt(dsts[d] + i, acc[u]);
      }
    }
  }
}

// The body, then the head and the tail. packBytes is the widest power of two (16 at most) modulo which all the
// pointers agree: 16, the packs; less, packs of one element (NCCL's Unroll x (16 / sizeof(T)) / 2 a thread).
template <int Unroll, typename T, typename RedOp, int NSrcs, int NDsts, int PreOpMask>
__device__ __forceinline__ void mcclReduceCopyBody(int tid, int nworkers, const RedOp& op, bool postOp,
                                                   const T* const* srcs, T* const* dsts, int64_t nelem, int packBytes) {
  constexpr int EltPerPack = 16 / (int)sizeof(T);
  if (packBytes != 16) {
    mcclReduceCopyElts<Unroll * EltPerPack / 2, T, RedOp, NSrcs, NDsts, PreOpMask>(tid, nworkers, op, postOp, srcs,
                                                                                   dsts, 0, nelem);
    return;
  }
  const int headBytes = (int)((16 - ((uintptr_t)srcs[0] & 15)) & 15);
  const int64_t head = headBytes / (int64_t)sizeof(T) < nelem ? headBytes / (int64_t)sizeof(T) : nelem;
  const int64_t npacks = (nelem - head) / EltPerPack;
  mcclReduceCopyPacks<Unroll, T, RedOp, NSrcs, NDsts, PreOpMask>(tid, nworkers, op, postOp, srcs, dsts, head, npacks);
  // The head and the tail, one element a thread (fewer than a pack each).
  mcclReduceCopyElts<1, T, RedOp, NSrcs, NDsts, PreOpMask>(tid, nworkers, op, postOp, srcs, dsts, 0, head);
  mcclReduceCopyElts<1, T, RedOp, NSrcs, NDsts, PreOpMask>(tid, nworkers, op, postOp, srcs, dsts,
                                                           head + npacks * EltPerPack, nelem);
}

template <int Unroll, typename T, typename RedOp, int NSrcs, int NDsts, int PreOpMask = 0>
__device__ __forceinline__ void mcclReduceCopy(int tid, int nworkers, const RedOp& op, bool postOp, void** srcPtrs,
                                               void** dstPtrs, int64_t nelem) {
  static_assert(NSrcs >= 1 && NSrcs <= 2 && NDsts >= 1 && NDsts <= 2, "one or two sources and destinations");
  static_assert(PreOpMask >= 0 && PreOpMask < (1 << NSrcs), "pre applies to some of the sources");
  const T* srcs[NSrcs];
  T* dsts[NDsts];
  // The bits in which the addresses differ from the first one's, up to 16: the lowest set bit is the
  // widest power of two modulo which they all agree (16: the aligned body; less: packs of one element).
  uintptr_t differ = 16;
#pragma unroll
  for (int s = 0; s < NSrcs; s++) {
    srcs[s] = (const T*)srcPtrs[s];
    differ |= (uintptr_t)srcs[s] ^ (uintptr_t)srcPtrs[0];
  }
#pragma unroll
  for (int d = 0; d < NDsts; d++) {
    dsts[d] = (T*)dstPtrs[d];
    differ |= (uintptr_t)dsts[d] ^ (uintptr_t)srcPtrs[0];
  }
  int packBytes = (int)(differ & (~differ + 1));
  if ((uintptr_t)srcPtrs[0] & (sizeof(T) - 1)) packBytes = 0;  // elements straddle packs: none fits
  mcclReduceCopyBody<Unroll, T, RedOp, NSrcs, NDsts, PreOpMask>(tid, nworkers, op, postOp, srcs, dsts, nelem,
                                                                packBytes);
}

#endif
