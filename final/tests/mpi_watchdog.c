// final/ under mpirun (2 ranks): the watchdog (MCCL_WATCHDOG_TIMEOUT, lab 07's src/watchdog.c) on the three
// mismatches that hang a job without a word: an AllReduce whose count differs between the ranks, an
// AllReduce on one rank against an AllGather on the other, and a collective one rank never calls. In each,
// after one correct AllReduce (op #1), every rank's mcclCommGetAsyncError turns to the watchdog's error
// within the timeout + 1 s (mcclInvalidUsage for calls that differ, mcclRemoteError for the call not made),
// every rank's line names the op and what differs, and mcclCommAbort then ends the stuck kernels. And no
// report where there is nothing wrong: ranks that drift apart by less than the timeout, and idle time with
// nothing in flight, leave the async error at mcclSuccess. The call never made again over SHM, and with the
// watchdog off (MCCL_WATCHDOG_TIMEOUT=0: no report, the abort still ends the wait).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fmpi_test_util.h"
#include "mccl_param.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "mccl_utils.h"

// Short enough for a test, long enough that correct collectives complete well within it. ThreadSanitizer runs the
// sim's kernels 5 to 15 times slower, on threads that contend for the same cores: there one 128 KiB broadcast
// has taken over a second, so its builds wait three.
#define TIMEOUT_MS (MCCL_TEST_UNDER_TSAN ? 3000 : 1000)

static void watchdogOn(int ms) {
  char v[32];
  snprintf(v, sizeof(v), "%d", ms);
  setenv("MCCL_WATCHDOG_TIMEOUT", v, 1);
  mcclParamResetAll();
}
static void watchdogDefault(void) {
  unsetenv("MCCL_WATCHDOG_TIMEOUT");
  mcclParamResetAll();
}

enum mismatch { COUNT_DIFFERS, FUNCTION_DIFFERS, NEVER_CALLED };

// One correct AllReduce, then the mismatch as op #2; wait for the async error, check it and this rank's
// line, then abort. shm: the ranks connected through lab 04's SHM transport (MCCL_P2P_DISABLE=1), whose
// kernels wait on host memory. off: MCCL_WATCHDOG_TIMEOUT=0, so no report may come in three timeouts; the abort
// still ends the stuck kernels.
static void mismatchOn(enum mismatch kind, mcclResult_t want, const char* const* phrases, int nPhrases, int shm,
                       int off) {
  watchdogOn(off ? 0 : TIMEOUT_MS);
  if (shm) setenv("MCCL_P2P_DISABLE", "1", 1);
  struct fmpiWorld w;
  fmpiSetUp(&w, 1 << 20);
  unsetenv("MCCL_P2P_DISABLE");
  watchdogDefault();
  CHECK_STOPPED();
  if (w.nranks != 2) SKIP("the cases are written for 2 ranks");
  EXPECT_OK(mcclAllReduce(w.send, w.recv, 256, mcclFloat32, mcclSum, w.comm, w.stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  MPI_Barrier(MPI_COMM_WORLD);
  const int64_t t0 = mcclClockMs();
  if (kind == COUNT_DIFFERS)
    EXPECT_OK(mcclAllReduce(w.send, w.recv, w.rank == 0 ? 1024 : 2048, mcclFloat32, mcclSum, w.comm, w.stream));
  else if (kind == FUNCTION_DIFFERS && w.rank == 1)
    EXPECT_OK(mcclAllGather(w.send, w.recv, 512, mcclFloat32, w.comm, w.stream));
  else if (w.rank == 0)
    EXPECT_OK(mcclAllReduce(w.send, w.recv, 1024, mcclFloat32, mcclSum, w.comm, w.stream));
  mcclResult_t got = mcclSuccess;
  while (got == mcclSuccess && mcclClockMs() - t0 < (off ? 3 * TIMEOUT_MS : TIMEOUT_MS + 10000)) {
    EXPECT_OK(mcclCommGetAsyncError(w.comm, &got));
    if (got == mcclSuccess) mcclSleepMs(5);
  }
  const int64_t detected = mcclClockMs() - t0;
  if (off) {
    EXPECT_EQ((int)got, (int)mcclSuccess);
    if (w.rank == 0) EXPECT_CUDA(cudaStreamQuery(w.stream), cudaErrorNotReady);  // still stuck: nothing ended it
    if (w.rank == 0)
      printf("  MCCL_WATCHDOG_TIMEOUT=0: no report in %lld ms with op #2 stuck\n", (long long)detected);
    EXPECT_OK(mcclCommAbort(w.comm));
    w.comm = NULL;
    EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
    fmpiTearDown(&w);
    return;
  }
  char line[1024];
  snprintf(line, sizeof(line), "%s", mcclGetLastError(w.comm));
  EXPECT_EQ((int)got, (int)want);
  EXPECT_LE(detected, TIMEOUT_MS + 1000);
  for (int i = 0; i < nPhrases; i++)
    if (strstr(line, phrases[i]) == NULL)
      mcclTestFailAt(__FILE__, __LINE__, "rank %d's line lacks \"%s\": %s", w.rank, phrases[i], line);
  // Every rank's line and time, printed by rank 0 in rank order.
  char all[2][1024];
  int64_t times[2];
  MPI_Gather(line, sizeof(line), MPI_CHAR, all, sizeof(line), MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Gather(&detected, 1, MPI_INT64_T, times, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  if (w.rank == 0)
    for (int r = 0; r < 2; r++)
      printf("  rank %d: %s after %lld ms (timeout %d ms): %s\n", r, mcclGetErrorString(want), (long long)times[r],
             TIMEOUT_MS, all[r]);
  fflush(stdout);
  const int64_t a0 = mcclClockMs();
  EXPECT_OK(mcclCommAbort(w.comm));
  w.comm = NULL;
  EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
  if (w.rank == 0) printf("  rank 0: abort and the stream's end took %lld ms\n", (long long)(mcclClockMs() - a0));
  fmpiTearDown(&w);
}

static void countDiffers(void) {
  const char* phrases[] = {"op #2", "rank 0 AllReduce count 1024 float32 sum",
                           "rank 1 AllReduce count 2048 float32 sum", "(count differs)"};
  mismatchOn(COUNT_DIFFERS, mcclInvalidUsage, phrases, 4, 0, 0);
}
// And with the watchdog off, the call rank 1 never makes: nothing is reported, and only the abort ends rank 0's
// wait.
static void watchdogOff(void) {
  mismatchOn(NEVER_CALLED, mcclSuccess, NULL, 0, 0, 1);
}

static void functionDiffers(void) {
  const char* phrases[] = {"rank 1 is in AllGather #2 while rank 0 is in AllReduce #2", "(function differs)"};
  mismatchOn(FUNCTION_DIFFERS, mcclInvalidUsage, phrases, 2, 0, 0);
}

static const char* const neverPhrases[] = {"op #2 AllReduce count 1024 float32 sum", "rank 1 has not called op #2",
                                           "its last is #1 AllReduce count 256 float32 sum"};
static void neverCalled(void) {
  mismatchOn(NEVER_CALLED, mcclRemoteError, neverPhrases, 3, 0, 0);
}
// The same where rank 0's kernel waits on SHM: the watchdog is the one timeout that ends such a wait too.
static void neverCalledOverShm(void) {
  mismatchOn(NEVER_CALLED, mcclRemoteError, neverPhrases, 3, 1, 0);
}

// Correct work for several timeouts: rank 1 starts each call up to half a timeout after rank 0 (rank 0's
// call waits that long, and its ops pile up on its stream), sizes change, and between bursts nothing is in
// flight for twice the timeout. No rank may report.
static void noFalseReport(void) {
  watchdogOn(TIMEOUT_MS);
  struct fmpiWorld w;
  fmpiSetUp(&w, 1 << 20);
  watchdogDefault();
  CHECK_STOPPED();
  const int64_t t0 = mcclClockMs();
  int calls = 0;
  for (int burst = 0; burst < 2; burst++) {
    for (int i = 0; i < 8; i++, calls++) {
      if (w.rank == 1) mcclSleepMs(TIMEOUT_MS / 2 * (i % 2));
      const size_t count = (size_t)1 << (4 + (i * 5) % 14);
      EXPECT_OK(mcclAllReduce(w.send, w.recv, count, mcclFloat32, mcclSum, w.comm, w.stream));
      EXPECT_OK(mcclBroadcast(w.send, w.recv, count, mcclFloat32, 0, w.comm, w.stream));
    }
    EXPECT_CUDA_OK(cudaStreamSynchronize(w.stream));
    mcclSleepMs(2 * TIMEOUT_MS);
  }
  mcclResult_t got = mcclSuccess;
  EXPECT_OK(mcclCommGetAsyncError(w.comm, &got));
  EXPECT_EQ((int)got, (int)mcclSuccess);
  if (w.rank == 0)
    printf("  %d calls over %lld ms with MCCL_WATCHDOG_TIMEOUT=%d: no report\n", 2 * calls,
           (long long)(mcclClockMs() - t0), TIMEOUT_MS);
  fmpiTearDown(&w);
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(countDiffers), MCCL_TEST_CASE(functionDiffers), MCCL_TEST_CASE(neverCalled),
                   MCCL_TEST_CASE(neverCalledOverShm), MCCL_TEST_CASE(watchdogOff), MCCL_TEST_CASE(noFalseReport))
