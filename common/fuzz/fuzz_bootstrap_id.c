// mcclBootstrapIdDecode: the unique id's bytes (they reach each rank through MPI_Bcast or a copy).
#include "../src/bootstrap_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  bootId id;
  if (mcclBootstrapIdDecode(data, size, &id) != mcclSuccess) return 0;
  FUZZ_ASSERT(size == MCCL_UNIQUE_ID_BYTES && id.magic == BOOT_ID_MAGIC);
  FUZZ_ASSERT(fuzzTerminated(id.name, sizeof(id.name)) && id.name[0] != '\0');
  FUZZ_ASSERT(mcclBootstrapSockAddrValid(&id.addr));
  return 0;
}
