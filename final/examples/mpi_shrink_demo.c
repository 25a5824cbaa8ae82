// final/ demo: a job that loses a rank and goes on without it, through minccl.h alone (NCCL 2.27's
// ncclCommRevoke and ncclCommShrink). Every rank runs a loop of allreduces, each checked; in the middle of
// one the last rank kills itself (SIGKILL: no goodbye to anyone). Each survivor, polling as an application
// does (cudaStreamQuery, then mcclCommGetAsyncError), sees mcclRemoteError and the line that says which peer
// is gone; it revokes the communicator (no new work enters it), shrinks it to the survivors (with
// MCCL_SHRINK_ABORT no message crosses the parent, whose dead rank could block one), aborts the parent (its
// allreduce in flight waits for the dead rank forever otherwise) and finishes the loop on the new one.
// Run it under `mpirun --enable-recovery --mca orte_allowed_exit_without_sync 1 -np 4` (a plain mpirun ends
// the whole job with its first dead rank); final/tests/test_shrink_demo.sh does, and checks what it prints.
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "minccl.h"

#define COUNT (1 << 16)  // float32 elements per allreduce
#define LOOP 6
#define KILL_AT 3  // the allreduce during which the last rank dies
#define DEATH_LIMIT_S 20.0

#define CHECK(call)                                                                                           \
  do {                                                                                                        \
    mcclResult_t r_ = (call);                                                                                 \
    if (r_ != mcclSuccess) {                                                                                  \
      printf("rank %d: %s failed: %s (%s)\n", me, #call, mcclGetErrorString(r_), mcclGetLastError(NULL));     \
      fflush(stdout);                                                                                         \
      _exit(1);                                                                                               \
    }                                                                                                         \
  } while (0)
#define CHECK_CUDA(call)                                                                                      \
  do {                                                                                                        \
    cudaError_t e_ = (call);                                                                                  \
    if (e_ != cudaSuccess) {                                                                                  \
      printf("rank %d: %s failed: %s\n", me, #call, cudaGetErrorString(e_));                                  \
      fflush(stdout);                                                                                         \
      _exit(1);                                                                                               \
    }                                                                                                         \
  } while (0)

static int me = -1;

static double nowSec(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// Allreduce number i on comm, where this rank is `rank` of `nranks`: element k of rank r is r + k % 7 + i, so the
// sum is nranks * (k % 7 + i) + nranks * (nranks - 1) / 2. Returns the elements that are wrong.
static int checkedAllReduce(mcclComm_t comm, int rank, int nranks, int i, float* send, float* recv, float* host,
                            cudaStream_t stream) {
  for (int k = 0; k < COUNT; k++) host[k] = (float)(rank + k % 7 + i);
  // On the allreduce's stream: cudaMemcpy from pageable memory may return before its bytes have landed.
  CHECK_CUDA(cudaMemcpyAsync(send, host, COUNT * sizeof(float), cudaMemcpyHostToDevice, stream));
  CHECK(mcclAllReduce(send, recv, COUNT, mcclFloat32, mcclSum, comm, stream));
  CHECK_CUDA(cudaMemcpyAsync(host, recv, COUNT * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  int wrong = 0;
  for (int k = 0; k < COUNT; k++) {
    const float want = (float)(nranks * (k % 7 + i) + nranks * (nranks - 1) / 2);
    if (host[k] != want && wrong++ == 0) printf("rank %d: element %d is %g, expected %g\n", rank, k, host[k], want);
  }
  return wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = 0, ndev = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc > 1 || n < 3) {
    if (me == 0)
      printf("usage: mpirun --enable-recovery --mca orte_allowed_exit_without_sync 1 -np N %s (N >= 3: the victim and "
             "at least 2 survivors)\n",
             argv[0]);
    MPI_Finalize();
    return argc > 1 ? 2 : 0;
  }
  const int victim = n - 1;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  CHECK_CUDA(cudaSetDevice(me % ndev));
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (me == 0) CHECK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  mcclComm_t comm = NULL;
  CHECK(mcclCommInitRank(&comm, n, id, me));
  float *send = NULL, *recv = NULL, *host = (float*)malloc(COUNT * sizeof(float));
  cudaStream_t stream;
  CHECK_CUDA(cudaMalloc((void**)&send, COUNT * sizeof(float)));
  CHECK_CUDA(cudaMalloc((void**)&recv, COUNT * sizeof(float)));
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (me == 0)
    printf("[1] %d ranks (%s backend), one communicator; rank %d will die during allreduce %d of %d\n", n,
           MCCL_BACKEND_NAME, victim, KILL_AT, LOOP);
  for (int i = 0; i < KILL_AT; i++) {
    const int wrong = checkedAllReduce(comm, me, n, i, send, recv, host, stream);
    if (me == 0) printf("[2] allreduce %d on %d ranks: %s\n", i, n, wrong ? "WRONG" : "checked");
    if (wrong) _exit(1);
  }
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);  // the last MPI call: from here a rank may be gone
  for (int k = 0; k < COUNT; k++) host[k] = (float)(me + k % 7 + KILL_AT);
  CHECK_CUDA(cudaMemcpyAsync(send, host, COUNT * sizeof(float), cudaMemcpyHostToDevice, stream));
  CHECK(mcclAllReduce(send, recv, COUNT, mcclFloat32, mcclSum, comm, stream));
  if (me == victim) {
    printf("[3] rank %d: allreduce %d launched; SIGKILL to myself\n", me, KILL_AT);
    fflush(stdout);
    kill(getpid(), SIGKILL);
  }
  // Poll as an application does: the stream first, then the communicator's asynchronous error.
  const double t0 = nowSec();
  mcclResult_t ae = mcclSuccess;
  while (ae == mcclSuccess && nowSec() - t0 < DEATH_LIMIT_S) {
    (void)cudaStreamQuery(stream);
    CHECK(mcclCommGetAsyncError(comm, &ae));
    if (ae == mcclSuccess) usleep(1000);
  }
  printf("[4] rank %d: mcclCommGetAsyncError says \"%s\" after %.1f ms: %s\n", me, mcclGetErrorString(ae),
         (nowSec() - t0) * 1e3, mcclGetLastError(comm));
  if (ae != mcclRemoteError) _exit(1);
  // Recover: no new work into the parent, the survivors' communicator, then the parent's end.
  const double t1 = nowSec();
  CHECK(mcclCommRevoke(comm));
  mcclComm_t sub = NULL;
  CHECK(mcclCommShrink(comm, &victim, 1, &sub, MCCL_SHRINK_ABORT));
  int subRank = -1, subSize = -1;
  CHECK(mcclCommUserRank(sub, &subRank));
  CHECK(mcclCommCount(sub, &subSize));
  printf("[5] rank %d: revoked and shrunk in %.1f ms: rank %d of %d of the new communicator\n", me,
         (nowSec() - t1) * 1e3, subRank, subSize);
  CHECK(mcclCommAbort(comm));  // ends the allreduce that waited for the dead rank
  CHECK_CUDA(cudaStreamSynchronize(stream));
  for (int i = KILL_AT; i < LOOP; i++) {
    const int wrong = checkedAllReduce(sub, subRank, subSize, i, send, recv, host, stream);
    if (subRank == 0) printf("[6] allreduce %d on %d ranks: %s\n", i, subSize, wrong ? "WRONG" : "checked");
    if (wrong) _exit(1);
  }
  CHECK(mcclCommDestroy(sub));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaFree(send));
  CHECK_CUDA(cudaFree(recv));
  free(host);
  printf("[7] rank %d: finished the loop without rank %d\n", me, victim);
  fflush(stdout);
  // No MPI_Finalize: it would wait for the dead rank (orte_allowed_exit_without_sync lets a rank leave so).
  return 0;
}
