// Lab 05, private: the wire formats of the proxy's two sockets (the stream RPCs of this process's
// own clients, the datagram fd requests of any local process) and their decoders. The proxy's
// sources use them through proxy_internal.h; the fuzz harnesses in this lab's fuzz/ call the decoders
// on arbitrary bytes. Each decoder checks lengths, enum values, sizes and ranks and writes *out only
// on success; a malformed message is mcclInternalError with a WARN naming the field.
#ifndef MCCL_PROXY_WIRE_H_
#define MCCL_PROXY_WIRE_H_

#include <stddef.h>
#include <stdint.h>
#include "mccl_result.h"

// Stream RPC framing: header then reqSize bytes; response header then respSize bytes.
typedef struct {
  int32_t type, reqSize, respSize, pad;
  uint64_t opId;
  uint64_t conn;  // proxyConnEntry* in this process (Init: unused)
} rpcHeader;
typedef struct {
  uint64_t opId;
  int32_t res, respSize;
} rpcRespHeader;

// The Init request's body (NCCL's ncclProxyInitReq: transport, send): its response is the
// connection's uint64_t.
typedef struct {
  int32_t transport;
  int32_t send;
} proxyInitReq;

// Datagram framing for GetFd/QueryFd on the lab 03 socket.
typedef struct {
  int32_t type, clientRank;  // clientRank: the requester's socket rank, its own rank + 1 (0 is the services')
  uint64_t clientHash;
  uint64_t opId;
  uint64_t handle;
} udsReq;
typedef struct {
  uint64_t opId;
  int32_t res, rmtFd;
} udsResp;

// A request header: a known type (Init, Setup, Connect, Free, Stop), sizes within
// MCCL_PROXY_MAX_MSG, pad 0; an Init carries a proxyInitReq and wants a uint64_t, a Stop carries
// and wants nothing.
mcclResult_t mcclProxyRpcHeaderDecode(const void* buf, size_t len, rpcHeader* out);
// An Init body: a transport index inside a transport table (whether the proxy's table has that
// transport is the service's check), send 0 or 1.
mcclResult_t mcclProxyInitReqDecode(const void* buf, size_t len, proxyInitReq* out);
// A response header: a mcclResult_t other than mcclInProgress, a size within MCCL_PROXY_MAX_MSG,
// and no body with an error.
mcclResult_t mcclProxyRpcRespDecode(const void* buf, size_t len, rpcRespHeader* out);
// An fd request: GetFd or QueryFd, from a rank >= 0 (whether the handle was offered, or an fd came
// with a QueryFd, is the service's check: it answers those with an error).
mcclResult_t mcclProxyUdsReqDecode(const void* buf, size_t len, udsReq* out);
// The answer to the fd request of id opId: that id, a mcclResult_t, rmtFd >= -1 (-1 with an error).
mcclResult_t mcclProxyUdsRespDecode(const void* buf, size_t len, uint64_t opId, udsResp* out);

#endif
