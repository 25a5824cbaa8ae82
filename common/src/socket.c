// mccl_socket.h: the abstract Unix-socket address every layer builds the same way.
#include "mccl_socket.h"

#include <stddef.h>
#include <string.h>

socklen_t mcclSocketAbstractAddr(const char* name, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  size_t len = strnlen(name, sizeof(addr->sun_path) - 2);
  memcpy(addr->sun_path + 1, name, len);  // sun_path[0] == '\0': the abstract namespace
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}
