// mcclProxyUdsRespDecode: a peer proxy's answer to our fd request (id FUZZ_OPID).
#include "../src/proxy_wire.h"
#include "fuzz.h"
#include "mccl_proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  udsResp a;
  if (mcclProxyUdsRespDecode(data, size, FUZZ_OPID, &a) != mcclSuccess) return 0;
  FUZZ_ASSERT(a.opId == FUZZ_OPID && a.res >= 0 && a.res < mcclNumResults && a.rmtFd >= -1);
  FUZZ_ASSERT(a.res == mcclSuccess || a.rmtFd == -1);
  return 0;
}
