// A CUDA program written only against NCCL 2.28's nccl.h and nccl_device.h (the device API) and linked with
// -lnccl: the same binary runs on minccl's drop-in (libnccl.so.2) and on NCCL's library, whichever the loader
// finds (its run path names the drop-in; LD_LIBRARY_PATH picks NCCL's). Under mpirun, one device per rank.
//
//   mpi_nccl_devapi [PATTERN]       the tests: teams, requirements, device communicators, every peer's pointer,
//                                   LSA barrier sessions in a loop checked by data in every memory order, an
//                                   allreduce kernel in the style of NCCL's docs/examples/06_device_api at
//                                   awkward sizes, and (on minccl) the bad inputs
//   mpi_nccl_devapi --bench [allreduce|rmsnorm] [--eager|--graph] [--iters N] [--max BYTES]
//                                   time per call of that allreduce kernel from 8 B to 64 MiB (eager launches
//                                   and a CUDA graph of them), and of an allreduce fused with an RMSNorm in
//                                   bf16 (two kernels: LSA barriers and loads, or LL stores into an inbox)
//                                   against ncclAllReduce followed by the same RMSNorm kernel (hidden
//                                   4096..16384, 1..16 rows, in a CUDA graph); rank 0 prints one row a size
//
// It is NCCL's API all through. Two lines serve minccl's CPU backend (BACKEND=sim), which compiles .cu files as
// host C++ and runs each block on host threads: a kernel is registered with MCCL_KERNEL_REGISTER, and per-block
// shared memory is MCCL_SHMEM_DEFINE; both are defined only there (common/include/mccl_device.h, force-included
// on the sim). nvcc sees plain CUDA.
#include <dlfcn.h>
#include <math.h>
#include <cuda/atomic>
#include <stdint.h>
#include <nccl.h>
#include <nccl_device.h>
#include "nccl_test_harness.h"

#ifndef MCCL_KERNEL_REGISTER
#define MCCL_KERNEL_REGISTER(k) static_assert(sizeof(&k) != 0, #k)
#endif

// CUDA graphs: the sim has none, so the calls are weak here and a run without them times eager launches only.
#pragma weak cudaStreamBeginCapture
#pragma weak cudaStreamEndCapture
#pragma weak cudaGraphInstantiateWithFlags
#pragma weak cudaGraphLaunch
#pragma weak cudaGraphExecDestroy
#pragma weak cudaGraphDestroy

#define NB 8                  // LSA barriers of the tests' device communicator, one per block
#define THREADS 256           // threads per block of the tests' kernels
#define WIN_BYTES (1u << 20)  // the tests' windows
#define BENCH_BLOCKS 32       // the allreduce benchmark's most blocks (and its barriers)
#define BENCH_THREADS 512     // its threads per block, as NCCL's device API example
#define RMS_THREADS 1024      // threads per row of the RMSNorm
#define RMS_SLICE_PIECES 512  // the benchmark's fused kernel: most 16-byte pieces of a row a block takes
#define ITERS 1000            // barrier sessions of the acq_rel loop

static ncclComm_t comm;
static ncclDevComm devComm;  // made by test_devcomm, with the tests' resource requirements
static int haveDevComm;
static ncclLsaBarrierHandle userBar;  // LSA barriers of a requirement of ours in devComm's resource window
static ncclDevResourceHandle extraBuf;
static void *buf, *out;  // the tests' window buffers (ncclMemAlloc)
static ncclWindow_t win, outWin;
static unsigned* errors;  // device: the check kernels' mismatches

// Whether minccl's drop-in serves this process (it exports mcclDropinCalls; NCCL does not).
static int onMinccl(void) {
  return dlsym(RTLD_DEFAULT, "mcclDropinCalls") != NULL;
}

template <typename T>
struct Same {
  typedef T type;
};
// <<<...>>> is nvcc's alone: cudaLaunchKernel works with both compilers.
template <typename... A>
static cudaError_t launch(void (*k)(A...), int blocks, int threads, cudaStream_t s, typename Same<A>::type... args) {
  void* p[] = {(void*)&args..., NULL};
  return cudaLaunchKernel((const void*)k, dim3(blocks), dim3(threads), p, 0, s);
}

// ---- kernels ----------------------------------------------------------------------------------------------
// Every pointer of the API, from every block: block b stores (rank, peer) into word [b][lsaRank] of every peer's
// window through ncclGetPeerPointer, then, after a barrier, finds each peer's word in its own window; pointers
// that should agree are compared, and the resource buffers too.
__global__ void peerPointersKernel(ncclDevComm dc, ncclWindow_t w, ncclDevResourceHandle h, unsigned* errs) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, dc, ncclTeamTagLsa(), blockIdx.x);
  const ncclTeam lsa = ncclTeamLsa(dc), world = ncclTeamWorld(dc);
  const size_t off = (size_t)blockIdx.x * lsa.nRanks * sizeof(uint64_t);
  unsigned bad = 0;
  for (int p = threadIdx.x; p < lsa.nRanks; p += blockDim.x) {
    int wr = ncclTeamRankToWorld(dc, lsa, p);
    uint64_t* dst = (uint64_t*)ncclGetPeerPointer(w, off, wr);
    bad += dst != (uint64_t*)ncclGetPeerPointer(w, off, lsa, p);
    bad += dst != (uint64_t*)ncclGetLsaPointer(w, off, p);
    bad += ncclTeamRankToLsa(dc, world, wr) != p;
    bad += ncclGetResourceBufferPeerPointer(dc, h, lsa, p) != ncclGetResourceBufferLsaPointer(dc, h, p);
    dst[dc.lsaRank] = ((uint64_t)dc.rank << 32) | (uint64_t)wr;
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
  const uint64_t* local = (const uint64_t*)ncclGetLocalPointer(w, off);
  if (threadIdx.x == 0) {
    bad += local != (const uint64_t*)ncclGetLsaPointer(w, off, dc.lsaRank);
    bad += ncclGetResourceBufferLocalPointer(dc, h) != ncclGetResourceBufferLsaPointer(dc, h, dc.lsaRank);
  }
  for (int p = threadIdx.x; p < lsa.nRanks; p += blockDim.x)
    bad += local[p] != (((uint64_t)ncclTeamRankToWorld(dc, lsa, p) << 32) | (uint64_t)dc.rank);
  bar.sync(cta, cuda::memory_order_acq_rel);  // no block leaves while a peer may still store into it
  if (bad) atomicAdd(errs, bad);
}
MCCL_KERNEL_REGISTER(peerPointersKernel);

// The extra resource buffer: zeroed on every rank, and the same bytes through every rank's pointer.
__global__ void resourceBufferKernel(ncclDevComm dc, ncclDevResourceHandle h, int bytes, unsigned* errs) {
  unsigned bad = 0;
  for (int p = 0; p < dc.lsaSize; p++) {
    const unsigned char* b = (const unsigned char*)ncclGetResourceBufferLsaPointer(dc, h, p);
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) bad += b[i] != 0;
  }
  if (bad) atomicAdd(errs, bad);
}
MCCL_KERNEL_REGISTER(resourceBufferKernel);

// Barrier sessions checked by data: in round k every thread stores k into its word of this rank's area of parity
// k % 2, the block syncs with its peers, then checks its word of every peer's area. Two parities are enough: a
// peer rewrites this parity only in round k + 2, after round k + 1's barrier, which needs this rank's arrival,
// after its checks. A barrier whose arrive does not release the stores, or whose wait does not acquire them,
// shows as a stale word. mode 0: sync(acq_rel); 1: arrive(release) + wait(acquire); 2: sync(seq_cst);
// 3: relaxed arrive and wait between fences; 4: sync(acq_rel) on barriers of a requirement of our own.
__global__ void barrierKernel(ncclDevComm dc, ncclWindow_t w, ncclLsaBarrierHandle own, int iters, int mode,
                              unsigned* errs) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, dc, ncclTeamLsa(dc), mode == 4 ? own : dc.lsaBarrier, blockIdx.x);
  const int n = dc.lsaSize, t = threadIdx.x, nt = blockDim.x;
  unsigned bad = 0;
  for (int k = 1; k <= iters; k++) {
    const size_t base = ((size_t)(k & 1) * gridDim.x + blockIdx.x) * (size_t)n;
    uint64_t* mine = (uint64_t*)ncclGetLocalPointer(w, 0) + (base + dc.lsaRank) * nt;
    mine[t] = ((uint64_t)k << 16) | (uint64_t)dc.lsaRank;
    if (mode == 1) {
      bar.arrive(cta, cuda::memory_order_release);
      bar.wait(cta, cuda::memory_order_acquire);
    } else if (mode == 2) {
      bar.sync(cta, cuda::memory_order_seq_cst);
    } else if (mode == 3) {
      __threadfence_system();
      bar.arrive(cta, cuda::memory_order_relaxed);
      bar.wait(cta, cuda::memory_order_relaxed);
      __threadfence_system();
    } else {
      bar.sync(cta, cuda::memory_order_acq_rel);
    }
    for (int p = 0; p < n; p++) {
      const volatile uint64_t* theirs = (const volatile uint64_t*)ncclGetLsaPointer(w, 0, p) + (base + p) * nt;
      bad += theirs[t] != (((uint64_t)k << 16) | (uint64_t)p);
    }
  }
  if (bad) atomicAdd(errs, bad);
}
MCCL_KERNEL_REGISTER(barrierKernel);

// An allreduce (sum) in the style of NCCL's device API example: the ranks' threads share the elements, each
// element is summed once, from every LSA peer's input, and stored into every peer's output; 16 bytes at a time
// where the offsets allow. The first sync makes the peers' inputs visible (acquire), the last one makes this
// rank's stores visible to them (release) before any rank's next kernel.
__global__ void allReduceKernel(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff,
                                size_t count, ncclDevComm dc) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x);
  bar.sync(cta, cuda::memory_order_acquire);
  const int n = dc.lsaSize;
  const size_t tid = threadIdx.x + (size_t)blockDim.x * (dc.lsaRank + (size_t)blockIdx.x * n);
  const size_t nth = (size_t)blockDim.x * gridDim.x * n;
  size_t done = 0;
  if ((sendoff | recvoff) % 16 == 0) {
    const size_t nv = count / 4;
    for (size_t i = tid; i < nv; i += nth) {
      float4 acc = make_float4(0, 0, 0, 0);
      for (int p0 = 0; p0 < n; p0 += 8) {  // every peer's piece loaded before any is added, 8 peers at a time
        float4 q[8];
        const int np = n - p0 < 8 ? n - p0 : 8;
        for (int k = 0; k < np; k++) q[k] = ((const float4*)ncclGetLsaPointer(sendwin, sendoff, p0 + k))[i];
        for (int k = 0; k < np; k++) acc.x += q[k].x, acc.y += q[k].y, acc.z += q[k].z, acc.w += q[k].w;
      }
      for (int p = 0; p < n; p++) ((float4*)ncclGetLsaPointer(recvwin, recvoff, p))[i] = acc;
    }
    done = nv * 4;
  }
  for (size_t i = done + tid; i < count; i += nth) {
    float acc = 0;
    for (int p = 0; p < n; p++) acc += ((const float*)ncclGetLsaPointer(sendwin, sendoff, p))[i];
    for (int p = 0; p < n; p++) ((float*)ncclGetLsaPointer(recvwin, recvoff, p))[i] = acc;
  }
  bar.sync(cta, cuda::memory_order_release);
}
MCCL_KERNEL_REGISTER(allReduceKernel);

// bf16 as its 16 bits (uint16_t), converted here alike on both compilers: round to nearest even, as
// __float2bfloat16 for finite values. 8 of them make a 16-byte access (uint4).
__device__ __forceinline__ float bf16ToFloat(uint32_t bits) {
  union {
    uint32_t u;
    float f;
  } c;
  c.u = bits << 16;
  return c.f;
}
__device__ __forceinline__ uint32_t floatToBf16(float f) {
  union {
    uint32_t u;
    float f;
  } c;
  c.f = f;
  c.u += 0x7fffu + ((c.u >> 16) & 1u);
  return c.u >> 16;
}
__device__ __forceinline__ void unpack8(uint4 q, float* f) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  for (int j = 0; j < 4; j++) f[2 * j] = bf16ToFloat(w[j] & 0xffffu), f[2 * j + 1] = bf16ToFloat(w[j] >> 16);
}
__device__ __forceinline__ uint4 pack8(const float* f) {
  uint32_t w[4];
  for (int j = 0; j < 4; j++) w[j] = floatToBf16(f[2 * j]) | (floatToBf16(f[2 * j + 1]) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// RMSNorm's block sum: each warp adds its lanes' values by shuffles, then the first warp adds the warps' sums (at
// most 32) and every thread reads the total. Two block syncs, where a tree over shared memory takes one a level.
// Also the row's total when a row is cut into slices (RowSync, below).
struct RmsShmem {
  float warp[32];
  float total;
};
#ifdef MCCL_SHMEM_DEFINE
MCCL_SHMEM_DEFINE(struct RmsShmem, rmsShmem);
#else
static __shared__ struct RmsShmem rmsShmem;
#endif

__device__ float warpSum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_sync(0xffffffffu, v, (int)(threadIdx.x & 31) ^ o);
  return v;
}

__device__ float blockSum(float v) {
  v = warpSum(v);
  if (threadIdx.x % 32 == 0) rmsShmem.warp[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = warpSum(threadIdx.x < (blockDim.x + 31) / 32 ? rmsShmem.warp[threadIdx.x] : 0.0f);
    if (threadIdx.x == 0) rmsShmem.total = v;
  }
  __syncthreads();
  const float total = rmsShmem.total;
  __syncthreads();  // the next call writes warp[] and total again
  return total;
}

// The part [lo, hi) of a row of bf16 (y[i] = x[i] * w[i] * rstd): its sum of squares, and its scaling. With vec, 16
// bytes at a time (lo and hi whole 8-element pieces, the pointers 16-byte aligned). y may be x.
__device__ float sumSquares(const uint16_t* x, int lo, int hi, bool vec) {
  float ss = 0;
  if (vec) {
    for (int v = lo / 8 + (int)threadIdx.x; v < hi / 8; v += blockDim.x) {
      float f[8];
      unpack8(((const uint4*)x)[v], f);
      for (int j = 0; j < 8; j++) ss += f[j] * f[j];
    }
  } else {
    for (int i = lo + (int)threadIdx.x; i < hi; i += blockDim.x) ss += bf16ToFloat(x[i]) * bf16ToFloat(x[i]);
  }
  return ss;
}

__device__ void scaleRow(const uint16_t* x, const uint16_t* w, uint16_t* y, int lo, int hi, float rstd, bool vec) {
  if (vec) {
    for (int v = lo / 8 + (int)threadIdx.x; v < hi / 8; v += blockDim.x) {
      float f[8], g[8];
      unpack8(((const uint4*)x)[v], f);
      unpack8(((const uint4*)w)[v], g);
      for (int j = 0; j < 8; j++) f[j] = f[j] * rstd * g[j];
      ((uint4*)y)[v] = pack8(f);
    }
  } else {
    for (int i = lo + (int)threadIdx.x; i < hi; i += blockDim.x)
      y[i] = (uint16_t)floatToBf16(bf16ToFloat(x[i]) * rstd * bf16ToFloat(w[i]));
  }
}

// The RMSNorm both versions run, one block a row: y[i] = x[i] * w[i] / sqrt(mean(x^2) + eps), x and y bf16
// (y may be x). 16 bytes at a time when the row allows.
__device__ void rmsNormRow(const uint16_t* x, const uint16_t* w, uint16_t* y, int hidden, float eps) {
  const bool vec = hidden % 8 == 0 && ((uintptr_t)x | (uintptr_t)y | (uintptr_t)w) % 16 == 0;
  const float rstd = 1.0f / sqrtf(blockSum(sumSquares(x, 0, hidden, vec)) / (float)hidden + eps);
  scaleRow(x, w, y, 0, hidden, rstd, vec);
}

// A row cut into slices, one block each: the slices' partial sums of squares meet here (device memory, zeroed
// once). Each block posts its part and counts itself in; the last one resets the count and moves the generation
// on, which the others wait for; then each adds the parts in slice order, so every block of the row scales by
// the same rstd. The blocks of a row are all resident at once: the grid is one block a slice, far fewer than SMs.
#define RMS_MAX_SLICES 32
struct RowSync {
  unsigned count, gen;
  uint32_t part[RMS_MAX_SLICES];  // a float's bits (atomics of 4-byte words on both backends)
};

__device__ float rowSum(struct RowSync* rs, int slice, int slices, float part) {
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> count(rs->count), gen(rs->gen);
    const unsigned g = gen.load(cuda::memory_order_relaxed);  // before this block counts itself in
    uint32_t bits;
    memcpy(&bits, &part, 4);
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(rs->part[slice]).store(bits, cuda::memory_order_relaxed);
    if (count.fetch_add(1u, cuda::memory_order_acq_rel) == (unsigned)slices - 1) {
      count.store(0u, cuda::memory_order_relaxed);  // the next call's blocks start after this kernel ends
      gen.store(g + 1, cuda::memory_order_release);
    } else {
      while (gen.load(cuda::memory_order_acquire) == g) {
      }
    }
    float t = 0;
    for (int k = 0; k < slices; k++) {
      const uint32_t b =
          cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(rs->part[k]).load(cuda::memory_order_relaxed);
      float f;
      memcpy(&f, &b, 4);
      t += f;
    }
    rmsShmem.total = t;
  }
  __syncthreads();
  const float t = rmsShmem.total;
  __syncthreads();
  return t;
}

// Where slice s of `slices` of a row of `hidden` elements starts: whole 16-byte pieces with vec.
__device__ int sliceAt(int hidden, int s, int slices, bool vec) {
  const int unit = vec ? 8 : 1, units = hidden / unit;
  return (int)((long long)units * s / slices) * unit;
}

// Fused: each block sums its part of the rows from every LSA peer's x (window) into out, then normalizes it in
// place, in one launch. The peers' 16-byte pieces are all loaded before they are added (at most 8 peers at a time).
// slices 1: the blocks take whole rows in turn. slices > 1: a block a slice of a row (the grid is rows x slices),
// so that a long row's loads from the peers spread over as many SMs; the slices' sums of squares meet in
// rowSync[row]. The closing barrier is split: the block arrives as soon as it has read the peers' x (all that
// barrier protects), normalizes while the peers arrive, and waits only at the end, so its round trip hides behind
// the RMSNorm.
__global__ void __launch_bounds__(RMS_THREADS)
    allReduceRmsNormKernel(ncclWindow_t xwin, size_t xoff, const uint16_t* w, uint16_t* out, int rows, int hidden,
                           float eps, int slices, struct RowSync* rowSync, ncclDevComm dc) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x);
  bar.sync(cta, cuda::memory_order_acquire);
  const int n = dc.lsaSize;
  const bool vec = hidden % 8 == 0 && (xoff | (uintptr_t)out | (uintptr_t)w) % 16 == 0;
  for (int u = blockIdx.x; u < rows * slices; u += gridDim.x) {
    const int r = u / slices, lo = sliceAt(hidden, u % slices, slices, vec),
              hi = sliceAt(hidden, u % slices + 1, slices, vec);
    uint16_t* y = out + (size_t)r * hidden;
    const size_t rowOff = xoff + (size_t)r * hidden * sizeof(uint16_t);
    if (vec) {
      for (int v = lo / 8 + (int)threadIdx.x; v < hi / 8; v += blockDim.x) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int p0 = 0; p0 < n; p0 += 8) {
          uint4 q[8];
          const int np = n - p0 < 8 ? n - p0 : 8;
          for (int k = 0; k < np; k++) q[k] = ((const uint4*)ncclGetLsaPointer(xwin, rowOff, p0 + k))[v];
          for (int k = 0; k < np; k++) {
            float f[8];
            unpack8(q[k], f);
            for (int j = 0; j < 8; j++) acc[j] += f[j];
          }
        }
        ((uint4*)y)[v] = pack8(acc);
      }
    } else {
      for (int i = lo + (int)threadIdx.x; i < hi; i += blockDim.x) {
        float acc = 0;
        for (int p = 0; p < n; p++) acc += bf16ToFloat(((const uint16_t*)ncclGetLsaPointer(xwin, rowOff, p))[i]);
        y[i] = (uint16_t)floatToBf16(acc);
      }
    }
  }
  bar.arrive(cta, cuda::memory_order_release);  // this block is done with the peers' x (arrive syncs the block)
  if (slices == 1) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x)
      rmsNormRow(out + (size_t)r * hidden, w, out + (size_t)r * hidden, hidden, eps);
  } else {  // one slice a block; its own sums are in out, written by its own threads before arrive's block sync
    const int r = blockIdx.x / slices, s = blockIdx.x % slices;
    const int lo = sliceAt(hidden, s, slices, vec), hi = sliceAt(hidden, s + 1, slices, vec);
    uint16_t* y = out + (size_t)r * hidden;
    const float ss = rowSum(&rowSync[r], s, slices, blockSum(sumSquares(y, lo, hi, vec)));
    scaleRow(y, w, y, lo, hi, 1.0f / sqrtf(ss / (float)hidden + eps), vec);
  }
  bar.wait(cta, cuda::memory_order_relaxed);  // the peers may change x only once every rank has read it
}
MCCL_KERNEL_REGISTER(allReduceRmsNormKernel);

// Unfused, second step: each row of the allreduce's output, normalized into out.
__global__ void __launch_bounds__(RMS_THREADS)
    rmsNormKernel(const uint16_t* in, const uint16_t* w, uint16_t* out, int rows, int hidden, float eps) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x)
    rmsNormRow(in + (size_t)r * hidden, w, out + (size_t)r * hidden, hidden, eps);
}
MCCL_KERNEL_REGISTER(rmsNormKernel);

// The fused kernel for a few rows, with no barrier and no load from a peer: one block a row pushes its row of x
// into every peer's inbox (a window) as LL lines, NCCL's low-latency protocol: each 8-byte word is 4 bytes of
// data and the call's flag, stored as one access (a relaxed atomic), so a word whose flag is the call's holds the
// call's data.
// Every rank then reads its peers' rows from its own inbox, polling each word until its flag is the call's, and
// sums and normalizes as the barrier version does. The barrier version's two syncs and its round trip to the
// peers' memory become one way of stores.
//   inbox of each rank: [LL_ROWS rows][2 parities][lsaSize senders][lineStride words of 8 bytes]
//   flags: calls[row] (this rank's device memory) counts the calls of row `row`; a call's flag is that count
//   plus one, its parity the flag's low bit. A sender writes a parity's words again two calls later, by which
//   time every receiver has read them: it began that call only after the peers' previous call, which needed
//   this rank's words of the same row, and a receiver's calls run in order on its stream.
#define LL_ROWS 16      // rows an inbox holds
#define LL_REG_WORDS 8  // words of a row a thread keeps in registers (the rest goes through memory)

// Word i of this rank's row, with the call's flag, into every peer's inbox at [row, parity][this rank] (one relaxed
// 8-byte store each: the flag and the data land together).
__device__ void llPushWord(ncclWindow_t inbox, size_t slab, size_t lineStride, int i, uint32_t xi, uint32_t flag, int n,
                           int me) {
  const uint64_t word = (uint64_t)xi | ((uint64_t)flag << 32);
  for (int p = 0; p < n; p++)
    if (p != me) {
      uint64_t* to = (uint64_t*)ncclGetLsaPointer(inbox, ((slab + me) * lineStride + i) * 8, p);
      cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*to).store(word, cuda::memory_order_relaxed);
    }
}

// Word i of row x's sum over the LSA ranks, in rank order (as the barrier version): this rank's own word xi, the
// peers' from this rank's inbox, each polled until its flag is the call's.
__device__ uint32_t llSumWord(uint64_t* mine, size_t slab, size_t lineStride, int i, uint32_t xi, uint32_t flag, int n,
                              int me) {
  float lo = 0, hi = 0;
  for (int p = 0; p < n; p++) {
    uint32_t v = xi;
    if (p != me) {
      cuda::atomic_ref<uint64_t, cuda::thread_scope_system> at(mine[(slab + p) * lineStride + i]);
      uint64_t word;
      do word = at.load(cuda::memory_order_relaxed);
      while ((uint32_t)(word >> 32) != flag);
      v = (uint32_t)word;
    }
    lo += bf16ToFloat(v & 0xffffu);
    hi += bf16ToFloat(v >> 16);
  }
  return floatToBf16(lo) | (floatToBf16(hi) << 16);
}

__device__ float wordSquares(uint32_t v) {
  const float lo = bf16ToFloat(v & 0xffffu), hi = bf16ToFloat(v >> 16);
  return lo * lo + hi * hi;
}
__device__ uint32_t wordScaled(uint32_t v, uint32_t wv, float rstd) {
  return floatToBf16(bf16ToFloat(v & 0xffffu) * rstd * bf16ToFloat(wv & 0xffffu)) |
         (floatToBf16(bf16ToFloat(v >> 16) * rstd * bf16ToFloat(wv >> 16)) << 16);
}

__global__ void __launch_bounds__(RMS_THREADS)
    allReduceRmsNormLLKernel(const uint16_t* x, ncclWindow_t inbox, size_t lineStride, uint32_t* calls,
                             const uint16_t* w, uint16_t* out, int hidden, float eps, ncclDevComm dc) {
  const int n = dc.lsaSize, me = dc.lsaRank, r = blockIdx.x, words = hidden / 2;  // 2 bf16 a word
  const int tid = threadIdx.x, nt = blockDim.x;
  const uint32_t flag = calls[r] + 1;
  const size_t slab = ((size_t)r * 2 + (flag & 1)) * (size_t)n;  // this row and parity, sender 0
  const uint32_t* xr = (const uint32_t*)(x + (size_t)r * hidden);
  const uint32_t* wr = (const uint32_t*)w;
  uint32_t* y = (uint32_t*)(out + (size_t)r * hidden);
  uint64_t* mine = (uint64_t*)ncclGetLocalPointer(inbox, 0);
  // The thread's first LL_REG_WORDS words (tid, tid + nt, ...) stay in registers from load to store, and their
  // loads are all issued before the first store to a peer: one latency, not one a word. Words past them (a block
  // smaller than the row needs, as on the sim) go the same way one at a time, through y.
  uint32_t reg[LL_REG_WORDS];
#pragma unroll
  for (int k = 0; k < LL_REG_WORDS; k++) reg[k] = tid + k * nt < words ? xr[tid + k * nt] : 0;
#pragma unroll
  for (int k = 0; k < LL_REG_WORDS; k++)
    if (tid + k * nt < words) llPushWord(inbox, slab, lineStride, tid + k * nt, reg[k], flag, n, me);
  for (int i = tid + LL_REG_WORDS * nt; i < words; i += nt) llPushWord(inbox, slab, lineStride, i, xr[i], flag, n, me);
  // The sums (rounded to bf16, as the unfused allreduce leaves them) and their squares.
  float ss = 0;
#pragma unroll
  for (int k = 0; k < LL_REG_WORDS; k++)
    if (tid + k * nt < words) {
      reg[k] = llSumWord(mine, slab, lineStride, tid + k * nt, reg[k], flag, n, me);
      ss += wordSquares(reg[k]);
    }
  for (int i = tid + LL_REG_WORDS * nt; i < words; i += nt) {
    y[i] = llSumWord(mine, slab, lineStride, i, xr[i], flag, n, me);
    ss += wordSquares(y[i]);  // this thread's own store: read back by the thread that wrote it
  }
  const float rstd = 1.0f / sqrtf(blockSum(ss) / (float)hidden + eps);
#pragma unroll
  for (int k = 0; k < LL_REG_WORDS; k++)
    if (tid + k * nt < words) y[tid + k * nt] = wordScaled(reg[k], wr[tid + k * nt], rstd);
  for (int i = tid + LL_REG_WORDS * nt; i < words; i += nt) y[i] = wordScaled(y[i], wr[i], rstd);
  if (tid == 0) calls[r] = flag;
}
MCCL_KERNEL_REGISTER(allReduceRmsNormLLKernel);

// ---- host helpers -----------------------------------------------------------------------------------------
static unsigned readErrors(void) {
  unsigned e = ~0u;
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaMemcpy(&e, errors, 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    return ~0u;
  return e;
}

// Allreduce inputs: small integers, so every sum is exact in float and the check is equality.
static float arValue(int r, size_t i, int seed) {
  return (float)((int)((i * 7 + (size_t)r * 13 + (size_t)seed) % 17) - 8);
}

// ---- tests ------------------------------------------------------------------------------------------------
static void test_library(void) {
  int v = 0;
  CHECK_NCCL(ncclGetVersion(&v));
  if (rank == 0) printf("# library: %s, NCCL version code %d\n", onMinccl() ? "minccl's drop-in" : "NCCL", v);
  if (v < NCCL_VERSION(2, 28, 0)) FAILF("NCCL %d has no device API (2.28 or later)", v);
}

static void test_init(void) {
  CHECK_NCCL(ncclTestCommInit(&comm));
  CHECK_NCCL(ncclMemAlloc(&buf, WIN_BYTES));
  CHECK_NCCL(ncclMemAlloc(&out, WIN_BYTES));
  CHECK_NCCL(ncclCommWindowRegister(comm, buf, WIN_BYTES, &win, NCCL_WIN_COLL_SYMMETRIC));
  CHECK_NCCL(ncclCommWindowRegister(comm, out, WIN_BYTES, &outWin, NCCL_WIN_COLL_SYMMETRIC));
  CHECK_CUDA(cudaMalloc((void**)&errors, sizeof(unsigned)));
}

#define NEED_COMM() \
  if (!comm || !win) SKIPF("no communicator or window (test_init failed)")
#define NEED_DEVCOMM() \
  if (!haveDevComm) SKIPF("no device communicator (test_devcomm failed)")

// The host's teams. The ranks of one host form the LSA team (every rank here shares one machine).
static void test_teams(void) {
  NEED_COMM();
  ncclTeam w = ncclTeamWorld(comm), l = ncclTeamLsa(comm), r = ncclTeamRail(comm);
  if (w.nRanks != nranks || w.rank != rank || w.stride != 1)
    FAILF("ncclTeamWorld {%d, %d, %d}, expected {%d, %d, 1}", w.nRanks, w.rank, w.stride, nranks, rank);
  if (l.nRanks != nranks || l.rank != rank || l.stride != 1)
    FAILF("ncclTeamLsa {%d, %d, %d}, expected {%d, %d, 1}", l.nRanks, l.rank, l.stride, nranks, rank);
  if (r.nRanks != 1 || r.rank != 0 || r.stride != nranks)
    FAILF("ncclTeamRail {%d, %d, %d}, expected {1, 0, %d}", r.nRanks, r.rank, r.stride, nranks);
  for (int p = 0; p < nranks; p++) {
    if (ncclTeamRankToWorld(comm, l, p) != p) FAILF("ncclTeamRankToWorld(lsa, %d) is not %d", p, p);
    if (ncclTeamRankToLsa(comm, w, p) != p) FAILF("ncclTeamRankToLsa(world, %d) is not %d", p, p);
    if (!ncclTeamRankIsMember(l, w, p) || ncclTeamRankToTeam(l, w, p) != p) FAILF("world rank %d is not in lsa", p);
  }
  ncclTeam inner = ncclTeamInnerFactor(w, 1), outer = ncclTeamOuterFactor(w, 1);
  if (inner.nRanks != 1 || outer.nRanks != nranks || outer.rank != rank) FAILF("the factors of the world team");
}

// ncclLsaBarrierCreateRequirement's requirement, and a device communicator made of the tests' barriers, a barrier
// requirement of our own and an extra buffer aligned to 4 KiB.
static void test_devcomm(void) {
  NEED_COMM();
  ncclDevResourceRequirements barReq, extraReq;
  memset(&extraReq, 0, sizeof(extraReq));
  CHECK_NCCL(ncclLsaBarrierCreateRequirement(ncclTeamLsa(comm), NB, &userBar, &barReq));
  if (userBar.nBarriers != NB) FAILF("the handle holds %d barriers, expected %d", userBar.nBarriers, NB);
  if (barReq.bufferSize != (size_t)(3 * NB + NB * nranks) * sizeof(uint32_t))
    FAILF("the barriers' buffer is %zu bytes, expected %zu", barReq.bufferSize,
          (size_t)(3 * NB + NB * nranks) * sizeof(uint32_t));
  if (barReq.outBufferHandle != &userBar.bufHandle) FAILF("the requirement does not fill the handle's bufHandle");
  extraReq.bufferSize = 1000;
  extraReq.bufferAlign = 4096;
  extraReq.outBufferHandle = &extraBuf;
  barReq.next = &extraReq;
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof(reqs));
  reqs.lsaBarrierCount = NB;
  reqs.resourceRequirementsList = &barReq;
  CHECK_NCCL(ncclDevCommCreate(comm, &reqs, &devComm));
  haveDevComm = 1;
  if (devComm.rank != rank || devComm.nRanks != nranks || devComm.lsaRank != rank || devComm.lsaSize != nranks)
    FAILF("devComm rank %d of %d, LSA %d of %d", devComm.rank, devComm.nRanks, devComm.lsaRank, devComm.lsaSize);
  if (devComm.lsaBarrier.nBarriers < NB)
    FAILF("devComm holds %d LSA barriers, asked %d", devComm.lsaBarrier.nBarriers, NB);
  if (devComm.resourceWindow == NULL) FAILF("devComm has no resource window");
  if (ncclGetResourceBufferOffset(extraBuf) % 4096 != 0)
    FAILF("the extra buffer is at %zu, not 4 KiB aligned", ncclGetResourceBufferOffset(extraBuf));
  if (devComm.resourceWindow_inlined.lsaRank != rank || devComm.resourceWindow_inlined.worldRank != rank)
    FAILF("the inlined resource window says LSA rank %d, world rank %d", devComm.resourceWindow_inlined.lsaRank,
          devComm.resourceWindow_inlined.worldRank);
  // The window a kernel reads through the handle: this rank's buffer at lsaFlatBase + lsaRank * stride.
  struct ncclWindow_vidmem wv;
  CHECK_CUDA(cudaMemcpy(&wv, win, sizeof(wv), cudaMemcpyDeviceToHost));
  if (wv.lsaRank != rank || wv.worldRank != rank || wv.stride4G == 0)
    FAILF("window: lsaRank %d, worldRank %d, stride4G %u", wv.lsaRank, wv.worldRank, wv.stride4G);
  uint32_t probe = 0x5eed0000u + (uint32_t)rank, got = 0;
  CHECK_CUDA(cudaMemcpy(buf, &probe, 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(&got, wv.lsaFlatBase + ((size_t)wv.lsaRank * wv.stride4G << 32), 4, cudaMemcpyDeviceToHost));
  if (got != probe) FAILF("the flat range's slot %d holds 0x%x, not this rank's 0x%x", wv.lsaRank, got, probe);
}

static void test_peer_pointers(void) {
  NEED_DEVCOMM();
  CHECK_CUDA(cudaMemsetAsync(errors, 0, 4, stream));
  CHECK_CUDA(launch(peerPointersKernel, NB, THREADS, stream, devComm, win, extraBuf, errors));
  CHECK_CUDA(launch(resourceBufferKernel, 1, THREADS, stream, devComm, extraBuf, 1000, errors));
  unsigned e = readErrors();
  if (e) FAILF("%u mismatches between the API's pointers, or in what the peers stored", e);
}

static void barrierLoop(int mode, int iters) {
  NEED_DEVCOMM();
  CHECK_CUDA(cudaMemsetAsync(errors, 0, 4, stream));
  // Two blocks: two barriers of the set side by side (the sim runs every thread of every rank on its cores).
  CHECK_CUDA(launch(barrierKernel, 2, THREADS, stream, devComm, win, userBar, iters, mode, errors));
  unsigned e = readErrors();
  if (e) FAILF("mode %d: %u stale words in %d barrier sessions", mode, e, iters);
}
static void test_barrier_acq_rel(void) {
  barrierLoop(0, ITERS);
}
static void test_barrier_release_acquire(void) {
  barrierLoop(1, ITERS / 4);
}
static void test_barrier_seq_cst(void) {
  barrierLoop(2, ITERS / 4);
}
static void test_barrier_relaxed_fenced(void) {
  barrierLoop(3, ITERS / 4);
}
static void test_barrier_own_handle(void) {
  barrierLoop(4, ITERS / 4);
}

// The allreduce kernel at awkward sizes and offsets, in and out of place, against exact sums; then
// ncclAllReduce on the same window buffers (a window serves the host API too).
static void test_allreduce(void) {
  NEED_DEVCOMM();
  static const size_t counts[] = {1, 3, 4, 1031, 4096 + 5, 70001};
  static const size_t offs[] = {0, 4, 16, 0, 12, 256};
  float* h = (float*)malloc(WIN_BYTES);
  for (int c = 0; c < 6 && status != 1; c++)
    for (int inPlace = 0; inPlace < 2 && status != 1; inPlace++) {
      const size_t count = counts[c], off = offs[c];
      if (off + count * 4 > WIN_BYTES) continue;
      for (size_t i = 0; i < count; i++) h[i] = arValue(rank, i, c);
      CHECK_CUDA(cudaMemcpyAsync((char*)buf + off, h, count * 4, cudaMemcpyHostToDevice, stream));
      int blocks = count > 4096 ? NB : 2;
      CHECK_CUDA(
          launch(allReduceKernel, blocks, THREADS, stream, win, off, inPlace ? win : outWin, off, count, devComm));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      CHECK_CUDA(cudaMemcpy(h, (char*)(inPlace ? buf : out) + off, count * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int p = 0; p < nranks; p++) want += arValue(p, i, c);
        if (h[i] != want) {
          FAILF("count %zu at offset %zu %s: element %zu is %g, expected %g", count, off,
                inPlace ? "in place" : "out of place", i, h[i], want);
          break;
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);  // no rank refills its input while a peer's kernel may still read it
    }
  const size_t count = 5000;
  for (size_t i = 0; i < count; i++) h[i] = arValue(rank, i, 9);
  CHECK_CUDA(cudaMemcpyAsync(buf, h, count * 4, cudaMemcpyHostToDevice, stream));
  CHECK_NCCL(ncclAllReduce(buf, out, count, ncclFloat32, ncclSum, comm, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaMemcpy(h, out, count * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count && status != 1; i++) {
    float want = 0;
    for (int p = 0; p < nranks; p++) want += arValue(p, i, 9);
    if (h[i] != want) FAILF("ncclAllReduce on the windows: element %zu is %g, expected %g", i, h[i], want);
  }
  free(h);
}

// Rank r's hidden state: multiples of 1/8 in [-11/8, 11/8], exact in bf16, so their sums are too.
static float xValue(int r, size_t i) {
  return (float)((int)((i * 5 + (size_t)r * 3) % 23) - 11) / 8.0f;
}

// The LL kernel's inbox (a window) and its per-row call counts, for rows of at most `maxHidden` elements.
struct llInbox {
  void* mem;
  ncclWindow_t win;
  size_t lineStride;  // 8-byte words a sender's row takes
  uint32_t* calls;    // [LL_ROWS], zero at first
};
static int llInboxCreate(struct llInbox* ib, int maxHidden) {
  memset(ib, 0, sizeof(*ib));
  ib->lineStride = (size_t)maxHidden / 2;
  const size_t bytes = (size_t)LL_ROWS * 2 * nranks * ib->lineStride * 8;
  if (ncclMemAlloc(&ib->mem, bytes) != ncclSuccess ||
      ncclCommWindowRegister(comm, ib->mem, bytes, &ib->win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess ||
      cudaMemset(ib->mem, 0, bytes) != cudaSuccess || cudaMalloc((void**)&ib->calls, LL_ROWS * 4) != cudaSuccess ||
      cudaMemset(ib->calls, 0, LL_ROWS * 4) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
    return 1;
  MPI_Barrier(MPI_COMM_WORLD);  // every inbox zeroed before any rank's first push
  return 0;
}
static void llInboxFree(struct llInbox* ib) {
  if (ib->win) ncclCommWindowDeregister(comm, ib->win);
  if (ib->mem) ncclMemFree(ib->mem);
  if (ib->calls) cudaFree(ib->calls);
  memset(ib, 0, sizeof(*ib));
}
// The kernel's limits: whole 4-byte words a row, at most LL_ROWS rows, rows that fit the inbox's.
static cudaError_t launchLL(const struct llInbox* ib, const void* x, const uint16_t* w, uint16_t* y, int rows,
                            int hidden, float eps, int threads, const ncclDevComm& dc) {
  if (rows < 1 || rows > LL_ROWS || hidden < 2 || hidden % 2 || (size_t)hidden > ib->lineStride * 2)
    return cudaErrorInvalidValue;
  return launch(allReduceRmsNormLLKernel, rows, threads, stream, (const uint16_t*)x, ib->win, ib->lineStride, ib->calls,
                w, y, hidden, eps, dc);
}

// The fused kernels and ncclAllReduce + the RMSNorm kernel, each against the host's RMSNorm of the exact sums.
// The LL kernel (even hidden sizes) runs twice, on other data first: a word of the first call read in the
// second, or the second's parity confused with the first's, shows as a wrong sum.
static void fusedRmsNorm(int rows, int hidden, int slices, struct llInbox* ib) {
  const size_t n = (size_t)rows * hidden;
  const float eps = 1e-6f;
  uint16_t *x = (uint16_t*)malloc(n * 2), *w = (uint16_t*)malloc(hidden * 2), *got = (uint16_t*)malloc(n * 2);
  float* want = (float*)malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = ncclTestToBf16(xValue(rank, i));
  for (int i = 0; i < hidden; i++) w[i] = ncclTestToBf16(0.5f + (float)(i % 13) / 13.0f);
  for (int r = 0; r < rows; r++) {
    double ss = 0;
    for (int i = 0; i < hidden; i++) {
      float s = 0;
      for (int p = 0; p < nranks; p++) s += xValue(p, (size_t)r * hidden + i);
      want[(size_t)r * hidden + i] = s;
      ss += (double)s * s;
    }
    const double rstd = 1.0 / sqrt(ss / hidden + eps);
    for (int i = 0; i < hidden; i++) want[(size_t)r * hidden + i] *= (float)rstd * ncclTestFromBf16(w[i]);
  }
  const int ll = hidden % 2 == 0 && rows <= LL_ROWS && (size_t)hidden <= ib->lineStride * 2;
  uint16_t *dw = NULL, *dres[3] = {NULL, NULL, NULL};
  struct RowSync* rs = NULL;
  CHECK_CUDA(cudaMalloc((void**)&rs, rows * sizeof(*rs)));
  CHECK_CUDA(cudaMemsetAsync(rs, 0, rows * sizeof(*rs), stream));  // before the kernel on the same stream
  CHECK_CUDA(cudaMalloc((void**)&dw, hidden * 2));
  for (int v = 0; v < 3; v++) CHECK_CUDA(cudaMalloc((void**)&dres[v], n * 2));
  CHECK_CUDA(cudaMemcpyAsync(dw, w, hidden * 2, cudaMemcpyHostToDevice, stream));
  if (ll) {  // other data first (x reversed), into dres[2], which the second call overwrites
    for (size_t i = 0; i < n; i++) got[i] = x[n - 1 - i];
    CHECK_CUDA(cudaMemcpyAsync(buf, got, n * 2, cudaMemcpyHostToDevice, stream));
    CHECK_CUDA(launchLL(ib, buf, dw, dres[2], rows, hidden, eps, THREADS, devComm));
    CHECK_CUDA(cudaStreamSynchronize(stream));  // got is reused below
  }
  CHECK_CUDA(cudaMemcpyAsync(buf, x, n * 2, cudaMemcpyHostToDevice, stream));
  // Whole rows: two blocks take them in turn; sliced: a block a slice (every barrier of devComm at most).
  const int blocks = slices == 1 ? 2 : rows * slices;
  if (blocks > NB) FAILF("fused RMSNorm: %d rows x %d slices need more barriers than %d", rows, slices, NB);
  CHECK_CUDA(launch(allReduceRmsNormKernel, blocks, THREADS, stream, win, 0, dw, dres[0], rows, hidden, eps, slices, rs,
                    devComm));
  CHECK_NCCL(ncclAllReduce(buf, out, n, ncclBfloat16, ncclSum, comm, stream));
  CHECK_CUDA(launch(rmsNormKernel, rows, THREADS, stream, (const uint16_t*)out, dw, dres[1], rows, hidden, eps));
  if (ll) CHECK_CUDA(launchLL(ib, buf, dw, dres[2], rows, hidden, eps, THREADS, devComm));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  static const char* const names[3] = {"fused", "allreduce + RMSNorm", "fused (LL)"};
  for (int v = 0; v < 2 + ll && status != 1; v++) {
    CHECK_CUDA(cudaMemcpy(got, dres[v], n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n && status != 1; i++)
      if (fabsf(ncclTestFromBf16(got[i]) - want[i]) > 2e-2f * (1.0f + fabsf(want[i])))
        FAILF("%s: row %zu element %zu is %g, expected %g", names[v], i / hidden, i % hidden, ncclTestFromBf16(got[i]),
              want[i]);
  }
  cudaFree(dw);
  cudaFree(rs);
  for (int v = 0; v < 3; v++) cudaFree(dres[v]);
  free(x);
  free(w);
  free(got);
  free(want);
  MPI_Barrier(MPI_COMM_WORLD);
}
// Odd rows (one element at a time), then rows of whole 16-byte pieces.
static void test_fused_rmsnorm(void) {
  NEED_DEVCOMM();
  struct llInbox ib;
  if (llInboxCreate(&ib, 4096)) FAILF("the LL kernel's inbox: %s", ncclGetLastError(comm));
  if (status != 1) fusedRmsNorm(3, 517, 1, &ib);
  if (status != 1) fusedRmsNorm(2, 1024, 1, &ib);
  if (status != 1) fusedRmsNorm(5, 4096, 1, &ib);  // two rows or three a block, two pieces a thread
  if (status != 1) fusedRmsNorm(1, 1024, 1, &ib);  // a block without a row
  if (status != 1) fusedRmsNorm(2, 1022, 1, &ib);  // LL: rows of whole words that are not whole 16-byte pieces
  if (status != 1) fusedRmsNorm(1, 4096, 8, &ib);  // a row in slices of 64 pieces, one per block
  if (status != 1) fusedRmsNorm(2, 1000, 3, &ib);  // 125 pieces in slices of 41 or 42
  if (status != 1) fusedRmsNorm(1, 517, 5, &ib);   // odd rows: slices of single elements
  if (status != 1) fusedRmsNorm(4, 2048, 2, &ib);  // rows x slices: every barrier of devComm
  llInboxFree(&ib);
}

// What minccl refuses, by name (NCCL does not check these: skipped there).
static void test_bad_input(void) {
  NEED_DEVCOMM();
  if (!onMinccl()) SKIPF("NCCL's library: its answers to bad input are its own");
  ncclGinBarrierHandle gh;
  ncclDevResourceRequirements rr;
  EXPECT_NCCL(ncclGinBarrierCreateRequirement(comm, ncclTeamRail(comm), 1, &gh, &rr), ncclInvalidUsage);
  ncclLLA2AHandle ah;
  EXPECT_NCCL(ncclLLA2ACreateRequirement(1, 1, &ah, &rr), ncclInvalidUsage);
  ncclDevCommRequirements reqs;
  ncclDevComm dc;
  memset(&reqs, 0, sizeof(reqs));
  reqs.lsaBarrierCount = 1 << 28;  // more than the resource window holds
  EXPECT_NCCL(ncclDevCommCreate(comm, &reqs, &dc), ncclInvalidArgument);
  memset(&reqs, 0, sizeof(reqs));
  reqs.ginSignalCount = 4;
  EXPECT_NCCL(ncclDevCommCreate(comm, &reqs, &dc), ncclInvalidUsage);
  memset(&reqs, 0, sizeof(reqs));
  reqs.lsaMultimem = true;
  EXPECT_NCCL(ncclDevCommCreate(comm, &reqs, &dc), ncclInvalidUsage);
  EXPECT_NCCL(ncclDevCommCreate(NULL, &reqs, &dc), ncclInvalidArgument);
  // A device communicator of another communicator, destroyed on this one; then twice; a window likewise.
  ncclComm_t sub = NULL;
  CHECK_NCCL(ncclCommSplit(comm, 0, rank, &sub, NULL));
  memset(&reqs, 0, sizeof(reqs));
  reqs.lsaBarrierCount = 1;
  ncclWindow_t subWin = NULL;
  CHECK_NCCL(ncclCommWindowRegister(sub, out, WIN_BYTES, &subWin, NCCL_WIN_COLL_SYMMETRIC));
  CHECK_NCCL(ncclDevCommCreate(sub, &reqs, &dc));
  EXPECT_NCCL(ncclDevCommDestroy(comm, &dc), ncclInvalidArgument);
  EXPECT_NCCL(ncclCommWindowDeregister(comm, subWin), ncclInvalidArgument);
  CHECK_NCCL(ncclDevCommDestroy(sub, &dc));
  EXPECT_NCCL(ncclDevCommDestroy(sub, &dc), ncclInvalidArgument);
  // Finalized: refused, nothing made.
  CHECK_NCCL(ncclCommWindowDeregister(sub, subWin));
  CHECK_NCCL(ncclCommFinalize(sub));
  EXPECT_NCCL(ncclDevCommCreate(sub, &reqs, &dc), ncclInvalidUsage);
  CHECK_NCCL(ncclCommDestroy(sub));
  ncclTeam none = ncclTeamWorld(NULL);
  if (none.nRanks != 0) FAILF("ncclTeamWorld(NULL) is a team of %d", none.nRanks);
}

// ---- timing (--bench) ------------------------------------------------------------------------------------
struct benchRun {
  const char* what;  // allreduce, rmsnorm, or NULL: both
  int eager, graph;  // the modes to time
  int iters;         // calls per timing
  size_t maxBytes;   // the allreduce's largest size
  int maxRows;       // the RMSNorm's most rows (16)
  int maxHidden;     // and largest hidden size (16384)
  ncclDevComm dc;    // BENCH_BLOCKS barriers
};

static int haveGraphs(void) {
  return &cudaStreamBeginCapture != NULL && &cudaGraphLaunch != NULL;
}

// Microseconds per call of `call` (iters calls, after warm-up), the slowest rank's; graph: the calls captured in
// one CUDA graph, launched once. -1 when a call or the capture fails.
template <typename F>
static double timeCalls(F call, int iters, int graph) {
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  int ok = 1;
  for (int i = 0; i < 3 && ok; i++) ok = call();
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  if (ok && graph) {
    ok = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    for (int i = 0; i < iters && ok; i++) ok = call();
    ok = cudaStreamEndCapture(stream, &g) == cudaSuccess && ok;
    ok = ok && cudaGraphInstantiateWithFlags(&ge, g, 0) == cudaSuccess;
    ok = ok && cudaGraphLaunch(ge, stream) == cudaSuccess;  // warm-up
  }
  ok = cudaStreamSynchronize(stream) == cudaSuccess && ok;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  float ms = 0;
  if (ok) {
    MPI_Barrier(MPI_COMM_WORLD);
    cudaEventRecord(t0, stream);
    if (graph)
      ok = cudaGraphLaunch(ge, stream) == cudaSuccess;
    else
      for (int i = 0; i < iters && ok; i++) ok = call();
    cudaEventRecord(t1, stream);
    ok = cudaEventSynchronize(t1) == cudaSuccess && ok;
    cudaEventElapsedTime(&ms, t0, t1);
  }
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  double us = ok ? (double)ms * 1e3 / iters : -1;
  MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int allOk = ok;
  MPI_Allreduce(MPI_IN_PLACE, &allOk, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return allOk ? us : -1;
}

static void printUs(double us) {
  if (us < 0)
    printf(" %11s", "-");
  else
    printf(" %11.2f", us);
}

// The allreduce kernel from 8 B to maxBytes, out of place, float sums, checked after timing.
static int benchAllReduce(const struct benchRun* b) {
  void *sb = NULL, *rb = NULL;
  ncclWindow_t sw = NULL, rw = NULL;
  if (ncclMemAlloc(&sb, b->maxBytes) != ncclSuccess || ncclMemAlloc(&rb, b->maxBytes) != ncclSuccess ||
      ncclCommWindowRegister(comm, sb, b->maxBytes, &sw, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess ||
      ncclCommWindowRegister(comm, rb, b->maxBytes, &rw, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) {
    fprintf(stderr, "rank %d: allreduce benchmark: buffers or windows of %zu bytes: %s\n", rank, b->maxBytes,
            ncclGetLastError(comm));
    return 1;
  }
  const size_t maxCount = b->maxBytes / 4;
  float* h = (float*)malloc(b->maxBytes);
  for (size_t i = 0; i < maxCount; i++) h[i] = arValue(rank, i, 1);
  cudaMemcpy(sb, h, b->maxBytes, cudaMemcpyHostToDevice);
  // A copy from pageable memory may return before it lands, ordered only with the legacy stream: the kernels
  // run on a non-blocking stream.
  cudaDeviceSynchronize();
  if (rank == 0) {
    printf("# allreduce kernel (float sum, out of place) on %s, %d ranks, up to %d blocks of %d threads, %d calls\n",
           onMinccl() ? "minccl's drop-in" : "NCCL", nranks, BENCH_BLOCKS, BENCH_THREADS, b->iters);
    printf("#%11s %11s %11s %11s %11s %7s\n", "size(B)", "count", "eager(us)", "graph(us)", "algbw(GB/s)", "#wrong");
  }
  int wrongAll = 0;
  for (size_t bytes = 8; bytes <= b->maxBytes; bytes *= 2) {
    const size_t count = bytes / 4;
    size_t blocks = count / ((size_t)BENCH_THREADS * 16);
    blocks = blocks < 1 ? 1 : blocks > BENCH_BLOCKS ? BENCH_BLOCKS : blocks;
    const ncclDevComm dc = b->dc;
    auto call = [&]() {
      return launch(allReduceKernel, (int)blocks, BENCH_THREADS, stream, sw, (size_t)0, rw, (size_t)0, count, dc) ==
             cudaSuccess;
    };
    cudaMemsetAsync(rb, 0, bytes, stream);
    double eager = b->eager ? timeCalls(call, b->iters, 0) : -1;
    double graph = b->graph && haveGraphs() ? timeCalls(call, b->iters, 1) : -1;
    cudaStreamSynchronize(stream);
    cudaMemcpy(h, rb, bytes, cudaMemcpyDeviceToHost);
    long wrong = 0;
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int p = 0; p < nranks; p++) want += arValue(p, i, 1);
      wrong += h[i] != want;
    }
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    wrongAll += wrong != 0;
    if (rank == 0) {
      double best = graph > 0 ? graph : eager;
      printf(" %11zu %11zu", bytes, count);
      printUs(eager);
      printUs(graph);
      printf(" %11.2f %7ld\n", best > 0 ? (double)bytes / best / 1e3 : 0.0, wrong);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  ncclCommWindowDeregister(comm, sw);
  ncclCommWindowDeregister(comm, rw);
  ncclMemFree(sb);
  ncclMemFree(rb);
  free(h);
  return wrongAll;
}

// The fused allreduce + RMSNorm (bf16) against ncclAllReduce followed by the same RMSNorm kernel, both in a CUDA
// graph (eager where there are none), hidden 4096..16384, 1..16 rows; the two results compared after timing.
static int benchRmsNorm(const struct benchRun* b) {
  const int maxRows = b->maxRows, maxHidden = b->maxHidden;
  const size_t maxBytes = (size_t)maxRows * maxHidden * 2;
  void *x = NULL, *y = NULL;
  ncclWindow_t xw = NULL, yw = NULL;
  uint16_t *w = NULL, *fused = NULL, *fusedLL = NULL, *unfused = NULL;
  struct RowSync* rs = NULL;
  struct llInbox ib;
  memset(&ib, 0, sizeof(ib));
  if (ncclMemAlloc(&x, maxBytes) != ncclSuccess || ncclMemAlloc(&y, maxBytes) != ncclSuccess ||
      ncclCommWindowRegister(comm, x, maxBytes, &xw, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess ||
      ncclCommWindowRegister(comm, y, maxBytes, &yw, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess ||
      cudaMalloc((void**)&w, maxHidden * 2) != cudaSuccess || cudaMalloc((void**)&fused, maxBytes) != cudaSuccess ||
      cudaMalloc((void**)&unfused, maxBytes) != cudaSuccess || cudaMalloc((void**)&fusedLL, maxBytes) != cudaSuccess ||
      cudaMalloc((void**)&rs, maxRows * sizeof(*rs)) != cudaSuccess ||
      cudaMemset(rs, 0, maxRows * sizeof(*rs)) != cudaSuccess || llInboxCreate(&ib, maxHidden)) {
    fprintf(stderr, "rank %d: RMSNorm benchmark: buffers or windows: %s\n", rank, ncclGetLastError(comm));
    return 1;
  }
  uint16_t* h = (uint16_t*)malloc(maxBytes);
  uint16_t* h2 = (uint16_t*)malloc(maxBytes);
  uint16_t* h3 = (uint16_t*)malloc(maxBytes);
  for (size_t i = 0; i < maxBytes / 2; i++) h[i] = ncclTestToBf16(xValue(rank, i));
  cudaMemcpy(x, h, maxBytes, cudaMemcpyHostToDevice);
  for (int i = 0; i < maxHidden; i++) h[i] = ncclTestToBf16(0.5f + (float)(i % 13) / 13.0f);
  cudaMemcpy(w, h, maxHidden * 2, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();  // landed before the non-blocking stream's kernels read them (as in benchAllReduce)
  const int graph = b->graph && haveGraphs();
  if (rank == 0) {
    printf(
        "# allreduce + RMSNorm, bf16, on %s, %d ranks, %s, %d calls: fused (one kernel on the device API: "
        "barriers and loads, or LL stores) against ncclAllReduce + the RMSNorm kernel; speedup: unfused over the "
        "faster fused\n",
        onMinccl() ? "minccl's drop-in" : "NCCL", nranks, graph ? "CUDA graph" : "eager launches", b->iters);
    printf("#%5s %7s %11s %11s %11s %8s %7s\n", "rows", "hidden", "fused(us)", "fusedLL(us)", "unfused(us)", "speedup",
           "#wrong");
  }
  int wrongAll = 0;
  const float eps = 1e-6f;
  for (int hidden = 4096; hidden <= maxHidden; hidden *= 2)
    for (int rows = 1; rows <= maxRows; rows *= 2) {
      const ncclDevComm dc = b->dc;
      const size_t n = (size_t)rows * hidden;
      // One thread per 16-byte piece of a row, whole warps, at most RMS_THREADS: both kernels alike.
      const int threads = hidden / 8 < RMS_THREADS ? (hidden / 8 + 31) / 32 * 32 : RMS_THREADS;
      // The fused kernel cuts a row of more than RMS_SLICE_PIECES pieces into slices, a block each, as far as
      // the barriers go (one a block): a row's loads from the peers then come from as many SMs.
      int slices = (hidden / 8 + RMS_SLICE_PIECES - 1) / RMS_SLICE_PIECES;
      if (slices > BENCH_BLOCKS / rows) slices = BENCH_BLOCKS / rows;
      if (slices < 1 || hidden % 8) slices = 1;
      const int sliceThreads =
          (hidden / 8 / slices + 31) / 32 * 32 < RMS_THREADS ? (hidden / 8 / slices + 31) / 32 * 32 : RMS_THREADS;
      auto fusedCall = [&]() {
        return launch(allReduceRmsNormKernel, rows * slices, sliceThreads, stream, xw, (size_t)0, (const uint16_t*)w,
                      fused, rows, hidden, eps, slices, rs, dc) == cudaSuccess;
      };
      auto fusedLLCall = [&]() {
        return launchLL(&ib, x, (const uint16_t*)w, fusedLL, rows, hidden, eps, threads, dc) == cudaSuccess;
      };
      auto unfusedCall = [&]() {
        return ncclAllReduce(x, y, n, ncclBfloat16, ncclSum, comm, stream) == ncclSuccess &&
               launch(rmsNormKernel, rows, threads, stream, (const uint16_t*)y, (const uint16_t*)w, unfused, rows,
                      hidden, eps) == cudaSuccess;
      };
      double tf = timeCalls(fusedCall, b->iters, graph), tl = timeCalls(fusedLLCall, b->iters, graph),
             tu = timeCalls(unfusedCall, b->iters, graph);
      cudaStreamSynchronize(stream);
      cudaMemcpy(h, fused, n * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(h2, unfused, n * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(h3, fusedLL, n * 2, cudaMemcpyDeviceToHost);
      long wrong = 0;  // elements of either fused result off the unfused one
      for (size_t i = 0; i < n; i++) {
        float a = ncclTestFromBf16(h[i]), l = ncclTestFromBf16(h3[i]), c = ncclTestFromBf16(h2[i]);
        wrong += fabsf(a - c) > 2e-2f * (1.0f + fabsf(c)) || fabsf(l - c) > 2e-2f * (1.0f + fabsf(c));
      }
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      wrongAll += wrong != 0 || tf < 0 || tl < 0 || tu < 0;
      if (rank == 0) {
        const double best = tl > 0 && tl < tf ? tl : tf;
        printf(" %5d %7d", rows, hidden);
        printUs(tf);
        printUs(tl);
        printUs(tu);
        printf(" %8.2f %7ld\n", best > 0 && tu > 0 ? tu / best : 0.0, wrong);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  ncclCommWindowDeregister(comm, xw);
  ncclCommWindowDeregister(comm, yw);
  ncclMemFree(x);
  ncclMemFree(y);
  cudaFree(w);
  cudaFree(fused);
  cudaFree(unfused);
  cudaFree(fusedLL);
  cudaFree(rs);
  llInboxFree(&ib);
  free(h);
  free(h2);
  free(h3);
  return wrongAll;
}

// The timing code itself, small (the sim's timings mean nothing): every size and shape it prints is checked.
static void test_bench_smoke(void) {
  NEED_DEVCOMM();
  struct benchRun b;
  memset(&b, 0, sizeof(b));
  b.eager = b.graph = 1;
  b.iters = 2;
  b.maxBytes = 64 << 10;
  b.maxRows = 2;
  b.maxHidden = 8192;  // 1024 threads a block: what a kernel whose registers do not allow it cannot launch with
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof(reqs));
  reqs.lsaBarrierCount = BENCH_BLOCKS;
  CHECK_NCCL(ncclDevCommCreate(comm, &reqs, &b.dc));
  if (benchAllReduce(&b)) FAILF("the allreduce benchmark's results are wrong, or a call failed");
  if (benchRmsNorm(&b)) FAILF("the RMSNorm benchmark's results differ, or a call failed");
  CHECK_NCCL(ncclDevCommDestroy(comm, &b.dc));
}

static const struct testCase cases[] = {
    {"library", test_library},
    {"init", test_init},
    {"teams", test_teams},
    {"devcomm", test_devcomm},
    {"peer_pointers", test_peer_pointers},
    {"barrier_acq_rel", test_barrier_acq_rel},
    {"barrier_release_acquire", test_barrier_release_acquire},
    {"barrier_seq_cst", test_barrier_seq_cst},
    {"barrier_relaxed_fenced", test_barrier_relaxed_fenced},
    {"barrier_own_handle", test_barrier_own_handle},
    {"allreduce", test_allreduce},
    {"fused_rmsnorm", test_fused_rmsnorm},
    {"bench_smoke", test_bench_smoke},
    {"bad_input", test_bad_input},
};

static void cleanup(void) {
  if (haveDevComm) ncclDevCommDestroy(comm, &devComm);
  if (win) ncclCommWindowDeregister(comm, win);
  if (outWin) ncclCommWindowDeregister(comm, outWin);
  if (buf) ncclMemFree(buf);
  if (out) ncclMemFree(out);
  if (errors) cudaFree(errors);
  if (comm) ncclCommDestroy(comm);
}

static int benchMain(int argc, char** argv) {
  struct benchRun b;
  memset(&b, 0, sizeof(b));
  b.eager = b.graph = 1;
  b.iters = 20;
  b.maxBytes = (size_t)64 << 20;
  b.maxRows = 16;
  b.maxHidden = 16384;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "allreduce") == 0 || strcmp(argv[i], "rmsnorm") == 0)
      b.what = argv[i];
    else if (strcmp(argv[i], "--eager") == 0)
      b.graph = 0;
    else if (strcmp(argv[i], "--graph") == 0)
      b.eager = 0;
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      b.iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc)
      b.maxBytes = strtoull(argv[++i], NULL, 0);
    else {
      fprintf(stderr, "usage: %s --bench [allreduce|rmsnorm] [--eager|--graph] [--iters N] [--max BYTES]\n", argv[0]);
      return 2;
    }
  }
  if (b.iters < 1 || b.maxBytes < 8) {
    fprintf(stderr, "--iters must be >= 1 and --max >= 8\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int ndev = 0, res = 1;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    fprintf(stderr, "rank %d: no device\n", rank);
    MPI_Finalize();
    return 1;
  }
  cudaSetDevice(rank % ndev);
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof(reqs));
  reqs.lsaBarrierCount = BENCH_BLOCKS;
  if (ncclTestCommInit(&comm) != ncclSuccess || ncclDevCommCreate(comm, &reqs, &b.dc) != ncclSuccess) {
    fprintf(stderr, "rank %d: communicator or device communicator: %s\n", rank, ncclGetLastError(comm));
  } else {
    res = 0;
    if (b.what == NULL || strcmp(b.what, "allreduce") == 0) res |= benchAllReduce(&b);
    if (b.what == NULL || strcmp(b.what, "rmsnorm") == 0) res |= benchRmsNorm(&b);
    ncclDevCommDestroy(comm, &b.dc);
  }
  if (comm) ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  MPI_Finalize();
  return res;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--bench") == 0) return benchMain(argc, argv);
  return ncclTestMain(argc, argv, "final/mpi_nccl_devapi", cases, (int)(sizeof(cases) / sizeof(cases[0])), cleanup);
}
