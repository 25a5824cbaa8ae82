// Lab 07: point-to-point sends and receives to any peer, grouped (NCCL 2.28.9 src/collectives.cc
// ncclSend / ncclRecv; src/enqueue.cc p2pTaskAppend, scheduleP2pTasksToPlan, addP2pToPlan;
// src/group.cc ncclP2PPreconnectFunc; src/transport.cc ncclTransportP2pConnect / P2pSetup).
// A call takes a group's tasks. It connects what they need and is not connected yet: for a peer,
// every point-to-point channel, on connIndex 1 (lab 06's mcclTransportP2pConnect + P2pSetup, P2P
// then SHM), so the peer's matching call connects the other ends at the same time. It then cuts the
// tasks into works by NCCL's schedule (round r: the send to rank + r with the receive from rank - r;
// a peer's k-th send and k-th receive in pass k), and launches the byte kernel (sendrecv.cu) over
// them, MCCL_P2P_MAX_WORKS works a launch: the arguments packed as its one parameter, a dependent
// grid as the allreduce's (launch.c), no host synchronisation.
#include <stdint.h>
#include <string.h>
#include "mccl_channel.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"
#include "mccl_prims.h"
#include "mccl_sendrecv.h"
#include "sendrecv_args.h"

extern void mcclSendRecvKernel(struct mcclSendRecvArgs args);

// SIMPLE's copies want many threads (as the ring collectives).
#define SR_THREADS 512

// Point-to-point channels: a power of two (NCCL's p2pnChannels, rounded down here: only the
// communicator's channels exist).
static int p2pNChannels(const mcclLabComm* comm) {
  int n = 1;
  while (n * 2 <= comm->nChannels) n *= 2;
  return n;
}

// The channel of a round's part 0: the round's bits reversed (NCCL's ncclP2pChannelBaseForRound on
// one node), so consecutive rounds start far apart and a group's rounds spread over the channels.
static int p2pChannelBase(int round, int nP2p) {
  int bits = 0, base = 0;
  while ((1 << bits) < nP2p) bits++;
  for (int b = 0; b < bits; b++)
    if (round & (1 << b)) base |= 1 << (bits - 1 - b);
  return base;
}

// Channels a direction of `bytes` is cut over (NCCL's addP2pToPlan): at least nMin parts when the
// bytes allow parts of stepSize/8, doubled up to nMax while parts exceed 32 steps. Both ends of a
// transfer compute it from the same byte count, so they agree.
static int p2pNParts(size_t bytes, int nMin, int nMax, size_t stepSize) {
  if (bytes == 0) return 0;
  const size_t minPart = stepSize / 8, maxPart = stepSize * 32;
  size_t n = (bytes + minPart - 1) / minPart;
  if (n > (size_t)nMin) n = (size_t)nMin;
  size_t part = (bytes + n - 1) / n;
  if (part < minPart) part = minPart;
  while (part > maxPart && n <= (size_t)nMax / 2) {
    n *= 2;
    part = (bytes + n - 1) / n;
  }
  return (int)n;
}

// Round of a task: a send to peer runs in round (peer - rank) mod n, a receive from peer in
// (rank - peer) mod n.
static int p2pRound(const mcclLabP2pTask* t, int rank, int n) {
  return t->isSend ? (t->peer - rank + n) % n : (rank - t->peer + n) % n;
}

// The next task of (isSend, peer) from *cursor on, or -1.
static int nextTask(const mcclLabP2pTask* tasks, int nTasks, int isSend, int peer, int* cursor) {
  for (int i = *cursor; i < nTasks; i++)
    if (tasks[i].isSend == isSend && tasks[i].peer == peer) {
      *cursor = i + 1;
      return i;
    }
  *cursor = nTasks;
  return -1;
}

static mcclResult_t checkTasks(const mcclLabP2pTask* tasks, int nTasks, const mcclLabComm* comm) {
  MCCL_ARGCHECK(comm != NULL, "SendRecv: comm is NULL");
  MCCL_ARGCHECK(nTasks >= 0, "SendRecv: nTasks %d (must be >= 0)", nTasks);
  MCCL_ARGCHECK(nTasks == 0 || tasks != NULL, "SendRecv: tasks is NULL with nTasks %d", nTasks);
  const int rank = comm->rank;
  for (int i = 0; i < nTasks; i++) {
    const mcclLabP2pTask* t = &tasks[i];
    MCCL_ARGCHECK(t->isSend == 0 || t->isSend == 1, "SendRecv: tasks[%d].isSend %d (0 or 1)", i, t->isSend);
    MCCL_ARGCHECK(t->peer >= 0 && t->peer < comm->nRanks, "SendRecv: tasks[%d].peer %d (ranks 0 .. %d)", i, t->peer,
                  comm->nRanks - 1);
    MCCL_ARGCHECK(t->bytes == 0 || t->buff != NULL, "SendRecv: tasks[%d].buff is NULL with %zu bytes", i, t->bytes);
  }
  // To oneself: the k-th send needs the k-th receive, of the same size (NCCL refuses the unpaired).
  int sc = 0, rc = 0;
  for (;;) {
    int s = nextTask(tasks, nTasks, 1, rank, &sc), r = nextTask(tasks, nTasks, 0, rank, &rc);
    if (s < 0 && r < 0) break;
    if (s < 0 || r < 0 || tasks[s].bytes != tasks[r].bytes) {
      WARN(
          "Invalid usage: rank %d: a send to itself needs the receive from itself of the same size in the same group "
          "(send %s%zu bytes, receive %s%zu bytes)",
          rank, s < 0 ? "missing " : "", s < 0 ? (size_t)0 : tasks[s].bytes, r < 0 ? "missing " : "",
          r < 0 ? (size_t)0 : tasks[r].bytes);
      return mcclInvalidUsage;
    }
  }
  return mcclSuccess;
}

// Connect, on every point-to-point channel, the directions to peers that are not connected yet
// (NCCL: p2pTaskAppend marks connectSend/connectRecv, the group end runs ncclTransportP2pSetup on
// connIndex 1). The peer's matching tasks mark the other ends, so both setups pair up.
static mcclResult_t p2pConnect(const mcclLabP2pTask* tasks, int nTasks, mcclLabComm* comm) {
  const int nP2p = p2pNChannels(comm);
  int any = 0;
  for (int i = 0; i < nTasks; i++) {
    const mcclLabP2pTask* t = &tasks[i];
    if (t->peer == comm->rank) continue;
    const int base = p2pChannelBase(p2pRound(t, comm->rank, comm->nRanks), nP2p);
    for (int part = 0; part < nP2p; part++) {
      const int c = (base + part) & (nP2p - 1);
      MCCLCHECK(mcclTransportP2pConnect(&comm->ctx, c, t->isSend ? 0 : 1, &t->peer, t->isSend ? 1 : 0, &t->peer,
                                        MCCL_P2P_CONN_INDEX));
    }
  }
  for (int p = 0; p < comm->nRanks && !any; p++) any = comm->ctx.connectSend[p] || comm->ctx.connectRecv[p];
  if (!any) return mcclSuccess;
  INFO(MCCL_INIT, "rank %d: connecting point-to-point channels (connIndex %d) for a group of %d task(s)", comm->rank,
       MCCL_P2P_CONN_INDEX, nTasks);
  return mcclTransportP2pSetup(&comm->ctx, NULL, MCCL_P2P_CONN_INDEX);
}

static mcclResult_t p2pLaunch(struct mcclSendRecvArgs* a, mcclLabComm* comm, cudaStream_t stream) {
  cudaFunction_t fn;
  MCCLCHECK(mcclDevGetFunction(comm->cudaDev, (const void*)mcclSendRecvKernel, &fn));
  void* params[] = {a};
  MCCLCHECK(mcclDevLaunchDependent(fn, a->nP2pChannels, SR_THREADS, stream, params));
  a->nWorks = 0;
  return mcclSuccess;
}

mcclResult_t mcclLabSendRecv(const mcclLabP2pTask* tasks, int nTasks, mcclLabComm* comm, cudaStream_t stream) {
  MCCLCHECK(checkTasks(tasks, nTasks, comm));
  const int rank = comm->rank, n = comm->nRanks;
  if (__atomic_load_n(comm->abortFlag, __ATOMIC_ACQUIRE)) {
    WARN("Invalid usage: rank %d's communicator was aborted", rank);
    return mcclInvalidUsage;
  }
  if (nTasks == 0) return mcclSuccess;
  MCCLCHECK(p2pConnect(tasks, nTasks, comm));

  struct mcclSendRecvArgs a;
  memset(&a, 0, sizeof(a));
  const int nP2p = p2pNChannels(comm);
  a.nP2pChannels = nP2p;
  // The ring's chunking (NCCL's send and receive move one slot per step, ProtoSimple<1, 1> in
  // src/device/sendrecv.h: measured slower here, lab 07 README).
  a.chunkSteps = MCCL_DEV_DEFAULT_CHUNKSTEPS;
  a.sliceSteps = MCCL_DEV_DEFAULT_SLICESTEPS;
  a.rank = rank;
  a.abortFlag = comm->abortFlagDev;
  a.trace = mcclParamKernelTrace() != 0;
  for (int c = 0; c < nP2p; c++) a.devPeers[c] = comm->ctx.channels[c].devPeers;
  // NCCL's nChannelsMin: every channel when all peers fit, else fewer parts per peer to start with.
  int nMin = nP2p;
  while (nMin * n > nP2p && nMin > 1) nMin /= 2;
  const size_t stepSize = (size_t)comm->ctx.buffSizes[MCCL_P2P_CONN_INDEX][MCCL_PROTO_SIMPLE] / MCCL_STEPS;
  const int64_t llParam = mcclParamP2pLlThreshold();
  uint64_t llThreshold = llParam > 0 ? (uint64_t)llParam : 0;
  // NET's receiving proxy takes an LL step into a SIMPLE slot (lab 08, as comm.c's agreeProtocols): with
  // point-to-point SIMPLE slots smaller than LL slots (a small MCCL_P2P_BUFFSIZE), everything moves as SIMPLE.
  if (comm->ctx.buffSizes[MCCL_P2P_CONN_INDEX][MCCL_PROTO_LL] >
      comm->ctx.buffSizes[MCCL_P2P_CONN_INDEX][MCCL_PROTO_SIMPLE])
    llThreshold = 0;

  int sendCur[MCCL_LAB_MAX_RANKS], recvCur[MCCL_LAB_MAX_RANKS];
  memset(sendCur, 0, sizeof(sendCur));
  memset(recvCur, 0, sizeof(recvCur));
  int left = nTasks;
  while (left > 0) {  // pass k takes each peer's k-th send and k-th receive
    int took = 0;
    for (int round = 0; round < n; round++) {
      const int sendPeer = (rank + round) % n, recvPeer = (rank - round + n) % n;
      const int s = nextTask(tasks, nTasks, 1, sendPeer, &sendCur[sendPeer]);
      const int r = nextTask(tasks, nTasks, 0, recvPeer, &recvCur[recvPeer]);
      if (s < 0 && r < 0) continue;
      took += (s >= 0) + (r >= 0);
      struct mcclP2pWork w;
      memset(&w, 0, sizeof(w));
      w.sendRank = s >= 0 ? sendPeer : -1;
      w.recvRank = r >= 0 ? recvPeer : -1;
      w.sendAddr = s >= 0 ? tasks[s].buff : NULL;
      w.recvAddr = r >= 0 ? tasks[r].buff : NULL;
      w.sendBytes = s >= 0 ? tasks[s].bytes : 0;
      w.recvBytes = r >= 0 ? tasks[r].bytes : 0;
      w.nSendParts = p2pNParts(w.sendBytes, nMin, nP2p, stepSize);
      w.nRecvParts = p2pNParts(w.recvBytes, nMin, nP2p, stepSize);
      w.channelBase = p2pChannelBase(round, nP2p);
      if (w.sendBytes > 0 && w.sendBytes <= (uint64_t)w.nSendParts * llThreshold) w.llMask |= MCCL_P2P_SEND_LL;
      if (w.recvBytes > 0 && w.recvBytes <= (uint64_t)w.nRecvParts * llThreshold) w.llMask |= MCCL_P2P_RECV_LL;
      // Nothing to move (zero bytes, or an in-place copy to oneself, which NCCL skips too).
      if (w.nSendParts == 0 && w.nRecvParts == 0) continue;
      if (round == 0 && w.sendAddr == (const void*)w.recvAddr) continue;
      TRACE(MCCL_COLL, "rank %d: round %d: send %zu bytes to %d (%s), recv %zu bytes from %d (%s), channels from %d",
            rank, round, (size_t)w.sendBytes, w.sendRank, (w.llMask & MCCL_P2P_SEND_LL) ? "LL" : "SIMPLE",
            (size_t)w.recvBytes, w.recvRank, (w.llMask & MCCL_P2P_RECV_LL) ? "LL" : "SIMPLE", w.channelBase);
      a.works[a.nWorks++] = w;
      if (a.nWorks == MCCL_P2P_MAX_WORKS) MCCLCHECK(p2pLaunch(&a, comm, stream));
    }
    if (took == 0) {
      WARN("Internal error: rank %d: %d point-to-point task(s) left unscheduled", rank, left);
      return mcclInternalError;
    }
    left -= took;
  }
  if (a.nWorks > 0) MCCLCHECK(p2pLaunch(&a, comm, stream));
  return mcclSuccess;
}
