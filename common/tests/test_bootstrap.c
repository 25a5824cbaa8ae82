// Tests of the bootstrap in one process: one thread per rank sharing one unique id (the
// single-process, several-devices model), plus fork() for a peer that dies. Threads that pose as
// different hosts (mcclSetThreadHostId) talk over TCP; the others over Unix sockets.
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_bootstrap.h"
#include "mccl_param.h"
#include "mccl_test.h"
#include "mccl_fork.h"
#include "../src/bootstrap_wire.h"  // the id's TCP address, to check which interface it names
#include "mccl_socket.h"
#include "mccl_utils.h"

static void setEnv(const char* name, const char* value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  mcclParamResetAll();
}

static void setTimeoutMs(const char* ms) {
  setEnv("MCCL_BOOTSTRAP_TIMEOUT", ms);
}

#define MAXR 8
// Host identities ranks pose as (mcclSetThreadHostId).
static const char* poseHosts[MAXR] = {"pose-h0", "pose-h1", "pose-h2", "pose-h3",
                                      "pose-h4", "pose-h5", "pose-h6", "pose-h7"};

typedef struct {
  mcclUniqueId id;
  const char* hostId;  // posed host of this rank's thread (mcclSetThreadHostId), NULL: the real one
  int rank, nranks;
  volatile uint32_t* abortFlag;
  mcclResult_t initRes;
  long ms;
  int (*body)(mcclBootstrap* bs, int rank, int nranks, char* err, size_t errLen);
  int bodyOk;
  char err[256];
} rankArgs;

static void* rankMain(void* p) {
  rankArgs* a = p;
  char addr[MCCL_SOCKET_NAME_LEN];
  snprintf(addr, sizeof(addr), "proxy-of-rank-%d", a->rank);
  if (a->hostId) mcclSetThreadHostId(a->hostId);
  long t0 = mcclClockMs();
  mcclBootstrap* bs = NULL;
  a->initRes = mcclBootstrapInit(&a->id, a->rank, a->nranks, a->rank, addr, a->abortFlag, &bs);
  a->ms = mcclClockMs() - t0;
  a->bodyOk = 1;
  if (a->initRes == mcclSuccess) {
    if (a->body) a->bodyOk = a->body(bs, a->rank, a->nranks, a->err, sizeof(a->err));
    mcclBootstrapClose(bs);
  }
  return NULL;
}

// Runs n ranks as threads; ranks[i] is thread i's claimed rank, nr[i] its rank count.
static void runRanks(rankArgs* args, int n) {
  pthread_t th[MAXR];
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, rankMain, &args[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

#define BODY_CHECK(cond)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      snprintf(err, errLen, "rank %d: %s:%d: %s", rank, __FILE__, __LINE__, #cond); \
      return 0;                                                            \
    }                                                                      \
  } while (0)

// An allgather of 1 MiB per rank (larger than a socket buffer, so the ring must not deadlock), each
// rank's bytes a pattern of (mul, add): whether it succeeded and every sampled byte arrived.
static int bigAllGatherOk(mcclBootstrap* bs, int rank, int nranks, unsigned mul, unsigned add) {
  const size_t sz = 1 << 20;
  unsigned char* all = malloc(sz * (size_t)nranks);
  if (all == NULL) return 0;
  for (size_t i = 0; i < sz; i++) all[(size_t)rank * sz + i] = (unsigned char)(i * mul + (size_t)rank * add);
  int ok = mcclBootstrapAllGather(bs, all, sz) == mcclSuccess;
  for (int r = 0; ok && r < nranks; r++)
    for (size_t i = 0; i < sz; i += 4093) ok &= all[(size_t)r * sz + i] == (unsigned char)(i * mul + (size_t)r * add);
  free(all);
  return ok;
}

static int exchangeBody(mcclBootstrap* bs, int rank, int nranks, char* err, size_t errLen) {
  BODY_CHECK(mcclBootstrapRank(bs) == rank && mcclBootstrapNRanks(bs) == nranks);
  for (int p = 0; p < nranks; p++) {
    mcclPeerInfo info;
    BODY_CHECK(mcclBootstrapGetPeerInfo(bs, p, &info) == mcclSuccess);
    char want[MCCL_SOCKET_NAME_LEN];
    snprintf(want, sizeof(want), "proxy-of-rank-%d", p);
    BODY_CHECK(info.rank == p && info.cudaDev == p && info.pid == (int)getpid());
    BODY_CHECK(info.hostHash == mcclGetHostHash() && strcmp(info.proxyAddr, want) == 0);
    BODY_CHECK(info.pidNsHash != 0 && info.pidNsHash == mcclGetPidNsHash());
  }
  // Allgather of a payload larger than a socket buffer: the ring must not deadlock.
  BODY_CHECK(bigAllGatherOk(bs, rank, nranks, 7, 13));
  BODY_CHECK(mcclBootstrapBarrier(bs) == mcclSuccess);
  // Tagged messages out of order: tag 2 is sent first, received second (the unexpected list).
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  int v1 = 100 + rank, v2 = 200 + rank, got1 = -1, got2 = -1;
  BODY_CHECK(mcclBootstrapSend(bs, next, 2, &v2, sizeof(v2)) == mcclSuccess);
  BODY_CHECK(mcclBootstrapSend(bs, next, 1, &v1, sizeof(v1)) == mcclSuccess);
  BODY_CHECK(mcclBootstrapRecv(bs, prev, 1, &got1, sizeof(got1)) == mcclSuccess);
  BODY_CHECK(mcclBootstrapRecv(bs, prev, 2, &got2, sizeof(got2)) == mcclSuccess);
  BODY_CHECK(got1 == 100 + prev && got2 == 200 + prev);
  // To self, and a size mismatch is refused without writing the output.
  int self = 7, back = -1;
  BODY_CHECK(mcclBootstrapSend(bs, rank, 9, &self, sizeof(self)) == mcclSuccess);
  BODY_CHECK(mcclBootstrapRecv(bs, rank, 9, &back, sizeof(back)) == mcclSuccess && back == 7);
  char small = 0;
  BODY_CHECK(mcclBootstrapSend(bs, next, 3, &v1, sizeof(v1)) == mcclSuccess);
  BODY_CHECK(mcclBootstrapRecv(bs, prev, 3, &small, 1) == mcclInvalidUsage && small == 0);
  BODY_CHECK(mcclBootstrapBarrier(bs) == mcclSuccess);
  return 1;
}

static void threadsOneId(void) {
  setTimeoutMs("10000");
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  for (int n = 1; n <= 4; n++) {
    rankArgs a[MAXR];
    memset(a, 0, sizeof(a));
    mcclUniqueId id;
    EXPECT_OK(mcclGetUniqueId(&id));
    for (int i = 0; i < n; i++) { a[i].id = id; a[i].rank = i; a[i].nranks = n; a[i].body = exchangeBody; }
    runRanks(a, n);
    for (int i = 0; i < n; i++) {
      EXPECT_RES(a[i].initRes, mcclSuccess);
      if (!a[i].bodyOk) {
        mcclTestFailAt(__FILE__, __LINE__, "n=%d: %s", n, a[i].err);
        return;
      }
    }
  }
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  setTimeoutMs(NULL);
}

static void uniqueIdsDiffer(void) {
  mcclUniqueId a, b;
  EXPECT_OK(mcclGetUniqueId(&a));
  EXPECT_OK(mcclGetUniqueId(&b));
  EXPECT_TRUE(memcmp(&a, &b, sizeof(a)) != 0);
  EXPECT_EQ(sizeof(mcclUniqueId), 128);
  EXPECT_RES(mcclGetUniqueId(NULL), mcclInvalidArgument);
}

static void badArguments(void) {
  int fds0 = mcclTestCountFds();
  mcclUniqueId id, junk;
  EXPECT_OK(mcclGetUniqueId(&id));
  memset(&junk, 0x5a, sizeof(junk));
  mcclBootstrap* bs = (mcclBootstrap*)0x1;
  EXPECT_RES(mcclBootstrapInit(NULL, 0, 1, 0, NULL, NULL, &bs), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapInit(&id, 2, 2, 0, NULL, NULL, &bs), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapInit(&id, -1, 2, 0, NULL, NULL, &bs), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapInit(&id, 0, 0, 0, NULL, NULL, &bs), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapInit(&junk, 0, 1, 0, NULL, NULL, &bs), mcclInvalidArgument);
  char longName[100];
  memset(longName, 'x', sizeof(longName) - 1);
  longName[sizeof(longName) - 1] = '\0';
  EXPECT_RES(mcclBootstrapInit(&id, 0, 1, 0, longName, NULL, &bs), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapInit(&id, 0, 1, 0, NULL, NULL, NULL), mcclInvalidArgument);
  EXPECT_TRUE(bs == (mcclBootstrap*)0x1);  // untouched on failure
  EXPECT_OK(mcclBootstrapInit(&id, 0, 1, 0, NULL, NULL, &bs));
  mcclPeerInfo info;
  int x = 0;
  EXPECT_RES(mcclBootstrapGetPeerInfo(bs, 1, &info), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapSend(bs, 1, 0, &x, sizeof(x)), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapRecv(bs, -1, 0, &x, sizeof(x)), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapSend(bs, 0, 0, NULL, 4), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapAllGather(bs, NULL, 4), mcclInvalidArgument);
  EXPECT_OK(mcclBootstrapBarrier(bs));
  EXPECT_OK(mcclBootstrapClose(bs));
  EXPECT_OK(mcclBootstrapClose(NULL));
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// Rank 2 of 3 never comes: rank 0 and rank 1 both fail with mcclTimeout, within the timeout. posed:
// the two ranks pose as different hosts, so rank 1 waits for rank 0's answer on a TCP connection.
static void missingRankCase(int posed) {
  setTimeoutMs("600");
  int fds0 = mcclTestCountFds();
  rankArgs a[2];
  memset(a, 0, sizeof(a));
  EXPECT_OK(mcclGetUniqueId(&a[0].id));
  a[1].id = a[0].id;
  for (int i = 0; i < 2; i++) {
    a[i].rank = i;
    a[i].nranks = 3;
    a[i].hostId = posed ? poseHosts[i] : NULL;
  }
  runRanks(a, 2);
  for (int i = 0; i < 2; i++) {
    EXPECT_RES(a[i].initRes, mcclTimeout);
    EXPECT_LT(a[i].ms, 3000);
  }
  EXPECT_GE(a[0].ms, 500);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setTimeoutMs(NULL);
}

// A rank alone whose rank 0 never exists: mcclTimeout, on the Unix name or (posed as another host
// than the id's) on the TCP address, where every connect is refused until the deadline.
static void noRootCase(int posed) {
  setTimeoutMs("300");
  int fds0 = mcclTestCountFds();
  rankArgs a;
  memset(&a, 0, sizeof(a));
  EXPECT_OK(mcclGetUniqueId(&a.id));
  a.rank = 1;
  a.nranks = 2;
  a.hostId = posed ? poseHosts[1] : NULL;
  runRanks(&a, 1);
  EXPECT_RES(a.initRes, mcclTimeout);
  EXPECT_GE(a.ms, 250);
  EXPECT_LT(a.ms, 2000);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setTimeoutMs(NULL);
}

static void missingRankTimesOut(void) {
  missingRankCase(0);
}
static void noRootTimesOut(void) {
  noRootCase(0);
}

// A rank with a forged secret is refused at once (well within the timeout, however loaded the machine);
// rank 0 keeps waiting and times out.
static void wrongSecret(void) {
  setTimeoutMs("3000");
  int fds0 = mcclTestCountFds();
  rankArgs a[2];
  memset(a, 0, sizeof(a));
  EXPECT_OK(mcclGetUniqueId(&a[0].id));
  a[1].id = a[0].id;
  a[1].id.internal[8] ^= 0x1;  // the secret follows the 8-byte magic
  for (int i = 0; i < 2; i++) { a[i].rank = i; a[i].nranks = 2; }
  runRanks(a, 2);
  EXPECT_RES(a[1].initRes, mcclInvalidUsage);
  EXPECT_LT(a[1].ms, 1500);
  EXPECT_RES(a[0].initRes, mcclTimeout);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setTimeoutMs(NULL);
}

// Two threads claim rank 1 of 3: rank 0 fails the whole rendezvous with mcclInvalidUsage, at once: the
// timeout is long enough that "at once" stays well below it on a loaded machine.
static void duplicateRank(void) {
  setTimeoutMs("10000");
  int fds0 = mcclTestCountFds();
  rankArgs a[3];
  memset(a, 0, sizeof(a));
  EXPECT_OK(mcclGetUniqueId(&a[0].id));
  a[1].id = a[2].id = a[0].id;
  a[0].rank = 0; a[1].rank = 1; a[2].rank = 1;
  for (int i = 0; i < 3; i++) a[i].nranks = 3;
  runRanks(a, 3);
  for (int i = 0; i < 3; i++) {
    EXPECT_RES(a[i].initRes, mcclInvalidUsage);
    EXPECT_LT(a[i].ms, 1500);
  }
  // Two threads claim rank 0 of 2: the second cannot bind the rendezvous; the other pair meets. A claim
  // that loses late waits the whole timeout, so a short one here.
  setTimeoutMs("2000");
  memset(a, 0, sizeof(a));
  EXPECT_OK(mcclGetUniqueId(&a[0].id));
  a[1].id = a[2].id = a[0].id;
  a[0].rank = 0; a[1].rank = 0; a[2].rank = 1;
  for (int i = 0; i < 3; i++) a[i].nranks = 2;
  runRanks(a, 3);
  // Which claim loses depends on timing: a second rank 0 that arrives while the first holds the
  // rendezvous is refused (mcclInvalidUsage); one that arrives after the pair met and closed it
  // binds, then times out waiting for a rank 1 that never comes (mcclTimeout). Either way exactly
  // one claim fails with a clear error, and the other pair meets.
  int failed = 0, ok = 0;
  for (int i = 0; i < 3; i++) {
    failed += a[i].initRes == mcclInvalidUsage || a[i].initRes == mcclTimeout;
    ok += a[i].initRes == mcclSuccess;
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setTimeoutMs(NULL);
}

// Ranks that disagree on the count fail at once, well below the timeout however loaded the machine.
static void countMismatch(void) {
  setTimeoutMs("10000");
  int fds0 = mcclTestCountFds();
  rankArgs a[2];
  memset(a, 0, sizeof(a));
  EXPECT_OK(mcclGetUniqueId(&a[0].id));
  a[1].id = a[0].id;
  a[0].rank = 0; a[0].nranks = 2;
  a[1].rank = 1; a[1].nranks = 3;
  runRanks(a, 2);
  EXPECT_RES(a[0].initRes, mcclInvalidUsage);
  EXPECT_RES(a[1].initRes, mcclInvalidUsage);
  EXPECT_LT(a[0].ms, 1500);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setTimeoutMs(NULL);
}

static volatile uint32_t abortFlag;
static void* setAbortLater(void* p) {
  (void)p;
  struct timespec ts = {0, 150 * 1000 * 1000};
  nanosleep(&ts, NULL);
  __atomic_store_n(&abortFlag, 1, __ATOMIC_RELEASE);
  return NULL;
}

// The abort flag ends a wait long before the timeout.
static void abortFlagEndsWait(void) {
  setTimeoutMs("20000");
  int fds0 = mcclTestCountFds();
  abortFlag = 0;
  rankArgs a;
  memset(&a, 0, sizeof(a));
  EXPECT_OK(mcclGetUniqueId(&a.id));
  a.rank = 0; a.nranks = 2; a.abortFlag = &abortFlag;
  pthread_t t;
  pthread_create(&t, NULL, setAbortLater, NULL);
  rankMain(&a);
  pthread_join(t, NULL);
  EXPECT_RES(a.initRes, mcclInternalError);
  EXPECT_LT(a.ms, 2000);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setTimeoutMs(NULL);
}

// A forked peer joins and exits: sending to it fails at once, receiving from it times out. childHost:
// the child poses as that host, so it joins over TCP and the send finds its TCP port closed. The timeout is
// long enough that "at once" stays well below it on a loaded machine.
static void deadPeerCase(const char* childHost) {
  setTimeoutMs("3000");
  int fds0 = mcclTestCountFds();
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  pid_t child = mcclForkChild();  // dies with this process
  if (child == 0) {
    mcclBootstrap* bs = NULL;
    if (mcclSetThreadHostId(childHost) != mcclSuccess) _exit(3);
    if (mcclBootstrapInit(&id, 1, 2, 1, NULL, NULL, &bs) != mcclSuccess) _exit(2);
    mcclBootstrapStats st;
    if (mcclBootstrapGetStats(bs, &st) != mcclSuccess || st.rendezvousTcp != (childHost != NULL)) _exit(4);
    _exit(0);  // dies without closing: the kernel closes its sockets
  }
  EXPECT_GT(child, 0);
  mcclBootstrap* bs = NULL;
  mcclResult_t r = mcclBootstrapInit(&id, 0, 2, 0, NULL, NULL, &bs);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_RES(r, mcclSuccess);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int x = 1;
  long t0 = mcclClockMs();
  EXPECT_RES(mcclBootstrapSend(bs, 1, 0, &x, sizeof(x)), mcclRemoteError);
  EXPECT_LT(mcclClockMs() - t0, 1500);  // not the timeout's 3000
  t0 = mcclClockMs();
  EXPECT_RES(mcclBootstrapRecv(bs, 1, 0, &x, sizeof(x)), mcclTimeout);
  EXPECT_LT(mcclClockMs() - t0, 6000);
  EXPECT_OK(mcclBootstrapAbort(bs));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setTimeoutMs(NULL);
}

static void deadPeer(void) {
  deadPeerCase(NULL);
}

// Ranks 0..n-1 posed on hosts "pose-h<rank / perHost>"; the test's own thread made the id posing as
// pose-h0 (tcpIdOnHost0) or as the real host, which no rank shares.
static int tcpPerHost;    // ranks per posed host of the running tcp* test
static int tcpIdOnHost0;  // 1: the id was made posing as pose-h0

static int tcpBody(mcclBootstrap* bs, int rank, int nranks, char* err, size_t errLen) {
  int myHost = rank / tcpPerHost, sameHost = 0, gone = 0;
  // Every peer is alive (watched or not, MCCL_PEER_WATCH).
  BODY_CHECK(mcclBootstrapPeerGone(bs, &gone) == mcclSuccess && gone == -1);
  mcclBootstrapStats st0, st1;
  BODY_CHECK(mcclBootstrapGetStats(bs, &st0) == mcclSuccess);
  // Ranks of the host that made the id reach rank 0 over its Unix name, the others over TCP.
  BODY_CHECK(st0.rendezvousTcp == (rank != 0 && !(tcpIdOnHost0 && myHost == 0)));
  for (int p = 0; p < nranks; p++) {
    mcclPeerInfo info, mine;
    BODY_CHECK(mcclBootstrapGetPeerInfo(bs, p, &info) == mcclSuccess);
    BODY_CHECK(mcclBootstrapGetPeerInfo(bs, rank, &mine) == mcclSuccess);
    BODY_CHECK((info.hostHash == mine.hostHash) == (p / tcpPerHost == myHost));
    // Posed hosts are one machine: every pid names a process here (what a dead-peer check relies on).
    BODY_CHECK(info.pidNsHash != 0 && info.pidNsHash == mine.pidNsHash && info.pidNsHash == mcclGetPidNsHash());
    sameHost += p != rank && p / tcpPerHost == myHost;
  }
  // One message to every other rank and one from each: exactly the cross-host ones go over TCP.
  for (int k = 1; k < nranks; k++) {
    int to = (rank + k) % nranks, from = (rank - k + nranks) % nranks, v = rank * 100 + k, got = -1;
    BODY_CHECK(mcclBootstrapSend(bs, to, 50 + k, &v, sizeof(v)) == mcclSuccess);
    BODY_CHECK(mcclBootstrapRecv(bs, from, 50 + k, &got, sizeof(got)) == mcclSuccess && got == from * 100 + k);
  }
  BODY_CHECK(mcclBootstrapGetStats(bs, &st1) == mcclSuccess);
  BODY_CHECK(st1.tcpSent - st0.tcpSent == (uint64_t)(nranks - 1 - sameHost));
  BODY_CHECK(st1.unixSent - st0.unixSent == (uint64_t)sameHost);
  BODY_CHECK(st1.tcpReceived - st0.tcpReceived == (uint64_t)(nranks - 1 - sameHost));
  BODY_CHECK(st1.unixReceived - st0.unixReceived == (uint64_t)sameHost);
  // Allgather larger than a socket buffer and barriers across the TCP edges.
  BODY_CHECK(bigAllGatherOk(bs, rank, nranks, 5, 17));
  BODY_CHECK(mcclBootstrapBarrier(bs) == mcclSuccess);
  // A size mismatch is refused over TCP as over a Unix socket.
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks, v = 1;
  char small = 0;
  BODY_CHECK(mcclBootstrapSend(bs, next, 3, &v, sizeof(v)) == mcclSuccess);
  BODY_CHECK(mcclBootstrapRecv(bs, prev, 3, &small, 1) == mcclInvalidUsage && small == 0);
  BODY_CHECK(mcclBootstrapBarrier(bs) == mcclSuccess);
  return 1;
}

static void runPosed(int n, int perHost, int idOnHost0) {
  rankArgs a[MAXR];
  memset(a, 0, sizeof(a));
  mcclUniqueId id;
  EXPECT_OK(mcclSetThreadHostId(idOnHost0 ? poseHosts[0] : NULL));
  EXPECT_OK(mcclGetUniqueId(&id));
  EXPECT_OK(mcclSetThreadHostId(NULL));
  tcpPerHost = perHost;
  tcpIdOnHost0 = idOnHost0;
  for (int i = 0; i < n; i++) {
    a[i].id = id;
    a[i].rank = i;
    a[i].nranks = n;
    a[i].hostId = poseHosts[i / perHost];
    a[i].body = tcpBody;
  }
  runRanks(a, n);
  for (int i = 0; i < n; i++) {
    EXPECT_RES(a[i].initRes, mcclSuccess);
    if (!a[i].bodyOk) {
      mcclTestFailAt(__FILE__, __LINE__, "n=%d perHost=%d: %s", n, perHost, a[i].err);
      return;
    }
  }
}

// Ranks posing as 2 hosts x 2 ranks and 4 hosts x 1 rank: cross-host messages go over TCP (counted
// by mcclBootstrapGetStats), same-host ones over Unix sockets; nothing leaks.
static void tcpAcrossPosedHosts(void) {
  setTimeoutMs("10000");
  int fds0 = mcclTestCountFds(), th0 = mcclTestCountThreads();
  runPosed(4, 2, 1);
  runPosed(4, 1, 0);
  runPosed(3, 2, 1);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestWaitThreads(th0, MCCL_TEST_THREADS_SETTLE_MS), th0);
  EXPECT_EQ(mcclGetHostHash(), mcclGetHostHash());
  char longId[300];
  memset(longId, 'h', sizeof(longId) - 1);
  longId[sizeof(longId) - 1] = '\0';
  EXPECT_RES(mcclSetThreadHostId(longId), mcclInvalidArgument);
  uint64_t real = mcclGetHostHash();
  EXPECT_OK(mcclSetThreadHostId("pose-h0"));
  EXPECT_TRUE(mcclGetHostHash() != real);
  EXPECT_OK(mcclSetThreadHostId(""));
  EXPECT_EQ(mcclGetHostHash(), real);
  mcclBootstrapStats st;
  EXPECT_RES(mcclBootstrapGetStats(NULL, &st), mcclInvalidArgument);
  setTimeoutMs(NULL);
}

// The same with MCCL_PEER_WATCH=2: every pair of ranks also holds a watch connection (over TCP across
// posed hosts, a Unix socket within one), made at init whatever order the ranks arrive in.
static void tcpAcrossPosedHostsWatched(void) {
  setTimeoutMs("10000");
  setEnv("MCCL_PEER_WATCH", "2");
  int fds0 = mcclTestCountFds();
  runPosed(5, 2, 1);
  runPosed(4, 1, 0);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setEnv("MCCL_PEER_WATCH", NULL);
  setTimeoutMs(NULL);
}

// Watch connections (mcclBootstrapPeerGone). MCCL_PEER_WATCH=2 watches every peer, so a forked child
// (same pid namespace) stands for a process on another machine. It joins, both check that nobody is
// gone, then it exits: without closing (a death: the kernel closes its sockets), and rank 0 must name
// it; or after mcclBootstrapClose (its goodbye byte), and rank 0 must never name it. childHost: the
// child poses as that host, so the watch connection is TCP.
static void watchCase(int childCloses, const char* childHost) {
  setTimeoutMs("5000");
  setEnv("MCCL_PEER_WATCH", "2");
  const int fds0 = mcclTestCountFds();
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  int go[2];
  EXPECT_EQ(pipe(go), 0);
  pid_t child = mcclForkChild();
  if (child == 0) {
    close(go[1]);
    mcclBootstrap* bs = NULL;
    int gone = 0;
    char c;
    if (mcclSetThreadHostId(childHost) != mcclSuccess) _exit(2);
    if (mcclBootstrapInit(&id, 1, 2, 1, NULL, NULL, &bs) != mcclSuccess) _exit(3);
    if (mcclBootstrapPeerGone(bs, &gone) != mcclSuccess || gone != -1) _exit(4);
    if (read(go[0], &c, 1) != 1) _exit(5);  // rank 0 has checked its side
    if (childCloses && mcclBootstrapClose(bs) != mcclSuccess) _exit(6);
    _exit(0);
  }
  EXPECT_GT(child, 0);
  close(go[0]);
  mcclBootstrap* bs = NULL;
  EXPECT_OK(mcclBootstrapInit(&id, 0, 2, 0, NULL, NULL, &bs));
  int gone = 0;
  EXPECT_OK(mcclBootstrapPeerGone(bs, &gone));
  EXPECT_EQ(gone, -1);
  // The two listeners, the watch connection and the pipe's write end.
  EXPECT_EQ(mcclTestCountFds(), fds0 + 4);
  EXPECT_EQ(write(go[1], "x", 1), 1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const long t0 = mcclClockMs();
  do {
    EXPECT_OK(mcclBootstrapPeerGone(bs, &gone));
    if (gone >= 0) break;
    usleep(2000);
  } while (mcclClockMs() - t0 < 1000);
  EXPECT_EQ(gone, childCloses ? -1 : 1);
  EXPECT_OK(mcclBootstrapPeerGone(bs, &gone));  // a death is kept, a goodbye is not one
  EXPECT_EQ(gone, childCloses ? -1 : 1);
  EXPECT_RES(mcclBootstrapPeerGone(NULL, &gone), mcclInvalidArgument);
  EXPECT_RES(mcclBootstrapPeerGone(bs, NULL), mcclInvalidArgument);
  EXPECT_OK(mcclBootstrapClose(bs));
  close(go[1]);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setEnv("MCCL_PEER_WATCH", NULL);
  setTimeoutMs(NULL);
}
static void watchSeesDeath(void) {
  watchCase(0, NULL);
  watchCase(0, "pose-h1");
}
static void watchGoodbyeIsNoDeath(void) {
  watchCase(1, NULL);
  watchCase(1, "pose-h1");
}

static int idFamily(const mcclUniqueId* id, char* host, size_t len) {
  bootId b;
  if (mcclBootstrapIdDecode(id->internal, sizeof(id->internal), &b) != mcclSuccess) return -1;
  if (b.addr.sa.sa_family == AF_INET)
    inet_ntop(AF_INET, &b.addr.sin.sin_addr, host, (socklen_t)len);
  else
    inet_ntop(AF_INET6, &b.addr.sin6.sin6_addr, host, (socklen_t)len);
  return b.addr.sa.sa_family;
}

// The rendezvous port an id names lies below the kernel's ephemeral range (ip_local_port_range),
// which port-0 binds and outgoing connections draw from: no other socket of the job can be handed
// it between mcclGetUniqueId and rank 0's bind. The ranks still meet on it (tcpAcrossPosedHosts).
static void rootPortOutsideEphemeral(void) {
  int lo = 32768;  // Linux's default
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d", &lo) != 1) lo = 32768;
    fclose(f);
  }
  if (lo <= 2048) SKIP("ephemeral range starts at %d: the id falls back to it", lo);
  int seen[32], distinct = 0;
  for (int i = 0; i < 32; i++) {
    mcclUniqueId id;
    bootId b;
    EXPECT_OK(mcclGetUniqueId(&id));
    EXPECT_OK(mcclBootstrapIdDecode(id.internal, sizeof(id.internal), &b));
    int port = ntohs(b.addr.sa.sa_family == AF_INET6 ? b.addr.sin6.sin6_port : b.addr.sin.sin_port);
    EXPECT_TRUE(port >= 1024 && port < lo);
    int j = 0;
    while (j < distinct && seen[j] != port) j++;
    if (j == distinct) seen[distinct++] = port;
  }
  EXPECT_TRUE(distinct > 16);  // random, not one fixed port
}

// MCCL_SOCKET_IFNAME / MCCL_SOCKET_FAMILY pick the id's address; a name that matches nothing, or a
// bad family, is mcclInvalidArgument from mcclGetUniqueId and mcclBootstrapInit alike. Over IPv6
// loopback (when this machine has it) two posed hosts still meet.
static void socketIfname(void) {
  int fds0 = mcclTestCountFds();
  mcclUniqueId id;
  char host[INET6_ADDRSTRLEN] = "";
  setEnv("MCCL_SOCKET_IFNAME", "=lo");
  EXPECT_OK(mcclGetUniqueId(&id));
  EXPECT_EQ(idFamily(&id, host, sizeof(host)), AF_INET);
  EXPECT_TRUE(strcmp(host, "127.0.0.1") == 0);
  setEnv("MCCL_SOCKET_IFNAME", "nosuchif");
  mcclUniqueId bad;
  memset(&bad, 0x11, sizeof(bad));
  EXPECT_RES(mcclGetUniqueId(&bad), mcclInvalidArgument);
  EXPECT_EQ((unsigned char)bad.internal[0], 0x11);  // untouched
  mcclBootstrap* bs = NULL;
  EXPECT_RES(mcclBootstrapInit(&id, 0, 1, 0, NULL, NULL, &bs), mcclInvalidArgument);
  EXPECT_TRUE(bs == NULL);
  setEnv("MCCL_SOCKET_IFNAME", "^");  // excludes nothing: any interface
  EXPECT_OK(mcclGetUniqueId(&id));
  setEnv("MCCL_SOCKET_IFNAME", "lo");
  setEnv("MCCL_SOCKET_FAMILY", "AF_UNIX");
  EXPECT_RES(mcclGetUniqueId(&bad), mcclInvalidArgument);
  setEnv("MCCL_SOCKET_FAMILY", "AF_INET6");
  mcclResult_t r6 = mcclGetUniqueId(&id);
  if (r6 == mcclSuccess) {
    EXPECT_EQ(idFamily(&id, host, sizeof(host)), AF_INET6);
    EXPECT_TRUE(strcmp(host, "::1") == 0);
    setTimeoutMs("10000");
    runPosed(2, 1, 0);
  } else {
    EXPECT_RES(r6, mcclInvalidArgument);  // no IPv6 on lo here: the IPv4 cases above still ran
  }
  setEnv("MCCL_SOCKET_FAMILY", NULL);
  setEnv("MCCL_SOCKET_IFNAME", NULL);
  setTimeoutMs(NULL);
  EXPECT_EQ(mcclTestCountFds(), fds0);
}

// Over TCP: a rank of another host whose rank 0 never comes, a rank that never arrives while the
// others wait, and a peer that died.
static void tcpRendezvousTimesOut(void) {
  noRootCase(1);
  missingRankCase(1);
}
static void tcpDeadPeer(void) {
  deadPeerCase(poseHosts[1]);
}

// ---- strangers: a neighbour process that connects to the bootstrap's listeners -------------------
//
// Any process can reach a rank's abstract Unix name (no uid check) and its TCP port, and rank 0's
// rendezvous: the names are in /proc/net/unix, the ports in /proc/net/tcp. A forked child stands for
// such a neighbour. It opens k connections to each target it is sent and leaves them silent, or
// sends garbage (alternately 8 bytes, shorter than any first message, and 1 KiB of noise), and
// holds them until told to exit. Its connects are non-blocking and retried: a listener whose
// backlog is full (nobody accepting) refuses with EAGAIN, as it would a peer.

typedef struct {
  int tcp;
  char name[BOOT_NAME_LEN + 32];  // abstract name, without the leading NUL (tcp == 0)
  bootSockAddr addr;              // tcp == 1
} strangerTarget;

typedef struct {
  int k, garbage, waitAll;  // waitAll: report once every connection is made, not after the first try
  int nTargets;             // 0: close everything and exit
  strangerTarget t[MAXR + 1];
} strangerCmd;

typedef struct {
  int fd, state, idx;  // state: 0 to connect, 1 connecting (TCP), 2 connected, 3 done
  strangerTarget t;
} strangerConn;

static void strangerStep(strangerConn* c, int garbage) {
  if (c->state == 0) {
    int fd = socket(c->t.tcp ? c->t.addr.sa.sa_family : AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    int r;
    if (c->t.tcp) {
      socklen_t len = c->t.addr.sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
      r = connect(fd, &c->t.addr.sa, len);
    } else {
      struct sockaddr_un a;
      r = connect(fd, (struct sockaddr*)&a, mcclSocketAbstractAddr(c->t.name, &a));
    }
    if (r == 0 || errno == EINPROGRESS) {
      c->fd = fd;
      c->state = r == 0 ? 2 : 1;
    } else {
      close(fd);  // not listening yet, or its backlog is full: again on the next step
    }
  }
  if (c->state == 1) {
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};
    int err = 0;
    socklen_t el = sizeof(err);
    if (poll(&p, 1, 0) == 1 && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0) {
      if (err == 0)
        c->state = 2;
      else {
        close(c->fd);
        c->fd = -1;
        c->state = 0;
      }
    }
  }
  if (c->state == 2) {
    if (garbage) {
      char junk[1024];
      for (size_t i = 0; i < sizeof(junk); i++) junk[i] = (char)(i * 131 + (size_t)c->idx * 7 + 1);
      (void)!send(c->fd, junk, c->idx % 2 ? sizeof(junk) : 8, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    c->state = 3;
  }
}

static void strangerMain(int cmdFd, int reportFd) {
  strangerConn* c = NULL;
  int n = 0, garbage = 0, waitAll = 0, toReport = 0;
  long since = 0;
  for (;;) {
    int open = 0;
    for (int i = 0; i < n; i++) open += c[i].state < 3;
    struct pollfd p = {.fd = cmdFd, .events = POLLIN};
    if (poll(&p, 1, open ? 1 : 100) == 1) {
      strangerCmd cmd;
      if (read(cmdFd, &cmd, sizeof(cmd)) != (ssize_t)sizeof(cmd) || cmd.nTargets == 0) _exit(0);
      strangerConn* g = realloc(c, sizeof(*c) * (size_t)(n + cmd.k * cmd.nTargets));
      if (g == NULL) _exit(3);
      c = g;
      for (int t = 0; t < cmd.nTargets; t++)
        for (int i = 0; i < cmd.k; i++) c[n++] = (strangerConn){.fd = -1, .state = 0, .idx = i, .t = cmd.t[t]};
      garbage = cmd.garbage;
      waitAll = cmd.waitAll;
      toReport = 1;
      since = mcclClockMs();
    }
    open = 0;
    for (int i = 0; i < n; i++) {
      strangerStep(&c[i], garbage);
      open += c[i].state < 3;
    }
    if (toReport && (!waitAll || open == 0 || mcclClockMs() - since > 10000)) {
      char b = open == 0;
      if (write(reportFd, &b, 1) != 1) _exit(4);
      toReport = 0;
    }
  }
}

// One stranger process: its pid, the pipe its commands go down and the one its reports come up.
typedef struct {
  pid_t pid;
  int cmd, report;
} stranger;

static int strangerStart(stranger* s) {
  int down[2], up[2];
  if (pipe(down) != 0) return -1;
  if (pipe(up) != 0) {
    close(down[0]);
    close(down[1]);
    return -1;
  }
  s->pid = mcclForkChild();
  if (s->pid == 0) {
    close(down[1]);
    close(up[0]);
    strangerMain(down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  s->cmd = down[1];
  s->report = up[0];
  return s->pid > 0 ? 0 : -1;
}

// Send targets; wait for the report (1: every connection made, 0: some still trying).
static int strangerSend(stranger* s, const strangerCmd* cmd) {
  char b = 0;
  if (write(s->cmd, cmd, sizeof(*cmd)) != (ssize_t)sizeof(*cmd)) return -1;
  return read(s->report, &b, 1) == 1 ? b : -1;
}

static int strangerStop(stranger* s) {
  strangerCmd bye;
  memset(&bye, 0, sizeof(bye));
  (void)!write(s->cmd, &bye, sizeof(bye));
  int status = 0;
  waitpid(s->pid, &status, 0);
  close(s->cmd);
  close(s->report);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Every rank's listener of the job whose rendezvous is named `idName`, as a neighbour finds them:
// Unix, listening sockets in /proc/net/unix named "@<idName>.<rank>.<salt>"; TCP, listening sockets
// in /proc/net/tcp(6) that belong to this process (their inodes are among /proc/self/fd's), at the
// address of the id's interface.
static int findListeners(const char* idName, const bootSockAddr* ifAddr, int tcp, strangerTarget* t, int max) {
  int n = 0;
  char line[512];
  if (!tcp) {
    FILE* f = fopen("/proc/net/unix", "r");
    if (f == NULL) return 0;
    char prefix[BOOT_NAME_LEN + 8];
    snprintf(prefix, sizeof(prefix), "@%s.", idName);
    while (n < max && fgets(line, sizeof(line), f)) {
      char path[256] = "";
      unsigned flags = 0;
      if (sscanf(line, "%*s %*s %*s %x %*s %*s %*s %255s", &flags, path) != 2) continue;
      if (!(flags & 0x10000) || strncmp(path, prefix, strlen(prefix)) != 0) continue;  // __SO_ACCEPTCON
      t[n] = (strangerTarget){.tcp = 0};
      snprintf(t[n].name, sizeof(t[n].name), "%s", path + 1);
      n++;
    }
    fclose(f);
    return n;
  }
  unsigned long inodes[64];
  int nIno = 0;
  DIR* d = opendir("/proc/self/fd");
  for (struct dirent* e; d && (e = readdir(d)) != NULL && nIno < 64;) {
    char link[64], target[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(link, target, sizeof(target) - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    if (sscanf(target, "socket:[%lu]", &inodes[nIno]) == 1) nIno++;
  }
  if (d) closedir(d);
  FILE* f = fopen(ifAddr->sa.sa_family == AF_INET6 ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
  if (f == NULL) return 0;
  while (n < max && fgets(line, sizeof(line), f)) {
    char local[64];
    unsigned st = 0;
    unsigned long ino = 0;
    if (sscanf(line, "%*s %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &st, &ino) != 3 || st != 0x0A) continue;
    int mine = 0;
    for (int i = 0; i < nIno; i++) mine |= inodes[i] == ino;
    const char* colon = strrchr(local, ':');
    if (!mine || colon == NULL) continue;
    t[n] = (strangerTarget){.tcp = 1, .addr = *ifAddr};
    uint16_t port = htons((uint16_t)strtoul(colon + 1, NULL, 16));
    if (ifAddr->sa.sa_family == AF_INET6)
      t[n].addr.sin6.sin6_port = port;
    else
      t[n].addr.sin.sin_port = port;
    n++;
  }
  fclose(f);
  return n;
}

// A rank of a stranger job: init, wait for `strangerGo`, one timed allgather, a barrier.
typedef struct {
  mcclUniqueId id;
  const char* hostId;
  int rank, nranks;
  mcclResult_t initRes, agRes;
  long initDone, agMs;
  int agOk;
  uint64_t dropped;
} strangerRank;
static atomic_int strangerInited, strangerGo;

static void* strangerRankMain(void* p) {
  strangerRank* a = p;
  if (a->hostId) mcclSetThreadHostId(a->hostId);
  mcclBootstrap* bs = NULL;
  a->initRes = mcclBootstrapInit(&a->id, a->rank, a->nranks, a->rank, NULL, NULL, &bs);
  a->initDone = mcclClockMs();
  atomic_fetch_add(&strangerInited, 1);
  if (a->initRes != mcclSuccess) return NULL;
  while (!atomic_load(&strangerGo)) usleep(1000);
  int all[MAXR * 16];
  for (int i = 0; i < 16; i++) all[a->rank * 16 + i] = a->rank * 1000 + i;
  long t0 = mcclClockMs();
  a->agRes = mcclBootstrapAllGather(bs, all, 16 * sizeof(int));
  a->agMs = mcclClockMs() - t0;
  a->agOk = a->agRes == mcclSuccess;
  for (int r = 0; a->agOk && r < a->nranks; r++)
    for (int i = 0; i < 16; i++) a->agOk &= all[r * 16 + i] == r * 1000 + i;
  if (mcclBootstrapBarrier(bs) != mcclSuccess) a->agOk = 0;
  mcclBootstrapStats st;
  if (mcclBootstrapGetStats(bs, &st) == mcclSuccess) a->dropped = st.droppedConnections;
  mcclBootstrapClose(bs);
  return NULL;
}

// n ranks (posed: each its own host, so everything but the strangers' Unix side goes over TCP).
// With a stranger, k connections go to rank 0's rendezvous once rank 0 listens and before the
// others start (during init), then k to every rank's listener before the allgather. *initMs: from
// the start of ranks 1.. to the last init's end; *agMs: the slowest allgather.
static void strangerJob(stranger* s, int n, int k, int garbage, int posed, long* initMs, long* agMs,
                        uint64_t* dropped) {
  strangerRank a[MAXR];
  pthread_t th[MAXR];
  memset(a, 0, sizeof(a));
  mcclUniqueId id;
  EXPECT_OK(mcclGetUniqueId(&id));
  bootId bid;
  EXPECT_OK(mcclBootstrapIdDecode(id.internal, sizeof(id.internal), &bid));
  atomic_store(&strangerInited, 0);
  atomic_store(&strangerGo, 0);
  for (int i = 0; i < n; i++) {
    a[i].id = id;
    a[i].rank = i;
    a[i].nranks = n;
    a[i].hostId = posed ? poseHosts[i] : NULL;
  }
  strangerCmd cmd;
  memset(&cmd, 0, sizeof(cmd));
  cmd.k = k;
  cmd.garbage = garbage;
  pthread_create(&th[0], NULL, strangerRankMain, &a[0]);
  if (s) {
    // Rank 0's rendezvous, on the path the other ranks take to it.
    cmd.nTargets = 1;
    cmd.waitAll = 1;
    cmd.t[0] = (strangerTarget){.tcp = posed, .addr = bid.addr};
    snprintf(cmd.t[0].name, sizeof(cmd.t[0].name), "%s", bid.name);
    EXPECT_EQ(strangerSend(s, &cmd), 1);
  }
  long t0 = mcclClockMs();
  for (int i = 1; i < n; i++) pthread_create(&th[i], NULL, strangerRankMain, &a[i]);
  while (atomic_load(&strangerInited) < n) usleep(500);
  long last = 0;
  for (int i = 0; i < n; i++) last = a[i].initDone > last ? a[i].initDone : last;
  *initMs = last - t0;
  if (s && !mcclTestStopped()) {
    cmd.nTargets = findListeners(bid.name, &bid.addr, posed, cmd.t, MAXR + 1);
    cmd.waitAll = 0;  // with k past a backlog, the rest keep trying while the ranks drain it
    EXPECT_EQ(cmd.nTargets, n);
    EXPECT_GE(strangerSend(s, &cmd), 0);
  }
  atomic_store(&strangerGo, 1);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  *agMs = 0;
  *dropped = 0;
  for (int i = 0; i < n; i++) {
    EXPECT_RES(a[i].initRes, mcclSuccess);
    EXPECT_RES(a[i].agRes, mcclSuccess);
    EXPECT_TRUE(a[i].agOk);
    *agMs = a[i].agMs > *agMs ? a[i].agMs : *agMs;
    *dropped += a[i].dropped;
  }
}

// The bar: a stranger's silent connection (1 or 300 of them, or garbage) to rank 0's rendezvous
// during init and to every rank's listener before an allgather adds at most 1 s to either (asserted
// with margin: 3 s); every rank succeeds; the strangers' connections are closed and counted
// (mcclBootstrapStats::droppedConnections); no fd is left behind. Each case runs the same job without
// strangers first, for the time to compare with.
static void strangerCase(int k, int garbage, int posed) {
  setTimeoutMs("10000");
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 && rl.rlim_max > rl.rlim_cur) {
    rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;  // k x 4 targets of strangers, the ranks' side too
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  const int n = 3;
  int fds0 = mcclTestCountFds();
  long init0 = 0, ag0 = 0, init1 = 0, ag1 = 0;
  uint64_t dropped0 = 0, dropped1 = 0;
  strangerJob(NULL, n, k, garbage, posed, &init0, &ag0, &dropped0);
  stranger s;
  EXPECT_EQ(strangerStart(&s), 0);
  strangerJob(&s, n, k, garbage, posed, &init1, &ag1, &dropped1);
  EXPECT_EQ(strangerStop(&s), 0);
  printf(
      "# %d %s stranger connection(s) per listener over %s: init %ld ms (without: %ld ms), allgather %ld ms "
      "(without: %ld ms), %llu dropped\n",
      k, garbage ? "garbage" : "silent", posed ? "TCP" : "Unix", init1, init0, ag1, ag0, (unsigned long long)dropped1);
  EXPECT_EQ(dropped0, 0);
  EXPECT_GE(dropped1, (uint64_t)k);  // at least the rendezvous's, closed at the end of init
  EXPECT_LT(init1 - init0, 3000);
  EXPECT_LT(ag1 - ag0, 3000);
  EXPECT_EQ(mcclTestCountFds(), fds0);
  setTimeoutMs(NULL);
}

static void strangerSilent(void) {
  strangerCase(1, 0, 0);
  strangerCase(300, 0, 0);
}
static void strangerGarbage(void) {
  strangerCase(300, 1, 0);
}
static void strangerTcp(void) {
  strangerCase(1, 0, 1);
  strangerCase(300, 1, 1);
}

// The per-connection deadline itself: a neighbour's silent connection to rank 1's listener is closed
// MCCL_BOOTSTRAP_ACCEPT_TIMEOUT after rank 1 accepts it, while rank 1 goes on waiting for rank 0's
// message (sent 3 s later), which then arrives intact. The neighbour sees end of file after the
// deadline and well before rank 0 speaks (a connection held for the whole receive would close only
// after it): within the deadline + 1.5 s, slack for a loaded machine; once with the default (1 s), once
// with 300 ms.
typedef struct {
  mcclUniqueId id;
  int rank;
  mcclResult_t res;
  int got;
  uint64_t dropped;
} deadlineRank;
static atomic_int deadlineReady;

static void* deadlineRankMain(void* p) {
  deadlineRank* a = p;
  mcclBootstrap* bs = NULL;
  a->res = mcclBootstrapInit(&a->id, a->rank, 2, a->rank, NULL, NULL, &bs);
  atomic_fetch_add(&deadlineReady, 1);
  if (a->res != mcclSuccess) return NULL;
  int v = 0x5a5a;
  if (a->rank == 0) {
    usleep(3000 * 1000);
    a->res = mcclBootstrapSend(bs, 1, 9, &v, sizeof(v));
  } else {
    a->res = mcclBootstrapRecv(bs, 0, 9, &a->got, sizeof(a->got));
  }
  if (a->res == mcclSuccess) a->res = mcclBootstrapBarrier(bs);
  mcclBootstrapStats st;
  if (mcclBootstrapGetStats(bs, &st) == mcclSuccess) a->dropped = st.droppedConnections;
  mcclBootstrapClose(bs);
  return NULL;
}

static void acceptDeadlineCase(const char* accept, long expectMs) {
  setEnv("MCCL_BOOTSTRAP_ACCEPT_TIMEOUT", accept);
  deadlineRank a[2];
  memset(a, 0, sizeof(a));
  EXPECT_OK(mcclGetUniqueId(&a[0].id));
  bootId bid;
  EXPECT_OK(mcclBootstrapIdDecode(a[0].id.internal, sizeof(a[0].id.internal), &bid));
  a[1].id = a[0].id;
  a[1].rank = 1;
  atomic_store(&deadlineReady, 0);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, deadlineRankMain, &a[i]);
  while (atomic_load(&deadlineReady) < 2) usleep(500);
  // Rank 1's Unix listener, as a neighbour finds it; this thread is the neighbour.
  strangerTarget t[MAXR + 1];
  int n = findListeners(bid.name, &bid.addr, 0, t, MAXR + 1), fd = -1;
  EXPECT_EQ(n, 2);
  for (int i = 0; i < n && fd < 0; i++) {
    if (strstr(t[i].name, ".1.") == NULL) continue;
    struct sockaddr_un sa;
    const socklen_t len = mcclSocketAbstractAddr(t[i].name, &sa);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr*)&sa, len) != 0) {
      close(fd);
      fd = -1;
    }
  }
  EXPECT_GE(fd, 0);
  long t0 = mcclClockMs(), closedMs = -1;
  char b;
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  if (fd >= 0 && poll(&pf, 1, 5000) == 1 && recv(fd, &b, 1, 0) == 0) closedMs = mcclClockMs() - t0;
  if (fd >= 0) close(fd);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  printf("# MCCL_BOOTSTRAP_ACCEPT_TIMEOUT=%s: a silent connection was closed after %ld ms\n",
         accept ? accept : "(default)", closedMs);
  EXPECT_GE(closedMs, expectMs - 50);  // the connect precedes the accept: a little early is fine
  EXPECT_LT(closedMs, expectMs + 1500);
  EXPECT_RES(a[0].res, mcclSuccess);
  EXPECT_RES(a[1].res, mcclSuccess);
  EXPECT_EQ(a[1].got, 0x5a5a);
  EXPECT_EQ(a[1].dropped, 1);
  setEnv("MCCL_BOOTSTRAP_ACCEPT_TIMEOUT", NULL);
}

static void acceptDeadline(void) {
  acceptDeadlineCase(NULL, 1000);
  acceptDeadlineCase("300", 300);
}

// ---- order: two messages of one peer under one tag arrive in the order they were sent -------------
// Transport setup between two ranks sends a peer its receivers' records and then its senders', under one
// tag; the receiver tells them apart only by their order. Here the first message's connection is taken
// in (by the receiver's own send, which empties its backlog) before its bytes come, and the second one
// comes complete: the first must still match first. A thread of this test poses as rank 0 on raw sockets.
typedef struct {
  mcclUniqueId id;
  int rank;
  mcclBootstrap* bs;
  mcclResult_t res;
} orderRank;
static void* orderRankInit(void* p) {
  orderRank* a = p;
  char addr[MCCL_SOCKET_NAME_LEN];
  snprintf(addr, sizeof(addr), "proxy-of-rank-%d", a->rank);
  a->res = mcclBootstrapInit(&a->id, a->rank, 2, a->rank, addr, NULL, &a->bs);
  return NULL;
}
static int orderConnect(const char* name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a;
  if (fd >= 0 && connect(fd, (struct sockaddr*)&a, mcclSocketAbstractAddr(name, &a)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}
static int orderSend(int fd, uint64_t secret, int tag, int value) {
  char buf[sizeof(msgHeader) + sizeof(int)];
  msgHeader h = {.secret = secret, .from = 0, .kind = KIND_USER, .tag = tag, .pad = 0, .size = sizeof(int)};
  memcpy(buf, &h, sizeof(h));
  memcpy(buf + sizeof(h), &value, sizeof(value));
  int ok = send(fd, buf, sizeof(buf), MSG_NOSIGNAL) == (ssize_t)sizeof(buf);
  close(fd);
  return ok;
}
static void sameTagInSendOrder(void) {
  setTimeoutMs("10000");
  orderRank r[2];
  pthread_t th[2];
  EXPECT_OK(mcclGetUniqueId(&r[0].id));
  r[1].id = r[0].id;
  for (int i = 0; i < 2; i++) {
    r[i].rank = i;
    r[i].bs = NULL;
    pthread_create(&th[i], NULL, orderRankInit, &r[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  EXPECT_OK(r[0].res);
  EXPECT_OK(r[1].res);
  bootId bid;
  memcpy(&bid, &r[0].id, sizeof(bid));
  strangerTarget t[MAXR + 1];
  int n = findListeners(bid.name, NULL, 0, t, MAXR + 1), one = -1;
  char prefix[BOOT_NAME_LEN + 8];
  snprintf(prefix, sizeof(prefix), "%s.1.", bid.name);
  for (int i = 0; i < n; i++)
    if (strncmp(t[i].name, prefix, strlen(prefix)) == 0) one = i;
  EXPECT_TRUE(one >= 0);  // rank 1's listener
  int a = orderConnect(t[one].name);
  EXPECT_TRUE(a >= 0);
  int ping = 5, got = -1;
  EXPECT_OK(mcclBootstrapSend(r[1].bs, 0, 77, &ping, sizeof(ping)));  // rank 1 takes in the silent connection
  EXPECT_TRUE(orderSend(a, bid.secret, 11, 1));
  int b = orderConnect(t[one].name);
  EXPECT_TRUE(b >= 0);
  EXPECT_TRUE(orderSend(b, bid.secret, 11, 2));
  EXPECT_OK(mcclBootstrapRecv(r[1].bs, 0, 11, &got, sizeof(got)));
  EXPECT_EQ(got, 1);
  EXPECT_OK(mcclBootstrapRecv(r[1].bs, 0, 11, &got, sizeof(got)));
  EXPECT_EQ(got, 2);
  EXPECT_OK(mcclBootstrapRecv(r[0].bs, 1, 77, &got, sizeof(got)));
  EXPECT_EQ(got, 5);
  for (int i = 0; i < 2; i++) mcclBootstrapClose(r[i].bs);
  setTimeoutMs(NULL);
}

// A peer that has exited but is not reaped (its launcher waits for other children first) is a zombie:
// kill(pid, 0) still succeeds on it, mcclProcessGone must not. The child exits when its pipe closes;
// the parent waits for that exit without reaping (waitid WNOWAIT), so the child is a zombie from then
// on, and asserts that it counts as gone at once, while a live child and this process count as
// running. How soon the child gets to exit is the scheduler's business, so nothing here is timed.
static void zombiePeerIsGone(void) {
  int go[2];
  EXPECT_EQ(pipe(go), 0);
  pid_t zombie = mcclForkChild();
  if (zombie == 0) {
    char b;
    close(go[1]);
    if (read(go[0], &b, 1) < 0) _exit(2);
    _exit(0);
  }
  pid_t live = mcclForkChild();
  if (live == 0) {
    close(go[0]);
    close(go[1]);  // or the first child never sees end of file
    pause();
    _exit(0);
  }
  close(go[0]);
  EXPECT_EQ(mcclProcessGone((int)getpid()), 0);
  EXPECT_EQ(mcclProcessGone(zombie), 0);  // still waiting on the pipe
  EXPECT_EQ(mcclProcessGone(live), 0);
  EXPECT_EQ(mcclProcessGone(0), 0);
  close(go[1]);  // the child reads end of file and exits; nobody reaps it yet
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  EXPECT_EQ(waitid(P_PID, (id_t)zombie, &info, WEXITED | WNOWAIT), 0);  // exited, left unreaped
  EXPECT_EQ(mcclProcessGone(zombie), 1);
  EXPECT_EQ(kill(zombie, 0), 0);  // what the check alone would have believed: still there
  EXPECT_EQ(mcclProcessGone(live), 0);
  EXPECT_EQ(kill(live, SIGKILL), 0);
  int status;
  EXPECT_EQ(waitpid(zombie, &status, 0), zombie);
  EXPECT_EQ(mcclProcessGone(zombie), 1);  // reaped: no such process
  EXPECT_EQ(waitpid(live, &status, 0), live);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(uniqueIdsDiffer), MCCL_TEST_CASE(badArguments), MCCL_TEST_CASE(threadsOneId),
               MCCL_TEST_CASE(missingRankTimesOut), MCCL_TEST_CASE(noRootTimesOut), MCCL_TEST_CASE(wrongSecret),
               MCCL_TEST_CASE(duplicateRank), MCCL_TEST_CASE(countMismatch), MCCL_TEST_CASE(abortFlagEndsWait),
               MCCL_TEST_CASE(deadPeer), MCCL_TEST_CASE(tcpAcrossPosedHosts), MCCL_TEST_CASE(socketIfname),
               MCCL_TEST_CASE(tcpRendezvousTimesOut), MCCL_TEST_CASE(tcpDeadPeer),
               MCCL_TEST_CASE(rootPortOutsideEphemeral), MCCL_TEST_CASE(tcpAcrossPosedHostsWatched),
               MCCL_TEST_CASE(watchSeesDeath), MCCL_TEST_CASE(watchGoodbyeIsNoDeath), MCCL_TEST_CASE(strangerSilent),
               MCCL_TEST_CASE(strangerGarbage), MCCL_TEST_CASE(strangerTcp), MCCL_TEST_CASE(acceptDeadline),
               MCCL_TEST_CASE(zombiePeerIsGone), MCCL_TEST_CASE(sameTagInSendOrder))
