/**
 * @file mccl_ipc.h
 * @brief Lab 03: export a VMM allocation as a shareable handle and import/map it in another process.
 * @ingroup lab03
 */
#ifndef MCCL_IPC_H_
#define MCCL_IPC_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab03
 * @{ */

/** @brief mcclIpcDesc::magic: "MCIP". A descriptor without it is garbage, not a handle. */
#define MCCL_IPC_DESC_MAGIC 0x5049434du
/** @brief Bytes of a fabric handle (CUmemFabricHandle::data). */
#define MCCL_IPC_FABRIC_HANDLE_BYTES 64

/**
 * @brief What an exporter sends an importer to describe one allocation (the role of NCCL's
 * ncclIpcDesc / ncclCuDesc): fixed size, no pointers, safe to copy between processes.
 *
 * With a POSIX-fd handle the descriptor travels with the fd (mcclIpcSocketSendMsg: the descriptor
 * as header, the fd as SCM_RIGHTS); with a fabric handle the descriptor alone is enough.
 */
typedef struct mcclIpcDesc {
  uint32_t magic;       /**< MCCL_IPC_DESC_MAGIC */
  uint32_t handleType;  /**< CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR or CU_MEM_HANDLE_TYPE_FABRIC */
  uint64_t size;        /**< bytes of the physical allocation, a multiple of its granularity */
  int32_t ownerPid;     /**< exporting process (for messages only) */
  int32_t ownerDev;     /**< exporting process's CUDA device ordinal (for messages only) */
  unsigned char fabric[MCCL_IPC_FABRIC_HANDLE_BYTES]; /**< the CUmemFabricHandle; zeros for POSIX fd */
} mcclIpcDesc;

/**
 * @brief Whether a device can export fabric handles (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED).
 *
 * Only what the driver claims: without an IMEX channel the export itself can still be refused,
 * in which case mcclIpcExport falls back to a POSIX fd.
 * @param[in]  cudaDev    device ordinal.
 * @param[out] supported  1 or 0.
 * @return mcclSuccess; mcclInvalidArgument (NULL, bad ordinal); mcclUnhandledCudaError.
 */
mcclResult_t mcclIpcFabricSupported(int cudaDev, int* supported);

/**
 * @brief Export a physical allocation as one handle type (the export half of NCCL's
 * ncclP2pAllocateShareableBuffer and proxyGetFd).
 *
 * @param[in]  handle    a physical allocation (cuMemCreate) created with `type` among its
 *                       requested handle types.
 * @param[in]  size      its size in bytes (what the importer will map), > 0.
 * @param[in]  type      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR or CU_MEM_HANDLE_TYPE_FABRIC.
 * @param[in]  ownerDev  the device it lives on (recorded in the descriptor).
 * @param[out] desc      the descriptor to send.
 * @param[out] fd        POSIX fd: a new descriptor the caller must close once sent; fabric: -1.
 * @return mcclSuccess; mcclInvalidArgument (NULL outputs, zero size, unknown type);
 *         mcclUnhandledCudaError (the driver refused the export, e.g. CUDA_ERROR_NOT_SUPPORTED for
 *         a fabric handle without fabric support). Outputs are written only on success.
 */
mcclResult_t mcclIpcExportHandle(CUmemGenericAllocationHandle handle, size_t size, CUmemAllocationHandleType type,
                                 int ownerDev, mcclIpcDesc* desc, int* fd);

/**
 * @brief Export the allocation that starts at ptr (from lab 01's mcclCuMemAlloc or mcclMemAlloc).
 *
 * The handle type is chosen from the allocation's requested handle types: fabric when requested
 * and the export succeeds, else POSIX fd. The whole mapping is exported (size from
 * cuMemGetAddressRange).
 *
 * @param[in]  ptr   the start of a VMM mapping on this process.
 * @param[out] desc  the descriptor to send.
 * @param[out] fd    POSIX fd (caller closes it once sent) or -1 for fabric.
 * @return mcclSuccess; mcclInvalidArgument (NULL, not the start of a VMM mapping, an allocation
 *         requested with no shareable handle type); mcclUnhandledCudaError.
 */
mcclResult_t mcclIpcExport(const void* ptr, mcclIpcDesc* desc, int* fd);

/**
 * @brief Import a peer's allocation and map it for a local device (NCCL's
 * ncclP2pImportShareableBuffer): cuMemImportFromShareableHandle, cuMemAddressReserve, cuMemMap,
 * cuMemSetAccess(read/write for cudaDev).
 *
 * Acts on desc->handleType alone (it does not ask whether this device could have exported such a
 * handle), so an unsupported type fails where the driver says so. The imported handle is
 * released once mapped: the mapping keeps the memory alive, also after the exporter has freed
 * its side and exited.
 *
 * @param[in]  desc     the descriptor received from the exporter.
 * @param[in]  fd       for POSIX fd, the descriptor received with it; not consumed (close it
 *                      after this call, whatever it returns). Ignored for fabric.
 * @param[in]  cudaDev  the local device that will access the memory.
 * @param[out] ptr      the mapped address (written only on success).
 * @return mcclSuccess; mcclInvalidArgument (NULL, bad magic, unknown handle type, fd not open,
 *         size 0 or not a multiple of the granularity, bad device); mcclUnhandledCudaError
 *         (the driver refused: not a memory handle, size larger than the allocation, fabric not
 *         supported, ...). Nothing stays mapped or reserved on failure.
 *
 * @code
 * // exporter                                  // importer
 * void* buf; mcclIpcDesc desc; int fd;
 * MCCLCHECK(mcclMemAlloc(&buf, size));
 * MCCLCHECK(mcclIpcExport(buf, &desc, &fd));
 * MCCLCHECK(mcclIpcSocketSendMsg(&sock, &desc, sizeof(desc), fd, peer, hash));
 * close(fd);
 *                                              MCCLCHECK(mcclIpcSocketRecvMsg(&sock, &desc, sizeof(desc), &fd));
 *                                              MCCLCHECK(mcclIpcImport(&desc, fd, myDev, &peerBuf));
 *                                              close(fd);
 *                                              // ... cudaMemcpy from/to peerBuf ...
 *                                              MCCLCHECK(mcclIpcUnmap(peerBuf));
 * MCCLCHECK(mcclMemFree(buf));  // any time: the importer's mapping stays valid
 * @endcode
 */
mcclResult_t mcclIpcImport(const mcclIpcDesc* desc, int fd, int cudaDev, void** ptr);

/**
 * @brief Unmap an imported allocation and free its address range; the physical memory goes when
 * the last process unmaps it.
 * @param[in] ptr  an address mcclIpcImport returned, or NULL (a no-op).
 * @return mcclSuccess; mcclInvalidArgument (not an address mcclIpcImport returned, or already unmapped);
 *         mcclUnhandledCudaError. Works whichever device is current.
 */
mcclResult_t mcclIpcUnmap(void* ptr);

/**
 * @brief One reserved range of nRanks slots of `stride` bytes: rank r's buffer is mapped at
 * base + r * stride (the pattern of NCCL 2.28.9's ncclIpcSymmetricInit / ncclIpcMapSymmetric /
 * ncclIpcFreeSymmetric / ncclIpcSymmetricFinalize in src/include/transport.h: one reservation per
 * communicator, handles mapped at offsets in it, so a peer's copy is found by arithmetic). Zero it, or let
 * mcclIpcSymmetricInit fill it; read-only afterwards.
 */
typedef struct mcclIpcSymmetric {
  void* base;    /**< start of the reservation (aligned to gran) */
  size_t stride; /**< bytes per slot: the requested size rounded up to gran */
  size_t gran;   /**< the device's RECOMMENDED granularity (what mcclMemAlloc rounds to) */
  int nRanks;    /**< slots */
  int cudaDev;   /**< the device granted read/write access to every mapping */
} mcclIpcSymmetric;

/**
 * @brief Reserve one address range for nRanks buffers of `size` bytes (NCCL's ncclIpcSymmetricInit).
 * Nothing is mapped yet; touching the range faults until mcclIpcMapSymmetric/ImportSymmetric map it.
 * @param[in]  nRanks   slots, >= 1.
 * @param[in]  size     bytes per slot, > 0; rounded up to the RECOMMENDED granularity (sym->stride).
 * @param[in]  cudaDev  the device that will access the mappings.
 * @param[out] sym      the range; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (NULL sym, nRanks < 1, size 0 or overflowing, bad
 *         device); mcclUnhandledCudaError (no address space).
 */
mcclResult_t mcclIpcSymmetricInit(int nRanks, size_t size, int cudaDev, mcclIpcSymmetric* sym);

/**
 * @brief Map a physical allocation of this process at base + offset (NCCL's ncclIpcMapSymmetric),
 * with read/write access for sym->cudaDev, through lab 01's mcclCuMemMapAndSetAccess.
 * @param[in]  sym     from mcclIpcSymmetricInit.
 * @param[in]  offset  a multiple of sym->gran; usually rank * sym->stride.
 * @param[in]  size    bytes to map (the allocation's size or less, a multiple of its granularity);
 *                     offset + size within the range.
 * @param[in]  handle  the allocation (cuMemCreate, mcclCuMemRetainHandle, or an import); the mapping
 *                     takes its own reference.
 * @param[out] symPtr  base + offset; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (NULL, uninitialized sym, offset or size outside the range or
 *         misaligned); mcclUnhandledCudaError (the driver refused, e.g. that part is already mapped).
 */
mcclResult_t mcclIpcMapSymmetric(mcclIpcSymmetric* sym, size_t offset, size_t size, CUmemGenericAllocationHandle handle,
                                 void** symPtr);

/**
 * @brief Import a peer's exported allocation (as mcclIpcImport) and map it at base + offset of a
 * symmetric range instead of at a fresh address: "map this exported handle at this address".
 * The imported handle is released once mapped, so unmapping frees this side.
 * @param[in]  sym     from mcclIpcSymmetricInit (its cudaDev gets access).
 * @param[in]  offset  a multiple of sym->gran; usually peer * sym->stride.
 * @param[in]  desc    the exporter's descriptor; desc->size bytes are mapped.
 * @param[in]  fd      for POSIX fd, the fd received with it; not consumed. Ignored for fabric.
 * @param[out] symPtr  base + offset; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (as mcclIpcImport, plus a slot outside the range or
 *         misaligned); mcclUnhandledCudaError. Nothing stays mapped on failure.
 *
 * @code
 * mcclIpcSymmetric sym;
 * MCCLCHECK(mcclIpcSymmetricInit(nRanks, size, myDev, &sym));
 * for (int p = 0; p < nRanks; p++)   // descs[p], fds[p]: received from rank p (lab 05's GetFd)
 *   MCCLCHECK(mcclIpcImportSymmetric(&sym, p * sym.stride, &descs[p], fds[p], &peer[p]));
 * // peer[p] == (char*)sym.base + p * sym.stride: a kernel needs only sym.base and sym.stride
 * for (int p = 0; p < nRanks; p++) MCCLCHECK(mcclIpcUnmapSymmetric(&sym, peer[p], descs[p].size));
 * MCCLCHECK(mcclIpcSymmetricFinalize(&sym));
 * @endcode
 */
mcclResult_t mcclIpcImportSymmetric(mcclIpcSymmetric* sym, size_t offset, const mcclIpcDesc* desc, int fd,
                                    void** symPtr);

/**
 * @brief Unmap what mcclIpcMapSymmetric or mcclIpcImportSymmetric mapped; the range stays reserved
 * (NCCL's ncclIpcFreeSymmetric).
 * @param[in] sym     the range.
 * @param[in] symPtr  the address they returned, or NULL (a no-op).
 * @param[in] size    the size that was mapped.
 * @return mcclSuccess; mcclInvalidArgument (outside the range, misaligned); mcclUnhandledCudaError
 *         (nothing mapped there).
 */
mcclResult_t mcclIpcUnmapSymmetric(mcclIpcSymmetric* sym, void* symPtr, size_t size);

/**
 * @brief Free the reservation (NCCL's ncclIpcSymmetricFinalize) and zero sym. Unmap every slot first:
 * the driver refuses to free a range with mappings left (mcclUnhandledCudaError, sym untouched).
 * @param[in,out] sym  the range, or NULL / a zeroed one (a no-op).
 * @return mcclSuccess; mcclUnhandledCudaError.
 */
mcclResult_t mcclIpcSymmetricFinalize(mcclIpcSymmetric* sym);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
