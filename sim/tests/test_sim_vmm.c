// libsimcuda VMM tests, written against the CUDA API so they also run (BACKEND=cuda) on a real GPU:
// round trip, reference semantics, access faulting, misuse codes, OOM and accounting, host-NUMA memory,
// POSIX-fd export/import across two processes, fabric. Sim-only properties SKIP on other backends.
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mccl_test.h"
#include "mccl_fork.h"
#include "sim_test_fd.h"

static size_t gran;

static void setup(void) {
  EXPECT_CU_OK(cuInit(0));
  EXPECT_CUDA_OK(cudaSetDevice(0));
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  EXPECT_CU_OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

static CUmemAllocationProp devProp(int dev, int exportable) {
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  if (exportable) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

static void grantRW(CUdeviceptr va, size_t size, int dev) {
  CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_CU_OK(cuMemSetAccess(va, size, &desc, 1));
}

// Writes a seeded pattern through the device API and reads it back: 0 when every word matches.
static int patternRoundTrip(CUdeviceptr va, size_t size, uint32_t seed) {
  size_t n = size / 4;
  uint32_t* in = malloc(size);
  uint32_t* out = calloc(1, size);
  int bad = !in || !out;
  for (size_t i = 0; !bad && i < n; i++) in[i] = seed * 2654435761u + (uint32_t)i;
  if (!bad)
    bad = cuMemcpyHtoD(va, in, size) != CUDA_SUCCESS || cuMemcpyDtoH(out, va, size) != CUDA_SUCCESS ||
          memcmp(in, out, size) != 0;
  free(in);
  free(out);
  return bad;
}

static int countSimMemfds(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent* e;
  while (d && (e = readdir(d))) {
    char path[300], target[300];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(path, target, sizeof(target) - 1);
    if (len > 0) {
      target[len] = '\0';
      if (strncmp(target, "/memfd:minccl-sim", 17) == 0) n++;
    }
  }
  if (d) closedir(d);
  return n;
}

static void vmmRoundTrip(void) {
  setup();
  CHECK_STOPPED();
  EXPECT_EQ(gran % 4096, 0);
  CUmemAllocationProp prop = devProp(0, 0);
  size_t rec = 0;
  EXPECT_CU_OK(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  EXPECT_GE(rec, gran);
  size_t size = 2 * gran;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  EXPECT_CU_OK(cuMemCreate(&h, size, &prop, 0));
  EXPECT_CU_OK(cuMemAddressReserve(&va, size, gran, 0, 0));
  EXPECT_EQ(va % gran, 0);
  EXPECT_CU_OK(cuMemMap(va, size, 0, h, 0));
  grantRW(va, size, 0);
  CHECK_STOPPED();
  EXPECT_EQ(patternRoundTrip(va, size, (uint32_t)mcclTestRand()), 0);
  unsigned long long flags = 0;
  CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  EXPECT_CU_OK(cuMemGetAccess(&flags, &loc, va + 100));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUmemAllocationProp got;
  EXPECT_CU_OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
  EXPECT_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(got.location.id, 0);
  CUmemGenericAllocationHandle h2;
  EXPECT_CU_OK(cuMemRetainAllocationHandle(&h2, (void*)(va + 4096)));
  EXPECT_EQ(h2, h);
  EXPECT_CU_OK(cuMemRelease(h2));
  EXPECT_CU_OK(cuMemUnmap(va, size));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU_OK(cuMemAddressFree(va, size));
}

// A copy from a VMM mapping is refused unless the current device was granted access to it, even
// though the bytes are mapped (seen on an H200 with driver 580: cudaErrorInvalidValue).
static void copyNeedsAccessForCurrentDevice(void) {
  setup();
  CHECK_STOPPED();
  int n = 0;
  EXPECT_CUDA_OK(cudaGetDeviceCount(&n));
  if (n < 2) SKIP("needs 2 devices");
  CUmemAllocationProp prop = devProp(0, 0);
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  EXPECT_CU_OK(cuMemCreate(&h, gran, &prop, 0));
  EXPECT_CU_OK(cuMemAddressReserve(&va, gran, gran, 0, 0));
  EXPECT_CU_OK(cuMemMap(va, gran, 0, h, 0));
  grantRW(va, gran, 0);  // device 0 only
  CHECK_STOPPED();
  unsigned char buf[256] = {0};
  EXPECT_CUDA_OK(cudaMemcpy((void*)va, buf, sizeof(buf), cudaMemcpyHostToDevice));
  EXPECT_CUDA_OK(cudaSetDevice(1));
  cudaError_t rd = cudaMemcpy(buf, (void*)va, sizeof(buf), cudaMemcpyDeviceToHost);
  cudaError_t wr = cudaMemset((void*)va, 1, sizeof(buf));
  cudaGetLastError();
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMemcpy(buf, (void*)va, sizeof(buf), cudaMemcpyDeviceToHost));
  EXPECT_CU_OK(cuMemUnmap(va, gran));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU_OK(cuMemAddressFree(va, gran));
  EXPECT_EQ(rd, cudaErrorInvalidValue);
  EXPECT_EQ(wr, cudaErrorInvalidValue);
}

// Memory lives until the last handle is released and the last mapping is gone.
static void vmmReferenceSemantics(void) {
  setup();
  CHECK_STOPPED();
  int fds0 = countSimMemfds();
  CUmemAllocationProp prop = devProp(0, 0);
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  EXPECT_CU_OK(cuMemCreate(&h, gran, &prop, 0));
  EXPECT_CU_OK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
  EXPECT_CU_OK(cuMemMap(va, gran, 0, h, 0));
  EXPECT_CU_OK(cuMemMap(va + gran, gran, 0, h, 0));  // the same memory twice
  grantRW(va, 2 * gran, 0);
  CHECK_STOPPED();
  EXPECT_CU_OK(cuMemRelease(h));  // still mapped: the memory stays
  uint32_t seed = (uint32_t)mcclTestRand();
  EXPECT_EQ(patternRoundTrip(va, gran, seed), 0);
  uint32_t first = 0, alias = 0;
  EXPECT_CU_OK(cuMemcpyDtoH(&first, va, 4));
  EXPECT_CU_OK(cuMemcpyDtoH(&alias, va + gran, 4));
  EXPECT_EQ(alias, first);  // both mappings show the same bytes
  if (MCCL_TEST_ON_SIM) EXPECT_EQ(countSimMemfds(), fds0 + 1);
  EXPECT_CU_OK(cuMemUnmap(va, gran));
  if (MCCL_TEST_ON_SIM) EXPECT_EQ(countSimMemfds(), fds0 + 1);  // one mapping left
  EXPECT_CU_OK(cuMemcpyDtoH(&alias, va + gran, 4));
  EXPECT_EQ(alias, first);
  EXPECT_CU_OK(cuMemUnmap(va + gran, gran));
  if (MCCL_TEST_ON_SIM) EXPECT_EQ(countSimMemfds(), fds0);  // unmapped and released: freed
  CUmemGenericAllocationHandle h2;
  EXPECT_CU(cuMemRetainAllocationHandle(&h2, (void*)va), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU_OK(cuMemAddressFree(va, 2 * gran));
}

static void vmmFaultsBeforeSetAccess(void) {
  if (!MCCL_TEST_ON_SIM) SKIP("host-side faulting of unmapped device VA is a sim property");
  setup();
  CHECK_STOPPED();
  CUmemAllocationProp prop = devProp(0, 0);
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  EXPECT_CU_OK(cuMemCreate(&h, gran, &prop, 0));
  EXPECT_CU_OK(cuMemAddressReserve(&va, gran, 0, 0, 0));
  EXPECT_CU_OK(cuMemMap(va, gran, 0, h, 0));
  for (int granted = 0; granted < 2; granted++) {
    if (granted) grantRW(va, gran, 0);
    CHECK_STOPPED();
    pid_t pid = mcclForkChild();  // dies with this process
    if (pid == 0) {
      signal(SIGSEGV, SIG_DFL);  // the sanitizer's handler would turn the fault into exit(1)
      *(volatile char*)va = 1;
      _exit(0);
    }
    int st = 0;
    EXPECT_EQ(waitpid(pid, &st, 0), pid);
    if (granted)
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    else
      EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
  }
  EXPECT_CU_OK(cuMemUnmap(va, gran));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU_OK(cuMemAddressFree(va, gran));
}

static void vmmMisuse(void) {
  setup();
  CHECK_STOPPED();
  CUmemAllocationProp prop = devProp(0, 0);
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  EXPECT_CU(cuMemCreate(&h, gran + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);  // not a granularity multiple
  EXPECT_CU(cuMemCreate(&h, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuMemCreate(NULL, gran, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuMemCreate(&h, gran, NULL, 0), CUDA_ERROR_INVALID_VALUE);
  int n = 0;
  EXPECT_CU_OK(cuDeviceGetCount(&n));
  CUmemAllocationProp bad = devProp(n, 0);
  EXPECT_CU(cuMemCreate(&h, gran, &bad, 0), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_CU(cuMemAddressReserve(&va, gran + 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU_OK(cuMemCreate(&h, gran, &prop, 0));
  EXPECT_CU_OK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
  EXPECT_CU(cuMemMap(va, gran, gran, h, 0), CUDA_ERROR_NOT_SUPPORTED);   // offset "currently must be zero"
  EXPECT_CU(cuMemMap(va, 2 * gran, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED);  // beyond the allocation
  EXPECT_CU_OK(cuMemUnmap(va, gran));                                    // nothing mapped there: a no-op, as the driver
  CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_CU(cuMemSetAccess(va, gran, &desc, 1), CUDA_ERROR_INVALID_VALUE);  // unmapped range
  EXPECT_CU_OK(cuMemMap(va, gran, 0, h, 0));
  EXPECT_CU(cuMemUnmap(va, gran / 2), CUDA_ERROR_INVALID_VALUE);        // cuts through a mapping
  EXPECT_CU(cuMemAddressFree(va, 2 * gran), CUDA_ERROR_INVALID_VALUE);  // still has a mapping
  EXPECT_CU_OK(cuMemUnmap(va, gran));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);             // double release
  EXPECT_CU(cuMemAddressFree(va, gran), CUDA_ERROR_INVALID_VALUE);  // not the reserved size
  EXPECT_CU_OK(cuMemAddressFree(va, 2 * gran));
  void* p = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&p, gran));
  EXPECT_CUDA_OK(cudaFree(p));
  EXPECT_CUDA(cudaFree(p), cudaErrorInvalidValue);  // double free
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  CUdeviceptr d;
  EXPECT_CU_OK(cuMemAlloc(&d, gran));
  EXPECT_CU_OK(cuMemFree(d));
  EXPECT_CU(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
}

static void oomAndAccounting(void) {
  setup();
  CHECK_STOPPED();
  size_t total = 0, freeB = 0, free2 = 0, total2 = 0;
  EXPECT_CU_OK(cuMemGetInfo(&freeB, &total));
  EXPECT_LE(freeB, total);
  size_t tooBig = (total / gran + 1) * gran;
  CUmemAllocationProp prop = devProp(0, 0);
  CUmemGenericAllocationHandle h;
  EXPECT_CU(cuMemCreate(&h, tooBig, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CUdeviceptr d;
  EXPECT_CU(cuMemAlloc(&d, tooBig), CUDA_ERROR_OUT_OF_MEMORY);
  void* p;
  EXPECT_CUDA(cudaMalloc(&p, tooBig), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  if (!MCCL_TEST_ON_SIM) return;      // exact accounting is the sim's (other processes share a real GPU)
  EXPECT_EQ(total, (size_t)4 << 30);  // MCCL_SIM_DEVICE_MEM default
  EXPECT_CU_OK(cuMemCreate(&h, 4 * gran, &prop, 0));
  EXPECT_CU_OK(cuMemGetInfo(&free2, &total2));
  EXPECT_EQ(free2, freeB - 4 * gran);
  EXPECT_CUDA_OK(cudaMalloc(&p, gran));
  EXPECT_CUDA_OK(cudaMemGetInfo(&free2, &total2));
  EXPECT_EQ(free2, freeB - 5 * gran);
  // Fill the device exactly: the next granule is refused, releasing one makes room again.
  size_t rest = free2;
  CUmemGenericAllocationHandle big;
  EXPECT_CU_OK(cuMemCreate(&big, rest, &prop, 0));
  EXPECT_CU(cuMemCreate(&h, gran, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_CUDA_OK(cudaFree(p));
  CUmemGenericAllocationHandle h3;
  EXPECT_CU_OK(cuMemCreate(&h3, gran, &prop, 0));
  EXPECT_CU_OK(cuMemRelease(h3));
  EXPECT_CU_OK(cuMemRelease(big));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU_OK(cuMemGetInfo(&free2, &total2));
  EXPECT_EQ(free2, freeB);
}

static void hostNumaAlloc(void) {
  setup();
  CHECK_STOPPED();
  int supported = 0, numa = -1;
  EXPECT_CU_OK(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  EXPECT_CU_OK(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0));
  if (!supported || numa < 0) SKIP("no host-NUMA cuMem support on this device");
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = numa;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t g = 0, free0, free1, total;
  EXPECT_CU_OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_GT(g, 0);
  EXPECT_CU_OK(cuMemGetInfo(&free0, &total));
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  EXPECT_CU_OK(cuMemCreate(&h, g, &prop, 0));
  if (MCCL_TEST_ON_SIM) {
    EXPECT_CU_OK(cuMemGetInfo(&free1, &total));
    EXPECT_EQ(free1, free0);  // host memory is not charged to the device
  }
  EXPECT_CU_OK(cuMemAddressReserve(&va, g, 0, 0, 0));
  EXPECT_CU_OK(cuMemMap(va, g, 0, h, 0));
  CUmemAccessDesc desc[2] = {{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
                             {{CU_MEM_LOCATION_TYPE_HOST_NUMA, numa}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE}};
  EXPECT_CU_OK(cuMemSetAccess(va, g, desc, 2));
  EXPECT_EQ(patternRoundTrip(va, g, 7), 0);
  // The host reads what the device wrote: that is what host-NUMA memory is for.
  EXPECT_CU_OK(cuMemsetD32(va, 0x5a5a1234u, g / 4));
  EXPECT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(((volatile uint32_t*)va)[g / 4 - 1], 0x5a5a1234u);
  unsigned int type = 0;
  EXPECT_CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va));
  EXPECT_CU_OK(cuMemUnmap(va, g));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU_OK(cuMemAddressFree(va, g));
}

static void fabricNotSupported(void) {
  setup();
  CHECK_STOPPED();
  int fabric = 0;
  EXPECT_CU_OK(cuDeviceGetAttribute(&fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0));
  if (fabric) SKIP("this device supports fabric handles");
  CUmemAllocationProp prop = devProp(0, 0);
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  CUmemGenericAllocationHandle h;
  EXPECT_CU(cuMemCreate(&h, gran, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
  prop = devProp(0, 1);
  EXPECT_CU_OK(cuMemCreate(&h, gran, &prop, 0));
  CUmemFabricHandle fh;
  EXPECT_CU(cuMemExportToShareableHandle(&fh, h, CU_MEM_HANDLE_TYPE_FABRIC, 0), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_CU_OK(cuMemRelease(h));
}

static void exportNeedsRequestedType(void) {
  setup();
  CHECK_STOPPED();
  CUmemAllocationProp prop = devProp(0, 0);
  CUmemGenericAllocationHandle h;
  int fd = -1;
  EXPECT_CU_OK(cuMemCreate(&h, gran, &prop, 0));
  CUresult r = cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU(r, CUDA_ERROR_INVALID_VALUE);  // not requested at creation: refused
  prop = devProp(0, 1);
  EXPECT_CU_OK(cuMemCreate(&h, gran, &prop, 0));
  int fd1 = -1, fd2 = -1;
  EXPECT_CU_OK(cuMemExportToShareableHandle(&fd1, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  EXPECT_CU_OK(cuMemExportToShareableHandle(&fd2, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  EXPECT_TRUE(fd1 >= 0 && fd2 >= 0 && fd1 != fd2);  // a new fd each time, owned by the caller
  close(fd1);
  close(fd2);
  EXPECT_CU_OK(cuMemRelease(h));
}

// ---- export/import across processes: the child is this binary re-executed (a forked child of an
// initialized CUDA process may not use CUDA), with the socket's fd number in the environment.
#define PATTERN(i) (0xC0DE0000u ^ (uint32_t)(i)*2654435761u)

// Child role: import the fd, map it, write the pattern through the device API, report, wait.
static int importChild(int sock) {
  uint64_t size = 0;
  if (cuInit(0) != CUDA_SUCCESS || cudaSetDevice(0) != cudaSuccess) return 10;
  int fd = recvFd(sock, &size);
  if (fd < 0) return 11;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  if (cuMemImportFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0)
    return 12;
  close(fd);  // the importer still owns its fd; the imported handle does not depend on it
  if (cuMemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS || cuMemMap(va, size, 0, h, 0) != CUDA_SUCCESS) return 13;
  CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (cuMemSetAccess(va, size, &desc, 1) != CUDA_SUCCESS) return 14;
  uint32_t* buf = malloc(size);
  for (size_t i = 0; i < size / 4; i++) buf[i] = PATTERN(i);
  if (cuMemcpyHtoD(va, buf, size) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS) return 15;
  free(buf);
  char b = 'w';
  if (write(sock, &b, 1) != 1 || read(sock, &b, 1) != 1) return 16;
  if (cuMemUnmap(va, size) || cuMemRelease(h) || cuMemAddressFree(va, size)) return 17;
  return 0;
}

static void exportImportTwoProcesses(void) {
  setup();
  CHECK_STOPPED();
  size_t size = 2 * gran;
  CUmemAllocationProp prop = devProp(0, 1);
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  int fd = -1;
  EXPECT_CU_OK(cuMemCreate(&h, size, &prop, 0));
  EXPECT_CU_OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  int sock = -1;
  pid_t pid = simTestSpawnPeer("import", "test_sim_vmm", &sock);
  EXPECT_TRUE(pid > 0);
  EXPECT_EQ(sendFd(sock, fd, size), 0);
  close(fd);  // our copy; the child got its own through SCM_RIGHTS
  char b = 0;
  ssize_t got = read(sock, &b, 1);
  EXPECT_CU_OK(cuMemAddressReserve(&va, size, 0, 0, 0));
  EXPECT_CU_OK(cuMemMap(va, size, 0, h, 0));
  grantRW(va, size, 0);
  uint32_t* out = calloc(1, size);
  int mismatches = -1;
  if (got == 1 && cuMemcpyDtoH(out, va, size) == CUDA_SUCCESS) {
    mismatches = 0;
    for (size_t i = 0; i < size / 4; i++) mismatches += out[i] != PATTERN(i);
  }
  free(out);
  b = 'd';
  if (write(sock, &b, 1) != 1) mismatches = -2;
  close(sock);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_CU_OK(cuMemUnmap(va, size));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU_OK(cuMemAddressFree(va, size));
  EXPECT_EQ(got, 1);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(mismatches, 0);
}

static void importRejectsForeignFd(void) {
  setup();
  CHECK_STOPPED();
  int fd = dup(2);  // stderr: not a CUDA allocation
  CUmemGenericAllocationHandle h;
  CUresult r = cuMemImportFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(fd);
  EXPECT_TRUE(r != CUDA_SUCCESS);
}

static const mcclTestCase cases[] = {
    MCCL_TEST_CASE(vmmRoundTrip),
    MCCL_TEST_CASE(vmmReferenceSemantics),
    MCCL_TEST_CASE(vmmFaultsBeforeSetAccess),
    MCCL_TEST_CASE(vmmMisuse),
    MCCL_TEST_CASE(oomAndAccounting),
    MCCL_TEST_CASE(hostNumaAlloc),
    MCCL_TEST_CASE(fabricNotSupported),
    MCCL_TEST_CASE(exportNeedsRequestedType),
    MCCL_TEST_CASE(exportImportTwoProcesses),
    MCCL_TEST_CASE(importRejectsForeignFd),
    MCCL_TEST_CASE(copyNeedsAccessForCurrentDevice),
};

int main(int argc, char** argv) {
  const char* role = getenv("MCCL_SIM_TEST_ROLE");
  if (role && strcmp(role, "import") == 0) return importChild(atoi(getenv("MCCL_SIM_TEST_SOCK")));
  return mcclTestMain(argc, argv, cases, (int)(sizeof(cases) / sizeof(cases[0])), NULL);
}
