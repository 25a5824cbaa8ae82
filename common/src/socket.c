// mccl_socket.h: the abstract Unix-socket address every layer builds the same way, and whole messages
// over a stream.
#include "mccl_socket.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include "mccl_utils.h"

socklen_t mcclSocketAbstractAddr(const char* name, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  size_t len = strnlen(name, sizeof(addr->sun_path) - 2);
  memcpy(addr->sun_path + 1, name, len);  // sun_path[0] == '\0': the abstract namespace
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

// Waits until fd is ready for `events`: 1 ready (or in error, which the next call reports), 0 keep waiting
// (a slice passed), or a final status.
static int waitSlice(int fd, short events, uint64_t deadline, volatile uint32_t* abortFlag, mcclSocketStatus* st) {
  if (mcclIsAborted(abortFlag)) {
    *st = mcclSocketAborted;
    return -1;
  }
  const uint64_t now = mcclClockMs();
  if (now >= deadline) {
    *st = mcclSocketTimedOut;
    return -1;
  }
  const uint64_t left = deadline - now;
  struct pollfd p = {.fd = fd, .events = events, .revents = 0};
  const int r = poll(&p, 1, left < 50 ? (int)left : 50);
  if (r < 0 && errno != EINTR) {
    *st = mcclSocketFailed;
    return -1;
  }
  return r > 0;
}

static mcclSocketStatus moveAll(int out, int fd, char* buf, size_t size, uint64_t deadline,
                                volatile uint32_t* abortFlag, size_t* doneOut) {
  size_t done = 0;
  mcclSocketStatus st = mcclSocketDone;
  while (done < size) {
    const ssize_t n = out ? send(fd, buf + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                          : recv(fd, buf + done, size - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0 && !out) {
      st = mcclSocketClosed;
      break;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (waitSlice(fd, out ? POLLOUT : POLLIN, deadline, abortFlag, &st) < 0) break;
      continue;
    }
    st = n < 0 && (errno == EPIPE || errno == ECONNRESET) ? mcclSocketClosed : mcclSocketFailed;
    break;
  }
  if (doneOut) *doneOut = done;
  return st;
}

mcclSocketStatus mcclSocketSendAll(int fd, const void* data, size_t size, uint64_t deadline,
                                   volatile uint32_t* abortFlag, size_t* done) {
  return moveAll(1, fd, (char*)(uintptr_t)data, size, deadline, abortFlag, done);
}

mcclSocketStatus mcclSocketRecvAll(int fd, void* data, size_t size, uint64_t deadline, volatile uint32_t* abortFlag,
                                   size_t* done) {
  return moveAll(0, fd, (char*)data, size, deadline, abortFlag, done);
}
