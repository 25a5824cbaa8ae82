// Decoders of the proxy's wire formats (proxy_wire.h): pure functions of the received bytes.
#include "proxy_wire.h"

#include <string.h>
#include "mccl_debug.h"
#include "mccl_proxy.h"

static int validResult(int32_t r) {
  return r >= 0 && r < mcclNumResults && r != mcclInProgress;
}

mcclResult_t mcclProxyRpcHeaderDecode(const void* buf, size_t len, rpcHeader* out) {
  if (buf == NULL || out == NULL || len != sizeof(rpcHeader)) {
    WARN("Proxy: request header of %zu bytes (expected %zu)", len, sizeof(rpcHeader));
    return mcclInternalError;
  }
  rpcHeader h;
  memcpy(&h, buf, sizeof(h));
  if (h.reqSize < 0 || h.reqSize > MCCL_PROXY_MAX_MSG || h.respSize < 0 || h.respSize > MCCL_PROXY_MAX_MSG ||
      h.pad != 0) {
    WARN("Proxy: request type %d with reqSize=%d respSize=%d pad=%d (max %d)", (int)h.type, (int)h.reqSize,
         (int)h.respSize, (int)h.pad, MCCL_PROXY_MAX_MSG);
    return mcclInternalError;
  }
  switch (h.type) {
    case mcclProxyMsgInit:
      if (h.reqSize != (int32_t)sizeof(proxyInitReq) || h.respSize != (int32_t)sizeof(uint64_t)) {
        WARN("Proxy: Init with reqSize=%d respSize=%d (expected %zu, %zu)", (int)h.reqSize, (int)h.respSize,
             sizeof(proxyInitReq), sizeof(uint64_t));
        return mcclInternalError;
      }
      break;
    case mcclProxyMsgStop:
      if (h.reqSize != 0 || h.respSize != 0) {
        WARN("Proxy: Stop with reqSize=%d respSize=%d (expected 0, 0)", (int)h.reqSize, (int)h.respSize);
        return mcclInternalError;
      }
      break;
    case mcclProxyMsgSetup:
    case mcclProxyMsgConnect:
    case mcclProxyMsgFree:
      break;
    default:
      WARN("Proxy: unknown request type %d", (int)h.type);
      return mcclInternalError;
  }
  *out = h;
  return mcclSuccess;
}

mcclResult_t mcclProxyInitReqDecode(const void* buf, size_t len, proxyInitReq* out) {
  if (buf == NULL || out == NULL || len != sizeof(proxyInitReq)) {
    WARN("Proxy: Init body of %zu bytes (expected %zu)", len, sizeof(proxyInitReq));
    return mcclInternalError;
  }
  proxyInitReq in;
  memcpy(&in, buf, sizeof(in));
  if (in.transport < 0 || in.transport >= MCCL_NUM_TRANSPORTS || (in.send != 0 && in.send != 1)) {
    WARN("Proxy: Init for transport %d (0..%d), send %d", (int)in.transport, MCCL_NUM_TRANSPORTS - 1, (int)in.send);
    return mcclInternalError;
  }
  *out = in;
  return mcclSuccess;
}

mcclResult_t mcclProxyRpcRespDecode(const void* buf, size_t len, rpcRespHeader* out) {
  if (buf == NULL || out == NULL || len != sizeof(rpcRespHeader)) {
    WARN("Proxy: response header of %zu bytes (expected %zu)", len, sizeof(rpcRespHeader));
    return mcclInternalError;
  }
  rpcRespHeader rh;
  memcpy(&rh, buf, sizeof(rh));
  if (!validResult(rh.res) || rh.respSize < 0 || rh.respSize > MCCL_PROXY_MAX_MSG ||
      (rh.res != mcclSuccess && rh.respSize != 0)) {
    WARN("Proxy: response 0x%llx with result %d and respSize=%d (max %d, 0 with an error)", (unsigned long long)rh.opId,
         (int)rh.res, (int)rh.respSize, MCCL_PROXY_MAX_MSG);
    return mcclInternalError;
  }
  *out = rh;
  return mcclSuccess;
}

mcclResult_t mcclProxyUdsReqDecode(const void* buf, size_t len, udsReq* out) {
  if (buf == NULL || out == NULL || len != sizeof(udsReq)) {
    WARN("Proxy: fd request of %zu bytes (expected %zu)", len, sizeof(udsReq));
    return mcclInternalError;
  }
  udsReq q;
  memcpy(&q, buf, sizeof(q));
  if (q.clientRank < 1) {
    WARN("Proxy: fd request type %d from socket rank %d (a requester's is its rank + 1)", (int)q.type,
         (int)q.clientRank);
    return mcclInternalError;
  }
  if (q.type != mcclProxyMsgGetFd && q.type != mcclProxyMsgQueryFd) {
    WARN("Proxy: fd request from rank %d of type %d (GetFd %d or QueryFd %d)", (int)q.clientRank - 1, (int)q.type,
         mcclProxyMsgGetFd, mcclProxyMsgQueryFd);
    return mcclInternalError;
  }
  *out = q;
  return mcclSuccess;
}

mcclResult_t mcclProxyUdsRespDecode(const void* buf, size_t len, uint64_t opId, udsResp* out) {
  if (buf == NULL || out == NULL || len != sizeof(udsResp)) {
    WARN("Proxy: fd answer of %zu bytes (expected %zu)", len, sizeof(udsResp));
    return mcclInternalError;
  }
  udsResp a;
  memcpy(&a, buf, sizeof(a));
  if (a.opId != opId) {
    WARN("Proxy: fd answer to request 0x%llx, expected 0x%llx", (unsigned long long)a.opId, (unsigned long long)opId);
    return mcclInternalError;
  }
  if (!validResult(a.res) || a.rmtFd < -1 || (a.res != mcclSuccess && a.rmtFd != -1)) {
    WARN("Proxy: fd answer with result %d, rmtFd %d", (int)a.res, (int)a.rmtFd);
    return mcclInternalError;
  }
  *out = a;
  return mcclSuccess;
}
