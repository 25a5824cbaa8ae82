// Kernels on both backends: the launch path NCCL uses (cudaGetFuncBySymbol + cuLaunchKernel with packed
// arguments), indices, barriers, the per-block shared struct, system-scope flags between blocks and
// between streams, the legacy stream, and fp16/bf16. The kernels and the host tests are in one .cu (host
// code here is C++ only because it shares the file); on cuda it is compiled by nvcc and runs on a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_test.h"

#define WAIT_NS 20000000000ull  // a bounded wait: a missing peer fails the test instead of hanging it
enum { ERR_TIMEOUT = 1, ERR_BARRIER = 2, ERR_SHMEM = 4, ERR_DATA = 8 };

// ---- kernels ---------------------------------------------------------------------------------------

struct IndexArgs {
  uint32_t* out;  // 8 words per thread of the grid
  uint32_t magic;
};
extern "C" __global__ void indexKernel(struct IndexArgs a) {
  uint32_t block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  uint32_t thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  uint32_t* o = a.out + 8 * ((size_t)block * blockDim.x * blockDim.y * blockDim.z + thread);
  o[0] = a.magic;
  o[1] = blockIdx.x, o[2] = blockIdx.y, o[3] = blockIdx.z;
  o[4] = threadIdx.x, o[5] = threadIdx.y, o[6] = threadIdx.z;
  o[7] = blockDim.x | blockDim.y << 11 | blockDim.z << 22;
  if (block == 0 && thread == 0 && gridDim.x == 3) printf("# indexKernel: device printf works\n");
}
MCCL_KERNEL_REGISTER(indexKernel);

struct VoteArgs {
  int* out;  // 4 ints per thread
};
extern "C" __global__ void voteKernel(struct VoteArgs a) {
  int t = threadIdx.x;
  int* o = a.out + 4 * (blockIdx.x * blockDim.x + t);
  o[0] = __syncthreads_count(t % 3 == 0);
  o[1] = __syncthreads_or(0);
  o[2] = __syncthreads_or(t == (int)blockDim.x - 1);
  o[3] = __syncthreads_and(t >= 0);
}
MCCL_KERNEL_REGISTER(voteKernel);

// Named barriers over subsets: warp 0 and warp 1 each run their own barrier (names 1 and 2, 32 threads)
// around a shared counter, then the two warps meet on name 3 (64 threads) with a reduction.
struct BarrierShmem {
  int counter[2];
  int slot[64];
};
MCCL_SHMEM_DEFINE(BarrierShmem, barShmem);
struct BarrierArgs {
  int* err;
  int* orResult;
  int rounds;
};
extern "C" __global__ void barrierKernel(struct BarrierArgs a) {
  int t = threadIdx.x, w = t / 32, bad = 0;
  if (t % 32 == 0) barShmem.counter[w] = 0;
  barrier_sync(1 + w, 32);
  for (int r = 1; r <= a.rounds; r++) {
    if (t % 32 == 0) barShmem.counter[w] = r;
    barrier_sync(1 + w, 32);
    if (barShmem.counter[w] != r) bad = 1;
    barrier_sync(1 + w, 32);
  }
  barShmem.slot[t] = t * 7;
  barrier_sync(3, 64);
  if (barShmem.slot[(t + 1) % 64] != ((t + 1) % 64) * 7) bad = 1;
  bool any = barrier_red_or(t == 45, 3, 64);
  bool none = barrier_red_or(false, 3, 64);
  if (!any || none) bad = 1;
  if (t == 0 && blockIdx.x == 0) *a.orResult = any;
  if (bad) atomicOr(a.err, ERR_BARRIER);
}
MCCL_KERNEL_REGISTER(barrierKernel);

// Each block fills its shared struct, then waits until every block of the grid has done so (so all
// blocks are alive at once), then checks its struct still holds its own values.
struct IsoShmem {
  uint32_t owner;
  uint32_t slot[1024];
};
MCCL_SHMEM_DEFINE(IsoShmem, isoShmem);
struct IsoArgs {
  uint64_t* arrived;  // one flag per block
  int* err;
  uint64_t epoch;
};
extern "C" __global__ void isoKernel(struct IsoArgs a) {
  uint32_t me = blockIdx.x * 100000u + (uint32_t)a.epoch;
  int bad = 0;
  if (threadIdx.x == 0) isoShmem.owner = me;
  isoShmem.slot[threadIdx.x] = me + threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 0) {
    st_release_sys_global(a.arrived + blockIdx.x, a.epoch);
    uint64_t start = mcclGlobalTimerNs();
    for (unsigned b = 0; b < gridDim.x; b++)
      while (ld_acquire_sys_global(a.arrived + b) < a.epoch) {
        if (mcclGlobalTimerNs() - start > WAIT_NS) {
          bad |= ERR_TIMEOUT;
          break;
        }
        mcclSpinHint();
      }
  }
  __syncthreads();
  unsigned peer = (threadIdx.x + 1) % blockDim.x;
  if (isoShmem.owner != me || isoShmem.slot[peer] != me + peer) bad |= ERR_SHMEM;
  if (bad) atomicOr(a.err, bad);
}
MCCL_KERNEL_REGISTER(isoKernel);

// Ping-pong between two kernels on two streams: each publishes data then its step with a release store
// and waits for the peer's step with acquire loads (ld_volatile for the abort-style 32-bit flag too).
struct PingArgs {
  uint64_t* myStep;
  uint64_t* peerStep;
  uint64_t* myData;  // written before the step is published
  uint64_t* peerData;
  uint32_t* stop;
  int* err;
  int rounds;
  int first;
};
extern "C" __global__ void pingKernel(struct PingArgs a) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  uint64_t start = mcclGlobalTimerNs();
  for (int r = 1; r <= a.rounds; r++) {
    if (!a.first || r > 1) {
      while (ld_acquire_sys_global(a.peerStep) < (uint64_t)(r - (a.first ? 1 : 0))) {
        if (ld_volatile_global(a.stop) || mcclGlobalTimerNs() - start > WAIT_NS) {
          atomicOr(a.err, ERR_TIMEOUT);
          return;
        }
        mcclSpinHint();
      }
      uint64_t v0, v1;
      load128(a.peerData, v0, v1);
      uint64_t want = (uint64_t)(r - (a.first ? 1 : 0));
      if (v0 != want * 3 || v1 != ~(want * 3)) atomicOr(a.err, ERR_DATA);
    }
    store128(a.myData, (uint64_t)r * 3, ~((uint64_t)r * 3));
    st_release_sys_global(a.myStep, (uint64_t)r);
  }
}
MCCL_KERNEL_REGISTER(pingKernel);

// Waits for the host to set *go (after the launch returned), then reports.
// Copies one word, as a kernel sees it when it runs.
struct PeekArgs {
  uint64_t* src;
  uint64_t* dst;
};
extern "C" __global__ void peekKernel(struct PeekArgs a) {
  if (threadIdx.x == 0) st_relaxed_sys_global(a.dst, ld_volatile_global(a.src));
}
MCCL_KERNEL_REGISTER(peekKernel);

struct GoArgs {
  uint64_t* go;
  uint64_t* done;
};
extern "C" __global__ void goKernel(struct GoArgs a) {
  if (threadIdx.x != 0) return;
  uint64_t start = mcclGlobalTimerNs();
  while (ld_volatile_global(a.go) == 0) {
    if (mcclGlobalTimerNs() - start > WAIT_NS) {
      st_relaxed_sys_global(a.done, 2);
      return;
    }
    mcclSpinHint();
  }
  __threadfence_system();
  st_release_sys_global(a.done, 1);
}
MCCL_KERNEL_REGISTER(goKernel);

struct FpArgs {
  const float* in;
  float* half;
  float* bf16;
  int n;
};
extern "C" __global__ void fpKernel(struct FpArgs a) {
  for (int i = threadIdx.x; i < a.n; i += blockDim.x) {
    a.half[i] = __half2float(__float2half_rn(a.in[i]));
    a.bf16[i] = __bfloat162float(__float2bfloat16_rn(a.in[i]));
  }
}
MCCL_KERNEL_REGISTER(fpKernel);

// NCCL's step pattern across a ring of grids: block b of grid r waits (thread 0, acquire) for block b of
// grid r-1 to publish step s, the whole block copies through its shared struct between barriers, and
// thread 0 publishes its own step (release). Four grids (ranks) x four blocks all spin at once.
struct RingShmem {
  uint64_t buf[64];
};
MCCL_SHMEM_DEFINE(RingShmem, ringShmem);
struct RingArgs {
  uint64_t* myStep;  // one counter per block
  uint64_t* prevStep;
  uint64_t* myData;  // 64 words per block
  uint64_t* prevData;
  int* err;
  int rank, nRanks, steps;
};
extern "C" __global__ void ringKernel(struct RingArgs a) {
  unsigned b = blockIdx.x, t = threadIdx.x;
  uint64_t start = mcclGlobalTimerNs();
  for (int s = 1; s <= a.steps; s++) {
    int stop = 0;
    if (t == 0 && (a.rank != 0 || s > 1)) {
      uint64_t want = (uint64_t)(a.rank != 0 ? s : s - 1);
      while (ld_acquire_sys_global(a.prevStep + b) < want) {
        if (mcclGlobalTimerNs() - start > WAIT_NS) {
          stop = 1;
          break;
        }
        mcclSpinHint();
      }
    }
    if (__syncthreads_or(stop)) {
      if (t == 0) atomicOr(a.err, ERR_TIMEOUT);
      return;
    }
    for (unsigned i = t; i < 64; i += blockDim.x)
      ringShmem.buf[i] = a.rank == 0 ? (uint64_t)s * 1000 + i : a.prevData[64 * b + i] + 1;
    __syncthreads();
    for (unsigned i = t; i < 64; i += blockDim.x) {
      uint64_t want = (uint64_t)s * 1000 + i + (uint64_t)a.rank;
      if (ringShmem.buf[i] != want) atomicOr(a.err, ERR_DATA);
      a.myData[64 * b + i] = ringShmem.buf[i];
    }
    __syncthreads();
    if (t == 0) st_release_sys_global(a.myStep + b, (uint64_t)s);
  }
}
MCCL_KERNEL_REGISTER(ringKernel);

// A dependent grid (cuLaunchKernelEx, programmatic stream serialization): it waits for the previous grid
// first, lets the next one launch, then adds 1 to every word the previous grid wrote.
struct ChainArgs {
  uint32_t* v;
  int n;
};
extern "C" __global__ void chainKernel(struct ChainArgs a) {
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) a.v[i] += 1;
}
MCCL_KERNEL_REGISTER(chainKernel);

// ---- host ------------------------------------------------------------------------------------------

static int notAKernel(int x) {
  return x + 1;
}

static void setup(void) {
  EXPECT_CU_OK(cuInit(0));
  EXPECT_CUDA_OK(cudaSetDevice(0));
}

static unsigned simBlockCap(void) {
  const char* s = getenv("MCCL_SIM_MAX_BLOCK_THREADS");
  unsigned v = s && *s ? (unsigned)atoi(s) : 64;
  return v / 32 * 32;
}

// How many threads per block the backend runs when asked for n (the sim reduces, and reports it).
static unsigned ranThreads(unsigned n) {
  if (!MCCL_TEST_ON_SIM) return n;
  unsigned cap = simBlockCap();
  return n <= cap ? n : cap;
}

static CUfunction func(const void* sym) {
  cudaFunction_t f = NULL;
  if (cudaGetFuncBySymbol(&f, sym) != cudaSuccess) return NULL;
  return (CUfunction)f;
}

static void launchIndices(dim3 grid, dim3 block) {
  CUfunction f = func((const void*)indexKernel);
  EXPECT_TRUE(f != NULL);
  unsigned bx = ranThreads(block.x * block.y * block.z) == block.x * block.y * block.z ? block.x : 0;
  EXPECT_TRUE(bx != 0);  // these shapes fit the sim's default cap
  size_t nThreads = (size_t)grid.x * grid.y * grid.z * block.x * block.y * block.z;
  uint32_t* d = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&d, nThreads * 8 * sizeof(uint32_t)));
  EXPECT_CUDA_OK(cudaMemset(d, 0, nThreads * 8 * sizeof(uint32_t)));
  struct IndexArgs args = {d, 0x600d};
  void* params[] = {&args};
  EXPECT_CU_OK(cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, 0, NULL, params, NULL));
  args.magic = 0xbad;  // the launch copied the arguments: this must not reach the kernel
  uint32_t* h = (uint32_t*)malloc(nThreads * 8 * sizeof(uint32_t));
  EXPECT_CUDA_OK(cudaMemcpy(h, d, nThreads * 8 * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  size_t i = 0;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bxi = 0; bxi < grid.x; bxi++)
        for (unsigned tz = 0; tz < block.z; tz++)
          for (unsigned ty = 0; ty < block.y; ty++)
            for (unsigned tx = 0; tx < block.x; tx++, i++) {
              uint32_t* o = h + 8 * i;
              uint32_t want[8] = {0x600d, bxi, by, bz, tx, ty, tz, block.x | block.y << 11 | block.z << 22};
              if (memcmp(o, want, sizeof(want)) != 0) {
                mcclTestFailAt(__FILE__, __LINE__,
                               "grid (%u,%u,%u) block (%u,%u,%u): thread %zu wrote %x (%u,%u,%u) (%u,%u,%u)", grid.x,
                               grid.y, grid.z, block.x, block.y, block.z, i, o[0], o[1], o[2], o[3], o[4], o[5], o[6]);
                free(h);
                cudaFree(d);
                return;
              }
            }
  free(h);
  EXPECT_CUDA_OK(cudaFree(d));
}

static void indicesEveryThread(void) {
  setup();
  CHECK_STOPPED();
  launchIndices(dim3(1), dim3(1));
  launchIndices(dim3(1), dim3(32));
  launchIndices(dim3(3), dim3(64));
  launchIndices(dim3(4), dim3(40));  // not a whole number of warps
  launchIndices(dim3(2, 3, 2), dim3(8, 4, 2));
}

static void syncthreadsVotes(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)voteKernel);
  EXPECT_TRUE(f != NULL);
  const unsigned sizes[] = {32, 64, 48};
  for (unsigned s = 0; s < 3; s++) {
    unsigned bs = sizes[s], blocks = 2, n = blocks * bs;
    int* d = NULL;
    EXPECT_CUDA_OK(cudaMalloc((void**)&d, n * 4 * sizeof(int)));
    struct VoteArgs args = {d};
    void* params[] = {&args};
    EXPECT_CU_OK(cuLaunchKernel(f, blocks, 1, 1, bs, 1, 1, 0, NULL, params, NULL));
    int* h = (int*)malloc(n * 4 * sizeof(int));
    EXPECT_CUDA_OK(cudaMemcpy(h, d, n * 4 * sizeof(int), cudaMemcpyDeviceToHost));
    int bad = -1;
    for (unsigned i = 0; i < n && bad < 0; i++)
      if (h[4 * i] != (int)((bs + 2) / 3) || h[4 * i + 1] != 0 || h[4 * i + 2] != 1 || h[4 * i + 3] != 1) bad = (int)i;
    free(h);
    EXPECT_CUDA_OK(cudaFree(d));
    EXPECT_EQ(bad, -1);
  }
}

static void namedBarriersSubsets(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)barrierKernel);
  EXPECT_TRUE(f != NULL);
  int* d = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&d, 2 * sizeof(int)));
  EXPECT_CUDA_OK(cudaMemset(d, 0, 2 * sizeof(int)));
  struct BarrierArgs args = {d, d + 1, 200};
  void* params[] = {&args};
  EXPECT_CU_OK(cuLaunchKernel(f, 3, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
  int h[2] = {-1, -1};
  EXPECT_CUDA_OK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  EXPECT_CUDA_OK(cudaFree(d));
  EXPECT_EQ(h[0], 0);
  EXPECT_EQ(h[1], 1);
}

// Two blocks alive at once keep their own shared struct, and so does every block of the next launch.
static void sharedStructPerBlock(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)isoKernel);
  EXPECT_TRUE(f != NULL);
  const unsigned blocks = 4;
  uint64_t* flags = NULL;
  int* err = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&flags, blocks * sizeof(uint64_t)));
  EXPECT_CUDA_OK(cudaMalloc((void**)&err, sizeof(int)));
  // Stream s is non-blocking: it does not wait for NULL-stream memsets, so they must have landed.
  EXPECT_CUDA_OK(mcclTestMemset(flags, 0, blocks * sizeof(uint64_t)));
  EXPECT_CUDA_OK(mcclTestMemset(err, 0, sizeof(int)));
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (uint64_t epoch = 1; epoch <= 3; epoch++) {  // launches in a row on one stream
    struct IsoArgs args = {flags, err, epoch};
    void* params[] = {&args};
    EXPECT_CU_OK(cuLaunchKernel(f, blocks, 1, 1, 64, 1, 1, 0, s, params, NULL));
  }
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  int h = -1;
  EXPECT_CUDA_OK(cudaMemcpy(&h, err, sizeof(h), cudaMemcpyDeviceToHost));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFree(flags));
  EXPECT_CUDA_OK(cudaFree(err));
  EXPECT_EQ(h, 0);
}

// A producer and a consumer kernel on two streams hand steps back and forth through memory: both can
// finish only if both run at once, and neither runs on the calling thread.
static void twoStreamsPingPong(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)pingKernel);
  EXPECT_TRUE(f != NULL);
  uint64_t* m = NULL;
  uint32_t* stop = NULL;
  int* err = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&m, 8 * sizeof(uint64_t)));
  EXPECT_CUDA_OK(cudaMalloc((void**)&stop, sizeof(uint32_t)));
  EXPECT_CUDA_OK(cudaMalloc((void**)&err, sizeof(int)));
  EXPECT_CUDA_OK(cudaMemset(m, 0, 8 * sizeof(uint64_t)));
  EXPECT_CUDA_OK(cudaMemset(stop, 0, sizeof(uint32_t)));
  EXPECT_CUDA_OK(cudaMemset(err, 0, sizeof(int)));
  // The memsets may still be running (NULL stream), and streams a and b do not wait for it.
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  cudaStream_t a, b;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  struct PingArgs pa = {m + 0, m + 1, m + 2, m + 4, stop, err, 100, 1};
  struct PingArgs pb = {m + 1, m + 0, m + 4, m + 2, stop, err, 100, 0};
  void* qa[] = {&pa};
  void* qb[] = {&pb};
  EXPECT_CU_OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, a, qa, NULL));
  EXPECT_CU_OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, b, qb, NULL));
  EXPECT_CUDA_OK(cudaStreamSynchronize(a));
  EXPECT_CUDA_OK(cudaStreamSynchronize(b));
  uint64_t steps[2] = {0, 0};
  int h = -1;
  EXPECT_CUDA_OK(cudaMemcpy(steps, m, sizeof(steps), cudaMemcpyDeviceToHost));
  EXPECT_CUDA_OK(cudaMemcpy(&h, err, sizeof(h), cudaMemcpyDeviceToHost));
  EXPECT_CUDA_OK(cudaStreamDestroy(a));
  EXPECT_CUDA_OK(cudaStreamDestroy(b));
  EXPECT_CUDA_OK(cudaFree(m));
  EXPECT_CUDA_OK(cudaFree(stop));
  EXPECT_CUDA_OK(cudaFree(err));
  EXPECT_EQ(h, 0);
  EXPECT_EQ(steps[0], 100u);
  EXPECT_EQ(steps[1], 100u);
}

// A launch on the legacy stream returns before the kernel runs: the kernel waits for a flag the host
// sets only after cuLaunchKernel returned. Then a synchronous copy on the NULL stream sees its result.
static void legacyStreamIsAsync(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)goKernel);
  EXPECT_TRUE(f != NULL);
  uint64_t* h = NULL;
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&h, 2 * sizeof(uint64_t), cudaHostAllocMapped));
  h[0] = h[1] = 0;
  uint64_t* d = NULL;
  EXPECT_CUDA_OK(cudaHostGetDevicePointer((void**)&d, h, 0));
  struct GoArgs args = {d, d + 1};
  void* params[] = {&args};
  EXPECT_CU_OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  EXPECT_EQ(__atomic_load_n(&h[1], __ATOMIC_ACQUIRE), 0u);
  __atomic_store_n(&h[0], 1, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(cudaStreamSynchronize(NULL));
  EXPECT_EQ(__atomic_load_n(&h[1], __ATOMIC_ACQUIRE), 1u);
  // And through the runtime's launch, again on the legacy stream, ordered before a blocking copy.
  __atomic_store_n(&h[1], 0, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(cudaLaunchKernel((const void*)goKernel, dim3(1), dim3(32), params, 0, NULL));
  uint64_t got = 0;
  EXPECT_CUDA_OK(cudaMemcpy(&got, d + 1, sizeof(got), cudaMemcpyDefault));
  EXPECT_EQ(got, 1u);
  EXPECT_CUDA_OK(cudaFreeHost(h));
}

// CUDA's API synchronization rules: on the NULL stream, cudaMemset of device memory and cudaMemcpy into
// device memory from pageable host memory may return before the bytes land. A kernel on a blocking stream
// is ordered after them; one on a non-blocking stream is not (on the sim it runs first, as
// MCCL_SIM_LATE_COPY_US delays them; on a GPU either order may happen, so only the sim asserts it). A
// pageable source is staged before the call returns, so the caller may reuse its buffer at once.
static void nullStreamCallsReturnEarly(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)peekKernel);
  EXPECT_TRUE(f != NULL);
  uint64_t* d = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&d, 2 * sizeof(uint64_t)));
  EXPECT_CUDA_OK(cudaMemset(d, 0, 2 * sizeof(uint64_t)));
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  cudaStream_t nb, bl;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  EXPECT_CUDA_OK(cudaStreamCreate(&bl));
  struct PeekArgs pa = {d, d + 1};
  void* params[] = {&pa};
  uint64_t got = 1;
  const char* late = getenv("MCCL_SIM_LATE_COPY_US");
  const int simLate = MCCL_TEST_ON_SIM && (late == NULL || atoi(late) >= 1000);
  // A memset, then a kernel on a non-blocking stream: it may run before the memset. (That is a data race
  // by design, so ThreadSanitizer builds leave it out.) The kernel must start within the memset's delay
  // to see the old bytes, which a loaded machine may not give it once (a CI run failed so while other
  // builds ran): up to 5 tries, one of which must see them.
  if (!MCCL_TEST_UNDER_TSAN) {
    int sawOld = 0;
    for (int t = 0; t < 5 && !sawOld && !mcclTestStopped(); t++) {
      EXPECT_CUDA_OK(cudaMemset(d, 0, 2 * sizeof(uint64_t)));
      EXPECT_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_CUDA_OK(cudaMemset(d, 0xab, sizeof(uint64_t)));
      EXPECT_CU_OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)nb, params, NULL));
      EXPECT_CUDA_OK(cudaStreamSynchronize(nb));
      EXPECT_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_CUDA_OK(cudaMemcpy(&got, d + 1, sizeof(got), cudaMemcpyDeviceToHost));
      sawOld = got == 0u;  // the kernel ran first and saw the old bytes
      if (!sawOld) EXPECT_EQ(got, 0xababababababababull);  // else it saw the memset's, nothing else
    }
    if (simLate) EXPECT_TRUE(sawOld);
  }
  // A blocking stream's kernel waits for the NULL stream's memset.
  EXPECT_CUDA_OK(cudaMemset(d, 0xcd, sizeof(uint64_t)));
  EXPECT_CU_OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)bl, params, NULL));
  EXPECT_CUDA_OK(cudaStreamSynchronize(bl));
  EXPECT_CUDA_OK(cudaMemcpy(&got, d + 1, sizeof(got), cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, 0xcdcdcdcdcdcdcdcdull);
  // A copy from pageable memory: the buffer may change once the call returns; the device gets the old value.
  uint64_t* host = (uint64_t*)malloc(sizeof(uint64_t));
  EXPECT_TRUE(host != NULL);
  if (host) {
    *host = 0x1111;
    EXPECT_CUDA_OK(cudaMemcpy(d, host, sizeof(uint64_t), cudaMemcpyHostToDevice));
    *host = 0x2222;
    // A synchronous copy on the NULL stream waits for the one before it.
    EXPECT_CUDA_OK(cudaMemcpy(&got, d, sizeof(got), cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, 0x1111u);
    free(host);
  }
  EXPECT_CUDA_OK(cudaStreamDestroy(nb));
  EXPECT_CUDA_OK(cudaStreamDestroy(bl));
  EXPECT_CUDA_OK(cudaFree(d));
}

// Four grids on four streams, four blocks each, pass 64 words around a ring for many steps.
static void ringOfGrids(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)ringKernel);
  EXPECT_TRUE(f != NULL);
  enum { R = 4, B = 4, STEPS = 100 };
  uint64_t *steps = NULL, *data = NULL;
  int* err = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&steps, R * B * sizeof(uint64_t)));
  EXPECT_CUDA_OK(cudaMalloc((void**)&data, R * B * 64 * sizeof(uint64_t)));
  EXPECT_CUDA_OK(cudaMalloc((void**)&err, sizeof(int)));
  // The ring's streams are non-blocking: the memsets must have landed before the first launch.
  EXPECT_CUDA_OK(mcclTestMemset(steps, 0, R * B * sizeof(uint64_t)));
  EXPECT_CUDA_OK(mcclTestMemset(err, 0, sizeof(int)));
  cudaStream_t s[R];
  struct RingArgs args[R];
  for (int r = 0; r < R; r++) {
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
    int p = (r + R - 1) % R;
    args[r] = RingArgs{steps + B * r, steps + B * p, data + B * 64 * r, data + B * 64 * p, err, r, R, STEPS};
  }
  for (int r = R - 1; r >= 0; r--) {  // the ring's head last: the others must already wait for it
    void* params[] = {&args[r]};
    EXPECT_CU_OK(cuLaunchKernel(f, B, 1, 1, 64, 1, 1, 0, s[r], params, NULL));
  }
  for (int r = 0; r < R; r++) EXPECT_CUDA_OK(cudaStreamSynchronize(s[r]));
  int h = -1;
  uint64_t last[R * B];
  EXPECT_CUDA_OK(cudaMemcpy(&h, err, sizeof(h), cudaMemcpyDeviceToHost));
  EXPECT_CUDA_OK(cudaMemcpy(last, steps, sizeof(last), cudaMemcpyDeviceToHost));
  for (int r = 0; r < R; r++) EXPECT_CUDA_OK(cudaStreamDestroy(s[r]));
  EXPECT_CUDA_OK(cudaFree(steps));
  EXPECT_CUDA_OK(cudaFree(data));
  EXPECT_CUDA_OK(cudaFree(err));
  EXPECT_EQ(h, 0);
  for (int i = 0; i < R * B; i++) EXPECT_EQ(last[i], (uint64_t)STEPS);
}

static void badLaunches(void) {
  setup();
  CHECK_STOPPED();
  cudaFunction_t f = NULL;
  EXPECT_CUDA(cudaGetFuncBySymbol(&f, (const void*)notAKernel), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(notAKernel(1), 2);
  CUfunction k = func((const void*)indexKernel);
  EXPECT_TRUE(k != NULL);
  uint32_t* d = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&d, 8 * sizeof(uint32_t)));
  struct IndexArgs args = {d, 1};
  void* params[] = {&args};
  EXPECT_CU(cuLaunchKernel(k, 0, 1, 1, 32, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuLaunchKernel(k, 1, 1, 1, 0, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuLaunchKernel(k, 1, 1, 1, 1025, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuLaunchKernel(k, 1, 1, 1, 512, 4, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
  // Packed arguments through `extra`, as cuLaunchKernel also accepts them.
  size_t size = sizeof(args);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  args.magic = 0x77;
  EXPECT_CU_OK(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
  uint32_t h = 0;
  EXPECT_CUDA_OK(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
  EXPECT_EQ(h, 0x77u);
  EXPECT_CUDA_OK(cudaFree(d));
}

// Dependent launches in a chain: each grid reads what the one before it wrote, so a grid that ran before
// its predecessor had finished would lose increments (on a GPU it may start early, and waits in
// cudaGridDependencySynchronize). The sim accepts this one attribute and refuses others.
static void dependentLaunchChain(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)chainKernel);
  EXPECT_TRUE(f != NULL);
  const int n = 4096, launches = MCCL_TEST_ON_SIM ? 20 : 500;
  uint32_t* d = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&d, n * sizeof(uint32_t)));
  EXPECT_CUDA_OK(cudaMemset(d, 0, n * sizeof(uint32_t)));
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaStreamCreate(&s));  // blocking: ordered after the memset on the NULL stream
  struct ChainArgs args = {d, n};
  void* params[] = {&args};
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof(attr));
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.gridDimX = 4;
  cfg.gridDimY = cfg.gridDimZ = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.blockDimX = MCCL_TEST_ON_SIM ? 32 : 256;
  cfg.hStream = (CUstream)s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  for (int i = 0; i < launches; i++) EXPECT_CU_OK(cuLaunchKernelEx(&cfg, f, params, NULL));
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  uint32_t* h = (uint32_t*)malloc(n * sizeof(uint32_t));
  EXPECT_CUDA_OK(cudaMemcpy(h, d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  int bad = -1;
  for (int i = 0; i < n && bad < 0; i++)
    if (h[i] != (uint32_t)launches) bad = i;
  if (bad >= 0) mcclTestFailAt(__FILE__, __LINE__, "word %d is %u after %d dependent launches", bad, h[bad], launches);
  free(h);
  EXPECT_CU(cuLaunchKernelEx(NULL, f, params, NULL), CUDA_ERROR_INVALID_VALUE);
  if (MCCL_TEST_ON_SIM) {
    attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
    EXPECT_CU(cuLaunchKernelEx(&cfg, f, params, NULL), CUDA_ERROR_NOT_SUPPORTED);
  }
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFree(d));
}

// A block larger than the sim runs is reduced (reported on stderr once per kernel); the kernel sees the
// reduced blockDim, and every thread of it runs. A GPU runs the block as asked.
static void oversizedBlockReduced(void) {
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)indexKernel);
  EXPECT_TRUE(f != NULL);
  const unsigned asked = 1024, blocks = 2;
  uint32_t* d = NULL;
  EXPECT_CUDA_OK(cudaMalloc((void**)&d, blocks * asked * 8 * sizeof(uint32_t)));
  EXPECT_CUDA_OK(cudaMemset(d, 0, blocks * asked * 8 * sizeof(uint32_t)));
  struct IndexArgs args = {d, 0x600d};
  void* params[] = {&args};
  EXPECT_CU_OK(cuLaunchKernel(f, blocks, 1, 1, asked, 1, 1, 0, NULL, params, NULL));
  uint32_t* h = (uint32_t*)malloc(blocks * asked * 8 * sizeof(uint32_t));
  EXPECT_CUDA_OK(cudaMemcpy(h, d, blocks * asked * 8 * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  unsigned ran = ranThreads(asked), wrote = 0, bad = 0;
  for (unsigned i = 0; i < blocks * asked; i++) {
    uint32_t* o = h + 8 * i;
    if (o[0] != 0x600d) continue;
    wrote++;
    if (o[7] != (ran | 1u << 11 | 1u << 22) || o[1] != i / ran || o[4] != i % ran) bad++;
  }
  free(h);
  EXPECT_CUDA_OK(cudaFree(d));
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(wrote, blocks * ran);
  if (!MCCL_TEST_ON_SIM) return;
  // More blocks than the sim can host even one warp each for: refused, not run partially.
  const char* g = getenv("MCCL_SIM_MAX_GRID_THREADS");
  unsigned gridCap = g && *g ? (unsigned)atoi(g) : 2048;
  EXPECT_CU(cuLaunchKernel(f, gridCap / 32 + 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
}

static void fp16bf16RoundTrip(void) {
  setup();
  CHECK_STOPPED();
  const float in[] = {0.0f, 1.0f, -2.25f, 1.5f, 65504.0f, 0.0009765625f, 1.0f / 3.0f, 3.14159265f, -1e-3f, 1234.567f};
  const int n = (int)(sizeof(in) / sizeof(in[0]));
  const int exact = 6;  // the first six are representable in both formats
  float *d = NULL, hh[16], hb[16];
  EXPECT_CUDA_OK(cudaMalloc((void**)&d, 3 * 16 * sizeof(float)));
  EXPECT_CUDA_OK(cudaMemcpy(d, in, sizeof(in), cudaMemcpyHostToDevice));
  struct FpArgs args = {d, d + 16, d + 32, n};
  void* params[] = {&args};
  CUfunction f = func((const void*)fpKernel);
  EXPECT_TRUE(f != NULL);
  EXPECT_CU_OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  EXPECT_CUDA_OK(cudaMemcpy(hh, d + 16, n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_CUDA_OK(cudaMemcpy(hb, d + 32, n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_CUDA_OK(cudaFree(d));
  for (int i = 0; i < n; i++) {
    // Same answer as the host conversion; exact where representable; else within half an ulp
    // (11 significant bits for fp16, 8 for bf16).
    EXPECT_EQ(hh[i], __half2float(__float2half_rn(in[i])));
    EXPECT_EQ(hb[i], __bfloat162float(__float2bfloat16_rn(in[i])));
    if (i < exact) {
      EXPECT_EQ(hh[i], in[i]);
      EXPECT_TRUE(hb[i] == in[i] || i == 4);  // 65504 is not a bf16 value
    }
    EXPECT_TRUE(fabsf(hh[i] - in[i]) <= fabsf(in[i]) * 0x1p-11f);
    EXPECT_TRUE(fabsf(hb[i] - in[i]) <= fabsf(in[i]) * 0x1p-8f);
  }
}

// A launch queued behind a stream memory wait that gives up (its stream destroyed, the value never
// written) never runs; the sim frees its state (ASan's leak check sees it) and the stream's thread ends.
static void launchDroppedBehindAbandonedWait(void) {
  if (!MCCL_TEST_ON_SIM) SKIP("a GPU keeps such a stream blocked forever");
  setup();
  CHECK_STOPPED();
  CUfunction f = func((const void*)indexKernel);
  EXPECT_TRUE(f != NULL);
  uint32_t *flag = NULL, *d = NULL, h[8];
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocDefault));
  __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(cudaMalloc((void**)&d, 64 * 8 * sizeof(uint32_t)));
  EXPECT_CUDA_OK(mcclTestMemset(d, 0, 64 * 8 * sizeof(uint32_t)));
  int th0 = mcclTestCountThreads();
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_CU_OK(cuStreamWaitValue32(s, (CUdeviceptr)(uintptr_t)flag, 1, CU_STREAM_WAIT_VALUE_EQ));
  struct IndexArgs args = {d, 0x600d};
  void* params[] = {&args};
  EXPECT_CU_OK(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, s, params, NULL));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_CUDA_OK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  EXPECT_EQ(h[0], 0);
  EXPECT_CUDA_OK(cudaFree(d));
  EXPECT_CUDA_OK(cudaFreeHost(flag));
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(indicesEveryThread), MCCL_TEST_CASE(syncthreadsVotes),
               MCCL_TEST_CASE(namedBarriersSubsets), MCCL_TEST_CASE(sharedStructPerBlock),
               MCCL_TEST_CASE(twoStreamsPingPong), MCCL_TEST_CASE(ringOfGrids), MCCL_TEST_CASE(legacyStreamIsAsync),
               MCCL_TEST_CASE(nullStreamCallsReturnEarly),
               MCCL_TEST_CASE(badLaunches), MCCL_TEST_CASE(dependentLaunchChain), MCCL_TEST_CASE(oversizedBlockReduced),
               MCCL_TEST_CASE(fp16bf16RoundTrip), MCCL_TEST_CASE(launchDroppedBehindAbandonedWait))
