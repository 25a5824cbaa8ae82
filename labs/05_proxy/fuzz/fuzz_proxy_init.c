// mcclProxyInitReqDecode: the body of an Init RPC (which transport, which side).
#include "../src/proxy_wire.h"
#include "fuzz.h"
#include "mccl_proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  proxyInitReq in;
  if (mcclProxyInitReqDecode(data, size, &in) != mcclSuccess) return 0;
  FUZZ_ASSERT(in.transport >= 0 && in.transport < MCCL_NUM_TRANSPORTS && (in.send == 0 || in.send == 1));
  return 0;
}
