// Lab 02 tests: every kind of pinned host memory is seen by the device and the host alike;
// calloc zeroes; the gate, its self-test and fallback; bad input; leaks.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_host_alloc.h"
#include "mccl_param.h"
#include "mccl_test.h"

#define MiB (1024UL * 1024UL)

static size_t alignUp(size_t size, size_t gran) {
  return (size + gran - 1) / gran * gran;
}

// GPU: the process's virtual size in MiB (pinned host buffers are mappings; the driver keeps some).
static long gpuProbe(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmSize: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb / 1024;
}
// Leak probe. On the sim every mapping of device memory (and of cuMem host memory) is a memfd
// named "minccl-sim:..." in /proc/self/maps, a live physical allocation holds an fd, a VA
// reservation is a PROT_NONE mapping, and cudaHostAlloc memory an anonymous mapping: we compare
// the named mappings, the open fds, and every line of /proc/self/maps. Under ASan the
// sanitizer's own allocator maps and unmaps as it pleases, so there only the named mappings and
// the fds are compared. On a GPU: the process's virtual size, within 64 MiB.
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
      EXPECT_LE(after_.gpu, (before).gpu + 64);                          \
    }                                                                    \
  } while (0)

static void useDefaultGate(void) {
  unsetenv("MCCL_CUMEM_HOST_ENABLE");
  mcclParamResetAll();
}

static void setup(void) {
  int n = 0;
  useDefaultGate();
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) SKIP("no CUDA device");
  EXPECT_CUDA_OK(cudaSetDevice(0));
  mcclTestWarmUp();  // before any leak baseline: a test run alone must see the same counts as one run after others
}

static int hostNumaId(void) {
  int id = -1;
  CUdevice dev;
  if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS) return 0;
  if (cuDeviceGetAttribute(&id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS) return 0;
  return id < 0 ? 0 : id;
}

// What the gate should say, worked out independently: driver version and a one-granule probe.
static int expectCuMemHost(int param) {
  int driver = 0;
  if (param == 0 || cudaDriverGetVersion(&driver) != cudaSuccess) return 0;
  if (driver < (param == -1 ? 12060 : 12020)) return 0;
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = hostNumaId();
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CUmemGenericAllocationHandle h;
  if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 0;
  if (cuMemCreate(&h, gran, &prop, 0) != CUDA_SUCCESS) return 0;
  cuMemRelease(h);
  return 1;
}

// ---- one buffer of each kind ---------------------------------------------------------------

typedef enum { KIND_CUMEM_HOST, KIND_CUDA_HOST_CALLOC, KIND_REGISTERED } hostKind;

typedef struct {
  hostKind kind;
  void* host;  // what the CPU uses
  void* dev;   // what the device uses
  size_t size;
} hostBuf;

static void bufAlloc(hostBuf* b, hostKind kind, size_t size) {
  memset(b, 0, sizeof(*b));
  b->kind = kind;
  b->size = size;
  switch (kind) {
    case KIND_CUMEM_HOST:
      EXPECT_OK(mcclCuMemHostAlloc(&b->host, NULL, size));
      b->dev = b->host;  // one virtual address for both sides
      break;
    case KIND_CUDA_HOST_CALLOC:
      EXPECT_OK(mcclCudaHostCalloc(&b->host, size, 1));
      EXPECT_CUDA_OK(cudaHostGetDevicePointer(&b->dev, b->host, 0));
      break;
    case KIND_REGISTERED:
      EXPECT_EQ(posix_memalign(&b->host, 4096, size), 0);
      EXPECT_CUDA_OK(cudaHostRegister(b->host, size, cudaHostRegisterMapped));
      EXPECT_CUDA_OK(cudaHostGetDevicePointer(&b->dev, b->host, 0));
      break;
  }
}

static void bufFree(hostBuf* b) {
  switch (b->kind) {
    case KIND_CUMEM_HOST:
      EXPECT_OK(mcclCuMemHostFree(b->host));
      break;
    case KIND_CUDA_HOST_CALLOC:
      EXPECT_OK(mcclCudaHostFree(b->host));
      break;
    case KIND_REGISTERED:
      EXPECT_CUDA_OK(cudaHostUnregister(b->host));
      free(b->host);
      break;
  }
}

// Host writes -> a device-to-device copy from the buffer's device address -> compare; then the
// device writes (memset and a device-to-device copy into it) -> the CPU reads the host address.
static void crossCheck(hostBuf* b, unsigned seed) {
  size_t n = b->size;
  unsigned char* h = b->host;
  unsigned char* want = malloc(n);
  unsigned char* got = malloc(n);
  void* devBuf = NULL;
  EXPECT_TRUE(want && got);
  EXPECT_CUDA_OK(cudaMalloc(&devBuf, n));
  for (size_t i = 0; i < n; i++) want[i] = h[i] = (unsigned char)(i * 13 + seed);
  EXPECT_CUDA_OK(cudaMemcpy(devBuf, b->dev, n, cudaMemcpyDeviceToDevice));
  EXPECT_CUDA_OK(cudaMemcpy(got, devBuf, n, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(got, want, n);

  EXPECT_CUDA_OK(mcclTestMemset(b->dev, 0x5A, n));
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  memset(want, 0x5A, n);
  EXPECT_MEM_EQ(h, want, n);

  for (size_t i = 0; i < n; i++) want[i] = (unsigned char)(i * 7 + seed + 1);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(devBuf, want, n));
  EXPECT_CUDA_OK(cudaMemcpy(b->dev, devBuf, n, cudaMemcpyDeviceToDevice));
  EXPECT_MEM_EQ(h, want, n);
  cudaFree(devBuf);
  free(want);
  free(got);
}

static void kindRoundTrip(hostKind kind) {
  setup();
  CHECK_STOPPED();
  if (kind == KIND_CUMEM_HOST && !mcclCuMemHostEnable()) SKIP("cuMem host-NUMA memory refused here");
  size_t sizes[] = {1, 4096 + 17, 2 * MiB + 3};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    hostBuf b;
    bufAlloc(&b, kind, sizes[i]);
    CHECK_STOPPED();
    crossCheck(&b, (unsigned)(i + 3 * kind));
    CHECK_STOPPED();
    bufFree(&b);
  }
}
static void cuMemHostSeenBothWays(void) {
  kindRoundTrip(KIND_CUMEM_HOST);
}
static void cudaHostCallocSeenBothWays(void) {
  kindRoundTrip(KIND_CUDA_HOST_CALLOC);
}
static void registeredSeenBothWays(void) {
  kindRoundTrip(KIND_REGISTERED);
}

// ---- cuMem host specifics ---------------------------------------------------------------------

// The MINIMUM granularity of a pinned host-NUMA allocation on node numa exported as a POSIX fd (what
// mcclCuMemHostAlloc rounds to); 0 if the driver does not say.
static size_t hostNumaGranularity(int numa) {
  CUmemAllocationProp want = {0};
  want.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  want.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  want.location.id = numa;
  want.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  if (cuMemGetAllocationGranularity(&gran, &want, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 0;
  return gran;
}

static void cuMemHostLocationAndAccess(void) {
  setup();
  CHECK_STOPPED();
  if (!mcclCuMemHostEnable()) SKIP("cuMem host-NUMA memory refused here");
  int numa = hostNumaId();
  const size_t gran = hostNumaGranularity(numa);
  EXPECT_GT(gran, 0);
  size_t size = gran + 100;
  void* p = NULL;
  CUmemGenericAllocationHandle h = 0;
  EXPECT_OK(mcclCuMemHostAlloc(&p, &h, size));
  CUmemAllocationProp prop = {0};
  EXPECT_CU_OK(cuMemGetAllocationPropertiesFromHandle(&prop, h));
  EXPECT_EQ(prop.location.type, CU_MEM_LOCATION_TYPE_HOST_NUMA);
  EXPECT_EQ(prop.location.id, numa);
  EXPECT_EQ(prop.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  // The driver reports the mapping's size; its base it may not (0 for host mappings on real
  // GPUs), so the start comes from mcclCuMemRetainHandle's walk.
  size_t range = 0;
  EXPECT_CU_OK(cuMemGetAddressRange(NULL, &range, (CUdeviceptr)p));
  EXPECT_EQ(range, alignUp(size, gran));
  unsigned long long flags = 0;
  CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  EXPECT_CU_OK(cuMemGetAccess(&flags, &dev, (CUdeviceptr)p));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = numa};
  EXPECT_CU_OK(cuMemGetAccess(&flags, &host, (CUdeviceptr)p));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  // Lab 04's path: the handle comes back from the pointer and exports as an fd.
  CUmemGenericAllocationHandle h2 = 0;
  CUmemAllocationHandleType types = 0;
  void* base = NULL;
  size_t baseSize = 0;
  EXPECT_OK(mcclCuMemRetainHandle((char*)p + gran + 10, &h2, &types, &base, &baseSize));
  EXPECT_EQ(types, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_TRUE(base == p);
  EXPECT_EQ(baseSize, alignUp(size, gran));
  int fd = -1;
  EXPECT_CU_OK(cuMemExportToShareableHandle(&fd, h2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  EXPECT_GE(fd, 0);
  close(fd);
  EXPECT_CU_OK(cuMemRelease(h2));
  EXPECT_OK(mcclCuMemHostFree(p));
}

// mcclCuMemHostAlloc on its own, undone by hand in the driver's reverse order: one mapping of one host-NUMA
// allocation, read/write for the device and for the host, seen both ways, whose handle is the only reference
// besides the mapping's, so that unmap + release + address free leave nothing behind.
static void cuMemHostAllocUndoneByHand(void) {
  setup();
  CHECK_STOPPED();
  if (!mcclCuMemHostEnable()) SKIP("cuMem host-NUMA memory refused here");
  int numa = hostNumaId();
  const size_t gran = hostNumaGranularity(numa);
  EXPECT_GT(gran, 0);
  leakState before = leakProbe();
  size_t sizes[] = {1, gran + 100};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    hostBuf b = {KIND_CUMEM_HOST, NULL, NULL, sizes[i]};
    CUmemGenericAllocationHandle h = 0;
    EXPECT_OK(mcclCuMemHostAlloc(&b.host, &h, sizes[i]));
    b.dev = b.host;
    CUmemAllocationProp prop = {0};
    EXPECT_CU_OK(cuMemGetAllocationPropertiesFromHandle(&prop, h));
    EXPECT_EQ(prop.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    EXPECT_EQ(prop.location.type, CU_MEM_LOCATION_TYPE_HOST_NUMA);
    EXPECT_EQ(prop.location.id, numa);
    size_t range = 0;
    EXPECT_CU_OK(cuMemGetAddressRange(NULL, &range, (CUdeviceptr)b.host));
    EXPECT_EQ(range, alignUp(sizes[i], gran));
    unsigned long long flags = 0;
    CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    EXPECT_CU_OK(cuMemGetAccess(&flags, &dev, (CUdeviceptr)b.host));
    EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = numa};
    EXPECT_CU_OK(cuMemGetAccess(&flags, &host, (CUdeviceptr)b.host));
    EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    crossCheck(&b, (unsigned)i + 20);
    CHECK_STOPPED();
    EXPECT_CU_OK(cuMemUnmap((CUdeviceptr)b.host, range));
    EXPECT_CU_OK(cuMemRelease(h));
    EXPECT_CU_OK(cuMemAddressFree((CUdeviceptr)b.host, range));
  }
  EXPECT_NO_LEAK(before);
}

// ---- calloc ------------------------------------------------------------------------------------

static void callocZeroes(void) {
  setup();
  CHECK_STOPPED();
  const size_t nelem = 300000, elem = 8;
  for (int round = 0; round < 3; round++) {
    unsigned char* p = NULL;
    EXPECT_OK(mcclCudaHostCalloc((void**)&p, nelem, elem));
    for (size_t i = 0; i < nelem * elem; i++)
      if (p[i] != 0) {
        mcclTestFailAt(__FILE__, __LINE__, "round %d: byte %zu is 0x%02x, expected 0", round, i, p[i]);
        return;
      }
    memset(p, 0xEE, nelem * elem);  // dirty it, so memory handed out again must be re-zeroed
    EXPECT_OK(mcclCudaHostFree(p));
  }
  // mcclHostAlloc promises zeroes on both of its paths.
  for (int on = 0; on <= 1; on++) {
    setenv("MCCL_CUMEM_HOST_ENABLE", on ? "1" : "0", 1);
    mcclParamResetAll();
    unsigned char* p = NULL;
    EXPECT_OK(mcclHostAlloc((void**)&p, 3 * MiB + 1));
    for (size_t i = 0; i < 3 * MiB + 1; i++) EXPECT_EQ(p[i], 0);
    memset(p, 0xEE, 3 * MiB + 1);
    EXPECT_OK(mcclHostFree(p));
  }
  useDefaultGate();
}

static void callocRestoresCaptureMode(void) {
  setup();
  CHECK_STOPPED();
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
  EXPECT_CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));  // ours is now ThreadLocal
  enum cudaStreamCaptureMode original = mode;
  void* p = NULL;
  EXPECT_OK(mcclCudaHostCalloc(&p, 1, 64));
  mode = original;
  EXPECT_CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));  // read back, and put the original back
  EXPECT_EQ(mode, cudaStreamCaptureModeThreadLocal);
  EXPECT_OK(mcclCudaHostFree(p));
}

// ---- the gate and the fallback ------------------------------------------------------------------

static void gateFollowsParameter(void) {
  setup();
  CHECK_STOPPED();
  EXPECT_EQ(mcclCuMemHostEnable() != 0, expectCuMemHost(-1));
  setenv("MCCL_CUMEM_HOST_ENABLE", "0", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclCuMemHostEnable(), 0);
  setenv("MCCL_CUMEM_HOST_ENABLE", "1", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclCuMemHostEnable() != 0, expectCuMemHost(1));
  useDefaultGate();
}

static int isVmm(void* p) {
  CUmemGenericAllocationHandle h;
  if (cuMemRetainAllocationHandle(&h, p) != CUDA_SUCCESS) return 0;
  cuMemRelease(h);
  return 1;
}

static void fallbackForcedOff(void) {
  setup();
  CHECK_STOPPED();
  setenv("MCCL_CUMEM_HOST_ENABLE", "0", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclCuMemHostEnable(), 0);
  void* p = NULL;
  EXPECT_OK(mcclHostAlloc(&p, MiB));
  EXPECT_FALSE(isVmm(p));  // cudaHostAlloc memory, not a cuMem mapping
  hostBuf b = {KIND_CUDA_HOST_CALLOC, p, NULL, MiB};
  EXPECT_CUDA_OK(cudaHostGetDevicePointer(&b.dev, p, 0));
  crossCheck(&b, 5);
  CHECK_STOPPED();
  // Frees route by the pointer: allocate under one setting, free under the other.
  void* q = NULL;
  if (expectCuMemHost(1)) {
    setenv("MCCL_CUMEM_HOST_ENABLE", "1", 1);
    mcclParamResetAll();
    EXPECT_OK(mcclHostAlloc(&q, MiB));
    EXPECT_TRUE(isVmm(q));
    EXPECT_OK(mcclHostFree(p));
    setenv("MCCL_CUMEM_HOST_ENABLE", "0", 1);
    mcclParamResetAll();
    EXPECT_OK(mcclHostFree(q));
  } else {
    EXPECT_OK(mcclHostFree(p));
  }
  useDefaultGate();
}

// ---- bad input ------------------------------------------------------------------------------------

static void badArguments(void) {
  setup();
  CHECK_STOPPED();
  leakState before = leakProbe();
  void* sentinel = (void*)0x1234;
  void* p = sentinel;
  EXPECT_RES(mcclCuMemHostAlloc(NULL, NULL, MiB), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemHostAlloc(&p, NULL, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCuMemHostAlloc(&p, NULL, SIZE_MAX), mcclInvalidArgument);
  EXPECT_RES(mcclCudaHostCalloc(NULL, 1, 1), mcclInvalidArgument);
  EXPECT_RES(mcclCudaHostCalloc(&p, 0, 8), mcclInvalidArgument);
  EXPECT_RES(mcclCudaHostCalloc(&p, 8, 0), mcclInvalidArgument);
  EXPECT_RES(mcclCudaHostCalloc(&p, SIZE_MAX / 2, 4), mcclInvalidArgument);
  EXPECT_RES(mcclHostAlloc(&p, 0), mcclInvalidArgument);
  EXPECT_RES(mcclHostAlloc(NULL, 1), mcclInvalidArgument);
  EXPECT_TRUE(p == sentinel);
  EXPECT_OK(mcclCuMemHostFree(NULL));
  EXPECT_OK(mcclCudaHostFree(NULL));
  EXPECT_OK(mcclHostFree(NULL));
  EXPECT_NO_LEAK(before);

  // Wrong kinds and wrong pointers are refused, and the memory is left intact.
  void* calloced = NULL;
  EXPECT_OK(mcclCudaHostCalloc(&calloced, MiB, 1));
  EXPECT_RES(mcclCuMemHostFree(calloced), mcclInvalidArgument);
  void* devMem = NULL;
  EXPECT_OK(mcclMemAlloc(&devMem, MiB));
  EXPECT_RES(mcclCuMemHostFree(devMem), mcclInvalidArgument);
  EXPECT_CUDA_OK(mcclTestMemset(devMem, 1, MiB));  // still mapped
  EXPECT_OK(mcclMemFree(devMem));
  void* m = malloc(4096);
  EXPECT_RES(mcclCudaHostFree(m), mcclInvalidArgument);
  EXPECT_RES(mcclHostFree(m), mcclInvalidArgument);
  free(m);
  EXPECT_OK(mcclCudaHostFree(calloced));
  EXPECT_RES(mcclCudaHostFree(calloced), mcclInvalidArgument);  // double free

  if (mcclCuMemHostEnable()) {
    void* h = NULL;
    EXPECT_OK(mcclCuMemHostAlloc(&h, NULL, 3 * MiB));
    size_t gran = 0;
    void* base = NULL;
    CUmemGenericAllocationHandle hh;
    EXPECT_OK(mcclCuMemRetainHandle((char*)h + 3 * MiB - 1, &hh, NULL, &base, NULL));  // from the last byte
    EXPECT_CU_OK(cuMemRelease(hh));
    EXPECT_TRUE(base == h);
    EXPECT_RES(mcclCuMemHostFree((char*)h + 4096), mcclInvalidArgument);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = hostNumaId();
    EXPECT_CU_OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (gran < 3 * MiB) EXPECT_RES(mcclCuMemHostFree((char*)h + gran), mcclInvalidArgument);  // granule-aligned, inside
    ((char*)h)[3 * MiB - 1] = 7;  // still mapped for the host
    EXPECT_OK(mcclCuMemHostFree(h));
    EXPECT_RES(mcclCuMemHostFree(h), mcclInvalidArgument);  // double free
  }
  EXPECT_NO_LEAK(before);
}

// ---- leaks ---------------------------------------------------------------------------------------

static void manyCyclesLeakNothing(void) {
  setup();
  CHECK_STOPPED();
  int cuMemHost = mcclCuMemHostEnable();
  for (int warm = 0; warm < 2; warm++) {  // warm-up round, then the measured one
    leakState before = leakProbe();
    for (int i = 0; i < (warm ? 300 : 1); i++) {
      for (int k = cuMemHost ? 0 : 1; k < 3; k++) {
        hostBuf b;
        bufAlloc(&b, (hostKind)k, (1 + (size_t)(mcclTestRand() % 3)) * MiB);
        CHECK_STOPPED();
        bufFree(&b);
        CHECK_STOPPED();
      }
      void* p = NULL;
      EXPECT_OK(mcclHostAlloc(&p, MiB));
      EXPECT_OK(mcclHostFree(p));
    }
    if (warm) EXPECT_NO_LEAK(before);
  }
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(gateFollowsParameter), MCCL_TEST_CASE(cuMemHostSeenBothWays),
               MCCL_TEST_CASE(cudaHostCallocSeenBothWays), MCCL_TEST_CASE(registeredSeenBothWays),
               MCCL_TEST_CASE(cuMemHostLocationAndAccess), MCCL_TEST_CASE(cuMemHostAllocUndoneByHand),
               MCCL_TEST_CASE(callocZeroes), MCCL_TEST_CASE(callocRestoresCaptureMode),
               MCCL_TEST_CASE(fallbackForcedOff), MCCL_TEST_CASE(badArguments), MCCL_TEST_CASE(manyCyclesLeakNothing))
