// Lab 07: symmetric windows (NCCL's ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC, in small):
// every rank offers its buffer's cuMem handle to its proxy, the handles are all-gathered through the
// bootstrap, and every rank imports every peer's buffer (lab 05 GetFd, lab 03 import), so kernels
// reach peers' buffers with plain loads and stores. Each mapping is its own reservation here; the
// one-range-for-all-ranks layout of NCCL's ncclIpcSymmetricMap is not built yet.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "allreduce_internal.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_ipc.h"

// What each rank tells the others about its buffer.
struct winInfo {
  uint64_t handle;  // the owner's cuMem handle: its proxy exports an fd for it on request
  uint64_t allocSize;  // bytes of the allocation (what a peer maps)
  uint64_t size;    // bytes registered
  int32_t pid, cudaDev;
};

static mcclResult_t importPeer(mcclLabComm* comm, int peer, const struct winInfo* info, void** ptr) {
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
  mcclResult_t res = mcclIpcImport(&desc, fd, comm->cudaDev, ptr);
  close(fd);  // the mapping keeps the memory
  return res;
}

mcclResult_t labWindowUnmap(mcclLabComm* comm, mcclLabWindow* w) {
  if (w == NULL) return mcclSuccess;
  mcclResult_t res = mcclSuccess, r;
  for (int p = 0; w->peerPtrs && p < comm->nRanks; p++) {
    if (p == comm->rank || w->peerPtrs[p] == NULL) continue;
    r = mcclIpcUnmap(w->peerPtrs[p]);
    if (r != mcclSuccess && res == mcclSuccess) res = r;
  }
  if (w->devPeerPtrs && cudaFree(w->devPeerPtrs) != cudaSuccess && res == mcclSuccess) res = mcclUnhandledCudaError;
  free(w->peerPtrs);
  free(w);
  return res;
}

mcclResult_t labWindowMap(mcclLabComm* comm, void* buff, size_t size, mcclLabWindow** out) {
  MCCL_ARGCHECK(buff != NULL, "buff is NULL");
  MCCL_ARGCHECK(size > 0, "size is 0");
  MCCL_ARGCHECK(out != NULL, "win is NULL");
  int saved = -1;
  CUDACHECK(cudaGetDevice(&saved));
  mcclResult_t res = mcclSuccess;
  CUmemGenericAllocationHandle handle = 0;
  void* base = NULL;
  size_t allocSize = 0;
  int registered = 0;
  struct winInfo* all = NULL;
  mcclLabWindow* w = NULL;
  CUDACHECKGOTO(cudaSetDevice(comm->cudaDev), res, fail);
  // A window is a whole VMM allocation (mcclMemAlloc): that is what crosses as an fd. A rank that
  // cannot offer its buffer still takes part in the exchange (size 0), so every rank fails alike
  // instead of the others waiting for it.
  int localBad = 0;
  if (mcclCuMemRetainHandle(buff, &handle, NULL, &base, &allocSize) != mcclSuccess || base != buff) {
    WARN("Invalid argument: buff %p is not the start of a VMM allocation (mcclMemAlloc)", buff);
    localBad = 1;
  } else if (size > allocSize) {
    WARN("Invalid argument: size %zu is larger than buff %p's allocation (%zu bytes)", size, buff, allocSize);
    localBad = 1;
  }
  if (handle) cuMemRelease(handle);  // the allocation holds its own reference; the value stays valid while it lives
  all = (struct winInfo*)calloc((size_t)comm->nRanks, sizeof(*all));
  w = (mcclLabWindow*)calloc(1, sizeof(*w));
  if (all == NULL || w == NULL || (w->peerPtrs = (void**)calloc((size_t)comm->nRanks, sizeof(void*))) == NULL) {
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
  for (int p = 0; p < comm->nRanks; p++)
    if (all[p].size != size || localBad) {
      WARN("Invalid argument: window size %zu on rank %d, %llu on rank %d (must be equal; 0: that rank's buffer "
           "is not a VMM allocation of that size)", size, comm->rank, (unsigned long long)all[p].size, p);
      res = mcclInvalidArgument;
      goto fail;
    }
  for (int p = 0; p < comm->nRanks; p++) {
    if (p == comm->rank) {
      w->peerPtrs[p] = buff;
      continue;
    }
    MCCLCHECKGOTO(importPeer(comm, p, &all[p], &w->peerPtrs[p]), res, fail);
  }
  CUDACHECKGOTO(cudaMalloc((void**)&w->devPeerPtrs, sizeof(char*) * (size_t)comm->nRanks), res, fail);
  CUDACHECKGOTO(cudaMemcpy(w->devPeerPtrs, w->peerPtrs, sizeof(char*) * (size_t)comm->nRanks, cudaMemcpyHostToDevice),
                res, fail);
  // Every peer has its fd (and its mapping) before the handle stops being offered.
  MCCLCHECKGOTO(mcclBootstrapBarrier(comm->bootstrap), res, fail);
  MCCLCHECKGOTO(mcclProxyDeregisterExport(comm->proxy, handle), res, fail);
  free(all);
  INFO(MCCL_INIT, "rank %d: window %p size %zu mapped from %d ranks", comm->rank, buff, size, comm->nRanks);
  *out = w;
  cudaSetDevice(saved);
  return mcclSuccess;
fail:
  if (registered) mcclProxyDeregisterExport(comm->proxy, handle);
  labWindowUnmap(comm, w);
  free(all);
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclLabWindowRegister(mcclLabComm* comm, void* buff, size_t size, mcclLabWindow** win) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  MCCL_ARGCHECK(win != NULL, "win is NULL");
  mcclLabWindow* w = NULL;
  MCCLCHECK(labWindowMap(comm, buff, size, &w));
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
  // which the driver frees with its last mapping) alone.
  mcclResult_t res = mcclSuccess;
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
