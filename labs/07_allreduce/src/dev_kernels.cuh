// Lab 07 device code: the kernels a plan launches (NCCL 2.28.9 src/device/common.h ncclKernelMain and
// its ncclDevFuncTable dispatch; src/device/symmetric/kernel.cuh). Per element type (kernel_<type>.cu):
//   mcclGenericKernel_<type>       the generic kernel: its launch's collective works, each on channels
//                                   of its own, dispatched on (function, algorithm, protocol) to its run
//                                   function (all_reduce.cuh, collectives.cuh), then its point-to-point
//                                   works (sendrecv.cuh);
//   mcclOneShotLLKernel_<type>      one-shot AllReduce works with LL lines (oneshot.cuh);
//   mcclOneShotSimpleKernel_<type>  one-shot AllReduce works with SIMPLE on 2 ranks (oneshot.cuh).
// Work items that reduce use the kernel's type; Broadcast, AllGather and point-to-point move bytes, so
// every type's generic kernel runs them and a group's allreduce and allgather share one launch. The
// same source compiles with nvcc for the GPU and with g++ for the sim.
#ifndef MCCL_DEV_KERNELS_CUH_
#define MCCL_DEV_KERNELS_CUH_

#include "collectives.cuh"
#include "oneshot.cuh"
#include "sendrecv.cuh"

// This block's collective work (NCCL's RunWorkColl dispatch): the kind of work chooses the run function,
// its operation the functor (chosen at run time among the kernel's); its argument is read first (a
// device scalar through a barrier, so the whole block calls this). The ring runs on the work's warps; two-
// shot and one rank's copy on the whole block. Returns the block's agreed abort.
template <typename T>
__device__ __forceinline__ bool mcclRunWorkColl(const struct mcclDevWorkColl& w, int tid) {
  // The work's warps, at most the block's (the sim may run a block with fewer threads than asked).
  const int nthreads = w.nWarps * WARP_SIZE < (int)blockDim.x ? w.nWarps * WARP_SIZE : (int)blockDim.x;
  bool aborted = false;
  if (w.func == mcclFuncBroadcast || w.func == mcclFuncAllGather) {
    aborted = mcclRunCollRing<uint8_t, FuncSum<uint8_t>, false>(w, 0, tid, nthreads);
  } else {
    const uint64_t arg = mcclWorkRedOpArg<T>(w, tid);
    aborted = mcclWithDevRedOp<T>(w.redOp, [&](auto redOp) {
      typedef decltype(redOp) RedOp;
      if (w.func == mcclFuncAllReduce) return mcclRunAllReduce<T, RedOp>(w, arg, tid, nthreads);
      return mcclRunCollRing<T, RedOp, true>(w, arg, tid, nthreads);
    });
  }
  return __syncthreads_or(aborted) != 0;
}

// The generic kernel's body (NCCL's ncclKernelMain): PDL's wait, the launch into shared memory, then the
// collective work whose channels include this block (each runs on channels of its own, as NCCL assigns
// works to channels: no block runs two, so every work's code is laid out once, straight, and the compiler
// keeps each copy loop in registers; a loop over works of every kind spilled inside them), then every
// point-to-point work in order (one code path, on the point-to-point channels' blocks, and the copies to
// oneself on the blocks launched after the channels'). A block that saw
// the abort flag stops and tells the host; the symmetric counters advance by the launch's calls.
template <typename T>
__device__ __forceinline__ void mcclKernelMain(const struct mcclDevKernelArgsStorage& p) {
  const int tid = threadIdx.x;
  const int nthreads = blockDim.x;
  mcclDependentGridBegin();  // mcclLabLaunchPlan launches it as a dependent grid
  mcclLoadKernelArgs(p, tid, nthreads);
  // The symmetric counters are the channels' (a copy block has none, and no symmetric work).
  const int nSym = (int)blockIdx.x < kShmem.comm.nChannels ? kShmem.args.nSym : 0;
  if (nSym > 0) mcclSymSeqBegin(tid);
  bool aborted = false;
  int mine = -1;
  for (int i = 0; i < kShmem.args.nColl; i++) {
    const struct mcclDevWorkColl& w = mcclCollWorks()[i];
    if ((int)blockIdx.x >= w.channelLo && (int)blockIdx.x < w.channelLo + w.nChannels) mine = i;
  }
  if (mine >= 0) aborted = mcclRunWorkColl<T>(mcclCollWorks()[mine], tid);
  if ((int)blockIdx.x < kShmem.comm.nP2pChannels || (int)blockIdx.x >= kShmem.comm.nChannels)  // or a copy block
    for (int k = 0; k < kShmem.args.nP2p && !aborted; k++)
      aborted = __syncthreads_or(mcclP2pRunWork(mcclP2pWorks()[k], tid, nthreads)) != 0;
  if (nSym > 0) mcclSymSeqEnd(tid, nthreads);
  mcclReportAbort(kShmem.args.status, aborted, tid);
}

// The three kernels of one element type. Their parameter is read in place (__grid_constant__): its
// address is taken, and a copy of 4 KiB per thread would be the alternative.
#define MCCL_DEFINE_KERNELS(suffix, T)                                                                 \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS)                                    \
      mcclGenericKernel_##suffix(const __grid_constant__ struct mcclDevKernelArgsStorage args) {       \
    mcclKernelMain<T>(args);                                                                           \
  }                                                                                                    \
  MCCL_KERNEL_REGISTER(mcclGenericKernel_##suffix);                                                    \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS)                                    \
      mcclOneShotLLKernel_##suffix(const __grid_constant__ struct mcclDevKernelArgsStorage args) {     \
    mcclOneShotMain<T, false>(args, threadIdx.x, blockDim.x);                                          \
  }                                                                                                    \
  MCCL_KERNEL_REGISTER(mcclOneShotLLKernel_##suffix);                                                  \
  extern "C" __global__ void __launch_bounds__(MCCL_AR_MAX_THREADS)                                    \
      mcclOneShotSimpleKernel_##suffix(const __grid_constant__ struct mcclDevKernelArgsStorage args) { \
    mcclOneShotMain<T, true>(args, threadIdx.x, blockDim.x);                                           \
  }                                                                                                    \
  MCCL_KERNEL_REGISTER(mcclOneShotSimpleKernel_##suffix)

#endif
