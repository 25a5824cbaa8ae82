// Lab 01 tests: VMM allocation and free, granularity rounding, access from every device, bad
// input, leaks, and the cudaMalloc fallback.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_param.h"
#include "mccl_test.h"

#define MiB (1024UL * 1024UL)

static size_t alignUp(size_t size, size_t gran) {
  return (size + gran - 1) / gran * gran;
}

// GPU: free device memory in MiB (cuMemGetInfo).
static long gpuProbe(void) {
  size_t freeMem = 0, total = 0;
  if (cuMemGetInfo(&freeMem, &total) != CUDA_SUCCESS) return -1;
  return (long)(freeMem / MiB);
}
// Leak probe. On the sim every mapping of device memory (and of cuMem host memory) is a memfd
// named "minccl-sim:..." in /proc/self/maps, a live physical allocation holds an fd, a VA
// reservation is a PROT_NONE mapping, and cudaHostAlloc memory an anonymous mapping: we compare
// the named mappings, the open fds, and every line of /proc/self/maps. Under ASan the
// sanitizer's own allocator maps and unmaps as it pleases, so there only the named mappings and
// the fds are compared. On a GPU: free device memory from cuMemGetInfo, within a few MiB (driver bookkeeping).
typedef struct {
  long simMaps, allMaps, fds, gpu;
} leakState;
static leakState leakProbe(void) {
  leakState s = {0, 0, 0, 0};
  if (!MCCL_TEST_ON_SIM) {
    s.gpu = gpuProbe();
    return s;
  }
  s.allMaps = mcclTestCountMaps(NULL);
  s.simMaps = mcclTestCountMaps("minccl-sim");
  s.fds = mcclTestCountFds();
  return s;
}
#define EXPECT_NO_LEAK(before)                                           \
  do {                                                                   \
    leakState after_ = leakProbe();                                      \
    if (MCCL_TEST_ON_SIM) {                                                       \
      EXPECT_EQ(after_.simMaps, (before).simMaps);                       \
      EXPECT_EQ(after_.fds, (before).fds);                               \
      if (!MCCL_TEST_SANITIZER_MAPS) EXPECT_EQ(after_.allMaps, (before).allMaps); \
    } else {                                                             \
      EXPECT_GE(after_.gpu, (before).gpu - 8);                           \
    }                                                                    \
  } while (0)

static int deviceCount(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

static size_t granularity(CUmemAllocationGranularity_flags which) {
  CUmemAllocationProp prop = {0};
  int dev = 0;
  size_t gran = 0;
  cudaGetDevice(&dev);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (cuMemGetAllocationGranularity(&gran, &prop, which) != CUDA_SUCCESS) return 0;
  return gran;
}

// Writes a pattern through the device (H2D copy), reads it back (D2H), compares.
static void roundTrip(void* p, size_t size, unsigned seed) {
  size_t n = size < 3 * MiB ? size : 3 * MiB;
  unsigned char* src = calloc(1, n);
  unsigned char* dst = calloc(1, n);
  EXPECT_TRUE(src != NULL && dst != NULL);
  for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(i * 31 + seed);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(p, src, n));
  EXPECT_CUDA_OK(cudaMemcpy(dst, p, n, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(dst, src, n);
  if (size > n) {  // the last bytes too (this may overlap the head, which was checked already)
    EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)p + size - n, src, n));
    EXPECT_CUDA_OK(cudaMemcpy(dst, (char*)p + size - n, n, cudaMemcpyDeviceToHost));
    EXPECT_MEM_EQ(dst, src, n);
  }
  free(src);
  free(dst);
}

static void useDefaultGate(void) {
  unsetenv("MCCL_CUMEM_ENABLE");
  mcclParamResetAll();
}

static void setup(void) {
  useDefaultGate();
  if (deviceCount() < 1) SKIP("no CUDA device");
  EXPECT_CUDA_OK(cudaSetDevice(0));
  if (!mcclCuMemEnable()) SKIP("cuMem (VMM) not supported by this driver/device");
  mcclTestWarmUp();  // before any leak baseline: a test run alone must see the same counts as one run after others
}

// ---- the gate ----------------------------------------------------------------------------------

static void gateFollowsParameter(void) {
  useDefaultGate();
  EXPECT_CUDA_OK(cudaSetDevice(0));
  int driver = 0, vmm = 0;
  CUdevice dev;
  EXPECT_CUDA_OK(cudaDriverGetVersion(&driver));
  EXPECT_CU_OK(cuDeviceGet(&dev, 0));
  EXPECT_CU_OK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  EXPECT_EQ(mcclIsCuMemSupported(), driver >= 12000 && vmm != 0);
  EXPECT_EQ(mcclCuMemEnable() != 0, mcclIsCuMemSupported());  // -2: auto-detect
  setenv("MCCL_CUMEM_ENABLE", "0", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclCuMemEnable(), 0);
  setenv("MCCL_CUMEM_ENABLE", "1", 1);
  mcclParamResetAll();
  EXPECT_NE(mcclCuMemEnable(), 0);
  useDefaultGate();
}

// ---- sizes and granularity ----------------------------------------------------------------------

// mcclCuMemAlloc: MINIMUM granularity, the handle and handle types asked for, local access.
// What mcclCuMemAlloc hands back for `want` bytes: one mapping starting at p, rounded to the granularity, of a
// pinned allocation on device 0 whose handle h asks for POSIX-fd export.
static void expectCuMemMapping(void* p, CUmemGenericAllocationHandle h, size_t want, size_t gran) {
  CUdeviceptr base = 0;
  size_t size = 0;
  EXPECT_CU_OK(cuMemGetAddressRange(&base, &size, (CUdeviceptr)p));
  EXPECT_EQ(base, (CUdeviceptr)p);
  EXPECT_EQ(size, alignUp(want, gran));
  CUmemAllocationProp prop = {0};
  EXPECT_CU_OK(cuMemGetAllocationPropertiesFromHandle(&prop, h));
  EXPECT_EQ(prop.type, CU_MEM_ALLOCATION_TYPE_PINNED);
  EXPECT_EQ(prop.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(prop.location.id, 0);
  EXPECT_EQ(prop.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

static void cuMemAllocRoundsToMinimum(void) {
  setup();
  CHECK_STOPPED();
  size_t gran = granularity(CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  EXPECT_GT(gran, 0);
  size_t sizes[] = {1, gran - 1, gran, gran + 1, 3 * gran, 1 + mcclTestRand() % (5 * gran)};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    void* p = NULL;
    CUmemGenericAllocationHandle h = 0;
    EXPECT_OK(mcclCuMemAlloc(&p, &h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, sizes[i]));
    EXPECT_TRUE(p != NULL);
    expectCuMemMapping(p, h, sizes[i], gran);
    CHECK_STOPPED();
    roundTrip(p, sizes[i], (unsigned)i);
    CHECK_STOPPED();
    EXPECT_OK(mcclCuMemFree(p));
  }
}

// mcclCuMemAlloc on its own, undone by hand in the driver's reverse order: what it hands back is one
// mapping of one physical allocation, read/write for this device, whose handle is the only reference
// besides the mapping's, so that unmap + release + address free leave nothing behind.
static void cuMemAllocUndoneByHand(void) {
  setup();
  CHECK_STOPPED();
  size_t gran = granularity(CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  EXPECT_GT(gran, 0);
  leakState before = leakProbe();
  size_t sizes[] = {1, gran + 1, 1 + mcclTestRand() % (3 * gran)};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    void* p = NULL;
    CUmemGenericAllocationHandle h = 0;
    EXPECT_OK(mcclCuMemAlloc(&p, &h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, sizes[i]));
    expectCuMemMapping(p, h, sizes[i], gran);
    CHECK_STOPPED();
    CUmemGenericAllocationHandle mapped = 0;  // the mapping is of that very allocation
    EXPECT_CU_OK(cuMemRetainAllocationHandle(&mapped, p));
    EXPECT_TRUE(mapped == h);
    EXPECT_CU_OK(cuMemRelease(mapped));
    unsigned long long flags = 0;
    CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    EXPECT_CU_OK(cuMemGetAccess(&flags, &dev0, (CUdeviceptr)p));
    EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    roundTrip(p, sizes[i], (unsigned)i + 40);
    CHECK_STOPPED();
    const size_t size = alignUp(sizes[i], gran);  // the mapping's, as expectCuMemMapping checked
    EXPECT_CU_OK(cuMemUnmap((CUdeviceptr)p, size));
    EXPECT_CU_OK(cuMemRelease(h));
    EXPECT_CU_OK(cuMemAddressFree((CUdeviceptr)p, size));
  }
  EXPECT_NO_LEAK(before);
}

// mcclMemAlloc: RECOMMENDED granularity; cuMemGetAddressRange reports the rounded size.
static void memAllocRoundsToRecommended(void) {
  setup();
  CHECK_STOPPED();
  size_t gran = granularity(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  EXPECT_GT(gran, 0);
  EXPECT_EQ(gran % granularity(CU_MEM_ALLOC_GRANULARITY_MINIMUM), 0);
  size_t sizes[] = {1, gran - 1, gran, gran + 1, 2 * gran + 12345};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    void* p = NULL;
    EXPECT_OK(mcclMemAlloc(&p, sizes[i]));
    CUdeviceptr base = 0;
    size_t size = 0;
    EXPECT_CU_OK(cuMemGetAddressRange(&base, &size, (CUdeviceptr)p));
    EXPECT_EQ(base, (CUdeviceptr)p);
    EXPECT_EQ(size, alignUp(sizes[i], gran));
    EXPECT_EQ((uintptr_t)p % gran, 0);  // the reservation is aligned to the granularity
    roundTrip(p, sizes[i], 7 + (unsigned)i);
    CHECK_STOPPED();
    EXPECT_OK(mcclMemFree(p));
  }
}

// The handle types mcclMemAlloc asked for: POSIX fd always; fabric only if the device claims it
// and the driver accepted it (the sim claims it and refuses, so the retry path runs there).
static void memAllocHandleTypes(void) {
  setup();
  CHECK_STOPPED();
  int fabric = 0;
  CUdevice dev;
  EXPECT_CU_OK(cuDeviceGet(&dev, 0));
  (void)cuDeviceGetAttribute(&fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev);
  void* p = NULL;
  EXPECT_OK(mcclMemAlloc(&p, 5 * MiB));
  CUmemGenericAllocationHandle h = 0;
  CUmemAllocationHandleType types = 0;
  void* base = NULL;
  size_t size = 0;
  EXPECT_OK(mcclCuMemRetainHandle((char*)p + 4096, &h, &types, &base, &size));
  EXPECT_CU_OK(cuMemRelease(h));  // the extra reference mcclCuMemRetainHandle took
  EXPECT_TRUE(base == p);
  EXPECT_EQ(size, alignUp(5 * MiB, granularity(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)));
  EXPECT_TRUE(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (!fabric) EXPECT_EQ(types & CU_MEM_HANDLE_TYPE_FABRIC, 0);
  // An exported fd proves the handle type is real, not just recorded.
  int fd = -1;
  EXPECT_CU_OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  EXPECT_GE(fd, 0);
  close(fd);
  EXPECT_OK(mcclMemFree(p));
  // Not VMM memory: malloc.
  void* m = malloc(64);
  EXPECT_RES(mcclCuMemRetainHandle(m, &h, NULL, NULL, NULL), mcclInvalidArgument);
  free(m);
}

// Fabric asked for, refused by the driver (no IMEX channel; always on the sim): mcclMemAlloc
// retries with POSIX fd alone. Accepted (a multi-node NVLink system): fabric is recorded.
static void fabricRetry(void) {
  setup();
  CHECK_STOPPED();
  int fabric = 0;
  CUdevice dev;
  EXPECT_CU_OK(cuDeviceGet(&dev, 0));
  (void)cuDeviceGetAttribute(&fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev);
  if (!fabric) SKIP("device reports no fabric handle support: mcclMemAlloc never asks for it");
  size_t gran = granularity(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
  CUmemGenericAllocationHandle probe;
  CUresult err = cuMemCreate(&probe, gran, &prop, 0);
  if (err == CUDA_SUCCESS) cuMemRelease(probe);
  void* p = NULL;
  EXPECT_OK(mcclMemAlloc(&p, gran));
  CUmemGenericAllocationHandle h = 0;
  CUmemAllocationHandleType types = 0;
  EXPECT_OK(mcclCuMemRetainHandle(p, &h, &types, NULL, NULL));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_EQ(types & CU_MEM_HANDLE_TYPE_FABRIC, err == CUDA_SUCCESS ? CU_MEM_HANDLE_TYPE_FABRIC : 0);
  EXPECT_TRUE(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_OK(mcclMemFree(p));
}

// ---- access from every device -------------------------------------------------------------------

static void accessFromEveryDevice(void) {
  setup();
  CHECK_STOPPED();
  int n = deviceCount();
  const size_t size = 3 * MiB;
  unsigned char* host = malloc(size);
  unsigned char* want = malloc(size);
  EXPECT_TRUE(host && want);
  int peersChecked = 0;
  for (int owner = 0; owner < n; owner++) {
    void* p = NULL;
    EXPECT_CUDA_OK(cudaSetDevice(owner));
    EXPECT_OK(mcclMemAlloc(&p, size));
    int ordinal = -1;
    EXPECT_CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)p));
    EXPECT_EQ(ordinal, owner);
    EXPECT_CUDA_OK(mcclTestMemset(p, 0xA0 + owner, size));
    for (int d = 0; d < n; d++) {
      int can = d == owner;
      if (d != owner) EXPECT_CU_OK(cuDeviceCanAccessPeer(&can, d, owner));
      unsigned long long flags = 0;
      CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d};
      EXPECT_CU_OK(cuMemGetAccess(&flags, &loc, (CUdeviceptr)p));
      EXPECT_EQ(flags, can ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE);
      if (!can) continue;
      // Device d reads what the owner wrote, then writes its own stamp at its own offset.
      EXPECT_CUDA_OK(cudaSetDevice(d));
      EXPECT_CUDA_OK(cudaMemcpy(host, p, size, cudaMemcpyDeviceToHost));
      memset(want, 0xA0 + owner, size);
      for (int k = 0; k < d; k++) want[k * 4096] = (unsigned char)(0x10 + k);
      EXPECT_MEM_EQ(host, want, size);
      EXPECT_CUDA_OK(mcclTestMemset((char*)p + d * 4096, 0x10 + d, 1));
      if (d != owner) peersChecked++;
    }
    // The owner sees every stamp.
    EXPECT_CUDA_OK(cudaSetDevice(owner));
    EXPECT_CUDA_OK(cudaMemcpy(host, p, size, cudaMemcpyDeviceToHost));
    memset(want, 0xA0 + owner, size);
    for (int d = 0; d < n; d++) {
      int can = d == owner;
      if (d != owner) EXPECT_CU_OK(cuDeviceCanAccessPeer(&can, d, owner));
      if (can) want[d * 4096] = (unsigned char)(0x10 + d);
    }
    EXPECT_MEM_EQ(host, want, size);
    // Freed while another device is current: mcclMemFree finds the owner and restores ours.
    int other = (owner + 1) % n, cur = -1;
    EXPECT_CUDA_OK(cudaSetDevice(other));
    EXPECT_OK(mcclMemFree(p));
    EXPECT_CUDA_OK(cudaGetDevice(&cur));
    EXPECT_EQ(cur, other);
  }
  // The internal path grants only the local device.
  if (n > 1) {
    void* p = NULL;
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_OK(mcclCuMemAlloc(&p, NULL, mcclCuMemHandleType, MiB));
    unsigned long long flags = 1;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1};
    EXPECT_CU_OK(cuMemGetAccess(&flags, &loc, (CUdeviceptr)p));
    EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    EXPECT_OK(mcclCuMemFree(p));
  }
  free(host);
  free(want);
  EXPECT_CUDA_OK(cudaSetDevice(0));
  if (peersChecked == 0) SKIP("only one device (or no peer access): peer access not exercised");
}

// ---- the map helper ----------------------------------------------------------------------------

// mcclCuMemMapAndSetAccess maps one physical allocation at a caller-chosen address of a reserved
// range (here: the second of two granules, then both at once), the bytes show through either
// mapping, a refused map (the address is already mapped) leaves the first mapping alone, and the
// caller's unmap + free leave nothing behind. mcclCuMemAllocAddr does the reserve as well.
static void mapAndSetAccessAtAddress(void) {
  setup();
  CHECK_STOPPED();
  size_t gran = granularity(CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  EXPECT_TRUE(gran > 0);
  leakState before = leakProbe();
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle h;
  EXPECT_CU_OK(cuMemCreate(&h, gran, &prop, 0));
  CUmemAccessDesc desc = {0};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = 0;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr range = 0;
  EXPECT_CU_OK(cuMemAddressReserve(&range, 2 * gran, gran, 0, 0));
  void* at = (void*)(range + gran);
  EXPECT_RES(mcclCuMemMapAndSetAccess(NULL, gran, h, &desc, 1), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemMapAndSetAccess(at, 0, h, &desc, 1), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemMapAndSetAccess(at, gran, h, NULL, 1), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemMapAndSetAccess(at, gran, h, &desc, 0), mcclInvalidArgument);
  EXPECT_OK(mcclCuMemMapAndSetAccess(at, gran, h, &desc, 1));
  roundTrip(at, gran, 7);
  CHECK_STOPPED();
  // The same address again: the driver refuses, and the first mapping still works.
  EXPECT_RES(mcclCuMemMapAndSetAccess(at, gran, h, &desc, 1), mcclUnhandledCudaError);
  unsigned char b = 0;
  EXPECT_CUDA_OK(cudaMemcpy(&b, at, 1, cudaMemcpyDeviceToHost));
  EXPECT_EQ(b, 7);  // roundTrip's first byte: 0 * 31 + seed
  // A second view of the same memory through mcclCuMemAllocAddr (its own reservation).
  void* view = NULL;
  EXPECT_RES(mcclCuMemAllocAddr(NULL, h, gran, gran, &desc, 1), mcclInvalidArgument);
  EXPECT_OK(mcclCuMemAllocAddr(&view, h, gran, gran, &desc, 1));
  EXPECT_TRUE(view != NULL && view != at);
  b = 0;
  EXPECT_CUDA_OK(cudaMemcpy(&b, view, 1, cudaMemcpyDeviceToHost));
  EXPECT_EQ(b, 7);
  EXPECT_CU_OK(cuMemUnmap((CUdeviceptr)view, gran));
  EXPECT_CU_OK(cuMemAddressFree((CUdeviceptr)view, gran));
  EXPECT_CU_OK(cuMemUnmap((CUdeviceptr)at, gran));
  EXPECT_CU_OK(cuMemAddressFree(range, 2 * gran));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_NO_LEAK(before);
}

// ---- bad input -------------------------------------------------------------------------------------

static void freeInteriorPointer(void) {
  setup();
  CHECK_STOPPED();
  void* p = NULL;
  EXPECT_OK(mcclMemAlloc(&p, 4 * MiB));
  leakState before = leakProbe();
  EXPECT_RES(mcclMemFree((char*)p + 4096), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemFree((char*)p + 4096), mcclInvalidArgument);
  size_t gran = granularity(CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (gran < 4 * MiB) {  // granule-aligned but inside
    EXPECT_RES(mcclMemFree((char*)p + gran), mcclInvalidArgument);
    EXPECT_RES(mcclCuMemFree((char*)p + gran), mcclInvalidArgument);
  }
  // Still mapped and usable: the refusal touched nothing.
  EXPECT_NO_LEAK(before);
  roundTrip(p, 4 * MiB, 3);
  CHECK_STOPPED();
  EXPECT_OK(mcclMemFree(p));
}

static void doubleFree(void) {
  setup();
  CHECK_STOPPED();
  leakState before = leakProbe();
  void* p = NULL;
  EXPECT_OK(mcclMemAlloc(&p, 2 * MiB));
  EXPECT_OK(mcclMemFree(p));
  EXPECT_RES(mcclMemFree(p), mcclInvalidArgument);
  EXPECT_OK(mcclCuMemAlloc(&p, NULL, mcclCuMemHandleType, 2 * MiB));
  EXPECT_OK(mcclCuMemFree(p));
  EXPECT_RES(mcclCuMemFree(p), mcclInvalidArgument);
  EXPECT_NO_LEAK(before);
}

static void zeroSizeAndNullArguments(void) {
  setup();
  CHECK_STOPPED();
  leakState before = leakProbe();
  void* sentinel = (void*)0x1234;
  void* p = sentinel;
  EXPECT_RES(mcclMemAlloc(&p, 0), mcclInvalidArgument);
  EXPECT_TRUE(p == sentinel);  // outputs are written only on success
  EXPECT_RES(mcclCuMemAlloc(&p, NULL, mcclCuMemHandleType, 0), mcclInvalidArgument);
  EXPECT_TRUE(p == sentinel);
  EXPECT_RES(mcclMemAlloc(NULL, MiB), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemAlloc(NULL, NULL, mcclCuMemHandleType, MiB), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemAlloc(&p, NULL, (CUmemAllocationHandleType)0x40, MiB), mcclInvalidArgument);
  EXPECT_TRUE(p == sentinel);
  EXPECT_OK(mcclMemFree(NULL));
  EXPECT_OK(mcclCuMemFree(NULL));
  // Host memory that is no device allocation at all.
  int onStack = 0;
  EXPECT_RES(mcclMemFree(&onStack), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemFree(&onStack), mcclInvalidArgument);
  EXPECT_NO_LEAK(before);
}

// Larger than the whole device: mcclInvalidArgument before any driver call. Fits the device but
// not what is free: the driver's CUDA_ERROR_OUT_OF_MEMORY, as mcclUnhandledCudaError.
static void sizeLargerThanDevice(void) {
  setup();
  CHECK_STOPPED();
  CUdevice dev;
  size_t total = 0;
  EXPECT_CU_OK(cuDeviceGet(&dev, 0));
  EXPECT_CU_OK(cuDeviceTotalMem(&total, dev));
  leakState before = leakProbe();
  void* sentinel = (void*)0x1234;
  void* p = sentinel;
  EXPECT_RES(mcclMemAlloc(&p, total + 1), mcclInvalidArgument);
  EXPECT_RES(mcclMemAlloc(&p, SIZE_MAX), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemAlloc(&p, NULL, mcclCuMemHandleType, total + 1), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemAlloc(&p, NULL, mcclCuMemHandleType, SIZE_MAX), mcclInvalidArgument);
  EXPECT_TRUE(p == sentinel);
  EXPECT_NO_LEAK(before);
  // With 2 MiB held, the whole device cannot be free.
  void* held = NULL;
  EXPECT_OK(mcclMemAlloc(&held, 2 * MiB));
  before = leakProbe();
  EXPECT_RES(mcclMemAlloc(&p, total), mcclUnhandledCudaError);
  EXPECT_RES(mcclCuMemAlloc(&p, NULL, mcclCuMemHandleType, total), mcclUnhandledCudaError);
  EXPECT_TRUE(p == sentinel);
  EXPECT_NO_LEAK(before);
  EXPECT_OK(mcclMemFree(held));
  // The cudaMalloc path checks the same bound.
  setenv("MCCL_CUMEM_ENABLE", "0", 1);
  mcclParamResetAll();
  EXPECT_RES(mcclMemAlloc(&p, total + 1), mcclInvalidArgument);
  EXPECT_TRUE(p == sentinel);
  useDefaultGate();
}

// ---- leaks ---------------------------------------------------------------------------------------

static void thousandCyclesLeakNothing(void) {
  setup();
  CHECK_STOPPED();
  void* p = NULL;
  // Warm-up: first-use allocations of the runtime and of stdio are not leaks.
  EXPECT_OK(mcclMemAlloc(&p, 2 * MiB));
  EXPECT_OK(mcclMemFree(p));
  EXPECT_OK(mcclCuMemAlloc(&p, NULL, mcclCuMemHandleType, 2 * MiB));
  EXPECT_OK(mcclCuMemFree(p));
  leakState before = leakProbe();
  for (int i = 0; i < 1000; i++) {
    size_t size = (1 + (size_t)(mcclTestRand() % 4)) * MiB;
    EXPECT_OK(mcclMemAlloc(&p, size));
    EXPECT_OK(mcclMemFree(p));
    EXPECT_OK(mcclCuMemAlloc(&p, NULL, mcclCuMemHandleType, size));
    EXPECT_OK(mcclCuMemFree(p));
  }
  EXPECT_NO_LEAK(before);
}

// ---- the cudaMalloc fallback -------------------------------------------------------------------------

static int isVmm(void* p) {
  CUmemGenericAllocationHandle h;
  if (cuMemRetainAllocationHandle(&h, p) != CUDA_SUCCESS) return 0;
  cuMemRelease(h);
  return 1;
}

static void fallbackCudaMalloc(void) {
  useDefaultGate();
  if (deviceCount() < 1) SKIP("no CUDA device");
  EXPECT_CUDA_OK(cudaSetDevice(0));
  mcclTestWarmUp();
  void *p = NULL, *q = NULL;
  EXPECT_OK(mcclMemAlloc(&p, MiB));  // warm-up of the cudaMalloc path
  EXPECT_OK(mcclMemFree(p));
  setenv("MCCL_CUMEM_ENABLE", "0", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclCuMemEnable(), 0);
  EXPECT_OK(mcclMemAlloc(&p, MiB));
  EXPECT_OK(mcclMemFree(p));
  leakState before = leakProbe();
  const size_t size = 3 * MiB + 5;
  EXPECT_OK(mcclMemAlloc(&p, size));
  EXPECT_FALSE(isVmm(p));  // cudaMalloc memory has no VMM handle
  roundTrip(p, size, 11);
  CHECK_STOPPED();
  EXPECT_RES(mcclCuMemFree(p), mcclInvalidArgument);  // the VMM free refuses it and leaves it alone
  roundTrip(p, size, 12);
  CHECK_STOPPED();
  EXPECT_OK(mcclMemFree(p));
  EXPECT_RES(mcclMemFree(p), mcclInvalidArgument);
  EXPECT_NO_LEAK(before);
  // Frees route by the pointer: allocate under one setting, free under the other.
  EXPECT_OK(mcclMemAlloc(&p, size));  // cudaMalloc
  if (mcclIsCuMemSupported()) {
    unsetenv("MCCL_CUMEM_ENABLE");
    mcclParamResetAll();
    EXPECT_OK(mcclMemAlloc(&q, size));  // VMM
    EXPECT_TRUE(isVmm(q));
    EXPECT_OK(mcclMemFree(p));
    setenv("MCCL_CUMEM_ENABLE", "0", 1);
    mcclParamResetAll();
    EXPECT_OK(mcclMemFree(q));
  } else {
    EXPECT_OK(mcclMemFree(p));
  }
  EXPECT_NO_LEAK(before);
  useDefaultGate();
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(gateFollowsParameter), MCCL_TEST_CASE(cuMemAllocUndoneByHand),
               MCCL_TEST_CASE(cuMemAllocRoundsToMinimum), MCCL_TEST_CASE(memAllocRoundsToRecommended),
               MCCL_TEST_CASE(memAllocHandleTypes), MCCL_TEST_CASE(fabricRetry), MCCL_TEST_CASE(accessFromEveryDevice),
               MCCL_TEST_CASE(mapAndSetAccessAtAddress), MCCL_TEST_CASE(freeInteriorPointer),
               MCCL_TEST_CASE(doubleFree), MCCL_TEST_CASE(zeroSizeAndNullArguments),
               MCCL_TEST_CASE(sizeLargerThanDevice), MCCL_TEST_CASE(thousandCyclesLeakNothing),
               MCCL_TEST_CASE(fallbackCudaMalloc))
