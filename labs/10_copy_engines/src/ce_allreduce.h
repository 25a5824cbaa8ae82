// Lab 10, private: what the copy-engine-assisted allreduce's host code (ce_allreduce.c) and its reduce kernel
// (ce_reduce.cu) share. Compiles as C11 and as CUDA C++.
#ifndef MCCL_CE_ALLREDUCE_H_
#define MCCL_CE_ALLREDUCE_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "mccl_dev_work.h"
#include "mccl_result.h"

// Threads of a reduce block: elementwise work, many loads in flight per SM.
#define MCCL_CE_AR_THREADS 512

// The reduce kernel's argument. The buffer is cut in rounds of nRanks chunks: round r's chunk p (at
// roundOffset(r) + p * roundChunk(r)) is owned by rank p, which reduces it. The engines put every peer's chunk p
// into the owner's output at the peer's own chunk position; the owner's kernel sums them with its own input into
// its chunk position; the engines carry that back to every peer's same position.
struct mcclCeArArgs {
  char* recv;                                // this rank's output (and, until reduced, the peers' chunks)
  const char* send;                          // this rank's input
  const char* peerSend[MCCL_SYM_MAX_RANKS];  // every rank's input as mapped here (the tail)
  char* signals[MCCL_SYM_MAX_RANKS];         // every rank's signal area as mapped here (struct mcclSymSignals)
  uint32_t* abortFlag;                       // device view of the communicator's host-mapped abort flag
  uint64_t redOpArg;                         // the operation's argument
  uint64_t base;                             // the flags' value of round 0 (round r: base + r)
  uint64_t chunk;                            // bytes of each chunk of the full rounds
  uint64_t lastChunk;                        // bytes of each chunk of the last, shorter round (0: none)
  uint64_t tailOffset, tailBytes;            // the remainder after the rounds (< nRanks elements)
  int32_t nFull;                             // full rounds
  int32_t redOp;                             // enum mcclDevRedOp
  int32_t rank, nRanks;
};

#ifdef __cplusplus
extern "C" {
#endif
#ifndef __CUDACC__
struct mcclLabComm;
struct mcclLabWindow;
// ce_coll.c: where rank `peer`'s copy of [ptr, ptr + bytes) of window w is mapped here (mcclInvalidUsage,
// naming `call`, for a range outside the window).
mcclResult_t mcclCePeerAddr(const struct mcclLabComm* comm, const char* call, const struct mcclLabWindow* w,
                            const void* ptr, size_t bytes, int peer, void** out);
// ce_allreduce.c: after an abort, the assisted allreduce's waits released from `stream` (mcclCeRelease).
mcclResult_t mcclCeReleaseAllReduce(struct mcclLabComm* comm, cudaStream_t stream);
#endif
#define MCCL_CE_AR_KERNEL(suffix) void mcclCeReduceKernel_##suffix(struct mcclCeArArgs args);
#ifndef __CUDACC__
MCCL_CE_AR_KERNEL(i8)
MCCL_CE_AR_KERNEL(u8)
MCCL_CE_AR_KERNEL(i32)
MCCL_CE_AR_KERNEL(u32)
MCCL_CE_AR_KERNEL(i64)
MCCL_CE_AR_KERNEL(u64)
MCCL_CE_AR_KERNEL(f16)
MCCL_CE_AR_KERNEL(f32)
MCCL_CE_AR_KERNEL(f64)
MCCL_CE_AR_KERNEL(bf16)
MCCL_CE_AR_KERNEL(f8e4m3)
MCCL_CE_AR_KERNEL(f8e5m2)
#endif
#undef MCCL_CE_AR_KERNEL
#ifdef __cplusplus
}
#endif

#endif
