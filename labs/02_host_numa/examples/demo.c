// Lab 02 demo: three kinds of pinned host memory, each written by the CPU and read by the device,
// then written by the device and read by the CPU. No MPI: run it under gdb (make gdb LAB=02).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_args.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_host_alloc.h"
#include "mccl_param.h"

#define MiB (1024UL * 1024UL)

static int step = 0;
#define SAY(...) (printf("[%2d] ", ++step), printf(__VA_ARGS__), printf("\n"), fflush(stdout))
#define NOTE(...) (printf("     "), printf(__VA_ARGS__), printf("\n"))

// CPU writes a counter pattern through `host`; the device copies it (from `dev`) into device
// memory; we compare. Then the device memsets `dev` and the CPU reads `host`.
static mcclResult_t bothWays(const char* what, void* host, void* dev, size_t n, void* scratch) {
  unsigned char* h = host;
  unsigned char* check = malloc(n);
  if (check == NULL) return mcclSystemError;
  for (size_t i = 0; i < n; i++) h[i] = (unsigned char)i;
  CUDACHECK(cudaMemcpy(scratch, dev, n, cudaMemcpyDeviceToDevice));
  CUDACHECK(cudaMemcpy(check, scratch, n, cudaMemcpyDeviceToHost));
  size_t same = 0;
  for (size_t i = 0; i < n; i++) same += check[i] == (unsigned char)i;
  NOTE("%s: CPU wrote 0,1,2,..; the device copied it from %p: %zu/%zu bytes match", what, dev, same, n);
  CUDACHECK(cudaMemset(dev, 0xC3, n));
  CUDACHECK(cudaDeviceSynchronize());
  size_t seen = 0;
  for (size_t i = 0; i < n; i++) seen += h[i] == 0xC3;
  NOTE("%s: the device memset 0xC3 at %p; the CPU reads %zu/%zu bytes of 0xC3 at %p", what, dev, seen, n, host);
  free(check);
  if (same != n || seen != n) {
    WARN("%s: data did not cross", what);
    return mcclInternalError;
  }
  return mcclSuccess;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "Lab 02's narrated example: cuMem host-NUMA, cudaHostAlloc and registered memory, each written\n"
                "by the CPU and read by the device, then the other way.\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  mcclResult_t res = mcclSuccess;
  int nDev = 0, driver = 0, numa = -1;
  CUdevice dev;
  void *scratch = NULL, *cumem = NULL, *pinned = NULL, *pageable = NULL, *any = NULL;
  int registered = 0;
  const size_t n = MiB + 7;

  if (cudaGetDeviceCount(&nDev) != cudaSuccess || nDev < 1) {
    printf("no CUDA device visible\n");
    return 1;
  }
  cudaDriverGetVersion(&driver);
  cudaSetDevice(0);
  printf("Lab 02 demo on the %s backend: %d device(s), driver version %d\n", MCCL_BACKEND_NAME, nDev, driver);
  CUCHECK(cuDeviceGet(&dev, 0));
  CUCHECK(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
  SAY("CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID of device 0: %d%s", numa, numa < 0 ? " (no NUMA info: node 0 is used)" : "");
  if (mcclParamCumemHostEnable() == 0)  // the gate returns before its self-test
    SAY("mcclCuMemHostEnable: MCCL_CUMEM_HOST_ENABLE=0 turns cuMem host memory off (no self-test runs): "
        "cudaHostAlloc fallback");
  else
    SAY("mcclCuMemHostEnable: MCCL_CUMEM_HOST_ENABLE=%lld, driver %d, one-granule self-test -> %s",
        (long long)mcclParamCumemHostEnable(), driver,
        mcclCuMemHostEnable() ? "cuMem host-NUMA memory works"
                              : "off (driver too old, or the self-test failed): cudaHostAlloc fallback");
  CUDACHECK(cudaMalloc(&scratch, n));

  printf("\n-- 1. cuMem host-NUMA memory (mcclCuMemHostAlloc)\n");
  if (mcclCuMemHostEnable()) {
    CUmemGenericAllocationHandle h;
    MCCLCHECKGOTO(mcclCuMemHostAlloc(&cumem, &h, n), res, done);
    CUmemAllocationProp prop = {0};
    size_t size = 0, gran = 0;
    CUCHECKGOTO(cuMemGetAllocationPropertiesFromHandle(&prop, h), res, done);
    CUCHECKGOTO(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), res, done);
    CUCHECKGOTO(cuMemGetAddressRange(NULL, &size, (CUdeviceptr)cumem), res, done);
    SAY("mcclCuMemHostAlloc(%zu) -> %p, handle 0x%llx, location type %d (HOST_NUMA=%d) id %d, mapped size %zu "
        "(granularity %zu)",
        n, cumem, (unsigned long long)h, (int)prop.location.type, (int)CU_MEM_LOCATION_TYPE_HOST_NUMA, prop.location.id,
        size, gran);
    unsigned long long fDev = 0, fHost = 0;
    CUmemLocation lDev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    CUmemLocation lHost = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = prop.location.id};
    CUCHECKGOTO(cuMemGetAccess(&fDev, &lDev, (CUdeviceptr)cumem), res, done);
    CUCHECKGOTO(cuMemGetAccess(&fHost, &lHost, (CUdeviceptr)cumem), res, done);
    NOTE("access: device 0 flags %llu, host NUMA node %d flags %llu (3 = read/write); one address for both sides", fDev,
         prop.location.id, fHost);
    MCCLCHECKGOTO(bothWays("cuMem host", cumem, cumem, n, scratch), res, done);
    MCCLCHECKGOTO(mcclCuMemHostFree(cumem), res, done);
    cumem = NULL;
    SAY("mcclCuMemHostFree: unmap, release, address free");
  } else if (mcclExerciseStubsReached(NULL) > 0) {
    SAY("skipped: the gate reached an exercise stub (see the MCCL EXERCISE line above): not implemented yet");
  } else {
    SAY("skipped: cuMem host memory is off or refused here");
  }

  printf("\n-- 2. cudaHostAlloc mapped memory (mcclCudaHostCalloc)\n");
  MCCLCHECKGOTO(mcclCudaHostCalloc(&pinned, n, 1), res, done);
  void* pinnedDev = NULL;
  CUDACHECKGOTO(cudaHostGetDevicePointer(&pinnedDev, pinned, 0), res, done);
  size_t zeros = 0;
  for (size_t i = 0; i < n; i++) zeros += ((unsigned char*)pinned)[i] == 0;
  SAY("mcclCudaHostCalloc(%zu) -> host %p, device alias %p (%s); %zu/%zu bytes are zero", n, pinned, pinnedDev,
      pinned == pinnedDev ? "the same address: unified addressing" : "a different address", zeros, n);
  MCCLCHECKGOTO(bothWays("cudaHostAlloc", pinned, pinnedDev, n, scratch), res, done);

  printf("\n-- 3. pageable malloc memory pinned afterwards (cudaHostRegister)\n");
  if (posix_memalign(&pageable, 4096, n) != 0) {
    res = mcclSystemError;
    goto done;
  }
  CUDACHECKGOTO(cudaHostRegister(pageable, n, cudaHostRegisterMapped), res, done);
  registered = 1;
  void* pageableDev = NULL;
  CUDACHECKGOTO(cudaHostGetDevicePointer(&pageableDev, pageable, 0), res, done);
  SAY("cudaHostRegister(%p, %zu, mapped) -> device alias %p", pageable, n, pageableDev);
  MCCLCHECKGOTO(bothWays("registered", pageable, pageableDev, n, scratch), res, done);
  CUDACHECKGOTO(cudaHostUnregister(pageable), res, done);
  registered = 0;

  printf("\n-- 4. whichever the gate picks (mcclHostAlloc / mcclHostFree)\n");
  MCCLCHECKGOTO(mcclHostAlloc(&any, n), res, done);
  CUmemGenericAllocationHandle probe;
  int isVmm = cuMemRetainAllocationHandle(&probe, any) == CUDA_SUCCESS;
  if (isVmm) cuMemRelease(probe);
  SAY("mcclHostAlloc(%zu) -> %p, %s", n, any, isVmm ? "a cuMem host mapping" : "cudaHostAlloc memory");
  MCCLCHECKGOTO(mcclHostFree(any), res, done);
  any = NULL;
  SAY("mcclHostFree routed it by asking cuMemRetainAllocationHandle");

done:
  if (cumem) mcclCuMemHostFree(cumem);
  if (any) mcclHostFree(any);
  if (registered) cudaHostUnregister(pageable);
  free(pageable);
  if (pinned) mcclCudaHostFree(pinned);
  if (scratch) cudaFree(scratch);
  if (res == mcclSuccess)
    printf("\nDone: every step above succeeded.\n");
  else
    printf("\nFailed: %s\n", mcclGetErrorString(res));
  return res == mcclSuccess ? 0 : 1;
}
