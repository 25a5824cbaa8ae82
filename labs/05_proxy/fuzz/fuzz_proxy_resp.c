// mcclProxyRpcRespDecode: the header of every response a proxy client reads.
#include "../src/proxy_wire.h"
#include "fuzz.h"
#include "mccl_proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  rpcRespHeader rh;
  if (mcclProxyRpcRespDecode(data, size, &rh) != mcclSuccess) return 0;
  FUZZ_ASSERT(rh.res >= 0 && rh.res < mcclNumResults && rh.res != mcclInProgress);
  FUZZ_ASSERT(rh.respSize >= 0 && rh.respSize <= MCCL_PROXY_MAX_MSG && (rh.res == mcclSuccess || rh.respSize == 0));
  return 0;
}
