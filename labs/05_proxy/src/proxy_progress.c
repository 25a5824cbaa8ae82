// The proxy's progress thread (NCCL's ncclProxyProgress / progressOps) and what feeds it: the user
// thread posts ops into a single-producer/single-consumer ring (mcclProxyPostOp), the progress
// thread calls each op's proxyProgress hook until it is done, and the user collects the result
// (mcclProxyTest / mcclProxyWait).
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mccl_checks.h"
#include "mccl_param.h"
#include "proxy_internal.h"

// Retire an op: its result goes to the waiter, and its connection stops counting it, so a Free
// waiting for the connection may go ahead. The entry is read first: once DONE is published the user
// thread may reuse the slot.
static void finishOp(opSlot* s, mcclResult_t res) {
  proxyConnEntry* e = (proxyConnEntry*)s->args.subs[0].connection;
  s->result = res;
  atomic_store_explicit(&s->status, SLOT_DONE, memory_order_release);
  // Release: every access of this op to the connection happened before the Free sees nOps drop.
  atomic_fetch_sub_explicit(&e->nOps, 1, memory_order_release);
}

static int isClosing(const opSlot* s) {
  return atomic_load_explicit(&((proxyConnEntry*)s->args.subs[0].connection)->closing, memory_order_acquire);
}

// A persistent op whose connector is being freed (args.drainOnClose: lab 08's NET send) first gets its
// last steps out: the kernel that produced them may have ended before the network took them, and a
// peer's kernel still waits for them (NCCL's destroy likewise lets the proxy finish its ops). One more
// progress call per round until a call moves nothing with every transmitted step done, or
// MCCL_PROXY_DRAIN_MS pass, or the abort flag rises. Returns 1 while it keeps draining.
static int drainStep(mcclProxyState* p, opSlot* s) {
  struct mcclProxyArgs* a = &s->args;
  if (!a->drainOnClose || mcclIsAborted(p->abortFlag) || mcclParamProxyDrainMs() <= 0) return 0;
  const uint64_t now = mcclClockNano();
  if (s->drainUntilNs == 0) s->drainUntilNs = now + (uint64_t)mcclParamProxyDrainMs() * 1000000ull;
  if (now > s->drainUntilNs) {
    WARN("Proxy %d: a freed connector's last %llu step(s) did not reach the peer within MCCL_PROXY_DRAIN_MS=%lld",
         p->rank, (unsigned long long)(a->subs[0].transmitted - a->subs[0].done), (long long)mcclParamProxyDrainMs());
    return 0;
  }
  if (a->progress(p, a) != mcclSuccess) return 0;
  return !(a->idle && a->subs[0].transmitted == a->subs[0].done);
}

// Ops are progressed in posting order; an op waits while an earlier one on the same connection is
// still active, so one connection's messages never overtake each other (NCCL's progressOps walks
// its active list the same way, one connection's ops in order).
void* mcclProxyProgress(void* arg) {
  mcclProxyState* p = arg;
  mcclResult_t res = setProxyThreadContext(p, "mccl-proxy-prog");
  int* active = malloc(sizeof(int) * MCCL_PROXY_MAX_OPS);
  int nActive = 0;
  if (active == NULL) res = mcclSystemError;
  uint64_t spinNs = (uint64_t)(mcclParamProxySpinUs() > 0 ? mcclParamProxySpinUs() : 0) * 1000;
  const int64_t sleepNs = (mcclParamProxySleepMs() > 0 ? mcclParamProxySleepMs() : 1) * 1000000;
  uint64_t idleSince = 0;
  while (res == mcclSuccess && !atomic_load(&p->stopProgress)) {
    // Take what the user thread posted.
    uint64_t head = atomic_load_explicit(&p->ringHead, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&p->ringTail, memory_order_relaxed);
    for (; tail != head; tail++) active[nActive++] = p->ring[tail % MCCL_PROXY_MAX_OPS];
    atomic_store_explicit(&p->ringTail, tail, memory_order_release);

    if (mcclIsAborted(p->abortFlag)) {
      for (int i = 0; i < nActive; i++) finishOp(&p->slots[active[i]], mcclInternalError);
      nActive = 0;
    }
    int moved = 0;
    for (int i = 0; i < nActive;) {
      opSlot* s = &p->slots[active[i]];
      if (isClosing(s) && drainStep(p, s)) {
        i++;  // still draining: its last steps are on their way to the peer
        moved = 1;
        continue;
      }
      if (isClosing(s)) {
        // The user freed the connector with this op in flight: it ends here, and the Free waiting
        // on the service thread may release the connection once no op of it is left.
        if (s->args.subs[0].nsteps == MCCL_PROXY_STEPS_UNTIL_FREE)  // a persistent op (lab 08's NET) ends so
          INFO(MCCL_PROXY, "Proxy %d: op %d ends with its connector after %llu steps", p->rank, active[i],
               (unsigned long long)s->args.subs[0].done);
        else
          WARN(
              "Proxy %d: op %d cancelled after %llu of %llu steps: its connector was freed while the op was in "
              "flight",
              p->rank, active[i], (unsigned long long)s->args.subs[0].done, (unsigned long long)s->args.subs[0].nsteps);
        finishOp(s, mcclInvalidUsage);
        memmove(&active[i], &active[i + 1], sizeof(int) * (size_t)(nActive - i - 1));
        nActive--;
        moved = 1;
        continue;
      }
      int blocked = 0;
      for (int j = 0; j < i && !blocked; j++)
        blocked = p->slots[active[j]].args.subs[0].connection == s->args.subs[0].connection;
      if (blocked) {
        i++;
        continue;
      }
      struct mcclProxySubArgs* sub = &s->args.subs[0];
      uint64_t before = sub->transmitted + sub->done;
      mcclResult_t r = s->args.progress(p, &s->args);
      if (r != mcclSuccess || s->args.state == mcclProxyOpNone) {
        TRACE(MCCL_PROXY, "Proxy %d: op %d finished: %d", p->rank, active[i], r);
        finishOp(s, r);
        memmove(&active[i], &active[i + 1], sizeof(int) * (size_t)(nActive - i - 1));
        nActive--;
        moved = 1;
        continue;
      }
      if (sub->transmitted + sub->done != before) moved = 1;
      i++;
    }
    if (nActive > 0) {
      idleSince = 0;
      if (!moved) sched_yield();  // waiting on the peer or the copy engine: let others run
      continue;
    }
    // Idle: spin, then yield, then sleep until a post signals us (or MCCL_PROXY_SLEEP_MS, for the abort flag).
    uint64_t now = mcclClockNano();
    if (idleSince == 0) idleSince = now;
    if (now - idleSince < spinNs) continue;
    if (now - idleSince < spinNs + 1000000) {
      sched_yield();
      continue;
    }
    pthread_mutex_lock(&p->sleepLock);
    atomic_store(&p->sleeping, 1);
    if (atomic_load(&p->ringHead) == atomic_load(&p->ringTail) && !atomic_load(&p->stopProgress) &&
        !mcclIsAborted(p->abortFlag)) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += (time_t)(sleepNs / 1000000000);
      ts.tv_nsec += (long)(sleepNs % 1000000000);
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&p->sleepCond, &p->sleepLock, &ts);
    }
    atomic_store(&p->sleeping, 0);
    pthread_mutex_unlock(&p->sleepLock);
    // Only work earns a fresh spin; a timed-out wait goes straight back to sleep.
    if (atomic_load(&p->ringHead) != atomic_load(&p->ringTail)) idleSince = 0;
  }
  // Stopped: whatever is still in flight or posted fails, so no waiter hangs.
  if (active) {
    uint64_t head = atomic_load(&p->ringHead), tail = atomic_load(&p->ringTail);
    for (; tail != head; tail++) active[nActive++] = p->ring[tail % MCCL_PROXY_MAX_OPS];
    atomic_store(&p->ringTail, tail);
    for (int i = 0; i < nActive; i++) finishOp(&p->slots[active[i]], mcclInternalError);
  }
  free(active);
  p->progressResult = res;
  INFO(MCCL_PROXY, "Proxy %d: progress thread exits (%s)", p->rank, mcclGetErrorString(res));
  return NULL;
}

// ---- ops --------------------------------------------------------------------------------------

mcclResult_t mcclProxyPostOp(mcclProxyState* proxy, struct mcclConnector* connector, void* buff, size_t nbytes,
                             mcclProxyRequest* req) {
  MCCL_ARGCHECK(proxy != NULL, "mcclProxyPostOp: proxy is NULL");
  MCCL_ARGCHECK(req != NULL, "mcclProxyPostOp: req is NULL");
  MCCL_ARGCHECK(proxyOf(connector) == proxy, "mcclProxyPostOp: connector=%p is not connected to this proxy",
                (void*)connector);
  if (proxy->stopped || atomic_load(&proxy->stopProgress)) {
    WARN("Proxy %d: stopped; cannot post", proxy->rank);
    return mcclInvalidUsage;
  }
  if (proxy->nFree == 0) {
    WARN("Proxy %d: %d ops in flight, the pool is full", proxy->rank, MCCL_PROXY_MAX_OPS);
    return mcclInvalidUsage;
  }
  int idx = proxy->freeSlots[proxy->nFree - 1];
  opSlot* s = &proxy->slots[idx];
  // The posted op (NCCL's ncclProxyOp) becomes the slot's progress state (ncclProxyOpToArgs). The
  // user buffer is the copy-engine mode's extra: the kernel-driven paths post none.
  struct mcclProxyOp op;
  MCCLCHECK(mcclProxyOpInit(&op, connector, buff, nbytes, proxy->abortFlag));
  op.opCount = proxy->nPosted;
  MCCLCHECK(mcclProxyOpToArgs(&op, &s->args));
  proxy->nPosted++;
  proxy->nFree--;
  s->result = mcclSuccess;
  s->drainUntilNs = 0;
  atomic_fetch_add_explicit(&((proxyConnEntry*)connector->proxyConn)->nOps, 1, memory_order_relaxed);
  atomic_store_explicit(&s->status, SLOT_POSTED, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&proxy->ringHead, memory_order_relaxed);
  proxy->ring[head % MCCL_PROXY_MAX_OPS] = idx;
  atomic_store(&proxy->ringHead, head + 1);  // seq_cst: ordered before the load of `sleeping`
  if (atomic_load(&proxy->sleeping)) {
    pthread_mutex_lock(&proxy->sleepLock);
    pthread_cond_signal(&proxy->sleepCond);
    pthread_mutex_unlock(&proxy->sleepLock);
  }
  *req = idx;
  return mcclSuccess;
}

mcclResult_t mcclProxyTest(mcclProxyState* proxy, mcclProxyRequest req, int* done) {
  MCCL_ARGCHECK(proxy != NULL && done != NULL, "mcclProxyTest: NULL argument");
  MCCL_ARGCHECK(req >= 0 && req < MCCL_PROXY_MAX_OPS, "mcclProxyTest: req=%d", req);
  opSlot* s = &proxy->slots[req];
  int st = atomic_load_explicit(&s->status, memory_order_acquire);
  MCCL_ARGCHECK(st != SLOT_FREE, "mcclProxyTest: req=%d is not a posted op", req);
  if (st != SLOT_DONE) {
    *done = 0;
    return mcclSuccess;
  }
  *done = 1;
  mcclResult_t r = s->result;
  atomic_store_explicit(&s->status, SLOT_FREE, memory_order_relaxed);
  proxy->freeSlots[proxy->nFree++] = req;
  return r;
}

mcclResult_t mcclProxyWait(mcclProxyState* proxy, mcclProxyRequest req) {
  for (int spins = 0;; spins++) {
    int done = 0;
    mcclResult_t r = mcclProxyTest(proxy, req, &done);
    if (r != mcclSuccess || done) return r;
    if (spins > 100) sched_yield();
  }
}
