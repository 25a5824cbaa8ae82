// Private state of libsimcuda, the CPU implementation of the CUDA driver/runtime subset minccl uses.
// One process-wide state (devices, memory table, streams) behind mutexes; per-thread current context,
// runtime device, last runtime error and capture mode. See docs/device-contract.md.
#ifndef SIM_INTERNAL_H_
#define SIM_INTERNAL_H_

#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_MAX_DEVICES 64
#define SIM_GRANULARITY ((size_t)2 << 20)  // MINIMUM and RECOMMENDED, as on Hopper
#define SIM_DRIVER_VERSION 13000
#define SIM_RUNTIME_VERSION 13000

struct CUctx_st {
  uint32_t magic;
  int device;
  int primary;         // the device's primary context (never freed)
  unsigned int flags;
};

typedef struct {
  struct CUctx_st primaryCtx;
  int primaryRefs;          // cuDevicePrimaryCtxRetain count (the runtime holds one once it uses the device)
  int runtimeRetained;
  size_t used;              // bytes of device memory allocated by this process (accounting is per process)
  uint64_t peerEnabled;     // runtime peer access enabled from this device, bit per peer
} simDevice;

typedef struct {
  pthread_mutex_t lock;     // devices, contexts, memory table
  int initialized;          // cuInit (or any runtime call) done
  int nDevices;
  size_t devMem;
  int numaNodes;            // host NUMA nodes (>= 1)
  int maxBlockThreads;      // MCCL_SIM_MAX_BLOCK_THREADS (a multiple of 32): larger blocks are reduced
  int maxGridThreads;       // MCCL_SIM_MAX_GRID_THREADS: host threads one grid may use
  int lateCopyUs;           // MCCL_SIM_LATE_COPY_US: delay of a NULL-stream copy/memset that returned first
  int destroyedWaitMs;      // MCCL_SIM_DESTROYED_WAIT_MS: how long a memory wait outlives its stream
  simDevice dev[SIM_MAX_DEVICES];
} simGlobal;

extern simGlobal simG;

// Per-thread state (the driver's current context, the runtime's device and last error).
typedef struct {
  CUcontext ctx;
  int rtDevice;
  cudaError_t lastError;
  enum cudaStreamCaptureMode captureMode;
} simThread;
simThread* simSelf(void);

// Reads the environment once; safe to call from every entry point.
void simLoadConfig(void);
// Driver entry: CUDA_ERROR_NOT_INITIALIZED until cuInit.
CUresult simCheckInit(void);
// Runtime entry: initializes implicitly and makes the runtime device's primary context current.
cudaError_t simRtInit(void);
// Records a runtime error for cudaGetLastError/cudaPeekAtLastError and returns it.
cudaError_t simRtErr(cudaError_t e);
// Current context's device, or CUDA_ERROR_INVALID_CONTEXT when none is current.
CUresult simCurrentDevice(int* dev);
int simDeviceValid(int dev);
// One warning per call name on stderr, then CUDA_ERROR_NOT_SUPPORTED.
CUresult simNotImplemented(const char* call);
const char* simCudaErrorName(cudaError_t e);

// Memory table (sim_mem.c).
enum { SIM_MEM_NONE = 0, SIM_MEM_DEVICE, SIM_MEM_HOST };
typedef struct {
  int kind;                 // SIM_MEM_DEVICE / SIM_MEM_HOST; SIM_MEM_NONE when unknown
  int device;
  uintptr_t base;           // the range: the allocation, or for VMM the whole reservation (as the driver)
  size_t size;
  uintptr_t mapBase;        // the mapping (VMM) or allocation the pointer lies in
  size_t mapSize;
  int legacyIpc;            // cudaMalloc/cuMemAlloc memory
  int vmm;                  // a cuMemMap mapping
  int mapped;
  unsigned long long handleTypes;
  unsigned long long access;  // CU_MEM_ACCESS_FLAGS for the current device (VMM), RW otherwise
  unsigned long long bufferId;
  unsigned int hostFlags;
} simPtrInfo;
// Looks a pointer up in the table; returns 0 and fills info if known.
int simLookup(uintptr_t p, simPtrInfo* info);
// 1 if [p, p+n) is memory a copy may touch (known to the table, or any host memory when hostOk).
int simRangeUsable(uintptr_t p, size_t n, int hostOk);

// Streams (sim_stream.c).
void simDeviceDrain(int dev, int blockingOnly);
// Queues fn(arg) on a stream's worker, never inline: on the NULL stream, on device dev's legacy-stream
// worker behind the device's blocking streams. When the stream drops the op instead of running it (a
// memory wait before it gave up), drop(arg) frees arg. On error the caller still owns arg.
CUresult simEnqueueWork(CUstream hStream, int dev, void (*fn)(void*), void (*drop)(void*), void* arg);

#define SIM_CTX_MAGIC 0x5c7c7c01u
#endif
