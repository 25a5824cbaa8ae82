// The launch floor of one GPU: time per call of back-to-back launches of kernels that do (almost)
// nothing, eager (cuLaunchKernel per call, as minccl launches) and as a CUDA graph of 20 launches
// replayed (allreduce_perf -G 20's shape). A one-rank floor for issue 10's small-message bars
// (eager <= 4.0 us, graph <= 2.5 us on 2x H200): whatever an allreduce adds (peer round trips) comes
// on top. Build: nvcc -O2 -arch=sm_90 launchfloor.cu -lcuda -o launchfloor
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdint.h>

struct Args {  // about the size of minccl's mcclAllReduceArgs, passed by value
  uint64_t w[56];
};

__global__ void empty(Args a) { (void)a; }

// What every minccl allreduce kernel does besides its algorithm: the argument into shared memory by
// the block's threads, a barrier, one global load (the call's sequence number), a barrier, one store.
__global__ void shaped(Args a, uint64_t* seq) {
  __shared__ Args s;
  for (int i = threadIdx.x; i < 56; i += blockDim.x) s.w[i] = a.w[i];
  __syncthreads();
  uint64_t v = seq[blockIdx.x] + 1;
  __syncthreads();
  if (threadIdx.x == 0) seq[blockIdx.x] = v + s.w[0];
}

// Its two halves alone: the argument copy with its barrier; the sequence number's load and store.
__global__ void copyOnly(Args a, uint64_t* seq) {
  __shared__ Args s;
  for (int i = threadIdx.x; i < 56; i += blockDim.x) s.w[i] = a.w[i];
  __syncthreads();
  if (threadIdx.x == 0 && s.w[1] == 12345) seq[0] = 1;  // never true: keeps the copy
}
// The argument copy with an 8-word argument (does its cost scale with the argument's size?).
struct SmallArgs {
  uint64_t w[8];
};
__global__ void copySmall(SmallArgs a, uint64_t* seq) {
  __shared__ SmallArgs s;
  for (int i = threadIdx.x; i < 8; i += blockDim.x) s.w[i] = a.w[i];
  __syncthreads();
  if (threadIdx.x == 0 && s.w[1] == 12345) seq[0] = 1;  // never true: keeps the copy
}
// One thread reads one word of the big argument directly, no shared memory, no barrier.
__global__ void readOne(Args a, uint64_t* seq) {
  if (threadIdx.x == 0 && a.w[7] == 12345) seq[0] = 1;
}
__global__ void seqOnly(Args a, uint64_t* seq) {
  (void)a;
  if (threadIdx.x == 0) seq[blockIdx.x] = seq[blockIdx.x] + 1;
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

static int run(const char* name, void* fn, int threads, int shapedArgs, uint64_t* seq) {
  CUfunction f;
  CK(cudaGetFuncBySymbol(&f, fn));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Args a = {};
  void* params2[2] = {&a, &seq};
  void** params = params2;
  (void)shapedArgs;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int iters = 20000;
  for (int i = 0; i < 1000; i++) cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, 0, s, params, NULL);
  CK(cudaEventRecord(e0, s));
  for (int i = 0; i < iters; i++) cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, 0, s, params, NULL);
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  printf("%-8s %4d threads  eager: %6.3f us/launch", name, threads, 1000.0 * ms / iters);
  // A graph of 20 launches, replayed.
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 20; i++) cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, 0, s, params, NULL);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 50; i++) CK(cudaGraphLaunch(ge, s));
  const int reps = 1000;
  CK(cudaEventRecord(e0, s));
  for (int i = 0; i < reps; i++) CK(cudaGraphLaunch(ge, s));
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(&ms, e0, e1));
  printf("   graph of 20: %6.3f us/launch\n", 1000.0 * ms / (reps * 20));
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  return 0;
}

int main() {
  uint64_t* seq;
  if (cudaMalloc(&seq, 64 * sizeof(uint64_t)) != cudaSuccess) return 1;
  cudaMemset(seq, 0, 64 * sizeof(uint64_t));
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("device: %s\n", p.name);
  for (int t : {256, 640}) {
    if (run("empty", (void*)empty, t, 0, seq)) return 1;
    if (run("shaped", (void*)shaped, t, 1, seq)) return 1;
    if (run("copyOnly", (void*)copyOnly, t, 1, seq)) return 1;
    if (run("seqOnly", (void*)seqOnly, t, 1, seq)) return 1;
    if (run("copySmall", (void*)copySmall, t, 1, seq)) return 1;
    if (run("readOne", (void*)readOne, t, 1, seq)) return 1;
  }
  return 0;
}
