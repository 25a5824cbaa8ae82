// Lab 09 tests: what the one-process tests (one communicator per sim device) and the mpirun tests (one rank
// per process) share: a rank's buffers, window, device window and device communicator, the inputs each rank
// fills and the results each rank checks.
#ifndef DEVAPI_TEST_UTIL_H_
#define DEVAPI_TEST_UTIL_H_

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_dev_api.h"
#include "mccl_devconn.h"
#include "mccl_test.h"

#define DT_BYTES ((size_t)1 << 20)  // each rank's window (inputs, the barrier test's words)
#define DT_BARRIERS 4               // LSA barriers of the device communicator
#define DT_BLOCKS 2                 // blocks of the collective kernels

struct dtRank {
  mcclLabComm* comm;
  void* buf;   // the window's buffer
  void* out;   // a plain output buffer, DT_BYTES * 4
  void* out2;  // a second one (the unfused RMSNorm's)
  mcclLabWindow* win;
  mcclWindow_t devWin;
  mcclDevComm dc;
  int hasDc;
  cudaStream_t stream;
  uint32_t* errors;  // device: the test kernels' mismatch counter
};

// The rank's local part of the set-up (before the collective calls).
static inline void dtAlloc(struct dtRank* r) {
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  EXPECT_OK(mcclMemAlloc(&r->buf, DT_BYTES));
  EXPECT_OK(mcclMemAlloc(&r->out, DT_BYTES * 4));
  EXPECT_OK(mcclMemAlloc(&r->out2, DT_BYTES * 4));
  EXPECT_OK(mcclDevCalloc((void**)&r->errors, sizeof(uint32_t)));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
}

static inline mcclDevCommRequirements dtReqs(void) {
  mcclDevCommRequirements reqs = MCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = DT_BARRIERS;
  return reqs;
}

// The collective part, one rank's share: register the window, create the device communicator.
static inline void dtCollectiveSetUp(struct dtRank* r) {
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  EXPECT_OK(mcclLabWindowRegister(r->comm, r->buf, DT_BYTES, &r->win));
  mcclDevCommRequirements reqs = dtReqs();
  EXPECT_OK(mcclLabDevCommCreate(r->comm, &reqs, &r->dc));
  r->hasDc = 1;
  EXPECT_OK(mcclDevWindowCreate(r->comm, r->win, &r->devWin));
}

static inline void dtTearDown(struct dtRank* r) {
  if (r->comm == NULL) return;
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  if (r->stream) EXPECT_CUDA_OK(cudaStreamDestroy(r->stream));
  if (r->devWin) EXPECT_OK(mcclDevWindowDestroy(r->comm, r->devWin));
  if (r->hasDc) EXPECT_OK(mcclLabDevCommDestroy(r->comm, &r->dc));
  if (r->win) EXPECT_OK(mcclLabWindowDeregister(r->comm, r->win));
  EXPECT_OK(mcclMemFree(r->buf));
  EXPECT_OK(mcclMemFree(r->out));
  EXPECT_OK(mcclMemFree(r->out2));
  EXPECT_OK(mcclDevFree(r->errors));
}

// bfloat16 on the host: round to nearest even, as __float2bfloat16.
static inline uint16_t dtToBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float dtFromBf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Allreduce inputs: small integers, so every sum is exact in float and in bfloat16 and the check is equality.
static inline float dtArValue(int rank, size_t i, uint64_t seed) {
  return (float)((int)((i * 7 + (size_t)rank * 13 + seed) % 17) - 8);
}

// Fill `count` elements of `type` (float32 or bfloat16) into host memory.
static inline void dtFillAr(void* host, mcclDataType_t type, size_t count, int rank, uint64_t seed) {
  for (size_t i = 0; i < count; i++) {
    float v = dtArValue(rank, i, seed);
    if (type == mcclFloat32)
      ((float*)host)[i] = v;
    else
      ((uint16_t*)host)[i] = dtToBf16(v);
  }
}

// Index of the first wrong element of an allreduce's output over nRanks, or -1.
static inline long dtCheckAr(const void* host, mcclDataType_t type, size_t count, int nRanks, uint64_t seed) {
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int p = 0; p < nRanks; p++) want += dtArValue(p, i, seed);
    float got = type == mcclFloat32 ? ((const float*)host)[i] : dtFromBf16(((const uint16_t*)host)[i]);
    if (got != want) return (long)i;
  }
  return -1;
}

// A hidden state in [-1, 1) and a weight in [0.5, 1.5), from the seed.
static inline float dtRandUnit(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xffffff) / (float)(1 << 24);
}
static inline void dtFillX(void* host, mcclDataType_t type, size_t n, int rank, uint64_t seed) {
  uint64_t s = seed * 31 + (uint64_t)rank + 1;
  for (size_t i = 0; i < n; i++) {
    float v = 2.0f * dtRandUnit(&s) - 1.0f;
    if (type == mcclFloat32)
      ((float*)host)[i] = v;
    else
      ((uint16_t*)host)[i] = dtToBf16(v);
  }
}
static inline void dtFillW(void* host, mcclDataType_t type, size_t n, uint64_t seed) {
  uint64_t s = seed * 17 + 5;
  for (size_t i = 0; i < n; i++) {
    float v = 0.5f + dtRandUnit(&s);
    if (type == mcclFloat32)
      ((float*)host)[i] = v;
    else
      ((uint16_t*)host)[i] = dtToBf16(v);
  }
}

static inline float dtGet(const void* host, mcclDataType_t type, size_t i) {
  return type == mcclFloat32 ? ((const float*)host)[i] : dtFromBf16(((const uint16_t*)host)[i]);
}

// The fused result against the host's reference (within the type's rounding): the first wrong index, or -1.
static inline long dtCheckRmsNorm(const void* out, const void* w, mcclDataType_t type, int rows, int hidden, int nRanks,
                                  uint64_t seed, float eps) {
  size_t n = (size_t)rows * (size_t)hidden;
  float* s = (float*)calloc(n ? n : 1, sizeof(float));
  void* x = malloc(n * 4 + 4);
  long bad = -1;
  for (int p = 0; p < nRanks; p++) {
    dtFillX(x, type, n, p, seed);
    for (size_t i = 0; i < n; i++) s[i] += dtGet(x, type, i);
  }
  const float tol = type == mcclFloat32 ? 1e-4f : 2e-2f;
  for (int r = 0; r < rows && bad < 0; r++) {
    double ss = 0;
    for (int i = 0; i < hidden; i++) {
      float v = type == mcclFloat32 ? s[(size_t)r * hidden + i] : dtFromBf16(dtToBf16(s[(size_t)r * hidden + i]));
      ss += (double)v * v;
    }
    double rstd = 1.0 / sqrt(ss / hidden + eps);
    for (int i = 0; i < hidden && bad < 0; i++) {
      size_t k = (size_t)r * hidden + i;
      float v = type == mcclFloat32 ? s[k] : dtFromBf16(dtToBf16(s[k]));
      double want = v * rstd * dtGet(w, type, (size_t)i);
      if (fabs(dtGet(out, type, k) - want) > tol * (1.0 + fabs(want))) bad = (long)k;
    }
  }
  free(s);
  free(x);
  return bad;
}

// Two results that must agree to the last bit but one (the same code on the same values; a compiler may
// still contract differently in two kernels on a GPU): the first index where they do not, or -1.
static inline long dtCompareClose(const void* a, const void* b, mcclDataType_t type, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (type == mcclFloat32) {
      float x = ((const float*)a)[i], y = ((const float*)b)[i];
      if (fabsf(x - y) > 1e-6f * fabsf(x)) return (long)i;
    } else {
      int d = (int)((const uint16_t*)a)[i] - (int)((const uint16_t*)b)[i];
      if (d > 1 || d < -1) return (long)i;
    }
  }
  return -1;
}

#endif
