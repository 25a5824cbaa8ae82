// mcclShmProxyConnectReqDecode: the SHM proxyConnect request (mapped host addresses).
#include "../src/shm_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  struct mcclShmProxyConnectReq req;
  if (mcclShmProxyConnectReqDecode(data, size, &req) != mcclSuccess) return 0;
  FUZZ_ASSERT(size == sizeof(req) && req.shmFifo && req.sendMem && req.recvMem);
  return 0;
}
