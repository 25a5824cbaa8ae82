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
#include <mpi.h>
#include "mccl_debug.h"
#include "mccl_test.h"

/** @addtogroup common
 * @{ */

static int mcclTestMpiRank_ = 0, mcclTestMpiSize_ = 1;
/** @brief This process's rank in MPI_COMM_WORLD. */
static inline int mcclTestMpiRank(void) { return mcclTestMpiRank_; }
/** @brief Number of ranks in MPI_COMM_WORLD. */
static inline int mcclTestMpiSize(void) { return mcclTestMpiSize_; }

static inline int mcclTestMpiCombine_(int status, char* msg, size_t msgLen) {
  int worst = status;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst == 0) return 0;
  int who = status == worst ? mcclTestMpiRank_ : INT_MAX;
  MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  char buf[1024];
  if (mcclTestMpiRank_ == who) snprintf(buf, sizeof(buf), "rank %d of %d: %s", who, mcclTestMpiSize_, msg);
  MPI_Bcast(buf, sizeof(buf), MPI_CHAR, who, MPI_COMM_WORLD);
  snprintf(msg, msgLen, "%s", buf);
  return worst;
}

static inline uint64_t mcclTestMpiShareSeed_(uint64_t seed) {
  unsigned long long s = seed;
  MPI_Bcast(&s, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  return s;
}

/** @brief main() of a test binary run under mpirun. */
#define MCCL_TEST_MAIN_MPI(...) MCCL_TEST_MAIN_MPI_THREADS(MPI_THREAD_SINGLE, __VA_ARGS__)

/** @brief main() of a test binary run under mpirun whose library calls MPI from other threads too
 *  (lab 08's net plugin, from the proxy thread): MPI_Init_thread asks for `level`. */
#define MCCL_TEST_MAIN_MPI_THREADS(level, ...)                                                                    \
  int main(int argc, char** argv) {                                                                               \
    static const mcclTestCase cases_[] = {__VA_ARGS__};                                                           \
    if (argc > 1 && strcmp(argv[1], "--list") == 0) /* names only: no MPI needed */                               \
      return mcclTestMain(argc, argv, cases_, (int)(sizeof(cases_) / sizeof(cases_[0])), NULL);                   \
    int provided_ = 0;                                                                                            \
    MPI_Init_thread(&argc, &argv, (level), &provided_);                                                           \
    MPI_Comm_rank(MPI_COMM_WORLD, &mcclTestMpiRank_);                                                             \
    MPI_Comm_size(MPI_COMM_WORLD, &mcclTestMpiSize_);                                                             \
    mcclDebugSetRank(mcclTestMpiRank_);                                                                           \
    mcclTestHooks hooks_ = {mcclTestMpiCombine_, mcclTestMpiShareSeed_, mcclTestMpiRank_ == 0, mcclTestMpiSize_}; \
    int rc_ = mcclTestMain(argc, argv, cases_, (int)(sizeof(cases_) / sizeof(cases_[0])), &hooks_);               \
    MPI_Finalize();                                                                                               \
    return rc_;                                                                                                   \
  }

/** @} */
#endif
