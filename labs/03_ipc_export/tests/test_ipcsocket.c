// Tests of the Unix-socket layer (mccl_ipcsocket.h): names, fd passing within and across processes,
// credentials, malformed messages, timeouts, dead peers, abort. No device is used.
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mccl_ipcsocket.h"
#include "mccl_param.h"
#include "mccl_test.h"
#include "mccl_fork.h"
#include "mccl_socket.h"
#include "mccl_utils.h"
#include "../src/ipcsocket_wire.h"  // the control-part decoder, tested on hand-made bytes

// Each test gets its own hash so a leftover from a failed test cannot collide with the next.
static uint64_t freshHash(void) { return mcclTestRand() ^ ((uint64_t)getpid() << 32); }

static void setIpcEnv(int timeoutMs, int abstract, const char* dir) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%d", timeoutMs);
  setenv("MCCL_IPC_TIMEOUT", buf, 1);
  setenv("MCCL_IPC_USE_ABSTRACT", abstract ? "1" : "0", 1);
  if (dir) setenv("MCCL_IPC_DIR", dir, 1);
  else unsetenv("MCCL_IPC_DIR");
  mcclParamResetAll();
}

// A memfd holding `n` bytes of `pattern`: a stand-in for an exported device-memory fd.
static int patternFd(unsigned char pattern, size_t n) {
  int fd = memfd_create("mccl-test", MFD_CLOEXEC);
  if (fd < 0) return -1;
  unsigned char buf[256];
  memset(buf, pattern, sizeof(buf));
  for (size_t off = 0; off < n; off += sizeof(buf))
    if (pwrite(fd, buf, n - off < sizeof(buf) ? n - off : sizeof(buf), (off_t)off) < 0) {
      close(fd);
      return -1;
    }
  return fd;
}

static void initCloseAbstract(void) {
  setIpcEnv(2000, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket s, dup;
  EXPECT_OK(mcclIpcSocketInit(&s, 3, hash, NULL));
  EXPECT_GE(s.fd, 0);
  EXPECT_EQ(s.isAbstract, 1);
  EXPECT_EQ(s.socketName[0], '@');
  EXPECT_EQ(mcclTestCountFds(), base + 1);
  int fd = -1;
  EXPECT_OK(mcclIpcSocketGetFd(&s, &fd));
  EXPECT_EQ(fd, s.fd);
  // The same (rank, hash) is taken: bind fails, nothing is left open.
  EXPECT_RES(mcclIpcSocketInit(&dup, 3, hash, NULL), mcclSystemError);
  EXPECT_EQ(dup.fd, -1);
  EXPECT_EQ(mcclTestCountFds(), base + 1);
  EXPECT_OK(mcclIpcSocketClose(&s));
  EXPECT_EQ(s.fd, -1);
  EXPECT_OK(mcclIpcSocketClose(&s));  // twice is a no-op
  EXPECT_EQ(mcclTestCountFds(), base);
  // The name is free again once closed.
  EXPECT_OK(mcclIpcSocketInit(&s, 3, hash, NULL));
  EXPECT_OK(mcclIpcSocketClose(&s));
}

static void initClosePath(void) {
  char dir[] = "/tmp/mccl-lab03-XXXXXX";
  EXPECT_TRUE(mkdtemp(dir) != NULL);
  setIpcEnv(2000, 0, dir);
  int base = mcclTestCountFds();
  mcclIpcSocket a, b;
  uint64_t hash = freshHash();
  EXPECT_OK(mcclIpcSocketInit(&a, 0, hash, NULL));
  EXPECT_EQ(a.isAbstract, 0);
  EXPECT_EQ(strncmp(a.socketName, dir, strlen(dir)), 0);
  struct stat st;
  EXPECT_EQ(stat(a.socketName, &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  char path[MCCL_IPC_SOCKNAME_LEN];
  snprintf(path, sizeof(path), "%s", a.socketName);
  // A path socket passes fds just like an abstract one.
  EXPECT_OK(mcclIpcSocketInit(&b, 1, hash, NULL));
  int fd = patternFd(0x5a, 64), got = -1;
  EXPECT_GE(fd, 0);
  EXPECT_OK(mcclIpcSocketSendFd(&a, fd, 1, hash));
  EXPECT_OK(mcclIpcSocketRecvFd(&b, &got));
  unsigned char c = 0;
  EXPECT_EQ(pread(got, &c, 1, 10), 1);
  EXPECT_EQ(c, 0x5a);
  close(got);
  close(fd);
  EXPECT_OK(mcclIpcSocketClose(&b));
  EXPECT_OK(mcclIpcSocketClose(&a));
  EXPECT_EQ(stat(path, &st), -1);  // unlinked on close
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(mcclTestCountFds(), base);
  EXPECT_EQ(rmdir(dir), 0);  // nothing left inside
  setIpcEnv(2000, 1, NULL);
}

static void badArguments(void) {
  setIpcEnv(2000, 1, NULL);
  int base = mcclTestCountFds();
  mcclIpcSocket s;
  EXPECT_RES(mcclIpcSocketInit(NULL, 0, 1, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketInit(&s, -1, 1, NULL), mcclInvalidArgument);
  EXPECT_EQ(s.fd, -1);
  // A directory so long the name cannot fit in sun_path.
  char longDir[200];
  memset(longDir, 'd', sizeof(longDir) - 1);
  longDir[0] = '/';
  longDir[sizeof(longDir) - 1] = '\0';
  setIpcEnv(2000, 0, longDir);
  EXPECT_RES(mcclIpcSocketInit(&s, 0, 1, NULL), mcclInvalidArgument);
  EXPECT_EQ(s.fd, -1);
  setIpcEnv(2000, 1, NULL);
  EXPECT_EQ(mcclTestCountFds(), base);

  uint64_t hash = freshHash();
  EXPECT_OK(mcclIpcSocketInit(&s, 0, hash, NULL));
  char hdr[8] = {0};
  int fd = -1;
  EXPECT_RES(mcclIpcSocketSendMsg(&s, hdr, MCCL_IPC_MAX_HDR + 1, -1, 0, hash), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketSendMsg(&s, hdr, -1, -1, 0, hash), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketSendMsg(&s, NULL, 8, -1, 0, hash), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketSendMsg(&s, hdr, 8, -1, -2, hash), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketSendFd(&s, -1, 0, hash), mcclInvalidArgument);
  int closedFd = dup(0);
  EXPECT_GE(closedFd, 0);
  close(closedFd);
  EXPECT_RES(mcclIpcSocketSendFd(&s, closedFd, 0, hash), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketRecvMsg(&s, NULL, 8, &fd), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketRecvFd(&s, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketGetFd(&s, NULL), mcclInvalidArgument);
  EXPECT_OK(mcclIpcSocketClose(&s));
  EXPECT_RES(mcclIpcSocketSendMsg(&s, hdr, 8, -1, 0, hash), mcclInvalidArgument);  // closed socket
  EXPECT_RES(mcclIpcSocketRecvMsg(&s, hdr, 8, &fd), mcclInvalidArgument);
  EXPECT_RES(mcclIpcSocketClose(NULL), mcclInvalidArgument);
  EXPECT_EQ(fd, -1);  // never written
  EXPECT_EQ(mcclTestCountFds(), base);
}

// Header and fd between two sockets of one process: the fd received is a new descriptor for the
// same open file (same inode, shared contents).
static void sendRecvMsgWithFd(void) {
  setIpcEnv(2000, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket a, b;
  EXPECT_OK(mcclIpcSocketInit(&a, 0, hash, NULL));
  EXPECT_OK(mcclIpcSocketInit(&b, 1, hash, NULL));
  unsigned char hdr[200], got[200];
  for (size_t i = 0; i < sizeof(hdr); i++) hdr[i] = (unsigned char)mcclTestRand();
  int fd = patternFd(0x11, 4096), rfd = -1;
  EXPECT_GE(fd, 0);
  EXPECT_OK(mcclIpcSocketSendMsg(&a, hdr, sizeof(hdr), fd, 1, hash));
  EXPECT_OK(mcclIpcSocketRecvMsg(&b, got, sizeof(got), &rfd));
  EXPECT_MEM_EQ(got, hdr, sizeof(hdr));
  EXPECT_GE(rfd, 0);
  EXPECT_NE(rfd, fd);
  struct stat s1, s2;
  EXPECT_EQ(fstat(fd, &s1), 0);
  EXPECT_EQ(fstat(rfd, &s2), 0);
  EXPECT_EQ(s1.st_ino, s2.st_ino);
  EXPECT_EQ(s1.st_dev, s2.st_dev);
  EXPECT_TRUE(fcntl(rfd, F_GETFD) & FD_CLOEXEC);  // MSG_CMSG_CLOEXEC
  unsigned char w = 0xc3, r = 0;
  EXPECT_EQ(pwrite(rfd, &w, 1, 4000), 1);
  EXPECT_EQ(pread(fd, &r, 1, 4000), 1);
  EXPECT_EQ(r, 0xc3);
  EXPECT_EQ(close(rfd), 0);
  EXPECT_EQ(close(fd), 0);
  // Header only, both ways of asking.
  EXPECT_OK(mcclIpcSocketSendMsg(&b, hdr, 16, -1, 0, hash));
  rfd = 1234;
  EXPECT_OK(mcclIpcSocketRecvMsg(&a, got, 16, &rfd));
  EXPECT_EQ(rfd, -1);
  EXPECT_OK(mcclIpcSocketSendMsg(&b, NULL, 0, -1, 0, hash));
  EXPECT_OK(mcclIpcSocketRecvMsg(&a, NULL, 0, NULL));
  EXPECT_OK(mcclIpcSocketClose(&a));
  EXPECT_OK(mcclIpcSocketClose(&b));
  EXPECT_EQ(mcclTestCountFds(), base);
}

static void sendFdRecvFd(void) {
  setIpcEnv(2000, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket a, b;
  EXPECT_OK(mcclIpcSocketInit(&a, 0, hash, NULL));
  EXPECT_OK(mcclIpcSocketInit(&b, 1, hash, NULL));
  int fd = patternFd(0x77, 128), rfd = -1;
  EXPECT_OK(mcclIpcSocketSendFd(&a, fd, 1, hash));
  EXPECT_OK(mcclIpcSocketRecvFd(&b, &rfd));
  unsigned char c = 0;
  EXPECT_EQ(pread(rfd, &c, 1, 127), 1);
  EXPECT_EQ(c, 0x77);
  close(rfd);
  // RecvFd on a message without an fd: rejected, nothing written.
  EXPECT_OK(mcclIpcSocketSendMsg(&a, NULL, 0, -1, 1, hash));
  rfd = -7;
  EXPECT_RES(mcclIpcSocketRecvFd(&b, &rfd), mcclRemoteError);
  EXPECT_EQ(rfd, -7);
  // An fd nobody asked for is closed, not leaked.
  EXPECT_OK(mcclIpcSocketSendFd(&a, fd, 1, hash));
  EXPECT_OK(mcclIpcSocketRecvMsg(&b, NULL, 0, NULL));
  close(fd);
  EXPECT_OK(mcclIpcSocketClose(&a));
  EXPECT_OK(mcclIpcSocketClose(&b));
  EXPECT_EQ(mcclTestCountFds(), base);
}

// A datagram of the wrong length is rejected and the fd it carried is closed.
static void wrongLengthRejected(void) {
  setIpcEnv(2000, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket a, b;
  EXPECT_OK(mcclIpcSocketInit(&a, 0, hash, NULL));
  EXPECT_OK(mcclIpcSocketInit(&b, 1, hash, NULL));
  int fd = patternFd(1, 16), rfd = -5;
  char small[8] = {1}, big[32] = {2}, want[16];
  memset(want, 0xee, sizeof(want));
  EXPECT_OK(mcclIpcSocketSendMsg(&a, small, sizeof(small), fd, 1, hash));
  EXPECT_RES(mcclIpcSocketRecvMsg(&b, want, sizeof(want), &rfd), mcclRemoteError);
  EXPECT_OK(mcclIpcSocketSendMsg(&a, big, sizeof(big), fd, 1, hash));
  EXPECT_RES(mcclIpcSocketRecvMsg(&b, want, sizeof(want), &rfd), mcclRemoteError);
  EXPECT_EQ(rfd, -5);
  EXPECT_EQ((unsigned char)want[0], 0xee);  // outputs untouched on failure
  close(fd);
  EXPECT_OK(mcclIpcSocketClose(&a));
  EXPECT_OK(mcclIpcSocketClose(&b));
  EXPECT_EQ(mcclTestCountFds(), base);
}

// Two fds in one message (built by hand: the API sends one): the receiver closes both.
static void twoFdsRejected(void) {
  setIpcEnv(2000, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket b;
  EXPECT_OK(mcclIpcSocketInit(&b, 1, hash, NULL));
  int raw = socket(AF_UNIX, SOCK_DGRAM, 0);
  EXPECT_GE(raw, 0);
  struct sockaddr_un addr;
  const socklen_t addrLen = mcclSocketAbstractAddr(b.socketName + 1, &addr);  // past the '@' of "@name"
  int fds[2] = {patternFd(1, 8), patternFd(2, 8)};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(2 * sizeof(int))];
  } control;
  memset(&control, 0, sizeof(control));
  char byte = 0;
  struct iovec iov = {&byte, 1};
  struct msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_name = &addr;
  msg.msg_namelen = addrLen;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof(control.buf);
  struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
  memcpy(CMSG_DATA(cm), fds, sizeof(fds));
  EXPECT_EQ(sendmsg(raw, &msg, 0), 1);
  close(raw);
  close(fds[0]);
  close(fds[1]);
  int rfd = -3;
  EXPECT_RES(mcclIpcSocketRecvFd(&b, &rfd), mcclRemoteError);
  EXPECT_EQ(rfd, -3);
  EXPECT_OK(mcclIpcSocketClose(&b));
  EXPECT_EQ(mcclTestCountFds(), base);
}

static void recvTimesOut(void) {
  setIpcEnv(200, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket b;
  EXPECT_OK(mcclIpcSocketInit(&b, 1, hash, NULL));
  uint64_t t0 = mcclClockMs();
  int rfd = -9;
  EXPECT_RES(mcclIpcSocketRecvFd(&b, &rfd), mcclTimeout);
  long long ms = (long long)(mcclClockMs() - t0);
  EXPECT_GE(ms, 190);
  EXPECT_LT(ms, 2000);
  EXPECT_EQ(rfd, -9);
  // Sending to a (rank, hash) nobody bound also ends in mcclTimeout.
  t0 = mcclClockMs();
  EXPECT_RES(mcclIpcSocketSendMsg(&b, NULL, 0, -1, 7, hash), mcclTimeout);
  ms = (long long)(mcclClockMs() - t0);
  EXPECT_GE(ms, 190);
  EXPECT_LT(ms, 2000);
  EXPECT_OK(mcclIpcSocketClose(&b));
  EXPECT_EQ(mcclTestCountFds(), base);
}

// The real thing: a memfd written by one process, read through the fd another received.
static void crossProcessFd(void) {
  setIpcEnv(5000, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket s;
  EXPECT_OK(mcclIpcSocketInit(&s, 0, hash, NULL));
  pid_t pid = mcclForkChild();  // dies with this process
  EXPECT_GE(pid, 0);
  if (pid == 0) {
    mcclIpcSocket c;
    int fd = patternFd(0xa5, 1 << 16), ok = 0;
    if (fd >= 0 && mcclIpcSocketInit(&c, 1, hash, NULL) == mcclSuccess) {
      int pidHdr = (int)getpid();
      ok = mcclIpcSocketSendMsg(&c, &pidHdr, sizeof(pidHdr), fd, 0, hash) == mcclSuccess &&
           mcclIpcSocketRecvMsg(&c, NULL, 0, NULL) == mcclSuccess;  // the parent's ack
      mcclIpcSocketClose(&c);
    }
    _exit(ok ? 0 : 1);
  }
  int childPid = 0, rfd = -1;
  EXPECT_OK(mcclIpcSocketRecvMsg(&s, &childPid, sizeof(childPid), &rfd));
  EXPECT_EQ(childPid, pid);
  unsigned char buf[1 << 16];
  EXPECT_EQ(pread(rfd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
  for (size_t i = 0; i < sizeof(buf); i++)
    if (buf[i] != 0xa5) EXPECT_EQ(buf[i], 0xa5);
  EXPECT_OK(mcclIpcSocketSendMsg(&s, NULL, 0, -1, 1, hash));
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The child is gone; its memfd lives on through our fd.
  EXPECT_EQ(pread(rfd, buf, 1, 100), 1);
  EXPECT_EQ(buf[0], 0xa5);
  close(rfd);
  EXPECT_OK(mcclIpcSocketClose(&s));
  EXPECT_EQ(mcclTestCountFds(), base);
}

// A peer that dies mid-exchange: the first message arrives, the second never does. The receive
// must end in mcclTimeout within the timeout, and sending to the dead peer too.
static void peerDiesMidExchange(void) {
  setIpcEnv(300, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket s;
  EXPECT_OK(mcclIpcSocketInit(&s, 0, hash, NULL));
  pid_t pid = mcclForkChild();  // dies with this process
  EXPECT_GE(pid, 0);
  if (pid == 0) {
    mcclIpcSocket c;
    int fd = patternFd(0x3c, 64);
    if (mcclIpcSocketInit(&c, 1, hash, NULL) == mcclSuccess) mcclIpcSocketSendFd(&c, fd, 0, hash);
    raise(SIGKILL);  // dies before the second message, without closing anything
    _exit(1);
  }
  int rfd = -1;
  EXPECT_OK(mcclIpcSocketRecvFd(&s, &rfd));
  close(rfd);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  uint64_t t0 = mcclClockMs();
  rfd = -2;
  EXPECT_RES(mcclIpcSocketRecvFd(&s, &rfd), mcclTimeout);
  EXPECT_LT((long long)(mcclClockMs() - t0), 3000);
  EXPECT_EQ(rfd, -2);
  t0 = mcclClockMs();
  EXPECT_RES(mcclIpcSocketSendMsg(&s, NULL, 0, -1, 1, hash), mcclTimeout);  // its name died with it
  EXPECT_LT((long long)(mcclClockMs() - t0), 3000);
  EXPECT_OK(mcclIpcSocketClose(&s));
  EXPECT_EQ(mcclTestCountFds(), base);
}

// A peer that exits before sending anything at all.
static void peerExitsBeforeSending(void) {
  setIpcEnv(300, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket s;
  EXPECT_OK(mcclIpcSocketInit(&s, 0, hash, NULL));
  pid_t pid = mcclForkChild();  // dies with this process
  EXPECT_GE(pid, 0);
  if (pid == 0) _exit(0);
  uint64_t t0 = mcclClockMs();
  int rfd = -2;
  EXPECT_RES(mcclIpcSocketRecvFd(&s, &rfd), mcclTimeout);
  EXPECT_LT((long long)(mcclClockMs() - t0), 3000);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_OK(mcclIpcSocketClose(&s));
  EXPECT_EQ(mcclTestCountFds(), base);
}

// An fd from a process of another uid is refused and closed (needs root to make such a process).
static void otherUidRejected(void) {
  if (geteuid() != 0) SKIP("needs root to fork a peer that setuid()s to nobody (65534)");
  setIpcEnv(3000, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  mcclIpcSocket s;
  EXPECT_OK(mcclIpcSocketInit(&s, 0, hash, NULL));
  int pipefd[2];
  EXPECT_EQ(pipe(pipefd), 0);  // the child reports whether setuid worked
  pid_t pid = mcclForkChild();  // dies with this process
  EXPECT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    char ok = (setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0) ? 'y' : 'n';
    if (write(pipefd[1], &ok, 1) != 1) _exit(2);
    if (ok != 'y') _exit(3);
    mcclIpcSocket c;
    int fd = patternFd(0x66, 64);
    int rc = mcclIpcSocketInit(&c, 1, hash, NULL) == mcclSuccess && mcclIpcSocketSendFd(&c, fd, 0, hash) == mcclSuccess;
    mcclIpcSocketClose(&c);
    _exit(rc ? 0 : 1);
  }
  close(pipefd[1]);
  char ok = 'n';
  ssize_t r = read(pipefd[0], &ok, 1);
  close(pipefd[0]);
  int rfd = -4, status = 0;
  if (r != 1 || ok != 'y') {
    waitpid(pid, &status, 0);
    mcclIpcSocketClose(&s);
    SKIP("setuid(65534) refused here (user namespace without that uid?)");
  }
  mcclResult_t res = mcclIpcSocketRecvFd(&s, &rfd);
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);  // the child did send
  EXPECT_EQ(res, mcclRemoteError);
  EXPECT_EQ(rfd, -4);
  EXPECT_OK(mcclIpcSocketClose(&s));
  EXPECT_EQ(mcclTestCountFds(), base);  // the received fd was closed
}

static volatile uint32_t abortFlag;
static void* setAbortLater(void* arg) {
  (void)arg;
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  __atomic_store_n(&abortFlag, 1, __ATOMIC_RELEASE);
  return NULL;
}

// With no timeout at all, only the abort flag ends a wait: it must, promptly.
static void abortFlagEndsWait(void) {
  setIpcEnv(0, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  abortFlag = 0;
  mcclIpcSocket s;
  EXPECT_OK(mcclIpcSocketInit(&s, 0, hash, &abortFlag));
  pthread_t th;
  EXPECT_EQ(pthread_create(&th, NULL, setAbortLater, NULL), 0);
  uint64_t t0 = mcclClockMs();
  int rfd = -1;
  mcclResult_t res = mcclIpcSocketRecvFd(&s, &rfd);
  pthread_join(th, NULL);
  EXPECT_EQ(res, mcclInternalError);
  EXPECT_LT((long long)(mcclClockMs() - t0), 2000);
  EXPECT_RES(mcclIpcSocketSendFd(&s, 0, 5, hash), mcclInternalError);  // nobody at rank 5, flag set
  EXPECT_OK(mcclIpcSocketClose(&s));
  EXPECT_EQ(mcclTestCountFds(), base);
  setIpcEnv(2000, 1, NULL);
}

// With no timeout (MCCL_IPC_TIMEOUT=0, as under `make gdb`) a peer that fails must not be waited
// for forever: mcclChildWatchStart raises the abort flag, which ends a recv and a send that retries
// a name nobody binds (ECONNREFUSED: the peer failed before its socket existed).
static void noTimeoutPeerFails(void) {
  setIpcEnv(0, 1, NULL);
  int base = mcclTestCountFds();
  uint64_t hash = freshHash();
  volatile uint32_t abortFlag = 0;
  mcclIpcSocket s;
  EXPECT_OK(mcclIpcSocketInit(&s, 0, hash, &abortFlag));
  pid_t pid = mcclForkChild();
  EXPECT_GE(pid, 0);
  if (pid == 0) _exit(1);  // fails before binding rank 1's socket
  mcclChildWatch* w = NULL;
  EXPECT_OK(mcclChildWatchStart(pid, &abortFlag, &w));
  uint64_t t0 = mcclClockMs();
  int x = 0, rfd = -2;
  EXPECT_RES(mcclIpcSocketRecvMsg(&s, &x, sizeof(x), &rfd), mcclInternalError);
  EXPECT_RES(mcclIpcSocketSendMsg(&s, &x, sizeof(x), -1, 1, hash), mcclInternalError);
  EXPECT_LT((long long)(mcclClockMs() - t0), 2000);
  int status = 0;
  EXPECT_OK(mcclChildWatchEnd(w, 0, &status));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  EXPECT_OK(mcclIpcSocketClose(&s));
  EXPECT_EQ(mcclTestCountFds(), base);
  setIpcEnv(2000, 1, NULL);
}

// The control part of a received message is walked by its decoder, which must never read outside
// the bytes the kernel wrote. Regression: the walk before it trusted the first header's cmsg_len
// (CMSG_FIRSTHDR does not check it), so a length past the buffer read fds from beyond it; libFuzzer
// found it (labs/03_ipc_export/fuzz/crashes/ipc_control/). A length below the header made it read a huge count.
static void controlDecodeChecksLengths(void) {
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(2 * sizeof(int))];
  } c;
  memset(&c, 0, sizeof(c));
  struct cmsghdr* cm = (struct cmsghdr*)c.buf;
  cm->cmsg_len = CMSG_LEN(sizeof(struct ucred));
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_CREDENTIALS;
  struct ucred cred = {.pid = 7, .uid = 8, .gid = 9};
  memcpy(CMSG_DATA(cm), &cred, sizeof(cred));
  struct cmsghdr* fdm = (struct cmsghdr*)(c.buf + CMSG_SPACE(sizeof(struct ucred)));
  fdm->cmsg_len = CMSG_LEN(2 * sizeof(int));
  fdm->cmsg_level = SOL_SOCKET;
  fdm->cmsg_type = SCM_RIGHTS;
  int two[2] = {11, 12};
  memcpy(CMSG_DATA(fdm), two, sizeof(two));
  size_t len = CMSG_SPACE(sizeof(struct ucred)) + CMSG_LEN(2 * sizeof(int));
  mcclIpcControl ctl;
  EXPECT_OK(mcclIpcSocketControlDecode(c.buf, len, &ctl));
  EXPECT_EQ(ctl.haveCred, 1);
  EXPECT_EQ(ctl.cred.uid, 8u);
  EXPECT_EQ(ctl.nFds, 2);
  EXPECT_EQ(ctl.fds[1], 12);
  EXPECT_OK(mcclIpcSocketControlDecode(NULL, 0, &ctl));  // no control part at all
  EXPECT_EQ(ctl.nFds + ctl.haveCred, 0);
  // The fd header claims more bytes than were received: the fds found before it are reported (the
  // caller closes them), none from past the end.
  fdm->cmsg_len = 4096;
  EXPECT_RES(mcclIpcSocketControlDecode(c.buf, len, &ctl), mcclInternalError);
  EXPECT_EQ(ctl.nFds, 0);
  fdm->cmsg_len = sizeof(struct cmsghdr) - 1;  // shorter than its own header
  EXPECT_RES(mcclIpcSocketControlDecode(c.buf, len, &ctl), mcclInternalError);
  fdm->cmsg_len = CMSG_LEN(sizeof(int) + 1);  // not whole fds
  EXPECT_RES(mcclIpcSocketControlDecode(c.buf, len, &ctl), mcclInternalError);
  fdm->cmsg_len = CMSG_LEN(2 * sizeof(int));
  cm->cmsg_len = CMSG_LEN(sizeof(struct ucred) - 1);  // truncated credentials
  EXPECT_RES(mcclIpcSocketControlDecode(c.buf, len, &ctl), mcclInternalError);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(initCloseAbstract), MCCL_TEST_CASE(initClosePath), MCCL_TEST_CASE(badArguments),
               MCCL_TEST_CASE(sendRecvMsgWithFd), MCCL_TEST_CASE(sendFdRecvFd), MCCL_TEST_CASE(wrongLengthRejected),
               MCCL_TEST_CASE(twoFdsRejected), MCCL_TEST_CASE(recvTimesOut), MCCL_TEST_CASE(crossProcessFd),
               MCCL_TEST_CASE(peerDiesMidExchange), MCCL_TEST_CASE(peerExitsBeforeSending),
               MCCL_TEST_CASE(otherUidRejected), MCCL_TEST_CASE(abortFlagEndsWait), MCCL_TEST_CASE(noTimeoutPeerFails),
               MCCL_TEST_CASE(controlDecodeChecksLengths))
