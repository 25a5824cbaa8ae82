// mcclBootstrapMsgHeaderDecode: the header of every point-to-point bootstrap message. The first byte
// picks the receiver's rank count (1..8); the rest is the header.
#include "../src/bootstrap_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  if (size < 1) return 0;
  int nranks = data[0] % 8 + 1;
  msgHeader h;
  if (mcclBootstrapMsgHeaderDecode(data + 1, size - 1, FUZZ_SECRET, nranks, &h) != mcclSuccess) return 0;
  FUZZ_ASSERT(h.secret == FUZZ_SECRET && h.from >= 0 && h.from < nranks);
  FUZZ_ASSERT(h.kind >= 0 && h.kind < KIND_COUNT && h.pad == 0);
  return 0;
}
