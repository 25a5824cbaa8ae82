// mcclShmConnectInfoDecode: the SHM connect information a peer sends (struct mcclConnect bytes).
#include "../src/shm_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  struct mcclShmConnectInfo info;
  if (mcclShmConnectInfoDecode(data, size, &info) != mcclSuccess) return 0;
  FUZZ_ASSERT(size >= sizeof(info) && size <= MCCL_CONNECT_SIZE && info.rank >= 0);
  FUZZ_ASSERT(mcclShmIpcDescCheck(&info.desc) == mcclSuccess);
  if (info.desc.kind == MCCL_SHM_IPC_LEGACY) {
    // The importer builds a path from the suffix: it must stay one file name under /dev/shm.
    FUZZ_ASSERT(strlen(info.desc.legacy.shmSuffix) == 6 && strchr(info.desc.legacy.shmSuffix, '/') == NULL);
    FUZZ_ASSERT(info.desc.legacy.shmSize > 0);
  } else {
    FUZZ_ASSERT(info.desc.kind == MCCL_SHM_IPC_CUMEM && info.desc.cumem.size > 0 && info.desc.cumem.handle != 0);
    FUZZ_ASSERT(info.desc.cumem.ptr == NULL);  // a peer's local field never reaches our clean-up
  }
  return 0;
}
