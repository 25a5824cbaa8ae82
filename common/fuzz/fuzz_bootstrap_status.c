// mcclBootstrapStatusDecode: rank 0's answer to a hello.
#include "../src/bootstrap_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  mcclResult_t s;
  if (mcclBootstrapStatusDecode(data, size, &s) != mcclSuccess) return 0;
  FUZZ_ASSERT(size == sizeof(int32_t) && (int)s >= 0 && s < mcclNumResults && s != mcclInProgress);
  return 0;
}
