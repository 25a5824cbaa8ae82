// Device memory on memfd + mmap: the VMM calls, cuMemAlloc/cudaMalloc, export/import of POSIX-fd handles,
// host allocations and registrations, pointer attributes. All bookkeeping lives in one table under
// simG.lock: allocation handles, VA reservations (each with its mappings), and plain ranges.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "sim_internal.h"

typedef struct simHandle {
  struct simHandle* next;
  int fd;                   // the memfd: the memory itself
  size_t size;
  CUmemAllocationProp prop;
  int refs;                 // cuMemCreate/Import/RetainAllocationHandle minus cuMemRelease
  int maps;                 // live cuMemMap mappings
  size_t accounted;         // bytes charged to prop.location.id's device in this process
  unsigned long long id;
} simHandle;

typedef struct simMap {
  struct simMap* next;
  uintptr_t va;
  size_t size, offset;
  simHandle* h;
  unsigned char access[SIM_MAX_DEVICES];  // CU_MEM_ACCESS_FLAGS_PROT_* per device
  unsigned char hostAccess;
} simMap;

enum { R_RESERVE = 1, R_ALLOC, R_HOSTALLOC, R_HOSTREG };
typedef struct simRange {
  struct simRange* next;
  int kind;
  uintptr_t base;
  size_t size;
  int device;
  int fd;                   // R_ALLOC backing memfd
  size_t accounted;
  unsigned int flags;
  unsigned long long id;
  simMap* maps;             // R_RESERVE
} simRange;

static simHandle* handles;
static simRange* ranges;
static unsigned long long nextId = 1;
static size_t pageSize;

static size_t roundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Set on first use by whichever thread gets here first (every thread computes the same value):
// relaxed atomics, so concurrent first calls (mcclLabCommInitAll's init threads) are no data race.
static size_t page(void) {
  size_t p = __atomic_load_n(&pageSize, __ATOMIC_RELAXED);
  if (!p) {
    p = (size_t)sysconf(_SC_PAGESIZE);
    __atomic_store_n(&pageSize, p, __ATOMIC_RELAXED);
  }
  return p;
}

static simHandle* findHandle(CUmemGenericAllocationHandle hv) {
  for (simHandle* h = handles; h; h = h->next)
    if ((CUmemGenericAllocationHandle)(uintptr_t)h == hv) return h;
  return NULL;
}

// Frees a handle once nothing refers to it: no user reference and no mapping (the driver's rule).
static void maybeFreeHandle(simHandle* h) {
  if (h->refs > 0 || h->maps > 0) return;
  for (simHandle** p = &handles; *p; p = &(*p)->next)
    if (*p == h) {
      *p = h->next;
      break;
    }
  if (h->accounted) simG.dev[h->prop.location.id].used -= h->accounted;
  close(h->fd);
  free(h);
}

static simRange* findRangeContaining(uintptr_t p) {
  for (simRange* r = ranges; r; r = r->next)
    if (p >= r->base && p - r->base < r->size) return r;
  return NULL;
}

static simRange* findRangeOverlapping(uintptr_t p, size_t n, int kindMask) {
  for (simRange* r = ranges; r; r = r->next)
    if ((kindMask & (1 << r->kind)) && p < r->base + r->size && r->base < p + n) return r;
  return NULL;
}

static void unlinkRange(simRange* r) {
  for (simRange** p = &ranges; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      return;
    }
}

static simMap* findMap(simRange* r, uintptr_t p) {
  if (!r || r->kind != R_RESERVE) return NULL;
  for (simMap* m = r->maps; m; m = m->next)
    if (p >= m->va && p - m->va < m->size) return m;
  return NULL;
}

// The mappings making up [p, p+n) exactly: whole mappings, no holes. Returns their count, 0 if none fit.
static int collectMaps(uintptr_t p, size_t n, simRange** rOut, simMap** out, int max) {
  simRange* r = findRangeContaining(p);
  if (!r || r->kind != R_RESERVE || n == 0 || p + n > r->base + r->size) return 0;
  int k = 0;
  uintptr_t at = p;
  while (at < p + n) {
    simMap* m = findMap(r, at);
    if (!m || m->va != at || m->va + m->size > p + n || k == max) return 0;
    out[k++] = m;
    at += m->size;
  }
  *rOut = r;
  return k;
}

static int protOf(const simMap* m) {
  int a = m->hostAccess;
  for (int d = 0; d < SIM_MAX_DEVICES; d++) a |= m->access[d];
  if ((a & CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return PROT_READ | PROT_WRITE;
  return (a & CU_MEM_ACCESS_FLAGS_PROT_READ) ? PROT_READ : PROT_NONE;
}

// Puts a PROT_NONE reservation back over [va, va+n): the VA stays reserved, the memfd pages go.
static void restoreReservation(uintptr_t va, size_t n) {
  void* p = mmap((void*)va, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) fprintf(stderr, "minccl-sim: restoring reservation at %#lx failed: %s\n", va, strerror(errno));
}

static void dropMap(simRange* r, simMap* m) {
  for (simMap** p = &r->maps; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      break;
    }
  restoreReservation(m->va, m->size);
  m->h->maps--;
  maybeFreeHandle(m->h);
  free(m);
}

static int locationNode(const CUmemLocation* loc, int* node) {
  switch (loc->type) {
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (loc->id < 0 || loc->id >= simG.numaNodes) return 0;
      *node = loc->id;
      return 1;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: {
      unsigned cpu = 0, n = 0;
      *node = syscall(SYS_getcpu, &cpu, &n, NULL) == 0 ? (int)n : 0;
      return 1;
    }
    case CU_MEM_LOCATION_TYPE_HOST: *node = -1; return 1;
    default: return 0;
  }
}

static int isHostLoc(CUmemLocationType t) {
  return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

// Binds a host-NUMA memfd's pages to their node: mbind on a shared mapping sets the shmem object's policy.
static void bindToNode(int fd, size_t size, int node) {
  if (simG.numaNodes < 2 || node < 0 || node >= 64) return;
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return;
  unsigned long mask = 1ul << node;
  if (syscall(SYS_mbind, p, size, 2 /* MPOL_BIND */, &mask, 64ul, 0u) != 0)
    fprintf(stderr, "minccl-sim: mbind to host NUMA node %d failed: %s\n", node, strerror(errno));
  munmap(p, size);
}

// The memfd's name carries what an importer in another process needs to rebuild the properties.
static int newMemfd(size_t size, int locType, int locId, unsigned long long handleTypes) {
  char name[96];
  snprintf(name, sizeof(name), "minccl-sim:l=%d:i=%d:t=%llu", locType, locId, handleTypes);
  int fd = (int)syscall(SYS_memfd_create, name, 1u /* MFD_CLOEXEC */);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static CUresult chargeDevice(int dev, size_t bytes) {
  if (simG.dev[dev].used + bytes > simG.devMem || bytes > simG.devMem) return CUDA_ERROR_OUT_OF_MEMORY;
  simG.dev[dev].used += bytes;
  return CUDA_SUCCESS;
}

// ---- VMM -------------------------------------------------------------------------------------

static CUresult checkProp(const CUmemAllocationProp* prop) {
  if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    if (!simDeviceValid(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
  }
  int node;
  return locationNode(&prop->location, &node) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags option) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = checkProp(prop)) != CUDA_SUCCESS) return r;
  *granularity = SIM_GRANULARITY;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!handle || flags != 0 || size == 0 || size % SIM_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
  if ((r = checkProp(prop)) != CUDA_SUCCESS) return r;
  unsigned long long types = (unsigned long long)prop->requestedHandleTypes;
  // No fabric (and no Windows handles) here: NOT_SUPPORTED is what makes NCCL retry without them.
  if (types & (CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_WIN32 | CU_MEM_HANDLE_TYPE_WIN32_KMT))
    return CUDA_ERROR_NOT_SUPPORTED;
  if (types & ~(unsigned long long)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  int isDev = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  int node = -1;
  if (!isDev) locationNode(&prop->location, &node);
  simHandle* h = calloc(1, sizeof(*h));
  if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&simG.lock);
  if (isDev && (r = chargeDevice(prop->location.id, size)) != CUDA_SUCCESS) goto fail_charge;
  h->fd = newMemfd(size, prop->location.type, isDev ? prop->location.id : node, types);
  if (h->fd < 0) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
    goto fail_fd;
  }
  if (!isDev) bindToNode(h->fd, size, node);
  h->size = size;
  h->prop = *prop;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) h->prop.location.id = node;
  h->refs = 1;
  h->accounted = isDev ? size : 0;
  h->id = nextId++;
  h->next = handles;
  handles = h;
  pthread_mutex_unlock(&simG.lock);
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
  return CUDA_SUCCESS;
fail_fd:
  if (isDev) simG.dev[prop->location.id].used -= size;
fail_charge:
  pthread_mutex_unlock(&simG.lock);
  free(h);
  return r;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&simG.lock);
  simHandle* h = findHandle(handle);
  if (!h || h->refs <= 0) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    h->refs--;
    maybeFreeHandle(h);  // memory outlives the handle while still mapped
  }
  pthread_mutex_unlock(&simG.lock);
  return r;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!ptr || size == 0 || size % SIM_GRANULARITY || flags != 0 || (alignment & (alignment - 1)))
    return CUDA_ERROR_INVALID_VALUE;
  if (alignment < SIM_GRANULARITY) alignment = SIM_GRANULARITY;
  const int mflags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void* base = MAP_FAILED;
  if (addr && addr % alignment == 0) {
    // Honour the hint only if the range is free: never clobber an existing mapping.
    base = mmap((void*)addr, size, PROT_NONE, mflags | MAP_FIXED_NOREPLACE, -1, 0);
    if (base != MAP_FAILED && base != (void*)addr) {
      munmap(base, size);
      base = MAP_FAILED;
    }
  }
  if (base == MAP_FAILED) {
    // Over-reserve by the alignment, then trim both ends.
    size_t total = size + alignment;
    char* raw = mmap(NULL, total, PROT_NONE, mflags, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t aligned = roundUp((uintptr_t)raw, alignment);
    if (aligned > (uintptr_t)raw) munmap(raw, aligned - (uintptr_t)raw);
    uintptr_t end = (uintptr_t)raw + total;
    if (end > aligned + size) munmap((void*)(aligned + size), end - (aligned + size));
    base = (void*)aligned;
  }
  simRange* rg = calloc(1, sizeof(*rg));
  if (!rg) {
    munmap(base, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  rg->kind = R_RESERVE;
  rg->base = (uintptr_t)base;
  rg->size = size;
  rg->device = -1;
  rg->fd = -1;
  pthread_mutex_lock(&simG.lock);
  rg->id = nextId++;
  rg->next = ranges;
  ranges = rg;
  pthread_mutex_unlock(&simG.lock);
  *ptr = (CUdeviceptr)(uintptr_t)base;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&simG.lock);
  simRange* rg = findRangeContaining((uintptr_t)ptr);
  if (!rg || rg->kind != R_RESERVE || rg->base != (uintptr_t)ptr || rg->size != size) {
    pthread_mutex_unlock(&simG.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (rg->maps) {  // the driver refuses to free a range that still has mappings
    pthread_mutex_unlock(&simG.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  unlinkRange(rg);
  pthread_mutex_unlock(&simG.lock);
  munmap((void*)rg->base, rg->size);
  free(rg);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (flags != 0 || size == 0 || size % SIM_GRANULARITY || ptr % SIM_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
  if (offset != 0) return CUDA_ERROR_NOT_SUPPORTED;  // "currently must be zero": what the driver returns
  simMap* m = calloc(1, sizeof(*m));
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&simG.lock);
  simHandle* h = findHandle(handle);
  simRange* rg = findRangeContaining((uintptr_t)ptr);
  if (!h || h->refs <= 0) {
    r = CUDA_ERROR_INVALID_HANDLE;
    goto fail;
  }
  if (size > h->size) {  // past the end of the allocation: NOT_SUPPORTED on an H200 (driver 580)
    r = CUDA_ERROR_NOT_SUPPORTED;
    goto fail;
  }
  if (!rg || rg->kind != R_RESERVE || (uintptr_t)ptr + size > rg->base + rg->size) {
    r = CUDA_ERROR_INVALID_VALUE;
    goto fail;
  }
  for (simMap* o = rg->maps; o; o = o->next)
    if ((uintptr_t)ptr < o->va + o->size && o->va < (uintptr_t)ptr + size) {
      r = CUDA_ERROR_INVALID_VALUE;  // the VA is already backed
      goto fail;
    }
  // PROT_NONE until cuMemSetAccess: touching a fresh mapping faults, as on a GPU.
  if (mmap((void*)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)offset) == MAP_FAILED) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
    goto fail;
  }
  m->va = (uintptr_t)ptr;
  m->size = size;
  m->offset = offset;
  m->h = h;
  h->maps++;
  m->next = rg->maps;
  rg->maps = m;
  pthread_mutex_unlock(&simG.lock);
  return CUDA_SUCCESS;
fail:
  pthread_mutex_unlock(&simG.lock);
  free(m);
  return r;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  simMap* maps[256];
  simRange* rg = NULL;
  pthread_mutex_lock(&simG.lock);
  int n = collectMaps((uintptr_t)ptr, size, &rg, maps, 256);
  for (int i = 0; i < n; i++) dropMap(rg, maps[i]);
  if (n == 0) {
    // A reserved range with no mapping at all unmaps as a no-op (the driver's answer on an H200);
    // a range that cuts through a mapping is refused.
    simRange* r = findRangeContaining((uintptr_t)ptr);
    int empty = r && r->kind == R_RESERVE && size && (uintptr_t)ptr + size <= r->base + r->size;
    for (simMap* m = empty ? r->maps : NULL; m; m = m->next)
      if ((uintptr_t)ptr < m->va + m->size && m->va < (uintptr_t)ptr + size) empty = 0;
    n = empty;
  }
  pthread_mutex_unlock(&simG.lock);
  return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    unsigned f = (unsigned)desc[i].flags;
    if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
    if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
      if (!simDeviceValid(desc[i].location.id)) return CUDA_ERROR_INVALID_DEVICE;
    } else if (!isHostLoc(desc[i].location.type)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  simMap* maps[256];
  simRange* rg = NULL;
  pthread_mutex_lock(&simG.lock);
  int n = collectMaps((uintptr_t)ptr, size, &rg, maps, 256);
  for (int k = 0; k < n; k++) {
    for (size_t i = 0; i < count; i++) {
      if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE) maps[k]->access[desc[i].location.id] = desc[i].flags;
      else maps[k]->hostAccess = desc[i].flags;
    }
    if (mprotect((void*)maps[k]->va, maps[k]->size, protOf(maps[k])) != 0) r = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&simG.lock);
  return n ? r : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
  if (location->type == CU_MEM_LOCATION_TYPE_DEVICE && !simDeviceValid(location->id)) return CUDA_ERROR_INVALID_DEVICE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE && !isHostLoc(location->type)) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&simG.lock);
  simMap* m = findMap(findRangeContaining((uintptr_t)ptr), (uintptr_t)ptr);
  if (!m) r = CUDA_ERROR_INVALID_VALUE;
  else *flags = location->type == CU_MEM_LOCATION_TYPE_DEVICE ? m->access[location->id] : m->hostAccess;
  pthread_mutex_unlock(&simG.lock);
  return r;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&simG.lock);
  simMap* m = findMap(findRangeContaining((uintptr_t)addr), (uintptr_t)addr);
  if (!m) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    m->h->refs++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->h;
  }
  pthread_mutex_unlock(&simG.lock);
  return r;
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                        CUmemGenericAllocationHandle handle) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&simG.lock);
  simHandle* h = findHandle(handle);
  if (!h || h->refs <= 0) r = CUDA_ERROR_INVALID_VALUE;
  else *prop = h->prop;
  pthread_mutex_unlock(&simG.lock);
  return r;
}

// ---- export / import ---------------------------------------------------------------------------

CUresult CUDAAPI cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType, unsigned long long flags) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!shareableHandle || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (handleType == CU_MEM_HANDLE_TYPE_FABRIC || handleType == CU_MEM_HANDLE_TYPE_WIN32 ||
      handleType == CU_MEM_HANDLE_TYPE_WIN32_KMT)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&simG.lock);
  simHandle* h = findHandle(handle);
  if (!h || h->refs <= 0 || !(h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    r = CUDA_ERROR_INVALID_VALUE;  // unknown handle, or not created exportable as a POSIX fd
  } else {
    int fd = dup(h->fd);  // a new fd each time: the caller owns and closes it
    if (fd < 0) r = CUDA_ERROR_OUT_OF_MEMORY;
    else *(int*)shareableHandle = fd;
  }
  pthread_mutex_unlock(&simG.lock);
  return r;
}

CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                CUmemAllocationHandleType shHandleType) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  if (shHandleType == CU_MEM_HANDLE_TYPE_FABRIC || shHandleType == CU_MEM_HANDLE_TYPE_WIN32 ||
      shHandleType == CU_MEM_HANDLE_TYPE_WIN32_KMT)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  int fd = (int)(intptr_t)osHandle;
  // Only memfds made by a sim cuMemCreate (in any process) are device memory.
  char path[64], target[256];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t len = fd >= 0 ? readlink(path, target, sizeof(target) - 1) : -1;
  if (len <= 0) return CUDA_ERROR_INVALID_VALUE;
  target[len] = '\0';
  int locType = 0, locId = 0;
  unsigned long long types = 0;
  struct stat st;
  if (sscanf(target, "/memfd:minccl-sim:l=%d:i=%d:t=%llu", &locType, &locId, &types) != 3 || fstat(fd, &st) != 0 ||
      st.st_size <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (locType == CU_MEM_LOCATION_TYPE_DEVICE && !simDeviceValid(locId)) return CUDA_ERROR_INVALID_DEVICE;
  simHandle* h = calloc(1, sizeof(*h));
  if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
  h->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the sim keeps its own copy: the caller still closes its fd
  if (h->fd < 0) {
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  h->size = (size_t)st.st_size;
  h->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  h->prop.location.type = (CUmemLocationType)locType;
  h->prop.location.id = locId;
  h->prop.requestedHandleTypes = (CUmemAllocationHandleType)types;
  h->refs = 1;
  pthread_mutex_lock(&simG.lock);
  h->id = nextId++;
  h->next = handles;
  handles = h;
  pthread_mutex_unlock(&simG.lock);
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
  return CUDA_SUCCESS;
}

// ---- cuMemAlloc / cudaMalloc ---------------------------------------------------------------------

static CUresult allocDevice(uintptr_t* out, size_t size, int dev) {
  size_t bytes = roundUp(size, page());
  simRange* rg = calloc(1, sizeof(*rg));
  if (!rg) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&simG.lock);
  CUresult r = chargeDevice(dev, bytes);
  pthread_mutex_unlock(&simG.lock);
  if (r != CUDA_SUCCESS) goto fail_charge;
  rg->fd = newMemfd(bytes, CU_MEM_LOCATION_TYPE_DEVICE, dev, 0);
  if (rg->fd < 0) goto fail_fd;
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, rg->fd, 0);
  if (p == MAP_FAILED) goto fail_map;
  rg->kind = R_ALLOC;
  rg->base = (uintptr_t)p;
  rg->size = size;
  rg->accounted = bytes;
  rg->device = dev;
  pthread_mutex_lock(&simG.lock);
  rg->id = nextId++;
  rg->next = ranges;
  ranges = rg;
  pthread_mutex_unlock(&simG.lock);
  *out = (uintptr_t)p;
  return CUDA_SUCCESS;
fail_map:
  close(rg->fd);
fail_fd:
  pthread_mutex_lock(&simG.lock);
  simG.dev[dev].used -= bytes;
  pthread_mutex_unlock(&simG.lock);
  r = CUDA_ERROR_OUT_OF_MEMORY;
fail_charge:
  free(rg);
  return r;
}

static CUresult freeDevice(uintptr_t p) {
  pthread_mutex_lock(&simG.lock);
  simRange* rg = findRangeContaining(p);
  if (!rg || rg->kind != R_ALLOC || rg->base != p) {
    pthread_mutex_unlock(&simG.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  int dev = rg->device;
  pthread_mutex_unlock(&simG.lock);
  // As on a GPU, freeing synchronizes: no queued copy may still write into the memory.
  simDeviceDrain(dev, 0);
  pthread_mutex_lock(&simG.lock);
  rg = findRangeContaining(p);
  if (!rg || rg->kind != R_ALLOC || rg->base != p) {  // another thread freed it meanwhile
    pthread_mutex_unlock(&simG.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  unlinkRange(rg);
  simG.dev[rg->device].used -= rg->accounted;
  pthread_mutex_unlock(&simG.lock);
  munmap((void*)rg->base, rg->accounted);
  close(rg->fd);
  free(rg);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  CUresult r = simCheckInit();
  int dev;
  if (r != CUDA_SUCCESS) return r;
  if ((r = simCurrentDevice(&dev)) != CUDA_SUCCESS) return r;
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t p;
  if ((r = allocDevice(&p, bytesize, dev)) == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
  return r;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  return freeDevice((uintptr_t)dptr);
}

CUresult CUDAAPI cuMemGetInfo(size_t* free, size_t* total) {
  CUresult r = simCheckInit();
  int dev;
  if (r != CUDA_SUCCESS) return r;
  if ((r = simCurrentDevice(&dev)) != CUDA_SUCCESS) return r;
  if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&simG.lock);
  *free = simG.devMem - simG.dev[dev].used;
  *total = simG.devMem;
  pthread_mutex_unlock(&simG.lock);
  return CUDA_SUCCESS;
}

cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) {
  simRtInit();
  if (!devPtr) return simRtErr(cudaErrorInvalidValue);
  if (size == 0) {  // the runtime returns success and a NULL pointer for zero bytes
    *devPtr = NULL;
    return cudaSuccess;
  }
  uintptr_t p;
  CUresult r = allocDevice(&p, size, simSelf()->ctx->device);
  if (r != CUDA_SUCCESS) return simRtErr(r == CUDA_ERROR_OUT_OF_MEMORY ? cudaErrorMemoryAllocation : (cudaError_t)r);
  *devPtr = (void*)p;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFree(void* devPtr) {
  simRtInit();
  if (!devPtr) return cudaSuccess;  // cudaFree(NULL): the runtime's initialization idiom
  return simRtErr(freeDevice((uintptr_t)devPtr) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t* free, size_t* total) {
  simRtInit();
  return simRtErr((cudaError_t)cuMemGetInfo(free, total));
}

// ---- host memory -------------------------------------------------------------------------------

static CUresult hostAlloc(void** pp, size_t size, unsigned int flags, int dev) {
  size_t bytes = roundUp(size, page());
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  simRange* rg = calloc(1, sizeof(*rg));
  if (!rg) {
    munmap(p, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  rg->kind = R_HOSTALLOC;
  rg->base = (uintptr_t)p;
  rg->size = size;
  rg->accounted = bytes;  // host memory is not charged to the device; this is the mapping length
  rg->device = dev;
  rg->fd = -1;
  rg->flags = flags;
  pthread_mutex_lock(&simG.lock);
  rg->id = nextId++;
  rg->next = ranges;
  ranges = rg;
  pthread_mutex_unlock(&simG.lock);
  *pp = p;
  return CUDA_SUCCESS;
}

static CUresult hostFree(void* p) {
  pthread_mutex_lock(&simG.lock);
  simRange* rg = findRangeContaining((uintptr_t)p);
  if (!rg || rg->kind != R_HOSTALLOC || rg->base != (uintptr_t)p) {
    pthread_mutex_unlock(&simG.lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  unlinkRange(rg);
  pthread_mutex_unlock(&simG.lock);
  simDeviceDrain(rg->device, 0);  // freeing pinned memory synchronizes, as in the runtime
  munmap(p, rg->accounted);
  free(rg);
  return CUDA_SUCCESS;
}

static CUresult hostDevicePointer(uintptr_t* out, void* p, unsigned int flags) {
  if (!out || !p || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&simG.lock);
  simRange* rg = findRangeContaining((uintptr_t)p);
  int ok = rg && (rg->kind == R_HOSTALLOC || rg->kind == R_HOSTREG);
  pthread_mutex_unlock(&simG.lock);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  *out = (uintptr_t)p;  // unified addressing: the device sees pinned host memory at the host address
  return CUDA_SUCCESS;
}

static CUresult hostRegister(void* p, size_t size, unsigned int flags, int dev) {
  if (!p || size == 0 || (flags & ~0xfu)) return CUDA_ERROR_INVALID_VALUE;
  // Every page must exist (the driver pins them); mincore fails with ENOMEM on a hole.
  uintptr_t start = (uintptr_t)p & ~(page() - 1);
  size_t len = roundUp((uintptr_t)p + size - start, page());
  unsigned char vec[256];
  for (size_t off = 0; off < len; off += 256 * page()) {
    size_t chunk = len - off < 256 * page() ? len - off : 256 * page();
    if (mincore((void*)(start + off), chunk, vec) != 0) return CUDA_ERROR_INVALID_VALUE;
  }
  simRange* rg = calloc(1, sizeof(*rg));
  if (!rg) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&simG.lock);
  if (findRangeOverlapping((uintptr_t)p, size, (1 << R_HOSTREG) | (1 << R_HOSTALLOC))) {
    pthread_mutex_unlock(&simG.lock);
    free(rg);
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  rg->kind = R_HOSTREG;
  rg->base = (uintptr_t)p;
  rg->size = size;
  rg->device = dev;
  rg->fd = -1;
  rg->flags = flags;
  rg->id = nextId++;
  rg->next = ranges;
  ranges = rg;
  pthread_mutex_unlock(&simG.lock);
  return CUDA_SUCCESS;
}

static CUresult hostUnregister(void* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&simG.lock);
  simRange* rg = findRangeContaining((uintptr_t)p);
  if (!rg || rg->kind != R_HOSTREG || rg->base != (uintptr_t)p) {
    pthread_mutex_unlock(&simG.lock);
    // Inside a registration but not its start: the driver says invalid value, not "not registered".
    return rg && rg->kind == R_HOSTREG ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  unlinkRange(rg);
  pthread_mutex_unlock(&simG.lock);
  simDeviceDrain(rg->device, 0);
  free(rg);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  CUresult r = simCheckInit();
  int dev;
  if (r != CUDA_SUCCESS) return r;
  if ((r = simCurrentDevice(&dev)) != CUDA_SUCCESS) return r;
  if (!pp || bytesize == 0 || (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                                 CU_MEMHOSTALLOC_WRITECOMBINED)))
    return CUDA_ERROR_INVALID_VALUE;
  return hostAlloc(pp, bytesize, Flags, dev);
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  return hostFree(p);
}

CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  uintptr_t d;
  if (!pdptr) return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostDevicePointer(&d, p, Flags)) == CUDA_SUCCESS) *pdptr = (CUdeviceptr)d;
  return r;
}

CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  CUresult r = simCheckInit();
  int dev;
  if (r != CUDA_SUCCESS) return r;
  if ((r = simCurrentDevice(&dev)) != CUDA_SUCCESS) return r;
  return hostRegister(p, bytesize, Flags, dev);
}

CUresult CUDAAPI cuMemHostUnregister(void* p) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  return hostUnregister(p);
}

cudaError_t CUDARTAPI cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  simRtInit();
  if (!pHost || (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined)))
    return simRtErr(cudaErrorInvalidValue);
  if (size == 0) {
    *pHost = NULL;
    return cudaSuccess;
  }
  CUresult r = hostAlloc(pHost, size, flags, simSelf()->ctx->device);
  return simRtErr(r == CUDA_SUCCESS ? cudaSuccess : cudaErrorMemoryAllocation);
}

cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, cudaHostAllocDefault); }

cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
  simRtInit();
  if (!ptr) return cudaSuccess;
  return simRtErr(hostFree(ptr) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  simRtInit();
  uintptr_t d;
  if (!pDevice) return simRtErr(cudaErrorInvalidValue);
  CUresult r = hostDevicePointer(&d, pHost, flags);
  if (r != CUDA_SUCCESS) return simRtErr(cudaErrorInvalidValue);
  *pDevice = (void*)d;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  simRtInit();
  return simRtErr((cudaError_t)hostRegister(ptr, size, flags, simSelf()->ctx->device));
}

cudaError_t CUDARTAPI cudaHostUnregister(void* ptr) {
  simRtInit();
  return simRtErr((cudaError_t)hostUnregister(ptr));
}

// ---- lookups and pointer attributes -------------------------------------------------------------

int simLookup(uintptr_t p, simPtrInfo* info) {
  memset(info, 0, sizeof(*info));
  int found = 1;
  pthread_mutex_lock(&simG.lock);
  simRange* rg = findRangeContaining(p);
  if (!rg) {
    found = 0;
  } else if (rg->kind == R_RESERVE) {
    simMap* m = findMap(rg, p);
    if (!m) {
      found = 0;
    } else {
      int isDev = m->h->prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE;
      int cur = simSelf()->ctx ? simSelf()->ctx->device : 0;
      info->kind = isDev ? SIM_MEM_DEVICE : SIM_MEM_HOST;
      info->device = isDev ? m->h->prop.location.id : cur;
      info->base = rg->base;  // the driver reports the whole reservation as the range
      info->size = rg->size;
      info->mapBase = m->va;
      info->mapSize = m->size;
      info->vmm = info->mapped = 1;
      info->handleTypes = (unsigned long long)m->h->prop.requestedHandleTypes;
      info->access = m->access[cur];
      info->bufferId = m->h->id;
    }
  } else {
    info->kind = rg->kind == R_ALLOC ? SIM_MEM_DEVICE : SIM_MEM_HOST;
    info->device = rg->device;
    info->base = info->mapBase = rg->base;
    info->size = info->mapSize = rg->size;
    info->legacyIpc = rg->kind == R_ALLOC;
    info->mapped = 1;
    info->access = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    info->bufferId = rg->id;
    info->hostFlags = rg->flags;
  }
  pthread_mutex_unlock(&simG.lock);
  return found;
}

int simRangeUsable(uintptr_t p, size_t n, int hostOk) {
  if (n == 0) return 1;
  if (!p) return 0;
  pthread_mutex_lock(&simG.lock);
  int ok = 0;
  simRange* rg = findRangeContaining(p);
  if (!rg) {
    ok = hostOk && !findRangeOverlapping(p, n, 1 << R_RESERVE);  // pageable host memory
  } else if (rg->kind != R_RESERVE) {
    ok = p + n <= rg->base + rg->size || rg->kind == R_HOSTREG || hostOk;
  } else {
    // Inside a reservation, every byte must be mapped with access granted (else the GPU would fault).
    ok = 1;
    for (uintptr_t at = p; ok && at < p + n;) {
      simMap* m = findMap(rg, at);
      if (!m || protOf(m) == PROT_NONE) ok = 0;
      else at = m->va + m->size;
    }
    if (p + n > rg->base + rg->size) ok = 0;
  }
  pthread_mutex_unlock(&simG.lock);
  return ok;
}

CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  simPtrInfo info;
  if (!simLookup((uintptr_t)dptr, &info)) return CUDA_ERROR_NOT_FOUND;
  // The mapping (or allocation) the pointer lies in, as the driver answers.
  if (pbase) *pbase = (CUdeviceptr)info.mapBase;
  if (psize) *psize = info.mapSize;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  simPtrInfo info;
  // Unknown, and reserved but unmapped, addresses are both invalid to the driver (checked on an H200).
  if (!simLookup((uintptr_t)ptr, &info)) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext*)data = &simG.dev[info.device].primaryCtx; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned int*)data = info.kind == SIM_MEM_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr*)data = ptr; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (info.kind == SIM_MEM_DEVICE) return CUDA_ERROR_INVALID_VALUE;  // device memory has no host address
      *(void**)data = (void*)(uintptr_t)ptr;
      break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(int*)data = 0; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long*)data = info.bufferId; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int*)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int*)data = info.device; break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(int*)data = info.legacyIpc; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr*)data = (CUdeviceptr)info.base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t*)data = info.size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(int*)data = info.mapped; break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long*)data = info.handleTypes; break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *(int*)data = 0; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: *(int*)data = (int)info.access; break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(void**)data = NULL; break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: *(size_t*)data = info.mapSize; break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: *(void**)data = (void*)info.mapBase; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: *(unsigned long long*)data = info.bufferId; break;
    default: return simNotImplemented("cuPointerGetAttribute for this attribute");
  }
  return CUDA_SUCCESS;
}

cudaError_t CUDARTAPI cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
  simRtInit();
  if (!attributes) return simRtErr(cudaErrorInvalidValue);
  simPtrInfo info;
  if (!simLookup((uintptr_t)ptr, &info)) {
    // Unregistered host memory is not an error since CUDA 11.
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    attributes->devicePointer = NULL;
    attributes->hostPointer = (void*)ptr;
    return cudaSuccess;
  }
  attributes->device = info.device;
  attributes->devicePointer = (void*)ptr;
  if (info.kind == SIM_MEM_DEVICE) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->hostPointer = NULL;
  } else {
    attributes->type = cudaMemoryTypeHost;
    attributes->hostPointer = (void*)ptr;
  }
  return cudaSuccess;
}
