// Private: the bootstrap's wire formats (what crosses its sockets, and the layout hidden in
// mcclUniqueId) and their decoders. bootstrap.c is the only user besides the fuzz harnesses
// (common/fuzz/) and their regression test; nothing here is installed.
//
// Every decoder is a pure function of the received bytes (and of what the receiver already knows:
// its secret, its rank count): it checks lengths, ranks, enum values and string termination, and
// writes *out only when the message is well formed. A malformed message is mcclInternalError
// (mcclInvalidArgument for the unique id, which the caller passes in), with a WARN naming the field.
#ifndef MCCL_BOOTSTRAP_WIRE_H_
#define MCCL_BOOTSTRAP_WIRE_H_

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "mccl_bootstrap.h"

#define BOOT_ID_MAGIC 0x6d63636c2d627331ULL  // "mccl-bs1": rejects ids that are not ours
#define BOOT_NAME_LEN 48
#define BOOT_MAX_RANKS 65536

// A TCP address another host can reach (NCCL's union ncclSocketAddress): AF_INET or AF_INET6, port
// in network order, never 0.
typedef union {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} bootSockAddr;

// The layout hidden in mcclUniqueId: the secret, rank 0's rendezvous as an abstract Unix name (for
// ranks on the host that made the id, hostHash) and as a TCP address (for ranks on other hosts).
typedef struct {
  uint64_t magic;
  uint64_t secret;
  uint64_t hostHash;
  char name[BOOT_NAME_LEN];
  bootSockAddr addr;
} bootId;
_Static_assert(sizeof(bootId) <= MCCL_UNIQUE_ID_BYTES, "bootId must fit in mcclUniqueId");

// One rank's record in the peer table: what it told rank 0, and where it listens: an abstract Unix
// name for ranks of its host (equal info.hostHash), a TCP address for the others.
typedef struct {
  mcclPeerInfo info;
  char listenName[MCCL_SOCKET_NAME_LEN];
  bootSockAddr tcpAddr;
} bootPeer;

// Rank -> rank 0 at init.
typedef struct {
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  bootPeer peer;
} bootHello;

// Kinds keep internal traffic (allgather, barrier, the watch connections of mcclBootstrapPeerGone) apart
// from user tags.
enum { KIND_USER = 0, KIND_ALLGATHER = 1, KIND_BARRIER = 2, KIND_WATCH = 3, KIND_COUNT = 4 };

// Header of every point-to-point message (one connection each).
typedef struct {
  uint64_t secret;
  int32_t from;
  int32_t kind;
  int32_t tag;
  int32_t pad;
  uint64_t size;
} msgHeader;

// A TCP address as received: AF_INET or AF_INET6 and a non-zero port. 1 if valid.
int mcclBootstrapSockAddrValid(const bootSockAddr* a);
// The unique id's bytes: magic, a non-empty NUL-terminated rendezvous name, a valid TCP address.
// mcclInvalidArgument.
mcclResult_t mcclBootstrapIdDecode(const void* buf, size_t len, bootId* out);
// A hello as rank 0 reads it: our secret, 1 <= nranks <= BOOT_MAX_RANKS, 0 < rank < nranks, the
// record names the same rank and carries terminated names (a non-empty listen name) and a valid TCP
// address. Whether nranks
// matches rank 0's, and duplicates, are the caller's checks (a hello that does not decode is turned
// away; a mismatch fails every rank).
mcclResult_t mcclBootstrapHelloDecode(const void* buf, size_t len, uint64_t secret, bootHello* out);
// Rank 0's one-word answer to a hello: a mcclResult_t value.
mcclResult_t mcclBootstrapStatusDecode(const void* buf, size_t len, mcclResult_t* out);
// The peer table rank 0 sends back: nranks records, record r for rank r, names terminated, TCP
// addresses valid.
mcclResult_t mcclBootstrapPeersDecode(const void* buf, size_t len, int nranks, bootPeer* out);
// A message header: our secret, a sender in 0..nranks-1, a known kind, pad 0.
mcclResult_t mcclBootstrapMsgHeaderDecode(const void* buf, size_t len, uint64_t secret, int nranks, msgHeader* out);

#endif
