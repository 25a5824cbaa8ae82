// Lab 02 benchmark: host<->device copy bandwidth from pageable, cudaHostAlloc and cuMem host-NUMA
// memory. cudaMemcpyAsync on one stream timed with CUDA events; medians after warm-up.
// Usage: bench_host_bw [maxMiB] [repeats]   (defaults 256 and 10). Sizes double from 1 MiB up to
// maxMiB, and stop early once one size's rounds took over 3 s, so slow hosts finish in seconds.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_host_alloc.h"
#include "mccl_utils.h"

#define MiB (1024UL * 1024UL)

static int cmpFloat(const void* a, const void* b) {
  float x = *(const float*)a, y = *(const float*)b;
  return (x > y) - (x < y);
}
enum { PAGEABLE, CUDA_HOST, CUMEM_HOST, NKIND };
static const char* kindName[NKIND] = {"pageable", "cudaHostAlloc", "cuMemHostNuma"};

// Median milliseconds of one copy of `bytes`.
static mcclResult_t timeCopy(void* dst, const void* src, size_t bytes, int repeats, cudaStream_t s, cudaEvent_t e0,
                             cudaEvent_t e1, float* ms) {
  float* t = malloc(sizeof(float) * (size_t)repeats);
  if (t == NULL) return mcclSystemError;
  for (int r = -2; r < repeats; r++) {  // two warm-up rounds
    CUDACHECK(cudaEventRecord(e0, s));
    CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    CUDACHECK(cudaEventRecord(e1, s));
    CUDACHECK(cudaEventSynchronize(e1));
    if (r >= 0) CUDACHECK(cudaEventElapsedTime(&t[r], e0, e1));
  }
  qsort(t, (size_t)repeats, sizeof(float), cmpFloat);
  *ms = t[repeats / 2];
  free(t);
  return mcclSuccess;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 2, "[maxMiB] [repeats]",
                "Lab 02's benchmark: H2D and D2H copy bandwidth from pageable, cudaHostAlloc and cuMem host-NUMA\n"
                "memory, sizes 1 MiB doubling up to maxMiB.\n"
                "  maxMiB   largest size in MiB: 1..65536 (default 256)\n"
                "  repeats  timed copies per size, median reported: 1..10000 (default 10)\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  long maxMiB = (long)mcclArgsInt(argc, argv, 1, "maxMiB", 256, 1, 65536);
  int repeats = (int)mcclArgsInt(argc, argv, 2, "repeats", 10, 1, 10000);
  size_t maxBytes = (size_t)maxMiB * MiB;
  int nDev = 0;
  if (cudaGetDeviceCount(&nDev) != cudaSuccess || nDev < 1 || cudaSetDevice(0) != cudaSuccess) {
    fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  int haveCuMem = mcclCuMemHostEnable();
  cudaStream_t s;
  cudaEvent_t e0, e1;
  if (cudaStreamCreate(&s) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
    return 1;

  printf(
      "# Lab 02: host<->device copy bandwidth, device 0 (%s backend); cudaMemcpyAsync timed with CUDA events, "
      "median of %d after 2 warm-up copies; GB/s = 1e9 bytes/s\n",
      MCCL_BACKEND_NAME, repeats);
  if (!haveCuMem) printf("# cuMem host-NUMA memory is off or refused here: its columns show n/a\n");
  printf("%12s", "size(B)");
  for (int k = 0; k < NKIND; k++) printf(" %15s", kindName[k]);
  for (int k = 0; k < NKIND; k++) printf(" %15s", kindName[k]);
  printf("\n%12s", "");
  for (int k = 0; k < NKIND; k++) printf(" %15s", "H2D GB/s");
  for (int k = 0; k < NKIND; k++) printf(" %15s", "D2H GB/s");
  printf("\n");
  // Buffers are allocated per size, so a small run never holds the largest buffers.
  for (size_t bytes = MiB; bytes <= maxBytes; bytes *= 2) {
    double start = mcclClockSec();
    double bw[2][NKIND];
    void* host[NKIND] = {NULL, NULL, NULL};
    void* dev = NULL;
    if (posix_memalign(&host[PAGEABLE], 4096, bytes) != 0) return 1;
    if (mcclCudaHostCalloc(&host[CUDA_HOST], bytes, 1) != mcclSuccess) return 1;
    if (haveCuMem && mcclCuMemHostAlloc(&host[CUMEM_HOST], NULL, bytes) != mcclSuccess) return 1;
    for (int k = 0; k < NKIND; k++)
      if (host[k]) memset(host[k], 1, bytes);  // fault the pages in: first touch is not copy bandwidth
    if (cudaMalloc(&dev, bytes) != cudaSuccess) return 1;
    for (int dir = 0; dir < 2; dir++)
      for (int k = 0; k < NKIND; k++) {
        float ms = 0;
        bw[dir][k] = -1;
        if (host[k] == NULL) continue;
        void* dst = dir == 0 ? dev : host[k];
        void* src = dir == 0 ? host[k] : dev;
        if (timeCopy(dst, src, bytes, repeats, s, e0, e1, &ms) != mcclSuccess) return 1;
        bw[dir][k] = ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0;
      }
    cudaFree(dev);
    if (host[CUMEM_HOST]) mcclCuMemHostFree(host[CUMEM_HOST]);
    mcclCudaHostFree(host[CUDA_HOST]);
    free(host[PAGEABLE]);
    printf("%12zu", bytes);
    for (int dir = 0; dir < 2; dir++)
      for (int k = 0; k < NKIND; k++)
        if (bw[dir][k] < 0)
          printf(" %15s", "n/a");
        else
          printf(" %15.2f", bw[dir][k]);
    printf("\n");
    fflush(stdout);
    if (mcclClockSec() - start > 3.0 && bytes * 2 <= maxBytes) {
      printf("# stopped after %zu bytes: that size took %.1f s (pass maxMiB to choose)\n", bytes,
             mcclClockSec() - start);
      break;
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(s);
  return 0;
}
