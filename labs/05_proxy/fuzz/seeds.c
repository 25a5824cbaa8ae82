// Lab 05's seeds (`make fuzz-seed`, through common/fuzz/gen_corpus.c): RPC headers, Init bodies,
// responses and fd requests as the proxy's client and services build them.
#include <string.h>
#include "../src/proxy_wire.h"
#include "fuzz.h"
#include "gen_corpus.h"
#include "mccl_proxy.h"

static void proxy(void) {
  rpcHeader h = {.type = mcclProxyMsgInit, .reqSize = sizeof(proxyInitReq), .respSize = 8, .pad = 0, .opId = 1};
  FUZZ_SEED("proxy_rpc", 1, h);
  h = (rpcHeader){.type = mcclProxyMsgSetup, .reqSize = 32, .respSize = 64, .opId = 2, .conn = 0x7f0000001000ULL};
  FUZZ_SEED("proxy_rpc", 2, h);
  h = (rpcHeader){.type = mcclProxyMsgStop, .opId = 3};
  FUZZ_SEED("proxy_rpc", 3, h);

  proxyInitReq in = {.transport = 0, .send = 1};
  FUZZ_SEED("proxy_init", 1, in);
  in = (proxyInitReq){.transport = 1, .send = 0};
  FUZZ_SEED("proxy_init", 2, in);

  rpcRespHeader rh = {.opId = 1, .res = mcclSuccess, .respSize = 8};
  FUZZ_SEED("proxy_resp", 1, rh);
  rh = (rpcRespHeader){.opId = 2, .res = mcclInvalidArgument, .respSize = 0};
  FUZZ_SEED("proxy_resp", 2, rh);

  udsReq q = {.type = mcclProxyMsgGetFd, .clientRank = 2, .clientHash = 0x99, .opId = FUZZ_OPID, .handle = 0x55};
  FUZZ_SEED("proxy_udsreq", 1, q);
  q.type = mcclProxyMsgQueryFd;
  q.handle = 0;
  FUZZ_SEED("proxy_udsreq", 2, q);

  udsResp a = {.opId = FUZZ_OPID, .res = mcclSuccess, .rmtFd = -1};
  FUZZ_SEED("proxy_udsresp", 1, a);
  a.rmtFd = 17;
  FUZZ_SEED("proxy_udsresp", 2, a);
  a = (udsResp){.opId = FUZZ_OPID, .res = mcclUnhandledCudaError, .rmtFd = -1};
  FUZZ_SEED("proxy_udsresp", 3, a);
}

void fuzzWriteSeeds(void) {
  proxy();
}
