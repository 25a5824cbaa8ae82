// Helpers shared by lab 04's tests: /dev/shm and fd accounting, data patterns, loopback connections.
#ifndef SHM_TEST_UTIL_H_
#define SHM_TEST_UTIL_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_param.h"
#include "mccl_shm.h"
#include "mccl_test.h"

static inline int pathExists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}


// The legacy path of a descriptor, "" for other kinds.
static inline void descPath(const mcclShmIpcDesc_t* desc, char* out, size_t n) {
  if (desc->kind == MCCL_SHM_IPC_LEGACY) snprintf(out, n, "%s%s", MCCL_SHM_PREFIX, desc->legacy.shmSuffix);
  else if (n) out[0] = '\0';
}

// Deterministic bytes from a seed (xorshift64 words): a message is checked without keeping a copy.
static inline void patternRun(uint64_t* x, unsigned char* p, size_t n) {  // n % 8 == 0 except at the end
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    memcpy(p + i, x, 8);
  }
  for (; i < n; i++) { *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17; p[i] = (unsigned char)*x; }
}

static inline void fillPattern(void* buf, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  patternRun(&x, (unsigned char*)buf, n);
}

// Offset of the first byte that differs from the pattern, or (size_t)-1; compares 1 MiB at a time.
static inline size_t checkPattern(const void* buf, size_t n, uint64_t seed) {
  const size_t chunk = 1 << 20;
  static unsigned char ref[1 << 20];
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  const unsigned char* b = (const unsigned char*)buf;
  for (size_t off = 0; off < n; off += chunk) {
    size_t len = n - off < chunk ? n - off : chunk;
    patternRun(&x, ref, len);
    if (memcmp(ref, b + off, len) != 0)
      for (size_t i = 0; i < len; i++)
        if (ref[i] != b[off + i]) return off + i;
  }
  return (size_t)-1;
}

static inline void setParam(const char* name, const char* value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  mcclParamResetAll();
}

#endif
