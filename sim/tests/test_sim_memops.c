// libsimcuda tests of what copy-engine collectives need (NCCL's src/ce_coll.cc): stream memory operations
// (cuStreamWriteValue32/64, cuStreamWaitValue32/64, cuStreamBatchMemOp) and batches of copies
// (cudaMemcpyBatchAsync, cuMemcpyBatchAsync): stream order, the wait conditions, a wait that holds its
// stream and not the host, bad arguments, NCCL's ready/complete flag handshake between two streams and
// between two processes through a peer's imported mapping, and (sim only) a wait that outlives its stream.
// Written against the CUDA API, so they also run (BACKEND=cuda) on a real GPU.
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_test.h"
#include "mccl_fork.h"
#include "mccl_utils.h"
#include "sim_test_fd.h"

static void setup(void) {
  EXPECT_CU_OK(cuInit(0));
  EXPECT_CUDA_OK(cudaSetDevice(0));
}

static CUdeviceptr dptr(const void* p) {
  return (CUdeviceptr)(uintptr_t)p;
}

// Waits for a stream without hanging the test when it never finishes: cudaSuccess, or cudaErrorNotReady
// after timeoutMs.
static cudaError_t syncWithin(cudaStream_t s, int timeoutMs) {
  long long until = (long long)mcclClockMs() + timeoutMs;
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady && (long long)mcclClockMs() < until) mcclSleepMs(1);
  return e;
}

static unsigned char pattern(int round, int rank, size_t i) {
  return (unsigned char)(round * 37 + rank * 101 + (int)(i % 251));
}

static void memOpAttributes(void) {
  setup();
  CHECK_STOPPED();
  int v64 = 0, nor = 0;
  EXPECT_CU_OK(cuDeviceGetAttribute(&v64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0));
  EXPECT_CU_OK(cuDeviceGetAttribute(&nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, 0));
  EXPECT_EQ(v64, 1);
  EXPECT_EQ(nor, 1);
}

// A write queued after a copy is seen only once the copy's bytes are there: the host, polling the flag,
// finds the whole buffer written.
static void writeAfterCopyIsOrdered(void) {
  setup();
  CHECK_STOPPED();
  const size_t n = 8 << 20;
  unsigned char *src = NULL, *dst = NULL, *ref = malloc(n);
  uint64_t* flags = NULL;
  cudaStream_t s;
  EXPECT_TRUE(ref != NULL);
  EXPECT_CUDA_OK(cudaMalloc((void**)&src, n));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&dst, n, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&flags, 64, cudaHostAllocDefault));
  memset(flags, 0, 64);
  memset(dst, 0, n);
  for (size_t i = 0; i < n; i++) ref[i] = pattern(1, 0, i);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(src, ref, n));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_CUDA_OK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s));
  EXPECT_CU_OK(cuStreamWriteValue32(s, dptr(&flags[0]), 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  EXPECT_CU_OK(cuStreamWriteValue64(s, dptr(&flags[1]), 0x123456789abcdef0ull, 0));
  long long until = (long long)mcclClockMs() + 10000;
  while (__atomic_load_n((uint32_t*)&flags[0], __ATOMIC_ACQUIRE) != 1 && (long long)mcclClockMs() < until)
    sched_yield();
  EXPECT_EQ(__atomic_load_n((uint32_t*)&flags[0], __ATOMIC_ACQUIRE), 1);
  EXPECT_MEM_EQ(dst, ref, n);
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) == 0x123456789abcdef0ull);
  EXPECT_EQ(__atomic_load_n((uint32_t*)&flags[0] + 1, __ATOMIC_ACQUIRE), 0);  // a 32-bit write is 4 bytes
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFreeHost(flags));
  EXPECT_CUDA_OK(cudaFreeHost(dst));
  EXPECT_CUDA_OK(cudaFree(src));
  free(ref);
}

// A wait holds back the work behind it in its stream; the call itself returns at once.
static void waitHoldsStreamNotHost(void) {
  setup();
  CHECK_STOPPED();
  const size_t n = 4099;
  unsigned char *src = NULL, *out = NULL, ref[4099];
  uint32_t* flag = NULL;
  cudaStream_t s;
  for (size_t i = 0; i < n; i++) ref[i] = pattern(2, 0, i);
  EXPECT_CUDA_OK(cudaMalloc((void**)&src, n));
  EXPECT_CUDA_OK(mcclTestCopyToDevice(src, ref, n));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&out, n, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocDefault));
  memset(out, 0, n);
  __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  long long t0 = (long long)mcclClockMs();
  EXPECT_CU_OK(cuStreamWaitValue32(s, dptr(flag), 5, CU_STREAM_WAIT_VALUE_GEQ));
  EXPECT_CUDA_OK(cudaMemcpyAsync(out, src, n, cudaMemcpyDeviceToHost, s));
  EXPECT_LT((long long)mcclClockMs() - t0, 1000);
  mcclSleepMs(20);
  EXPECT_CUDA(cudaStreamQuery(s), cudaErrorNotReady);
  __atomic_store_n(flag, 4, __ATOMIC_RELEASE);
  mcclSleepMs(20);
  EXPECT_CUDA(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(out[0], 0);
  __atomic_store_n(flag, 5, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(syncWithin(s, 10000));
  EXPECT_MEM_EQ(out, ref, n);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFreeHost(flag));
  EXPECT_CUDA_OK(cudaFreeHost(out));
  EXPECT_CUDA_OK(cudaFree(src));
}

// One wait condition: the value starts at `start`; when it does not meet the condition the stream
// must stay blocked until the host stores `release`.
typedef struct {
  int width;
  unsigned int cond;
  unsigned long long start, want, release;
  int metAtStart;
} waitCase;

static void runWaitCase(const waitCase* c, uint64_t* word, uint32_t* done, cudaStream_t s) {
  if (c->width == 8)
    __atomic_store_n(word, c->start, __ATOMIC_RELEASE);
  else
    __atomic_store_n((uint32_t*)word, (uint32_t)c->start, __ATOMIC_RELEASE);
  __atomic_store_n(done, 0, __ATOMIC_RELEASE);
  if (c->width == 8)
    EXPECT_CU_OK(cuStreamWaitValue64(s, dptr(word), c->want, c->cond));
  else
    EXPECT_CU_OK(cuStreamWaitValue32(s, dptr(word), (uint32_t)c->want, c->cond));
  EXPECT_CU_OK(cuStreamWriteValue32(s, dptr(done), 1, 0));
  if (!c->metAtStart) {
    mcclSleepMs(10);
    EXPECT_CUDA(cudaStreamQuery(s), cudaErrorNotReady);
    EXPECT_EQ(__atomic_load_n(done, __ATOMIC_ACQUIRE), 0);
    if (c->width == 8)
      __atomic_store_n(word, c->release, __ATOMIC_RELEASE);
    else
      __atomic_store_n((uint32_t*)word, (uint32_t)c->release, __ATOMIC_RELEASE);
  }
  EXPECT_CUDA_OK(syncWithin(s, 10000));
  EXPECT_EQ(__atomic_load_n(done, __ATOMIC_ACQUIRE), 1);
}

// The conditions as cuda.h defines them: GEQ is cyclic, (int32_t)(*addr - value) >= 0; EQ; AND non-zero;
// NOR ~(*addr | value) non-zero, over 32 or 64 bits.
static void waitConditions(void) {
  setup();
  CHECK_STOPPED();
  static const waitCase cases[] = {
      {4, CU_STREAM_WAIT_VALUE_GEQ, 0xfffffff0u, 0x10, 0x10, 0},  // behind by 0x20 across the wrap
      {4, CU_STREAM_WAIT_VALUE_GEQ, 0x10, 0xfffffff0u, 0, 1},     // ahead by 0x20 across the wrap
      {4, CU_STREAM_WAIT_VALUE_GEQ, 7, 7, 0, 1},
      {4, CU_STREAM_WAIT_VALUE_EQ, 3, 4, 4, 0},
      {4, CU_STREAM_WAIT_VALUE_AND, 0x0f, 0xf0, 0x10, 0},
      {4, CU_STREAM_WAIT_VALUE_NOR, 0xffffffffu, 0, 0x7fffffffu, 0},  // ~(x | 0) == 0 until a bit clears
      {8, CU_STREAM_WAIT_VALUE_EQ, 0x100000005ull, 5, 5, 0},          // equal in the low word only
      {8, CU_STREAM_WAIT_VALUE_GEQ, 0x7fffffffffffffffull, 0x8000000000000001ull, 0x8000000000000001ull, 0},
      {8, CU_STREAM_WAIT_VALUE_AND, 0xffffffffull, 0xff00000000ull, 0x100000000ull, 0},
      {8, CU_STREAM_WAIT_VALUE_NOR, 0xffffffffull, 0, 0, 1},  // the high word is clear
  };
  uint64_t* word = NULL;
  uint32_t* done = NULL;
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&word, 64, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&done, 64, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && !mcclTestStopped(); i++)
    runWaitCase(&cases[i], word, done, s);
  EXPECT_CUDA_OK(syncWithin(s, 10000));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFreeHost(done));
  EXPECT_CUDA_OK(cudaFreeHost(word));
}

// On the NULL stream a wait blocks neither the host nor non-blocking streams, but it holds back the
// legacy stream and so the work queued after it on a blocking stream.
static void nullStreamWait(void) {
  setup();
  CHECK_STOPPED();
  uint32_t *flag = NULL, *done = NULL;
  cudaStream_t blocking;
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&done, 64, cudaHostAllocDefault));
  __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
  __atomic_store_n(done, 0, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(cudaStreamCreate(&blocking));
  long long t0 = (long long)mcclClockMs();
  EXPECT_CU_OK(cuStreamWaitValue32(NULL, dptr(flag), 1, CU_STREAM_WAIT_VALUE_EQ));
  EXPECT_CU_OK(cuStreamWriteValue32(blocking, dptr(done), 1, 0));
  EXPECT_LT((long long)mcclClockMs() - t0, 1000);
  mcclSleepMs(20);
  EXPECT_EQ(__atomic_load_n(done, __ATOMIC_ACQUIRE), 0);
  EXPECT_CUDA(cudaStreamQuery(blocking), cudaErrorNotReady);
  __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(syncWithin(blocking, 10000));
  EXPECT_EQ(__atomic_load_n(done, __ATOMIC_ACQUIRE), 1);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_CUDA_OK(cudaStreamDestroy(blocking));
  EXPECT_CUDA_OK(cudaFreeHost(done));
  EXPECT_CUDA_OK(cudaFreeHost(flag));
}

static size_t attrsIdx0[1] = {0};

// A batch runs in stream order as a whole (after a wait before it), with attributes per range of copies;
// a DURING_API_CALL source is read before the call returns, so the caller may change it at once.
static void memcpyBatchOrderAndAttributes(void) {
  setup();
  CHECK_STOPPED();
  enum { nCopies = 5, chunk = 3001 };
  unsigned char *dev = NULL, *pinned = NULL, *pageable = malloc(chunk), stackSrc[64];
  uint32_t* flag = NULL;
  cudaStream_t s;
  EXPECT_TRUE(pageable != NULL);
  EXPECT_CUDA_OK(cudaMalloc((void**)&dev, 2 * nCopies * chunk));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&pinned, 2 * nCopies * chunk, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocDefault));
  __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
  memset(pinned, 0, 2 * nCopies * chunk);
  EXPECT_CUDA_OK(mcclTestMemset(dev, 0, 2 * nCopies * chunk));
  unsigned char ref[nCopies][chunk];
  for (int c = 0; c < nCopies; c++)
    for (size_t i = 0; i < chunk; i++) ref[c][i] = pattern(3, c, i);
  for (int c = 0; c < 3; c++) EXPECT_CUDA_OK(mcclTestCopyToDevice(dev + (size_t)c * chunk, ref[c], chunk));
  memcpy(pinned + 3 * chunk, ref[3], chunk);
  memcpy(pageable, ref[4], chunk);
  // Copies 0-2: device to device, device to pinned host, device to peer slot; 3: pinned to device;
  // 4: pageable to device (the ANY order the docs suggest for malloc'ed sources).
  void* dsts[nCopies] = {dev + 5 * chunk, pinned + 5 * chunk, dev + 7 * chunk, dev + 8 * chunk, dev + 9 * chunk};
  const void* srcs[nCopies] = {dev, dev + chunk, dev + 2 * chunk, pinned + 3 * chunk, pageable};
  size_t sizes[nCopies] = {chunk, chunk, chunk, chunk, chunk};
  struct cudaMemcpyAttributes attrs[2];
  memset(attrs, 0, sizeof(attrs));
  attrs[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attrs[0].flags = cudaMemcpyFlagPreferOverlapWithCompute;
  attrs[1].srcAccessOrder = cudaMemcpySrcAccessOrderAny;
  size_t idxs[2] = {0, 3};
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_CU_OK(cuStreamWaitValue32(s, dptr(flag), 1, CU_STREAM_WAIT_VALUE_EQ));
  EXPECT_CUDA_OK(cudaMemcpyBatchAsync(dsts, srcs, sizes, nCopies, attrs, idxs, 2, s));
  // DURING_API_CALL from a stack buffer that changes as soon as the call returns, the stream still blocked.
  for (size_t i = 0; i < sizeof(stackSrc); i++) stackSrc[i] = (unsigned char)(0xa0 + i);
  void* stackDst[1] = {pinned + 6 * chunk};
  const void* stackSrcs[1] = {stackSrc};
  size_t stackSize[1] = {sizeof(stackSrc)};
  struct cudaMemcpyAttributes during;
  memset(&during, 0, sizeof(during));
  during.srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
  EXPECT_CUDA_OK(cudaMemcpyBatchAsync(stackDst, stackSrcs, stackSize, 1, &during, attrsIdx0, 1, s));
  memset(stackSrc, 0x55, sizeof(stackSrc));
  mcclSleepMs(20);
  EXPECT_CUDA(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(pinned[5 * chunk], 0);  // the stream has not run the batch
  __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(syncWithin(s, 10000));
  unsigned char back[chunk];
  EXPECT_CUDA_OK(cudaMemcpy(back, dev + 5 * chunk, chunk, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(back, ref[0], chunk);
  EXPECT_MEM_EQ(pinned + 5 * chunk, ref[1], chunk);
  EXPECT_CUDA_OK(cudaMemcpy(back, dev + 7 * chunk, chunk, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(back, ref[2], chunk);
  EXPECT_CUDA_OK(cudaMemcpy(back, dev + 8 * chunk, chunk, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(back, ref[3], chunk);
  EXPECT_CUDA_OK(cudaMemcpy(back, dev + 9 * chunk, chunk, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(back, ref[4], chunk);
  for (size_t i = 0; i < sizeof(stackSrc); i++) EXPECT_EQ(pinned[6 * chunk + i], 0xa0 + i);
  // The driver's twin, on device pointers.
  CUdeviceptr ddst[1] = {dptr(dev + 6 * chunk)}, dsrc[1] = {dptr(dev)};
  size_t dsize[1] = {chunk};
  CUmemcpyAttributes dattr;
  memset(&dattr, 0, sizeof(dattr));
  dattr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  EXPECT_CU_OK(cuMemcpyBatchAsync(ddst, dsrc, dsize, 1, &dattr, attrsIdx0, 1, s));
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_CUDA_OK(cudaMemcpy(back, dev + 6 * chunk, chunk, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(back, ref[0], chunk);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFreeHost(flag));
  EXPECT_CUDA_OK(cudaFreeHost(pinned));
  EXPECT_CUDA_OK(cudaFree(dev));
  free(pageable);
}

static void memOpBadArguments(void) {
  setup();
  CHECK_STOPPED();
  uint64_t* dev = NULL;
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaMalloc((void**)&dev, 4096));
  EXPECT_CUDA_OK(mcclTestMemset(dev, 0, 4096));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUdeviceptr d = dptr(dev);
  EXPECT_CU(cuStreamWriteValue32(s, 0, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuStreamWaitValue32(s, 0, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuStreamWriteValue32(s, d + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);  // not 4-byte aligned
  EXPECT_CU(cuStreamWriteValue64(s, d + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);  // not 8-byte aligned
  EXPECT_CU(cuStreamWaitValue64(s, d + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuStreamWriteValue32(s, d, 1, 0x2), CUDA_ERROR_INVALID_VALUE);  // no such write flag
  EXPECT_CU(cuStreamWaitValue32(s, d, 1, 0x4), CUDA_ERROR_INVALID_VALUE);   // no such condition
  // Batches: flags must be 0, fewer than 256 ops, known operations (a NULL array: memOpSimRules).
  CUstreamBatchMemOpParams p[2];
  memset(p, 0, sizeof(p));
  p[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  p[0].writeValue.address = d;
  p[0].writeValue.value = 7;
  EXPECT_CU(cuStreamBatchMemOp(s, 1, p, 1), CUDA_ERROR_INVALID_VALUE);
  p[1].operation = (CUstreamBatchMemOpType)99;
  EXPECT_CU(cuStreamBatchMemOp(s, 2, p, 0), CUDA_ERROR_INVALID_VALUE);
  p[1].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
  p[1].memoryBarrier.flags = 7;
  EXPECT_CU(cuStreamBatchMemOp(s, 2, p, 0), CUDA_ERROR_INVALID_VALUE);
  p[1].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_SYS;
  EXPECT_CU_OK(cuStreamBatchMemOp(s, 2, p, 0));
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  uint32_t got = 0;
  EXPECT_CUDA_OK(cudaMemcpy(&got, dev, 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, 7);
  // Batches of copies: a count, attributes whose indices start at 0 and increase, a valid source order and
  // known flags, a stream other than the legacy one (NULL arrays and pointers: memOpSimRules).
  void* dsts[2] = {dev, dev + 256};
  const void* srcs[2] = {dev + 128, dev + 384};
  size_t sizes[2] = {64, 64};
  struct cudaMemcpyAttributes a[2];
  memset(a, 0, sizeof(a));
  a[0].srcAccessOrder = a[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t idx[2] = {0, 1};
  EXPECT_CUDA_OK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, idx, 2, s));
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, idx, 0, s), cudaErrorInvalidValue);
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, a, idx, 2, s), cudaErrorInvalidValue);  // numAttrs > count
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, idx, 1, cudaStreamLegacy), cudaErrorInvalidValue);
  size_t badIdx[2] = {1, 0};
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, badIdx, 1, s), cudaErrorInvalidValue);  // not from 0
  badIdx[0] = 0;
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, badIdx, 2, s), cudaErrorInvalidValue);  // decreasing
  a[1].srcAccessOrder = cudaMemcpySrcAccessOrderInvalid;
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, idx, 2, s), cudaErrorInvalidValue);
  a[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  a[1].flags = 0x2;
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, a, idx, 2, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  a[1].flags = 0;
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFree(dev));
}

// What only the sim can promise: addresses no device reaches, NULL arrays (a driver need not check them: on
// 4x H100 one of these calls crashed the process), the flags outside its subset, a bad batch entry that queues
// none of the batch, and limits the CUDA docs state but a driver may relax (a batch of 256 memory operations,
// "must be less than 256"; an empty batch of copies).
static void memOpSimRules(void) {
  if (!MCCL_TEST_ON_SIM) SKIP("a GPU may accept pageable memory (HMM) or support the flush");
  setup();
  CHECK_STOPPED();
  uint32_t* dev = NULL;
  uint32_t* pageable = calloc(16, sizeof(uint32_t));
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaMalloc((void**)&dev, 4096));
  EXPECT_CUDA_OK(mcclTestMemset(dev, 0, 4096));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_CU(cuStreamWriteValue32(s, dptr(pageable), 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuStreamWaitValue32(s, dptr(pageable), 1, 0), CUDA_ERROR_INVALID_VALUE);
  // A reservation with nothing mapped.
  CUdeviceptr va;
  size_t gran = (size_t)2 << 20;
  EXPECT_CU_OK(cuMemAddressReserve(&va, gran, 0, 0, 0));
  EXPECT_CU(cuStreamWriteValue32(s, va, 1, 0), CUDA_ERROR_INVALID_VALUE);
  void* vd[1] = {(void*)(uintptr_t)va};
  const void* vs[1] = {dev};
  size_t vn[1] = {16};
  struct cudaMemcpyAttributes a;
  memset(&a, 0, sizeof(a));
  a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  EXPECT_CUDA(cudaMemcpyBatchAsync(vd, vs, vn, 1, &a, attrsIdx0, 1, s), cudaErrorInvalidValue);
  EXPECT_CU_OK(cuMemAddressFree(va, gran));
  // Outside the subset: NOT_SUPPORTED (and one warning each).
  EXPECT_CU(cuStreamWaitValue32(s, dptr(dev), 1, CU_STREAM_WAIT_VALUE_GEQ | CU_STREAM_WAIT_VALUE_FLUSH),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_CU(cuStreamWriteValue32(s, dptr(dev), 1, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER), CUDA_ERROR_NOT_SUPPORTED);
  CUstreamBatchMemOpParams p[2];
  memset(p, 0, sizeof(p));
  p[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  p[0].writeValue.address = dptr(dev);
  p[0].writeValue.value = 7;
  p[1].flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
  EXPECT_CU(cuStreamBatchMemOp(s, 2, p, 0), CUDA_ERROR_NOT_SUPPORTED);
  p[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  p[1].writeValue.address = dptr(dev) + 1;  // misaligned: the whole batch is refused
  EXPECT_CU(cuStreamBatchMemOp(s, 2, p, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuStreamWriteValue32(CU_STREAM_PER_THREAD, dptr(dev), 1, 0), CUDA_ERROR_NOT_SUPPORTED);
  static CUstreamBatchMemOpParams many[256];
  for (int i = 0; i < 256; i++) many[i] = p[0];
  EXPECT_CU(cuStreamBatchMemOp(s, 256, many, 0), CUDA_ERROR_INVALID_VALUE);
  void* dsts[1] = {dev};
  const void* srcs[1] = {dev + 64};
  size_t sizes[1] = {64};
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 0, &a, attrsIdx0, 1, s), cudaErrorInvalidValue);
  EXPECT_CUDA_OK(cudaStreamSynchronize(s));
  uint32_t got = 1;
  EXPECT_CUDA_OK(cudaMemcpy(&got, dev, 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, 0);
  EXPECT_CU_OK(cuStreamBatchMemOp(s, 0, NULL, 0));  // an empty batch (NCCL's sync on one rank)
  EXPECT_CU(cuStreamBatchMemOp(s, 1, NULL, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CUDA(cudaMemcpyBatchAsync(NULL, srcs, sizes, 1, &a, attrsIdx0, 1, s), cudaErrorInvalidValue);
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, NULL, attrsIdx0, 1, s), cudaErrorInvalidValue);
  dsts[0] = NULL;
  EXPECT_CUDA(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &a, attrsIdx0, 1, s), cudaErrorInvalidValue);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_CUDA_OK(cudaFree(dev));
  free(pageable);
}

// NCCL's ncclMemOpSync (src/ce_coll.cc, unicast form) between two streams standing for two ranks: each
// round, a batch writes the rank's ready flag and waits for the peer's, a copy batch puts the rank's
// chunk in both ranks' buffers, a batch on the complete flags, then each rank copies its buffer out.
// The next round's ready handshake is what keeps a rank from overwriting a buffer its peer still reads.
static void readyCompleteHandshake(void) {
  setup();
  CHECK_STOPPED();
  enum { rounds = 16, chunk = 4099 };
  uint32_t* flags = NULL;  // ready[2], then complete[2]
  unsigned char *src[2] = {NULL, NULL}, *buf[2] = {NULL, NULL}, *res[2] = {NULL, NULL};
  unsigned char* host = malloc((size_t)rounds * 2 * chunk);
  cudaStream_t s[2];
  EXPECT_TRUE(host != NULL);
  EXPECT_CUDA_OK(cudaMalloc((void**)&flags, 64));
  EXPECT_CUDA_OK(mcclTestMemset(flags, 0, 64));
  for (int r = 0; r < 2; r++) {
    EXPECT_CUDA_OK(cudaMalloc((void**)&src[r], (size_t)rounds * chunk));
    EXPECT_CUDA_OK(cudaMalloc((void**)&buf[r], 2 * chunk));
    EXPECT_CUDA_OK(cudaMalloc((void**)&res[r], (size_t)rounds * 2 * chunk));
    for (int i = 0; i < rounds; i++)
      for (size_t b = 0; b < chunk; b++) host[(size_t)i * chunk + b] = pattern(i, r, b);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(src[r], host, (size_t)rounds * chunk));
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
  }
  struct cudaMemcpyAttributes attr;
  memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  for (int i = 0; i < rounds && !mcclTestStopped(); i++)
    for (int r = 0; r < 2; r++) {
      CUstreamBatchMemOpParams p[2];
      for (int phase = 0; phase < 2; phase++) {
        memset(p, 0, sizeof(p));
        p[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        p[0].writeValue.address = dptr(&flags[2 * phase + r]);
        p[0].writeValue.value = (uint32_t)i + 1;
        p[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        p[1].waitValue.address = dptr(&flags[2 * phase + 1 - r]);
        p[1].waitValue.value = (uint32_t)i + 1;
        p[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
        EXPECT_CU_OK(cuStreamBatchMemOp(s[r], 2, p, 0));
        if (phase == 1) break;
        void* dsts[2] = {buf[r] + (size_t)r * chunk, buf[1 - r] + (size_t)r * chunk};
        const void* srcs[2] = {src[r] + (size_t)i * chunk, src[r] + (size_t)i * chunk};
        size_t sizes[2] = {chunk, chunk};
        EXPECT_CUDA_OK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, attrsIdx0, 1, s[r]));
      }
      EXPECT_CUDA_OK(
          cudaMemcpyAsync(res[r] + (size_t)i * 2 * chunk, buf[r], 2 * chunk, cudaMemcpyDeviceToDevice, s[r]));
    }
  for (int r = 0; r < 2; r++) EXPECT_CUDA_OK(syncWithin(s[r], 30000));
  for (int r = 0; r < 2 && !mcclTestStopped(); r++) {
    EXPECT_CUDA_OK(cudaMemcpy(host, res[r], (size_t)rounds * 2 * chunk, cudaMemcpyDeviceToHost));
    for (int i = 0; i < rounds; i++)
      for (int q = 0; q < 2; q++)
        for (size_t b = 0; b < chunk; b++)
          if (host[((size_t)i * 2 + (size_t)q) * chunk + b] != pattern(i, q, b)) {
            mcclTestFailAt(__FILE__, __LINE__, "rank %d round %d: byte %zu of rank %d's chunk is wrong", r, i, b, q);
            r = 2, i = rounds, q = 2;
            break;
          }
  }
  for (int r = 0; r < 2; r++) {
    cudaStreamDestroy(s[r]);
    cudaFree(src[r]);
    cudaFree(buf[r]);
    cudaFree(res[r]);
  }
  cudaFree(flags);
  free(host);
}

// A wait whose stream is destroyed and whose value never comes gives up after MCCL_SIM_DESTROYED_WAIT_MS
// (main sets 200 ms): the work behind it is dropped, never run, and the stream's thread ends.
static int hostFnRan;
static void markRan(void* arg) {
  (void)arg;
  __atomic_store_n(&hostFnRan, 1, __ATOMIC_RELEASE);
}

static void destroyedStreamGivesUp(void) {
  if (!MCCL_TEST_ON_SIM) SKIP("a GPU keeps such a stream blocked forever");
  setup();
  CHECK_STOPPED();
  mcclTestWarmUp();
  uint32_t *flag = NULL, *done = NULL;
  unsigned char *out = NULL, *src = NULL;
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&flag, 64, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&done, 64, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&out, 256, cudaHostAllocDefault));
  EXPECT_CUDA_OK(cudaHostAlloc((void**)&src, 256, cudaHostAllocDefault));
  __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
  __atomic_store_n(done, 0, __ATOMIC_RELEASE);
  memset(out, 0, 256);
  memset(src, 0x77, 256);
  __atomic_store_n(&hostFnRan, 0, __ATOMIC_RELEASE);
  int th0 = mcclTestCountThreads();
  cudaStream_t s;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_CU_OK(cuStreamWaitValue32(s, dptr(flag), 1, CU_STREAM_WAIT_VALUE_EQ));
  EXPECT_CUDA_OK(cudaMemcpyAsync(out, src, 256, cudaMemcpyHostToHost, s));
  EXPECT_CUDA_OK(cudaLaunchHostFunc(s, markRan, NULL));
  EXPECT_CU_OK(cuStreamWriteValue32(s, dptr(done), 1, 0));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());  // nothing left to wait for
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(__atomic_load_n(&hostFnRan, __ATOMIC_ACQUIRE), 0);
  EXPECT_EQ(__atomic_load_n(done, __ATOMIC_ACQUIRE), 0);
  // A destroyed stream whose value does come in time still runs its work, as the driver's.
  __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  EXPECT_CU_OK(cuStreamWaitValue32(s, dptr(flag), 1, CU_STREAM_WAIT_VALUE_EQ));
  EXPECT_CU_OK(cuStreamWriteValue32(s, dptr(done), 2, 0));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(__atomic_load_n(done, __ATOMIC_ACQUIRE), 2);
  EXPECT_CUDA_OK(cudaFreeHost(src));
  EXPECT_CUDA_OK(cudaFreeHost(out));
  EXPECT_CUDA_OK(cudaFreeHost(done));
  EXPECT_CUDA_OK(cudaFreeHost(flag));
}

// ---- two processes: the parent's allocation, imported by the child (this binary re-executed, since a
// forked child of a CUDA process may not use CUDA), holds both ranks' flags and chunk slots. Each rank
// writes its flags through its own mapping and waits on the peer's, as NCCL's ready/complete handshake.
enum { xRounds = 24, xChunk = 5003, xSlots = 4096 };

// One rank's side: queues every round, then waits (bounded) and checks the peer's chunks. Returns 0 when
// all arrived intact; a positive step number otherwise. The stream is destroyed either way, so a rank
// whose peer failed does not leave a worker waiting forever.
static int runRank(int rank, CUdeviceptr win) {
  uint32_t* flags = (uint32_t*)(uintptr_t)win;  // ready[2] at 0, complete[2] at 64
  unsigned char* slots = (unsigned char*)(uintptr_t)win + xSlots;
  unsigned char *src = NULL, *got = NULL, *host = malloc((size_t)xRounds * xChunk);
  cudaStream_t s;
  if (!host || cudaMalloc((void**)&src, (size_t)xRounds * xChunk) != cudaSuccess ||
      cudaHostAlloc((void**)&got, (size_t)xRounds * xChunk, cudaHostAllocDefault) != cudaSuccess)
    return 30;
  for (int i = 0; i < xRounds; i++)
    for (size_t b = 0; b < xChunk; b++) host[(size_t)i * xChunk + b] = pattern(i, rank, b);
  if (mcclTestCopyToDevice(src, host, (size_t)xRounds * xChunk) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return 31;
  struct cudaMemcpyAttributes attr;
  memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  int rc = 0;
  for (int i = 0; i < xRounds && !rc; i++) {
    for (int phase = 0; phase < 2 && !rc; phase++) {
      CUstreamBatchMemOpParams p[2];
      memset(p, 0, sizeof(p));
      p[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
      p[0].writeValue.address = dptr(&flags[16 * phase + rank]);
      p[0].writeValue.value = (uint32_t)i + 1;
      p[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
      p[1].waitValue.address = dptr(&flags[16 * phase + 1 - rank]);
      p[1].waitValue.value = (uint32_t)i + 1;
      p[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
      if (cuStreamBatchMemOp(s, 2, p, 0) != CUDA_SUCCESS) rc = 32;
      if (phase == 0 && !rc) {
        void* dst[1] = {slots + (size_t)rank * 8192};
        const void* from[1] = {src + (size_t)i * xChunk};
        size_t size[1] = {xChunk};
        if (cudaMemcpyBatchAsync(dst, from, size, 1, &attr, attrsIdx0, 1, s) != cudaSuccess) rc = 33;
      }
    }
    if (!rc && cudaMemcpyAsync(got + (size_t)i * xChunk, slots + (size_t)(1 - rank) * 8192, xChunk,
                               cudaMemcpyDeviceToHost, s) != cudaSuccess)
      rc = 34;
  }
  if (!rc && syncWithin(s, 60000) != cudaSuccess) rc = 35;
  for (int i = 0; i < xRounds && !rc; i++)
    for (size_t b = 0; b < xChunk && !rc; b++)
      if (got[(size_t)i * xChunk + b] != pattern(i, 1 - rank, b)) rc = 36;
  cudaStreamDestroy(s);
  cudaFreeHost(got);
  cudaFree(src);
  free(host);
  return rc;
}

static int peerChild(int sock) {
  uint64_t size = 0;
  int n = 0;
  if (cuInit(0) != CUDA_SUCCESS || cudaGetDeviceCount(&n) != cudaSuccess) return 10;
  int dev = n > 1 ? 1 : 0;  // the peer rank's own GPU where there is one
  if (cudaSetDevice(dev) != cudaSuccess) return 11;
  int fd = recvFd(sock, &size);
  if (fd < 0) return 12;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  if (cuMemImportFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0)
    return 13;
  close(fd);
  if (cuMemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS || cuMemMap(va, size, 0, h, 0) != CUDA_SUCCESS) return 14;
  CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (cuMemSetAccess(va, size, &desc, 1) != CUDA_SUCCESS) return 15;
  int rc = runRank(1, va);
  char b = rc ? 'f' : 'd';
  if (write(sock, &b, 1) != 1) rc = rc ? rc : 16;
  if (cuMemUnmap(va, size) || cuMemRelease(h) || cuMemAddressFree(va, size)) rc = rc ? rc : 17;
  return rc;
}

static void flagsAcrossProcesses(void) {
  setup();
  CHECK_STOPPED();
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t size = 0;
  EXPECT_CU_OK(cuMemGetAllocationGranularity(&size, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  int fd = -1;
  EXPECT_CU_OK(cuMemCreate(&h, size, &prop, 0));
  EXPECT_CU_OK(cuMemAddressReserve(&va, size, 0, 0, 0));
  EXPECT_CU_OK(cuMemMap(va, size, 0, h, 0));
  CUmemAccessDesc desc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_CU_OK(cuMemSetAccess(va, size, &desc, 1));
  EXPECT_CUDA_OK(mcclTestMemset((void*)(uintptr_t)va, 0, size));
  EXPECT_CU_OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  int sock = -1;
  pid_t pid = simTestSpawnPeer("peer", "test_sim_memops", &sock);
  EXPECT_TRUE(pid > 0);
  int sent = sendFd(sock, fd, size);
  close(fd);
  int rc = sent == 0 ? runRank(0, va) : 40;
  char b = 0;
  ssize_t got = read(sock, &b, 1);
  close(sock);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_CU_OK(cuMemUnmap(va, size));
  EXPECT_CU_OK(cuMemRelease(h));
  EXPECT_CU_OK(cuMemAddressFree(va, size));
  EXPECT_EQ(sent, 0);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(got, 1);
  EXPECT_EQ(b, 'd');
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

static const mcclTestCase cases[] = {
    MCCL_TEST_CASE(memOpAttributes),        MCCL_TEST_CASE(writeAfterCopyIsOrdered),
    MCCL_TEST_CASE(waitHoldsStreamNotHost), MCCL_TEST_CASE(waitConditions),
    MCCL_TEST_CASE(nullStreamWait),         MCCL_TEST_CASE(memcpyBatchOrderAndAttributes),
    MCCL_TEST_CASE(memOpBadArguments),      MCCL_TEST_CASE(memOpSimRules),
    MCCL_TEST_CASE(readyCompleteHandshake), MCCL_TEST_CASE(destroyedStreamGivesUp),
    MCCL_TEST_CASE(flagsAcrossProcesses),
};

int main(int argc, char** argv) {
  // destroyedStreamGivesUp waits this long for a value that never comes; read once, at the first call.
  setenv("MCCL_SIM_DESTROYED_WAIT_MS", "200", 0);
  const char* role = getenv("MCCL_SIM_TEST_ROLE");
  if (role && strcmp(role, "peer") == 0) return peerChild(atoi(getenv("MCCL_SIM_TEST_SOCK")));
  return mcclTestMain(argc, argv, cases, (int)(sizeof(cases) / sizeof(cases[0])), NULL);
}
