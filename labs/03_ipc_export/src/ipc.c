// Export and import of VMM allocations: NCCL 2.28.9 src/transport/p2p.cc
// (ncclP2pAllocateShareableBuffer, ncclP2pImportShareableBuffer) and src/proxy.cc (proxyGetFd).
#include "mccl_ipc.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_debug.h"

_Static_assert(sizeof(mcclIpcDesc) == 88, "mcclIpcDesc is a wire format: its size must not change");
_Static_assert(sizeof(CUmemFabricHandle) == MCCL_IPC_FABRIC_HANDLE_BYTES, "fabric handle size");

static const char* typeName(unsigned type) {
  switch (type) {
    case CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: return "POSIX_FD";
    case CU_MEM_HANDLE_TYPE_FABRIC: return "FABRIC";
    default: return "unknown";
  }
}

static mcclResult_t checkDevice(int cudaDev) {
  int count = 0;
  CUDACHECK(cudaGetDeviceCount(&count));
  MCCL_ARGCHECK(cudaDev >= 0 && cudaDev < count, "cudaDev %d not in 0..%d", cudaDev, count - 1);
  return mcclSuccess;
}

mcclResult_t mcclIpcFabricSupported(int cudaDev, int* supported) {
  MCCL_ARGCHECK(supported != NULL, "mcclIpcFabricSupported: supported is NULL");
  MCCLCHECK(checkDevice(cudaDev));
  CUdevice dev;
  int flag = 0;
  CUCHECK(cuDeviceGet(&dev, cudaDev));
  // Old drivers do not know the attribute at all: that means "no", not an error (as NCCL).
  if (cuDeviceGetAttribute(&flag, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev) != CUDA_SUCCESS) flag = 0;
  *supported = flag != 0;
  return mcclSuccess;
}

// The descriptor of an allocation exported as `type`: everything but the fabric bytes.
static void descInit(mcclIpcDesc* d, size_t size, CUmemAllocationHandleType type, int ownerDev) {
  memset(d, 0, sizeof(*d));
  d->magic = MCCL_IPC_DESC_MAGIC;
  d->handleType = (uint32_t)type;
  d->size = size;
  d->ownerPid = (int32_t)getpid();
  d->ownerDev = ownerDev;
}

// Outputs of a successful export; a fabric handle fh (NULL for a POSIX fd) goes into the descriptor.
static mcclResult_t exported(CUmemGenericAllocationHandle handle, size_t size, CUmemAllocationHandleType type,
                             int ownerDev, const CUmemFabricHandle* fh, int outFd, mcclIpcDesc* desc, int* fd) {
  mcclIpcDesc d;
  descInit(&d, size, type, ownerDev);
  if (fh) memcpy(d.fabric, fh, sizeof(*fh));
  INFO(MCCL_IPC | MCCL_ALLOC, "exported handle 0x%llx size %zu dev %d as %s (fd %d)", (unsigned long long)handle, size,
       ownerDev, typeName(type), outFd);
  *desc = d;
  *fd = outFd;
  return mcclSuccess;
}

mcclResult_t mcclIpcExportHandle(CUmemGenericAllocationHandle handle, size_t size, CUmemAllocationHandleType type,
                                 int ownerDev, mcclIpcDesc* desc, int* fd) {
  MCCL_ARGCHECK(desc != NULL, "mcclIpcExportHandle: desc is NULL");
  MCCL_ARGCHECK(fd != NULL, "mcclIpcExportHandle: fd is NULL");
  MCCL_ARGCHECK(size > 0, "mcclIpcExportHandle: size is 0");
  MCCL_ARGCHECK(type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || type == CU_MEM_HANDLE_TYPE_FABRIC,
                "mcclIpcExportHandle: type 0x%x is neither POSIX_FD (0x%x) nor FABRIC (0x%x)", (unsigned)type,
                (unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, (unsigned)CU_MEM_HANDLE_TYPE_FABRIC);
  if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    // The driver gives us a new fd for the allocation; it means nothing in another process until
    // the kernel copies it there over SCM_RIGHTS.
    int outFd = -1;
    CUCHECK(cuMemExportToShareableHandle(&outFd, handle, type, 0));
    return exported(handle, size, type, ownerDev, NULL, outFd, desc, fd);
  }
  // A fabric handle is plain bytes, valid in any process the IMEX service lets in.
  CUmemFabricHandle fh;
  CUCHECK(cuMemExportToShareableHandle(&fh, handle, type, 0));
  return exported(handle, size, type, ownerDev, &fh, -1, desc, fd);
}

mcclResult_t mcclIpcExport(const void* ptr, mcclIpcDesc* desc, int* fd) {
  MCCL_ARGCHECK(ptr != NULL, "mcclIpcExport: ptr is NULL");
  MCCL_ARGCHECK(desc != NULL, "mcclIpcExport: desc is NULL");
  MCCL_ARGCHECK(fd != NULL, "mcclIpcExport: fd is NULL");
  mcclResult_t res = mcclSuccess;
  CUmemGenericAllocationHandle handle;
  CUmemAllocationHandleType types = 0;
  CUmemAllocationProp prop;
  void* base = NULL;
  size_t size = 0;
  MCCLCHECK(mcclCuMemRetainHandle(ptr, &handle, &types, &base, &size));
  if (base != ptr) {
    WARN("Invalid argument: mcclIpcExport: ptr %p is inside the mapping at %p, not its start", ptr, base);
    res = mcclInvalidArgument;
    goto release;
  }
  // EXERCISE(03.export) STUB: res = mcclExerciseStub("03.export");
  memset(&prop, 0, sizeof(prop));
  CUCHECKGOTO(cuMemGetAllocationPropertiesFromHandle(&prop, handle), res, release);
  if (types & CU_MEM_HANDLE_TYPE_FABRIC) {
    // Tried quietly: fabric can be advertised and still refused without an IMEX channel, and then
    // NCCL too falls back to POSIX fds. A refusal is only an error when there is no fallback.
    // The export that succeeds is the one used: exporting again would only ask the driver twice.
    CUmemFabricHandle fh;
    CUresult err = cuMemExportToShareableHandle(&fh, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0);
    if (err == CUDA_SUCCESS) {
      res = exported(handle, size, CU_MEM_HANDLE_TYPE_FABRIC, prop.location.id, &fh, -1, desc, fd);
      goto release;
    }
    if (!(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
      WARN("Cuda failure '%s' in cuMemExportToShareableHandle(FABRIC) of %p, and no POSIX fd fallback",
           mcclCuErrorString(err), ptr);
      res = mcclUnhandledCudaError;
      goto release;
    }
    INFO(MCCL_IPC, "fabric export of %p refused (%s); falling back to a POSIX fd", ptr, mcclCuErrorString(err));
  }
  if (!(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    WARN("Invalid argument: mcclIpcExport: ptr %p was allocated with handle types 0x%x: nothing to export", ptr,
         (unsigned)types);
    res = mcclInvalidArgument;
    goto release;
  }
  res = mcclIpcExportHandle(handle, size, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, prop.location.id, desc, fd);
  // END EXERCISE(03.export)
release:
  // Our retained reference only; the allocation itself stays the caller's.
  cuMemRelease(handle);
  return res;
}

// Mappings made by mcclIpcImport, so mcclIpcUnmap knows their size whatever device is current: the
// driver answers cuMemGetAddressRange only for a device that was granted access to the range.
typedef struct importedMapping {
  CUdeviceptr addr;
  size_t size;
  struct importedMapping* next;
} importedMapping;
static importedMapping* imported = NULL;
static pthread_mutex_t importedLock = PTHREAD_MUTEX_INITIALIZER;

static mcclResult_t rememberMapping(CUdeviceptr addr, size_t size) {
  importedMapping* m = malloc(sizeof(*m));
  if (m == NULL) {
    WARN("mcclIpcImport: out of memory recording the mapping at %p", (void*)addr);
    return mcclSystemError;
  }
  m->addr = addr;
  m->size = size;
  pthread_mutex_lock(&importedLock);
  m->next = imported;
  imported = m;
  pthread_mutex_unlock(&importedLock);
  return mcclSuccess;
}

// Removes and returns the size of the mapping starting at addr; 0 if there is none.
static size_t forgetMapping(CUdeviceptr addr) {
  size_t size = 0;
  pthread_mutex_lock(&importedLock);
  for (importedMapping** pm = &imported; *pm; pm = &(*pm)->next)
    if ((*pm)->addr == addr) {
      importedMapping* m = *pm;
      size = m->size;
      *pm = m->next;
      free(m);
      break;
    }
  pthread_mutex_unlock(&importedLock);
  return size;
}

// Check a received descriptor (and its fd) and import its handle: the first half of both
// mcclIpcImport and mcclIpcImportSymmetric. `fn` names the caller in messages. On success the caller
// owns one reference to *handlep and has the allocation's size and the device's granularity.
static mcclResult_t importHandle(const char* fn, const mcclIpcDesc* desc, int fd, int cudaDev,
                                 CUmemGenericAllocationHandle* handlep, size_t* sizep, size_t* granp) {
  MCCL_ARGCHECK(desc != NULL, "%s: desc is NULL", fn);
  MCCL_ARGCHECK(desc->magic == MCCL_IPC_DESC_MAGIC, "%s: desc->magic 0x%x is not 0x%x (not a descriptor)", fn,
                desc->magic, MCCL_IPC_DESC_MAGIC);
  CUmemAllocationHandleType type = (CUmemAllocationHandleType)desc->handleType;
  MCCL_ARGCHECK(type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || type == CU_MEM_HANDLE_TYPE_FABRIC,
                "%s: desc->handleType 0x%x is neither POSIX_FD nor FABRIC", fn, desc->handleType);
  if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    MCCL_ARGCHECK(fd >= 0 && fcntl(fd, F_GETFD) != -1, "%s: fd %d is not an open descriptor", fn, fd);
  MCCL_ARGCHECK(desc->size > 0, "%s: desc->size is 0", fn);
  MCCLCHECK(checkDevice(cudaDev));

  size_t gran = 0, size = (size_t)desc->size;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cudaDev;
  prop.requestedHandleTypes = type;
  CUCHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  MCCL_ARGCHECK(gran > 0 && size % gran == 0, "%s: desc->size %zu is not a multiple of device %d's granularity %zu", fn,
                size, cudaDev, gran);
  if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    // The driver reads the fd; it does not keep it, so the caller may close it right after.
    CUCHECK(cuMemImportFromShareableHandle(handlep, (void*)(uintptr_t)fd, type));
  } else {
    CUCHECK(cuMemImportFromShareableHandle(handlep, (void*)desc->fabric, type));
  }
  *sizep = size;
  *granp = gran;
  return mcclSuccess;
}

static void deviceAccess(int cudaDev, CUmemAccessDesc* access) {
  memset(access, 0, sizeof(*access));
  access->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access->location.id = cudaDev;
  access->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

mcclResult_t mcclIpcImport(const mcclIpcDesc* desc, int fd, int cudaDev, void** ptr) {
  MCCL_ARGCHECK(ptr != NULL, "mcclIpcImport: ptr is NULL");
  mcclResult_t res = mcclSuccess;
  CUmemGenericAllocationHandle handle;
  size_t gran = 0, size = 0;
  MCCLCHECK(importHandle("mcclIpcImport", desc, fd, cudaDev, &handle, &size, &gran));
  // EXERCISE(03.import)
  CUmemAccessDesc access;
  deviceAccess(cudaDev, &access);
  void* mapped = NULL;
  MCCLCHECKGOTO(mcclCuMemAllocAddr(&mapped, handle, size, gran, &access, 1), res, release);
  CUdeviceptr addr = (CUdeviceptr)mapped;
  // The mapping holds its own reference to the physical memory; dropping ours now means unmapping
  // is all it takes to free the importer's side.
  CUCHECKGOTO(cuMemRelease(handle), res, unmap_only);
  MCCLCHECKGOTO(rememberMapping(addr, size), res, unmap_only);
  INFO(MCCL_IPC | MCCL_P2P, "imported %s size %zu from pid %d dev %d at %p for dev %d", typeName(desc->handleType),
       size, desc->ownerPid, desc->ownerDev, (void*)addr, cudaDev);
  *ptr = (void*)addr;
  return mcclSuccess;

unmap_only:
  cuMemUnmap(addr, size);
  cuMemAddressFree(addr, size);
  return res;
release:
  cuMemRelease(handle);
  return res;
  // END EXERCISE(03.import)
}

mcclResult_t mcclIpcUnmap(void* ptr) {
  if (ptr == NULL) return mcclSuccess;
  CUdeviceptr base = (CUdeviceptr)ptr;
  size_t size = forgetMapping(base);
  if (size == 0) {
    WARN("Invalid argument: mcclIpcUnmap: ptr %p is not a mapping returned by mcclIpcImport", ptr);
    return mcclInvalidArgument;
  }
  CUCHECK(cuMemUnmap(base, size));
  CUCHECK(cuMemAddressFree(base, size));
  TRACE(MCCL_IPC, "unmapped imported %p size %zu", ptr, size);
  return mcclSuccess;
}

// ---- symmetric mappings: one range, every rank's buffer at rank * stride ---------------------
// NCCL 2.28.9 declares ncclIpcSymmetricInit / ncclIpcMapSymmetric / ncclIpcFreeSymmetric /
// ncclIpcSymmetricFinalize in src/include/transport.h: one reservation per communicator, each memory
// handle mapped at an offset in it, so a peer's copy of a buffer is found by arithmetic.

// The device's RECOMMENDED granularity: what mcclMemAlloc rounds to, so its buffers fit slots exactly.
static mcclResult_t symGranularity(int cudaDev, size_t* gran) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cudaDev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUCHECK(cuMemGetAllocationGranularity(gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  if (*gran == 0) *gran = 1;
  return mcclSuccess;
}

mcclResult_t mcclIpcSymmetricInit(int nRanks, size_t size, int cudaDev, mcclIpcSymmetric* sym) {
  MCCL_ARGCHECK(sym != NULL, "mcclIpcSymmetricInit: sym is NULL");
  MCCL_ARGCHECK(nRanks >= 1, "mcclIpcSymmetricInit: nRanks %d < 1", nRanks);
  MCCL_ARGCHECK(size > 0, "mcclIpcSymmetricInit: size is 0");
  MCCLCHECK(checkDevice(cudaDev));
  size_t gran = 0;
  MCCLCHECK(symGranularity(cudaDev, &gran));
  MCCL_ARGCHECK(size <= (SIZE_MAX - gran) / (size_t)nRanks, "mcclIpcSymmetricInit: size %zu x nRanks %d overflows",
                size, nRanks);
  size_t stride = (size + gran - 1) / gran * gran;
  CUdeviceptr base = 0;
  CUCHECK(cuMemAddressReserve(&base, stride * (size_t)nRanks, gran, 0, 0));
  sym->base = (void*)base;
  sym->stride = stride;
  sym->nRanks = nRanks;
  sym->cudaDev = cudaDev;
  sym->gran = gran;
  INFO(MCCL_IPC, "symmetric range %p: %d slots of %zu bytes for dev %d", sym->base, nRanks, stride, cudaDev);
  return mcclSuccess;
}

// offset/size must name granularity-aligned bytes inside the reservation.
static mcclResult_t symCheckSlot(const char* fn, const mcclIpcSymmetric* sym, size_t offset, size_t size) {
  MCCL_ARGCHECK(sym != NULL && sym->base != NULL, "%s: sym is NULL or not initialized", fn);
  size_t total = sym->stride * (size_t)sym->nRanks;
  MCCL_ARGCHECK(size > 0 && offset < total && size <= total - offset,
                "%s: offset %zu + size %zu is outside the %zu-byte symmetric range", fn, offset, size, total);
  MCCL_ARGCHECK(offset % sym->gran == 0, "%s: offset %zu is not a multiple of the granularity %zu", fn, offset,
                sym->gran);
  return mcclSuccess;
}

mcclResult_t mcclIpcMapSymmetric(mcclIpcSymmetric* sym, size_t offset, size_t size, CUmemGenericAllocationHandle handle,
                                 void** symPtr) {
  MCCL_ARGCHECK(symPtr != NULL, "mcclIpcMapSymmetric: symPtr is NULL");
  MCCLCHECK(symCheckSlot("mcclIpcMapSymmetric", sym, offset, size));
  // EXERCISE(03.symmetric)
  CUmemAccessDesc access;
  deviceAccess(sym->cudaDev, &access);
  void* ptr = (char*)sym->base + offset;
  MCCLCHECK(mcclCuMemMapAndSetAccess(ptr, size, handle, &access, 1));
  TRACE(MCCL_IPC, "symmetric map handle 0x%llx size %zu at %p (offset %zu)", (unsigned long long)handle, size, ptr,
        offset);
  *symPtr = ptr;
  return mcclSuccess;
  // END EXERCISE(03.symmetric)
}

mcclResult_t mcclIpcImportSymmetric(mcclIpcSymmetric* sym, size_t offset, const mcclIpcDesc* desc, int fd,
                                    void** symPtr) {
  MCCL_ARGCHECK(symPtr != NULL, "mcclIpcImportSymmetric: symPtr is NULL");
  MCCL_ARGCHECK(sym != NULL && sym->base != NULL, "mcclIpcImportSymmetric: sym is NULL or not initialized");
  MCCL_ARGCHECK(desc != NULL, "mcclIpcImportSymmetric: desc is NULL");
  MCCLCHECK(symCheckSlot("mcclIpcImportSymmetric", sym, offset, (size_t)desc->size));
  CUmemGenericAllocationHandle handle;
  size_t size = 0, gran = 0;
  MCCLCHECK(importHandle("mcclIpcImportSymmetric", desc, fd, sym->cudaDev, &handle, &size, &gran));
  // The mapping takes its own reference; ours goes whatever happened, so unmapping frees this side.
  mcclResult_t res = mcclIpcMapSymmetric(sym, offset, size, handle, symPtr);
  CUresult cr = cuMemRelease(handle);
  if (res == mcclSuccess && cr != CUDA_SUCCESS) {
    WARN("Cuda failure '%s' in cuMemRelease of an imported handle", mcclCuErrorString(cr));
    cuMemUnmap((CUdeviceptr)*symPtr, size);
    return mcclUnhandledCudaError;
  }
  if (res == mcclSuccess)
    INFO(MCCL_IPC | MCCL_P2P, "imported %s size %zu from pid %d dev %d at %p (symmetric offset %zu)",
         typeName(desc->handleType), size, desc->ownerPid, desc->ownerDev, *symPtr, offset);
  return res;
}

mcclResult_t mcclIpcUnmapSymmetric(mcclIpcSymmetric* sym, void* symPtr, size_t size) {
  if (symPtr == NULL) return mcclSuccess;
  MCCL_ARGCHECK(sym != NULL && sym->base != NULL, "mcclIpcUnmapSymmetric: sym is NULL or not initialized");
  MCCL_ARGCHECK((uintptr_t)symPtr >= (uintptr_t)sym->base, "mcclIpcUnmapSymmetric: symPtr %p is below the range at %p",
                symPtr, sym->base);
  MCCLCHECK(symCheckSlot("mcclIpcUnmapSymmetric", sym, (size_t)((uintptr_t)symPtr - (uintptr_t)sym->base), size));
  CUCHECK(cuMemUnmap((CUdeviceptr)symPtr, size));
  return mcclSuccess;
}

mcclResult_t mcclIpcSymmetricFinalize(mcclIpcSymmetric* sym) {
  if (sym == NULL || sym->base == NULL) return mcclSuccess;
  // The driver refuses to free a range that still has mappings: unmapping them is the caller's job.
  CUCHECK(cuMemAddressFree((CUdeviceptr)sym->base, sym->stride * (size_t)sym->nRanks));
  memset(sym, 0, sizeof(*sym));
  return mcclSuccess;
}
