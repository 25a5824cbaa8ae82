// Lab 06 device code: the Primitives interface (NCCL 2.28.9 src/device/primitives.h). One object
// per block and operation: constructed by every thread of the block with the block's receive
// and/or send connection, it gives each thread a role, and its public ops move one chunk through
// the FIFOs. The protocol is the template argument: SIMPLE (prims_simple.cuh) moves data in FIFO
// slots announced by tail/head counters; LL (prims_ll.cuh) carries a flag with every 8 bytes; LL128
// (prims_ll128.cuh) one flag word per 128-byte line, over NVLink only.
//
// Simplifications against NCCL, each said once here: one receive and one send peer at most (NCCL's
// FanSymmetric<1>, what a ring and a point-to-point pair need); no direct (user-buffer) pointers,
// no network unpack, no NVLS or PAT modes; chunking (slices per chunk, steps per slice) is set at run
// time rather than as template arguments, so one kernel serves every configuration.
#ifndef MCCL_DEVICE_PRIMITIVES_CUH_
#define MCCL_DEVICE_PRIMITIVES_CUH_

#include "common.cuh"
#include "reduce_kernel.cuh"

struct ProtoSimple {
  static constexpr int Id = MCCL_PROTO_SIMPLE;
};
struct ProtoLL {
  static constexpr int Id = MCCL_PROTO_LL;
};
struct ProtoLL128 {
  static constexpr int Id = MCCL_PROTO_LL128;
};

template <typename T, typename RedOp, typename Proto>
class Primitives;

// A work's protocol number as a type: f(ProtoLL()), f(ProtoLL128()) or f(ProtoSimple()), so one generic
// lambda instantiates a kernel's loop for each protocol.
template <typename F>
__device__ __forceinline__ bool mcclWithProto(int proto, F f) {
  if (proto == MCCL_PROTO_LL) return f(ProtoLL());
  if (proto == MCCL_PROTO_LL128) return f(ProtoLL128());
  return f(ProtoSimple());
}

// Where an op's source or destination is (NCCL's Input/Output indices into the user buffers);
// -1 in genericOp's template arguments means "none".
enum { mcclPrimsInput = 0, mcclPrimsOutput = 1 };

#include "prims_simple.cuh"
#include "prims_ll.cuh"
#include "prims_ll128.cuh"

#endif
