/**
 * @file mccl_alloc.h
 * @brief Lab 01: device memory through the CUDA virtual memory management (VMM) API.
 * @ingroup lab01
 */
#ifndef MCCL_ALLOC_H_
#define MCCL_ALLOC_H_

#include <stddef.h>
#include <cuda.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab01 Lab 01: VMM allocation
 * @brief cuMemCreate / cuMemAddressReserve / cuMemMap / cuMemSetAccess and their reverse, as NCCL's
 * ncclCuMemAlloc, ncclCuMemFree, ncclMemAlloc and ncclMemFree (NCCL 2.28.9 src/include/alloc.h and
 * src/allocator.cc).
 *
 * A VMM allocation is three separate objects: a physical allocation (a handle from cuMemCreate),
 * a range of virtual addresses (cuMemAddressReserve), and the mapping of one onto the other
 * (cuMemMap), which no device may touch until cuMemSetAccess grants it. Splitting them is what
 * lets NCCL export the physical allocation to another process (lab 03) and map it there.
 *
 * Errors common to every call here:
 * - mcclInvalidArgument: a NULL output, a zero size, a size above the device's total memory
 *   (cuDeviceTotalMem), a handle type outside POSIX-fd|fabric, or a pointer to free that is not the
 *   start of a live allocation of the right kind (this includes a double free). A WARN names the
 *   argument and its value; nothing is allocated or written.
 * - mcclUnhandledCudaError: the driver refused a call (e.g. CUDA_ERROR_OUT_OF_MEMORY for a size
 *   that fits the device but not its free memory); everything set up so far is undone.
 * @{
 */

/** @brief Handle type requested by mcclCuMemAlloc's callers for memory they export: POSIX fd, as
 *  NCCL's ncclCuMemHandleType (NCCL switches it to fabric on multi-node NVLink systems). */
extern CUmemAllocationHandleType mcclCuMemHandleType;

/**
 * @brief Whether the driver and the current device support VMM (NCCL's ncclIsCuMemSupported):
 * driver version >= 12.0 and CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED.
 * Computed once per process.
 * @return 1 when supported, 0 otherwise.
 */
int mcclIsCuMemSupported(void);

/**
 * @brief The cuMem gate (NCCL's ncclCuMemEnable): MCCL_CUMEM_ENABLE=1 on, 0 off, -2 (default)
 * mcclIsCuMemSupported(). Re-reads the parameter, so mcclParamResetAll() takes effect.
 * @return non-zero when allocations use the VMM path, 0 when they use cudaMalloc.
 */
int mcclCuMemEnable(void);

/**
 * @brief Allocate device memory on the current device with the VMM API (the internal path).
 *
 * The size is rounded up to the MINIMUM granularity of the allocation; only the current device
 * gets read/write access. The physical allocation is created with `type` as its requested
 * handle types, so it can later be exported with cuMemExportToShareableHandle (lab 03).
 *
 * @param[out] ptr      the mapped device address (written only on success).
 * @param[out] handlep  the physical allocation's handle, or NULL; the mapping holds its own
 *                      reference, so the caller must not cuMemRelease it.
 * @param[in]  type     requested handle types: 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, or
 *                      that or'ed with CU_MEM_HANDLE_TYPE_FABRIC.
 * @param[in]  size     bytes wanted, 1 .. device total memory.
 * @return mcclSuccess, mcclInvalidArgument, or mcclUnhandledCudaError.
 */
mcclResult_t mcclCuMemAlloc(void** ptr, CUmemGenericAllocationHandle* handlep, CUmemAllocationHandleType type,
                            size_t size);

/**
 * @brief Unmap and release a VMM allocation (NCCL's ncclCuMemFree).
 *
 * Finds the mapping from the pointer alone: cuMemGetAddressRange gives its base and size,
 * cuMemRetainAllocationHandle its physical handle; then unmap, release, free the address range.
 * Frees allocations from mcclCuMemAlloc and mcclMemAlloc's VMM path.
 *
 * @param[in] ptr  the address mcclCuMemAlloc returned, or NULL (a no-op).
 * @return mcclSuccess; mcclInvalidArgument when ptr is not the start of a live VMM mapping
 *         (interior pointer, double free, cudaMalloc memory); mcclUnhandledCudaError.
 */
mcclResult_t mcclCuMemFree(void* ptr);

/**
 * @brief Allocate device memory others can map (NCCL's public ncclMemAlloc).
 *
 * With mcclCuMemEnable(): RECOMMENDED granularity; requested handle types POSIX fd, plus fabric
 * when CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED says so (if cuMemCreate then refuses
 * fabric with CUDA_ERROR_NOT_SUPPORTED or CUDA_ERROR_NOT_PERMITTED it is retried with POSIX fd
 * only); read/write access for the owner and every device for which cuDeviceCanAccessPeer is
 * true. Without it: cudaMalloc.
 *
 * @param[out] ptr   the device address (written only on success).
 * @param[in]  size  bytes wanted, 1 .. device total memory.
 * @return mcclSuccess, mcclInvalidArgument, or mcclUnhandledCudaError.
 *
 * @code
 * void* buf;
 * MCCLCHECK(mcclMemAlloc(&buf, 64 << 20));   // on the current device
 * // ... cudaMemcpy to/from buf, from any peer device ...
 * MCCLCHECK(mcclMemFree(buf));               // any current device; routes by the pointer
 * @endcode
 */
mcclResult_t mcclMemAlloc(void** ptr, size_t size);

/**
 * @brief Free memory from mcclMemAlloc (NCCL's ncclMemFree).
 *
 * The owning device comes from cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) and is
 * made current for the free, then the caller's device is restored. The path is chosen by the
 * pointer, not by the gate: memory the driver can give a VMM handle for (cuMemRetainAllocationHandle
 * succeeds) goes to mcclCuMemFree, the rest to cudaFree, so flipping MCCL_CUMEM_ENABLE between an
 * allocation and its free is safe.
 *
 * @param[in] ptr  the address mcclMemAlloc returned, or NULL (a no-op).
 * @return mcclSuccess; mcclInvalidArgument when ptr is not the start of a live allocation;
 *         mcclUnhandledCudaError.
 */
mcclResult_t mcclMemFree(void* ptr);

/**
 * @brief The physical allocation behind a VMM pointer, for export (lab 03) and for host memory
 * (lab 04). Works for device and host-NUMA cuMem allocations, from any address inside them.
 *
 * @param[in]  ptr      an address inside a VMM mapping.
 * @param[out] handlep  its handle, with one extra reference: the caller must cuMemRelease it.
 * @param[out] typesp   the allocation's requested handle types (bitmask), or NULL.
 * @param[out] basep    the start of the mapping, or NULL.
 * @param[out] sizep    the mapping's size (rounded to granularity), or NULL.
 * @return mcclSuccess; mcclInvalidArgument when ptr is not in a VMM mapping; mcclUnhandledCudaError.
 */
mcclResult_t mcclCuMemRetainHandle(const void* ptr, CUmemGenericAllocationHandle* handlep,
                                   CUmemAllocationHandleType* typesp, void** basep, size_t* sizep);

/**
 * @brief Map a physical allocation at an address of a reserved range and grant access (NCCL 2.30's
 * ncclCuMemMapAndSetAccess; 2.28.9 writes the same cuMemMap + cuMemSetAccess out in each allocator).
 *
 * The one place labs 01-04 and lab 03's symmetric mappings map memory. Device-only descriptor lists
 * are granted in one cuMemSetAccess; a list with a host location one descriptor at a time, in order
 * (as NCCL's ncclCuMemHostAlloc grants the device, then the host). On failure the mapping is undone;
 * the range and the handle stay the caller's.
 *
 * @param[in] ptr     inside a range from cuMemAddressReserve, aligned to the allocation's granularity.
 * @param[in] size    bytes to map, a multiple of the granularity, at most the allocation's size.
 * @param[in] handle  the physical allocation (cuMemCreate or cuMemImportFromShareableHandle); the
 *                    mapping takes its own reference.
 * @param[in] descs   the access grants (device and/or host-NUMA locations).
 * @param[in] nDescs  how many, >= 1.
 * @return mcclSuccess; mcclInvalidArgument (NULL ptr or descs, size 0, nDescs < 1);
 *         mcclUnhandledCudaError (the driver refused the map or the grant).
 */
mcclResult_t mcclCuMemMapAndSetAccess(void* ptr, size_t size, CUmemGenericAllocationHandle handle,
                                      const CUmemAccessDesc* descs, int nDescs);

/**
 * @brief Reserve a fresh address range and map a physical allocation there with access
 * (cuMemAddressReserve + mcclCuMemMapAndSetAccess; NCCL's ncclCuMemAllocAddr, which grants the
 * current device only, where this takes the grants as a list).
 *
 * Undo with cuMemUnmap + cuMemAddressFree (mcclCuMemFree does both for device memory).
 * @param[out] ptr     the mapped address; written only on success.
 * @param[in]  handle  the physical allocation.
 * @param[in]  size    bytes to reserve and map, a multiple of the granularity.
 * @param[in]  align   the reservation's alignment (0: the driver's default).
 * @param[in]  descs   the access grants.
 * @param[in]  nDescs  how many, >= 1.
 * @return mcclSuccess; mcclInvalidArgument; mcclUnhandledCudaError (nothing is left reserved).
 */
mcclResult_t mcclCuMemAllocAddr(void** ptr, CUmemGenericAllocationHandle handle, size_t size, size_t align,
                                const CUmemAccessDesc* descs, int nDescs);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
