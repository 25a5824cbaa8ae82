// The sim's <nccl_device.h> (sim/include is on the include path of device code compiled for the sim only):
// NCCL 2.28's own device headers, read as host C++ so that a program written against them runs its kernels
// on the sim's host threads, unmodified. NCCL guards its device code with `#if __CUDACC__`; here __CUDACC__ is
// defined while NCCL's headers are read, and only then, after the host headers they include are in (nccl.h,
// cuda.h, and the sim's <cuda/atomic>). What that device code needs beyond common/include/mccl_device.h:
//   - GIN's proxy backend is left out (NCCL_GIN_PROXY_ENABLE 0, NCCL's own switch; minccl refuses GIN), and
//     GDAKI is off by NCCL's own test (no __CUDA_ARCH__);
//   - __shared__ in two functions of coop.h (ncclCoopBcast's stash) reads as `static thread_local` so the
//     header compiles; the sim cannot give a function-local variable per-block storage, so the names that
//     would use it, or NCCL's PTX lane id (%laneid) that the sim has no counterpart for, are poisoned after
//     the include: a program that names them on the sim fails to compile, naming them. The sim serves
//     ncclCoopCta and ncclCoopWarpSpan; every barrier, pointer and team function takes any of them.
//   - NCCL's headers compile with -Wall -Wextra, so the warnings their device code raises as host code (unused
//     parameters of stubs the sim never calls) are silenced around them.
// Each row is in docs/device-contract.md ("NCCL's device headers on the sim").
#ifndef MCCL_SIM_NCCL_DEVICE_H_
#define MCCL_SIM_NCCL_DEVICE_H_

#if defined(__CUDACC__)
#error "sim/include/nccl_device.h is the sim's: a CUDA compiler reads NCCL's own"
#endif

#include <cuda.h>
#include <cuda/atomic>
#include <nccl.h>

#ifndef NCCL_GIN_PROXY_ENABLE
#define NCCL_GIN_PROXY_ENABLE 0
#endif

#pragma push_macro("__shared__")
#undef __shared__
#define __shared__ static thread_local
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define __CUDACC__ 1
#include_next <nccl_device.h>
#undef __CUDACC__
#pragma GCC diagnostic pop
#pragma pop_macro("__shared__")

// Not on the sim (above): NCCL builds these on the warp's lane id, warp shuffles and votes, or per-block
// function-local storage.
#pragma GCC poison ncclCoopTile ncclCoopWarp ncclCoopThread ncclCoopLanes ncclCoopCoalesced ncclCoopBcast
#pragma GCC poison ncclFindWindow

#endif
