// Kernels on the CPU: registration, cudaGetFuncBySymbol, cuLaunchKernel, and the device-side runtime the
// portability header (common/include/mccl_device.h) calls: barriers, __syncwarp and per-block shared memory.
//
// A launch is an operation on its stream's worker (sim_stream.c, simEnqueueWork). The worker starts every
// thread of every block at once, each a host thread, and waits for them all before the stream moves on:
// blocks (and ranks in other processes) wait on each other through memory, so no block may run to
// completion before the others start. Each block has its own barriers and shared storage; a block thread
// finds them through its thread-local simKThread. The host threads of a block are a crew, kept for a later
// block of the same size once this one ends (see "crews" below).
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "sim_internal.h"

#define SIM_FUNC_MAGIC 0x5c7c7c04u
#define SIM_MAX_KERNEL_ARGS 16
#define SIM_NAMED_BARRIERS 16     // bar.sync names 0..15, as the hardware
#define SIM_MAX_SHMEM_DEFS 16     // MCCL_SHMEM_DEFINE variables one kernel may touch
#define SIM_MAX_DYN_SHMEM 232448  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
#define SIM_BARRIER_SPINS 2       // sched_yield rounds before a barrier waiter sleeps (threads >> cores)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SIM_BLOCK_STACK ((size_t)8 << 20)  // sanitizers need larger frames
#else
#define SIM_BLOCK_STACK ((size_t)1 << 20)
#endif

// What the header's trampoline receives (layout of its mcclSimThreadInfo: C has no dim3 constructors).
typedef struct {
  uint3 threadIdx, blockIdx;
  dim3 blockDim, gridDim;
} simThreadInfo;
typedef void (*simTrampoline)(const void* fn, void** params, const simThreadInfo* info);

struct CUfunc_st {
  uint32_t magic;
  const void* fn;  // the host symbol of the kernel (what cudaGetFuncBySymbol is given)
  const char* name;
  int nArgs;
  size_t argSize[SIM_MAX_KERNEL_ARGS], argAlign[SIM_MAX_KERNEL_ARGS];
  simTrampoline tramp;
  int warned;  // block size reduction reported
  struct CUfunc_st* next;
};

static pthread_mutex_t regLock = PTHREAD_MUTEX_INITIALIZER;
static struct CUfunc_st* kernels;

// A barrier: arrivals counted under a mutex; the last one publishes the reduction and bumps the
// generation (release store), which waiters watch with acquire loads: a few yielding spins, then a futex
// wait on the generation word (TSan sees the ordering through the atomics, not the futex).
typedef struct {
  pthread_mutex_t lock;
  int arrived, votes, expect;
  unsigned gen;   // __atomic: read by spinning waiters
  int result[2];  // votes of generation g in result[g & 1]
  // A warp's shuffles: lane l's value for generation g in lanes[g & 1][l], written before its arrival and read
  // after the generation completes (generation g+2, which reuses the row, needs every lane's next arrival).
  uint64_t lanes[2][32];
} simBar;

struct simCrew;

typedef struct simBlock {
  struct simLaunch* launch;
  struct simCrew* crew;  // the host threads running it, and its shared storage
  int nThreads;
  simBar bar[SIM_NAMED_BARRIERS];
  simBar warp[1024 / 32];
} simBlock;

typedef struct {
  simBlock* block;
  int tid;  // linear thread index in the block
  simThreadInfo info;
} simKThread;

// A crew: nThreads host threads that run one block, then wait for another block of the same size. Starting
// a host thread costs tens of microseconds (milliseconds under ThreadSanitizer) and a launch needs one per
// GPU thread, so crews are kept, up to MCCL_SIM_MAX_GRID_THREADS threads in all: beyond that a crew that ends
// its block, or an idle one of another size when a new crew is needed, is dismissed (its threads end and are
// joined), so that crews of many block sizes do not pile up (each thread holds a stack, and under
// ThreadSanitizer much more). A crew's shared storage stays with it: a kernel's
// MCCL_SHMEM_DEFINE reference is thread-local and bound on its thread's first use, so it must point at the
// storage of every block that thread's crew runs later. Each block gets it poisoned again, as a GPU's shared
// memory starts undefined.
typedef struct simCrew {
  int nThreads;
  pthread_mutex_t lock;
  pthread_cond_t go, done;
  uint64_t job;             // blocks given so far: a thread runs one when this moves past the last it ran
  int running;              // threads of the current block not done yet
  int quit;                 // dismissed: its threads end (and are joined)
  pthread_t* th;            // [nThreads]
  simKThread* threads;      // the current block's threads, [nThreads]
  pthread_mutex_t shmLock;  // the storage, for its threads' first uses
  int nShm;
  struct {
    const void* key;
    void* ptr;
    size_t size;
  } shm[SIM_MAX_SHMEM_DEFS];
  struct simCrew* next;  // the idle list
} simCrew;

typedef struct simLaunch {
  struct CUfunc_st* f;
  void* params[SIM_MAX_KERNEL_ARGS];
  char* argBuf;  // copies of the arguments, taken at launch time as the driver does
  int nBlocks, nThreads;
  simBlock* blocks;
  simKThread* threads;
  simCrew** crews;  // [nBlocks], while it runs
} simLaunch;

static __thread simKThread* curThread;

static void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fatal(const char* fmt, ...) {
  // A device-side misuse a GPU would hang or fault on: stop loudly, naming the kernel and thread.
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "minccl-sim: ERROR ");
  if (curThread) {
    simThreadInfo* i = &curThread->info;
    fprintf(stderr, "in kernel %s, block (%u,%u,%u) thread (%u,%u,%u): ", curThread->block->launch->f->name,
            i->blockIdx.x, i->blockIdx.y, i->blockIdx.z, i->threadIdx.x, i->threadIdx.y, i->threadIdx.z);
  }
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

static simKThread* self(const char* what) {
  if (!curThread) fatal("%s called outside a kernel", what);
  return curThread;
}

// ---- registration ----------------------------------------------------------------------------------

int mcclSimRegisterKernel(const void* fn, const char* name, int nArgs, const size_t* argSizes, const size_t* argAligns,
                          simTrampoline trampoline) {
  if (!fn || !name || !trampoline || nArgs < 0 || nArgs > SIM_MAX_KERNEL_ARGS)
    fatal("bad kernel registration of %s", name ? name : "(null)");
  pthread_mutex_lock(&regLock);
  for (struct CUfunc_st* k = kernels; k; k = k->next)
    if (k->fn == fn) {
      pthread_mutex_unlock(&regLock);
      return 1;
    }
  struct CUfunc_st* k = calloc(1, sizeof(*k));
  if (!k) fatal("out of memory registering kernel %s", name);
  k->magic = SIM_FUNC_MAGIC;
  k->fn = fn;
  k->name = name;
  k->nArgs = nArgs;
  for (int i = 0; i < nArgs; i++) k->argSize[i] = argSizes[i], k->argAlign[i] = argAligns[i];
  k->tramp = trampoline;
  k->next = kernels;
  kernels = k;
  pthread_mutex_unlock(&regLock);
  return 1;
}

static struct CUfunc_st* findKernel(const void* fn, CUfunction f) {
  struct CUfunc_st* found = NULL;
  pthread_mutex_lock(&regLock);
  for (struct CUfunc_st* k = kernels; k && !found; k = k->next)
    if ((fn && k->fn == fn) || (f && k == f)) found = k;
  pthread_mutex_unlock(&regLock);
  return found;
}

cudaError_t CUDARTAPI cudaGetFuncBySymbol(cudaFunction_t* functionPtr, const void* symbolPtr) {
  simRtInit();
  if (!functionPtr) return simRtErr(cudaErrorInvalidValue);
  struct CUfunc_st* k = symbolPtr ? findKernel(symbolPtr, NULL) : NULL;
  if (!k) return simRtErr(cudaErrorInvalidDeviceFunction);
  *functionPtr = k;
  return cudaSuccess;
}

// ---- barriers and shared memory (called from the header on block threads) ----------------------

static void barInit(simBar* b) {
  pthread_mutex_init(&b->lock, NULL);
}

static void barDestroy(simBar* b) {
  pthread_mutex_destroy(&b->lock);
}

static int barArrive(simBar* b, int nThreads, int vote, const char* what, int name) {
  pthread_mutex_lock(&b->lock);
  if (b->arrived == 0)
    b->expect = nThreads;
  else if (b->expect != nThreads)
    fatal("%s %d used with %d threads while %d threads wait on it with a count of %d", what, name, nThreads, b->arrived,
          b->expect);
  b->votes += vote != 0;
  unsigned g = b->gen;
  if (++b->arrived == nThreads) {
    int r = b->votes;
    b->result[g & 1] = r;
    b->arrived = b->votes = 0;
    __atomic_store_n(&b->gen, g + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&b->lock);
    syscall(SYS_futex, &b->gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    return r;
  }
  pthread_mutex_unlock(&b->lock);
  for (int i = 0; i < SIM_BARRIER_SPINS && __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == g; i++) sched_yield();
  while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == g)
    syscall(SYS_futex, &b->gen, FUTEX_WAIT_PRIVATE, g, NULL, NULL, 0);  // returns at once if gen moved on
  // Generation g+2 needs this thread's next arrival, so result[g & 1] is still generation g's.
  return b->result[g & 1];
}

static simBar* namedBarrier(int name, int nThreads, simBlock** blk) {
  simKThread* t = self("a barrier");
  if (name < 0 || name >= SIM_NAMED_BARRIERS) fatal("barrier name %d out of range 0..%d", name, SIM_NAMED_BARRIERS - 1);
  if (nThreads <= 0 || nThreads > t->block->nThreads)
    fatal("barrier %d for %d threads in a block of %d (it would never complete)", name, nThreads, t->block->nThreads);
  *blk = t->block;
  return &t->block->bar[name];
}

void mcclSimBarrier(int name, int nThreads) {
  simBlock* b;
  simBar* bar = namedBarrier(name, nThreads, &b);
  barArrive(bar, nThreads, 0, "barrier", name);
}

int mcclSimBarrierRed(int name, int nThreads, int vote, int wantCount) {
  simBlock* b;
  simBar* bar = namedBarrier(name, nThreads, &b);
  int votes = barArrive(bar, nThreads, vote, "barrier", name);
  return wantCount ? votes : votes != 0;
}

// __syncwarp, and the votes (__any_sync / __all_sync) that count while the lanes in the mask meet.
static int warpArrive(unsigned mask, int vote, const char* what) {
  simKThread* t = self(what);
  int warp = t->tid / 32, lane = t->tid % 32;
  int lanes = t->block->nThreads - warp * 32;
  unsigned present = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1;
  if (!(mask & (1u << lane))) fatal("%s with mask 0x%x called by lane %d, which is not in the mask", what, mask, lane);
  return barArrive(&t->block->warp[warp], __builtin_popcount(mask & present), vote, what, warp);
}

void mcclSimSyncWarp(unsigned mask) {
  warpArrive(mask, 0, "__syncwarp");
}

int mcclSimSyncWarpRed(unsigned mask, int vote) {
  return warpArrive(mask, vote, "a warp vote");
}

uint64_t mcclSimShfl(unsigned mask, uint64_t v, int srcLane) {
  simKThread* t = self("__shfl_sync");
  int warp = t->tid / 32, lane = t->tid % 32;
  int lanes = t->block->nThreads - warp * 32;
  unsigned present = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1;
  srcLane &= 31;
  if (!(mask & present & (1u << srcLane)))
    fatal("__shfl_sync from lane %d, which is not in the mask 0x%x or not in the block", srcLane, mask);
  simBar* b = &t->block->warp[warp];
  // This lane cannot arrive at a later generation before the current one completes, and that needs its arrival.
  unsigned g = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
  b->lanes[g & 1][lane] = v;
  warpArrive(mask, 0, "__shfl_sync");
  return b->lanes[g & 1][srcLane];
}

void* mcclSimShmem(const void* key, size_t size, size_t align) {
  simKThread* t = self("shared memory (MCCL_SHMEM_DEFINE)");
  simCrew* b = t->block->crew;
  void* p = NULL;
  pthread_mutex_lock(&b->shmLock);
  for (int i = 0; i < b->nShm && !p; i++)
    if (b->shm[i].key == key) p = b->shm[i].ptr;
  if (!p) {
    if (b->nShm == SIM_MAX_SHMEM_DEFS)
      fatal("more than %d MCCL_SHMEM_DEFINE variables in one kernel", SIM_MAX_SHMEM_DEFS);
    if (align < sizeof(void*)) align = sizeof(void*);
    if (posix_memalign(&p, align, size ? size : 1) != 0) fatal("out of memory for %zu bytes of shared memory", size);
    // Shared memory starts undefined on a GPU: a pattern, so code that reads before writing shows it.
    memset(p, 0xa5, size);
    b->shm[b->nShm].key = key;
    b->shm[b->nShm].size = size;
    b->shm[b->nShm++].ptr = p;
  }
  pthread_mutex_unlock(&b->shmLock);
  return p;
}

// ---- running a grid (on the stream's worker) ---------------------------------------------------

// ---- crews ------------------------------------------------------------------------------------------

static pthread_mutex_t crewLock = PTHREAD_MUTEX_INITIALIZER;
static simCrew* idleCrews;
static int crewThreads;  // threads of every crew, idle or running (under crewLock)
static pthread_once_t crewOnce = PTHREAD_ONCE_INIT;

// A forked child has none of its parent's threads: it forgets their crews (leaked) and starts its own.
static void crewsForgetInChild(void) {
  pthread_mutex_init(&crewLock, NULL);
  idleCrews = NULL;
  crewThreads = 0;
}

static void crewFree(simCrew* c) {
  for (int i = 0; i < c->nShm; i++) free(c->shm[i].ptr);
  free(c->th);
  pthread_mutex_destroy(&c->shmLock);
  pthread_cond_destroy(&c->go);
  pthread_cond_destroy(&c->done);
  pthread_mutex_destroy(&c->lock);
  free(c);
}
static void crewsInit(void) {
  pthread_atfork(NULL, NULL, crewsForgetInChild);
}

typedef struct {
  simCrew* crew;
  int tid;
} simCrewArg;

static void* crewThread(void* arg) {
  simCrew* c = ((simCrewArg*)arg)->crew;
  const int tid = ((simCrewArg*)arg)->tid;
  free(arg);
  pthread_setname_np(pthread_self(), "sim-crew");  // thread counts leave idle crews out (mccl_test.h)
  uint64_t ran = 0;
  for (;;) {
    pthread_mutex_lock(&c->lock);
    while (c->job == ran && !c->quit) pthread_cond_wait(&c->go, &c->lock);
    if (c->quit) {
      pthread_mutex_unlock(&c->lock);
      return NULL;
    }
    ran = c->job;
    simKThread* t = &c->threads[tid];
    pthread_mutex_unlock(&c->lock);
    char name[16];
    snprintf(name, sizeof(name), "b%u.t%d", t->info.blockIdx.x, t->tid);
    pthread_setname_np(pthread_self(), name);  // `info threads` in gdb shows which block thread is which
    simLaunch* L = t->block->launch;
    curThread = t;
    L->f->tramp(L->f->fn, L->params, &t->info);
    curThread = NULL;
    pthread_setname_np(pthread_self(), "sim-crew");
    pthread_mutex_lock(&c->lock);
    if (--c->running == 0) pthread_cond_signal(&c->done);
    pthread_mutex_unlock(&c->lock);
  }
  return NULL;
}

// Its threads told to end and joined (not counted in crewThreads any more), then freed: joined here, as a
// launch's threads once were, so that ending threads never pile up beside new ones.
static void crewDismiss(simCrew* c) {
  pthread_mutex_lock(&c->lock);
  c->quit = 1;
  pthread_cond_broadcast(&c->go);
  pthread_mutex_unlock(&c->lock);
  for (int i = 0; i < c->nThreads; i++) pthread_join(c->th[i], NULL);
  crewFree(c);
}

// An idle crew of n threads, or a new one, for which idle crews of other sizes are dismissed while the crews
// would hold more threads than one grid may have.
static simCrew* crewTake(simLaunch* L, int n) {
  pthread_once(&crewOnce, crewsInit);
  pthread_mutex_lock(&crewLock);
  simCrew** pp = &idleCrews;
  while (*pp && (*pp)->nThreads != n) pp = &(*pp)->next;
  simCrew* c = *pp;
  if (c) *pp = c->next;
  simCrew* drop = NULL;
  while (!c && idleCrews && crewThreads + n > simG.maxGridThreads) {
    simCrew* d = idleCrews;
    idleCrews = d->next;
    crewThreads -= d->nThreads;
    d->next = drop;
    drop = d;
  }
  pthread_mutex_unlock(&crewLock);
  while (drop) {
    simCrew* d = drop;
    drop = d->next;
    crewDismiss(d);
  }
  if (c) return c;
  c = calloc(1, sizeof(*c));
  if (!c) fatal("kernel %s: out of memory for a block's threads", L->f->name);
  c->nThreads = n;
  c->th = calloc((size_t)n, sizeof(pthread_t));
  if (!c->th) fatal("kernel %s: out of memory for a block's threads", L->f->name);
  pthread_mutex_lock(&crewLock);
  crewThreads += n;
  pthread_mutex_unlock(&crewLock);
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->go, NULL);
  pthread_cond_init(&c->done, NULL);
  pthread_mutex_init(&c->shmLock, NULL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, SIM_BLOCK_STACK);
  for (int i = 0; i < n; i++) {
    simCrewArg* a = malloc(sizeof(*a));
    if (a) a->crew = c, a->tid = i;
    int rc = a ? pthread_create(&c->th[i], &attr, crewThread, a) : ENOMEM;
    // Blocks already started would wait forever for the missing threads: nothing sensible to return.
    if (rc != 0)
      fatal("kernel %s: cannot start host thread %d of a block of %d (%s); lower MCCL_SIM_MAX_GRID_THREADS", L->f->name,
            i + 1, n, strerror(rc));
  }
  pthread_attr_destroy(&attr);
  return c;
}

// Block b of L on crew c: its storage poisoned again, then every thread told.
static void crewStart(simCrew* c, simLaunch* L, int b) {
  L->blocks[b].crew = c;
  pthread_mutex_lock(&c->shmLock);
  for (int i = 0; i < c->nShm; i++) memset(c->shm[i].ptr, 0xa5, c->shm[i].size);
  pthread_mutex_unlock(&c->shmLock);
  pthread_mutex_lock(&c->lock);
  c->threads = &L->threads[(size_t)b * (size_t)L->nThreads];
  c->running = c->nThreads;
  c->job++;
  pthread_cond_broadcast(&c->go);
  pthread_mutex_unlock(&c->lock);
}

// Wait for crew c's block to end, then put the crew back, or dismiss it when the crews hold more threads than
// one grid may have.
static void crewFinish(simCrew* c) {
  pthread_mutex_lock(&c->lock);
  while (c->running > 0) pthread_cond_wait(&c->done, &c->lock);
  c->threads = NULL;
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_lock(&crewLock);
  const int dismiss = crewThreads > simG.maxGridThreads;
  if (dismiss) {
    crewThreads -= c->nThreads;
  } else {
    c->next = idleCrews;
    idleCrews = c;
  }
  pthread_mutex_unlock(&crewLock);
  if (dismiss) crewDismiss(c);
}

// ---- running a grid (on the stream's worker) ---------------------------------------------------

static void freeLaunch(simLaunch* L) {
  if (L->blocks)
    for (int b = 0; b < L->nBlocks; b++) {
      simBlock* blk = &L->blocks[b];
      for (int i = 0; i < SIM_NAMED_BARRIERS; i++) barDestroy(&blk->bar[i]);
      for (int i = 0; i < 1024 / 32; i++) barDestroy(&blk->warp[i]);
    }
  free(L->blocks);
  free(L->threads);
  free(L->crews);
  free(L->argBuf);
  free(L);
}

// A launch its stream dropped (a memory wait before it gave up): it never runs, its state is freed.
static void dropLaunch(void* arg) {
  freeLaunch(arg);
}

static void runLaunch(void* arg) {
  simLaunch* L = arg;
  // Every block's crew first, then every block started: no block may run to its end before the others start.
  for (int b = 0; b < L->nBlocks; b++) L->crews[b] = crewTake(L, L->nThreads);
  for (int b = 0; b < L->nBlocks; b++) crewStart(L->crews[b], L, b);
  for (int b = 0; b < L->nBlocks; b++) crewFinish(L->crews[b]);
  freeLaunch(L);
}

// The block size the sim runs: at most MCCL_SIM_MAX_BLOCK_THREADS, and at most MCCL_SIM_MAX_GRID_THREADS
// over the grid, in whole warps; reported once per kernel. 0 when the grid cannot run at all.
static unsigned simBlockX(struct CUfunc_st* k, unsigned long long nBlocks, unsigned bx, unsigned by, unsigned bz) {
  unsigned long long yz = (unsigned long long)by * bz, total = bx * yz;
  if (total <= (unsigned long long)simG.maxBlockThreads && nBlocks * total <= (unsigned long long)simG.maxGridThreads)
    return bx;
  unsigned long long cap = (unsigned long long)simG.maxGridThreads / nBlocks / 32 * 32;
  if (cap > (unsigned long long)simG.maxBlockThreads) cap = (unsigned long long)simG.maxBlockThreads;
  unsigned long long x = cap / yz / 32 * 32;
  if (x == 0) {
    fprintf(
        stderr,
        "minccl-sim: WARN kernel %s: %llu blocks of %llu threads cannot run on the sim (MCCL_SIM_MAX_BLOCK_THREADS=%d, "
        "MCCL_SIM_MAX_GRID_THREADS=%d; a block is never reduced below one warp)\n",
        k->name, nBlocks, total, simG.maxBlockThreads, simG.maxGridThreads);
    return 0;
  }
  if (!__atomic_exchange_n(&k->warned, 1, __ATOMIC_RELAXED))
    fprintf(stderr,
            "minccl-sim: WARN kernel %s: block of %llu threads runs with %llu (blockDim.x %u -> %llu; "
            "MCCL_SIM_MAX_BLOCK_THREADS=%d, MCCL_SIM_MAX_GRID_THREADS=%d, %llu blocks)\n",
            k->name, total, x * yz, bx, x, simG.maxBlockThreads, simG.maxGridThreads, nBlocks);
  return (unsigned)x;
}

// Packed arguments from CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE: each at its natural alignment. As the
// driver does, the buffer may end inside the last argument (NCCL passes only the used part of its
// 4 KiB kernel-argument struct): *lastBytes is how much of it the buffer holds; the rest is zeroed.
static CUresult argsFromExtra(struct CUfunc_st* k, void** extra, void** ptrs, size_t* lastBytes) {
  char* buf = NULL;
  size_t* size = NULL;
  for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      buf = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
      size = extra[i + 1];
    else
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (!buf || !size) return CUDA_ERROR_INVALID_VALUE;
  size_t off = 0, lastOff = 0;
  for (int a = 0; a < k->nArgs; a++) {
    off = (off + k->argAlign[a] - 1) / k->argAlign[a] * k->argAlign[a];
    ptrs[a] = buf + off;
    lastOff = off;
    off += k->argSize[a];
  }
  if (k->nArgs == 0) return CUDA_SUCCESS;
  if (*size <= lastOff) return CUDA_ERROR_INVALID_VALUE;  // the last argument must start inside the buffer
  *lastBytes = *size < off ? *size - lastOff : k->argSize[k->nArgs - 1];
  return CUDA_SUCCESS;
}

static CUresult launch(struct CUfunc_st* k, dim3 grid, dim3 block, unsigned sharedMem, CUstream stream,
                       void** kernelParams, void** extra) {
  int dev;
  CUresult r = simCurrentDevice(&dev);
  if (r != CUDA_SUCCESS) return r;
  // The driver's checks: dimensions in range, at most 1024 threads per block, shared memory in range.
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) return CUDA_ERROR_INVALID_VALUE;
  if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) return CUDA_ERROR_INVALID_VALUE;
  if (block.x > 1024 || block.y > 1024 || block.z > 64 || (unsigned long long)block.x * block.y * block.z > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (sharedMem > SIM_MAX_DYN_SHMEM) return CUDA_ERROR_INVALID_VALUE;
  if (kernelParams && extra) return CUDA_ERROR_INVALID_VALUE;
  if (k->nArgs > 0 && !kernelParams && !extra) return CUDA_ERROR_INVALID_VALUE;
  void* src[SIM_MAX_KERNEL_ARGS] = {0};
  size_t lastBytes = k->nArgs > 0 ? k->argSize[k->nArgs - 1] : 0;  // bytes of the last argument given
  if (extra) {
    if ((r = argsFromExtra(k, extra, src, &lastBytes)) != CUDA_SUCCESS) return r;
  } else {
    for (int a = 0; a < k->nArgs; a++)
      if (!(src[a] = kernelParams[a])) return CUDA_ERROR_INVALID_VALUE;
  }
  unsigned long long nBlocks = (unsigned long long)grid.x * grid.y * grid.z;
  unsigned bx = simBlockX(k, nBlocks, block.x, block.y, block.z);
  if (bx == 0) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  block.x = bx;

  simLaunch* L = calloc(1, sizeof(*L));
  if (!L) return CUDA_ERROR_OUT_OF_MEMORY;
  L->f = k;
  L->nBlocks = (int)nBlocks;
  L->nThreads = (int)(block.x * block.y * block.z);
  size_t off = 0, offs[SIM_MAX_KERNEL_ARGS];
  for (int a = 0; a < k->nArgs; a++) {
    size_t al = k->argAlign[a] < 16 ? 16 : k->argAlign[a];
    off = (off + al - 1) / al * al;
    offs[a] = off;
    off += k->argSize[a];
  }
  L->blocks = calloc((size_t)L->nBlocks, sizeof(simBlock));
  L->threads = calloc((size_t)L->nBlocks * (size_t)L->nThreads, sizeof(simKThread));
  L->crews = calloc((size_t)L->nBlocks, sizeof(simCrew*));
  if ((off && posix_memalign((void**)&L->argBuf, 64, off) != 0) || !L->blocks || !L->threads || !L->crews) {
    L->nBlocks = 0;  // nothing initialized yet
    freeLaunch(L);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (off) memset(L->argBuf, 0, off);
  for (int a = 0; a < k->nArgs; a++) {
    memcpy(L->argBuf + offs[a], src[a], a == k->nArgs - 1 ? lastBytes : k->argSize[a]);
    L->params[a] = L->argBuf + offs[a];
  }
  for (int b = 0; b < L->nBlocks; b++) {
    simBlock* blk = &L->blocks[b];
    blk->launch = L;
    blk->nThreads = L->nThreads;
    for (int i = 0; i < SIM_NAMED_BARRIERS; i++) barInit(&blk->bar[i]);
    for (int i = 0; i < 1024 / 32; i++) barInit(&blk->warp[i]);
    uint3 bi = {(unsigned)b % grid.x, (unsigned)b / grid.x % grid.y, (unsigned)b / grid.x / grid.y};
    for (int t = 0; t < L->nThreads; t++) {
      simKThread* th = &L->threads[(size_t)b * (size_t)L->nThreads + (size_t)t];
      th->block = blk;
      th->tid = t;
      th->info.threadIdx =
          (uint3){(unsigned)t % block.x, (unsigned)t / block.x % block.y, (unsigned)t / block.x / block.y};
      th->info.blockIdx = bi;
      th->info.blockDim = block;
      th->info.gridDim = grid;
    }
  }
  r = simEnqueueWork(stream, dev, runLaunch, dropLaunch, L);
  if (r != CUDA_SUCCESS) freeLaunch(L);
  return r;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!simSelf()->ctx) return CUDA_ERROR_INVALID_CONTEXT;
  struct CUfunc_st* k = f ? findKernel(NULL, f) : NULL;
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  dim3 grid = {gridDimX, gridDimY, gridDimZ}, block = {blockDimX, blockDimY, blockDimZ};
  return launch(k, grid, block, sharedMemBytes, hStream, kernelParams, extra);
}

// cuLaunchKernelEx: cuLaunchKernel with launch attributes. The one attribute minccl sets is
// programmatic stream serialization (NCCL's symmetric kernels' launch): on a GPU it lets the grid start
// while the previous one on the stream finishes, and the kernel waits for that one in
// cudaGridDependencySynchronize. A sim stream runs its launches one after another, so the attribute
// changes nothing here; any other attribute is CUDA_ERROR_NOT_SUPPORTED (with one warning).
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  if (config == NULL || (config->numAttrs > 0 && config->attrs == NULL)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < config->numAttrs; i++)
    if (config->attrs[i].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      return simNotImplemented("cuLaunchKernelEx with a launch attribute other than programmatic stream serialization");
  return cuLaunchKernel(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX, config->blockDimY,
                        config->blockDimZ, config->sharedMemBytes, config->hStream, kernelParams, extra);
}

cudaError_t CUDARTAPI cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                       cudaStream_t stream) {
  simRtInit();
  struct CUfunc_st* k = func ? findKernel(func, NULL) : NULL;
  if (!k) return simRtErr(cudaErrorInvalidDeviceFunction);
  if (sharedMem > SIM_MAX_DYN_SHMEM) return simRtErr(cudaErrorInvalidValue);
  CUresult r = launch(k, gridDim, blockDim, (unsigned)sharedMem, stream, args, NULL);
  switch (r) {
    case CUDA_SUCCESS:
      return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE:
      return simRtErr(cudaErrorInvalidConfiguration);  // as the runtime
    case CUDA_ERROR_INVALID_HANDLE:
      return simRtErr(cudaErrorInvalidResourceHandle);
    case CUDA_ERROR_OUT_OF_MEMORY:
      return simRtErr(cudaErrorMemoryAllocation);
    default:
      return simRtErr((cudaError_t)r);
  }
}

// The PTX path (nvcc -ptx, cuModuleLoadData, cuModuleGetFunction) has no CPU counterpart: kernels are
// host functions registered by MCCL_KERNEL_REGISTER.
CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  (void)module, (void)image;
  return simNotImplemented(
      "cuModuleLoadData (the PTX path; the sim runs kernels registered with MCCL_KERNEL_REGISTER)");
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  (void)hfunc, (void)hmod, (void)name;
  return simNotImplemented("cuModuleGetFunction (the PTX path)");
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  (void)hmod;
  return simNotImplemented("cuModuleUnload (the PTX path)");
}
