// common: elements of every type as doubles and back, rounded as the GPU rounds (mccl_elt.h).
#include "mccl_elt.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

// The shape of a floating type: significand bits after the point, exponent bias, largest finite value, and
// whether a finite value past it saturates (fp8, as NCCL's __NV_SATFINITE) or becomes infinity.
struct mcclFloatFormat {
  int mant;
  int bias;
  double max;
  int saturate;
};

int mcclEltIsFloat(mcclDataType_t t) {
  return t == mcclFloat16 || t == mcclFloat32 || t == mcclFloat64 || t == mcclBfloat16 || t == mcclFloat8e4m3 ||
         t == mcclFloat8e5m2;
}

// The format of a 16- or 8-bit floating type.
static struct mcclFloatFormat formatOf(mcclDataType_t t) {
  struct mcclFloatFormat f;
  switch (t) {
    case mcclBfloat16:
      f.mant = 7;
      f.bias = 127;
      f.max = 3.3895313892515355e38;
      f.saturate = 0;
      break;
    case mcclFloat8e4m3:
      f.mant = 3;
      f.bias = 7;
      f.max = 448;
      f.saturate = 1;
      break;
    case mcclFloat8e5m2:
      f.mant = 2;
      f.bias = 15;
      f.max = 57344;
      f.saturate = 1;
      break;
    default:
      f.mant = 10;
      f.bias = 15;
      f.max = 65504;
      f.saturate = 0;
      break;
  }
  return f;
}

// v rounded to the nearest value of a small floating format, ties to even, subnormals included.
static double roundTo(struct mcclFloatFormat f, double v) {
  if (v != v || v == 0) return v;
  double a = fabs(v);
  if (isinf(a)) return f.saturate ? (v < 0 ? -f.max : f.max) : v;
  int e;
  (void)frexp(a, &e);  // a in [2^(e-1), 2^e)
  int emin = 1 - f.bias;
  int q = (e - 1 < emin ? emin : e - 1) - f.mant;  // quantum 2^q
  double r = ldexp(nearbyint(ldexp(a, -q)), q);    // the default rounding mode: to nearest even
  if (r > f.max) {
    // Past the largest finite value: half a quantum above it still rounds down to it (round to nearest).
    if (!f.saturate && a < f.max + ldexp(1.0, (int)floor(log2(f.max)) - f.mant - 1))
      r = f.max;
    else
      r = f.saturate ? f.max : INFINITY;
  }
  return v < 0 ? -r : r;
}

double mcclEltRound(mcclDataType_t t, double v) {
  switch (t) {
    case mcclFloat64:
      return v;
    case mcclFloat32:
      return (double)(float)v;
    case mcclFloat16:
    case mcclBfloat16:
    case mcclFloat8e4m3:
    case mcclFloat8e5m2:
      return roundTo(formatOf(t), v);
    default:
      return v;
  }
}

// The bits of a value a small floating format holds exactly (from roundTo), `bits` wide.
static uint32_t smallBits(struct mcclFloatFormat f, int bits, double v) {
  uint32_t sign = (signbit(v) ? 1u : 0u) << (bits - 1);
  double a = fabs(v);
  int ebits = bits - 1 - f.mant;
  if (a == 0) return sign;
  if (isinf(a)) return sign | (((1u << ebits) - 1) << f.mant);
  if (a != a) return sign | ((1u << (bits - 1)) - 1);
  int e;
  (void)frexp(a, &e);
  int emin = 1 - f.bias;
  if (e - 1 < emin) return sign | (uint32_t)ldexp(a, f.bias - 1 + f.mant);  // subnormal
  uint32_t m = (uint32_t)(ldexp(a, f.mant - (e - 1)) - ldexp(1.0, f.mant));
  return sign | ((uint32_t)(e - 1 + f.bias) << f.mant) | m;
}

// The value of a small floating format's bits.
static double smallValue(struct mcclFloatFormat f, int bits, uint32_t u) {
  int ebits = bits - 1 - f.mant;
  uint32_t e = (u >> f.mant) & ((1u << ebits) - 1), m = u & ((1u << f.mant) - 1);
  int neg = (u >> (bits - 1)) & 1;
  double v;
  if (e == 0) {
    v = ldexp((double)m, 1 - f.bias - f.mant);
  } else if (e == (1u << ebits) - 1 && !f.saturate) {
    v = m ? NAN : INFINITY;
  } else if (e == (1u << ebits) - 1 && f.mant == 3 && m == 7) {
    v = NAN;  // e4m3's only NaN pattern; its other top-exponent values are finite
  } else if (e == (1u << ebits) - 1 && f.mant == 2 && m != 0) {
    v = NAN;  // e5m2 keeps IEEE's NaNs (and infinities, which saturating conversions never make)
  } else if (e == (1u << ebits) - 1 && f.mant == 2) {
    v = INFINITY;
  } else {
    v = ldexp((double)(m | (1u << f.mant)), (int)e - f.bias - f.mant);
  }
  return neg ? -v : v;
}

double mcclEltGet(mcclDataType_t t, const void* p, size_t i) {
  switch (t) {
    case mcclInt8:
      return ((const int8_t*)p)[i];
    case mcclUint8:
      return ((const uint8_t*)p)[i];
    case mcclInt32:
      return ((const int32_t*)p)[i];
    case mcclUint32:
      return ((const uint32_t*)p)[i];
    case mcclInt64:
      return (double)((const int64_t*)p)[i];
    case mcclUint64:
      return (double)((const uint64_t*)p)[i];
    case mcclFloat32:
      return ((const float*)p)[i];
    case mcclFloat64:
      return ((const double*)p)[i];
    case mcclFloat16:
    case mcclBfloat16:
      return smallValue(formatOf(t), 16, ((const uint16_t*)p)[i]);
    default:
      return smallValue(formatOf(t), 8, ((const uint8_t*)p)[i]);
  }
}

void mcclEltSet(mcclDataType_t t, void* p, size_t i, double v) {
  switch (t) {
    case mcclInt8:
      ((int8_t*)p)[i] = (int8_t)v;
      break;
    case mcclUint8:
      ((uint8_t*)p)[i] = (uint8_t)v;
      break;
    case mcclInt32:
      ((int32_t*)p)[i] = (int32_t)v;
      break;
    case mcclUint32:
      ((uint32_t*)p)[i] = (uint32_t)v;
      break;
    case mcclInt64:
      ((int64_t*)p)[i] = (int64_t)v;
      break;
    case mcclUint64:
      ((uint64_t*)p)[i] = (uint64_t)v;
      break;
    case mcclFloat32:
      ((float*)p)[i] = (float)v;
      break;
    case mcclFloat64:
      ((double*)p)[i] = v;
      break;
    case mcclFloat16:
    case mcclBfloat16:
      ((uint16_t*)p)[i] = (uint16_t)smallBits(formatOf(t), 16, mcclEltRound(t, v));
      break;
    default:
      ((uint8_t*)p)[i] = (uint8_t)smallBits(formatOf(t), 8, mcclEltRound(t, v));
      break;
  }
}

void mcclEltSetInt(mcclDataType_t t, void* p, size_t i, int64_t v) {
  switch (t) {  // integers as C converts (wrapping into the unsigned types), never through a double
    case mcclInt8:
      ((int8_t*)p)[i] = (int8_t)v;
      break;
    case mcclUint8:
      ((uint8_t*)p)[i] = (uint8_t)v;
      break;
    case mcclInt32:
      ((int32_t*)p)[i] = (int32_t)v;
      break;
    case mcclUint32:
      ((uint32_t*)p)[i] = (uint32_t)v;
      break;
    case mcclInt64:
      ((int64_t*)p)[i] = v;
      break;
    case mcclUint64:
      ((uint64_t*)p)[i] = (uint64_t)v;
      break;
    default:  // floating types, rounded
      mcclEltSet(t, p, i, (double)v);
      break;
  }
}

int mcclEltMantBits(mcclDataType_t t) {
  if (!mcclEltIsFloat(t)) return 0;
  return t == mcclFloat32 ? 23 : t == mcclFloat64 ? 52 : formatOf(t).mant;
}

double mcclEltOpResult(mcclDataType_t t, double exact) {
  if (t == mcclFloat8e4m3 || t == mcclFloat8e5m2) exact = roundTo(formatOf(mcclFloat16), exact);
  return mcclEltRound(t, exact);
}
