// mcclShmRequestDecode: the SHM proxySetup request (over lab 05's RPC socket). The first byte picks
// the side (even: receive, odd: send); the rest is the request.
#include "../src/shm_wire.h"
#include "fuzz.h"
#include "mccl_conn.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  if (size < 1) return 0;
  int send = data[0] & 1;
  struct mcclShmRequest req;
  if (mcclShmRequestDecode(data + 1, size - 1, send, &req) != mcclSuccess) return 0;
  FUZZ_ASSERT(req.buffSize >= 4096 && req.buffSize % MCCL_STEPS == 0 && req.buffSize <= MCCL_SHM_MAX_BUFFSIZE);
  FUZZ_ASSERT(req.llBuffSize >= 0 && (!send || req.llBuffSize == 0));
  // proxySetup zeroes the page and the LL FIFO of req.size bytes, and progress uses buffSize/STEPS-byte
  // slots after them: both must lie inside the allocation.
  size_t page = send ? sizeof(struct mcclSendMem) : sizeof(struct mcclRecvMem);
  FUZZ_ASSERT(req.size >= page + (size_t)req.llBuffSize + (send ? 0 : (size_t)req.buffSize));
  return 0;
}
