// Lab 07 device code: what the generic kernel's work functions share (NCCL 2.28.9 src/device/common.h):
// the block's copy of its launch in shared memory (NCCL's ncclShmem), the one loader that fills it, and
// the symmetric algorithms' sequence numbers and barriers. Included by every lab 07 .cu file through
// dev_kernels.cuh; kernels per element type are defined in kernel_<type>.cu.
#ifndef MCCL_DEV_COMMON_CUH_
#define MCCL_DEV_COMMON_CUH_

#include "device/primitives.cuh"
#include "mccl_dev_work.h"

// A work function: one per collective x protocol x operation (NCCL's ncclDevFunc_* that src/device/generate.py
// writes, reached from ncclDevFuncTable), not inlined into the kernel. Each gets registers of its own, so one
// protocol's loop keeps its values in registers whatever the others' need: inlined together into the generic
// kernel, under the 96 registers a 640-thread block allows, every ring's loops spilled to local memory.
#define MCCL_WORK_FN __device__ __noinline__

// The generic kernel's launch, copied into shared memory by the block's threads: the header, the works
// (collective ones, then point-to-point), the communicator's device half, and the current work's
// state. Lab 06's mcclShmem.work carries what its Primitives read: the abort flag and the trace switch.
struct mcclKernelShmem {
  struct mcclDevKernelArgs args;
  struct mcclKernelComm comm;
  uint64_t works[(MCCL_DEV_ARGS_BYTES - sizeof(struct mcclDevKernelArgs)) / 8];
  uint64_t redOpArg;                   // the current work's operation argument (a device scalar, loaded)
  uint64_t seq;                        // the symmetric calls before this launch (this block's counter)
  char* peerSend[MCCL_SYM_MAX_RANKS];  // two-shot: each rank's sendbuff as mapped here
  char* peerRecv[MCCL_SYM_MAX_RANKS];  // two-shot: each rank's recvbuff as mapped here
};
MCCL_SHMEM_DEFINE(struct mcclKernelShmem, kShmem);

__device__ __forceinline__ const struct mcclDevWorkColl* mcclCollWorks() {
  return (const struct mcclDevWorkColl*)kShmem.works;
}
__device__ __forceinline__ const struct mcclDevWorkP2p* mcclP2pWorks() {
  return (const struct mcclDevWorkP2p*)(mcclCollWorks() + kShmem.args.nColl);
}

// The one loader: the launch's header, its works and the communicator's device half into shared memory
// (lab 06's mcclCopyToShmem, every thread a word), then the fields lab 06's Primitives read.
__device__ __forceinline__ void mcclLoadKernelArgs(const struct mcclDevKernelArgsStorage& p, int tid, int nthreads) {
  static_assert(sizeof(struct mcclDevKernelArgs) % 16 == 0 && sizeof(struct mcclDevWorkColl) % 8 == 0 &&
                    sizeof(struct mcclDevWorkP2p) % 8 == 0 && sizeof(struct mcclKernelComm) % 8 == 0,
                "copied in 4-byte words, works 8-byte aligned");
  const int workBytes =
      p.args.nColl * (int)sizeof(struct mcclDevWorkColl) + p.args.nP2p * (int)sizeof(struct mcclDevWorkP2p);
  mcclCopyToShmem(&kShmem.args, &p.args, (int)sizeof(struct mcclDevKernelArgs), tid, nthreads);
  mcclCopyToShmem(kShmem.works, p.works, workBytes, tid, nthreads);
  mcclCopyToShmem(&kShmem.comm, p.args.comm, (int)sizeof(struct mcclKernelComm), tid, nthreads);
  if (tid == 0) {
    mcclShmem.work.abortFlag = p.args.abortFlag;
    mcclShmem.work.trace = p.args.trace;
    mcclShmem.work.op = mcclDevOpNone;
  }
  __syncthreads();
}

// The operation argument of a work: its redOpArg, or, for a PreMulSum scalar in device memory
// (mcclScalarDevice), the scalar's bits read now (NCCL loads it when the work starts). The whole block
// calls it (a barrier publishes the value).
template <typename T>
__device__ __forceinline__ uint64_t mcclWorkRedOpArg(const struct mcclDevWorkColl& w, int tid) {
  if (!w.redOpArgIsPtr) return w.redOpArg;
  if (tid == 0) {
    uint64_t bits = 0;
    memcpy(&bits, (const void*)(uintptr_t)w.redOpArg, sizeof(T));
    kShmem.redOpArg = bits;
  }
  __syncthreads();
  const uint64_t arg = kShmem.redOpArg;
  __syncthreads();  // no thread rewrites it for the next work before every thread has read it
  return arg;
}

// ---- symmetric kernels: sequence numbers and barriers --------------------------------------------
// Every block keeps the number of symmetric calls in device memory (a CUDA graph replays the same
// arguments, so the host cannot pass it); all blocks' counters stay equal, so every block of every rank
// agrees on a call's number. A generic launch reads its block's counter once (the base); its two-shot
// works are calls base + 1, base + 2, ... (seqOffset), whichever channels run them, and at its end every
// block, and block 0 for the blocks the launch does not have, advances its counter by the launch's calls.
// A one-shot launch is one call: every thread reads the counter beside its first input loads, so the two
// latencies overlap, and advances it after its closing barrier.
__device__ __forceinline__ void mcclSymSeqBegin(int tid) {
  if (tid == 0) kShmem.seq = kShmem.args.seqCounters[blockIdx.x];
  __syncthreads();
}
// Store the call's number as this block's counter (block 0 also those of the blocks not launched);
// every thread of the block must have read the counter before (a barrier).
__device__ __forceinline__ void mcclSymSeqStore(uint64_t* c, uint64_t seq, int tid, int nthreads) {
  if (tid == 0) c[blockIdx.x] = seq;
  if (blockIdx.x == 0)
    for (int b = gridDim.x + tid; b < MCCL_SIGNAL_MAX_BLOCKS; b += nthreads) c[b] = seq;
}
__device__ __forceinline__ void mcclSymSeqEnd(int tid, int nthreads) {
  __syncthreads();
  mcclSymSeqStore(kShmem.args.seqCounters, kShmem.seq + (uint64_t)kShmem.args.nSym, tid, nthreads);
}

__device__ __forceinline__ struct mcclSymSignals* mcclSymSignalsOf(char* const* signalPeers, int rank) {
  return (struct mcclSymSignals*)signalPeers[rank];
}

// A barrier of this block with the same block of every rank: thread p < nranks stores seq into
// rank p's slot for us (p's mapped signal area), then waits (acquire) until our slot for p has reached
// seq. As NCCL's LSA barrier (src/include/nccl_device/impl/lsa_barrier__funcs.h, used by its
// RSxLD_AGxST kernel): the arrive at the start is a relaxed store with no fence (this block has written
// nothing yet; what earlier grids wrote is visible once cudaGridDependencySynchronize returns, and the
// previous call's accesses ended at its depart), and the depart publishes the block's stores into the
// peers' buffers with one system-scope fence after syncthreads, then a relaxed store.
template <bool Arrive>
__device__ bool mcclSymBarrier(uint64_t seq, int tid) {
  const struct mcclDevKernelArgs& a = kShmem.args;
  int flags = 0;
  struct mcclSpin spins;
  __syncthreads();
  if (tid < a.nRanks) {
    struct mcclSymSignals* theirs = mcclSymSignalsOf(a.signalPeers, tid);
    uint64_t* slot = Arrive ? &theirs->arrive[blockIdx.x][a.rank] : &theirs->depart[blockIdx.x][a.rank];
    if (!Arrive) fence_acq_rel_sys();
    st_relaxed_sys_global(slot, seq);
    struct mcclSymSignals* mine = mcclSymSignalsOf(a.signalPeers, a.rank);
    uint64_t* wait = Arrive ? &mine->arrive[blockIdx.x][tid] : &mine->depart[blockIdx.x][tid];
    while (ld_acquire_sys_global(wait) < seq) {
      if (mcclCheckAbort(flags, 1, spins)) break;
    }
  }
  return __syncthreads_or(flags) != 0;
}

// A block that agreed it was aborted tells the host (the communicator's status word).
__device__ __forceinline__ void mcclReportAbort(uint32_t* status, bool aborted, int tid) {
  if (aborted && tid == 0 && status != NULL) st_relaxed_sys_global(status, (uint32_t)mcclDevStatusAborted);
}

#endif
