// Environment parameters: each read once and cached (NCCL's NCCL_PARAM pattern).
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "mccl_debug.h"
#include "mccl_param.h"

typedef struct {
  atomic_int state;  // 0 unread, 1 read
  int64_t value;
} intParamCache;
typedef struct {
  atomic_int state;
  const char* value;
} strParamCache;

static int64_t readInt(const char* env, int64_t deflt) {
  const char* s = getenv(env);
  if (s == NULL || *s == '\0') return deflt;
  errno = 0;
  char* end = NULL;
  long long v = strtoll(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0') {
    WARN("Invalid value '%s' for %s, using default %lld", s, env, (long long)deflt);
    return deflt;
  }
  INFO(MCCL_ENV, "%s set by environment to %lld", env, v);
  return v;
}

#define MCCL_PARAM_INT(name, env, deflt, doc)                         \
  static intParamCache cache##name;                                   \
  int64_t mcclParam##name(void) {                                     \
    if (atomic_load_explicit(&cache##name.state, memory_order_acquire) == 0) { \
      cache##name.value = readInt("MCCL_" env, (int64_t)(deflt));     \
      atomic_store_explicit(&cache##name.state, 1, memory_order_release); \
    }                                                                 \
    return cache##name.value;                                         \
  }
#define MCCL_PARAM_STR(name, env, deflt, doc)                         \
  static strParamCache cache##name;                                   \
  const char* mcclParam##name(void) {                                 \
    if (atomic_load_explicit(&cache##name.state, memory_order_acquire) == 0) { \
      const char* s = getenv("MCCL_" env);                            \
      cache##name.value = (s && *s) ? s : (deflt);                    \
      atomic_store_explicit(&cache##name.state, 1, memory_order_release); \
    }                                                                 \
    return cache##name.value;                                         \
  }
#define MCCL_PARAM_SIM(name, env, deflt, doc)
#include "mccl_params.def"
#undef MCCL_PARAM_INT
#undef MCCL_PARAM_STR

void mcclParamResetAll(void) {
#define MCCL_PARAM_INT(name, env, deflt, doc) atomic_store(&cache##name.state, 0);
#define MCCL_PARAM_STR(name, env, deflt, doc) atomic_store(&cache##name.state, 0);
#include "mccl_params.def"
#undef MCCL_PARAM_INT
#undef MCCL_PARAM_STR
}
