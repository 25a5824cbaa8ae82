// Lab 09 host side: device windows, device communicators, teams (NCCL 2.28.9 src/dev_runtime.cc, in small).
//
// NCCL reserves, per communicator, one range of lsaSize * bigSize bytes (bigSize: the largest GPU memory,
// rounded up to 4 GiB) and maps every LSA rank's symmetric memory at rank * bigSize in it, so a kernel finds
// any peer's copy as lsaFlatBase + peer * stride, the stride kept in 4 GiB units (stride4G). Lab 07's windows
// already map every peer in one range, but at a stride of the buffer's size. A device window maps the same
// peers' memory a second time, at NCCL's stride: the handles come from this process's own mappings (lab 07
// imported them through the proxy), so no exchange is needed, and the result has NCCL's layout.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "dev_api_kernels.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_dev_api.h"
#include "mccl_devconn.h"
#include "mccl_ipc.h"
#include "mccl_utils.h"

#define STRIDE_UNIT ((size_t)1 << 32)

// The host's record of a device window (what mcclWindow_vidmem::winHost points at).
struct devWindow {
  struct devWindow* next;
  const mcclLabComm* comm;
  mcclLabWindow* labWin;              // the lab 07 window it is the device view of
  void* userBuf;                      // this rank's buffer at the address the application registered
  mcclWindow_t dev;                   // device memory: the struct kernels read
  struct mcclWindow_vidmem host;      // the same, on the host
  mcclIpcSymmetric sym;               // the flat range
  size_t mapped[MCCL_LAB_MAX_RANKS];  // bytes mapped at LSA rank r's slot
};

// The host's record of a device communicator: what mcclLabDevCommDestroy frees.
struct devCommRec {
  struct devCommRec* next;
  const mcclLabComm* comm;
  mcclWindow_t resourceWindow;
  mcclLabWindow* labWin;
  void* buf;
};

// Records of every live object, so destroying one twice, or on another communicator, is caught by name.
static pthread_mutex_t recLock = PTHREAD_MUTEX_INITIALIZER;
static struct devWindow* windows;
static struct devCommRec* devComms;

// A communicator's window table (NCCL's devr->windowTable, which ncclFindWindow searches): blocks of entries in
// device memory, each with its host copy, made with the communicator's first device window and freed with its
// last. Every device communicator points at the first block, so a window made after it is found too, as in
// NCCL. Under tableLock, which is held across the copies to the device so that entries never race.
struct tableBlock {
  struct mcclDevCommWindowTable* dev;
  struct mcclDevCommWindowTable host;
};
struct windowTable {
  struct windowTable* next;
  const mcclLabComm* comm;
  int users;  // live device windows of comm
  int nBlocks;
  struct tableBlock* blocks;
};
static pthread_mutex_t tableLock = PTHREAD_MUTEX_INITIALIZER;
static struct windowTable* tables;

static struct windowTable* tableOf(const mcclLabComm* comm) {
  struct windowTable* t = tables;
  while (t && t->comm != comm) t = t->next;
  return t;
}

static void tableFree(struct windowTable* t) {
  for (int b = 0; b < t->nBlocks; b++) mcclDevFree(t->blocks[b].dev);
  free(t->blocks);
  free(t);
}

// A new zeroed block at the end of t's chain; the last block's `next` points at it, on the device too.
static mcclResult_t tableGrow(struct windowTable* t) {
  struct tableBlock* blocks = (struct tableBlock*)realloc(t->blocks, (size_t)(t->nBlocks + 1) * sizeof(*blocks));
  if (blocks == NULL) {
    WARN("Out of memory for a window table of rank %d", t->comm->rank);
    return mcclSystemError;
  }
  t->blocks = blocks;
  struct tableBlock* nb = &blocks[t->nBlocks];
  memset(nb, 0, sizeof(*nb));
  MCCLCHECK(mcclDevCalloc((void**)&nb->dev, sizeof(*nb->dev)));
  if (t->nBlocks > 0) {
    struct tableBlock* last = &blocks[t->nBlocks - 1];
    last->host.next = nb->dev;
    cudaError_t e = cudaMemcpy(&last->dev->next, &nb->dev, sizeof(nb->dev), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      WARN("cudaMemcpy of a window table's link failed: %s", cudaGetErrorString(e));
      last->host.next = NULL;
      mcclDevFree(nb->dev);
      return mcclUnhandledCudaError;
    }
  }
  t->nBlocks++;
  return mcclSuccess;
}

// Write entry e of block b, on the host and the device.
static mcclResult_t tableWrite(struct tableBlock* b, int e, const struct mcclDevCommWindowTableEntry* v) {
  b->host.entries[e] = *v;
  CUDACHECK(cudaMemcpy(&b->dev->entries[e], v, sizeof(*v), cudaMemcpyHostToDevice));
  // Landed before a kernel on a non-blocking stream searches the table.
  CUDACHECK(cudaStreamSynchronize(cudaStreamLegacy));
  return mcclSuccess;
}

// Enter a device window in its communicator's table (made now if this is the first).
static mcclResult_t tableAdd(const mcclLabComm* comm, const struct devWindow* dw, size_t size) {
  mcclResult_t res = mcclSuccess;
  pthread_mutex_lock(&tableLock);
  struct windowTable* t = tableOf(comm);
  int made = 0;
  if (t == NULL) {
    t = (struct windowTable*)calloc(1, sizeof(*t));
    if (t == NULL) {
      WARN("Out of memory for a window table of rank %d", comm->rank);
      res = mcclSystemError;
      goto out;
    }
    t->comm = comm;
    made = 1;
    if ((res = tableGrow(t)) != mcclSuccess) goto out;
  }
  int b = 0, e = 0;
  for (b = 0; b < t->nBlocks; b++) {
    for (e = 0; e < MCCL_DEV_WINDOW_TABLE_ENTRIES && t->blocks[b].host.entries[e].window != NULL; e++) {
    }
    if (e < MCCL_DEV_WINDOW_TABLE_ENTRIES) break;
  }
  if (b == t->nBlocks) {
    if ((res = tableGrow(t)) != mcclSuccess) goto out;
    e = 0;
  }
  struct mcclDevCommWindowTableEntry v = {(uintptr_t)dw->userBuf, (uintptr_t)size, dw->dev};
  if ((res = tableWrite(&t->blocks[b], e, &v)) != mcclSuccess) goto out;
  t->users++;
  if (made) {
    t->next = tables;
    tables = t;
    made = 0;
  }
out:
  if (made) tableFree(t);
  pthread_mutex_unlock(&tableLock);
  return res;
}

// The first block of comm's table, or NULL when comm has no device window.
static struct mcclDevCommWindowTable* tableFirst(const mcclLabComm* comm) {
  pthread_mutex_lock(&tableLock);
  const struct windowTable* t = tableOf(comm);
  struct mcclDevCommWindowTable* first = t ? t->blocks[0].dev : NULL;
  pthread_mutex_unlock(&tableLock);
  return first;
}

// Take a device window out of its communicator's table; the table goes with the last one.
static void tableRemove(const mcclLabComm* comm, mcclWindow_t devWin) {
  pthread_mutex_lock(&tableLock);
  struct windowTable** pp = &tables;
  while (*pp && (*pp)->comm != comm) pp = &(*pp)->next;
  struct windowTable* t = *pp;
  for (int b = 0; t && b < t->nBlocks; b++)
    for (int e = 0; e < MCCL_DEV_WINDOW_TABLE_ENTRIES; e++)
      if (t->blocks[b].host.entries[e].window == devWin) {
        const struct mcclDevCommWindowTableEntry zero = {0, 0, NULL};
        (void)tableWrite(&t->blocks[b], e, &zero);
        if (--t->users == 0) {
          *pp = t->next;
          tableFree(t);
        }
        goto out;
      }
out:
  pthread_mutex_unlock(&tableLock);
}

mcclResult_t mcclDevLsaTeamOf(const mcclLabComm* comm, int* lsaRank, int* lsaSize) {
  MCCL_ARGCHECK(comm != NULL && lsaRank != NULL && lsaSize != NULL, "comm %p, lsaRank %p or lsaSize %p is NULL",
                (const void*)comm, (void*)lsaRank, (void*)lsaSize);
  const int n = comm->nRanks, me = comm->rank;
  int size = 0;
  for (int r = 0; r < n; r++) size += comm->peerInfo[r].hostHash == comm->peerInfo[me].hostHash;
  // A team is every block of `size` consecutive ranks: each must be one host, and hosts may not repeat.
  int ok = size > 0 && n % size == 0;
  for (int r = 0; ok && r < n; r++)
    ok = comm->peerInfo[r].hostHash == comm->peerInfo[r - r % size].hostHash &&
         (r % size != 0 || r == 0 || comm->peerInfo[r].hostHash != comm->peerInfo[r - 1].hostHash);
  *lsaSize = ok ? size : 1;
  *lsaRank = ok ? me % size : 0;
  return mcclSuccess;
}

mcclTeam mcclLabTeamWorld(const mcclLabComm* comm) {
  mcclTeam t = {0, 0, 0};
  if (comm == NULL) return t;
  t.nRanks = comm->nRanks;
  t.rank = comm->rank;
  t.stride = 1;
  return t;
}

mcclTeam mcclLabTeamLsa(const mcclLabComm* comm) {
  mcclTeam t = {0, 0, 0};
  if (comm == NULL || mcclDevLsaTeamOf(comm, &t.rank, &t.nRanks) != mcclSuccess) return t;
  t.stride = 1;
  return t;
}

mcclTeam mcclLabTeamRail(const mcclLabComm* comm) {
  mcclTeam t = {0, 0, 0};
  int lsaRank, lsaSize;
  if (comm == NULL || mcclDevLsaTeamOf(comm, &lsaRank, &lsaSize) != mcclSuccess) return t;
  t.nRanks = comm->nRanks / lsaSize;
  t.rank = comm->rank / lsaSize;
  t.stride = lsaSize;
  return t;
}

int mcclLabTeamRankToWorld(const mcclLabComm* comm, mcclTeam team, int rank) {
  return comm == NULL ? -1 : comm->rank + (rank - team.rank) * team.stride;
}

int mcclLabTeamRankToLsa(const mcclLabComm* comm, mcclTeam team, int rank) {
  int lsaRank, lsaSize;
  if (comm == NULL || mcclDevLsaTeamOf(comm, &lsaRank, &lsaSize) != mcclSuccess) return -1;
  return lsaRank + (rank - team.rank) * team.stride;
}

static int isWindowOf(const mcclLabComm* comm, const mcclLabWindow* win) {
  for (const mcclLabWindow* w = comm->windows; w; w = w->next)
    if (w == win) return 1;
  return 0;
}

static mcclResult_t windowUnmap(struct devWindow* dw, int lsaSize) {
  mcclResult_t res = mcclSuccess, r;
  for (int l = 0; l < lsaSize; l++) {
    if (dw->mapped[l] == 0) continue;
    r = mcclIpcUnmapSymmetric(&dw->sym, (char*)dw->sym.base + (size_t)l * dw->sym.stride, dw->mapped[l]);
    if (r != mcclSuccess && res == mcclSuccess) res = r;
  }
  r = mcclIpcSymmetricFinalize(&dw->sym);
  if (r != mcclSuccess && res == mcclSuccess) res = r;
  r = mcclDevFree(dw->dev);
  if (r != mcclSuccess && res == mcclSuccess) res = r;
  free(dw);
  return res;
}

// Map every LSA peer's buffer of `win` at NCCL's stride and describe the range in device memory.
static mcclResult_t windowMap(mcclLabComm* comm, mcclLabWindow* win, int lsaRank, int lsaSize, struct devWindow** out) {
  // EXERCISE(09.window)
  mcclResult_t res = mcclSuccess;
  CUmemGenericAllocationHandle handles[MCCL_LAB_MAX_RANKS] = {0};
  size_t sizes[MCCL_LAB_MAX_RANKS] = {0}, largest = 0;
  struct devWindow* dw = (struct devWindow*)calloc(1, sizeof(*dw));
  if (dw == NULL) {
    WARN("Out of memory for a device window");
    return mcclSystemError;
  }
  dw->comm = comm;
  dw->userBuf = win->buff;
  // Each LSA peer's allocation, as this process mapped it: its handle (one more reference) and its size.
  for (int l = 0; l < lsaSize; l++) {
    const void* p = win->peerPtrs[comm->rank - lsaRank + l];
    MCCLCHECKGOTO(mcclCuMemRetainHandle(p, &handles[l], NULL, NULL, &sizes[l]), res, fail);
    if (sizes[l] > largest) largest = sizes[l];
  }
  // The stride: the largest allocation rounded up to whole 4 GiB, so that a peer's offset is one 32-bit
  // product added to the address's upper half (mcclAdd4G).
  MCCLCHECKGOTO(
      mcclIpcSymmetricInit(lsaSize, (largest + STRIDE_UNIT - 1) / STRIDE_UNIT * STRIDE_UNIT, comm->cudaDev, &dw->sym),
      res, fail);
  for (int l = 0; l < lsaSize; l++) {
    void* at = NULL;
    MCCLCHECKGOTO(mcclIpcMapSymmetric(&dw->sym, (size_t)l * dw->sym.stride, sizes[l], handles[l], &at), res, fail);
    dw->mapped[l] = sizes[l];
  }
  dw->host.winHost = dw;
  dw->host.lsaFlatBase = (char*)dw->sym.base;
  dw->host.lsaRank = lsaRank;
  dw->host.worldRank = comm->rank;
  dw->host.stride4G = (uint32_t)(dw->sym.stride / STRIDE_UNIT);
  MCCLCHECKGOTO(mcclDevCalloc((void**)&dw->dev, sizeof(dw->host)), res, fail);
  CUDACHECKGOTO(cudaMemcpy(dw->dev, &dw->host, sizeof(dw->host), cudaMemcpyHostToDevice), res, fail);
  // Landed before a kernel on a non-blocking stream reads it.
  CUDACHECKGOTO(cudaStreamSynchronize(cudaStreamLegacy), res, fail);
  for (int l = 0; l < lsaSize; l++) cuMemRelease(handles[l]);  // the mappings hold their own references
  *out = dw;
  return mcclSuccess;
fail:
  for (int l = 0; l < lsaSize; l++)
    if (handles[l]) cuMemRelease(handles[l]);
  windowUnmap(dw, lsaSize);
  return res;
  // END EXERCISE(09.window)
}

mcclResult_t mcclDevWindowCreate(mcclLabComm* comm, mcclLabWindow* win, mcclWindow_t* devWin) {
  MCCL_ARGCHECK(comm != NULL && win != NULL && devWin != NULL, "comm %p, win %p or devWin %p is NULL", (void*)comm,
                (void*)win, (void*)devWin);
  if (mcclIsAborted(comm->abortFlag)) {
    WARN("Invalid usage: rank %d's communicator is aborted: no device window for window %p", comm->rank, (void*)win);
    return mcclInvalidUsage;
  }
  if (!isWindowOf(comm, win)) {
    WARN("Invalid usage: window %p is not registered on rank %d's communicator %p (mcclLabWindowRegister)", (void*)win,
         comm->rank, (void*)comm);
    return mcclInvalidUsage;
  }
  int lsaRank, lsaSize;
  MCCLCHECK(mcclDevLsaTeamOf(comm, &lsaRank, &lsaSize));
  for (int l = 0; l < lsaSize; l++)
    if (win->peerPtrs[comm->rank - lsaRank + l] == NULL) {
      WARN("Invalid usage: window %p is not symmetric: rank %d's buffer is not mapped on rank %d", (void*)win,
           comm->rank - lsaRank + l, comm->rank);
      return mcclInvalidUsage;
    }
  int saved = -1;
  CUDACHECK(cudaGetDevice(&saved));
  CUDACHECK(cudaSetDevice(comm->cudaDev));
  struct devWindow* dw = NULL;
  mcclResult_t res = windowMap(comm, win, lsaRank, lsaSize, &dw);
  if (res == mcclSuccess) {
    dw->labWin = win;
    if ((res = tableAdd(comm, dw, win->size)) != mcclSuccess) windowUnmap(dw, lsaSize);
  }
  cudaSetDevice(saved);
  if (res != mcclSuccess) return res;
  pthread_mutex_lock(&recLock);
  dw->next = windows;
  windows = dw;
  pthread_mutex_unlock(&recLock);
  INFO(MCCL_INIT, "rank %d: device window %p of window %p: LSA rank %d of %d at %p + r * %u * 4 GiB", comm->rank,
       (void*)dw->dev, (void*)win, lsaRank, lsaSize, (void*)dw->host.lsaFlatBase, dw->host.stride4G);
  *devWin = dw->dev;
  return mcclSuccess;
}

// Take a device window's record out of the list, if it is comm's.
static mcclResult_t windowTake(const mcclLabComm* comm, mcclWindow_t devWin, int remove, struct devWindow** out) {
  pthread_mutex_lock(&recLock);
  struct devWindow** pp = &windows;
  while (*pp && (*pp)->dev != devWin) pp = &(*pp)->next;
  struct devWindow* dw = *pp;
  if (dw && dw->comm == comm && remove) *pp = dw->next;
  pthread_mutex_unlock(&recLock);
  if (dw == NULL) {
    WARN("Invalid argument: devWin %p is not a live device window (destroyed already, or never created)",
         (void*)devWin);
    return mcclInvalidArgument;
  }
  if (dw->comm != comm) {
    WARN("Invalid argument: devWin %p was created on communicator %p, not on %p", (void*)devWin, (const void*)dw->comm,
         (const void*)comm);
    return mcclInvalidArgument;
  }
  *out = dw;
  return mcclSuccess;
}

mcclResult_t mcclDevWindowGetHost(const mcclLabComm* comm, mcclWindow_t devWin, struct mcclWindow_vidmem* out) {
  MCCL_ARGCHECK(comm != NULL && out != NULL, "comm %p or out %p is NULL", (const void*)comm, (void*)out);
  struct devWindow* dw;
  MCCLCHECK(windowTake(comm, devWin, 0, &dw));
  *out = dw->host;
  return mcclSuccess;
}

mcclResult_t mcclDevWindowLabWindow(const mcclLabComm* comm, mcclWindow_t devWin, mcclLabWindow** labWin) {
  MCCL_ARGCHECK(comm != NULL && labWin != NULL, "comm %p or labWin %p is NULL", (const void*)comm, (void*)labWin);
  struct devWindow* dw;
  MCCLCHECK(windowTake(comm, devWin, 0, &dw));
  *labWin = dw->labWin;
  return mcclSuccess;
}

mcclResult_t mcclDevWindowHostOf(mcclWindow_t devWin, struct mcclWindow_vidmem* host, void** userBuf) {
  mcclResult_t res = mcclInvalidArgument;
  pthread_mutex_lock(&recLock);
  for (struct devWindow* dw = windows; dw; dw = dw->next)
    if (dw->dev == devWin) {
      *host = dw->host;
      *userBuf = dw->userBuf;
      res = mcclSuccess;
      break;
    }
  pthread_mutex_unlock(&recLock);
  return res;
}

mcclResult_t mcclDevWindowDestroy(mcclLabComm* comm, mcclWindow_t devWin) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  if (devWin == NULL) return mcclSuccess;
  struct devWindow* dw;
  MCCLCHECK(windowTake(comm, devWin, 1, &dw));
  int saved = -1;
  CUDACHECK(cudaGetDevice(&saved));
  cudaSetDevice(comm->cudaDev);
  tableRemove(comm, devWin);
  mcclResult_t res = windowUnmap(dw, dw->sym.nRanks);
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclLsaBarrierCreateRequirement(mcclTeam team, int nBarriers, mcclLsaBarrierHandle* outHandle,
                                             mcclDevResourceRequirements* outReq) {
  MCCL_ARGCHECK(outHandle != NULL && outReq != NULL, "outHandle %p or outReq %p is NULL", (void*)outHandle,
                (void*)outReq);
  MCCL_ARGCHECK(team.nRanks >= 1 && team.rank >= 0 && team.rank < team.nRanks,
                "team {nRanks %d, rank %d, stride %d} is not a team", team.nRanks, team.rank, team.stride);
  MCCL_ARGCHECK(nBarriers >= 0 && (size_t)nBarriers * (size_t)(3 + team.nRanks) * 4 <= MCCL_DEV_RESOURCE_MAX_BYTES,
                "nBarriers %d over %d ranks needs more than the resource window's %zu bytes", nBarriers, team.nRanks,
                MCCL_DEV_RESOURCE_MAX_BYTES);
  memset(outReq, 0, sizeof(*outReq));
  // Two epochs, the multicast inbox, and an inbox slot per rank, for each barrier (the layout in
  // device/dev_api.cuh, which is NCCL's).
  outReq->bufferSize = (size_t)nBarriers * (size_t)(3 + team.nRanks) * sizeof(uint32_t);
  outReq->bufferAlign = sizeof(uint32_t);  // its words', as NCCL's: the layout starts every buffer on a line anyway
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->nBarriers = nBarriers;
  outHandle->bufHandle = 0;
  return mcclSuccess;
}

// Requirements minccl does not serve, or that cannot fit: refused with a warning that names the rank.
static mcclResult_t checkRequirements(const mcclLabComm* comm, const mcclDevCommRequirements* reqs, int lsaSize) {
  const int me = comm->rank;
  if (reqs->lsaMultimem) {
    WARN(
        "Invalid usage: rank %d's device communicator: reqs->lsaMultimem: multimem (NVLink multicast) is not "
        "served by minccl",
        me);
    return mcclInvalidUsage;
  }
  for (const mcclTeamRequirements* t = reqs->teamRequirementsList; t; t = t->next)
    if (t->multimem) {
      WARN(
          "Invalid usage: rank %d's device communicator: a team requirement asks for multimem (NVLink multicast), "
          "which minccl does not serve",
          me);
      return mcclInvalidUsage;
    }
  if (reqs->ginForceEnable || reqs->ginSignalCount || reqs->ginCounterCount || reqs->railGinBarrierCount) {
    WARN(
        "Invalid usage: rank %d's device communicator: GIN (the device API's network half) is not served by minccl: "
        "ginForceEnable %d, ginSignalCount %d, ginCounterCount %d, railGinBarrierCount %d (all must be 0)",
        me, (int)reqs->ginForceEnable, reqs->ginSignalCount, reqs->ginCounterCount, reqs->railGinBarrierCount);
    return mcclInvalidUsage;
  }
  if (reqs->lsaLLA2ABlockCount || reqs->lsaLLA2ASlotCount) {
    WARN(
        "Invalid usage: rank %d's device communicator: lsaLLA2ABlockCount %d, lsaLLA2ASlotCount %d: the LL "
        "all-to-all is not served by minccl",
        me, reqs->lsaLLA2ABlockCount, reqs->lsaLLA2ASlotCount);
    return mcclInvalidUsage;
  }
  if (reqs->barrierCount < 0 || reqs->lsaBarrierCount < 0) {
    WARN(
        "Invalid argument: rank %d's device communicator: reqs->barrierCount %d, reqs->lsaBarrierCount %d (must be "
        ">= 0)",
        me, reqs->barrierCount, reqs->lsaBarrierCount);
    return mcclInvalidArgument;
  }
  const size_t nBarriers =
      (size_t)(reqs->barrierCount > reqs->lsaBarrierCount ? reqs->barrierCount : reqs->lsaBarrierCount);
  if (nBarriers * (size_t)(3 + lsaSize) * sizeof(uint32_t) > MCCL_DEV_RESOURCE_MAX_BYTES) {
    WARN(
        "Invalid argument: rank %d's device communicator: %zu LSA barriers over %d ranks need %zu bytes, more than "
        "the resource window's %zu",
        me, nBarriers, lsaSize, nBarriers * (size_t)(3 + lsaSize) * sizeof(uint32_t), MCCL_DEV_RESOURCE_MAX_BYTES);
    return mcclInvalidArgument;
  }
  int n = 0;
  for (const mcclDevResourceRequirements* r = reqs->resourceRequirementsList; r; r = r->next, n++) {
    if (r->ginSignalCount || r->ginCounterCount) {
      WARN(
          "Invalid usage: rank %d's device communicator: resource requirement %d asks for %d GIN signals and %d "
          "counters: GIN is not served by minccl",
          me, n, r->ginSignalCount, r->ginCounterCount);
      return mcclInvalidUsage;
    }
    if (r->bufferAlign & (r->bufferAlign - 1)) {
      WARN(
          "Invalid argument: rank %d's device communicator: resource requirement %d: bufferAlign %zu is not a power "
          "of two",
          me, n, r->bufferAlign);
      return mcclInvalidArgument;
    }
    if (r->bufferSize > MCCL_DEV_RESOURCE_MAX_BYTES || r->bufferAlign > MCCL_DEV_RESOURCE_MAX_BYTES || n > 4096) {
      WARN(
          "Invalid argument: rank %d's device communicator: resource requirement %d: bufferSize %zu, bufferAlign %zu "
          "do not fit the resource window (%zu bytes)",
          me, n, r->bufferSize, r->bufferAlign, MCCL_DEV_RESOURCE_MAX_BYTES);
      return mcclInvalidArgument;
    }
  }
  return mcclSuccess;
}

// Lay the resource window out: the LSA barriers first, then the requirements' buffers, each at a multiple of
// its alignment (and of a 128-byte line, the unit of handles). Returns the total, or 0 when it does not fit.
static size_t layoutResources(const mcclDevResourceRequirements* barReq, const mcclDevCommRequirements* reqs,
                              mcclDevResourceHandle* barHandle) {
  size_t off = 0;
  const mcclDevResourceRequirements* r = barReq;
  while (r) {
    size_t align = r->bufferAlign > MCCL_DEV_RESOURCE_LINE ? r->bufferAlign : MCCL_DEV_RESOURCE_LINE;
    off = (off + align - 1) & ~(align - 1);
    if (r == barReq) *barHandle = (mcclDevResourceHandle)(off / MCCL_DEV_RESOURCE_LINE);
    off += r->bufferSize;
    if (off > MCCL_DEV_RESOURCE_MAX_BYTES) return 0;
    r = r == barReq ? reqs->resourceRequirementsList : r->next;
  }
  off = (off + MCCL_DEV_RESOURCE_LINE - 1) & ~(size_t)(MCCL_DEV_RESOURCE_LINE - 1);
  return off ? off : MCCL_DEV_RESOURCE_LINE;  // never empty: the window is also the record's key
}

static void setHandles(const mcclDevResourceRequirements* barReq, const mcclDevCommRequirements* reqs) {
  size_t off = 0;
  const mcclDevResourceRequirements* r = barReq;
  while (r) {
    size_t align = r->bufferAlign > MCCL_DEV_RESOURCE_LINE ? r->bufferAlign : MCCL_DEV_RESOURCE_LINE;
    off = (off + align - 1) & ~(align - 1);
    if (r != barReq && r->outBufferHandle) *r->outBufferHandle = (mcclDevResourceHandle)(off / MCCL_DEV_RESOURCE_LINE);
    off += r->bufferSize;
    r = r == barReq ? reqs->resourceRequirementsList : r->next;
  }
}

mcclResult_t mcclLabDevCommCreate(mcclLabComm* comm, const mcclDevCommRequirements* reqs, mcclDevComm* devComm) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  if (mcclIsAborted(comm->abortFlag)) {
    WARN("Invalid usage: rank %d's communicator is aborted: no device communicator", comm->rank);
    return mcclInvalidUsage;
  }
  int lsaRank = 0, lsaSize = 1;
  MCCLCHECK(mcclDevLsaTeamOf(comm, &lsaRank, &lsaSize));
  // A refusal found here is this rank's alone: it still takes part in the window registration (with no
  // buffer), so the peers fail there at once instead of waiting for it.
  mcclResult_t localRes = mcclSuccess;
  mcclLsaBarrierHandle bar = {0, 0};
  mcclDevResourceRequirements barReq;
  size_t bytes = 0;
  if (reqs == NULL || devComm == NULL) {
    WARN("Invalid argument: rank %d: reqs %p or devComm %p is NULL", comm->rank, (const void*)reqs, (void*)devComm);
    localRes = mcclInvalidArgument;
  } else if ((localRes = checkRequirements(comm, reqs, lsaSize)) == mcclSuccess) {
    int nBarriers = reqs->barrierCount > reqs->lsaBarrierCount ? reqs->barrierCount : reqs->lsaBarrierCount;
    mcclTeam lsa = {lsaSize, lsaRank, 1};
    localRes = mcclLsaBarrierCreateRequirement(lsa, nBarriers, &bar, &barReq);
    if (localRes == mcclSuccess && (bytes = layoutResources(&barReq, reqs, &bar.bufHandle)) == 0) {
      WARN(
          "Invalid argument: reqs: %d barriers and the resource buffers need more than the resource window's %zu "
          "bytes",
          nBarriers, MCCL_DEV_RESOURCE_MAX_BYTES);
      localRes = mcclInvalidArgument;
    }
  }
  int saved = -1;
  CUDACHECK(cudaGetDevice(&saved));
  mcclResult_t res = mcclSuccess;
  void* buf = NULL;
  mcclLabWindow* labWin = NULL;
  mcclWindow_t resWin = NULL;
  struct devCommRec* rec = NULL;
  CUDACHECKGOTO(cudaSetDevice(comm->cudaDev), res, fail);
  if (localRes == mcclSuccess) {
    // EXERCISE(09.devcomm) STUB: res = mcclExerciseStub("09.devcomm"); goto fail;
    // Zeroed before any peer can map it: epochs and inboxes start at 0 on every rank.
    MCCLCHECKGOTO(mcclMemAlloc(&buf, bytes), res, fail);
    CUDACHECKGOTO(cudaMemset(buf, 0, bytes), res, fail);
    CUDACHECKGOTO(cudaStreamSynchronize(cudaStreamLegacy), res, fail);
    MCCLCHECKGOTO(mcclLabWindowRegister(comm, buf, bytes, &labWin), res, fail);
    MCCLCHECKGOTO(mcclDevWindowCreate(comm, labWin, &resWin), res, fail);
    rec = (struct devCommRec*)calloc(1, sizeof(*rec));
    if (rec == NULL) {
      WARN("Out of memory for a device communicator's record");
      res = mcclSystemError;
      goto fail;
    }
    memset(devComm, 0, sizeof(*devComm));
    devComm->rank = comm->rank;
    devComm->nRanks = comm->nRanks;
    devComm->nRanks_rcp32 =
        (uint32_t)(0xffffffffu / (uint32_t)comm->nRanks + ((comm->nRanks & (comm->nRanks - 1)) == 0));
    devComm->lsaRank = lsaRank;
    devComm->lsaSize = lsaSize;
    devComm->lsaSize_rcp32 = (uint32_t)(0xffffffffu / (uint32_t)lsaSize + ((lsaSize & (lsaSize - 1)) == 0));
    devComm->resourceWindow = resWin;
    MCCLCHECKGOTO(mcclDevWindowGetHost(comm, resWin, &devComm->resourceWindow_inlined), res, fail);
    devComm->lsaBarrier = bar;
    // END EXERCISE(09.devcomm)
  } else {
    mcclLabWindowRegister(comm, NULL, 0, &labWin);  // the refusal the peers see; it fails here too
    res = localRes;
    goto fail;
  }
  setHandles(&barReq, reqs);
  devComm->windowTable = tableFirst(comm);  // the resource window made the table, if no window had
  rec->comm = comm;
  rec->resourceWindow = resWin;
  rec->labWin = labWin;
  rec->buf = buf;
  pthread_mutex_lock(&recLock);
  rec->next = devComms;
  devComms = rec;
  pthread_mutex_unlock(&recLock);
  cudaSetDevice(saved);
  INFO(MCCL_INIT, "rank %d: device communicator: LSA rank %d of %d, %d barriers, resource window %p (%zu bytes)",
       comm->rank, lsaRank, lsaSize, bar.nBarriers, (void*)resWin, bytes);
  return mcclSuccess;
fail:
  free(rec);
  if (resWin) mcclDevWindowDestroy(comm, resWin);
  if (labWin) mcclLabWindowDeregister(comm, labWin);
  if (buf) mcclMemFree(buf);
  cudaSetDevice(saved);
  return res;
}

mcclResult_t mcclLabDevCommDestroy(mcclLabComm* comm, const mcclDevComm* devComm) {
  MCCL_ARGCHECK(comm != NULL && devComm != NULL, "comm %p or devComm %p is NULL", (void*)comm, (const void*)devComm);
  pthread_mutex_lock(&recLock);
  struct devCommRec** pp = &devComms;
  while (*pp && (*pp)->resourceWindow != devComm->resourceWindow) pp = &(*pp)->next;
  struct devCommRec* rec = *pp;
  if (rec && rec->comm == comm) *pp = rec->next;
  pthread_mutex_unlock(&recLock);
  if (rec == NULL) {
    WARN(
        "Invalid argument: devComm %p (resource window %p) is not a live device communicator (destroyed already, "
        "or never created)",
        (const void*)devComm, (void*)devComm->resourceWindow);
    return mcclInvalidArgument;
  }
  if (rec->comm != comm) {
    WARN("Invalid argument: devComm %p was created on communicator %p, not on %p", (const void*)devComm,
         (const void*)rec->comm, (void*)comm);
    return mcclInvalidArgument;
  }
  mcclResult_t res = mcclDevWindowDestroy(comm, rec->resourceWindow), r;
  r = mcclLabWindowDeregister(comm, rec->labWin);
  if (r != mcclSuccess && res == mcclSuccess) res = r;
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  cudaSetDevice(comm->cudaDev);
  r = mcclMemFree(rec->buf);
  if (r != mcclSuccess && res == mcclSuccess) res = r;
  if (saved >= 0) cudaSetDevice(saved);
  free(rec);
  return res;
}

mcclResult_t mcclLabDevRelease(mcclLabComm* comm) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  mcclResult_t res = mcclSuccess, r;
  for (;;) {  // device communicators first: each destroys its resource window, a device window
    pthread_mutex_lock(&recLock);
    struct devCommRec* rec = devComms;
    while (rec && rec->comm != comm) rec = rec->next;
    mcclDevComm dc;
    if (rec) dc.resourceWindow = rec->resourceWindow;
    pthread_mutex_unlock(&recLock);
    if (rec == NULL) break;
    if ((r = mcclLabDevCommDestroy(comm, &dc)) != mcclSuccess && res == mcclSuccess) res = r;
  }
  for (;;) {
    pthread_mutex_lock(&recLock);
    struct devWindow* dw = windows;
    while (dw && dw->comm != comm) dw = dw->next;
    mcclWindow_t devWin = dw ? dw->dev : NULL;
    pthread_mutex_unlock(&recLock);
    if (devWin == NULL) break;
    if ((r = mcclDevWindowDestroy(comm, devWin)) != mcclSuccess && res == mcclSuccess) res = r;
  }
  return res;
}
