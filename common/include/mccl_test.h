/**
 * @file mccl_test.h
 * @brief The one test harness of the repository (after Redis's testhelp.h and Pintos' make check).
 * @ingroup common
 *
 * A test is a `static void name(void)` function; the EXPECT_* macros record the first failure
 * (source location, expected and actual values) and return from it. Output, one line per test:
 * `PASS suite.name (3 ms)`, `FAIL suite.name (test_alloc.c:42: expected ..., got ...)`,
 * `SKIP suite.name (reason)`, then `N passed, N failed, N skipped`; the exit status is 1 when
 * anything failed. MCCL_TEST_FILTER (or argv[1], or `make test T=...`) selects tests by glob or
 * substring of the full name; `--list [NP]` prints the names the filter selects and runs nothing
 * (NP: the name a run on NP MPI processes gives). Random inputs come from mcclTestRand(), seeded from
 * MCCL_TEST_SEED or the clock; the seed is printed so a failure can be replayed.
 *
 * @code
 * static void allocRoundTrip(void) {
 *   void* p = NULL;
 *   EXPECT_OK(mcclMemAlloc(&p, 1 << 20));
 *   EXPECT_TRUE(p != NULL);
 *   EXPECT_OK(mcclMemFree(p));
 * }
 * MCCL_TEST_MAIN(MCCL_TEST_CASE(allocRoundTrip))
 * @endcode
 */
#ifndef MCCL_TEST_H_
#define MCCL_TEST_H_

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/** @brief One named test function. */
typedef struct {
  const char* name; /**< Name printed in the result line and matched by the filter. */
  void (*fn)(void); /**< The test body. */
} mcclTestCase;

/** @brief Hooks that let a multi-process harness (mccl_test_mpi.h) agree on results. */
typedef struct {
  /** Combine this process's status (0 pass, 1 skip, 2 fail) and message with its peers'. */
  int (*combine)(int status, char* msg, size_t msgLen);
  /** Share the seed so every process draws the same inputs; returns the agreed seed. */
  uint64_t (*shareSeed)(uint64_t seed);
  /** Non-zero if this process prints the result lines. */
  int reporter;
  /** Number of cooperating processes; above 1 the suite name gets "@npN". */
  int nprocs;
} mcclTestHooks;

/**
 * @brief Record a failure of the running test (the EXPECT macros call it). The first one is kept.
 * @param[in] file source file of the failed check.
 * @param[in] line its line.
 * @param[in] fmt printf format of the message ("expected ..., got ..."), then its arguments.
 */
void mcclTestFailAt(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/**
 * @brief Mark the running test skipped, with a reason (SKIP calls it).
 * @param[in] fmt printf format of the reason, then its arguments.
 */
void mcclTestSkipWith(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/**
 * @brief Whether the running test has failed or skipped: callers of helpers check it.
 * @return non-zero once the running test failed or skipped.
 */
int mcclTestStopped(void);
/**
 * @brief The seed of this run (MCCL_TEST_SEED, or from the clock; printed at start).
 * @return the seed.
 */
uint64_t mcclTestSeed(void);
/**
 * @brief Next pseudo-random number; each test's stream depends only on the seed and its position.
 * @return 64 pseudo-random bits (xorshift64*).
 */
uint64_t mcclTestRand(void);
/**
 * @brief Whether case k of a test's value matrix runs in this build.
 *
 * Plain builds run every case. Under a sanitizer (SANITIZE=1, TSAN=1: 3 to 15 times slower) the
 * heavy matrices (dtype x op x algorithm x count) run one case in `every`, chosen by the run's
 * seed, so each sanitized run checks a different slice and the seed replays it; the value
 * coverage is the plain build's. ThreadSanitizer, which instruments every access of every sim
 * kernel thread, runs one case in twice `every`: the cases differ in values, not in how threads
 * synchronise, which is what it checks. MCCL_TEST_FULL=1 runs every case under a sanitizer too.
 * Ranks of one mpirun test share the seed, so they choose the same cases.
 * @param k     the case's index in the matrix (any numbering that is the same on every rank).
 * @param every run one case in this many (0 or 1: every case).
 * @return non-zero when case k runs.
 */
int mcclTestSampled(uint64_t k, unsigned every);
/**
 * @brief Whether this build samples its heavy tests (a sanitizer build without MCCL_TEST_FULL=1);
 * stress loops use it to run fewer rounds (see mcclTestSampled).
 * @return non-zero when heavy tests run a sample.
 */
int mcclTestSampling(void);
/**
 * @brief Name of the running test.
 * @return the test's name.
 */
const char* mcclTestName(void);
/**
 * @brief Entries of a directory other than . and .. (e.g. /dev/shm). For /proc/self/fd the
 *        descriptor used to read it is not counted.
 * @param[in] path directory to count.
 * @return the count, or -1 if it cannot be read.
 */
int mcclTestCountDir(const char* path);
/**
 * @brief minccl's own files in /dev/shm (names starting "mccl-", lab 04's MCCL_SHM_PREFIX and the
 *        bootstrap's segments): compare before and after to find leaks. Other programs' segments
 *        (Open MPI's) are not counted, nor a file another live process holds open or mapped: a
 *        segment exists only while its creator holds it, so those are another run's on the host (two
 *        `make test` at once), which come and go during the test. A leaked file is held by no one.
 * @return the count, or -1 if /dev/shm cannot be read.
 */
int mcclTestCountShm(void);
/**
 * @brief Open file descriptors of this process: compare before and after to find fd leaks.
 * @return the count, or -1 if /proc/self/fd cannot be read.
 */
int mcclTestCountFds(void);
/**
 * @brief Lines of /proc/self/maps, all of them or those containing a string: on the sim every
 *        device mapping is a memfd named "minccl-sim...", so this counts mappings left behind.
 * @param[in] containing substring to match, or NULL for every mapping.
 * @return the count, or -1 if /proc/self/maps cannot be read.
 */
long mcclTestCountMaps(const char* containing);
/**
 * @brief Threads of this process: compare before and after to find threads left running. A thread
 *        that has begun to exit (a joined one the kernel has not reaped yet) is not counted.
 * @return the count, or -1 if /proc/self/task cannot be read.
 */
int mcclTestCountThreads(void);
/**
 * @brief Wait until mcclTestCountThreads() is @p expected, at most @p timeoutMs: for comparisons
 *        after a call that ends threads the caller cannot join (a stream's worker on the sim exits
 *        after cudaStreamDestroy returns when the stream still had work queued, as the driver's
 *        cudaStreamDestroy returns before that work is done). Returns at once when the count matches.
 * @param[in] expected the thread count to wait for.
 * @param[in] timeoutMs the longest wait, in milliseconds.
 * @return the last count (@p expected unless the wait timed out), or -1 if /proc/self/task cannot be read.
 *
 * @code
 * int th0 = mcclTestCountThreads();
 * ... create and destroy what starts threads ...
 * EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
 * @endcode
 */
int mcclTestWaitThreads(int expected, int timeoutMs);
/** @brief How long tests give threads that were told to end to be gone (mcclTestWaitThreads). */
#define MCCL_TEST_THREADS_SETTLE_MS 5000

/**
 * @brief Run the selected cases and print one result line each, then the totals.
 * @param[in] argc,argv the program's arguments; argv[1], if any, is the name filter, or `--list [NP]`.
 * @param[in] cases the test cases.
 * @param[in] nCases how many.
 * @param[in] hooks multi-process hooks, or NULL for a single process.
 * @return the exit status: 0 if nothing failed, else 1.
 */
int mcclTestMain(int argc, char** argv, const mcclTestCase* cases, int nCases, const mcclTestHooks* hooks);

#ifdef MCCL_BACKEND_NAME
/** @brief Non-zero when built for the sim backend (tests choose how to measure leaks with it). */
#define MCCL_TEST_ON_SIM (MCCL_BACKEND_NAME[0] == 's')
#endif
/** @brief Non-zero under AddressSanitizer, whose allocator maps and unmaps memory of its own. */
#ifdef __SANITIZE_ADDRESS__
#define MCCL_TEST_UNDER_ASAN 1
#else
#define MCCL_TEST_UNDER_ASAN 0
#endif
/** @brief Non-zero under ThreadSanitizer (TSAN=1), which maps shadow memory as the program touches
 *  new memory, and runs a background thread of its own (started by the harness before any test). */
#ifdef __SANITIZE_THREAD__
#define MCCL_TEST_UNDER_TSAN 1
#else
#define MCCL_TEST_UNDER_TSAN 0
#endif
/** @brief Non-zero when a sanitizer maps memory of its own, so counting every line of
 *  /proc/self/maps (mcclTestCountMaps(NULL)) cannot find leaks; count named mappings instead. */
#define MCCL_TEST_SANITIZER_MAPS (MCCL_TEST_UNDER_ASAN || MCCL_TEST_UNDER_TSAN)

/** @brief Build a case from a function: MCCL_TEST_CASE(fn). */
#define MCCL_TEST_CASE(fn) \
  { #fn, fn }
/** @brief main() of a single-process test binary. */
#define MCCL_TEST_MAIN(...)                                                                   \
  int main(int argc, char** argv) {                                                           \
    static const mcclTestCase cases_[] = {__VA_ARGS__};                                       \
    return mcclTestMain(argc, argv, cases_, (int)(sizeof(cases_) / sizeof(cases_[0])), NULL); \
  }

/** @brief Fails the test unless cond holds. */
#define EXPECT_TRUE(cond)                                       \
  do {                                                          \
    if (!(cond)) {                                              \
      mcclTestFailAt(__FILE__, __LINE__, "expected %s", #cond); \
      return;                                                   \
    }                                                           \
  } while (0)
/** @brief Fails the test if cond holds. */
#define EXPECT_FALSE(cond)                                         \
  do {                                                             \
    if (cond) {                                                    \
      mcclTestFailAt(__FILE__, __LINE__, "expected !(%s)", #cond); \
      return;                                                      \
    }                                                              \
  } while (0)
/// @cond INTERNAL
#define EXPECT_CMP_(a, op, b)                                                                        \
  do {                                                                                               \
    long long A_ = (long long)(a), B_ = (long long)(b);                                              \
    if (!(A_ op B_)) {                                                                               \
      mcclTestFailAt(__FILE__, __LINE__, "expected %s %s %s (%lld), got %lld", #a, #op, #b, B_, A_); \
      return;                                                                                        \
    }                                                                                                \
  } while (0)
/// @endcond
/** @brief Integers: EXPECT_EQ(actual, expected); the message shows both. */
#define EXPECT_EQ(a, b) EXPECT_CMP_(a, ==, b)
/** @brief Integers differ. */
#define EXPECT_NE(a, b) EXPECT_CMP_(a, !=, b)
/** @brief Integer a < b. */
#define EXPECT_LT(a, b) EXPECT_CMP_(a, <, b)
/** @brief Integer a <= b. */
#define EXPECT_LE(a, b) EXPECT_CMP_(a, <=, b)
/** @brief Integer a > b. */
#define EXPECT_GT(a, b) EXPECT_CMP_(a, >, b)
/** @brief Integer a >= b. */
#define EXPECT_GE(a, b) EXPECT_CMP_(a, >=, b)
/** @brief A minccl call returns `expected` (names both results on failure). */
#define EXPECT_RES(call, expected)                                                                \
  do {                                                                                            \
    mcclResult_t R_ = (call), E_ = (expected);                                                    \
    if (R_ != E_) {                                                                               \
      mcclTestFailAt(__FILE__, __LINE__, "expected %s to return %d (%s), got %d (%s)", #call, E_, \
                     mcclGetErrorString(E_), R_, mcclGetErrorString(R_));                         \
      return;                                                                                     \
    }                                                                                             \
  } while (0)
/** @brief A minccl call returns mcclSuccess. */
#define EXPECT_OK(call) EXPECT_RES(call, mcclSuccess)
/** @brief A CUDA driver call returns `expected` (CUresult; names both on failure). */
#define EXPECT_CU(call, expected)                                                                            \
  do {                                                                                                       \
    CUresult R_ = (call), E_ = (expected);                                                                   \
    if (R_ != E_) {                                                                                          \
      const char *rn_ = "?", *en_ = "?";                                                                     \
      cuGetErrorName(R_, &rn_);                                                                              \
      cuGetErrorName(E_, &en_);                                                                              \
      mcclTestFailAt(__FILE__, __LINE__, "expected %s to return %s, got %s (%d)", #call, en_, rn_, (int)R_); \
      return;                                                                                                \
    }                                                                                                        \
  } while (0)
/** @brief A CUDA driver call returns CUDA_SUCCESS. */
#define EXPECT_CU_OK(call) EXPECT_CU(call, CUDA_SUCCESS)
/** @brief A CUDA runtime call returns `expected` (cudaError_t). */
#define EXPECT_CUDA(call, expected)                                                                            \
  do {                                                                                                         \
    cudaError_t R_ = (call), E_ = (expected);                                                                  \
    if (R_ != E_) {                                                                                            \
      mcclTestFailAt(__FILE__, __LINE__, "expected %s to return %s, got %s (%d)", #call, cudaGetErrorName(E_), \
                     cudaGetErrorName(R_), (int)R_);                                                           \
      return;                                                                                                  \
    }                                                                                                          \
  } while (0)
/** @brief A CUDA runtime call returns cudaSuccess. */
#define EXPECT_CUDA_OK(call) EXPECT_CUDA(call, cudaSuccess)
/** @brief n bytes at a equal those at b; reports the first differing offset and bytes. */
#define EXPECT_MEM_EQ(a, b, n)                                                                                         \
  do {                                                                                                                 \
    const unsigned char *A_ = (const unsigned char*)(a), *B_ = (const unsigned char*)(b);                              \
    size_t N_ = (size_t)(n);                                                                                           \
    for (size_t I_ = 0; I_ < N_; I_++)                                                                                 \
      if (A_[I_] != B_[I_]) {                                                                                          \
        mcclTestFailAt(__FILE__, __LINE__, "expected %s[%zu] == %s[%zu] (0x%02x), got 0x%02x", #a, I_, #b, I_, B_[I_], \
                       A_[I_]);                                                                                        \
        return;                                                                                                        \
      }                                                                                                                \
  } while (0)
/** @brief Skip the running test with a reason (missing hardware is a SKIP, never a FAIL). */
#define SKIP(...)                  \
  do {                             \
    mcclTestSkipWith(__VA_ARGS__); \
    return;                        \
  } while (0)
/** @brief cudaMemcpy from host memory into device memory whose bytes have landed when it returns.
 *  On the NULL stream a copy from pageable memory into device memory, and a memset of device memory,
 *  may return before the bytes land (CUDA's API synchronization rules; the sim delays them, see
 *  MCCL_SIM_LATE_COPY_US), and a kernel or copy queued on a non-blocking stream does not wait for the
 *  NULL stream: tests set buffers up with these two before handing them to such a stream. */
static inline cudaError_t mcclTestCopyToDevice(void* dst, const void* src, size_t bytes) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  return e != cudaSuccess ? e : cudaStreamSynchronize(NULL);
}
/** @brief cudaMemset whose bytes have landed when it returns (see mcclTestCopyToDevice). */
static inline cudaError_t mcclTestMemset(void* dst, int value, size_t bytes) {
  cudaError_t e = cudaMemset(dst, value, bytes);
  return e != cudaSuccess ? e : cudaStreamSynchronize(NULL);
}
/** @brief The number of devices the backend reports (0 when it reports none or fails): how many GPUs a
 *  test's ranks can each have one of. @return the device count. */
static inline int mcclTestDeviceCount(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}
/** @brief Touch every device once (an allocation, a copy each way, a free) and make the current one current
 *  again. The first use of a device creates its context and, on the sim, its stream worker (a thread: a
 *  stack and its guard page in /proc/self/maps): a leak probe takes its baseline after this, so that what
 *  lives as long as the process is not counted against the test, whether it runs alone or after others. */
static inline void mcclTestWarmUp(void) {
  int n = 0, cur = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || cudaGetDevice(&cur) != cudaSuccess) return;
  for (int dev = 0; dev < n; dev++) {
    void* p = NULL;
    unsigned char b = 0;
    if (cudaSetDevice(dev) != cudaSuccess || cudaMalloc(&p, 4096) != cudaSuccess) continue;
    (void)mcclTestCopyToDevice(p, &b, 1);
    (void)cudaMemcpy(&b, p, 1, cudaMemcpyDeviceToHost);
    (void)cudaFree(p);
  }
  (void)cudaSetDevice(cur);
}
/** @brief The CUDA graph calls a test makes, looked up at run time: the sim does not implement them, and a call
 *  outside its subset would not link (mcclTestGraphApiLoad). */
typedef struct {
  cudaError_t (*beginCapture)(cudaStream_t, enum cudaStreamCaptureMode);         /**< cudaStreamBeginCapture */
  cudaError_t (*endCapture)(cudaStream_t, cudaGraph_t*);                         /**< cudaStreamEndCapture */
  cudaError_t (*instantiate)(cudaGraphExec_t*, cudaGraph_t, unsigned long long); /**< cudaGraphInstantiate */
  cudaError_t (*launch)(cudaGraphExec_t, cudaStream_t);                          /**< cudaGraphLaunch */
  cudaError_t (*execDestroy)(cudaGraphExec_t);                                   /**< cudaGraphExecDestroy */
  cudaError_t (*destroy)(cudaGraph_t);                                           /**< cudaGraphDestroy */
} mcclTestGraphApi;
/** @brief Look the graph calls up in the process. @param[out] g the calls. @return 1 if every one is there. */
static inline int mcclTestGraphApiLoad(mcclTestGraphApi* g) {
  *(void**)&g->beginCapture = dlsym(RTLD_DEFAULT, "cudaStreamBeginCapture");
  *(void**)&g->endCapture = dlsym(RTLD_DEFAULT, "cudaStreamEndCapture");
  *(void**)&g->instantiate = dlsym(RTLD_DEFAULT, "cudaGraphInstantiate");
  *(void**)&g->launch = dlsym(RTLD_DEFAULT, "cudaGraphLaunch");
  *(void**)&g->execDestroy = dlsym(RTLD_DEFAULT, "cudaGraphExecDestroy");
  *(void**)&g->destroy = dlsym(RTLD_DEFAULT, "cudaGraphDestroy");
  return g->beginCapture && g->endCapture && g->instantiate && g->launch && g->execDestroy && g->destroy;
}
/** @brief After calling a helper that uses EXPECT_*, return if it failed or skipped. */
#define CHECK_STOPPED()            \
  do {                             \
    if (mcclTestStopped()) return; \
  } while (0)

/** @} */

#ifdef __cplusplus
}
#endif
#endif
