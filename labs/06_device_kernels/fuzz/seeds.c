// Lab 06's seeds (`make fuzz-seed`, through common/fuzz/gen_corpus.c): P2P connect information and
// both sides' proxySetup requests, as p2p.c builds them.
#include <string.h>
#include "../src/p2p_wire.h"
#include "fuzz.h"
#include "gen_corpus.h"
#include "mccl_conn.h"

static void p2p(void) {
  struct mcclConnect blob;
  struct mcclP2pConnectInfo pi;
  memset(&blob, 0, sizeof(blob));
  memset(&pi, 0, sizeof(pi));
  pi.rank = 1;
  pi.pid = 4242;
  pi.hostHash = 0x1234;
  pi.cudaDev = 1;
  pi.buff.directPtr = (void*)0x7f0000004000ULL;
  pi.buff.size = 2 << 20;
  pi.buff.handle = 0x4000;
  memcpy(blob.data, &pi, sizeof(pi));
  FUZZ_SEED("p2p_connect", 1, blob);

  struct mcclP2pRequest pr;
  memset(&pr, 0, sizeof(pr));
  pr.size = sizeof(struct mcclSendMem);
  FUZZ_SEED_SEL("p2p_request", 1, 1, pr);
  pr.size = sizeof(struct mcclRecvMem) + (1 << 16) + (1 << 22);
  pr.llBuffSize = 1 << 16;
  pr.initialStep = 5;
  FUZZ_SEED_SEL("p2p_request", 2, 0, pr);
}

void fuzzWriteSeeds(void) {
  p2p();
}
