// Lab 06: the kernels that run one primitive on nchannels connections, one block per channel
// (NCCL 2.28.9 src/device/common.h ncclKernelMain + the per-collective run functions, reduced to
// one op). Compiled by nvcc for the GPU and by g++ for the sim from the same sources.
//
// As NCCL generates one kernel per (collective, type, op), each kernel_<type>.cu defines one kernel per
// element type with MCCL_DEFINE_DEV_KERNEL; kernel_copy.cu the one that moves bytes for the copy
// ops. One big kernel for every type took ptxas minutes; eleven small ones compile in parallel.
#ifndef MCCL_KERNELS_CUH_
#define MCCL_KERNELS_CUH_
#include "device/primitives.cuh"

// Run the work's op over this block's part, chunk by chunk. Reduce is false for the copy ops, which
// move bytes whatever the type, so the reducing cases are compiled only for typed instances.
template <typename T, typename RedOp, typename Proto, bool Reduce>
__device__ bool mcclRunWork(int tid, int nthreads, int64_t count) {
  const struct mcclDevWork& w = mcclShmem.work;
  const int ch = blockIdx.x;
  struct mcclConnInfo* recvConn = w.recvConns ? w.recvConns + ch : NULL;
  struct mcclConnInfo* sendConn = w.sendConns ? w.sendConns + ch : NULL;
  int64_t lo, hi;  // this block's part, cut at 512-byte multiples (a byte mover and a reducer agree)
  mcclEvenPart(0, count, w.nchannels, ch, 512 / (int64_t)sizeof(T), lo, hi);
  bool aborted;
  {
    Primitives<T, RedOp, Proto> prims(tid, nthreads, recvConn, sendConn, w.src, w.dst, w.redOpArg, 0,
                                      w.chunkSteps / w.sliceSteps, w.sliceSteps);
    const int64_t chunk = prims.chunkElems();
    const bool postOp = w.postOp != 0;
    for (int64_t off = lo; off < hi && !prims.aborted(); off += chunk) {
      const int n = (int)(chunk < hi - off ? chunk : hi - off);
      if (w.trace && tid == 0)
        printf("[%s block %d] chunk of elements [%lld, %lld)\n", mcclDevOpNameDev(w.op), ch, (long long)off,
               (long long)(off + n));
      if constexpr (Reduce) {
        switch (w.op) {
          case mcclDevOpRecvReduceSend:
            prims.recvReduceSend(off, n);
            break;
          case mcclDevOpRecvReduceCopy:
            prims.recvReduceCopy(off, off, n, postOp);
            break;
          case mcclDevOpRecvReduceCopySend:
            prims.recvReduceCopySend(off, off, n, postOp);
            break;
        }
      } else {
        switch (w.op) {
          case mcclDevOpSend:
            prims.send(off, n);
            break;
          case mcclDevOpRecv:
            prims.recv(off, n);
            break;
          case mcclDevOpCopySend:
            prims.copySend(off, off, n);
            break;
          case mcclDevOpRecvCopySend:
            prims.recvCopySend(off, n);
            break;
        }
      }
    }
    aborted = prims.aborted();
  }
  return aborted;
}

// Avg sums, then divides by the work's redOpArg (the number of contributions) in postOp.
template <typename T, typename Proto>
__device__ bool mcclRunReduce(int tid, int nthreads) {
  const int64_t count = (int64_t)mcclShmem.work.count;
  const int op = mcclShmem.work.redop == mcclAvg ? mcclDevSumPostDiv : mcclShmem.work.redop;
  return mcclWithDevRedOp<T>(
      op, [&](auto redOp) { return mcclRunWork<T, decltype(redOp), Proto, true>(tid, nthreads, count); });
}

// The copy kernel (T = mcclCopyBytes) moves count * sizeof(dtype) bytes; a typed kernel reduces.
struct mcclCopyBytes {};
template <typename T>
struct mcclIsCopy {
  static constexpr bool value = false;
};
template <>
struct mcclIsCopy<mcclCopyBytes> {
  static constexpr bool value = true;
};

template <typename T, typename Proto>
__device__ bool mcclRunProto(int tid, int nthreads) {
  if constexpr (mcclIsCopy<T>::value) {
    const struct mcclDevWork& w = mcclShmem.work;
    return mcclRunWork<uint8_t, FuncSum<uint8_t>, Proto, false>(tid, nthreads,
                                                                (int64_t)(w.count * mcclTypeSizeDev(w.dtype)));
  } else {
    return mcclRunReduce<T, Proto>(tid, nthreads);
  }
}

template <typename T>
__device__ __forceinline__ void mcclKernelMain(const struct mcclDevWork& work) {
  const int tid = threadIdx.x;
  const int nthreads = blockDim.x;
  mcclLoadWorkToShmem(&work, tid, nthreads);
  bool aborted =
      mcclWithProto(mcclShmem.work.proto, [&](auto proto) { return mcclRunProto<T, decltype(proto)>(tid, nthreads); });
  // Every thread votes: one aborted thread marks the launch aborted for the host.
  if (__syncthreads_or(aborted) && tid == 0 && mcclShmem.work.status != NULL) {
    st_relaxed_sys_global((uint32_t*)mcclShmem.work.status, (uint32_t)mcclDevStatusAborted);
  }
  if (mcclShmem.work.trace && tid == 0)
    printf("[%s block %d] done%s\n", mcclDevOpNameDev(mcclShmem.work.op), (int)blockIdx.x, aborted ? " (aborted)" : "");
}

// One kernel: `extern "C"` so the host's C code can name it for cudaGetFuncBySymbol.
#define MCCL_DEFINE_DEV_KERNEL(suffix, T)                                                                              \
  extern "C" __global__ void __launch_bounds__(MCCL_DEV_MAX_THREADS) mcclDevKernel_##suffix(struct mcclDevWork work) { \
    mcclKernelMain<T>(work);                                                                                           \
  }                                                                                                                    \
  MCCL_KERNEL_REGISTER(mcclDevKernel_##suffix)

#endif
