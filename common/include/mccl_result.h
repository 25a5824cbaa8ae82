/**
 * @file mccl_result.h
 * @brief Result codes shared by every minccl layer (NCCL's ncclResult_t values, plus a timeout).
 * @ingroup common
 */
#ifndef MCCL_RESULT_H_
#define MCCL_RESULT_H_

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup common common: results, checks, logging, parameters, test harness
 * @brief The ground floor every lab stands on; mirrors NCCL's checks.h, debug.cc and param.h.
 * @{
 */

/** @brief Result of every minccl library call. Values 0..7 equal NCCL's ncclResult_t. */
typedef enum {
  mcclSuccess = 0,            /**< The call did what it was asked. */
  mcclUnhandledCudaError = 1, /**< A CUDA driver/runtime call failed. */
  mcclSystemError = 2,        /**< A system call failed (errno is logged). */
  mcclInternalError = 3,      /**< A minccl bug or broken invariant. */
  mcclInvalidArgument = 4,    /**< An argument was out of range or malformed; the message names it. */
  mcclInvalidUsage = 5,       /**< Calls made in an order or state the API does not allow. */
  mcclRemoteError = 6,        /**< A peer process failed, closed or sent something invalid. */
  mcclInProgress = 7,         /**< Non-blocking operation not finished yet; call again. */
  mcclTimeout = 8,            /**< A wait on a peer exceeded its timeout (no NCCL twin). */
  mcclNotImplemented = 9,     /**< An exercise stub of a learner tree (`make exercises`); no NCCL twin. */
  mcclNumResults = 10
} mcclResult_t;

/**
 * @brief Human-readable name of a result code (NCCL's ncclGetErrorString). The strings of
 * mcclInvalidArgument and mcclInvalidUsage suggest "run with MCCL_DEBUG=WARN" only when the level in
 * force (mcclDebugLevel) is below WARN, and those of mcclUnhandledCudaError and mcclSystemError
 * suggest MCCL_DEBUG=INFO only below INFO; otherwise they point at the lines already logged.
 * @param[in] res any value; unknown values give "unknown result code".
 * @return a static string, never NULL.
 */
const char* mcclGetErrorString(mcclResult_t res);

/**
 * @brief What an exercise stub returns (see docs/exercises.md): prints, whatever MCCL_DEBUG says,
 * `MCCL EXERCISE <name> not implemented` on stderr, so that every test reaching a stub fails naming it.
 * @param[in] name the exercise, e.g. "01.map".
 * @return mcclNotImplemented.
 */
mcclResult_t mcclExerciseStub(const char* name);

/**
 * @brief How many times this process has reached an exercise stub (mcclExerciseStub), and the last one's name:
 * the test harness reports a test that reached a stub and then skipped as a failure naming the stub, since a
 * stub is work to do, never missing hardware.
 * @param[out] last the name of the last stub reached, or NULL when none was; may be NULL.
 * @return the number of stubs reached so far.
 */
unsigned mcclExerciseStubsReached(const char** last);

/**
 * @brief In a probe tree (`mk/exercises.py gen --probe`, CI's checker): is exercise `name` one that
 * MCCL_EXERCISE_PROBE names (a comma-separated list of ids, or `all`), so that its region runs as a stub?
 * @param[in] name the exercise, e.g. "01.map".
 * @return 1 when MCCL_EXERCISE_PROBE lists name or is "all", else 0.
 */
int mcclExerciseProbe(const char* name);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
