// mcclProxyRpcHeaderDecode: the header of every RPC the proxy's service thread reads.
#include "../src/proxy_wire.h"
#include "fuzz.h"
#include "mccl_proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  rpcHeader h;
  if (mcclProxyRpcHeaderDecode(data, size, &h) != mcclSuccess) return 0;
  FUZZ_ASSERT(h.reqSize >= 0 && h.reqSize <= MCCL_PROXY_MAX_MSG && h.respSize >= 0 &&
              h.respSize <= MCCL_PROXY_MAX_MSG && h.pad == 0);
  FUZZ_ASSERT(h.type == mcclProxyMsgInit || h.type == mcclProxyMsgStop || h.type == mcclProxyMsgSetup ||
              h.type == mcclProxyMsgConnect || h.type == mcclProxyMsgFree);
  if (h.type == mcclProxyMsgInit) FUZZ_ASSERT(h.reqSize == (int)sizeof(proxyInitReq) && h.respSize == 8);
  return 0;
}
