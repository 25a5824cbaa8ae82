/**
 * @file mccl_checks.h
 * @brief Call-checking macros, as NCCL's src/include/checks.h.
 * @ingroup common
 *
 * Each macro evaluates a call once. On failure the error is logged once, where it is first
 * seen (WARN with the call text, the source location and the CUDA/errno string), and the enclosing
 * function returns a mcclResult_t. MCCLCHECK only propagates: it adds an INFO traceback line,
 * never a second WARN. The ...GOTO(call, res, label) forms store the result in `res` and jump
 * to a clean-up label instead of returning.
 */
#ifndef MCCL_CHECKS_H_
#define MCCL_CHECKS_H_

#include <errno.h>
#include <string.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include "mccl_debug.h"
#include "mccl_result.h"

/** @addtogroup common
 * @{ */

/**
 * @brief The CUresult's name, number and description for logs: "CUDA_ERROR_X (n): text".
 * @param[in] err any CUresult.
 * @return a thread-local string, valid until the next call on the same thread.
 */
const char* mcclCuErrorString(CUresult err);

/** @brief Propagate a non-success mcclResult_t (mcclInProgress passes through as success). */
#define MCCLCHECK(call)                                                               \
  do {                                                                                \
    mcclResult_t RES_ = (call);                                                       \
    if (RES_ != mcclSuccess && RES_ != mcclInProgress) {                              \
      INFO(MCCL_ALL, "%s:%d -> %d (%s)", __FILE__, __LINE__, RES_, mcclGetErrorString(RES_)); \
      return RES_;                                                                    \
    }                                                                                 \
  } while (0)

/** @brief MCCLCHECK that stores the result in `res` and jumps to `label`. */
#define MCCLCHECKGOTO(call, res, label)                                               \
  do {                                                                                \
    (res) = (call);                                                                   \
    if ((res) != mcclSuccess && (res) != mcclInProgress) {                            \
      INFO(MCCL_ALL, "%s:%d -> %d (%s)", __FILE__, __LINE__, (res), mcclGetErrorString(res)); \
      goto label;                                                                     \
    }                                                                                 \
  } while (0)

/** @brief Check a CUDA driver call (CUresult). */
#define CUCHECK(call)                                                         \
  do {                                                                        \
    CUresult CUERR_ = (call);                                                 \
    if (CUERR_ != CUDA_SUCCESS) {                                             \
      WARN("Cuda failure '%s' in %s", mcclCuErrorString(CUERR_), #call);     \
      return mcclUnhandledCudaError;                                          \
    }                                                                         \
  } while (0)

/** @brief CUCHECK that stores mcclUnhandledCudaError in `res` and jumps to `label`. */
#define CUCHECKGOTO(call, res, label)                                         \
  do {                                                                        \
    CUresult CUERR_ = (call);                                                 \
    if (CUERR_ != CUDA_SUCCESS) {                                             \
      WARN("Cuda failure '%s' in %s", mcclCuErrorString(CUERR_), #call);     \
      (res) = mcclUnhandledCudaError;                                         \
      goto label;                                                             \
    }                                                                         \
  } while (0)

/** @brief Check a CUDA runtime call (cudaError_t). */
#define CUDACHECK(call)                                                                          \
  do {                                                                                           \
    cudaError_t CUDAERR_ = (call);                                                               \
    if (CUDAERR_ != cudaSuccess) {                                                               \
      WARN("Cuda failure %d '%s' in %s", (int)CUDAERR_, cudaGetErrorString(CUDAERR_), #call);   \
      return mcclUnhandledCudaError;                                                             \
    }                                                                                            \
  } while (0)

/** @brief CUDACHECK that stores mcclUnhandledCudaError in `res` and jumps to `label`. */
#define CUDACHECKGOTO(call, res, label)                                                          \
  do {                                                                                           \
    cudaError_t CUDAERR_ = (call);                                                               \
    if (CUDAERR_ != cudaSuccess) {                                                               \
      WARN("Cuda failure %d '%s' in %s", (int)CUDAERR_, cudaGetErrorString(CUDAERR_), #call);   \
      (res) = mcclUnhandledCudaError;                                                            \
      goto label;                                                                                \
    }                                                                                            \
  } while (0)

/** @brief Check a system call that returns -1 and sets errno on failure. The call's value is
 *  the value of the expression, so `SYSCHECK(fd = open(...))` works. EINTR is retried. */
#define SYSCHECK(call)                                                      \
  do {                                                                      \
    long SYSRET_;                                                           \
    do { SYSRET_ = (long)(call); } while (SYSRET_ == -1 && errno == EINTR); \
    if (SYSRET_ == -1) {                                                    \
      WARN("Call to %s failed: %s", #call, strerror(errno));               \
      return mcclSystemError;                                               \
    }                                                                       \
  } while (0)

/** @brief SYSCHECK that stores mcclSystemError in `res` and jumps to `label`. */
#define SYSCHECKGOTO(call, res, label)                                      \
  do {                                                                      \
    long SYSRET_;                                                           \
    do { SYSRET_ = (long)(call); } while (SYSRET_ == -1 && errno == EINTR); \
    if (SYSRET_ == -1) {                                                    \
      WARN("Call to %s failed: %s", #call, strerror(errno));               \
      (res) = mcclSystemError;                                              \
      goto label;                                                           \
    }                                                                       \
  } while (0)

/** @brief Check a pthread call (returns an error number, 0 on success). */
#define PTHREADCHECK(call)                                                  \
  do {                                                                      \
    int PTERR_ = (call);                                                    \
    if (PTERR_ != 0) {                                                      \
      WARN("Call to %s failed: %s", #call, strerror(PTERR_));              \
      return mcclSystemError;                                               \
    }                                                                       \
  } while (0)

/** @brief PTHREADCHECK that stores mcclSystemError in `res` and jumps to `label`. */
#define PTHREADCHECKGOTO(call, res, label)                                  \
  do {                                                                      \
    int PTERR_ = (call);                                                    \
    if (PTERR_ != 0) {                                                      \
      WARN("Call to %s failed: %s", #call, strerror(PTERR_));              \
      (res) = mcclSystemError;                                              \
      goto label;                                                           \
    }                                                                       \
  } while (0)

/** @brief Reject a bad argument: WARN naming it and its value, return mcclInvalidArgument. */
#define MCCL_ARGCHECK(cond, ...)               \
  do {                                         \
    if (!(cond)) {                             \
      WARN("Invalid argument: " __VA_ARGS__);  \
      return mcclInvalidArgument;              \
    }                                          \
  } while (0)

/** @} */
#endif
