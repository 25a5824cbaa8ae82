// mcclP2pConnectInfoDecode: the P2P connect information a peer sends (struct mcclConnect bytes).
#include "../src/p2p_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  struct mcclP2pConnectInfo info;
  if (mcclP2pConnectInfoDecode(data, size, &info) != mcclSuccess) return 0;
  FUZZ_ASSERT(size >= sizeof(info) && size <= MCCL_CONNECT_SIZE);
  FUZZ_ASSERT(info.rank >= 0 && info.cudaDev >= 0 && info.buff.size > 0 && info.buff.handle != 0);
  return 0;
}
