// Faults as an NCCL client meets them (a peer's death, mismatched calls, abort): a program written only against nccl.h,
// linked with -lnccl and no run path, so LD_LIBRARY_PATH picks the library (minccl's drop-in or NCCL's)
// and one binary measures both on the same GPUs. Run under mpirun, one device per rank, one case per run
// (the communicator is lost at the end of each):
//   kill      the last rank dies (SIGKILL) while the others wait in an AllReduce; each survivor polls
//             ncclCommGetAsyncError every millisecond and reports how long after the death it saw an error
//             (needs `mpirun --enable-recovery`: a plain mpirun ends the job when a rank dies)
//   count     op #2 is an AllReduce of 1024 floats on rank 0 and of 2048 on the others
//   function  op #2 is an AllReduce on rank 0 and an AllGather on the others
//   missing   op #2 is an AllReduce that only rank 0 calls
// In the three mismatches every rank polls its async error from the call on, and prints the time and the
// library's last error line. Then each rank times ncclCommAbort and the stream's end after it. A case ends
// its wait after WAIT_MS (default 10000) and says that nothing was seen; an abort that has not returned
// after 20 s is reported as such and the process exits.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define ABORT_LIMIT_S 20

static int rank, nranks;
static const char* lib;  // "minccl" or "NCCL", from the library the loader picked

// Its own clock, not common's mcclClockNano: this program includes nccl.h alone and may run on NCCL's
// library, so it links nothing of minccl.
static int64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for every process of the machine
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static double msSince(int64_t t0) {
  return (double)(nowNs() - t0) / 1e6;
}

static void die(const char* what, const char* why) {
  printf("# rank %d: %s failed: %s\n", rank, what, why);
  fflush(stdout);
  _exit(1);
}
#define NCCL_OR_DIE(call)                                      \
  do {                                                         \
    ncclResult_t r_ = (call);                                  \
    if (r_ != ncclSuccess) die(#call, ncclGetErrorString(r_)); \
  } while (0)
#define CUDA_OR_DIE(call)                                      \
  do {                                                         \
    cudaError_t e_ = (call);                                   \
    if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_)); \
  } while (0)

static void abortTooLong(int sig) {
  (void)sig;
  static const char m[] = "# a rank: ncclCommAbort did not return within the limit; exiting\n";
  if (write(1, m, sizeof(m) - 1) < 0) _exit(3);
  _exit(3);
}

// Polls the async error every millisecond for at most waitMs from t0; returns the error (ncclSuccess: none
// seen) and sets *atNs to the time of the poll that saw it.
static ncclResult_t pollAsync(ncclComm_t comm, int64_t t0, int waitMs, int64_t* atNs) {
  ncclResult_t got = ncclSuccess;
  while (msSince(t0) < waitMs) {
    if (ncclCommGetAsyncError(comm, &got) != ncclSuccess) die("ncclCommGetAsyncError", "refused");
    if (got != ncclSuccess) break;
    usleep(1000);
  }
  *atNs = nowNs();
  return got;
}

// from: what the time counts from ("the death", "the call").
static void report(const char* kase, const char* from, ncclComm_t comm, ncclResult_t got, double ms, int waitMs) {
  if (got == ncclSuccess)
    printf("# rank %d: %s %s: nothing seen within %d ms\n", rank, lib, kase, waitMs);
  else
    printf("# rank %d: %s %s: %s %.1f ms after %s: %s\n", rank, lib, kase, ncclGetErrorString(got), ms, from,
           ncclGetLastError(comm));
  fflush(stdout);
}

static void timeAbort(const char* kase, ncclComm_t comm, cudaStream_t stream) {
  signal(SIGALRM, abortTooLong);
  alarm(ABORT_LIMIT_S);
  const int64_t t0 = nowNs();
  const ncclResult_t r = ncclCommAbort(comm);
  const double abortMs = msSince(t0);
  const cudaError_t e = cudaStreamSynchronize(stream);
  alarm(0);
  printf("# rank %d: %s %s: ncclCommAbort %s in %.1f ms, the stream's end %.1f ms after the call (%s)\n", rank, lib,
         kase, ncclGetErrorString(r), abortMs, msSince(t0), cudaGetErrorString(e));
  fflush(stdout);
}

static void usage(FILE* f) {
  fprintf(f, "usage: nccl_faults kill|count|function|missing [WAIT_MS]  (under mpirun, 2 ranks or more)\n");
}

int main(int argc, char** argv) {
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    usage(stdout);
    return 0;
  }
  const char* kase = argc >= 2 ? argv[1] : "";
  char* end = NULL;
  const long waitMs = argc >= 3 ? strtol(argv[2], &end, 10) : 10000;
  if ((argc != 2 && argc != 3) || (argc == 3 && (*end != '\0' || waitMs <= 0 || waitMs > 600000)) ||
      (strcmp(kase, "kill") && strcmp(kase, "count") && strcmp(kase, "function") && strcmp(kase, "missing"))) {
    usage(stderr);
    return 2;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  lib = dlsym(RTLD_DEFAULT, "mcclDropinCalls") ? "minccl" : "NCCL";
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1 || nranks < 2) {
    if (rank == 0) printf("SKIP nccl_faults %s (%s)\n", kase, nranks < 2 ? "one rank" : "no device");
    MPI_Finalize();
    return 0;
  }
  CUDA_OR_DIE(cudaSetDevice(rank % ndev));
  cudaStream_t stream;
  CUDA_OR_DIE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *send = NULL, *recv = NULL;
  CUDA_OR_DIE(cudaMalloc((void**)&send, 2048 * sizeof(float) * (size_t)nranks));
  CUDA_OR_DIE(cudaMalloc((void**)&recv, 2048 * sizeof(float) * (size_t)nranks));
  CUDA_OR_DIE(cudaMemset(send, 0, 2048 * sizeof(float) * (size_t)nranks));
  ncclUniqueId id;
  if (rank == 0) NCCL_OR_DIE(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL_OR_DIE(ncclCommInitRank(&comm, nranks, id, rank));
  // Op #1, correct on every rank (its connections made).
  NCCL_OR_DIE(ncclAllReduce(send, recv, 256, ncclFloat32, ncclSum, comm, stream));
  CUDA_OR_DIE(cudaStreamSynchronize(stream));
  // Where the victim leaves the time of its death for the survivors (CLOCK_MONOTONIC is machine-wide).
  char deathFile[64];
  int pid = (int)getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  snprintf(deathFile, sizeof(deathFile), "/tmp/nccl_faults.%d.death", pid);
  MPI_Barrier(MPI_COMM_WORLD);
  int64_t at = 0;
  if (!strcmp(kase, "kill")) {
    if (rank == nranks - 1) {
      usleep(200 * 1000);  // the survivors are in op #2 by now, their kernels waiting for this rank
      FILE* f = fopen(deathFile, "w");
      if (f) fprintf(f, "%lld\n", (long long)nowNs());
      if (f) fclose(f);
      raise(SIGKILL);
    }
    NCCL_OR_DIE(ncclAllReduce(send, recv, 1024, ncclFloat32, ncclSum, comm, stream));
    const ncclResult_t got = pollAsync(comm, nowNs(), (int)waitMs, &at);
    long long death = 0;
    FILE* f = fopen(deathFile, "r");
    if (f && fscanf(f, "%lld", &death) != 1) death = 0;
    if (f) fclose(f);
    if (death == 0) die("reading the time of the death", deathFile);
    report("kill", "the death", comm, got, (double)(at - death) / 1e6, (int)waitMs);
    timeAbort(kase, comm, stream);
    if (rank == 0) unlink(deathFile);
    _exit(0);  // no MPI_Finalize: its fence would wait for the dead rank
  }
  const int64_t t0 = nowNs();
  if (!strcmp(kase, "count"))
    NCCL_OR_DIE(ncclAllReduce(send, recv, rank == 0 ? 1024 : 2048, ncclFloat32, ncclSum, comm, stream));
  else if (!strcmp(kase, "function") && rank != 0)
    NCCL_OR_DIE(ncclAllGather(send, recv, 512, ncclFloat32, comm, stream));
  else if (rank == 0)
    NCCL_OR_DIE(ncclAllReduce(send, recv, 1024, ncclFloat32, ncclSum, comm, stream));
  const ncclResult_t got = pollAsync(comm, t0, (int)waitMs, &at);
  report(kase, "the call", comm, got, (double)(at - t0) / 1e6, (int)waitMs);
  timeAbort(kase, comm, stream);
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(stream);
  MPI_Finalize();
  return 0;
}
