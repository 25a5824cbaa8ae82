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

/** @brief Element types (values of NCCL's ncclDataType_t; NCCL 2.28's two fp8 types, 10 and 11, are not served). */
typedef enum {
  mcclInt8 = 0,     /**< int8_t */
  mcclChar = 0,     /**< alias of mcclInt8 (ncclChar) */
  mcclUint8 = 1,    /**< uint8_t */
  mcclInt32 = 2,    /**< int32_t */
  mcclInt = 2,      /**< alias of mcclInt32 (ncclInt) */
  mcclUint32 = 3,   /**< uint32_t */
  mcclInt64 = 4,    /**< int64_t */
  mcclUint64 = 5,   /**< uint64_t */
  mcclFloat16 = 6,  /**< IEEE half (__half) */
  mcclHalf = 6,     /**< alias of mcclFloat16 (ncclHalf) */
  mcclFloat32 = 7,  /**< float */
  mcclFloat = 7,    /**< alias of mcclFloat32 (ncclFloat) */
  mcclFloat64 = 8,  /**< double */
  mcclDouble = 8,   /**< alias of mcclFloat64 (ncclDouble) */
  mcclBfloat16 = 9, /**< bfloat16 (__nv_bfloat16) */
  mcclNumTypes = 10 /**< number of types */
} mcclDataType_t;

/** @brief Reduction operations (values of NCCL's ncclRedOp_t). */
typedef enum {
  mcclSum = 0,   /**< a + b */
  mcclProd = 1,  /**< a * b */
  mcclMax = 2,   /**< max(a, b) */
  mcclMin = 3,   /**< min(a, b) */
  mcclAvg = 4,   /**< sum, then divided by the rank count (NCCL's ncclAvg: FuncSumPostDiv) */
  mcclNumOps = 5 /**< number of operations */
} mcclRedOp_t;

/** @} */

#ifdef __cplusplus
}
#endif
#endif
