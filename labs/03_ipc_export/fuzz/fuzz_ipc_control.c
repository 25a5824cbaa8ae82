// mcclIpcSocketControlDecode: the control part of a datagram received on a lab 03 socket (the
// sender's credentials and the fds it passed). No fd here is real: nothing is closed.
#include <sys/socket.h>
#include "../src/ipcsocket_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzQuiet();
  // Exactly size bytes of malloc'd (so cmsghdr-aligned) memory: ASan sees any read past them.
  char* buf = malloc(size ? size : 1);
  if (buf == NULL) return 0;
  memcpy(buf, data, size);
  mcclIpcControl ctl;
  mcclResult_t res = mcclIpcSocketControlDecode(buf, size, &ctl);
  FUZZ_ASSERT(ctl.nFds >= 0 && ctl.nFds <= MCCL_IPC_MAX_RECV_FDS);  // written on every path
  FUZZ_ASSERT((size_t)ctl.nFds * sizeof(int) <= size);              // every fd came out of the buffer
  if (res == mcclSuccess && ctl.haveCred) FUZZ_ASSERT(size >= CMSG_LEN(sizeof(struct ucred)));
  free(buf);
  return 0;
}
