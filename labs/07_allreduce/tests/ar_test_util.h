// Lab 07 tests: inputs and the CPU reference shared by the collective tests (one process and mpirun).
//
// Inputs are a function of (seed, rank, element index, type, op), so every rank can recompute every
// other rank's input and check the whole result without moving data on the host.
// - Integers: the full range of the type for sum, prod and avg (so sums and products wrap), and the
//   reference wraps the same way (computed unsigned, as lab 06's mcclIntArith); min and max exact.
// - Floating point: small integers, so every partial result is exact in every type and order: sum in
//   [-8, 8] (|sum| <= 64 at 8 ranks, exact in bfloat16's 8-bit significand; fp8: [-1, 1], |sum| <= 8),
//   prod in {-2, -1, 1, 2} (results are +-2^k, k <= 8), min and max in [-100, 100] (fp8: [-8, 8]).
//   sum, prod, min, max must then match bit for bit, whatever order the ring or the symmetric kernels
//   reduce in.
// - avg (NCCL's semantics): integers sum and divide once, with C's truncation, exactly; floating types
//   multiply each input by 1/nranks rounded to the type (PreMulSum), then sum. With nranks a power of two
//   that is exact (bit for bit the mean) wherever the type holds every partial sum; otherwise the result
//   is within (nranks + 1) units in the last place (at the sums' magnitude) of the exact mean.
// - AR_PREMULSUM (the test's stand-in for an operation from mcclLabRedOpCreatePreMulSum, as nccl-tests'
//   mulsum): rank r's scalar is 1 + (r & 1), its inputs as sum's; exact but for fp8 (bounded as avg).
#ifndef AR_TEST_UTIL_H_
#define AR_TEST_UTIL_H_

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_collectives.h"
#include "mccl_elt.h"
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
                                        {"oneshot/simple", "oneshot", "simple", 2},
                                        {"ring/ll128", "ring", "ll128", 0}};  // P2P only: last, so SHM runs skip it
#define AR_NPATHS 6

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

// The tests' PreMulSum operation (a value past the built-in ones, as nccl-tests' ncclNumOps stand-in) and
// rank r's scalar for it.
#define AR_PREMULSUM ((mcclRedOp_t)mcclNumOps)
#define AR_NUM_OPS (mcclNumOps + 1)
static inline double arPreMulScalar(int rank) {
  return 1.0 + (double)(rank & 1);
}
static inline const char* arOpName(mcclRedOp_t op) {
  return op == AR_PREMULSUM ? "premulsum" : mcclOpName(op);
}
static inline int arIsFp8(mcclDataType_t t) {
  return t == mcclFloat8e4m3 || t == mcclFloat8e5m2;
}

// Rank r's element i: raw random bits for integers (truncated by the type), a small integer for floats.
static inline int64_t arValue(uint64_t seed, int rank, size_t i, mcclDataType_t t, mcclRedOp_t op) {
  uint64_t h = arMix(seed ^ arMix(((uint64_t)rank << 48) ^ (uint64_t)i ^ ((uint64_t)t << 40) ^ ((uint64_t)op << 44)));
  if (!mcclEltIsFloat(t)) return (int64_t)h;
  if (op == mcclProd) {
    static const int v[4] = {-2, -1, 1, 2};
    return v[h & 3];
  }
  if (op == mcclMin || op == mcclMax) return arIsFp8(t) ? (int64_t)(h % 17) - 8 : (int64_t)(h % 201) - 100;
  return arIsFp8(t) ? (int64_t)(h % 3) - 1 : (int64_t)(h % 17) - 8;
}

// Fill count elements of rank r's input (host memory, the type's layout).
static inline void arFill(void* host, mcclDataType_t t, mcclRedOp_t op, size_t count, int rank, uint64_t seed) {
  for (size_t i = 0; i < count; i++) mcclEltSetInt(t, host, i, arValue(seed, rank, i, t, op));
}

// The reference for integers of type T (wrapping arithmetic through uint64_t, as the kernels'
// unsigned arithmetic; conversions back to a signed T wrap with gcc). Rank 0's PreMulSum scalar is 1.
#define AR_INT_REF(T)                                                                                   \
  do {                                                                                                  \
    T acc = (T)arValue(seed, 0, i, t, op), got = ((const T*)result)[i];                                 \
    for (int r = 1; r < nranks; r++) {                                                                  \
      T x = (T)arValue(seed, r, i, t, op);                                                              \
      if (op == AR_PREMULSUM) x = (T)((uint64_t)x * (uint64_t)arPreMulScalar(r));                       \
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
    // Floating point: the exact result in double (every input and product of two is exact there).
    const int scaled = op == mcclAvg || op == AR_PREMULSUM;
    double acc = 0, absMax = 0;
    for (int r = 0; r < nranks; r++) {
      double x = (double)arValue(seed, r, i, t, op);
      if (op == AR_PREMULSUM) x *= arPreMulScalar(r);
      acc = r == 0           ? x
            : op == mcclProd ? acc * x
            : op == mcclMax  ? fmax(acc, x)
            : op == mcclMin  ? fmin(acc, x)
                             : acc + x;
      absMax = fabs(acc) > absMax ? fabs(acc) : absMax;
    }
    double bound = 0;
    if (op == mcclAvg) acc /= nranks;
    // avg with a scalar that is not exact, and fp8's PreMulSum: within (nranks + 1) units in the last
    // place at the largest partial sum's magnitude (every rounding of nranks products and nranks - 1 sums).
    if (scaled && ((op == mcclAvg && (nranks & (nranks - 1)) != 0) || arIsFp8(t))) {
      int e;
      (void)frexp(absMax > 1 ? absMax : 1, &e);
      bound = (nranks + 1) * ldexp(1.0, e - mcclEltMantBits(t));
    }
    double got = mcclEltGet(t, result, i);
    if (!(fabs(got - acc) <= bound)) {
      snprintf(why, whyLen, "element %zu: expected %.9g (within %.3g), got %.9g", i, acc, bound, got);
      return 1;
    }
  }
  return 0;
}

#endif
