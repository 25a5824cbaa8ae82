// libnccl.so.2 from minccl: NCCL 2.28's names and ABI over libminccl's mccl* calls.
//
// This file is compiled against NCCL's own nccl.h, so every definition below is checked against
// NCCL's declaration. Each ncclX forwards to mcclX (minccl.h gives mcclX NCCL's signature and
// semantics); pncclX (NCCL's profiling twin) is an alias of ncclX. Calls minccl does not serve are
// the weak stubs of nccl_stubs.c (generated from nccl.h), which warn and return ncclInvalidUsage.
// What is accepted and ignored is in docs/nccl-dropin.md.
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_dropin.h"
#include "minccl.h"
#include "mccl_debug.h"

// The ABI: NCCL's values are minccl's (minccl.h promises it; the drop-in relies on it).
_Static_assert(ncclSuccess == (int)mcclSuccess && ncclUnhandledCudaError == (int)mcclUnhandledCudaError &&
                   ncclSystemError == (int)mcclSystemError && ncclInternalError == (int)mcclInternalError &&
                   ncclInvalidArgument == (int)mcclInvalidArgument && ncclInvalidUsage == (int)mcclInvalidUsage &&
                   ncclRemoteError == (int)mcclRemoteError && ncclInProgress == (int)mcclInProgress,
               "ncclResult_t and mcclResult_t differ");
_Static_assert(ncclInt8 == (int)mcclInt8 && ncclUint8 == (int)mcclUint8 && ncclInt32 == (int)mcclInt32 &&
                   ncclUint32 == (int)mcclUint32 && ncclInt64 == (int)mcclInt64 && ncclUint64 == (int)mcclUint64 &&
                   ncclFloat16 == (int)mcclFloat16 && ncclFloat32 == (int)mcclFloat32 &&
                   ncclFloat64 == (int)mcclFloat64 && ncclBfloat16 == (int)mcclBfloat16 &&
                   ncclFloat8e4m3 == (int)mcclFloat8e4m3 && ncclFloat8e5m2 == (int)mcclFloat8e5m2 &&
                   ncclNumTypes == (int)mcclNumTypes,
               "ncclDataType_t and mcclDataType_t differ");
_Static_assert(ncclSum == (int)mcclSum && ncclProd == (int)mcclProd && ncclMax == (int)mcclMax &&
                   ncclMin == (int)mcclMin && ncclAvg == (int)mcclAvg && ncclNumOps == (int)mcclNumOps &&
                   sizeof(ncclRedOp_t) == sizeof(mcclRedOp_t),
               "ncclRedOp_t and mcclRedOp_t differ");
_Static_assert(ncclScalarDevice == (int)mcclScalarDevice && ncclScalarHostImmediate == (int)mcclScalarHostImmediate,
               "ncclScalarResidence_t and mcclScalarResidence_t differ");
_Static_assert(sizeof(ncclSimInfo_t) == sizeof(mcclSimInfo_t) &&
                   offsetof(ncclSimInfo_t, estimatedTime) == offsetof(mcclSimInfo_t, estimatedTime),
               "ncclSimInfo_t and mcclSimInfo_t differ");
_Static_assert(sizeof(ncclUniqueId) == sizeof(mcclUniqueId), "ncclUniqueId and mcclUniqueId differ in size");
_Static_assert(NCCL_WIN_DEFAULT == MCCL_WIN_DEFAULT && NCCL_WIN_COLL_SYMMETRIC == MCCL_WIN_COLL_SYMMETRIC,
               "window flags differ");
_Static_assert(NCCL_CTA_POLICY_DEFAULT == MCCL_CTA_POLICY_DEFAULT &&
                   NCCL_CTA_POLICY_EFFICIENCY == MCCL_CTA_POLICY_EFFICIENCY &&
                   NCCL_CTA_POLICY_ZERO == MCCL_CTA_POLICY_ZERO && NCCL_CONFIG_UNDEF_INT == MCCL_CONFIG_UNDEF_INT,
               "CTA policies differ");

// The NCCL ABI level this library implements (ncclGetVersion).
#define DROPIN_NCCL_VERSION NCCL_VERSION(2, 28, 9)
#define DROPIN_REG_MAGIC 0x72656721u
#define NCCL_CONFIG_MAGIC 0xcafebeefu  // NCCL_CONFIG_INITIALIZER's magic

#define PNCCL_ALIAS(name) extern __typeof(name) p##name __attribute__((alias(#name)))

static atomic_ullong servedCalls;
unsigned long long mcclDropinCalls(void) {
  return atomic_load(&servedCalls);
}
#define SERVED() atomic_fetch_add_explicit(&servedCalls, 1, memory_order_relaxed)
void mcclDropinServed(void) {
  SERVED();
}

// mcclTimeout has no NCCL twin: a peer that does not answer is, for NCCL's callers, a remote error.
// mcclNotImplemented (an exercise stub of a learner tree) is what NCCL says of a call it does not serve.
ncclResult_t mcclDropinResult(mcclResult_t r) {
  if (r == mcclTimeout) return ncclRemoteError;
  if (r == mcclNotImplemented) return ncclInvalidUsage;
  if ((int)r < 0 || (int)r >= ncclNumResults) return ncclInternalError;
  return (ncclResult_t)r;
}

// ---- calls minccl does not serve -------------------------------------------------------------
static pthread_mutex_t warnedLock = PTHREAD_MUTEX_INITIALIZER;
static struct warned {
  const char* name;
  struct warned* next;
} * warnedList;

// Whether this is the first warning about `call` in this process (one node per call name, kept for good).
static int firstWarning(const char* call) {
  pthread_mutex_lock(&warnedLock);
  struct warned* w = warnedList;
  while (w && strcmp(w->name, call) != 0) w = w->next;
  int first = w == NULL;
  if (first) {
    w = malloc(sizeof(*w));
    if (w) {
      w->name = call;
      w->next = warnedList;
      warnedList = w;
    }
  }
  pthread_mutex_unlock(&warnedLock);
  return first;
}

ncclResult_t mcclDropinUnimplemented(const char* call) {
  if (firstWarning(call)) WARN("%s is not implemented by minccl (the NCCL drop-in): it returns ncclInvalidUsage", call);
  return ncclInvalidUsage;
}

ncclResult_t mcclDropinRefused(const char* call, const char* what) {
  if (firstWarning(call))
    WARN("%s: %s is not served by minccl (the NCCL drop-in): it returns ncclInvalidUsage", call, what);
  return ncclInvalidUsage;
}

// ---- communicators -------------------------------------------------------------------------------
// ncclComm_t points to this wrapper: it holds what NCCL's API has and minccl's does not
// (ncclCommRegister's handles). Its lifetime follows minccl's handles: a call
// finds the wrapper in the live list and holds it (refs) until it returns; ncclCommDestroy/Abort take
// it out of the list first, and free it only once the calls inside have left, so an abort from another
// thread never frees what a call still reads. A handle is never read before it was found in the list.
struct dropinReg {
  uint32_t magic;
  void* buff;
  size_t size;
  struct dropinReg* next;
};

struct ncclComm {
  mcclComm_t mc;           // from the init call (a non-blocking one initialises it on minccl's thread)
  int refs;                // calls inside (under liveLock)
  struct ncclComm* next;   // the live list
  pthread_mutex_t lock;    // regs
  struct dropinReg* regs;  // ncclCommRegister handles not yet deregistered
  int ctaPolicy;           // the config's CTAPolicy (NCCL_CONFIG_UNDEF_INT: none), which a split inherits
};

static pthread_mutex_t liveLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t liveIdle = PTHREAD_COND_INITIALIZER;  // a wrapper's last call left
static struct ncclComm* liveComms;

static _Thread_local int groupDepth;  // ncclGroupStart nesting in this thread

static atomic_int bannerShown;
// One line per process at the first communicator: minccl, not NCCL, serves this program. It is
// printed at VERSION level, so it shows by default and MCCL_DEBUG=NONE hides it.
static void banner(void) {
  if (atomic_exchange(&bannerShown, 1)) return;
  Dl_info info;
  const char* path = dladdr((void*)banner, &info) && info.dli_fname ? info.dli_fname : "libnccl.so.2";
  mcclDebugLog(MCCL_LOG_VERSION, MCCL_INIT, __FILE__, __LINE__,
               "minccl %d.%d.%d serves this process's NCCL %d.%d.%d calls (%s, %s backend)", MCCL_MAJOR, MCCL_MINOR,
               MCCL_PATCH, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, path, MCCL_BACKEND_NAME);
}

static struct ncclComm* commNew(void) {
  struct ncclComm* c = calloc(1, sizeof(*c));
  if (!c) {
    WARN("NCCL drop-in: out of memory for a communicator");
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  c->ctaPolicy = NCCL_CONFIG_UNDEF_INT;
  return c;
}

// Publish a wrapper whose mc is set: calls may find it from now on.
static void commPublish(struct ncclComm* c) {
  pthread_mutex_lock(&liveLock);
  c->next = liveComms;
  liveComms = c;
  pthread_mutex_unlock(&liveLock);
}

static void commFree(struct ncclComm* c) {
  struct dropinReg* r = c->regs;
  while (r) {
    struct dropinReg* n = r->next;
    r->magic = 0;
    free(r);
    r = n;
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}

// Find comm in the live list and hold it for one call (mcclDropinCommPut when done); the minccl communicator
// behind it, or an NCCL error named in a WARN. Whether the communicator is ready is minccl's to say.
ncclResult_t mcclDropinCommGet(ncclComm_t comm, const char* call, mcclComm_t* out) {
  if (comm == NULL) {
    WARN("%s: comm is NULL", call);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&liveLock);
  struct ncclComm* c = liveComms;
  while (c && c != comm) c = c->next;
  if (c) c->refs++;
  pthread_mutex_unlock(&liveLock);
  if (c == NULL) {
    WARN("%s: comm %p is not a live communicator of this library (destroyed, aborted, or never created)", call,
         (void*)comm);
    return ncclInvalidArgument;
  }
  *out = c->mc;
  return ncclSuccess;
}

// The end of a call that mcclDropinCommGet held comm for; returns res.
ncclResult_t mcclDropinCommPut(ncclComm_t comm, ncclResult_t res) {
  pthread_mutex_lock(&liveLock);
  if (--comm->refs == 0) pthread_cond_broadcast(&liveIdle);
  pthread_mutex_unlock(&liveLock);
  return res;
}

ncclResult_t ncclGetVersion(int* version) {
  if (version == NULL) {
    WARN("ncclGetVersion: version is NULL");
    return ncclInvalidArgument;
  }
  *version = DROPIN_NCCL_VERSION;
  SERVED();
  return ncclSuccess;
}
PNCCL_ALIAS(ncclGetVersion);

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == NULL) {
    WARN("ncclGetUniqueId: uniqueId is NULL");
    return ncclInvalidArgument;
  }
  mcclUniqueId id;
  mcclResult_t r = mcclGetUniqueId(&id);
  if (r == mcclSuccess) memcpy(uniqueId, &id, sizeof(id));
  SERVED();
  return mcclDropinResult(r);
}
PNCCL_ALIAS(ncclGetUniqueId);

static ncclResult_t initComm(ncclComm_t* comm, int nranks, const mcclUniqueId* id, int rank, int blocking,
                             int ctaPolicy) {
  struct ncclComm* c = commNew();
  if (!c) return ncclSystemError;
  mcclConfig_t cfg = MCCL_CONFIG_INITIALIZER;
  cfg.blocking = blocking;
  cfg.CTAPolicy = ctaPolicy;
  c->ctaPolicy = ctaPolicy;
  mcclResult_t r = mcclCommInitRankConfig(&c->mc, nranks, *id, rank, &cfg);
  if (r != mcclSuccess) {
    commFree(c);
    return mcclDropinResult(r);
  }
  commPublish(c);
  *comm = c;
  banner();
  return blocking ? ncclSuccess : ncclInProgress;
}

// config: NCCL_CONFIG_INITIALIZER, then the caller's fields. blocking = 0 is honoured (minccl's
// mcclCommInitRankAsync: the call returns ncclInProgress, ncclCommGetAsyncError reports ncclInProgress
// until it is done, ncclCommAbort ends it; inside a group the group defers it anyway), and so is CTAPolicy
// (minccl's mcclConfig_t: NCCL_CTA_POLICY_ZERO runs AllGather, AlltoAll, Gather, Scatter and Broadcast on
// windows with the copy engines). The other fields are accepted and ignored (docs/nccl-dropin.md).
static ncclResult_t initConfig(const char* call, ncclComm_t* comm, int nranks, const mcclUniqueId* id, int rank,
                               ncclConfig_t* config) {
  if (comm == NULL) {
    WARN("%s: comm is NULL", call);
    return ncclInvalidArgument;
  }
  int blocking = 1;
  if (config != NULL) {
    if (config->magic != NCCL_CONFIG_MAGIC) {
      WARN("%s: config->magic is 0x%x, not NCCL_CONFIG_INITIALIZER's 0x%x (initialise the config with it)", call,
           config->magic, NCCL_CONFIG_MAGIC);
      return ncclInvalidArgument;
    }
    if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1) {
      WARN("%s: config->blocking is %d (0 or 1)", call, config->blocking);
      return ncclInvalidArgument;
    }
    if (config->blocking == 0) blocking = 0;
    if (config->CTAPolicy != NCCL_CONFIG_UNDEF_INT &&
        (config->CTAPolicy < NCCL_CTA_POLICY_DEFAULT || config->CTAPolicy > NCCL_CTA_POLICY_ZERO)) {
      WARN("%s: config->CTAPolicy is %d (NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO)", call, config->CTAPolicy);
      return ncclInvalidArgument;
    }
  }
  return initComm(comm, nranks, id, rank, blocking || groupDepth > 0,
                  config != NULL ? config->CTAPolicy : NCCL_CONFIG_UNDEF_INT);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  mcclUniqueId id;
  memcpy(&id, &commId, sizeof(id));
  SERVED();
  return initConfig("ncclCommInitRankConfig", comm, nranks, &id, rank, config);
}
PNCCL_ALIAS(ncclCommInitRankConfig);

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  mcclUniqueId id;
  memcpy(&id, &commId, sizeof(id));
  SERVED();
  return initConfig("ncclCommInitRank", comm, nranks, &id, rank, NULL);
}
PNCCL_ALIAS(ncclCommInitRank);

// Every rank holds all nId ids (NCCL spreads its bootstrap over them); minccl's bootstrap uses the first.
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (nId < 1 || commIds == NULL) {
    WARN("ncclCommInitRankScalable: nId %d / commIds %p (at least one id)", nId, (void*)commIds);
    return ncclInvalidArgument;
  }
  mcclUniqueId id;
  memcpy(&id, &commIds[0], sizeof(id));
  SERVED();
  return initConfig("ncclCommInitRankScalable", newcomm, nranks, &id, myrank, config);
}
PNCCL_ALIAS(ncclCommInitRankScalable);

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == NULL || ndev < 1) {
    WARN("ncclCommInitAll: comm %p, ndev %d (comm non-NULL, ndev >= 1)", (void*)comm, ndev);
    return ncclInvalidArgument;
  }
  SERVED();
  struct ncclComm** w = calloc((size_t)ndev, sizeof(*w));
  mcclComm_t* mcs = calloc((size_t)ndev, sizeof(*mcs));
  ncclResult_t res = ncclSuccess;
  if (!w || !mcs) {
    WARN("ncclCommInitAll: out of memory");
    res = ncclSystemError;
    goto free_arrays;
  }
  for (int i = 0; i < ndev; i++)
    if (!(w[i] = commNew())) {
      res = ncclSystemError;
      goto free_wrappers;
    }
  res = mcclDropinResult(mcclCommInitAll(mcs, ndev, devlist));
  if (res != ncclSuccess) goto free_wrappers;
  for (int i = 0; i < ndev; i++) {
    w[i]->mc = mcs[i];
    commPublish(w[i]);
    comm[i] = w[i];
  }
  banner();
  goto free_arrays;
free_wrappers:
  for (int i = 0; w && i < ndev; i++)
    if (w[i]) commFree(w[i]);
free_arrays:
  free(mcs);
  free(w);
  return res;
}
PNCCL_ALIAS(ncclCommInitAll);

// NCCL flushes the communicator's operations and marks it finalized; so does minccl (its own kernels only,
// not the device's other work), and refuses later calls but destroy and abort.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommFinalize", &mc);
  if (res != ncclSuccess) return res;
  SERVED();
  return mcclDropinCommPut(comm, mcclDropinResult(mcclCommFinalize(mc)));
}
PNCCL_ALIAS(ncclCommFinalize);

// Take comm out of the live list (no call finds it any more); for an abort, revoke the minccl
// communicator so that calls inside on other threads end; wait for them to leave; then free both.
static ncclResult_t commEnd(ncclComm_t comm, const char* call, int abort) {
  if (comm == NULL) return ncclSuccess;  // as NCCL
  pthread_mutex_lock(&liveLock);
  struct ncclComm** p = &liveComms;
  while (*p && *p != comm) p = &(*p)->next;
  const int found = *p != NULL;
  if (found) *p = comm->next;
  pthread_mutex_unlock(&liveLock);
  if (!found) {
    WARN("%s: comm %p is not a live communicator of this library (destroyed twice, or never created)", call,
         (void*)comm);
    return ncclInvalidArgument;
  }
  if (abort) (void)mcclCommRevoke(comm->mc);
  pthread_mutex_lock(&liveLock);
  while (comm->refs > 0) pthread_cond_wait(&liveIdle, &liveLock);
  pthread_mutex_unlock(&liveLock);
  mcclResult_t r = abort ? mcclCommAbort(comm->mc) : mcclCommDestroy(comm->mc);
  commFree(comm);
  SERVED();
  return mcclDropinResult(r);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return commEnd(comm, "ncclCommDestroy", 0);
}
PNCCL_ALIAS(ncclCommDestroy);

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return commEnd(comm, "ncclCommAbort", 1);
}
PNCCL_ALIAS(ncclCommAbort);

// ncclInProgress while a non-blocking initialisation runs, then its result or the errors since (minccl's).
// Calls inside on other threads and the kernels end with an error; the handle stays for destroy/abort.
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommRevoke", &mc);
  if (res != ncclSuccess) return res;
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    WARN("ncclCommRevoke: revokeFlags 0x%x (must be NCCL_REVOKE_DEFAULT, 0)", revokeFlags);
    return mcclDropinCommPut(comm, ncclInvalidArgument);
  }
  SERVED();
  return mcclDropinCommPut(comm, mcclDropinResult(mcclCommRevoke(mc)));
}
PNCCL_ALIAS(ncclCommRevoke);

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == NULL) {
    WARN("ncclCommGetAsyncError: asyncError is NULL");
    return ncclInvalidArgument;
  }
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommGetAsyncError", &mc);
  if (res != ncclSuccess) return res;
  mcclResult_t a;
  mcclResult_t r = mcclCommGetAsyncError(mc, &a);
  if (r == mcclSuccess) *asyncError = mcclDropinResult(a);
  return mcclDropinCommPut(comm, mcclDropinResult(r));
}
PNCCL_ALIAS(ncclCommGetAsyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommCount", &mc);
  return res != ncclSuccess ? res : mcclDropinCommPut(comm, mcclDropinResult(mcclCommCount(mc, count)));
}
PNCCL_ALIAS(ncclCommCount);

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommCuDevice", &mc);
  return res != ncclSuccess ? res : mcclDropinCommPut(comm, mcclDropinResult(mcclCommCuDevice(mc, device)));
}
PNCCL_ALIAS(ncclCommCuDevice);

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommUserRank", &mc);
  return res != ncclSuccess ? res : mcclDropinCommPut(comm, mcclDropinResult(mcclCommUserRank(mc, rank)));
}
PNCCL_ALIAS(ncclCommUserRank);

const char* ncclGetErrorString(ncclResult_t result) {
  return mcclGetErrorString((mcclResult_t)result);
}
PNCCL_ALIAS(ncclGetErrorString);

const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;  // NCCL keeps one message per process as well
  return mcclGetLastError(NULL);
}
PNCCL_ALIAS(ncclGetLastError);

// ---- comm split ----------------------------------------------------------------------------------
// Collective over the parent: every rank's (color, key) and a fresh unique id are summed into
// everybody's copy with one int64 allreduce on the parent (each rank fills only its own slot, so the
// sum is the table), then each color's ranks, ordered by (key, parent rank), create the new
// communicator with the id of its first rank. NCCL_SPLIT_NOCOLOR ranks take part and get NULL.
#define SPLIT_SLOT_WORDS (2 + sizeof(mcclUniqueId) / sizeof(int64_t))
_Static_assert(sizeof(mcclUniqueId) % sizeof(int64_t) == 0, "unique id not a whole number of words");

static ncclResult_t commSplit(mcclComm_t mc, int parentPolicy, int color, int key, ncclComm_t* newcomm,
                              ncclConfig_t* config) {
  ncclResult_t res;
  if (newcomm == NULL || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) {
    WARN("ncclCommSplit: newcomm %p, color %d (newcomm non-NULL; color >= 0 or NCCL_SPLIT_NOCOLOR)", (void*)newcomm,
         color);
    return ncclInvalidArgument;
  }
  if (config != NULL && config->magic != NCCL_CONFIG_MAGIC) {
    WARN("ncclCommSplit: config->magic is 0x%x, not NCCL_CONFIG_INITIALIZER's", config->magic);
    return ncclInvalidArgument;
  }
  if (groupDepth > 0) {
    WARN("ncclCommSplit inside ncclGroupStart/ncclGroupEnd is not supported by minccl");
    return ncclInvalidUsage;
  }
  int nranks, rank, dev;
  if ((res = mcclDropinResult(mcclCommCount(mc, &nranks))) != ncclSuccess ||
      (res = mcclDropinResult(mcclCommUserRank(mc, &rank))) || (res = mcclDropinResult(mcclCommCuDevice(mc, &dev))))
    return res;
  size_t words = (size_t)nranks * SPLIT_SLOT_WORDS;
  int64_t* table = calloc(words, sizeof(int64_t));
  int64_t* dtable = NULL;
  cudaStream_t stream = NULL;
  mcclUniqueId myId;
  if (!table) {
    WARN("ncclCommSplit: out of memory");
    return ncclSystemError;
  }
  if ((res = mcclDropinResult(mcclGetUniqueId(&myId))) != ncclSuccess) goto free_table;
  int64_t* mine = table + (size_t)rank * SPLIT_SLOT_WORDS;
  mine[0] = color;
  mine[1] = key;
  memcpy(mine + 2, &myId, sizeof(myId));
  if (cudaSetDevice(dev) != cudaSuccess || cudaMalloc((void**)&dtable, words * sizeof(int64_t)) != cudaSuccess) {
    WARN("ncclCommSplit: cudaMalloc of %zu bytes on device %d failed", words * sizeof(int64_t), dev);
    res = ncclUnhandledCudaError;
    goto free_table;
  }
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      // On the allreduce's own stream: a NULL-stream copy may land after a non-blocking stream's kernel.
      cudaMemcpyAsync(dtable, table, words * sizeof(int64_t), cudaMemcpyHostToDevice, stream) != cudaSuccess) {
    WARN("ncclCommSplit: staging the split table on device %d failed", dev);
    res = ncclUnhandledCudaError;
    goto free_dev;
  }
  if ((res = mcclDropinResult(mcclAllReduce(dtable, dtable, words, mcclInt64, mcclSum, mc, stream))) != ncclSuccess) {
    WARN("ncclCommSplit: exchanging the colors failed (%s)", ncclGetErrorString(res));
    goto free_dev;
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpy(table, dtable, words * sizeof(int64_t), cudaMemcpyDeviceToHost) != cudaSuccess) {
    WARN("ncclCommSplit: reading the split table back from device %d failed", dev);
    res = ncclUnhandledCudaError;
    goto free_dev;
  }
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = NULL;
    SERVED();
    goto free_dev;
  }
  // This rank's place among its color, ordered by (key, parent rank); the first one's id.
  int newRank = 0, newSize = 0, first = -1;
  for (int r = 0; r < nranks; r++) {
    const int64_t* s = table + (size_t)r * SPLIT_SLOT_WORDS;
    if (s[0] != color) continue;
    newSize++;
    if (s[1] < key || (s[1] == key && r < rank)) newRank++;
    if (first < 0 || s[1] < table[(size_t)first * SPLIT_SLOT_WORDS + 1]) first = r;
  }
  mcclUniqueId id;
  memcpy(&id, table + (size_t)first * SPLIT_SLOT_WORDS + 2, sizeof(id));
  // The child's CTA policy: its config's, else the parent's (NCCL inherits what the config leaves undefined).
  res = initComm(newcomm, newSize, &id, newRank, 1,
                 config != NULL && config->CTAPolicy != NCCL_CONFIG_UNDEF_INT ? config->CTAPolicy : parentPolicy);
  if (res == ncclSuccess) SERVED();
free_dev:
  if (stream) cudaStreamDestroy(stream);
  if (dtable) cudaFree(dtable);
free_table:
  free(table);
  return res;
}

// NCCL's shrink flags are minccl's: the parent's work left alone, or stopped first.
_Static_assert(NCCL_SHRINK_DEFAULT == MCCL_SHRINK_DEFAULT && NCCL_SHRINK_ABORT == MCCL_SHRINK_ABORT, "shrink flags");

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommShrink", &mc);
  if (res != ncclSuccess) return res;
  if (newcomm == NULL || (config != NULL && config->magic != NCCL_CONFIG_MAGIC)) {
    WARN("ncclCommShrink: newcomm %p, config %p (newcomm non-NULL; config from NCCL_CONFIG_INITIALIZER or NULL)",
         (void*)newcomm, (void*)config);
    return mcclDropinCommPut(comm, ncclInvalidArgument);
  }
  struct ncclComm* c = commNew();
  if (!c) return mcclDropinCommPut(comm, ncclSystemError);
  c->ctaPolicy = comm->ctaPolicy;  // minccl's shrink keeps the parent's policy
  res = mcclDropinResult(mcclCommShrink(mc, excludeRanksList, excludeRanksCount, &c->mc, shrinkFlags));
  if (res != ncclSuccess) {
    commFree(c);
    return mcclDropinCommPut(comm, res);
  }
  commPublish(c);
  *newcomm = c;
  SERVED();
  return mcclDropinCommPut(comm, ncclSuccess);
}
PNCCL_ALIAS(ncclCommShrink);

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommSplit", &mc);
  if (res != ncclSuccess) return res;
  res = commSplit(mc, comm->ctaPolicy, color, key, newcomm,
                  config);  // a finalized parent's allreduce is refused, as NCCL refuses it
  return mcclDropinCommPut(comm, res);
}
PNCCL_ALIAS(ncclCommSplit);

// ---- memory and registration ---------------------------------------------------------------------
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  SERVED();
  return mcclDropinResult(mcclMemAlloc(ptr, size));
}
PNCCL_ALIAS(ncclMemAlloc);

ncclResult_t ncclMemFree(void* ptr) {
  SERVED();
  return mcclDropinResult(mcclMemFree(ptr));
}
PNCCL_ALIAS(ncclMemFree);

// NCCL registers the buffer for zero-copy transfers; minccl copies through its FIFOs, so the
// registration only checks its arguments and hands back a handle for ncclCommDeregister.
static ncclResult_t commRegister(ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (buff == NULL || size == 0 || handle == NULL) {
    WARN("ncclCommRegister: buff %p, size %zu, handle %p (non-NULL, > 0, non-NULL)", buff, size, (void*)handle);
    return ncclInvalidArgument;
  }
  struct dropinReg* r = calloc(1, sizeof(*r));
  if (!r) {
    WARN("ncclCommRegister: out of memory");
    return ncclSystemError;
  }
  r->magic = DROPIN_REG_MAGIC;
  r->buff = buff;
  r->size = size;
  pthread_mutex_lock(&comm->lock);
  r->next = comm->regs;
  comm->regs = r;
  pthread_mutex_unlock(&comm->lock);
  *handle = r;
  SERVED();
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommRegister", &mc);
  return res != ncclSuccess ? res : mcclDropinCommPut(comm, commRegister(comm, buff, size, handle));
}
PNCCL_ALIAS(ncclCommRegister);

static ncclResult_t commDeregister(ncclComm_t comm, void* handle) {
  pthread_mutex_lock(&comm->lock);
  struct dropinReg** p = &comm->regs;
  while (*p && (void*)*p != handle) p = &(*p)->next;
  struct dropinReg* r = *p;
  if (r) *p = r->next;
  pthread_mutex_unlock(&comm->lock);
  if (!r) {
    WARN("ncclCommDeregister: handle %p is not a registration of comm %p", handle, (void*)comm);
    return ncclInvalidArgument;
  }
  r->magic = 0;
  free(r);
  SERVED();
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommDeregister", &mc);
  return res != ncclSuccess ? res : mcclDropinCommPut(comm, commDeregister(comm, handle));
}
PNCCL_ALIAS(ncclCommDeregister);

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommWindowRegister", &mc);
  if (res != ncclSuccess) return res;
  // A NULL win, as any refused argument, is minccl's to refuse: the registration still takes part in the
  // exchange, so the peers' fail alike instead of waiting.
  // Inside a group minccl registers at mcclGroupEnd and writes the window then, so the caller's own
  // pointer goes down (a local here would be written after this frame is gone: nccl-tests -R 2 lost
  // its stack to that). Both handle types are opaque pointers.
  _Static_assert(sizeof(ncclWindow_t) == sizeof(mcclWindow_t), "window handles are pointers");
  res = mcclDropinResult(mcclCommWindowRegister(mc, buff, size, (mcclWindow_t*)(void*)win, winFlags));
  if (res == ncclSuccess) SERVED();
  return mcclDropinCommPut(comm, res);
}
PNCCL_ALIAS(ncclCommWindowRegister);

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclCommWindowDeregister", &mc);
  if (res != ncclSuccess) return res;
  SERVED();
  return mcclDropinCommPut(comm, mcclDropinResult(mcclCommWindowDeregister(mc, (mcclWindow_t)win)));
}
PNCCL_ALIAS(ncclCommWindowDeregister);

// ---- reduction operators -------------------------------------------------------------------------
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclRedOpCreatePreMulSum", &mc);
  if (res != ncclSuccess) return res;
  SERVED();
  return mcclDropinCommPut(comm,
                           mcclDropinResult(mcclRedOpCreatePreMulSum((mcclRedOp_t*)op, scalar, (mcclDataType_t)datatype,
                                                                     (mcclScalarResidence_t)residence, mc)));
}
PNCCL_ALIAS(ncclRedOpCreatePreMulSum);

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclRedOpDestroy", &mc);
  if (res != ncclSuccess) return res;
  SERVED();
  return mcclDropinCommPut(comm, mcclDropinResult(mcclRedOpDestroy((mcclRedOp_t)op, mc)));
}
PNCCL_ALIAS(ncclRedOpDestroy);

// ---- collectives ---------------------------------------------------------------------------------
// The handle here (held for the call); the rest of NCCL's ArgsCheck (type, operation, root, counts,
// buffers) and whether the communicator is ready (not revoked, not finalized) in minccl.
static ncclResult_t collCheck(const char* call, ncclComm_t comm, mcclComm_t* mc) {
  ncclResult_t res = mcclDropinCommGet(comm, call, mc);
  if (res != ncclSuccess) return res;
  SERVED();
  return ncclSuccess;
}

#define DROPIN_CALL(name, mcclCall)                             \
  do {                                                          \
    mcclComm_t mc;                                              \
    ncclResult_t res = collCheck(#name, comm, &mc);             \
    if (res != ncclSuccess) return res;                         \
    return mcclDropinCommPut(comm, mcclDropinResult(mcclCall)); \
  } while (0)

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  DROPIN_CALL(ncclAllReduce,
              mcclAllReduce(sendbuff, recvbuff, count, (mcclDataType_t)datatype, (mcclRedOp_t)op, mc, stream));
}
PNCCL_ALIAS(ncclAllReduce);

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  DROPIN_CALL(ncclAllGather, mcclAllGather(sendbuff, recvbuff, sendcount, (mcclDataType_t)datatype, mc, stream));
}
PNCCL_ALIAS(ncclAllGather);

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  DROPIN_CALL(ncclReduceScatter,
              mcclReduceScatter(sendbuff, recvbuff, recvcount, (mcclDataType_t)datatype, (mcclRedOp_t)op, mc, stream));
}
PNCCL_ALIAS(ncclReduceScatter);

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  DROPIN_CALL(ncclBroadcast, mcclBroadcast(sendbuff, recvbuff, count, (mcclDataType_t)datatype, root, mc, stream));
}
PNCCL_ALIAS(ncclBroadcast);

// NCCL's legacy in-place broadcast.
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  DROPIN_CALL(ncclBcast, mcclBroadcast(buff, buff, count, (mcclDataType_t)datatype, root, mc, stream));
}
PNCCL_ALIAS(ncclBcast);

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  DROPIN_CALL(ncclReduce,
              mcclReduce(sendbuff, recvbuff, count, (mcclDataType_t)datatype, (mcclRedOp_t)op, root, mc, stream));
}
PNCCL_ALIAS(ncclReduce);

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  DROPIN_CALL(ncclSend, mcclSend(sendbuff, count, (mcclDataType_t)datatype, peer, mc, stream));
}
PNCCL_ALIAS(ncclSend);

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  DROPIN_CALL(ncclRecv, mcclRecv(recvbuff, count, (mcclDataType_t)datatype, peer, mc, stream));
}
PNCCL_ALIAS(ncclRecv);

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  DROPIN_CALL(ncclAlltoAll, mcclAlltoAll(sendbuff, recvbuff, count, (mcclDataType_t)datatype, mc, stream));
}
PNCCL_ALIAS(ncclAlltoAll);

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  DROPIN_CALL(ncclGather, mcclGather(sendbuff, recvbuff, count, (mcclDataType_t)datatype, root, mc, stream));
}
PNCCL_ALIAS(ncclGather);

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  DROPIN_CALL(ncclScatter, mcclScatter(sendbuff, recvbuff, count, (mcclDataType_t)datatype, root, mc, stream));
}
PNCCL_ALIAS(ncclScatter);

ncclResult_t ncclGroupStart(void) {
  ncclResult_t res = mcclDropinResult(mcclGroupStart());
  if (res == ncclSuccess) groupDepth++;
  SERVED();
  return res;
}
PNCCL_ALIAS(ncclGroupStart);

ncclResult_t ncclGroupEnd(void) {
  if (groupDepth > 0) groupDepth--;
  SERVED();
  return mcclDropinResult(mcclGroupEnd());
}
PNCCL_ALIAS(ncclGroupEnd);

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (groupDepth > 0) groupDepth--;
  SERVED();
  return mcclDropinResult(mcclGroupSimulateEnd((mcclSimInfo_t*)simInfo));
}
PNCCL_ALIAS(ncclGroupSimulateEnd);
