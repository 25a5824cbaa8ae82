// Lab 06 host side in one process: the P2P transport's canConnect rules, transport selection, pairs
// of connections between two devices (and one device twice) over P2P and SHM, both sides seeing the
// same memory for both protocols' FIFOs, device copies of mcclConnInfo, the abort flag, bad input,
// and nothing left behind (fds, mappings, /dev/shm entries).
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "devconn_test_util.h"
#include "mccl_alloc.h"
#include "mccl_checks.h"
#include "mccl_devconn.h"
#include "mccl_p2p.h"
#include "mccl_param.h"
#include "mccl_shm.h"
#include "mccl_test.h"

static void setParam(const char* name, const char* value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  mcclParamResetAll();
}

// CUDA opens fds and maps of its own at first use: warm it up before taking a baseline.
static void warmUp(void) {
  void* p = NULL;
  if (mcclCuMemAlloc(&p, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1) == mcclSuccess) mcclCuMemFree(p);
  struct mcclDevPair* pair = NULL;
  if (mcclDevPairLocalCreate(0, mcclTestDeviceCount() > 1 ? 1 : 0, 1, 3, mcclDevTransportAuto, 0, &pair) == mcclSuccess)
    mcclDevPairLocalFree(pair);
}

static void p2pCanConnectRules(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no CUDA device");
  int n = mcclTestDeviceCount();
  mcclPeerInfo a, b;
  EXPECT_OK(mcclFillPeerInfo(0, 0, &a));
  EXPECT_OK(mcclFillPeerInfo(1, n > 1 ? 1 : 0, &b));
  int ok = -1;
  setParam("MCCL_P2P_DISABLE", NULL);
  // The same device always can (the driver does not call a device its own peer).
  EXPECT_OK(mcclP2pTransport.canConnect(&ok, NULL, &a, &a));
  EXPECT_EQ(ok, mcclCuMemEnable() ? 1 : 0);
  if (n > 1) {
    int peer = 0;
    EXPECT_CUDA_OK(cudaDeviceCanAccessPeer(&peer, 0, 1));
    EXPECT_OK(mcclP2pTransport.canConnect(&ok, NULL, &a, &b));
    EXPECT_EQ(ok, mcclCuMemEnable() && peer ? 1 : 0);
  }
  // Another host.
  mcclPeerInfo far = b;
  far.hostHash ^= 1;
  EXPECT_OK(mcclP2pTransport.canConnect(&ok, NULL, &a, &far));
  EXPECT_EQ(ok, 0);
  // A device this process does not see.
  mcclPeerInfo ghost = b;
  ghost.cudaDev = n + 7;
  EXPECT_OK(mcclP2pTransport.canConnect(&ok, NULL, &a, &ghost));
  EXPECT_EQ(ok, 0);
  // MCCL_P2P_DISABLE=1 refuses everyone; SHM still connects them.
  setParam("MCCL_P2P_DISABLE", "1");
  EXPECT_OK(mcclP2pTransport.canConnect(&ok, NULL, &a, &b));
  EXPECT_EQ(ok, 0);
  EXPECT_OK(mcclShmTransport.canConnect(&ok, NULL, &a, &b));
  EXPECT_EQ(ok, 1);
  // Without cuMem there is no way to share device memory here.
  setParam("MCCL_P2P_DISABLE", NULL);
  setParam("MCCL_CUMEM_ENABLE", "0");
  EXPECT_OK(mcclP2pTransport.canConnect(&ok, NULL, &a, &b));
  EXPECT_EQ(ok, 0);
  setParam("MCCL_CUMEM_ENABLE", NULL);
  EXPECT_RES(mcclP2pTransport.canConnect(NULL, NULL, &a, &b), mcclInvalidArgument);
  EXPECT_RES(mcclP2pTransport.canConnect(&ok, NULL, NULL, &b), mcclInvalidArgument);
  EXPECT_RES(mcclP2pTransport.canConnect(&ok, NULL, &a, NULL), mcclInvalidArgument);
}

static void selectTransport(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: P2P cannot connect");
  mcclPeerInfo a, b;
  EXPECT_OK(mcclFillPeerInfo(0, 0, &a));
  EXPECT_OK(mcclFillPeerInfo(1, mcclTestDeviceCount() > 1 ? 1 : 0, &b));
  const struct mcclTransport* t = NULL;
  setParam("MCCL_P2P_DISABLE", NULL);
  EXPECT_OK(mcclDevSelectTransport(mcclDevTransportAuto, &a, &b, &t));
  EXPECT_TRUE(t == &mcclP2pTransport);
  EXPECT_OK(mcclDevSelectTransport(mcclDevTransportShm, &a, &b, &t));
  EXPECT_TRUE(t == &mcclShmTransport);
  setParam("MCCL_P2P_DISABLE", "1");
  EXPECT_OK(mcclDevSelectTransport(mcclDevTransportAuto, &a, &b, &t));
  EXPECT_TRUE(t == &mcclShmTransport);
  t = NULL;
  EXPECT_RES(mcclDevSelectTransport(mcclDevTransportP2p, &a, &b, &t), mcclInvalidUsage);
  EXPECT_TRUE(t == NULL);
  // A pair asked for P2P while it is disabled fails whole, leaving nothing behind.
  struct mcclDevPair* pair = NULL;
  EXPECT_RES(mcclDevPairLocalCreate(0, 0, 1, MCCL_DEVPAIR_SEND, mcclDevTransportP2p, 0, &pair), mcclInvalidUsage);
  EXPECT_TRUE(pair == NULL);
  // And auto picks SHM for a pair.
  EXPECT_OK(mcclDevPairLocalCreate(0, 0, 1, MCCL_DEVPAIR_SEND, mcclDevTransportAuto, 0, &pair));
  EXPECT_TRUE(pair->ends[0].transport == &mcclShmTransport && pair->ends[1].transport == &mcclShmTransport);
  EXPECT_OK(mcclDevPairLocalFree(pair));
  setParam("MCCL_P2P_DISABLE", NULL);
  EXPECT_RES(mcclDevSelectTransport((mcclDevTransport_t)9, &a, &b, &t), mcclInvalidArgument);
  EXPECT_RES(mcclDevSelectTransport(mcclDevTransportAuto, NULL, &b, &t), mcclInvalidArgument);
  EXPECT_RES(mcclDevSelectTransport(mcclDevTransportAuto, &a, &b, NULL), mcclInvalidArgument);
  // The connection machinery selects from the context's table: a context without one is refused.
  mcclPeerInfo both[2] = {a, b};
  struct mcclTransportCtx ctx;
  struct mcclConnector c;
  struct mcclConnect info;
  EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 2, 0));
  ctx.peerInfo = both;
  EXPECT_TRUE(ctx.transports == NULL);
  EXPECT_RES(mcclTransportSetupConnector(&ctx, NULL, 1, 0, 0, 1, &c, 0, &info, NULL), mcclInvalidArgument);
}

// Every channel of every direction of a local pair: fresh state, sender -> receiver stores, head back.
static int checkLocalPair(const struct mcclDevPair* p, uint64_t initialStep) {
  for (int d = 0; d < 2; d++) {
    const struct mcclDevPairEnd *s = &p->ends[d], *r = &p->ends[1 - d];
    if (!s->send) continue;
    if (!r->recv) return __LINE__;
    for (int c = 0; c < s->nChannels; c++) {
      int line;
      unsigned seed = (unsigned)(d * 100 + c);
      if ((line = dcCheckFresh(&s->send[c], s->cudaDev, &r->recv[c], r->cudaDev, initialStep))) return line;
      if ((line = dcWriteSender(&s->send[c], s->cudaDev, seed))) return line;
      if ((line = dcCheckReceiver(&r->recv[c], r->cudaDev, seed))) return line;
      if ((line = dcWriteReceiverHead(&r->recv[c], r->cudaDev, seed))) return line;
      if ((line = dcCheckSenderHead(&s->send[c], s->cudaDev, seed))) return line;
    }
  }
  // Channels are independent: distinct memory per connection.
  for (int d = 0; d < 2; d++)
    for (int c = 1; c < p->ends[d].nChannels && p->ends[d].send; c++)
      if (p->ends[d].send[c].conn.tail == p->ends[d].send[0].conn.tail) return __LINE__;
  return 0;
}

static void localPairs(mcclDevTransport_t which, const char* name) {
  int n = mcclTestDeviceCount();
  if (n < 1) SKIP("no CUDA device");
  if (which == mcclDevTransportP2p && !mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  setParam("MCCL_P2P_DISABLE", NULL);
  warmUp();
  int fds0 = mcclTestCountFds(), shm0 = mcclTestCountShm();
  // Device memory (on sim, memfds named minccl-sim*) and /dev/shm segments mapped here; all maps
  // would also count the malloc arenas and thread stacks glibc keeps after stream threads exit.
  long maps0 = mcclTestCountMaps("minccl-sim"), shmMaps0 = mcclTestCountMaps("/dev/shm");
  int devB = n > 1 ? 1 : 0;
  int pairs[2][2] = {{0, devB}, {devB, devB}};  // two devices (when there are), one device twice
  uint64_t steps[2] = {0, UINT64_MAX - 2};
  for (int k = 0; k < 2; k++) {
    struct mcclDevPair* p = NULL;
    EXPECT_OK(mcclDevPairLocalCreate(pairs[k][0], pairs[k][1], 3, MCCL_DEVPAIR_SEND | MCCL_DEVPAIR_RECV, which,
                                     steps[k], &p));
    EXPECT_EQ(strcmp(p->ends[0].transport->name, name), 0);
    EXPECT_EQ(p->ends[0].cudaDev, pairs[k][0]);
    EXPECT_EQ(p->ends[1].cudaDev, pairs[k][1]);
    int line = checkLocalPair(p, steps[k]);
    if (line)
      mcclTestFailAt(__FILE__, line, "%s pair dev %d <-> dev %d: check at devconn_test_util.h/test line %d", name,
                     pairs[k][0], pairs[k][1], line);
    EXPECT_OK(mcclDevPairLocalFree(p));
    if (line) return;
  }
  // One way only: the other direction has no connectors.
  struct mcclDevPair* p = NULL;
  EXPECT_OK(mcclDevPairLocalCreate(0, devB, 1, MCCL_DEVPAIR_RECV, which, 0, &p));
  EXPECT_TRUE(p->ends[0].send == NULL && p->ends[1].recv == NULL && p->ends[1].send && p->ends[0].recv);
  EXPECT_EQ(checkLocalPair(p, 0), 0);
  EXPECT_OK(mcclDevPairLocalFree(p));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestCountShm(), shm0);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
  EXPECT_EQ(mcclTestCountMaps("/dev/shm"), shmMaps0);
}

static void localPairsP2p(void) {
  localPairs(mcclDevTransportP2p, "P2P");
}
static void localPairsShm(void) {
  localPairs(mcclDevTransportShm, "SHM");
}

// P2P puts the memory on the devices: the receiver's FIFO on the receiver's device, the sender's
// head on the sender's (what makes the kernel's stores remote and its polls local).
static void p2pMemoryLivesOnTheOwnersDevice(void) {
  int n = mcclTestDeviceCount();
  if (n < 2) SKIP("needs 2 devices");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  struct mcclDevPair* p = NULL;
  EXPECT_OK(mcclDevPairLocalCreate(0, 1, 1, MCCL_DEVPAIR_SEND, mcclDevTransportP2p, 0, &p));
  struct cudaPointerAttributes at;
  const struct mcclConnector *s = &p->ends[0].send[0], *r = &p->ends[1].recv[0];
  EXPECT_CUDA_OK(cudaPointerGetAttributes(&at, r->conn.buffs[MCCL_PROTO_SIMPLE]));
  EXPECT_TRUE(at.type == cudaMemoryTypeDevice && at.device == 1);
  EXPECT_CUDA_OK(cudaPointerGetAttributes(&at, s->conn.head));
  EXPECT_TRUE(at.type == cudaMemoryTypeDevice && at.device == 0);
  // The sender's view of the FIFO is its own mapping of the receiver's memory, not the same address.
  EXPECT_TRUE(s->conn.buffs[MCCL_PROTO_SIMPLE] != r->conn.buffs[MCCL_PROTO_SIMPLE]);
  EXPECT_OK(mcclDevPairLocalFree(p));
}

static void devConnCopies(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no CUDA device");
  struct mcclDevPair* p = NULL;
  EXPECT_OK(mcclDevPairLocalCreate(0, 0, 1, MCCL_DEVPAIR_SEND, mcclDevTransportAuto, 41, &p));
  struct mcclConnector* s = &p->ends[0].send[0];
  EXPECT_CUDA_OK(cudaSetDevice(0));
  struct mcclConnInfo* d = NULL;
  EXPECT_OK(mcclDevConnCreate(s, 1, &d));
  struct mcclConnInfo back;
  EXPECT_CUDA_OK(cudaMemcpy(&back, d, sizeof(back), cudaMemcpyDeviceToHost));
  EXPECT_MEM_EQ(&back, &s->conn, sizeof(back));
  // What a kernel does at its end: store the step it reached.
  uint64_t step = 41 + 17;
  EXPECT_CUDA_OK(mcclTestCopyToDevice(&d->step, &step, sizeof(step)));
  EXPECT_OK(mcclDevConnReadStep(s, 1, d));
  EXPECT_TRUE(s->conn.step == 41 + 17);
  EXPECT_OK(mcclDevConnFree(d));
  EXPECT_OK(mcclDevConnFree(NULL));
  // Bad input.
  struct mcclConnector idle;
  EXPECT_OK(mcclConnectorInit(&idle, TRANSPORT_P2P, &mcclP2pTransport, 1, 0));
  d = NULL;
  EXPECT_RES(mcclDevConnCreate(&idle, 1, &d), mcclInvalidUsage);
  EXPECT_TRUE(d == NULL);
  EXPECT_RES(mcclDevConnCreate(NULL, 1, &d), mcclInvalidArgument);
  EXPECT_RES(mcclDevConnCreate(s, 1, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclDevConnReadStep(NULL, 1, d), mcclInvalidArgument);
  EXPECT_RES(mcclDevConnReadStep(s, 1, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclDevConnCreate(s, 0, &d), mcclInvalidArgument);
  EXPECT_RES(mcclDevConnCreate(s, 65, &d), mcclInvalidArgument);
  EXPECT_OK(mcclDevPairLocalFree(p));
}

static void abortFlag(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no CUDA device");
  volatile uint32_t* h = NULL;
  uint32_t* d = NULL;
  EXPECT_OK(mcclDevAbortFlagCreate(&h, &d));
  EXPECT_TRUE(h != NULL && d != NULL);
  uint32_t v = 7;
  EXPECT_CUDA_OK(cudaMemcpy(&v, d, sizeof(v), cudaMemcpyDeviceToHost));
  EXPECT_EQ(v, 0u);
  *h = 1;
  for (int dev = 0; dev < mcclTestDeviceCount() && dev < 2; dev++) {  // one flag serves kernels on every device
    EXPECT_CUDA_OK(cudaSetDevice(dev));
    EXPECT_CUDA_OK(cudaMemcpy(&v, d, sizeof(v), cudaMemcpyDeviceToHost));
    EXPECT_EQ(v, 1u);
  }
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_OK(mcclDevAbortFlagFree(h));
  EXPECT_OK(mcclDevAbortFlagFree(NULL));
  EXPECT_RES(mcclDevAbortFlagCreate(NULL, &d), mcclInvalidArgument);
  EXPECT_RES(mcclDevAbortFlagCreate(&h, NULL), mcclInvalidArgument);
}

static void pairBadInput(void) {
  int n = mcclTestDeviceCount();
  if (n < 1) SKIP("no CUDA device");
  struct mcclDevPair* p = NULL;
  EXPECT_RES(mcclDevPairLocalCreate(0, 0, 0, 1, mcclDevTransportAuto, 0, &p), mcclInvalidArgument);
  EXPECT_RES(mcclDevPairLocalCreate(0, 0, 65, 1, mcclDevTransportAuto, 0, &p), mcclInvalidArgument);
  EXPECT_RES(mcclDevPairLocalCreate(0, 0, 1, 0, mcclDevTransportAuto, 0, &p), mcclInvalidArgument);
  EXPECT_RES(mcclDevPairLocalCreate(0, 0, 1, 4, mcclDevTransportAuto, 0, &p), mcclInvalidArgument);
  EXPECT_RES(mcclDevPairLocalCreate(0, 0, 1, 1, (mcclDevTransport_t)3, 0, &p), mcclInvalidArgument);
  EXPECT_RES(mcclDevPairLocalCreate(-1, 0, 1, 1, mcclDevTransportAuto, 0, &p), mcclInvalidArgument);
  EXPECT_RES(mcclDevPairLocalCreate(0, n, 1, 1, mcclDevTransportAuto, 0, &p), mcclInvalidArgument);
  EXPECT_RES(mcclDevPairLocalCreate(0, 0, 1, 1, mcclDevTransportAuto, 0, NULL), mcclInvalidArgument);
  EXPECT_TRUE(p == NULL);
  EXPECT_OK(mcclDevPairLocalFree(NULL));
  EXPECT_OK(mcclDevPairPeerFree(NULL));
  struct mcclDevPairEnd* e = NULL;
  EXPECT_RES(mcclDevPairPeerCreate(NULL, NULL, 1, 1, 1, mcclDevTransportAuto, 0, &e), mcclInvalidArgument);
}

// Each side's P2P setup on its own, on every device (up to 2): the page (and, for the receiver, the LL and
// SIMPLE FIFOs after it) in cuMem device memory of the current device, from the connector's proxy, its head
// or tail at the connection's initial step and its LL FIFO zeroed, described for the peer in the connect
// info (rank, process, host, device, the exportable handle); free leaves no fd and no mapping behind.
static void p2pSetupOffersItsMemory(void) {
  int n = mcclTestDeviceCount();
  if (n < 1) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  mcclTestWarmUp();
  void* w = NULL;  // the first cuMem allocation's own state, before the baseline
  if (mcclCuMemAlloc(&w, NULL, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1) == mcclSuccess) mcclCuMemFree(w);
  int fds0 = mcclTestCountFds();
  long maps0 = mcclTestCountMaps("minccl-sim");
  struct mcclTransportCtx ctx;
  EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 1, 0));
  int sizes[MCCL_NUM_PROTOCOLS];
  EXPECT_OK(mcclTransportBuffSizes(&ctx, 0, sizes));
  for (int dev = 0; dev < n && dev < 2; dev++) {
    EXPECT_CUDA_OK(cudaSetDevice(dev));
    mcclPeerInfo me;
    EXPECT_OK(mcclFillPeerInfo(3, dev, &me));
    struct mcclConnector c[2];
    struct mcclConnect ci[2];
    for (int send = 0; send < 2; send++) {
      EXPECT_OK(mcclConnectorInit(&c[send], TRANSPORT_P2P, &mcclP2pTransport, send, 3));
      c[send].initialStep = 41 + (uint64_t)send;
      const struct mcclTransportComm* tc = send ? &mcclP2pTransport.send : &mcclP2pTransport.recv;
      EXPECT_OK(tc->setup(&ctx, NULL, &me, &me, &ci[send], &c[send], 0, 0));
      CHECK_STOPPED();
      struct mcclP2pConnectInfo info;
      memcpy(&info, ci[send].data, sizeof(info));
      EXPECT_EQ(info.rank, 3);
      EXPECT_EQ(info.pid, (int)getpid());
      EXPECT_TRUE(info.hostHash == mcclGetHostHash());
      EXPECT_EQ(info.cudaDev, dev);
      size_t need = send ? sizeof(struct mcclSendMem)
                         : sizeof(struct mcclRecvMem) + (size_t)sizes[MCCL_PROTO_LL] + (size_t)sizes[MCCL_PROTO_LL128] +
                               (size_t)sizes[MCCL_PROTO_SIMPLE];
      EXPECT_GE(info.buff.size, need);
      CUmemAllocationProp prop = {0};
      EXPECT_CU_OK(cuMemGetAllocationPropertiesFromHandle(&prop, info.buff.handle));
      EXPECT_EQ(prop.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
      EXPECT_EQ(prop.location.id, dev);
      EXPECT_TRUE((prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0);
      struct cudaPointerAttributes at;
      EXPECT_CUDA_OK(cudaPointerGetAttributes(&at, info.buff.directPtr));
      EXPECT_TRUE(at.type == cudaMemoryTypeDevice && at.device == dev);
      uint64_t counter = 0;  // head starts the send page, tail the receive page: both at offset 0
      EXPECT_CUDA_OK(cudaMemcpy(&counter, info.buff.directPtr, sizeof(counter), cudaMemcpyDeviceToHost));
      EXPECT_TRUE(counter == 41 + (uint64_t)send);
      if (!send) {
        // Both flag-carrying FIFOs, LL then LL128, start zeroed.
        const size_t flagged = (size_t)sizes[MCCL_PROTO_LL] + (size_t)sizes[MCCL_PROTO_LL128];
        unsigned char* ll = malloc(flagged);
        EXPECT_TRUE(ll != NULL);
        EXPECT_CUDA_OK(
            cudaMemcpy(ll, (char*)info.buff.directPtr + sizeof(struct mcclRecvMem), flagged, cudaMemcpyDeviceToHost));
        size_t nonzero = 0;
        for (size_t i = 0; i < flagged; i++) nonzero += ll[i] != 0;
        EXPECT_EQ(nonzero, 0);
        free(ll);
      }
    }
    EXPECT_OK(mcclConnectorFree(&c[0]));
    EXPECT_OK(mcclConnectorFree(&c[1]));
  }
  EXPECT_CUDA_OK(cudaSetDevice(0));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
}

// The transport hooks refuse misuse: wrong side, connect before setup, setup twice, a peer buffer
// too small for this side's MCCL_BUFFSIZE, and a proxy op (kernels drive P2P, not the proxy).
static void p2pHooksRefuseMisuse(void) {
  if (mcclTestDeviceCount() < 1) SKIP("no CUDA device");
  if (!mcclCuMemEnable()) SKIP("cuMem not supported: no P2P");
  warmUp();
  int fds0 = mcclTestCountFds();
  long maps0 = mcclTestCountMaps("minccl-sim");
  EXPECT_CUDA_OK(cudaSetDevice(0));
  mcclPeerInfo me;
  EXPECT_OK(mcclFillPeerInfo(0, 0, &me));
  struct mcclTransportCtx ctx, bad;
  EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 1, 0));
  struct mcclConnector s, r;
  struct mcclConnect si, ri;
  EXPECT_TRUE(mcclLocalTransports[TRANSPORT_P2P] == &mcclP2pTransport);  // at its NCCL index of lab 06's table
  EXPECT_OK(mcclConnectorInit(&s, TRANSPORT_P2P, &mcclP2pTransport, 1, 0));
  EXPECT_EQ(s.transport, TRANSPORT_P2P);
  EXPECT_OK(mcclConnectorInit(&r, TRANSPORT_P2P, &mcclP2pTransport, 0, 0));
  EXPECT_RES(mcclP2pTransport.send.connect(&ctx, &ri, 1, 0, &s), mcclInvalidUsage);  // not set up
  EXPECT_RES(mcclP2pTransport.recv.setup(&ctx, NULL, &me, &me, &ri, &s, 0, 0),
             mcclInvalidArgument);  // a send connector
  EXPECT_RES(mcclP2pTransport.send.setup(&ctx, NULL, NULL, &me, &si, &s, 0, 0), mcclInvalidArgument);
  EXPECT_RES(mcclP2pTransport.send.setup(&ctx, NULL, &me, &me, NULL, &s, 0, 0), mcclInvalidArgument);
  EXPECT_RES(mcclP2pTransport.send.setup(NULL, NULL, &me, &me, &si, &s, 0, 0), mcclInvalidArgument);
  bad = ctx;
  bad.buffSizes[0][MCCL_PROTO_LL] = 100;  // the sizes come from the context, checked there
  EXPECT_RES(mcclP2pTransport.send.setup(&bad, NULL, &me, &me, &si, &s, 0, 0), mcclInvalidArgument);
  EXPECT_OK(mcclP2pTransport.send.setup(&ctx, NULL, &me, &me, &si, &s, 0, 0));
  EXPECT_RES(mcclP2pTransport.send.setup(&ctx, NULL, &me, &me, &si, &s, 0, 0), mcclInvalidUsage);  // twice
  EXPECT_OK(mcclP2pTransport.recv.setup(&ctx, NULL, &me, &me, &ri, &r, 0, 0));
  // A receiver whose FIFO is smaller than this side expects.
  struct mcclP2pConnectInfo info;
  memcpy(&info, ri.data, sizeof(info));
  struct mcclConnect small = ri;
  info.buff.size = sizeof(struct mcclRecvMem);
  memcpy(small.data, &info, sizeof(info));
  EXPECT_RES(mcclP2pTransport.send.connect(&ctx, &small, 1, 0, &s), mcclRemoteError);
  EXPECT_RES(mcclP2pTransport.send.connect(&ctx, NULL, 1, 0, &s), mcclInvalidArgument);
  EXPECT_RES(mcclP2pTransport.send.connect(&ctx, &ri, 1, 0, &r), mcclInvalidArgument);  // a recv connector
  EXPECT_OK(mcclP2pTransport.send.connect(&ctx, &ri, 1, 0, &s));
  EXPECT_OK(mcclP2pTransport.recv.connect(&ctx, &si, 1, 0, &r));
  EXPECT_RES(mcclP2pTransport.recv.connect(&ctx, &si, 1, 0, &r), mcclInvalidUsage);  // twice
  struct mcclProxyOp op;
  void* buf = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&buf, 64));
  EXPECT_OK(mcclProxyOpInit(&op, &s, buf, 64, NULL));
  EXPECT_RES(mcclProxyOpsWait(&op, 1, NULL), mcclInvalidUsage);
  op.ceBuff = NULL;  // a kernel-driven op carries no user buffer: the P2P hook refuses it all the same
  EXPECT_RES(mcclProxyOpsWait(&op, 1, NULL), mcclInvalidUsage);
  EXPECT_CUDA_OK(cudaFree(buf));
  // The proxy hook itself checks what it is given.
  int done = 0;
  struct mcclP2pRequest req;
  memset(&req, 0, sizeof(req));
  struct mcclP2pBuff resp;
  struct mcclProxyConnection pc;
  memset(&pc, 0, sizeof(pc));
  pc.send = 1;
  pc.tcomm = &mcclP2pTransport.send;
  req.size = sizeof(struct mcclSendMem);
  req.llBuffSize = 4096;  // a sender has no LL FIFO
  EXPECT_RES(mcclP2pTransport.send.proxySetup(&pc, NULL, &req, sizeof(req), &resp, sizeof(resp), &done),
             mcclInvalidArgument);
  req.llBuffSize = 0;
  EXPECT_RES(mcclP2pTransport.send.proxySetup(&pc, NULL, &req, 3, &resp, sizeof(resp), &done), mcclInternalError);
  EXPECT_TRUE(pc.transportResources == NULL && pc.exportHandle == 0);
  EXPECT_OK(mcclConnectorFree(&s));
  EXPECT_OK(mcclConnectorFree(&r));
  EXPECT_EQ(mcclTestCountFds(), fds0);
  EXPECT_EQ(mcclTestCountMaps("minccl-sim"), maps0);
}

// SHM's receiver now carries an LL FIFO before the SIMPLE one: the sizes MCCL_LL_BUFFSIZE, MCCL_BUFFSIZE
// (connIndex 0, the rings) and MCCL_P2P_BUFFSIZE (connIndex 1, point-to-point) set, checked.
static void buffSizesFromParameters(void) {
  int b[MCCL_MAX_CONNS][MCCL_NUM_PROTOCOLS];
  setParam("MCCL_LL_BUFFSIZE", NULL);
  setParam("MCCL_BUFFSIZE", NULL);
  setParam("MCCL_P2P_BUFFSIZE", NULL);
  EXPECT_OK(mcclComputeBuffSizes(b));
  for (int c = 0; c < MCCL_MAX_CONNS; c++)
    EXPECT_EQ(b[c][MCCL_PROTO_LL], 8 * 512 * MCCL_STEPS * 16);  // NCCL's DEFAULT_LL_BUFFSIZE
  EXPECT_EQ(b[0][MCCL_PROTO_SIMPLE], 1 << 20);
  EXPECT_EQ(b[1][MCCL_PROTO_SIMPLE], 512 << 10);
  // LL128 for the rings only: 120 words per thread x 512 threads x MCCL_STEPS x 8 B; none point-to-point.
  EXPECT_EQ(b[0][MCCL_PROTO_LL128], 120 * 512 * MCCL_STEPS * 8);
  EXPECT_EQ(b[1][MCCL_PROTO_LL128], 0);
  setParam("MCCL_LL128_BUFFSIZE", "20000");  // not whole 2 KiB slices per slot
  EXPECT_RES(mcclComputeBuffSizes(b), mcclInvalidArgument);
  setParam("MCCL_LL128_BUFFSIZE", "16384");
  EXPECT_OK(mcclComputeBuffSizes(b));
  EXPECT_EQ(b[0][MCCL_PROTO_LL128], 16384);
  setParam("MCCL_LL128_BUFFSIZE", NULL);
  setParam("MCCL_LL_BUFFSIZE", "65536");
  setParam("MCCL_P2P_BUFFSIZE", "1048576");
  EXPECT_OK(mcclComputeBuffSizes(b));
  EXPECT_EQ(b[0][MCCL_PROTO_LL], 65536);
  EXPECT_EQ(b[1][MCCL_PROTO_LL], 65536);
  EXPECT_EQ(b[0][MCCL_PROTO_SIMPLE], 1 << 20);
  EXPECT_EQ(b[1][MCCL_PROTO_SIMPLE], 1 << 20);
  setParam("MCCL_P2P_BUFFSIZE", "1000");
  EXPECT_RES(mcclComputeBuffSizes(b), mcclInvalidArgument);
  setParam("MCCL_P2P_BUFFSIZE", NULL);
  setParam("MCCL_LL_BUFFSIZE", "1000");
  EXPECT_RES(mcclComputeBuffSizes(b), mcclInvalidArgument);
  if (mcclTestDeviceCount() >= 1) {
    struct mcclDevPair* p = NULL;
    EXPECT_RES(mcclDevPairLocalCreate(0, 0, 1, 1, mcclDevTransportShm, 0, &p), mcclInvalidArgument);
    setParam("MCCL_LL_BUFFSIZE", "65536");
    EXPECT_OK(mcclDevPairLocalCreate(0, 0, 1, 1, mcclDevTransportShm, 0, &p));
    EXPECT_EQ(p->ends[0].send[0].conn.llStepSize, 65536 / MCCL_STEPS);
    const struct mcclConnInfo* c = &p->ends[0].send[0].conn;
    EXPECT_TRUE(c->buffs[MCCL_PROTO_SIMPLE] == c->buffs[MCCL_PROTO_LL] + 65536);
    EXPECT_OK(mcclDevPairLocalFree(p));
  }
  setParam("MCCL_LL_BUFFSIZE", NULL);
  EXPECT_RES(mcclComputeBuffSizes(NULL), mcclInvalidArgument);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(p2pCanConnectRules), MCCL_TEST_CASE(selectTransport), MCCL_TEST_CASE(localPairsP2p),
               MCCL_TEST_CASE(localPairsShm), MCCL_TEST_CASE(p2pMemoryLivesOnTheOwnersDevice),
               MCCL_TEST_CASE(devConnCopies), MCCL_TEST_CASE(abortFlag), MCCL_TEST_CASE(pairBadInput),
               MCCL_TEST_CASE(p2pSetupOffersItsMemory), MCCL_TEST_CASE(p2pHooksRefuseMisuse),
               MCCL_TEST_CASE(buffSizesFromParameters))
