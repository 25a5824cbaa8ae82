// Lab 04: the SHM transport, as NCCL 2.28.9 src/transport/shm.cc: shareable host buffers
// (ncclShmAllocateShareableBuffer / ncclShmImportShareableBuffer / ncclShmIpcClose), the transport
// hooks (shmCanConnect, shm{Send,Recv}{Setup,Connect,Free}, shm{Send,Recv}Proxy{Setup,Connect,Free})
// and the copy-engine progress functions (shm{Send,Recv}ProxyProgress) driven from the host.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_host_alloc.h"
#include "mccl_param.h"
#include "mccl_shm.h"
#include "mccl_utils.h"
#include "shm_wire.h"

// ---- shareable host buffers ------------------------------------------------------------------

// /dev/shm segments made for peers of this same process (legacy forced). Every rank that will open
// one lives here, so its name is unlinked as soon as it is created and the importer opens it through
// the creator's descriptor (/proc/self/fd/N): a process killed at any moment of its setup leaves
// nothing in /dev/shm. Keyed by the name's suffix, the one field of the descriptor that crosses the
// wire (its decoder clears the creator's handle); a suffix is never registered twice.
typedef struct localSeg {
  mcclShmHandle_t handle;
  char suffix[7];
  struct localSeg* next;
} localSeg;
static pthread_mutex_t localSegLock = PTHREAD_MUTEX_INITIALIZER;
static localSeg* localSegs;

static void localSegForget(mcclShmHandle_t handle);

// Under localSegLock: the segment of this process named by suffix, or NULL.
static localSeg* localSegFind(const char* suffix) {
  for (localSeg* s = localSegs; s; s = s->next)
    if (strncmp(s->suffix, suffix, sizeof(s->suffix)) == 0) return s;
  return NULL;
}

// The creator's fd of a segment of this process, or -1 if the descriptor names no such segment.
static int localSegFd(const mcclShmIpcDesc_t* desc) {
  pthread_mutex_lock(&localSegLock);
  const localSeg* s = localSegFind(desc->legacy.shmSuffix);
  const int fd = s ? mcclShmGetFd(s->handle) : -1;
  pthread_mutex_unlock(&localSegLock);
  return fd;
}

// Record a created segment and unlink its name. Fails with mcclInternalError if the suffix is
// taken (mkstemp may pick the name of one we unlinked): the caller makes another.
static mcclResult_t localSegAdd(mcclShmHandle_t handle, const char* suffix) {
  localSeg* s = calloc(1, sizeof(*s));
  if (s == NULL) {
    WARN("Out of memory recording a shared memory segment");
    return mcclSystemError;
  }
  s->handle = handle;
  memcpy(s->suffix, suffix, sizeof(s->suffix));
  pthread_mutex_lock(&localSegLock);
  const int taken = localSegFind(suffix) != NULL;
  if (!taken) {
    s->next = localSegs;
    localSegs = s;
  }
  pthread_mutex_unlock(&localSegLock);
  if (taken) {
    free(s);
    return mcclInternalError;
  }
  mcclResult_t res = mcclShmUnlink(handle);
  if (res != mcclSuccess) localSegForget(handle);
  return res;
}

static void localSegForget(mcclShmHandle_t handle) {
  pthread_mutex_lock(&localSegLock);
  for (localSeg** ps = &localSegs; *ps; ps = &(*ps)->next) {
    if ((*ps)->handle != handle) continue;
    localSeg* s = *ps;
    *ps = s->next;
    free(s);
    break;
  }
  pthread_mutex_unlock(&localSegLock);
}

mcclResult_t mcclShmAllocateShareableBuffer(size_t size, int legacy, mcclShmIpcDesc_t* descOut, void** hptr,
                                            void** dptr) {
  MCCL_ARGCHECK(descOut != NULL, "descOut is NULL");
  MCCL_ARGCHECK(hptr != NULL, "hptr is NULL");
  MCCL_ARGCHECK(size > 0, "size is 0");
  mcclShmIpcDesc_t desc;
  memset(&desc, 0, sizeof(desc));
  void *h = NULL, *d = NULL;
  if (!legacy && mcclCuMemEnable() && mcclCuMemHostEnable()) {
    CUmemGenericAllocationHandle handle;
    MCCLCHECK(mcclCuMemHostAlloc(&h, &handle, size));
    desc.kind = MCCL_SHM_IPC_CUMEM;
    desc.cumem.type = mcclCuMemHandleType;
    desc.cumem.size = size;
    // The handle means nothing to the peer; it travels so the peer can ask us (our proxy, in lab 05)
    // to turn it into an fd, as NCCL's ncclProxyClientGetFdBlocking does.
    desc.cumem.handle = handle;
    desc.cumem.ptr = h;
    d = h;  // one address for host and device
    INFO(MCCL_SHM, "CUMEM allocated shareable host buffer %p size %zu", h, size);
  } else {
    char path[MCCL_SHM_PATH_MAX] = "";
    mcclShmHandle_t handle;
    for (;;) {
      path[0] = '\0';
      MCCLCHECK(mcclShmOpen(path, sizeof(path), size, &h, dptr ? &d : NULL, 1, &handle));
      memcpy(desc.legacy.shmSuffix, path + strlen(MCCL_SHM_PREFIX), sizeof(desc.legacy.shmSuffix) - 1);
      desc.legacy.shmSuffix[sizeof(desc.legacy.shmSuffix) - 1] = '\0';
      if (!legacy) break;
      // Its importers are in this process (see localSegs): the name can go now.
      mcclResult_t ar = localSegAdd(handle, desc.legacy.shmSuffix);
      if (ar == mcclSuccess) break;
      mcclShmClose(handle);
      if (ar != mcclInternalError) return ar;
    }
    desc.kind = MCCL_SHM_IPC_LEGACY;
    desc.legacy.shmSize = size;
    desc.legacy.handle = handle;
    INFO(MCCL_SHM, "MMAP allocated shareable host buffer %s%s size %zu ptr %p", path,
         legacy ? " (unlinked at once: its importers are in this process)" : "", size, h);
  }
  *descOut = desc;
  *hptr = h;
  if (dptr) *dptr = d;
  return mcclSuccess;
}

mcclResult_t mcclShmExportFd(const mcclShmIpcDesc_t* desc, int* fd) {
  MCCL_ARGCHECK(desc != NULL, "desc is NULL");
  MCCL_ARGCHECK(fd != NULL, "fd is NULL");
  MCCL_ARGCHECK(desc->kind == MCCL_SHM_IPC_CUMEM, "desc->kind %d (only a cuMem descriptor, kind %d, has an fd)",
                desc->kind, MCCL_SHM_IPC_CUMEM);
  MCCL_ARGCHECK(desc->cumem.type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                "desc->cumem.type %d (only POSIX fd handles are exported here)", (int)desc->cumem.type);
  int out = -1;
  CUCHECK(cuMemExportToShareableHandle(&out, desc->cumem.handle, desc->cumem.type, 0));
  *fd = out;
  return mcclSuccess;
}

static mcclResult_t importCuMem(const mcclShmIpcDesc_t* desc, int fd, void** hptr) {
  mcclResult_t res = mcclSuccess;
  CUmemGenericAllocationHandle handle;
  CUdevice dev;
  int cudaDev = 0, numaId = -1;
  size_t gran = 0, size = desc->cumem.size;
  CUmemAllocationProp prop;
  CUmemAccessDesc access[2];

  CUCHECK(cuMemImportFromShareableHandle(&handle, (void*)(uintptr_t)fd, desc->cumem.type));
  CUDACHECKGOTO(cudaGetDevice(&cudaDev), res, release);
  CUCHECKGOTO(cuDeviceGet(&dev, cudaDev), res, release);
  CUCHECKGOTO(cuDeviceGetAttribute(&numaId, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev), res, release);
  if (numaId < 0) numaId = 0;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = numaId;
  prop.requestedHandleTypes = desc->cumem.type;
  CUCHECKGOTO(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), res, release);
  size = (size + gran - 1) / gran * gran;  // the exporter rounded the same way
  // The importer's own device and its host both need a grant, exactly as for a local allocation.
  memset(access, 0, sizeof(access));
  access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access[0].location.id = dev;
  access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  access[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  access[1].location.id = numaId;
  access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  MCCLCHECKGOTO(mcclCuMemAllocAddr(hptr, handle, size, gran, access, 2), res, release);
  // The mapping keeps the import's reference; mcclCuMemHostFree drops it.
  INFO(MCCL_SHM, "CUMEM imported shareable host buffer size %zu ptr %p granularity %zu", size, *hptr, gran);
  return mcclSuccess;
release:
  cuMemRelease(handle);
  return res;
}

mcclResult_t mcclShmImportShareableBuffer(const mcclShmIpcDesc_t* desc, int fd, void** hptr, void** dptr,
                                          mcclShmIpcDesc_t* descOut) {
  MCCL_ARGCHECK(desc != NULL, "desc is NULL");
  MCCL_ARGCHECK(hptr != NULL, "hptr is NULL");
  MCCL_ARGCHECK(descOut != NULL, "descOut is NULL");
  mcclShmIpcDesc_t out;
  memset(&out, 0, sizeof(out));
  void *h = NULL, *d = NULL;
  MCCLCHECK(mcclShmIpcDescCheck(desc));
  if (desc->kind == MCCL_SHM_IPC_LEGACY) {
    char path[MCCL_SHM_PATH_MAX];
    const int localFd = localSegFd(desc);
    if (localFd >= 0)
      snprintf(path, sizeof(path), "/proc/self/fd/%d", localFd);
    else
      snprintf(path, sizeof(path), "%s%s", MCCL_SHM_PREFIX, desc->legacy.shmSuffix);
    mcclShmHandle_t handle;
    MCCLCHECK(mcclShmOpen(path, sizeof(path), desc->legacy.shmSize, &h, dptr ? &d : NULL, -1, &handle));
    out.kind = MCCL_SHM_IPC_LEGACY;
    memcpy(out.legacy.shmSuffix, desc->legacy.shmSuffix, sizeof(out.legacy.shmSuffix));
    out.legacy.shmSize = desc->legacy.shmSize;
    out.legacy.handle = handle;
    INFO(MCCL_SHM, "MMAP imported shareable host buffer %s size %zu ptr %p", path, desc->legacy.shmSize, h);
  } else {
    MCCL_ARGCHECK(fd >= 0 && fcntl(fd, F_GETFD) != -1, "fd %d is not an open descriptor (a cuMem descriptor needs "
                  "the fd its exporter sent)", fd);
    MCCLCHECK(importCuMem(desc, fd, &h));
    d = h;
    out.kind = MCCL_SHM_IPC_CUMEM;
    out.cumem.type = desc->cumem.type;
    out.cumem.size = desc->cumem.size;
    out.cumem.ptr = h;
  }
  *descOut = out;
  *hptr = h;
  if (dptr) *dptr = d;
  return mcclSuccess;
}

mcclResult_t mcclShmIpcClose(mcclShmIpcDesc_t* desc) {
  if (desc == NULL) return mcclSuccess;
  mcclResult_t res = mcclSuccess;
  if (desc->kind == MCCL_SHM_IPC_LEGACY) {
    localSegForget(desc->legacy.handle);
    res = mcclShmClose(desc->legacy.handle);
  } else if (desc->kind == MCCL_SHM_IPC_CUMEM) {
    res = mcclCuMemHostFree(desc->cumem.ptr);  // finds the handle from the pointer: ours or imported
  }
  memset(desc, 0, sizeof(*desc));
  return res;
}

mcclResult_t mcclShmBuffSize(int* buffSize) {
  MCCL_ARGCHECK(buffSize != NULL, "buffSize is NULL");
  int64_t b = mcclParamBuffsize();
  MCCL_ARGCHECK(b >= 4096 && b % 4096 == 0 && b <= MCCL_SHM_MAX_BUFFSIZE,
                "MCCL_BUFFSIZE %lld (must be a multiple of 4096 from 4096 to 1 GiB)", (long long)b);
  *buffSize = (int)b;
  return mcclSuccess;
}

// ---- transport resources ---------------------------------------------------------------------

// User side of a send connection (NCCL's shmSendResources).
struct shmSendResources {
  struct mcclRecvMem* remHostMem;
  struct mcclRecvMem* devRemHostMem;
  mcclShmIpcDesc_t remDesc;
  struct mcclSendMem* hostMem;
  struct mcclSendMem* devHostMem;
  int buffSizes[MCCL_NUM_PROTOCOLS];
};

// User side of a receive connection (NCCL's shmRecvResources).
struct shmRecvResources {
  struct mcclSendMem* remHostMem;
  struct mcclSendMem* devRemHostMem;
  mcclShmIpcDesc_t remDesc;
  struct mcclRecvMem* hostMem;
  struct mcclRecvMem* devHostMem;
  int buffSizes[MCCL_NUM_PROTOCOLS];
};

// Proxy side (NCCL's shmProxyInfo): the buffer this side allocated, and what progress needs.
struct shmProxyInfo {
  mcclShmIpcDesc_t desc;
  char* shmFifo;
  struct mcclSendMem* sendMem;
  struct mcclRecvMem* recvMem;
  int stepSize;
  uint64_t step;
  cudaStream_t stream;
  cudaEvent_t events[MCCL_STEPS];
  int nEvents;
};

// ---- canConnect ------------------------------------------------------------------------------

static mcclResult_t shmCanConnect(int* ret, const struct mcclTransportCtx* ctx, const mcclPeerInfo* info1,
                                  const mcclPeerInfo* info2) {
  (void)ctx;
  MCCL_ARGCHECK(ret != NULL, "ret is NULL");
  MCCL_ARGCHECK(info1 != NULL, "info1 is NULL");
  MCCL_ARGCHECK(info2 != NULL, "info2 is NULL");
  *ret = 0;
  if (mcclParamShmDisable() == 1) return mcclSuccess;
  TRACE(MCCL_INIT | MCCL_SHM, "peer1 hostHash %llx peer2 hostHash %llx", (unsigned long long)info1->hostHash,
        (unsigned long long)info2->hostHash);
  if (info1->hostHash != info2->hostHash) return mcclSuccess;
  // Same host but different /dev/shm (two containers): a file one creates the other cannot open.
  TRACE(MCCL_INIT | MCCL_SHM, "peer1 shmDev %llx peer2 shmDev %llx", (unsigned long long)info1->shmDev,
        (unsigned long long)info2->shmDev);
  if (info1->shmDev != info2->shmDev) return mcclSuccess;
  *ret = 1;
  return mcclSuccess;
}

// ---- setup: each side asks its proxy for a buffer --------------------------------------------

static int sameProcess(const mcclPeerInfo* a, const mcclPeerInfo* b) {
  return a->hostHash == b->hostHash && a->pid == b->pid;
}

static mcclResult_t shmSetup(int send, struct mcclTransportCtx* ctx, const mcclPeerInfo* myInfo,
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
  // EXERCISE(04.setup)
  mcclResult_t res = mcclSuccess;
  int buffSizes[MCCL_NUM_PROTOCOLS];
  MCCLCHECK(mcclTransportBuffSizes(ctx, connIndex, buffSizes));
  struct mcclShmRequest req;
  memset(&req, 0, sizeof(req));
  // Receiver-side locality (NCCL's default SHM_LOCALITY=2): the FIFOs live with their reader, after
  // the page in protocol order (LL, then SIMPLE), as NCCL lays out buffs[p].
  req.size = send ? sizeof(struct mcclSendMem)
                  : sizeof(struct mcclRecvMem) + (size_t)buffSizes[MCCL_PROTO_LL] +
                        (size_t)buffSizes[MCCL_PROTO_SIMPLE];
  // Peers in one process cannot pass themselves an fd through a proxy; NCCL uses /dev/shm there.
  req.legacy = sameProcess(myInfo, peerInfo);
  req.buffSize = buffSizes[MCCL_PROTO_SIMPLE];
  req.llBuffSize = send ? 0 : buffSizes[MCCL_PROTO_LL];
  req.initialStep = c->initialStep;
  struct mcclShmConnectInfo info;
  memset(&info, 0, sizeof(info));
  void* resources = calloc(1, send ? sizeof(struct shmSendResources) : sizeof(struct shmRecvResources));
  if (resources == NULL) {
    WARN("Out of memory allocating SHM resources");
    return mcclSystemError;
  }
  MCCLCHECKGOTO(c->proxyCall(c, mcclProxyMsgSetup, &req, sizeof(req), &info, sizeof(info)), res, fail);
  info.rank = myInfo->rank;
  if (send) {
    struct shmSendResources* r = (struct shmSendResources*)resources;
    r->hostMem = (struct mcclSendMem*)info.buf.hptr;
    r->devHostMem = (struct mcclSendMem*)info.buf.dptr;
    memcpy(r->buffSizes, buffSizes, sizeof(buffSizes));
  } else {
    struct shmRecvResources* r = (struct shmRecvResources*)resources;
    r->hostMem = (struct mcclRecvMem*)info.buf.hptr;
    r->devHostMem = (struct mcclRecvMem*)info.buf.dptr;
    memcpy(r->buffSizes, buffSizes, sizeof(buffSizes));
  }
  memset(connectInfo, 0, sizeof(*connectInfo));
  memcpy(connectInfo->data, &info, sizeof(info));
  c->transportResources = resources;
  INFO(MCCL_INIT | MCCL_SHM, "Channel %02d/%d : %d -> %d via SHM/%s (%s side, FIFOs LL %d + SIMPLE %d bytes)",
       channelId, connIndex, send ? myInfo->rank : peerInfo->rank, send ? peerInfo->rank : myInfo->rank,
       info.desc.kind == MCCL_SHM_IPC_CUMEM ? "cuMem" : "/dev/shm", send ? "send" : "recv", buffSizes[MCCL_PROTO_LL],
       buffSizes[MCCL_PROTO_SIMPLE]);
  return mcclSuccess;
fail:
  free(resources);
  return res;
  // END EXERCISE(04.setup)
}

static mcclResult_t shmSendSetup(struct mcclTransportCtx* ctx, const void* graph, const mcclPeerInfo* myInfo,
                                 const mcclPeerInfo* peerInfo, struct mcclConnect* connectInfo,
                                 struct mcclConnector* send, int channelId, int connIndex) {
  (void)graph;
  return shmSetup(1, ctx, myInfo, peerInfo, connectInfo, send, channelId, connIndex);
}

static mcclResult_t shmRecvSetup(struct mcclTransportCtx* ctx, const void* graph, const mcclPeerInfo* myInfo,
                                 const mcclPeerInfo* peerInfo, struct mcclConnect* connectInfo,
                                 struct mcclConnector* recv, int channelId, int connIndex) {
  (void)graph;
  return shmSetup(0, ctx, myInfo, peerInfo, connectInfo, recv, channelId, connIndex);
}

// ---- connect: import the peer's buffer ---------------------------------------------------------

static mcclResult_t importPeer(struct mcclConnector* c, const struct mcclShmConnectInfo* info, size_t needed,
                               void** hptr, void** dptr, mcclShmIpcDesc_t* remDesc) {
  size_t size = info->desc.kind == MCCL_SHM_IPC_CUMEM ? info->desc.cumem.size : info->desc.legacy.shmSize;
  if (size < needed) {
    WARN("Peer rank %d offers a %zu-byte SHM buffer, this side needs %zu: is MCCL_BUFFSIZE the same in both "
         "processes?", info->rank, size, needed);
    return mcclRemoteError;
  }
  int fd = -1;
  if (info->desc.kind == MCCL_SHM_IPC_CUMEM) {
    if (c->getPeerFd == NULL) {
      WARN("Invalid usage: peer rank %d shares a cuMem buffer, but the connector has no getPeerFd to fetch its fd",
           info->rank);
      return mcclInvalidUsage;
    }
    MCCLCHECK(c->getPeerFd(c->getPeerFdCtx, info->rank, &info->desc.cumem.handle, (int)sizeof(info->desc.cumem.handle),
                           &fd));
  }
  mcclResult_t res = mcclShmImportShareableBuffer(&info->desc, fd, hptr, dptr, remDesc);
  if (fd >= 0) close(fd);  // the mapping holds the memory; the fd was only its passport
  return res;
}

static mcclResult_t shmSendConnect(struct mcclTransportCtx* ctx, const struct mcclConnect* connectInfo, int nranks,
                                   int rank, struct mcclConnector* send) {
  (void)ctx;
  (void)nranks;
  (void)rank;
  MCCL_ARGCHECK(connectInfo != NULL, "connectInfo is NULL");
  MCCL_ARGCHECK(send != NULL && send->send == 1, "send connector %p is NULL or a recv connector", (void*)send);
  struct shmSendResources* r = (struct shmSendResources*)send->transportResources;
  if (r == NULL || send->connected) {
    WARN("Invalid usage: send connector %p is %s", (void*)send, r ? "already connected" : "not set up");
    return mcclInvalidUsage;
  }
  mcclResult_t res = mcclSuccess;
  struct mcclShmConnectInfo info;
  MCCLCHECK(mcclShmConnectInfoDecode(connectInfo->data, sizeof(connectInfo->data), &info));
  const size_t ll = (size_t)r->buffSizes[MCCL_PROTO_LL];
  MCCLCHECK(importPeer(send, &info, sizeof(struct mcclRecvMem) + ll + (size_t)r->buffSizes[MCCL_PROTO_SIMPLE],
                       (void**)&r->remHostMem, (void**)&r->devRemHostMem, &r->remDesc));
  // The sender writes the peer's FIFOs, connFifo and tail, and reads its own head: all device
  // addresses of mapped host memory, so a kernel stores into the peer's FIFO directly (NCCL's
  // default SHM mode); lab 05's copy-engine mode uses the host addresses below instead.
  send->conn.buffs[MCCL_PROTO_LL] = (char*)(r->devRemHostMem + 1);
  send->conn.buffs[MCCL_PROTO_SIMPLE] = (char*)(r->devRemHostMem + 1) + ll;
  send->conn.tail = &r->devRemHostMem->tail;
  send->conn.head = &r->devHostMem->head;
  send->conn.connFifo = r->devRemHostMem->connFifo;
  send->conn.stepSize = r->buffSizes[MCCL_PROTO_SIMPLE] / MCCL_STEPS;
  send->conn.llStepSize = r->buffSizes[MCCL_PROTO_LL] / MCCL_STEPS;
  send->conn.step = send->initialStep;
  struct mcclShmProxyConnectReq req = {(char*)(r->remHostMem + 1) + ll, r->hostMem, r->remHostMem};
  MCCLCHECKGOTO(send->proxyCall(send, mcclProxyMsgConnect, &req, sizeof(req), NULL, 0), res, fail);
  send->connected = 1;
  return mcclSuccess;
fail:
  mcclShmIpcClose(&r->remDesc);
  memset(&send->conn, 0, sizeof(send->conn));
  return res;
}

static mcclResult_t shmRecvConnect(struct mcclTransportCtx* ctx, const struct mcclConnect* connectInfo, int nranks,
                                   int rank, struct mcclConnector* recv) {
  (void)ctx;
  (void)nranks;
  (void)rank;
  MCCL_ARGCHECK(connectInfo != NULL, "connectInfo is NULL");
  MCCL_ARGCHECK(recv != NULL && recv->send == 0, "recv connector %p is NULL or a send connector", (void*)recv);
  struct shmRecvResources* r = (struct shmRecvResources*)recv->transportResources;
  if (r == NULL || recv->connected) {
    WARN("Invalid usage: recv connector %p is %s", (void*)recv, r ? "already connected" : "not set up");
    return mcclInvalidUsage;
  }
  mcclResult_t res = mcclSuccess;
  struct mcclShmConnectInfo info;
  MCCLCHECK(mcclShmConnectInfoDecode(connectInfo->data, sizeof(connectInfo->data), &info));
  MCCLCHECK(importPeer(recv, &info, sizeof(struct mcclSendMem), (void**)&r->remHostMem, (void**)&r->devRemHostMem,
                       &r->remDesc));
  // The receiver reads its own FIFOs, connFifo and tail, and returns credit in the peer's head.
  const size_t ll = (size_t)r->buffSizes[MCCL_PROTO_LL];
  recv->conn.buffs[MCCL_PROTO_LL] = (char*)(r->devHostMem + 1);
  recv->conn.buffs[MCCL_PROTO_SIMPLE] = (char*)(r->devHostMem + 1) + ll;
  recv->conn.tail = &r->devHostMem->tail;
  recv->conn.head = &r->devRemHostMem->head;
  recv->conn.connFifo = r->devHostMem->connFifo;
  recv->conn.stepSize = r->buffSizes[MCCL_PROTO_SIMPLE] / MCCL_STEPS;
  recv->conn.llStepSize = r->buffSizes[MCCL_PROTO_LL] / MCCL_STEPS;
  recv->conn.step = recv->initialStep;
  struct mcclShmProxyConnectReq req = {(char*)(r->hostMem + 1) + ll, r->remHostMem, r->hostMem};
  MCCLCHECKGOTO(recv->proxyCall(recv, mcclProxyMsgConnect, &req, sizeof(req), NULL, 0), res, fail);
  recv->connected = 1;
  return mcclSuccess;
fail:
  mcclShmIpcClose(&r->remDesc);
  memset(&recv->conn, 0, sizeof(recv->conn));
  return res;
}

static mcclResult_t shmFree(struct mcclConnector* c) {
  if (c == NULL || c->transportResources == NULL) return mcclSuccess;
  mcclResult_t res;
  if (c->send) res = mcclShmIpcClose(&((struct shmSendResources*)c->transportResources)->remDesc);
  else res = mcclShmIpcClose(&((struct shmRecvResources*)c->transportResources)->remDesc);
  free(c->transportResources);
  c->transportResources = NULL;
  memset(&c->conn, 0, sizeof(c->conn));
  c->connected = 0;
  return res;
}

// ---- proxy hooks -----------------------------------------------------------------------------

static mcclResult_t shmProxySetup(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState,
                                  const void* reqBuff, int reqSize, void* respBuff, int respSize, int* done) {
  (void)proxyState;
  MCCL_ARGCHECK(connection != NULL && reqBuff != NULL && respBuff != NULL && done != NULL,
                "NULL connection %p, req %p, resp %p or done %p", (void*)connection, reqBuff, respBuff, (void*)done);
  if (respSize != (int)sizeof(struct mcclShmConnectInfo)) {  // the request's length is its decoder's check
    WARN("SHM proxySetup: respSize %d, expected %zu", respSize, sizeof(struct mcclShmConnectInfo));
    return mcclInternalError;
  }
  if (connection->transportResources) {
    WARN("Invalid usage: SHM proxy connection %p is already set up", (void*)connection);
    return mcclInvalidUsage;
  }
  struct mcclShmRequest reqCopy;
  MCCLCHECK(mcclShmRequestDecode(reqBuff, (size_t)reqSize, connection->send, &reqCopy));
  const struct mcclShmRequest* req = &reqCopy;
  struct shmProxyInfo* pi = (struct shmProxyInfo*)calloc(1, sizeof(*pi));
  if (pi == NULL) {
    WARN("Out of memory allocating SHM proxy resources");
    return mcclSystemError;
  }
  mcclResult_t res = mcclSuccess;
  void *hptr = NULL, *dptr = NULL;
  MCCLCHECKGOTO(mcclShmAllocateShareableBuffer(req->size, req->legacy, &pi->desc, &hptr, &dptr), res, fail);
  // The page of counters and the LL FIFO need known contents; the SIMPLE FIFO is always written
  // before it is read.
  if (connection->send) {
    struct mcclSendMem* s = (struct mcclSendMem*)hptr;
    memset(s, 0, sizeof(*s));
    __atomic_store_n(&s->head, req->initialStep, __ATOMIC_RELEASE);
  } else {
    struct mcclRecvMem* r = (struct mcclRecvMem*)hptr;
    memset(r, 0, sizeof(*r));
    // LL lines carry their own flags: stale bytes that happened to match a step would read as
    // data, so the LL FIFO starts zeroed (cuMem host memory is not cleared for us).
    memset(r + 1, 0, (size_t)req->llBuffSize);
    __atomic_store_n(&r->tail, req->initialStep, __ATOMIC_RELEASE);
  }
  pi->step = req->initialStep;
  pi->stepSize = req->buffSize / MCCL_STEPS;
  // The response is a byte buffer (lab 05 carries it over a socket): copy, never cast.
  struct mcclShmConnectInfo info;
  memset(&info, 0, sizeof(info));
  info.desc = pi->desc;
  info.buf.hptr = hptr;
  info.buf.dptr = dptr;
  memcpy(respBuff, &info, sizeof(info));
  connection->transportResources = pi;
  if (pi->desc.kind == MCCL_SHM_IPC_CUMEM) connection->exportHandle = pi->desc.cumem.handle;
  *done = 1;
  return mcclSuccess;
fail:
  free(pi);
  return res;
}

static mcclResult_t shmProxyConnect(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState,
                                    const void* reqBuff, int reqSize, void* respBuff, int respSize, int* done) {
  (void)proxyState;
  (void)respBuff;
  (void)respSize;
  MCCL_ARGCHECK(connection != NULL && reqBuff != NULL && done != NULL, "NULL connection %p, req %p or done %p",
                (void*)connection, reqBuff, (void*)done);
  struct shmProxyInfo* pi = (struct shmProxyInfo*)connection->transportResources;
  if (pi == NULL || pi->stream != NULL) {
    WARN("Invalid usage: SHM proxy connection %p is %s", (void*)connection, pi ? "already connected" : "not set up");
    return mcclInvalidUsage;
  }
  struct mcclShmProxyConnectReq reqCopy;
  MCCLCHECK(mcclShmProxyConnectReqDecode(reqBuff, (size_t)reqSize, &reqCopy));
  const struct mcclShmProxyConnectReq* req = &reqCopy;
  mcclResult_t res = mcclSuccess;
  pi->shmFifo = req->shmFifo;
  pi->sendMem = req->sendMem;
  pi->recvMem = req->recvMem;
  // One stream per side keeps the copies of consecutive steps in order; one event per slot tells
  // when a slot's copy has landed without waiting for the whole stream.
  CUDACHECKGOTO(cudaStreamCreateWithFlags(&pi->stream, cudaStreamNonBlocking), res, fail);
  for (; pi->nEvents < MCCL_STEPS; pi->nEvents++)
    CUDACHECKGOTO(cudaEventCreateWithFlags(&pi->events[pi->nEvents], cudaEventDisableTiming), res, fail);
  *done = 1;
  return mcclSuccess;
fail:
  while (pi->nEvents > 0) cudaEventDestroy(pi->events[--pi->nEvents]);
  if (pi->stream) cudaStreamDestroy(pi->stream);
  pi->stream = NULL;
  return res;
}

static mcclResult_t shmProxyFree(struct mcclProxyConnection* connection, struct mcclProxyState* proxyState) {
  (void)proxyState;
  if (connection == NULL || connection->transportResources == NULL) return mcclSuccess;
  struct shmProxyInfo* pi = (struct shmProxyInfo*)connection->transportResources;
  mcclResult_t res = mcclSuccess;
  if (pi->stream) {
    // Copies may still be in flight after an error: they must land before the memory goes away.
    if (cudaStreamSynchronize(pi->stream) != cudaSuccess) res = mcclUnhandledCudaError;
    while (pi->nEvents > 0) cudaEventDestroy(pi->events[--pi->nEvents]);
    if (cudaStreamDestroy(pi->stream) != cudaSuccess) res = mcclUnhandledCudaError;
  }
  mcclResult_t r = mcclShmIpcClose(&pi->desc);
  if (res == mcclSuccess) res = r;
  free(pi);
  connection->transportResources = NULL;
  return res;
}

// ---- progress: the FIFO state machines ---------------------------------------------------------

// The copy-engine mode's hooks progress one sub (MCCL_PROXY_MAX_SUBS is 1): fix its steps when it
// starts, from the connection's step, as NCCL's shm progress does from its resources' step.
static mcclResult_t opStart(struct mcclProxyArgs* args, struct mcclProxySubArgs** subp, struct shmProxyInfo** pip) {
  MCCL_ARGCHECK(args != NULL, "args is NULL");
  MCCL_ARGCHECK(args->nsubs == 1, "args->nsubs %d (SHM progresses one connection per args)", args->nsubs);
  struct mcclProxySubArgs* sub = &args->subs[0];
  MCCL_ARGCHECK(sub->connection != NULL, "args->subs[0].connection is NULL");
  struct shmProxyInfo* pi = (struct shmProxyInfo*)sub->connection->transportResources;
  if (pi == NULL || pi->stream == NULL) {
    WARN("Invalid usage: op on SHM connection %p that is not connected", (void*)sub->connection);
    return mcclInvalidUsage;
  }
  if (args->state == mcclProxyOpReady) {
    // The copy-engine mode copies through the user's buffer: an op without one has nothing to copy.
    if (sub->ceBuff == NULL && sub->nbytes > 0) {
      WARN("Invalid usage: SHM copy-engine op of %zd bytes without a buffer (ceBuff)", sub->nbytes);
      return mcclInvalidUsage;
    }
    uint64_t need =
        sub->nbytes == 0 ? 1 : ((uint64_t)sub->nbytes + (uint64_t)pi->stepSize - 1) / (uint64_t)pi->stepSize;
    if (sub->nsteps == 0) sub->nsteps = need;
    if (sub->nsteps != need) {
      WARN("Invalid usage: SHM op of %zd bytes posted with nsteps %llu; it needs %llu steps of %d bytes", sub->nbytes,
           (unsigned long long)sub->nsteps, (unsigned long long)need, pi->stepSize);
      return mcclInvalidUsage;
    }
    sub->base = pi->step;
    sub->transmitted = sub->done = 0;
    sub->lastProgressNs = mcclClockNano();
    args->state = mcclProxyOpProgress;
  }
  *subp = sub;
  *pip = pi;
  return mcclSuccess;
}

static size_t stepBytes(const struct mcclProxySubArgs* sub, const struct shmProxyInfo* pi, uint64_t s) {
  size_t off = (size_t)s * (size_t)pi->stepSize;
  size_t left = (size_t)sub->nbytes - off;
  return left < (size_t)pi->stepSize ? left : (size_t)pi->stepSize;
}

// Called when a poll moved nothing: has the peer gone quiet for too long, or did someone abort?
static mcclResult_t opStalled(const struct mcclProxyArgs* args, const struct mcclProxySubArgs* sub, const char* side,
                              uint64_t head, uint64_t tail) {
  if (mcclIsAborted(args->abortFlag)) {
    WARN("SHM %s aborted at step %llu of %llu", side, (unsigned long long)sub->done, (unsigned long long)sub->nsteps);
    return mcclInternalError;
  }
  if (args->timeoutMs > 0 && mcclClockNano() - sub->lastProgressNs > (uint64_t)args->timeoutMs * 1000000ull) {
    WARN(
        "SHM %s: no progress from the peer for %lld ms (MCCL_SHM_TIMEOUT) at step %llu of %llu, head %llu tail "
        "%llu: the peer died or stopped",
        side, (long long)args->timeoutMs, (unsigned long long)sub->done, (unsigned long long)sub->nsteps,
        (unsigned long long)head, (unsigned long long)tail);
    return mcclTimeout;
  }
  return mcclSuccess;
}

static void opFinish(struct mcclProxyArgs* args, struct mcclProxySubArgs* sub, struct shmProxyInfo* pi) {
  if (sub->done == sub->nsteps) {
    pi->step = sub->base + sub->nsteps;
    args->state = mcclProxyOpNone;
  }
}

// One step published by the sender: its connFifo entry, then tail. A function of its own (never
// inlined) so lab.gdb can stop at every step.
static __attribute__((noinline)) void shmPostTail(const struct mcclProxySubArgs* sub, struct mcclRecvMem* recvMem,
                                                  int slot, int offset, ssize_t size, uint64_t tail) {
  TRACE(MCCL_SHM, "SHM send: step %llu of %llu published, tail %llu", (unsigned long long)sub->done + 1,
        (unsigned long long)sub->nsteps, (unsigned long long)tail);
  struct mcclConnFifo* f = &recvMem->connFifo[slot];
  f->mode = MCCL_MODE_NORMAL;
  f->offset = offset;
  f->size = size;
  f->ptr = NULL;
  // Release: the slot's bytes and its connFifo entry are visible before the new tail is.
  __atomic_store_n(&recvMem->tail, tail, __ATOMIC_RELEASE);
}

// One slot returned by the receiver as credit.
static __attribute__((noinline)) void shmPostHead(struct mcclSendMem* sendMem, uint64_t head) {
  // Release: our reads of the slot are done before the sender may overwrite it.
  __atomic_store_n(&sendMem->head, head, __ATOMIC_RELEASE);
}

// Sender (NCCL's shmSendProxyProgress, with the device buffer as the source): credit from head,
// device -> FIFO slot copy, then size in connFifo and tail, in step order.
static mcclResult_t shmSendProxyProgress(struct mcclProxyState* proxyState, struct mcclProxyArgs* args) {
  (void)proxyState;
  if (args != NULL && args->state == mcclProxyOpNone) return mcclSuccess;
  struct shmProxyInfo* pi;
  struct mcclProxySubArgs* sub;
  MCCLCHECK(opStart(args, &sub, &pi));
  // EXERCISE(04.send_progress)
  int moved = 0;
  const size_t stepSize = (size_t)pi->stepSize;
  uint64_t head = 0;
  while (sub->transmitted < sub->done + MCCL_STEPS && sub->transmitted < sub->nsteps) {
    uint64_t step = sub->base + sub->transmitted;
    head = __atomic_load_n(&pi->sendMem->head, __ATOMIC_ACQUIRE);
    if (step - head >= MCCL_STEPS) break;  // unsigned, so it holds across the wrap: the slot is still the reader's
    int slot = (int)(step % MCCL_STEPS);
    size_t size = stepBytes(sub, pi, sub->transmitted);
    if (size > 0)
      CUDACHECK(cudaMemcpyAsync(pi->shmFifo + (size_t)slot * stepSize, (char*)sub->ceBuff + sub->transmitted * stepSize,
                                size, cudaMemcpyDeviceToHost, pi->stream));
    CUDACHECK(cudaEventRecord(pi->events[slot], pi->stream));
    sub->transmitted++;
    moved = 1;
  }
  while (sub->done < sub->transmitted) {
    uint64_t step = sub->base + sub->done;
    int slot = (int)(step % MCCL_STEPS);
    cudaError_t e = cudaEventQuery(pi->events[slot]);
    if (e == cudaErrorNotReady) break;
    if (e != cudaSuccess) {
      WARN("Cuda failure %d '%s' in the copy of SHM send step %llu", (int)e, cudaGetErrorString(e),
           (unsigned long long)step);
      return mcclUnhandledCudaError;
    }
    shmPostTail(sub, pi->recvMem, slot, (int)((size_t)slot * stepSize), (ssize_t)stepBytes(sub, pi, sub->done),
                step + 1);
    sub->done++;
    moved = 1;
  }
  opFinish(args, sub, pi);
  args->idle = !moved;
  if (moved) {
    sub->lastProgressNs = mcclClockNano();
  } else if (args->state != mcclProxyOpNone) {
    MCCLCHECK(opStalled(args, sub, "send", __atomic_load_n(&pi->sendMem->head, __ATOMIC_RELAXED),
                        __atomic_load_n(&pi->recvMem->tail, __ATOMIC_RELAXED)));
  }
  return mcclSuccess;
  // END EXERCISE(04.send_progress)
}

// Receiver (NCCL's shmRecvProxyProgress, with the device buffer as the destination): wait for tail,
// FIFO slot -> device copy, then return the slot as credit in head, in step order.
static mcclResult_t shmRecvProxyProgress(struct mcclProxyState* proxyState, struct mcclProxyArgs* args) {
  (void)proxyState;
  if (args != NULL && args->state == mcclProxyOpNone) return mcclSuccess;
  struct shmProxyInfo* pi;
  struct mcclProxySubArgs* sub;
  MCCLCHECK(opStart(args, &sub, &pi));
  // EXERCISE(04.recv_progress)
  int moved = 0;
  const size_t stepSize = (size_t)pi->stepSize;
  while (sub->transmitted < sub->done + MCCL_STEPS && sub->transmitted < sub->nsteps) {
    uint64_t step = sub->base + sub->transmitted;
    uint64_t tail = __atomic_load_n(&pi->recvMem->tail, __ATOMIC_ACQUIRE);
    if (tail - step - 1 >= MCCL_STEPS) break;  // ready when 1 <= tail - step <= MCCL_STEPS, across the wrap too
    int slot = (int)(step % MCCL_STEPS);
    size_t expected = stepBytes(sub, pi, sub->transmitted);
    ssize_t got = pi->recvMem->connFifo[slot].size;
    if (got != (ssize_t)expected) {
      WARN("SHM recv: step %llu (slot %d) holds %zd bytes, expected %zu: the peer sent a message of another size",
           (unsigned long long)step, slot, got, expected);
      return mcclRemoteError;
    }
    if (expected > 0)
      CUDACHECK(cudaMemcpyAsync((char*)sub->ceBuff + sub->transmitted * stepSize, pi->shmFifo + (size_t)slot * stepSize,
                                expected, cudaMemcpyHostToDevice, pi->stream));
    CUDACHECK(cudaEventRecord(pi->events[slot], pi->stream));
    sub->transmitted++;
    moved = 1;
  }
  while (sub->done < sub->transmitted) {
    uint64_t step = sub->base + sub->done;
    int slot = (int)(step % MCCL_STEPS);
    cudaError_t e = cudaEventQuery(pi->events[slot]);
    if (e == cudaErrorNotReady) break;
    if (e != cudaSuccess) {
      WARN("Cuda failure %d '%s' in the copy of SHM recv step %llu", (int)e, cudaGetErrorString(e),
           (unsigned long long)step);
      return mcclUnhandledCudaError;
    }
    shmPostHead(pi->sendMem, step + 1);
    sub->done++;
    moved = 1;
  }
  opFinish(args, sub, pi);
  args->idle = !moved;
  if (moved) {
    sub->lastProgressNs = mcclClockNano();
  } else if (args->state != mcclProxyOpNone) {
    MCCLCHECK(opStalled(args, sub, "recv", __atomic_load_n(&pi->sendMem->head, __ATOMIC_RELAXED),
                        __atomic_load_n(&pi->recvMem->tail, __ATOMIC_RELAXED)));
  }
  return mcclSuccess;
  // END EXERCISE(04.recv_progress)
}

struct mcclTransport mcclShmTransport = {
    "SHM",
    shmCanConnect,
    {shmSendSetup, shmSendConnect, shmFree, shmProxySetup, shmProxyConnect, shmProxyFree, shmSendProxyProgress},
    {shmRecvSetup, shmRecvConnect, shmFree, shmProxySetup, shmProxyConnect, shmProxyFree, shmRecvProxyProgress},
    NULL,
};
