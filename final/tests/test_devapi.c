// final/'s device API in one process (mcclCommInitAll on 2, 3 and 4 sim devices, one thread driving them
// through groups): every window of mcclCommWindowRegister is a device window (the handle points at NCCL's
// struct in device memory, every LSA peer found at its stride) that still serves the collectives; grouped
// mcclDevCommCreate with requirements that are gone by the group's end; the teams; the window table; lab 09's
// kernels on final's objects; and every bad input (finalized, revoked, aborted, destroyed twice, foreign,
// too many barriers, GIN, multimem), with nothing leaked, a communicator destroyed with its device objects
// still alive included.
#include <string.h>
#include "../../labs/09_device_api/tests/devapi_test_util.h"
#include "mccl_test.h"
#include "minccl_device.h"

#define MAXN 4
#define WIN_BYTES ((size_t)1 << 20)

struct fdRank {
  void* buf;  // a window's buffer (mcclMemAlloc)
  void* out;  // a plain output
  mcclWindow_t win;
  mcclDevComm dc;
  cudaStream_t stream;
};

// Record a grouped creation on every rank. The requirements live only in this function's frame, gone by the
// group's end (the caller's), which runs on the group's copy of them.
static void recordCreate(mcclComm_t* comms, struct fdRank* r, int n, int barriers, mcclDevResourceHandle* extra) {
  mcclDevResourceRequirements rr;
  memset(&rr, 0, sizeof(rr));
  rr.bufferSize = 300;
  rr.bufferAlign = 1024;
  rr.outBufferHandle = extra;
  mcclDevCommRequirements reqs = MCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = barriers;
  reqs.resourceRequirementsList = extra ? &rr : NULL;
  for (int i = 0; i < n; i++) EXPECT_OK(mcclDevCommCreate(comms[i], &reqs, &r[i].dc));
}

static void createGrouped(mcclComm_t* comms, struct fdRank* r, int n, int barriers, mcclDevResourceHandle* extra) {
  EXPECT_OK(mcclGroupStart());
  recordCreate(comms, r, n, barriers, extra);
  EXPECT_OK(mcclGroupEnd());
}

static void setUp(mcclComm_t* comms, struct fdRank* r, int n) {
  memset(r, 0, sizeof(*r) * (size_t)n);
  EXPECT_OK(mcclCommInitAll(comms, n, NULL));
  for (int i = 0; i < n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_OK(mcclMemAlloc(&r[i].buf, WIN_BYTES));
    EXPECT_OK(mcclMemAlloc(&r[i].out, WIN_BYTES));
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&r[i].stream, cudaStreamNonBlocking));
  }
  EXPECT_OK(mcclGroupStart());
  for (int i = 0; i < n; i++) EXPECT_OK(mcclCommWindowRegister(comms[i], r[i].buf, WIN_BYTES, &r[i].win, 0));
  EXPECT_OK(mcclGroupEnd());
}

static void tearDown(mcclComm_t* comms, struct fdRank* r, int n) {
  for (int i = 0; i < n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(cudaStreamDestroy(r[i].stream));
    EXPECT_OK(mcclCommWindowDeregister(comms[i], r[i].win));
    EXPECT_OK(mcclCommDestroy(comms[i]));
    EXPECT_OK(mcclMemFree(r[i].buf));
    EXPECT_OK(mcclMemFree(r[i].out));
  }
}

// The objects: a window's handle is a struct mcclWindow_vidmem in device memory whose flat range holds every
// rank's buffer at its stride; the device communicator and the teams; the window table; lab 09's one-shot and
// two-shot kernels on final's window and device communicator; and an allreduce of the host API on the same
// window's buffer, which stays a window of lab 07 too.
static void objects(int n) {
  if (mcclTestDeviceCount() < n) SKIP("needs %d devices", n);
  mcclComm_t comms[MAXN];
  struct fdRank r[MAXN];
  setUp(comms, r, n);
  CHECK_STOPPED();
  mcclDevResourceHandle extra = 0;
  createGrouped(comms, r, n, 3, &extra);
  EXPECT_EQ(mcclGetResourceBufferOffset(extra) % 1024, 0);
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    uint64_t v = 0xd0e50000u + (uint64_t)i;
    EXPECT_CUDA_OK(mcclTestCopyToDevice((char*)r[i].buf + 512, &v, 8));
  }
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    struct mcclWindow_vidmem w;
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(cudaMemcpy(&w, r[i].win, sizeof(w), cudaMemcpyDeviceToHost));
    EXPECT_EQ(w.lsaRank, i);
    EXPECT_EQ(w.worldRank, i);
    EXPECT_TRUE(w.stride4G >= 1);
    EXPECT_EQ(w.mcOffset4K, 0);
    EXPECT_TRUE(w.ginWins[0] == NULL);
    for (int p = 0; p < n; p++) {
      uint64_t got = 0;
      EXPECT_CUDA_OK(cudaMemcpy(&got, w.lsaFlatBase + ((size_t)p * w.stride4G << 32) + 512, 8, cudaMemcpyDeviceToHost));
      EXPECT_EQ(got, 0xd0e50000u + (uint64_t)p);
    }
    const mcclDevComm* dc = &r[i].dc;
    EXPECT_EQ(dc->rank, i);
    EXPECT_EQ(dc->nRanks, n);
    EXPECT_EQ(dc->lsaRank, i);
    EXPECT_EQ(dc->lsaSize, n);
    EXPECT_EQ(dc->lsaBarrier.nBarriers, 3);
    EXPECT_EQ(dc->ginContextCount, 0);
    EXPECT_TRUE(dc->lsaMultimem.mcBasePtr == NULL);
    mcclTeam world = mcclTeamWorld(comms[i]), lsa = mcclTeamLsa(comms[i]), rail = mcclTeamRail(comms[i]);
    EXPECT_EQ(world.nRanks, n);
    EXPECT_EQ(world.rank, i);
    EXPECT_EQ(world.stride, 1);
    EXPECT_EQ(lsa.nRanks, n);
    EXPECT_EQ(lsa.rank, i);
    EXPECT_EQ(rail.nRanks, 1);
    EXPECT_EQ(rail.stride, n);
    for (int p = 0; p < n; p++) {
      EXPECT_EQ(mcclTeamRankToWorld(comms[i], lsa, p), p);
      EXPECT_EQ(mcclTeamRankToLsa(comms[i], world, p), p);
    }
    struct mcclDevCommWindowTable t;
    EXPECT_CUDA_OK(cudaMemcpy(&t, dc->windowTable, sizeof(t), cudaMemcpyDeviceToHost));
    int found = 0;
    for (int e = 0; e < MCCL_DEV_WINDOW_TABLE_ENTRIES; e++)
      if (t.entries[e].window == r[i].win) {
        found++;
        EXPECT_EQ(t.entries[e].base, (uintptr_t)r[i].buf);
        EXPECT_EQ(t.entries[e].size, (uintptr_t)WIN_BYTES);
      }
    EXPECT_EQ(found, 1);
  }
  // Lab 09's kernels, on final's objects: one-shot into a plain buffer, then two-shot in place.
  const size_t count = 1000 + (size_t)n;
  void* host = malloc(count * 4);
  for (int round = 0; round < 2 && !mcclTestStopped(); round++) {
    for (int i = 0; i < n; i++) {
      dtFillAr(host, mcclFloat32, count, i, (uint64_t)round);
      EXPECT_CUDA_OK(cudaSetDevice(i));
      EXPECT_CUDA_OK(mcclTestCopyToDevice(r[i].buf, host, count * 4));
    }
    for (int i = 0; i < n; i++) {
      EXPECT_CUDA_OK(cudaSetDevice(i));
      if (round == 0)
        EXPECT_OK(mcclDevAllReduceOneShot(&r[i].dc, r[i].win, 0, r[i].out, count, mcclFloat32, 3, r[i].stream));
      else
        EXPECT_OK(mcclDevAllReduceTwoShot(&r[i].dc, r[i].win, 0, r[i].win, 0, count, mcclFloat32, 2, r[i].stream));
    }
    for (int i = 0; i < n && !mcclTestStopped(); i++) {
      EXPECT_CUDA_OK(cudaSetDevice(i));
      EXPECT_CUDA_OK(cudaStreamSynchronize(r[i].stream));
      EXPECT_CUDA_OK(cudaMemcpy(host, round == 0 ? r[i].out : r[i].buf, count * 4, cudaMemcpyDeviceToHost));
      EXPECT_EQ(dtCheckAr(host, mcclFloat32, count, n, (uint64_t)round), -1);
    }
  }
  // The host API on the window's buffer (lab 07's window is still registered underneath).
  for (int i = 0; i < n; i++) {
    dtFillAr(host, mcclFloat32, count, i, 7);
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(mcclTestCopyToDevice(r[i].buf, host, count * 4));
  }
  EXPECT_OK(mcclGroupStart());
  for (int i = 0; i < n; i++)
    EXPECT_OK(mcclAllReduce(r[i].buf, r[i].buf, count, mcclFloat32, mcclSum, comms[i], r[i].stream));
  EXPECT_OK(mcclGroupEnd());
  for (int i = 0; i < n && !mcclTestStopped(); i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(cudaStreamSynchronize(r[i].stream));
    EXPECT_CUDA_OK(cudaMemcpy(host, r[i].buf, count * 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(dtCheckAr(host, mcclFloat32, count, n, 7), -1);
  }
  free(host);
  for (int i = 0; i < n; i++) EXPECT_OK(mcclDevCommDestroy(comms[i], &r[i].dc));
  tearDown(comms, r, n);
}
static void objects2(void) {
  objects(2);
}
static void objects3(void) {
  objects(3);
}
static void objects4(void) {
  objects(4);
}

// Requirements every rank refuses alike (each fails where it is found, none waits for the peers): case k.
static const char* refusal(int k, mcclDevCommRequirements* q, mcclTeamRequirements* team, mcclResult_t* want) {
  *q = (mcclDevCommRequirements)MCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  memset(team, 0, sizeof(*team));
  *want = mcclInvalidUsage;
  switch (k) {
    case 0:
      q->lsaBarrierCount = 1 << 28;  // more barriers than the resource window holds
      *want = mcclInvalidArgument;
      return "too many barriers";
    case 1:
      q->barrierCount = -1;
      *want = mcclInvalidArgument;
      return "a negative barrier count";
    case 2:
      q->ginSignalCount = 1;
      return "GIN signals";
    case 3:
      q->ginForceEnable = true;
      return "GIN forced";
    case 4:
      q->railGinBarrierCount = 2;
      return "GIN barriers";
    case 5:
      q->lsaMultimem = true;
      return "multimem on the LSA team";
    case 6:
      team->multimem = true;
      q->teamRequirementsList = team;
      return "multimem on a team";
    case 7:
      q->lsaLLA2ABlockCount = 1;
      return "the LL all-to-all";
    default:
      return NULL;
  }
}

// Every refusal, with nothing allocated; objects destroyed twice or on the wrong communicator; a communicator
// finalized, revoked or aborted; and communicators destroyed with a device communicator and windows still
// alive, which frees them (nothing leaked).
static void badInput(void) {
  const int n = 2;
  if (mcclTestDeviceCount() < n) SKIP("needs %d devices", n);
  const int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  const long maps0 = mcclTestCountMaps("minccl-sim");
  mcclComm_t comms[MAXN];
  struct fdRank r[MAXN];
  setUp(comms, r, n);
  CHECK_STOPPED();
  const long maps1 = mcclTestCountMaps("minccl-sim");
  mcclDevCommRequirements q;
  mcclTeamRequirements team;
  mcclResult_t want;
  const char* what;
  for (int k = 0; (what = refusal(k, &q, &team, &want)) != NULL && !mcclTestStopped(); k++) {
    memset(&r[0].dc, 0xab, sizeof(r[0].dc));
    EXPECT_OK(mcclGroupStart());
    for (int i = 0; i < n; i++) EXPECT_OK(mcclDevCommCreate(comms[i], &q, &r[i].dc));
    mcclResult_t got = mcclGroupEnd();
    if (got != want) mcclTestFailAt(__FILE__, __LINE__, "%s: expected %d, got %d", what, (int)want, (int)got);
    EXPECT_EQ(((unsigned char*)&r[0].dc)[0], 0xab);  // written only on success
    EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps1);
  }
  q = (mcclDevCommRequirements)MCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  q.lsaBarrierCount = 1;
  // A NULL argument on one rank, in a group: that rank takes part as a refusal, so both fail at the group's end.
  memset(&r[1].dc, 0xab, sizeof(r[1].dc));
  EXPECT_OK(mcclGroupStart());
  EXPECT_RES(mcclDevCommCreate(comms[0], NULL, &r[0].dc), mcclInvalidArgument);
  EXPECT_OK(mcclDevCommCreate(comms[1], &q, &r[1].dc));
  EXPECT_RES(mcclGroupEnd(), mcclInvalidArgument);
  EXPECT_EQ(((unsigned char*)&r[1].dc)[0], 0xab);
  EXPECT_OK(mcclGroupStart());
  EXPECT_OK(mcclDevCommCreate(comms[0], &q, &r[0].dc));
  EXPECT_RES(mcclDevCommCreate(comms[1], &q, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclGroupEnd(), mcclInvalidArgument);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps1);
  EXPECT_RES(mcclDevCommCreate(NULL, &q, &r[0].dc), mcclInvalidArgument);
  EXPECT_RES(mcclDevCommDestroy(NULL, &r[0].dc), mcclInvalidArgument);
  mcclTeam none = mcclTeamWorld(NULL);
  EXPECT_EQ(none.nRanks, 0);
  none = mcclTeamLsa(NULL);
  EXPECT_EQ(none.nRanks, 0);
  EXPECT_EQ(mcclTeamRankToWorld(NULL, none, 0), -1);
  // Destroyed twice, or on the wrong communicator; a window of another communicator, or none at all.
  createGrouped(comms, r, n, 1, NULL);
  EXPECT_RES(mcclDevCommDestroy(comms[0], &r[1].dc), mcclInvalidArgument);
  EXPECT_RES(mcclDevCommDestroy(comms[0], NULL), mcclInvalidArgument);
  EXPECT_OK(mcclDevCommDestroy(comms[1], &r[1].dc));
  EXPECT_RES(mcclDevCommDestroy(comms[1], &r[1].dc), mcclInvalidArgument);
  EXPECT_RES(mcclCommWindowDeregister(comms[0], r[1].win), mcclInvalidArgument);
  char bogus[64];
  EXPECT_RES(mcclCommWindowDeregister(comms[0], (mcclWindow_t)(void*)bogus), mcclInvalidArgument);
  // Finalized, revoked: refused at once, nothing allocated. Then both are destroyed with rank 0's device
  // communicator and both windows alive.
  EXPECT_OK(mcclCommFinalize(comms[0]));
  EXPECT_OK(mcclCommRevoke(comms[1]));
  const long maps2 = mcclTestCountMaps("minccl-sim");
  const int fds2 = mcclTestCountFds();
  EXPECT_RES(mcclDevCommCreate(comms[0], &q, &r[0].dc), mcclInvalidUsage);
  EXPECT_RES(mcclDevCommCreate(comms[1], &q, &r[1].dc), mcclInvalidUsage);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps2);
  EXPECT_EQ(mcclTestCountFds(), fds2);
  for (int i = 0; i < n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_CUDA_OK(cudaStreamDestroy(r[i].stream));
    EXPECT_OK(mcclCommDestroy(comms[i]));
  }
  // Aborted: the handle is dead.
  EXPECT_OK(mcclCommInitAll(comms, n, NULL));
  EXPECT_OK(mcclCommAbort(comms[0]));
  EXPECT_RES(mcclDevCommCreate(comms[0], &q, &r[0].dc), mcclInvalidArgument);
  EXPECT_EQ(mcclTeamWorld(comms[0]).nRanks, 0);
  EXPECT_OK(mcclCommDestroy(comms[1]));
  for (int i = 0; i < n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(i));
    EXPECT_OK(mcclMemFree(r[i].buf));
    EXPECT_OK(mcclMemFree(r[i].out));
  }
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(objects2), MCCL_TEST_CASE(objects3), MCCL_TEST_CASE(objects4), MCCL_TEST_CASE(badInput))
