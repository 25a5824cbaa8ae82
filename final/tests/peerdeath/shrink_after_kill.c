// final/ recovering from a rank's death: one of the ranks (the last) SIGKILLs itself right after the launch
// of an allreduce in the middle of a loop. Each survivor, polling as nccl-tests and PyTorch do
// (cudaStreamQuery, then mcclCommGetAsyncError), sees mcclRemoteError; it revokes the communicator,
// shrinks it to the survivors (mcclCommShrink with MCCL_SHRINK_ABORT: no message crosses the parent, the
// new id is derived from its own) and finishes the loop's allreduces on the new communicator, each checked
// against the survivors' reference sum; then it aborts the parent and destroys the new one. Run by
// final/tests/test_shrink_after_kill.sh under `mpirun --enable-recovery` (a plain mpirun ends the job with
// the victim), so it is no mpi_* test.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../../../labs/07_allreduce/tests/ar_test_util.h"
#include "../fmpi_test_util.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "mccl_utils.h"

// float32: 4 MiB on a GPU, a ring of many steps, so the victim's share cannot have left yet; 256 KiB on the sim,
// whose kernels are host threads that a dead rank's step keeps waiting as well, and whose every byte costs CPU
// time under the sanitizers.
#define COUNT (MCCL_TEST_ON_SIM ? 1 << 16 : 1 << 20)
#define LOOP 8
#define KILL_AT 3
#define DEATH_LIMIT_S 20.0

// One checked allreduce on comm (nranks ranks, this one `rank`); a wrong result fails the test.
static void checkedAllReduce(struct fmpiWorld* w, mcclComm_t comm, int rank, int nranks, uint64_t seed) {
  char why[160];
  arFill(w->host, mcclFloat32, mcclSum, COUNT, rank, seed);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(w->send, w->host, (size_t)COUNT * sizeof(float)));
  EXPECT_OK(mcclAllReduce(w->send, w->recv, COUNT, mcclFloat32, mcclSum, comm, w->stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(w->stream));
  EXPECT_CUDA_OK(cudaMemcpy(w->host, w->recv, (size_t)COUNT * sizeof(float), cudaMemcpyDeviceToHost));
  if (arCheck(w->host, mcclFloat32, mcclSum, COUNT, nranks, seed, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "allreduce on %d ranks: rank %d: %s", nranks, rank, why);
}

static void shrinkAfterKill(void) {
  if (mcclTestMpiSize() < 3) SKIP("needs 3 ranks or more: the victim and at least 2 survivors");
  const int victim = mcclTestMpiSize() - 1;
  const uint64_t seed = mcclTestSeed();
  struct fmpiWorld w;
  fmpiSetUp(&w, (size_t)COUNT * sizeof(float));
  CHECK_STOPPED();
  for (int i = 0; i < KILL_AT && !mcclTestStopped(); i++) checkedAllReduce(&w, w.comm, w.rank, w.nranks, seed + i);
  if (mcclTestMpiAnyStopped()) return;
  // From here the victim's results are not waited for, and no MPI call crosses the survivors.
  mcclTestMpiLeave(w.rank == victim);
  arFill(w.host, mcclFloat32, mcclSum, COUNT, w.rank, seed);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(w.send, w.host, (size_t)COUNT * sizeof(float)));
  EXPECT_OK(mcclAllReduce(w.send, w.recv, COUNT, mcclFloat32, mcclSum, w.comm, w.stream));
  if (w.rank == victim) kill(getpid(), SIGKILL);  // its kernel and proxy die with it, mid-ring
  const double t0 = mcclClockSec();
  mcclResult_t ae = mcclSuccess;
  cudaError_t q = cudaErrorNotReady;
  // The in-flight allreduce may still complete: on a GPU the victim's kernel can finish its part of the ring
  // before the dying process's context is torn down. The death must be seen either way.
  while (mcclClockSec() - t0 < DEATH_LIMIT_S) {
    if (q == cudaErrorNotReady) q = cudaStreamQuery(w.stream);
    EXPECT_OK(mcclCommGetAsyncError(w.comm, &ae));
    if (ae != mcclSuccess) break;
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  const double seen = mcclClockSec() - t0;
  EXPECT_EQ(ae, mcclRemoteError);
  // Named as a local peer's death: the victim's pid is one of this host's.
  char why[512];
  snprintf(why, sizeof(why), "%s", mcclGetLastError(w.comm));
  if (strstr(why, "has exited") == NULL || strstr(why, "another machine") != NULL)
    mcclTestFailAt(__FILE__, __LINE__, "rank %d: the death's message: %s", w.rank, why);
  CHECK_STOPPED();
  // Recover: stop the parent, make the survivors' communicator, finish the loop on it.
  const double t1 = mcclClockSec();
  EXPECT_OK(mcclCommRevoke(w.comm));
  mcclComm_t sub = NULL;
  EXPECT_OK(mcclCommShrink(w.comm, &victim, 1, &sub, MCCL_SHRINK_ABORT));
  const double shrunk = mcclClockSec() - t1;
  int subRank = -1, subSize = -1;
  if (sub) {
    EXPECT_OK(mcclCommUserRank(sub, &subRank));
    EXPECT_OK(mcclCommCount(sub, &subSize));
  }
  EXPECT_EQ(subRank, w.rank);  // the victim was last: the survivors keep their numbers
  EXPECT_EQ(subSize, w.nranks - 1);
  EXPECT_OK(mcclCommAbort(w.comm));  // ends the kernel that waited for the victim
  w.comm = NULL;
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  int done = 0;
  for (int i = KILL_AT; i < LOOP && sub && !mcclTestStopped(); i++, done++)
    checkedAllReduce(&w, sub, subRank, subSize, seed + 100 + (uint64_t)i);
  if (sub) EXPECT_OK(mcclCommDestroy(sub));
  fmpiTearDown(&w);
  printf("# rank %d: the death seen after %.3f s (the allreduce in flight %s); revoke + shrink took %.3f s; %d "
         "allreduces then on %d ranks\n",
         mcclTestMpiRank(), seen, q == cudaErrorNotReady ? "still waiting" : "had completed", shrunk, done, subSize);
  EXPECT_EQ(done, LOOP - KILL_AT);
}

MCCL_TEST_MAIN_MPI_NO_FINALIZE(MPI_THREAD_SINGLE, MCCL_TEST_CASE(shrinkAfterKill))
