/**
 * @file mccl_host_alloc.h
 * @brief Lab 02: pinned host memory the GPU can reach: cuMem host-NUMA allocations and mapped
 * cudaHostAlloc memory.
 * @ingroup lab02
 */
#ifndef MCCL_HOST_ALLOC_H_
#define MCCL_HOST_ALLOC_H_

#include <stddef.h>
#include <cuda.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab02 Lab 02: host-NUMA pinned memory
 * @brief Host buffers that a device reads and writes directly (the SHM transport's FIFOs in lab 04
 * live in them), as NCCL's ncclCuMemHostAlloc / ncclCuMemHostFree, ncclCudaHostCalloc /
 * ncclCudaHostFree (NCCL 2.28.9 src/include/alloc.h) and ncclCuMemHostEnable
 * (src/misc/cudawrap.cc).
 *
 * Two kinds of pinned host memory:
 * - cuMem host-NUMA: the VMM sequence of lab 01 with the physical allocation on a host NUMA node
 *   (CU_MEM_LOCATION_TYPE_HOST_NUMA); the same virtual address is valid on the host and on the
 *   device, and the allocation can be exported as a POSIX fd like device memory (lab 04).
 * - cudaHostAlloc(cudaHostAllocMapped): page-locked memory with a device alias; cannot be exported.
 *
 * Bad input (NULL output, zero size, size overflow, a pointer of the wrong kind or not an
 * allocation start, a double free) returns mcclInvalidArgument with a WARN naming it; nothing is
 * allocated or written. Driver refusals return mcclUnhandledCudaError after undoing every step.
 * @{
 */

/**
 * @brief The cuMem host gate (NCCL's ncclCuMemHostEnable): MCCL_CUMEM_HOST_ENABLE=0 off; 1 on
 * with a driver >= 12.2; -1 (default) on with a driver >= 12.6. When on, a one-granule
 * cuMemCreate on the host NUMA node is tried at first use; if the driver refuses (containers
 * without NUMA support: get_mempolicy blocked) the gate stays off. Re-reads the parameter on
 * each call; the self-test runs once per process.
 * @return non-zero when host buffers should come from mcclCuMemHostAlloc.
 */
int mcclCuMemHostEnable(void);

/**
 * @brief Allocate pinned host memory with the VMM API on the current device's NUMA node.
 *
 * Location CU_MEM_LOCATION_TYPE_HOST_NUMA with id CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID (0 when it is
 * negative), requested handle type mcclCuMemHandleType (POSIX fd) so lab 04 can export it,
 * size rounded up to the MINIMUM granularity, read/write access for the current device and for
 * the host (a CU_MEM_LOCATION_TYPE_HOST_NUMA access descriptor). The contents are not zeroed.
 *
 * @param[out] ptr      address valid on the host and on the device (written only on success).
 * @param[out] handlep  the physical allocation's handle (owned by the mapping: do not release),
 *                      or NULL; mcclCuMemRetainHandle (lab 01) finds it again from the pointer.
 * @param[in]  size     bytes wanted, > 0.
 * @return mcclSuccess, mcclInvalidArgument, or mcclUnhandledCudaError.
 */
mcclResult_t mcclCuMemHostAlloc(void** ptr, CUmemGenericAllocationHandle* handlep, size_t size);

/**
 * @brief Unmap and release memory from mcclCuMemHostAlloc (NCCL's ncclCuMemHostFree).
 * @param[in] ptr  the address mcclCuMemHostAlloc returned, or NULL (a no-op).
 * @return mcclSuccess; mcclInvalidArgument when ptr is not the start of a live cuMem host
 *         mapping (device memory, cudaHostAlloc memory, interior pointer, double free).
 */
mcclResult_t mcclCuMemHostFree(void* ptr);

/**
 * @brief Zeroed, mapped, page-locked host memory (NCCL's ncclCudaHostCalloc).
 *
 * cudaHostAlloc(cudaHostAllocMapped) then memset 0. The thread's stream-capture mode is
 * exchanged to cudaStreamCaptureModeRelaxed around the call (cudaThreadExchangeStreamCaptureMode)
 * and restored after, so an allocation made while another thread captures a CUDA graph does not
 * invalidate that capture.
 *
 * @param[out] ptr       host address; its device alias is cudaHostGetDevicePointer(ptr), equal to
 *                       ptr with unified addressing. Written only on success.
 * @param[in]  nelem     number of elements, > 0.
 * @param[in]  elemSize  bytes per element, > 0; nelem * elemSize must not overflow.
 * @return mcclSuccess, mcclInvalidArgument, or mcclUnhandledCudaError.
 */
mcclResult_t mcclCudaHostCalloc(void** ptr, size_t nelem, size_t elemSize);

/**
 * @brief Free memory from mcclCudaHostCalloc (cudaFreeHost).
 * @param[in] ptr  the address mcclCudaHostCalloc returned, or NULL (a no-op).
 * @return mcclSuccess; mcclInvalidArgument when cudaFreeHost says ptr is not a live page-locked
 *         allocation (cudaErrorInvalidValue: a double free, malloc memory); mcclUnhandledCudaError.
 */
mcclResult_t mcclCudaHostFree(void* ptr);

/**
 * @brief Zeroed pinned host memory from whichever path the gate picks: mcclCuMemHostAlloc when
 * mcclCuMemHostEnable(), else mcclCudaHostCalloc (the fallback NCCL takes when cuMem host
 * memory is off or refused).
 *
 * @param[out] ptr   address valid on host and device (written only on success).
 * @param[in]  size  bytes wanted, > 0.
 * @return mcclSuccess, mcclInvalidArgument, or mcclUnhandledCudaError.
 *
 * @code
 * void* buf;
 * MCCLCHECK(mcclHostAlloc(&buf, 1 << 20));   // cuMem host-NUMA, or cudaHostAlloc as fallback
 * ((int*)buf)[0] = 42;                        // the host writes ...
 * CUDACHECK(cudaMemcpy(dev, buf, 4, cudaMemcpyDefault));  // ... the device reads
 * MCCLCHECK(mcclHostFree(buf));              // routes by the pointer, not the gate
 * @endcode
 */
mcclResult_t mcclHostAlloc(void** ptr, size_t size);

/**
 * @brief Free memory from mcclHostAlloc. A pointer with a VMM handle (cuMemRetainAllocationHandle
 * succeeds) goes to mcclCuMemHostFree, any other to mcclCudaHostFree.
 * @param[in] ptr  the address mcclHostAlloc returned, or NULL (a no-op).
 * @return mcclSuccess, mcclInvalidArgument, or mcclUnhandledCudaError.
 */
mcclResult_t mcclHostFree(void* ptr);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
