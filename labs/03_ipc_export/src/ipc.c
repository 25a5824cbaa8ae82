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

mcclResult_t mcclIpcImport(const mcclIpcDesc* desc, int fd, int cudaDev, void** ptr) {
  MCCL_ARGCHECK(desc != NULL, "mcclIpcImport: desc is NULL");
  MCCL_ARGCHECK(ptr != NULL, "mcclIpcImport: ptr is NULL");
  MCCL_ARGCHECK(desc->magic == MCCL_IPC_DESC_MAGIC, "mcclIpcImport: desc->magic 0x%x is not 0x%x (not a descriptor)",
                desc->magic, MCCL_IPC_DESC_MAGIC);
  CUmemAllocationHandleType type = (CUmemAllocationHandleType)desc->handleType;
  MCCL_ARGCHECK(type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || type == CU_MEM_HANDLE_TYPE_FABRIC,
                "mcclIpcImport: desc->handleType 0x%x is neither POSIX_FD nor FABRIC", desc->handleType);
  if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    MCCL_ARGCHECK(fd >= 0 && fcntl(fd, F_GETFD) != -1, "mcclIpcImport: fd %d is not an open descriptor", fd);
  MCCL_ARGCHECK(desc->size > 0, "mcclIpcImport: desc->size is 0");
  MCCLCHECK(checkDevice(cudaDev));

  mcclResult_t res = mcclSuccess;
  CUmemGenericAllocationHandle handle;
  CUdeviceptr addr = 0;
  size_t gran = 0, size = (size_t)desc->size;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cudaDev;
  prop.requestedHandleTypes = type;
  CUCHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  MCCL_ARGCHECK(gran > 0 && size % gran == 0,
                "mcclIpcImport: desc->size %zu is not a multiple of device %d's granularity %zu", size, cudaDev, gran);

  if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    // The driver reads the fd; it does not keep it, so the caller may close it right after.
    CUCHECK(cuMemImportFromShareableHandle(&handle, (void*)(uintptr_t)fd, type));
  } else {
    CUCHECK(cuMemImportFromShareableHandle(&handle, (void*)desc->fabric, type));
  }
  CUCHECKGOTO(cuMemAddressReserve(&addr, size, gran, 0, 0), res, release);
  CUCHECKGOTO(cuMemMap(addr, size, 0, handle, 0), res, address_free);
  CUmemAccessDesc access;
  memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = cudaDev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUCHECKGOTO(cuMemSetAccess(addr, size, &access, 1), res, unmap);
  // The mapping holds its own reference to the physical memory; dropping ours now means unmapping
  // is all it takes to free the importer's side.
  CUCHECKGOTO(cuMemRelease(handle), res, unmap_only);
  MCCLCHECKGOTO(rememberMapping(addr, size), res, unmap_only);
  INFO(MCCL_IPC | MCCL_P2P, "imported %s size %zu from pid %d dev %d at %p for dev %d", typeName(type), size,
       desc->ownerPid, desc->ownerDev, (void*)addr, cudaDev);
  *ptr = (void*)addr;
  return mcclSuccess;

unmap_only:
  cuMemUnmap(addr, size);
  cuMemAddressFree(addr, size);
  return res;
unmap:
  cuMemUnmap(addr, size);
address_free:
  cuMemAddressFree(addr, size);
release:
  cuMemRelease(handle);
  return res;
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
