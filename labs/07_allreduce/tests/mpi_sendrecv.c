// Lab 07's point-to-point (mcclLabSend / mcclLabRecv in a group) across processes under mpirun (2, 3
// and 4 ranks): all-to-all in one group (self included) on every dtype's sizes with counts 0, 1, odd
// and 1 MiB in all, calls made in a scrambled order; out-of-order peer sets (rank r sends to r+2, two
// messages to one peer); sizes that put a work's send and receive on different protocols (LL and
// SIMPLE) under three MCCL_P2P_LL_THRESHOLD values; over SHM (MCCL_P2P_DISABLE=1); bad input refused
// before anything is connected or launched (by the call, or by the group's end); and a send whose
// receive never comes: the wait ends with an abort, in connection setup and in the kernel. Each rank
// checks what it received from each peer.
#include <pthread.h>
#include <time.h>
#include "ar_mpi_util.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "mccl_utils.h"

// One send or receive of a group: `bytes` of buff to or from peer.
struct srTask {
  int isSend;
  int peer;
  void* buff;
  size_t bytes;
};

// The tasks as one group, in order: mcclLabGroupStart, mcclLabSend or mcclLabRecv of `bytes` uint8
// elements per task, mcclLabGroupEnd. Returns the group end's result; *callRes gets the first call's
// error (mcclSuccess if every call was accepted).
static mcclResult_t srGroup(const struct srTask* t, int n, mcclLabComm* comm, cudaStream_t stream,
                            mcclResult_t* callRes) {
  mcclResult_t first = mcclLabGroupStart();
  for (int i = 0; i < n; i++) {
    mcclResult_t r = t[i].isSend ? mcclLabSend(t[i].buff, t[i].bytes, mcclUint8, t[i].peer, comm, stream)
                                 : mcclLabRecv(t[i].buff, t[i].bytes, mcclUint8, t[i].peer, comm, stream);
    if (first == mcclSuccess) first = r;
  }
  *callRes = first;
  return mcclLabGroupEnd();
}

// A group whose every call is accepted and whose end succeeds.
#define SR_EXPECT_OK(t, n, comm, stream)                    \
  do {                                                      \
    mcclResult_t call_;                                     \
    EXPECT_OK(srGroup((t), (n), (comm), (stream), &call_)); \
    EXPECT_OK(call_);                                       \
  } while (0)

// Byte i of what `from` sends to `to` under seed.
static unsigned char srByte(uint64_t seed, int from, int to, size_t i) {
  uint64_t x =
      seed * 0x9e3779b97f4a7c15ull + (uint64_t)(from * 64 + to) * 0xbf58476d1ce4e5b9ull + i * 0x94d049bb133111ebull;
  return (unsigned char)((x >> 29) ^ (x >> 41));
}

static void setUpOrSkip(struct arMpi* m, int nChannels, size_t bytes) {
  if (mcclTestMpiDevice() < 0) SKIP("no CUDA device");
  arMpiSetUp(m, nChannels, bytes, mcclLocalTransports);
}

// One all-to-all of `bytes` per pair: block p of send goes to rank p, block p of recv comes from rank
// p. Tasks are posted in a scrambled order (the schedule, not the call order, pairs them).
static void allToAll(struct arMpi* m, size_t bytes, uint64_t seed, const char* what) {
  CHECK_STOPPED();
  const int rank = m->comm->rank, n = m->comm->nRanks;
  unsigned char* h = (unsigned char*)m->host;
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < bytes; i++) h[(size_t)p * bytes + i] = srByte(seed, rank, p, i);
  if (bytes) EXPECT_CUDA_OK(mcclTestCopyToDevice(m->send, h, (size_t)n * bytes));
  EXPECT_CUDA_OK(mcclTestMemset(m->recv, 0x5a, m->bytes));
  struct srTask t[2 * MCCL_LAB_MAX_RANKS];
  int k = 0;
  for (int j = 0; j < 2 * n; j++) {
    int i = (j * 7 + rank) % (2 * n);  // a permutation: 7 is prime to 2n for n < 7
    int p = i / 2;
    if (i % 2)
      t[k++] = (struct srTask){0, p, (char*)m->recv + (size_t)p * bytes, bytes};
    else
      t[k++] = (struct srTask){1, p, (char*)m->send + (size_t)p * bytes, bytes};
  }
  SR_EXPECT_OK(t, k, m->comm, m->stream);
  EXPECT_CUDA_OK(cudaStreamSynchronize(m->stream));
  EXPECT_CUDA_OK(cudaMemcpy(h, m->recv, m->bytes, cudaMemcpyDeviceToHost));
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < bytes; i++)
      if (h[(size_t)p * bytes + i] != srByte(seed, p, rank, i)) {
        mcclTestFailAt(__FILE__, __LINE__,
                       "%s, %zu bytes a pair: rank %d: byte %zu from rank %d: expected 0x%02x, got 0x%02x", what, bytes,
                       rank, i, p, srByte(seed, p, rank, i), h[(size_t)p * bytes + i]);
        return;
      }
  for (size_t b = (size_t)n * bytes; b < m->bytes; b++)
    if (h[b] != 0x5a) {
      mcclTestFailAt(__FILE__, __LINE__, "%s, %zu bytes a pair: rank %d wrote byte %zu beyond the blocks", what, bytes,
                     rank, b);
      return;
    }
}

// Every dtype's element size, counts 0, 1, odd and 1 MiB in all (split between the peers).
static void allToAllEveryType(void) {
  const int n = mcclTestMpiSize();
  const size_t big = (1u << 20) / (size_t)n;
  struct arMpi m;
  setUpOrSkip(&m, 2, (size_t)n * big + 64);
  for (int ty = 0; ty < mcclNumTypes && !mcclTestMpiAnyStopped(); ty++) {
    const size_t es = mcclTypeSize((mcclDataType_t)ty);
    const size_t counts[4] = {0, 1, 1001, big / es};
    char what[64];
    snprintf(what, sizeof(what), "all-to-all %s", mcclTypeName((mcclDataType_t)ty));
    // One count per type, all four on the first and last types.
    for (int c = 0; c < 4; c++)
      if (ty == 0 || ty == mcclNumTypes - 1 || c == ty % 4)
        allToAll(&m, counts[c] * es, mcclTestSeed() + (uint64_t)(ty * 4 + c), what);
  }
  arMpiTearDown(&m);
}

// Peers out of ring order: rank r sends to r+2 and receives from r-2 (its own rank with 2 ranks), and
// two messages to r+1 in one group arrive in order; small FIFOs so each takes many steps.
static void outOfOrderPeers(void) {
  arSmallFifos(1);
  struct arMpi m;
  setUpOrSkip(&m, 2, 3 * 40000);
  CHECK_STOPPED();
  const int rank = m.comm->rank, n = m.comm->nRanks;
  const int to2 = (rank + 2) % n, from2 = (rank - 2 + 2 * n) % n;
  const int to1 = (rank + 1) % n, from1 = (rank - 1 + n) % n;
  const size_t sz[3] = {40000, 777, 12345};
  unsigned char* h = (unsigned char*)m.host;
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < sz[k]; i++) h[k * 40000 + i] = srByte(mcclTestSeed() + (uint64_t)k, rank, k ? to1 : to2, i);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(m.send, h, 3 * 40000));
  EXPECT_CUDA_OK(mcclTestMemset(m.recv, 0, 3 * 40000));
  char* s = (char*)m.send;
  char* r = (char*)m.recv;
  struct srTask t[6] = {{0, from1, r + 40000, sz[1]}, {1, to2, s, sz[0]},         {1, to1, s + 40000, sz[1]},
                        {0, from2, r, sz[0]},         {1, to1, s + 80000, sz[2]}, {0, from1, r + 80000, sz[2]}};
  SR_EXPECT_OK(t, 6, m.comm, m.stream);
  EXPECT_CUDA_OK(cudaStreamSynchronize(m.stream));
  EXPECT_CUDA_OK(cudaMemcpy(h, m.recv, 3 * 40000, cudaMemcpyDeviceToHost));
  for (int k = 0; k < 3 && !mcclTestStopped(); k++)
    for (size_t i = 0; i < sz[k]; i++)
      if (h[k * 40000 + i] != srByte(mcclTestSeed() + (uint64_t)k, k ? from1 : from2, rank, i)) {
        mcclTestFailAt(__FILE__, __LINE__, "message %d (%zu bytes from rank %d): rank %d: byte %zu wrong", k, sz[k],
                       k ? from1 : from2, rank, i);
        break;
      }
  arMpiTearDown(&m);
  arSmallFifos(0);
}

// A ring of sends whose sizes differ by rank: odd ranks send 300000 bytes (SIMPLE), even ranks
// 9000 + rank (LL under the default MCCL_P2P_LL_THRESHOLD), so a rank may send as LL lines and
// receive in SIMPLE slots, or the reverse, in one work; with MCCL_P2P_LL_THRESHOLD 0 everything is
// SIMPLE, with 1 MiB everything LL. Small FIFOs: an LL message takes 18 steps of 8 slots.
static size_t mixedBytes(int r) {
  return r % 2 ? 300000 : 9000 + (size_t)r;
}
static void mixedProtocols(void) {
  const char* thresholds[3] = {NULL, "0", "1048576"};
  for (int t = 0; t < 3 && !mcclTestMpiAnyStopped(); t++) {
    if (thresholds[t])
      setenv("MCCL_P2P_LL_THRESHOLD", thresholds[t], 1);
    else
      unsetenv("MCCL_P2P_LL_THRESHOLD");
    mcclParamResetAll();
    arSmallFifos(1);
    struct arMpi m;
    setUpOrSkip(&m, 2, 300000);
    const int rank = m.comm->rank, n = m.comm->nRanks;
    const int to = (rank + 1) % n, from = (rank - 1 + n) % n;
    const size_t sb = mixedBytes(rank), rb = mixedBytes(from);
    unsigned char* h = (unsigned char*)m.host;
    for (int round = 0; round < 2 && !mcclTestStopped(); round++) {  // twice: the second reuses the steps
      const uint64_t seed = mcclTestSeed() + (uint64_t)(t * 2 + round);
      for (size_t i = 0; i < sb; i++) h[i] = srByte(seed, rank, to, i);
      EXPECT_CUDA_OK(mcclTestCopyToDevice(m.send, h, sb));
      EXPECT_CUDA_OK(mcclTestMemset(m.recv, 0x5a, 300000));
      struct srTask tk[2] = {{0, from, m.recv, rb}, {1, to, m.send, sb}};
      SR_EXPECT_OK(tk, 2, m.comm, m.stream);
      EXPECT_CUDA_OK(cudaStreamSynchronize(m.stream));
      EXPECT_CUDA_OK(cudaMemcpy(h, m.recv, 300000, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < 300000; i++) {
        const unsigned char want = i < rb ? srByte(seed, from, rank, i) : 0x5a;
        if (h[i] != want) {
          mcclTestFailAt(__FILE__, __LINE__,
                         "MCCL_P2P_LL_THRESHOLD=%s, round %d: rank %d: byte %zu of %zu from rank %d (it sent %zu to "
                         "rank %d): expected 0x%02x, got 0x%02x",
                         thresholds[t] ? thresholds[t] : "(default)", round, rank, i, rb, from, sb, to, want, h[i]);
          break;
        }
      }
    }
    arMpiTearDown(&m);
    arSmallFifos(0);
  }
  unsetenv("MCCL_P2P_LL_THRESHOLD");
  mcclParamResetAll();
}

// One connection used by two thread layouts in one launch: in pairs (0, 1), (2, 3), the even rank
// sends two messages to the odd one and receives one back. The even rank's first work sends and
// receives (the block split into a send group and a receive group), its second only sends (the
// whole block), on the same send connection; the odd rank does the same on its receive connection.
// The second work's role threads must see the step counters the first work's posters saved (the
// kernel's block-wide meeting between works). SIMPLE (default threshold) and LL (1 MiB threshold),
// small FIFOs so each message takes many steps. A rank without a partner posts nothing.
// One round of connectionAcrossLayouts on m. It may return at a failed check: its caller tears m down on
// every rank all the same, since a rank without a partner launches nothing and would otherwise go on alone.
static void layoutsRound(struct arMpi* m, const char* threshold, uint64_t seed) {
  const size_t sz[3] = {60000, 50000, 40000};  // even -> odd twice, odd -> even once; SIMPLE by default
  const int rank = m->comm->rank, n = m->comm->nRanks;
  const int partner = rank ^ 1, even = rank % 2 == 0;
  unsigned char* h = (unsigned char*)m->host;
  // Message k goes at offset k * 60000 of the sender's send buffer and the receiver's recv buffer.
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < sz[k]; i++) h[k * 60000 + i] = srByte(seed + (uint64_t)k, rank, partner, i);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(m->send, h, 3 * 60000));
  EXPECT_CUDA_OK(mcclTestMemset(m->recv, 0x5a, 3 * 60000));
  char* s = (char*)m->send;
  char* r = (char*)m->recv;
  struct srTask tk[3];
  int nt = 0;
  if (partner < n) {
    for (int k = 0; k < 3; k++) {
      const int isSend = (k < 2) == even;
      tk[nt].isSend = isSend;
      tk[nt].peer = partner;
      tk[nt].buff = (isSend ? s : r) + k * 60000;
      tk[nt].bytes = sz[k];
      nt++;
    }
  }
  SR_EXPECT_OK(tk, nt, m->comm, m->stream);
  EXPECT_CUDA_OK(cudaStreamSynchronize(m->stream));
  EXPECT_CUDA_OK(cudaMemcpy(h, m->recv, 3 * 60000, cudaMemcpyDeviceToHost));
  for (int k = 0; k < 3 && partner < n && !mcclTestStopped(); k++) {
    const int received = (k < 2) != even;
    for (size_t i = 0; i < 60000; i++) {
      const unsigned char want = received && i < sz[k] ? srByte(seed + (uint64_t)k, partner, rank, i) : 0x5a;
      if (h[k * 60000 + i] != want) {
        mcclTestFailAt(__FILE__, __LINE__,
                       "MCCL_P2P_LL_THRESHOLD=%s: rank %d: message %d (%zu bytes, %s rank %d): byte %zu: expected "
                       "0x%02x, got 0x%02x",
                       threshold ? threshold : "(default)", rank, k, sz[k], received ? "from" : "sent to", partner, i,
                       want, h[k * 60000 + i]);
        break;
      }
    }
  }
}

static void connectionAcrossLayouts(void) {
  const char* thresholds[2] = {NULL, "1048576"};
  for (int t = 0; t < 2 && !mcclTestMpiAnyStopped(); t++) {
    if (thresholds[t])
      setenv("MCCL_P2P_LL_THRESHOLD", thresholds[t], 1);
    else
      unsetenv("MCCL_P2P_LL_THRESHOLD");
    arSmallFifos(1);
    struct arMpi m;
    setUpOrSkip(&m, 2, 3 * 60000);
    layoutsRound(&m, thresholds[t], mcclTestSeed() + (uint64_t)t);
    arMpiTearDown(&m);
    arSmallFifos(0);
  }
  unsetenv("MCCL_P2P_LL_THRESHOLD");
  mcclParamResetAll();
}

// Over SHM (MCCL_P2P_DISABLE=1): the point-to-point connections choose SHM too.
static void allToAllShm(void) {
  setenv("MCCL_P2P_DISABLE", "1", 1);
  mcclParamResetAll();
  const int n = mcclTestMpiSize();
  struct arMpi m;
  setUpOrSkip(&m, 2, (size_t)n * 20011);
  allToAll(&m, 20011, mcclTestSeed(), "all-to-all over SHM");
  const int peer = (m.comm->rank + 1) % n;
  if (!mcclTestStopped() && n > 1) EXPECT_EQ(m.comm->ctx.channels[0].peers[peer].send[1].transport, TRANSPORT_SHM);
  unsetenv("MCCL_P2P_DISABLE");
  mcclParamResetAll();
  arMpiTearDown(&m);
}

// Bad input, refused before anything is connected or launched, so no rank waits for another: an
// argument the call checks (a peer out of range, a NULL buffer with bytes, a NULL communicator) makes
// the call return mcclInvalidArgument and its group's end return it too, running none of the group's
// calls; what only the whole group shows (a send to self without its receive, or the reverse, or of
// another size; sends and receives on several streams) makes the group's end return mcclInvalidUsage.
static void badInput(void) {
  struct arMpi m;
  setUpOrSkip(&m, 2, 4096);
  CHECK_STOPPED();
  const int rank = m.comm->rank, n = m.comm->nRanks;
  const uint64_t launches0 = m.comm->nLaunches;
  cudaStream_t other = NULL;
  EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  const struct srTask ok = {1, rank, m.send, 16}, okr = {0, rank, m.recv, 16};
  struct srTask bad[2];
  mcclResult_t call;
  bad[0] = ok;
  bad[1] = (struct srTask){0, n, m.recv, 16};
  EXPECT_RES(srGroup(bad, 2, m.comm, m.stream, &call), mcclInvalidArgument);
  EXPECT_RES(call, mcclInvalidArgument);
  bad[1] = (struct srTask){1, -1, m.send, 16};
  EXPECT_RES(srGroup(bad, 2, m.comm, m.stream, &call), mcclInvalidArgument);
  EXPECT_RES(call, mcclInvalidArgument);
  bad[0] = okr;
  bad[1] = (struct srTask){1, (rank + 1) % n, NULL, 16};
  EXPECT_RES(srGroup(bad, 2, m.comm, m.stream, &call), mcclInvalidArgument);
  EXPECT_RES(call, mcclInvalidArgument);
  bad[1] = (struct srTask){0, (rank + 1) % n, NULL, 16};
  EXPECT_RES(srGroup(bad, 2, m.comm, m.stream, &call), mcclInvalidArgument);
  EXPECT_RES(call, mcclInvalidArgument);
  EXPECT_RES(srGroup(&ok, 1, NULL, m.stream, &call), mcclInvalidArgument);
  EXPECT_RES(call, mcclInvalidArgument);
  // Outside a group the call is a group of one: the same errors from the call itself.
  EXPECT_RES(mcclLabSend(m.send, 16, mcclUint8, n, m.comm, m.stream), mcclInvalidArgument);
  EXPECT_RES(mcclLabRecv(m.recv, 16, mcclUint8, -1, m.comm, m.stream), mcclInvalidArgument);
  EXPECT_RES(mcclLabRecv(NULL, 16, mcclUint8, rank, m.comm, m.stream), mcclInvalidArgument);
  EXPECT_RES(mcclLabSend(m.send, 16, mcclUint8, rank, NULL, m.stream), mcclInvalidArgument);
  EXPECT_RES(mcclLabSend(m.send, 16, mcclUint8, rank, m.comm, m.stream), mcclInvalidUsage);  // to self, no receive
  EXPECT_RES(srGroup(&ok, 1, m.comm, m.stream, &call), mcclInvalidUsage);                    // to self, no receive
  EXPECT_OK(call);
  EXPECT_RES(srGroup(&okr, 1, m.comm, m.stream, &call), mcclInvalidUsage);  // from self, no send
  EXPECT_OK(call);
  bad[0] = ok;
  bad[1] = okr;
  bad[1].bytes = 8;
  EXPECT_RES(srGroup(bad, 2, m.comm, m.stream, &call), mcclInvalidUsage);  // sizes differ
  EXPECT_OK(call);
  // The send and its receive on two streams (one launch carries a communicator's point-to-point works).
  EXPECT_OK(mcclLabGroupStart());
  EXPECT_OK(mcclLabSend(m.send, 16, mcclUint8, rank, m.comm, m.stream));
  EXPECT_OK(mcclLabRecv(m.recv, 16, mcclUint8, rank, m.comm, other));
  EXPECT_RES(mcclLabGroupEnd(), mcclInvalidUsage);
  // A NULL buffer with 0 bytes is fine, and so is an empty group.
  bad[0] = (struct srTask){1, rank, NULL, 0};
  bad[1] = (struct srTask){0, rank, NULL, 0};
  SR_EXPECT_OK(bad, 2, m.comm, m.stream);
  SR_EXPECT_OK(NULL, 0, m.comm, m.stream);
  EXPECT_CUDA_OK(cudaStreamSynchronize(m.stream));
  EXPECT_EQ(m.comm->nLaunches, launches0);  // nothing above had bytes to move
  // A good group after all these runs (the failed groups left no task behind).
  unsigned char h[16], back[16];
  for (int i = 0; i < 16; i++) h[i] = srByte(mcclTestSeed(), rank, rank, (size_t)i);
  EXPECT_CUDA_OK(mcclTestCopyToDevice(m.send, h, 16));
  EXPECT_CUDA_OK(mcclTestMemset(m.recv, 0, 16));
  bad[0] = ok;
  bad[1] = okr;
  SR_EXPECT_OK(bad, 2, m.comm, m.stream);
  EXPECT_CUDA_OK(cudaStreamSynchronize(m.stream));
  EXPECT_EQ(m.comm->nLaunches, launches0 + 1);
  EXPECT_CUDA_OK(cudaMemcpy(back, m.recv, 16, cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(back, h, 16);
  EXPECT_CUDA_OK(cudaStreamDestroy(other));
  arMpiTearDown(&m);
}

static void* abortLater(void* p) {
  struct timespec ts = {0, 300 * 1000 * 1000};
  nanosleep(&ts, NULL);
  mcclLabCommAbort((mcclLabComm*)p);
  return NULL;
}

// Rank 0 sends to rank 1, which posts no receive. Not yet connected: the setup waits for rank 1's
// half until the abort flag (raised from a thread) ends it with an error. Connected (after an
// all-to-all): the kernel waits, with more bytes than the FIFOs hold, until the abort ends it.
static void unmatchedSend(void) {
  const int n = mcclTestMpiSize();
  for (int connected = 0; connected < 2 && !mcclTestStopped(); connected++) {
    arSmallFifos(1);
    struct arMpi m;
    setUpOrSkip(&m, 2, (size_t)n * 4096 + (1 << 18));
    if (connected) allToAll(&m, 4096, mcclTestSeed(), "all-to-all before the unmatched send");
    CHECK_STOPPED();
    if (m.comm->rank == 0) {
      const size_t bytes = 1 << 18;  // 64 FIFOs' worth
      double t0 = mcclClockSec();
      if (!connected) {
        pthread_t th;
        EXPECT_EQ(pthread_create(&th, NULL, abortLater, m.comm), 0);
        EXPECT_TRUE(mcclLabSend(m.send, bytes, mcclUint8, 1, m.comm, m.stream) != mcclSuccess);
        pthread_join(th, NULL);
      } else {
        EXPECT_EQ(*m.comm->status, 0);  // no kernel aborted yet
        EXPECT_OK(mcclLabSend(m.send, bytes, mcclUint8, 1, m.comm, m.stream));
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        EXPECT_CUDA(cudaStreamQuery(m.stream), cudaErrorNotReady);  // still waiting for rank 1
        EXPECT_OK(mcclLabCommAbort(m.comm));
        EXPECT_CUDA_OK(cudaStreamSynchronize(m.stream));
        EXPECT_EQ(*m.comm->status, mcclDevStatusAborted);  // the kernel left through the abort, and said so
      }
      EXPECT_LT(mcclClockSec() - t0, 10.0);
    }
    // Every rank leaves through the abort path: its peers' states no longer match.
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_OK(mcclLabCommAbort(m.comm));
    arMpiTearDown(&m);
    arSmallFifos(0);
  }
}

MCCL_TEST_MAIN_MPI(MCCL_TEST_CASE(allToAllEveryType), MCCL_TEST_CASE(outOfOrderPeers), MCCL_TEST_CASE(mixedProtocols),
                   MCCL_TEST_CASE(connectionAcrossLayouts), MCCL_TEST_CASE(allToAllShm), MCCL_TEST_CASE(badInput),
                   MCCL_TEST_CASE(unmatchedSend))
