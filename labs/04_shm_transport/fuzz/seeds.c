// Lab 04's seeds (`make fuzz-seed`, through common/fuzz/gen_corpus.c): SHM connect information of both
// kinds and the proxy requests, as shm.c builds them.
#include <string.h>
#include "../src/shm_wire.h"
#include "fuzz.h"
#include "gen_corpus.h"
#include "mccl_conn.h"

static void shm(void) {
  struct mcclConnect blob;
  struct mcclShmConnectInfo si;
  memset(&blob, 0, sizeof(blob));
  memset(&si, 0, sizeof(si));
  si.rank = 1;
  si.desc.kind = MCCL_SHM_IPC_LEGACY;
  memcpy(si.desc.legacy.shmSuffix, "a1B2c3", 7);
  si.desc.legacy.shmSize = 4096 + (1 << 16) + (1 << 22);
  memcpy(blob.data, &si, sizeof(si));
  FUZZ_SEED("shm_connect", 1, blob);
  memset(&si.desc, 0, sizeof(si.desc));
  si.desc.kind = MCCL_SHM_IPC_CUMEM;
  si.desc.cumem.type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  si.desc.cumem.size = 2 << 20;
  si.desc.cumem.handle = 0x3000;
  memcpy(blob.data, &si, sizeof(si));
  FUZZ_SEED("shm_connect", 2, blob);

  struct mcclShmRequest sr;
  memset(&sr, 0, sizeof(sr));
  sr.size = sizeof(struct mcclSendMem);
  sr.buffSize = 1 << 22;
  sr.initialStep = 0;
  FUZZ_SEED_SEL("shm_request", 1, 1, sr);
  sr.size = sizeof(struct mcclRecvMem) + (1 << 16) + (1 << 22);
  sr.llBuffSize = 1 << 16;
  sr.legacy = 1;
  FUZZ_SEED_SEL("shm_request", 2, 0, sr);

  struct mcclShmProxyConnectReq cr = {(char*)0x7f0000002000ULL, (struct mcclSendMem*)0x7f0000001000ULL,
                                      (struct mcclRecvMem*)0x7f0000003000ULL};
  FUZZ_SEED("shm_proxyconnect", 1, cr);
}

void fuzzWriteSeeds(void) {
  shm();
}
