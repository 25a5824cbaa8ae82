// Lab 07: symmetric windows (NCCL's ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC, in small):
// every rank offers its buffer's cuMem handle to its proxy, the handles are all-gathered through the
// bootstrap, and every rank maps every rank's buffer into one reserved range at rank * stride (lab 05
// GetFd, lab 03's mcclIpcImportSymmetric: NCCL's ncclIpcSymmetricInit / ncclIpcMapSymmetric layout),
// so kernels reach peers' buffers with plain loads and stores, each at a known offset from one base.
// peerPtrs[rank] stays the caller's own pointer (the public contract); its alias at base + rank *
// stride is mapped too, so the range holds every rank.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "enqueue_internal.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_ipc.h"

// What each rank tells the others about its buffer.
struct winInfo {
  uint64_t handle;     // the owner's cuMem handle: its proxy exports an fd for it on request
  uint64_t allocSize;  // bytes of the allocation (what a peer maps)
  uint64_t size;       // bytes registered
  int32_t pid, cudaDev;
};

// The window as this file allocates it: the public part first (callers only see that), then the
// symmetric range and what is mapped in it.
struct winPriv {
  mcclLabWindow pub;
  mcclIpcSymmetric sym;
  size_t* mapped;  // [nRanks] bytes mapped at base + p * stride (0: nothing)
};

static mcclResult_t importPeer(mcclLabComm* comm, struct winPriv* wp, int peer, const struct winInfo* info,
                               void** ptr) {
  int fd = -1;
  uint64_t h = info->handle;
  MCCLCHECK(mcclProxyClientGetFdBlocking(comm->proxy, peer, &h, (int)sizeof(CUmemGenericAllocationHandle), &fd));
  mcclIpcDesc desc;
  memset(&desc, 0, sizeof(desc));
  desc.magic = MCCL_IPC_DESC_MAGIC;
  desc.handleType = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  desc.size = info->allocSize;
  desc.ownerPid = info->pid;
  desc.ownerDev = info->cudaDev;
  mcclResult_t res = mcclIpcImportSymmetric(&wp->sym, (size_t)peer * wp->sym.stride, &desc, fd, ptr);
  close(fd);  // the mapping keeps the memory
  if (res == mcclSuccess) wp->mapped[peer] = (size_t)info->allocSize;
  return res;
}

mcclResult_t labWindowUnmap(mcclLabComm* comm, mcclLabWindow* w) {
  if (w == NULL) return mcclSuccess;
  struct winPriv* wp = (struct winPriv*)w;
  mcclResult_t res = mcclSuccess, r;
  for (int p = 0; wp->mapped && p < comm->nRanks; p++) {
    if (wp->mapped[p] == 0) continue;
    r = mcclIpcUnmapSymmetric(&wp->sym, (char*)wp->sym.base + (size_t)p * wp->sym.stride, wp->mapped[p]);
    if (r != mcclSuccess && res == mcclSuccess) res = r;
  }
  r = mcclIpcSymmetricFinalize(&wp->sym);
  if (r != mcclSuccess && res == mcclSuccess) res = r;
  free(wp->mapped);
  r = mcclMemFree(w->devPeerPtrs);
  if (r != mcclSuccess && res == mcclSuccess) res = r;
  free(w->peerPtrs);
  free(wp);
  return res;
}

mcclResult_t labWindowMap(mcclLabComm* comm, void* buff, size_t size, mcclLabWindow** out) {
  // EXERCISE(07.window)
  int saved = -1;
  CUDACHECK(cudaGetDevice(&saved));
  mcclResult_t res = mcclSuccess;
  CUmemGenericAllocationHandle handle = 0;
  void* base = NULL;
  size_t allocSize = 0;
  int registered = 0, importing = 0;
  struct winInfo* all = NULL;
  mcclLabWindow* w = NULL;
  struct winPriv* wp = NULL;
  CUDACHECKGOTO(cudaSetDevice(comm->cudaDev), res, fail);
  // A window is a whole VMM allocation (mcclMemAlloc): that is what crosses as an fd. A rank that
  // cannot offer its buffer (a NULL or size 0 too) still takes part in the exchange (size 0), so every
  // rank fails alike, at once, and the bootstrap's message sequence stays the same on every rank: a rank
  // that returned before the exchange would leave the others waiting for it until the timeout, and
  // then one exchange behind it for good.
  int localBad = 0;
  if (buff == NULL || size == 0 || out == NULL) {
    WARN("Invalid argument: rank %d's window: buff %p, size %zu, win %p (non-NULL, > 0, non-NULL)", comm->rank, buff,
         size, (void*)out);
    localBad = 1;
  } else if (mcclCuMemRetainHandle(buff, &handle, NULL, &base, &allocSize) != mcclSuccess || base != buff) {
    WARN("Invalid argument: buff %p is not the start of a VMM allocation (mcclMemAlloc)", buff);
    localBad = 1;
  } else if (size > allocSize) {
    WARN("Invalid argument: size %zu is larger than buff %p's allocation (%zu bytes)", size, buff, allocSize);
    localBad = 1;
  }
  if (handle) cuMemRelease(handle);  // the allocation holds its own reference; the value stays valid while it lives
  all = (struct winInfo*)calloc((size_t)comm->nRanks, sizeof(*all));
  wp = (struct winPriv*)calloc(1, sizeof(*wp));
  w = wp ? &wp->pub : NULL;
  if (all == NULL || w == NULL || (w->peerPtrs = (void**)calloc((size_t)comm->nRanks, sizeof(void*))) == NULL ||
      (wp->mapped = (size_t*)calloc((size_t)comm->nRanks, sizeof(size_t))) == NULL) {
    WARN("Out of memory registering a window of %d ranks", comm->nRanks);
    res = mcclSystemError;
    goto fail;
  }
  w->buff = buff;
  w->size = size;
  if (!localBad) {
    MCCLCHECKGOTO(mcclProxyRegisterExport(comm->proxy, handle), res, fail);
    registered = 1;
  }
  all[comm->rank].handle = (uint64_t)handle;
  all[comm->rank].allocSize = allocSize;
  all[comm->rank].size = localBad ? 0 : size;
  all[comm->rank].pid = (int32_t)getpid();
  all[comm->rank].cudaDev = comm->cudaDev;
  MCCLCHECKGOTO(mcclBootstrapAllGather(comm->bootstrap, all, sizeof(*all)), res, fail);
  // Every rank sees the same records, so every rank takes the same decision here.
  if (localBad) {  // said above; the peers learn it from our size 0
    res = mcclInvalidArgument;
    goto fail;
  }
  for (int p = 0; p < comm->nRanks; p++)
    if (all[p].size == 0) {
      WARN(
          "Invalid argument: window of %zu bytes on rank %d: rank %d could not offer its buffer (its own WARN says "
          "why), so no rank registers this window",
          size, comm->rank, p);
      res = mcclInvalidArgument;
      goto fail;
    } else if (all[p].size != size) {
      WARN("Invalid argument: window size %zu on rank %d, %llu on rank %d (must be equal on every rank)", size,
           comm->rank, (unsigned long long)all[p].size, p);
      res = mcclInvalidArgument;
      goto fail;
    }
  // One range, a slot per rank as large as the largest allocation: rank p's buffer at base + p * stride.
  size_t stride = 0;
  for (int p = 0; p < comm->nRanks; p++)
    if (all[p].allocSize > stride) stride = (size_t)all[p].allocSize;
  MCCLCHECKGOTO(mcclIpcSymmetricInit(comm->nRanks, stride, comm->cudaDev, &wp->sym), res, fail);
  int nMapped = 0;
  importing = 1;
  for (int p = 0; p < comm->nRanks; p++) {
    if (p == comm->rank) {
      void* alias = NULL;
      MCCLCHECKGOTO(mcclIpcMapSymmetric(&wp->sym, (size_t)p * wp->sym.stride, allocSize, handle, &alias), res, fail);
      wp->mapped[p] = allocSize;
      w->peerPtrs[p] = buff;
      nMapped++;
      continue;
    }
    // A rank on another host shares no memory (its proxy's Unix socket is not even reachable from
    // here): its slot stays empty, and the symmetric algorithms, which need every rank's buffer, are
    // off for such a communicator anyway (no signal area, signalArea() in comm.c).
    if (comm->peerInfo[p].hostHash != comm->peerInfo[comm->rank].hostHash) continue;
    MCCLCHECKGOTO(importPeer(comm, wp, p, &all[p], &w->peerPtrs[p]), res, fail);
    nMapped++;
  }
  // From lab 01's allocator (cuMem), not cudaMalloc: cudaFree waits for the whole device, and deregistration
  // must wait only for this communicator's kernels (NCCL's device-side window structures are cuMem too).
  MCCLCHECKGOTO(mcclMemAlloc((void**)&w->devPeerPtrs, sizeof(char*) * (size_t)comm->nRanks), res, fail);
  CUDACHECKGOTO(cudaMemcpy(w->devPeerPtrs, w->peerPtrs, sizeof(char*) * (size_t)comm->nRanks, cudaMemcpyHostToDevice),
                res, fail);
  // Landed before any kernel on a non-blocking stream reads it (the copy may return before it lands).
  CUDACHECKGOTO(cudaStreamSynchronize(cudaStreamLegacy), res, fail);
  // Every peer has its fd (and its mapping) before the handle stops being offered.
  MCCLCHECKGOTO(mcclBootstrapBarrier(comm->bootstrap), res, fail);
  MCCLCHECKGOTO(mcclProxyDeregisterExport(comm->proxy, handle), res, fail);
  free(all);
  INFO(MCCL_INIT,
       "rank %d: window %p size %zu mapped from %d of %d ranks (the others on other hosts) at %p + rank * "
       "%zu",
       comm->rank, buff, size, nMapped, comm->nRanks, wp->sym.base, wp->sym.stride);
  *out = w;
  cudaSetDevice(saved);
  return mcclSuccess;
fail:
  if (registered) {
    // Peers still importing are refused from now on: name the rank where such a cascade starts.
    if (importing)
      WARN(
          "rank %d: window %p registration failed (%s) after offering handle 0x%llx; peers asking for it now are "
          "refused",
          comm->rank, buff, mcclGetErrorString(res), (unsigned long long)handle);
    mcclProxyDeregisterExport(comm->proxy, handle);
  }
  labWindowUnmap(comm, w);
  free(all);
  cudaSetDevice(saved);
  return res;
  // END EXERCISE(07.window)
}

mcclResult_t mcclLabWindowRegister(mcclLabComm* comm, void* buff, size_t size, mcclLabWindow** win) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  mcclLabWindow* w = NULL;
  MCCLCHECK(labWindowMap(comm, buff, win ? size : 0, &w));  // a NULL win takes part as a refusal
  w->next = comm->windows;
  comm->windows = w;
  *win = w;
  return mcclSuccess;
}

mcclResult_t mcclLabWindowDeregister(mcclLabComm* comm, mcclLabWindow* win) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  if (win == NULL) return mcclSuccess;
  mcclLabWindow** pp = &comm->windows;
  while (*pp && *pp != win) pp = &(*pp)->next;
  MCCL_ARGCHECK(*pp != NULL, "win %p is not a window of this communicator", (void*)win);
  *pp = win->next;
  // Not collective: unmapping this rank's view of the peers' buffers leaves theirs (and the memory,
  // which the driver frees with its last mapping) alone. This rank's kernels may still read them through
  // the window: wait for the communicator's own launches first.
  mcclResult_t res = mcclLabCommWaitLaunches(comm);
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  cudaSetDevice(comm->cudaDev);
  mcclResult_t r = labWindowUnmap(comm, win);
  if (saved >= 0) cudaSetDevice(saved);
  return res != mcclSuccess ? res : r;
}

mcclResult_t mcclLabWindowFind(const mcclLabComm* comm, const void* ptr, size_t bytes, mcclLabWindow** win,
                               size_t* offset) {
  MCCL_ARGCHECK(comm != NULL && win != NULL && offset != NULL, "comm %p, win %p or offset %p is NULL",
                (const void*)comm, (void*)win, (void*)offset);
  *win = NULL;
  *offset = 0;
  uintptr_t p = (uintptr_t)ptr;
  for (mcclLabWindow* w = comm->windows; w && ptr; w = w->next) {
    uintptr_t b = (uintptr_t)w->buff;
    if (p >= b && p - b <= w->size && bytes <= w->size - (p - b)) {
      *win = w;
      *offset = p - b;
      return mcclSuccess;
    }
  }
  return mcclSuccess;
}
