// Lab 07: the allreduce launch (NCCL's ncclLaunchKernel, as in lab 06): pick the kernel of the
// element type (one-shot's own, or the one of the ring and two-shot), size the grid for the
// algorithm, and launch it with the arguments packed as its one parameter through
// cudaGetFuncBySymbol + cuLaunchKernelEx as a dependent grid (lab 06's mcclDevLaunchDependent: it
// may start while the stream's previous grid finishes, and waits for it in its first statement). No
// host synchronisation: launches pipeline on the stream and can be captured in a CUDA graph.
#include "allreduce_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"

#define MCCL_AR_KERNEL(suffix)                                                    \
  extern void mcclAllReduceKernel_##suffix(struct mcclAllReduceArgs args);        \
  extern void mcclAllReduceOneShotKernel_##suffix(struct mcclAllReduceArgs args); \
  extern void mcclAllReduceOneShotSimpleKernel_##suffix(struct mcclAllReduceArgs args)
MCCL_AR_KERNEL(i8);
MCCL_AR_KERNEL(u8);
MCCL_AR_KERNEL(i32);
MCCL_AR_KERNEL(u32);
MCCL_AR_KERNEL(i64);
MCCL_AR_KERNEL(u64);
MCCL_AR_KERNEL(f16);
MCCL_AR_KERNEL(f32);
MCCL_AR_KERNEL(f64);
MCCL_AR_KERNEL(bf16);
static void (*const kernelSyms[mcclNumTypes])(struct mcclAllReduceArgs) = {
    mcclAllReduceKernel_i8,  mcclAllReduceKernel_u8,  mcclAllReduceKernel_i32, mcclAllReduceKernel_u32,
    mcclAllReduceKernel_i64, mcclAllReduceKernel_u64, mcclAllReduceKernel_f16, mcclAllReduceKernel_f32,
    mcclAllReduceKernel_f64, mcclAllReduceKernel_bf16};
static void (*const oneShotSyms[mcclNumTypes])(struct mcclAllReduceArgs) = {
    mcclAllReduceOneShotKernel_i8,  mcclAllReduceOneShotKernel_u8,   mcclAllReduceOneShotKernel_i32,
    mcclAllReduceOneShotKernel_u32, mcclAllReduceOneShotKernel_i64,  mcclAllReduceOneShotKernel_u64,
    mcclAllReduceOneShotKernel_f16, mcclAllReduceOneShotKernel_f32,  mcclAllReduceOneShotKernel_f64,
    mcclAllReduceOneShotKernel_bf16};
static void (*const oneShotSimpleSyms[mcclNumTypes])(struct mcclAllReduceArgs) = {
    mcclAllReduceOneShotSimpleKernel_i8,  mcclAllReduceOneShotSimpleKernel_u8,  mcclAllReduceOneShotSimpleKernel_i32,
    mcclAllReduceOneShotSimpleKernel_u32, mcclAllReduceOneShotSimpleKernel_i64, mcclAllReduceOneShotSimpleKernel_u64,
    mcclAllReduceOneShotSimpleKernel_f16, mcclAllReduceOneShotSimpleKernel_f32, mcclAllReduceOneShotSimpleKernel_f64,
    mcclAllReduceOneShotSimpleKernel_bf16};
_Static_assert(mcclInt8 == 0 && mcclBfloat16 == 9, "kernelSyms follows mcclDataType_t");

// Threads per block: SIMPLE's copies (the ring's, one-shot's) want many threads per channel (NCCL
// runs 512-640); LL and one-shot's LL lines move a line per thread and are latency bound. Blocks:
// the ring uses every channel; one-shot with LL one block per MCCL_ONESHOT_BLOCK_BYTES of input, at
// most the channel count; one-shot with SIMPLE and two-shot every channel.
#define MCCL_AR_THREADS_SIMPLE 512
#define MCCL_AR_THREADS_LL 256

mcclResult_t mcclLabAllReduceLaunch(mcclLabComm* comm, const struct mcclAllReduceArgs* args, cudaStream_t stream) {
  // EXERCISE(07.launch)
  struct mcclAllReduceArgs a = *args;
  if (a.chunkSteps == 0) a.chunkSteps = MCCL_DEV_DEFAULT_CHUNKSTEPS;
  if (a.sliceSteps == 0)
    a.sliceSteps = a.chunkSteps < MCCL_DEV_DEFAULT_SLICESTEPS ? a.chunkSteps : MCCL_DEV_DEFAULT_SLICESTEPS;
  int nblocks = a.nChannels, nthreads = MCCL_AR_THREADS_SIMPLE;
  size_t bytes = a.count * mcclTypeSize(a.dtype);
  if (a.algorithm == MCCL_ALGO_ONESHOT && a.proto == MCCL_PROTO_LL) {
    int64_t per = mcclParamOneShotBlockBytes();
    if (per < 16) per = 1024;
    int b = (int)((bytes + (size_t)per - 1) / (size_t)per);
    nblocks = b < 1 ? 1 : b < a.nChannels ? b : a.nChannels;
    nthreads = MCCL_AR_THREADS_LL;
  } else if (a.algorithm == MCCL_ALGO_RING && a.proto == MCCL_PROTO_LL) {
    nthreads = MCCL_AR_THREADS_LL;
  }
  // One-shot on 2 ranks or more has its own kernels, one per protocol; one rank takes the main
  // kernel's copy path.
  void (*const* syms)(struct mcclAllReduceArgs) = kernelSyms;
  if (a.algorithm == MCCL_ALGO_ONESHOT && a.nRanks > 1)
    syms = a.proto == MCCL_PROTO_LL ? oneShotSyms : oneShotSimpleSyms;
  cudaFunction_t fn;
  MCCLCHECK(mcclDevGetFunction(comm->cudaDev, (const void*)syms[a.dtype], &fn));
  void* params[] = {&a};
  MCCLCHECK(mcclDevLaunchDependent(fn, nblocks, nthreads, stream, params));
  return mcclSuccess;
  // END EXERCISE(07.launch)
}
