/**
 * @file mccl_elt.h
 * @brief One element of any mcclDataType_t as a double, and a double stored as one, rounded to nearest
 * even as the GPU rounds (fp8 saturating, as NCCL's conversions do): the host's twin of the kernels'
 * element types. The enqueue layer makes PreMulSum scalars with it (NCCL's hostToDevRedOp), and the
 * tests compute references that match the kernels bit for bit.
 * @ingroup common
 *
 * @code
 * double x = mcclEltGet(mcclFloat16, buf, i);                  // element i as a double
 * mcclEltSet(mcclFloat16, buf, i, x * 0.25);                   // stored rounded to nearest even
 * double r = mcclEltOpResult(mcclFloat8e4m3, a + b);           // a sum as the kernels round it
 * @endcode
 */
#ifndef MCCL_ELT_H_
#define MCCL_ELT_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/** @brief Whether a type is a floating type. @param[in] t the type. @return 1 or 0. */
int mcclEltIsFloat(mcclDataType_t t);

/**
 * @brief The value nearest to v that type t holds: floating types round to nearest even (fp8 saturates
 * at its largest finite value, half and bfloat16 overflow to infinity); integers are returned as given.
 * @param[in] t  the type.
 * @param[in] v  the value.
 * @return the rounded value.
 */
double mcclEltRound(mcclDataType_t t, double v);

/**
 * @brief Element i of an array of type t, as a double (64-bit integers beyond 2^53 lose bits).
 * @param[in] t  the type.
 * @param[in] p  the array.
 * @param[in] i  the index.
 * @return the value.
 */
double mcclEltGet(mcclDataType_t t, const void* p, size_t i);

/**
 * @brief Store v as element i of an array of type t: floating types rounded as mcclEltRound, integers
 * converted as C converts (the caller keeps v in the type's range).
 * @param[in]  t  the type.
 * @param[out] p  the array.
 * @param[in]  i  the index.
 * @param[in]  v  the value.
 */
void mcclEltSet(mcclDataType_t t, void* p, size_t i, double v);

/**
 * @brief Store the integer v as element i of an array of type t: integer types as C converts (all 64 bits;
 * a negative v wraps into an unsigned type), floating types rounded as mcclEltRound.
 * @param[in]  t  the type.
 * @param[out] p  the array.
 * @param[in]  i  the index.
 * @param[in]  v  the value.
 */
void mcclEltSetInt(mcclDataType_t t, void* p, size_t i, int64_t v);

/**
 * @brief Significand bits after the point of a floating type: its unit in the last place at magnitude m is
 * 2^(floor(log2 m) - bits). 0 for integer types.
 * @param[in] t  the type.
 * @return the bits.
 */
int mcclEltMantBits(mcclDataType_t t);

/**
 * @brief One floating operation's result as the kernels compute it: exact, then rounded to the type;
 * fp8 first to half, then to fp8, as NCCL computes fp8 in half.
 * @param[in] t      a floating type.
 * @param[in] exact  the exact result (of values of the type).
 * @return it, rounded.
 */
double mcclEltOpResult(mcclDataType_t t, double exact);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
