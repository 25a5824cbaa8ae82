// Lab 09: what the host launchers (launch.c, C11) and the kernels (kernels.cu) share: the one argument every
// kernel of the lab takes by value, and the kernels' symbols.
#ifndef MCCL_DEV_API_KERNELS_H_
#define MCCL_DEV_API_KERNELS_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_dev_api.h"

// Threads per block of the lab's collective kernels, and the most the RMSNorm's block reduction holds.
#define MCCL_DEV_API_THREADS 128
#define MCCL_DEV_API_MAX_THREADS 1024

struct mcclDevApiArgs {
  mcclDevComm comm;      // by value, as NCCL's kernels take ncclDevComm
  mcclWindow_t sendWin;  // the input's window (x for the RMSNorm)
  mcclWindow_t recvWin;  // the output's window (two-shot, the tests' windows)
  size_t sendOffset;     // bytes
  size_t recvOffset;     // bytes
  void* recv;            // a plain output (one-shot, allgather, RMSNorm)
  const void* in;        // the unfused RMSNorm's input
  const void* weight;    // the RMSNorm's weight
  size_t count;          // elements (allgather: bytes)
  int rows, hidden;      // the RMSNorm's shape
  float eps;             // the RMSNorm's epsilon
  int iters, mode;       // the barrier test's loop
  uint32_t* errors;      // the tests' mismatch counter
};

#ifdef __cplusplus
extern "C" {
#endif
// The host's copy of a live device window, whatever its communicator, and this rank's buffer at the address
// it was registered with (devcomm.c); mcclInvalidArgument if none.
mcclResult_t mcclDevWindowHostOf(mcclWindow_t devWin, struct mcclWindow_vidmem* host, void** userBuf);
#ifdef __cplusplus
}
#endif

// The kernels' host symbols, for the C launchers (the .cu file defines them as extern "C" __global__).
#ifndef __cplusplus
#define MCCL_DEV_API_KERNEL(name) void name(struct mcclDevApiArgs args)
MCCL_DEV_API_KERNEL(mcclDevOneShotKernel_f32);
MCCL_DEV_API_KERNEL(mcclDevOneShotKernel_bf16);
MCCL_DEV_API_KERNEL(mcclDevTwoShotKernel_f32);
MCCL_DEV_API_KERNEL(mcclDevTwoShotKernel_bf16);
MCCL_DEV_API_KERNEL(mcclDevAllGatherKernel);
MCCL_DEV_API_KERNEL(mcclDevAllReduceRmsNormKernel_f32);
MCCL_DEV_API_KERNEL(mcclDevAllReduceRmsNormKernel_bf16);
MCCL_DEV_API_KERNEL(mcclDevRmsNormKernel_f32);
MCCL_DEV_API_KERNEL(mcclDevRmsNormKernel_bf16);
MCCL_DEV_API_KERNEL(mcclDevBarrierTestKernel);
MCCL_DEV_API_KERNEL(mcclDevPeerPointerTestKernel);
#undef MCCL_DEV_API_KERNEL
#endif

#endif
