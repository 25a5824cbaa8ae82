// The sim's two-process tests: an fd and a size over a Unix socket (SCM_RIGHTS), as an exported POSIX-fd
// handle crosses processes. The sim is below the labs, so lab 03's ipcsocket is not at hand here.
#ifndef SIM_TEST_FD_H_
#define SIM_TEST_FD_H_
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

static inline int sendFd(int sock, int fd, uint64_t size) {
  char cbuf[CMSG_SPACE(sizeof(int))];
  memset(cbuf, 0, sizeof(cbuf));
  struct iovec iov = {&size, sizeof(size)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, 0) == (ssize_t)sizeof(size) ? 0 : -1;
}

static inline int recvFd(int sock, uint64_t* size) {
  char cbuf[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {size, sizeof(*size)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
  if (recvmsg(sock, &msg, 0) != (ssize_t)sizeof(*size)) return -1;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

#endif
