// Unix-domain datagram sockets that pass a header and one fd: NCCL 2.28.9 src/misc/ipcsocket.cc.
// Differences from NCCL, and why:
// - always non-blocking with a deadline (MCCL_IPC_TIMEOUT): a dead peer must not hang a rank;
// - a send retries while the peer's name does not exist yet, so the two sides need no ordering;
// - SO_PASSCRED on every socket and a uid check before an fd is accepted: an fd is a capability
//   to another process's GPU memory, so only a process of our own user may hand us one;
// - the exact datagram length is checked, and a rejected message's fd is closed, never leaked.
#include "mccl_ipcsocket.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"
#include "mccl_socket.h"
#include "mccl_utils.h"
#include "ipcsocket_wire.h"

#define MCCL_IPC_SOCKNAME_FMT "mccl-socket-%d-%" PRIx64

// Address of (rank, hash). An abstract name is sun_path[0] == '\0' followed by the name, and its
// length is exactly what we pass as addrlen (no trailing NULs), so both sides must compute it the
// same way; we print it with a leading '@' as ss(8) does.
static mcclResult_t ipcAddress(int rank, uint64_t hash, struct sockaddr_un* addr, socklen_t* addrLen,
                               char name[MCCL_IPC_SOCKNAME_LEN], int* isAbstract) {
  int abstract = mcclParamIpcUseAbstract() != 0;
  int len;
  if (abstract) {
    len = snprintf(name, MCCL_IPC_SOCKNAME_LEN, "@" MCCL_IPC_SOCKNAME_FMT, rank, hash);
  } else {
    const char* dir = mcclParamIpcDir();
    len = snprintf(name, MCCL_IPC_SOCKNAME_LEN, "%s/" MCCL_IPC_SOCKNAME_FMT, dir ? dir : "/tmp", rank, hash);
  }
  if (len < 0 || len >= (int)sizeof(addr->sun_path)) {
    WARN("UDS: socket name for rank %d hash %" PRIx64 " does not fit in sun_path (%d bytes, max %zu): MCCL_IPC_DIR=%s",
         rank, hash, len, sizeof(addr->sun_path) - 1, mcclParamIpcDir() ? mcclParamIpcDir() : "(unset)");
    name[0] = '\0';
    return mcclInvalidArgument;
  }
  if (abstract) {
    *addrLen = mcclSocketAbstractAddr(name + 1, addr);  // name is "@..."; the '@' becomes the leading NUL
  } else {
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path, name, (size_t)len);
    *addrLen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)len + 1);
  }
  *isAbstract = abstract;
  return mcclSuccess;
}

mcclResult_t mcclIpcSocketInit(mcclIpcSocket* handle, int rank, uint64_t hash, volatile uint32_t* abortFlag) {
  MCCL_ARGCHECK(handle != NULL, "mcclIpcSocketInit: handle is NULL");
  handle->fd = -1;
  handle->socketName[0] = '\0';
  handle->isAbstract = 0;
  handle->abortFlag = abortFlag;
  MCCL_ARGCHECK(rank >= 0, "mcclIpcSocketInit: rank %d is negative", rank);

  mcclResult_t res = mcclSuccess;
  struct sockaddr_un addr;
  socklen_t addrLen;
  char name[MCCL_IPC_SOCKNAME_LEN];
  int isAbstract, fd = -1, on = 1;
  MCCLCHECK(ipcAddress(rank, hash, &addr, &addrLen, name, &isAbstract));

  SYSCHECKGOTO(fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), res, fail);
  // The kernel attaches the sender's pid/uid/gid to every message we receive.
  SYSCHECKGOTO(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)), res, close_fd);
  // A file left by a crashed run would make bind fail with EADDRINUSE.
  if (!isAbstract && unlink(name) != 0 && errno != ENOENT)
    INFO(MCCL_IPC, "UDS: could not unlink stale %s: %s", name, strerror(errno));
  if (bind(fd, (struct sockaddr*)&addr, addrLen) != 0) {
    WARN("UDS: binding socket %s (rank %d hash %" PRIx64 ") failed: %s", name, rank, hash, strerror(errno));
    res = mcclSystemError;
    goto close_fd;
  }
  TRACE(MCCL_IPC, "UDS: created socket %s fd %d", name, fd);
  handle->fd = fd;
  handle->isAbstract = isAbstract;
  memcpy(handle->socketName, name, sizeof(name));
  return mcclSuccess;

close_fd:
  close(fd);
fail:
  return res;
}

mcclResult_t mcclIpcSocketClose(mcclIpcSocket* handle) {
  MCCL_ARGCHECK(handle != NULL, "mcclIpcSocketClose: handle is NULL");
  if (handle->fd < 0) return mcclSuccess;
  if (!handle->isAbstract && handle->socketName[0] != '\0' && unlink(handle->socketName) != 0)
    INFO(MCCL_IPC, "UDS: unlink %s: %s", handle->socketName, strerror(errno));
  close(handle->fd);
  handle->fd = -1;
  handle->socketName[0] = '\0';
  return mcclSuccess;
}

mcclResult_t mcclIpcSocketGetFd(mcclIpcSocket* handle, int* fd) {
  MCCL_ARGCHECK(handle != NULL, "mcclIpcSocketGetFd: handle is NULL");
  MCCL_ARGCHECK(fd != NULL, "mcclIpcSocketGetFd: fd is NULL");
  *fd = handle->fd;
  return mcclSuccess;
}

// Deadline in ms on the monotonic clock, or -1 for none.
static int64_t ipcDeadline(void) {
  int64_t timeout = mcclParamIpcTimeout();
  return timeout > 0 ? (int64_t)mcclClockMs() + timeout : -1;
}

mcclResult_t mcclIpcSocketSendMsg(mcclIpcSocket* handle, const void* hdr, int hdrLen, int sendFd, int rank,
                                  uint64_t hash) {
  MCCL_ARGCHECK(handle != NULL, "mcclIpcSocketSendMsg: handle is NULL");
  MCCL_ARGCHECK(handle->fd >= 0, "mcclIpcSocketSendMsg: handle->fd is %d (socket closed or never opened)", handle->fd);
  MCCL_ARGCHECK(hdrLen >= 0 && hdrLen <= MCCL_IPC_MAX_HDR, "mcclIpcSocketSendMsg: hdrLen %d not in 0..%d", hdrLen,
                MCCL_IPC_MAX_HDR);
  MCCL_ARGCHECK(hdr != NULL || hdrLen == 0, "mcclIpcSocketSendMsg: hdr is NULL with hdrLen %d", hdrLen);
  MCCL_ARGCHECK(sendFd >= -1, "mcclIpcSocketSendMsg: sendFd %d", sendFd);
  MCCL_ARGCHECK(sendFd == -1 || fcntl(sendFd, F_GETFD) != -1,
                "mcclIpcSocketSendMsg: sendFd %d is not an open descriptor", sendFd);
  MCCL_ARGCHECK(rank >= 0, "mcclIpcSocketSendMsg: rank %d is negative", rank);

  struct sockaddr_un addr;
  socklen_t addrLen;
  char name[MCCL_IPC_SOCKNAME_LEN];
  int isAbstract;
  MCCLCHECK(ipcAddress(rank, hash, &addr, &addrLen, name, &isAbstract));

  // EXERCISE(03.sendmsg)
  // A header-less message still needs one byte: a zero-length datagram cannot carry control data
  // reliably, and it would look like "nothing" to the receiver.
  char dummy = '\0';
  struct iovec iov;
  iov.iov_base = (hdr != NULL && hdrLen > 0) ? (void*)hdr : &dummy;
  iov.iov_len = (hdr != NULL && hdrLen > 0) ? (size_t)hdrLen : 1;
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_name = &addr;
  msg.msg_namelen = addrLen;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (sendFd >= 0) {
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    memcpy(CMSG_DATA(cm), &sendFd, sizeof(int));
  }
  TRACE(MCCL_IPC, "UDS: sending %zu bytes fd %d from %s to %s", iov.iov_len, sendFd, handle->socketName, name);

  int64_t deadline = ipcDeadline();
  long sleepUs = 50;
  for (;;) {
    ssize_t n = sendmsg(handle->fd, &msg, MSG_NOSIGNAL);
    if (n == (ssize_t)iov.iov_len) return mcclSuccess;
    if (n >= 0) {
      WARN("UDS: short send to %s: %zd of %zu bytes", name, n, iov.iov_len);
      return mcclSystemError;
    }
    int err = errno;
    if (err == EINTR) continue;
    // Not there yet (ECONNREFUSED abstract, ENOENT path) or its queue is full (EAGAIN): retry.
    if (err != EAGAIN && err != EWOULDBLOCK && err != ECONNREFUSED && err != ENOENT) {
      WARN("UDS: sending to %s failed: %s (%d)%s", name, strerror(err), err,
           err == ETOOMANYREFS ? " (too many fds in flight for this user: RLIMIT_NOFILE)" : "");
      return mcclSystemError;
    }
    if (mcclIsAborted(handle->abortFlag)) return mcclInternalError;
    if (deadline >= 0 && (int64_t)mcclClockMs() >= deadline) {
      WARN("UDS: sending to %s timed out after %" PRId64 " ms (last error: %s); is the peer alive? (MCCL_IPC_TIMEOUT)",
           name, mcclParamIpcTimeout(), strerror(err));
      return mcclTimeout;
    }
    struct timespec ts = {0, sleepUs * 1000};
    nanosleep(&ts, NULL);
    if (sleepUs < 5000) sleepUs *= 2;
  }
  // END EXERCISE(03.sendmsg)
}

static void closeFds(const int* fds, int n) {
  for (int i = 0; i < n; i++) close(fds[i]);
}

static mcclResult_t ipcRecv(mcclIpcSocket* handle, void* hdr, int hdrLen, int* recvFd, int requireFd) {
  MCCL_ARGCHECK(handle != NULL, "mcclIpcSocketRecvMsg: handle is NULL");
  MCCL_ARGCHECK(handle->fd >= 0, "mcclIpcSocketRecvMsg: handle->fd is %d (socket closed or never opened)", handle->fd);
  MCCL_ARGCHECK(hdrLen >= 0 && hdrLen <= MCCL_IPC_MAX_HDR, "mcclIpcSocketRecvMsg: hdrLen %d not in 0..%d", hdrLen,
                MCCL_IPC_MAX_HDR);
  MCCL_ARGCHECK(hdr != NULL || hdrLen == 0, "mcclIpcSocketRecvMsg: hdr is NULL with hdrLen %d", hdrLen);

  // One byte more than expected, so a longer datagram shows up as a length mismatch.
  size_t expected = (hdr != NULL && hdrLen > 0) ? (size_t)hdrLen : 1;
  char data[MCCL_IPC_MAX_HDR + 1];
  struct iovec iov = {data, expected + 1};
  // Room for the credentials and two fds: a second fd is then received (and closed by us)
  // instead of being dropped silently by the kernel.
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(2 * sizeof(int))];
  } control;
  _Static_assert(sizeof(control.buf) / sizeof(int) <= MCCL_IPC_MAX_RECV_FDS, "every fd the kernel can install is seen");
  struct msghdr msg;
  ssize_t n;
  int64_t deadline = ipcDeadline();
  for (;;) {
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    n = recvmsg(handle->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n >= 0) break;
    int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      WARN("UDS: receiving on %s failed: %s (%d)", handle->socketName, strerror(err), err);
      return mcclSystemError;
    }
    if (mcclIsAborted(handle->abortFlag)) return mcclInternalError;
    int64_t left = deadline < 0 ? 10 : deadline - (int64_t)mcclClockMs();
    if (left <= 0) {
      WARN("UDS: nothing received on %s for %" PRId64 " ms: peer dead or never sent (MCCL_IPC_TIMEOUT)",
           handle->socketName, mcclParamIpcTimeout());
      return mcclTimeout;
    }
    // Short slices so the abort flag is seen quickly.
    struct pollfd pfd = {handle->fd, POLLIN, 0};
    (void)poll(&pfd, 1, (int)(left < 10 ? left : 10));
  }

  // Collect everything the kernel installed before judging the message, so every exit closes it.
  mcclIpcControl ctl;
  mcclResult_t dr = mcclIpcSocketControlDecode(control.buf, msg.msg_controllen, &ctl);
  int* fds = ctl.fds;
  int nFds = ctl.nFds;
  const struct ucred cred = ctl.cred;
  if (dr != mcclSuccess) {
    WARN("UDS: malformed control data on %s; %d fd(s) closed", handle->socketName, nFds);
    goto reject;
  }
  if (!ctl.haveCred) {
    WARN("UDS: message on %s carried no sender credentials (SO_PASSCRED); %d fd(s) closed", handle->socketName, nFds);
    goto reject;
  }
  if (cred.uid != getuid()) {
    WARN("UDS: message on %s from pid %d uid %u rejected: our uid is %u; %d fd(s) closed", handle->socketName,
         (int)cred.pid, (unsigned)cred.uid, (unsigned)getuid(), nFds);
    goto reject;
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    WARN("UDS: control data truncated on %s (more fds than one?) from pid %d; %d fd(s) closed", handle->socketName,
         (int)cred.pid, nFds);
    goto reject;
  }
  if ((size_t)n != expected || (msg.msg_flags & MSG_TRUNC)) {
    WARN("UDS: message on %s from pid %d has %s%zd bytes, expected %zu; %d fd(s) closed", handle->socketName,
         (int)cred.pid, (msg.msg_flags & MSG_TRUNC) ? "more than " : "", n, expected, nFds);
    goto reject;
  }
  if (nFds > 1) {
    WARN("UDS: message on %s from pid %d carried %d fds, expected at most 1; all closed", handle->socketName,
         (int)cred.pid, nFds);
    goto reject;
  }
  if (requireFd && nFds == 0) {
    WARN("UDS: message on %s from pid %d carried no fd", handle->socketName, (int)cred.pid);
    goto reject;
  }
  if (recvFd == NULL && nFds == 1) {
    INFO(MCCL_IPC, "UDS: unexpected fd from pid %d on %s closed", (int)cred.pid, handle->socketName);
    closeFds(fds, nFds);
    nFds = 0;
  }
  TRACE(MCCL_IPC, "UDS: received %zd bytes fd %d from pid %d on %s", n, nFds ? fds[0] : -1, (int)cred.pid,
        handle->socketName);
  if (hdr != NULL && hdrLen > 0) memcpy(hdr, data, (size_t)hdrLen);
  if (recvFd != NULL) *recvFd = nFds ? fds[0] : -1;
  return mcclSuccess;

reject:
  closeFds(fds, nFds);
  return mcclRemoteError;
}

mcclResult_t mcclIpcSocketRecvMsg(mcclIpcSocket* handle, void* hdr, int hdrLen, int* recvFd) {
  return ipcRecv(handle, hdr, hdrLen, recvFd, 0);
}

mcclResult_t mcclIpcSocketSendFd(mcclIpcSocket* handle, int sendFd, int rank, uint64_t hash) {
  MCCL_ARGCHECK(sendFd >= 0, "mcclIpcSocketSendFd: sendFd %d", sendFd);
  return mcclIpcSocketSendMsg(handle, NULL, 0, sendFd, rank, hash);
}

mcclResult_t mcclIpcSocketRecvFd(mcclIpcSocket* handle, int* recvFd) {
  MCCL_ARGCHECK(recvFd != NULL, "mcclIpcSocketRecvFd: recvFd is NULL");
  return ipcRecv(handle, NULL, 0, recvFd, 1);
}
