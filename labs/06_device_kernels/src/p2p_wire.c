// Decoders of the P2P transport's connect information and proxy request (p2p_wire.h).
#include "p2p_wire.h"

#include <string.h>
#include "mccl_conn.h"
#include "mccl_debug.h"

mcclResult_t mcclP2pConnectInfoDecode(const void* buf, size_t len, struct mcclP2pConnectInfo* out) {
  if (buf == NULL || out == NULL || len < sizeof(struct mcclP2pConnectInfo) || len > MCCL_CONNECT_SIZE) {
    WARN("P2P: connect information of %zu bytes (expected %zu to %d)", len, sizeof(struct mcclP2pConnectInfo),
         MCCL_CONNECT_SIZE);
    return mcclInternalError;
  }
  struct mcclP2pConnectInfo info;
  memcpy(&info, buf, sizeof(info));
  if (info.rank < 0 || info.cudaDev < 0 || info.pad_ != 0) {
    WARN("P2P: connect information from rank %d, device %d, pad %d", info.rank, info.cudaDev, info.pad_);
    return mcclInvalidArgument;
  }
  if (info.buff.size == 0 || info.buff.handle == 0) {
    WARN("P2P: rank %d offers a %zu-byte buffer with handle 0x%llx", info.rank, info.buff.size,
         (unsigned long long)info.buff.handle);
    return mcclInvalidArgument;
  }
  *out = info;
  return mcclSuccess;
}

mcclResult_t mcclP2pRequestDecode(const void* buf, size_t len, int send, struct mcclP2pRequest* out) {
  if (buf == NULL || out == NULL || len != sizeof(struct mcclP2pRequest)) {
    WARN("P2P proxySetup: request of %zu bytes (expected %zu)", len, sizeof(struct mcclP2pRequest));
    return mcclInternalError;
  }
  struct mcclP2pRequest req;
  memcpy(&req, buf, sizeof(req));
  const size_t page = send ? sizeof(struct mcclSendMem) : sizeof(struct mcclRecvMem);
  const int llStep = MCCL_STEPS * (int)sizeof(union mcclLLFifoLine);
  if (send ? req.llBuffSize != 0 : (req.llBuffSize < 0 || req.llBuffSize % llStep != 0)) {
    WARN("Invalid argument: req.llBuffSize %d on the %s side", req.llBuffSize, send ? "send" : "recv");
    return mcclInvalidArgument;
  }
  if (send ? req.size != page : req.size < page + (size_t)req.llBuffSize) {
    WARN("Invalid argument: req.size %zu (the %s side needs %s%zu)", req.size, send ? "send" : "recv",
         send ? "" : "at least ", page + (size_t)req.llBuffSize);
    return mcclInvalidArgument;
  }
  if (req.pad_ != 0) {
    WARN("Invalid argument: req.pad_ %d", req.pad_);
    return mcclInvalidArgument;
  }
  *out = req;
  return mcclSuccess;
}
