// Lab 04 across two processes (fork): integrity on both buffer paths up to 256 MiB, both ways at
// once, counters that wrap, and a peer killed with SIGKILL mid-transfer. The parent never touches
// CUDA: it forks two children, reads their reports from a pipe and checks /dev/shm afterwards.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include "mccl_alloc.h"
#include "mccl_host_alloc.h"
#include "mccl_shm_pair.h"
#include "shm_test_util.h"
#include "mccl_fork.h"
#include "mccl_utils.h"

#define MAX_MSGS 8

struct pairCfg {
  const char* cumemHost;  // MCCL_CUMEM_HOST_ENABLE for both children
  int bothWays;
  int nmsg;
  size_t sizes[MAX_MSGS];
  uint64_t initialStep;
  int stallRank;          // -1: none; else this rank stops after stallSteps steps and waits to be killed
  uint64_t stallSteps;
  const char* timeoutMs;  // MCCL_SHM_TIMEOUT
};

enum { REP_PATHS = 1, REP_STALLED = 2, REP_FINAL = 3 };
struct report {
  int type, rank, status;  // status: 0 pass, 1 fail, 77 skip
  int res;                 // the result of the transfer
  double seconds;          // time from the last progress to the error, for the survivor
  int kind[2];
  char paths[2][64];
  char msg[240];
};

static int repFd = -1;
static void sendReport(const struct report* r) {
  ssize_t w = write(repFd, r, sizeof(*r));  // < PIPE_BUF: atomic
  (void)w;
}

#define CHILD_FAIL(...)                              \
  do {                                               \
    snprintf(rep.msg, sizeof(rep.msg), __VA_ARGS__); \
    rep.status = 1;                                  \
    goto out;                                        \
  } while (0)

static int childMain(const struct pairCfg* cfg, int rank, uint64_t hash, uint64_t seed) {
  struct report rep;
  memset(&rep, 0, sizeof(rep));
  rep.type = REP_FINAL;
  rep.rank = rank;
  rep.res = mcclSuccess;
  struct mcclShmPairEnd e;
  int connected = 0;
  void *dsend = NULL, *drecv = NULL;
  unsigned char* host = NULL;
  setParam("MCCL_CUMEM_HOST_ENABLE", cfg->cumemHost);
  // The staller waits for its first steps with a long timeout: a slow start of its peer (a loaded
  // machine under TSan once took over 1 s) must not end it before it stalls; the survivor's timeout
  // is the one under test.
  setParam("MCCL_SHM_TIMEOUT", rank == cfg->stallRank ? "60000" : cfg->timeoutMs);
  setParam("MCCL_IPC_TIMEOUT", "20000");
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) CHILD_FAIL("no device");
  if (cudaSetDevice(rank % ndev) != cudaSuccess) CHILD_FAIL("cudaSetDevice(%d)", rank % ndev);
  if (cfg->cumemHost && strcmp(cfg->cumemHost, "1") == 0 && !(mcclCuMemEnable() && mcclCuMemHostEnable())) {
    rep.status = 77;
    snprintf(rep.msg, sizeof(rep.msg), "cuMem host-NUMA memory is not available");
    goto out;
  }
  int doSend = rank == 0 || cfg->bothWays, doRecv = rank == 1 || cfg->bothWays;
  mcclResult_t r = mcclShmPairConnect(&e, rank, hash, rank % ndev, doSend, doRecv, cfg->initialStep, NULL);
  if (r != mcclSuccess) CHILD_FAIL("mcclShmPairConnect: %s", mcclGetErrorString(r));
  connected = 1;
  {
    struct report p = rep;
    p.type = REP_PATHS;
    for (int s = 0; s < 2; s++) {
      p.kind[s] = e.myDesc[s].kind;
      descPath(&e.myDesc[s], p.paths[s], sizeof(p.paths[s]));
    }
    sendReport(&p);
    memcpy(rep.kind, p.kind, sizeof(rep.kind));
    memcpy(rep.paths, p.paths, sizeof(rep.paths));
  }
  size_t maxN = 1;
  for (int i = 0; i < cfg->nmsg; i++)
    if (cfg->sizes[i] > maxN) maxN = cfg->sizes[i];
  if (cudaMalloc(&dsend, maxN) != cudaSuccess || cudaMalloc(&drecv, maxN) != cudaSuccess) CHILD_FAIL("cudaMalloc");
  host = (unsigned char*)malloc(maxN);
  if (host == NULL) CHILD_FAIL("malloc %zu", maxN);
  for (int i = 0; i < cfg->nmsg; i++) {
    size_t n = cfg->sizes[i];
    uint64_t mySeed = seed + 1000 * i + rank, peerSeed = seed + 1000 * i + (1 - rank);
    struct mcclProxyOp ops[2];
    struct mcclProxyArgs args[2];
    int nops = 0;
    if (doSend) {
      fillPattern(host, n, mySeed);
      if (n && mcclTestCopyToDevice(dsend, host, n) != cudaSuccess) CHILD_FAIL("fill");
      if (mcclProxyOpInit(&ops[nops++], &e.conns[1], dsend, n, NULL) != mcclSuccess) CHILD_FAIL("op init");
    }
    if (doRecv) {
      if (n && mcclTestMemset(drecv, 0xee, n) != cudaSuccess) CHILD_FAIL("memset");
      if (cudaDeviceSynchronize() != cudaSuccess) CHILD_FAIL("sync");  // the transport's stream is non-blocking
      if (mcclProxyOpInit(&ops[nops++], &e.conns[0], drecv, n, NULL) != mcclSuccess) CHILD_FAIL("op init");
    }
    if (rank == cfg->stallRank) {
      // Move until stallSteps steps are done, then stop dead and wait for the parent's SIGKILL.
      if (mcclProxyOpToArgs(&ops[0], &args[0]) != mcclSuccess) CHILD_FAIL("op to args");
      while (args[0].subs[0].done < cfg->stallSteps) {
        if (args[0].progress(NULL, &args[0]) != mcclSuccess || args[0].state == mcclProxyOpNone) CHILD_FAIL("stall");
      }
      struct report s = rep;
      s.type = REP_STALLED;
      sendReport(&s);
      for (;;) pause();
    }
    r = mcclProxyOpsWait(ops, nops, args);
    if (r != mcclSuccess) {
      rep.res = r;
      rep.seconds = mcclClockSec() - (double)args[0].subs[0].lastProgressNs * 1e-9;
      for (int k = 1; k < nops; k++) {
        double s = mcclClockSec() - (double)args[k].subs[0].lastProgressNs * 1e-9;
        if (s < rep.seconds) rep.seconds = s;
      }
      snprintf(rep.msg, sizeof(rep.msg), "message %d (%zu bytes): %s", i, n, mcclGetErrorString(r));
      goto out;  // the parent decides whether this error was the expected one
    }
    if (doRecv) {
      memset(host, 0, n);
      if (n && cudaMemcpy(host, drecv, n, cudaMemcpyDeviceToHost) != cudaSuccess) CHILD_FAIL("readback");
      size_t bad = checkPattern(host, n, peerSeed);
      if (bad != (size_t)-1) CHILD_FAIL("message %d of %zu bytes differs at byte %zu", i, n, bad);
    }
  }
out:
  if (connected) {
    mcclResult_t c = mcclShmPairClose(&e);
    if (c != mcclSuccess && rep.status == 0) {
      rep.status = 1;
      snprintf(rep.msg, sizeof(rep.msg), "close: %s", mcclGetErrorString(c));
    }
  }
  if (dsend) cudaFree(dsend);
  if (drecv) cudaFree(drecv);
  free(host);
  sendReport(&rep);
  return 0;
}

struct pairResult {
  struct report final[2];
  int gotFinal[2];
  char paths[2][2][64];
  int exitStatus[2];
  int killed;
};

static void runPair(const struct pairCfg* cfg, struct pairResult* out) {
  memset(out, 0, sizeof(*out));
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  uint64_t hash = mcclTestRand(), seed = mcclTestRand();
  pid_t pids[2];
  fflush(NULL);
  for (int rank = 0; rank < 2; rank++) {
    pids[rank] = mcclForkChild();  // dies with this process
    if (pids[rank] == 0) {
      close(fds[0]);
      repFd = fds[1];
      _exit(childMain(cfg, rank, hash, seed));
    }
  }
  close(fds[1]);
  double deadline = mcclClockSec() + 120;
  struct report r;
  for (;;) {
    struct pollfd p = {fds[0], POLLIN, 0};
    int left = (int)((deadline - mcclClockSec()) * 1000);
    if (left <= 0 || poll(&p, 1, left) <= 0) break;
    ssize_t n = read(fds[0], &r, sizeof(r));
    if (n != (ssize_t)sizeof(r)) break;
    if (r.rank < 0 || r.rank > 1) continue;
    if (r.type == REP_PATHS) memcpy(out->paths[r.rank], r.paths, sizeof(r.paths));
    if (r.type == REP_STALLED) {
      kill(pids[r.rank], SIGKILL);
      out->killed = 1;
    }
    if (r.type == REP_FINAL) {
      out->final[r.rank] = r;
      out->gotFinal[r.rank] = 1;
    }
  }
  close(fds[0]);
  for (int rank = 0; rank < 2; rank++) {
    kill(pids[rank], SIGKILL);  // no-op for a child that has exited; ends a hung one
    int st = 0;
    waitpid(pids[rank], &st, 0);
    out->exitStatus[rank] = st;
  }
}

// Both children passed or skipped the same way; /dev/shm holds none of the files they made.
static void expectClean(const struct pairResult* pr) {
  for (int rank = 0; rank < 2; rank++)
    for (int s = 0; s < 2; s++)
      if (pr->paths[rank][s][0] && pathExists(pr->paths[rank][s]))
        mcclTestFailAt(__FILE__, __LINE__, "%s (made by rank %d) is still in /dev/shm", pr->paths[rank][s], rank);
}

static void expectPass(const struct pairResult* pr) {
  for (int rank = 0; rank < 2; rank++) {
    if (!pr->gotFinal[rank]) {
      mcclTestFailAt(__FILE__, __LINE__, "rank %d sent no final report (exit status 0x%x)", rank, pr->exitStatus[rank]);
      return;
    }
    if (pr->final[rank].status == 77) SKIP("%s", pr->final[rank].msg);
  }
  for (int rank = 0; rank < 2; rank++) {
    const struct report* f = &pr->final[rank];
    if (f->status != 0 || f->res != mcclSuccess) {
      mcclTestFailAt(__FILE__, __LINE__, "rank %d: %s (result %d)", rank, f->msg, f->res);
      return;
    }
  }
  expectClean(pr);
}

static size_t randUpTo(size_t max) { return 1 + (size_t)(mcclTestRand() % max); }

static void pairDevShm(void) {
  struct pairCfg cfg = {"0", 0, 6, {0, 1, (512 << 10) + 1, randUpTo(8 << 20), randUpTo(64 << 20), 256 << 20},
                        UINT64_MAX - 100, -1, 0, NULL};
  struct pairResult pr;
  runPair(&cfg, &pr);
  CHECK_STOPPED();
  expectPass(&pr);
  CHECK_STOPPED();
  EXPECT_EQ(pr.final[0].kind[1], MCCL_SHM_IPC_LEGACY);  // the /dev/shm path was the one tested
  EXPECT_EQ(pr.final[1].kind[0], MCCL_SHM_IPC_LEGACY);
}

static void pairCuMem(void) {
  struct pairCfg cfg = {"1", 0, 4, {0, 3, randUpTo(16 << 20), 256 << 20}, 0, -1, 0, NULL};
  struct pairResult pr;
  runPair(&cfg, &pr);
  CHECK_STOPPED();
  expectPass(&pr);
  CHECK_STOPPED();
  EXPECT_EQ(pr.final[0].kind[1], MCCL_SHM_IPC_CUMEM);
  EXPECT_EQ(pr.final[1].kind[0], MCCL_SHM_IPC_CUMEM);
  EXPECT_EQ(pr.paths[0][1][0], '\0');  // nothing was ever in /dev/shm
}

static void pairBothWays(void) {
  struct pairCfg cfg = {NULL, 1, 3, {randUpTo(32 << 20), (1 << 20) + 7, 0}, UINT64_MAX - 3, -1, 0, NULL};
  struct pairResult pr;
  runPair(&cfg, &pr);
  CHECK_STOPPED();
  expectPass(&pr);
}

// The staller is killed mid-message; the survivor must fail with mcclTimeout soon after the
// MCCL_SHM_TIMEOUT (1 s) and release everything; nothing of either may stay in /dev/shm.
static void peerKilled(int stallRank, const char* cumem) {
  struct pairCfg cfg = {cumem, 0, 1, {64 << 20}, 0, stallRank, 3, "1000"};
  struct pairResult pr;
  runPair(&cfg, &pr);
  CHECK_STOPPED();
  int survivor = 1 - stallRank;
  EXPECT_EQ(pr.killed, 1);
  EXPECT_TRUE(WIFSIGNALED(pr.exitStatus[stallRank]) && WTERMSIG(pr.exitStatus[stallRank]) == SIGKILL);
  EXPECT_EQ(pr.gotFinal[survivor], 1);
  if (pr.final[survivor].status == 77) SKIP("%s", pr.final[survivor].msg);
  EXPECT_EQ(pr.final[survivor].status, 0);  // it cleaned up without other errors
  EXPECT_TRUE(pr.final[survivor].res == mcclTimeout || pr.final[survivor].res == mcclRemoteError);
  EXPECT_GE(pr.final[survivor].seconds, 0.99);
  EXPECT_LT(pr.final[survivor].seconds, 5.0);
  expectClean(&pr);
}

static void senderKilledDevShm(void) { peerKilled(0, "0"); }
static void receiverKilledDevShm(void) { peerKilled(1, "0"); }
static void senderKilledCuMem(void) { peerKilled(0, "1"); }

MCCL_TEST_MAIN(MCCL_TEST_CASE(pairDevShm), MCCL_TEST_CASE(pairCuMem), MCCL_TEST_CASE(pairBothWays),
               MCCL_TEST_CASE(senderKilledDevShm), MCCL_TEST_CASE(receiverKilledDevShm),
               MCCL_TEST_CASE(senderKilledCuMem))
