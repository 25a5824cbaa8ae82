// Lab 09 in one process, one communicator per sim device (mcclLabCommInitAll) on 2, 3 and 4 devices: the
// device communicator and its teams, device windows in NCCL's flat layout, every peer's pointer, barrier
// sessions in a loop of 1000 checked by data in every memory order, the lab's kernels (one-shot, two-shot,
// allgather, fused allreduce + RMSNorm against the two kernels) at awkward sizes, and every bad input of the
// device API refused by name with nothing leaked.
#include <pthread.h>
#include "devapi_test_util.h"

#define MAXN 4

struct dtGroup {
  int n;
  mcclLabComm* comms[MAXN];
  struct dtRank r[MAXN];
};

// Run one collective host call on every rank at once, one thread each (as separate processes would).
typedef mcclResult_t (*dtRankFn)(struct dtRank* r, void* arg);
struct dtJob {
  struct dtRank* r;
  dtRankFn fn;
  void* arg;
  mcclResult_t res;
};
static void* dtJobMain(void* p) {
  struct dtJob* j = (struct dtJob*)p;
  cudaSetDevice(j->r->comm->cudaDev);
  j->res = j->fn(j->r, j->arg);
  return NULL;
}
static void dtParallel(struct dtGroup* g, dtRankFn fn, void* arg, mcclResult_t* res) {
  pthread_t th[MAXN];
  struct dtJob jobs[MAXN];
  for (int i = 0; i < g->n; i++) {
    jobs[i] = (struct dtJob){&g->r[i], fn, arg, mcclInternalError};
    pthread_create(&th[i], NULL, dtJobMain, &jobs[i]);
  }
  for (int i = 0; i < g->n; i++) {
    pthread_join(th[i], NULL);
    res[i] = jobs[i].res;
  }
}

static mcclResult_t registerWin(struct dtRank* r, void* arg) {
  (void)arg;
  return mcclLabWindowRegister(r->comm, r->buf, DT_BYTES, &r->win);
}
static mcclResult_t createDevComm(struct dtRank* r, void* arg) {
  mcclDevCommRequirements* reqs = (mcclDevCommRequirements*)arg;
  mcclResult_t res = mcclLabDevCommCreate(r->comm, reqs, &r->dc);
  if (res == mcclSuccess) r->hasDc = 1;
  return res;
}
// Each rank its own requirements, as each process has its own: the call writes the handles they ask for.
struct dtReqsPerRank {
  mcclDevCommRequirements reqs[MAXN];
  mcclDevResourceRequirements extra[MAXN];
  mcclDevResourceHandle handle[MAXN];
  mcclDevComm dc[MAXN];
};
static mcclResult_t createDevCommInto(struct dtRank* r, void* arg) {
  struct dtReqsPerRank* a = arg;
  const int rank = r->comm->rank;
  return mcclLabDevCommCreate(r->comm, &a->reqs[rank], &a->dc[rank]);
}

// SKIP and a failed EXPECT return from here only: every caller checks CHECK_STOPPED() next.
static void setUp(struct dtGroup* g, int n) {
  memset(g, 0, sizeof(*g));
  g->n = n;
  if (mcclTestDeviceCount() < n) SKIP("needs %d devices", n);
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  EXPECT_OK(mcclLabCommInitAll(g->comms, n, NULL, 1, mcclLocalTransports));
  for (int i = 0; i < n; i++) {
    g->r[i].comm = g->comms[i];
    dtAlloc(&g->r[i]);
  }
  mcclResult_t res[MAXN];
  dtParallel(g, registerWin, NULL, res);
  for (int i = 0; i < n; i++) EXPECT_OK(res[i]);
  mcclDevCommRequirements reqs = dtReqs();
  dtParallel(g, createDevComm, &reqs, res);
  for (int i = 0; i < n; i++) EXPECT_OK(res[i]);
  for (int i = 0; i < n; i++) EXPECT_OK(mcclDevWindowCreate(g->comms[i], g->r[i].win, &g->r[i].devWin));
}

static void tearDown(struct dtGroup* g) {
  for (int i = 0; i < g->n; i++)
    if (g->r[i].stream) EXPECT_CUDA_OK(cudaStreamSynchronize(g->r[i].stream));
  for (int i = 0; i < g->n; i++) dtTearDown(&g->r[i]);
  for (int i = 0; i < g->n; i++)
    if (g->comms[i]) EXPECT_OK(mcclLabCommDestroy(g->comms[i]));
  memset(g, 0, sizeof(*g));
}

static void syncAll(struct dtGroup* g) {
  for (int i = 0; i < g->n; i++) EXPECT_CUDA_OK(cudaStreamSynchronize(g->r[i].stream));
}

static uint32_t readErrors(struct dtRank* r) {
  uint32_t e = 0xffffffffu;
  cudaSetDevice(r->comm->cudaDev);
  if (cudaMemcpy(&e, r->errors, 4, cudaMemcpyDeviceToHost) != cudaSuccess) return 0xffffffffu;
  return e;
}

// The host's arithmetic of teams against the communicator, the device communicator's fields, the flat range
// of a device window (LSA rank l's buffer at lsaFlatBase + l * stride4G * 4 GiB), a resource buffer's handle,
// and the peer-pointer kernel.
static void apiObjects(int n) {
  struct dtGroup g;
  setUp(&g, n);
  CHECK_STOPPED();
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    mcclLabComm* c = g.comms[i];
    mcclTeam w = mcclLabTeamWorld(c), l = mcclLabTeamLsa(c), rail = mcclLabTeamRail(c);
    EXPECT_EQ(w.nRanks, n);
    EXPECT_EQ(w.rank, i);
    EXPECT_EQ(l.nRanks, n);  // one host: the LSA team is the world
    EXPECT_EQ(l.rank, i);
    EXPECT_EQ(rail.nRanks, 1);
    EXPECT_EQ(rail.stride, n);
    for (int p = 0; p < n; p++) {
      EXPECT_EQ(mcclLabTeamRankToWorld(c, l, p), p);
      EXPECT_EQ(mcclLabTeamRankToLsa(c, w, p), p);
      EXPECT_TRUE(mcclTeamRankIsMember(l, w, p));
      EXPECT_EQ(mcclTeamRankToTeam(l, w, p), p);
    }
    EXPECT_FALSE(mcclTeamRankIsMember(l, w, n));
    mcclTeam inner = mcclTeamInnerFactor(w, 1), outer = mcclTeamOuterFactor(w, 1);
    EXPECT_EQ(inner.nRanks, 1);
    EXPECT_EQ(outer.nRanks, n);
    const mcclDevComm* dc = &g.r[i].dc;
    EXPECT_EQ(dc->rank, i);
    EXPECT_EQ(dc->nRanks, n);
    EXPECT_EQ(dc->lsaRank, i);
    EXPECT_EQ(dc->lsaSize, n);
    EXPECT_EQ(dc->lsaBarrier.nBarriers, DT_BARRIERS);
    EXPECT_EQ(dc->ginContextCount, 0);
    EXPECT_TRUE(dc->resourceWindow != NULL);
    EXPECT_TRUE(dc->resourceWindow_inlined.stride4G >= 1);
    EXPECT_EQ(dc->resourceWindow_inlined.lsaRank, i);
    EXPECT_EQ(dc->resourceWindow_inlined.worldRank, i);
    // Each rank's window buffer holds its rank; every LSA rank's is found at its stride.
    uint64_t v = 0x5eed0000u + (uint64_t)i;
    EXPECT_CUDA_OK(cudaSetDevice(c->cudaDev));
    EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)g.r[i].buf + 4096, &v, 8));
  }
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    struct mcclWindow_vidmem h, d;
    EXPECT_OK(mcclDevWindowGetHost(g.comms[i], g.r[i].devWin, &h));
    EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
    EXPECT_CUDA_OK(cudaMemcpy(&d, g.r[i].devWin, sizeof(d), cudaMemcpyDeviceToHost));
    EXPECT_MEM_EQ(&h, &d, sizeof(d));  // the device copy is what the host describes
    EXPECT_EQ(h.lsaRank, i);
    EXPECT_TRUE(h.stride4G >= 1);
    EXPECT_EQ(h.mcOffset4K, 0);
    for (int l = 0; l < n; l++) {
      uint64_t got = 0;
      char* peer = h.lsaFlatBase + ((size_t)l * h.stride4G << 32);
      EXPECT_CUDA_OK(cudaMemcpy(&got, peer + 4096, 8, cudaMemcpyDeviceToHost));
      EXPECT_EQ(got, 0x5eed0000u + (uint64_t)l);
    }
  }
  // The communicator's window table lists the window (by its buffer) and the resource window, and nothing else.
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    struct mcclDevCommWindowTable t;
    EXPECT_TRUE(g.r[i].dc.windowTable != NULL);
    EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
    EXPECT_CUDA_OK(cudaMemcpy(&t, g.r[i].dc.windowTable, sizeof(t), cudaMemcpyDeviceToHost));
    int found = 0, used = 0;
    for (int e = 0; e < MCCL_DEV_WINDOW_TABLE_ENTRIES; e++) {
      used += t.entries[e].window != NULL;
      if (t.entries[e].window == g.r[i].devWin) {
        found++;
        EXPECT_EQ(t.entries[e].base, (uintptr_t)g.r[i].buf);
        EXPECT_EQ(t.entries[e].size, (uintptr_t)DT_BYTES);
      }
      if (t.entries[e].window == g.r[i].dc.resourceWindow) found++;
    }
    EXPECT_EQ(found, 2);
    EXPECT_EQ(used, 2);
    EXPECT_TRUE(t.next == NULL);
  }
  // Every pointer of the API, from a kernel on every rank.
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
    EXPECT_OK(mcclDevPeerPointerTest(&g.r[i].dc, g.r[i].devWin, g.r[i].errors, g.r[i].stream));
  }
  syncAll(&g);
  for (int i = 0; i < n; i++) EXPECT_EQ(readErrors(&g.r[i]), 0);
  // A second device communicator with an extra buffer: aligned as asked, after the barriers, zeroed.
  static struct dtReqsPerRank a;
  memset(&a, 0, sizeof(a));
  for (int i = 0; i < n; i++) {
    a.extra[i].bufferSize = 1000;
    a.extra[i].bufferAlign = 4096;
    a.extra[i].outBufferHandle = &a.handle[i];
    a.reqs[i] = dtReqs();
    a.reqs[i].barrierCount = 7;  // more than lsaBarrierCount: the larger wins
    a.reqs[i].resourceRequirementsList = &a.extra[i];
  }
  mcclResult_t res[MAXN];
  dtParallel(&g, createDevCommInto, &a, res);
  for (int i = 0; i < n; i++) EXPECT_OK(res[i]);
  for (int i = 1; i < n; i++) EXPECT_EQ(a.handle[i], a.handle[0]);  // the same layout on every rank
  const mcclDevResourceHandle h = a.handle[0];
  EXPECT_EQ(a.dc[0].lsaBarrier.nBarriers, 7);
  EXPECT_EQ(mcclGetResourceBufferOffset(h) % 4096, 0);
  EXPECT_GE(mcclGetResourceBufferOffset(h), (size_t)7 * (3 + n) * 4);
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    char z[1000];
    const struct mcclWindow_vidmem* rw = &a.dc[i].resourceWindow_inlined;
    EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
    EXPECT_CUDA_OK(cudaMemcpy(z, rw->lsaFlatBase + ((size_t)i * rw->stride4G << 32) + mcclGetResourceBufferOffset(h),
                              sizeof(z), cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < sizeof(z); k++) EXPECT_EQ(z[k], 0);
    EXPECT_OK(mcclLabDevCommDestroy(g.comms[i], &a.dc[i]));
  }
  tearDown(&g);
}
static void apiObjects2(void) {
  apiObjects(2);
}
static void apiObjects3(void) {
  apiObjects(3);
}
static void apiObjects4(void) {
  apiObjects(4);
}

// More device windows than one block of the window table holds: a second block is chained to the first, every
// window is listed once, and a window destroyed leaves its entry free for the next one.
static void windowTableGrows(void) {
  struct dtGroup g;
  setUp(&g, 2);
  CHECK_STOPPED();
  enum { NWIN = MCCL_DEV_WINDOW_TABLE_ENTRIES + 8 };
  mcclWindow_t extra[NWIN];
  struct dtRank* r = &g.r[0];
  for (int k = 0; k < NWIN; k++) EXPECT_OK(mcclDevWindowCreate(r->comm, r->win, &extra[k]));
  struct mcclDevCommWindowTable t0, t1;
  EXPECT_CUDA_OK(cudaSetDevice(r->comm->cudaDev));
  EXPECT_CUDA_OK(cudaMemcpy(&t0, r->dc.windowTable, sizeof(t0), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(t0.next != NULL);
  if (t0.next) EXPECT_CUDA_OK(cudaMemcpy(&t1, t0.next, sizeof(t1), cudaMemcpyDeviceToHost));
  int listed = 0;
  for (int k = 0; k < NWIN && t0.next; k++) {
    int seen = 0;
    for (int e = 0; e < MCCL_DEV_WINDOW_TABLE_ENTRIES; e++)
      seen += (t0.entries[e].window == extra[k]) + (t1.entries[e].window == extra[k]);
    listed += seen == 1;
  }
  EXPECT_EQ(listed, NWIN);
  EXPECT_OK(mcclDevWindowDestroy(r->comm, extra[3]));
  mcclWindow_t again = NULL;
  EXPECT_OK(mcclDevWindowCreate(r->comm, r->win, &again));
  EXPECT_CUDA_OK(cudaMemcpy(&t0, r->dc.windowTable, sizeof(t0), cudaMemcpyDeviceToHost));
  int inFirst = 0;
  for (int e = 0; e < MCCL_DEV_WINDOW_TABLE_ENTRIES; e++) inFirst += t0.entries[e].window == again;
  EXPECT_EQ(inFirst, 1);  // the freed entry of the first block, not a new one
  EXPECT_OK(mcclDevWindowDestroy(r->comm, again));
  for (int k = 0; k < NWIN; k++)
    if (k != 3) EXPECT_OK(mcclDevWindowDestroy(r->comm, extra[k]));
  tearDown(&g);
}

// 1000 sessions on every barrier a kernel uses (2 blocks), in sync(acq_rel), then 250 more in each other way
// of ordering: arrive(release) + wait(acquire), sync(seq_cst), relaxed with fences. Every round is checked by
// the data the peers stored before arriving; afterwards each barrier's epoch, and every peer's slot in this
// rank's inbox, count every session.
static void barrierLoop(int n) {
  struct dtGroup g;
  setUp(&g, n);
  CHECK_STOPPED();
  const int iters[4] = {1000, 250, 250, 250};
  int total = 0;
  for (int m = 0; m < 4 && !mcclTestStopped(); m++) {
    for (int i = 0; i < n; i++) {
      EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
      EXPECT_OK(
          mcclDevBarrierTest(&g.r[i].dc, g.r[i].devWin, iters[m], m, DT_BLOCKS, 32, g.r[i].errors, g.r[i].stream));
    }
    total += iters[m];
    syncAll(&g);
    for (int i = 0; i < n; i++) EXPECT_EQ(readErrors(&g.r[i]), 0);
  }
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    const mcclDevComm* dc = &g.r[i].dc;
    const int nB = dc->lsaBarrier.nBarriers;
    uint32_t state[DT_BARRIERS * (3 + MAXN)];
    const struct mcclWindow_vidmem* rw = &dc->resourceWindow_inlined;
    EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
    EXPECT_CUDA_OK(cudaMemcpy(
        state,
        rw->lsaFlatBase + ((size_t)i * rw->stride4G << 32) + mcclGetResourceBufferOffset(dc->lsaBarrier.bufHandle),
        sizeof(uint32_t) * (size_t)nB * (size_t)(3 + n), cudaMemcpyDeviceToHost));
    for (int b = 0; b < nB; b++) {
      uint32_t want = b < DT_BLOCKS ? (uint32_t)total : 0;
      EXPECT_EQ(state[nB + b], want);                                                       // the unicast epoch
      for (int p = 0; p < n; p++) EXPECT_EQ(state[3 * nB + b * n + p], p == i ? 0 : want);  // the inbox
    }
  }
  tearDown(&g);
}
static void barrierLoop2(void) {
  barrierLoop(2);
}
static void barrierLoop3(void) {
  barrierLoop(3);
}
static void barrierLoop4(void) {
  barrierLoop(4);
}

static const size_t kCounts[] = {1, 7, 131, 1021, 4099, 65541};
#define NCOUNTS (sizeof(kCounts) / sizeof(kCounts[0]))

// One-shot out of place (algorithm 0), two-shot out of place (1) and in place (2), in float32 and bfloat16.
static void allReduce(int n, int algoLo, int algoHi) {
  struct dtGroup g;
  setUp(&g, n);
  CHECK_STOPPED();
  void* host = malloc(DT_BYTES);
  uint64_t seed = mcclTestSeed();
  for (int t = 0; t < 2 && !mcclTestStopped(); t++) {
    mcclDataType_t type = t ? mcclBfloat16 : mcclFloat32;
    size_t es = t ? 2 : 4;
    for (size_t c = 0; c < NCOUNTS && !mcclTestStopped(); c++)
      for (int algo = algoLo; algo <= algoHi && !mcclTestStopped(); algo++) {
        size_t count = kCounts[c];
        const size_t outOff = DT_BYTES / 2;  // two-shot out of place: the output further in the same window
        for (int i = 0; i < n; i++) {
          dtFillAr(host, type, count, i, seed + c);
          EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
          EXPECT_CUDA_OK(mcclTestCopyToDevice(g.r[i].buf, host, count * es));
        }
        for (int i = 0; i < n; i++) {
          struct dtRank* r = &g.r[i];
          EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
          if (algo == 0)
            EXPECT_OK(mcclDevAllReduceOneShot(&r->dc, r->devWin, 0, r->out, count, type, DT_BLOCKS, r->stream));
          else
            EXPECT_OK(mcclDevAllReduceTwoShot(&r->dc, r->devWin, 0, r->devWin, algo == 1 ? outOff : 0, count, type,
                                              DT_BLOCKS, r->stream));
        }
        syncAll(&g);
        for (int i = 0; i < n && !mcclTestStopped(); i++) {
          const void* res = algo == 0 ? g.r[i].out : algo == 1 ? (char*)g.r[i].buf + outOff : g.r[i].buf;
          EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
          EXPECT_CUDA_OK(cudaMemcpy(host, res, count * es, cudaMemcpyDeviceToHost));
          long bad = dtCheckAr(host, type, count, n, seed + c);
          if (bad >= 0)
            mcclTestFailAt(__FILE__, __LINE__, "%s %s count %zu rank %d: element %ld wrong",
                           algo == 0   ? "one-shot"
                           : algo == 1 ? "two-shot"
                                       : "two-shot in place",
                           t ? "bf16" : "f32", count, i, bad);
        }
      }
  }
  free(host);
  tearDown(&g);
}
static void oneShot2(void) {
  allReduce(2, 0, 0);
}
static void oneShot3(void) {
  allReduce(3, 0, 0);
}
static void oneShot4(void) {
  allReduce(4, 0, 0);
}
static void twoShot2(void) {
  allReduce(2, 1, 2);
}
static void twoShot3(void) {
  allReduce(3, 1, 2);
}
static void twoShot4(void) {
  allReduce(4, 1, 2);
}

// Device windows alone (no device communicator): on 4 ranks, every LSA rank's buffer is found at
// lsaFlatBase + l * stride4G * 4 GiB, the stride a whole number of 4 GiB above the buffer's size.
static void windowFlatRange(void) {
  const int n = 4;
  struct dtGroup g;
  memset(&g, 0, sizeof(g));
  g.n = n;
  if (mcclTestDeviceCount() < n) SKIP("needs %d devices", n);
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no windows");
  EXPECT_OK(mcclLabCommInitAll(g.comms, n, NULL, 1, mcclLocalTransports));
  for (int i = 0; i < n; i++) {
    g.r[i].comm = g.comms[i];
    dtAlloc(&g.r[i]);
    uint64_t v = 0xf1a70000u + (uint64_t)i;
    EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)g.r[i].buf + DT_BYTES - 8, &v, 8));
  }
  mcclResult_t res[MAXN];
  dtParallel(&g, registerWin, NULL, res);
  for (int i = 0; i < n; i++) EXPECT_OK(res[i]);
  for (int i = 0; i < n; i++) EXPECT_OK(mcclDevWindowCreate(g.comms[i], g.r[i].win, &g.r[i].devWin));
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    struct mcclWindow_vidmem h;
    EXPECT_OK(mcclDevWindowGetHost(g.comms[i], g.r[i].devWin, &h));
    EXPECT_EQ(h.lsaRank, i);
    EXPECT_EQ(h.worldRank, i);
    EXPECT_TRUE(h.stride4G >= 1 && ((size_t)h.stride4G << 32) >= DT_BYTES);
    EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
    for (int l = 0; l < n; l++) {
      uint64_t got = 0;
      EXPECT_CUDA_OK(
          cudaMemcpy(&got, h.lsaFlatBase + ((size_t)l * h.stride4G << 32) + DT_BYTES - 8, 8, cudaMemcpyDeviceToHost));
      EXPECT_EQ(got, 0xf1a70000u + (uint64_t)l);
    }
  }
  tearDown(&g);
}

static void allGather(int n) {
  static const size_t sizes[] = {1, 7, 131, 4099, 100003};
  struct dtGroup g;
  setUp(&g, n);
  CHECK_STOPPED();
  unsigned char* host = (unsigned char*)malloc(DT_BYTES * 4);
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && !mcclTestStopped(); s++) {
    size_t bytes = sizes[s];
    for (int i = 0; i < n; i++) {
      for (size_t k = 0; k < bytes; k++) host[k] = (unsigned char)(k * 31 + (size_t)i * 7 + s);
      EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
      EXPECT_CUDA_OK(mcclTestCopyToDevice(g.r[i].buf, host, bytes));
    }
    for (int i = 0; i < n; i++) {
      EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
      EXPECT_OK(mcclDevAllGather(&g.r[i].dc, g.r[i].devWin, 0, g.r[i].out, bytes, DT_BLOCKS, g.r[i].stream));
    }
    syncAll(&g);
    for (int i = 0; i < n && !mcclTestStopped(); i++) {
      EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
      EXPECT_CUDA_OK(cudaMemcpy(host, g.r[i].out, bytes * (size_t)n, cudaMemcpyDeviceToHost));
      for (int p = 0; p < n; p++)
        for (size_t k = 0; k < bytes; k++)
          if (host[(size_t)p * bytes + k] != (unsigned char)(k * 31 + (size_t)p * 7 + s)) {
            mcclTestFailAt(__FILE__, __LINE__, "allgather %zu bytes: rank %d got byte %zu of rank %d wrong", bytes, i,
                           k, p);
            k = bytes, p = n;
          }
    }
  }
  free(host);
  tearDown(&g);
}
static void allGather2(void) {
  allGather(2);
}
static void allGather3(void) {
  allGather(3);
}
static void allGather4(void) {
  allGather(4);
}

// The fused kernel against the same two steps as two kernels (the one-shot allreduce, then RMSNorm), and both
// against the host's reference.
static void fusedRmsNorm(int n) {
  static const int shapes[][2] = {{1, 7}, {3, 1000}, {5, 4096}, {2, 129}};
  const float eps = 1e-6f;
  struct dtGroup g;
  setUp(&g, n);
  CHECK_STOPPED();
  void* host = malloc(DT_BYTES * 2);
  void* w = malloc(4 * 4096);
  void* wDev[MAXN] = {NULL};
  for (int i = 0; i < n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
    EXPECT_OK(mcclMemAlloc(&wDev[i], 4 * 4096));
  }
  uint64_t seed = mcclTestSeed();
  for (int t = 0; t < 2 && !mcclTestStopped(); t++) {
    mcclDataType_t type = t ? mcclBfloat16 : mcclFloat32;
    size_t es = t ? 2 : 4;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]) && !mcclTestStopped(); s++) {
      int rows = shapes[s][0], hidden = shapes[s][1];
      size_t elems = (size_t)rows * (size_t)hidden;
      dtFillW(w, type, (size_t)hidden, seed + s);
      for (int i = 0; i < n; i++) {
        dtFillX(host, type, elems, i, seed + s);
        EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
        EXPECT_CUDA_OK(mcclTestCopyToDevice(g.r[i].buf, host, elems * es));
        EXPECT_CUDA_OK(mcclTestCopyToDevice(wDev[i], w, (size_t)hidden * es));
      }
      for (int i = 0; i < n; i++) {
        struct dtRank* r = &g.r[i];
        EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
        EXPECT_OK(mcclDevAllReduceRmsNorm(&r->dc, r->devWin, 0, wDev[i], r->out, rows, hidden, eps, type, DT_BLOCKS,
                                          r->stream));
        EXPECT_OK(mcclDevAllReduceOneShot(&r->dc, r->devWin, 0, r->out2, elems, type, DT_BLOCKS, r->stream));
        EXPECT_OK(mcclDevRmsNorm(r->out2, wDev[i], r->out2, rows, hidden, eps, type, r->stream));
      }
      syncAll(&g);
      for (int i = 0; i < n && !mcclTestStopped(); i++) {
        char* two = (char*)host + DT_BYTES;
        EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
        EXPECT_CUDA_OK(cudaMemcpy(host, g.r[i].out, elems * es, cudaMemcpyDeviceToHost));
        EXPECT_CUDA_OK(cudaMemcpy(two, g.r[i].out2, elems * es, cudaMemcpyDeviceToHost));
        long bad = dtCompareClose(host, two, type, elems);
        if (bad >= 0)
          mcclTestFailAt(__FILE__, __LINE__, "%s %dx%d rank %d: fused and two-step differ at %ld", t ? "bf16" : "f32",
                         rows, hidden, i, bad);
        bad = dtCheckRmsNorm(host, w, type, rows, hidden, n, seed + s, eps);
        if (bad >= 0)
          mcclTestFailAt(__FILE__, __LINE__, "%s %dx%d rank %d: element %ld off the reference", t ? "bf16" : "f32",
                         rows, hidden, i, bad);
      }
    }
  }
  for (int i = 0; i < n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(g.comms[i]->cudaDev));
    EXPECT_OK(mcclMemFree(wDev[i]));
  }
  free(host);
  free(w);
  tearDown(&g);
}
static void fusedRmsNorm2(void) {
  fusedRmsNorm(2);
}
static void fusedRmsNorm3(void) {
  fusedRmsNorm(3);
}
static void fusedRmsNorm4(void) {
  fusedRmsNorm(4);
}

// Every rank creates a device communicator from the same refused requirements: each gets `want`, at once.
static void expectRefused(struct dtGroup* g, const mcclDevCommRequirements* reqs, mcclResult_t want, int line) {
  mcclDevCommRequirements r = *reqs;
  mcclResult_t res[MAXN];
  for (int i = 0; i < g->n; i++) g->r[i].hasDc = 0;
  struct dtRank saved[MAXN];
  memcpy(saved, g->r, sizeof(saved));
  dtParallel(g, createDevComm, &r, res);
  for (int i = 0; i < g->n; i++) {
    if (res[i] != want) mcclTestFailAt(__FILE__, line, "rank %d: expected %d, got %d", i, (int)want, (int)res[i]);
    if (g->r[i].hasDc) EXPECT_OK(mcclLabDevCommDestroy(g->comms[i], &g->r[i].dc));
  }
  memcpy(g->r, saved, sizeof(saved));
  for (int i = 0; i < g->n; i++) g->r[i].hasDc = 1;
}

// The driver opens fds and starts threads of its own the first time: count from after.
static void warmUp(void) {
  for (int d = 0; d < 2 && d < mcclTestDeviceCount(); d++) {
    cudaSetDevice(d);
    void* p = NULL;
    if (mcclMemAlloc(&p, 1) == mcclSuccess) mcclMemFree(p);
  }
  cudaSetDevice(0);
}

static void badInput(void) {
  if (mcclTestDeviceCount() < 2) SKIP("needs 2 devices");
  warmUp();
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads(), shm0 = mcclTestCountShm();
  long maps0 = mcclTestCountMaps("minccl-sim");
  struct dtGroup g;
  setUp(&g, 2);
  CHECK_STOPPED();
  mcclDevCommRequirements reqs = dtReqs();
  // More barriers than the resource window holds; negative counts.
  reqs.lsaBarrierCount = 1 << 26;
  expectRefused(&g, &reqs, mcclInvalidArgument, __LINE__);
  reqs = dtReqs();
  reqs.barrierCount = -1;
  expectRefused(&g, &reqs, mcclInvalidArgument, __LINE__);
  mcclDevResourceRequirements big;
  memset(&big, 0, sizeof(big));
  big.bufferSize = MCCL_DEV_RESOURCE_MAX_BYTES;  // with the barriers before it, one line too many
  reqs = dtReqs();
  reqs.resourceRequirementsList = &big;
  expectRefused(&g, &reqs, mcclInvalidArgument, __LINE__);
  // GIN, multimem, the LL all-to-all: refused, not served.
  reqs = dtReqs();
  reqs.ginForceEnable = true;
  expectRefused(&g, &reqs, mcclInvalidUsage, __LINE__);
  reqs = dtReqs();
  reqs.ginSignalCount = 1;
  expectRefused(&g, &reqs, mcclInvalidUsage, __LINE__);
  reqs = dtReqs();
  reqs.railGinBarrierCount = 1;
  expectRefused(&g, &reqs, mcclInvalidUsage, __LINE__);
  reqs = dtReqs();
  reqs.lsaMultimem = true;
  expectRefused(&g, &reqs, mcclInvalidUsage, __LINE__);
  mcclTeamRequirements tr;
  memset(&tr, 0, sizeof(tr));
  tr.team = mcclLabTeamLsa(g.comms[0]);
  tr.multimem = true;
  reqs = dtReqs();
  reqs.teamRequirementsList = &tr;
  expectRefused(&g, &reqs, mcclInvalidUsage, __LINE__);
  reqs = dtReqs();
  reqs.lsaLLA2ABlockCount = 1;
  expectRefused(&g, &reqs, mcclInvalidUsage, __LINE__);
  reqs = dtReqs();
  reqs.ginContextCount = 4;  // a hint, as in NCCL: accepted, and the communicator has no GIN context
  expectRefused(&g, &reqs, mcclSuccess, __LINE__);
  // Requirement helpers and NULLs.
  mcclLsaBarrierHandle bh;
  mcclDevResourceRequirements rr;
  mcclTeam none = {0, 0, 1};
  EXPECT_RES(mcclLsaBarrierCreateRequirement(none, 1, &bh, &rr), mcclInvalidArgument);
  EXPECT_RES(mcclLsaBarrierCreateRequirement(mcclLabTeamLsa(g.comms[0]), -1, &bh, &rr), mcclInvalidArgument);
  EXPECT_RES(mcclLsaBarrierCreateRequirement(mcclLabTeamLsa(g.comms[0]), 1, NULL, &rr), mcclInvalidArgument);
  EXPECT_OK(mcclLsaBarrierCreateRequirement(mcclLabTeamLsa(g.comms[0]), 5, &bh, &rr));
  EXPECT_EQ(rr.bufferSize, (size_t)5 * (3 + 2) * 4);
  EXPECT_EQ(bh.nBarriers, 5);
  EXPECT_RES(mcclLabDevCommCreate(NULL, &reqs, &g.r[0].dc), mcclInvalidArgument);
  EXPECT_RES(mcclLabDevCommDestroy(g.comms[0], NULL), mcclInvalidArgument);
  EXPECT_RES(mcclDevWindowCreate(g.comms[0], g.r[0].win, NULL), mcclInvalidArgument);
  // A window of another communicator; one that is not symmetric (a peer's buffer not mapped here).
  mcclWindow_t dw = NULL;
  EXPECT_RES(mcclDevWindowCreate(g.comms[0], g.r[1].win, &dw), mcclInvalidUsage);
  void* keep = g.r[0].win->peerPtrs[1];
  g.r[0].win->peerPtrs[1] = NULL;
  EXPECT_RES(mcclDevWindowCreate(g.comms[0], g.r[0].win, &dw), mcclInvalidUsage);
  g.r[0].win->peerPtrs[1] = keep;
  EXPECT_TRUE(dw == NULL);
  // Objects of another communicator, or destroyed already.
  EXPECT_RES(mcclLabDevCommDestroy(g.comms[0], &g.r[1].dc), mcclInvalidArgument);
  EXPECT_RES(mcclDevWindowDestroy(g.comms[0], g.r[1].devWin), mcclInvalidArgument);
  mcclDevComm copy = g.r[1].dc;
  EXPECT_OK(mcclLabDevCommDestroy(g.comms[1], &g.r[1].dc));
  g.r[1].hasDc = 0;
  EXPECT_RES(mcclLabDevCommDestroy(g.comms[1], &copy), mcclInvalidArgument);
  mcclWindow_t w1 = g.r[1].devWin;
  EXPECT_OK(mcclDevWindowDestroy(g.comms[1], w1));
  g.r[1].devWin = NULL;
  EXPECT_RES(mcclDevWindowDestroy(g.comms[1], w1), mcclInvalidArgument);
  // Launches: more blocks than barriers, an unserved type, an in-place one-shot.
  struct dtRank* r = &g.r[0];
  EXPECT_CUDA_OK(cudaSetDevice(g.comms[0]->cudaDev));
  EXPECT_RES(mcclDevAllReduceOneShot(&r->dc, r->devWin, 0, r->out, 8, mcclFloat32, DT_BARRIERS + 1, r->stream),
             mcclInvalidArgument);
  EXPECT_RES(mcclDevAllReduceOneShot(&r->dc, r->devWin, 0, r->out, 8, mcclInt32, 1, r->stream), mcclInvalidArgument);
  struct mcclWindow_vidmem h;
  EXPECT_OK(mcclDevWindowGetHost(g.comms[0], r->devWin, &h));
  EXPECT_RES(mcclDevAllReduceOneShot(&r->dc, r->devWin, 0, h.lsaFlatBase + 16, 8, mcclFloat32, 1, r->stream),
             mcclInvalidArgument);  // the input's alias in the flat range
  EXPECT_RES(mcclDevAllReduceOneShot(&r->dc, r->devWin, 64, (char*)r->buf + 80, 8, mcclFloat32, 1, r->stream),
             mcclInvalidArgument);  // the input at the address it was registered with
  EXPECT_RES(mcclDevAllGather(&r->dc, r->devWin, 0, r->buf, 8, 1, r->stream), mcclInvalidArgument);
  EXPECT_RES(mcclDevAllReduceOneShot(&r->dc, w1, 0, r->out, 8, mcclFloat32, 1, r->stream), mcclInvalidArgument);
  // An aborted communicator: refused at once, nothing allocated.
  long maps1 = mcclTestCountMaps("minccl-sim");
  int fds1 = mcclTestCountFds();
  EXPECT_OK(mcclLabCommAbort(g.comms[0]));
  mcclDevComm dead;
  reqs = dtReqs();
  EXPECT_RES(mcclLabDevCommCreate(g.comms[0], &reqs, &dead), mcclInvalidUsage);
  EXPECT_RES(mcclDevWindowCreate(g.comms[0], g.r[0].win, &dw), mcclInvalidUsage);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps1);
  EXPECT_EQ(mcclTestCountFds(), fds1);
  tearDown(&g);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(windowFlatRange), MCCL_TEST_CASE(apiObjects2), MCCL_TEST_CASE(apiObjects3),
               MCCL_TEST_CASE(apiObjects4), MCCL_TEST_CASE(windowTableGrows), MCCL_TEST_CASE(barrierLoop2),
               MCCL_TEST_CASE(barrierLoop3), MCCL_TEST_CASE(barrierLoop4), MCCL_TEST_CASE(oneShot2),
               MCCL_TEST_CASE(oneShot3), MCCL_TEST_CASE(oneShot4), MCCL_TEST_CASE(twoShot2), MCCL_TEST_CASE(twoShot3),
               MCCL_TEST_CASE(twoShot4), MCCL_TEST_CASE(allGather2), MCCL_TEST_CASE(allGather3),
               MCCL_TEST_CASE(allGather4), MCCL_TEST_CASE(fusedRmsNorm2), MCCL_TEST_CASE(fusedRmsNorm3),
               MCCL_TEST_CASE(fusedRmsNorm4), MCCL_TEST_CASE(badInput))
