// Lab 01 demo: the VMM allocation sequence one step at a time, then the same through mcclMemAlloc,
// with the buffer read and written from every device. No MPI: run it under gdb (make gdb LAB=01).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_args.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"

#define MiB (1024UL * 1024UL)

static int step = 0;
#define SAY(...) (printf("[%2d] ", ++step), printf(__VA_ARGS__), printf("\n"), fflush(stdout))
#define NOTE(...) (printf("     "), printf(__VA_ARGS__), printf("\n"))

static const char* accessName(unsigned long long f) {
  return f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? "read/write" : f == CU_MEM_ACCESS_FLAGS_PROT_READ ? "read" : "none";
}

// Part 1: what mcclCuMemAlloc does inside, by hand, printing what each call returns.
static mcclResult_t byHand(int nDev) {
  mcclResult_t res = mcclSuccess;
  CUdevice dev;
  size_t minGran = 0, recGran = 0;
  CUmemAllocationProp prop = {0};
  CUmemGenericAllocationHandle handle;
  CUdeviceptr va = 0;
  const size_t want = 3 * MiB + 1;

  CUCHECK(cuDeviceGet(&dev, 0));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUCHECK(cuMemGetAllocationGranularity(&minGran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUCHECK(cuMemGetAllocationGranularity(&recGran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  SAY("cuMemGetAllocationGranularity: minimum %zu bytes (%zu MiB), recommended %zu bytes (%zu MiB)", minGran,
      minGran / MiB, recGran, recGran / MiB);
  size_t size = (want + minGran - 1) / minGran * minGran;
  NOTE("asked for %zu bytes -> rounded up to %zu bytes (%zu granules)", want, size, size / minGran);

  CUCHECK(cuMemCreate(&handle, size, &prop, 0));
  SAY("cuMemCreate: physical allocation of %zu bytes on device %d, handle 0x%llx (POSIX-fd exportable)", size, dev,
      (unsigned long long)handle);
  NOTE("no address yet: nothing can read or write it");

  CUCHECKGOTO(cuMemAddressReserve(&va, size, minGran, 0, 0), res, release);
  SAY("cuMemAddressReserve: virtual range [0x%llx, 0x%llx), aligned to %zu", (unsigned long long)va,
      (unsigned long long)(va + size), minGran);

  CUCHECKGOTO(cuMemMap(va, size, 0, handle, 0), res, addressFree);
  SAY("cuMemMap: the range now points at the physical allocation (offset 0)");
  unsigned long long flags = 0;
  CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  CUCHECKGOTO(cuMemGetAccess(&flags, &loc, va), res, unmap);
  NOTE("access of device 0 before cuMemSetAccess: %s", accessName(flags));

  CUmemAccessDesc desc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CUCHECKGOTO(cuMemSetAccess(va, size, &desc, 1), res, unmap);
  SAY("cuMemSetAccess: device %d granted read/write (the internal path grants only the local device)", dev);
  for (int d = 0; d < nDev; d++) {
    loc.id = d;
    CUCHECKGOTO(cuMemGetAccess(&flags, &loc, va), res, unmap);
    NOTE("device %d: %s", d, accessName(flags));
  }
  CUDACHECKGOTO(cudaMemset((void*)va, 0x42, size), res, unmap);
  unsigned char last = 0;
  CUDACHECKGOTO(cudaMemcpy(&last, (void*)(va + size - 1), 1, cudaMemcpyDeviceToHost), res, unmap);
  NOTE("cudaMemset 0x42 over all %zu bytes; the last byte reads back 0x%02x", size, last);

  SAY("free in reverse: cuMemUnmap, cuMemRelease (the physical memory goes), cuMemAddressFree");
unmap:
  cuMemUnmap(va, size);
addressFree:
  cuMemAddressFree(va, size);
release:
  cuMemRelease(handle);
  return res;
}

// Part 2: the library call, then every device reads the owner's bytes and writes its own.
static mcclResult_t throughLibrary(int nDev) {
  mcclResult_t res = mcclSuccess;
  void* buf = NULL;
  const size_t want = 5 * MiB + 123;
  unsigned char* host = malloc(want);
  if (host == NULL) return mcclSystemError;

  CUDACHECKGOTO(cudaSetDevice(0), res, out);
  MCCLCHECKGOTO(mcclMemAlloc(&buf, want), res, out);
  CUdeviceptr base = 0;
  size_t size = 0;
  CUCHECKGOTO(cuMemGetAddressRange(&base, &size, (CUdeviceptr)buf), res, freeBuf);
  SAY("mcclMemAlloc(%zu bytes) on device 0 -> %p; cuMemGetAddressRange says base 0x%llx size %zu (recommended "
      "granularity)",
      want, buf, (unsigned long long)base, size);
  CUmemGenericAllocationHandle h;
  CUmemAllocationHandleType types;
  MCCLCHECKGOTO(mcclCuMemRetainHandle(buf, &h, &types, NULL, NULL), res, freeBuf);
  cuMemRelease(h);
  int fabric = 0;
  CUdevice dev0;
  CUCHECKGOTO(cuDeviceGet(&dev0, 0), res, freeBuf);
  (void)cuDeviceGetAttribute(&fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev0);
  NOTE("handle 0x%llx, requested handle types 0x%x: %s%s", (unsigned long long)h, (unsigned)types,
       types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ? "POSIX fd" : "",
       types & CU_MEM_HANDLE_TYPE_FABRIC ? " + fabric"
       : fabric                          ? " (fabric was asked for, refused by the driver, retried without it)"
                                         : " (the device reports no fabric support: not asked for)");
  for (int d = 0; d < nDev; d++) {
    unsigned long long flags = 0;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d};
    int p2p = d == 0;
    if (d != 0) CUCHECKGOTO(cuDeviceCanAccessPeer(&p2p, d, 0), res, freeBuf);
    CUCHECKGOTO(cuMemGetAccess(&flags, &loc, (CUdeviceptr)buf), res, freeBuf);
    NOTE("device %d: cuDeviceCanAccessPeer %d -> access %s", d, p2p, accessName(flags));
  }

  CUDACHECKGOTO(cudaMemset(buf, 0x11, want), res, freeBuf);
  // cudaMemset may return before its bytes land, and another device's copy does not wait for this one's
  // NULL stream: wait here (each device below does the same after its write).
  CUDACHECKGOTO(cudaDeviceSynchronize(), res, freeBuf);
  SAY("device 0 (the owner) fills the buffer with 0x11");
  for (int d = 1; d < nDev; d++) {
    CUDACHECKGOTO(cudaSetDevice(d), res, freeBuf);
    CUDACHECKGOTO(cudaMemcpy(host, buf, want, cudaMemcpyDeviceToHost), res, freeBuf);
    size_t good = 0;
    for (size_t i = 0; i < want; i++) good += host[i] == 0x11 || (i % MiB == 0 && i / MiB < (size_t)d);
    CUDACHECKGOTO(cudaMemset((char*)buf + (size_t)d * MiB, 0x20 + d, 1), res, freeBuf);
    CUDACHECKGOTO(cudaDeviceSynchronize(), res, freeBuf);
    SAY("device %d reads %zu of %zu bytes as expected, then writes 0x%02x at offset %zu MiB", d, good, want, 0x20 + d,
        (size_t)d);
    if (good != want) {
      WARN("device %d saw unexpected bytes", d);
      res = mcclInternalError;
      goto freeBuf;
    }
  }
  CUDACHECKGOTO(cudaSetDevice(0), res, freeBuf);
  CUDACHECKGOTO(cudaMemcpy(host, buf, want, cudaMemcpyDeviceToHost), res, freeBuf);
  printf("[%2d] device 0 reads back the stamps:", ++step);
  for (int d = 1; d < nDev; d++) printf(" @%dMiB=0x%02x", d, host[(size_t)d * MiB]);
  printf("\n");

freeBuf:
  if (res == mcclSuccess)
    SAY("mcclMemFree(%p): owner from cuPointerGetAttribute, handle from "
        "cuMemRetainAllocationHandle, then unmap/release/address free",
        buf);
  mcclMemFree(buf);
out:
  free(host);
  return res;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "Lab 01's narrated example: the VMM sequence by hand, then mcclMemAlloc used from every device.\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  int nDev = 0, driver = 0;
  if (cudaGetDeviceCount(&nDev) != cudaSuccess || nDev < 1) {
    printf("no CUDA device visible\n");
    return 1;
  }
  cudaDriverGetVersion(&driver);
  cudaSetDevice(0);
  printf("Lab 01 demo on the %s backend: %d device(s), driver version %d\n", MCCL_BACKEND_NAME, nDev, driver);
  SAY("cuMem supported: %d; MCCL_CUMEM_ENABLE gate says %s", mcclIsCuMemSupported(),
      mcclCuMemEnable() ? "VMM path" : "cudaMalloc path");
  if (!mcclIsCuMemSupported()) {
    printf("this device has no VMM support: nothing to show\n");
    return 1;
  }
  printf("\n-- Part 1: the VMM sequence by hand (what mcclCuMemAlloc does)\n");
  if (byHand(nDev) != mcclSuccess) return 1;
  printf("\n-- Part 2: mcclMemAlloc, used from every device\n");
  if (throughLibrary(nDev) != mcclSuccess) return 1;
  printf("\nDone: every step above succeeded.\n");
  return 0;
}
