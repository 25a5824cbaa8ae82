// libsimcuda tests of devices, contexts, streams, events, copies, host memory, pointer attributes,
// error strings and threads. Written against the CUDA API: they also run (BACKEND=cuda) on a real GPU,
// and sim-only properties SKIP there.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_test.h"
#include "mccl_fork.h"


static void setup(void) {
  EXPECT_CU_OK(cuInit(0));
  EXPECT_CUDA_OK(cudaSetDevice(0));
}

// A fresh process: driver calls before cuInit fail, runtime calls initialize implicitly.
static int noInitChild(void) {
  int n = -1;
  if (cuDeviceGetCount(&n) != CUDA_ERROR_NOT_INITIALIZED) return 1;
  CUdevice d;
  if (cuDeviceGet(&d, 0) != CUDA_ERROR_NOT_INITIALIZED) return 2;
  int v = 0;
  if (cuDriverGetVersion(&v) != CUDA_SUCCESS || v < 12000) return 3;  // allowed before cuInit
  if (cudaFree(NULL) != cudaSuccess) return 4;                          // the runtime's init idiom
  CUcontext c = NULL;
  if (cuCtxGetCurrent(&c) != CUDA_SUCCESS || c == NULL) return 5;     // runtime bound device 0's context
  if (cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 1) return 6;
  return 0;
}

static void initRequired(void) {
  pid_t pid = mcclForkChild();  // dies with this process
  if (pid == 0) {
    setenv("MCCL_SIM_TEST_ROLE", "noinit", 1);
    execl("/proc/self/exe", "test_sim_runtime", (char*)NULL);
    _exit(99);
  }
  int st = 0;
  EXPECT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

static void devicesAndAttributes(void) {
  setup();
  CHECK_STOPPED();
  int n = 0, rn = 0, v = 0;
  EXPECT_CU_OK(cuDeviceGetCount(&n));
  EXPECT_CUDA_OK(cudaGetDeviceCount(&rn));
  EXPECT_EQ(rn, n);
  EXPECT_CUDA_OK(cudaRuntimeGetVersion(&v));
  EXPECT_GE(v, 12000);
  CUdevice d;
  EXPECT_CU(cuDeviceGet(&d, n), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_CUDA(cudaSetDevice(n), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  int vmm = 0, ua = 0, posix = 0;
  EXPECT_CU_OK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  EXPECT_CU_OK(cuDeviceGetAttribute(&ua, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0));
  EXPECT_CU_OK(cuDeviceGetAttribute(&posix, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
  EXPECT_EQ(vmm, 1);
  EXPECT_EQ(ua, 1);
  EXPECT_EQ(posix, 1);
  EXPECT_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, n), CUDA_ERROR_INVALID_DEVICE);
  // PCI bus ids are distinct per device, and the runtime and driver agree.
  char a[32], b[32];
  for (int i = 0; i < n; i++) {
    EXPECT_CU_OK(cuDeviceGetPCIBusId(a, sizeof(a), i));
    EXPECT_CUDA_OK(cudaDeviceGetPCIBusId(b, sizeof(b), i));
    EXPECT_EQ(strcmp(a, b), 0);
    for (int j = 0; j < i; j++) {
      EXPECT_CU_OK(cuDeviceGetPCIBusId(b, sizeof(b), j));
      EXPECT_NE(strcmp(a, b), 0);
    }
  }
  struct cudaDeviceProp prop;
  int major = 0, sms = 0;
  EXPECT_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  EXPECT_CU_OK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  EXPECT_CU_OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  EXPECT_EQ(prop.major, major);
  EXPECT_EQ(prop.multiProcessorCount, sms);
  size_t total = 0;
  EXPECT_CU_OK(cuDeviceTotalMem(&total, 0));
  EXPECT_EQ(prop.totalGlobalMem, total);
  if (!MCCL_TEST_ON_SIM) return;
  // What the sim promises: an H200-like device, 4 of them by default.
  char name[128];
  int val = 0;
  EXPECT_EQ(n, 4);
  EXPECT_CU_OK(cuDeviceGetName(name, sizeof(name), 0));
  EXPECT_TRUE(strstr(name, "sim") != NULL);
  EXPECT_EQ(major, 9);
  EXPECT_EQ(sms, 4);  // as many blocks as CPU threads run side by side well, not an H200's 132
  EXPECT_CU_OK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0));
  EXPECT_EQ(val, 0);
  EXPECT_CU_OK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0));
  EXPECT_EQ(val, 0);
  EXPECT_CU_OK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0));
  EXPECT_EQ(val, 1);
  EXPECT_CU_OK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0));
  EXPECT_EQ(val, 0);
  CUuuid u0, u1;
  EXPECT_CU_OK(cuDeviceGetUuid(&u0, 0));
  EXPECT_CU_OK(cuDeviceGetUuid(&u1, 1));
  EXPECT_NE(memcmp(&u0, &u1, sizeof(u0)), 0);
}

static void contextsAndPeers(void) {
  setup();
  CHECK_STOPPED();
  CUcontext c = NULL, cur = NULL;
  unsigned int flags = 0;
  int active = 0, dev = -1;
  EXPECT_CU_OK(cuDevicePrimaryCtxRetain(&c, 0));
  EXPECT_CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(active, 1);
  EXPECT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_TRUE(cur == c);  // cudaSetDevice made the primary context current
  EXPECT_CU_OK(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 0);
  EXPECT_CU_OK(cuCtxSynchronize());
  EXPECT_CU_OK(cuDevicePrimaryCtxRelease(0));
  int n = 0;
  EXPECT_CUDA_OK(cudaGetDeviceCount(&n));
  if (n < 2) SKIP("peer access needs two devices");
  int can = 0;
  EXPECT_CUDA_OK(cudaDeviceCanAccessPeer(&can, 0, 1));
  EXPECT_EQ(can, 1);
  EXPECT_CU_OK(cuDeviceCanAccessPeer(&can, 1, 0));
  EXPECT_EQ(can, 1);
  EXPECT_CUDA_OK(cudaSetDevice(1));
  EXPECT_CUDA_OK(cudaGetDevice(&dev));
  EXPECT_EQ(dev, 1);
  EXPECT_CU_OK(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 1);
  EXPECT_CUDA(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessUnsupported);  // not its own peer
  EXPECT_CUDA_OK(cudaDeviceEnablePeerAccess(0, 0));
  EXPECT_CUDA(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_EQ(cudaGetLastError(), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_CUDA_OK(cudaDeviceDisablePeerAccess(0));
  // A peer copy between two devices' memory.
  void *a = NULL, *b = NULL;
  char in[256], out[256] = {0};
  for (int i = 0; i < 256; i++) in[i] = (char)(mcclTestRand() & 0xff);
  EXPECT_CUDA_OK(cudaMalloc(&b, sizeof(in)));
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_CUDA_OK(cudaMalloc(&a, sizeof(in)));
  EXPECT_CUDA_OK(cudaMemcpy(a, in, sizeof(in), cudaMemcpyHostToDevice));
  EXPECT_CUDA_OK(cudaMemcpyPeer(b, 1, a, 0, sizeof(in)));
  EXPECT_CUDA_OK(cudaMemcpy(out, b, sizeof(out), cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(out, in, sizeof(in));
  int ord = -1;
  EXPECT_CU_OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)b));
  EXPECT_EQ(ord, 1);
  EXPECT_CUDA_OK(cudaFree(a));
  EXPECT_CUDA_OK(cudaFree(b));
}

// Many async memsets and copies on one stream land in issue order.
// The sim's defaults are the rows of common/include/mccl_params.def, not copies of them.
#define MCCL_PARAM_INT(name, env, deflt, doc)
#define MCCL_PARAM_STR(name, env, deflt, doc)
#define MCCL_PARAM_SIM(name, env, deflt, doc) static const long long tableDefault##name = (deflt);
#include "mccl_params.def"
#undef MCCL_PARAM_INT
#undef MCCL_PARAM_STR
#undef MCCL_PARAM_SIM

static void defaultsFromParamTable(void) {
  if (!MCCL_TEST_ON_SIM) SKIP("sim-only parameters");
  const char* a = getenv("MCCL_SIM_DEVICES");
  const char* b = getenv("MCCL_SIM_DEVICE_MEM");
  if ((a && *a) || (b && *b)) SKIP("MCCL_SIM_DEVICES or MCCL_SIM_DEVICE_MEM is set");
  setup();
  CHECK_STOPPED();
  int n = 0;
  size_t total = 0;
  EXPECT_CU_OK(cuDeviceGetCount(&n));
  EXPECT_EQ(n, tableDefaultSimDevices);
  EXPECT_CU_OK(cuDeviceTotalMem(&total, 0));
  EXPECT_EQ(total, tableDefaultSimDeviceMem);
}

static void streamOrdering(void) {
  setup();
  CHECK_STOPPED();
  enum { chunk = 64 << 10, rounds = 64 };
  void* d = NULL;
  unsigned char* host = NULL;
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaMalloc(&d, chunk));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&host, (size_t)chunk * rounds, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned base = (unsigned)(mcclTestRand() & 0x7f);
  for (int i = 0; i < rounds; i++) {
    // Each round overwrites the same device buffer: only in-order execution leaves round i in slot i.
    EXPECT_CUDA_OK(cudaMemsetAsync(d, (int)(base + i), chunk, s));
    EXPECT_CUDA_OK(cudaMemsetAsync(d, (int)(base + i + 1), chunk / 2, s));
    EXPECT_CUDA_OK(cudaMemcpyAsync(host + (size_t)i * chunk, d, chunk, cudaMemcpyDeviceToHost, s));
  }
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_CUDA_OK(cudaStreamQuery(s));
  for (int i = 0; i < rounds; i++) {
    unsigned char* p = host + (size_t)i * chunk;
    EXPECT_EQ(p[0], (unsigned char)(base + i + 1));
    EXPECT_EQ(p[chunk / 2 - 1], (unsigned char)(base + i + 1));
    EXPECT_EQ(p[chunk / 2], (unsigned char)(base + i));
    EXPECT_EQ(p[chunk - 1], (unsigned char)(base + i));
  }
  // Driver twins on the same stream: D32 set, then DtoD, then DtoH.
  CUdeviceptr d2;
  uint32_t words[16];
  EXPECT_CU_OK(cuMemAlloc(&d2, sizeof(words)));
  EXPECT_CU_OK(cuMemsetD32Async((CUdeviceptr)d, 0xabcd1234u, 16, s));
  EXPECT_CU_OK(cuMemcpyDtoDAsync(d2, (CUdeviceptr)d, sizeof(words), s));
  EXPECT_CU_OK(cuMemcpyDtoHAsync(words, d2, sizeof(words), s));
  EXPECT_CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(words[15], 0xabcd1234u);
  EXPECT_CU(cuMemsetD32((CUdeviceptr)d + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);  // misaligned
  EXPECT_CU_OK(cuMemFree(d2));
  EXPECT_CUDA(cudaMemcpy(host, d, 16, (enum cudaMemcpyKind)42), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFree(d));
  EXPECT_CUDA_OK(cudaFreeHost(host));
}

static void sleepMs(void* arg) {
  struct timespec ts = {0, (long)(intptr_t)arg * 1000000L};
  nanosleep(&ts, NULL);
}

// The stream runs behind the host: a queued sleep keeps the stream and an event pending, and
// the elapsed time between two events covers it.
static void eventsAndElapsedTime(void) {
  setup();
  CHECK_STOPPED();
  cudaStream_t s;
  cudaEvent_t start, stop, never, untimed;
  float ms = -1;
  EXPECT_CUDA_OK(cudaStreamCreate(&s));
  EXPECT_CUDA_OK(cudaEventCreate(&start));
  EXPECT_CUDA_OK(cudaEventCreate(&stop));
  EXPECT_CUDA_OK(cudaEventCreate(&never));
  EXPECT_CUDA_OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
  EXPECT_CUDA_OK(cudaEventQuery(never));  // never recorded: complete
  EXPECT_CUDA_OK(cudaEventRecord(start, s));
  EXPECT_CUDA_OK(cudaLaunchHostFunc(s, sleepMs, (void*)(intptr_t)100));
  EXPECT_CUDA_OK(cudaEventRecord(stop, s));
  EXPECT_CUDA_OK(cudaEventRecord(untimed, s));
  EXPECT_CUDA(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_CUDA(cudaEventQuery(stop), cudaErrorNotReady);
  EXPECT_CUDA(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady);
  EXPECT_CUDA_OK(cudaEventSynchronize(stop));
  EXPECT_CUDA_OK(cudaEventQuery(stop));
  EXPECT_CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 90.0);
  EXPECT_LT(ms, 5000.0);
  EXPECT_CUDA(cudaEventElapsedTime(&ms, start, never), cudaErrorInvalidResourceHandle);
  EXPECT_CUDA_OK(cudaEventSynchronize(untimed));
  EXPECT_CUDA(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  // Cross-stream dependency: s2 waits for an event recorded after a sleep on s.
  cudaStream_t s2;
  int* flag = NULL;
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&flag, 2 * sizeof(int), cudaHostAllocDefault));
  flag[0] = 0;
  flag[1] = 0;
  int one = 1;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  EXPECT_CUDA_OK(cudaLaunchHostFunc(s, sleepMs, (void*)(intptr_t)50));
  EXPECT_CUDA_OK(cudaMemcpyAsync(&flag[0], &one, sizeof(int), cudaMemcpyHostToHost, s));
  EXPECT_CUDA_OK(cudaEventRecord(stop, s));
  EXPECT_CUDA_OK(cudaStreamWaitEvent(s2, stop, 0));
  EXPECT_CUDA_OK(cudaMemcpyAsync(&flag[1], &flag[0], sizeof(int), cudaMemcpyHostToHost, s2));
  EXPECT_CUDA_OK(cudaStreamSynchronize(s2));
  EXPECT_EQ(flag[1], 1);  // s2's copy ran after s's
  // Driver twins.
  CUevent e1, e2;
  EXPECT_CU_OK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  EXPECT_CU_OK(cuEventCreate(&e2, CU_EVENT_DEFAULT));
  EXPECT_CU_OK(cuEventRecord(e1, s));
  EXPECT_CU_OK(cuEventRecord(e2, s));
  EXPECT_CU_OK(cuEventSynchronize(e2));
  EXPECT_CU_OK(cuEventElapsedTime(&ms, e1, e2));
  EXPECT_GE(ms, 0.0);
  EXPECT_CU_OK(cuEventDestroy(e1));
  EXPECT_CU_OK(cuEventDestroy(e2));
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_CUDA_OK(cudaStreamDestroy(s2));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaEventDestroy(start));
  EXPECT_CUDA_OK(cudaEventDestroy(stop));
  EXPECT_CUDA_OK(cudaEventDestroy(never));
  EXPECT_CUDA_OK(cudaEventDestroy(untimed));
  EXPECT_CUDA_OK(cudaFreeHost(flag));
}

static void captureState(void) {
  setup();
  CHECK_STOPPED();
  cudaStream_t s;
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
  EXPECT_CUDA_OK(cudaStreamCreate(&s));
  EXPECT_CUDA_OK(cudaStreamIsCapturing(s, &st));
  EXPECT_EQ(st, cudaStreamCaptureStatusNone);
  CUstreamCaptureStatus cst = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  EXPECT_CU_OK(cuStreamGetCaptureInfo(s, &cst, NULL, NULL, NULL, NULL, NULL));
  EXPECT_EQ(cst, CU_STREAM_CAPTURE_STATUS_NONE);
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  EXPECT_CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);  // the per-thread default
  mode = cudaStreamCaptureModeThreadLocal;
  EXPECT_CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed);
  mode = cudaStreamCaptureModeGlobal;
  EXPECT_CUDA_OK(cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, cudaStreamCaptureModeThreadLocal);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
}

static void hostAllocAndRegister(void) {
  setup();
  CHECK_STOPPED();
  const size_t size = 1 << 20;
  unsigned flagsList[] = {cudaHostAllocDefault, cudaHostAllocPortable, cudaHostAllocMapped,
                          cudaHostAllocWriteCombined};
  for (int i = 0; i < 4; i++) {
    char* h = NULL;
    void* d = NULL;
    EXPECT_CUDA_OK(cudaHostAlloc((void**)&h, size, flagsList[i]));
    EXPECT_CUDA_OK(cudaHostGetDevicePointer(&d, h + 64, 0));
    EXPECT_TRUE(d == h + 64);  // unified addressing: same pointer
    memset(h, 0x33, size);
    char back[64];
    EXPECT_CUDA_OK(cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost));
    EXPECT_EQ(back[10], 0x33);
    EXPECT_CUDA_OK(cudaFreeHost(h));
  }
  char* h = NULL;
  EXPECT_CUDA_OK(cudaMallocHost((void**)&h, size));
  EXPECT_CUDA_OK(cudaFreeHost(h));
  CUdeviceptr dp;
  void* ch = NULL;
  EXPECT_CU_OK(cuMemHostAlloc(&ch, size, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  EXPECT_CU_OK(cuMemHostGetDevicePointer(&dp, ch, 0));
  EXPECT_EQ(dp, (CUdeviceptr)ch);
  EXPECT_CU_OK(cuMemFreeHost(ch));
  // Registration of ordinary memory.
  char* buf = aligned_alloc(4096, size);
  void* d = NULL;
  EXPECT_TRUE(buf != NULL);
  EXPECT_CUDA(cudaHostGetDevicePointer(&d, buf, 0), cudaErrorInvalidValue);  // not registered yet
  cudaGetLastError();
  EXPECT_CUDA_OK(cudaHostRegister(buf, size, cudaHostRegisterMapped));
  EXPECT_CUDA(cudaHostRegister(buf + 4096, 4096, cudaHostRegisterDefault), cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_CUDA_OK(cudaHostGetDevicePointer(&d, buf, 0));
  EXPECT_TRUE(d == buf);
  void* dev = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&dev, 4096));
  EXPECT_CUDA_OK(cudaMemset(dev, 0x5e, 4096));
  EXPECT_CUDA_OK(cudaMemcpy(d, dev, 4096, cudaMemcpyDeviceToDevice));
  EXPECT_EQ(buf[4095], 0x5e);
  EXPECT_CUDA_OK(cudaFree(dev));
  EXPECT_CUDA(cudaHostUnregister(buf + 4096), cudaErrorInvalidValue);  // inside, but not the start
  EXPECT_CUDA_OK(cudaHostUnregister(buf));
  EXPECT_CUDA(cudaHostUnregister(buf), cudaErrorHostMemoryNotRegistered);
  EXPECT_EQ(cudaGetLastError(), cudaErrorHostMemoryNotRegistered);
  EXPECT_CU_OK(cuMemHostRegister(buf, size, CU_MEMHOSTREGISTER_DEVICEMAP));
  EXPECT_CU(cuMemHostRegister(buf, size, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_CU_OK(cuMemHostGetDevicePointer(&dp, buf, 0));
  EXPECT_EQ(dp, (CUdeviceptr)buf);
  EXPECT_CU_OK(cuMemHostUnregister(buf));
  EXPECT_CU(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  free(buf);
}

static void pointerAttributes(void) {
  setup();
  CHECK_STOPPED();
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t g = 0;
  EXPECT_CU_OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  EXPECT_CU_OK(cuMemCreate(&h, g, &prop, 0));
  EXPECT_CU_OK(cuMemAddressReserve(&va, 2 * g, 0, 0, 0));
  EXPECT_CU_OK(cuMemMap(va + g, g, 0, h, 0));
  CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_CU_OK(cuMemSetAccess(va + g, g, &desc, 1));
  CUdeviceptr p = va + g + 100, start = 0, base = 0;
  int ord = -1, mapped = 0, legacy = 1, access = 0;
  unsigned int type = 0;
  size_t rsize = 0, asize = 0;
  unsigned long long types = 0;
  EXPECT_CU_OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  EXPECT_CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
  EXPECT_CU_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p));
  EXPECT_CU_OK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p));
  EXPECT_CU_OK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, p));
  EXPECT_CU_OK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p));
  EXPECT_CU_OK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p));
  EXPECT_CU_OK(cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p));
  EXPECT_EQ(ord, 0);
  EXPECT_EQ(type, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(start, va);  // the driver's range of a VMM pointer is the whole reservation
  EXPECT_EQ(rsize, 2 * g);
  EXPECT_EQ(mapped, 1);
  void* mbase = NULL;
  size_t msize = 0;
  EXPECT_CU_OK(cuPointerGetAttribute(&mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p));
  EXPECT_CU_OK(cuPointerGetAttribute(&msize, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p));
  EXPECT_EQ((CUdeviceptr)mbase, va + g);
  EXPECT_EQ(msize, g);
  EXPECT_CU(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va + 100), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuMemGetAddressRange(&base, &asize, va + 100), CUDA_ERROR_NOT_FOUND);  // reserved, unmapped
  EXPECT_EQ(types, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(legacy, 0);
  EXPECT_EQ(access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
  EXPECT_CU_OK(cuMemGetAddressRange(&base, &asize, p));
  EXPECT_EQ(base, va + g);
  EXPECT_EQ(asize, g);
  struct cudaPointerAttributes at;
  EXPECT_CUDA_OK(cudaPointerGetAttributes(&at, (void*)p));
  EXPECT_EQ(at.type, cudaMemoryTypeDevice);
  EXPECT_EQ(at.device, 0);
  EXPECT_CU_OK(cuMemUnmap(va + g, g));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU_OK(cuMemAddressFree(va, 2 * g));
  // cudaMalloc memory: legacy-IPC capable, its range is the allocation.
  void* d = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&d, g - 24));
  EXPECT_CU_OK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, (CUdeviceptr)d + 8));
  EXPECT_EQ(legacy, 1);
  EXPECT_CU_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, (CUdeviceptr)d + 8));
  EXPECT_EQ(start, (CUdeviceptr)d);
  EXPECT_CU_OK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)d + 8));
  EXPECT_EQ(rsize, g - 24);  // the requested size
  EXPECT_CUDA_OK(cudaFree(d));
  // Host memory.
  char* hp = NULL;
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&hp, 4096, cudaHostAllocMapped));
  EXPECT_CUDA_OK(cudaPointerGetAttributes(&at, hp));
  EXPECT_EQ(at.type, cudaMemoryTypeHost);
  EXPECT_TRUE(at.hostPointer == hp);
  EXPECT_CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)hp));
  EXPECT_EQ(type, CU_MEMORYTYPE_HOST);
  EXPECT_CUDA_OK(cudaFreeHost(hp));
  int local = 0;
  EXPECT_CUDA_OK(cudaPointerGetAttributes(&at, &local));
  EXPECT_EQ(at.type, cudaMemoryTypeUnregistered);
  EXPECT_CU(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)&local),
            CUDA_ERROR_INVALID_VALUE);
}

#define NAME_IS(code)                                        \
  do {                                                       \
    const char* s_ = NULL;                                   \
    EXPECT_CU_OK(cuGetErrorName(code, &s_));                 \
    EXPECT_TRUE(s_ && strcmp(s_, #code) == 0);               \
    s_ = NULL;                                               \
    EXPECT_CU_OK(cuGetErrorString(code, &s_));               \
    EXPECT_TRUE(s_ && *s_);                                  \
  } while (0)
#define RT_NAME_IS(code)                                     \
  do {                                                       \
    EXPECT_EQ(strcmp(cudaGetErrorName(code), #code), 0);     \
    EXPECT_TRUE(*cudaGetErrorString(code));                  \
  } while (0)

static void errorStrings(void) {
  NAME_IS(CUDA_SUCCESS);
  NAME_IS(CUDA_ERROR_INVALID_VALUE);
  NAME_IS(CUDA_ERROR_OUT_OF_MEMORY);
  NAME_IS(CUDA_ERROR_NOT_INITIALIZED);
  NAME_IS(CUDA_ERROR_INVALID_DEVICE);
  NAME_IS(CUDA_ERROR_INVALID_CONTEXT);
  NAME_IS(CUDA_ERROR_INVALID_HANDLE);
  NAME_IS(CUDA_ERROR_NOT_READY);
  NAME_IS(CUDA_ERROR_NOT_SUPPORTED);
  NAME_IS(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  NAME_IS(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  NAME_IS(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  NAME_IS(CUDA_ERROR_ILLEGAL_ADDRESS);
  NAME_IS(CUDA_ERROR_UNKNOWN);
  RT_NAME_IS(cudaSuccess);
  RT_NAME_IS(cudaErrorInvalidValue);
  RT_NAME_IS(cudaErrorMemoryAllocation);
  RT_NAME_IS(cudaErrorInvalidDevice);
  RT_NAME_IS(cudaErrorInvalidResourceHandle);
  RT_NAME_IS(cudaErrorNotReady);
  RT_NAME_IS(cudaErrorNotSupported);
  RT_NAME_IS(cudaErrorPeerAccessAlreadyEnabled);
  RT_NAME_IS(cudaErrorHostMemoryAlreadyRegistered);
  RT_NAME_IS(cudaErrorHostMemoryNotRegistered);
  RT_NAME_IS(cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(strcmp(cudaGetErrorString(cudaSuccess), "no error"), 0);
  const char* s = "x";
  EXPECT_CU(cuGetErrorName((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(s == NULL);
  EXPECT_EQ(strcmp(cudaGetErrorName((cudaError_t)123456), "unrecognized error code"), 0);
  // Every code with a name has a string, and the other way round.
  for (int c = 0; c < 1100; c++) {
    const char *n = NULL, *t = NULL;
    int hasName = cuGetErrorName((CUresult)c, &n) == CUDA_SUCCESS;
    int hasString = cuGetErrorString((CUresult)c, &t) == CUDA_SUCCESS;
    EXPECT_EQ(hasName, hasString);
    if (hasName) EXPECT_TRUE(n && t && *n && *t);
  }
}

static void lastErrorSemantics(void) {
  setup();
  CHECK_STOPPED();
  cudaGetLastError();
  EXPECT_CUDA(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);  // peek does not reset
  void* p = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&p, 16));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);  // a success does not clear it
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_CUDA_OK(cudaFree(p));
}

// Calls outside the subset fail with NOT_SUPPORTED and warn once on stderr (counted, not parsed).
static void notImplementedWarnsOnce(void) {
  if (!MCCL_TEST_ON_SIM) SKIP("the not-implemented path is the sim's");
  setup();
  CHECK_STOPPED();
  char path[] = "/tmp/minccl-sim-warnXXXXXX";
  int fd = mkstemp(path);
  EXPECT_TRUE(fd >= 0);
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  CUmodule mod;
  CUresult r1 = cuModuleLoadData(&mod, "not ptx");  // the PTX path: no CPU counterpart
  off_t afterFirst = lseek(fd, 0, SEEK_END);
  CUresult r2 = cuModuleLoadData(&mod, "not ptx");
  off_t afterSecond = lseek(fd, 0, SEEK_END);
  CUfunction fn;
  CUresult r4 = cuModuleGetFunction(&fn, NULL, "kernel");
  CUmemGenericAllocationHandle mc;
  CUmulticastObjectProp mp = {0};
  CUresult r3 = cuMulticastCreate(&mc, &mp);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  EXPECT_CU(r1, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_CU(r2, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_CU(r3, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_CU(r4, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_GT(afterFirst, 0);
  EXPECT_EQ(afterSecond, afterFirst);
}

// Threads on different devices, each with its own stream and buffers, alongside VMM churn.
typedef struct {
  int dev, ok;
  uint64_t seed;
} threadArg;

static void* threadBody(void* p) {
  threadArg* a = p;
  a->ok = 0;
  if (cudaSetDevice(a->dev) != cudaSuccess) return NULL;
  cudaStream_t s;
  void* d = NULL;
  unsigned char *in = malloc(1 << 16), *out = malloc(1 << 16);
  if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&d, 1 << 16) != cudaSuccess) return NULL;
  int good = 1;
  for (int it = 0; it < 20 && good; it++) {
    for (int i = 0; i < (1 << 16); i++) in[i] = (unsigned char)(a->seed + (uint64_t)it * 131 + (uint64_t)i);
    good = cudaMemcpyAsync(d, in, 1 << 16, cudaMemcpyHostToDevice, s) == cudaSuccess &&
           cudaMemcpyAsync(out, d, 1 << 16, cudaMemcpyDeviceToHost, s) == cudaSuccess &&
           cudaStreamSynchronize(s) == cudaSuccess && memcmp(in, out, 1 << 16) == 0;
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = a->dev;
    size_t g = 0;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, a->dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    good = good && cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
           cuMemCreate(&h, g, &prop, 0) == CUDA_SUCCESS && cuMemAddressReserve(&va, g, 0, 0, 0) == CUDA_SUCCESS &&
           cuMemMap(va, g, 0, h, 0) == CUDA_SUCCESS && cuMemSetAccess(va, g, &desc, 1) == CUDA_SUCCESS &&
           cuMemsetD8(va, (unsigned char)it, g) == CUDA_SUCCESS && cuMemcpyDtoH(out, va + g - 16, 16) == CUDA_SUCCESS &&
           out[15] == (unsigned char)it && cuMemUnmap(va, g) == CUDA_SUCCESS && cuMemRelease(h) == CUDA_SUCCESS &&
           cuMemAddressFree(va, g) == CUDA_SUCCESS;
  }
  a->ok = good && cudaStreamDestroy(s) == cudaSuccess && cudaFree(d) == cudaSuccess;
  free(in);
  free(out);
  return NULL;
}

static void multiThreaded(void) {
  setup();
  CHECK_STOPPED();
  int n = 0;
  EXPECT_CUDA_OK(cudaGetDeviceCount(&n));
  enum { nThreads = 4 };
  pthread_t t[nThreads];
  threadArg args[nThreads];
  for (int i = 0; i < nThreads; i++) {
    args[i].dev = i % n;
    args[i].seed = mcclTestRand();
    EXPECT_EQ(pthread_create(&t[i], NULL, threadBody, &args[i]), 0);
  }
  for (int i = 0; i < nThreads; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < nThreads; i++) EXPECT_EQ(args[i].ok, 1);
}

// Holds its stream until the test lets it go (or 10 s pass), and says which it was.
typedef struct {
  volatile int release, released;
} gate;
static void waitGate(void* arg) {
  gate* g = arg;
  for (int i = 0; i < 10000 && !__atomic_load_n(&g->release, __ATOMIC_ACQUIRE); i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  __atomic_store_n(&g->released, __atomic_load_n(&g->release, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

// cudaStreamDestroy returns at once, work queued or not; on the sim an idle stream's worker is gone
// when it returns, and a busy one's exits once its queue is done.
static void streamDestroyEndsWorker(void) {
  setup();
  CHECK_STOPPED();
  int th0 = mcclTestCountThreads();
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (MCCL_TEST_ON_SIM) EXPECT_EQ(mcclTestCountThreads(), th0 + 1);
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  if (MCCL_TEST_ON_SIM) EXPECT_EQ(mcclTestCountThreads(), th0);  // joined: no wait needed
  // Busy: the destroy must not wait for the queued host function, which waits for this thread.
  static gate g;
  g.release = g.released = 0;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_CUDA_OK(cudaLaunchHostFunc(s, waitGate, &g));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  __atomic_store_n(&g.release, 1, __ATOMIC_RELEASE);
  // The driver may keep threads of its own for host functions: the count is the sim's promise only.
  if (MCCL_TEST_ON_SIM) EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(__atomic_load_n(&g.released, __ATOMIC_ACQUIRE), 1);
}

static const mcclTestCase cases[] = {
    MCCL_TEST_CASE(initRequired),           MCCL_TEST_CASE(devicesAndAttributes),    MCCL_TEST_CASE(contextsAndPeers),
    MCCL_TEST_CASE(streamOrdering),         MCCL_TEST_CASE(eventsAndElapsedTime),    MCCL_TEST_CASE(captureState),
    MCCL_TEST_CASE(hostAllocAndRegister),   MCCL_TEST_CASE(pointerAttributes),       MCCL_TEST_CASE(errorStrings),
    MCCL_TEST_CASE(lastErrorSemantics),     MCCL_TEST_CASE(notImplementedWarnsOnce), MCCL_TEST_CASE(multiThreaded),
    MCCL_TEST_CASE(defaultsFromParamTable), MCCL_TEST_CASE(streamDestroyEndsWorker),
};

int main(int argc, char** argv) {
  const char* role = getenv("MCCL_SIM_TEST_ROLE");
  if (role && strcmp(role, "noinit") == 0) return noInitChild();
  return mcclTestMain(argc, argv, cases, (int)(sizeof(cases) / sizeof(cases[0])), NULL);
}
