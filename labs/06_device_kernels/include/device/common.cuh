// Lab 06 device code: what every kernel of the lab shares (NCCL 2.28.9 src/device/common.h).
// Device headers (.cuh) are included only by .cu files, which see the portability header
// common/include/mccl_device.h on both backends. A .cu that includes this file gets its own
// per-block shared struct, mcclShmem: include it once per kernel translation unit.
#ifndef MCCL_DEVICE_COMMON_CUH_
#define MCCL_DEVICE_COMMON_CUH_

#include <stdint.h>
#include "mccl_conn.h"
#include "mccl_prims.h"

// A waiter reads the abort flag once every this many spins on a peer's counter (NCCL's
// NCCL_SPINS_BEFORE_CHECK_ABORT): often enough to leave within microseconds, rarely enough that
// the host-mapped read costs nothing while data flows.
#define MCCL_SPINS_BEFORE_CHECK_ABORT 10000

// Named barriers a Primitives object uses for its threads (NCCL's 15-group and 14-group; barrier 0
// is __syncthreads). A block may run several Primitives at once, each on its own warps with its own
// group number (lab 07's send/receive kernel runs a send group and a receive group side by side):
// group g's whole-group barrier is MCCL_BAR_GROUP - g and, when one warp of a sender stays out of the
// copy, its workers' barrier is MCCL_BAR_GROUP - g - 1, so a sending group takes two numbers.
#define MCCL_BAR_GROUP 15
#define MCCL_MAX_GROUPS 4

// Pointers the role threads of a Primitives object hand to the workers for one slice: srcs[0] is the
// user input when the op reads one, then the receive FIFO slot; dsts[0] the user output when the op
// writes one, then the send FIFO slot (NCCL's ncclShmemGroup srcs/dsts). One per group.
struct mcclShmemGroup {
  void* srcs[2];
  void* dsts[2];
};

// The block's shared memory (NCCL's ncclShmemData): the work, loaded by all threads in parallel
// at kernel start, and the slice pointers. "Shmem" here is CUDA
// shared memory (on-chip, one per block), not host shared memory as in lab 04's /dev/shm.
struct mcclShmemData {
  struct mcclDevWork work;
  struct mcclShmemGroup groups[MCCL_MAX_GROUPS];
};

MCCL_SHMEM_DEFINE(struct mcclShmemData, mcclShmem);

// The first statement of a kernel launched as a dependent grid (mcclDevLaunchDependent, lab 07's
// launches): wait until the stream's previous grid has finished and its memory is visible (NCCL's
// symmetric kernels start with cudaGridDependencySynchronize), then let the stream's next grid launch
// at once: its blocks become resident and wait in their own first statement, so its launch cost overlaps
// this kernel. Latency-bound calls gain the most, since their kernels are short beside a launch (see
// docs/results).
__device__ __forceinline__ void mcclDependentGridBegin() {
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
}

// Copy `bytes` (a multiple of 4) from a kernel's parameter or device memory into shared memory with
// every thread taking a 4-byte word (NCCL loads ncclShmem with the block's threads in parallel rather
// than with one thread). Every kernel that keeps its launch in shared memory loads it through here;
// a barrier must follow before anyone reads it.
__device__ __forceinline__ void mcclCopyToShmem(void* dst, const void* src, int bytes, int tid, int nthreads) {
  const uint32_t* s = (const uint32_t*)src;
  uint32_t* d = (uint32_t*)dst;
  for (int i = tid; i < bytes / (int)sizeof(uint32_t); i += nthreads) d[i] = s[i];
}
__device__ __forceinline__ void mcclLoadWorkToShmem(const struct mcclDevWork* work, int tid, int nthreads) {
  static_assert(sizeof(struct mcclDevWork) % sizeof(uint32_t) == 0, "mcclDevWork is copied in 4-byte words");
  mcclCopyToShmem(&mcclShmem.work, work, (int)sizeof(struct mcclDevWork), tid, nthreads);
  __syncthreads();
}

// A waiter's state between abort checks: spins since the last read of the flag, and when that was.
struct mcclSpin {
  int n = 0;
  uint64_t lastNs = 0;
};
// Besides every MCCL_SPINS_BEFORE_CHECK_ABORT spins, the flag is read once MCCL_ABORT_CHECK_NS of
// spinning have passed (the clock is read every MCCL_SPINS_PER_CLOCK_READ spins). NCCL counts spins
// only; here a spin on a host-mapped SHM FIFO is a PCIe round trip, so a count alone can take longer than
// lab 06's 10 ms bound for an abort to end a kernel.
#define MCCL_ABORT_CHECK_NS 1000000ull
#define MCCL_SPINS_PER_CLOCK_READ 256

// A waiter's abort check (NCCL's checkAbort): read the host-mapped flag every
// MCCL_SPINS_BEFORE_CHECK_ABORT spins or every MCCL_ABORT_CHECK_NS of spinning; once set, remember
// it in the thread's flags. The block agrees on it at its next barrier (barrier_red_or), so no
// thread waits for one that left.
// mcclCheckAbortAt takes the flag's address from the caller: lab 07's one-shot reads it from the
// kernel's parameter, before any barrier could publish mcclShmem.work.
__device__ __forceinline__ bool mcclCheckAbortAt(int& flags, int abortedBit, struct mcclSpin& spin,
                                                 volatile uint32_t* flag) {
  if (flags & abortedBit) return true;
  mcclSpinHint();
  if (++spin.n < MCCL_SPINS_BEFORE_CHECK_ABORT) {
    if (spin.n % MCCL_SPINS_PER_CLOCK_READ) return false;
    uint64_t now = mcclGlobalTimerNs();
    if (spin.lastNs == 0) spin.lastNs = now;
    if (now - spin.lastNs < MCCL_ABORT_CHECK_NS) return false;
  }
  spin.n = 0;
  spin.lastNs = mcclGlobalTimerNs();
  if (flag != NULL && ld_volatile_global((uint32_t*)flag) != 0) {
    flags |= abortedBit;
    return true;
  }
  return false;
}
__device__ __forceinline__ bool mcclCheckAbort(int& flags, int abortedBit, struct mcclSpin& spin) {
  return mcclCheckAbortAt(flags, abortedBit, spin, mcclShmem.work.abortFlag);
}

// Signed distance between two 64-bit step counters: correct across the wrap at 2^64 as long as the
// counters are within 2^63 of each other (they are within a few MCCL_STEPS).
__device__ __forceinline__ int64_t mcclStepDiff(uint64_t a, uint64_t b) {
  return (int64_t)(a - b);
}

template <typename X>
__device__ __forceinline__ X mcclDivUp(X a, X b) {
  return (a + b - 1) / b;
}

// Part `index` of [from, to) cut into `parts` equal parts of whole multiples of `quantum` elements:
// the last part shorter, parts past the end empty (NCCL's channel and part bounds). Every kernel cuts
// its work over blocks with this one helper: a channel's part of a ring collective (512-byte
// quanta, so a rank moving bytes and one reducing typed elements cut at the same places), a block's
// part of a symmetric kernel (16-byte packs), a part of a point-to-point transfer (4 KiB).
__device__ __forceinline__ void mcclEvenPart(int64_t from, int64_t to, int64_t parts, int64_t index, int64_t quantum,
                                             int64_t& lo, int64_t& hi) {
  const int64_t per = mcclDivUp(mcclDivUp(to - from, parts), quantum) * quantum;
  lo = from + index * per < to ? from + index * per : to;
  hi = lo + per < to ? lo + per : to;
}

// Round a step counter up to a multiple of a power of two, modulo 2^64 (so it works near the wrap).
__device__ __forceinline__ uint64_t mcclRoundUpSteps(uint64_t step, uint64_t pow2) {
  return (step + pow2 - 1) & ~(pow2 - 1);
}

// Device twins of the host's mcclTypeSize / mcclDevOpName (host functions cannot be called here).
__device__ __forceinline__ int mcclTypeSizeDev(int dtype) {
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
    default:
      return 8;
  }
}
__device__ __forceinline__ const char* mcclDevOpNameDev(int op) {
  switch (op) {
    case mcclDevOpNone:
      return "kernel";
    case mcclDevOpSend:
      return "send";
    case mcclDevOpRecv:
      return "recv";
    case mcclDevOpCopySend:
      return "copySend";
    case mcclDevOpRecvCopySend:
      return "recvCopySend";
    case mcclDevOpRecvReduceSend:
      return "recvReduceSend";
    case mcclDevOpRecvReduceCopy:
      return "recvReduceCopy";
    default:
      return "recvReduceCopySend";
  }
}

#endif
