// mcclProxyUdsReqDecode: a GetFd / QueryFd request on the proxy's datagram socket (any local
// process of our user may send one).
#include "../src/proxy_wire.h"
#include "fuzz.h"
#include "mccl_proxy.h"

// A requester's socket is named with its rank + 1: 0 is the services' own, never a requester.
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  udsReq q;
  if (mcclProxyUdsReqDecode(data, size, &q) != mcclSuccess) return 0;
  FUZZ_ASSERT(q.clientRank >= 1 && (q.type == mcclProxyMsgGetFd || q.type == mcclProxyMsgQueryFd));
  return 0;
}
