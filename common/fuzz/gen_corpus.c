// Writes the seed corpus of every fuzz target: well-formed messages as the senders build them,
// into <dir>/<target>/seed-<n>. `make fuzz-seed` runs it over common/fuzz/corpus; the output is
// committed. Seeds only need to be valid: libFuzzer mutates them into everything else.
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "../../labs/03_ipc_export/src/ipcsocket_wire.h"
#include "../../labs/04_shm_transport/src/shm_wire.h"
#include "../../labs/05_proxy/src/proxy_wire.h"
#include "../../labs/06_device_kernels/src/p2p_wire.h"
#include "../src/bootstrap_wire.h"
#include "fuzz.h"
#include "mccl_conn.h"
#include "mccl_proxy.h"

static const char* root;
static int failed;

static void put(const char* target, int n, const void* a, size_t alen, const void* b, size_t blen) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", root, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    failed = 1;
    return;
  }
  snprintf(path, sizeof(path), "%s/%s/seed-%d", root, target, n);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen)) {
    perror(path);
    failed = 1;
  }
  if (f) fclose(f);
}
#define PUT(target, n, obj) put(target, n, &(obj), sizeof(obj), NULL, 0)
// A one-byte selector (rank count, side) and then the message.
#define PUT_SEL(target, n, sel, obj)             \
  do {                                           \
    unsigned char s_ = (sel);                    \
    put(target, n, &s_, 1, &(obj), sizeof(obj)); \
  } while (0)

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
  PUT("bootstrap_id", 1, uid);
  id.addr = peer(1).tcpAddr;
  memcpy(uid.internal, &id, sizeof(id));
  PUT("bootstrap_id", 2, uid);

  for (int n = 2; n <= 4; n += 2) {
    bootHello h;
    memset(&h, 0, sizeof(h));
    h.secret = FUZZ_SECRET;
    h.rank = n - 1;
    h.nranks = n;
    h.peer = peer(n - 1);
    PUT("bootstrap_hello", n / 2, h);

    bootPeer table[4];
    for (int r = 0; r < n; r++) table[r] = peer(r);
    unsigned char sel = (unsigned char)(n - 1);
    put("bootstrap_peers", n / 2, &sel, 1, table, sizeof(bootPeer) * (size_t)n);
  }

  int32_t ok = mcclSuccess, refused = mcclInvalidUsage;
  PUT("bootstrap_status", 1, ok);
  PUT("bootstrap_status", 2, refused);

  msgHeader m = {.secret = FUZZ_SECRET, .from = 1, .kind = KIND_USER, .tag = 7, .pad = 0, .size = 256};
  PUT_SEL("bootstrap_msg", 1, 1, m);
  m.from = 2;
  m.kind = KIND_BARRIER;
  m.size = 1;
  PUT_SEL("bootstrap_msg", 2, 3, m);
}

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
  put("ipc_control", 1, c.buf, CMSG_SPACE(sizeof(struct ucred)), NULL, 0);
  cm = (struct cmsghdr*)(c.buf + CMSG_SPACE(sizeof(struct ucred)));
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  int fd = 5;
  memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
  put("ipc_control", 2, c.buf, CMSG_SPACE(sizeof(struct ucred)) + CMSG_LEN(sizeof(int)), NULL, 0);
}

static void proxy(void) {
  rpcHeader h = {.type = mcclProxyMsgInit, .reqSize = sizeof(proxyInitReq), .respSize = 8, .pad = 0, .opId = 1};
  PUT("proxy_rpc", 1, h);
  h = (rpcHeader){.type = mcclProxyMsgSetup, .reqSize = 32, .respSize = 64, .opId = 2, .conn = 0x7f0000001000ULL};
  PUT("proxy_rpc", 2, h);
  h = (rpcHeader){.type = mcclProxyMsgStop, .opId = 3};
  PUT("proxy_rpc", 3, h);

  proxyInitReq in = {.transport = 0, .send = 1};
  PUT("proxy_init", 1, in);
  in = (proxyInitReq){.transport = 1, .send = 0};
  PUT("proxy_init", 2, in);

  rpcRespHeader rh = {.opId = 1, .res = mcclSuccess, .respSize = 8};
  PUT("proxy_resp", 1, rh);
  rh = (rpcRespHeader){.opId = 2, .res = mcclInvalidArgument, .respSize = 0};
  PUT("proxy_resp", 2, rh);

  udsReq q = {.type = mcclProxyMsgGetFd, .clientRank = 2, .clientHash = 0x99, .opId = FUZZ_OPID, .handle = 0x55};
  PUT("proxy_udsreq", 1, q);
  q.type = mcclProxyMsgQueryFd;
  q.handle = 0;
  PUT("proxy_udsreq", 2, q);

  udsResp a = {.opId = FUZZ_OPID, .res = mcclSuccess, .rmtFd = -1};
  PUT("proxy_udsresp", 1, a);
  a.rmtFd = 17;
  PUT("proxy_udsresp", 2, a);
  a = (udsResp){.opId = FUZZ_OPID, .res = mcclUnhandledCudaError, .rmtFd = -1};
  PUT("proxy_udsresp", 3, a);
}

static void transports(void) {
  struct mcclConnect blob;
  struct mcclShmConnectInfo si;
  memset(&blob, 0, sizeof(blob));
  memset(&si, 0, sizeof(si));
  si.rank = 1;
  si.desc.kind = MCCL_SHM_IPC_LEGACY;
  memcpy(si.desc.legacy.shmSuffix, "a1B2c3", 7);
  si.desc.legacy.shmSize = 4096 + (1 << 16) + (1 << 22);
  memcpy(blob.data, &si, sizeof(si));
  PUT("shm_connect", 1, blob);
  memset(&si.desc, 0, sizeof(si.desc));
  si.desc.kind = MCCL_SHM_IPC_CUMEM;
  si.desc.cumem.type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  si.desc.cumem.size = 2 << 20;
  si.desc.cumem.handle = 0x3000;
  memcpy(blob.data, &si, sizeof(si));
  PUT("shm_connect", 2, blob);

  struct mcclShmRequest sr;
  memset(&sr, 0, sizeof(sr));
  sr.size = sizeof(struct mcclSendMem);
  sr.buffSize = 1 << 22;
  sr.initialStep = 0;
  PUT_SEL("shm_request", 1, 1, sr);
  sr.size = sizeof(struct mcclRecvMem) + (1 << 16) + (1 << 22);
  sr.llBuffSize = 1 << 16;
  sr.legacy = 1;
  PUT_SEL("shm_request", 2, 0, sr);

  struct mcclShmProxyConnectReq cr = {(char*)0x7f0000002000ULL, (struct mcclSendMem*)0x7f0000001000ULL,
                                      (struct mcclRecvMem*)0x7f0000003000ULL};
  PUT("shm_proxyconnect", 1, cr);

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
  PUT("p2p_connect", 1, blob);

  struct mcclP2pRequest pr;
  memset(&pr, 0, sizeof(pr));
  pr.size = sizeof(struct mcclSendMem);
  PUT_SEL("p2p_request", 1, 1, pr);
  pr.size = sizeof(struct mcclRecvMem) + (1 << 16) + (1 << 22);
  pr.llBuffSize = 1 << 16;
  pr.initialStep = 5;
  PUT_SEL("p2p_request", 2, 0, pr);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  if (mkdir(root, 0755) != 0 && errno != EEXIST) {
    perror(root);
    return 1;
  }
  bootstrap();
  ipc();
  proxy();
  transports();
  return failed;
}
