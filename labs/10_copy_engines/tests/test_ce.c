// Lab 10 in one process, one communicator per sim device (mcclLabCommInitAll) on 2, 3 and 4 devices: the stream
// memory-op sync (its flags, and that a stream really waits for its peers), copy batches and their per-copy
// fallback, every copy-engine collective at awkward sizes in and out of place, two hundred calls in a row with
// no reset, the CTA policy through lab 07's calls (no kernel launched; kernels for buffers outside windows, for
// the other policies and without the copy engines), an abort that releases a stream waiting for a peer that
// never comes, and the refusals. One host thread issues every rank's share: nothing here blocks the host.
#include <pthread.h>
#include <stddef.h>
#include "ce_test_util.h"
#include "mccl_param.h"
#include "mccl_utils.h"

#define MAXN 4

struct ceGroup {
  int n;
  mcclLabComm* comms[MAXN];
  struct ceRank r[MAXN];
};

struct regJob {
  struct ceRank* r;
  mcclResult_t res;
};
static void* registerThread(void* p) {
  struct regJob* j = (struct regJob*)p;
  cudaSetDevice(j->r->comm->cudaDev);
  j->res = mcclLabWindowRegister(j->r->comm, j->r->win, CE_WIN, &j->r->w);
  return NULL;
}

// n communicators with the copy-engine collectives, each rank's window registered (collective: a thread each).
static void setUp(struct ceGroup* g, int n) {
  memset(g, 0, sizeof(*g));
  g->n = n;
  if (mcclTestDeviceCount() < n) SKIP("needs %d devices", n);
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  EXPECT_OK(mcclLabCommInitAll(g->comms, n, NULL, 1, mcclLocalTransports));
  for (int i = 0; i < n; i++) {
    g->r[i].comm = g->comms[i];
    g->comms[i]->ceColl.ops = &mcclCeOps;
    ceAlloc(&g->r[i]);
  }
  CHECK_STOPPED();
  pthread_t th[MAXN];
  struct regJob jobs[MAXN];
  for (int i = 0; i < n; i++) {
    jobs[i] = (struct regJob){&g->r[i], mcclInternalError};
    pthread_create(&th[i], NULL, registerThread, &jobs[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) EXPECT_OK(jobs[i].res);
}

static void tearDown(struct ceGroup* g) {
  for (int i = 0; i < g->n; i++)
    if (g->r[i].stream) {
      cudaSetDevice(g->r[i].comm->cudaDev);
      EXPECT_CUDA_OK(cudaStreamSynchronize(g->r[i].stream));
    }
  for (int i = 0; i < g->n; i++) ceFree(&g->r[i]);
  for (int i = 0; i < g->n; i++)
    if (g->comms[i]) EXPECT_OK(mcclLabCommDestroy(g->comms[i]));
  memset(g, 0, sizeof(*g));
}

// setUp, then out of the test if it skipped (fewer devices than ranks) or failed, with what it made torn down: a
// test must not go on to use communicators that were never created.
#define SET_UP_OR_RETURN(g, n) \
  do {                         \
    setUp(g, n);               \
    if (mcclTestStopped()) {   \
      tearDown(g);             \
      return;                  \
    }                          \
  } while (0)

// One call on every rank: set up, issue, check every rank's output.
static void runCall(struct ceGroup* g, const struct ceCall* c, uint64_t tag) {
  for (int i = 0; i < g->n; i++) ceSetUp(&g->r[i], c, g->n, i, tag);
  for (int i = 0; i < g->n && !mcclTestStopped(); i++) EXPECT_OK(ceIssue(&g->r[i], c, i));
  for (int i = 0; i < g->n && !mcclTestStopped(); i++) ceCheck(&g->r[i], c, g->n, i, tag);
}

// ---- the sync ---------------------------------------------------------------------------------------
#define SYNC_ROUNDS 64
#define SLOTS_OFF ((size_t)1 << 20)  // where each rank's round values land in every window
#define LOG_OFF ((size_t)2 << 20)    // where each rank keeps, per round, what its window held after the round

// Rounds of: sync, a copy of this round's value into this rank's slot of every peer's window, sync, a copy of
// this rank's slots into its log. The log must hold every peer's value of every round: the first sync keeps a
// fast rank from writing the next round before the slow one logged this one, the second makes the peers'
// values land before the log is taken. Then every flag holds the value of the last sync that used its array.
static void memOpSync(int n) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, n);
  uint64_t* vals = (uint64_t*)malloc(sizeof(uint64_t) * SYNC_ROUNDS);
  for (int i = 0; i < n && !mcclTestStopped(); i++) {  // rank i's value of round k, in its plain buffer
    for (int k = 0; k < SYNC_ROUNDS; k++) vals[k] = ((uint64_t)(k + 1) << 8) | (uint64_t)i;
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(mcclTestCopyToDevice(g.r[i].plain, vals, sizeof(uint64_t) * SYNC_ROUNDS));
  }
  for (int k = 0; k < SYNC_ROUNDS && !mcclTestStopped(); k++)
    for (int i = 0; i < n && !mcclTestStopped(); i++) {
      struct ceRank* r = &g.r[i];
      EXPECT_CUDA_OK(cudaSetDevice(i));
      EXPECT_OK(mcclCeMemOpSync(r->comm, r->stream));
      for (int p = 0; p < n; p++)
        EXPECT_CUDA_OK(cudaMemcpyAsync((char*)r->w->peerPtrs[p] + SLOTS_OFF + (size_t)i * 8, r->plain + (size_t)k * 8,
                                       8, cudaMemcpyDeviceToDevice, r->stream));
      EXPECT_OK(mcclCeMemOpSync(r->comm, r->stream));
      EXPECT_CUDA_OK(cudaMemcpyAsync(r->plain + LOG_OFF + (size_t)k * n * 8, r->win + SLOTS_OFF, (size_t)n * 8,
                                     cudaMemcpyDeviceToDevice, r->stream));
    }
  uint64_t* log = (uint64_t*)malloc((size_t)SYNC_ROUNDS * n * 8);
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(cudaStreamSynchronize(g.r[i].stream));
    EXPECT_CUDA_OK(cudaMemcpy(log, g.r[i].plain + LOG_OFF, (size_t)SYNC_ROUNDS * n * 8, cudaMemcpyDeviceToHost));
    for (int k = 0; k < SYNC_ROUNDS && !mcclTestStopped(); k++)
      for (int p = 0; p < n; p++) EXPECT_EQ(log[(size_t)k * n + p], ((uint64_t)(k + 1) << 8) | (uint64_t)p);
    struct mcclSymSignals s;
    EXPECT_CUDA_OK(cudaMemcpy(&s, g.comms[i]->signalWin->buff, sizeof(s), cudaMemcpyDeviceToHost));
    // 2 x SYNC_ROUNDS syncs from MCCL_CE_FIRST_SEQ on, the odd ones in ceReady, the even ones in ceComplete.
    for (int p = 0; p < n; p++) {
      EXPECT_EQ(s.ceReady[p], p == i ? 0u : MCCL_CE_FIRST_SEQ + 2 * SYNC_ROUNDS - 2);
      EXPECT_EQ(s.ceComplete[p], p == i ? 0u : MCCL_CE_FIRST_SEQ + 2 * SYNC_ROUNDS - 1);
    }
    EXPECT_EQ(g.comms[i]->ceColl.seq, MCCL_CE_FIRST_SEQ + 2 * SYNC_ROUNDS - 1);
  }
  free(log);
  free(vals);
  tearDown(&g);
}
static void memOpSync2(void) {
  memOpSync(2);
}
static void memOpSync3(void) {
  memOpSync(3);
}
static void memOpSync4(void) {
  memOpSync(4);
}

// A sync holds its stream, not the host, until every peer has reached it: rank 0's stream is still busy while
// rank 1 has not synchronised, and both finish once it has.
static void memOpSyncWaits(void) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, 2);
  if (!mcclTestStopped()) {
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_OK(mcclCeMemOpSync(g.comms[0], g.r[0].stream));
    mcclSleepMs(100);
    EXPECT_CUDA(cudaStreamQuery(g.r[0].stream), cudaErrorNotReady);
    EXPECT_CUDA_OK(cudaSetDevice(1));
    EXPECT_OK(mcclCeMemOpSync(g.comms[1], g.r[1].stream));
  }
  tearDown(&g);  // synchronises both streams
}

// ---- batches -------------------------------------------------------------------------------------------
// The copies of a batch land, as one cudaMemcpyBatchAsync (MCCL_CE_BATCH=1 on a stream) and one by one
// (MCCL_CE_BATCH=0, and the legacy NULL stream, which batches refuse); an empty batch queues nothing.
static void batchCopies(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported");
  mcclLabComm comm;  // the batch reads only the rank, for its log
  memset(&comm, 0, sizeof(comm));
  EXPECT_CUDA_OK(cudaSetDevice(0));
  char *a = NULL, *b = NULL;
  cudaStream_t s = NULL;
  const size_t bytes = 3 * 65537;
  unsigned char* host = (unsigned char*)malloc(bytes);
  EXPECT_OK(mcclMemAlloc((void**)&a, bytes));
  EXPECT_OK(mcclMemAlloc((void**)&b, bytes));
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const char* modes[] = {"1", "0", "1"};
  for (int m = 0; m < 3 && !mcclTestStopped(); m++) {
    setenv("MCCL_CE_BATCH", modes[m], 1);
    mcclParamResetAll();
    cudaStream_t st = m == 2 ? NULL : s;
    for (size_t i = 0; i < bytes; i++) host[i] = ceByte(m, i, 7);
    EXPECT_CUDA_OK(mcclTestCopyToDevice(a, host, bytes));
    EXPECT_CUDA_OK(mcclTestMemset(b, 0, bytes));
    struct mcclCeBatch batch;
    batch.n = 0;
    EXPECT_OK(mcclCeLaunchBatch(&comm, &batch, st));
    for (int k = 0; k < 3; k++) {  // three pieces, in reverse: no order within a batch is relied on
      batch.dsts[batch.n] = b + (size_t)(2 - k) * 65537;
      batch.srcs[batch.n] = a + (size_t)(2 - k) * 65537;
      batch.sizes[batch.n++] = 65537;
    }
    EXPECT_OK(mcclCeLaunchBatch(&comm, &batch, st));
    EXPECT_CUDA_OK(cudaStreamSynchronize(st));
    unsigned char* got = (unsigned char*)malloc(bytes);
    EXPECT_CUDA_OK(cudaMemcpy(got, b, bytes, cudaMemcpyDeviceToHost));
    EXPECT_MEM_EQ(got, host, bytes);
    free(got);
  }
  unsetenv("MCCL_CE_BATCH");
  mcclParamResetAll();
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
  EXPECT_OK(mcclMemFree(a));
  EXPECT_OK(mcclMemFree(b));
  free(host);
}

// ---- the collectives -------------------------------------------------------------------------------------
// Every size and element size, out of place (the input in the window, then outside it) and in place, roots 0 and
// n - 1; each call checked on every rank, the bytes around its output included.
static void collective(int func, int n) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, n);
  uint64_t tag = mcclTestSeed();
  const int rooted = func == mcclFuncGather || func == mcclFuncScatter || func == mcclFuncBroadcast;
  for (size_t s = 0; s < sizeof(ceCounts) / sizeof(ceCounts[0]) && !mcclTestStopped(); s++)
    for (size_t e = 0; e < sizeof(ceEsizes) / sizeof(ceEsizes[0]) && !mcclTestStopped(); e++)
      for (int form = 0; form < 3 && !mcclTestStopped(); form++) {
        if (form == 2 && func == mcclFuncAlltoAll) continue;  // its in-place result is not defined
        const int root = rooted ? (int)((s + e + (size_t)form) % 2) * (n - 1) : 0;
        struct ceCall c = {func, ceCounts[s], ceEsizes[e], root, form == 2, form == 0, 0};
        runCall(&g, &c, tag++);
      }
  tearDown(&g);
}
#define COLL_TESTS(name, func) \
  static void name##2(void) {  \
    collective(func, 2);       \
  }                            \
  static void name##3(void) {  \
    collective(func, 3);       \
  }                            \
  static void name##4(void) {  \
    collective(func, 4);       \
  }
COLL_TESTS(allGather, mcclFuncAllGather)
COLL_TESTS(alltoAll, mcclFuncAlltoAll)
COLL_TESTS(gather, mcclFuncGather)
COLL_TESTS(scatter, mcclFuncScatter)
COLL_TESTS(broadcast, mcclFuncBroadcast)

// Two hundred calls in a row, every function in turn, nothing reset between them: the sequence carries on.
static void manyCalls(void) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, 4);
  uint64_t tag = mcclTestSeed();
  for (int k = 0; k < 200 && !mcclTestStopped(); k++) {
    struct ceCall c = {ceFuncs[k % 5], (size_t)(k % 7) * 131 + 1, 4, k % 4, (k / 5) % 2 && k % 5 != 1, k % 3 == 0, 0};
    runCall(&g, &c, tag++);
  }
  for (int i = 0; i < 4 && !mcclTestStopped(); i++) EXPECT_EQ(g.comms[i]->ceColl.seq, MCCL_CE_FIRST_SEQ + 399);
  tearDown(&g);
}

// The NULL stream: batches refuse it, so the copies go one by one; the memory operations run there as well. A
// thread per rank: on the sim a NULL-stream copy runs in the calling thread once the stream's earlier work is
// done, so the call returns only after the first sync has passed, which needs the peers' calls.
struct legacyJob {
  struct ceRank* r;
  const struct ceCall* c;
  int rank;
  mcclResult_t res;
};
static void* legacyThread(void* p) {
  struct legacyJob* j = (struct legacyJob*)p;
  j->res = ceIssue(j->r, j->c, j->rank);
  return NULL;
}
static void legacyStream(void) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, 2);
  cudaStream_t keep[2];
  for (int i = 0; i < 2; i++) {
    keep[i] = g.r[i].stream;
    g.r[i].stream = NULL;
  }
  struct ceCall c = {mcclFuncAllGather, 4099, 4, 0, 0, 1, 0};
  const uint64_t tag = mcclTestSeed();
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) ceSetUp(&g.r[i], &c, 2, i, tag);
  pthread_t th[2];
  struct legacyJob jobs[2];
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
    jobs[i] = (struct legacyJob){&g.r[i], &c, i, mcclInternalError};
    pthread_create(&th[i], NULL, legacyThread, &jobs[i]);
  }
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
    pthread_join(th[i], NULL);
    EXPECT_OK(jobs[i].res);
  }
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) ceCheck(&g.r[i], &c, 2, i, tag);
  for (int i = 0; i < 2; i++) g.r[i].stream = keep[i];
  tearDown(&g);
}

// ---- the CTA policy through lab 07's calls ---------------------------------------------------------------
static uint64_t launches(struct ceGroup* g) {
  uint64_t k = 0;
  for (int i = 0; i < g->n; i++) k += g->comms[i]->nLaunches;
  return k;
}

// With CTA policy ZERO and recvbuff in a window, every function runs on the copy engines: right bytes, no kernel
// launched, and the communicator sees each call end (mcclLabCommWaitLaunches returns). Inside a group, a
// copy-engine call and an allreduce run side by side: one kernel, for the allreduce.
static void policyZero(int n) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, n);
  for (int i = 0; i < n; i++) g.comms[i]->ctaPolicy = MCCL_CTA_POLICY_ZERO;
  uint64_t tag = mcclTestSeed();
  const uint64_t before = launches(&g);
  for (int f = 0; f < 5 && !mcclTestStopped(); f++)
    for (int form = 0; form < 3 && !mcclTestStopped(); form++) {
      if (form == 2 && ceFuncs[f] == mcclFuncAlltoAll) continue;
      struct ceCall c = {ceFuncs[f], 1021, 2, (f + form) % n, form == 2, form == 0, 1};
      runCall(&g, &c, tag++);
    }
  EXPECT_EQ(launches(&g), before);
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    EXPECT_GT(g.comms[i]->launches.last, 0);
    EXPECT_OK(mcclLabCommWaitLaunches(g.comms[i]));
  }
  // A group: AllGather on the engines beside an allreduce in a kernel (its buffer outside the window).
  struct ceCall c = {mcclFuncAllGather, 777, 4, 0, 0, 1, 1};
  for (int i = 0; i < n && !mcclTestStopped(); i++) ceSetUp(&g.r[i], &c, n, i, tag);
  float* ones = (float*)malloc(sizeof(float) * 64);
  for (int k = 0; k < 64; k++) ones[k] = 1.0f;
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(mcclTestCopyToDevice(g.r[i].plain, ones, sizeof(float) * 64));
  }
  EXPECT_OK(mcclLabGroupStart());
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    EXPECT_OK(ceIssue(&g.r[i], &c, i));
    EXPECT_OK(mcclLabAllReduce(g.r[i].plain, g.r[i].plain, 64, mcclFloat32, mcclSum, g.comms[i], g.r[i].stream));
  }
  EXPECT_OK(mcclLabGroupEnd());
  for (int i = 0; i < n && !mcclTestStopped(); i++) ceCheck(&g.r[i], &c, n, i, tag);
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(cudaMemcpy(ones, g.r[i].plain, sizeof(float) * 64, cudaMemcpyDeviceToHost));
    for (int k = 0; k < 64; k++) EXPECT_TRUE(ones[k] == (float)n);
  }
  EXPECT_EQ(launches(&g), before + (uint64_t)n);
  free(ones);
  tearDown(&g);
}
static void policyZero2(void) {
  policyZero(2);
}
static void policyZero3(void) {
  policyZero(3);
}
static void policyZero4(void) {
  policyZero(4);
}

// Where the copy engines cannot or must not run, lab 07's kernels do, with the right bytes and no error: policy
// ZERO with recvbuff outside every window, or a communicator without the copy-engine collectives; the default
// and EFFICIENCY policies on windows. A zero-count call under ZERO does nothing, and the next call still works.
static void policyFallback(void) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, 2);
  uint64_t tag = mcclTestSeed();
  struct ceCall c = {mcclFuncAllGather, 513, 4, 0, 0, 0, 1};
  for (int pol = 0; pol < 4 && !mcclTestStopped(); pol++) {
    for (int i = 0; i < 2; i++) {
      g.comms[i]->ctaPolicy = pol < 2 ? pol : MCCL_CTA_POLICY_ZERO;
      g.comms[i]->ceColl.ops = pol == 2 ? NULL : &mcclCeOps;
    }
    if (pol == 3) {  // recvbuff outside the windows: the output region of the plain buffer
      const size_t b = c.count * c.esize;
      unsigned char* host = (unsigned char*)malloc(b * 2);
      for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
        for (size_t k = 0; k < b; k++) host[k] = ceByte(i, k, tag);
        EXPECT_CUDA_OK(cudaSetDevice(i));
        EXPECT_CUDA_OK(mcclTestCopyToDevice(g.r[i].plain, host, b));
      }
      const uint64_t before = launches(&g);
      EXPECT_OK(mcclLabGroupStart());
      for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
        EXPECT_CUDA_OK(cudaSetDevice(i));
        EXPECT_OK(mcclLabAllGather(g.r[i].plain, g.r[i].plain + CE_RECV_OFF, c.count, mcclFloat32, g.comms[i],
                                   g.r[i].stream));
      }
      EXPECT_OK(mcclLabGroupEnd());
      EXPECT_EQ(launches(&g), before + 2);
      for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
        EXPECT_CUDA_OK(cudaSetDevice(i));
        EXPECT_CUDA_OK(cudaStreamSynchronize(g.r[i].stream));
        EXPECT_CUDA_OK(cudaMemcpy(host, g.r[i].plain + CE_RECV_OFF, b * 2, cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < 2 * b; k++) EXPECT_EQ(host[k], ceByte((int)(k / b), k % b, tag));
      }
      free(host);
      tag++;
      continue;
    }
    const uint64_t before = launches(&g);
    EXPECT_OK(mcclLabGroupStart());  // one thread, two communicators: a group (the kernels wait for each other)
    for (int i = 0; i < 2; i++) ceSetUp(&g.r[i], &c, 2, i, tag);
    for (int i = 0; i < 2 && !mcclTestStopped(); i++) EXPECT_OK(ceIssue(&g.r[i], &c, i));
    EXPECT_OK(mcclLabGroupEnd());
    for (int i = 0; i < 2 && !mcclTestStopped(); i++) ceCheck(&g.r[i], &c, 2, i, tag);
    EXPECT_EQ(launches(&g), before + 2);
    tag++;
  }
  // Zero elements under ZERO: nothing queued, the sequence untouched.
  for (int i = 0; i < 2; i++) {
    g.comms[i]->ctaPolicy = MCCL_CTA_POLICY_ZERO;
    g.comms[i]->ceColl.ops = &mcclCeOps;
  }
  const uint32_t seq = g.comms[0]->ceColl.seq;
  for (int f = 0; f < 5 && !mcclTestStopped(); f++)
    for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
      struct ceCall z = {ceFuncs[f], 0, 4, 1, 0, 1, 1};
      EXPECT_OK(ceIssue(&g.r[i], &z, i));
    }
  EXPECT_EQ(g.comms[0]->ceColl.seq, seq);
  struct ceCall after = {mcclFuncBroadcast, 1, 1, 1, 0, 1, 1};
  runCall(&g, &after, tag);
  tearDown(&g);
}

// MCCL_CTA_POLICY overrides the configured policy, and a value that is no policy gives the default.
static void policyFromEnv(void) {
  unsetenv("MCCL_CTA_POLICY");
  mcclParamResetAll();
  EXPECT_EQ(mcclLabCtaPolicy(0, MCCL_CTA_POLICY_ZERO), MCCL_CTA_POLICY_ZERO);
  EXPECT_EQ(mcclLabCtaPolicy(0, MCCL_CTA_POLICY_DEFAULT), MCCL_CTA_POLICY_DEFAULT);
  setenv("MCCL_CTA_POLICY", "2", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclLabCtaPolicy(0, MCCL_CTA_POLICY_DEFAULT), MCCL_CTA_POLICY_ZERO);
  setenv("MCCL_CTA_POLICY", "1", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclLabCtaPolicy(0, MCCL_CTA_POLICY_ZERO), MCCL_CTA_POLICY_EFFICIENCY);
  setenv("MCCL_CTA_POLICY", "7", 1);
  mcclParamResetAll();
  EXPECT_EQ(mcclLabCtaPolicy(0, MCCL_CTA_POLICY_ZERO), MCCL_CTA_POLICY_DEFAULT);
  unsetenv("MCCL_CTA_POLICY");
  mcclParamResetAll();
}

// ---- the assisted allreduce ---------------------------------------------------------------------------------
// Small chunks (MCCL_CE_AR_CHUNK), so that a call is many rounds, a shorter last one and a tail: every type's
// kernel on a sum, float32 on every operation with the reduce kernel's blocks (MCCL_CE_AR_BLOCKS) at 3, which
// split a round unevenly, and at 1000, taken as MCCL_CE_AR_MAX_BLOCKS, more than a short round's elements
// (blocks with nothing to reduce still signal), straight to the engines; then through lab 07's call with
// MCCL_ALGO=ce, which launches one kernel per rank (the reduce kernel) and refuses an in-place call.
static const size_t arCounts[] = {77, 1000, 5003};
static void setArEnv(const char* chunk, const char* algo) {
  if (chunk)
    setenv("MCCL_CE_AR_CHUNK", chunk, 1);
  else
    unsetenv("MCCL_CE_AR_CHUNK");
  if (algo)
    setenv("MCCL_ALGO", algo, 1);
  else
    unsetenv("MCCL_ALGO");
  mcclParamResetAll();
}
static void runAr(struct ceGroup* g, size_t count, mcclDataType_t t, int op, int viaLab07, uint64_t tag) {
  for (int i = 0; i < g->n; i++) ceArSetUp(&g->r[i], count, t, op, i, tag);
  if (viaLab07) EXPECT_OK(mcclLabGroupStart());  // one thread, n communicators: their kernels wait for each other
  for (int i = 0; i < g->n && !mcclTestStopped(); i++) EXPECT_OK(ceArIssue(&g->r[i], count, t, op, viaLab07));
  if (viaLab07) EXPECT_OK(mcclLabGroupEnd());
  for (int i = 0; i < g->n && !mcclTestStopped(); i++) ceArCheck(&g->r[i], count, t, op, g->n, tag);
}
static void assistedAllReduce(int n) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, n);
  setArEnv("1024", NULL);
  uint64_t tag = mcclTestSeed() % 1000;
  for (int t = 0; t < mcclNumTypes && !mcclTestStopped(); t++)
    runAr(&g, arCounts[t % 3], (mcclDataType_t)t, mcclSum, 0, tag++);
  // Every operation on 3 blocks; then the most blocks there are flags for (1000 asks for more), where block 0
  // waits for all the others each round: the smallest and the largest count (the sim runs each block's threads
  // as host threads, thousands at 4 ranks, so this case takes most of the test's time).
  setenv("MCCL_CE_AR_BLOCKS", "3", 1);
  mcclParamResetAll();
  for (int op = 0; op < 4 && !mcclTestStopped(); op++)
    for (size_t c = 0; c < 3 && !mcclTestStopped(); c++) runAr(&g, arCounts[c], mcclFloat32, op, 0, tag++);
  setenv("MCCL_CE_AR_BLOCKS", "1000", 1);
  mcclParamResetAll();
  for (size_t c = 0; c < 3 && !mcclTestStopped(); c += 2) runAr(&g, arCounts[c], mcclFloat32, mcclMax, 0, tag++);
  unsetenv("MCCL_CE_AR_BLOCKS");
  setArEnv("1024", "ce");
  const uint64_t before = launches(&g);
  for (size_t c = 0; c < 3 && !mcclTestStopped(); c++) runAr(&g, arCounts[c], mcclBfloat16, mcclSum, 1, tag++);
  EXPECT_EQ(launches(&g), before + 3 * (uint64_t)n);
  EXPECT_RES(mcclLabAllReduce(g.r[0].win, g.r[0].win, 64, mcclFloat32, mcclSum, g.comms[0], g.r[0].stream),
             mcclInvalidArgument);  // in place: the output holds the peers' chunks before they are reduced
  setArEnv(NULL, NULL);
  tearDown(&g);
}
static void assistedAllReduce2(void) {
  assistedAllReduce(2);
}
static void assistedAllReduce3(void) {
  assistedAllReduce(3);
}
static void assistedAllReduce4(void) {
  assistedAllReduce(4);
}

// ---- faults and refusals ----------------------------------------------------------------------------------
struct aborter {
  mcclLabComm* comm;
  int ms;
};
static void* abortLater(void* p) {
  struct aborter* a = (struct aborter*)p;
  mcclSleepMs(a->ms);
  mcclLabCommAbort(a->comm);
  return NULL;
}

// Rank 0 runs an AllGather, rank 1 never does: rank 0's stream waits for it until another thread aborts the
// communicator; teardown then releases the wait (a stream cannot read the abort flag), the stream ends, and
// destroying both communicators frees everything.
static void abortReleasesWaits(void) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, 2);
  if (!mcclTestStopped()) {
    struct ceCall c = {mcclFuncAllGather, 1000, 4, 0, 0, 1, 0};
    ceSetUp(&g.r[0], &c, 2, 0, 1);
    EXPECT_OK(ceIssue(&g.r[0], &c, 0));
    pthread_t th;
    struct aborter a = {g.comms[0], 100};
    pthread_create(&th, NULL, abortLater, &a);
    pthread_join(th, NULL);
    EXPECT_CUDA(cudaStreamQuery(g.r[0].stream), cudaErrorNotReady);  // still waiting: aborting changed nothing yet
    EXPECT_OK(mcclLabCommWaitLaunches(g.comms[0]));                  // releases, then waits for its end
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_CUDA_OK(cudaStreamSynchronize(g.r[0].stream));
  }
  tearDown(&g);
  // The same with the assisted allreduce: its kernel sees the flag and ends, teardown releases the copies' waits.
  SET_UP_OR_RETURN(&g, 2);
  if (!mcclTestStopped()) {
    setArEnv("1024", NULL);
    ceArSetUp(&g.r[0], 5000, mcclFloat32, mcclSum, 0, 1);
    EXPECT_OK(ceArIssue(&g.r[0], 5000, mcclFloat32, mcclSum, 0));
    pthread_t th;
    struct aborter a = {g.comms[0], 100};
    pthread_create(&th, NULL, abortLater, &a);
    pthread_join(th, NULL);
    EXPECT_OK(mcclLabCommWaitLaunches(g.comms[0]));
    EXPECT_CUDA_OK(cudaSetDevice(0));
    EXPECT_CUDA_OK(cudaStreamSynchronize(g.r[0].stream));
    setArEnv(NULL, NULL);
  }
  tearDown(&g);
}

// Refusals: a sync without a signal area, a function the engines do not run, a destination outside its window
// (nothing queued: the sequence is untouched).
static void badInput(void) {
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, 2);
  if (!mcclTestStopped()) {
    mcclLabComm bare;
    memset(&bare, 0, sizeof(bare));
    bare.nRanks = 2;
    EXPECT_RES(mcclCeMemOpSync(&bare, NULL), mcclInvalidUsage);
    struct mcclLabCeCollArgs a = {
        mcclFuncReduceScatter, 0, 16, 4, g.r[0].win, g.r[0].win + 4096, NULL, g.r[0].w, mcclFloat32, mcclDevSum, 0};
    EXPECT_RES(mcclLaunchCeColl(g.comms[0], &a, g.r[0].stream), mcclInvalidUsage);
    a.func = mcclFuncAllReduce;  // the assisted allreduce: sendbuff outside a window, then in place
    EXPECT_RES(mcclLaunchCeColl(g.comms[0], &a, g.r[0].stream), mcclInvalidUsage);
    a.sendWin = g.r[0].w;
    a.sendBuff = a.recvBuff;
    EXPECT_RES(mcclLaunchCeColl(g.comms[0], &a, g.r[0].stream), mcclInvalidUsage);
    a.sendBuff = g.r[0].win;
    a.func = mcclFuncAllGather;
    a.recvBuff = g.r[0].win + CE_WIN - 32;  // two blocks of 64 bytes do not fit
    EXPECT_RES(mcclLaunchCeColl(g.comms[0], &a, g.r[0].stream), mcclInvalidUsage);
    EXPECT_EQ(g.comms[0]->ceColl.seq, 0u);
    EXPECT_TRUE(mcclCeImplemented(mcclFuncAllReduce, mcclFloat32));
    EXPECT_FALSE(mcclCeImplemented(mcclFuncReduceScatter, mcclFloat32));
    EXPECT_TRUE(mcclCeImplemented(mcclFuncAlltoAll, mcclBfloat16));
  }
  tearDown(&g);
}

// ---- CUDA graphs (BACKEND=cuda; the sim has no graphs) ----------------------------------------------------
// The graph API is looked up at run time (mcclTestGraphApiLoad): the sim does not implement it. A captured
// AllGather (the copies one by one, the syncs on the constant flag value) replayed with new inputs each time,
// then an eager call after the replays.
static void graphReplay(void) {
  if (MCCL_TEST_ON_SIM) SKIP("the sim backend has no CUDA graphs");
  mcclTestGraphApi ga;
  if (!mcclTestGraphApiLoad(&ga)) SKIP("the CUDA runtime's graph API is not available");
  struct ceGroup g;
  SET_UP_OR_RETURN(&g, 2);
  uint64_t tag = mcclTestSeed();
  struct ceCall c = {mcclFuncAllGather, 3001, 4, 0, 0, 1, 0};
  cudaGraphExec_t exec[2] = {NULL, NULL};
  for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
    cudaGraph_t gr = NULL;
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(ga.beginCapture(g.r[i].stream, cudaStreamCaptureModeRelaxed));
    EXPECT_OK(ceIssue(&g.r[i], &c, i));
    EXPECT_CUDA_OK(ga.endCapture(g.r[i].stream, &gr));
    EXPECT_CUDA_OK(ga.instantiate(&exec[i], gr, 0));
    EXPECT_CUDA_OK(ga.destroy(gr));
  }
  for (int rep = 0; rep < 20 && !mcclTestStopped(); rep++, tag++) {
    for (int i = 0; i < 2; i++) ceSetUp(&g.r[i], &c, 2, i, tag);
    for (int i = 0; i < 2 && !mcclTestStopped(); i++) {
      EXPECT_CUDA_OK(cudaSetDevice(i));
      EXPECT_CUDA_OK(ga.launch(exec[i], g.r[i].stream));
    }
    for (int i = 0; i < 2 && !mcclTestStopped(); i++) ceCheck(&g.r[i], &c, 2, i, tag);
  }
  runCall(&g, &c, tag);
  for (int i = 0; i < 2; i++)
    if (exec[i]) {
      cudaSetDevice(i);
      EXPECT_CUDA_OK(ga.execDestroy(exec[i]));
    }
  tearDown(&g);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(memOpSync2), MCCL_TEST_CASE(memOpSync3), MCCL_TEST_CASE(memOpSync4),
               MCCL_TEST_CASE(memOpSyncWaits), MCCL_TEST_CASE(batchCopies), MCCL_TEST_CASE(allGather2),
               MCCL_TEST_CASE(allGather3), MCCL_TEST_CASE(allGather4), MCCL_TEST_CASE(legacyStream),
               MCCL_TEST_CASE(alltoAll2), MCCL_TEST_CASE(alltoAll3), MCCL_TEST_CASE(alltoAll4), MCCL_TEST_CASE(gather2),
               MCCL_TEST_CASE(gather3), MCCL_TEST_CASE(gather4), MCCL_TEST_CASE(scatter2), MCCL_TEST_CASE(scatter3),
               MCCL_TEST_CASE(scatter4), MCCL_TEST_CASE(broadcast2), MCCL_TEST_CASE(broadcast3),
               MCCL_TEST_CASE(broadcast4), MCCL_TEST_CASE(manyCalls), MCCL_TEST_CASE(policyZero2),
               MCCL_TEST_CASE(policyZero3), MCCL_TEST_CASE(policyZero4), MCCL_TEST_CASE(policyFallback),
               MCCL_TEST_CASE(policyFromEnv), MCCL_TEST_CASE(assistedAllReduce2), MCCL_TEST_CASE(assistedAllReduce3),
               MCCL_TEST_CASE(assistedAllReduce4), MCCL_TEST_CASE(abortReleasesWaits), MCCL_TEST_CASE(badInput),
               MCCL_TEST_CASE(graphReplay))
