// The control-part decoder of lab 03's datagram sockets (ipcsocket_wire.h). Pure: it reads bytes,
// never a socket, and walks the headers by hand (CMSG_FIRSTHDR does not check that the first
// header's cmsg_len fits the buffer), so a short or lying header cannot make it read outside len.
#include "ipcsocket_wire.h"

#include <string.h>
#include "mccl_debug.h"

mcclResult_t mcclIpcSocketControlDecode(const void* buf, size_t len, mcclIpcControl* out) {
  if (out == NULL || (buf == NULL && len > 0)) {
    WARN("UDS: control part %p of %zu bytes, out %p", buf, len, (void*)out);
    return mcclInternalError;
  }
  memset(out, 0, sizeof(*out));
  const char* p = buf;
  size_t off = 0;
  while (len - off >= sizeof(struct cmsghdr)) {
    struct cmsghdr h;
    memcpy(&h, p + off, sizeof(h));
    if (h.cmsg_len < CMSG_LEN(0) || h.cmsg_len > len - off) {
      WARN("UDS: control message at offset %zu says cmsg_len %zu (%zu bytes left)", off, (size_t)h.cmsg_len, len - off);
      return mcclInternalError;
    }
    const char* data = p + off + CMSG_LEN(0);
    size_t dataLen = h.cmsg_len - CMSG_LEN(0);
    if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS) {
      if (dataLen % sizeof(int) != 0) {
        WARN("UDS: SCM_RIGHTS message of %zu bytes (not whole fds)", dataLen);
        return mcclInternalError;
      }
      for (size_t i = 0; i < dataLen / sizeof(int); i++) {
        if (out->nFds == MCCL_IPC_MAX_RECV_FDS) {
          WARN("UDS: more than %d fds in one message", MCCL_IPC_MAX_RECV_FDS);
          return mcclInternalError;
        }
        memcpy(&out->fds[out->nFds++], data + i * sizeof(int), sizeof(int));
      }
    } else if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_CREDENTIALS) {
      if (dataLen < sizeof(struct ucred) || out->haveCred) {
        WARN("UDS: SCM_CREDENTIALS message of %zu bytes%s", dataLen, out->haveCred ? ", a second one" : "");
        return mcclInternalError;
      }
      memcpy(&out->cred, data, sizeof(out->cred));
      out->haveCred = 1;
    }
    size_t step = CMSG_ALIGN(h.cmsg_len);
    if (step >= len - off) break;
    off += step;
  }
  return mcclSuccess;
}
