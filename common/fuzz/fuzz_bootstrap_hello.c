// mcclBootstrapHelloDecode: what rank 0 reads from every rank that reaches its rendezvous.
#include "../src/bootstrap_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  bootHello h;
  if (mcclBootstrapHelloDecode(data, size, FUZZ_SECRET, &h) != mcclSuccess) return 0;
  FUZZ_ASSERT(size == sizeof(h) && h.secret == FUZZ_SECRET);
  FUZZ_ASSERT(h.nranks >= 1 && h.nranks <= BOOT_MAX_RANKS && h.rank > 0 && h.rank < h.nranks);
  FUZZ_ASSERT(h.peer.info.rank == h.rank);
  FUZZ_ASSERT(fuzzTerminated(h.peer.info.proxyAddr, sizeof(h.peer.info.proxyAddr)));
  FUZZ_ASSERT(fuzzTerminated(h.peer.listenName, sizeof(h.peer.listenName)) && h.peer.listenName[0] != '\0');
  const bootSockAddr* a = &h.peer.tcpAddr;
  FUZZ_ASSERT(a->sa.sa_family == AF_INET ? a->sin.sin_port != 0
                                         : a->sa.sa_family == AF_INET6 && a->sin6.sin6_port != 0);
  return 0;
}
