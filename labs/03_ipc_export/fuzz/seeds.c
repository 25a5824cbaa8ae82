// Lab 03's seeds (`make fuzz-seed`, through common/fuzz/gen_corpus.c): the control parts recvmsg
// leaves on a lab 03 socket.
#include <string.h>
#include <sys/socket.h>
#include "../src/ipcsocket_wire.h"
#include "fuzz.h"
#include "gen_corpus.h"

static void ipc(void) {
  // What recvmsg leaves for a message with credentials and one fd, and for one without an fd.
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
  } c;
  memset(&c, 0, sizeof(c));
  struct cmsghdr* cm = (struct cmsghdr*)c.buf;
  cm->cmsg_len = CMSG_LEN(sizeof(struct ucred));
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_CREDENTIALS;
  struct ucred cred = {.pid = 4242, .uid = 1000, .gid = 1000};
  memcpy(CMSG_DATA(cm), &cred, sizeof(cred));
  fuzzSeedPut("ipc_control", 1, c.buf, CMSG_SPACE(sizeof(struct ucred)), NULL, 0);
  cm = (struct cmsghdr*)(c.buf + CMSG_SPACE(sizeof(struct ucred)));
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  int fd = 5;
  memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
  fuzzSeedPut("ipc_control", 2, c.buf, CMSG_SPACE(sizeof(struct ucred)) + CMSG_LEN(sizeof(int)), NULL, 0);
}

void fuzzWriteSeeds(void) {
  ipc();
}
