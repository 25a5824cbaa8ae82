// final/: NCCL's communicator API (src/init.cc, src/collectives.cc, src/misc/argcheck.cc in NCCL
// 2.28.9) over lab 07's communicator. The handle is checked against a list of live communicators,
// so a destroyed or made-up handle gives mcclInvalidArgument instead of a use after free (NCCL
// checks magic numbers inside the freed object).
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_ce.h"
#include "mccl_debug.h"
#include "mccl_collectives.h"
#include "mccl_dev_api.h"
#include "mccl_net.h"
#include "mccl_utils.h"
#include "minccl_internal.h"

static pthread_mutex_t liveLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t liveIdle = PTHREAD_COND_INITIALIZER;  // a handle's last call left (inFlight 0)
static struct mcclComm* liveComms;                          // every communicator created and not yet destroyed
static struct mcclClique* liveCliques;                      // keyed cliques with members in this process
static uint64_t nextUid = 1;

static int isLive(const struct mcclComm* comm) {
  for (struct mcclComm* c = liveComms; c; c = c->next)
    if (c == comm) return 1;
  return 0;
}

mcclResult_t mcclCommEnter(struct mcclComm* comm, uint64_t uid, const char* call) {
  if (comm == NULL) {
    WARN("Invalid argument: %s: comm is NULL", call);
    return mcclInvalidArgument;
  }
  pthread_mutex_lock(&liveLock);
  const int live = isLive(comm) && (uid == 0 || comm->uid == uid);  // the uid is read only once found live
  if (live) comm->inFlight++;
  pthread_mutex_unlock(&liveLock);
  if (!live) {
    WARN("Invalid argument: %s: comm %p is not a live communicator (destroyed, aborted, or never created)", call,
         (const void*)comm);
    return mcclInvalidArgument;
  }
  return mcclSuccess;
}

void mcclCommLeave(struct mcclComm* comm) {
  pthread_mutex_lock(&liveLock);
  if (--comm->inFlight == 0) pthread_cond_broadcast(&liveIdle);
  pthread_mutex_unlock(&liveLock);
}

// The clique of `id` (keyed), or a new unkeyed one (id NULL); with a reference for the caller.
static struct mcclClique* cliqueGet(const mcclUniqueId* id) {
  pthread_mutex_lock(&liveLock);
  struct mcclClique* q = NULL;
  if (id)
    for (q = liveCliques; q; q = q->next)
      if (q->keyed && memcmp(&q->id, id, sizeof(*id)) == 0) break;
  if (q == NULL && (q = (struct mcclClique*)calloc(1, sizeof(*q))) != NULL) {
    if (id) {
      q->id = *id;
      q->keyed = 1;
    }
    q->next = liveCliques;
    liveCliques = q;
  }
  if (q) q->refs++;
  pthread_mutex_unlock(&liveLock);
  if (q == NULL) WARN("Out of memory for a clique");
  return q;
}

static void cliquePut(struct mcclClique* q) {
  if (q == NULL) return;
  pthread_mutex_lock(&liveLock);
  if (--q->refs == 0) {
    for (struct mcclClique** p = &liveCliques; *p; p = &(*p)->next)
      if (*p == q) {
        *p = q->next;
        break;
      }
    free(q);
  }
  pthread_mutex_unlock(&liveLock);
}

// A new handle, in the live list: an initialised lab communicator (lab), or one whose initialisation
// runs later (labInit; the handle is mcclInProgress until then). Both are set before the handle is
// published, so an abort from another thread always finds the flag to raise.
static mcclResult_t commNew(mcclLabComm* lab, mcclLabComm* labInit, int rank, int nRanks, int cudaDev,
                            const mcclUniqueId* id, struct mcclClique* clique, struct mcclComm** out) {
  struct mcclComm* comm = (struct mcclComm*)calloc(1, sizeof(*comm));
  if (comm == NULL) {
    WARN("Out of memory for a communicator handle");
    return mcclSystemError;
  }
  comm->lab = lab;
  comm->labInit = labInit;
  comm->rank = rank;
  comm->nRanks = nRanks;
  comm->cudaDev = cudaDev;
  comm->hasId = id != NULL;
  if (id) comm->id = *id;
  comm->asyncResult = lab ? mcclSuccess : mcclInProgress;
  comm->clique = clique;
  pthread_mutex_lock(&liveLock);
  comm->uid = nextUid++;
  comm->next = liveComms;
  liveComms = comm;
  pthread_mutex_unlock(&liveLock);
  *out = comm;
  return mcclSuccess;
}

// Raise the communicator's abort flags: its kernels, proxy and bootstrap waits (an initialisation's
// too, through labInit) end with an error, and so do the other members of its clique.
static void commRaise(struct mcclComm* comm) {
  __atomic_store_n(&comm->revoked, 1, __ATOMIC_RELEASE);
  mcclLabComm* lab = comm->labInit ? comm->labInit : comm->lab;  // labInit never changes, lab may be set now
  if (lab) (void)mcclLabCommAbort(lab);
  if (comm->clique) __atomic_store_n(&comm->clique->aborted, 1, __ATOMIC_RELEASE);
}

// Take comm out of the live list (mcclInvalidArgument if it was not in it), so that no call enters it
// any more; with abort, raise its flags, so that the calls inside end; then wait for them to leave. The
// work this thread's or another thread's open group holds of it is dropped first: that group's end
// reports it (mcclInvalidUsage) and runs the rest.
static mcclResult_t commClose(struct mcclComm* comm, const char* call, int abort) {
  pthread_mutex_lock(&liveLock);
  struct mcclComm** p = &liveComms;
  while (*p && *p != comm) p = &(*p)->next;
  if (*p == NULL) {
    pthread_mutex_unlock(&liveLock);
    WARN("Invalid argument: %s: comm %p is not a live communicator (destroyed twice, or never created)", call,
         (void*)comm);
    return mcclInvalidArgument;
  }
  *p = comm->next;
  pthread_mutex_unlock(&liveLock);
  // An initialisation still running (non-blocking) or waiting (grouped) is stopped by destroy too: there
  // is no communicator yet whose work could be waited for.
  if (abort || __atomic_load_n(&comm->lab, __ATOMIC_ACQUIRE) == NULL) commRaise(comm);
  mcclLabComm* lab = comm->labInit ? comm->labInit : comm->lab;
  if (lab) mcclLabGroupForget(lab);
  pthread_mutex_lock(&liveLock);
  while (comm->inFlight > 0) pthread_cond_wait(&liveIdle, &liveLock);
  pthread_mutex_unlock(&liveLock);
  return mcclSuccess;
}

// Free the communicator. Lab 07's destroy first waits for the kernels the communicator launched, and
// for nothing else on the device (NCCL's commDestroySync waits on the communicator's own streams). After an
// abort the kernels see the flag and end within a few spins.
static mcclResult_t commFree(struct mcclComm* comm, int abort) {
  mcclResult_t res = mcclSuccess;
  mcclLabComm* lab = comm->labInit ? comm->labInit : comm->lab;  // one object once initialised
  if (lab) {
    mcclResult_t r = mcclLabDevRelease(lab);  // device communicators and windows, before what they map goes
    res = mcclLabCommDestroy(lab);
    if (res == mcclSuccess) res = r;
  }
  cliquePut(comm->clique);
  free(comm);
  return abort ? mcclSuccess : res;
}

// ---- version, ids, errors ------------------------------------------------------------------------

mcclResult_t mcclGetVersion(int* version) {
  MCCL_ARGCHECK(version != NULL, "mcclGetVersion: version is NULL");
  *version = MCCL_VERSION_CODE;
  return mcclSuccess;
}

const char* mcclGetLastError(mcclComm_t comm) {
  (void)comm;  // one buffer per process, as NCCL's ncclLastError
  return mcclDebugLastError();
}

// ---- communicators -------------------------------------------------------------------------------

// Every lab communicator made here has the copy-engine collectives (lab 10), as it has every transport: its CTA
// policy decides whether they run. `configured` is the config's policy; MCCL_CTA_POLICY overrides it.
static void commCtaPolicy(mcclLabComm* lab, int configured) {
  lab->ceColl.ops = &mcclCeOps;
  lab->ctaPolicy = mcclLabCtaPolicy(lab->rank, configured);
}

// Every lab communicator made here connects with lab 08's mcclTransports, the table with every transport
// (P2P, SHM, NET), so ranks on different hosts (MCCL_HOSTID) connect through NET.
mcclResult_t mcclCommInitDeferred(struct mcclComm* comm) {
  mcclResult_t res = cudaSetDevice(comm->cudaDev) == cudaSuccess ? mcclSuccess : mcclUnhandledCudaError;
  if (res == mcclSuccess && comm->labInit == NULL) res = mcclUnhandledCudaError;
  if (res == mcclSuccess) res = mcclLabCommInitRank(comm->labInit, &comm->id, 0);
  if (res == mcclSuccess) __atomic_store_n(&comm->lab, comm->labInit, __ATOMIC_RELEASE);  // labInit stays
  __atomic_store_n(&comm->asyncResult, (int)res, __ATOMIC_RELEASE);
  return res;
}

// A handle whose initialisation runs later (at the group's end, or on a thread): its lab communicator
// is allocated now, so that an abort has a flag to raise while the initialisation waits for the peers.
static mcclResult_t commNewDeferred(int nranks, const mcclUniqueId* id, int rank, int dev, int ctaPolicy,
                                    struct mcclClique* clique, struct mcclComm** out) {
  mcclLabComm* lab = NULL;
  MCCLCHECK(mcclLabCommAlloc(&lab, nranks, rank, dev, mcclTransports));
  commCtaPolicy(lab, ctaPolicy);
  struct mcclComm* c = NULL;
  mcclResult_t res = commNew(NULL, lab, rank, nranks, dev, id, clique, &c);
  if (res != mcclSuccess) {
    mcclLabCommDestroy(lab);
    return res;
  }
  *out = c;
  return mcclSuccess;
}

static void* initAsyncThread(void* p) {
  struct mcclComm* comm = (struct mcclComm*)p;
  (void)mcclCommInitDeferred(comm);
  mcclCommLeave(comm);  // entered by mcclCommInitRankAsync; the last touch of comm
  return NULL;
}

// mcclCommInitRank's and mcclCommInitRankAsync's arguments, the current device, and the clique of the id
// (with a reference for the caller).
static mcclResult_t initRankArgs(mcclComm_t* comm, int nranks, const mcclUniqueId* commId, int rank, const char* call,
                                 int* dev, struct mcclClique** clique) {
  MCCL_ARGCHECK(comm != NULL, "%s: comm is NULL", call);
  MCCL_ARGCHECK(nranks >= 1 && nranks <= MCCL_LAB_MAX_RANKS, "%s: nranks %d (must be 1 .. %d)", call, nranks,
                MCCL_LAB_MAX_RANKS);
  MCCL_ARGCHECK(rank >= 0 && rank < nranks, "%s: rank %d (must be 0 .. %d)", call, rank, nranks - 1);
  CUDACHECK(cudaGetDevice(dev));
  *clique = cliqueGet(commId);
  return *clique ? mcclSuccess : mcclSystemError;
}

static mcclResult_t initRankAsync(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank, int ctaPolicy) {
  int dev = 0;
  struct mcclClique* clique = NULL;
  MCCLCHECK(initRankArgs(comm, nranks, &commId, rank, "mcclCommInitRankAsync", &dev, &clique));
  struct mcclComm* c = NULL;
  mcclResult_t res = commNewDeferred(nranks, &commId, rank, dev, ctaPolicy, clique, &c);
  if (res != mcclSuccess) {
    cliquePut(clique);
    return res;
  }
  MCCLCHECK(mcclCommEnter(c, c->uid, "mcclCommInitRankAsync"));  // the thread's reference, left when it ends
  pthread_attr_t attr;
  pthread_t th;
  int err = pthread_attr_init(&attr);
  if (err == 0) err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (err == 0) err = pthread_create(&th, &attr, initAsyncThread, c);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    WARN("mcclCommInitRankAsync: pthread_create: %s", strerror(err));
    mcclCommLeave(c);
    (void)commClose(c, "mcclCommInitRankAsync", 1);
    commFree(c, 1);
    return mcclSystemError;
  }
  *comm = c;
  return mcclSuccess;
}

mcclResult_t mcclCommInitRankAsync(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank) {
  return initRankAsync(comm, nranks, commId, rank, MCCL_CTA_POLICY_DEFAULT);
}

static mcclResult_t initRank(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank, int ctaPolicy) {
  int dev = 0;
  struct mcclClique* clique = NULL;
  MCCLCHECK(initRankArgs(comm, nranks, &commId, rank, "mcclCommInitRank", &dev, &clique));
  struct mcclComm* c = NULL;
  mcclLabComm* lab = NULL;
  mcclResult_t res;
  if (mcclGroupActive()) {
    MCCLCHECKGOTO(commNewDeferred(nranks, &commId, rank, dev, ctaPolicy, clique, &c), res, fail);
    MCCLCHECKGOTO(mcclGroupRecordInit(c), res, fail);
    *comm = c;
    return mcclSuccess;
  }
  MCCLCHECKGOTO(mcclLabCommInit(&lab, nranks, &commId, rank, dev, 0, mcclTransports), res, fail);
  commCtaPolicy(lab, ctaPolicy);
  MCCLCHECKGOTO(commNew(lab, NULL, rank, nranks, dev, &commId, clique, &c), res, fail);
  *comm = c;
  return mcclSuccess;
fail:
  if (c) {
    (void)commClose(c, "mcclCommInitRank", 0);
    commFree(c, 0);  // drops the clique reference too
  } else {
    if (lab) mcclLabCommDestroy(lab);
    cliquePut(clique);
  }
  return res;
}

mcclResult_t mcclCommInitRank(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank) {
  return initRank(comm, nranks, commId, rank, MCCL_CTA_POLICY_DEFAULT);
}

mcclResult_t mcclCommInitRankConfig(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank, mcclConfig_t* config) {
  int blocking = 1, policy = MCCL_CTA_POLICY_DEFAULT;
  if (config != NULL) {  // NCCL's parseCommConfig: a bad field is refused, an undefined one is the default
    MCCL_ARGCHECK(config->magic == MCCL_CONFIG_MAGIC,
                  "mcclCommInitRankConfig: config->magic is 0x%x, not MCCL_CONFIG_INITIALIZER's 0x%x", config->magic,
                  MCCL_CONFIG_MAGIC);
    MCCL_ARGCHECK(config->blocking == MCCL_CONFIG_UNDEF_INT || config->blocking == 0 || config->blocking == 1,
                  "mcclCommInitRankConfig: config->blocking is %d (0 or 1)", config->blocking);
    MCCL_ARGCHECK(config->CTAPolicy == MCCL_CONFIG_UNDEF_INT ||
                      (config->CTAPolicy >= MCCL_CTA_POLICY_DEFAULT && config->CTAPolicy <= MCCL_CTA_POLICY_ZERO),
                  "mcclCommInitRankConfig: config->CTAPolicy is %d (MCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO)",
                  config->CTAPolicy);
    if (config->blocking == 0) blocking = 0;
    if (config->CTAPolicy != MCCL_CONFIG_UNDEF_INT) policy = config->CTAPolicy;
  }
  // Inside a group every init waits for the group's end: a non-blocking one is the same there.
  if (!blocking && !mcclGroupActive()) return initRankAsync(comm, nranks, commId, rank, policy);
  return initRank(comm, nranks, commId, rank, policy);
}

mcclResult_t mcclCommInitAll(mcclComm_t* comms, int ndev, const int* devlist) {
  MCCL_ARGCHECK(comms != NULL, "mcclCommInitAll: comms is NULL");
  MCCL_ARGCHECK(ndev >= 1 && ndev <= MCCL_LAB_MAX_RANKS, "mcclCommInitAll: ndev %d (must be 1 .. %d)", ndev,
                MCCL_LAB_MAX_RANKS);
  mcclLabComm* labs[MCCL_LAB_MAX_RANKS];
  struct mcclComm* out[MCCL_LAB_MAX_RANKS];
  memset(out, 0, sizeof(out));
  MCCLCHECK(mcclLabCommInitAll(labs, ndev, devlist, 0, mcclTransports));
  for (int i = 0; i < ndev; i++) commCtaPolicy(labs[i], MCCL_CTA_POLICY_DEFAULT);
  mcclResult_t res = mcclSuccess;
  struct mcclClique* clique = cliqueGet(NULL);
  if (clique == NULL) res = mcclSystemError;
  for (int i = 0; i < ndev; i++) {
    if (res == mcclSuccess) {
      pthread_mutex_lock(&liveLock);
      if (i > 0) clique->refs++;  // cliqueGet took the first member's reference
      pthread_mutex_unlock(&liveLock);
      res = commNew(labs[i], NULL, labs[i]->rank, ndev, labs[i]->cudaDev, NULL, clique, &out[i]);
      if (res != mcclSuccess && i > 0) cliquePut(clique);
      if (res == mcclSuccess) continue;
    }
    mcclLabCommDestroy(labs[i]);  // not wrapped: free it here
  }
  if (res != mcclSuccess) {
    for (int i = 0; i < ndev; i++)
      if (out[i]) {
        (void)commClose(out[i], "mcclCommInitAll", 0);
        commFree(out[i], 0);
      }
    if (out[0] == NULL) cliquePut(clique);
    return res;
  }
  for (int i = 0; i < ndev; i++) comms[i] = out[i];
  return mcclSuccess;
}

mcclResult_t mcclCommDestroy(mcclComm_t comm) {
  if (comm == NULL) return mcclSuccess;  // as NCCL
  MCCLCHECK(commClose(comm, "mcclCommDestroy", 0));
  return commFree(comm, 0);
}

mcclResult_t mcclCommAbort(mcclComm_t comm) {
  if (comm == NULL) return mcclSuccess;  // as NCCL
  MCCLCHECK(commClose(comm, "mcclCommAbort", 1));
  return commFree(comm, 1);
}

mcclResult_t mcclCommRevoke(mcclComm_t comm) {
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommRevoke"));
  commRaise(comm);
  mcclCommLeave(comm);
  return mcclSuccess;
}

mcclResult_t mcclCommShrink(mcclComm_t comm, const int* excludeRanks, int nExclude, mcclComm_t* newcomm, int flags) {
  MCCL_ARGCHECK(newcomm != NULL, "mcclCommShrink: newcomm is NULL");
  MCCL_ARGCHECK(flags == MCCL_SHRINK_DEFAULT || flags == MCCL_SHRINK_ABORT,
                "mcclCommShrink: flags 0x%x (MCCL_SHRINK_DEFAULT or MCCL_SHRINK_ABORT)", flags);
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommShrink"));
  mcclResult_t res = mcclSuccess;
  // Every survivor computes the same thing from the same arguments: who stays, its new rank, and the
  // new communicator's id (derived from the parent's, so no message crosses the parent, whose dead
  // rank may block it).
  int keep[MCCL_LAB_MAX_RANKS], newRank = -1, newSize = 0, root = -1;
  if (nExclude < 0 || nExclude >= comm->nRanks || (nExclude > 0 && excludeRanks == NULL)) {
    WARN("Invalid argument: mcclCommShrink on rank %d: %d rank(s) to exclude of %d (list %p): at least one must stay",
         comm->rank, nExclude, comm->nRanks, (const void*)excludeRanks);
    res = mcclInvalidArgument;
    goto out;
  }
  for (int r = 0; r < comm->nRanks; r++) keep[r] = 1;
  for (int i = 0; i < nExclude; i++) {
    const int x = excludeRanks[i];
    if (x < 0 || x >= comm->nRanks || !keep[x]) {
      WARN("Invalid argument: mcclCommShrink on rank %d: excluded rank %d is out of range (0 .. %d) or listed twice",
           comm->rank, x, comm->nRanks - 1);
      res = mcclInvalidArgument;
      goto out;
    }
    keep[x] = 0;
  }
  if (!keep[comm->rank]) {
    WARN("Invalid usage: mcclCommShrink: rank %d is in its own exclude list (excluded ranks do not call it)",
         comm->rank);
    res = mcclInvalidUsage;
    goto out;
  }
  if (!comm->hasId || comm->lab == NULL) {
    WARN("Invalid usage: mcclCommShrink on rank %d: %s", comm->rank,
         comm->lab == NULL ? "the communicator was never initialised"
                           : "a communicator of mcclCommInitAll has no unique id to derive the new one from");
    res = mcclInvalidUsage;
    goto out;
  }
  for (int r = 0; r < comm->nRanks; r++) {
    if (!keep[r]) continue;
    if (root < 0) root = r;
    if (r == comm->rank) newRank = newSize;
    newSize++;
  }
  // MCCL_SHRINK_ABORT: the parent's work stops first (its kernels may wait on the excluded ranks for ever).
  if (flags == MCCL_SHRINK_ABORT) commRaise(comm);
  const uint32_t generation = __atomic_fetch_add(&comm->shrinks, 1, __ATOMIC_RELAXED);
  mcclUniqueId id;
  res = mcclBootstrapDeriveId(&comm->id, generation, comm->lab->peerInfo[root].hostHash, &id);
  int saved = -1;
  if (res == mcclSuccess && cudaGetDevice(&saved) == cudaSuccess && cudaSetDevice(comm->cudaDev) == cudaSuccess) {
    INFO(MCCL_INIT, "mcclCommShrink: rank %d of %d becomes rank %d of %d (rank 0: parent rank %d)", comm->rank,
         comm->nRanks, newRank, newSize, root);
    // The parent's CTA policy goes on (NCCL: a child without a config of its own inherits the parent's).
    res = initRank(newcomm, newSize, id, newRank, comm->lab->ctaPolicy);  // grouped: at the group's end, as any init
  } else if (res == mcclSuccess) {
    res = mcclUnhandledCudaError;
  }
  if (saved >= 0) cudaSetDevice(saved);
out:
  mcclCommLeave(comm);
  return res;
}

mcclResult_t mcclCommCount(const mcclComm_t comm, int* count) {
  MCCL_ARGCHECK(count != NULL, "mcclCommCount: count is NULL");
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommCount"));
  *count = comm->nRanks;
  mcclCommLeave(comm);
  return mcclSuccess;
}

mcclResult_t mcclCommCuDevice(const mcclComm_t comm, int* device) {
  MCCL_ARGCHECK(device != NULL, "mcclCommCuDevice: device is NULL");
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommCuDevice"));
  *device = comm->cudaDev;
  mcclCommLeave(comm);
  return mcclSuccess;
}

mcclResult_t mcclCommUserRank(const mcclComm_t comm, int* rank) {
  MCCL_ARGCHECK(rank != NULL, "mcclCommUserRank: rank is NULL");
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommUserRank"));
  *rank = comm->rank;
  mcclCommLeave(comm);
  return mcclSuccess;
}

mcclResult_t mcclCommGetAsyncError(mcclComm_t comm, mcclResult_t* asyncError) {
  MCCL_ARGCHECK(asyncError != NULL, "mcclCommGetAsyncError: asyncError is NULL");
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommGetAsyncError"));
  mcclResult_t r = (mcclResult_t)__atomic_load_n(&comm->asyncResult, __ATOMIC_ACQUIRE);
  if (r == mcclSuccess && comm->lab) {
    const mcclLabComm* lab = comm->lab;
    mcclResult_t watchdog = mcclSuccess;
    if (mcclIsAborted(lab->abortFlag)) {
      r = mcclInternalError;  // as NCCL reports its own abort
    } else if ((watchdog = mcclLabWatchdogResult(lab, NULL)) != mcclSuccess) {
      r = watchdog;  // a collective stuck past MCCL_WATCHDOG_TIMEOUT: the watchdog's WARN named why
    } else if (comm->clique && __atomic_load_n(&comm->clique->aborted, __ATOMIC_ACQUIRE)) {
      WARN("rank %d: a communicator of the same clique in this process was aborted", comm->rank);
      r = mcclRemoteError;
    } else {
      // Peers in other processes: one that has exited can no longer take part (NCCL learns it from
      // its proxy's sockets). Where the peer's pid names a process here (same boot and pid namespace,
      // posed hosts included), the pid says it at once, a zombie included (exited, not yet reaped by
      // its launcher); a pid from another machine or container names nothing here, and is never
      // looked up: the bootstrap's watch connection with that peer says it.
      pid_t me = getpid();
      const uint64_t ns = lab->peerInfo[lab->rank].pidNsHash;  // this rank's record: no /proc read per poll
      for (int p = 0; p < lab->nRanks && r == mcclSuccess; p++) {
        pid_t pid = (pid_t)lab->peerInfo[p].pid;
        if (ns == 0 || lab->peerInfo[p].pidNsHash != ns) continue;
        if (pid > 0 && pid != me && mcclProcessGone((int)pid)) {
          WARN("rank %d: peer rank %d (pid %d) has exited", comm->rank, p, (int)pid);
          r = mcclRemoteError;
        }
      }
      int gone = -1;
      if (r == mcclSuccess && mcclBootstrapPeerGone(lab->bootstrap, &gone) == mcclSuccess && gone >= 0) {
        // MCCL_PEER_WATCH=2 watches local peers too: say where the peer was only where it is known.
        const int local = ns != 0 && lab->peerInfo[gone].pidNsHash == ns;
        WARN("rank %d: peer rank %d (pid %d%s) has exited: its bootstrap watch connection closed", comm->rank, gone,
             (int)lab->peerInfo[gone].pid, local ? "" : " on another machine or in another pid namespace");
        r = mcclRemoteError;
      }
    }
    if (r != mcclSuccess) __atomic_store_n(&comm->asyncResult, (int)r, __ATOMIC_RELEASE);
  }
  mcclCommLeave(comm);
  *asyncError = r;
  return mcclSuccess;
}

// A communicator whose grouped initialisation is pending or failed cannot run anything.
mcclResult_t mcclCommReady(const struct mcclComm* comm, const char* call) {
  if (__atomic_load_n(&comm->revoked, __ATOMIC_ACQUIRE)) {
    WARN("Invalid usage: %s: rank %d's communicator was revoked (mcclCommRevoke): only destroy or abort it", call,
         comm->rank);
    return mcclInvalidUsage;
  }
  if (__atomic_load_n(&comm->finalized, __ATOMIC_ACQUIRE)) {
    WARN("Invalid usage: %s: rank %d's communicator was finalized (mcclCommFinalize): only destroy or abort it", call,
         comm->rank);
    return mcclInvalidUsage;
  }
  if (__atomic_load_n(&comm->lab, __ATOMIC_ACQUIRE) != NULL) return mcclSuccess;
  mcclResult_t r = (mcclResult_t)__atomic_load_n(&comm->asyncResult, __ATOMIC_ACQUIRE);
  WARN("Invalid usage: %s: rank %d's communicator is %s", call, comm->rank,
       r == mcclInProgress ? "still being created (a grouped init runs at its mcclGroupEnd, a non-blocking one on "
                             "its own thread: wait until mcclCommGetAsyncError gives mcclSuccess)"
                           : "the failed result of a grouped or non-blocking init");
  return mcclInvalidUsage;
}

mcclResult_t mcclCommFinalize(mcclComm_t comm) {
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommFinalize"));
  mcclResult_t res = mcclCommReady(comm, "mcclCommFinalize");
  if (res == mcclSuccess) res = mcclLabCommWaitLaunches(comm->lab);
  if (res == mcclSuccess) __atomic_store_n(&comm->finalized, 1, __ATOMIC_RELEASE);
  mcclCommLeave(comm);
  return res;
}

// ---- windows -------------------------------------------------------------------------------------

mcclResult_t mcclWindowRegisterNow(struct mcclComm* comm, void* buff, size_t size, mcclWindow_t* win) {
  MCCLCHECK(mcclCommReady(comm, "mcclCommWindowRegister"));
  int saved = 0;
  CUDACHECK(cudaGetDevice(&saved));
  CUDACHECK(cudaSetDevice(comm->cudaDev));
  mcclLabWindow* w = NULL;
  mcclWindow_t dev = NULL;
  mcclResult_t res = mcclLabWindowRegister(comm->lab, buff, size, &w);
  // The handle is the window's device view (lab 09): a kernel dereferences it as NCCL's ncclWindow_t.
  if (res == mcclSuccess && (res = mcclDevWindowCreate(comm->lab, w, &dev)) != mcclSuccess)
    (void)mcclLabWindowDeregister(comm->lab, w);
  cudaSetDevice(saved);
  if (res == mcclSuccess && win) *win = dev;
  return res;
}

// Registration is collective: a rank that refuses its arguments still takes part in the exchange, as a
// refusal (lab 07's size 0), now or at its group's end, so that every rank's registration fails at once
// and the ranks' bootstrap messages stay in step (returning early would leave the peers waiting until
// the timeout, then one exchange apart for good).
mcclResult_t mcclCommWindowRegister(mcclComm_t comm, void* buff, size_t size, mcclWindow_t* win, int winFlags) {
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommWindowRegister"));
  const int refused = buff == NULL || size == 0 || win == NULL || (winFlags & ~MCCL_WIN_COLL_SYMMETRIC) != 0;
  if (refused) {
    WARN(
        "Invalid argument: mcclCommWindowRegister on rank %d: buff %p, size %zu, win %p, winFlags 0x%x (non-NULL, "
        "> 0, non-NULL, MCCL_WIN_DEFAULT or MCCL_WIN_COLL_SYMMETRIC); it takes part in the exchange as a refusal",
        comm->rank, buff, size, (void*)win, winFlags);
    buff = NULL;
    size = 0;
  }
  mcclResult_t res =
      mcclGroupActive() ? mcclGroupRecordWindow(comm, buff, size, win) : mcclWindowRegisterNow(comm, buff, size, win);
  mcclCommLeave(comm);
  return refused ? mcclInvalidArgument : res;
}

mcclResult_t mcclCommWindowDeregister(mcclComm_t comm, mcclWindow_t win) {
  MCCL_ARGCHECK(win != NULL, "mcclCommWindowDeregister: win is NULL");
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclCommWindowDeregister"));
  int saved = -1;
  mcclResult_t res = mcclCommReady(comm, "mcclCommWindowDeregister");
  if (res != mcclSuccess) goto out;
  CUDACHECKGOTO(cudaGetDevice(&saved), res, out);
  CUDACHECKGOTO(cudaSetDevice(comm->cudaDev), res, out);
  mcclLabWindow* w = NULL;
  if ((res = mcclDevWindowLabWindow(comm->lab, win, &w)) != mcclSuccess) goto out;  // not a window of comm
  res = mcclLabWindowDeregister(comm->lab, w);  // waits for the communicator's kernels
  mcclResult_t r = mcclDevWindowDestroy(comm->lab, win);
  if (res == mcclSuccess) res = r;
out:
  if (saved >= 0) cudaSetDevice(saved);
  mcclCommLeave(comm);
  return res;
}

// ---- collectives and point-to-point -----------------------------------------------------------------
// Each call checks the handle (NCCL's CommCheck) and hands its arguments to lab 07, whose enqueue layer
// checks the rest, makes the task, and runs it at the group's end with the communicator's device set. A
// handle that fails here inside a group fails that group too (lab 07's group, which the calls share).
static mcclResult_t callComm(struct mcclComm* comm, const char* call, mcclLabComm** lab) {
  mcclResult_t res = mcclCommEnter(comm, 0, call);
  if (res == mcclSuccess) {
    res = mcclCommReady(comm, call);
    if (res == mcclSuccess && mcclGroupActive()) res = mcclGroupRecordUse(comm);
    if (res != mcclSuccess) mcclCommLeave(comm);
  }
  if (res != mcclSuccess) {
    mcclLabGroupFail(res);
    return res;
  }
  *lab = comm->lab;
  return mcclSuccess;
}

// The end of a call that callComm entered.
static mcclResult_t callDone(struct mcclComm* comm, mcclResult_t res) {
  mcclCommLeave(comm);
  return res;
}

mcclResult_t mcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, mcclRedOp_t op,
                           mcclComm_t comm, cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclAllReduce", &lab));
  return callDone(comm, mcclLabAllReduce(sendbuff, recvbuff, count, datatype, op, lab, stream));
}

mcclResult_t mcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mcclDataType_t datatype,
                           mcclComm_t comm, cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclAllGather", &lab));
  return callDone(comm, mcclLabAllGather(sendbuff, recvbuff, sendcount, datatype, lab, stream));
}

mcclResult_t mcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mcclDataType_t datatype,
                               mcclRedOp_t op, mcclComm_t comm, cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclReduceScatter", &lab));
  return callDone(comm, mcclLabReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, lab, stream));
}

mcclResult_t mcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, int root,
                           mcclComm_t comm, cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclBroadcast", &lab));
  return callDone(comm, mcclLabBroadcast(sendbuff, recvbuff, count, datatype, root, lab, stream));
}

mcclResult_t mcclReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, mcclRedOp_t op,
                        int root, mcclComm_t comm, cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclReduce", &lab));
  return callDone(comm, mcclLabReduce(sendbuff, recvbuff, count, datatype, op, root, lab, stream));
}

mcclResult_t mcclSend(const void* sendbuff, size_t count, mcclDataType_t datatype, int peer, mcclComm_t comm,
                      cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclSend", &lab));
  return callDone(comm, mcclLabSend(sendbuff, count, datatype, peer, lab, stream));
}

mcclResult_t mcclRecv(void* recvbuff, size_t count, mcclDataType_t datatype, int peer, mcclComm_t comm,
                      cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclRecv", &lab));
  return callDone(comm, mcclLabRecv(recvbuff, count, datatype, peer, lab, stream));
}

mcclResult_t mcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, mcclComm_t comm,
                          cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclAlltoAll", &lab));
  return callDone(comm, mcclLabAlltoAll(sendbuff, recvbuff, count, datatype, lab, stream));
}

mcclResult_t mcclGather(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, int root,
                        mcclComm_t comm, cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclGather", &lab));
  return callDone(comm, mcclLabGather(sendbuff, recvbuff, count, datatype, root, lab, stream));
}

mcclResult_t mcclScatter(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype, int root,
                         mcclComm_t comm, cudaStream_t stream) {
  mcclLabComm* lab;
  MCCLCHECK(callComm(comm, "mcclScatter", &lab));
  return callDone(comm, mcclLabScatter(sendbuff, recvbuff, count, datatype, root, lab, stream));
}

mcclResult_t mcclRedOpCreatePreMulSum(mcclRedOp_t* op, void* scalar, mcclDataType_t datatype,
                                      mcclScalarResidence_t residence, mcclComm_t comm) {
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclRedOpCreatePreMulSum"));
  mcclResult_t res = mcclCommReady(comm, "mcclRedOpCreatePreMulSum");
  if (res == mcclSuccess) res = mcclLabRedOpCreatePreMulSum(op, scalar, datatype, residence, comm->lab);
  mcclCommLeave(comm);
  return res;
}

mcclResult_t mcclRedOpDestroy(mcclRedOp_t op, mcclComm_t comm) {
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclRedOpDestroy"));
  mcclResult_t res = mcclCommReady(comm, "mcclRedOpDestroy");
  if (res == mcclSuccess) res = mcclLabRedOpDestroy(op, comm->lab);
  mcclCommLeave(comm);
  return res;
}
