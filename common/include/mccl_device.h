/**
 * @file mccl_device.h
 * @brief The portability header of minccl's device code: one `.cu` source for the GPU and the CPU backend.
 * @ingroup common
 *
 * Force-included (`-include common/include/mccl_device.h`) in every `.cu` file on both backends, so device
 * code never includes it itself. `BACKEND=cuda` compiles `.cu` files with nvcc and this header only adds
 * what CUDA lacks (NCCL's barrier and system-scope load/store helpers, the shared-struct and registration
 * macros). `BACKEND=sim` compiles the same files with g++ as host C++17 and this header supplies the CUDA
 * device vocabulary on host threads run by libsimcuda (sim/src/sim_launch.c):
 *
 * - qualifiers `__global__ __device__ __host__ __forceinline__ __noinline__ __launch_bounds__(...)`;
 * - `threadIdx blockIdx blockDim gridDim` (per host thread), `WARP_SIZE`;
 * - `__syncthreads()`, `__syncthreads_or(int)`, `__syncthreads_count(int)`, `__syncwarp()`, `__any_sync`, `__all_sync`,
 *   `__shfl_sync` (values of up to 8 bytes), `__activemask()`, `__barrier_sync_count(id, n)`, `__popc`, `__popcll`,
 *   `__ffs`, `__ffsll`, `__fns`, `__ldg`,
 *   and NCCL's named barriers `barrier_sync(name[, nThreads])`, `barrier_red_or(vote, name[, nThreads])` (names 0..15);
 * - one per-block shared struct: `MCCL_SHMEM_DEFINE(Type, name);` at namespace scope, then `name.field`;
 * - system-scope memory operations named as NCCL 2.28.9 `src/device/op128.h`: `ld_volatile_global`,
 *   `ld_relaxed_sys_global`, `ld_acquire_sys_global`, `st_volatile_global`, `st_relaxed_sys_global` (64 and 32 bits),
 *   `st_release_sys_global`, `fence_acq_rel_sys`, `load128`, `store128`, `atomicAdd_acq_rel_gpu`, plus
 *   `__threadfence()`, `__threadfence_system()`, `mcclSpinHint()` and `mcclGlobalTimerNs()`;
 * - `mcclCheckAligned(p, bytes)` before a vector access: the GPU faults on a misaligned one by itself, the sim
 *   (and its `load128` / `store128`) stops with a message instead of doing it silently;
 * - LL128's line store `storeLL128` (lab 06's prims_ll128.cuh), the one place the two backends differ in what
 *   the hardware guarantees;
 * - programmatic dependent launch: `cudaGridDependencySynchronize()`, `cudaTriggerProgrammaticLaunchCompletion()`
 *   (CUDA's own on the GPU; no-ops on the sim, whose streams run one grid at a time);
 * - kernel registration for the sim's launcher: `MCCL_KERNEL_REGISTER(kernel);` after each kernel.
 *
 * Every primitive, with its PTX meaning and its sim implementation, is a row of docs/device-contract.md.
 *
 * @code
 * struct CopyArgs { const uint64_t* src; uint64_t* dst; size_t n; };
 * struct CopyShmem { CopyArgs args; };
 * MCCL_SHMEM_DEFINE(CopyShmem, copyShmem);
 * extern "C" __global__ void copyKernel(struct CopyArgs args) {
 *   if (threadIdx.x == 0) copyShmem.args = args;
 *   __syncthreads();
 *   for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < copyShmem.args.n; i += gridDim.x * blockDim.x)
 *     copyShmem.args.dst[i] = copyShmem.args.src[i];
 * }
 * MCCL_KERNEL_REGISTER(copyKernel);
 * // host (C11): cudaGetFuncBySymbol(&f, (const void*)copyKernel); void* p[] = {&args};
 * //             cuLaunchKernel(f, blocks,1,1, threads,1,1, 0, stream, p, NULL);
 * @endcode
 */
#ifndef MCCL_DEVICE_H_
#define MCCL_DEVICE_H_

/** @cond MCCL_DEVICE_IMPL */
#ifndef __cplusplus
#error "mccl_device.h is for .cu files (CUDA C++, or host C++17 on the sim backend)"
#endif

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>  // device printf
#include <cuda_runtime.h>

#ifndef WARP_SIZE
#define WARP_SIZE 32
#endif

#if defined(__CUDACC__)
// ================================ CUDA (nvcc) ==========================================================
// nvcc provides the qualifiers, the index variables, __syncthreads*, __threadfence*, min/max and printf.

// One per-block shared struct, as NCCL's ncclShmem (static: one per translation unit, which with
// -rdc=false holds all the device code a kernel uses).
#define MCCL_SHMEM_DEFINE(Type, name) static __shared__ Type name
// Only the sim needs to know a kernel's argument layout. Here the kernel's address goes into a section of its own,
// mccl_kernels, so that mcclDevLoadKernels (lab 06) can load every kernel of the program into a device's context
// when a communicator is created, as NCCL's ncclInitKernelsForDevice does: under CUDA's lazy loading a kernel is
// loaded at its first launch, and the load waits for the device's work in flight, which may be waiting for a
// peer's launch that this thread has yet to make.
#define MCCL_KERNEL_REGISTER(kernel) \
  __attribute__((used, section("mccl_kernels"))) static const void* const mcclKernelReg_##kernel = (const void*)&kernel

// Named barriers (NCCL src/device/common.h): bar.sync / bar.red.or.pred on hardware barrier `name`, the
// `.aligned` forms NCCL uses, each preceded by __syncwarp(). The primitives call their role functions
// (waitPeer, postPeer, LL waitSend) out of line, where one lane spins while the others return, so a warp
// can reach a barrier split. An aligned barrier reached by a split warp is undefined (on the H200 it
// raised "illegal instruction"). The non-aligned form (barrier.sync) is defined, but ptxas compiles it
// twice, a converged copy and one for a split warp (behind BRA.DIV), and compute-sanitizer synccheck
// reports a barrier completed from two instructions as "divergent thread(s) in block" and stops the
// kernel (see the synccheck run in docs/results). So __syncwarp
// reconverges the warp (its slow path runs only for a split warp), then every warp of the group meets
// at one aligned instruction. Groups are whole warps, so every lane of a warp calls these.
__device__ __forceinline__ void barrier_sync(int name) {
  __syncwarp();
  asm volatile("bar.sync %0;" ::"r"(name) : "memory");
}
__device__ __forceinline__ void barrier_sync(int name, int nThreads) {
  __syncwarp();
  asm volatile("bar.sync %0, %1;" ::"r"(name), "r"(nThreads) : "memory");
}
__device__ __forceinline__ bool barrier_red_or(bool vote, int name) {
  int ans;
  __syncwarp();
  asm volatile("{ .reg .pred p; setp.ne.s32 p, %1, 0; bar.red.or.pred p, %2, p; selp.s32 %0, 1, 0, p; }"
               : "=r"(ans)
               : "r"((int)vote), "r"(name)
               : "memory");
  return ans != 0;
}
__device__ __forceinline__ bool barrier_red_or(bool vote, int name, int nThreads) {
  int ans;
  __syncwarp();
  asm volatile("{ .reg .pred p; setp.ne.s32 p, %1, 0; bar.red.or.pred p, %2, %3, p; selp.s32 %0, 1, 0, p; }"
               : "=r"(ans)
               : "r"((int)vote), "r"(name), "r"(nThreads)
               : "memory");
  return ans != 0;
}

// System-scope loads and stores (NCCL src/device/op128.h). The address is converted to the global
// window, so these are for global memory: device memory, or host memory mapped into the device.
__device__ __forceinline__ uintptr_t mcclCvtaGlobal(const void* p) {
  return (uintptr_t)__cvta_generic_to_global(p);
}
__device__ __forceinline__ uint64_t ld_volatile_global(uint64_t* p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(mcclCvtaGlobal(p)) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_volatile_global(uint32_t* p) {
  uint32_t v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(mcclCvtaGlobal(p)) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_relaxed_sys_global(uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(mcclCvtaGlobal(p)) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_acquire_sys_global(uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(mcclCvtaGlobal(p)) : "memory");
  return v;
}
__device__ __forceinline__ void st_volatile_global(uint64_t* p, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(mcclCvtaGlobal(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys_global(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(mcclCvtaGlobal(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys_global(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(mcclCvtaGlobal(p)), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release_sys_global(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(mcclCvtaGlobal(p)), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}
// An add that both publishes what this thread has seen (release) and takes what the earlier adders
// published (acquire), at GPU scope: "the last block to arrive" counters, where the last one goes on to
// use every other block's writes.
__device__ __forceinline__ unsigned int atomicAdd_acq_rel_gpu(unsigned int* p, unsigned int v) {
  unsigned int old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(mcclCvtaGlobal(p)), "r"(v) : "memory");
  return old;
}
// 16-byte volatile vector accesses (one instruction; the LL protocol relies on each 8-byte half).
__device__ __forceinline__ void load128(const uint64_t* p, uint64_t& v0, uint64_t& v1) {
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(v0), "=l"(v1) : "l"(mcclCvtaGlobal(p)) : "memory");
}
__device__ __forceinline__ void store128(uint64_t* p, uint64_t v0, uint64_t v1) {
  asm volatile("st.volatile.global.v2.u64 [%2], {%0,%1};" ::"l"(v0), "l"(v1), "l"(mcclCvtaGlobal(p)) : "memory");
}
// A vector access off its size's boundary faults on the GPU by itself (misaligned address): nothing to add.
__device__ __forceinline__ void mcclCheckAligned(const void* /*p*/, int /*bytes*/) {}
// LL128's store of one lane's 16 bytes of a 128-byte line whose last 8 bytes, on the flag lane, carry the
// line's flag. Every lane of the warp calls it at once. NVLink delivers each 128-byte line of a warp's
// store instruction whole, so a reader that sees the flag sees the line's data: one plain store per lane.
__device__ __forceinline__ void storeLL128(uint64_t* p, uint64_t v0, uint64_t v1, bool /*flagLane*/) {
  store128(p, v0, v1);
}
// A spinning GPU thread has nothing to give up: the warp scheduler interleaves others already.
__device__ __forceinline__ void mcclSpinHint() {}
// Nanoseconds of the GPU's global timer (%globaltimer), for bounded waits and timings.
__device__ __forceinline__ uint64_t mcclGlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

#else
// ================================ sim (g++, host C++17) ===============================================
// cuda_runtime.h, read by g++, already defines __global__ __device__ __host__ __shared__ __constant__ as
// empty and __forceinline__ as inline always_inline; dim3, uint3 and the fp16/bf16 headers work as host
// code. What is missing is defined here; the runtime half is libsimcuda's sim_launch.c.
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <type_traits>
#include <utility>

// __noinline__ as a macro breaks `__attribute__((__noinline__))` in <memory> and <stacktrace> included
// after this header: device code uses no STL, so those headers are not expected after it.
#ifndef __noinline__
#define __noinline__ __attribute__((noinline))
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
// A kernel parameter read in place (nvcc: no per-thread copy when its address is taken); the sim's
// trampoline passes parameters by reference to its own copy already.
#ifndef __grid_constant__
#define __grid_constant__
#endif
// A plain __shared__ variable would silently become per-thread on the sim: use MCCL_SHMEM_DEFINE.
#undef __shared__
#define __shared__ _Pragma("GCC error \"__shared__ is not supported on the sim backend: use MCCL_SHMEM_DEFINE\"")

extern "C" {
// Implemented in libsimcuda (sim/src/sim_launch.c); only this header calls them.
typedef struct {
  uint3 threadIdx, blockIdx;
  dim3 blockDim, gridDim;
} mcclSimThreadInfo;
typedef void (*mcclSimTrampoline)(const void* fn, void** params, const mcclSimThreadInfo* info);
int mcclSimRegisterKernel(const void* fn, const char* name, int nArgs, const size_t* argSizes, const size_t* argAligns,
                          mcclSimTrampoline trampoline);
void mcclSimBarrier(int name, int nThreads);
int mcclSimBarrierRed(int name, int nThreads, int vote, int wantCount);
void mcclSimSyncWarp(unsigned mask);
int mcclSimSyncWarpRed(unsigned mask, int vote);
uint64_t mcclSimShfl(unsigned mask, uint64_t v, int srcLane);
void* mcclSimShmem(const void* key, size_t size, size_t align);
}

// The index variables: one copy per host thread, set by the kernel's trampoline before it calls the
// kernel (real variables, so gdb can `print threadIdx` inside a kernel).
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

// Barriers: real barriers over the block's host threads (spin with sched_yield, then a condition
// variable), each with 16 names as the hardware; name 0 over the whole block is __syncthreads.
inline void __syncthreads() {
  mcclSimBarrier(0, (int)(blockDim.x * blockDim.y * blockDim.z));
}
inline int __syncthreads_or(int p) {
  return mcclSimBarrierRed(0, (int)(blockDim.x * blockDim.y * blockDim.z), p, 0);
}
inline int __syncthreads_count(int p) {
  return mcclSimBarrierRed(0, (int)(blockDim.x * blockDim.y * blockDim.z), p, 1);
}
inline int __syncthreads_and(int p) {
  int n = (int)(blockDim.x * blockDim.y * blockDim.z);
  return mcclSimBarrierRed(0, n, p, 1) == n;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  mcclSimSyncWarp(mask);
}
// Warp votes: the lanes of the mask meet, as __syncwarp, and count.
inline int __any_sync(unsigned mask, int p) {
  return mcclSimSyncWarpRed(mask, p) != 0;
}
inline int __all_sync(unsigned mask, int p) {
  return mcclSimSyncWarpRed(mask, p) == __builtin_popcount(mask);
}
// A warp shuffle: the lanes of the mask meet, as __syncwarp, and each returns srcLane's value (a value of up to 8
// bytes, the whole warp's width only).
template <typename V>
inline V __shfl_sync(unsigned mask, V v, int srcLane) {
  static_assert(sizeof(V) <= sizeof(uint64_t), "__shfl_sync on the sim moves values of up to 8 bytes");
  uint64_t w = 0;
  __builtin_memcpy(&w, &v, sizeof(V));
  w = mcclSimShfl(mask, w, srcLane);
  __builtin_memcpy(&v, &w, sizeof(V));
  return v;
}
// The lanes of this thread's warp that exist (a last warp may be partial); the sim's lanes are not in lockstep,
// so "active" means present, as on a converged GPU warp.
inline unsigned __activemask() {
  unsigned n = blockDim.x * blockDim.y * blockDim.z, first = threadIdx.x / WARP_SIZE * WARP_SIZE;
  unsigned lanes = n - first < WARP_SIZE ? n - first : WARP_SIZE;
  return lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1u;
}
// Named barrier `id` over `n` threads (CUDA's spelling of bar.sync id, n; NCCL's ncclCoopWarpSpan).
inline void __barrier_sync_count(unsigned id, unsigned n) {
  mcclSimBarrier((int)id, (int)n);
}
inline void barrier_sync(int name) {
  mcclSimBarrier(name, (int)(blockDim.x * blockDim.y * blockDim.z));
}
inline void barrier_sync(int name, int nThreads) {
  mcclSimBarrier(name, nThreads);
}
inline bool barrier_red_or(bool vote, int name) {
  return mcclSimBarrierRed(name, (int)(blockDim.x * blockDim.y * blockDim.z), vote, 0) != 0;
}
inline bool barrier_red_or(bool vote, int name, int nThreads) {
  return mcclSimBarrierRed(name, nThreads, vote, 0) != 0;
}

// Memory operations. GCC __atomic builtins, so ThreadSanitizer sees the synchronization. Volatile and
// relaxed loads are strengthened to acquire, relaxed stores to release: on x86 (TSO) every load is an
// acquire and every store a release already, so this costs nothing, and it makes the memory model the
// sim checks no weaker than the GPU code's intent (TSan ignores standalone fences, so the flags carry it).
inline uint64_t ld_volatile_global(uint64_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
inline uint32_t ld_volatile_global(uint32_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
inline uint64_t ld_relaxed_sys_global(uint64_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
inline uint64_t ld_acquire_sys_global(uint64_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
inline void st_volatile_global(uint64_t* p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
inline void st_relaxed_sys_global(uint64_t* p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
inline void st_relaxed_sys_global(uint32_t* p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
inline void st_release_sys_global(uint64_t* p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
inline unsigned int atomicAdd_acq_rel_gpu(unsigned int* p, unsigned int v) {
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
#if defined(__SANITIZE_THREAD__)  // gcc warns that TSan does not model fences; it ignores them, as said above
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
inline void fence_acq_rel_sys() {
  __atomic_thread_fence(__ATOMIC_ACQ_REL);
}
inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_block() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_system() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#if defined(__SANITIZE_THREAD__)
#pragma GCC diagnostic pop
#endif
// A GPU faults on a vector access off its size's boundary (cudaErrorMisalignedAddress: the context is lost);
// x86 would do it silently, so the sim stops there, naming the access, as the GPU would stop the kernel.
inline void mcclCheckAligned(const void* p, int bytes) {
  if (((uintptr_t)p & (uintptr_t)(bytes - 1)) == 0) return;
  fprintf(stderr,
          "minccl-sim: a %d-byte access at %p in block %u thread %u is off a %d-byte boundary: a GPU faults here\n",
          bytes, p, blockIdx.x, threadIdx.x, bytes);
  abort();
}
// Two 8-byte atomic accesses: the GPU's 16-byte access is not atomic as a whole either, and LL carries a
// flag in each 8-byte half.
inline void load128(const uint64_t* p, uint64_t& v0, uint64_t& v1) {
  mcclCheckAligned(p, 16);
  v0 = __atomic_load_n(p, __ATOMIC_ACQUIRE);
  v1 = __atomic_load_n(p + 1, __ATOMIC_ACQUIRE);
}
inline void store128(uint64_t* p, uint64_t v0, uint64_t v1) {
  mcclCheckAligned(p, 16);
  __atomic_store_n(p, v0, __ATOMIC_RELEASE);
  __atomic_store_n(p + 1, v1, __ATOMIC_RELEASE);
}
// LL128's line store (see the GPU's twin above). The sim's lanes are threads with no line-sized store, so
// the flag is made to follow the data: every lane stores its data words, the warp meets, then the flag
// lanes store their flags (release). Every lane of the warp calls it at once.
inline void storeLL128(uint64_t* p, uint64_t v0, uint64_t v1, bool flagLane) {
  __atomic_store_n(p, v0, __ATOMIC_RELEASE);
  if (!flagLane) __atomic_store_n(p + 1, v1, __ATOMIC_RELEASE);
  __syncwarp();
  if (flagLane) __atomic_store_n(p + 1, v1, __ATOMIC_RELEASE);
}
// Many more spinning threads than cores: give the core to a thread that can make progress.
inline void mcclSpinHint() {
  sched_yield();
}
// Programmatic dependent launch (CUDA's device functions on sm_90, `griddepcontrol.wait` and
// `.launch_dependents`): a sim stream starts a grid only after the previous one has finished, so the
// wait has nothing to wait for and the trigger nothing to start early.
inline void cudaGridDependencySynchronize() {}
inline void cudaTriggerProgrammaticLaunchCompletion() {}

// Bit and load intrinsics of CUDA's device library.
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
inline int __ffsll(long long x) {
  return __builtin_ffsll(x);
}
// The position of the offset-th set bit of mask counted from bit `base`, toward the top for a positive offset and
// toward bit 0 for a negative one; offset 0 is `base` itself if set; 0xffffffff if there is none (PTX fns.b32).
inline unsigned __fns(unsigned mask, unsigned base, int offset) {
  if (base > 31) return 0xffffffffu;
  if (offset == 0) return (mask >> base) & 1u ? base : 0xffffffffu;
  int step = offset > 0 ? 1 : -1, left = offset > 0 ? offset : -offset;
  for (int b = (int)base; b >= 0 && b < 32; b += step)
    if (((mask >> b) & 1u) && --left == 0) return (unsigned)b;
  return 0xffffffffu;
}
// A load through the read-only cache: plain memory on the sim.
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

inline uint64_t mcclGlobalTimerNs() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
inline void __trap() {
  abort();
}
inline long long clock64() {
  return (long long)mcclGlobalTimerNs();
}  // a GPU counts SM cycles instead

// CUDA's integer atomics (relaxed, as on the GPU), for int, unsigned int and unsigned long long.
#define MCCL_SIM_ATOMICS(T)                                                                                 \
  inline T atomicAdd(T* p, T v) {                                                                           \
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);                                                      \
  }                                                                                                         \
  inline T atomicSub(T* p, T v) {                                                                           \
    return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED);                                                      \
  }                                                                                                         \
  inline T atomicAnd(T* p, T v) {                                                                           \
    return __atomic_fetch_and(p, v, __ATOMIC_RELAXED);                                                      \
  }                                                                                                         \
  inline T atomicOr(T* p, T v) {                                                                            \
    return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);                                                       \
  }                                                                                                         \
  inline T atomicXor(T* p, T v) {                                                                           \
    return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED);                                                      \
  }                                                                                                         \
  inline T atomicExch(T* p, T v) {                                                                          \
    return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);                                                     \
  }                                                                                                         \
  inline T atomicCAS(T* p, T cmp, T v) {                                                                    \
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);                     \
    return cmp;                                                                                             \
  }                                                                                                         \
  inline T atomicMax(T* p, T v) {                                                                           \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                           \
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                                       \
    return old;                                                                                             \
  }                                                                                                         \
  inline T atomicMin(T* p, T v) {                                                                           \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                           \
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                                       \
    return old;                                                                                             \
  }
MCCL_SIM_ATOMICS(int)
MCCL_SIM_ATOMICS(unsigned int)
MCCL_SIM_ATOMICS(unsigned long long)
#undef MCCL_SIM_ATOMICS

// CUDA's min/max for integers and floats (nvcc declares them; g++ does not). The mixed-type forms
// return the usual arithmetic conversion, as CUDA's overloads do.
template <typename A, typename B>
inline typename std::common_type<A, B>::type min(A a, B b) {
  typedef typename std::common_type<A, B>::type T;
  return (T)a < (T)b ? (T)a : (T)b;
}
template <typename A, typename B>
inline typename std::common_type<A, B>::type max(A a, B b) {
  typedef typename std::common_type<A, B>::type T;
  return (T)a > (T)b ? (T)a : (T)b;
}

// One per-block shared struct. `name` is a per-thread reference, bound on the thread's first use to its
// block's storage for this definition. libsimcuda keeps a block's host threads together for later blocks of
// the same size (a crew), and the storage with them, poisoned again for each block: a binding is the storage
// of whatever block its thread runs.
// Key and reference are C++17 inline variables, one per program and not one per translation unit:
// a function that is not inlined and does not depend on a kernel's template arguments (a barrier
// helper, say) is one function in the whole program on the sim, emitted by every .cu that uses it
// and linked once. With a per-file key it would reach the storage of whichever file's copy the linker
// kept, not the running kernel's block (nvcc builds each .cu as its own module, so the GPU has no
// such sharing). The struct must therefore be the same type in every file that defines `name`.
#define MCCL_SHMEM_DEFINE(Type, name)        \
  inline const char mcclShmemKey_##name = 0; \
  inline thread_local Type& name = *static_cast<Type*>(mcclSimShmem(&mcclShmemKey_##name, sizeof(Type), alignof(Type)))

// Kernel registration: records the host function, its name and its argument sizes, and a trampoline the
// launcher calls on each block thread with the packed arguments (kernelParams[i] points at argument i).
namespace mcclSim {
template <typename... A, size_t... I>
inline void callKernel(void (*f)(A...), void** p, std::index_sequence<I...>) {
  f(*static_cast<typename std::remove_reference<A>::type*>(p[I])...);
  (void)p;
}
template <typename... A>
void trampoline(const void* fn, void** params, const mcclSimThreadInfo* info) {
  threadIdx = info->threadIdx;
  blockIdx = info->blockIdx;
  blockDim = info->blockDim;
  gridDim = info->gridDim;
  callKernel(reinterpret_cast<void (*)(A...)>(const_cast<void*>(fn)), params, std::index_sequence_for<A...>{});
}
template <typename... A>
inline int registerKernel(void (*fn)(A...), const char* name) {
  static_assert(sizeof...(A) <= 16, "the sim launcher takes at most 16 kernel arguments");
  static const size_t sizes[sizeof...(A) + 1] = {sizeof(A)..., 0};
  static const size_t aligns[sizeof...(A) + 1] = {alignof(A)..., 0};
  return mcclSimRegisterKernel(reinterpret_cast<const void*>(fn), name, (int)sizeof...(A), sizes, aligns,
                               &trampoline<A...>);
}
}  // namespace mcclSim
#define MCCL_KERNEL_REGISTER(kernel) \
  static const int mcclKernelReg_##kernel __attribute__((unused)) = mcclSim::registerKernel(kernel, #kernel)

#endif  // __CUDACC__

// What a device-code exercise stub of a learner tree does (mk/exercises.py, docs/exercises.md): name the
// exercise (the grader reads the line) and abort the primitive through its own flags, so that the kernel
// ends at once on both backends instead of waiting on a peer that will never post.
#define MCCL_EXERCISE_DEVICE_STUB(name, flags, abortedBit)                                         \
  do {                                                                                             \
    printf("MCCL EXERCISE %s not implemented: see the lab's README, section Exercises\n", (name)); \
    (flags) |= (abortedBit);                                                                       \
  } while (0)
/** @endcond */
#endif  // MCCL_DEVICE_H_
