// Lab 04: what every transport shares: peer records, connectors, the in-thread proxy call and the
// user-thread progress loop. NCCL 2.28.9 spreads these over src/init.cc (fillInfo),
// src/transport.cc and src/proxy.cc (ncclProxyCallBlocking, progressOps).
#include <sched.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"
#include "mccl_shm.h"
#include "mccl_transport.h"

// The connection structs' layout is pinned by static asserts in mccl_conn.h, in every language that
// includes it; each transport checks its own connect information fits MCCL_CONNECT_SIZE in its header.

mcclResult_t mcclFillPeerInfo(int rank, int cudaDev, mcclPeerInfo* info) {
  MCCL_ARGCHECK(info != NULL, "info is NULL");
  MCCL_ARGCHECK(rank >= 0, "rank %d (must be >= 0)", rank);
  MCCL_ARGCHECK(cudaDev >= 0, "cudaDev %d (must be >= 0)", cudaDev);
  mcclPeerInfo p;
  memset(&p, 0, sizeof(p));
  p.rank = rank;
  p.pid = (int)getpid();
  p.cudaDev = cudaDev;
  p.hostHash = mcclGetHostHash();
  p.pidNsHash = mcclGetPidNsHash();
  struct stat sb;
  // Two containers on one host see the same host hash but maybe not the same /dev/shm (NCCL's shmDev).
  p.shmDev = stat("/dev/shm", &sb) == 0 ? (uint64_t)sb.st_dev : 0;
  *info = p;
  return mcclSuccess;
}

mcclResult_t mcclComputeBuffSizes(int buffSizes[MCCL_MAX_CONNS][MCCL_NUM_PROTOCOLS]) {
  MCCL_ARGCHECK(buffSizes != NULL, "buffSizes is NULL");
  int simple;
  MCCLCHECK(mcclShmBuffSize(&simple));
  int64_t ll = mcclParamLlBuffsize();
  // A multiple of 4096 keeps every LL slot (ll / MCCL_STEPS) a whole number of 16-byte lines.
  MCCL_ARGCHECK(ll >= 4096 && ll % 4096 == 0 && ll <= (1LL << 30),
                "MCCL_LL_BUFFSIZE %lld (must be a multiple of "
                "4096 from 4096 to 1 GiB)",
                (long long)ll);
  int64_t p2p = mcclParamP2pBuffsize();
  MCCL_ARGCHECK(p2p >= 4096 && p2p % 4096 == 0 && p2p <= MCCL_SHM_MAX_BUFFSIZE,
                "MCCL_P2P_BUFFSIZE %lld (must be a multiple of 4096 from 4096 to 1 GiB)", (long long)p2p);
  int64_t ll128 = mcclParamLl128Buffsize();
  // Whole 2 KiB warp slices in each of the MCCL_STEPS slots.
  MCCL_ARGCHECK(ll128 >= MCCL_STEPS * MCCL_LL128_SLICE_BYTES && ll128 % (MCCL_STEPS * MCCL_LL128_SLICE_BYTES) == 0 &&
                    ll128 <= (1LL << 30),
                "MCCL_LL128_BUFFSIZE %lld (must be a multiple of %d from %d to 1 GiB)", (long long)ll128,
                MCCL_STEPS * MCCL_LL128_SLICE_BYTES, MCCL_STEPS * MCCL_LL128_SLICE_BYTES);
  for (int c = 0; c < MCCL_MAX_CONNS; c++) {
    buffSizes[c][MCCL_PROTO_LL] = (int)ll;
    // The rings' connections only: point-to-point sends run SIMPLE or LL, as NCCL's.
    buffSizes[c][MCCL_PROTO_LL128] = c == MCCL_P2P_CONN_INDEX ? 0 : (int)ll128;
    buffSizes[c][MCCL_PROTO_SIMPLE] = c == MCCL_P2P_CONN_INDEX ? (int)p2p : simple;
  }
  return mcclSuccess;
}

mcclResult_t mcclTransportBuffSizes(const struct mcclTransportCtx* ctx, int connIndex,
                                    int buffSizes[MCCL_NUM_PROTOCOLS]) {
  MCCL_ARGCHECK(ctx != NULL && buffSizes != NULL, "ctx %p, buffSizes %p (both needed)", (const void*)ctx,
                (void*)buffSizes);
  MCCL_ARGCHECK(connIndex >= 0 && connIndex < MCCL_MAX_CONNS, "connIndex %d (0 .. %d)", connIndex, MCCL_MAX_CONNS - 1);
  for (int p = 0; p < MCCL_NUM_PROTOCOLS; p++) {
    const int b = ctx->buffSizes[connIndex][p];
    MCCL_ARGCHECK((b >= 4096 || (p == MCCL_PROTO_LL128 && b == 0)) && b % 4096 == 0,
                  "ctx->buffSizes[%d][%d] %d (a multiple of 4096, 0 allowed for LL128; from mcclTransportCtxInit)",
                  connIndex, p, b);
  }
  memcpy(buffSizes, ctx->buffSizes[connIndex], sizeof(ctx->buffSizes[connIndex]));
  return mcclSuccess;
}

// No table of transports here: this lab knows only SHM. The table is a static array of the layer that
// sees every transport of a program (lab 06's, lab 08's), handed down (mccl_transport.h says why).
int mcclTransportIndex(struct mcclTransport* const* transports, const struct mcclTransport* transport) {
  for (int t = 0; transports != NULL && transport != NULL && t < MCCL_NUM_TRANSPORTS; t++)
    if (transports[t] == transport) return t;
  return TRANSPORT_UNDEFINED;
}

mcclResult_t mcclTransportCtxInit(struct mcclTransportCtx* ctx, int rank, int nRanks, int cudaDev) {
  MCCL_ARGCHECK(ctx != NULL, "ctx is NULL");
  MCCL_ARGCHECK(nRanks >= 1, "nRanks %d (must be >= 1)", nRanks);
  MCCL_ARGCHECK(rank >= 0 && rank < nRanks, "rank %d (must be 0 .. %d)", rank, nRanks - 1);
  MCCL_ARGCHECK(cudaDev >= 0, "cudaDev %d (must be >= 0)", cudaDev);
  struct mcclTransportCtx c;
  memset(&c, 0, sizeof(c));
  c.rank = rank;
  c.nRanks = nRanks;
  c.cudaDev = cudaDev;
  c.onlyTransport = TRANSPORT_UNDEFINED;
  MCCLCHECK(mcclComputeBuffSizes(c.buffSizes));
  *ctx = c;
  return mcclSuccess;
}

mcclResult_t mcclConnectorInit(struct mcclConnector* connector, int transport, const struct mcclTransport* ops,
                               int send, int rank) {
  MCCL_ARGCHECK(connector != NULL, "connector is NULL");
  MCCL_ARGCHECK(ops != NULL, "ops is NULL");
  MCCL_ARGCHECK(transport >= 0 && transport < MCCL_NUM_TRANSPORTS, "transport %d for \"%.8s\" (an index 0 .. %d)",
                transport, ops->name, MCCL_NUM_TRANSPORTS - 1);
  MCCL_ARGCHECK(send == 0 || send == 1, "send %d (must be 0 or 1)", send);
  memset(connector, 0, sizeof(*connector));
  connector->send = send;
  connector->transport = transport;
  connector->transportComm = send ? &ops->send : &ops->recv;
  connector->proxyConn = &connector->proxyConnStorage;
  connector->proxyConn->send = send;
  connector->proxyConn->rank = rank;
  connector->proxyConn->transport = transport;
  connector->proxyConn->tcomm = connector->transportComm;
  connector->proxyCall = mcclProxyCallDirect;
  return mcclSuccess;
}

mcclResult_t mcclProxyCallDirect(struct mcclConnector* connector, int msgType, const void* req, int reqSize, void* resp,
                                 int respSize) {
  MCCL_ARGCHECK(connector != NULL && connector->proxyConn != NULL, "connector %p has no proxy connection",
                (void*)connector);
  struct mcclProxyConnection* pc = connector->proxyConn;
  const struct mcclTransportComm* t = pc->tcomm;
  MCCL_ARGCHECK(t != NULL, "connector %p was not initialised (no transport)", (void*)connector);
  int done = 0;
  switch (msgType) {
    case mcclProxyMsgSetup:
      if (t->proxySetup == NULL) return mcclSuccess;
      // A hook may answer "not yet" (NCCL's async proxy ops); here we simply call it again.
      while (!done) MCCLCHECK(t->proxySetup(pc, NULL, req, reqSize, resp, respSize, &done));
      return mcclSuccess;
    case mcclProxyMsgConnect:
      if (t->proxyConnect == NULL) return mcclSuccess;
      while (!done) MCCLCHECK(t->proxyConnect(pc, NULL, req, reqSize, resp, respSize, &done));
      return mcclSuccess;
    case mcclProxyMsgFree:
      return t->proxyFree ? t->proxyFree(pc, NULL) : mcclSuccess;
    default:
      WARN("Invalid argument: msgType %d (expected setup %d, connect %d or free %d)", msgType, mcclProxyMsgSetup,
           mcclProxyMsgConnect, mcclProxyMsgFree);
      return mcclInvalidArgument;
  }
}

mcclResult_t mcclConnectorFree(struct mcclConnector* connector) {
  if (connector == NULL || connector->transportComm == NULL) return mcclSuccess;
  mcclResult_t res = mcclSuccess, r;
  // The proxy side first: its copies and progress may still use the peer memory the user side
  // maps, so that memory is unmapped only once the proxy has let go of it (NCCL, too, frees its
  // proxy connections before the connectors, in commFree).
  if (connector->proxyCall) {
    r = connector->proxyCall(connector, mcclProxyMsgFree, NULL, 0, NULL, 0);
    if (r != mcclSuccess) res = r;
  }
  if (connector->transportComm->free) {
    r = connector->transportComm->free(connector);
    if (r != mcclSuccess && res == mcclSuccess) res = r;
  }
  connector->connected = 0;
  return res;
}

mcclResult_t mcclProxyOpInit(struct mcclProxyOp* op, struct mcclConnector* connector, void* buff, size_t nbytes,
                             volatile uint32_t* abortFlag) {
  MCCL_ARGCHECK(op != NULL, "op is NULL");
  MCCL_ARGCHECK(connector != NULL, "connector is NULL");
  MCCL_ARGCHECK(buff != NULL || nbytes == 0, "buff is NULL with nbytes %zu", nbytes);
  MCCL_ARGCHECK(nbytes <= (size_t)SSIZE_MAX, "nbytes %zu is above SSIZE_MAX", nbytes);
  if (!connector->connected || connector->proxyConn == NULL) {
    WARN("Invalid usage: connector %p is not connected", (void*)connector);
    return mcclInvalidUsage;
  }
  memset(op, 0, sizeof(*op));
  op->connection = connector->proxyConn;
  op->nbytes = (ssize_t)nbytes;
  op->chunkSteps = op->sliceSteps = 1;
  op->protocol = MCCL_PROTO_SIMPLE;
  op->ceBuff = buff;
  op->abortFlag = abortFlag;
  return mcclSuccess;
}

mcclResult_t mcclProxyOpToArgs(const struct mcclProxyOp* op, struct mcclProxyArgs* args) {
  MCCL_ARGCHECK(op != NULL && args != NULL, "op %p or args %p is NULL", (const void*)op, (void*)args);
  MCCL_ARGCHECK(op->connection && op->connection->tcomm && op->connection->tcomm->proxyProgress,
                "op %p has no connection with a progress hook", (const void*)op);
  memset(args, 0, sizeof(*args));
  struct mcclProxySubArgs* sub = &args->subs[0];
  sub->connection = op->connection;
  sub->channelId = op->channelId;
  sub->nbytes = op->nbytes;
  sub->ceBuff = op->ceBuff;
  sub->nsteps = op->nsteps > 0 ? (uint64_t)op->nsteps : 0;  // 0: the hook derives it when it starts
  args->nsubs = 1;
  args->progress = op->connection->tcomm->proxyProgress;
  args->opCount = op->opCount;
  args->sliceSteps = op->sliceSteps;
  args->chunkSteps = op->chunkSteps;
  args->protocol = op->protocol;
  args->abortFlag = op->abortFlag;
  args->timeoutMs = mcclParamShmTimeout();
  args->state = mcclProxyOpReady;
  return mcclSuccess;
}

mcclResult_t mcclProxyOpsWait(const struct mcclProxyOp* ops, int nops, struct mcclProxyArgs* args) {
  MCCL_ARGCHECK(ops != NULL, "ops is NULL");
  MCCL_ARGCHECK(nops >= 1, "nops %d (must be >= 1)", nops);
  mcclResult_t res = mcclSuccess;
  struct mcclProxyArgs* owned = NULL;
  if (args == NULL) {
    owned = args = (struct mcclProxyArgs*)calloc((size_t)nops, sizeof(*args));
    if (args == NULL) {
      WARN("Out of memory for %d proxy args", nops);
      return mcclSystemError;
    }
  }
  for (int i = 0; i < nops; i++) MCCLCHECKGOTO(mcclProxyOpToArgs(&ops[i], &args[i]), res, out);
  // An op is finished once its hook leaves it in state mcclProxyOpNone, which is what this loop skips
  // (NCCL's progressOps drops ops in ncclProxyOpNone from its list the same way).
  for (int left = nops; left > 0;) {
    int idle = 1;
    left = 0;
    for (int i = 0; i < nops; i++) {
      if (args[i].state == mcclProxyOpNone) continue;
      MCCLCHECKGOTO(args[i].progress(NULL, &args[i]), res, out);
      if (!args[i].idle) idle = 0;
      if (args[i].state != mcclProxyOpNone) left++;
    }
    // Nothing moved: let the peer and the copy threads have the core (as NCCL's proxy loop does).
    if (idle && left > 0) sched_yield();
  }
out:
  free(owned);
  return res;
}
