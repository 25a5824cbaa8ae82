// Lab 03 tests, one process: export an allocation, import it (on every device), check the bytes
// both ways, the mapping outliving the exporter's free, bad descriptors, and fabric handles.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_ipc.h"
#include "mccl_test.h"
#include "ipc_test_util.h"

#define MiB (1024UL * 1024UL)



// Leak probe for mappings and reservations: on the sim each is a line of /proc/self/maps (under a
// sanitizer, which maps memory of its own, only the sim's memfd mappings count); on a GPU, device
// memory shows in cuMemGetInfo's free bytes (MiB).
static long leakProbe(void) {
  if (MCCL_TEST_ON_SIM) return mcclTestCountMaps(MCCL_TEST_SANITIZER_MAPS ? "minccl-sim" : NULL);
  size_t freeMem = 0, total = 0;
  if (cuMemGetInfo(&freeMem, &total) != CUDA_SUCCESS) return -1;
  return (long)(freeMem / MiB);
}
#define EXPECT_NO_LEAK(before)                \
  do {                                        \
    long after_ = leakProbe();                \
    if (MCCL_TEST_ON_SIM) EXPECT_EQ(after_, (before)); \
    else EXPECT_GE(after_, (before) - 8);     \
  } while (0)

// Host buffers of a test come straight from mmap: the leak probe counts mappings, and ASan's
// allocator keeps freed large blocks mapped (quarantine), which would look like a leak.
static unsigned char* hostAlloc(size_t n) {
  void* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}
static void hostFree(unsigned char* p, size_t n) {
  if (p) munmap(p, n);
}

static int deviceCount(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// First use of a device creates its context (and, on the sim, worker threads and their stacks):
// do it before taking a leak baseline.
static void warmUp(void) {
  static int done = 0;
  if (done) return;
  unsigned char b = 0;
  for (int dev = 0; dev < deviceCount(); dev++) {
    void* tmp = NULL;
    if (cudaSetDevice(dev) != cudaSuccess || cudaMalloc(&tmp, 4096) != cudaSuccess) continue;
    mcclTestCopyToDevice(tmp, &b, 1);
    cudaMemcpy(&b, tmp, 1, cudaMemcpyDeviceToHost);
    cudaFree(tmp);
  }
  cudaSetDevice(0);
  done = 1;
}

static unsigned char patternByte(uint64_t seed, size_t i) {
  return (unsigned char)((seed >> (i % 7)) + i * 131 + (i >> 12));
}

// Allocation on device 0 with a POSIX-fd handle type, filled with a seeded pattern; `host` keeps
// the expected bytes.
static void allocPattern(void** p, size_t size, unsigned char** host, uint64_t* seed) {
  *seed = mcclTestRand();
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_OK(mcclCuMemAlloc(p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, size));
  *host = hostAlloc(size);
  EXPECT_TRUE(*host != NULL);
  for (size_t i = 0; i < size; i++) (*host)[i] = patternByte(*seed, i);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(*p, *host, size));
}

static void expectDeviceBytes(const void* dptr, const unsigned char* want, size_t size) {
  unsigned char* got = hostAlloc(size);
  EXPECT_TRUE(got != NULL);
  cudaError_t err = cudaMemcpy(got, dptr, size, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) hostFree(got, size);
  EXPECT_CUDA_OK(err);
  for (size_t i = 0; i < size; i++)
    if (got[i] != want[i]) {
      unsigned g = got[i], w = want[i];
      hostFree(got, size);
      mcclTestFailAt(__FILE__, __LINE__, "byte %zu of %p: expected 0x%02x, got 0x%02x", i, dptr, w, g);
      return;
    }
  hostFree(got, size);
}

static void descriptorLayout(void) {
  // A wire format: the same offsets in every process and build.
  EXPECT_EQ(sizeof(mcclIpcDesc), 88);
  EXPECT_EQ(offsetof(mcclIpcDesc, handleType), 4);
  EXPECT_EQ(offsetof(mcclIpcDesc, size), 8);
  EXPECT_EQ(offsetof(mcclIpcDesc, ownerDev), 20);
  EXPECT_EQ(offsetof(mcclIpcDesc, fabric), 24);
  EXPECT_EQ(sizeof(CUmemFabricHandle), MCCL_IPC_FABRIC_HANDLE_BYTES);
}

// Export once, import on every device: each mapping shows the exporter's bytes, and a write
// through a mapping is seen through the exporter's pointer (one physical allocation).
static void exportImportEveryDevice(void) {
  int nDev = deviceCount();
  if (nDev < 1) SKIP("no device");
  warmUp();
  size_t size = 2 * granularity(0);
  int fdBase = mcclTestCountFds();
  long memBase = leakProbe();
  void* p = NULL;
  unsigned char* host = NULL;
  uint64_t seed;
  allocPattern(&p, size, &host, &seed);
  CHECK_STOPPED();
  int fdAllocated = mcclTestCountFds();  // the sim keeps a memfd per allocation; a GPU driver does not
  mcclIpcDesc desc;
  int fd = -1;
  EXPECT_OK(mcclIpcExport(p, &desc, &fd));
  EXPECT_EQ(desc.magic, MCCL_IPC_DESC_MAGIC);
  EXPECT_EQ(desc.handleType, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(desc.size, size);
  EXPECT_EQ(desc.ownerPid, getpid());
  EXPECT_EQ(desc.ownerDev, 0);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(mcclTestCountFds(), fdAllocated + 1);  // exactly one new fd: the exported one
  for (int dev = 0; dev < nDev; dev++) {
    void* q = NULL;
    EXPECT_CUDA_OK(cudaSetDevice(dev));
    EXPECT_OK(mcclIpcImport(&desc, fd, dev, &q));
    EXPECT_TRUE(q != NULL && q != p);
    expectDeviceBytes(q, host, size);
    CHECK_STOPPED();
    unsigned char mark[64];
    for (size_t i = 0; i < sizeof(mark); i++) mark[i] = (unsigned char)(dev * 17 + i);
    EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)q + size - 64, mark, 64));
    memcpy(host + size - 64, mark, 64);
    // Read back through the exporter's mapping with its own device current: on a GPU a copy from a
    // VMM range fails (cudaErrorInvalidValue) when the current device was not granted access to it.
    EXPECT_CUDA_OK(cudaSetDevice(0));
    expectDeviceBytes(p, host, size);  // seen by the exporter's mapping
    CHECK_STOPPED();
    EXPECT_OK(mcclIpcUnmap(q));
  }
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_EQ(close(fd), 0);
  EXPECT_OK(mcclCuMemFree(p));
  hostFree(host, size);
  EXPECT_EQ(mcclTestCountFds(), fdBase);
  EXPECT_NO_LEAK(memBase);
}

// The importer's mapping holds the memory: the exporter frees and closes everything first.
static void mappingOutlivesExporter(void) {
  int nDev = deviceCount();
  if (nDev < 1) SKIP("no device");
  warmUp();
  int dev = nDev > 1 ? 1 : 0;
  size_t size = granularity(0);
  int fdBase = mcclTestCountFds();
  long memBase = leakProbe();
  void *p = NULL, *q = NULL;
  unsigned char* host = NULL;
  uint64_t seed;
  allocPattern(&p, size, &host, &seed);
  CHECK_STOPPED();
  mcclIpcDesc desc;
  int fd = -1;
  EXPECT_OK(mcclIpcExport(p, &desc, &fd));
  EXPECT_OK(mcclIpcImport(&desc, fd, dev, &q));
  EXPECT_EQ(close(fd), 0);
  EXPECT_OK(mcclCuMemFree(p));
  EXPECT_CUDA_OK(cudaSetDevice(dev));
  expectDeviceBytes(q, host, size);
  CHECK_STOPPED();
  EXPECT_OK(mcclIpcUnmap(q));
  EXPECT_RES(mcclIpcUnmap(q), mcclInvalidArgument);  // already gone
  EXPECT_CUDA_OK(cudaSetDevice(0));
  hostFree(host, size);
  EXPECT_EQ(mcclTestCountFds(), fdBase);
  EXPECT_NO_LEAK(memBase);
}

// Every malformed descriptor or fd fails with its own code, writes no output, maps nothing and
// leaks no fd.
static void badDescriptors(void) {
  if (deviceCount() < 1) SKIP("no device");
  warmUp();
  size_t gran = granularity(0);
  int fdBase = mcclTestCountFds();
  void *p = NULL, *q = (void*)0x1;
  unsigned char* host = NULL;
  uint64_t seed;
  allocPattern(&p, gran, &host, &seed);
  CHECK_STOPPED();
  mcclIpcDesc good, d;
  int fd = -1;
  EXPECT_OK(mcclIpcExport(p, &good, &fd));
  long memBase = leakProbe();

  EXPECT_RES(mcclIpcImport(NULL, fd, 0, &q), mcclInvalidArgument);
  EXPECT_RES(mcclIpcImport(&good, fd, 0, NULL), mcclInvalidArgument);
  d = good;
  d.magic = 0x12345678;
  EXPECT_RES(mcclIpcImport(&d, fd, 0, &q), mcclInvalidArgument);
  d = good;
  d.handleType = 0;
  EXPECT_RES(mcclIpcImport(&d, fd, 0, &q), mcclInvalidArgument);
  d.handleType = CU_MEM_HANDLE_TYPE_WIN32;
  EXPECT_RES(mcclIpcImport(&d, fd, 0, &q), mcclInvalidArgument);
  d = good;
  d.size = 0;
  EXPECT_RES(mcclIpcImport(&d, fd, 0, &q), mcclInvalidArgument);
  d.size = gran + 4096;  // not a multiple of the granularity
  EXPECT_RES(mcclIpcImport(&d, fd, 0, &q), mcclInvalidArgument);
  d.size = 4 * gran;  // larger than the allocation: the driver refuses the map
  EXPECT_RES(mcclIpcImport(&d, fd, 0, &q), mcclUnhandledCudaError);
  EXPECT_RES(mcclIpcImport(&good, -1, 0, &q), mcclInvalidArgument);
  int closedFd = dup(fd);
  EXPECT_EQ(close(closedFd), 0);
  EXPECT_RES(mcclIpcImport(&good, closedFd, 0, &q), mcclInvalidArgument);
  int pipeFds[2];
  EXPECT_EQ(pipe(pipeFds), 0);  // open, but not a memory handle
  EXPECT_RES(mcclIpcImport(&good, pipeFds[0], 0, &q), mcclUnhandledCudaError);
  close(pipeFds[0]);
  close(pipeFds[1]);
  EXPECT_RES(mcclIpcImport(&good, fd, 99, &q), mcclInvalidArgument);
  EXPECT_RES(mcclIpcImport(&good, fd, -1, &q), mcclInvalidArgument);
  EXPECT_TRUE(q == (void*)0x1);  // never written
  EXPECT_NO_LEAK(memBase);

  // The good descriptor still works after all that.
  EXPECT_OK(mcclIpcImport(&good, fd, 0, &q));
  expectDeviceBytes(q, host, gran);
  CHECK_STOPPED();
  EXPECT_OK(mcclIpcUnmap(q));
  EXPECT_EQ(close(fd), 0);
  EXPECT_OK(mcclCuMemFree(p));
  hostFree(host, gran);
  EXPECT_EQ(mcclTestCountFds(), fdBase);
}

static void exportBadInput(void) {
  if (deviceCount() < 1) SKIP("no device");
  warmUp();
  EXPECT_CUDA_OK(cudaSetDevice(0));
  size_t gran = granularity(0);
  int fdBase = mcclTestCountFds();
  long memBase = leakProbe();
  mcclIpcDesc desc;
  memset(&desc, 0xab, sizeof(desc));
  int fd = -42;
  void *p = NULL, *plain = NULL;
  EXPECT_RES(mcclIpcExport(NULL, &desc, &fd), mcclInvalidArgument);
  EXPECT_OK(mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 2 * gran));
  EXPECT_RES(mcclIpcExport(p, NULL, &fd), mcclInvalidArgument);
  EXPECT_RES(mcclIpcExport(p, &desc, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclIpcExport((char*)p + gran, &desc, &fd), mcclInvalidArgument);  // interior pointer
  char onStack[64];
  EXPECT_RES(mcclIpcExport(onStack, &desc, &fd), mcclInvalidArgument);  // not device memory
  EXPECT_OK(mcclCuMemAlloc(&plain, NULL, (CUmemAllocationHandleType)0, gran));  // not exportable
  EXPECT_RES(mcclIpcExport(plain, &desc, &fd), mcclInvalidArgument);
  EXPECT_OK(mcclCuMemFree(plain));
  CUmemGenericAllocationHandle h;
  EXPECT_OK(mcclCuMemRetainHandle(p, &h, NULL, NULL, NULL));
  EXPECT_RES(mcclIpcExportHandle(h, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0, &desc, &fd), mcclInvalidArgument);
  EXPECT_RES(mcclIpcExportHandle(h, gran, CU_MEM_HANDLE_TYPE_WIN32, 0, &desc, &fd), mcclInvalidArgument);
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_EQ(fd, -42);
  EXPECT_EQ(desc.magic, 0xabababab);
  EXPECT_OK(mcclCuMemFree(p));
  EXPECT_EQ(mcclTestCountFds(), fdBase);
  EXPECT_NO_LEAK(memBase);
}

// Without fabric support: a fabric descriptor is refused by the driver on import (we do not guess
// from our own device), and a POSIX-only allocation cannot be exported as fabric.
static void fabricUnsupportedFails(void) {
  if (deviceCount() < 1) SKIP("no device");
  warmUp();
  int supported = -1;
  EXPECT_OK(mcclIpcFabricSupported(0, &supported));
  EXPECT_TRUE(supported == 0 || supported == 1);
  EXPECT_RES(mcclIpcFabricSupported(99, &supported), mcclInvalidArgument);
  if (supported) SKIP("device 0 supports fabric handles: fabricRoundTrip covers it");
  size_t gran = granularity(0);
  int fdBase = mcclTestCountFds();
  long memBase = leakProbe();
  mcclIpcDesc d;
  memset(&d, 0, sizeof(d));
  d.magic = MCCL_IPC_DESC_MAGIC;
  d.handleType = CU_MEM_HANDLE_TYPE_FABRIC;
  d.size = gran;
  for (int i = 0; i < MCCL_IPC_FABRIC_HANDLE_BYTES; i++) d.fabric[i] = (unsigned char)mcclTestRand();
  void* q = (void*)0x1;
  EXPECT_RES(mcclIpcImport(&d, -1, 0, &q), mcclUnhandledCudaError);
  EXPECT_TRUE(q == (void*)0x1);
  void* p = NULL;
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_OK(mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, gran));
  CUmemGenericAllocationHandle h;
  EXPECT_OK(mcclCuMemRetainHandle(p, &h, NULL, NULL, NULL));
  mcclIpcDesc out;
  int fd = -42;
  memset(&out, 0, sizeof(out));
  EXPECT_RES(mcclIpcExportHandle(h, gran, CU_MEM_HANDLE_TYPE_FABRIC, 0, &out, &fd), mcclUnhandledCudaError);
  EXPECT_EQ(fd, -42);
  EXPECT_EQ(out.magic, 0);
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_OK(mcclCuMemFree(p));
  EXPECT_EQ(mcclTestCountFds(), fdBase);
  EXPECT_NO_LEAK(memBase);
}

// With fabric support (and an IMEX channel): the descriptor alone carries the allocation.
static void fabricRoundTrip(void) {
  if (deviceCount() < 1) SKIP("no device");
  warmUp();
  int supported = 0;
  EXPECT_OK(mcclIpcFabricSupported(0, &supported));
  if (!supported) SKIP("device 0 has no fabric handle support (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED=0)");
  size_t gran = granularity(0);
  EXPECT_CUDA_OK(cudaSetDevice(0));
  void *p = NULL, *q = NULL;
  if (mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC, gran) !=
      mcclSuccess)
    SKIP("cuMemCreate refused a fabric handle type (no IMEX channel?)");
  mcclIpcDesc desc;
  int fd = -2;
  EXPECT_OK(mcclIpcExport(p, &desc, &fd));
  if (desc.handleType != CU_MEM_HANDLE_TYPE_FABRIC) {
    EXPECT_EQ(desc.handleType, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);  // the documented fallback
    EXPECT_GE(fd, 0);
    close(fd);
    mcclCuMemFree(p);
    SKIP("fabric export refused, fell back to POSIX fd (no IMEX channel)");
  }
  EXPECT_EQ(fd, -1);
  unsigned char host[256];
  for (size_t i = 0; i < sizeof(host); i++) host[i] = (unsigned char)mcclTestRand();
  EXPECT_CUDA_OK(mcclTestCopyToDevice(p, host, sizeof(host)));
  EXPECT_OK(mcclIpcImport(&desc, -1, 0, &q));
  expectDeviceBytes(q, host, sizeof(host));
  CHECK_STOPPED();
  EXPECT_OK(mcclIpcUnmap(q));
  EXPECT_OK(mcclCuMemFree(p));
}

// lab 01's public allocator (recommended granularity, every peer mapped) exports just the same.
static void exportMemAlloc(void) {
  if (deviceCount() < 1) SKIP("no device");
  warmUp();
  EXPECT_CUDA_OK(cudaSetDevice(0));
  int fdBase = mcclTestCountFds();
  void *p = NULL, *q = NULL;
  EXPECT_OK(mcclMemAlloc(&p, 1000));
  unsigned char host[1000];
  for (size_t i = 0; i < sizeof(host); i++) host[i] = (unsigned char)(i ^ 0x5a);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(p, host, sizeof(host)));
  mcclIpcDesc desc;
  int fd = -1;
  mcclResult_t res = mcclIpcExport(p, &desc, &fd);
  if (res == mcclInvalidArgument && !mcclCuMemEnable()) {
    mcclMemFree(p);
    SKIP("cuMem disabled: mcclMemAlloc used cudaMalloc, which has no VMM handle");
  }
  EXPECT_EQ(res, mcclSuccess);
  EXPECT_GE(desc.size, sizeof(host));
  EXPECT_OK(mcclIpcImport(&desc, fd, 0, &q));
  if (fd >= 0) close(fd);
  expectDeviceBytes(q, host, sizeof(host));
  CHECK_STOPPED();
  EXPECT_OK(mcclIpcUnmap(q));
  EXPECT_OK(mcclMemFree(p));
  EXPECT_EQ(mcclTestCountFds(), fdBase);
}

// ---- a fabric-capable driver, as the export path sees it ------------------------------------------
// Fabric handles need an IMEX channel, which neither the sim nor most GPU hosts have. These two
// definitions in the test executable take the place of the backend's for the lab library's calls
// (and pass through to it via RTLD_NEXT) so that, while fakeFabric is set, an allocation advertises
// a fabric handle type and exporting one succeeds, and the number of fabric exports is counted.
static int fakeFabric;
static int fabricExports;

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle h) {
  CUresult (*real)(CUmemAllocationProp*, CUmemGenericAllocationHandle);
  *(void**)&real = dlsym(RTLD_NEXT, "cuMemGetAllocationPropertiesFromHandle");
  if (real == NULL) return CUDA_ERROR_NOT_FOUND;
  CUresult r = real(prop, h);
  if (r == CUDA_SUCCESS && fakeFabric) prop->requestedHandleTypes |= CU_MEM_HANDLE_TYPE_FABRIC;
  return r;
}

CUresult CUDAAPI cuMemExportToShareableHandle(void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                                              unsigned long long flags) {
  if (fakeFabric && type == CU_MEM_HANDLE_TYPE_FABRIC) {
    fabricExports++;
    memset(out, 0xfa, sizeof(CUmemFabricHandle));
    return CUDA_SUCCESS;
  }
  CUresult (*real)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
  *(void**)&real = dlsym(RTLD_NEXT, "cuMemExportToShareableHandle");
  return real ? real(out, h, type, flags) : CUDA_ERROR_NOT_FOUND;
}

// mcclIpcExport tries fabric first; when the driver gives a fabric handle, that one export is the
// descriptor (the driver is asked once, and no fd is made).
static void fabricExportedOnce(void) {
  EXPECT_CUDA_OK(cudaSetDevice(0));
  size_t gran = granularity(0);
  void* p = NULL;
  EXPECT_OK(mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, gran));
  mcclIpcDesc desc;
  int fd = -1;
  fakeFabric = 1;
  fabricExports = 0;
  mcclResult_t res = mcclIpcExport(p, &desc, &fd);
  fakeFabric = 0;
  EXPECT_OK(mcclCuMemFree(p));
  EXPECT_EQ(res, mcclSuccess);
  EXPECT_EQ(fabricExports, 1);
  EXPECT_EQ(desc.handleType, CU_MEM_HANDLE_TYPE_FABRIC);
  EXPECT_EQ(fd, -1);
  for (int i = 0; i < MCCL_IPC_FABRIC_HANDLE_BYTES; i++) EXPECT_EQ(desc.fabric[i], 0xfa);
}

// NCCL's symmetric layout: three allocations (three "ranks") exported and imported into one
// reservation at rank * stride, plus one mapped from its local handle. Every slot shows its owner's
// bytes, a write through a slot reaches the owner, bad slots are refused, Finalize refuses while
// slots are mapped, and unmapping everything leaves no mapping, reservation or fd behind.
static void symmetricImportAtOffset(void) {
  if (deviceCount() < 1) SKIP("no device");
  warmUp();
  enum { N = 3 };
  size_t size = granularity(0);
  int fdBase = mcclTestCountFds();
  long memBase = leakProbe();
  void* bufs[N] = {NULL};
  unsigned char* host[N] = {NULL};
  uint64_t seed[N];
  for (int r = 0; r < N; r++) allocPattern(&bufs[r], size, &host[r], &seed[r]);
  CHECK_STOPPED();
  mcclIpcSymmetric sym;
  memset(&sym, 0, sizeof(sym));
  EXPECT_RES(mcclIpcSymmetricInit(0, size, 0, &sym), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSymmetricInit(N, 0, 0, &sym), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSymmetricInit(N, size, -1, &sym), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSymmetricInit(N, SIZE_MAX / 2, 0, &sym), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSymmetricInit(N, size, 0, NULL), mcclInvalidArgument);
  EXPECT_TRUE(sym.base == NULL);  // nothing written on failure
  EXPECT_OK(mcclIpcSymmetricInit(N, size, 0, &sym));
  EXPECT_TRUE(sym.base != NULL && sym.stride >= size && sym.stride % sym.gran == 0 && sym.nRanks == N);
  void* peer[N] = {NULL};
  for (int r = 0; r < N - 1; r++) {  // ranks 0 and 1 through an fd, as a peer's buffer arrives
    mcclIpcDesc desc;
    int fd = -1;
    EXPECT_OK(mcclIpcExport(bufs[r], &desc, &fd));
    if (r == 0) {
      size_t misaligned = sym.gran / 2 ? sym.gran / 2 : 1;
      EXPECT_RES(mcclIpcImportSymmetric(&sym, misaligned, &desc, fd, &peer[r]), mcclInvalidArgument);
      EXPECT_RES(mcclIpcImportSymmetric(&sym, N * sym.stride, &desc, fd, &peer[r]), mcclInvalidArgument);  // outside
      EXPECT_RES(mcclIpcImportSymmetric(NULL, 0, &desc, fd, &peer[r]), mcclInvalidArgument);
      EXPECT_RES(mcclIpcImportSymmetric(&sym, 0, &desc, -1, &peer[r]), mcclInvalidArgument);
      EXPECT_RES(mcclIpcImportSymmetric(&sym, 0, &desc, fd, NULL), mcclInvalidArgument);
    }
    mcclResult_t res = mcclIpcImportSymmetric(&sym, (size_t)r * sym.stride, &desc, fd, &peer[r]);
    if (r == 1 && res == mcclSuccess) {  // the slot is taken now: a second import there is refused
      void* again = NULL;
      EXPECT_RES(mcclIpcImportSymmetric(&sym, sym.stride, &desc, fd, &again), mcclUnhandledCudaError);
      EXPECT_TRUE(again == NULL);
    }
    close(fd);
    EXPECT_OK(res);
  }
  // Rank 2 from its local handle (how a rank maps its own buffer into the range).
  CUmemGenericAllocationHandle h;
  EXPECT_OK(mcclCuMemRetainHandle(bufs[N - 1], &h, NULL, NULL, NULL));
  mcclResult_t mres = mcclIpcMapSymmetric(&sym, (size_t)(N - 1) * sym.stride, size, h, &peer[N - 1]);
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_OK(mres);
  for (int r = 0; r < N; r++) {
    EXPECT_TRUE(peer[r] == (char*)sym.base + (size_t)r * sym.stride);  // the known offset
    expectDeviceBytes(peer[r], host[r], size);
    CHECK_STOPPED();
  }
  // A write through rank 1's slot lands in rank 1's buffer.
  unsigned char b = 0xA5;
  EXPECT_CUDA_OK(mcclTestCopyToDevice(peer[1], &b, 1));
  host[1][0] = 0xA5;
  expectDeviceBytes(bufs[1], host[1], size);
  CHECK_STOPPED();
  EXPECT_RES(mcclIpcSymmetricFinalize(&sym), mcclUnhandledCudaError);  // slots still mapped
  EXPECT_TRUE(sym.base != NULL);
  EXPECT_RES(mcclIpcUnmapSymmetric(&sym, (char*)sym.base + 1, size), mcclInvalidArgument);
  for (int r = 0; r < N; r++) EXPECT_OK(mcclIpcUnmapSymmetric(&sym, peer[r], size));
  EXPECT_OK(mcclIpcUnmapSymmetric(&sym, NULL, size));
  EXPECT_OK(mcclIpcSymmetricFinalize(&sym));
  EXPECT_TRUE(sym.base == NULL);
  EXPECT_OK(mcclIpcSymmetricFinalize(&sym));  // zeroed: a no-op
  for (int r = 0; r < N; r++) {
    EXPECT_OK(mcclCuMemFree(bufs[r]));
    hostFree(host[r], size);
  }
  EXPECT_EQ(mcclTestCountFds(), fdBase);
  EXPECT_NO_LEAK(memBase);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(descriptorLayout), MCCL_TEST_CASE(exportImportEveryDevice),
               MCCL_TEST_CASE(mappingOutlivesExporter), MCCL_TEST_CASE(badDescriptors), MCCL_TEST_CASE(exportBadInput),
               MCCL_TEST_CASE(fabricUnsupportedFails), MCCL_TEST_CASE(fabricRoundTrip), MCCL_TEST_CASE(exportMemAlloc),
               MCCL_TEST_CASE(fabricExportedOnce), MCCL_TEST_CASE(symmetricImportAtOffset))
