// Lab 09: kernels written on the device API (the shape of NCCL 2.28.9's src/device/symmetric/ kernels, which
// NCCL rewrote on this API): each block opens a session on its own LSA barrier (index blockIdx.x), syncs with
// the same block of every peer, loads or stores peers' window memory through plain pointers, and syncs
// again before the inputs may be reused. One source for the GPU and the sim.
#include <cuda_bf16.h>
#include <math.h>
#include "dev_api_kernels.h"
#include "device/dev_api.cuh"

// A device exercise's stub in a learner tree (docs/exercises.md): name the exercise and return at once. With
// the barriers gone too, no rank waits for another, so a stubbed kernel ends and the tests fail on its data.
#define MCCL_DEV_API_STUB(name)                                                                          \
  do {                                                                                                   \
    if (threadIdx.x == 0 && blockIdx.x == 0)                                                             \
      printf("MCCL EXERCISE %s not implemented: see the lab's README, section Exercises\n", (name));     \
    return;                                                                                              \
  } while (0)

// One per-block shared struct: the RMSNorm's block reduction.
struct mcclDevApiShmem {
  float red[MCCL_DEV_API_MAX_THREADS];
};
MCCL_SHMEM_DEFINE(struct mcclDevApiShmem, devApiShmem);

// Elements as float and back (sums are taken in float whatever the type, as NCCL's bf16 reductions).
__device__ __forceinline__ float toFloat(float v) {
  return v;
}
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

// Block b's part [lo, hi) of n items cut in `parts` nearly equal pieces.
__device__ __forceinline__ void blockPart(size_t n, int b, int parts, size_t& lo, size_t& hi) {
  lo = n * (size_t)b / (size_t)parts;
  hi = n * (size_t)(b + 1) / (size_t)parts;
}

// Element i summed over every LSA rank, in rank order: every rank adds in the same order, so all of them
// (and the one-shot and two-shot kernels) get the same bits.
template <typename T>
__device__ __forceinline__ float sumPeers(mcclWindow_t win, size_t offset, int nPeers, size_t i) {
  float acc = 0.0f;
  for (int p = 0; p < nPeers; p++) acc += toFloat(((const T*)mcclGetLsaPointer(win, offset, p))[i]);
  return acc;
}

// One-shot: every rank reads all of every peer's input. The first sync publishes that this rank's input is
// ready (release) and learns the same of every peer (acquire); the last one tells the peers this rank has
// read their inputs, so none of them overwrites its input early.
template <typename T>
__device__ void oneShot(const struct mcclDevApiArgs& a) {
  // EXERCISE(09.oneshot) STUB: MCCL_DEV_API_STUB("09.oneshot");
  mcclCoopCta cta;
  mcclLsaBarrierSession<mcclCoopCta> bar(cta, a.comm, mcclTeamTagLsa(), blockIdx.x);
  bar.sync(cta, cuda::memory_order_acq_rel);
  size_t lo, hi;
  blockPart(a.count, blockIdx.x, gridDim.x, lo, hi);
  T* out = (T*)a.recv;
  for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
    out[i] = fromFloat<T>(sumPeers<T>(a.sendWin, a.sendOffset, a.comm.lsaSize, i));
  bar.sync(cta, cuda::memory_order_acq_rel);
  // END EXERCISE(09.oneshot)
}

// Two-shot: rank r reduces part r of the input (a reduce-scatter) and stores the result into part r of every
// peer's output (an allgather by stores); the last sync makes every rank's stores visible to every other.
template <typename T>
__device__ void twoShot(const struct mcclDevApiArgs& a) {
  // EXERCISE(09.twoshot) STUB: MCCL_DEV_API_STUB("09.twoshot");
  mcclCoopCta cta;
  mcclLsaBarrierSession<mcclCoopCta> bar(cta, a.comm, mcclTeamTagLsa(), blockIdx.x);
  bar.sync(cta, cuda::memory_order_acq_rel);
  const int n = a.comm.lsaSize;
  size_t partLo, partHi, lo, hi;
  blockPart(a.count, a.comm.lsaRank, n, partLo, partHi);
  blockPart(partHi - partLo, blockIdx.x, gridDim.x, lo, hi);
  for (size_t i = partLo + lo + threadIdx.x; i < partLo + hi; i += blockDim.x) {
    T v = fromFloat<T>(sumPeers<T>(a.sendWin, a.sendOffset, n, i));
    for (int p = 0; p < n; p++) ((T*)mcclGetLsaPointer(a.recvWin, a.recvOffset, p))[i] = v;
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
  // END EXERCISE(09.twoshot)
}

// Allgather by loads: peer p's bytes land at recv + p * count.
__device__ void allGather(const struct mcclDevApiArgs& a) {
  // EXERCISE(09.allgather) STUB: MCCL_DEV_API_STUB("09.allgather");
  mcclCoopCta cta;
  mcclLsaBarrierSession<mcclCoopCta> bar(cta, a.comm, mcclTeamTagLsa(), blockIdx.x);
  bar.sync(cta, cuda::memory_order_acq_rel);
  size_t lo, hi;
  blockPart(a.count, blockIdx.x, gridDim.x, lo, hi);
  for (int p = 0; p < a.comm.lsaSize; p++) {
    const unsigned char* src = (const unsigned char*)mcclGetLsaPointer(a.sendWin, a.sendOffset, p);
    unsigned char* dst = (unsigned char*)a.recv + (size_t)p * a.count;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) dst[i] = src[i];
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
  // END EXERCISE(09.allgather)
}

// The sum of every thread's v, on every thread of the block (a tree in shared memory).
__device__ float blockSum(float v) {
  float* red = devApiShmem.red;
  red[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = 1; half < blockDim.x; half *= 2) {
    unsigned pairs = (blockDim.x + 2 * half - 1) / (2 * half);
    if (threadIdx.x < pairs && threadIdx.x * 2 * half + half < blockDim.x)
      red[threadIdx.x * 2 * half] += red[threadIdx.x * 2 * half + half];
    __syncthreads();
  }
  float s = red[0];
  __syncthreads();  // red is reused by the next call
  return s;
}

// RMSNorm of one row whose values are already in y (as T): y[i] = y[i] * w[i] / sqrt(mean(y^2) + eps).
// Both versions run this same code on the same values, so the fused kernel's result has the same bits as
// the two kernels'.
template <typename T>
__device__ void rmsNormRow(T* y, const T* w, int hidden, float eps) {
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = toFloat(y[i]);
    ss += v * v;
  }
  float rstd = 1.0f / sqrtf(blockSum(ss) / (float)hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) y[i] = fromFloat<T>(toFloat(y[i]) * rstd * toFloat(w[i]));
}

// Fused: each block reduces whole rows from the peers' windows into the output, then normalizes them in
// place, in one launch: the allreduce's output never goes back through memory to a second kernel.
template <typename T>
__device__ void allReduceRmsNorm(const struct mcclDevApiArgs& a) {
  // EXERCISE(09.fused) STUB: MCCL_DEV_API_STUB("09.fused");
  mcclCoopCta cta;
  mcclLsaBarrierSession<mcclCoopCta> bar(cta, a.comm, mcclTeamTagLsa(), blockIdx.x);
  bar.sync(cta, cuda::memory_order_acq_rel);
  const size_t hidden = (size_t)a.hidden;
  for (int r = blockIdx.x; r < a.rows; r += gridDim.x) {
    T* y = (T*)a.recv + (size_t)r * hidden;
    for (size_t i = threadIdx.x; i < hidden; i += blockDim.x)
      y[i] = fromFloat<T>(sumPeers<T>(a.sendWin, a.sendOffset, a.comm.lsaSize, (size_t)r * hidden + i));
    __syncthreads();
    rmsNormRow<T>(y, (const T*)a.weight, a.hidden, a.eps);
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
  // END EXERCISE(09.fused)
}

// The unfused second step: copy a row of the allreduce's output, then the same normalization.
template <typename T>
__device__ void rmsNorm(const struct mcclDevApiArgs& a) {
  const size_t hidden = (size_t)a.hidden;
  for (int r = blockIdx.x; r < a.rows; r += gridDim.x) {
    T* y = (T*)a.recv + (size_t)r * hidden;
    const T* x = (const T*)a.in + (size_t)r * hidden;
    for (size_t i = threadIdx.x; i < hidden; i += blockDim.x) y[i] = x[i];
    __syncthreads();
    rmsNormRow<T>(y, (const T*)a.weight, a.hidden, a.eps);
  }
}

// Barrier sessions checked by data: in round k every thread stores k into its word of this rank's area of
// parity k % 2, the block syncs with its peers, then every thread checks its word of every peer's area. Two
// parities suffice: a peer can rewrite this parity only in round k + 2, after passing round k + 1's barrier,
// which needs this rank to have arrived there, after its checks. A barrier whose arrive did not release the
// stores, or whose wait did not acquire them, shows as a stale word.
__device__ void barrierTest(const struct mcclDevApiArgs& a) {
  mcclCoopCta cta;
  mcclLsaBarrierSession<mcclCoopCta> bar(cta, a.comm, mcclTeamTagLsa(), blockIdx.x);
  const int n = a.comm.lsaSize, t = (int)threadIdx.x, nt = (int)blockDim.x;
  uint32_t bad = 0;
  for (int k = 1; k <= a.iters; k++) {
    // word (((parity * nBlocks + block) * n + rank) * nThreads + thread)
    size_t base = ((size_t)(k & 1) * gridDim.x + blockIdx.x) * (size_t)n;
    uint64_t* mine = (uint64_t*)mcclGetLocalPointer(a.recvWin, a.recvOffset) + (base + a.comm.lsaRank) * nt;
    mine[t] = ((uint64_t)k << 16) | (uint64_t)a.comm.lsaRank;
    switch (a.mode) {
      case 0:
        bar.sync(cta, cuda::memory_order_acq_rel);
        break;
      case 1:
        bar.arrive(cta, cuda::memory_order_release);
        bar.wait(cta, cuda::memory_order_acquire);
        break;
      case 2:
        bar.sync(cta, cuda::memory_order_seq_cst);
        break;
      default:
        __threadfence_system();
        bar.arrive(cta, cuda::memory_order_relaxed);
        bar.wait(cta, cuda::memory_order_relaxed);
        __threadfence_system();
        break;
    }
    for (int p = 0; p < n; p++) {
      const volatile uint64_t* theirs =
          (const volatile uint64_t*)mcclGetLsaPointer(a.recvWin, a.recvOffset, p) + (base + p) * nt;
      if (theirs[t] != (((uint64_t)k << 16) | (uint64_t)p)) bad++;
    }
  }
  if (bad) atomicAdd(a.errors, bad);
}

// Every pointer of the API against the others: store through mcclGetPeerPointer (world ranks) into word
// `lsaRank` of every peer, sync, then find each peer's store in this rank's own window through
// mcclGetLocalPointer and mcclGetLsaPointer alike.
__device__ void peerPointerTest(const struct mcclDevApiArgs& a) {
  mcclCoopCta cta;
  mcclLsaBarrierSession<mcclCoopCta> bar(cta, a.comm, mcclTeamTagLsa(), blockIdx.x);
  const mcclTeam lsa = mcclTeamLsa(a.comm);
  uint32_t bad = 0;
  for (int p = threadIdx.x; p < lsa.nRanks; p += blockDim.x) {
    int world = mcclTeamRankToWorld(a.comm, lsa, p);
    uint64_t v = ((uint64_t)a.comm.rank << 16) | (uint64_t)world;
    uint64_t* dst = (uint64_t*)mcclGetPeerPointer(a.recvWin, a.recvOffset, world);
    if (dst != (uint64_t*)mcclGetPeerPointer(a.recvWin, a.recvOffset, lsa, p)) bad++;
    dst[a.comm.lsaRank] = v;
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
  const uint64_t* local = (const uint64_t*)mcclGetLocalPointer(a.recvWin, a.recvOffset);
  if (local != (const uint64_t*)mcclGetLsaPointer(a.recvWin, a.recvOffset, a.comm.lsaRank)) bad++;
  for (int p = threadIdx.x; p < lsa.nRanks; p += blockDim.x) {
    int world = mcclTeamRankToWorld(a.comm, lsa, p);
    if (local[p] != (((uint64_t)world << 16) | (uint64_t)a.comm.rank)) bad++;
    if (mcclTeamRankToLsa(a.comm, mcclTeamWorld(a.comm), world) != p) bad++;
  }
  bar.sync(cta, cuda::memory_order_acq_rel);  // no rank leaves while a peer may still store into it
  if (bad) atomicAdd(a.errors, bad);
}

#define DEFINE_KERNEL(name, body)                                   \
  extern "C" __global__ void name(struct mcclDevApiArgs args) { body(args); } \
  MCCL_KERNEL_REGISTER(name)
DEFINE_KERNEL(mcclDevOneShotKernel_f32, oneShot<float>);
DEFINE_KERNEL(mcclDevOneShotKernel_bf16, oneShot<__nv_bfloat16>);
DEFINE_KERNEL(mcclDevTwoShotKernel_f32, twoShot<float>);
DEFINE_KERNEL(mcclDevTwoShotKernel_bf16, twoShot<__nv_bfloat16>);
DEFINE_KERNEL(mcclDevAllGatherKernel, allGather);
DEFINE_KERNEL(mcclDevAllReduceRmsNormKernel_f32, allReduceRmsNorm<float>);
DEFINE_KERNEL(mcclDevAllReduceRmsNormKernel_bf16, allReduceRmsNorm<__nv_bfloat16>);
DEFINE_KERNEL(mcclDevRmsNormKernel_f32, rmsNorm<float>);
DEFINE_KERNEL(mcclDevRmsNormKernel_bf16, rmsNorm<__nv_bfloat16>);
DEFINE_KERNEL(mcclDevBarrierTestKernel, barrierTest);
DEFINE_KERNEL(mcclDevPeerPointerTestKernel, peerPointerTest);
