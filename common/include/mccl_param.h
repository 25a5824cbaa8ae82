/**
 * @file mccl_param.h
 * @brief Environment parameters, as NCCL's param.h: each one declared once in mccl_params.def.
 * @ingroup common
 */
#ifndef MCCL_PARAM_H_
#define MCCL_PARAM_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/// @cond INTERNAL
#define MCCL_PARAM_INT(name, env, deflt, doc) int64_t mcclParam##name(void);
#define MCCL_PARAM_STR(name, env, deflt, doc) const char* mcclParam##name(void);
#define MCCL_PARAM_SIM(name, env, deflt, doc)
#include "mccl_params.def"
/// @endcond
#undef MCCL_PARAM_INT
#undef MCCL_PARAM_STR
#undef MCCL_PARAM_SIM

/**
 * @brief Forget every cached value so the next read sees the environment again.
 *
 * Parameters are read once, like NCCL's; tests that flip a switch with setenv() call this
 * between cases. Safe against concurrent readers: each sees the old value or reads the new one
 * (setenv() itself is not safe against threads reading the environment, so call that first).
 */
void mcclParamResetAll(void);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
