// The sim's two-process tests: the peer is this binary re-executed (a forked child of an initialized CUDA
// process may not use CUDA) in the role MCCL_SIM_TEST_ROLE names, with its end of a socket pair in
// MCCL_SIM_TEST_SOCK; an fd and a size cross that socket (SCM_RIGHTS) as an exported POSIX-fd handle
// crosses processes. The sim is below the labs, so lab 03's ipcsocket is not at hand here.
#ifndef SIM_TEST_FD_H_
#define SIM_TEST_FD_H_
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>
#include "mccl_fork.h"

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

// Starts the peer in `role`; returns its pid (-1 on failure) and, in *sock, this process's end of the pair.
static inline pid_t simTestSpawnPeer(const char* role, const char* self, int* sock) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  pid_t pid = mcclForkChild();  // dies with this process
  if (pid == 0) {
    close(sv[0]);
    char num[16];
    snprintf(num, sizeof(num), "%d", sv[1]);
    setenv("MCCL_SIM_TEST_ROLE", role, 1);
    setenv("MCCL_SIM_TEST_SOCK", num, 1);
    execl("/proc/self/exe", self, (char*)NULL);
    _exit(99);
  }
  close(sv[1]);
  *sock = sv[0];
  return pid;
}

#endif
