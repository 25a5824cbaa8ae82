// Lab 06 host side: check a work description and launch the primitives kernel as NCCL launches its
// kernels (cudaGetFuncBySymbol + cuLaunchKernel with packed arguments: src/enqueue.cc
// ncclLaunchKernel), then wait for it with an abort deadline.
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_prims.h"
#include "mccl_utils.h"

// The kernels' host-side symbols (kernel_*.cu: extern "C" __global__). C sees them as functions;
// only their addresses are used, to find the device functions. Index: 0 for the copy kernel, then
// 1 + mcclDataType_t.
#define MCCL_DEV_KERNEL(suffix) extern void mcclDevKernel_##suffix(struct mcclDevWork work);
MCCL_DEV_KERNEL(copy)
MCCL_DEV_KERNEL(i8)
MCCL_DEV_KERNEL(u8)
MCCL_DEV_KERNEL(i32)
MCCL_DEV_KERNEL(u32)
MCCL_DEV_KERNEL(i64)
MCCL_DEV_KERNEL(u64)
MCCL_DEV_KERNEL(f16)
MCCL_DEV_KERNEL(f32)
MCCL_DEV_KERNEL(f64)
MCCL_DEV_KERNEL(bf16)
MCCL_DEV_KERNEL(f8e4m3)
MCCL_DEV_KERNEL(f8e5m2)
#define MCCL_DEV_NUM_KERNELS (1 + mcclNumTypes)
static void (*const kernelSyms[MCCL_DEV_NUM_KERNELS])(struct mcclDevWork) = {
    mcclDevKernel_copy, mcclDevKernel_i8,     mcclDevKernel_u8,    mcclDevKernel_i32, mcclDevKernel_u32,
    mcclDevKernel_i64,  mcclDevKernel_u64,    mcclDevKernel_f16,   mcclDevKernel_f32, mcclDevKernel_f64,
    mcclDevKernel_bf16, mcclDevKernel_f8e4m3, mcclDevKernel_f8e5m2};
_Static_assert(mcclInt8 == 0 && mcclFloat8e5m2 == 11 && mcclNumTypes == 12, "kernelSyms follows mcclDataType_t");

size_t mcclTypeSize(int dtype) {
  switch (dtype) {
    case mcclInt8:
    case mcclUint8:
    case mcclFloat8e4m3:
    case mcclFloat8e5m2:
      return 1;
    case mcclFloat16:
    case mcclBfloat16:
      return 2;
    case mcclInt32:
    case mcclUint32:
    case mcclFloat32:
      return 4;
    case mcclInt64:
    case mcclUint64:
    case mcclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* mcclTypeName(int dtype) {
  static const char* names[mcclNumTypes] = {"int8",    "uint8",   "int32",   "uint32",   "int64",  "uint64",
                                            "float16", "float32", "float64", "bfloat16", "f8e4m3", "f8e5m2"};
  return dtype >= 0 && dtype < mcclNumTypes ? names[dtype] : "unknown";
}

const char* mcclOpName(int redop) {
  static const char* names[mcclNumOps] = {"sum", "prod", "max", "min", "avg"};
  return redop >= 0 && redop < mcclNumOps ? names[redop] : "unknown";
}

const char* mcclDevOpName(int op) {
  static const char* names[mcclDevOpNum] = {"send",           "recv",           "copySend",          "recvCopySend",
                                            "recvReduceSend", "recvReduceCopy", "recvReduceCopySend"};
  return op >= 0 && op < mcclDevOpNum ? names[op] : "unknown";
}

static int isPow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}
static int opRecvs(int op) {
  return op == mcclDevOpRecv || op == mcclDevOpRecvCopySend || op >= mcclDevOpRecvReduceSend;
}
static int opSends(int op) {
  return op == mcclDevOpSend || op == mcclDevOpCopySend || op == mcclDevOpRecvCopySend ||
         op == mcclDevOpRecvReduceSend || op == mcclDevOpRecvReduceCopySend;
}
static int opReduces(int op) {
  return op >= mcclDevOpRecvReduceSend;
}
static int opReads(int op) {
  return op == mcclDevOpSend || op == mcclDevOpCopySend || op >= mcclDevOpRecvReduceSend;
}
static int opWrites(int op) {
  return op != mcclDevOpSend && op != mcclDevOpRecvReduceSend;
}

// The device functions, looked up once per device and kernel (cudaGetFuncBySymbol names the current
// context's copy of a kernel, so a miss looks it up with `dev` current). Every lab's launch goes
// through here: a handful of kernels per device, found by a short scan under one lock.
#define MCCL_DEV_MAX_DEVICES 64
#define MCCL_DEV_MAX_FUNCTIONS 64
static struct {
  const void* kernel;
  CUfunction fn;
} kernelFn[MCCL_DEV_MAX_DEVICES][MCCL_DEV_MAX_FUNCTIONS];
static pthread_mutex_t kernelFnLock = PTHREAD_MUTEX_INITIALIZER;

mcclResult_t mcclDevGetFunction(int dev, const void* kernel, cudaFunction_t* fn) {
  MCCL_ARGCHECK(kernel != NULL && fn != NULL, "mcclDevGetFunction: kernel %p / fn %p is NULL", kernel, (void*)fn);
  if (dev < 0 || dev >= MCCL_DEV_MAX_DEVICES) {
    WARN("device %d is beyond the %d devices minccl launches on", dev, MCCL_DEV_MAX_DEVICES);
    return mcclInvalidUsage;
  }
  mcclResult_t res = mcclSuccess;
  PTHREADCHECK(pthread_mutex_lock(&kernelFnLock));
  int k = 0;
  while (k < MCCL_DEV_MAX_FUNCTIONS && kernelFn[dev][k].kernel != NULL && kernelFn[dev][k].kernel != kernel) k++;
  if (k == MCCL_DEV_MAX_FUNCTIONS) {
    WARN("more than %d kernels launched on device %d (MCCL_DEV_MAX_FUNCTIONS)", MCCL_DEV_MAX_FUNCTIONS, dev);
    res = mcclInternalError;
    goto unlock;
  }
  if (kernelFn[dev][k].kernel == NULL) {
    int saved = -1;
    cudaFunction_t f;
    CUDACHECKGOTO(cudaGetDevice(&saved), res, unlock);
    CUDACHECKGOTO(cudaSetDevice(dev), res, unlock);
    cudaError_t e = cudaGetFuncBySymbol(&f, kernel);
    cudaSetDevice(saved);
    CUDACHECKGOTO(e, res, unlock);
    kernelFn[dev][k].fn = (CUfunction)f;
    kernelFn[dev][k].kernel = kernel;
  }
  *fn = (cudaFunction_t)kernelFn[dev][k].fn;
unlock:
  pthread_mutex_unlock(&kernelFnLock);
  return res;
}

// The bounds of the mccl_kernels section, which the linker defines where a program has one (GPU builds, from
// MCCL_KERNEL_REGISTER); weak, so that a program without it (the sim's builds) links, with both NULL.
extern const void* const __start_mccl_kernels[] __attribute__((weak));
extern const void* const __stop_mccl_kernels[] __attribute__((weak));

mcclResult_t mcclDevLoadKernels(int dev) {
  if (__start_mccl_kernels == NULL || __stop_mccl_kernels == NULL) return mcclSuccess;
  int saved = -1;
  CUDACHECK(cudaGetDevice(&saved));
  CUDACHECK(cudaSetDevice(dev));
  mcclResult_t res = mcclSuccess;
  for (const void* const* k = __start_mccl_kernels; k < __stop_mccl_kernels && res == mcclSuccess; k++) {
    cudaFunction_t f;
    CUDACHECKGOTO(cudaGetFuncBySymbol(&f, *k), res, done);
  }
done:
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclDevLaunch(const struct mcclDevWork* work, int nthreads, cudaStream_t stream) {
  MCCL_ARGCHECK(work != NULL, "work is NULL");
  struct mcclDevWork w = *work;
  MCCL_ARGCHECK(w.op >= 0 && w.op < mcclDevOpNum, "work->op %d is not an mcclDevOp", w.op);
  MCCL_ARGCHECK(w.proto == MCCL_PROTO_SIMPLE || w.proto == MCCL_PROTO_LL || w.proto == MCCL_PROTO_LL128,
                "work->proto %d is none of SIMPLE (%d), LL (%d), LL128 (%d)", w.proto, MCCL_PROTO_SIMPLE, MCCL_PROTO_LL,
                MCCL_PROTO_LL128);
  MCCL_ARGCHECK(w.dtype >= 0 && w.dtype < mcclNumTypes, "work->dtype %d is not an mcclDataType_t", w.dtype);
  MCCL_ARGCHECK(w.redop >= 0 && w.redop < mcclNumOps, "work->redop %d is not an mcclRedOp_t", w.redop);
  MCCL_ARGCHECK(w.nchannels >= 1 && w.nchannels <= MCCL_DEV_MAX_CHANNELS, "work->nchannels %d is not in 1..%d",
                w.nchannels, MCCL_DEV_MAX_CHANNELS);
  MCCL_ARGCHECK(w.count <= (size_t)INT64_MAX / 16, "work->count %zu is too large", w.count);
  MCCL_ARGCHECK(!opRecvs(w.op) || w.recvConns != NULL, "work->recvConns is NULL for %s", mcclDevOpName(w.op));
  MCCL_ARGCHECK(!opSends(w.op) || w.sendConns != NULL, "work->sendConns is NULL for %s", mcclDevOpName(w.op));
  MCCL_ARGCHECK(w.count == 0 || !opReads(w.op) || w.src != NULL, "work->src is NULL for %s of %zu elements",
                mcclDevOpName(w.op), w.count);
  MCCL_ARGCHECK(w.count == 0 || !opWrites(w.op) || w.dst != NULL, "work->dst is NULL for %s of %zu elements",
                mcclDevOpName(w.op), w.count);
  MCCL_ARGCHECK(!w.postOp || w.op == mcclDevOpRecvReduceCopy || w.op == mcclDevOpRecvReduceCopySend,
                "work->postOp is set for %s, which stores no reduced output", mcclDevOpName(w.op));
  MCCL_ARGCHECK(w.redop != mcclAvg || w.redOpArg >= 1, "work->redOpArg is 0 for avg (the divisor)");
  if (w.chunkSteps == 0) w.chunkSteps = MCCL_DEV_DEFAULT_CHUNKSTEPS;
  if (w.sliceSteps == 0)
    w.sliceSteps = w.chunkSteps < MCCL_DEV_DEFAULT_SLICESTEPS ? w.chunkSteps : MCCL_DEV_DEFAULT_SLICESTEPS;
  MCCL_ARGCHECK(isPow2(w.chunkSteps) && w.chunkSteps <= MCCL_STEPS, "work->chunkSteps %d is not a power of two <= %d",
                w.chunkSteps, MCCL_STEPS);
  MCCL_ARGCHECK(isPow2(w.sliceSteps) && w.sliceSteps <= w.chunkSteps,
                "work->sliceSteps %d is not a power of two <= chunkSteps %d", w.sliceSteps, w.chunkSteps);
  if (nthreads == 0) nthreads = MCCL_DEV_DEFAULT_NTHREADS;
  MCCL_ARGCHECK(nthreads >= 32 && nthreads <= MCCL_DEV_MAX_THREADS && nthreads % 32 == 0,
                "nthreads %d is not a multiple of 32 in 32..%d", nthreads, MCCL_DEV_MAX_THREADS);

  // EXERCISE(06.launch)
  int dev;
  cudaFunction_t fn;
  CUDACHECK(cudaGetDevice(&dev));
  MCCLCHECK(mcclDevGetFunction(dev, (const void*)kernelSyms[opReduces(w.op) ? 1 + w.dtype : 0], &fn));
  void* params[] = {&w};
  CUCHECK(cuLaunchKernel((CUfunction)fn, (unsigned)w.nchannels, 1, 1, (unsigned)nthreads, 1, 1, 0, (CUstream)stream,
                         params, NULL));
  TRACE(MCCL_COLL, "launched %s %s %s/%s count %zu on %d channels x %d threads", mcclDevOpName(w.op),
        mcclProtoName(w.proto), mcclTypeName(w.dtype), mcclOpName(w.redop), w.count, w.nchannels, nthreads);
  return mcclSuccess;
  // END EXERCISE(06.launch)
}

mcclResult_t mcclDevLaunchDependent(cudaFunction_t fn, int nblocks, int nthreads, cudaStream_t stream, const void* args,
                                    size_t argsBytes) {
  MCCL_ARGCHECK(fn != NULL && args != NULL, "mcclDevLaunchDependent: fn %p / args %p is NULL", (void*)fn, args);
  MCCL_ARGCHECK(nblocks >= 1 && nthreads >= 1 && nthreads <= 1024,
                "mcclDevLaunchDependent: %d blocks of %d threads (blocks >= 1, threads 1..1024)", nblocks, nthreads);
  MCCL_ARGCHECK(argsBytes > 0 && argsBytes % 4 == 0, "mcclDevLaunchDependent: argsBytes %zu (a multiple of 4, > 0)",
                argsBytes);
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof(attr));
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.gridDimX = (unsigned)nblocks;
  cfg.gridDimY = cfg.gridDimZ = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.blockDimX = (unsigned)nthreads;
  cfg.hStream = (CUstream)stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  size_t size = argsBytes;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void*)args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CUCHECK(cuLaunchKernelEx(&cfg, (CUfunction)fn, NULL, extra));
  return mcclSuccess;
}

mcclResult_t mcclDevWait(cudaStream_t stream, volatile uint32_t* abortFlag, volatile int* status, int64_t timeoutMs) {
  const uint64_t start = mcclClockMs();
  int timedOut = 0;
  for (;;) {
    cudaError_t err = cudaStreamQuery(stream);
    if (err == cudaSuccess) break;
    if (err != cudaErrorNotReady) {
      WARN("kernel failed: %s (%s)", cudaGetErrorName(err), cudaGetErrorString(err));
      return mcclUnhandledCudaError;
    }
    if (!timedOut && timeoutMs > 0 && (int64_t)(mcclClockMs() - start) > timeoutMs) {
      if (abortFlag == NULL) {
        WARN("kernel still running after %lld ms and there is no abort flag to stop it", (long long)timeoutMs);
        CUDACHECK(cudaStreamSynchronize(stream));
        break;
      }
      WARN("kernel made no progress in %lld ms: setting its abort flag", (long long)timeoutMs);
      __atomic_store_n(abortFlag, 1, __ATOMIC_RELEASE);
      timedOut = 1;
    }
    usleep(20);
  }
  if (status != NULL && *status == mcclDevStatusAborted) {
    if (timedOut) return mcclTimeout;
    WARN("kernel was aborted (abort flag set)");
    return mcclInternalError;
  }
  if (status != NULL) *status = mcclDevStatusDone;
  return timedOut ? mcclTimeout : mcclSuccess;
}
