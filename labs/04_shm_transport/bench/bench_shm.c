// Lab 04 benchmark: device 0 -> device 1 through the SHM FIFO, one way and both ways at once,
// next to the ceiling of the copies it is made of (cudaMemcpyAsync device <-> pinned host of the
// same size, timed with events in the same run). Two forked processes, as the tests.
// Usage: bench_shm [maxBytes]   (bench_shm --help says more)
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_args.h"
#include "mccl_shm_pair.h"
#include "mccl_fork.h"
#include "mccl_benchout.h"
#include "mccl_utils.h"

static mcclResult_t barrier(struct mcclShmPairEnd* e) {
  char b = 0;
  MCCLCHECK(mcclIpcSocketSendMsg(&e->sock, &b, 1, -1, e->peer, e->hash));
  return mcclIpcSocketRecvMsg(&e->sock, &b, 1, NULL);
}

// Median seconds of one transfer of n bytes: one way (rank 0 -> 1) or both ways.
static mcclResult_t timeTransfer(struct mcclShmPairEnd* e, void* src, void* dst, size_t n, int both, int iters,
                                 double* median) {
  double t[16];
  for (int i = -1; i < iters; i++) {  // i == -1: warm-up
    struct mcclProxyOp ops[2];
    int nops = 0;
    if (both || e->rank == 0) MCCLCHECK(mcclProxyOpInit(&ops[nops++], &e->conns[1], src, n, NULL));
    if (both || e->rank == 1) MCCLCHECK(mcclProxyOpInit(&ops[nops++], &e->conns[0], dst, n, NULL));
    MCCLCHECK(barrier(e));
    double t0 = mcclClockSec();
    MCCLCHECK(mcclProxyOpsWait(ops, nops, NULL));
    if (i >= 0) t[i] = mcclClockSec() - t0;
  }
  MCCLCHECK(barrier(e));
  *median = mcclBenchMedian(t, iters);
  return mcclSuccess;
}

// GB/s of the slower of D2H and H2D for n bytes between dev and pinned host, event-timed.
static double ceilingGBs(void* dev, void* pinned, size_t n, cudaStream_t s, cudaEvent_t a, cudaEvent_t b) {
  double worst = 1e30;
  for (int dir = 0; dir < 2; dir++) {
    float best = 1e30f;
    for (int i = 0; i < 3; i++) {
      cudaEventRecord(a, s);
      if (dir == 0) cudaMemcpyAsync(pinned, dev, n, cudaMemcpyDeviceToHost, s);
      else cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, s);
      cudaEventRecord(b, s);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      if (ms < best) best = ms;
    }
    double gbs = n / (best * 1e-3) / 1e9;
    if (gbs < worst) worst = gbs;
  }
  return worst;
}

static int run(int rank, uint64_t hash, size_t maxBytes) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return 1;
  int dev = rank % ndev;
  cudaSetDevice(dev);
  struct mcclShmPairEnd e;
  mcclResult_t r = mcclShmPairConnect(&e, rank, hash, dev, 1, 1, 0, NULL);
  if (r != mcclSuccess) {
    fprintf(stderr, "bench_shm: connect failed: %s\n", mcclGetErrorString(r));
    return 1;
  }
  void *src = NULL, *dst = NULL, *pinned = NULL;
  cudaStream_t s;
  cudaEvent_t a, b;
  if (cudaMalloc(&src, maxBytes) != cudaSuccess || cudaMalloc(&dst, maxBytes) != cudaSuccess ||
      cudaHostAlloc(&pinned, maxBytes, cudaHostAllocDefault) != cudaSuccess || cudaStreamCreate(&s) != cudaSuccess ||
      cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) {
    fprintf(stderr, "bench_shm: allocation of %zu bytes failed\n", maxBytes);
    return 1;
  }
  cudaMemset(src, rank + 1, maxBytes);
  int buffSize = 0;
  mcclShmBuffSize(&buffSize);
  const mcclShmIpcDesc_t* d = &e.myDesc[0];
  if (rank == 1) {
    printf("# lab 04 SHM bandwidth, %s backend: device 0 -> device %d, MCCL_BUFFSIZE %d (%d slots of %d B), %s "
           "buffers\n", MCCL_BACKEND_NAME, dev, buffSize, MCCL_STEPS, buffSize / MCCL_STEPS,
           d->kind == MCCL_SHM_IPC_CUMEM ? "cuMem host-NUMA" : "/dev/shm");
    printf("# ceiling: slower of cudaMemcpyAsync D2H / H2D between device %d and pinned host memory, same size\n", dev);
    printf("%12s %12s %14s %12s %9s %9s\n", "size(B)", "oneway GB/s", "bothways GB/s", "ceiling GB/s", "1way/ceil",
           "both/ceil");
  }
  int rc = 0;
  for (size_t n = 64 << 10; n <= maxBytes; n *= 4) {
    int iters = n <= (16 << 20) ? 9 : 3;
    double t1, t2;
    if (timeTransfer(&e, src, dst, n, 0, iters, &t1) != mcclSuccess ||
        timeTransfer(&e, src, dst, n, 1, iters, &t2) != mcclSuccess) {
      rc = 1;
      break;
    }
    if (rank == 1) {
      double one = n / t1 / 1e9, both = n / t2 / 1e9, ceil = ceilingGBs(dst, pinned, n, s, a, b);
      printf("%12zu %12.2f %14.2f %12.2f %9.2f %9.2f\n", n, one, both, ceil, one / ceil, both / ceil);
      fflush(stdout);
    }
    if (barrier(&e) != mcclSuccess) {
      rc = 1;
      break;
    }
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  cudaFreeHost(pinned);
  cudaFree(src);
  cudaFree(dst);
  if (mcclShmPairClose(&e) != mcclSuccess) rc = 1;
  return rc;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 1, "[maxBytes]",
                "Lab 04's benchmark: device 0 -> device 1 through the SHM FIFO, one way and both ways, beside the\n"
                "copies it is made of; sizes 64 KiB times 4 up to maxBytes (two forked processes).\n"
                "  maxBytes  largest size, a number with an optional K, M or G suffix: 64K..16G\n"
                "            (default 1G; 64M on the sim backend, where copies are memcpy)\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  setenv("MCCL_BUFFSIZE", "4194304", 0);  // NCCL's 4 MiB unless set: host-driven copies (docs/parameters.md)
  // The sim copies with memcpy on host threads: 64 MiB already shows the shape of the curve.
  size_t maxBytes = strcmp(MCCL_BACKEND_NAME, "sim") == 0 ? (64u << 20) : (1u << 30);
  maxBytes = (size_t)mcclArgsInt(argc, argv, 1, "maxBytes", (long long)maxBytes, 64 << 10, 16LL << 30);
  uint64_t hash = ((uint64_t)getpid() << 24) ^ 0xbe7c4;
  fflush(NULL);
  pid_t child = mcclForkChild();  // dies with this process
  if (child < 0) return 1;
  if (child == 0) {
    _exit(run(0, hash, maxBytes));
  }
  int rc = run(1, hash, maxBytes);
  int st = 0;
  waitpid(child, &st, 0);
  return rc || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}
