// Devices, contexts, versions, runtime device selection, last error, and the calls the sim does not
// implement. Every entry point validates its arguments the way the real driver does.
#include <errno.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include "sim_internal.h"

simGlobal simG = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t configOnce = PTHREAD_ONCE_INIT;
static __thread simThread self = {NULL, 0, cudaSuccess, cudaStreamCaptureModeGlobal};

simThread* simSelf(void) {
  return &self;
}

static long long envLL(const char* name, long long def, long long lo, long long hi) {
  const char* s = getenv(name);
  if (!s || !*s) return def;
  char* end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno || *end || v < lo || v > hi) {
    fprintf(stderr, "minccl-sim: ignoring %s=%s (expected %lld..%lld), using %lld\n", name, s, lo, hi, def);
    return def;
  }
  return v;
}

// The sim's parameters come from the one table (common/include/mccl_params.def): libsimcuda cannot
// link common/'s accessors, but it reads their names and defaults from the same rows.
#define MCCL_PARAM_INT(name, env, deflt, doc)
#define MCCL_PARAM_STR(name, env, deflt, doc)
#define MCCL_PARAM_SIM(name, env, deflt, doc)                                  \
  static const char simParamEnv##name[] __attribute__((unused)) = "MCCL_" env; \
  static const long long simParamDefault##name __attribute__((unused)) = (deflt);
#include "mccl_params.def"

// The SMs the sim reports: not an H200's 132, but about as many blocks as CPU threads run side by side
// well. Code that sizes its grids from the device (lab 07's channel count) then sizes them for the sim
// without asking which backend it runs on.
#define SIM_SMS 4
#undef MCCL_PARAM_INT
#undef MCCL_PARAM_STR
#undef MCCL_PARAM_SIM

static int countNumaNodes(void) {
  DIR* d = opendir("/sys/devices/system/node");
  if (!d) return 1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9') n++;
  closedir(d);
  return n > 0 ? n : 1;
}

static void loadConfig(void) {
  // Defaults are those of common/include/mccl_params.def (MCCL_PARAM_SIM entries).
  simG.nDevices = (int)envLL(simParamEnvSimDevices, simParamDefaultSimDevices, 1, SIM_MAX_DEVICES);
  simG.devMem =
      (size_t)envLL(simParamEnvSimDeviceMem, simParamDefaultSimDeviceMem, (long long)SIM_GRANULARITY, 1LL << 50);
  simG.numaNodes = countNumaNodes();
  // Kernels: each block thread is a host thread (sim_launch.c). Rounded down to whole warps.
  simG.maxBlockThreads =
      (int)envLL(simParamEnvSimMaxBlockThreads, simParamDefaultSimMaxBlockThreads, 32, 1024) / 32 * 32;
  simG.maxGridThreads = (int)envLL(simParamEnvSimMaxGridThreads, simParamDefaultSimMaxGridThreads, 32, 65536);
  simG.lateCopyUs = (int)envLL(simParamEnvSimLateCopyUs, simParamDefaultSimLateCopyUs, 0, 1000000);
  simG.destroyedWaitMs = (int)envLL(simParamEnvSimDestroyedWaitMs, simParamDefaultSimDestroyedWaitMs, 0, 3600000);
  for (int d = 0; d < SIM_MAX_DEVICES; d++) {
    simG.dev[d].primaryCtx.magic = SIM_CTX_MAGIC;
    simG.dev[d].primaryCtx.device = d;
    simG.dev[d].primaryCtx.primary = 1;
  }
}

void simLoadConfig(void) {
  pthread_once(&configOnce, loadConfig);
}

CUresult simCheckInit(void) {
  simLoadConfig();
  return __atomic_load_n(&simG.initialized, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

int simDeviceValid(int dev) {
  return dev >= 0 && dev < simG.nDevices;
}

cudaError_t simRtErr(cudaError_t e) {
  if (e != cudaSuccess) self.lastError = e;
  return e;
}

static void retainPrimaryForRuntime(int dev) {
  pthread_mutex_lock(&simG.lock);
  if (!simG.dev[dev].runtimeRetained) {
    simG.dev[dev].runtimeRetained = 1;
    simG.dev[dev].primaryRefs++;
  }
  pthread_mutex_unlock(&simG.lock);
}

cudaError_t simRtInit(void) {
  simLoadConfig();
  __atomic_store_n(&simG.initialized, 1, __ATOMIC_RELEASE);
  // The runtime binds the thread to its device's primary context on first use, as cudart does.
  if (!self.ctx) {
    retainPrimaryForRuntime(self.rtDevice);
    self.ctx = &simG.dev[self.rtDevice].primaryCtx;
  }
  return cudaSuccess;
}

CUresult simCurrentDevice(int* dev) {
  if (!self.ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = self.ctx->device;
  return CUDA_SUCCESS;
}

CUresult simNotImplemented(const char* call) {
  // One warning per name: a lab that hits an unimplemented call sees it once, never a silent success.
  static pthread_mutex_t warnLock = PTHREAD_MUTEX_INITIALIZER;
  static const char* warned[64];
  static int nWarned;
  int seen = 0;
  pthread_mutex_lock(&warnLock);
  for (int i = 0; i < nWarned; i++)
    if (strcmp(warned[i], call) == 0) seen = 1;
  if (!seen && nWarned < 64) warned[nWarned++] = call;
  pthread_mutex_unlock(&warnLock);
  if (!seen) fprintf(stderr, "minccl-sim: %s is not implemented\n", call);
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ---- versions and devices ------------------------------------------------------------------

CUresult CUDAAPI cuInit(unsigned int Flags) {
  simLoadConfig();
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  __atomic_store_n(&simG.initialized, 1, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  // Works before cuInit, as the real driver.
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = SIM_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = simG.nDevices;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "minccl sim H200 (CPU)");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = simG.devMem;
  return CUDA_SUCCESS;
}

static int pciBus(int dev) {
  return 0x10 + 3 * dev;
}  // distinct per device, below 0x100 for 64 devices

static int hostNumaOf(int dev) {
  return (int)((long)dev * simG.numaNodes / simG.nDevices);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  // Stable across processes, so peers that compare UUIDs agree on device identity.
  static const char tag[12] = "minccl-simGP";
  memcpy(uuid->bytes, tag, 12);
  uuid->bytes[12] = 0;
  uuid->bytes[13] = 0;
  uuid->bytes[14] = (char)(dev >> 8);
  uuid->bytes[15] = (char)(dev & 0xff);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(pciBusId, (size_t)len, "00000000:%02X:00.0", pciBus(dev));
  return CUDA_SUCCESS;
}

static int attrValue(int attrib, int dev, int* value) {
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      *value = 1024;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      *value = 64;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *value = 2147483647;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *value = 65535;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *value = 49152;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *value = 232448;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      *value = 233472;
      return 1;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      *value = 65536;
      return 1;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *value = 32;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      *value = 65536;
      return 1;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      *value = 1980000;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = SIM_SMS;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      *value = 2048;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      *value = 32;
      return 1;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      *value = CU_COMPUTEMODE_DEFAULT;
      return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      *value = pciBus(dev);
      return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      *value = 2619000;
      return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      *value = 6144;
      return 1;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *value = 52428800;
      return 1;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      *value = 1;
      return 1;  // one worker thread per stream
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
      *value = dev;
      return 1;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG:
      *value = CU_DEVICE_NUMA_CONFIG_NONE;
      return 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
      *value = -1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      *value = hostNumaOf(dev);
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
      *value = 0;
      return 1;
    // Stream memory operations (sim_stream.c): 64-bit values and the NOR condition, as on Hopper. The
    // remote-write flush is a platform feature most hosts lack; the sim reports it absent and refuses it.
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
      *value = 1;
      return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
      *value = 0;
      return 1;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
      *value = 0;
      return 1;
    default:
      return 0;
  }
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (!attrValue((int)attrib, dev, pi)) {
    // A real attribute the sim does not model (textures, surfaces...): report it absent, and say so.
    static int warnedOnce;
    if (!__atomic_exchange_n(&warnedOnce, 1, __ATOMIC_RELAXED))
      fprintf(stderr, "minccl-sim: cuDeviceGetAttribute(%d) is not modelled; reporting 0 for such attributes\n",
              (int)attrib);
    *pi = 0;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(dev) || !simDeviceValid(peerDev)) return CUDA_ERROR_INVALID_DEVICE;
  *canAccessPeer = dev != peerDev;  // as the driver: a device is not its own peer
  return CUDA_SUCCESS;
}

// ---- contexts ------------------------------------------------------------------------------

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&simG.lock);
  simG.dev[dev].primaryRefs++;
  pthread_mutex_unlock(&simG.lock);
  *pctx = &simG.dev[dev].primaryCtx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&simG.lock);
  // Releasing more than retained is CUDA_ERROR_INVALID_CONTEXT in the driver.
  r = simG.dev[dev].primaryRefs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  if (r == CUDA_SUCCESS) simG.dev[dev].primaryRefs--;
  pthread_mutex_unlock(&simG.lock);
  return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&simG.lock);
  *flags = simG.dev[dev].primaryCtx.flags;
  *active = simG.dev[dev].primaryRefs > 0;
  pthread_mutex_unlock(&simG.lock);
  return CUDA_SUCCESS;
}

static int ctxValid(CUcontext c) {
  return c && c->magic == SIM_CTX_MAGIC;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = self.ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (ctx && !ctxValid(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  self.ctx = ctx;
  if (ctx) self.rtDevice = ctx->device;  // the runtime follows the driver's current context
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!self.ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *device = self.ctx->device;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!self.ctx) return CUDA_ERROR_INVALID_CONTEXT;
  simDeviceDrain(self.ctx->device, 0);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags, CUdevice dev) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (ctxCreateParams) return simNotImplemented("cuCtxCreate with CUctxCreateParams");
  if (!simDeviceValid(dev)) return CUDA_ERROR_INVALID_DEVICE;
  struct CUctx_st* c = calloc(1, sizeof(*c));
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  c->magic = SIM_CTX_MAGIC;
  c->device = dev;
  c->flags = flags;
  self.ctx = c;  // cuCtxCreate makes the new context current
  self.rtDevice = dev;
  *pctx = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!ctxValid(ctx) || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  simDeviceDrain(ctx->device, 0);
  if (self.ctx == ctx) self.ctx = NULL;
  ctx->magic = 0;
  free(ctx);
  return CUDA_SUCCESS;
}

// ---- runtime: devices ----------------------------------------------------------------------

cudaError_t CUDARTAPI cudaDriverGetVersion(int* driverVersion) {
  if (!driverVersion) return simRtErr(cudaErrorInvalidValue);
  *driverVersion = SIM_DRIVER_VERSION;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* runtimeVersion) {
  if (!runtimeVersion) return simRtErr(cudaErrorInvalidValue);
  *runtimeVersion = SIM_RUNTIME_VERSION;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  simRtInit();
  if (!count) return simRtErr(cudaErrorInvalidValue);
  *count = simG.nDevices;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  simLoadConfig();
  if (!simDeviceValid(device)) return simRtErr(cudaErrorInvalidDevice);
  __atomic_store_n(&simG.initialized, 1, __ATOMIC_RELEASE);
  retainPrimaryForRuntime(device);
  self.rtDevice = device;
  self.ctx = &simG.dev[device].primaryCtx;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  simRtInit();
  if (!device) return simRtErr(cudaErrorInvalidValue);
  *device = self.ctx ? self.ctx->device : self.rtDevice;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  simRtInit();
  // cudaDeviceAttr and CUdevice_attribute share their numbering.
  CUresult r = cuDeviceGetAttribute(value, (CUdevice_attribute)attr, device);
  return simRtErr(r == CUDA_ERROR_INVALID_DEVICE ? cudaErrorInvalidDevice : (cudaError_t)r);
}

cudaError_t CUDARTAPI cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  simRtInit();
  CUresult r = cuDeviceGetPCIBusId(pciBusId, len, device);
  return simRtErr(r == CUDA_ERROR_INVALID_DEVICE ? cudaErrorInvalidDevice : (cudaError_t)r);
}

cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  simRtInit();
  if (!prop) return simRtErr(cudaErrorInvalidValue);
  if (!simDeviceValid(device)) return simRtErr(cudaErrorInvalidDevice);
  memset(prop, 0, sizeof(*prop));
  snprintf(prop->name, sizeof(prop->name), "minccl sim H200 (CPU)");
  cuDeviceGetUuid((CUuuid*)&prop->uuid, device);
  prop->totalGlobalMem = simG.devMem;
  prop->sharedMemPerBlock = 49152;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->memPitch = 2147483647;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 65536;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = SIM_SMS;
  prop->canMapHostMemory = 1;
  prop->unifiedAddressing = 1;
  prop->pciBusID = pciBus(device);
  prop->pciDeviceID = 0;
  prop->pciDomainID = 0;
  prop->asyncEngineCount = 1;
  prop->concurrentKernels = 1;
  prop->ECCEnabled = 1;
  prop->l2CacheSize = 52428800;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->sharedMemPerMultiprocessor = 233472;
  prop->regsPerMultiprocessor = 65536;
  prop->sharedMemPerBlockOptin = 232448;
  prop->maxBlocksPerMultiProcessor = 32;
  prop->hostRegisterSupported = 1;
  prop->canUseHostPointerForRegisteredMem = 1;
  prop->memoryBusWidth = 6144;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  simRtInit();
  if (!canAccessPeer) return simRtErr(cudaErrorInvalidValue);
  if (!simDeviceValid(device) || !simDeviceValid(peerDevice)) return simRtErr(cudaErrorInvalidDevice);
  *canAccessPeer = device != peerDevice;
  return cudaSuccess;
}

// What the link between two devices offers. The sim's devices share the host's memory, with every atomic
// and no torn line, as NVLink peers: reported as such (MCCL_SIM_NVLINK=1), or as a pair over PCIe, which
// has peer access but no native atomics (MCCL_SIM_NVLINK=0), so the code that tells the two apart runs.
// Unlike the other MCCL_SIM_* parameters it is read at every call, so a test can pose a PCIe pair for one
// communicator's connections. A device and itself is no pair: the driver answers cudaErrorInvalidDevice.
cudaError_t CUDARTAPI cudaDeviceGetP2PAttribute(int* value, enum cudaDeviceP2PAttr attr, int srcDevice, int dstDevice) {
  simRtInit();
  if (!value) return simRtErr(cudaErrorInvalidValue);
  if (!simDeviceValid(srcDevice) || !simDeviceValid(dstDevice) || srcDevice == dstDevice)
    return simRtErr(cudaErrorInvalidDevice);
  const int nvlink = (int)envLL(simParamEnvSimNvlink, simParamDefaultSimNvlink, 0, 1);
  switch (attr) {
    case cudaDevP2PAttrPerformanceRank:
      *value = nvlink ? 0 : 1;
      return cudaSuccess;
    case cudaDevP2PAttrAccessSupported:
      *value = 1;
      return cudaSuccess;
    case cudaDevP2PAttrNativeAtomicSupported:
      *value = nvlink;
      return cudaSuccess;
    case cudaDevP2PAttrCudaArrayAccessSupported:
    case cudaDevP2PAttrOnlyPartialNativeAtomicSupported:
      *value = 0;
      return cudaSuccess;
    default:
      return simRtErr(cudaErrorInvalidValue);
  }
}

cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  simRtInit();
  if (flags != 0) return simRtErr(cudaErrorInvalidValue);
  if (!simDeviceValid(peerDevice)) return simRtErr(cudaErrorInvalidDevice);
  int dev = self.ctx->device;
  if (dev == peerDevice) return simRtErr(cudaErrorPeerAccessUnsupported);  // a device is not its own peer
  cudaError_t e = cudaSuccess;
  pthread_mutex_lock(&simG.lock);
  if (simG.dev[dev].peerEnabled & (1ull << peerDevice))
    e = cudaErrorPeerAccessAlreadyEnabled;
  else
    simG.dev[dev].peerEnabled |= 1ull << peerDevice;
  pthread_mutex_unlock(&simG.lock);
  return simRtErr(e);
}

cudaError_t CUDARTAPI cudaDeviceDisablePeerAccess(int peerDevice) {
  simRtInit();
  if (!simDeviceValid(peerDevice)) return simRtErr(cudaErrorInvalidDevice);
  int dev = self.ctx->device;
  cudaError_t e = cudaSuccess;
  pthread_mutex_lock(&simG.lock);
  if (!(simG.dev[dev].peerEnabled & (1ull << peerDevice)))
    e = cudaErrorPeerAccessNotEnabled;
  else
    simG.dev[dev].peerEnabled &= ~(1ull << peerDevice);
  pthread_mutex_unlock(&simG.lock);
  return simRtErr(e);
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  simRtInit();
  simDeviceDrain(self.ctx->device, 0);
  return cudaSuccess;
}

// ---- runtime: errors -----------------------------------------------------------------------

cudaError_t CUDARTAPI cudaGetLastError(void) {
  cudaError_t e = self.lastError;
  self.lastError = cudaSuccess;
  return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
  return self.lastError;
}

// ---- capture (the sim never captures: streams always run eagerly) --------------------------

cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  if (!mode) return simRtErr(cudaErrorInvalidValue);
  if (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
      *mode != cudaStreamCaptureModeRelaxed)
    return simRtErr(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode old = self.captureMode;
  self.captureMode = *mode;
  *mode = old;
  return cudaSuccess;
}

// ---- calls outside the subset --------------------------------------------------------------

CUresult CUDAAPI cuMulticastCreate(CUmemGenericAllocationHandle* mcHandle, const CUmulticastObjectProp* prop) {
  (void)mcHandle, (void)prop;
  return simNotImplemented("cuMulticastCreate");
}

CUresult CUDAAPI cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev) {
  (void)mcHandle, (void)dev;
  return simNotImplemented("cuMulticastAddDevice");
}

CUresult CUDAAPI cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                    CUmemGenericAllocationHandle memHandle, size_t memOffset, size_t size,
                                    unsigned long long flags) {
  (void)mcHandle, (void)mcOffset, (void)memHandle, (void)memOffset, (void)size, (void)flags;
  return simNotImplemented("cuMulticastBindMem");
}

CUresult CUDAAPI cuMulticastGetGranularity(size_t* granularity, const CUmulticastObjectProp* prop,
                                           CUmulticastGranularity_flags option) {
  (void)granularity, (void)prop, (void)option;
  return simNotImplemented("cuMulticastGetGranularity");
}
