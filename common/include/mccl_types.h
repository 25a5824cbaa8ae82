/**
 * @file mccl_types.h
 * @brief The value types of NCCL's nccl.h that every layer and the final API share: the unique id,
 * the element types and the reduction operations, with NCCL's sizes and numeric values.
 * @ingroup common
 *
 * A small header on its own (no CUDA, no other minccl header) so that final/include/minccl.h can be
 * installed with it alone, and lab code and the final API see one definition of each type.
 */
#ifndef MCCL_TYPES_H_
#define MCCL_TYPES_H_

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/** @brief Size of the opaque unique id, as NCCL_UNIQUE_ID_BYTES. */
#define MCCL_UNIQUE_ID_BYTES 128

/** @brief Opaque rendezvous id (NCCL's ncclUniqueId): rank 0's abstract socket name and TCP address, its host hash
 * and a random secret (mccl_bootstrap.h). Copy it by value. */
typedef struct {
  char internal[MCCL_UNIQUE_ID_BYTES]; /**< Opaque bytes; never interpret them. */
} mcclUniqueId;

/** @brief Element types (values of NCCL's ncclDataType_t, NCCL 2.28's two fp8 types included). */
typedef enum {
  mcclInt8 = 0,        /**< int8_t */
  mcclChar = 0,        /**< alias of mcclInt8 (ncclChar) */
  mcclUint8 = 1,       /**< uint8_t */
  mcclInt32 = 2,       /**< int32_t */
  mcclInt = 2,         /**< alias of mcclInt32 (ncclInt) */
  mcclUint32 = 3,      /**< uint32_t */
  mcclInt64 = 4,       /**< int64_t */
  mcclUint64 = 5,      /**< uint64_t */
  mcclFloat16 = 6,     /**< IEEE half (__half) */
  mcclHalf = 6,        /**< alias of mcclFloat16 (ncclHalf) */
  mcclFloat32 = 7,     /**< float */
  mcclFloat = 7,       /**< alias of mcclFloat32 (ncclFloat) */
  mcclFloat64 = 8,     /**< double */
  mcclDouble = 8,      /**< alias of mcclFloat64 (ncclDouble) */
  mcclBfloat16 = 9,    /**< bfloat16 (__nv_bfloat16) */
  mcclFloat8e4m3 = 10, /**< fp8 E4M3 (__nv_fp8_e4m3): reductions compute in half, as NCCL's */
  mcclFloat8e5m2 = 11, /**< fp8 E5M2 (__nv_fp8_e5m2) */
  mcclNumTypes = 12    /**< number of types */
} mcclDataType_t;

/** @brief Reduction operations (values of NCCL's ncclRedOp_t). Values from mcclNumOps up name operations a
 *  communicator created (mcclRedOpCreatePreMulSum); the type is an int's size, as NCCL's. */
typedef enum {
  mcclSum = 0,              /**< a + b */
  mcclProd = 1,             /**< a * b */
  mcclMax = 2,              /**< max(a, b) */
  mcclMin = 3,              /**< min(a, b) */
  mcclAvg = 4,              /**< the mean: floating types multiply each input by 1/nranks, then sum (NCCL's
                                 PreMulSum); integers sum, then divide (NCCL's SumPostDiv) */
  mcclNumOps = 5,           /**< number of built-in operations */
  mcclMaxRedOp = 0x7fffffff /**< the largest value an operation can have */
} mcclRedOp_t;

/** @brief Where the scalar of a PreMulSum operation lives (values of NCCL's ncclScalarResidence_t). */
typedef enum {
  mcclScalarDevice = 0,       /**< in device memory, read by the kernel when it runs */
  mcclScalarHostImmediate = 1 /**< in host memory, read when the operation is created */
} mcclScalarResidence_t;

/** @} */

#ifdef __cplusplus
}
#endif
#endif
