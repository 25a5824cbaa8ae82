// Lab 02: pinned host memory, as NCCL 2.28.9's ncclCuMemHostAlloc/ncclCuMemHostFree and
// ncclCudaHostCalloc/ncclCudaHostFree (src/include/alloc.h) and ncclCuMemHostEnable
// (src/misc/cudawrap.cc).
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_host_alloc.h"
#include "mccl_param.h"

static size_t alignUp(size_t size, size_t gran) {
  return (size + gran - 1) / gran * gran;
}

// The host NUMA node closest to the current device. -1 means the system has no NUMA
// information; node 0 is then the only node there is.
static mcclResult_t hostNumaProp(int* cudaDevp, CUmemAllocationProp* prop) {
  int cudaDev = 0, numaId = -1;
  CUdevice dev;
  CUDACHECK(cudaGetDevice(&cudaDev));
  CUDACHECK(cudaSetDevice(cudaDev));  // primary context current for the driver calls that follow
  CUCHECK(cuDeviceGet(&dev, cudaDev));
  // EXERCISE(02.numa_prop)
  CUCHECK(cuDeviceGetAttribute(&numaId, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
  if (numaId < 0) numaId = 0;
  memset(prop, 0, sizeof(*prop));
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop->location.id = numaId;
  prop->requestedHandleTypes = mcclCuMemHandleType;  // so lab 04 can export it as an fd
  *cudaDevp = cudaDev;
  return mcclSuccess;
  // END EXERCISE(02.numa_prop)
}

// ---- the gate and its self-test ---------------------------------------------------------------

static pthread_mutex_t selfTestLock = PTHREAD_MUTEX_INITIALIZER;
static int selfTestDone = 0;
static int driverVersion = 0;
static int selfTestPassed = 0;

// The driver can advertise cuMem host memory and still refuse it: Docker, for one, blocks
// get_mempolicy unless run with --cap-add SYS_NICE. One granule tells us before any real buffer
// depends on it. Runs once per process, under selfTestLock, except that an exercise stub on its path
// (mcclNotImplemented) is no verdict about the system: it is not kept, so every caller meets the stub
// and reports it, rather than every caller after the first seeing memory that is "refused here".
static void hostSelfTest(void) {
  int cudaDev = 0;
  size_t gran = 0;
  CUmemAllocationProp prop;
  CUmemGenericAllocationHandle handle;
  selfTestDone = 1;
  if (cudaDriverGetVersion(&driverVersion) != cudaSuccess) driverVersion = 0;
  if (driverVersion < 12020) return;
  mcclResult_t res = hostNumaProp(&cudaDev, &prop);
  if (res == mcclNotImplemented) selfTestDone = 0;
  if (res != mcclSuccess) return;
  if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return;
  CUresult err = cuMemCreate(&handle, alignUp(1, gran), &prop, 0);
  if (err != CUDA_SUCCESS) {
    INFO(MCCL_INIT | MCCL_ALLOC,
         "cuMem host allocations do not work here (%s), using cudaHostAlloc instead; the "
         "container may block NUMA calls. Set MCCL_CUMEM_HOST_ENABLE=0 to skip this test",
         mcclCuErrorString(err));
    return;
  }
  cuMemRelease(handle);
  selfTestPassed = 1;
  INFO(MCCL_INIT | MCCL_ALLOC, "cuMem host self-test passed (driver %d, NUMA node %d, granularity %zu)", driverVersion,
       prop.location.id, gran);
}

int mcclCuMemHostEnable(void) {
  int64_t param = mcclParamCumemHostEnable();
  if (param == 0) return 0;
  pthread_mutex_lock(&selfTestLock);
  if (!selfTestDone) hostSelfTest();
  // Explicit 1 needs 12.2, where cuMem host-NUMA appeared; auto waits for 12.6, as NCCL does.
  int enabled = driverVersion >= (param == -1 ? 12060 : 12020) && selfTestPassed;
  pthread_mutex_unlock(&selfTestLock);
  return enabled;
}

// ---- cuMem host-NUMA -------------------------------------------------------------------------

mcclResult_t mcclCuMemHostAlloc(void** ptr, CUmemGenericAllocationHandle* handlep, size_t size) {
  mcclResult_t res = mcclSuccess;
  int cudaDev = 0;
  size_t gran = 0;
  CUmemAllocationProp prop;
  CUmemAccessDesc descs[2];
  CUmemGenericAllocationHandle handle;
  CUdevice dev;

  MCCL_ARGCHECK(ptr != NULL, "ptr is NULL");
  MCCL_ARGCHECK(size > 0, "size is 0");
  MCCLCHECK(hostNumaProp(&cudaDev, &prop));
  CUCHECK(cuDeviceGet(&dev, cudaDev));
  CUCHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  MCCL_ARGCHECK(size <= SIZE_MAX - gran, "size %zu overflows when rounded to the granularity %zu", size, gran);
  size_t alignedSize = alignUp(size, gran);

  // EXERCISE(02.host_alloc)
  CUCHECK(cuMemCreate(&handle, alignedSize, &prop, 0));
  // Two grants: the device (it reaches the memory over PCIe/C2C) and the host itself. Unlike
  // cudaHostAlloc memory, a cuMem host mapping is not CPU-accessible until the host NUMA node is
  // given access like any other location.
  memset(descs, 0, sizeof(descs));
  descs[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  descs[0].location.id = dev;
  descs[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  descs[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  descs[1].location.id = prop.location.id;
  descs[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  MCCLCHECKGOTO(mcclCuMemAllocAddr(ptr, handle, alignedSize, gran, descs, 2), res, release);
  if (handlep) *handlep = handle;
  INFO(MCCL_ALLOC, "CuMem Host Alloc size %zu (asked %zu) pointer %p handle 0x%llx numa %d dev %d granularity %zu",
       alignedSize, size, *ptr, (unsigned long long)handle, prop.location.id, cudaDev, gran);
  return mcclSuccess;
release:
  cuMemRelease(handle);
  return res;
  // END EXERCISE(02.host_alloc)
}

mcclResult_t mcclCuMemHostFree(void* ptr) {
  mcclResult_t res = mcclSuccess;
  CUmemGenericAllocationHandle handle;
  CUmemAllocationHandleType types;
  CUmemAllocationProp prop = {0};
  void* base = NULL;
  size_t size = 0;
  if (ptr == NULL) return mcclSuccess;
  MCCLCHECK(mcclCuMemRetainHandle(ptr, &handle, &types, &base, &size));
  // Check before tearing anything down: device memory or an interior pointer is a caller bug.
  CUCHECKGOTO(cuMemGetAllocationPropertiesFromHandle(&prop, handle), res, dropRetain);
  if (prop.location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA) {
    WARN("Invalid argument: ptr %p is cuMem memory on location type %d, not host NUMA (use mcclCuMemFree)", ptr,
         (int)prop.location.type);
    res = mcclInvalidArgument;
    goto dropRetain;
  }
  if (base != ptr) {
    WARN("Invalid argument: ptr %p is inside the host allocation at %p (size %zu), not its start", ptr, base, size);
    res = mcclInvalidArgument;
    goto dropRetain;
  }
  // EXERCISE(02.host_free)
  TRACE(MCCL_ALLOC, "CuMem Host Free size %zu pointer %p handle 0x%llx", size, ptr, (unsigned long long)handle);
  CUCHECKGOTO(cuMemRelease(handle), res, out);  // our retain
  CUCHECK(cuMemUnmap((CUdeviceptr)ptr, size));
  CUCHECK(cuMemRelease(handle));  // the allocation's own reference: the memory goes back
  CUCHECK(cuMemAddressFree((CUdeviceptr)ptr, size));
  return mcclSuccess;
  // END EXERCISE(02.host_free)
dropRetain:
  cuMemRelease(handle);
out:
  return res;
}

// ---- cudaHostAlloc -----------------------------------------------------------------------------

mcclResult_t mcclCudaHostCalloc(void** ptr, size_t nelem, size_t elemSize) {
  mcclResult_t res = mcclSuccess;
  void* p = NULL;
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  MCCL_ARGCHECK(ptr != NULL, "ptr is NULL");
  MCCL_ARGCHECK(nelem > 0, "nelem is 0");
  MCCL_ARGCHECK(elemSize > 0, "elemSize is 0");
  MCCL_ARGCHECK(nelem <= SIZE_MAX / elemSize, "nelem %zu * elemSize %zu overflows size_t", nelem, elemSize);
  size_t size = nelem * elemSize;
  // cudaHostAlloc is not a stream operation, but under the default (global) capture mode the
  // runtime treats it as unsafe while any thread captures a graph and invalidates the capture.
  // Relaxed for the duration of this call only; the caller's mode comes back in `mode`.
  // EXERCISE(02.host_calloc)
  CUDACHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  CUDACHECKGOTO(cudaHostAlloc(&p, size, cudaHostAllocMapped), res, restore);
  memset(p, 0, size);
  INFO(MCCL_ALLOC, "Cuda Host Alloc size %zu pointer %p", size, p);
restore:
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
    WARN("Cuda failure restoring the stream-capture mode after cudaHostAlloc");
    if (p) cudaFreeHost(p);
    return mcclUnhandledCudaError;
  }
  if (res == mcclSuccess) *ptr = p;
  return res;
  // END EXERCISE(02.host_calloc)
}

mcclResult_t mcclCudaHostFree(void* ptr) {
  if (ptr == NULL) return mcclSuccess;
  cudaError_t err = cudaFreeHost(ptr);
  if (err == cudaErrorInvalidValue) {
    WARN("Invalid argument: ptr %p is not a live cudaHostAlloc allocation (cudaFreeHost: %s)", ptr,
         cudaGetErrorString(err));
    return mcclInvalidArgument;
  }
  if (err != cudaSuccess) {
    WARN("Cuda failure %d '%s' in cudaFreeHost(%p)", (int)err, cudaGetErrorString(err), ptr);
    return mcclUnhandledCudaError;
  }
  return mcclSuccess;
}

// ---- whichever the gate says -------------------------------------------------------------------

mcclResult_t mcclHostAlloc(void** ptr, size_t size) {
  void* p = NULL;
  MCCL_ARGCHECK(ptr != NULL, "ptr is NULL");
  MCCL_ARGCHECK(size > 0, "size is 0");
  if (mcclCuMemHostEnable()) {
    MCCLCHECK(mcclCuMemHostAlloc(&p, NULL, size));
    memset(p, 0, size);  // same promise as the cudaHostAlloc path
  } else {
    MCCLCHECK(mcclCudaHostCalloc(&p, size, 1));
  }
  *ptr = p;
  return mcclSuccess;
}

mcclResult_t mcclHostFree(void* ptr) {
  CUmemGenericAllocationHandle handle;
  if (ptr == NULL) return mcclSuccess;
  if (cuMemRetainAllocationHandle(&handle, ptr) == CUDA_SUCCESS) {
    CUCHECK(cuMemRelease(handle));
    return mcclCuMemHostFree(ptr);
  }
  return mcclCudaHostFree(ptr);
}
