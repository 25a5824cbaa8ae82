// Lab 07 tests: inputs and the CPU reference shared by the allreduce tests (one process and mpirun).
//
// Inputs are a function of (seed, rank, element index, type, op), so every rank can recompute every
// other rank's input and check the whole result without moving data on the host.
// - Integers: the full range of the type for sum, prod and avg (so sums and products wrap), and the
//   reference wraps the same way (computed unsigned, as lab 06's mcclIntArith); min and max exact.
// - Floating point: small integers, so every partial result is exact in every type and order:
//   sum and avg in [-8, 8] (|sum| <= 64 at 8 ranks, exact in bfloat16's 8-bit significand), prod in {-2, -1, 1, 2}
//   (results are +-2^k, k <= 8), min and max in [-100, 100]. sum, prod, min, max must then match bit for bit, whatever
//   order the ring or the symmetric kernels reduce in.
// - avg divides the exact sum once (NCCL's FuncSumPostDiv), rounded to nearest in the type (half
//   and bfloat16 divide in float and round), so the result is within half an ulp of sum / nranks:
//   relative error <= 2^-11 for float16, 2^-8 for bfloat16, 2^-24 for float32, 2^-53 for float64.
//   Integer avg is the wrapped sum divided with C's truncation, exactly.
#ifndef AR_TEST_UTIL_H_
#define AR_TEST_UTIL_H_

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_allreduce.h"
#include "mccl_param.h"

// Force an algorithm and protocol (NULL: the table's choice) and make the parameters re-read.
static inline void arForce(const char* algo, const char* proto) {
  if (algo)
    setenv("MCCL_ALGO", algo, 1);
  else
    unsetenv("MCCL_ALGO");
  if (proto)
    setenv("MCCL_PROTO", proto, 1);
  else
    unsetenv("MCCL_PROTO");
  mcclParamResetAll();
}

// Small FIFOs (SIMPLE, the rings' and point-to-point's: 8 slots of 512 B, a 2 KiB chunk; LL: 8 slots
// of 256 data bytes), so counts of a few thousand elements already take several rounds of the ring
// loop and wrap every FIFO many times; 0 restores the defaults. Read at the next communicator's creation.
static inline void arSmallFifos(int on) {
  if (on) {
    setenv("MCCL_BUFFSIZE", "4096", 1);
    setenv("MCCL_P2P_BUFFSIZE", "4096", 1);
    setenv("MCCL_LL_BUFFSIZE", "4096", 1);
  } else {
    unsetenv("MCCL_BUFFSIZE");
    unsetenv("MCCL_P2P_BUFFSIZE");
    unsetenv("MCCL_LL_BUFFSIZE");
  }
  mcclParamResetAll();
}

// The five paths: ring SIMPLE, ring LL, one-shot with LL, two-shot (whose protocol the kernels
// ignore), one-shot with SIMPLE (2 ranks only: the runners leave it out at other rank counts).
struct arPath {
  const char* name;
  const char* algo;
  const char* proto;
  int maxRanks;  // 0: any rank count
};
static const struct arPath arPaths[] = {{"ring/simple", "ring", "simple", 0},
                                        {"ring/ll", "ring", "ll", 0},
                                        {"oneshot/ll", "oneshot", "ll", 0},
                                        {"twoshot", "twoshot", "simple", 0},
                                        {"oneshot/simple", "oneshot", "simple", 2}};
#define AR_NPATHS 5

// Whether `path` runs on nranks ranks (one-shot with SIMPLE: 2 ranks, or 1, which copies).
static inline int arPathRuns(const struct arPath* path, int nranks) {
  return path->maxRanks == 0 || nranks <= path->maxRanks;
}

static inline uint64_t arMix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static inline int arIsFloat(mcclDataType_t t) {
  return t == mcclFloat16 || t == mcclFloat32 || t == mcclFloat64 || t == mcclBfloat16;
}

// Rank r's element i: raw random bits for integers (truncated by the type), a small integer for floats.
static inline int64_t arValue(uint64_t seed, int rank, size_t i, mcclDataType_t t, mcclRedOp_t op) {
  uint64_t h = arMix(seed ^ arMix(((uint64_t)rank << 48) ^ (uint64_t)i ^ ((uint64_t)t << 40) ^ ((uint64_t)op << 44)));
  if (!arIsFloat(t)) return (int64_t)h;
  if (op == mcclProd) {
    static const int v[4] = {-2, -1, 1, 2};
    return v[h & 3];
  }
  if (op == mcclMin || op == mcclMax) return (int64_t)(h % 201) - 100;
  return (int64_t)(h % 17) - 8;
}

// float <-> IEEE half and bfloat16 bits, for the exact small integers above and for results.
static inline uint16_t arFloatToHalf(float f) {  // exact for the integers used (|f| <= 2048)
  if (f == 0) return signbit(f) ? 0x8000 : 0;
  uint16_t s = f < 0 ? 0x8000 : 0;
  float a = fabsf(f);
  int e;
  float m = frexpf(a, &e);  // a = m * 2^e, m in [0.5, 1)
  uint16_t mant = (uint16_t)((m * 2048.0f) - 1024.0f);
  return (uint16_t)(s | (uint16_t)((e - 1 + 15) << 10) | mant);
}
static inline float arHalfToFloat(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
}
static inline uint16_t arFloatToBf16(float f) {  // exact for the integers used (|f| <= 256)
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static inline float arBf16ToFloat(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Fill count elements of rank r's input (host memory, the type's layout).
static inline void arFill(void* host, mcclDataType_t t, mcclRedOp_t op, size_t count, int rank, uint64_t seed) {
  for (size_t i = 0; i < count; i++) {
    int64_t v = arValue(seed, rank, i, t, op);
    switch (t) {
      case mcclInt8:
        ((int8_t*)host)[i] = (int8_t)v;
        break;
      case mcclUint8:
        ((uint8_t*)host)[i] = (uint8_t)v;
        break;
      case mcclInt32:
        ((int32_t*)host)[i] = (int32_t)v;
        break;
      case mcclUint32:
        ((uint32_t*)host)[i] = (uint32_t)v;
        break;
      case mcclInt64:
        ((int64_t*)host)[i] = v;
        break;
      case mcclUint64:
        ((uint64_t*)host)[i] = (uint64_t)v;
        break;
      case mcclFloat16:
        ((uint16_t*)host)[i] = arFloatToHalf((float)v);
        break;
      case mcclFloat32:
        ((float*)host)[i] = (float)v;
        break;
      case mcclFloat64:
        ((double*)host)[i] = (double)v;
        break;
      default:
        ((uint16_t*)host)[i] = arFloatToBf16((float)v);
        break;
    }
  }
}

// The reference for integers of type T (wrapping arithmetic through uint64_t, as the kernels'
// unsigned arithmetic; conversions back to a signed T wrap with gcc).
#define AR_INT_REF(T)                                                                                   \
  do {                                                                                                  \
    T acc = (T)arValue(seed, 0, i, t, op), got = ((const T*)result)[i];                                 \
    for (int r = 1; r < nranks; r++) {                                                                  \
      T x = (T)arValue(seed, r, i, t, op);                                                              \
      switch (op) {                                                                                     \
        case mcclProd:                                                                                  \
          acc = (T)((uint64_t)acc * (uint64_t)x);                                                       \
          break;                                                                                        \
        case mcclMax:                                                                                   \
          acc = acc < x ? x : acc;                                                                      \
          break;                                                                                        \
        case mcclMin:                                                                                   \
          acc = x < acc ? x : acc;                                                                      \
          break;                                                                                        \
        default:                                                                                        \
          acc = (T)((uint64_t)acc + (uint64_t)x);                                                       \
          break;                                                                                        \
      }                                                                                                 \
    }                                                                                                   \
    if (op == mcclAvg) acc = (T)(acc / (T)nranks);                                                      \
    if (got != acc) {                                                                                   \
      snprintf(why, whyLen, "element %zu: expected %lld, got %lld", i, (long long)acc, (long long)got); \
      return 1;                                                                                         \
    }                                                                                                   \
  } while (0)

// Check count elements of an allreduce's result (host copy) against the reference; 0 if right, else
// 1 with the first wrong element described in why.
static inline int arCheck(const void* result, mcclDataType_t t, mcclRedOp_t op, size_t count, int nranks, uint64_t seed,
                          char* why, size_t whyLen) {
  for (size_t i = 0; i < count; i++) {
    switch (t) {
      case mcclInt8:
        AR_INT_REF(int8_t);
        continue;
      case mcclUint8:
        AR_INT_REF(uint8_t);
        continue;
      case mcclInt32:
        AR_INT_REF(int32_t);
        continue;
      case mcclUint32:
        AR_INT_REF(uint32_t);
        continue;
      case mcclInt64:
        AR_INT_REF(int64_t);
        continue;
      case mcclUint64:
        AR_INT_REF(uint64_t);
        continue;
      default:
        break;
    }
    double acc = (double)arValue(seed, 0, i, t, op);
    for (int r = 1; r < nranks; r++) {
      double x = (double)arValue(seed, r, i, t, op);
      acc = op == mcclProd ? acc * x : op == mcclMax ? fmax(acc, x) : op == mcclMin ? fmin(acc, x) : acc + x;
    }
    double got = t == mcclFloat16    ? arHalfToFloat(((const uint16_t*)result)[i])
                 : t == mcclBfloat16 ? arBf16ToFloat(((const uint16_t*)result)[i])
                 : t == mcclFloat32  ? ((const float*)result)[i]
                                     : ((const double*)result)[i];
    double bound = 0;
    if (op == mcclAvg) {
      acc /= nranks;
      // half an ulp of the type, relative
      int p = t == mcclFloat16 ? 11 : t == mcclBfloat16 ? 8 : t == mcclFloat32 ? 24 : 53;
      bound = fabs(acc) * ldexp(1.0, -p);
    }
    if (!(fabs(got - acc) <= bound)) {
      snprintf(why, whyLen, "element %zu: expected %.9g (within %.3g), got %.9g", i, acc, bound, got);
      return 1;
    }
  }
  return 0;
}

#endif
