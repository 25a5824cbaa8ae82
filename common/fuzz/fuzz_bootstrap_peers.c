// mcclBootstrapPeersDecode: the peer table rank 0 sends back. The first byte picks the receiver's
// rank count (1..8); the rest is the table.
#include "../src/bootstrap_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  if (size < 1) return 0;
  int nranks = data[0] % 8 + 1;
  bootPeer* peers = calloc((size_t)nranks, sizeof(bootPeer));
  if (peers == NULL) return 0;
  if (mcclBootstrapPeersDecode(data + 1, size - 1, nranks, peers) == mcclSuccess) {
    FUZZ_ASSERT(size - 1 == sizeof(bootPeer) * (size_t)nranks);
    for (int r = 0; r < nranks; r++) {
      FUZZ_ASSERT(peers[r].info.rank == r);
      FUZZ_ASSERT(fuzzTerminated(peers[r].info.proxyAddr, sizeof(peers[r].info.proxyAddr)));
      FUZZ_ASSERT(fuzzTerminated(peers[r].listenName, sizeof(peers[r].listenName)) && peers[r].listenName[0]);
      FUZZ_ASSERT(mcclBootstrapSockAddrValid(&peers[r].tcpAddr));
    }
  }
  free(peers);
  return 0;
}
