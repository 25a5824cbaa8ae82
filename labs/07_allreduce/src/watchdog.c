// Lab 07: the watchdog (NCCL has none; PyTorch's ProcessGroupNCCL watchdog only times a collective out).
// Each rank records the collectives it launches in a page of shared memory that every rank of its host
// maps, and a thread per communicator watches the oldest one that has not completed. When it has not
// completed for MCCL_WATCHDOG_TIMEOUT, or a peer's watchdog says it timed out, the thread reads every
// peer's record of that call and logs one line that names what differs, or the rank that has not made the
// call; then it sets the communicator's async error.
//
// The costs it puts on the calls: at a group's end, one 8-byte store per collective (its record) and one to
// advance the numbering. What completed it learns from the communicator's launch ring (launches.c), which teardown
// reads too: each launch's word there carries the number of its group's first call besides its own. Nothing when
// MCCL_WATCHDOG_TIMEOUT is 0.
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

// A call's record is one 8-byte word, so a reader copies it whole with one load and its owner writes it with one
// store (no lock, no sequence to bump before and after), from high bits to low:
//   tag   20  the op's number, modulo 2^20: which op of those that share the slot (a slot is reused every 1024)
//   func   4  enum mcclFunc + 1 (0: the slot was never written)
//   type   4  mcclDataType_t
//   op     3  the built-in mcclRedOp_t, or WD_USER_OP for one from RedOpCreatePreMulSum
//   long   1  the count is in the slot's long word (below), the low 32 bits hold the root alone
//   low   32  a rooted function: root << 24 | count (root < 256, count < 2^24); any other: the count (< 2^32)
// A call whose count or root does not fit writes the long word first, the tag in its high bits and the count below.
#define WD_TAG_BITS 20
#define WD_TAG_MASK ((1ull << WD_TAG_BITS) - 1)
#define WD_USER_OP 7
#define WD_LONG_COUNT_MASK ((1ull << (64 - WD_TAG_BITS)) - 1)

// The page every rank of the host maps. Only its owner writes it.
struct wdPage {
  uint64_t magic;
  int32_t rank;
  int32_t pad_;
  uint64_t stuck;                // nonzero: the owner's watchdog timed out on this op (its peers report it too)
  uint64_t rec[WD_RECORDS];      // op s at s % WD_RECORDS
  uint64_t longRec[WD_RECORDS];  // the count of a record with its long bit set
};

// A record as the reports read it.
struct wdRecord {
  uint64_t seq;
  uint64_t count;
  int func;
  int dtype;
  int op;
  int root;
};

struct mcclLabWatchdog {
  mcclLabComm* comm;
  int64_t timeoutMs;
  struct wdPage* page;           // this rank's (shared, or malloc'ed when no peer shares the host)
  mcclShmHandle_t handle;        // NULL: page is malloc'ed
  struct wdPage** peers;         // [nRanks] every rank's page as mapped here; NULL for a rank whose page cannot be
  mcclShmHandle_t* peerHandles;  // [nRanks] read (another host, its watchdog off, or the attach failed)
  uint64_t seq;                  // the last op numbered, advanced at a group's end (the enqueue layer's thread)
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

// Op s's record of one call, and its long word (written only when *longWord is nonzero).
static uint64_t recordWord(uint64_t s, int func, int dtype, int op, int root, size_t count, uint64_t* longWord) {
  const uint64_t opBits = op >= 0 && op < mcclNumOps ? (uint64_t)op : WD_USER_OP;
  const uint64_t tag = s & WD_TAG_MASK;
  uint64_t w = tag << 44 | (uint64_t)(func + 1) << 40 | (uint64_t)dtype << 36 | opBits << 33;
  const uint64_t r = funcRooted(func) ? (uint64_t)root : 0;
  *longWord = 0;
  if (funcRooted(func) ? r < 256 && count < (1u << 24) : count <= UINT32_MAX) return w | r << 24 | count;
  *longWord = tag << (64 - WD_TAG_BITS) | (count < WD_LONG_COUNT_MASK ? count : WD_LONG_COUNT_MASK);
  return w | 1ull << 32 | (r & UINT32_MAX);
}

uint64_t mcclLabWatchdogNumber(mcclLabComm* comm) {
  struct mcclLabWatchdog* wd = comm->watchdog;
  uint64_t s = wd->seq;  // advanced at the group's end (mcclLabWatchdogPublish), while its launches read it
  for (const struct mcclLabTask* t = comm->planner.head; t; t = t->next) {
    int func = t->func, root = t->root;
    if (t->callFunc) {  // AlltoAll, Gather or Scatter, as sends and receives
      func = t->callFunc - 1;
      root = t->callRoot;
    } else if (func == mcclFuncSend || func == mcclFuncRecv || func == mcclFuncSendRecv) {
      continue;
    }
    uint64_t longWord;
    const uint64_t w = recordWord(++s, func, t->dtype, t->opHost, root, t->count, &longWord);
    if (longWord) __atomic_store_n(&wd->page->longRec[s % WD_RECORDS], longWord, __ATOMIC_RELEASE);
    __atomic_store_n(&wd->page->rec[s % WD_RECORDS], w, __ATOMIC_RELEASE);  // the one store of a call
  }
  return s - wd->seq;
}

void mcclLabWatchdogPublish(mcclLabComm* comm, uint64_t nCalls) {
  comm->watchdog->seq += nCalls;
}

// The op numbers as a launch carries them (launches.c, MCCL_LAUNCH_OP_BITS): 1 + (op - 1) modulo OP_MOD, never 0
// and equal to op modulo OP_MOD.
#define OP_MOD ((1ull << MCCL_LAUNCH_OP_BITS) - 1)

uint64_t mcclLabWatchdogOpTag(const mcclLabComm* comm) {
  const struct mcclLabWatchdog* wd = comm->watchdog;
  if (wd == NULL) return 0;
  const uint64_t first = wd->seq + 1;
  const uint64_t w = __atomic_load_n(&wd->page->rec[first % WD_RECORDS], __ATOMIC_RELAXED);
  if (w == 0 || w >> 44 != (first & WD_TAG_MASK)) return 0;  // the group recorded no call
  return (first - 1) % OP_MOD + 1;
}

// ---- the thread ------------------------------------------------------------------------------------

// The op a slot of p holds, numbered near s (within 2^19 of it), or 0 if the slot was never written.
static uint64_t slotSeq(const struct wdPage* p, uint64_t s, uint64_t* word) {
  const uint64_t w = __atomic_load_n(&p->rec[s % WD_RECORDS], __ATOMIC_ACQUIRE);
  *word = w;
  if (w == 0) return 0;
  const uint64_t d = ((w >> 44) - s) & WD_TAG_MASK;  // the slot's op - s, modulo 2^20
  return d < (1ull << (WD_TAG_BITS - 1)) ? s + d : s - ((1ull << WD_TAG_BITS) - d);
}

// Op s's record in p: 1 and *out, or 0 (a slot holding another op, or a long word being rewritten).
static int readRecord(const struct wdPage* p, uint64_t s, struct wdRecord* out) {
  uint64_t w;
  if (slotSeq(p, s, &w) != s) return 0;
  out->seq = s;
  out->func = (int)((w >> 40) & 15) - 1;
  out->dtype = (int)((w >> 36) & 15);
  out->op = (int)((w >> 33) & 7);
  const uint32_t low = (uint32_t)w;
  if (w >> 32 & 1) {
    const uint64_t l = __atomic_load_n(&p->longRec[s % WD_RECORDS], __ATOMIC_ACQUIRE);
    if (l >> (64 - WD_TAG_BITS) != (s & WD_TAG_MASK)) return 0;
    out->count = l & WD_LONG_COUNT_MASK;
    out->root = (int)low;
  } else {
    out->count = funcRooted(out->func) ? low & ((1u << 24) - 1) : low;
    out->root = funcRooted(out->func) ? (int)(low >> 24) : 0;
  }
  return 1;
}

// The highest op p has recorded, from the ops numbered near s (0: none).
static uint64_t lastRecorded(const struct wdPage* p, uint64_t s) {
  uint64_t last = 0, w;
  for (uint64_t i = 0; i < WD_RECORDS; i++) {
    const uint64_t q = slotSeq(p, s + i, &w);
    if (q > last) last = q;
  }
  return last;
}

static void describe(const struct wdRecord* r, char* buf, size_t len) {
  int n =
      snprintf(buf, len, "%s count %llu %s", funcName(r->func), (unsigned long long)r->count, mcclTypeName(r->dtype));
  if (n > 0 && (size_t)n < len && funcReduces(r->func)) {
    if (r->op == WD_USER_OP)
      n += snprintf(buf + n, len - (size_t)n, " premulsum");
    else
      n += snprintf(buf + n, len - (size_t)n, " %s", mcclOpName(r->op));
  }
  if (n > 0 && (size_t)n < len && funcRooted(r->func)) snprintf(buf + n, len - (size_t)n, " root %d", r->root);
}

// What differs between two records of one op, or NULL. Every PreMulSum operation records alike: their numbers are
// each rank's own.
static const char* differs(const struct wdRecord* a, const struct wdRecord* b) {
  if (a->func != b->func) return "function";
  if (a->count != b->count) return "count";
  if (a->dtype != b->dtype) return "type";
  if (funcReduces(a->func) && a->op != b->op) return "operation";
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
    uint64_t w;
    state[r] = readRecord(p, s, &recs[r]) ? 1 : slotSeq(p, s, &w) < s ? 2 : 3;
    if (state[r] != 1) last[r] = lastRecorded(p, s);
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
  uint64_t cursor = 1;  // every launch before it has ended
  uint64_t known = 0;   // the last op decoded from a launch: launches carry it modulo OP_MOD
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
    // The oldest launch of a recorded call that has not ended; its group's first op is the one waited for.
    const uint64_t last = __atomic_load_n(&comm->launches.last, __ATOMIC_RELAXED);
    if (cursor + MCCL_LAUNCH_RING <= last) cursor = last - MCCL_LAUNCH_RING + 1;  // far in the past: ended
    while (cursor <= last && mcclLabLaunchEnded(comm, cursor)) cursor++;
    uint64_t next = 0;
    for (uint64_t n = cursor; n <= last && next == 0; n++) {
      const uint64_t tag = mcclLabLaunchOpTag(comm, n);  // 0: sends and receives only, or not recorded yet
      if (tag == 0 || mcclLabLaunchEnded(comm, n)) continue;
      const uint64_t d = (tag + OP_MOD - known % OP_MOD) % OP_MOD;  // its op - known, modulo OP_MOD (tag = op too)
      next = known = d <= OP_MOD / 2 ? known + d : known - (OP_MOD - d);
    }
    const int64_t now = (int64_t)mcclClockMs();
    uint64_t stuck = 0;
    if (next != 0) {
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
