// Decoders of the SHM transport's connect information and proxy requests (shm_wire.h).
#include "shm_wire.h"

#include <ctype.h>
#include <string.h>
#include "mccl_conn.h"
#include "mccl_debug.h"

static int validSuffix(const char* s) {
  for (int i = 0; i < 6; i++)
    if (!isalnum((unsigned char)s[i])) return 0;  // mkstemp's alphabet: no '/', no '.'
  return s[6] == '\0';
}

mcclResult_t mcclShmIpcDescCheck(const mcclShmIpcDesc_t* desc) {
  if (desc == NULL) {
    WARN("Invalid argument: desc is NULL");
    return mcclInvalidArgument;
  }
  if (desc->kind == MCCL_SHM_IPC_LEGACY) {
    if (!validSuffix(desc->legacy.shmSuffix)) {
      WARN("Invalid argument: desc->legacy.shmSuffix \"%.6s\" (must be 6 letters/digits)", desc->legacy.shmSuffix);
      return mcclInvalidArgument;
    }
    if (desc->legacy.shmSize == 0) {
      WARN("Invalid argument: desc->legacy.shmSize is 0");
      return mcclInvalidArgument;
    }
  } else if (desc->kind == MCCL_SHM_IPC_CUMEM) {
    if (desc->cumem.type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
      WARN("Invalid argument: desc->cumem.type %d (only POSIX fd handles are imported here)", (int)desc->cumem.type);
      return mcclInvalidArgument;
    }
    if (desc->cumem.size == 0) {
      WARN("Invalid argument: desc->cumem.size is 0");
      return mcclInvalidArgument;
    }
  } else {
    WARN("Invalid argument: desc->kind %d (expected %d legacy or %d cuMem)", desc->kind, MCCL_SHM_IPC_LEGACY,
         MCCL_SHM_IPC_CUMEM);
    return mcclInvalidArgument;
  }
  return mcclSuccess;
}

mcclResult_t mcclShmConnectInfoDecode(const void* buf, size_t len, struct mcclShmConnectInfo* out) {
  if (buf == NULL || out == NULL || len < sizeof(struct mcclShmConnectInfo) || len > MCCL_CONNECT_SIZE) {
    WARN("SHM: connect information of %zu bytes (expected %zu to %d)", len, sizeof(struct mcclShmConnectInfo),
         MCCL_CONNECT_SIZE);
    return mcclInternalError;
  }
  struct mcclShmConnectInfo info;
  memcpy(&info, buf, sizeof(info));
  if (info.rank < 0) {
    WARN("SHM: connect information from rank %d", info.rank);
    return mcclInvalidArgument;
  }
  if (mcclShmIpcDescCheck(&info.desc) != mcclSuccess) {
    WARN("SHM: rank %d's connect information carries a bad buffer descriptor", info.rank);
    return mcclInvalidArgument;
  }
  if (info.desc.kind == MCCL_SHM_IPC_CUMEM && info.desc.cumem.handle == 0) {
    WARN("SHM: rank %d shares a cuMem buffer without a handle", info.rank);
    return mcclInvalidArgument;
  }
  // Local fields mean nothing here: never let the peer's values reach this process's clean-up.
  if (info.desc.kind == MCCL_SHM_IPC_LEGACY)
    memset(&info.desc.legacy.handle, 0, sizeof(info.desc.legacy.handle));
  else
    info.desc.cumem.ptr = NULL;
  *out = info;
  return mcclSuccess;
}

mcclResult_t mcclShmRequestDecode(const void* buf, size_t len, int send, struct mcclShmRequest* out) {
  if (buf == NULL || out == NULL || len != sizeof(struct mcclShmRequest)) {
    WARN("SHM proxySetup: request of %zu bytes (expected %zu)", len, sizeof(struct mcclShmRequest));
    return mcclInternalError;
  }
  struct mcclShmRequest req;
  memcpy(&req, buf, sizeof(req));
  const int llStep = MCCL_STEPS * (int)sizeof(union mcclLLFifoLine);
  if (req.buffSize < 4096 || req.buffSize % 4096 != 0 || req.buffSize > MCCL_SHM_MAX_BUFFSIZE) {
    WARN("SHM proxySetup: req.buffSize %d (a multiple of 4096 up to %lld)", req.buffSize,
         (long long)MCCL_SHM_MAX_BUFFSIZE);
    return mcclInvalidArgument;
  }
  if (send ? req.llBuffSize != 0
           : (req.llBuffSize < 0 || req.llBuffSize % llStep != 0 || req.llBuffSize > MCCL_SHM_MAX_BUFFSIZE)) {
    WARN("SHM proxySetup: req.llBuffSize %d on the %s side", req.llBuffSize, send ? "send" : "recv");
    return mcclInvalidArgument;
  }
  size_t want =
      send ? sizeof(struct mcclSendMem) : sizeof(struct mcclRecvMem) + (size_t)req.llBuffSize + (size_t)req.buffSize;
  if (req.size != want || (req.legacy != 0 && req.legacy != 1)) {
    WARN("SHM proxySetup: req.size %zu (the %s side needs %zu), legacy %d", req.size, send ? "send" : "recv", want,
         req.legacy);
    return mcclInvalidArgument;
  }
  *out = req;
  return mcclSuccess;
}

mcclResult_t mcclShmProxyConnectReqDecode(const void* buf, size_t len, struct mcclShmProxyConnectReq* out) {
  if (buf == NULL || out == NULL || len != sizeof(struct mcclShmProxyConnectReq)) {
    WARN("SHM proxyConnect: request of %zu bytes (expected %zu)", len, sizeof(struct mcclShmProxyConnectReq));
    return mcclInternalError;
  }
  struct mcclShmProxyConnectReq req;
  memcpy(&req, buf, sizeof(req));
  if (req.shmFifo == NULL || req.sendMem == NULL || req.recvMem == NULL) {
    WARN("SHM proxyConnect: FIFO %p, sendMem %p, recvMem %p", (void*)req.shmFifo, (void*)req.sendMem,
         (void*)req.recvMem);
    return mcclInvalidArgument;
  }
  *out = req;
  return mcclSuccess;
}
