// Lab 09 device code: the device API as kernels use it (NCCL 2.28.9 src/include/nccl_device/: coop.h,
// core.h with impl/core__funcs.h, lsa_barrier.h with impl/lsa_barrier__funcs.h). For .cu files only, which
// see common/include/mccl_device.h on both backends: the same source runs on the GPU and, as host threads,
// on the sim.
#ifndef MCCL_DEV_API_CUH_
#define MCCL_DEV_API_CUH_

#include <stdint.h>
#include "mccl_dev_api.h"

// libcu++'s memory orders and atomic_ref: the toolkit's on the GPU, the sim's own (sim/include/cuda/atomic) on
// the sim, whose orders are GCC's __ATOMIC_* values, so a session's order reaches the host's atomics unchanged.
#include <cuda/atomic>
#if defined(__CUDACC__)
#define MCCL_DEVICE_INLINE __device__ __forceinline__
#else
#define MCCL_DEVICE_INLINE inline
#endif

// ---- memory orders -------------------------------------------------------------------------------
// A barrier's arrive is a store and its wait a load: each takes the half of the caller's order that a store
// (release) or a load (acquire) can carry, as NCCL's releaseOrderOf / acquireOrderOf.
MCCL_DEVICE_INLINE cuda::memory_order mcclReleaseOrderOf(cuda::memory_order o) {
  return o == cuda::memory_order_release || o == cuda::memory_order_acq_rel ? cuda::memory_order_release
         : o == cuda::memory_order_seq_cst                                  ? cuda::memory_order_seq_cst
                                                                            : cuda::memory_order_relaxed;
}
MCCL_DEVICE_INLINE cuda::memory_order mcclAcquireOrderOf(cuda::memory_order o) {
  return o == cuda::memory_order_acquire || o == cuda::memory_order_acq_rel || o == cuda::memory_order_consume
             ? cuda::memory_order_acquire
         : o == cuda::memory_order_seq_cst ? cuda::memory_order_seq_cst
                                           : cuda::memory_order_relaxed;
}

// System-scope atomic 32-bit load and store with a given order: peers on other GPUs (other processes on
// the sim) read and write these words.
MCCL_DEVICE_INLINE uint32_t mcclAtomicLoad(uint32_t* p, cuda::memory_order o) {
#if defined(__CUDACC__)
  return cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).load(o);
#else
  return __atomic_load_n(p, (int)o);
#endif
}
MCCL_DEVICE_INLINE void mcclAtomicStore(uint32_t* p, uint32_t v, cuda::memory_order o) {
#if defined(__CUDACC__)
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).store(v, o);
#else
  __atomic_store_n(p, v, (int)o);
#endif
}

// ---- cooperative groups (NCCL's ncclCoop*) -------------------------------------------------------
// The threads that perform one operation together: thread_rank(), size(), sync(). A kernel's blocks are
// one-dimensional here, so a lane is threadIdx.x % 32.
MCCL_DEVICE_INLINE int mcclLane() {
  return (int)(threadIdx.x % WARP_SIZE);
}

// An aligned power-of-two group of lanes of one warp (a warp for 32, a thread for 1).
template <int nThreadsPow2>
struct mcclCoopTile {
  static_assert(nThreadsPow2 >= 1 && nThreadsPow2 <= 32 && (nThreadsPow2 & (nThreadsPow2 - 1)) == 0,
                "a tile is a power of two of at most 32 lanes");
  MCCL_DEVICE_INLINE int thread_rank() const { return mcclLane() % nThreadsPow2; }
  MCCL_DEVICE_INLINE constexpr int size() const { return nThreadsPow2; }
  MCCL_DEVICE_INLINE constexpr int num_threads() const { return nThreadsPow2; }
  MCCL_DEVICE_INLINE uint32_t laneMask() const {
    return (0xffffffffu >> (32 - nThreadsPow2)) << (mcclLane() & -nThreadsPow2);
  }
  MCCL_DEVICE_INLINE void sync() {
    if (nThreadsPow2 > 1) __syncwarp(laneMask());
  }
};
typedef mcclCoopTile<1> mcclCoopThread;
typedef mcclCoopTile<32> mcclCoopWarp;

// Every thread of the block.
struct mcclCoopCta {
  MCCL_DEVICE_INLINE int thread_rank() const { return (int)threadIdx.x; }
  MCCL_DEVICE_INLINE int size() const { return (int)blockDim.x; }
  MCCL_DEVICE_INLINE int num_threads() const { return (int)blockDim.x; }
  MCCL_DEVICE_INLINE void sync() { __syncthreads(); }
};

// ---- teams seen from the device communicator -----------------------------------------------------
// Tags that name the communicator's own teams in a session's constructor (NCCL's ncclTeamTag*).
struct mcclTeamTagWorld {};
struct mcclTeamTagLsa {};
struct mcclTeamTagRail {};

MCCL_HOST_DEVICE_INLINE mcclTeam mcclTeamWorld(const mcclDevComm& comm) {
  mcclTeam t = {comm.nRanks, comm.rank, 1};
  return t;
}
MCCL_HOST_DEVICE_INLINE mcclTeam mcclTeamLsa(const mcclDevComm& comm) {
  mcclTeam t = {comm.lsaSize, comm.lsaRank, 1};
  return t;
}
// The ranks at this LSA index on every LSA team: world ranks lsaSize apart.
MCCL_HOST_DEVICE_INLINE mcclTeam mcclTeamRail(const mcclDevComm& comm) {
  mcclTeam t = {comm.nRanks / comm.lsaSize, comm.rank / comm.lsaSize, comm.lsaSize};
  return t;
}
MCCL_HOST_DEVICE_INLINE int mcclTeamRankToWorld(const mcclDevComm& comm, mcclTeam team, int rank) {
  return comm.rank + (rank - team.rank) * team.stride;
}
MCCL_HOST_DEVICE_INLINE int mcclTeamRankToLsa(const mcclDevComm& comm, mcclTeam team, int rank) {
  return comm.lsaRank + (rank - team.rank) * team.stride;
}

// ---- pointers into symmetric windows -------------------------------------------------------------
// LSA rank r's copy of a window starts at lsaFlatBase + r * stride, the stride a whole number of 4 GiB: the
// offset of rank r is r * stride4G added to the upper 32 bits of the address, one 32-bit multiply-add, which
// is why the stride is kept in 4 GiB units (NCCL's nccl::utility::add4G).
template <typename T>
MCCL_HOST_DEVICE_INLINE T* mcclAdd4G(T* base, uint32_t delta4G) {
  return (T*)((uintptr_t)base + ((uintptr_t)delta4G << 32));
}

MCCL_DEVICE_INLINE void* mcclGetLsaPointer(mcclWindow_t w, size_t offset, int peer) {
  return mcclAdd4G(w->lsaFlatBase, (uint32_t)peer * w->stride4G) + offset;
}
MCCL_DEVICE_INLINE void* mcclGetLocalPointer(mcclWindow_t w, size_t offset) {
  return mcclGetLsaPointer(w, offset, w->lsaRank);
}
// A world peer: its LSA rank is this rank's plus the world distance (the LSA team is a contiguous range).
MCCL_DEVICE_INLINE void* mcclGetPeerPointer(mcclWindow_t w, size_t offset, int peer) {
  return mcclGetLsaPointer(w, offset, w->lsaRank + (peer - w->worldRank));
}
MCCL_DEVICE_INLINE void* mcclGetPeerPointer(mcclWindow_t w, size_t offset, mcclTeam team, int peer) {
  return mcclGetLsaPointer(w, offset, w->lsaRank + (peer - team.rank) * team.stride);
}

// The resource window's buffers, through the communicator's inlined copy of the window (one load fewer).
MCCL_DEVICE_INLINE void* mcclGetResourceBufferLsaPointer(const mcclDevComm& comm, mcclDevResourceHandle h, int peer) {
  const struct mcclWindow_vidmem& w = comm.resourceWindow_inlined;
  return mcclAdd4G(w.lsaFlatBase, (uint32_t)peer * w.stride4G) + mcclGetResourceBufferOffset(h);
}
MCCL_DEVICE_INLINE void* mcclGetResourceBufferLocalPointer(const mcclDevComm& comm, mcclDevResourceHandle h) {
  return mcclGetResourceBufferLsaPointer(comm, h, comm.lsaRank);
}
MCCL_DEVICE_INLINE void* mcclGetResourceBufferPeerPointer(const mcclDevComm& comm, mcclDevResourceHandle h,
                                                          mcclTeam team, int peer) {
  return mcclGetResourceBufferLsaPointer(comm, h, comm.lsaRank + (peer - team.rank) * team.stride);
}

// Spin until a peer's inbox slot reaches `want` (modulo 2^32). Out of line, so a debugger can stop here
// with the slot, the peer and the epoch awaited in hand (lab.gdb does).
#if defined(__CUDACC__)
__device__ __noinline__
#else
__noinline__ inline
#endif
    void
    mcclLsaBarrierWaitSlot(uint32_t* slot, int peer, uint32_t want, cuda::memory_order order) {
  if (peer < 0) return;  // no peer, nothing to wait for (and the debugger keeps `peer` to print)
  while (mcclAtomicLoad(slot, order) - want > (0xffffffffu >> 1)) mcclSpinHint();
}

// ---- LSA barrier sessions (NCCL's ncclLsaBarrierSession) -----------------------------------------
// A barrier's state, in 32-bit words of the resource buffer at handle.bufHandle, for nB barriers over a team
// of n ranks (NCCL's layout, so kernels built on NCCL's headers read the same words):
//   [0, nB)              the multicast epoch of each barrier (unused: no multimem)
//   [nB, 2nB)            the unicast epoch of each barrier: how many times it has completed here
//   [2nB, 3nB)           the multicast inbox (unused)
//   [3nB, 3nB + nB * n)  the inboxes: word 3nB + index * n + peer is where `peer` writes its arrivals
// Arriving at barrier `index` stores epoch + 1 into this rank's slot of every peer's inbox; waiting spins
// until every peer's slot of this rank's inbox reaches epoch + 1. The epoch only grows, so an inbox never
// needs resetting, and a peer already one barrier ahead (epoch + 2) counts as arrived: the comparison is
// modulo 2^32, as NCCL's. A session loads the epoch when it starts and stores it back when it ends, so the
// next session (the next kernel) continues the count.
template <typename Coop>
struct mcclLsaBarrierSession {
  Coop coop;
  const mcclDevComm& comm;
  mcclTeam team;
  mcclLsaBarrierHandle handle;
  int index;
  uint32_t epoch;

  MCCL_DEVICE_INLINE uint32_t* state() const {
    return (uint32_t*)mcclGetResourceBufferLocalPointer(comm, handle.bufHandle);
  }
  // The slot where `peer` writes its arrivals in `owner`'s inbox.
  MCCL_DEVICE_INLINE uint32_t* inbox(int owner, int peer) const {
    uint32_t* s = (uint32_t*)mcclGetResourceBufferPeerPointer(comm, handle.bufHandle, team, owner);
    return s + 3 * handle.nBarriers + index * team.nRanks + peer;
  }

  MCCL_DEVICE_INLINE mcclLsaBarrierSession(Coop coop_, const mcclDevComm& comm_, mcclTeam team_,
                                           mcclLsaBarrierHandle handle_, uint32_t index_)
      : coop(coop_), comm(comm_), team(team_), handle(handle_), index((int)index_), epoch(0) {
    epoch = state()[handle.nBarriers + index];
  }
  MCCL_DEVICE_INLINE mcclLsaBarrierSession(Coop coop_, const mcclDevComm& comm_, mcclTeamTagLsa, uint32_t index_)
      : mcclLsaBarrierSession(coop_, comm_, mcclTeamLsa(comm_), comm_.lsaBarrier, index_) {}
  mcclLsaBarrierSession(const mcclLsaBarrierSession&) = delete;  // one session owns the epoch

  MCCL_DEVICE_INLINE ~mcclLsaBarrierSession() {
    if (coop.thread_rank() == 0) state()[handle.nBarriers + index] = epoch;
    coop.sync();
  }

  // Tell every peer this rank has arrived. The group's threads share the peers; the sync first makes the
  // group's earlier work part of what the stores release.
  MCCL_DEVICE_INLINE void arrive(Coop, cuda::memory_order order) {
    coop.sync();
    for (int i = coop.thread_rank(); i < team.nRanks - 1; i += coop.size()) {
      int peer = i + (team.rank <= i ? 1 : 0);  // every rank but this one
      mcclAtomicStore(inbox(peer, team.rank), epoch + 1, mcclReleaseOrderOf(order));
    }
  }

  // Wait until every peer has arrived at this epoch; the sync after makes what the loads acquired visible to
  // the whole group.
  MCCL_DEVICE_INLINE void wait(Coop, cuda::memory_order order) {
    for (int i = coop.thread_rank(); i < team.nRanks - 1; i += coop.size()) {
      int peer = i + (team.rank <= i ? 1 : 0);
      mcclLsaBarrierWaitSlot(inbox(team.rank, peer), peer, epoch + 1, mcclAcquireOrderOf(order));
    }
    epoch += 1;
    coop.sync();
  }

  MCCL_DEVICE_INLINE void sync(Coop c, cuda::memory_order order) {
    arrive(c, order);
    wait(c, order);
  }
};

#endif
