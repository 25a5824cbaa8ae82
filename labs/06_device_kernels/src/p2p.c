// Lab 06: the P2P transport, as NCCL 2.28.9 src/transport/p2p.cc in write mode with cuMem
// (P2P_CUMEM): p2pCanConnect, p2p{Send,Recv}{Setup,Connect,Free}, p2p{Send,Recv}Proxy{Setup,Free},
// ncclP2pAllocateShareableBuffer / ncclP2pImportShareableBuffer. Each side's proxy allocates that
// side's memory on its device; the peer maps it on its own device. No copy engine, no progress hook:
// kernels drive these connections.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_ipc.h"
#include "mccl_p2p.h"
#include "mccl_param.h"
#include "p2p_wire.h"

// User side of either direction (NCCL's p2pResources): this side's own memory (owned by the proxy
// connection) and the peer's, mapped here.
struct p2pResources {
  void* ownDevMem;  // sender: its mcclSendMem; receiver: its mcclRecvMem + FIFOs
  void* remDevMem;  // the peer's allocation mapped on this device (mcclIpcUnmap)
  int buffSizes[MCCL_NUM_PROTOCOLS];
};

// Proxy side (NCCL's p2pCuMemProxyInfo).
struct p2pProxyInfo {
  struct mcclP2pBuff buff;
};

static int sameProcess(int pid, uint64_t hostHash) {
  return pid == (int)getpid() && hostHash == mcclGetHostHash();
}

// ---- canConnect ------------------------------------------------------------------------------

static mcclResult_t p2pCanConnect(int* ret, const struct mcclTransportCtx* ctx, const mcclPeerInfo* info1,
                                  const mcclPeerInfo* info2) {
  (void)ctx;
  MCCL_ARGCHECK(ret != NULL, "ret is NULL");
  MCCL_ARGCHECK(info1 != NULL, "info1 is NULL");
  MCCL_ARGCHECK(info2 != NULL, "info2 is NULL");
  *ret = 0;
  if (mcclParamP2pDisable() == 1) return mcclSuccess;
  if (info1->hostHash != info2->hostHash) return mcclSuccess;
  // The memory crosses as a cuMem POSIX fd; NCCL's other path (cudaIpcGetMemHandle) is not built here.
  if (!mcclCuMemEnable()) {
    INFO(MCCL_INIT | MCCL_P2P, "P2P needs cuMem allocations, MCCL_CUMEM_ENABLE: ranks %d and %d use another transport",
         info1->rank, info2->rank);
    return mcclSuccess;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return mcclSuccess;
  }
  if (info1->cudaDev < 0 || info1->cudaDev >= n || info2->cudaDev < 0 || info2->cudaDev >= n) {
    INFO(MCCL_INIT | MCCL_P2P, "P2P: device %d or %d is not visible here (%d devices)", info1->cudaDev, info2->cudaDev,
         n);
    return mcclSuccess;
  }
  if (info1->cudaDev == info2->cudaDev) {
    *ret = 1;  // the driver says a device is not its own peer, yet it can always map its own memory
    return mcclSuccess;
  }
  int p2p = 0;
  if (cudaDeviceCanAccessPeer(&p2p, info1->cudaDev, info2->cudaDev) != cudaSuccess) {
    (void)cudaGetLastError();
    INFO(MCCL_INIT | MCCL_P2P, "peer query failed between dev %d and dev %d", info1->cudaDev, info2->cudaDev);
    return mcclSuccess;
  }
  if (!p2p) INFO(MCCL_INIT | MCCL_P2P, "no P2P access between dev %d and dev %d", info1->cudaDev, info2->cudaDev);
  *ret = p2p ? 1 : 0;
  return mcclSuccess;
}

// ---- setup: each side asks its proxy for device memory ----------------------------------------

// Whether a connection between two devices may carry LL128. LL128 trusts every 128-byte line of a warp's
// store to arrive whole, which NVLink guarantees and PCIe does not, so NCCL enables it by default only
// where the GPUs' path is NVLink (src/graph/tuning.cc: typeIntra <= PATH_NVB), a path type it learns from
// NVML. The CUDA runtime names no link type; what it does tell, without NVML, is whether the pair has
// native atomics (cudaDevP2PAttrNativeAtomicSupported): peers over NVLink do, peers over PCIe do not.
// That is the test. Two ranks on one device share its memory, no link between: capable. Asked with the
// lower device first, so both ends of a connection agree.
static int p2pLl128Capable(int dev1, int dev2) {
  if (dev1 == dev2) return 1;
  const int lo = dev1 < dev2 ? dev1 : dev2, hi = dev1 < dev2 ? dev2 : dev1;
  int atomics = 0;
  if (cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, lo, hi) != cudaSuccess) {
    (void)cudaGetLastError();
    atomics = 0;
  }
  return atomics == 1;
}

// The receiver's FIFOs follow its page in protocol order, as NCCL lays out buffs[p]: LL, LL128, SIMPLE.
static size_t p2pFifoBytes(const struct p2pResources* r) {
  size_t n = 0;
  for (int p = 0; p < MCCL_NUM_PROTOCOLS; p++) n += (size_t)r->buffSizes[p];
  return n;
}
static void p2pSetFifos(struct mcclConnInfo* conn, const struct p2pResources* r, char* fifos) {
  for (int p = 0; p < MCCL_NUM_PROTOCOLS; p++) {
    conn->buffs[p] = r->buffSizes[p] > 0 ? fifos : NULL;
    fifos += r->buffSizes[p];
  }
  conn->stepSize = r->buffSizes[MCCL_PROTO_SIMPLE] / MCCL_STEPS;
  conn->llStepSize = r->buffSizes[MCCL_PROTO_LL] / MCCL_STEPS;
  conn->ll128StepSize = r->buffSizes[MCCL_PROTO_LL128] / MCCL_STEPS;
  conn->dataOffsets = 1;  // only the two kernels touch the slots: the sender may shift a slice (prims_simple.cuh)
}

static mcclResult_t p2pSetup(int send, struct mcclTransportCtx* ctx, const mcclPeerInfo* myInfo,
                             const mcclPeerInfo* peerInfo, struct mcclConnect* connectInfo, struct mcclConnector* c,
                             int channelId, int connIndex) {
  MCCL_ARGCHECK(ctx != NULL, "ctx is NULL");
  MCCL_ARGCHECK(myInfo != NULL, "myInfo is NULL");
  MCCL_ARGCHECK(peerInfo != NULL, "peerInfo is NULL");
  MCCL_ARGCHECK(connectInfo != NULL, "connectInfo is NULL");
  MCCL_ARGCHECK(c != NULL && c->proxyCall != NULL, "connector %p not initialised (mcclConnectorInit)", (void*)c);
  MCCL_ARGCHECK(c->send == send, "connector is a %s connector, used with the %s hooks", c->send ? "send" : "recv",
                send ? "send" : "recv");
  if (c->transportResources) {
    WARN("Invalid usage: connector %p is already set up", (void*)c);
    return mcclInvalidUsage;
  }
  // EXERCISE(06.p2p_setup)
  int cudaDev = -1;
  CUDACHECK(cudaGetDevice(&cudaDev));
  if (cudaDev != myInfo->cudaDev)
    INFO(MCCL_P2P, "P2P setup on device %d for a rank that records device %d", cudaDev, myInfo->cudaDev);
  mcclResult_t res = mcclSuccess;
  struct p2pResources* r = (struct p2pResources*)calloc(1, sizeof(*r));
  if (r == NULL) {
    WARN("Out of memory allocating P2P resources");
    return mcclSystemError;
  }
  // The communicator's sizes for this connIndex (NCCL's comm->buffSizes), the same on both sides.
  MCCLCHECKGOTO(mcclTransportBuffSizes(ctx, connIndex, r->buffSizes), res, fail);
  // No LL128 FIFO without NVLink: lab 07 then refuses MCCL_PROTO=ll128 on a ring with this edge, by name.
  if (r->buffSizes[MCCL_PROTO_LL128] > 0 && !p2pLl128Capable(myInfo->cudaDev, peerInfo->cudaDev)) {
    r->buffSizes[MCCL_PROTO_LL128] = 0;
    INFO(MCCL_INIT | MCCL_P2P, "P2P dev %d <-> dev %d: no native atomics, so no NVLink: no LL128 FIFO", myInfo->cudaDev,
         peerInfo->cudaDev);
  }
  struct mcclP2pRequest req;
  memset(&req, 0, sizeof(req));
  // Write mode, receiver-side FIFOs (NCCL's default without P2P read): the sender stores into the
  // receiver's memory over NVLink/PCIe, the receiver reads its own.
  req.size = send ? sizeof(struct mcclSendMem) : sizeof(struct mcclRecvMem) + p2pFifoBytes(r);
  // LL and LL128 lines carry their own flags, so both FIFOs start zeroed (no flag matches step 0's).
  req.llBuffSize = send ? 0 : r->buffSizes[MCCL_PROTO_LL] + r->buffSizes[MCCL_PROTO_LL128];
  req.initialStep = c->initialStep;
  struct mcclP2pConnectInfo info;
  memset(&info, 0, sizeof(info));
  MCCLCHECKGOTO(c->proxyCall(c, mcclProxyMsgSetup, &req, sizeof(req), &info.buff, sizeof(info.buff)), res, fail);
  // The proxy runs in this process (its thread, or this one): its address is ours to use.
  r->ownDevMem = info.buff.directPtr;
  info.rank = myInfo->rank;
  info.pid = (int)getpid();
  info.hostHash = mcclGetHostHash();
  info.cudaDev = cudaDev;
  memset(connectInfo, 0, sizeof(*connectInfo));
  memcpy(connectInfo->data, &info, sizeof(info));
  c->transportResources = r;
  INFO(MCCL_INIT | MCCL_P2P, "Channel %02d/%d : %d[%d] -> %d[%d] via P2P/CUMEM (%s side, %zu bytes on dev %d)",
       channelId, connIndex, send ? myInfo->rank : peerInfo->rank, send ? cudaDev : peerInfo->cudaDev,
       send ? peerInfo->rank : myInfo->rank, send ? peerInfo->cudaDev : cudaDev, send ? "send" : "recv", info.buff.size,
       cudaDev);
  return mcclSuccess;
fail:
  free(r);
  return res;
  // END EXERCISE(06.p2p_setup)
}

static mcclResult_t p2pSendSetup(struct mcclTransportCtx* ctx, const void* graph, const mcclPeerInfo* myInfo,
                                 const mcclPeerInfo* peerInfo, struct mcclConnect* connectInfo,
                                 struct mcclConnector* send, int channelId, int connIndex) {
  (void)graph;
  return p2pSetup(1, ctx, myInfo, peerInfo, connectInfo, send, channelId, connIndex);
}

static mcclResult_t p2pRecvSetup(struct mcclTransportCtx* ctx, const void* graph, const mcclPeerInfo* myInfo,
                                 const mcclPeerInfo* peerInfo, struct mcclConnect* connectInfo,
                                 struct mcclConnector* recv, int channelId, int connIndex) {
  (void)graph;
  return p2pSetup(0, ctx, myInfo, peerInfo, connectInfo, recv, channelId, connIndex);
}

// ---- connect: map the peer's allocation on this device ----------------------------------------

// NCCL's p2pMap + ncclP2pImportShareableBuffer. The fd comes from the owner's proxy (GetFd); an
// owner in this process exports it here (NCCL maps the handle directly; the fd route keeps one
// import path, and lab 03's registry of imports, for both cases).
static mcclResult_t p2pImport(struct mcclConnector* c, const struct mcclP2pConnectInfo* info, size_t needed,
                              void** devMem) {
  if (info->buff.size < needed) {
    WARN(
        "Peer rank %d offers a %zu-byte P2P buffer (handle 0x%llx), this side needs %zu: is MCCL_BUFFSIZE / "
        "MCCL_LL_BUFFSIZE the same in both processes?",
        info->rank, info->buff.size, (unsigned long long)info->buff.handle, needed);
    return mcclRemoteError;
  }
  // EXERCISE(06.p2p_import)
  int cudaDev = -1;
  CUDACHECK(cudaGetDevice(&cudaDev));
  int fd = -1;
  if (sameProcess(info->pid, info->hostHash)) {
    CUCHECK(cuMemExportToShareableHandle(&fd, info->buff.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  } else {
    if (c->getPeerFd == NULL) {
      WARN(
          "Invalid usage: peer rank %d shares P2P memory, but the connector has no getPeerFd to fetch its fd "
          "(mcclProxyConnect installs one)",
          info->rank);
      return mcclInvalidUsage;
    }
    MCCLCHECK(c->getPeerFd(c->getPeerFdCtx, info->rank, &info->buff.handle, (int)sizeof(info->buff.handle), &fd));
  }
  mcclIpcDesc desc;
  memset(&desc, 0, sizeof(desc));
  desc.magic = MCCL_IPC_DESC_MAGIC;
  desc.handleType = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  desc.size = info->buff.size;
  desc.ownerPid = info->pid;
  desc.ownerDev = info->cudaDev;
  mcclResult_t res = mcclIpcImport(&desc, fd, cudaDev, devMem);
  close(fd);  // the mapping holds the memory; the fd was only its passport
  return res;
  // END EXERCISE(06.p2p_import)
}

static mcclResult_t p2pConnectCheck(const struct mcclConnect* connectInfo, struct mcclConnector* c, int send,
                                    struct p2pResources** rp) {
  MCCL_ARGCHECK(connectInfo != NULL, "connectInfo is NULL");
  MCCL_ARGCHECK(c != NULL && c->send == send, "%s connector %p is NULL or a %s connector", send ? "send" : "recv",
                (void*)c, send ? "recv" : "send");
  struct p2pResources* r = (struct p2pResources*)c->transportResources;
  if (r == NULL || c->connected) {
    WARN("Invalid usage: %s connector %p is %s", send ? "send" : "recv", (void*)c,
         r ? "already connected" : "not set up");
    return mcclInvalidUsage;
  }
  *rp = r;
  return mcclSuccess;
}

static mcclResult_t p2pSendConnect(struct mcclTransportCtx* ctx, const struct mcclConnect* connectInfo, int nranks,
                                   int rank, struct mcclConnector* send) {
  (void)ctx;
  (void)nranks;
  (void)rank;
  struct p2pResources* r;
  MCCLCHECK(p2pConnectCheck(connectInfo, send, 1, &r));
  struct mcclP2pConnectInfo info;
  MCCLCHECK(mcclP2pConnectInfoDecode(connectInfo->data, sizeof(connectInfo->data), &info));
  MCCLCHECK(p2pImport(send, &info, sizeof(struct mcclRecvMem) + p2pFifoBytes(r), &r->remDevMem));
  struct mcclRecvMem* rem = (struct mcclRecvMem*)r->remDevMem;
  struct mcclSendMem* own = (struct mcclSendMem*)r->ownDevMem;
  // Write mode: the sender stores into the receiver's FIFOs, connFifo and tail, and polls its own head.
  p2pSetFifos(&send->conn, r, (char*)(rem + 1));
  send->conn.tail = &rem->tail;
  send->conn.connFifo = rem->connFifo;
  send->conn.head = &own->head;
  send->conn.step = send->initialStep;
  send->connected = 1;
  return mcclSuccess;
}

static mcclResult_t p2pRecvConnect(struct mcclTransportCtx* ctx, const struct mcclConnect* connectInfo, int nranks,
                                   int rank, struct mcclConnector* recv) {
  (void)ctx;
  (void)nranks;
  (void)rank;
  struct p2pResources* r;
  MCCLCHECK(p2pConnectCheck(connectInfo, recv, 0, &r));
  struct mcclP2pConnectInfo info;
  MCCLCHECK(mcclP2pConnectInfoDecode(connectInfo->data, sizeof(connectInfo->data), &info));
  MCCLCHECK(p2pImport(recv, &info, sizeof(struct mcclSendMem), &r->remDevMem));
  struct mcclSendMem* rem = (struct mcclSendMem*)r->remDevMem;
  struct mcclRecvMem* own = (struct mcclRecvMem*)r->ownDevMem;
  // The receiver reads its own FIFOs, connFifo and tail, and returns credit in the sender's head.
  p2pSetFifos(&recv->conn, r, (char*)(own + 1));
  recv->conn.tail = &own->tail;
  recv->conn.connFifo = own->connFifo;
  recv->conn.head = &rem->head;
  recv->conn.step = recv->initialStep;
  recv->connected = 1;
  return mcclSuccess;
}

static mcclResult_t p2pFree(struct mcclConnector* c) {
  if (c == NULL || c->transportResources == NULL) return mcclSuccess;
  struct p2pResources* r = (struct p2pResources*)c->transportResources;
  mcclResult_t res = mcclIpcUnmap(r->remDevMem);  // NULL (never connected) is a no-op
  free(r);
  c->transportResources = NULL;
  memset(&c->conn, 0, sizeof(c->conn));
  c->connected = 0;
  return res;
}

// ---- proxy hooks -----------------------------------------------------------------------------

// The new page (and the zeroed LL FIFO) must be in device memory before the peer can see it: copy
// on a private stream and wait for it, without synchronizing the device's other work.
static mcclResult_t p2pInitMemory(void* dev, const struct mcclP2pRequest* req, int send) {
  mcclResult_t res = mcclSuccess;
  cudaStream_t s = NULL;
  char page[MCCL_MEM_ALIGN];
  memset(page, 0, sizeof(page));
  if (send)
    ((struct mcclSendMem*)page)->head = req->initialStep;
  else
    ((struct mcclRecvMem*)page)->tail = req->initialStep;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDACHECKGOTO(cudaMemcpyAsync(dev, page, sizeof(page), cudaMemcpyHostToDevice, s), res, done);
  if (req->llBuffSize > 0)
    CUDACHECKGOTO(cudaMemsetAsync((char*)dev + sizeof(page), 0, (size_t)req->llBuffSize, s), res, done);
  CUDACHECKGOTO(cudaStreamSynchronize(s), res, done);
done:
  cudaStreamDestroy(s);
  return res;
}

static mcclResult_t p2pProxySetup(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState,
                                  const void* reqBuff, int reqSize, void* respBuff, int respSize, int* done) {
  (void)proxyState;
  MCCL_ARGCHECK(connection != NULL && reqBuff != NULL && respBuff != NULL && done != NULL,
                "NULL connection %p, req %p, resp %p or done %p", (void*)connection, reqBuff, respBuff, (void*)done);
  if (respSize != (int)sizeof(struct mcclP2pBuff)) {  // the request's length is its decoder's check
    WARN("P2P proxySetup: respSize %d, expected %zu", respSize, sizeof(struct mcclP2pBuff));
    return mcclInternalError;
  }
  if (connection->transportResources) {
    WARN("Invalid usage: P2P proxy connection %p is already set up", (void*)connection);
    return mcclInvalidUsage;
  }
  struct mcclP2pRequest req;
  MCCLCHECK(mcclP2pRequestDecode(reqBuff, (size_t)reqSize, connection->send, &req));
  struct p2pProxyInfo* pi = (struct p2pProxyInfo*)calloc(1, sizeof(*pi));
  if (pi == NULL) {
    WARN("Out of memory allocating P2P proxy resources");
    return mcclSystemError;
  }
  mcclResult_t res = mcclSuccess;
  void* ptr = NULL;
  CUmemGenericAllocationHandle handle = 0, retained = 0;
  size_t size = 0;
  // NCCL's ncclP2pAllocateShareableBuffer: exportable VMM memory on this (the proxy's) device.
  MCCLCHECKGOTO(mcclCuMemAlloc(&ptr, &handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, req.size), res, fail);
  // The peer maps the whole allocation: learn its size as rounded to the granularity.
  MCCLCHECKGOTO(mcclCuMemRetainHandle(ptr, &retained, NULL, NULL, &size), res, freeMem);
  cuMemRelease(retained);
  MCCLCHECKGOTO(p2pInitMemory(ptr, &req, connection->send), res, freeMem);
  pi->buff.directPtr = ptr;
  pi->buff.size = size;
  pi->buff.handle = handle;
  memcpy(respBuff, &pi->buff, sizeof(pi->buff));  // a byte buffer (lab 05 carries it over a socket)
  connection->transportResources = pi;
  connection->exportHandle = handle;  // lab 05's proxy answers GetFd for this handle only
  INFO(MCCL_P2P | MCCL_ALLOC, "P2P %s memory %p size %zu handle 0x%llx", connection->send ? "send" : "recv", ptr, size,
       (unsigned long long)handle);
  *done = 1;
  return mcclSuccess;
freeMem:
  mcclCuMemFree(ptr);
fail:
  free(pi);
  return res;
}

static mcclResult_t p2pProxyFree(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState) {
  (void)proxyState;
  if (connection == NULL || connection->transportResources == NULL) return mcclSuccess;
  struct p2pProxyInfo* pi = (struct p2pProxyInfo*)connection->transportResources;
  // Peers that mapped it keep the physical memory alive until they unmap (the driver counts references).
  mcclResult_t res = mcclCuMemFree(pi->buff.directPtr);
  free(pi);
  connection->transportResources = NULL;
  connection->exportHandle = 0;
  return res;
}

// NCCL's P2P has a progress hook only for its copy-engine mode (P2P_USE_CUDA_MEMCPY), which minccl
// does not build: a posted op on a P2P connection is a usage error, never a silent no-op.
static mcclResult_t p2pProxyProgress(struct mcclProxyState* proxyState, struct mcclProxyArgs* args) {
  (void)proxyState;
  WARN(
      "Invalid usage: proxy op on P2P connection %p: P2P connections are driven by kernels (lab 06), the proxy "
      "does not copy for them",
      (args && args->nsubs > 0) ? (void*)args->subs[0].connection : NULL);
  return mcclInvalidUsage;
}

struct mcclTransport mcclP2pTransport = {
    "P2P",
    p2pCanConnect,
    {p2pSendSetup, p2pSendConnect, p2pFree, p2pProxySetup, NULL, p2pProxyFree, p2pProxyProgress},
    {p2pRecvSetup, p2pRecvConnect, p2pFree, p2pProxySetup, NULL, p2pProxyFree, p2pProxyProgress},
    NULL,
};
