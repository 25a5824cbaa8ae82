// Lab 07: the send/receive kernel (NCCL 2.28.9 src/device/sendrecv.h, runSend / runRecv), over lab
// 06's Primitives with the SIMPLE protocol. It moves bytes: one kernel serves every type. One
// launch does a communicator's send to the ring's next and receive from its prev: block c carries
// a contiguous part of each direction over channel c's connections, one chunk of each in turn, so
// neither direction waits for the other to finish (the FIFO holds more than one chunk).
#ifndef MCCL_SENDRECV_KERNELS_CUH_
#define MCCL_SENDRECV_KERNELS_CUH_

#include "device/primitives.cuh"
#include "sendrecv_args.h"

struct mcclSendRecvShmem {
  struct mcclSendRecvArgs args;
};
MCCL_SHMEM_DEFINE(struct mcclSendRecvShmem, sendRecvShmem);

// Channel c's part [lo, lo + n) of `bytes`, cut at 512-byte multiples (as the ring collectives).
__device__ __forceinline__ void mcclSendRecvPart(int64_t bytes, int nChannels, int64_t* lo, int64_t* n) {
  const int64_t per = mcclDivUp(mcclDivUp(bytes, (int64_t)nChannels), (int64_t)512) * 512;
  const int64_t l = (int64_t)blockIdx.x * per < bytes ? (int64_t)blockIdx.x * per : bytes;
  *lo = l;
  *n = (l + per < bytes ? l + per : bytes) - l;
}

__device__ __forceinline__ void mcclSendRecvMain(const struct mcclSendRecvArgs& args) {
  const int tid = threadIdx.x, nthreads = blockDim.x;
  static_assert(sizeof(struct mcclSendRecvArgs) % sizeof(uint32_t) == 0, "copied in 4-byte words");
  {
    const uint32_t* src = (const uint32_t*)&args;
    uint32_t* dst = (uint32_t*)&sendRecvShmem.args;
    for (int i = tid; i < (int)(sizeof(args) / sizeof(uint32_t)); i += nthreads) dst[i] = src[i];
    if (tid == 0) {
      mcclShmem.work.abortFlag = args.abortFlag;
      mcclShmem.work.trace = 0;
    }
    __syncthreads();
  }
  const struct mcclSendRecvArgs& a = sendRecvShmem.args;
  int64_t sLo, sN, rLo, rN;
  mcclSendRecvPart((int64_t)a.sendBytes, a.nChannels, &sLo, &sN);
  mcclSendRecvPart((int64_t)a.recvBytes, a.nChannels, &rLo, &rN);
  if (a.self) {  // to oneself: a copy, no connection
    if (sN <= 0 || a.sendbuff == (const void*)a.recvbuff) return;
    FuncSum<uint8_t> op;
    op.arg = 1;
    void* src[1] = {(void*)((const uint8_t*)a.sendbuff + sLo)};
    void* dst[1] = {(void*)((uint8_t*)a.recvbuff + sLo)};
    mcclReduceCopy<MCCL_SIMPLE_UNROLL, uint8_t, FuncSum<uint8_t>, 1, 1>(tid, nthreads, op, false, src, dst, sN);
    return;
  }
  // A direction this block has no bytes of is not connected, on either side (both cut alike).
  if (sN <= 0 && rN <= 0) return;
  Primitives<uint8_t, FuncSum<uint8_t>, ProtoSimple> prims(
      tid, nthreads, rN > 0 ? a.recvConns + blockIdx.x : NULL, sN > 0 ? a.sendConns + blockIdx.x : NULL, a.sendbuff,
      a.recvbuff, 1, a.chunkSteps / a.sliceSteps, a.sliceSteps);
  const int64_t chunk = prims.chunkElems();
  const int64_t n = sN > rN ? sN : rN;
  for (int64_t e = 0; e < n && !prims.aborted(); e += chunk) {
    if (e < sN) prims.send(sLo + e, (int)(chunk < sN - e ? chunk : sN - e));
    if (e < rN && !prims.aborted()) prims.recv(rLo + e, (int)(chunk < rN - e ? chunk : rN - e));
  }
}

#define MCCL_DEFINE_SENDRECV_KERNEL()                                                                              \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS) mcclSendRecvKernel(struct mcclSendRecvArgs args) { \
    mcclSendRecvMain(args);                                                                                        \
  }                                                                                                                \
  MCCL_KERNEL_REGISTER(mcclSendRecvKernel)

#endif
