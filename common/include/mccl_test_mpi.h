/**
 * @file mccl_test_mpi.h
 * @brief The harness for tests launched with mpirun: every rank runs each test, rank 0 reports.
 * @ingroup common
 *
 * A test fails if it fails on any rank (the message names the lowest failing rank) and is
 * skipped if any rank skipped it. The seed is rank 0's, broadcast. Use MCCL_TEST_MAIN_MPI in
 * place of MCCL_TEST_MAIN; mcclTestMpiRank()/mcclTestMpiSize() give the rank and count.
 * Header-only, so only the binaries that use MPI link it.
 */
#ifndef MCCL_TEST_MPI_H_
#define MCCL_TEST_MPI_H_

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "mccl_debug.h"
#include "mccl_test.h"

/** @addtogroup common
 * @{ */

static int mcclTestMpiRank_ = 0, mcclTestMpiSize_ = 1, mcclTestMpiThreads_ = MPI_THREAD_SINGLE;
static MPI_Comm mcclTestMpiComm_;  // where results are combined: MPI_COMM_WORLD until mcclTestMpiLeave
static int mcclTestMpiLeft_ = 0;   // this rank left the combining communicator (mcclTestMpiLeave)
/** @brief This process's rank in MPI_COMM_WORLD. */
static inline int mcclTestMpiRank(void) { return mcclTestMpiRank_; }
/** @brief Number of ranks in MPI_COMM_WORLD. */
static inline int mcclTestMpiSize(void) { return mcclTestMpiSize_; }
/** @brief This rank's device: rank % the devices it sees (ranks share them round robin), -1 without one. */
static inline int mcclTestMpiDevice(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return -1;
  return mcclTestMpiRank_ % n;
}
/** @brief The communicator the harness combines results over: MPI_COMM_WORLD, or after mcclTestMpiLeave the
 *  ranks that stayed (MPI_COMM_NULL on a rank that left). */
static inline MPI_Comm mcclTestMpiComm(void) {
  return mcclTestMpiComm_ ? mcclTestMpiComm_ : MPI_COMM_WORLD;
}

static inline int mcclTestMpiCombine_(int status, char* msg, size_t msgLen) {
  if (mcclTestMpiLeft_) return status;  // a rank that left reports to nobody
  MPI_Comm c = mcclTestMpiComm();
  int me = 0;
  MPI_Comm_rank(c, &me);
  int worst = status;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, c);
  if (worst == 0) return 0;
  int who = status == worst ? me : INT_MAX;  // the lowest rank (of c) with the worst status tells
  MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, c);
  char buf[1024];
  if (me == who) snprintf(buf, sizeof(buf), "rank %d of %d: %s", mcclTestMpiRank_, mcclTestMpiSize_, msg);
  MPI_Bcast(buf, sizeof(buf), MPI_CHAR, who, c);
  snprintf(msg, msgLen, "%s", buf);
  return worst;
}

static inline uint64_t mcclTestMpiShareSeed_(uint64_t seed) {
  unsigned long long s = seed;
  MPI_Bcast(&s, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  return s;
}

/** @brief Whether the running test has failed or been skipped on any rank: collective, every rank calls
 *  it at the same point. A test that runs rounds of collective work checks it before each round (in its
 *  loop conditions), so that a rank whose check failed does not leave the others waiting in a kernel for
 *  a round it never joins. */
static inline int mcclTestMpiAnyStopped(void) {
  int stopped = mcclTestStopped();
  if (mcclTestMpiLeft_) return stopped;
  MPI_Allreduce(MPI_IN_PLACE, &stopped, 1, MPI_INT, MPI_MAX, mcclTestMpiComm());
  return stopped;
}

/** @brief Collective over the ranks still combining results: the ranks that pass leaving=1 stop taking
 *  part in the harness's result combining (and mcclTestMpiAnyStopped) from here on, and the others
 *  combine without them. For a test in which a rank dies on purpose (a peer killed mid-collective, run
 *  under mpirun --enable-recovery): its results are not waited for. World rank 0 must stay. */
static inline void mcclTestMpiLeave(int leaving) {
  if (mcclTestMpiLeft_) return;
  MPI_Comm next = MPI_COMM_NULL;
  MPI_Comm_split(mcclTestMpiComm(), leaving ? MPI_UNDEFINED : 0, mcclTestMpiRank_, &next);
  if (leaving) {
    mcclTestMpiLeft_ = 1;
    mcclTestMpiComm_ = MPI_COMM_NULL;
  } else {
    mcclTestMpiComm_ = next;
  }
}

/** @brief The thread level MPI provides to this process (MPI_Init_thread's `provided`). */
static inline int mcclTestMpiThreadLevel(void) {
  return mcclTestMpiThreads_;
}

/** @brief Why this build does not ask for MPI_THREAD_MULTIPLE (NULL when it does). Under
 *  ThreadSanitizer, Open MPI 4.1 at MPI_THREAD_MULTIPLE completes one thread's requests on any thread
 *  that calls into MPI and orders that with atomics in its uninstrumented code, so TSan reports races
 *  between Open MPI calls (opal_convertor_unpack, opal_free_list_grow_st, mca_pml_ob1_*,
 *  ompi_request_default_wait*) and lock-order inversions in its TCP BTL, different ones from run to
 *  run; ignoring its intercepted calls (called_from_lib) needs an entry per MCA component and breaks
 *  TSan's view of its mutexes. */
#define MCCL_TEST_MPI_NO_THREAD_MULTIPLE                                                                    \
  (MCCL_TEST_UNDER_TSAN ? "a ThreadSanitizer build: Open MPI 4.1's MPI_THREAD_MULTIPLE synchronises in "    \
                          "uninstrumented code, so TSan reports races inside Open MPI (SANITIZE=1 and the " \
                          "plain build run this test)"                                                      \
                        : NULL)

/** @brief Skip the running test unless MPI runs at MPI_THREAD_MULTIPLE (its library calls MPI from
 *  threads of its own: lab 08's net plugin, from the proxy); the reason names why it does not. */
#define MCCL_TEST_MPI_REQUIRE_THREAD_MULTIPLE()                                                                 \
  do {                                                                                                          \
    if (mcclTestMpiThreads_ < MPI_THREAD_MULTIPLE)                                                              \
      SKIP("MPI runs at thread level %d, not MPI_THREAD_MULTIPLE: %s", mcclTestMpiThreads_,                     \
           MCCL_TEST_MPI_NO_THREAD_MULTIPLE ? MCCL_TEST_MPI_NO_THREAD_MULTIPLE : "the MPI library refused it"); \
  } while (0)

/** @brief main() of a test binary run under mpirun. */
#define MCCL_TEST_MAIN_MPI(...) MCCL_TEST_MAIN_MPI_THREADS(MPI_THREAD_SINGLE, __VA_ARGS__)

/** @brief The body of the MCCL_TEST_MAIN_MPI* mains: MPI up at `level` (see MCCL_TEST_MAIN_MPI_THREADS), the
 *  cases run, then MPI_Finalize, or with finalize=0 an exit without it (MCCL_TEST_MAIN_MPI_NO_FINALIZE). */
static inline int mcclTestMpiMain_(int argc, char** argv, const mcclTestCase* cases, int nCases, int level,
                                   int finalize) {
  if (argc > 1 && strcmp(argv[1], "--list") == 0) /* names only: no MPI needed */
    return mcclTestMain(argc, argv, cases, nCases, NULL);
  if (level == MPI_THREAD_MULTIPLE && MCCL_TEST_MPI_NO_THREAD_MULTIPLE != NULL) level = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, level, &mcclTestMpiThreads_);
  MPI_Comm_rank(MPI_COMM_WORLD, &mcclTestMpiRank_);
  MPI_Comm_size(MPI_COMM_WORLD, &mcclTestMpiSize_);
  mcclDebugSetRank(mcclTestMpiRank_);
  mcclTestHooks hooks = {mcclTestMpiCombine_, mcclTestMpiShareSeed_, mcclTestMpiRank_ == 0, mcclTestMpiSize_};
  int rc = mcclTestMain(argc, argv, cases, nCases, &hooks);
  if (!finalize) {
    fflush(NULL);
    _exit(rc);
  }
  MPI_Finalize();
  return rc;
}

/** @brief main() of a test binary run under mpirun whose library calls MPI from other threads too
 *  (lab 08's net plugin, from the proxy thread): MPI_Init_thread asks for `level`, except
 *  MPI_THREAD_MULTIPLE in a build that cannot use it (MCCL_TEST_MPI_NO_THREAD_MULTIPLE), which asks for
 *  MPI_THREAD_SINGLE; tests that need it use MCCL_TEST_MPI_REQUIRE_THREAD_MULTIPLE(). */
#define MCCL_TEST_MAIN_MPI_THREADS(level, ...)                                                        \
  int main(int argc, char** argv) {                                                                   \
    static const mcclTestCase cases_[] = {__VA_ARGS__};                                               \
    return mcclTestMpiMain_(argc, argv, cases_, (int)(sizeof(cases_) / sizeof(cases_[0])), (level), 1); \
  }

/** @brief MCCL_TEST_MAIN_MPI_THREADS for a test in which a rank dies on purpose (mcclTestMpiLeave), run
 *  under `mpirun --enable-recovery --mca orte_allowed_exit_without_sync 1`: the ranks exit after
 *  reporting, without MPI_Finalize, whose closing fence with every process of the job (the dead one
 *  included) Open MPI 4.1 may never complete. */
#define MCCL_TEST_MAIN_MPI_NO_FINALIZE(level, ...)                                                    \
  int main(int argc, char** argv) {                                                                   \
    static const mcclTestCase cases_[] = {__VA_ARGS__};                                               \
    return mcclTestMpiMain_(argc, argv, cases_, (int)(sizeof(cases_) / sizeof(cases_[0])), (level), 0); \
  }

/** @} */
#endif
