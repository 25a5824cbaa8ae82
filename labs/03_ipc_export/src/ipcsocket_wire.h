// Lab 03, private: the decoder of what the kernel hands back with a received datagram (its
// control part: the sender's credentials and the fds it passed). ipcsocket.c calls it; the fuzz
// harness fuzz/fuzz_ipc_control.c of this lab and its regression test feed it arbitrary bytes.
#ifndef MCCL_IPCSOCKET_WIRE_H_
#define MCCL_IPCSOCKET_WIRE_H_

#include <stddef.h>
#include <sys/socket.h>
#include "mccl_result.h"

// More fds than the receive buffer of ipcsocket.c has room for (a static assert there says so).
#define MCCL_IPC_MAX_RECV_FDS 16

typedef struct {
  int fds[MCCL_IPC_MAX_RECV_FDS];  // every SCM_RIGHTS descriptor, in order
  int nFds;
  int haveCred;       // an SCM_CREDENTIALS message was present
  struct ucred cred;  // its content
} mcclIpcControl;

// Walk len bytes of control messages (msg_control, msg_controllen as recvmsg left them). Every
// header must lie inside the buffer with cmsg_len >= CMSG_LEN(0); SCM_RIGHTS data is whole ints,
// credentials are one struct ucred, given once. Unlike other decoders *out is written on failure
// too: the kernel has installed the fds already, and the caller closes out->fds[0 .. nFds-1] on
// every path. mcclInternalError for a malformed control part.
mcclResult_t mcclIpcSocketControlDecode(const void* buf, size_t len, mcclIpcControl* out);

#endif
