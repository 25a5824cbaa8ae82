// The bootstrap's seeds (`make fuzz-seed`, through gen_corpus.c): a unique id, hellos, peer tables,
// rank 0's answers and message headers as bootstrap.c builds them.
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "../src/bootstrap_wire.h"
#include "fuzz.h"
#include "gen_corpus.h"

static bootPeer peer(int rank) {
  bootPeer p;
  memset(&p, 0, sizeof(p));
  p.info.rank = rank;
  p.info.pid = 1000 + rank;
  p.info.cudaDev = rank % 2;
  p.info.hostHash = 0x1234;
  p.info.shmDev = 0x16;
  p.info.pidNsHash = 0x5678;
  snprintf(p.info.proxyAddr, sizeof(p.info.proxyAddr), "mccl-proxy-%016llx", 0xabcdULL + (unsigned)rank);
  snprintf(p.listenName, sizeof(p.listenName), "mccl-bs-00112233445566778899aabbccddeeff.%d.%08x", rank, 0x5a5a0000u);
  if (rank % 2 == 0) {  // both families a TCP address can have
    p.tcpAddr.sin.sin_family = AF_INET;
    p.tcpAddr.sin.sin_port = htons((uint16_t)(40000 + rank));
    p.tcpAddr.sin.sin_addr.s_addr = htonl(0xc0000202u);  // 192.0.2.2
  } else {
    p.tcpAddr.sin6.sin6_family = AF_INET6;
    p.tcpAddr.sin6.sin6_port = htons((uint16_t)(40000 + rank));
    p.tcpAddr.sin6.sin6_addr.s6_addr[0] = 0xfd;
    p.tcpAddr.sin6.sin6_addr.s6_addr[15] = 2;  // fd00::2
  }
  return p;
}

static void bootstrap(void) {
  bootId id;
  memset(&id, 0, sizeof(id));
  id.magic = BOOT_ID_MAGIC;
  id.secret = FUZZ_SECRET;
  snprintf(id.name, sizeof(id.name), "mccl-bs-00112233445566778899aabbccddeeff");
  id.hostHash = 0x1234;
  id.addr = peer(0).tcpAddr;
  mcclUniqueId uid;
  memset(&uid, 0, sizeof(uid));
  memcpy(uid.internal, &id, sizeof(id));
  FUZZ_SEED("bootstrap_id", 1, uid);
  id.addr = peer(1).tcpAddr;
  memcpy(uid.internal, &id, sizeof(id));
  FUZZ_SEED("bootstrap_id", 2, uid);

  for (int n = 2; n <= 4; n += 2) {
    bootHello h;
    memset(&h, 0, sizeof(h));
    h.secret = FUZZ_SECRET;
    h.rank = n - 1;
    h.nranks = n;
    h.peer = peer(n - 1);
    FUZZ_SEED("bootstrap_hello", n / 2, h);

    bootPeer table[4];
    for (int r = 0; r < n; r++) table[r] = peer(r);
    unsigned char sel = (unsigned char)(n - 1);
    fuzzSeedPut("bootstrap_peers", n / 2, &sel, 1, table, sizeof(bootPeer) * (size_t)n);
  }

  int32_t ok = mcclSuccess, refused = mcclInvalidUsage;
  FUZZ_SEED("bootstrap_status", 1, ok);
  FUZZ_SEED("bootstrap_status", 2, refused);

  msgHeader m = {.secret = FUZZ_SECRET, .from = 1, .kind = KIND_USER, .tag = 7, .pad = 0, .size = 256};
  FUZZ_SEED_SEL("bootstrap_msg", 1, 1, m);
  m.from = 2;
  m.kind = KIND_BARRIER;
  m.size = 1;
  FUZZ_SEED_SEL("bootstrap_msg", 2, 3, m);
}

void fuzzWriteSeeds(void) {
  bootstrap();
}
