/**
 * @file mccl_utils.h
 * @brief The small helpers every layer shares (NCCL's `src/include/utils.h`): the monotonic clock,
 *        a sleep, and the abort-flag check that every bounded wait makes.
 * @ingroup common
 *
 * The network plugin, a shared object that links no minccl archive, links the one object that
 * holds them (common/src/utils.c).
 *
 * @code
 * uint64_t deadline = mcclClockMs() + timeoutMs;
 * while (!ready()) {
 *   if (mcclIsAborted(abortFlag)) return mcclInternalError;
 *   if (mcclClockMs() >= deadline) return mcclTimeout;
 *   mcclSleepMs(1);
 * }
 * @endcode
 */
#ifndef MCCL_UTILS_H_
#define MCCL_UTILS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/**
 * @brief CLOCK_MONOTONIC in nanoseconds (NCCL's clockNano): one clock for every process of the
 *        machine, never set back, read through the vDSO without a system call.
 * @return nanoseconds since an unspecified start (the machine's boot).
 */
uint64_t mcclClockNano(void);

/**
 * @brief mcclClockNano() in whole microseconds: the latency a test or a benchmark measures.
 * @return microseconds since the same start as mcclClockNano().
 */
uint64_t mcclClockUs(void);

/**
 * @brief mcclClockNano() in whole milliseconds: deadlines and timeouts, which parameters give in ms.
 * @return milliseconds since the same start as mcclClockNano().
 */
uint64_t mcclClockMs(void);

/**
 * @brief mcclClockNano() in seconds, for measured durations (tests and benchmarks subtract two).
 * @return seconds since the same start as mcclClockNano().
 */
double mcclClockSec(void);

/**
 * @brief Sleeps at least @p ms milliseconds (nanosleep, resumed after a signal).
 * @param[in] ms milliseconds; 0 or less returns at once.
 */
void mcclSleepMs(int ms);

/**
 * @brief Whether an abort was asked for: @p abortFlag is set (acquire load, so what the aborting
 *        thread wrote before is visible). Every bounded wait checks it, as NCCL's waits check
 *        `comm->abortFlag`.
 * @param[in] abortFlag the caller's abort flag; NULL means "cannot be aborted".
 * @return 1 if the flag is set, else 0.
 */
static inline int mcclIsAborted(const volatile uint32_t* abortFlag) {
  return abortFlag != NULL && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE) != 0;
}

/** @} */

#ifdef __cplusplus
}
#endif

#endif  // MCCL_UTILS_H_
