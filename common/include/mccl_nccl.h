/**
 * @file mccl_nccl.h
 * @brief The benchmarks' handle on the real NCCL: libnccl.so.2 loaded at run time with dlopen, so
 * minccl builds without NCCL and compares with it wherever it is installed (MCCL_NCCL_LIB).
 * @ingroup common
 */
#ifndef MCCL_NCCL_H_
#define MCCL_NCCL_H_

#include <stddef.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/** @brief NCCL's ncclUniqueId (128 opaque bytes), declared here so no nccl.h is needed. */
typedef struct {
  char internal[128]; /**< opaque */
} mcclNcclUniqueId;

/** @brief NCCL's ncclComm_t. */
typedef void* mcclNcclComm;

/** @brief Values of NCCL's ncclDataType_t and ncclRedOp_t that the benchmarks pass. */
enum { mcclNcclInt32 = 2 /**< ncclInt32 */, mcclNcclFloat32 = 7 /**< ncclFloat32 */, mcclNcclSum = 0 /**< ncclSum */ };

/**
 * @brief The NCCL entry points the benchmarks call (each returns NCCL's ncclResult_t, 0 on success),
 * filled by mcclNcclOpen.
 */
typedef struct {
  void* lib;                                /**< the dlopen handle */
  int version;                              /**< ncclGetVersion: 22809 for 2.28.9 */
  int (*getUniqueId)(mcclNcclUniqueId* id); /**< ncclGetUniqueId */
  int (*commInitRank)(mcclNcclComm* comm, int nranks, mcclNcclUniqueId id, int rank); /**< ncclCommInitRank */
  int (*commDestroy)(mcclNcclComm comm);                                              /**< ncclCommDestroy */
  int (*send)(const void* buf, size_t count, int dtype, int peer, mcclNcclComm comm, cudaStream_t s); /**< ncclSend */
  int (*recv)(void* buf, size_t count, int dtype, int peer, mcclNcclComm comm, cudaStream_t s);       /**< ncclRecv */
  int (*allReduce)(const void* src, void* dst, size_t count, int dtype, int op, mcclNcclComm comm,
                   cudaStream_t s);          /**< ncclAllReduce */
  int (*groupStart)(void);                   /**< ncclGroupStart */
  int (*groupEnd)(void);                     /**< ncclGroupEnd */
  const char* (*getErrorString)(int result); /**< ncclGetErrorString */
} mcclNcclApi;

/**
 * @brief dlopen an NCCL library and look up its entry points. NCCL reads most of its environment
 * (NCCL_P2P_DISABLE included) once per process, at its first communicator: set it before.
 * @param[in]  path  the library (e.g. mcclParamNcclLib()).
 * @param[out] api   the entry points; zeroed when the library is unusable.
 * @param[out] why   when it is unusable: a sentence saying why (static storage).
 * @return 1 when the library loaded with every entry point, else 0.
 */
int mcclNcclOpen(const char* path, mcclNcclApi* api, const char** why);

/**
 * @brief dlclose the library (after every communicator was destroyed) and zero `api`.
 * @param[in,out] api  from mcclNcclOpen (a zeroed one is a no-op).
 */
void mcclNcclClose(mcclNcclApi* api);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
