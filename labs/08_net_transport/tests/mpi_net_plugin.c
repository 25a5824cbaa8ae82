// Lab 08 under mpirun -np 2, below the communicator: the plugin as the loader hands it out, its
// connections and requests driven by this test, and the NET sender's proxy on rank 0 against a receiver
// that rank 1 plays by hand with the plugin. Each case needs only the exercises up to its own: the
// loader (pluginLoads), the plugin's isend/irecv/test (pluginMovesMessages), the sender's progress
// (senderProxyToHandReceiver); the collectives over posed hosts (mpi_net_*) need all of them.
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mccl_net.h"
#include "mccl_param.h"
#include "mccl_proxy.h"
#include "mccl_test.h"
#include "mccl_test_mpi.h"
#include "mccl_utils.h"

#define STEP 8192  // bytes of a SIMPLE slot with MCCL_BUFFSIZE=65536
#define WAIT_S 60  // a wait on the peer that takes longer fails the case
#define MAX_MESSAGE 100000

// Both ranks agree whether to go on (a rank that failed stops the other, which then does not wait for it).
static int bothOk(void) {
  int mine = !mcclTestStopped(), all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

static unsigned char patternByte(int message, size_t i) {
  return (unsigned char)(message * 37 + i * 13 + (i >> 9));
}

#define READY()                                                         \
  do {                                                                  \
    if (mcclTestMpiDevice() < 0) SKIP("no CUDA device");                \
    MCCL_TEST_MPI_REQUIRE_THREAD_MULTIPLE();                            \
    if (mcclTestMpiSize() != 2) SKIP("runs on 2 ranks (mpirun -np 2)"); \
    EXPECT_CUDA_OK(cudaSetDevice(mcclTestMpiDevice()));                 \
  } while (0)

// The loader: the plugin's symbol from its own library, initialised once (collective), with one device
// that takes host memory; a second call hands out the same plugin.
static void pluginLoads(void) {
  READY();
  const mcclNet_t *net = NULL, *again = NULL;
  EXPECT_OK(mcclNetGet(&net));
  if (!bothOk()) return;
  EXPECT_TRUE(net != NULL && strcmp(net->name, "MPI") == 0);
  int ndev = 0;
  EXPECT_OK(net->devices(&ndev));
  EXPECT_GE(ndev, 1);
  mcclNetProperties_t props;
  EXPECT_OK(net->getProperties(0, &props));
  EXPECT_TRUE((props.ptrSupport & MCCL_PTR_HOST) != 0);
  EXPECT_GE(props.maxRecvs, 1);
  EXPECT_OK(mcclNetGet(&again));
  EXPECT_TRUE(again == net);
  EXPECT_RES(mcclNetGet(NULL), mcclInvalidArgument);
}

// One connection (rank 0 sends, rank 1 receives) made through the plugin by hand; rank 1's listen handle
// travels over MPI. Connect and accept may need several calls. The caller asks bothOk() whether both have it.
static void handConnect(const mcclNet_t* net, void** listenComm, void** comm) {
  char handle[MCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0, sizeof(handle));
  *listenComm = *comm = NULL;
  if (mcclTestMpiRank() == 1) EXPECT_OK(net->listen(0, handle, listenComm));
  MPI_Bcast(handle, sizeof(handle), MPI_BYTE, 1, MPI_COMM_WORLD);
  if (!bothOk()) return;
  double t0 = mcclClockSec();
  while (*comm == NULL && !mcclTestStopped() && mcclClockSec() - t0 < WAIT_S) {
    if (mcclTestMpiRank() == 0)
      EXPECT_OK(net->connect(0, handle, comm));
    else
      EXPECT_OK(net->accept(*listenComm, comm));
  }
  if (*comm == NULL && !mcclTestStopped()) mcclTestFailAt(__FILE__, __LINE__, "no connection after %d s", WAIT_S);
}

// Wait for a request; its completion reports the bytes moved in *size (left alone until then).
static void waitRequest(const mcclNet_t* net, void* req, int* size) {
  int done = 0;
  double t0 = mcclClockSec();
  while (!done && !mcclTestStopped() && mcclClockSec() - t0 < WAIT_S) EXPECT_OK(net->test(req, &done, size));
  if (!done && !mcclTestStopped()) mcclTestFailAt(__FILE__, __LINE__, "a request did not complete in %d s", WAIT_S);
}

// The plugin's requests: messages of 0 bytes up to MAX_MESSAGE arrive whole and in order, test reports
// their size and frees the request; a burst of sends fills the request pool, where isend answers "post
// again later" (a NULL request) rather than failing, and every send completes once the receiver posts.
static void pluginMovesMessages(void) {
  READY();
  const mcclNet_t* net = NULL;
  EXPECT_OK(mcclNetGet(&net));
  if (!bothOk()) return;
  void *listenComm = NULL, *comm = NULL, *mh = NULL;
  handConnect(net, &listenComm, &comm);
  if (!bothOk()) goto close;
  unsigned char* buf = malloc(MAX_MESSAGE);
  EXPECT_TRUE(buf != NULL);
  if (buf) EXPECT_OK(net->regMr(comm, buf, MAX_MESSAGE, MCCL_PTR_HOST, &mh));
  const size_t sizes[] = {0, 1, 4096, MAX_MESSAGE - 1};
  for (int m = 0; m < (int)(sizeof(sizes) / sizeof(sizes[0])) && bothOk(); m++) {
    void* req = NULL;
    int got = -1;
    if (mcclTestMpiRank() == 0) {
      for (size_t i = 0; i < sizes[m]; i++) buf[i] = patternByte(m, i);
      double t0 = mcclClockSec();
      while (req == NULL && !mcclTestStopped() && mcclClockSec() - t0 < WAIT_S)
        EXPECT_OK(net->isend(comm, buf, sizes[m], 0, mh, &req));
    } else {
      memset(buf, 0xEE, MAX_MESSAGE);
      size_t cap = MAX_MESSAGE;
      int tag = 0;
      void* data = buf;
      double t0 = mcclClockSec();
      while (req == NULL && !mcclTestStopped() && mcclClockSec() - t0 < WAIT_S)
        EXPECT_OK(net->irecv(comm, 1, &data, &cap, &tag, &mh, &req));
    }
    if (req == NULL) continue;
    waitRequest(net, req, &got);
    int done = 0;
    EXPECT_RES(net->test(req, &done, NULL), mcclInvalidArgument);  // freed by its completion
    if (mcclTestMpiRank() == 1) {                                  // a receive reports the bytes it got
      EXPECT_EQ(got, (int)sizes[m]);
      for (size_t i = 0; i < sizes[m] && !mcclTestStopped(); i++) EXPECT_EQ(buf[i], patternByte(m, i));
    }
  }
  // A burst: sends posted until the pool says "later" (the receiver has posted nothing yet).
  enum { BURST_MAX = 4096 };
  void** reqs = calloc(BURST_MAX, sizeof(void*));
  int posted = 0, refused = 0;
  EXPECT_TRUE(reqs != NULL);
  if (bothOk() && mcclTestMpiRank() == 0) {
    while (posted < BURST_MAX && !refused && !mcclTestStopped()) {
      EXPECT_OK(net->isend(comm, buf, 8, 0, mh, &reqs[posted]));
      if (reqs[posted] == NULL)
        refused = 1;
      else
        posted++;
    }
    EXPECT_EQ(refused, 1);
    EXPECT_GT(posted, 0);
  }
  MPI_Bcast(&posted, 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int i = 0; i < posted && reqs && !mcclTestStopped(); i++) {
    int got = -1;
    if (mcclTestMpiRank() == 1) {
      size_t cap = MAX_MESSAGE;
      int tag = 0;
      void* data = buf;
      void* req = NULL;
      double t0 = mcclClockSec();
      while (req == NULL && !mcclTestStopped() && mcclClockSec() - t0 < WAIT_S)
        EXPECT_OK(net->irecv(comm, 1, &data, &cap, &tag, &mh, &req));
      if (req) waitRequest(net, req, &got);
      EXPECT_EQ(got, 8);
    } else {
      waitRequest(net, reqs[i], &got);
    }
  }
  free(reqs);
  bothOk();
  if (mh) EXPECT_OK(net->deregMr(comm, mh));
  free(buf);
close:
  if (comm) EXPECT_OK(mcclTestMpiRank() == 0 ? net->closeSend(comm) : net->closeRecv(comm));
  if (listenComm) EXPECT_OK(net->closeListen(listenComm));
}

// The NET sender's proxy on rank 0, against a receiver rank 1 plays with the plugin: rank 0 plays the kernel
// too (it announces each slice's size in connFifo at the slice's first step, fills the slots and publishes
// tail, and waits for head before it reuses a slot). Every step arrives as one message of the slice's bytes
// for that step (0 for an empty slice), in order, with the counters wrapping on the way; the proxy gives
// every slot back in head once its send completed, and never holds more than MCCL_STEPS of them.
static void senderProxyToHandReceiver(void) {
  READY();
  static const size_t slices[] = {0, 1, STEP, 2 * STEP + STEP / 2, 7, 9 * STEP + 3};  // 17 steps: over 2 laps
  const int nSlices = (int)(sizeof(slices) / sizeof(slices[0]));
  const int me = mcclTestMpiRank(), dev = mcclTestMpiDevice();
  const mcclNet_t* net = NULL;
  EXPECT_OK(mcclNetGet(&net));
  if (!bothOk()) return;
  char handle[MCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0, sizeof(handle));
  void *listenComm = NULL, *comm = NULL, *mh = NULL;
  unsigned char* slot = malloc(STEP);
  EXPECT_TRUE(slot != NULL);
  mcclProxyState* proxy = NULL;
  struct mcclConnector c;
  memset(&c, 0, sizeof(c));
  int connectorUp = 0;
  if (me == 1) {
    EXPECT_OK(net->listen(0, handle, &listenComm));
  } else {
    setenv("MCCL_BUFFSIZE", "65536", 1);
    mcclParamResetAll();
    mcclPeerInfo mine, peer;
    struct mcclTransportCtx ctx;
    struct mcclConnect ci;
    EXPECT_OK(mcclProxyCreate(0, dev, NULL, mcclTransports, &proxy));
    EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 2, dev));
    unsetenv("MCCL_BUFFSIZE");
    mcclParamResetAll();
    ctx.proxyState = proxy;
    EXPECT_OK(mcclFillPeerInfo(0, dev, &mine));
    EXPECT_OK(mcclFillPeerInfo(1, dev, &peer));
    EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_NET, &mcclNetTransport, 1, 1));
    c.initialStep = UINT64_MAX - 4;
    if (proxy && !mcclTestStopped()) EXPECT_OK(mcclProxyConnect(proxy, &c));
    if (!mcclTestStopped()) EXPECT_OK(mcclNetTransport.send.setup(&ctx, NULL, &mine, &peer, &ci, &c, 0, 0));
    connectorUp = !mcclTestStopped();
    MPI_Bcast(handle, sizeof(handle), MPI_BYTE, 1, MPI_COMM_WORLD);
    memcpy(ci.data, handle, sizeof(handle));
    if (bothOk()) {
      EXPECT_OK(mcclNetTransport.send.connect(&ctx, &ci, 2, 0, &c));  // waits for rank 1's accept
      EXPECT_EQ(c.conn.stepSize, STEP);
    }
  }
  if (me == 1) {
    MPI_Bcast(handle, sizeof(handle), MPI_BYTE, 1, MPI_COMM_WORLD);
    if (bothOk()) {
      double t0 = mcclClockSec();
      while (comm == NULL && !mcclTestStopped() && mcclClockSec() - t0 < WAIT_S)
        EXPECT_OK(net->accept(listenComm, &comm));
      if (comm == NULL && !mcclTestStopped()) mcclTestFailAt(__FILE__, __LINE__, "no connection after %d s", WAIT_S);
      if (comm && slot) EXPECT_OK(net->regMr(comm, slot, STEP, MCCL_PTR_HOST, &mh));
    }
  }
  if (bothOk() && me == 0) {
    // The kernel, by hand.
    uint64_t step = c.conn.step;
    for (int s = 0; s < nSlices && !mcclTestStopped(); s++) {
      size_t steps = slices[s] == 0 ? 1 : (slices[s] + STEP - 1) / STEP;
      for (size_t k = 0; k < steps && !mcclTestStopped(); k++, step++) {
        double t0 = mcclClockSec();
        uint64_t head = __atomic_load_n(c.conn.head, __ATOMIC_ACQUIRE);
        while (step - head >= MCCL_STEPS && mcclClockSec() - t0 < WAIT_S)
          head = __atomic_load_n(c.conn.head, __ATOMIC_ACQUIRE);
        if (step - head >= MCCL_STEPS) {
          mcclTestFailAt(__FILE__, __LINE__, "no credit for step %zu of slice %d after %d s", k, s, WAIT_S);
          break;
        }
        EXPECT_GE((int64_t)(step - head), 0);  // head (sends done) never passes tail (steps published)
        int i = (int)(step % MCCL_STEPS);
        size_t off = k * STEP, n = slices[s] - off < STEP ? slices[s] - off : STEP;
        if (slices[s] == 0) n = 0;
        for (size_t b = 0; b < n; b++)
          ((unsigned char*)c.conn.buffs[MCCL_PROTO_SIMPLE])[(size_t)i * STEP + b] = patternByte(s, off + b);
        if (k == 0) __atomic_store_n(&c.conn.connFifo[i].size, (ssize_t)slices[s], __ATOMIC_RELAXED);
        __atomic_store_n(c.conn.tail, step + 1, __ATOMIC_RELEASE);
      }
    }
    // Every slot comes back once its send completed.
    double t0 = mcclClockSec();
    while (__atomic_load_n(c.conn.head, __ATOMIC_ACQUIRE) != step && mcclClockSec() - t0 < WAIT_S) sched_yield();
    EXPECT_TRUE(__atomic_load_n(c.conn.head, __ATOMIC_ACQUIRE) == step);
  } else if (me == 1 && !mcclTestStopped()) {
    for (int s = 0; s < nSlices && !mcclTestStopped(); s++) {
      size_t steps = slices[s] == 0 ? 1 : (slices[s] + STEP - 1) / STEP;
      for (size_t k = 0; k < steps && !mcclTestStopped(); k++) {
        size_t off = k * STEP, n = slices[s] == 0 ? 0 : slices[s] - off < STEP ? slices[s] - off : STEP;
        size_t cap = STEP;
        int tag = 0, got = -1;
        void *data = slot, *req = NULL;
        double t0 = mcclClockSec();
        while (req == NULL && !mcclTestStopped() && mcclClockSec() - t0 < WAIT_S)
          EXPECT_OK(net->irecv(comm, 1, &data, &cap, &tag, &mh, &req));
        if (req == NULL) break;
        waitRequest(net, req, &got);
        EXPECT_EQ(got, (int)n);
        for (size_t b = 0; b < n && !mcclTestStopped(); b++) EXPECT_EQ(slot[b], patternByte(s, off + b));
      }
    }
  }
  bothOk();
  if (me == 0) {
    if (connectorUp) EXPECT_OK(mcclConnectorFree(&c));
    if (proxy) EXPECT_OK(mcclProxyDestroy(proxy));
  } else {
    if (mh) EXPECT_OK(net->deregMr(comm, mh));
    if (comm) EXPECT_OK(net->closeRecv(comm));
    if (listenComm) EXPECT_OK(net->closeListen(listenComm));
  }
  free(slot);
}

MCCL_TEST_MAIN_MPI_THREADS(MPI_THREAD_MULTIPLE, MCCL_TEST_CASE(pluginLoads), MCCL_TEST_CASE(pluginMovesMessages),
                           MCCL_TEST_CASE(senderProxyToHandReceiver))
