// Lab 10 benchmark, under mpirun -np N (one process per GPU, rank r on device r % devices): the copy engines
// against the kernels, and beside NCCL 2.28's copy-engine path (ncclConfig_t.CTAPolicy = NCCL_CTA_POLICY_ZERO,
// MCCL_NCCL_LIB) when that library loads (never on the sim).
//
// Sweep (the default): AllGather and AlltoAll from --minbytes to --maxbytes per rank (doubling), each row one
// size: the time per call (us, the median of --iters CUDA-event pairs after a warm-up) and bus bandwidth
// (nccl-tests': algbw x (n-1)/n) of minccl's kernels (CTA policy DEFAULT), minccl's copy engines (ZERO), and
// NCCL with ZERO, then NCCL's time over minccl's copy engines' (> 1: minccl is faster). Every path works on
// windows (mcclMemAlloc / ncclMemAlloc + window registration), as NCCL's copy engines need; each path's first
// call at each size is checked, #wrong counts the bytes that differ.
//
// --overlap: a kernel of FMA chains on every SM (its length set so that alone it takes as long as minccl's
// kernel AllGather) beside one AllGather of --bytes per rank (default 256 MiB on a GPU), on two streams: for
// each path, the compute kernel's time and the AllGather's, alone and together, and their ratios. It prints
// ratios; it judges nothing.
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_args.h"
#include "mccl_benchout.h"
#include "mccl_ce.h"
#include "mccl_checks.h"
#include "mccl_nccl.h"
#include "mccl_param.h"

// The compute kernel (benchlib/fma_kernel.cu) and its argument.
struct mcclCeFmaArgs {
  float* out;
  int iters;
};
void mcclCeFmaKernel(struct mcclCeFmaArgs args);

static mcclResult_t mcclCeFmaLaunch(int blocks, int threads, int iters, float* out, cudaStream_t stream) {
  int dev = -1;
  cudaFunction_t fn;
  struct mcclCeFmaArgs a = {out, iters};
  void* params[] = {&a};
  CUDACHECK(cudaGetDevice(&dev));
  MCCLCHECK(mcclDevGetFunction(dev, (const void*)mcclCeFmaKernel, &fn));
  CUCHECK(cuLaunchKernel((CUfunction)fn, (unsigned)blocks, 1, 1, (unsigned)threads, 1, 1, 0, (CUstream)stream, params,
                         NULL));
  return mcclSuccess;
}

// NCCL 2.28's ncclConfig_t (nccl.h's ncclConfig_v22800), declared here so no nccl.h is needed.
struct ncclConfigV22800 {
  size_t size;
  unsigned int magic, version;
  int blocking, cgaClusterSize, minCTAs, maxCTAs;
  const char* netName;
  int splitShare, trafficClass;
  const char* commName;
  int collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs, nChannelsPerNetPeer, nvlinkCentricSched;
};
#define NCCL_UNDEF ((int)0x80000000)

enum { kKernels, kCopyEngines, kNcclZero, kNumPaths };
static const char* const kPathName[kNumPaths] = {"minccl-kernels", "minccl-ce", "nccl-ce"};
enum { kAllGather, kAlltoAll, kNumFuncs };
static const char* const kFuncName[kNumFuncs] = {"allgather", "alltoall"};

static struct {
  int rank, nranks, sim, iters, warmup, haveNccl;
  size_t maxBytes;
  mcclLabComm* comm[2];  // kKernels, kCopyEngines
  mcclLabWindow* win[2][2];
  char *send, *recv;  // minccl's: mcclMemAlloc, registered on both communicators
  cudaStream_t stream, side;
  // NCCL
  mcclNcclApi api;
  mcclNcclComm ncomm;
  char *nsend, *nrecv;
  void* nwin[2];
  int (*commInitRankConfig)(mcclNcclComm*, int, mcclNcclUniqueId, int, struct ncclConfigV22800*);
  int (*allGather)(const void*, void*, size_t, int, mcclNcclComm, cudaStream_t);
  int (*alltoAll)(const void*, void*, size_t, int, mcclNcclComm, cudaStream_t);
  int (*memAlloc)(void**, size_t);
  int (*memFree)(void*);
  int (*winRegister)(mcclNcclComm, void*, size_t, void**, int);
  int (*winDeregister)(mcclNcclComm, void*);
} B;

static int allOk(int ok) {
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

// One call of a function on a path, `bytes` per rank, on `stream` (0 on success).
static int issue(int path, int func, size_t bytes, cudaStream_t stream) {
  if (path == kNcclZero) {
    int e = func == kAllGather ? B.allGather(B.nsend, B.nrecv, bytes, 0, B.ncomm, stream)
                               : B.alltoAll(B.nsend, B.nrecv, bytes / (size_t)B.nranks, 0, B.ncomm, stream);
    if (e != 0) fprintf(stderr, "rank %d: NCCL %s: %s\n", B.rank, kFuncName[func], B.api.getErrorString(e));
    return e;
  }
  mcclLabComm* c = B.comm[path];
  mcclResult_t r = func == kAllGather ? mcclLabAllGather(B.send, B.recv, bytes, mcclInt8, c, stream)
                                      : mcclLabAlltoAll(B.send, B.recv, bytes / (size_t)B.nranks, mcclInt8, c, stream);
  return r != mcclSuccess;
}

static unsigned char byteOf(int rank, size_t i) {
  return (unsigned char)(rank * 37 + i * 11 + (i >> 12));
}

// The path's first call at this size, checked: the bytes of the output that differ (-1: the call failed).
static long checked(int path, int func, size_t bytes) {
  const int n = B.nranks;
  char *send = path == kNcclZero ? B.nsend : B.send, *recv = path == kNcclZero ? B.nrecv : B.recv;
  unsigned char* h = (unsigned char*)malloc(bytes * (size_t)n);
  for (size_t i = 0; i < bytes; i++) h[i] = byteOf(B.rank, i);
  if (cudaMemcpy(send, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemset(recv, 0, bytes * n) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess ||
      issue(path, func, bytes, B.stream) != 0 || cudaStreamSynchronize(B.stream) != cudaSuccess ||
      cudaMemcpy(h, recv, bytes * (size_t)n, cudaMemcpyDeviceToHost) != cudaSuccess) {
    free(h);
    return -1;
  }
  long wrong = 0;
  const size_t block = func == kAllGather ? bytes : bytes / (size_t)n;
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < block; i++)  // AllGather: p's input; AlltoAll: p's block `rank`
      wrong += h[(size_t)p * block + i] != byteOf(p, func == kAllGather ? i : (size_t)B.rank * block + i);
  free(h);
  return wrong;
}

// The median time (us) of `iters` calls, each between two events, after `warmup` calls; 0 if one failed.
static double timed(int path, int func, size_t bytes, cudaStream_t stream) {
  cudaEvent_t ev[2];
  double* us = (double*)calloc((size_t)B.iters, sizeof(double));
  int bad = cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess;
  for (int i = 0; i < B.warmup && !bad; i++) bad = issue(path, func, bytes, stream);
  for (int i = 0; i < B.iters && !bad; i++) {
    float ms = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    bad = cudaEventRecord(ev[0], stream) != cudaSuccess || issue(path, func, bytes, stream) != 0 ||
          cudaEventRecord(ev[1], stream) != cudaSuccess || cudaEventSynchronize(ev[1]) != cudaSuccess ||
          cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess;
    us[i] = ms * 1e3;
  }
  double m = bad ? 0 : mcclBenchMedian(us, B.iters);
  cudaEventDestroy(ev[0]);
  cudaEventDestroy(ev[1]);
  free(us);
  return m;
}

// A rank's output at `bytes` of the sweep: AllGather's n blocks of its input's bytes; AlltoAll's send buffer is
// `bytes`, n blocks of bytes / n, and so is its output.
static size_t outputBytes(int func, size_t bytes) {
  return func == kAllGather ? bytes * (size_t)B.nranks : bytes;
}
static double busbw(int func, size_t bytes, double us) {  // nccl-tests': the output's bytes / time x (n-1)/n
  return us > 0 ? (double)outputBytes(func, bytes) / (us * 1e3) * (B.nranks - 1) / B.nranks : 0;
}

static void sweep(size_t minBytes) {
  if (B.rank == 0) {
    printf("# %-9s %12s", "function", "size(B)");
    for (int p = 0; p < kNumPaths; p++)
      if (p != kNcclZero || B.haveNccl) {
        char label[40];
        snprintf(label, sizeof(label), "%s us", kPathName[p]);
        printf("  %24s %6s %6s", label, "GB/s", "#wrong");
      }
    printf("%s\n", B.haveNccl ? "  ratio" : "");
  }
  for (int f = 0; f < kNumFuncs; f++)
    for (size_t bytes = minBytes; bytes <= B.maxBytes; bytes *= 2) {
      double t[kNumPaths] = {0};
      long wrong[kNumPaths] = {0};
      for (int p = 0; p < kNumPaths; p++) {
        if (p == kNcclZero && !B.haveNccl) continue;
        wrong[p] = checked(p, f, bytes);
        t[p] = wrong[p] < 0 ? 0 : timed(p, f, bytes, B.stream);
      }
      MPI_Allreduce(MPI_IN_PLACE, wrong, kNumPaths, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, t, kNumPaths, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (B.rank != 0) continue;
      printf("  %-9s %12zu", kFuncName[f], outputBytes(f, bytes));
      for (int p = 0; p < kNumPaths; p++)
        if (p != kNcclZero || B.haveNccl) printf("  %24.2f %6.1f %6ld", t[p], busbw(f, bytes, t[p]), wrong[p]);
      if (B.haveNccl) printf("  %5.2f", t[kCopyEngines] > 0 ? t[kNcclZero] / t[kCopyEngines] : 0);
      printf("\n");
    }
  if (B.rank == 0)
    printf(
        "# size: the output's bytes; us: the slowest rank's median; GB/s: bus bandwidth; ratio: NCCL's time / "
        "minccl-ce's (> 1: minccl is faster)\n");
}

// ---- overlap -----------------------------------------------------------------------------------------------
struct overlapRow {
  double agAlone, fmaAlone, agWith, fmaWith;
};

// The FMA kernel alone (median us of iters launches).
static double fmaAlone(int blocks, int threads, int iters, float* out) {
  cudaEvent_t ev[2];
  double* us = (double*)calloc((size_t)B.iters, sizeof(double));
  cudaEventCreate(&ev[0]);
  cudaEventCreate(&ev[1]);
  for (int i = 0; i < B.iters; i++) {
    float ms = 0;
    cudaEventRecord(ev[0], B.side);
    mcclCeFmaLaunch(blocks, threads, iters, out, B.side);
    cudaEventRecord(ev[1], B.side);
    cudaEventSynchronize(ev[1]);
    cudaEventElapsedTime(&ms, ev[0], ev[1]);
    us[i] = ms * 1e3;
  }
  double m = mcclBenchMedian(us, B.iters);
  cudaEventDestroy(ev[0]);
  cudaEventDestroy(ev[1]);
  free(us);
  return m;
}

// The FMA kernel on the side stream and the AllGather on the main one, started together: medians of each.
static int together(int path, size_t bytes, int blocks, int threads, int iters, float* out, struct overlapRow* r) {
  cudaEvent_t ev[4];
  double* us = (double*)calloc(2 * (size_t)B.iters, sizeof(double));
  int bad = 0;
  for (int k = 0; k < 4; k++) bad |= cudaEventCreate(&ev[k]) != cudaSuccess;
  for (int i = 0; i < B.iters && !bad; i++) {
    float ms[2] = {0, 0};
    MPI_Barrier(MPI_COMM_WORLD);
    bad = cudaEventRecord(ev[0], B.side) != cudaSuccess ||
          mcclCeFmaLaunch(blocks, threads, iters, out, B.side) != mcclSuccess ||
          cudaEventRecord(ev[1], B.side) != cudaSuccess || cudaEventRecord(ev[2], B.stream) != cudaSuccess ||
          issue(path, kAllGather, bytes, B.stream) != 0 || cudaEventRecord(ev[3], B.stream) != cudaSuccess ||
          cudaEventSynchronize(ev[1]) != cudaSuccess || cudaEventSynchronize(ev[3]) != cudaSuccess ||
          cudaEventElapsedTime(&ms[0], ev[0], ev[1]) != cudaSuccess ||
          cudaEventElapsedTime(&ms[1], ev[2], ev[3]) != cudaSuccess;
    us[i] = ms[0] * 1e3;
    us[B.iters + i] = ms[1] * 1e3;
  }
  if (!bad) {
    r->fmaWith = mcclBenchMedian(us, B.iters);
    r->agWith = mcclBenchMedian(us + B.iters, B.iters);
  }
  for (int k = 0; k < 4; k++) cudaEventDestroy(ev[k]);
  free(us);
  return bad;
}

static void overlap(size_t bytes) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int threads = 256, blocks = sms * 8;  // more blocks than fit at once: every SM stays full to the end
  float* out = NULL;
  if (cudaMalloc((void**)&out, sizeof(float) * (size_t)blocks) != cudaSuccess) return;
  // The chain's length: alone, the kernel takes about as long as minccl's kernel AllGather.
  const double agKernels = timed(kKernels, kAllGather, bytes, B.stream);
  int iters = B.sim ? 64 : 4096;
  double t = fmaAlone(blocks, threads, iters, out);
  if (t > 0 && agKernels > 0) iters = (int)(iters * agKernels / t) + 1;
  MPI_Allreduce(MPI_IN_PLACE, &iters, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (B.rank == 0)
    printf("# overlap: an AllGather of %zu bytes per rank beside %d blocks x %d threads of %d FMA x 4 on %d SMs\n",
           bytes, blocks, threads, iters, sms);
  if (B.rank == 0)
    printf("# %-15s %12s %12s %12s %12s %13s %11s  #wrong\n", "path", "ag alone", "fma alone", "ag with", "fma with",
           "fma slowdown", "ag slowdown");
  for (int p = 0; p < kNumPaths; p++) {
    if (p == kNcclZero && !B.haveNccl) continue;
    struct overlapRow r = {0, 0, 0, 0};
    long wrong = checked(p, kAllGather, bytes);
    r.agAlone = timed(p, kAllGather, bytes, B.stream);
    r.fmaAlone = fmaAlone(blocks, threads, iters, out);
    if (together(p, bytes, blocks, threads, iters, out, &r)) r.agWith = r.fmaWith = 0;
    MPI_Allreduce(MPI_IN_PLACE, &r, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (B.rank == 0)
      printf("  %-15s %12.1f %12.1f %12.1f %12.1f %13.3f %11.3f  %6ld\n", kPathName[p], r.agAlone, r.fmaAlone, r.agWith,
             r.fmaWith, r.fmaAlone > 0 ? r.fmaWith / r.fmaAlone : 0, r.agAlone > 0 ? r.agWith / r.agAlone : 0, wrong);
  }
  if (B.rank == 0) printf("# times in us (the slowest rank's medians); slowdown: with / alone (1.000: undisturbed)\n");
  cudaFree(out);
}

// ---- set-up --------------------------------------------------------------------------------------------------
static const char* ncclSetUp(int dev) {
  const char* why = NULL;
  if (B.sim) return "the sim backend (NCCL needs GPUs)";
  if (!allOk(mcclNcclOpen(mcclParamNcclLib(), &B.api, &why))) return why ? why : "MCCL_NCCL_LIB did not load on a rank";
  *(void**)&B.commInitRankConfig = dlsym(B.api.lib, "ncclCommInitRankConfig");
  *(void**)&B.allGather = dlsym(B.api.lib, "ncclAllGather");
  *(void**)&B.alltoAll = dlsym(B.api.lib, "ncclAlltoAll");
  *(void**)&B.memAlloc = dlsym(B.api.lib, "ncclMemAlloc");
  *(void**)&B.memFree = dlsym(B.api.lib, "ncclMemFree");
  *(void**)&B.winRegister = dlsym(B.api.lib, "ncclCommWindowRegister");
  *(void**)&B.winDeregister = dlsym(B.api.lib, "ncclCommWindowDeregister");
  if (!allOk(B.commInitRankConfig && B.allGather && B.alltoAll && B.memAlloc && B.memFree && B.winRegister &&
             B.winDeregister))
    return "MCCL_NCCL_LIB has no ncclCommInitRankConfig, ncclAlltoAll or windows (NCCL 2.28 does)";
  mcclNcclUniqueId id;
  if (B.rank == 0 && B.api.getUniqueId(&id) != 0) memset(&id, 0, sizeof(id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  struct ncclConfigV22800 cfg = {sizeof(cfg),
                                 0xcafebeefu,
                                 (unsigned)B.api.version,
                                 NCCL_UNDEF,
                                 NCCL_UNDEF,
                                 NCCL_UNDEF,
                                 NCCL_UNDEF,
                                 NULL,
                                 NCCL_UNDEF,
                                 NCCL_UNDEF,
                                 NULL,
                                 NCCL_UNDEF,
                                 2 /* NCCL_CTA_POLICY_ZERO */,
                                 NCCL_UNDEF,
                                 NCCL_UNDEF,
                                 NCCL_UNDEF,
                                 NCCL_UNDEF};
  (void)dev;
  if (!allOk(B.commInitRankConfig(&B.ncomm, B.nranks, id, B.rank, &cfg) == 0)) return "ncclCommInitRankConfig failed";
  const size_t out = B.maxBytes * (size_t)B.nranks;
  if (!allOk(B.memAlloc((void**)&B.nsend, B.maxBytes) == 0 && B.memAlloc((void**)&B.nrecv, out) == 0))
    return "ncclMemAlloc failed";
  if (!allOk(B.winRegister(B.ncomm, B.nsend, B.maxBytes, &B.nwin[0], 1) == 0 &&
             B.winRegister(B.ncomm, B.nrecv, out, &B.nwin[1], 1) == 0))
    return "ncclCommWindowRegister failed";
  return NULL;
}

int main(int argc, char** argv) {
  static const char* const opts[] = {
      "--minbytes=", "--maxbytes=", "--bytes=", "--iters=", "--overlap", "--no-nccl", NULL};
  mcclArgsCheckOpts(
      argc, argv, opts, "[--minbytes B] [--maxbytes B] [--iters N] [--overlap [--bytes B]] [--no-nccl]",
      "  AllGather and AlltoAll on the copy engines (CTA policy ZERO) against minccl's kernels and NCCL's copy\n"
      "  engines (MCCL_NCCL_LIB, ncclConfig_t.CTAPolicy = NCCL_CTA_POLICY_ZERO), bytes per rank doubling from\n"
      "  --minbytes to --maxbytes (default 1M .. 512M on a GPU, 64K .. 1M on the sim), --iters timed calls each\n"
      "  (default 20). --overlap: one AllGather of --bytes per rank (default 256M, 1M on the sim) beside a\n"
      "  kernel of FMA chains on every SM, each path's times alone and together. Under mpirun -np N.");
  B.sim = strcmp(MCCL_BACKEND_NAME, "sim") == 0;
  const int doOverlap = (mcclArgsOpt(argc, argv, "--overlap") != NULL);
  const size_t minBytes = (size_t)mcclArgsOptInt(argc, argv, "--minbytes", B.sim ? 64 << 10 : 1 << 20, 1024, 1LL << 34);
  const size_t ovBytes = (size_t)mcclArgsOptInt(argc, argv, "--bytes", B.sim ? 1 << 20 : 256 << 20, 1024, 1LL << 34);
  B.maxBytes = (size_t)mcclArgsOptInt(argc, argv, "--maxbytes", B.sim ? 1 << 20 : 512 << 20, 1024, 1LL << 34);
  B.iters = (int)mcclArgsOptInt(argc, argv, "--iters", 20, 1, 100000);
  B.warmup = 3;
  if (doOverlap) B.maxBytes = ovBytes;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &B.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &B.nranks);
  B.maxBytes -= B.maxBytes % (size_t)B.nranks;  // AlltoAll: whole blocks
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    if (B.rank == 0) printf("# mpi_bench_ce: no CUDA device\n");
    MPI_Finalize();
    return 0;
  }
  const int dev = B.rank % ndev;
  CUDACHECK(cudaSetDevice(dev));
  mcclUniqueId id[2];
  if (B.rank == 0)
    for (int c = 0; c < 2; c++) MCCLCHECK(mcclGetUniqueId(&id[c]));
  MPI_Bcast(id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  const size_t out = B.maxBytes * (size_t)B.nranks;
  MCCLCHECK(mcclMemAlloc((void**)&B.send, B.maxBytes));
  MCCLCHECK(mcclMemAlloc((void**)&B.recv, out));
  for (int c = 0; c < 2; c++) {
    MCCLCHECK(mcclLabCommInit(&B.comm[c], B.nranks, &id[c], B.rank, dev, 0, mcclLocalTransports));
    B.comm[c]->ceColl.ops = &mcclCeOps;
    B.comm[c]->ctaPolicy = c == kCopyEngines ? MCCL_CTA_POLICY_ZERO : MCCL_CTA_POLICY_DEFAULT;
    MCCLCHECK(mcclLabWindowRegister(B.comm[c], B.send, B.maxBytes, &B.win[c][0]));
    MCCLCHECK(mcclLabWindowRegister(B.comm[c], B.recv, out, &B.win[c][1]));
  }
  CUDACHECK(cudaStreamCreateWithFlags(&B.stream, cudaStreamNonBlocking));
  CUDACHECK(cudaStreamCreateWithFlags(&B.side, cudaStreamNonBlocking));
  const char* noNccl = mcclArgsOpt(argc, argv, "--no-nccl") != NULL ? "--no-nccl" : ncclSetUp(dev);
  B.haveNccl = noNccl == NULL;
  if (B.rank == 0) {
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, dev);
    printf("# mpi_bench_ce: %d ranks on %s (%s backend); minccl's kernels and copy engines", B.nranks, prop.name,
           MCCL_BACKEND_NAME);
    if (B.haveNccl)
      printf(", NCCL %d.%d.%d with CTAPolicy ZERO (%s)\n", B.api.version / 10000, B.api.version / 100 % 100,
             B.api.version % 100, mcclParamNcclLib());
    else
      printf("; NCCL not timed: %s\n", noNccl);
  }
  if (doOverlap)
    overlap(B.maxBytes);
  else
    sweep(minBytes - minBytes % (size_t)B.nranks);
  if (B.haveNccl) {
    B.winDeregister(B.ncomm, B.nwin[0]);
    B.winDeregister(B.ncomm, B.nwin[1]);
    B.memFree(B.nsend);
    B.memFree(B.nrecv);
    B.api.commDestroy(B.ncomm);
    mcclNcclClose(&B.api);
  }
  CUDACHECK(cudaStreamSynchronize(B.stream));
  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the peers' windows before any unmaps
  for (int c = 0; c < 2; c++) {
    MCCLCHECK(mcclLabWindowDeregister(B.comm[c], B.win[c][0]));
    MCCLCHECK(mcclLabWindowDeregister(B.comm[c], B.win[c][1]));
    MCCLCHECK(mcclLabCommDestroy(B.comm[c]));
  }
  MCCLCHECK(mcclMemFree(B.send));
  MCCLCHECK(mcclMemFree(B.recv));
  CUDACHECK(cudaStreamDestroy(B.stream));
  CUDACHECK(cudaStreamDestroy(B.side));
  MPI_Finalize();
  return 0;
}
