// Decoders of the bootstrap's wire formats (bootstrap_wire.h). Pure functions: no socket, no
// state; bootstrap.c calls them on what it received, common/fuzz/ feeds them arbitrary bytes.
#include "bootstrap_wire.h"

#include <arpa/inet.h>
#include <string.h>
#include "mccl_debug.h"

static int terminated(const char* s, size_t n) {
  return memchr(s, '\0', n) != NULL;
}

int mcclBootstrapSockAddrValid(const bootSockAddr* a) {
  if (a->sa.sa_family == AF_INET) return a->sin.sin_port != 0;
  if (a->sa.sa_family == AF_INET6) return a->sin6.sin6_port != 0;
  return 0;
}

mcclResult_t mcclBootstrapIdDecode(const void* buf, size_t len, bootId* out) {
  if (buf == NULL || out == NULL || len != MCCL_UNIQUE_ID_BYTES) {
    WARN("Invalid argument: unique id of %zu bytes (expected %d)", len, MCCL_UNIQUE_ID_BYTES);
    return mcclInvalidArgument;
  }
  bootId id;
  memcpy(&id, buf, sizeof(id));
  if (id.magic != BOOT_ID_MAGIC) {
    WARN("Invalid argument: id is not a mcclUniqueId (magic 0x%llx)", (unsigned long long)id.magic);
    return mcclInvalidArgument;
  }
  if (!terminated(id.name, sizeof(id.name)) || id.name[0] == '\0') {
    WARN("Invalid argument: id's rendezvous name is %s", id.name[0] == '\0' ? "empty" : "not terminated");
    return mcclInvalidArgument;
  }
  if (!mcclBootstrapSockAddrValid(&id.addr)) {
    WARN("Invalid argument: id's rendezvous TCP address has family %d, port %u", (int)id.addr.sa.sa_family,
         (unsigned)ntohs(id.addr.sin.sin_port));
    return mcclInvalidArgument;
  }
  *out = id;
  return mcclSuccess;
}

// One peer record: the rank it claims (checked by the caller against where it sits) and its names.
static mcclResult_t peerCheck(const bootPeer* p, const char* what) {
  if (!terminated(p->info.proxyAddr, sizeof(p->info.proxyAddr))) {
    WARN("Bootstrap: %s: proxyAddr of rank %d is not NUL-terminated", what, p->info.rank);
    return mcclInternalError;
  }
  if (!terminated(p->listenName, sizeof(p->listenName)) || p->listenName[0] == '\0') {
    WARN("Bootstrap: %s: listenName of rank %d is %s", what, p->info.rank,
         p->listenName[0] == '\0' ? "empty" : "not NUL-terminated");
    return mcclInternalError;
  }
  if (!mcclBootstrapSockAddrValid(&p->tcpAddr)) {
    WARN("Bootstrap: %s: TCP address of rank %d has family %d, port %u", what, p->info.rank,
         (int)p->tcpAddr.sa.sa_family, (unsigned)ntohs(p->tcpAddr.sin.sin_port));
    return mcclInternalError;
  }
  return mcclSuccess;
}

mcclResult_t mcclBootstrapHelloDecode(const void* buf, size_t len, uint64_t secret, bootHello* out) {
  if (buf == NULL || out == NULL || len != sizeof(bootHello)) {
    WARN("Bootstrap: hello of %zu bytes (expected %zu)", len, sizeof(bootHello));
    return mcclInternalError;
  }
  bootHello h;
  memcpy(&h, buf, sizeof(h));
  if (h.secret != secret) {
    // Someone holding a different id (or a forged one) reached our name.
    WARN("Bootstrap: hello claiming rank %d has a wrong secret", (int)h.rank);
    return mcclInternalError;
  }
  if (h.nranks < 1 || h.nranks > BOOT_MAX_RANKS) {
    WARN("Bootstrap: hello says nranks=%d (1..%d)", (int)h.nranks, BOOT_MAX_RANKS);
    return mcclInternalError;
  }
  if (h.rank <= 0 || h.rank >= h.nranks) {
    WARN("Bootstrap: hello from rank %d of %d (rank 0 never sends one)", (int)h.rank, (int)h.nranks);
    return mcclInternalError;
  }
  if (h.peer.info.rank != h.rank) {
    WARN("Bootstrap: hello from rank %d carries the record of rank %d", (int)h.rank, h.peer.info.rank);
    return mcclInternalError;
  }
  mcclResult_t res = peerCheck(&h.peer, "hello");
  if (res != mcclSuccess) return res;
  *out = h;
  return mcclSuccess;
}

mcclResult_t mcclBootstrapStatusDecode(const void* buf, size_t len, mcclResult_t* out) {
  int32_t s;
  if (buf == NULL || out == NULL || len != sizeof(s)) {
    WARN("Bootstrap: rendezvous status of %zu bytes (expected %zu)", len, sizeof(s));
    return mcclInternalError;
  }
  memcpy(&s, buf, sizeof(s));
  if (s < 0 || s >= mcclNumResults || s == mcclInProgress) {
    WARN("Bootstrap: rank 0 answered status %d, which is no mcclResult_t", (int)s);
    return mcclInternalError;
  }
  *out = (mcclResult_t)s;
  return mcclSuccess;
}

mcclResult_t mcclBootstrapPeersDecode(const void* buf, size_t len, int nranks, bootPeer* out) {
  if (buf == NULL || out == NULL || nranks < 1 || nranks > BOOT_MAX_RANKS || len != sizeof(bootPeer) * (size_t)nranks) {
    WARN("Bootstrap: peer table of %zu bytes for %d ranks (expected %zu)", len, nranks,
         nranks > 0 ? sizeof(bootPeer) * (size_t)nranks : 0);
    return mcclInternalError;
  }
  const char* p = buf;
  for (int r = 0; r < nranks; r++) {
    bootPeer rec;
    memcpy(&rec, p + sizeof(bootPeer) * (size_t)r, sizeof(rec));
    if (rec.info.rank != r) {
      WARN("Bootstrap: peer table slot %d holds the record of rank %d", r, rec.info.rank);
      return mcclInternalError;
    }
    mcclResult_t res = peerCheck(&rec, "peer table");
    if (res != mcclSuccess) return res;
  }
  memcpy(out, buf, len);
  return mcclSuccess;
}

mcclResult_t mcclBootstrapMsgHeaderDecode(const void* buf, size_t len, uint64_t secret, int nranks, msgHeader* out) {
  if (buf == NULL || out == NULL || len != sizeof(msgHeader)) {
    WARN("Bootstrap: message header of %zu bytes (expected %zu)", len, sizeof(msgHeader));
    return mcclInternalError;
  }
  msgHeader h;
  memcpy(&h, buf, sizeof(h));
  if (h.secret != secret) {
    WARN("Bootstrap: message claiming rank %d has a wrong secret", (int)h.from);
    return mcclInternalError;
  }
  if (h.from < 0 || h.from >= nranks) {
    WARN("Bootstrap: message from rank %d (nranks=%d)", (int)h.from, nranks);
    return mcclInternalError;
  }
  if (h.kind < 0 || h.kind >= KIND_COUNT || h.pad != 0) {
    WARN("Bootstrap: message from rank %d of kind %d, pad %d", (int)h.from, (int)h.kind, (int)h.pad);
    return mcclInternalError;
  }
  *out = h;
  return mcclSuccess;
}
