// Streams, events and copies. A stream is an ordered queue run by one worker thread, so async copies
// really overlap with host work. The NULL (legacy) stream runs its op inline in the calling thread after
// draining the current device's blocking streams; cudaStreamPerThread runs inline without draining.
// Except where CUDA lets a NULL-stream call return before its work is done (the runtime guide's "API
// synchronization behavior"): a memset of device memory, and a copy into device memory from pageable host
// memory (staged first, as the driver does) or from device memory. Those go to the legacy-stream worker,
// which runs them MCCL_SIM_LATE_COPY_US later, so work on a non-blocking stream that was not ordered
// after them sees the old bytes, as it may on a GPU.
// Kernels are never run inline: a kernel on the NULL stream goes to the device's legacy-stream worker (a
// hidden stream started on the first such launch), queued behind the work of the device's blocking
// streams, and work queued later on a blocking stream waits for it (simEnqueueWork).
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "sim_internal.h"

#define SIM_STREAM_MAGIC 0x5c7c7c02u
#define SIM_EVENT_MAGIC 0x5c7c7c03u

enum { OP_COPY, OP_SET8, OP_SET32, OP_RECORD, OP_WAIT, OP_HOSTFN, OP_WRITEVAL, OP_WAITVAL, OP_FENCE, OP_EXIT };

typedef struct simOp {
  struct simOp* next;
  int kind;
  void* dst;
  const void* src;
  size_t n;
  unsigned int val;
  CUevent ev;
  unsigned long long seq;
  void (*fn)(void*);
  void (*drop)(void*);  // OP_HOSTFN: frees arg instead of fn when the op is dropped (see abandonLocked)
  void* arg;
  // Stream memory operations: OP_WRITEVAL / OP_WAITVAL on dst, n = 4 or 8 bytes; cond is the
  // CU_STREAM_WAIT_VALUE_* condition; call names the API for the give-up warning.
  unsigned long long val64;
  unsigned int cond;
  const char* call;
  // Legacy-stream ordering: run only after waitStream has completed waitSeq ops, and after each of the
  // nDeps pinned streams has completed its depSeq.
  struct CUstream_st* waitStream;
  unsigned long long waitSeq;
  int nDeps;
  struct CUstream_st** deps;
  unsigned long long* depSeq;
  int late;    // a NULL-stream copy or memset that returned before it ran: delayed, checked again
  int ownSrc;  // src is the op's own staging copy of pageable host memory, freed after the copy
} simOp;

struct CUstream_st {
  uint32_t magic;
  int device;
  unsigned int flags;
  int dead, exited, pins;
  int legacy;  // the hidden worker of a device's NULL stream (never destroyed)
  int running;  // legacy: its worker thread is alive (it exits after SIM_LEGACY_IDLE_MS without work)
  int detach;  // destroyed with work queued: the worker detaches itself when it exits
  int abandoned;  // a memory wait gave up (see waitValue): every op after it is dropped, never run
  pthread_t thread;
  pid_t pid;  // the process that started the worker (a forked child has no such thread to join)
  simOp *head, *tail;
  unsigned long long submitted, completed;
  pthread_cond_t work;
  struct CUstream_st* next;
};

struct CUevent_st {
  uint32_t magic;
  unsigned int flags;
  unsigned long long recorded, reached;  // records issued / markers the stream has passed
  struct timespec when;
  struct CUevent_st* next;
};

static pthread_mutex_t qLock = PTHREAD_MUTEX_INITIALIZER;  // every stream and event field
static pthread_cond_t qDone = PTHREAD_COND_INITIALIZER;    // broadcast whenever an op completes
static struct CUstream_st* streams;
static struct CUevent_st* events;
static struct CUstream_st* legacyStream[SIM_MAX_DEVICES];

static int isNullStream(CUstream s) { return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

static int streamLive(CUstream s) {
  for (struct CUstream_st* t = streams; t; t = t->next)
    if (t == s) return t->magic == SIM_STREAM_MAGIC && !t->dead;
  return 0;
}

static int eventLive(CUevent e) {
  for (struct CUevent_st* t = events; t; t = t->next)
    if (t == e) return t->magic == SIM_EVENT_MAGIC;
  return 0;
}

static void freeStreamLocked(struct CUstream_st* s) {
  for (struct CUstream_st** p = &streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  pthread_cond_destroy(&s->work);
  s->magic = 0;
  free(s);
}

static void runOp(simOp* op) {
  switch (op->kind) {
    case OP_COPY: memmove(op->dst, op->src, op->n); break;
    case OP_SET8: memset(op->dst, (int)(op->val & 0xff), op->n); break;
    case OP_SET32:
      for (size_t i = 0; i < op->n; i++) ((uint32_t*)op->dst)[i] = op->val;
      break;
    case OP_HOSTFN: op->fn(op->arg); break;
    // A stream's write is ordered after everything before it in the stream (the driver's default memory
    // barrier): the worker ran those ops to completion, and the release store publishes their bytes to
    // whoever acquires the value (another stream's wait, a kernel, the host, another process).
    case OP_WRITEVAL:
      if (op->n == 8)
        __atomic_store_n((uint64_t*)op->dst, (uint64_t)op->val64, __ATOMIC_RELEASE);
      else
        __atomic_store_n((uint32_t*)op->dst, (uint32_t)op->val64, __ATOMIC_RELEASE);
      break;
    case OP_FENCE:
#if defined(__SANITIZE_THREAD__)  // gcc warns that TSan does not model fences: the value ops' atomics carry it
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
#if defined(__SANITIZE_THREAD__)
#pragma GCC diagnostic pop
#endif
      break;
    default: break;
  }
}

// ---- stream memory waits -----------------------------------------------------------------------

static const char* condName(unsigned int cond) {
  switch (cond) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      return ">=";
    case CU_STREAM_WAIT_VALUE_EQ:
      return "==";
    case CU_STREAM_WAIT_VALUE_AND:
      return "& (non-zero)";
    default:
      return "NOR (non-zero)";
  }
}

// The condition as cuda.h defines it; GEQ is cyclic: (int32_t)(*addr - value) >= 0 (int64_t for 64 bits).
static int waitValueMet(const simOp* op, unsigned long long* seen) {
  unsigned long long v, want = op->val64, mask = op->n == 8 ? ~0ull : 0xffffffffull;
  if (op->n == 8)
    v = __atomic_load_n((uint64_t*)op->dst, __ATOMIC_ACQUIRE);
  else
    v = __atomic_load_n((uint32_t*)op->dst, __ATOMIC_ACQUIRE);
  *seen = v;
  switch (op->cond) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      return op->n == 8 ? (int64_t)(v - want) >= 0 : (int32_t)(uint32_t)(v - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return v == want;
    case CU_STREAM_WAIT_VALUE_AND:
      return (v & want) != 0;
    default:
      return (~(v | want) & mask) != 0;
  }
}

static long long msSince(const struct timespec* t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long long)(now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

// Runs on the stream's worker without qLock: polls the value, yielding the core and then sleeping a
// little longer each round, since the value usually comes from another process (a peer's write through
// its mapping), which no condition variable of this process would hear. Returns 1 once the condition
// holds. Returns 0 (after saying why) when it never can: the memory was unmapped or freed under the
// wait (a GPU would fault), or the stream was destroyed and the value did not come within
// MCCL_SIM_DESTROYED_WAIT_MS (a GPU would keep the stream blocked forever; the sim lets its worker end).
static int waitValue(struct CUstream_st* s, simOp* op) {
  unsigned long long seen = 0;
  long sleepNs = 1000;
  struct timespec deadAt = {0, 0};
  int dead = 0;
  for (unsigned spin = 0;; spin++) {
    if (waitValueMet(op, &seen)) return 1;
    if (spin < 64) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, sleepNs};
    nanosleep(&ts, NULL);
    if (sleepNs < 100000) sleepNs *= 2;
    if (!simRangeUsable((uintptr_t)op->dst, op->n, 0)) {
      fprintf(stderr,
              "minccl-sim: %s: the memory at %p was unmapped or freed while the stream waited on it "
              "(a GPU would fault); the stream's remaining work is dropped\n",
              op->call, op->dst);
      return 0;
    }
    if (!dead && __atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) {
      dead = 1;
      clock_gettime(CLOCK_MONOTONIC, &deadAt);
    }
    if (dead && msSince(&deadAt) >= simG.destroyedWaitMs) {
      fprintf(stderr,
              "minccl-sim: %s on a destroyed stream gave up after %d ms: waiting for *%p %s %#llx, it holds %#llx "
              "(a GPU would wait forever); the stream's remaining work is dropped\n",
              op->call, simG.destroyedWaitMs, op->dst, condName(op->cond), op->val64, seen);
      return 0;
    }
  }
}

// After a wait gave up, the ops behind it never run, as on a GPU whose stream never gets past the
// wait; the worker still frees what they own (a kernel launch's state, a staged copy source), so the
// stream ends and its thread exits. Events recorded behind it are never reached. qLock held.
static void dropOp(simOp* op) {
  if (op->kind == OP_HOSTFN && op->drop) op->drop(op->arg);
}

// A NULL-stream copy or memset that returned before it ran: it waits the configured delay, then runs
// unless its destination was unmapped or freed meanwhile (a GPU would fault; the sim says so and skips).
static void runLateOp(simOp* op) {
  if (simG.lateCopyUs > 0) usleep((useconds_t)simG.lateCopyUs);
  size_t bytes = op->kind == OP_SET32 ? op->n * 4 : op->n;
  if (simRangeUsable((uintptr_t)op->dst, bytes, 0))
    runOp(op);
  else
    fprintf(stderr,
            "minccl-sim: a NULL-stream %s of %zu bytes to %p ran after its memory was unmapped or freed: "
            "skipped (a GPU would fault)\n",
            op->kind == OP_COPY ? "copy" : "memset", bytes, op->dst);
}

// Called with qLock held for the ops that touch stream/event state.
static void markReached(CUevent ev, unsigned long long seq) {
  clock_gettime(CLOCK_MONOTONIC, &ev->when);
  if (seq > ev->reached) ev->reached = seq;
}

static void waitStreamLocked(struct CUstream_st* s, unsigned long long target);

// The legacy-stream worker leaves after this long without work (and is started again on demand), so a
// NULL-stream memset does not leave a thread behind that a test's thread count would see as leaked.
#define SIM_LEGACY_IDLE_MS 20

static void* worker(void* arg) {
  struct CUstream_st* s = arg;
  // Named so the test harness's thread counts can leave out the legacy worker, which comes and goes.
  if (s->legacy) pthread_setname_np(pthread_self(), "sim-legacy");
  pthread_mutex_lock(&qLock);
  for (;;) {
    while (!s->head) {
      if (!s->legacy) {
        pthread_cond_wait(&s->work, &qLock);
        continue;
      }
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += SIM_LEGACY_IDLE_MS * 1000000L;
      if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
      if (pthread_cond_timedwait(&s->work, &qLock, &until) == ETIMEDOUT && !s->head) {
        s->running = 0;
        pthread_mutex_unlock(&qLock);
        return NULL;  // detached
      }
    }
    simOp* op = s->head;  // stays queued while running, so cudaStreamQuery sees it pending
    if (op->waitStream) waitStreamLocked(op->waitStream, op->waitSeq);
    for (int i = 0; i < op->nDeps; i++) {
      waitStreamLocked(op->deps[i], op->depSeq[i]);
      if (--op->deps[i]->pins == 0 && op->deps[i]->exited) freeStreamLocked(op->deps[i]);
    }
    op->nDeps = 0;
    if (s->abandoned && op->kind != OP_EXIT) {
      dropOp(op);
      if (op->ownSrc) free((void*)op->src);
    } else if (op->kind == OP_WAITVAL) {
      pthread_mutex_unlock(&qLock);
      int met = waitValue(s, op);
      pthread_mutex_lock(&qLock);
      if (!met) s->abandoned = 1;
    } else if (op->kind == OP_WAIT) {
      while (op->ev->reached < op->seq) pthread_cond_wait(&qDone, &qLock);
    } else if (op->kind == OP_RECORD) {
      markReached(op->ev, op->seq);
    } else if (op->kind != OP_EXIT) {
      pthread_mutex_unlock(&qLock);
      if (op->late)
        runLateOp(op);
      else
        runOp(op);
      if (op->ownSrc) free((void*)op->src);
      pthread_mutex_lock(&qLock);
    }
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    s->completed++;
    int exit = op->kind == OP_EXIT;
    free(op->deps);
    free(op->depSeq);
    free(op);
    pthread_cond_broadcast(&qDone);
    if (exit) break;
  }
  s->exited = 1;
  if (s->detach) pthread_detach(pthread_self());
  if (s->pins == 0) freeStreamLocked(s);
  pthread_mutex_unlock(&qLock);
  return NULL;
}

static CUresult streamCreate(CUstream* out, unsigned int flags, int dev) {
  struct CUstream_st* s = calloc(1, sizeof(*s));
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  s->magic = SIM_STREAM_MAGIC;
  s->device = dev;
  s->flags = flags;
  s->pid = getpid();
  pthread_cond_init(&s->work, NULL);
  pthread_mutex_lock(&qLock);
  s->next = streams;
  streams = s;
  // Joinable: cuStreamDestroy of an idle stream joins it (see there).
  int rc = pthread_create(&s->thread, NULL, worker, s);
  if (rc != 0) freeStreamLocked(s);
  pthread_mutex_unlock(&qLock);
  if (rc != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = s;
  return CUDA_SUCCESS;
}

// Appends an op; qLock held. Returns the op's sequence number in the stream. On a blocking stream the op
// also waits for the kernels already queued on the device's legacy stream, as the NULL stream orders.
static unsigned long long enqueueLocked(struct CUstream_st* s, simOp* op) {
  struct CUstream_st* legacy = legacyStream[s->device];
  // The exit of a destroyed stream runs nothing, so it waits for nothing on the legacy stream.
  if (legacy && legacy != s && op->kind != OP_EXIT && !(s->flags & CU_STREAM_NON_BLOCKING) &&
      legacy->completed < legacy->submitted) {
    op->waitStream = legacy;
    op->waitSeq = legacy->submitted;
  }
  op->next = NULL;
  if (s->tail) s->tail->next = op;
  else s->head = op;
  s->tail = op;
  pthread_cond_signal(&s->work);
  return ++s->submitted;
}

static void waitStreamLocked(struct CUstream_st* s, unsigned long long target) {
  while (s->completed < target) pthread_cond_wait(&qDone, &qLock);
}

void simDeviceDrain(int dev, int blockingOnly) {
  pthread_mutex_lock(&qLock);
  struct CUstream_st* pinned[256];
  unsigned long long targets[256];
  int n = 0;
  for (struct CUstream_st* s = streams; s && n < 256; s = s->next) {
    if (s->device != dev || s->exited || (blockingOnly && (s->flags & CU_STREAM_NON_BLOCKING))) continue;
    s->pins++;  // keeps a destroyed stream's memory while we wait on it
    pinned[n] = s;
    targets[n++] = s->submitted;
  }
  for (int i = 0; i < n; i++) {
    waitStreamLocked(pinned[i], targets[i]);
    if (--pinned[i]->pins == 0 && pinned[i]->exited) freeStreamLocked(pinned[i]);
  }
  pthread_mutex_unlock(&qLock);
}

static int nullStreamDevice(void) { return simSelf()->ctx ? simSelf()->ctx->device : simSelf()->rtDevice; }

// Runs an op on a stream: queued on a real stream, inline on the NULL / per-thread stream.
static CUresult submit(CUstream hStream, simOp* tmpl) {
  if (isNullStream(hStream)) {
    if (hStream != CU_STREAM_PER_THREAD) simDeviceDrain(nullStreamDevice(), 1);
    if (tmpl->kind == OP_RECORD || tmpl->kind == OP_WAIT) {
      pthread_mutex_lock(&qLock);
      if (tmpl->kind == OP_RECORD) markReached(tmpl->ev, tmpl->seq);
      else
        while (tmpl->ev->reached < tmpl->seq) pthread_cond_wait(&qDone, &qLock);
      pthread_cond_broadcast(&qDone);
      pthread_mutex_unlock(&qLock);
    } else {
      runOp(tmpl);
    }
    return CUDA_SUCCESS;
  }
  simOp* op = malloc(sizeof(*op));
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  *op = *tmpl;
  pthread_mutex_lock(&qLock);
  if (!streamLive(hStream)) {
    pthread_mutex_unlock(&qLock);
    free(op);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  enqueueLocked(hStream, op);
  pthread_mutex_unlock(&qLock);
  return CUDA_SUCCESS;
}

// The device's legacy-stream worker, started on first use; qLock held.
static int startLegacyWorkerLocked(struct CUstream_st* s) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &attr, worker, s);
  pthread_attr_destroy(&attr);
  if (rc != 0) return 0;
  s->running = 1;
  s->pid = getpid();
  return 1;
}

static struct CUstream_st* legacyLocked(int dev) {
  struct CUstream_st* s = legacyStream[dev];
  if (s) {
    // Its worker left when idle, or lives in the parent of this forked process: start one here.
    if ((!s->running || s->pid != getpid()) && !startLegacyWorkerLocked(s)) return NULL;
    return s;
  }
  s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->magic = SIM_STREAM_MAGIC;
  s->device = dev;
  s->legacy = 1;
  s->pins = 1;  // never freed: ops of other streams may wait on its counters at any time
  pthread_cond_init(&s->work, NULL);
  if (!startLegacyWorkerLocked(s)) {
    pthread_cond_destroy(&s->work);
    free(s);
    return NULL;
  }
  s->next = streams;
  streams = s;
  legacyStream[dev] = s;
  return s;
}

// Queues op (malloc'ed; freed here on error) on device dev's legacy-stream worker, behind everything
// already queued on the device's blocking streams (the legacy stream's rule); qLock held.
static CUresult enqueueLegacyLocked(int dev, simOp* op) {
  struct CUstream_st* s = legacyLocked(dev);
  if (!s) {
    free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  int n = 0;
  for (struct CUstream_st* t = streams; t; t = t->next)
    if (t != s && t->device == dev && !(t->flags & CU_STREAM_NON_BLOCKING) && !t->exited && t->completed < t->submitted)
      n++;
  if (n) {
    op->deps = malloc(sizeof(*op->deps) * (size_t)n);
    op->depSeq = malloc(sizeof(*op->depSeq) * (size_t)n);
    if (!op->deps || !op->depSeq) {
      free(op->deps);
      free(op->depSeq);
      free(op);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (struct CUstream_st* t = streams; t; t = t->next)
      if (t != s && t->device == dev && !(t->flags & CU_STREAM_NON_BLOCKING) && !t->exited &&
          t->completed < t->submitted) {
        t->pins++;  // keeps a destroyed stream's memory until the wait is done
        op->deps[op->nDeps] = t;
        op->depSeq[op->nDeps++] = t->submitted;
      }
  }
  enqueueLocked(s, op);
  return CUDA_SUCCESS;
}

CUresult simEnqueueWork(CUstream hStream, int dev, void (*fn)(void*), void (*drop)(void*), void* arg) {
  if (hStream == CU_STREAM_PER_THREAD) return simNotImplemented("a kernel launch on cudaStreamPerThread");
  simOp* op = calloc(1, sizeof(*op));
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->kind = OP_HOSTFN;
  op->fn = fn;
  op->drop = drop;
  op->arg = arg;
  pthread_mutex_lock(&qLock);
  CUresult r = CUDA_SUCCESS;
  if (isNullStream(hStream)) {
    r = enqueueLegacyLocked(dev, op);
  } else if (!streamLive(hStream)) {
    free(op);
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    enqueueLocked(hStream, op);
  }
  pthread_mutex_unlock(&qLock);
  return r;
}

static CUresult checkStream(CUstream s) {
  if (isNullStream(s)) return CUDA_SUCCESS;
  pthread_mutex_lock(&qLock);
  int ok = streamLive(s);
  pthread_mutex_unlock(&qLock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// Runtime twin of a driver result: the codes minccl meets share their values, except these.
static cudaError_t rt(CUresult r) {
  switch (r) {
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    default: return (cudaError_t)r;
  }
}

// ---- streams -----------------------------------------------------------------------------------

CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  CUresult r = simCheckInit();
  int dev;
  if (r != CUDA_SUCCESS) return r;
  if ((r = simCurrentDevice(&dev)) != CUDA_SUCCESS) return r;
  if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  return streamCreate(phStream, Flags, dev);
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (isNullStream(hStream)) return CUDA_ERROR_INVALID_HANDLE;
  simOp* op = calloc(1, sizeof(*op));
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  op->kind = OP_EXIT;
  pthread_mutex_lock(&qLock);
  if (!streamLive(hStream)) {
    pthread_mutex_unlock(&qLock);
    free(op);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // Returns at once, as the driver: queued work still completes, then the worker frees the stream and
  // exits on its own. An idle stream's worker has nothing left to run, so it is joined here: once
  // cuStreamDestroy returns, its thread is gone (a thread count taken next does not see it; ASan's
  // leak check at exit finds no thread still running).
  __atomic_store_n(&hStream->dead, 1, __ATOMIC_RELEASE);  // a memory wait on the worker reads it unlocked
  int join = hStream->completed == hStream->submitted && hStream->pid == getpid();
  pthread_t t = hStream->thread;
  if (!join) hStream->detach = 1;
  enqueueLocked(hStream, op);
  pthread_mutex_unlock(&qLock);
  if (join) pthread_join(t, NULL);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (isNullStream(hStream)) {
    if (!simSelf()->ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (hStream != CU_STREAM_PER_THREAD) simDeviceDrain(simSelf()->ctx->device, 1);
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&qLock);
  if (!streamLive(hStream)) {
    pthread_mutex_unlock(&qLock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  waitStreamLocked(hStream, hStream->submitted);
  pthread_mutex_unlock(&qLock);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&qLock);
  if (isNullStream(hStream)) {
    int dev = nullStreamDevice();
    r = CUDA_SUCCESS;
    if (hStream != CU_STREAM_PER_THREAD)
      for (struct CUstream_st* s = streams; s; s = s->next)
        if (s->device == dev && !(s->flags & CU_STREAM_NON_BLOCKING) && !s->exited && s->completed < s->submitted)
          r = CUDA_ERROR_NOT_READY;
  } else if (!streamLive(hStream)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    r = hStream->completed < hStream->submitted ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&qLock);
  return r;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  simOp op = {.kind = OP_WAIT, .ev = hEvent};
  pthread_mutex_lock(&qLock);
  if (!eventLive(hEvent)) {
    pthread_mutex_unlock(&qLock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  op.seq = hEvent->recorded;  // waits for the most recent record issued before this call
  pthread_mutex_unlock(&qLock);
  return submit(hStream, &op);
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
  if ((r = checkStream(hStream)) != CUDA_SUCCESS) return r;
  *captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;  // the sim never captures
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus* captureStatus_out, cuuint64_t* id_out,
                                        CUgraph* graph_out, const CUgraphNode** dependencies_out,
                                        const CUgraphEdgeData** edgeData_out, size_t* numDependencies_out) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if ((r = checkStream(hStream)) != CUDA_SUCCESS) return r;
  if (!captureStatus_out) return CUDA_ERROR_INVALID_VALUE;
  *captureStatus_out = CU_STREAM_CAPTURE_STATUS_NONE;
  if (id_out) *id_out = 0;
  if (graph_out) *graph_out = NULL;
  if (dependencies_out) *dependencies_out = NULL;
  if (edgeData_out) *edgeData_out = NULL;
  if (numDependencies_out) *numDependencies_out = 0;
  return CUDA_SUCCESS;
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  simRtInit();
  if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking)) return simRtErr(cudaErrorInvalidValue);
  return simRtErr(rt(streamCreate(pStream, flags, simSelf()->ctx->device)));
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* pStream) { return cudaStreamCreateWithFlags(pStream, 0); }

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  simRtInit();
  return simRtErr(rt(cuStreamDestroy(stream)));
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  simRtInit();
  return simRtErr(rt(cuStreamSynchronize(stream)));
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream) {
  simRtInit();
  CUresult r = cuStreamQuery(stream);
  // cudaErrorNotReady is a status, not an error: the runtime does not record it as the last error.
  return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : simRtErr(rt(r));
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  simRtInit();
  return simRtErr(rt(cuStreamWaitEvent(stream, event, flags)));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus) {
  simRtInit();
  if (!pCaptureStatus) return simRtErr(cudaErrorInvalidValue);
  CUresult r = checkStream(stream);
  if (r != CUDA_SUCCESS) return simRtErr(rt(r));
  *pCaptureStatus = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  simRtInit();
  if (!fn) return simRtErr(cudaErrorInvalidValue);
  simOp op = {.kind = OP_HOSTFN, .fn = fn, .arg = userData};
  return simRtErr(rt(submit(stream, &op)));
}

// ---- events ------------------------------------------------------------------------------------

static CUresult eventCreate(CUevent* out, unsigned int flags) {
  struct CUevent_st* e = calloc(1, sizeof(*e));
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->magic = SIM_EVENT_MAGIC;
  e->flags = flags;
  pthread_mutex_lock(&qLock);
  e->next = events;
  events = e;
  pthread_mutex_unlock(&qLock);
  *out = e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  CUresult r = simCheckInit();
  int dev;
  if (r != CUDA_SUCCESS) return r;
  if ((r = simCurrentDevice(&dev)) != CUDA_SUCCESS) return r;
  unsigned all = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!phEvent || (Flags & ~all)) return CUDA_ERROR_INVALID_VALUE;
  // Interprocess events must disable timing (driver rule); the sim does not share them across processes.
  if (Flags & CU_EVENT_INTERPROCESS) {
    if (!(Flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    return simNotImplemented("cuEventCreate(CU_EVENT_INTERPROCESS)");
  }
  return eventCreate(phEvent, Flags);
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&qLock);
  if (!eventLive(hEvent)) {
    pthread_mutex_unlock(&qLock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // An event may be destroyed while a stream still has to pass its marker (legal in CUDA): defer the
  // free until no queued op refers to it.
  for (;;) {
    int busy = 0;
    for (struct CUstream_st* s = streams; s; s = s->next)
      for (simOp* op = s->head; op; op = op->next)
        if (op->ev == hEvent) busy = 1;
    if (!busy) break;
    pthread_cond_wait(&qDone, &qLock);
  }
  for (struct CUevent_st** p = &events; *p; p = &(*p)->next)
    if (*p == hEvent) {
      *p = hEvent->next;
      break;
    }
  hEvent->magic = 0;
  pthread_mutex_unlock(&qLock);
  free(hEvent);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  simOp op = {.kind = OP_RECORD, .ev = hEvent};
  simOp* q = NULL;
  if (!isNullStream(hStream) && !(q = malloc(sizeof(*q)))) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&qLock);
  if (!eventLive(hEvent) || (!isNullStream(hStream) && !streamLive(hStream))) {
    pthread_mutex_unlock(&qLock);
    free(q);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  op.seq = ++hEvent->recorded;
  if (q) {
    // Queued in the same critical section as the count, so records on several streams stay ordered.
    *q = op;
    enqueueLocked(hStream, q);
  }
  pthread_mutex_unlock(&qLock);
  return q ? CUDA_SUCCESS : submit(hStream, &op);
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&qLock);
  if (!eventLive(hEvent)) r = CUDA_ERROR_INVALID_HANDLE;
  else r = hEvent->reached >= hEvent->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  pthread_mutex_unlock(&qLock);
  return r;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&qLock);
  if (!eventLive(hEvent)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    unsigned long long target = hEvent->recorded;
    while (hEvent->reached < target) pthread_cond_wait(&qDone, &qLock);
  }
  pthread_mutex_unlock(&qLock);
  return r;
}

CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!pMilliseconds) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&qLock);
  if (!eventLive(hStart) || !eventLive(hEnd) || ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING) ||
      hStart->recorded == 0 || hEnd->recorded == 0) {
    r = CUDA_ERROR_INVALID_HANDLE;  // as the driver: timing disabled, or never recorded
  } else if (hStart->reached < hStart->recorded || hEnd->reached < hEnd->recorded) {
    r = CUDA_ERROR_NOT_READY;
  } else {
    double ms = (double)(hEnd->when.tv_sec - hStart->when.tv_sec) * 1e3 +
                (double)(hEnd->when.tv_nsec - hStart->when.tv_nsec) / 1e6;
    *pMilliseconds = (float)ms;
  }
  pthread_mutex_unlock(&qLock);
  return r;
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  simRtInit();
  return simRtErr(rt(cuEventCreate(event, flags)));
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  simRtInit();
  return simRtErr(rt(cuEventDestroy(event)));
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  simRtInit();
  return simRtErr(rt(cuEventRecord(event, stream)));
}

cudaError_t CUDARTAPI cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  simRtInit();
  if (flags & ~(unsigned)cudaEventRecordExternal) return simRtErr(cudaErrorInvalidValue);
  return simRtErr(rt(cuEventRecord(event, stream)));
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
  simRtInit();
  CUresult r = cuEventQuery(event);
  return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : simRtErr(rt(r));
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  simRtInit();
  return simRtErr(rt(cuEventSynchronize(event)));
}

cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  simRtInit();
  CUresult r = cuEventElapsedTime(ms, start, end);
  return simRtErr(r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : rt(r));
}

// ---- copies and sets ---------------------------------------------------------------------------

// A copy touching a VMM mapping needs the current device to have been granted access to it
// (cuMemSetAccess): the driver refuses it with CUDA_ERROR_INVALID_VALUE otherwise, even though
// the bytes are mapped for another device. Other memory is reachable through unified addressing.
static int vmmAccessOk(const void* p, unsigned long long need) {
  simPtrInfo info;
  if (!simLookup((uintptr_t)p, &info) || !info.vmm) return 1;
  return (info.access & need) == need;
}

// CUDA's rule for a synchronous-looking call on the NULL stream: it may return before its work is done
// when it is a memset of device memory, or a copy into device memory from pageable host memory or from
// device memory (from pinned host memory, or into host memory, it returns when done). Not on
// cudaStreamPerThread, whose calls the sim runs inline.
static int returnsEarly(CUstream s, const void* dst, const void* src, int isSet) {
  if (!(s == NULL || s == CU_STREAM_LEGACY)) return 0;
  simPtrInfo di, si;
  if (!simLookup((uintptr_t)dst, &di) || di.kind != SIM_MEM_DEVICE) return 0;
  if (isSet) return 1;
  if (!simLookup((uintptr_t)src, &si)) return 1;  // pageable host memory
  return si.kind == SIM_MEM_DEVICE;
}

// A copy from pageable host memory into device memory reads the caller's buffer before the call
// returns (the driver stages it), so the caller may reuse the buffer at once: the sim copies it too.
static CUresult stagePageable(simOp* op) {
  simPtrInfo di, si;
  if (op->kind != OP_COPY || simLookup((uintptr_t)op->src, &si) || !simLookup((uintptr_t)op->dst, &di) ||
      di.kind != SIM_MEM_DEVICE)
    return CUDA_SUCCESS;
  void* staged = malloc(op->n);
  if (!staged) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(staged, op->src, op->n);
  op->src = staged;
  op->ownSrc = 1;
  return CUDA_SUCCESS;
}

// Queues such a call on the legacy-stream worker (a pageable source staged first) and returns without
// waiting for it.
static CUresult submitLate(const simOp* tmpl) {
  simOp* op = calloc(1, sizeof(*op));
  if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
  *op = *tmpl;
  op->late = 1;
  if (stagePageable(op) != CUDA_SUCCESS) {
    free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* staged = op->ownSrc ? (void*)op->src : NULL;
  pthread_mutex_lock(&qLock);
  CUresult r = enqueueLegacyLocked(nullStreamDevice(), op);  // frees op on error
  pthread_mutex_unlock(&qLock);
  if (r != CUDA_SUCCESS) free(staged);
  return r;
}

static CUresult copy(void* dst, int dstHostOk, const void* src, int srcHostOk, size_t n, CUstream s, int async) {
  if (n == 0) return checkStream(s);
  if (!simRangeUsable((uintptr_t)dst, n, dstHostOk) || !simRangeUsable((uintptr_t)src, n, srcHostOk))
    return CUDA_ERROR_INVALID_VALUE;
  if (!vmmAccessOk(dst, CU_MEM_ACCESS_FLAGS_PROT_READWRITE) || !vmmAccessOk(src, CU_MEM_ACCESS_FLAGS_PROT_READ))
    return CUDA_ERROR_INVALID_VALUE;
  simOp op = {.kind = OP_COPY, .dst = dst, .src = src, .n = n};
  if (!async && returnsEarly(s, dst, src, 0)) return submitLate(&op);
  // An async copy queued on a stream: a pageable source is staged now, as the driver does.
  if (async && !isNullStream(s) && stagePageable(&op) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = submit(s, &op);
  if (r != CUDA_SUCCESS && op.ownSrc) free((void*)op.src);
  if (r == CUDA_SUCCESS && !async && !isNullStream(s)) r = cuStreamSynchronize(s);
  return r;
}

static CUresult set(void* dst, unsigned int val, size_t count, int width, CUstream s, int async) {
  size_t bytes = count * (size_t)width;
  if (count == 0) return checkStream(s);
  if (((uintptr_t)dst % (uintptr_t)width) || !simRangeUsable((uintptr_t)dst, bytes, 0)) return CUDA_ERROR_INVALID_VALUE;
  if (!vmmAccessOk(dst, CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) return CUDA_ERROR_INVALID_VALUE;
  simOp op = {.kind = width == 1 ? OP_SET8 : OP_SET32, .dst = dst, .n = count, .val = val};
  if (width == 1) op.n = bytes;
  if (!async && returnsEarly(s, dst, NULL, 1)) return submitLate(&op);
  CUresult r = submit(s, &op);
  if (r == CUDA_SUCCESS && !async && !isNullStream(s)) r = cuStreamSynchronize(s);
  return r;
}

static CUresult driverEntry(void) {
  CUresult r = simCheckInit();
  if (r != CUDA_SUCCESS) return r;
  return simSelf()->ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

#define DRIVER_ENTRY()                        \
  do {                                        \
    CUresult e_ = driverEntry();              \
    if (e_ != CUDA_SUCCESS) return e_;        \
  } while (0)

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  DRIVER_ENTRY();
  return copy((void*)dst, 1, (const void*)src, 1, ByteCount, NULL, 0);
}
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
  DRIVER_ENTRY();
  return copy((void*)dst, 1, (const void*)src, 1, ByteCount, hStream, 1);
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  DRIVER_ENTRY();
  return copy((void*)dstDevice, 0, srcHost, 1, ByteCount, NULL, 0);
}
CUresult CUDAAPI cuMemcpyDtoH(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  DRIVER_ENTRY();
  return copy(dstHost, 1, (const void*)srcDevice, 0, ByteCount, NULL, 0);
}
CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  DRIVER_ENTRY();
  return copy((void*)dstDevice, 0, (const void*)srcDevice, 0, ByteCount, NULL, 0);
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount, CUstream hStream) {
  DRIVER_ENTRY();
  return copy((void*)dstDevice, 0, srcHost, 1, ByteCount, hStream, 1);
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  DRIVER_ENTRY();
  return copy(dstHost, 1, (const void*)srcDevice, 0, ByteCount, hStream, 1);
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  DRIVER_ENTRY();
  return copy((void*)dstDevice, 0, (const void*)srcDevice, 0, ByteCount, hStream, 1);
}
CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                              CUcontext srcContext, size_t ByteCount) {
  DRIVER_ENTRY();
  if (!dstContext || !srcContext) return CUDA_ERROR_INVALID_CONTEXT;
  return copy((void*)dstDevice, 0, (const void*)srcDevice, 0, ByteCount, NULL, 0);
}
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                   CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  DRIVER_ENTRY();
  if (!dstContext || !srcContext) return CUDA_ERROR_INVALID_CONTEXT;
  return copy((void*)dstDevice, 0, (const void*)srcDevice, 0, ByteCount, hStream, 1);
}
CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  DRIVER_ENTRY();
  return set((void*)dstDevice, uc, N, 1, NULL, 0);
}
CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  DRIVER_ENTRY();
  return set((void*)dstDevice, ui, N, 4, NULL, 0);
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
  DRIVER_ENTRY();
  return set((void*)dstDevice, uc, N, 1, hStream, 1);
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
  DRIVER_ENTRY();
  return set((void*)dstDevice, ui, N, 4, hStream, 1);
}

// Which side of a runtime copy must be memory the device knows; cudaMemcpyDefault lets UVA decide.
static int kindSides(enum cudaMemcpyKind kind, int* dstHostOk, int* srcHostOk) {
  switch (kind) {
    case cudaMemcpyHostToHost: *dstHostOk = 1, *srcHostOk = 1; return 1;
    case cudaMemcpyHostToDevice: *dstHostOk = 0, *srcHostOk = 1; return 1;
    case cudaMemcpyDeviceToHost: *dstHostOk = 1, *srcHostOk = 0; return 1;
    case cudaMemcpyDeviceToDevice: *dstHostOk = 0, *srcHostOk = 0; return 1;
    case cudaMemcpyDefault: *dstHostOk = 1, *srcHostOk = 1; return 1;
    default: return 0;
  }
}

cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  simRtInit();
  int d, s;
  if (!kindSides(kind, &d, &s)) return simRtErr(cudaErrorInvalidMemcpyDirection);
  return simRtErr(rt(copy(dst, d, src, s, count, NULL, 0)));
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  simRtInit();
  int d, s;
  if (!kindSides(kind, &d, &s)) return simRtErr(cudaErrorInvalidMemcpyDirection);
  return simRtErr(rt(copy(dst, d, src, s, count, stream, 1)));
}

cudaError_t CUDARTAPI cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count) {
  simRtInit();
  if (!simDeviceValid(dstDevice) || !simDeviceValid(srcDevice)) return simRtErr(cudaErrorInvalidDevice);
  return simRtErr(rt(copy(dst, 0, src, 0, count, NULL, 0)));
}

cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                          cudaStream_t stream) {
  simRtInit();
  if (!simDeviceValid(dstDevice) || !simDeviceValid(srcDevice)) return simRtErr(cudaErrorInvalidDevice);
  return simRtErr(rt(copy(dst, 0, src, 0, count, stream, 1)));
}

cudaError_t CUDARTAPI cudaMemset(void* devPtr, int value, size_t count) {
  simRtInit();
  return simRtErr(rt(set(devPtr, (unsigned)value, count, 1, NULL, 0)));
}

cudaError_t CUDARTAPI cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  simRtInit();
  return simRtErr(rt(set(devPtr, (unsigned)value, count, 1, stream, 1)));
}

// ---- stream memory operations ------------------------------------------------------------------
// cuStreamWriteValue32/64, cuStreamWaitValue32/64 and cuStreamBatchMemOp (cuda.h names their _v2 entry
// points): ops on the stream's worker like copies, so a write lands after the stream's earlier work and
// a wait holds back the stream's later work, never the calling thread. On the NULL stream they go to the
// device's legacy-stream worker, as kernels do: run inline, a wait would block the host.

// The value's address: memory the device reaches (a cuMem mapping the current device was granted access
// to, cudaMalloc, pinned or registered host memory, a peer's imported mapping), aligned to the width.
static CUresult memOpAddress(CUdeviceptr addr, size_t width, int write) {
  if (!addr || addr % width || !simRangeUsable((uintptr_t)addr, width, 0)) return CUDA_ERROR_INVALID_VALUE;
  if (!vmmAccessOk((const void*)(uintptr_t)addr,
                   write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static CUresult writeOp(simOp* op, const char* call, CUdeviceptr addr, size_t width, unsigned long long value,
                        unsigned int flags) {
  // The v2 API has no unordered write (cuda.h: "not supported in the v2 API").
  if (flags & CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
    return simNotImplemented(width == 8 ? "cuStreamWriteValue64 with CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER"
                                        : "cuStreamWriteValue32 with CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER");
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = memOpAddress(addr, width, 1);
  if (r != CUDA_SUCCESS) return r;
  *op = (simOp){.kind = OP_WRITEVAL, .dst = (void*)(uintptr_t)addr, .n = width, .val64 = value, .call = call};
  return CUDA_SUCCESS;
}

static CUresult waitOp(simOp* op, const char* call, CUdeviceptr addr, size_t width, unsigned long long value,
                       unsigned int flags) {
  // The flush needs CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, which the sim reports absent.
  if (flags & CU_STREAM_WAIT_VALUE_FLUSH)
    return simNotImplemented(width == 8 ? "cuStreamWaitValue64 with CU_STREAM_WAIT_VALUE_FLUSH"
                                        : "cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_FLUSH");
  if (flags & ~(unsigned)CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = memOpAddress(addr, width, 0);
  if (r != CUDA_SUCCESS) return r;
  *op = (simOp){
      .kind = OP_WAITVAL, .dst = (void*)(uintptr_t)addr, .n = width, .val64 = value, .cond = flags, .call = call};
  return CUDA_SUCCESS;
}

// Queues n ops back to back (no other op of the stream between them). On a real stream all or none
// are queued; on the NULL stream an allocation failure may leave the first ones queued.
static CUresult enqueueOps(CUstream hStream, const simOp* tmpl, size_t n) {
  simOp** ops = calloc(n, sizeof(*ops));
  if (!ops) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_SUCCESS;
  for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
    if (!(ops[i] = malloc(sizeof(simOp))))
      r = CUDA_ERROR_OUT_OF_MEMORY;
    else
      *ops[i] = tmpl[i];
  }
  size_t queued = 0;
  int dev = nullStreamDevice();
  pthread_mutex_lock(&qLock);
  if (r == CUDA_SUCCESS && isNullStream(hStream)) {
    for (; queued < n && r == CUDA_SUCCESS; queued++)
      if ((r = enqueueLegacyLocked(dev, ops[queued])) != CUDA_SUCCESS) ops[queued] = NULL;  // freed there
  } else if (r == CUDA_SUCCESS && !streamLive(hStream)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (r == CUDA_SUCCESS) {
    for (; queued < n; queued++) enqueueLocked(hStream, ops[queued]);
  }
  pthread_mutex_unlock(&qLock);
  for (size_t i = queued; i < n; i++) free(ops[i]);
  free(ops);
  return r;
}

static CUresult enqueueMemOps(CUstream hStream, const simOp* ops, size_t n) {
  // That stream runs its ops inline in the caller, where a wait would block the host.
  if (hStream == CU_STREAM_PER_THREAD) return simNotImplemented("stream memory operations on cudaStreamPerThread");
  return enqueueOps(hStream, ops, n);
}

CUresult CUDAAPI cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  DRIVER_ENTRY();
  simOp op;
  CUresult r = writeOp(&op, "cuStreamWriteValue32", addr, 4, value, flags);
  return r != CUDA_SUCCESS ? r : enqueueMemOps(stream, &op, 1);
}

CUresult CUDAAPI cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  DRIVER_ENTRY();
  simOp op;
  CUresult r = writeOp(&op, "cuStreamWriteValue64", addr, 8, value, flags);
  return r != CUDA_SUCCESS ? r : enqueueMemOps(stream, &op, 1);
}

CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  DRIVER_ENTRY();
  simOp op;
  CUresult r = waitOp(&op, "cuStreamWaitValue32", addr, 4, value, flags);
  return r != CUDA_SUCCESS ? r : enqueueMemOps(stream, &op, 1);
}

CUresult CUDAAPI cuStreamWaitValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  DRIVER_ENTRY();
  simOp op;
  CUresult r = waitOp(&op, "cuStreamWaitValue64", addr, 8, value, flags);
  return r != CUDA_SUCCESS ? r : enqueueMemOps(stream, &op, 1);
}

// The batch is checked whole before anything is queued: a bad entry queues none of them.
CUresult CUDAAPI cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams* paramArray,
                                    unsigned int flags) {
  DRIVER_ENTRY();
  // cuda.h: count "must be less than 256", flags "must be 0".
  if (flags || count >= 256 || (count && !paramArray)) return CUDA_ERROR_INVALID_VALUE;
  if (count == 0) return checkStream(stream);
  simOp* ops = calloc(count, sizeof(*ops));
  if (!ops) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_SUCCESS;
  for (unsigned int i = 0; i < count && r == CUDA_SUCCESS; i++) {
    const CUstreamBatchMemOpParams* p = &paramArray[i];
    switch (p->operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        r = waitOp(&ops[i], "cuStreamBatchMemOp(CU_STREAM_MEM_OP_WAIT_VALUE_32)", p->waitValue.address, 4,
                   p->waitValue.value, p->waitValue.flags);
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        r = waitOp(&ops[i], "cuStreamBatchMemOp(CU_STREAM_MEM_OP_WAIT_VALUE_64)", p->waitValue.address, 8,
                   p->waitValue.value64, p->waitValue.flags);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        r = writeOp(&ops[i], "cuStreamBatchMemOp(CU_STREAM_MEM_OP_WRITE_VALUE_32)", p->writeValue.address, 4,
                    p->writeValue.value, p->writeValue.flags);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        r = writeOp(&ops[i], "cuStreamBatchMemOp(CU_STREAM_MEM_OP_WRITE_VALUE_64)", p->writeValue.address, 8,
                    p->writeValue.value64, p->writeValue.flags);
        break;
      case CU_STREAM_MEM_OP_BARRIER:
        // The worker runs ops one after another, so a barrier orders nothing more; it stays a full fence.
        if (p->memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_SYS &&
            p->memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
          r = CUDA_ERROR_INVALID_VALUE;
        else
          ops[i] = (simOp){.kind = OP_FENCE};
        break;
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        r = simNotImplemented("cuStreamBatchMemOp with CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES");
        break;
      default:
        r = CUDA_ERROR_INVALID_VALUE;
        break;
    }
  }
  if (r == CUDA_SUCCESS) r = enqueueMemOps(stream, ops, count);
  free(ops);
  return r;
}

// ---- batches of copies -------------------------------------------------------------------------
// cudaMemcpyBatchAsync / cuMemcpyBatchAsync (CUDA 13: no failIdx). The batch runs in stream order as a
// whole; its copies run one after another on the stream's worker (a GPU may spread them over its copy
// engines in any order, so no copy of a batch may depend on another).

_Static_assert(sizeof(struct cudaMemcpyAttributes) == sizeof(CUmemcpyAttributes) &&
                   offsetof(struct cudaMemcpyAttributes, srcAccessOrder) ==
                       offsetof(CUmemcpyAttributes, srcAccessOrder) &&
                   offsetof(struct cudaMemcpyAttributes, flags) == offsetof(CUmemcpyAttributes, flags),
               "the runtime's and the driver's copy attributes share one layout");
_Static_assert(sizeof(CUdeviceptr) == sizeof(void*), "driver and runtime pointer arrays share one layout");

static CUresult copyBatch(void* const* dsts, const void* const* srcs, const size_t* sizes, size_t count,
                          const CUmemcpyAttributes* attrs, const size_t* attrsIdxs, size_t numAttrs, CUstream s) {
  if (!dsts || !srcs || !sizes || count == 0 || !attrs || !attrsIdxs || numAttrs == 0 || numAttrs > count)
    return CUDA_ERROR_INVALID_VALUE;
  if (s == NULL || s == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_VALUE;  // "must not be legacy NULL stream"
  for (size_t k = 0; k < numAttrs; k++) {
    // attrsIdxs: 0 first, strictly increasing, every entry a copy's index.
    if (attrsIdxs[k] >= count || (k == 0 ? attrsIdxs[0] != 0 : attrsIdxs[k] <= attrsIdxs[k - 1]))
      return CUDA_ERROR_INVALID_VALUE;
    if (attrs[k].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
        attrs[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
      return CUDA_ERROR_INVALID_VALUE;
    // The overlap flag is a hint: the sim's copies run on the stream's worker, beside any kernel.
    if (attrs[k].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE) return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r = checkStream(s);
  if (r != CUDA_SUCCESS) return r;
  simOp* ops = calloc(count, sizeof(*ops));
  if (!ops) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t n = 0, k = 0;
  for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
    while (k + 1 < numAttrs && attrsIdxs[k + 1] <= i) k++;
    if (sizes[i] == 0) continue;
    if (!dsts[i] || !srcs[i] || !simRangeUsable((uintptr_t)dsts[i], sizes[i], 1) ||
        !simRangeUsable((uintptr_t)srcs[i], sizes[i], 1) || !vmmAccessOk(dsts[i], CU_MEM_ACCESS_FLAGS_PROT_READWRITE) ||
        !vmmAccessOk(srcs[i], CU_MEM_ACCESS_FLAGS_PROT_READ)) {
      r = CUDA_ERROR_INVALID_VALUE;
      break;
    }
    simOp* op = &ops[n++];
    *op = (simOp){.kind = OP_COPY, .dst = dsts[i], .src = srcs[i], .n = sizes[i]};
    // Read before the call returns, so the caller may reuse the source at once (a stack variable).
    // STREAM and ANY read it in stream order, which ANY allows.
    if (attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) {
      void* staged = malloc(sizes[i]);
      if (!staged) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        n--;
        break;
      }
      memcpy(staged, srcs[i], sizes[i]);
      op->src = staged;
      op->ownSrc = 1;
    }
  }
  if (r == CUDA_SUCCESS && n > 0) {
    if (s == CU_STREAM_PER_THREAD) {
      for (size_t i = 0; i < n; i++) runOp(&ops[i]);  // that stream runs inline (see submit)
    } else {
      r = enqueueOps(s, ops, n);
      if (r == CUDA_SUCCESS) n = 0;  // the queued ops own their staged sources
    }
  }
  for (size_t i = 0; i < n; i++)
    if (ops[i].ownSrc) free((void*)ops[i].src);
  free(ops);
  return r;
}

cudaError_t CUDARTAPI cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs, const size_t* sizes,
                                           size_t count, struct cudaMemcpyAttributes* attrs, size_t* attrsIdxs,
                                           size_t numAttrs, cudaStream_t stream) {
  simRtInit();
  return simRtErr(
      rt(copyBatch(dsts, srcs, sizes, count, (const CUmemcpyAttributes*)attrs, attrsIdxs, numAttrs, stream)));
}

CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                    CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, CUstream hStream) {
  DRIVER_ENTRY();
  return copyBatch((void* const*)dsts, (const void* const*)srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream);
}
