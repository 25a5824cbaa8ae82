// Environment parameters: each read once and cached (NCCL's NCCL_PARAM pattern, src/include/param.h
// and src/misc/param.cc). The cache is one atomic word per parameter holding the value itself, with
// a sentinel for "not read yet", so a reader on any thread sees either the sentinel or a whole
// value. The first readers of a parameter serialise on one mutex, so exactly one of them reads the
// environment (and logs what it found, once).
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_debug.h"
#include "mccl_param.h"

#define PARAM_UNSET_INT INT64_MIN                    // no default may be this (checked per parameter)
static const char paramUnsetStr[1];                  // its address marks an unread string parameter
#define PARAM_UNSET_STR ((const char*)paramUnsetStr)
static pthread_mutex_t paramLock = PTHREAD_MUTEX_INITIALIZER;

// Slow path of mcclParam<Name>() for integers. Logging happens after the lock is released: WARN
// and INFO read MCCL_DEBUG*, which are parameters too.
static int64_t loadInt(_Atomic int64_t* cache, const char* env, int64_t deflt) {
  enum { kept, fromEnv, invalid } what = kept;
  pthread_mutex_lock(&paramLock);
  int64_t v = atomic_load_explicit(cache, memory_order_relaxed);
  const char* s = NULL;
  if (v == PARAM_UNSET_INT) {
    v = deflt;
    s = getenv(env);
    if (s != NULL && *s != '\0') {
      errno = 0;
      char* end = NULL;
      long long x = strtoll(s, &end, 0);
      if (errno != 0 || end == s || *end != '\0' || x == PARAM_UNSET_INT) what = invalid;
      else { v = x; what = fromEnv; }
    }
    atomic_store_explicit(cache, v, memory_order_release);
  }
  pthread_mutex_unlock(&paramLock);
  if (what == invalid) WARN("Invalid value '%s' for %s, using default %lld", s, env, (long long)deflt);
  else if (what == fromEnv) INFO(MCCL_ENV, "%s set by environment to %lld", env, (long long)v);
  return v;
}

static const char* loadStr(_Atomic(const char*)* cache, const char* env, const char* deflt) {
  pthread_mutex_lock(&paramLock);
  const char* v = atomic_load_explicit(cache, memory_order_relaxed);
  if (v == PARAM_UNSET_STR) {
    const char* s = getenv(env);
    v = (s && *s) ? s : deflt;
    atomic_store_explicit(cache, v, memory_order_release);
  }
  pthread_mutex_unlock(&paramLock);
  return v;
}

#define MCCL_PARAM_INT(name, env, deflt, doc)                                                    \
  _Static_assert((int64_t)(deflt) != PARAM_UNSET_INT, "MCCL_" env ": default is the unset marker"); \
  static _Atomic int64_t cache##name = PARAM_UNSET_INT;                                          \
  int64_t mcclParam##name(void) {                                                                \
    int64_t v = atomic_load_explicit(&cache##name, memory_order_acquire);                        \
    return v != PARAM_UNSET_INT ? v : loadInt(&cache##name, "MCCL_" env, (int64_t)(deflt));      \
  }
#define MCCL_PARAM_STR(name, env, deflt, doc)                                                    \
  static _Atomic(const char*) cache##name = PARAM_UNSET_STR;                                     \
  const char* mcclParam##name(void) {                                                            \
    const char* v = atomic_load_explicit(&cache##name, memory_order_acquire);                    \
    return v != PARAM_UNSET_STR ? v : loadStr(&cache##name, "MCCL_" env, (deflt));               \
  }
#define MCCL_PARAM_SIM(name, env, deflt, doc)
#include "mccl_params.def"
#undef MCCL_PARAM_INT
#undef MCCL_PARAM_STR

void mcclParamResetAll(void) {
  pthread_mutex_lock(&paramLock);
#define MCCL_PARAM_INT(name, env, deflt, doc) \
  atomic_store_explicit(&cache##name, PARAM_UNSET_INT, memory_order_release);
#define MCCL_PARAM_STR(name, env, deflt, doc) \
  atomic_store_explicit(&cache##name, PARAM_UNSET_STR, memory_order_release);
#include "mccl_params.def"
#undef MCCL_PARAM_INT
#undef MCCL_PARAM_STR
  pthread_mutex_unlock(&paramLock);
}
