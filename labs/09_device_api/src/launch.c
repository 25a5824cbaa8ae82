// Lab 09: the launchers of the lab's kernels (src/kernels.cu). Each checks its arguments against the device
// window's host record, then launches as NCCL launches (cudaGetFuncBySymbol + cuLaunchKernel, lab 06's
// mcclDevGetFunction) on the current device, which must be the device communicator's.
#include <string.h>
#include <cuda.h>
#include "dev_api_kernels.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_prims.h"

static mcclResult_t launch(void (*kernel)(struct mcclDevApiArgs), int nBlocks, int nThreads, cudaStream_t stream,
                           struct mcclDevApiArgs* args) {
  int dev = -1;
  cudaFunction_t fn;
  CUDACHECK(cudaGetDevice(&dev));
  MCCLCHECK(mcclDevGetFunction(dev, (const void*)kernel, &fn));
  void* params[] = {args};
  CUCHECK(cuLaunchKernel((CUfunction)fn, (unsigned)nBlocks, 1, 1, (unsigned)nThreads, 1, 1, 0, (CUstream)stream, params,
                         NULL));
  return mcclSuccess;
}

// A window is checked against its host record: a copy from device memory would wait for the device's
// other work, which may be a kernel waiting at a barrier for a peer this thread has yet to launch.
static mcclResult_t checkWindow(mcclWindow_t win, const char* name) {
  struct mcclWindow_vidmem host;
  void* userBuf;
  MCCL_ARGCHECK(win != NULL, "%s is NULL", name);
  MCCL_ARGCHECK(mcclDevWindowHostOf(win, &host, &userBuf) == mcclSuccess, "%s %p is not a live device window", name,
                (void*)win);
  return mcclSuccess;
}

// A kernel's arguments: zero but for the device communicator it runs on (NULL: a kernel without one).
static struct mcclDevApiArgs argsFor(const mcclDevComm* devComm) {
  struct mcclDevApiArgs a;
  memset(&a, 0, sizeof(a));
  if (devComm != NULL) a.comm = *devComm;
  return a;
}

static mcclResult_t checkCommon(const mcclDevComm* devComm, int nBlocks) {
  MCCL_ARGCHECK(devComm != NULL, "devComm is NULL");
  MCCL_ARGCHECK(nBlocks >= 1 && nBlocks <= devComm->lsaBarrier.nBarriers,
                "nBlocks %d is not in 1..%d (one LSA barrier per block: raise lsaBarrierCount)", nBlocks,
                devComm->lsaBarrier.nBarriers);
  return mcclSuccess;
}

static mcclResult_t elemSize(mcclDataType_t type, size_t* size) {
  MCCL_ARGCHECK(type == mcclFloat32 || type == mcclBfloat16, "type %d is not mcclFloat32 or mcclBfloat16", (int)type);
  *size = type == mcclFloat32 ? 4 : 2;
  return mcclSuccess;
}

static int overlaps(uintptr_t a, size_t aBytes, const void* p, size_t pBytes) {
  return aBytes && pBytes && (uintptr_t)p < a + aBytes && a < (uintptr_t)p + pBytes;
}

// Whether [p, p + pBytes) overlaps [offset, offset + inBytes) of this rank's buffer in the window, at either
// of its two addresses: the one it was registered with, and its alias in the flat range.
static int overlapsLocal(mcclWindow_t win, size_t offset, size_t inBytes, const void* p, size_t pBytes) {
  struct mcclWindow_vidmem w;
  void* userBuf = NULL;
  if (mcclDevWindowHostOf(win, &w, &userBuf) != mcclSuccess) return 0;
  uintptr_t alias = (uintptr_t)w.lsaFlatBase + ((uintptr_t)w.lsaRank * w.stride4G << 32) + offset;
  return overlaps(alias, inBytes, p, pBytes) || overlaps((uintptr_t)userBuf + offset, inBytes, p, pBytes);
}

mcclResult_t mcclDevAllReduceOneShot(const mcclDevComm* devComm, mcclWindow_t sendWin, size_t sendOffset,
                                     void* recvbuff, size_t count, mcclDataType_t type, int nBlocks,
                                     cudaStream_t stream) {
  size_t es;
  MCCLCHECK(checkCommon(devComm, nBlocks));
  MCCLCHECK(elemSize(type, &es));
  MCCLCHECK(checkWindow(sendWin, "sendWin"));
  MCCL_ARGCHECK(recvbuff != NULL || count == 0, "recvbuff is NULL");
  // A peer may still read this rank's input while this rank writes its output: they must not overlap.
  MCCL_ARGCHECK(!overlapsLocal(sendWin, sendOffset, count * es, recvbuff, count * es),
                "recvbuff %p overlaps the input in sendWin %p (the one-shot allreduce is out of place)", recvbuff,
                (void*)sendWin);
  struct mcclDevApiArgs a = argsFor(devComm);
  a.sendWin = sendWin;
  a.sendOffset = sendOffset;
  a.recv = recvbuff;
  a.count = count;
  return launch(type == mcclFloat32 ? mcclDevOneShotKernel_f32 : mcclDevOneShotKernel_bf16, nBlocks,
                MCCL_DEV_API_THREADS, stream, &a);
}

mcclResult_t mcclDevAllReduceTwoShot(const mcclDevComm* devComm, mcclWindow_t sendWin, size_t sendOffset,
                                     mcclWindow_t recvWin, size_t recvOffset, size_t count, mcclDataType_t type,
                                     int nBlocks, cudaStream_t stream) {
  size_t es;
  MCCLCHECK(checkCommon(devComm, nBlocks));
  MCCLCHECK(elemSize(type, &es));
  MCCLCHECK(checkWindow(sendWin, "sendWin"));
  MCCLCHECK(checkWindow(recvWin, "recvWin"));
  struct mcclDevApiArgs a = argsFor(devComm);
  a.sendWin = sendWin;
  a.sendOffset = sendOffset;
  a.recvWin = recvWin;
  a.recvOffset = recvOffset;
  a.count = count;
  return launch(type == mcclFloat32 ? mcclDevTwoShotKernel_f32 : mcclDevTwoShotKernel_bf16, nBlocks,
                MCCL_DEV_API_THREADS, stream, &a);
}

mcclResult_t mcclDevAllGather(const mcclDevComm* devComm, mcclWindow_t sendWin, size_t sendOffset, void* recvbuff,
                              size_t bytes, int nBlocks, cudaStream_t stream) {
  MCCLCHECK(checkCommon(devComm, nBlocks));
  MCCLCHECK(checkWindow(sendWin, "sendWin"));
  MCCL_ARGCHECK(recvbuff != NULL || bytes == 0, "recvbuff is NULL");
  MCCL_ARGCHECK(!overlapsLocal(sendWin, sendOffset, bytes, recvbuff, bytes * (size_t)devComm->lsaSize),
                "recvbuff %p overlaps the input in sendWin %p (the allgather is out of place)", recvbuff,
                (void*)sendWin);
  struct mcclDevApiArgs a = argsFor(devComm);
  a.sendWin = sendWin;
  a.sendOffset = sendOffset;
  a.recv = recvbuff;
  a.count = bytes;
  return launch(mcclDevAllGatherKernel, nBlocks, MCCL_DEV_API_THREADS, stream, &a);
}

static mcclResult_t checkRmsNorm(const void* weight, const void* out, int rows, int hidden, mcclDataType_t type) {
  size_t es;
  MCCLCHECK(elemSize(type, &es));
  MCCL_ARGCHECK(rows >= 0 && hidden >= 1, "rows %d (>= 0) or hidden %d (>= 1)", rows, hidden);
  MCCL_ARGCHECK(rows == 0 || (weight != NULL && out != NULL), "weight %p or out %p is NULL", weight, out);
  return mcclSuccess;
}

mcclResult_t mcclDevAllReduceRmsNorm(const mcclDevComm* devComm, mcclWindow_t xWin, size_t xOffset, const void* weight,
                                     void* out, int rows, int hidden, float eps, mcclDataType_t type, int nBlocks,
                                     cudaStream_t stream) {
  size_t es;
  MCCLCHECK(checkCommon(devComm, nBlocks));
  MCCLCHECK(checkRmsNorm(weight, out, rows, hidden, type));
  MCCLCHECK(elemSize(type, &es));
  MCCLCHECK(checkWindow(xWin, "xWin"));
  MCCL_ARGCHECK(
      !overlapsLocal(xWin, xOffset, (size_t)rows * (size_t)hidden * es, out, (size_t)rows * (size_t)hidden * es),
      "out %p overlaps the hidden state in xWin %p (the fused kernel is out of place)", out, (void*)xWin);
  struct mcclDevApiArgs a = argsFor(devComm);
  a.sendWin = xWin;
  a.sendOffset = xOffset;
  a.weight = weight;
  a.recv = out;
  a.rows = rows;
  a.hidden = hidden;
  a.eps = eps;
  return launch(type == mcclFloat32 ? mcclDevAllReduceRmsNormKernel_f32 : mcclDevAllReduceRmsNormKernel_bf16, nBlocks,
                MCCL_DEV_API_THREADS, stream, &a);
}

mcclResult_t mcclDevRmsNorm(const void* in, const void* weight, void* out, int rows, int hidden, float eps,
                            mcclDataType_t type, cudaStream_t stream) {
  MCCLCHECK(checkRmsNorm(weight, out, rows, hidden, type));
  MCCL_ARGCHECK(rows == 0 || in != NULL, "in is NULL");
  if (rows == 0) return mcclSuccess;
  struct mcclDevApiArgs a = argsFor(NULL);
  a.in = in;
  a.weight = weight;
  a.recv = out;
  a.rows = rows;
  a.hidden = hidden;
  a.eps = eps;
  int nBlocks = rows < 1024 ? rows : 1024;
  return launch(type == mcclFloat32 ? mcclDevRmsNormKernel_f32 : mcclDevRmsNormKernel_bf16, nBlocks,
                MCCL_DEV_API_THREADS, stream, &a);
}

mcclResult_t mcclDevBarrierTest(const mcclDevComm* devComm, mcclWindow_t win, int iters, int mode, int nBlocks,
                                int nThreads, uint32_t* errors, cudaStream_t stream) {
  MCCLCHECK(checkCommon(devComm, nBlocks));
  MCCLCHECK(checkWindow(win, "win"));
  MCCL_ARGCHECK(iters >= 0 && mode >= 0 && mode <= 3, "iters %d (>= 0) or mode %d (0..3)", iters, mode);
  MCCL_ARGCHECK(nThreads >= 1 && nThreads <= MCCL_DEV_API_MAX_THREADS, "nThreads %d is not in 1..%d", nThreads,
                MCCL_DEV_API_MAX_THREADS);
  MCCL_ARGCHECK(errors != NULL, "errors is NULL");
  struct mcclDevApiArgs a = argsFor(devComm);
  a.recvWin = win;
  a.iters = iters;
  a.mode = mode;
  a.errors = errors;
  return launch(mcclDevBarrierTestKernel, nBlocks, nThreads, stream, &a);
}

mcclResult_t mcclDevPeerPointerTest(const mcclDevComm* devComm, mcclWindow_t win, uint32_t* errors,
                                    cudaStream_t stream) {
  MCCLCHECK(checkCommon(devComm, 1));
  MCCLCHECK(checkWindow(win, "win"));
  MCCL_ARGCHECK(errors != NULL, "errors is NULL");
  struct mcclDevApiArgs a = argsFor(devComm);
  a.recvWin = win;
  a.errors = errors;
  return launch(mcclDevPeerPointerTestKernel, 1, 64, stream, &a);
}
