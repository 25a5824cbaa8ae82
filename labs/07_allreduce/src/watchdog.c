// Lab 07: the watchdog (NCCL has none; PyTorch's ProcessGroupNCCL watchdog only times a collective out).
// Each rank records the collectives it launches in a page of shared memory that every rank of its host
// maps, and a thread per communicator watches the oldest one that has not completed. When it has not
// completed for MCCL_WATCHDOG_TIMEOUT, or a peer's watchdog says it timed out, the thread reads every
// peer's record of that call and logs one line that names what differs, or the rank that has not made the
// call; then it sets the communicator's async error.
//
// The costs it puts on the calls: at a group's end, a record per collective (a few stores into the ring).
// What completed it learns from the communicator's launch ring (launches.c), which teardown reads too.
// Nothing when MCCL_WATCHDOG_TIMEOUT is 0.
//
// Sequence numbers count the collectives of a communicator from 1, in call order, AlltoAll, Gather and
// Scatter included (each is one call, whatever tasks it becomes); Send and Recv are not numbered (their
// pairs are not collective calls every rank makes alike). Every rank that makes the same calls gives
// them the same numbers, so op #17 on one rank is op #17 on every rank.
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "enqueue_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"
#include "mccl_shmutils.h"
#include "mccl_utils.h"

// Records a rank keeps: the most calls of one communicator a peer can be behind and still be named.
#define WD_RECORDS 1024
#define WD_MAGIC 0x6d63636c77646f67ull  // "mccllwdog"
// The longest pause between two looks of the thread.
#define WD_POLL_MS 100

// One call as every rank can read it. The writer stores seq last (release) and clears it first, so a
// reader that sees the same seq before and after copying the fields has a whole record (a seqlock).
struct wdRecord {
  uint64_t seq;
  uint64_t count;
  uint64_t launchLo;   // the numbers of the launches of the call's group (launches.c): [launchLo, launchLo + nLaunches)
  uint32_t nLaunches;  // 0: launched into a graph capture only (not watched)
  int32_t func;
  int32_t dtype;
  int32_t op;
  int32_t root;
  int32_t pad_;
};

// The page every rank of the host maps. Only its owner writes it.
struct wdPage {
  uint64_t magic;
  int32_t rank;
  int32_t pad_;
  uint64_t published;  // the highest op recorded and launched
  uint64_t completed;  // every op up to here has completed (the owner's watchdog thread)
  uint64_t stuck;      // nonzero: the owner's watchdog timed out on this op (its peers report it too)
  struct wdRecord rec[WD_RECORDS];
};

struct mcclLabWatchdog {
  mcclLabComm* comm;
  int64_t timeoutMs;
  struct wdPage* page;           // this rank's (shared, or malloc'ed when no peer shares the host)
  mcclShmHandle_t handle;        // NULL: page is malloc'ed
  struct wdPage** peers;         // [nRanks] every rank's page as mapped here; NULL for a rank whose page cannot be
  mcclShmHandle_t* peerHandles;  // [nRanks] read (another host, its watchdog off, or the attach failed)
  uint64_t seq;                  // the last op numbered (the enqueue layer's, at a group's end)
  pthread_t thread;
  int started;
  pthread_mutex_t lock;  // stop, with cond: the thread's sleep ends at once at destroy
  pthread_cond_t cond;
  int stop;
  char report[1024];  // the line logged, written before watchdogResult is set
};

static int funcReduces(int func) {
  return func == mcclFuncAllReduce || func == mcclFuncReduce || func == mcclFuncReduceScatter;
}
static int funcRooted(int func) {
  return func == mcclFuncBroadcast || func == mcclFuncReduce || func == mcclFuncGather || func == mcclFuncScatter;
}
static const char* funcName(int func) {
  static const char* names[mcclNumFuncs] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                            "AllReduce", "SendRecv", "Send",      "Recv",
                                            "AlltoAll",  "Scatter",  "Gather"};
  return func >= 0 && func < mcclNumFuncs ? names[func] : "unknown";
}

// ---- the record, at a group's end (plan.c) ----------------------------------------------------------

// The seqlock without fences (ThreadSanitizer models none): every field is a release store and an acquire
// load, so a reader that copied a field of the next writer also sees that writer's cleared seq (x86: plain moves).
#define ST(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#define LD(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)

uint64_t mcclLabWatchdogNumber(mcclLabComm* comm) {
  struct mcclLabWatchdog* wd = comm->watchdog;
  const uint64_t first = wd->seq + 1;
  for (struct mcclLabTask* t = comm->planner.head; t; t = t->next) {
    if (t->wdCall == 0) continue;
    if (t->wdCall == 1) {
      struct wdRecord* r = &wd->page->rec[++wd->seq % WD_RECORDS];
      __atomic_store_n(&r->seq, 0, __ATOMIC_RELAXED);
      ST(r->count, (uint64_t)t->wdCount);
      ST(r->func, t->wdFunc);
      ST(r->dtype, t->dtype);
      ST(r->op, t->wdOp);
      ST(r->root, t->wdRoot);
      ST(r->nLaunches, 0);
    }
  }
  return first;
}

void mcclLabWatchdogPublish(mcclLabComm* comm, uint64_t firstSeq, uint64_t launchLo) {
  struct mcclLabWatchdog* wd = comm->watchdog;
  const uint32_t n = (uint32_t)(comm->launches.last + 1 - launchLo);
  for (uint64_t s = firstSeq; s <= wd->seq; s++) {
    struct wdRecord* r = &wd->page->rec[s % WD_RECORDS];
    ST(r->launchLo, launchLo);
    ST(r->nLaunches, n);
    __atomic_store_n(&r->seq, s, __ATOMIC_RELEASE);
  }
  if (wd->seq >= firstSeq) __atomic_store_n(&wd->page->published, wd->seq, __ATOMIC_RELEASE);
}

// ---- the thread ------------------------------------------------------------------------------------

// A whole copy of the peer's record of op s, or 0 (not made yet, or overwritten since).
static int readRecord(const struct wdPage* p, uint64_t s, struct wdRecord* out) {
  const struct wdRecord* r = &p->rec[s % WD_RECORDS];
  if (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != s) return 0;
  out->count = LD(r->count);
  out->launchLo = LD(r->launchLo);
  out->nLaunches = LD(r->nLaunches);
  out->func = LD(r->func);
  out->dtype = LD(r->dtype);
  out->op = LD(r->op);
  out->root = LD(r->root);
  out->seq = s;
  return __atomic_load_n(&r->seq, __ATOMIC_RELAXED) == s;
}

// Whether this rank's op s has completed: every launch of its group has ended.
static int opDone(const struct mcclLabWatchdog* wd, uint64_t s) {
  struct wdRecord r;
  if (!readRecord(wd->page, s, &r)) return 1;  // overwritten: far in the past
  for (uint32_t i = 0; i < r.nLaunches; i++)
    if (!mcclLabLaunchEnded(wd->comm, r.launchLo + i)) return 0;
  return 1;
}

static void describe(const struct wdRecord* r, char* buf, size_t len) {
  int n =
      snprintf(buf, len, "%s count %llu %s", funcName(r->func), (unsigned long long)r->count, mcclTypeName(r->dtype));
  if (n > 0 && (size_t)n < len && funcReduces(r->func)) {
    if (r->op >= 0 && r->op < mcclNumOps)
      n += snprintf(buf + n, len - (size_t)n, " %s", mcclOpName(r->op));
    else
      n += snprintf(buf + n, len - (size_t)n, " premulsum(op %d)", r->op);
  }
  if (n > 0 && (size_t)n < len && funcRooted(r->func)) snprintf(buf + n, len - (size_t)n, " root %d", r->root);
}

// What differs between two records of one op, or NULL. Operation numbers of PreMulSum are each rank's own.
static const char* differs(const struct wdRecord* a, const struct wdRecord* b) {
  if (a->func != b->func) return "function";
  if (a->count != b->count) return "count";
  if (a->dtype != b->dtype) return "type";
  if (funcReduces(a->func) && a->op != b->op && (a->op < mcclNumOps || b->op < mcclNumOps)) return "operation";
  if (funcRooted(a->func) && a->root != b->root) return "root";
  return NULL;
}

// Append to a line, cut at its end.
static void append(char* buf, size_t len, size_t* n, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char* buf, size_t len, size_t* n, const char* fmt, ...) {
  if (*n >= len) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *n, len - *n, fmt, ap);
  va_end(ap);
  if (k > 0) *n += (size_t)k;
}
#define APPEND(...) append(buf, len, &n, __VA_ARGS__)

// Compare every readable rank's record of op s; write the line; return the error to set.
static mcclResult_t diagnose(struct mcclLabWatchdog* wd, uint64_t s, int64_t pendingMs, char* buf, size_t len) {
  const mcclLabComm* comm = wd->comm;
  const int nRanks = comm->nRanks;
  struct wdRecord* recs = (struct wdRecord*)calloc((size_t)nRanks, sizeof(*recs));
  int* state = (int*)calloc((size_t)nRanks, sizeof(int));  // 0 unreadable, 1 has it, 2 not called, 3 overwritten
  uint64_t* last = (uint64_t*)calloc((size_t)nRanks, sizeof(uint64_t));
  size_t n = 0;
  mcclResult_t err = mcclRemoteError;
  if (recs == NULL || state == NULL || last == NULL) {
    APPEND("op #%llu has not completed after %lld ms (out of memory reading the peers' records)", (unsigned long long)s,
           (long long)pendingMs);
    goto out;
  }
  int ref = -1;  // the first rank that has the record: the others are compared with it
  for (int r = 0; r < nRanks; r++) {
    const struct wdPage* p = wd->peers[r];
    if (p == NULL) continue;
    last[r] = __atomic_load_n(&p->published, __ATOMIC_ACQUIRE);
    state[r] = last[r] < s ? 2 : readRecord(p, s, &recs[r]) ? 1 : 3;
    if (state[r] == 1 && ref < 0) ref = r;
  }
  // The first difference found, with which ranks.
  const char* what = NULL;
  int other = -1;
  for (int r = 0; r < nRanks && what == NULL; r++)
    if (state[r] == 1 && r != ref && (what = differs(&recs[ref], &recs[r])) != NULL) other = r;
  char a[160], b[160];
  if (what != NULL && strcmp(what, "function") == 0) {
    err = mcclInvalidUsage;
    APPEND("op #%llu: rank %d is in %s #%llu while rank %d is in %s #%llu (function differs)", (unsigned long long)s,
           other, funcName(recs[other].func), (unsigned long long)s, ref, funcName(recs[ref].func),
           (unsigned long long)s);
  } else if (what != NULL) {
    err = mcclInvalidUsage;
    describe(&recs[ref], a, sizeof(a));
    describe(&recs[other], b, sizeof(b));
    APPEND("op #%llu: rank %d %s, rank %d %s (%s differs)", (unsigned long long)s, ref, a, other, b, what);
  } else if (ref >= 0) {
    describe(&recs[ref], a, sizeof(a));
    APPEND("op #%llu %s", (unsigned long long)s, a);
  } else {
    APPEND("op #%llu", (unsigned long long)s);
  }
  int missing = 0, unreadable = 0;
  for (int r = 0; r < nRanks; r++) {
    if (state[r] == 2) {
      if (last[r] > 0) {
        struct wdRecord l;
        if (readRecord(wd->peers[r], last[r], &l)) {
          describe(&l, a, sizeof(a));
          APPEND("; rank %d has not called op #%llu (its last is #%llu %s)", r, (unsigned long long)s,
                 (unsigned long long)last[r], a);
        } else {
          APPEND("; rank %d has not called op #%llu (its last is #%llu)", r, (unsigned long long)s,
                 (unsigned long long)last[r]);
        }
      } else {
        APPEND("; rank %d has not called op #%llu (it has called none)", r, (unsigned long long)s);
      }
      missing++;
    }
    if (state[r] == 3)
      APPEND("; rank %d is %llu ops past it (its record is gone)", r, (unsigned long long)(last[r] - s));
    if (state[r] == 0) unreadable++;
  }
  if (what == NULL && missing == 0) {
    APPEND(": called alike by every rank whose record is readable, not completed after %lld ms on rank %d",
           (long long)pendingMs, comm->rank);
  }
  if (unreadable > 0) {
    APPEND(" (not readable here: rank");
    for (int r = 0; r < nRanks; r++)
      if (state[r] == 0) APPEND(" %d", r);
    APPEND(": another host, or its watchdog off)");
  }
out:
  free(recs);
  free(state);
  free(last);
  return err;
}

static void report(struct mcclLabWatchdog* wd, uint64_t s, int64_t pendingMs) {
  char line[sizeof(wd->report)];
  mcclResult_t err = diagnose(wd, s, pendingMs, line, sizeof(line));
  // Peers that have not timed out yet (or never will: the rank that did not make the call) report now.
  uint64_t none = 0;
  __atomic_compare_exchange_n(&wd->page->stuck, &none, s, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  WARN("Watchdog: %s", line);
  memcpy(wd->report, line, sizeof(line));
  __atomic_store_n(&wd->comm->watchdogResult, (int)err, __ATOMIC_RELEASE);
}

static void* watchdogThread(void* arg) {
  struct mcclLabWatchdog* wd = (struct mcclLabWatchdog*)arg;
  mcclLabComm* comm = wd->comm;
  const int64_t poll = wd->timeoutMs / 10 < WD_POLL_MS ? (wd->timeoutMs / 10 > 0 ? wd->timeoutMs / 10 : 1) : WD_POLL_MS;
  uint64_t pending = 0;  // the op waited for, and since when
  int64_t since = 0;
  pthread_mutex_lock(&wd->lock);
  while (!wd->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(poll % 1000) * 1000000L;
    ts.tv_sec += (time_t)(poll / 1000) + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&wd->cond, &wd->lock, &ts);
    if (wd->stop) break;
    if (mcclIsAborted(comm->abortFlag)) continue;
    // The oldest op not completed.
    const uint64_t published = __atomic_load_n(&wd->page->published, __ATOMIC_ACQUIRE);
    uint64_t next = __atomic_load_n(&wd->page->completed, __ATOMIC_RELAXED) + 1;
    if (published >= WD_RECORDS && next <= published - WD_RECORDS) next = published - WD_RECORDS + 1;
    while (next <= published && opDone(wd, next)) next++;
    __atomic_store_n(&wd->page->completed, next - 1, __ATOMIC_RELEASE);
    const int64_t now = (int64_t)mcclClockMs();
    uint64_t stuck = 0;
    if (next <= published) {
      if (next != pending) {
        pending = next;
        since = now;
      } else if (now - since >= wd->timeoutMs) {
        stuck = next;
      }
    } else {
      pending = 0;
    }
    for (int r = 0; r < comm->nRanks && stuck == 0; r++)
      if (r != comm->rank && wd->peers[r]) stuck = __atomic_load_n(&wd->peers[r]->stuck, __ATOMIC_ACQUIRE);
    if (stuck != 0) {
      report(wd, stuck, stuck == pending ? now - since : 0);
      break;  // one report per communicator
    }
  }
  pthread_mutex_unlock(&wd->lock);
  return NULL;
}

// ---- set-up and tear-down --------------------------------------------------------------------------

static void watchdogFree(struct mcclLabWatchdog* wd) {
  if (wd->started) {
    pthread_mutex_lock(&wd->lock);
    wd->stop = 1;
    pthread_cond_signal(&wd->cond);
    pthread_mutex_unlock(&wd->lock);
    pthread_join(wd->thread, NULL);
  }
  for (int r = 0; wd->peerHandles && r < wd->comm->nRanks; r++) mcclShmClose(wd->peerHandles[r]);
  if (wd->handle)
    mcclShmClose(wd->handle);
  else
    free(wd->page);
  free(wd->peers);
  free(wd->peerHandles);
  pthread_cond_destroy(&wd->cond);
  pthread_mutex_destroy(&wd->lock);
  free(wd);
}

void mcclLabWatchdogFree(mcclLabComm* comm) {
  if (comm->watchdog) watchdogFree(comm->watchdog);
  comm->watchdog = NULL;
}

mcclResult_t mcclLabWatchdogInit(mcclLabComm* comm) {
  const int nRanks = comm->nRanks, rank = comm->rank;
  const int64_t timeoutMs = mcclParamWatchdogTimeout();
  const int on = nRanks > 1 && timeoutMs > 0;
  // Every rank takes part in the exchange of page names whatever its setting, so ranks that differ on
  // MCCL_WATCHDOG_TIMEOUT still agree on the bootstrap's messages ("" names no page).
  char(*paths)[MCCL_SHM_PATH_MAX] = (char(*)[MCCL_SHM_PATH_MAX])calloc((size_t)nRanks, MCCL_SHM_PATH_MAX);
  struct mcclLabWatchdog* wd = on ? (struct mcclLabWatchdog*)calloc(1, sizeof(*wd)) : NULL;
  mcclResult_t res = mcclSuccess;
  if (paths == NULL || (on && wd == NULL)) {
    WARN("Out of memory for rank %d's watchdog", rank);
    free(paths);
    free(wd);
    return mcclSystemError;
  }
  int localPeers = 0;
  for (int r = 0; r < nRanks; r++)
    localPeers += r != rank && comm->peerInfo[r].hostHash == comm->peerInfo[rank].hostHash;
  if (wd) {
    wd->comm = comm;
    wd->timeoutMs = timeoutMs;
    pthread_mutex_init(&wd->lock, NULL);
    pthread_cond_init(&wd->cond, NULL);
    wd->peers = (struct wdPage**)calloc((size_t)nRanks, sizeof(*wd->peers));
    wd->peerHandles = (mcclShmHandle_t*)calloc((size_t)nRanks, sizeof(*wd->peerHandles));
    if (wd->peers == NULL || wd->peerHandles == NULL) {
      WARN("Out of memory for rank %d's watchdog", rank);
      res = mcclSystemError;
      goto fail;
    }
    if (localPeers > 0) {
      void* p = NULL;
      MCCLCHECKGOTO(
          mcclShmOpen(paths[rank], MCCL_SHM_PATH_MAX, sizeof(struct wdPage), &p, NULL, localPeers, &wd->handle), res,
          fail);
      wd->page = (struct wdPage*)p;
    } else if ((wd->page = (struct wdPage*)calloc(1, sizeof(struct wdPage))) == NULL) {
      WARN("Out of memory for rank %d's watchdog page", rank);
      res = mcclSystemError;
      goto fail;
    }
    wd->page->rank = rank;
    // Peers of this process (mcclLabCommInitAll) read it after the bootstrap's exchange, which orders
    // nothing for ThreadSanitizer: an atomic.
    __atomic_store_n(&wd->page->magic, WD_MAGIC, __ATOMIC_RELEASE);
    wd->peers[rank] = wd->page;
  }
  MCCLCHECKGOTO(mcclBootstrapAllGather(comm->bootstrap, paths, MCCL_SHM_PATH_MAX), res, fail);
  if (wd) {
    for (int r = 0; r < nRanks; r++) {
      if (r == rank || paths[r][0] == '\0' || comm->peerInfo[r].hostHash != comm->peerInfo[rank].hostHash) continue;
      void* p = NULL;
      // A peer whose page this rank cannot map is left out of the reports, not a failure of the communicator.
      if (mcclShmOpen(paths[r], MCCL_SHM_PATH_MAX, sizeof(struct wdPage), &p, NULL, -1, &wd->peerHandles[r]) !=
          mcclSuccess) {
        INFO(MCCL_INIT, "rank %d: the watchdog cannot read rank %d's record (%s)", rank, r, paths[r]);
        continue;
      }
      if (__atomic_load_n(&((struct wdPage*)p)->magic, __ATOMIC_ACQUIRE) != WD_MAGIC) {
        mcclShmClose(wd->peerHandles[r]);
        wd->peerHandles[r] = NULL;
        continue;
      }
      wd->peers[r] = (struct wdPage*)p;
    }
    if (pthread_create(&wd->thread, NULL, watchdogThread, wd) != 0) {
      WARN("pthread_create failed for rank %d's watchdog", rank);
      res = mcclSystemError;
      goto fail;
    }
    wd->started = 1;
    comm->watchdog = wd;
    INFO(MCCL_INIT, "rank %d: watchdog on, %lld ms, %d peer record(s) on this host", rank, (long long)timeoutMs,
         localPeers);
  }
  free(paths);
  return mcclSuccess;
fail:
  free(paths);
  if (wd) watchdogFree(wd);
  return res;
}

mcclResult_t mcclLabWatchdogResult(const mcclLabComm* comm, const char** reportOut) {
  if (reportOut) *reportOut = NULL;
  if (comm == NULL) return mcclSuccess;
  mcclResult_t r = (mcclResult_t)__atomic_load_n(&comm->watchdogResult, __ATOMIC_ACQUIRE);
  if (r != mcclSuccess && reportOut && comm->watchdog) *reportOut = comm->watchdog->report;
  return r;
}
