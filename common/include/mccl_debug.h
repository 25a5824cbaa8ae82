/**
 * @file mccl_debug.h
 * @brief Logging: WARN / INFO(subsys, ...) / TRACE(subsys, ...), as NCCL's debug.h.
 * @ingroup common
 *
 * Chosen at run time with MCCL_DEBUG=WARN|INFO|TRACE (default: none; WARN is still printed)
 * and MCCL_DEBUG_SUBSYS=INIT,ALLOC,... (a leading ^ excludes). Lines look like
 * `host:pid:tid [rank] MCCL INFO ...`; WARN lines add the source location (alloc.c:144).
 */
#ifndef MCCL_DEBUG_H_
#define MCCL_DEBUG_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/** @brief Log levels, lowest first. */
typedef enum {
  MCCL_LOG_NONE = 0,
  MCCL_LOG_VERSION = 1,
  MCCL_LOG_WARN = 2,
  MCCL_LOG_INFO = 3,
  MCCL_LOG_TRACE = 4
} mcclDebugLogLevel;

/** @brief Subsystem bits for INFO/TRACE, selected with MCCL_DEBUG_SUBSYS. */
typedef enum {
  MCCL_INIT = 0x1,
  MCCL_COLL = 0x2,
  MCCL_P2P = 0x4,
  MCCL_SHM = 0x8,
  MCCL_NET = 0x10,
  MCCL_BOOTSTRAP = 0x20,
  MCCL_ENV = 0x40,
  MCCL_ALLOC = 0x80,
  MCCL_CALL = 0x100,
  MCCL_PROXY = 0x200,
  MCCL_IPC = 0x400,
  MCCL_TEST = 0x800,
  MCCL_ALL = ~0
} mcclDebugLogSubSys;

/**
 * @brief Write one log line if its level and subsystem are enabled. Use WARN/INFO/TRACE instead.
 * @param[in] level line's level.
 * @param[in] flags subsystem bits (mcclDebugLogSubSys).
 * @param[in] file source file (__FILE__).
 * @param[in] line source line (__LINE__).
 * @param[in] fmt printf format, then its arguments.
 */
void mcclDebugLog(mcclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/**
 * @brief Current log level (reads MCCL_DEBUG on first use).
 * @return the level in force.
 */
mcclDebugLogLevel mcclDebugLevel(void);
/**
 * @brief The text of the last WARN of any thread (its message, without the host:pid prefix), kept
 * whatever MCCL_DEBUG says (NCCL's ncclLastError, which ncclGetLastError returns).
 * @return a static buffer, "" before the first WARN; the next WARN overwrites it.
 */
const char* mcclDebugLastError(void);
/**
 * @brief Tag this thread's log lines with a rank, printed as "[rank]".
 * @param[in] rank the rank, or -1 to clear the tag.
 */
void mcclDebugSetRank(int rank);

/** @brief An error, printed unless MCCL_DEBUG=NONE, always with its source location (alloc.c:144). */
#define WARN(...) mcclDebugLog(MCCL_LOG_WARN, MCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
/** @brief Progress information for subsystem FLAGS, shown with MCCL_DEBUG=INFO. */
#define INFO(FLAGS, ...)                                                                     \
  do {                                                                                       \
    if (mcclDebugLevel() >= MCCL_LOG_INFO) mcclDebugLog(MCCL_LOG_INFO, (FLAGS), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
/** @brief Fine-grained tracing for subsystem FLAGS, shown with MCCL_DEBUG=TRACE. */
#define TRACE(FLAGS, ...)                                                                      \
  do {                                                                                         \
    if (mcclDebugLevel() >= MCCL_LOG_TRACE) mcclDebugLog(MCCL_LOG_TRACE, (FLAGS), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/** @} */

#ifdef __cplusplus
}
#endif
#endif
