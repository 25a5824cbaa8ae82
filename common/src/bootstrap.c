// The bootstrap, after NCCL's src/bootstrap.cc and src/misc/socket.cc: rank 0 hosts the rendezvous
// named in the unique id (NCCL runs it as the bootstrapRoot thread), every rank listens, and
// point-to-point messages are one connection each with a small header, kept in an "unexpected" list
// when they arrive before their Recv (NCCL's unexpectedEnqueue/Dequeue). Every listener exists
// twice: an abstract Unix stream socket, used by ranks of the same host (equal host hash), and a TCP
// socket on the interface MCCL_SOCKET_IFNAME picks (NCCL's ncclFindInterfaces), used across hosts.
// Both carry the same bytes; only connect and listen differ.
// A rank also holds one connection open to every peer whose process it cannot look up by pid (another
// machine, container or pid namespace): the kernel closes it when that process ends, which
// mcclBootstrapPeerGone reports (NCCL learns the same from the sockets its proxies and RAS keep open).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "mccl_bootstrap.h"
#include "mccl_checks.h"
#include "mccl_param.h"
#include "mccl_socket.h"
#include "mccl_utils.h"
#include "bootstrap_wire.h"

typedef struct unexpected {
  int peer, kind, tag;
  uint64_t size;
  int fd;       // connection whose payload is still unread, or -1
  int tcp;      // 1: fd came through the TCP listener
  void* data;   // self-sent payload, or NULL
  struct unexpected* next;
} unexpected;

// A connection accepted on a listener whose first message (a hello at the rendezvous, a header on a
// rank's listener) is still arriving. Anybody who can reach a listener can open one: an abstract Unix
// name accepts any uid, a TCP port any host. So none is ever waited on alone: acceptFirst serves all
// of them in one poll loop, each with a deadline of its own.
typedef struct {
  int fd;
  int tcp;            // 1: came through the TCP listener
  uint64_t deadline;  // closed unless its first message is complete by then
  size_t got;         // bytes of that message received so far
  char buf[sizeof(bootHello)];
} bootConn;
_Static_assert(sizeof(bootHello) >= sizeof(msgHeader), "bootConn::buf holds either first message");

typedef struct {
  bootConn* conns;  // in accept order
  int n, cap;
  struct pollfd* pfd;  // 2 + cap: the two listeners, then the connections
} bootPending;

// Connections waiting for their first message, at most. Past it the oldest goes first: a peer's
// connection sends its header right after connecting, so the oldest is the likeliest stranger.
#define BOOT_MAX_PENDING 512

// Listen backlog (the kernel caps it at net.core.somaxconn): while a rank is busy elsewhere, what a
// neighbour opens queues here, and a full queue turns peers away (a TCP peer's SYN then waits a
// retransmission, a second or more).
#define BOOT_BACKLOG 4096

struct mcclBootstrap {
  int rank, nranks;
  uint64_t secret;
  int listenFd[2];  // [0]: abstract Unix socket (same host), [1]: TCP (other hosts)
  int64_t timeoutMs;
  volatile uint32_t* abortFlag;
  uint32_t allgatherSeq, barrierSeq;
  bootPeer* peers;
  unexpected* unexp;
  bootPending pend;  // connections to listenFd whose header has not arrived yet
  mcclBootstrapStats stats;
  // Watched peers (MCCL_PEER_WATCH): watchFd[p] is the connection held open with p (-1: none or
  // closed), watchGone[p] 1 once it closed without p's goodbye byte. Under watchLock: the checks may
  // come from several threads (mcclCommGetAsyncError).
  int* watchFd;
  unsigned char* watchGone;
  int nWatched;
  pthread_mutex_t watchLock;
};

// The byte a closing rank writes on its watch connections before closing them: "I left", not "I died".
#define WATCH_BYE 0x42

static _Thread_local char threadHostId[256];  // mcclSetThreadHostId; "" when unset

static uint64_t bootDeadline(const mcclBootstrap* st) {
  return st->timeoutMs > 0 ? mcclClockMs() + (uint64_t)st->timeoutMs : UINT64_MAX;
}

static mcclResult_t randomBytes(void* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom((char*)buf + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      WARN("getrandom(%zu bytes) failed: %s", n, strerror(errno));
      return mcclSystemError;
    }
    got += (size_t)r;
  }
  return mcclSuccess;
}

// Wait for the events of any of n fds until the deadline, checking the abort flag every 50 ms.
static mcclResult_t waitFds(struct pollfd* p, int n, uint64_t deadline, volatile uint32_t* abortFlag,
                            const char* what) {
  for (;;) {
    if (mcclIsAborted(abortFlag)) {
      WARN("Bootstrap: aborted while waiting to %s", what);
      return mcclInternalError;  // as NCCL and labs 03/04 report an abort
    }
    uint64_t now = mcclClockMs();
    if (now >= deadline) {
      WARN("Bootstrap: timed out waiting to %s (MCCL_BOOTSTRAP_TIMEOUT=%lld ms)", what,
           (long long)mcclParamBootstrapTimeout());
      return mcclTimeout;
    }
    uint64_t left = deadline - now;
    for (int i = 0; i < n; i++) p[i].revents = 0;
    int r = poll(p, (nfds_t)n, left < 50 ? (int)left : 50);
    if (r < 0 && errno != EINTR) {
      WARN("Bootstrap: poll failed while waiting to %s: %s", what, strerror(errno));
      return mcclSystemError;
    }
    if (r > 0) return mcclSuccess;  // readable, writable, or an error/hang-up the next call reports
  }
}

static mcclResult_t waitFd(int fd, short events, uint64_t deadline, volatile uint32_t* abortFlag, const char* what) {
  struct pollfd p = {.fd = fd, .events = events, .revents = 0};
  return waitFds(&p, 1, deadline, abortFlag, what);
}

// A whole message, or the WARN and result that say why not (the wait's words are waitFds').
static mcclResult_t moveResult(mcclSocketStatus st, const char* what, size_t done, size_t size) {
  switch (st) {
    case mcclSocketDone:
      return mcclSuccess;
    case mcclSocketAborted:
      WARN("Bootstrap: aborted while waiting to %s", what);
      return mcclInternalError;  // as NCCL and labs 03/04 report an abort
    case mcclSocketTimedOut:
      WARN("Bootstrap: timed out waiting to %s (MCCL_BOOTSTRAP_TIMEOUT=%lld ms)", what,
           (long long)mcclParamBootstrapTimeout());
      return mcclTimeout;
    default:
      WARN("Bootstrap: peer closed the connection during %s (%zu of %zu bytes): %s", what, done, size,
           st == mcclSocketClosed ? "closed by the peer" : strerror(errno));
      return mcclRemoteError;
  }
}

static mcclResult_t sendAll(int fd, const void* data, size_t size, uint64_t deadline, volatile uint32_t* abortFlag,
                            const char* what) {
  size_t done = 0;
  return moveResult(mcclSocketSendAll(fd, data, size, deadline, abortFlag, &done), what, done, size);
}

static mcclResult_t recvAll(int fd, void* data, size_t size, uint64_t deadline, volatile uint32_t* abortFlag,
                            const char* what) {
  size_t done = 0;
  return moveResult(mcclSocketRecvAll(fd, data, size, deadline, abortFlag, &done), what, done, size);
}

static socklen_t sockAddrLen(const bootSockAddr* a) {
  return a->sa.sa_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6) : (socklen_t)sizeof(struct sockaddr_in);
}

// "192.0.2.1:4242" or "[fd00::1]:4242".
static const char* sockAddrStr(const bootSockAddr* a, char* buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof(host));
    snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(a->sin6.sin6_port));
  } else {
    inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof(host));
    snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(a->sin.sin_port));
  }
  return buf;
}

// Does name match the comma list of prefixes (exact names when exact)?
static int ifMatches(const char* name, const char* list, int exact) {
  while (*list) {
    size_t n = strcspn(list, ",");
    if (n > 0 && (exact ? strlen(name) == n && strncmp(name, list, n) == 0 : strncmp(name, list, n) == 0)) return 1;
    list += n;
    if (*list == ',') list++;
  }
  return 0;
}

// First address of `family` on an up interface that `spec` selects (NCCL's findInterfaces): spec is a
// comma list of name prefixes, "^list" excludes, "=list" matches whole names. Link-local IPv6 is
// skipped (its scope means nothing on another host). 1 if found.
static int findIfAddr(const struct ifaddrs* ifs, const char* spec, int family, bootSockAddr* out, char* ifName,
                      size_t ifNameLen) {
  int exclude = spec[0] == '^';
  if (exclude) spec++;
  int exact = spec[0] == '=';
  if (exact) spec++;
  for (const struct ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != family) continue;
    if (!(i->ifa_flags & IFF_UP) || !(i->ifa_flags & IFF_RUNNING)) continue;
    if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6*)i->ifa_addr)->sin6_addr)) continue;
    if (ifMatches(i->ifa_name, spec, exact) == exclude) continue;
    memset(out, 0, sizeof(*out));
    memcpy(out, i->ifa_addr, family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    if (family == AF_INET6) out->sin6.sin6_scope_id = 0;
    snprintf(ifName, ifNameLen, "%s", i->ifa_name);
    return 1;
  }
  return 0;
}

// The address this process's TCP listeners bind, port 0 (NCCL's bootstrapNetInit). Read each time:
// getifaddrs is cheap next to a rendezvous, and tests change MCCL_SOCKET_IFNAME between runs.
static mcclResult_t findBootstrapAddr(bootSockAddr* out) {
  const char* fam = mcclParamSocketFamily();
  int families[2] = {AF_INET, AF_INET6}, nFamilies = 2;
  if (fam != NULL) {
    if (strcmp(fam, "AF_INET") == 0)
      nFamilies = 1;
    else if (strcmp(fam, "AF_INET6") == 0) {
      families[0] = AF_INET6;
      nFamilies = 1;
    } else {
      WARN("Invalid argument: MCCL_SOCKET_FAMILY=%s (AF_INET or AF_INET6)", fam);
      return mcclInvalidArgument;
    }
  }
  const char* user = mcclParamSocketIfname();
  const char* defaults[] = {"^docker,lo,virbr", "docker,virbr", "lo"};
  const char* const* specs = user ? &user : defaults;
  int nSpecs = user ? 1 : 3;
  struct ifaddrs* ifs = NULL;
  if (getifaddrs(&ifs) != 0) {
    WARN("Bootstrap: getifaddrs failed: %s", strerror(errno));
    return mcclSystemError;
  }
  char ifName[IF_NAMESIZE + 1] = "";
  int found = 0;
  for (int s = 0; s < nSpecs && !found; s++)
    for (int f = 0; f < nFamilies && !found; f++)
      found = findIfAddr(ifs, specs[s], families[f], out, ifName, sizeof(ifName));
  if (!found) {
    char seen[256] = "";
    size_t o = 0;
    for (const struct ifaddrs* i = ifs; i && o < sizeof(seen) - IF_NAMESIZE - 2; i = i->ifa_next)
      if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6) &&
          !strstr(seen, i->ifa_name))
        o += (size_t)snprintf(seen + o, sizeof(seen) - o, "%s%s", o ? "," : "", i->ifa_name);
    freeifaddrs(ifs);
    if (user) {
      WARN("Invalid argument: MCCL_SOCKET_IFNAME=%s matches no up interface with a usable %s address (interfaces: %s)",
           user, fam ? fam : "IPv4 or IPv6", seen);
      return mcclInvalidArgument;
    }
    WARN("Bootstrap: no up interface with a usable %s address (interfaces: %s)", fam ? fam : "IPv4 or IPv6", seen);
    return mcclSystemError;
  }
  freeifaddrs(ifs);
  char str[64];
  TRACE(MCCL_BOOTSTRAP | MCCL_NET, "Bootstrap: TCP on interface %s, %s", ifName, sockAddrStr(out, str, sizeof(str)));
  return mcclSuccess;
}

static void setNoDelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A TCP listener on addr (port 0: any free port; reuse: SO_REUSEADDR, for the port a unique id
// reserved); *bound is the address peers connect to.
static mcclResult_t listenTcp(const bootSockAddr* addr, int reuse, bootSockAddr* bound, int* outFd) {
  char str[64];
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    WARN("Bootstrap: socket() failed: %s", strerror(errno));
    return mcclSystemError;
  }
  int one = 1;
  if (reuse) (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, &addr->sa, sockAddrLen(addr)) != 0) {
    int err = errno;
    close(fd);
    if (err == EADDRINUSE) {
      WARN("Bootstrap: TCP address %s is already bound (duplicate rank 0, or a unique id used twice)",
           sockAddrStr(addr, str, sizeof(str)));
      return mcclInvalidUsage;
    }
    if (err == EADDRNOTAVAIL) {
      WARN("Bootstrap: TCP address %s is not on this host: call mcclGetUniqueId on rank 0's host",
           sockAddrStr(addr, str, sizeof(str)));
      return mcclInvalidUsage;
    }
    WARN("Bootstrap: bind(%s) failed: %s", sockAddrStr(addr, str, sizeof(str)), strerror(err));
    return mcclSystemError;
  }
  socklen_t len = sizeof(*bound);
  if (listen(fd, BOOT_BACKLOG) != 0 || getsockname(fd, &bound->sa, &len) != 0) {
    WARN("Bootstrap: listen(%s) failed: %s", sockAddrStr(addr, str, sizeof(str)), strerror(errno));
    close(fd);
    return mcclSystemError;
  }
  *outFd = fd;
  return mcclSuccess;
}

static mcclResult_t listenUnix(const char* name, int* outFd) {
  struct sockaddr_un addr;
  socklen_t len = mcclSocketAbstractAddr(name, &addr);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    WARN("Bootstrap: socket() failed: %s", strerror(errno));
    return mcclSystemError;
  }
  if (bind(fd, (struct sockaddr*)&addr, len) != 0) {
    int err = errno;
    close(fd);
    if (err == EADDRINUSE) {
      WARN("Bootstrap: socket name @%s is already bound (duplicate rank, or a unique id used twice)", name);
      return mcclInvalidUsage;
    }
    WARN("Bootstrap: bind(@%s) failed: %s", name, strerror(err));
    return mcclSystemError;
  }
  if (listen(fd, BOOT_BACKLOG) != 0) {
    WARN("Bootstrap: listen(@%s) failed: %s", name, strerror(errno));
    close(fd);
    return mcclSystemError;
  }
  *outFd = fd;
  return mcclSuccess;
}

// Where to connect: a rank's abstract Unix name (tcp == NULL) or its TCP address.
typedef struct {
  const char* name;
  const bootSockAddr* tcp;
} bootDest;

// Connect to dest. retryRefused: at init the listener may not exist yet, so keep trying; afterwards
// a refused connection means the peer is gone. A TCP connect completes in the background (poll for
// POLLOUT, then SO_ERROR), so the deadline and the abort flag bound it too.
static mcclResult_t connectTo(bootDest dest, int retryRefused, uint64_t deadline, volatile uint32_t* abortFlag,
                              const char* what, int* outFd) {
  struct sockaddr_un un;
  const struct sockaddr* addr = (const struct sockaddr*)&un;
  socklen_t len;
  char desc[80];
  if (dest.tcp) {
    addr = &dest.tcp->sa;
    len = sockAddrLen(dest.tcp);
    sockAddrStr(dest.tcp, desc, sizeof(desc));
  } else {
    len = mcclSocketAbstractAddr(dest.name, &un);
    snprintf(desc, sizeof(desc), "@%s", dest.name);
  }
  for (;;) {
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      WARN("Bootstrap: socket() failed: %s", strerror(errno));
      return mcclSystemError;
    }
    if (dest.tcp) setNoDelay(fd);
    int err = connect(fd, addr, len) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      mcclResult_t res = waitFd(fd, POLLOUT, deadline, abortFlag, what);
      socklen_t el = sizeof(err);
      if (res == mcclSuccess && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
      if (res != mcclSuccess) {
        close(fd);
        return res;
      }
    }
    if (err == 0) {
      *outFd = fd;
      return mcclSuccess;
    }
    close(fd);
    int unreachable = err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH;
    if ((err == ECONNREFUSED || unreachable) && !retryRefused) {
      WARN("Bootstrap: %s %s any more (%s): the peer is gone", unreachable ? "cannot reach" : "nobody listens on", desc,
           what);
      return mcclRemoteError;
    }
    if (err != ECONNREFUSED && err != EAGAIN && err != ENOENT && err != EINTR && !unreachable) {
      WARN("Bootstrap: connect(%s) failed (%s): %s", desc, what, strerror(err));
      return mcclSystemError;
    }
    if (mcclIsAborted(abortFlag)) {
      WARN("Bootstrap: aborted while trying to %s", what);
      return mcclInternalError;
    }
    if (mcclClockMs() >= deadline) {
      WARN("Bootstrap: timed out trying to %s: nobody accepted on %s (MCCL_BOOTSTRAP_TIMEOUT=%lld ms)", what, desc,
           (long long)mcclParamBootstrapTimeout());
      return mcclTimeout;
    }
    mcclSleepMs(5);
  }
}

// Connections still waiting are closed unread: counted as dropped.
static void pendingFree(bootPending* pend, mcclBootstrapStats* stats) {
  for (int i = 0; i < pend->n; i++) close(pend->conns[i].fd);
  stats->droppedConnections += (uint64_t)pend->n;
  free(pend->conns);
  free(pend->pfd);
  memset(pend, 0, sizeof(*pend));
}

// Take connection i out of the list; close it (drop: why it goes) or hand it to the caller (NULL).
static void pendingRemove(bootPending* pend, int i, mcclBootstrapStats* stats, const char* drop) {
  bootConn* c = &pend->conns[i];
  if (drop != NULL) {
    INFO(MCCL_BOOTSTRAP, "Bootstrap: closed an incoming %s connection: %s (%zu bytes of its first message came)",
         c->tcp ? "TCP" : "Unix", drop, c->got);
    close(c->fd);
    stats->droppedConnections++;
  }
  memmove(c, c + 1, sizeof(*c) * (size_t)(pend->n - i - 1));
  pend->n--;
}

static mcclResult_t pendingAdd(bootPending* pend, int fd, int tcp, uint64_t deadline) {
  if (pend->n == pend->cap) {
    int cap = pend->cap ? 2 * pend->cap : 16;
    if (cap > BOOT_MAX_PENDING) cap = BOOT_MAX_PENDING;
    bootConn* c = realloc(pend->conns, sizeof(*c) * (size_t)cap);
    if (c != NULL) pend->conns = c;
    struct pollfd* p = c ? realloc(pend->pfd, sizeof(*p) * (size_t)(2 + cap)) : NULL;
    if (p != NULL) pend->pfd = p;
    if (c == NULL || p == NULL) {
      close(fd);
      WARN("Bootstrap: out of memory for %d incoming connections", cap);
      return mcclSystemError;
    }
    pend->cap = cap;
  }
  pend->conns[pend->n++] = (bootConn){.fd = fd, .tcp = tcp, .deadline = deadline, .got = 0};
  return mcclSuccess;
}

// Read what has come of c's first `size` bytes, never more: 1 complete, 0 not yet, -1 closed or failed.
static int pendingRead(bootConn* c, size_t size) {
  while (c->got < size) {
    ssize_t n = recv(c->fd, c->buf + c->got, size - c->got, MSG_DONTWAIT);
    if (n > 0) {
      c->got += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
  }
  return 1;
}

// Accept everything both listeners (fds[0] Unix, fds[1] TCP) hold into pend, each with `deadline`,
// and read what has come of its first `size` bytes. *full: out of fds with nothing left to close.
static mcclResult_t pendingAccept(mcclBootstrap* st, bootPending* pend, const int fds[2], size_t size,
                                  uint64_t deadline, const char* what, int* full) {
  *full = 0;
  for (int l = 0; l < 2; l++) {
    for (;;) {
      if (pend->n == BOOT_MAX_PENDING) pendingRemove(pend, 0, &st->stats, "too many connections waiting");
      int fd = accept4(fds[l], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          if (pend->n > 0) {
            pendingRemove(pend, 0, &st->stats, "out of file descriptors");
            continue;
          }
          *full = 1;
          return mcclSuccess;
        }
        WARN("Bootstrap: accept failed while waiting to %s: %s", what, strerror(errno));
        return mcclSystemError;
      }
      if (l == 1) setNoDelay(fd);
      MCCLCHECK(pendingAdd(pend, fd, l, deadline));
      if (pendingRead(&pend->conns[pend->n - 1], size) < 0)
        pendingRemove(pend, pend->n - 1, &st->stats, "closed before its first message");
    }
  }
  return mcclSuccess;
}

// Accept on both listeners (fds[0] Unix, fds[1] TCP) and read the first `size` bytes of every
// connection in one poll loop, until one connection has sent them: its fd, *isTcp and those bytes
// (first) go to the caller, the others stay in pend for the next call. Of those complete, the one
// accepted first goes, and every older connection is read before one is chosen: a rank sends its
// messages one connection after another, so when a later one is complete the earlier ones' bytes have
// come too, and two messages under one tag (transport setup's receivers' and senders' records) match
// in the order they were sent, even when the first was accepted before its bytes came. Each poll round accepts
// everything the listeners hold (the backlog never fills while we wait), and a connection that has
// not sent its bytes within MCCL_BOOTSTRAP_ACCEPT_TIMEOUT of its accept, or that closes first, is
// closed: a stranger's silent or slow connection costs its own slot for that long, and no one waits
// on it. Authenticating the bytes is the caller's (the decoders check the secret).
static mcclResult_t acceptFirst(mcclBootstrap* st, bootPending* pend, const int fds[2], size_t size, uint64_t deadline,
                                const char* what, int* outFd, int* isTcp, void* first) {
  int64_t connMs = mcclParamBootstrapAcceptTimeout();
  if (connMs <= 0) connMs = 1000;
  for (;;) {
    for (int i = 0; i < pend->n;) {
      if (pend->conns[i].got < size && pendingRead(&pend->conns[i], size) < 0) {
        pendingRemove(pend, i, &st->stats, "closed before its first message");
        continue;
      }
      i++;
    }
    for (int i = 0; i < pend->n; i++) {
      if (pend->conns[i].got != size) continue;
      *outFd = pend->conns[i].fd;
      *isTcp = pend->conns[i].tcp;
      memcpy(first, pend->conns[i].buf, size);
      pendingRemove(pend, i, &st->stats, NULL);
      return mcclSuccess;
    }
    if (mcclIsAborted(st->abortFlag)) {
      WARN("Bootstrap: aborted while waiting to %s", what);
      return mcclInternalError;  // as NCCL and labs 03/04 report an abort
    }
    uint64_t now = mcclClockMs();
    int listenersFull = 0;  // out of fds with nothing to close: leave the backlog for the next round
    MCCLCHECK(pendingAccept(st, pend, fds, size, now + (uint64_t)connMs, what, &listenersFull));
    // Past its deadline a connection gets one last read, then goes.
    uint64_t next = deadline;
    int complete = 0;
    for (int i = 0; i < pend->n;) {
      bootConn* c = &pend->conns[i];
      if (c->got < size && now >= c->deadline && pendingRead(c, size) != 1) {
        pendingRemove(pend, i, &st->stats, "silent past MCCL_BOOTSTRAP_ACCEPT_TIMEOUT");
        continue;
      }
      complete |= c->got == size;
      if (c->deadline < next) next = c->deadline;
      i++;
    }
    if (complete) continue;
    if (now >= deadline) {
      WARN("Bootstrap: timed out waiting to %s (MCCL_BOOTSTRAP_TIMEOUT=%lld ms)", what,
           (long long)mcclParamBootstrapTimeout());
      return mcclTimeout;
    }
    // Sleep until something arrives, the next connection's deadline or 50 ms (the abort flag).
    int np = 0;
    struct pollfd lp[2];
    struct pollfd* p = pend->pfd ? pend->pfd : lp;
    if (!listenersFull)
      for (int l = 0; l < 2; l++) p[np++] = (struct pollfd){.fd = fds[l], .events = POLLIN};
    const int first0 = np;
    for (int i = 0; i < pend->n; i++) p[np++] = (struct pollfd){.fd = pend->conns[i].fd, .events = POLLIN};
    uint64_t left = next > now ? next - now : 0;
    int r = poll(p, (nfds_t)np, left < 50 ? (int)left : 50);
    if (r < 0 && errno != EINTR) {
      WARN("Bootstrap: poll failed while waiting to %s: %s", what, strerror(errno));
      return mcclSystemError;
    }
    // Backwards, so that removing one leaves the indices of those still to look at as they were.
    for (int k = np - 1; r > 0 && k >= first0; k--) {
      const int i = k - first0;
      if (p[k].revents == 0 || pend->conns[i].got == size) continue;
      if (pendingRead(&pend->conns[i], size) < 0) pendingRemove(pend, i, &st->stats, "closed before its first message");
    }
  }
}

#define FNV1A_BASIS 0xcbf29ce484222325ULL
static uint64_t fnv1a(uint64_t h, const char* p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
  return h;
}

// /proc/sys/kernel/random/boot_id into buf (36 characters and a newline): bytes read, 0 if unreadable.
static size_t readBootId(char* buf, size_t len) {
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, len);
  close(fd);
  return n > 0 ? (size_t)n : 0;
}

uint64_t mcclGetHostHash(void) {
  const char* hostId = threadHostId[0] != '\0' ? threadHostId : mcclParamHostId();
  if (hostId != NULL && hostId[0] != '\0') {
    // MCCL_HOSTID replaces the host name and boot id (NCCL_HOSTID): ranks with different ids are on
    // different "hosts", so one machine can pose as several (lab 08's NET tests).
    return fnv1a(FNV1A_BASIS, hostId, strnlen(hostId, 511));
  }
  char name[256] = {0}, boot[64];
  gethostname(name, sizeof(name) - 1);
  uint64_t h = fnv1a(FNV1A_BASIS, name, strlen(name));
  return fnv1a(h, boot, readBootId(boot, sizeof(boot)));
}

uint64_t mcclGetPidNsHash(void) {
  char boot[64], ns[64];  // the link reads "pid:[inode]"
  size_t nBoot = readBootId(boot, sizeof(boot));
  ssize_t nNs = readlink("/proc/self/ns/pid", ns, sizeof(ns));
  if (nNs < 0) nNs = 0;
  if (nBoot == 0 && nNs == 0) return 0;
  uint64_t h = fnv1a(fnv1a(FNV1A_BASIS, boot, nBoot), ns, (size_t)nNs);
  return h != 0 ? h : 1;
}

int mcclProcessGone(int pid) {
  if (pid <= 0) return 0;
  if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
  // The state follows the command name in parentheses, which may itself hold spaces and ')'.
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;  // reaped between the two looks
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* paren = strrchr(buf, ')');
  return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

mcclResult_t mcclSetThreadHostId(const char* hostId) {
  MCCL_ARGCHECK(hostId == NULL || strlen(hostId) < sizeof(threadHostId),
                "mcclSetThreadHostId: hostId is longer than %zu bytes", sizeof(threadHostId) - 1);
  snprintf(threadHostId, sizeof(threadHostId), "%s", hostId ? hostId : "");
  return mcclSuccess;
}

// The kernel hands out ports of net.ipv4.ip_local_port_range to port-0 binds and to outgoing
// connections: a port reserved from that range and released may be given to any socket of the job
// before rank 0 binds it again (seen once in CI: another rank's listener took it in a 4-rank run
// under ASan, and rank 0's bind failed). So the rendezvous port is a random free one below that
// range, which the kernel never hands out by itself; port 0 (the range) only if none is free.
static int ephemeralLow(void) {
  int lo = 32768;  // Linux's default
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d", &lo) != 1) lo = 32768;
    fclose(f);
  }
  return lo;
}

static mcclResult_t reserveRootPort(const bootSockAddr* any, bootSockAddr* out) {
  int lo = ephemeralLow(), fd = -1;
  for (int tries = 0; lo > 2048 && tries < 64; tries++) {
    uint32_t r = 0;
    MCCLCHECK(randomBytes(&r, sizeof(r)));
    bootSockAddr a = *any;
    uint16_t port = htons((uint16_t)(1024 + r % (uint32_t)(lo - 1024)));
    if (a.sa.sa_family == AF_INET6)
      a.sin6.sin6_port = port;
    else
      a.sin.sin_port = port;
    fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    int ok = bind(fd, &a.sa, sockAddrLen(&a)) == 0;
    close(fd);
    if (ok) {
      *out = a;
      return mcclSuccess;
    }
  }
  MCCLCHECK(listenTcp(any, 0, out, &fd));
  close(fd);
  return mcclSuccess;
}

mcclResult_t mcclGetUniqueId(mcclUniqueId* out) {
  MCCL_ARGCHECK(out != NULL, "mcclGetUniqueId: out is NULL");
  unsigned char rnd[16];
  bootId id;
  memset(&id, 0, sizeof(id));
  id.magic = BOOT_ID_MAGIC;
  id.hostHash = mcclGetHostHash();
  MCCLCHECK(randomBytes(rnd, sizeof(rnd)));
  MCCLCHECK(randomBytes(&id.secret, sizeof(id.secret)));
  int o = snprintf(id.name, sizeof(id.name), "mccl-bs-");
  for (size_t i = 0; i < sizeof(rnd); i++) o += snprintf(id.name + o, sizeof(id.name) - (size_t)o, "%02x", rnd[i]);
  // Reserve a TCP port for rank 0's rendezvous: a free port on the chosen interface, noted and
  // released (NCCL keeps a root thread listening instead; nothing here outlives the call). Rank 0
  // binds it again in mcclBootstrapInit; if another program took it meanwhile, that bind fails
  // with a WARN naming the address.
  bootSockAddr any;
  MCCLCHECK(findBootstrapAddr(&any));
  MCCLCHECK(reserveRootPort(&any, &id.addr));
  memset(out, 0, sizeof(*out));
  memcpy(out->internal, &id, sizeof(id));
  char str[64];
  INFO(MCCL_BOOTSTRAP, "Unique id: rendezvous @%s, %s", id.name, sockAddrStr(&id.addr, str, sizeof(str)));
  return mcclSuccess;
}

mcclResult_t mcclBootstrapDeriveId(const mcclUniqueId* parent, uint32_t generation, uint64_t rootHostHash,
                                   mcclUniqueId* out) {
  MCCL_ARGCHECK(parent != NULL && out != NULL, "mcclBootstrapDeriveId: parent %p, out %p", (const void*)parent,
                (void*)out);
  bootId id;
  MCCLCHECK(mcclBootstrapIdDecode(parent->internal, sizeof(parent->internal), &id));
  // The new rank 0 rebinds the parent's rendezvous names, which only the parent's rank-0 host owns: its
  // abstract Unix name lives in that host's network namespace, its TCP address on that host.
  if (rootHostHash != id.hostHash) {
    WARN("Invalid usage: a communicator derived from @%s needs its rank 0 on the host that made the parent's id "
         "(rank 0's host), where the parent's rendezvous address is",
         id.name);
    return mcclInvalidUsage;
  }
  char name[BOOT_NAME_LEN];
  snprintf(name, sizeof(name), "%.38s.d%u", id.name, generation % 100000u);
  memcpy(id.name, name, sizeof(id.name));
  // Another secret, so that a rank of the parent's rendezvous (or of another generation) is refused.
  id.secret = (id.secret ^ (0x9e3779b97f4a7c15ULL * ((uint64_t)generation + 1))) * 0xbf58476d1ce4e5b9ULL;
  memset(out, 0, sizeof(*out));
  memcpy(out->internal, &id, sizeof(id));
  INFO(MCCL_BOOTSTRAP, "Derived unique id (generation %u): rendezvous @%s", generation, id.name);
  return mcclSuccess;
}

static void closeAll(int* fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) { close(fds[i]); fds[i] = -1; }
}

// Rank 0 tells every connected rank how the rendezvous ended.
static void rootReplyAll(int* conns, int nranks, int32_t status, uint64_t deadline) {
  for (int r = 1; r < nranks; r++)
    if (conns[r] >= 0) (void)sendAll(conns[r], &status, sizeof(status), deadline, NULL, "send a rendezvous status");
}

// Rank 0: accept nranks-1 hellos, check them, send the full table back (NCCL's bootstrapRoot).
// It listens on the id's Unix name (ranks of the id's host) and on its TCP address (other hosts).
static mcclResult_t rootGather(mcclBootstrap* st, const bootId* id, uint64_t deadline) {
  mcclResult_t res = mcclSuccess;
  int rootFd[2] = {-1, -1}, arrived = 1;
  int* conns = NULL;
  bootPending pend = {0};
  bootSockAddr bound;
  MCCLCHECK(listenUnix(id->name, &rootFd[0]));
  MCCLCHECKGOTO(listenTcp(&id->addr, 1, &bound, &rootFd[1]), res, close_root);
  conns = malloc(sizeof(int) * (size_t)st->nranks);
  if (conns == NULL) { WARN("Bootstrap: out of memory"); res = mcclSystemError; goto close_root; }
  for (int r = 0; r < st->nranks; r++) conns[r] = -1;
  while (arrived < st->nranks) {
    int fd = -1, isTcp = 0;
    char raw[sizeof(bootHello)];
    res =
        acceptFirst(st, &pend, rootFd, sizeof(raw), deadline, "gather every rank at the rendezvous", &fd, &isTcp, raw);
    if (res != mcclSuccess) {
      if (res == mcclTimeout) {
        char missing[256] = "";
        size_t o = 0;
        for (int r = 1; r < st->nranks && o < sizeof(missing) - 16; r++)
          if (conns[r] < 0) o += snprintf(missing + o, sizeof(missing) - o, "%s%d", o ? "," : "", r);
        char str[64];
        WARN("Bootstrap: rank(s) %s of %d never arrived at @%s or %s", missing, st->nranks, id->name,
             sockAddrStr(&bound, str, sizeof(str)));
      }
      rootReplyAll(conns, st->nranks, res, mcclClockMs() + 100);
      goto free_conns;
    }
    int32_t status = mcclSuccess;
    bootHello h;
    if (mcclBootstrapHelloDecode(raw, sizeof(raw), st->secret, &h) != mcclSuccess) {
      // A wrong secret (someone holding another id reached our name) or a malformed hello: turn it
      // away and keep waiting.
      status = mcclInvalidUsage;
      (void)send(fd, &status, sizeof(status), MSG_DONTWAIT | MSG_NOSIGNAL);  // 4 bytes into an empty buffer
      close(fd);
      st->stats.droppedConnections++;
      continue;
    }
    if (h.nranks != st->nranks) {
      WARN("Bootstrap: rank %d says there are %d ranks, rank 0 says %d", (int)h.rank, (int)h.nranks, st->nranks);
      res = mcclInvalidUsage;
    } else if (conns[h.rank] >= 0) {
      WARN("Bootstrap: rank %d arrived twice (duplicate rank)", (int)h.rank);
      res = mcclInvalidUsage;
    }
    if (res != mcclSuccess) {
      // A configuration error: fail everyone who came so far instead of letting them wait.
      status = res;
      (void)sendAll(fd, &status, sizeof(status), mcclClockMs() + 100, NULL, "reject a bad rank");
      close(fd);
      rootReplyAll(conns, st->nranks, res, mcclClockMs() + 100);
      goto free_conns;
    }
    conns[h.rank] = fd;
    st->peers[h.rank] = h.peer;
    arrived++;
    TRACE(MCCL_BOOTSTRAP, "Rendezvous: rank %d arrived (%d/%d)", (int)h.rank, arrived, st->nranks);
  }
  for (int r = 1; r < st->nranks; r++) {
    int32_t status = mcclSuccess;
    MCCLCHECKGOTO(sendAll(conns[r], &status, sizeof(status), deadline, st->abortFlag, "send the rendezvous status"),
                  res, free_conns);
    MCCLCHECKGOTO(sendAll(conns[r], st->peers, sizeof(bootPeer) * (size_t)st->nranks, deadline, st->abortFlag,
                          "send the peer table"),
                  res, free_conns);
  }
free_conns:
  closeAll(conns, st->nranks);
  free(conns);
  pendingFree(&pend, &st->stats);
close_root:
  closeAll(rootFd, 2);
  return res;
}

static mcclResult_t joinRoot(mcclBootstrap* st, const bootId* id, uint64_t deadline) {
  mcclResult_t res = mcclSuccess;
  int fd = -1;
  void* table = NULL;
  // Ranks on the host that made the id keep the Unix socket; the others come over TCP.
  int tcp = st->peers[st->rank].info.hostHash != id->hostHash;
  bootDest dest = {.name = id->name, .tcp = tcp ? &id->addr : NULL};
  MCCLCHECK(connectTo(dest, 1, deadline, st->abortFlag, "reach rank 0's rendezvous", &fd));
  st->stats.rendezvousTcp = tcp;
  bootHello h;
  memset(&h, 0, sizeof(h));
  h.secret = st->secret;
  h.rank = st->rank;
  h.nranks = st->nranks;
  h.peer = st->peers[st->rank];
  MCCLCHECKGOTO(sendAll(fd, &h, sizeof(h), deadline, st->abortFlag, "send the hello to rank 0"), res, out);
  int32_t raw = -1;
  mcclResult_t status;
  MCCLCHECKGOTO(recvAll(fd, &raw, sizeof(raw), deadline, st->abortFlag, "hear back from rank 0"), res, out);
  MCCLCHECKGOTO(mcclBootstrapStatusDecode(&raw, sizeof(raw), &status), res, out);
  if (status != mcclSuccess) {
    if (status == mcclInvalidUsage)
      WARN("Bootstrap: rank 0 refused rank %d: wrong secret, duplicate rank or rank count %d mismatch", st->rank,
           st->nranks);
    else
      WARN("Bootstrap: rank 0 ended the rendezvous with %d (%s)", (int)status, mcclGetErrorString(status));
    res = status;
    goto out;
  }
  size_t tableBytes = sizeof(bootPeer) * (size_t)st->nranks;
  table = malloc(tableBytes);
  if (table == NULL) {
    WARN("Bootstrap: out of memory");
    res = mcclSystemError;
    goto out;
  }
  MCCLCHECKGOTO(recvAll(fd, table, tableBytes, deadline, st->abortFlag, "receive the peer table"), res, out);
  MCCLCHECKGOTO(mcclBootstrapPeersDecode(table, tableBytes, st->nranks, st->peers), res, out);
out:
  free(table);
  close(fd);
  return res;
}

static void freeState(mcclBootstrap* st, int warnUnread);
static mcclResult_t sendMsg(mcclBootstrap* st, int peer, int kind, int tag, const void* data, size_t size,
                            int* keepFd);
static mcclResult_t recvMsg(mcclBootstrap* st, int peer, int kind, int tag, void* data, size_t size, int* keepFd);

// ---- watched peers ---------------------------------------------------------------------------------

// Does this rank hold a watch connection with p? MCCL_PEER_WATCH 1 (default): where p's pid names no
// process here (another machine, container or pid namespace: the pidNsHash of the records differ),
// which both ends of a pair decide alike; 2: every peer; 0: none.
static int watches(const mcclBootstrap* st, int p) {
  if (p == st->rank) return 0;
  const int64_t mode = mcclParamPeerWatch();
  if (mode != 1) return mode >= 2;
  const uint64_t mine = st->peers[st->rank].info.pidNsHash;
  return mine == 0 || st->peers[p].info.pidNsHash != mine;
}

static void freeWatches(mcclBootstrap* st) {
  if (st->watchFd == NULL) return;
  for (int p = 0; p < st->nranks; p++) {
    if (st->watchFd[p] < 0) continue;
    char bye = WATCH_BYE;  // best effort: a peer that misses it takes us as gone, as for a death
    (void)!send(st->watchFd[p], &bye, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    close(st->watchFd[p]);
  }
  pthread_mutex_destroy(&st->watchLock);
  free(st->watchFd);
  free(st->watchGone);
  st->watchFd = NULL;
}

// The higher rank of a watched pair connects (a header of KIND_WATCH, the connection then kept), the
// lower one accepts: every connect first (the listener's backlog holds them), then every accept, so
// no order of ranks can deadlock. TCP keepalive (about 16 s) covers a machine that vanishes without
// closing anything.
static mcclResult_t watchPeers(mcclBootstrap* st) {
  const int n = st->nranks;
  st->watchFd = malloc((size_t)n * sizeof(int));
  st->watchGone = calloc((size_t)n, 1);
  if (st->watchFd == NULL || st->watchGone == NULL) {
    free(st->watchFd);
    free(st->watchGone);
    st->watchFd = NULL;
    WARN("Bootstrap: out of memory for %d watch connections", n);
    return mcclSystemError;
  }
  pthread_mutex_init(&st->watchLock, NULL);
  for (int p = 0; p < n; p++) st->watchFd[p] = -1;
  for (int p = 0; p < st->rank; p++)
    if (watches(st, p)) MCCLCHECK(sendMsg(st, p, KIND_WATCH, 0, NULL, 0, &st->watchFd[p]));
  for (int p = st->rank + 1; p < n; p++)
    if (watches(st, p)) MCCLCHECK(recvMsg(st, p, KIND_WATCH, 0, NULL, 0, &st->watchFd[p]));
  for (int p = 0; p < n; p++) {
    if (st->watchFd[p] < 0) continue;
    st->nWatched++;
    const int on = 1, idle = 10, intvl = 2, cnt = 3;  // fails harmlessly on a Unix socket
    (void)setsockopt(st->watchFd[p], SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    (void)setsockopt(st->watchFd[p], IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(st->watchFd[p], IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(st->watchFd[p], IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  }
  return mcclSuccess;
}

mcclResult_t mcclBootstrapPeerGone(mcclBootstrap* state, int* peer) {
  MCCL_ARGCHECK(state != NULL, "mcclBootstrapPeerGone: state is NULL");
  MCCL_ARGCHECK(peer != NULL, "mcclBootstrapPeerGone: peer is NULL");
  *peer = -1;
  if (state->watchFd == NULL || state->nWatched == 0) return mcclSuccess;
  struct pollfd p[64];
  int ranks[64];
  pthread_mutex_lock(&state->watchLock);
  // Nothing is ever sent on a watch connection but the goodbye byte, so readable means the peer left
  // (that byte) or its process ended (end of file, or a reset). Polled 64 at a time.
  for (int lo = 0; lo < state->nranks; lo += 64) {
    int k = 0;
    for (int r = lo; r < state->nranks && r < lo + 64; r++)
      if (state->watchFd[r] >= 0) {
        p[k] = (struct pollfd){.fd = state->watchFd[r], .events = POLLIN};
        ranks[k++] = r;
      }
    if (k == 0 || poll(p, (nfds_t)k, 0) <= 0) continue;
    for (int i = 0; i < k; i++) {
      if (p[i].revents == 0) continue;
      const int r = ranks[i];
      char b = 0;
      const ssize_t got = recv(state->watchFd[r], &b, 1, MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (got != 1 || b != WATCH_BYE) {
        state->watchGone[r] = 1;
        WARN("Bootstrap: rank %d's watch connection with rank %d closed without its goodbye: its process has ended",
             state->rank, r);
      }
      close(state->watchFd[r]);
      state->watchFd[r] = -1;
    }
  }
  for (int r = 0; r < state->nranks && *peer < 0; r++)
    if (state->watchGone[r]) *peer = r;
  pthread_mutex_unlock(&state->watchLock);
  return mcclSuccess;
}

mcclResult_t mcclBootstrapInit(const mcclUniqueId* id, int rank, int nranks, int cudaDev, const char* proxyAddr,
                               volatile uint32_t* abortFlag, mcclBootstrap** out) {
  MCCL_ARGCHECK(id != NULL, "mcclBootstrapInit: id is NULL");
  MCCL_ARGCHECK(out != NULL, "mcclBootstrapInit: out is NULL");
  MCCL_ARGCHECK(nranks >= 1 && nranks <= BOOT_MAX_RANKS, "mcclBootstrapInit: nranks=%d (must be 1..%d)", nranks,
                BOOT_MAX_RANKS);
  MCCL_ARGCHECK(rank >= 0 && rank < nranks, "mcclBootstrapInit: rank=%d (nranks=%d)", rank, nranks);
  MCCL_ARGCHECK(proxyAddr == NULL || strlen(proxyAddr) < MCCL_SOCKET_NAME_LEN,
                "mcclBootstrapInit: proxyAddr '%s' is longer than %d bytes", proxyAddr, MCCL_SOCKET_NAME_LEN - 1);
  bootId bid;
  MCCLCHECK(mcclBootstrapIdDecode(id->internal, sizeof(id->internal), &bid));

  mcclResult_t res = mcclSuccess;
  mcclBootstrap* st = calloc(1, sizeof(*st));
  if (st == NULL) { WARN("Bootstrap: out of memory"); return mcclSystemError; }
  st->rank = rank;
  st->nranks = nranks;
  st->secret = bid.secret;
  st->listenFd[0] = st->listenFd[1] = -1;
  st->abortFlag = abortFlag;
  st->timeoutMs = mcclParamBootstrapTimeout();  // <= 0: no deadline (`make gdb`); the abort flag still ends a wait
  st->peers = calloc((size_t)nranks, sizeof(bootPeer));
  if (st->peers == NULL) { WARN("Bootstrap: out of memory"); res = mcclSystemError; goto free_state; }

  bootPeer* me = &st->peers[rank];
  me->info.rank = rank;
  me->info.pid = (int)getpid();
  me->info.cudaDev = cudaDev;
  me->info.hostHash = mcclGetHostHash();
  me->info.pidNsHash = mcclGetPidNsHash();
  struct stat sb;
  me->info.shmDev = stat("/dev/shm", &sb) == 0 ? (uint64_t)sb.st_dev : 0;
  if (proxyAddr) snprintf(me->info.proxyAddr, sizeof(me->info.proxyAddr), "%s", proxyAddr);
  uint32_t salt;
  MCCLCHECKGOTO(randomBytes(&salt, sizeof(salt)), res, free_peers);
  snprintf(me->listenName, sizeof(me->listenName), "%s.%d.%08x", bid.name, rank, salt);
  MCCLCHECKGOTO(listenUnix(me->listenName, &st->listenFd[0]), res, free_peers);
  bootSockAddr ifAddr;
  MCCLCHECKGOTO(findBootstrapAddr(&ifAddr), res, close_listen);
  MCCLCHECKGOTO(listenTcp(&ifAddr, 0, &me->tcpAddr, &st->listenFd[1]), res, close_listen);

  uint64_t deadline = bootDeadline(st);
  if (rank == 0) MCCLCHECKGOTO(rootGather(st, &bid, deadline), res, close_listen);
  else MCCLCHECKGOTO(joinRoot(st, &bid, deadline), res, close_listen);
  res = watchPeers(st);
  if (res != mcclSuccess) {
    freeState(st, 0);
    return res;
  }
  char str[64];
  INFO(MCCL_BOOTSTRAP | MCCL_INIT, "Bootstrap: rank %d of %d ready at @%s and %s, watching %d peer(s)", rank, nranks,
       me->listenName, sockAddrStr(&me->tcpAddr, str, sizeof(str)), st->nWatched);
  *out = st;
  return mcclSuccess;

close_listen:
  pendingFree(&st->pend, &st->stats);
  closeAll(st->listenFd, 2);
free_peers:
  free(st->peers);
free_state:
  free(st);
  return res;
}

int mcclBootstrapRank(const mcclBootstrap* state) { return state ? state->rank : -1; }

mcclResult_t mcclBootstrapGetStats(const mcclBootstrap* state, mcclBootstrapStats* out) {
  MCCL_ARGCHECK(state != NULL, "mcclBootstrapGetStats: state is NULL");
  MCCL_ARGCHECK(out != NULL, "mcclBootstrapGetStats: out is NULL");
  *out = state->stats;
  return mcclSuccess;
}
int mcclBootstrapNRanks(const mcclBootstrap* state) { return state ? state->nranks : -1; }

mcclResult_t mcclBootstrapGetPeerInfo(const mcclBootstrap* state, int peer, mcclPeerInfo* out) {
  MCCL_ARGCHECK(state != NULL, "mcclBootstrapGetPeerInfo: state is NULL");
  MCCL_ARGCHECK(out != NULL, "mcclBootstrapGetPeerInfo: out is NULL");
  MCCL_ARGCHECK(peer >= 0 && peer < state->nranks, "mcclBootstrapGetPeerInfo: peer=%d (nranks=%d)", peer,
                state->nranks);
  *out = state->peers[peer].info;
  return mcclSuccess;
}

// keepFd: NULL closes the connection after the message; otherwise it is handed over (a watch).
static mcclResult_t sendMsg(mcclBootstrap* st, int peer, int kind, int tag, const void* data, size_t size,
                            int* keepFd) {
  if (peer == st->rank) {
    // A message to ourselves goes straight to the unexpected list: connecting to our own listener
    // would block on a large payload nobody is reading yet.
    unexpected* u = calloc(1, sizeof(*u));
    if (u == NULL || (size > 0 && (u->data = malloc(size)) == NULL)) {
      free(u);
      WARN("Bootstrap: out of memory for a %zu-byte message to self", size);
      return mcclSystemError;
    }
    if (size > 0) memcpy(u->data, data, size);
    u->peer = peer; u->kind = kind; u->tag = tag; u->size = size; u->fd = -1;
    unexpected** tail = &st->unexp;
    while (*tail) tail = &(*tail)->next;
    *tail = u;
    return mcclSuccess;
  }
  mcclResult_t res = mcclSuccess;
  uint64_t deadline = bootDeadline(st);
  int fd = -1;
  char what[96];
  snprintf(what, sizeof(what), "send %zu bytes (tag %d) to rank %d", size, tag, peer);
  // Empty our own listeners' backlog first: a rank that sends is not accepting, and a backlog that a
  // stranger filled meanwhile would turn away (TCP: delay by seconds) the peers that send to us next.
  // What is taken here waits in pend, with its deadline running, for our next receive.
  int full = 0;
  int64_t connMs = mcclParamBootstrapAcceptTimeout();
  if (connMs <= 0) connMs = 1000;
  MCCLCHECK(
      pendingAccept(st, &st->pend, st->listenFd, sizeof(msgHeader), mcclClockMs() + (uint64_t)connMs, what, &full));
  // Same host: its Unix name; another host: its TCP address (NCCL's bootstrap always uses TCP).
  const bootPeer* to = &st->peers[peer];
  int tcp = to->info.hostHash != st->peers[st->rank].info.hostHash;
  bootDest dest = {.name = to->listenName, .tcp = tcp ? &to->tcpAddr : NULL};
  MCCLCHECK(connectTo(dest, 0, deadline, st->abortFlag, what, &fd));
  msgHeader h = {.secret = st->secret, .from = st->rank, .kind = kind, .tag = tag, .pad = 0, .size = size};
  if (size <= 4096) {
    // Header and payload in one write: a receiver that refuses the message (size mismatch) and
    // closes early then cannot turn our second write into EPIPE.
    char buf[sizeof(h) + 4096];
    memcpy(buf, &h, sizeof(h));
    if (size > 0) memcpy(buf + sizeof(h), data, size);
    MCCLCHECKGOTO(sendAll(fd, buf, sizeof(h) + size, deadline, st->abortFlag, what), res, out);
  } else {
    MCCLCHECKGOTO(sendAll(fd, &h, sizeof(h), deadline, st->abortFlag, what), res, out);
    MCCLCHECKGOTO(sendAll(fd, data, size, deadline, st->abortFlag, what), res, out);
  }
  if (tcp)
    st->stats.tcpSent++;
  else
    st->stats.unixSent++;
  if (keepFd != NULL) {
    *keepFd = fd;
    return mcclSuccess;
  }
out:
  close(fd);
  return res;
}

static mcclResult_t readPayload(int fd, uint64_t have, void* data, size_t size, int peer, int tag, uint64_t deadline,
                                volatile uint32_t* abortFlag) {
  if (have != size) {
    WARN("Bootstrap: rank %d sent %llu bytes under tag %d, the receiver expected %zu", peer, (unsigned long long)have,
         tag, size);
    return mcclInvalidUsage;
  }
  if (size == 0) return mcclSuccess;
  return recvAll(fd, data, size, deadline, abortFlag, "receive a message payload");
}

static void countReceived(mcclBootstrap* st, int tcp) {
  if (tcp)
    st->stats.tcpReceived++;
  else
    st->stats.unixReceived++;
}

// keepFd: as sendMsg's (a message from another rank only).
static mcclResult_t recvMsg(mcclBootstrap* st, int peer, int kind, int tag, void* data, size_t size, int* keepFd) {
  uint64_t deadline = bootDeadline(st);
  mcclResult_t res = mcclSuccess;
  for (unexpected **pu = &st->unexp, *u = *pu; u; pu = &u->next, u = *pu) {
    if (u->peer != peer || u->kind != kind || u->tag != tag) continue;
    *pu = u->next;
    if (u->fd >= 0) {
      res = readPayload(u->fd, u->size, data, size, peer, tag, deadline, st->abortFlag);
      if (res == mcclSuccess && keepFd != NULL)
        *keepFd = u->fd;
      else
        close(u->fd);
      if (res == mcclSuccess) countReceived(st, u->tcp);
    } else if (u->size != size) {
      WARN("Bootstrap: rank %d sent %llu bytes under tag %d, the receiver expected %zu", peer,
           (unsigned long long)u->size, tag, size);
      res = mcclInvalidUsage;
    } else if (size > 0) {
      memcpy(data, u->data, size);
    }
    free(u->data);
    free(u);
    return res;
  }
  char what[96];
  snprintf(what, sizeof(what), "receive tag %d from rank %d", tag, peer);
  for (;;) {
    int fd = -1, isTcp = 0;
    char raw[sizeof(msgHeader)];
    MCCLCHECK(acceptFirst(st, &st->pend, st->listenFd, sizeof(raw), deadline, what, &fd, &isTcp, raw));
    msgHeader h;
    if (mcclBootstrapMsgHeaderDecode(raw, sizeof(raw), st->secret, st->nranks, &h) != mcclSuccess) {
      close(fd);  // dropped: the decoder said why
      st->stats.droppedConnections++;
      continue;
    }
    if (h.from == peer && h.kind == kind && h.tag == tag) {
      res = readPayload(fd, h.size, data, size, peer, tag, deadline, st->abortFlag);
      if (res == mcclSuccess && keepFd != NULL)
        *keepFd = fd;
      else
        close(fd);
      if (res == mcclSuccess) countReceived(st, isTcp);
      return res;
    }
    unexpected* u = calloc(1, sizeof(*u));
    if (u == NULL) { close(fd); WARN("Bootstrap: out of memory"); return mcclSystemError; }
    u->peer = h.from;
    u->kind = h.kind;
    u->tag = h.tag;
    u->size = h.size;
    u->fd = fd;
    u->tcp = isTcp;
    unexpected** tail = &st->unexp;
    while (*tail) tail = &(*tail)->next;
    *tail = u;
  }
}

mcclResult_t mcclBootstrapSend(mcclBootstrap* state, int peer, int tag, const void* data, size_t size) {
  MCCL_ARGCHECK(state != NULL, "mcclBootstrapSend: state is NULL");
  MCCL_ARGCHECK(peer >= 0 && peer < state->nranks, "mcclBootstrapSend: peer=%d (nranks=%d)", peer, state->nranks);
  MCCL_ARGCHECK(data != NULL || size == 0, "mcclBootstrapSend: data is NULL with size=%zu", size);
  return sendMsg(state, peer, KIND_USER, tag, data, size, NULL);
}

mcclResult_t mcclBootstrapRecv(mcclBootstrap* state, int peer, int tag, void* data, size_t size) {
  MCCL_ARGCHECK(state != NULL, "mcclBootstrapRecv: state is NULL");
  MCCL_ARGCHECK(peer >= 0 && peer < state->nranks, "mcclBootstrapRecv: peer=%d (nranks=%d)", peer, state->nranks);
  MCCL_ARGCHECK(data != NULL || size == 0, "mcclBootstrapRecv: data is NULL with size=%zu", size);
  return recvMsg(state, peer, KIND_USER, tag, data, size, NULL);
}

mcclResult_t mcclBootstrapAllGather(mcclBootstrap* state, void* allData, size_t size) {
  MCCL_ARGCHECK(state != NULL, "mcclBootstrapAllGather: state is NULL");
  MCCL_ARGCHECK(allData != NULL, "mcclBootstrapAllGather: allData is NULL");
  MCCL_ARGCHECK(size > 0, "mcclBootstrapAllGather: size=%zu", size);
  int rank = state->rank, n = state->nranks;
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  int tag = (int)(state->allgatherSeq++ & 0x7fffffff);
  char* d = allData;
  // Ring: at step s send the slot received at step s-1. Even ranks send first, odd ranks receive
  // first, so a payload larger than the socket buffer cannot deadlock the ring.
  for (int s = 0; s < n - 1; s++) {
    int sendSlot = (rank - s + n) % n, recvSlot = (rank - s - 1 + n) % n;
    if (rank % 2 == 0) {
      MCCLCHECK(sendMsg(state, next, KIND_ALLGATHER, tag, d + (size_t)sendSlot * size, size, NULL));
      MCCLCHECK(recvMsg(state, prev, KIND_ALLGATHER, tag, d + (size_t)recvSlot * size, size, NULL));
    } else {
      MCCLCHECK(recvMsg(state, prev, KIND_ALLGATHER, tag, d + (size_t)recvSlot * size, size, NULL));
      MCCLCHECK(sendMsg(state, next, KIND_ALLGATHER, tag, d + (size_t)sendSlot * size, size, NULL));
    }
  }
  return mcclSuccess;
}

mcclResult_t mcclBootstrapBarrier(mcclBootstrap* state) {
  MCCL_ARGCHECK(state != NULL, "mcclBootstrapBarrier: state is NULL");
  int rank = state->rank, n = state->nranks;
  int seq = (int)(state->barrierSeq++ & 0xffffff);
  // Dissemination: after round k each rank has heard, directly or not, from 2^(k+1) ranks.
  for (int mask = 1, round = 0; mask < n; mask <<= 1, round++) {
    char b = 0;
    int tag = seq * 32 + round;
    MCCLCHECK(sendMsg(state, (rank + mask) % n, KIND_BARRIER, tag, &b, 1, NULL));
    MCCLCHECK(recvMsg(state, (rank - mask % n + n) % n, KIND_BARRIER, tag, &b, 1, NULL));
  }
  return mcclSuccess;
}

static void freeState(mcclBootstrap* st, int warnUnread) {
  for (unexpected* u = st->unexp; u;) {
    unexpected* next = u->next;
    if (warnUnread) WARN("Bootstrap: closing with an unread message from rank %d (tag %d, %llu bytes)", u->peer, u->tag,
                         (unsigned long long)u->size);
    if (u->fd >= 0) close(u->fd);
    free(u->data);
    free(u);
    u = next;
  }
  freeWatches(st);
  pendingFree(&st->pend, &st->stats);
  closeAll(st->listenFd, 2);
  free(st->peers);
  free(st);
}

mcclResult_t mcclBootstrapClose(mcclBootstrap* state) {
  if (state == NULL) return mcclSuccess;
  freeState(state, 1);
  return mcclSuccess;
}

mcclResult_t mcclBootstrapAbort(mcclBootstrap* state) {
  if (state == NULL) return mcclSuccess;
  freeState(state, 0);
  return mcclSuccess;
}
