// mcclP2pRequestDecode: the P2P proxySetup request. The first byte picks the side (even: receive,
// odd: send); the rest is the request.
#include "../src/p2p_wire.h"
#include "fuzz.h"
#include "mccl_conn.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  if (size < 1) return 0;
  int send = data[0] & 1;
  struct mcclP2pRequest req;
  if (mcclP2pRequestDecode(data + 1, size - 1, send, &req) != mcclSuccess) return 0;
  size_t page = send ? sizeof(struct mcclSendMem) : sizeof(struct mcclRecvMem);
  // proxySetup writes the page and zeroes the LL FIFO after it: both inside req.size bytes.
  FUZZ_ASSERT(req.llBuffSize >= 0 && req.size >= page + (size_t)req.llBuffSize);
  return 0;
}
