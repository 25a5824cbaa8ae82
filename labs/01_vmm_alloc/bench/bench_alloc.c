// Lab 01 benchmark: what a VMM allocation and its free cost, against cudaMalloc/cudaFree, and where
// the VMM time goes (create / reserve / map / set access). Host wall-clock (clock_gettime) medians
// after warm-up: allocation calls are synchronous host calls, there is no device work to time.
// Usage: bench_alloc [repeats]   (default 15; each size also gets 2 warm-up rounds)
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "mccl_args.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_param.h"
#include "mccl_benchout.h"
#include "mccl_utils.h"

#define MiB (1024UL * 1024UL)

enum { T_ALLOC, T_FREE, T_MALLOC, T_CUFREE, T_CREATE, T_RESERVE, T_MAP, T_ACCESS, T_UNMAP, T_RELEASE, T_ADDRFREE, NT };

// One round of each thing we time, for one size.
static mcclResult_t round1(size_t size, int nAccess, const CUmemAccessDesc* descs, double* t) {
  void* p = NULL;
  double t0 = 1e6 * mcclClockSec();
  MCCLCHECK(mcclMemAlloc(&p, size));
  double t1 = 1e6 * mcclClockSec();
  MCCLCHECK(mcclMemFree(p));
  double t2 = 1e6 * mcclClockSec();
  CUDACHECK(cudaMalloc(&p, size));
  double t3 = 1e6 * mcclClockSec();
  CUDACHECK(cudaFree(p));
  double t4 = 1e6 * mcclClockSec();
  t[T_ALLOC] = t1 - t0;
  t[T_FREE] = t2 - t1;
  t[T_MALLOC] = t3 - t2;
  t[T_CUFREE] = t4 - t3;

  // The same VMM sequence step by step (recommended granularity, as mcclMemAlloc).
  CUmemAllocationProp prop = {0};
  size_t gran = 0;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUCHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  size = (size + gran - 1) / gran * gran;
  double s0 = 1e6 * mcclClockSec();
  CUCHECK(cuMemCreate(&h, size, &prop, 0));
  double s1 = 1e6 * mcclClockSec();
  CUCHECK(cuMemAddressReserve(&va, size, gran, 0, 0));
  double s2 = 1e6 * mcclClockSec();
  CUCHECK(cuMemMap(va, size, 0, h, 0));
  double s3 = 1e6 * mcclClockSec();
  CUCHECK(cuMemSetAccess(va, size, descs, nAccess));
  double s4 = 1e6 * mcclClockSec();
  CUCHECK(cuMemUnmap(va, size));
  double s5 = 1e6 * mcclClockSec();
  CUCHECK(cuMemRelease(h));
  double s6 = 1e6 * mcclClockSec();
  CUCHECK(cuMemAddressFree(va, size));
  double s7 = 1e6 * mcclClockSec();
  t[T_CREATE] = s1 - s0;
  t[T_RESERVE] = s2 - s1;
  t[T_MAP] = s3 - s2;
  t[T_ACCESS] = s4 - s3;
  t[T_UNMAP] = s5 - s4;
  t[T_RELEASE] = s6 - s5;
  t[T_ADDRFREE] = s7 - s6;
  return mcclSuccess;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 1, "[repeats]",
                "Lab 01's benchmark: mcclMemAlloc/mcclMemFree (VMM path) against cudaMalloc/cudaFree, then each\n"
                "step of the VMM sequence, at 2 MiB, 64 MiB and 1 GiB.\n"
                "  repeats  timed rounds per size, median reported: 1..100000 (default 15)\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  int repeats = (int)mcclArgsInt(argc, argv, 1, "repeats", 15, 1, 100000);
  int nDev = 0, nAccess = 0;
  if (cudaGetDeviceCount(&nDev) != cudaSuccess || nDev < 1 || cudaSetDevice(0) != cudaSuccess) {
    fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  if (!mcclCuMemEnable()) {
    fprintf(stderr, "cuMem is disabled or unsupported here (MCCL_CUMEM_ENABLE=%lld): nothing to compare\n",
            (long long)mcclParamCumemEnable());
    return 1;
  }
  // Access descriptors as mcclMemAlloc builds them: the owner and every device that can reach it.
  CUmemAccessDesc descs[64];
  for (int d = 0; d < nDev && d < 64; d++) {
    int p2p = d == 0;
    if (d != 0 && cuDeviceCanAccessPeer(&p2p, d, 0) != CUDA_SUCCESS) p2p = 0;
    if (!p2p) continue;
    descs[nAccess].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    descs[nAccess].location.id = d;
    descs[nAccess].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    nAccess++;
  }
  size_t total = 0;
  CUdevice dev;
  cuDeviceGet(&dev, 0);
  cuDeviceTotalMem(&total, dev);

  const size_t sizes[] = {2 * MiB, 64 * MiB, 1024 * MiB};
  const int nSizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
  double med[3][NT];
  double* samples = malloc(sizeof(double) * (size_t)repeats * NT);
  if (samples == NULL) return 1;
  printf(
      "# Lab 01: allocation cost on device 0 of %d (%s backend), %d device(s) granted access; median of %d rounds "
      "after 2 warm-up rounds, microseconds of host time per call\n",
      nDev, MCCL_BACKEND_NAME, nAccess, repeats);
  for (int s = 0; s < nSizes; s++) {
    if (sizes[s] * 2 > total) {  // the VMM and cudaMalloc copies are never live together, but leave room
      for (int k = 0; k < NT; k++) med[s][k] = -1;
      continue;
    }
    double t[NT];
    for (int w = 0; w < 2; w++)
      if (round1(sizes[s], nAccess, descs, t) != mcclSuccess) return 1;
    for (int r = 0; r < repeats; r++) {
      if (round1(sizes[s], nAccess, descs, t) != mcclSuccess) return 1;
      for (int k = 0; k < NT; k++) samples[k * repeats + r] = t[k];
    }
    for (int k = 0; k < NT; k++) med[s][k] = mcclBenchMedian(samples + k * repeats, repeats);
  }
  free(samples);

  printf("#\n# mcclMemAlloc/mcclMemFree (VMM path) against cudaMalloc/cudaFree\n");
  printf("%12s %14s %14s %14s %14s %12s %12s\n", "size(B)", "vmmAlloc(us)", "vmmFree(us)", "cudaMalloc(us)",
         "cudaFree(us)", "alloc ratio", "free ratio");
  for (int s = 0; s < nSizes; s++) {
    if (med[s][0] < 0) {
      printf("%12zu  skipped: twice this size exceeds the device's %zu bytes\n", sizes[s], total);
      continue;
    }
    printf("%12zu %14.1f %14.1f %14.1f %14.1f %12.2f %12.2f\n", sizes[s], med[s][T_ALLOC], med[s][T_FREE],
           med[s][T_MALLOC], med[s][T_CUFREE], med[s][T_ALLOC] / med[s][T_MALLOC], med[s][T_FREE] / med[s][T_CUFREE]);
  }
  printf("#  ratio = VMM time / cudaMalloc time: above 1 the VMM path is slower\n");
  printf("#\n# the VMM sequence step by step (microseconds)\n");
  printf("%12s %10s %10s %10s %10s %10s %10s %10s\n", "size(B)", "create", "reserve", "map", "setAccess", "unmap",
         "release", "addrFree");
  for (int s = 0; s < nSizes; s++) {
    if (med[s][0] < 0) continue;
    printf("%12zu %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", sizes[s], med[s][T_CREATE], med[s][T_RESERVE],
           med[s][T_MAP], med[s][T_ACCESS], med[s][T_UNMAP], med[s][T_RELEASE], med[s][T_ADDRFREE]);
  }
  return 0;
}
