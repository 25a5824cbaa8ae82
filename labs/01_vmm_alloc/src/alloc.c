// Lab 01: VMM device allocations, as NCCL 2.28.9's ncclCuMemAlloc/ncclCuMemFree (src/include/alloc.h),
// ncclMemAlloc/ncclMemFree (src/allocator.cc) and ncclIsCuMemSupported/ncclCuMemEnable
// (src/misc/cudawrap.cc).
#include <pthread.h>
#include <stdlib.h>
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"

CUmemAllocationHandleType mcclCuMemHandleType = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

static const unsigned kKnownHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;

static size_t alignUp(size_t size, size_t gran) {
  return (size + gran - 1) / gran * gran;
}

// ---- the cuMem gate --------------------------------------------------------------------------

static pthread_once_t supportedOnce = PTHREAD_ONCE_INIT;
static int cuMemSupported = 0;

// Why the driver version matters: before 12.0 a VMM allocation could not be mapped for devices
// hidden by CUDA_VISIBLE_DEVICES, so NCCL refuses cuMem on older drivers.
static void detectCuMem(void) {
  int driverVersion = 0, cudaDev = 0, flag = 0;
  CUdevice dev;
  if (cudaDriverGetVersion(&driverVersion) != cudaSuccess || driverVersion < 12000) {
    INFO(MCCL_INIT | MCCL_ALLOC, "cuMem disabled: driver version %d < 12000", driverVersion);
    return;
  }
  if (cudaGetDevice(&cudaDev) != cudaSuccess || cuDeviceGet(&dev, cudaDev) != CUDA_SUCCESS) return;
  if (cuDeviceGetAttribute(&flag, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS) return;
  cuMemSupported = flag != 0;
  INFO(MCCL_INIT | MCCL_ALLOC, "cuMem %ssupported (driver %d, device %d VMM attribute %d)",
       cuMemSupported ? "" : "not ", driverVersion, cudaDev, flag);
}

int mcclIsCuMemSupported(void) {
  pthread_once(&supportedOnce, detectCuMem);
  return cuMemSupported;
}

int mcclCuMemEnable(void) {
  int64_t param = mcclParamCumemEnable();
  if (param >= 0) return param != 0;
  return param == -2 && mcclIsCuMemSupported();
}

// ---- shared checks -----------------------------------------------------------------------------

// A request larger than the whole device is a caller error, not a driver one: say so plainly
// instead of passing it on and reporting CUDA_ERROR_OUT_OF_MEMORY (or an overflowed rounding).
static mcclResult_t checkFitsDevice(int cudaDev, size_t size) {
  CUdevice dev;
  size_t total = 0;
  CUCHECK(cuDeviceGet(&dev, cudaDev));
  CUCHECK(cuDeviceTotalMem(&total, dev));
  MCCL_ARGCHECK(size <= total, "size %zu is larger than device %d's total memory %zu", size, cudaDev, total);
  return mcclSuccess;
}

// NCCL 2.30's ncclCuMemMapAndSetAccess (src/include/alloc.h); 2.28.9 writes the same two calls out in
// ncclCuMemAlloc, ncclCuMemHostAlloc and ncclCuMemAllocAddr. Grants to devices only go in one call, so
// the driver updates every device's page tables at once; a list with a host location is granted one
// descriptor at a time, in order, as ncclCuMemHostAlloc grants the device and then the host.
mcclResult_t mcclCuMemMapAndSetAccess(void* ptr, size_t size, CUmemGenericAllocationHandle handle,
                                      const CUmemAccessDesc* descs, int nDescs) {
  mcclResult_t res = mcclSuccess;
  MCCL_ARGCHECK(ptr != NULL, "mcclCuMemMapAndSetAccess: ptr is NULL");
  MCCL_ARGCHECK(size > 0, "mcclCuMemMapAndSetAccess: size is 0");
  MCCL_ARGCHECK(descs != NULL && nDescs > 0, "mcclCuMemMapAndSetAccess: descs %p, nDescs %d (need at least one)",
                (const void*)descs, nDescs);
  // EXERCISE(01.map_access)
  int devicesOnly = 1;
  for (int i = 0; i < nDescs; i++) devicesOnly &= descs[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  CUCHECK(cuMemMap((CUdeviceptr)ptr, size, 0, handle, 0));
  if (devicesOnly) {
    CUCHECKGOTO(cuMemSetAccess((CUdeviceptr)ptr, size, descs, (size_t)nDescs), res, unmap);
  } else {
    for (int i = 0; i < nDescs; i++) CUCHECKGOTO(cuMemSetAccess((CUdeviceptr)ptr, size, &descs[i], 1), res, unmap);
  }
  return mcclSuccess;
unmap:
  cuMemUnmap((CUdeviceptr)ptr, size);
  return res;
  // END EXERCISE(01.map_access)
}

mcclResult_t mcclCuMemAllocAddr(void** ptr, CUmemGenericAllocationHandle handle, size_t size, size_t align,
                                const CUmemAccessDesc* descs, int nDescs) {
  mcclResult_t res = mcclSuccess;
  CUdeviceptr addr = 0;
  MCCL_ARGCHECK(ptr != NULL, "mcclCuMemAllocAddr: ptr is NULL");
  MCCL_ARGCHECK(size > 0, "mcclCuMemAllocAddr: size is 0");
  CUCHECK(cuMemAddressReserve(&addr, size, align, 0, 0));
  MCCLCHECKGOTO(mcclCuMemMapAndSetAccess((void*)addr, size, handle, descs, nDescs), res, addressFree);
  *ptr = (void*)addr;
  return mcclSuccess;
addressFree:
  cuMemAddressFree(addr, size);
  return res;
}

// ---- internal path: minimum granularity, local access ------------------------------------------

mcclResult_t mcclCuMemAlloc(void** ptr, CUmemGenericAllocationHandle* handlep, CUmemAllocationHandleType type,
                            size_t size) {
  mcclResult_t res = mcclSuccess;
  int cudaDev = 0, flag = 0;
  CUdevice dev;
  size_t gran = 0;
  CUmemAllocationProp prop = {0};
  CUmemAccessDesc desc = {0};
  CUmemGenericAllocationHandle handle;

  MCCL_ARGCHECK(ptr != NULL, "ptr is NULL");
  MCCL_ARGCHECK(size > 0, "size is 0");
  MCCL_ARGCHECK(((unsigned)type & ~kKnownHandleTypes) == 0,
                "type 0x%x is not a combination of POSIX fd (0x%x) and fabric (0x%x)", (unsigned)type,
                (unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, (unsigned)CU_MEM_HANDLE_TYPE_FABRIC);
  CUDACHECK(cudaGetDevice(&cudaDev));
  CUDACHECK(cudaSetDevice(cudaDev));  // makes the primary context current for the driver calls below
  MCCLCHECK(checkFitsDevice(cudaDev, size));
  CUCHECK(cuDeviceGet(&dev, cudaDev));

  // EXERCISE(01.cumem_alloc)
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = type;
  // RDMA-capable memory lets a NIC read it directly (GPUDirect RDMA); ask when the device can.
  CUCHECK(cuDeviceGetAttribute(&flag, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev));
  if (flag) prop.allocFlags.gpuDirectRDMACapable = 1;
  CUCHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t alignedSize = alignUp(size, gran);

  CUCHECK(cuMemCreate(&handle, alignedSize, &prop, 0));
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = dev;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  MCCLCHECKGOTO(mcclCuMemAllocAddr(ptr, handle, alignedSize, gran, &desc, 1), res, release);
  if (handlep) *handlep = handle;
  TRACE(MCCL_ALLOC, "CuMem Alloc size %zu (asked %zu, granularity %zu) pointer %p handle 0x%llx dev %d", alignedSize,
        size, gran, *ptr, (unsigned long long)handle, cudaDev);
  return mcclSuccess;
release:
  cuMemRelease(handle);
  return res;
  // END EXERCISE(01.cumem_alloc)
}

// The mapping that holds ptr: its physical handle (retained: the caller releases it), start and
// size. cuMemGetAddressRange gives the size, and the start for device memory; for host-NUMA
// mappings real drivers (580, CUDA 13) report the size but a base of 0. Then we walk back one
// granule at a time (mappings start on a granule boundary) while cuMemRetainAllocationHandle
// still names the same physical allocation.
static mcclResult_t mappingOf(const void* ptr, CUmemGenericAllocationHandle* handlep, CUdeviceptr* basep,
                              size_t* sizep) {
  mcclResult_t res = mcclSuccess;
  CUdeviceptr base = 0;
  size_t size = 0, gran = 0;
  CUmemGenericAllocationHandle handle, other;
  CUmemAllocationProp prop = {0};
  if (cuMemGetAddressRange(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS) {
    WARN("Invalid argument: ptr %p is not a live allocation (never allocated, or already freed)", ptr);
    return mcclInvalidArgument;
  }
  if (cuMemRetainAllocationHandle(&handle, (void*)ptr) != CUDA_SUCCESS) {
    WARN("Invalid argument: ptr %p is not a VMM (cuMem) allocation", ptr);
    return mcclInvalidArgument;
  }
  if (base == 0) {
    CUCHECKGOTO(cuMemGetAllocationPropertiesFromHandle(&prop, handle), res, release);
    CUCHECKGOTO(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), res, release);
    base = (CUdeviceptr)ptr / gran * gran;
    for (size_t walked = gran; walked < size && base >= gran; walked += gran) {
      if (cuMemRetainAllocationHandle(&other, (void*)(base - gran)) != CUDA_SUCCESS) break;
      int same = other == handle;
      CUCHECKGOTO(cuMemRelease(other), res, release);
      if (!same) break;
      base -= gran;
    }
  }
  *handlep = handle;
  *basep = base;
  *sizep = size;
  return mcclSuccess;
release:
  cuMemRelease(handle);
  return res;
}

mcclResult_t mcclCuMemFree(void* ptr) {
  CUmemGenericAllocationHandle handle;
  size_t size = 0;
  CUdeviceptr base = 0;
  if (ptr == NULL) return mcclSuccess;
  MCCLCHECK(mappingOf(ptr, &handle, &base, &size));
  // Drop the reference mappingOf took: we only wanted the handle's value; the mapping keeps the
  // allocation alive until the unmap below.
  CUCHECK(cuMemRelease(handle));
  if (base != (CUdeviceptr)ptr) {
    WARN("Invalid argument: ptr %p is inside the allocation at 0x%llx (size %zu), not its start", ptr,
         (unsigned long long)base, size);
    return mcclInvalidArgument;
  }
  // EXERCISE(01.cumem_free)
  TRACE(MCCL_ALLOC, "CuMem Free size %zu pointer %p handle 0x%llx", size, ptr, (unsigned long long)handle);
  // Reverse of the allocation: the mapping goes first (it holds a reference to the handle), then
  // our own reference, which frees the physical memory, then the virtual range.
  CUCHECK(cuMemUnmap((CUdeviceptr)ptr, size));
  CUCHECK(cuMemRelease(handle));
  CUCHECK(cuMemAddressFree((CUdeviceptr)ptr, size));
  return mcclSuccess;
  // END EXERCISE(01.cumem_free)
}

mcclResult_t mcclCuMemRetainHandle(const void* ptr, CUmemGenericAllocationHandle* handlep,
                                   CUmemAllocationHandleType* typesp, void** basep, size_t* sizep) {
  mcclResult_t res = mcclSuccess;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUmemGenericAllocationHandle handle;
  CUmemAllocationProp prop = {0};
  MCCL_ARGCHECK(ptr != NULL, "ptr is NULL");
  MCCL_ARGCHECK(handlep != NULL, "handlep is NULL");
  MCCLCHECK(mappingOf(ptr, &handle, &base, &size));
  if (typesp) CUCHECKGOTO(cuMemGetAllocationPropertiesFromHandle(&prop, handle), res, release);
  *handlep = handle;
  if (typesp) *typesp = prop.requestedHandleTypes;
  if (basep) *basep = (void*)base;
  if (sizep) *sizep = size;
  return mcclSuccess;
release:
  cuMemRelease(handle);
  return res;
}

// ---- public path: recommended granularity, every peer, exportable ------------------------------

static mcclResult_t memAllocVmm(int cudaDev, size_t size, void** ptr) {
  mcclResult_t res = mcclSuccess;
  CUdevice dev;
  int flag = 0, dcnt = 0, nDescs = 0;
  size_t gran = 0;
  CUmemAllocationProp prop = {0};
  CUmemAccessDesc* descs = NULL;
  CUmemGenericAllocationHandle handle;
  unsigned types = mcclCuMemHandleType;

  CUCHECK(cuDeviceGet(&dev, cudaDev));
  // Fabric handles let memory be imported across nodes of an NVLink domain (MNNVL); ask for them
  // only where the device says it can, and still be ready for the driver to refuse.
  (void)cuDeviceGetAttribute(&flag, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev);
  if (flag) types |= CU_MEM_HANDLE_TYPE_FABRIC;
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = (CUmemAllocationHandleType)types;
  flag = 0;
  CUCHECK(cuDeviceGetAttribute(&flag, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev));
  if (flag) prop.allocFlags.gpuDirectRDMACapable = 1;
  // RECOMMENDED, not MINIMUM: user buffers are large and long-lived, and the recommended
  // granularity is what gives the best mapping (page size) performance.
  CUCHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CUDACHECK(cudaGetDeviceCount(&dcnt));
  size_t alignedSize = alignUp(size, gran);

  CUresult err = cuMemCreate(&handle, alignedSize, &prop, 0);
  if ((types & CU_MEM_HANDLE_TYPE_FABRIC) && (err == CUDA_ERROR_NOT_PERMITTED || err == CUDA_ERROR_NOT_SUPPORTED)) {
    // Fabric needs IMEX channels; without them the driver refuses. POSIX fd alone still works
    // within a node, which is all single-node NCCL needs.
    INFO(MCCL_ALLOC, "cuMemCreate with fabric handles refused (%s); retrying with POSIX fd only",
         mcclCuErrorString(err));
    types &= ~(unsigned)CU_MEM_HANDLE_TYPE_FABRIC;
    prop.requestedHandleTypes = (CUmemAllocationHandleType)types;
    err = cuMemCreate(&handle, alignedSize, &prop, 0);
  }
  if (err != CUDA_SUCCESS) {
    WARN("Cuda failure '%s' in cuMemCreate(size %zu, handle types 0x%x, device %d)", mcclCuErrorString(err),
         alignedSize, types, cudaDev);
    return mcclUnhandledCudaError;
  }

  // EXERCISE(01.peer_access)
  descs = calloc((size_t)dcnt, sizeof(*descs));
  if (descs == NULL) {
    WARN("Failed to allocate %d access descriptors", dcnt);
    res = mcclSystemError;
    goto release;
  }
  for (int i = 0; i < dcnt; i++) {
    int p2p = 0;
    CUdevice peer;
    CUCHECKGOTO(cuDeviceGet(&peer, i), res, freeDescs);
    if (i != cudaDev && (cuDeviceCanAccessPeer(&p2p, peer, dev) != CUDA_SUCCESS || !p2p)) {
      INFO(MCCL_ALLOC, "P2P not supported between GPU%d and GPU%d: no access descriptor", cudaDev, i);
      continue;
    }
    descs[nDescs].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    descs[nDescs].location.id = peer;
    descs[nDescs].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    nDescs++;
  }
  // Devices only: mcclCuMemMapAndSetAccess grants them in one cuMemSetAccess.
  MCCLCHECKGOTO(mcclCuMemAllocAddr(ptr, handle, alignedSize, gran, descs, nDescs), res, freeDescs);
  free(descs);
  INFO(MCCL_ALLOC,
       "MemAlloc cuMem size %zu (asked %zu, granularity %zu) pointer %p dev %d handle types 0x%x, %d devices "
       "have access",
       alignedSize, size, gran, *ptr, cudaDev, types, nDescs);
  return mcclSuccess;
freeDescs:
  free(descs);
release:
  cuMemRelease(handle);
  return res;
  // END EXERCISE(01.peer_access)
}

mcclResult_t mcclMemAlloc(void** ptr, size_t size) {
  int cudaDev = 0;
  void* p = NULL;
  MCCL_ARGCHECK(ptr != NULL, "ptr is NULL");
  MCCL_ARGCHECK(size > 0, "size is 0");
  CUDACHECK(cudaGetDevice(&cudaDev));
  CUDACHECK(cudaSetDevice(cudaDev));
  MCCLCHECK(checkFitsDevice(cudaDev, size));
  if (mcclCuMemEnable()) {
    MCCLCHECK(memAllocVmm(cudaDev, size, &p));
  } else {
    CUDACHECK(cudaMalloc(&p, size));
    INFO(MCCL_ALLOC, "MemAlloc cudaMalloc size %zu pointer %p dev %d", size, p, cudaDev);
  }
  *ptr = p;
  return mcclSuccess;
}

mcclResult_t mcclMemFree(void* ptr) {
  mcclResult_t res = mcclSuccess;
  int saveDev = 0, ptrDev = 0;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUmemGenericAllocationHandle handle;
  if (ptr == NULL) return mcclSuccess;
  CUDACHECK(cudaGetDevice(&saveDev));
  if (cuPointerGetAttribute(&ptrDev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)ptr) != CUDA_SUCCESS ||
      cuMemGetAddressRange(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS) {
    WARN("Invalid argument: ptr %p is not a live device allocation (never allocated, or already freed)", ptr);
    return mcclInvalidArgument;
  }
  MCCL_ARGCHECK(base == (CUdeviceptr)ptr, "ptr %p is inside the allocation at 0x%llx (size %zu), not its start", ptr,
                (unsigned long long)base, size);
  // The owning device must be current: cudaFree and the VMM calls act in its context.
  CUDACHECK(cudaSetDevice(ptrDev));
  // Route by what the memory is, not by today's MCCL_CUMEM_ENABLE: only a VMM mapping has a
  // handle to retain.
  if (cuMemRetainAllocationHandle(&handle, ptr) == CUDA_SUCCESS) {
    CUCHECKGOTO(cuMemRelease(handle), res, restore);
    MCCLCHECKGOTO(mcclCuMemFree(ptr), res, restore);
  } else {
    CUDACHECKGOTO(cudaFree(ptr), res, restore);
  }
  TRACE(MCCL_ALLOC, "MemFree pointer %p dev %d", ptr, ptrDev);
restore:
  CUDACHECK(cudaSetDevice(saveDev));
  return res;
}
