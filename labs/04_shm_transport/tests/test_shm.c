// Lab 04 tests in one process: /dev/shm segments, shareable buffers on both paths, canConnect, the
// ops table, and the FIFO state machines on a loopback connection (sender and receiver in this
// process, progressed alternately by one thread).
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include "mccl_host_alloc.h"
#include "mccl_alloc.h"
#include "shm_test_util.h"
#include "mccl_fork.h"
#include "mccl_utils.h"

static void layout(void) {
  EXPECT_EQ(MCCL_STEPS, 8);
  EXPECT_EQ(sizeof(struct mcclSendMem), 4096);
  EXPECT_EQ(sizeof(struct mcclRecvMem), 4096);
  EXPECT_EQ(offsetof(struct mcclSendMem, head), 0);
  EXPECT_EQ(offsetof(struct mcclSendMem, ptrExchange), MCCL_CACHE_LINE_SIZE);
  EXPECT_EQ(offsetof(struct mcclRecvMem, tail), 0);
  EXPECT_EQ(offsetof(struct mcclRecvMem, connFifo), MCCL_CACHE_LINE_SIZE);
  EXPECT_LE(sizeof(struct mcclShmConnectInfo), MCCL_CONNECT_SIZE);
  setParam("MCCL_BUFFSIZE", NULL);
  int b = 0;
  EXPECT_OK(mcclShmBuffSize(&b));
  EXPECT_EQ(b, 1 << 20);  // NCCL's default is 4 MiB; ours 1 MiB, a slot 128 KiB (docs/parameters.md)
  setParam("MCCL_BUFFSIZE", "12345");
  b = -1;
  EXPECT_RES(mcclShmBuffSize(&b), mcclInvalidArgument);
  EXPECT_EQ(b, -1);
  // The documented range, both ends: 4096 .. 1 GiB (mccl_shm.h, mccl_params.def).
  const struct {
    const char* value;
    int ok;
  } range[] = {{"4096", 1}, {"0", 0}, {"1073741824", 1}, {"1073745920", 0}, {"2147479552", 0}, {"-4096", 0}};
  for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
    setParam("MCCL_BUFFSIZE", range[i].value);
    b = -1;
    EXPECT_RES(mcclShmBuffSize(&b), range[i].ok ? mcclSuccess : mcclInvalidArgument);
    EXPECT_EQ(b, range[i].ok ? atoll(range[i].value) : -1);
  }
  EXPECT_EQ(MCCL_SHM_MAX_BUFFSIZE, 1LL << 30);
  setParam("MCCL_BUFFSIZE", NULL);
}

static void shmOpenCreateAttach(void) {
  int fds = mcclTestCountFds();
  char path[MCCL_SHM_PATH_MAX] = "";
  void *a = NULL, *b = NULL;
  mcclShmHandle_t ha = NULL, hb = NULL;
  const size_t n = 3 * 4096 + 5;
  EXPECT_OK(mcclShmOpen(path, sizeof(path), n, &a, NULL, 1, &ha));
  EXPECT_EQ(strncmp(path, MCCL_SHM_PREFIX, strlen(MCCL_SHM_PREFIX)), 0);
  EXPECT_EQ(strlen(path), strlen(MCCL_SHM_PREFIX) + 6);
  struct stat st;
  EXPECT_EQ(stat(path, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_GE(st.st_size, (off_t)(n + sizeof(int)));
  EXPECT_GE((long long)st.st_blocks * 512, (long long)n);  // fallocated, not sparse
  memset(a, 0x5a, n);
  EXPECT_OK(mcclShmOpen(path, sizeof(path), n, &b, NULL, -1, &hb));
  EXPECT_FALSE(pathExists(path));  // the last (only) attacher unlinked it
  EXPECT_TRUE(a != b);
  EXPECT_MEM_EQ(a, b, n);
  ((char*)b)[n - 1] = 7;
  EXPECT_EQ(((char*)a)[n - 1], 7);
  EXPECT_OK(mcclShmClose(hb));
  EXPECT_OK(mcclShmClose(ha));
  EXPECT_EQ(mcclTestCountFds(), fds);
}

static void shmCloseUnlinksUnattached(void) {
  char path[MCCL_SHM_PATH_MAX] = "";
  void* a;
  mcclShmHandle_t h;
  EXPECT_OK(mcclShmOpen(path, sizeof(path), 4096, &a, NULL, 2, &h));
  EXPECT_TRUE(pathExists(path));
  EXPECT_OK(mcclShmClose(h));
  EXPECT_FALSE(pathExists(path));
  // and explicit unlink, before any attach: the mapping stays usable
  path[0] = '\0';
  EXPECT_OK(mcclShmOpen(path, sizeof(path), 4096, &a, NULL, 1, &h));
  EXPECT_OK(mcclShmUnlink(h));
  EXPECT_FALSE(pathExists(path));
  ((char*)a)[0] = 1;
  EXPECT_OK(mcclShmClose(h));
}

static void shmOpenRefusesExisting(void) {
  char path[MCCL_SHM_PATH_MAX];
  snprintf(path, sizeof(path), "%stest-%d", MCCL_SHM_PREFIX, (int)getpid());
  int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, "keep", 4), 4);
  close(fd);
  void* a = (void*)0x1;
  mcclShmHandle_t h = (mcclShmHandle_t)0x1;
  mcclResult_t r = mcclShmOpen(path, sizeof(path), 4096, &a, NULL, 1, &h);
  struct stat st;
  int still = stat(path, &st) == 0 && st.st_size == 4;
  unlink(path);
  EXPECT_EQ(r, mcclInvalidArgument);
  EXPECT_TRUE(still);  // untouched: neither truncated nor unlinked
  EXPECT_TRUE(a == (void*)0x1 && h == (mcclShmHandle_t)0x1);
}

static void shmOpenBadArgs(void) {
  int fds = mcclTestCountFds();
  int files = mcclTestCountShm();
  char path[MCCL_SHM_PATH_MAX] = "";
  void* p = (void*)0x1;
  mcclShmHandle_t h = (mcclShmHandle_t)0x1;
  EXPECT_RES(mcclShmOpen(NULL, 10, 4096, &p, NULL, 1, &h), mcclInvalidArgument);
  EXPECT_RES(mcclShmOpen(path, sizeof(path), 0, &p, NULL, 1, &h), mcclInvalidArgument);
  EXPECT_RES(mcclShmOpen(path, sizeof(path), 4096, &p, NULL, 0, &h), mcclInvalidArgument);
  EXPECT_RES(mcclShmOpen(path, sizeof(path), 4096, NULL, NULL, 1, &h), mcclInvalidArgument);
  EXPECT_RES(mcclShmOpen(path, sizeof(path), 4096, &p, NULL, 1, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclShmOpen(path, 8, 4096, &p, NULL, 1, &h), mcclInvalidArgument);
  EXPECT_RES(mcclShmOpen(path, sizeof(path), 4096, &p, NULL, -1, &h), mcclInvalidArgument);  // attach ""
  EXPECT_RES(mcclShmOpen(path, sizeof(path), (size_t)-1, &p, NULL, 1, &h), mcclInvalidArgument);
  snprintf(path, sizeof(path), "%snotthere", MCCL_SHM_PREFIX);
  EXPECT_RES(mcclShmOpen(path, sizeof(path), 4096, &p, NULL, -1, &h), mcclSystemError);
  // attaching with a size larger than the file
  char cpath[MCCL_SHM_PATH_MAX] = "";
  void* a;
  mcclShmHandle_t ha;
  EXPECT_OK(mcclShmOpen(cpath, sizeof(cpath), 4096, &a, NULL, 1, &ha));
  EXPECT_RES(mcclShmOpen(cpath, sizeof(cpath), 1 << 20, &p, NULL, -1, &h), mcclInvalidArgument);
  EXPECT_TRUE(pathExists(cpath));  // a failed attach does not count
  EXPECT_OK(mcclShmClose(ha));
  EXPECT_TRUE(p == (void*)0x1 && h == (mcclShmHandle_t)0x1);
  EXPECT_EQ(mcclTestCountFds(), fds);
  EXPECT_EQ(mcclTestCountShm(), files);
  EXPECT_OK(mcclShmClose(NULL));
}

// Child side of the "/dev/shm too small" tests: 0 pass, 1 fail, 77 could not set up.
static int tooSmallChild(int useMount) {
  if (useMount) {
    if (unshare(CLONE_NEWNS) != 0) return 77;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 77;
    if (mount("tmpfs", MCCL_SHM_DIR, "tmpfs", 0, "size=1m") != 0) return 77;
  } else {
    struct rlimit rl = {1 << 20, 1 << 20};
    signal(SIGXFSZ, SIG_IGN);  // so the write limit is an EFBIG, not a kill
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 77;
  }
  int files = mcclTestCountShm();
  int fds = mcclTestCountFds();
  char path[MCCL_SHM_PATH_MAX] = "";
  void* p = (void*)0x1;
  mcclShmHandle_t h = (mcclShmHandle_t)0x1;
  mcclResult_t r = mcclShmOpen(path, sizeof(path), 8 << 20, &p, NULL, 1, &h);
  if (r != mcclSystemError) return 1;
  if (p != (void*)0x1 || h != (mcclShmHandle_t)0x1 || path[0] != '\0') return 2;
  if (mcclTestCountShm() != files || mcclTestCountFds() != fds) return 3;
  // and the shareable-buffer layer reports it the same way
  mcclShmIpcDesc_t d;
  memset(&d, 0, sizeof(d));
  if (mcclShmAllocateShareableBuffer(8 << 20, 1, &d, &p, NULL) != mcclSystemError || d.kind != 0) return 4;
  if (mcclTestCountShm() != files) return 5;
  return 0;
}

static int runChild(int (*fn)(int), int arg) {
  fflush(NULL);
  pid_t pid = mcclForkChild();  // dies with this process
  if (pid == 0) _exit(fn(arg));
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void shmFullTmpfs(void) {
  int rc = runChild(tooSmallChild, 1);
  if (rc == 77) SKIP("cannot mount a small tmpfs on /dev/shm here (needs root and mount namespaces)");
  EXPECT_EQ(rc, 0);
}

static void shmFileSizeLimit(void) {
  int rc = runChild(tooSmallChild, 0);
  if (rc == 77) SKIP("setrlimit(RLIMIT_FSIZE) refused");
  EXPECT_EQ(rc, 0);
}

static void shmDevicePointer(void) {
  char path[MCCL_SHM_PATH_MAX] = "";
  void *h = NULL, *d = NULL, *dev = NULL;
  mcclShmHandle_t sh;
  const size_t n = 1 << 20;
  EXPECT_OK(mcclShmOpen(path, sizeof(path), n, &h, &d, 1, &sh));
  EXPECT_TRUE(d != NULL);
  unsigned char* src = (unsigned char*)malloc(n);
  fillPattern(src, n, 42);
  EXPECT_CUDA_OK(cudaMalloc(&dev, n));
  EXPECT_CUDA_OK(mcclTestCopyToDevice(dev, src, n));
  EXPECT_CUDA_OK(cudaMemcpy(d, dev, n, cudaMemcpyDeviceToDevice));  // the device writes the segment
  EXPECT_MEM_EQ(h, src, n);
  EXPECT_CUDA_OK(cudaFree(dev));
  free(src);
  EXPECT_OK(mcclShmClose(sh));
  EXPECT_FALSE(pathExists(path));
}

static void ipcLegacyRoundTrip(void) {
  int fds = mcclTestCountFds();
  mcclShmIpcDesc_t mine, theirs;
  void *h, *d, *h2, *d2;
  EXPECT_OK(mcclShmAllocateShareableBuffer(65536, 1, &mine, &h, &d));
  EXPECT_EQ(mine.kind, MCCL_SHM_IPC_LEGACY);
  EXPECT_EQ(mine.legacy.shmSize, 65536);
  char path[MCCL_SHM_PATH_MAX];
  descPath(&mine, path, sizeof(path));
  EXPECT_FALSE(pathExists(path));  // legacy forced: the importers are in this process, the name went at once
  for (int i = 0; i < 65536; i++) ((unsigned char*)h)[i] = (unsigned char)(i * 7);
  EXPECT_OK(mcclShmImportShareableBuffer(&mine, -1, &h2, &d2, &theirs));
  EXPECT_EQ(theirs.kind, MCCL_SHM_IPC_LEGACY);
  EXPECT_FALSE(pathExists(path));
  EXPECT_MEM_EQ(h2, h, 65536);
  ((unsigned char*)h2)[100] = 0xA5;  // one memory, seen from both mappings
  EXPECT_EQ(((unsigned char*)h)[100], 0xA5);
  int fd = -1;
  EXPECT_RES(mcclShmExportFd(&mine, &fd), mcclInvalidArgument);  // a file has no cuMem fd
  EXPECT_EQ(fd, -1);
  EXPECT_OK(mcclShmIpcClose(&theirs));
  EXPECT_OK(mcclShmIpcClose(&mine));
  EXPECT_EQ(mine.kind, 0);
  EXPECT_EQ(mcclTestCountFds(), fds);
}

static void ipcCuMemRoundTrip(void) {
  setParam("MCCL_CUMEM_HOST_ENABLE", "1");
  if (!mcclCuMemEnable() || !mcclCuMemHostEnable()) {
    setParam("MCCL_CUMEM_HOST_ENABLE", NULL);
    SKIP("cuMem host-NUMA memory is not available on this system");
  }
  int fds = mcclTestCountFds(), files = mcclTestCountShm();
  mcclShmIpcDesc_t mine, theirs;
  void *h, *d, *h2, *d2;
  mcclResult_t r = mcclShmAllocateShareableBuffer(3 << 20, 0, &mine, &h, &d);
  setParam("MCCL_CUMEM_HOST_ENABLE", NULL);
  EXPECT_OK(r);
  EXPECT_EQ(mine.kind, MCCL_SHM_IPC_CUMEM);
  EXPECT_EQ(mine.cumem.type, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_TRUE(h == d);
  EXPECT_EQ(mcclTestCountShm(), files);  // nothing in /dev/shm on this path
  fillPattern(h, 3 << 20, 9);
  int fd = -1;
  EXPECT_OK(mcclShmExportFd(&mine, &fd));
  EXPECT_GE(fd, 0);
  EXPECT_OK(mcclShmImportShareableBuffer(&mine, fd, &h2, &d2, &theirs));
  close(fd);
  EXPECT_EQ(theirs.kind, MCCL_SHM_IPC_CUMEM);
  EXPECT_TRUE(h2 != h);
  EXPECT_EQ(checkPattern(h2, 3 << 20, 9), (size_t)-1);
  ((char*)h2)[5] = 99;
  EXPECT_EQ(((char*)h)[5], 99);
  EXPECT_OK(mcclShmIpcClose(&theirs));
  EXPECT_OK(mcclShmIpcClose(&mine));
  EXPECT_EQ(mcclTestCountFds(), fds);
}

static void ipcImportBadDesc(void) {
  int fds = mcclTestCountFds();
  mcclShmIpcDesc_t bad, out;
  void* h = (void*)0x1;
  memset(&out, 0x77, sizeof(out));
  memset(&bad, 0, sizeof(bad));
  EXPECT_RES(mcclShmImportShareableBuffer(&bad, -1, &h, NULL, &out), mcclInvalidArgument);  // kind 0
  bad.kind = 99;
  EXPECT_RES(mcclShmImportShareableBuffer(&bad, -1, &h, NULL, &out), mcclInvalidArgument);
  bad.kind = MCCL_SHM_IPC_LEGACY;
  memcpy(bad.legacy.shmSuffix, "../../", 7);
  bad.legacy.shmSize = 4096;
  EXPECT_RES(mcclShmImportShareableBuffer(&bad, -1, &h, NULL, &out), mcclInvalidArgument);
  memcpy(bad.legacy.shmSuffix, "abcdef", 7);
  bad.legacy.shmSize = 0;
  EXPECT_RES(mcclShmImportShareableBuffer(&bad, -1, &h, NULL, &out), mcclInvalidArgument);
  bad.legacy.shmSize = 4096;
  EXPECT_RES(mcclShmImportShareableBuffer(&bad, -1, &h, NULL, &out), mcclSystemError);  // no such file
  memset(&bad, 0, sizeof(bad));
  bad.kind = MCCL_SHM_IPC_CUMEM;
  bad.cumem.type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  bad.cumem.size = 1 << 21;
  EXPECT_RES(mcclShmImportShareableBuffer(&bad, -1, &h, NULL, &out), mcclInvalidArgument);    // no fd
  EXPECT_RES(mcclShmImportShareableBuffer(&bad, 1000, &h, NULL, &out), mcclInvalidArgument);  // not open
  bad.cumem.type = CU_MEM_HANDLE_TYPE_FABRIC;
  EXPECT_RES(mcclShmImportShareableBuffer(&bad, 0, &h, NULL, &out), mcclInvalidArgument);
  EXPECT_RES(mcclShmImportShareableBuffer(NULL, -1, &h, NULL, &out), mcclInvalidArgument);
  EXPECT_RES(mcclShmAllocateShareableBuffer(0, 1, &out, &h, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclShmAllocateShareableBuffer(4096, 1, NULL, &h, NULL), mcclInvalidArgument);
  EXPECT_TRUE(h == (void*)0x1);
  unsigned char* o = (unsigned char*)&out;
  for (size_t i = 0; i < sizeof(out); i++) EXPECT_EQ(o[i], 0x77);
  EXPECT_EQ(mcclTestCountFds(), fds);
}

static void canConnectRules(void) {
  mcclPeerInfo a, b;
  EXPECT_OK(mcclFillPeerInfo(0, 0, &a));
  EXPECT_OK(mcclFillPeerInfo(1, 1, &b));
  struct stat st;
  EXPECT_EQ(stat("/dev/shm", &st), 0);
  EXPECT_EQ(a.shmDev, (uint64_t)st.st_dev);
  EXPECT_EQ(a.hostHash, mcclGetHostHash());
  EXPECT_EQ(a.pid, (int)getpid());
  int ok = -1;
  setParam("MCCL_SHM_DISABLE", NULL);
  EXPECT_OK(mcclShmTransport.canConnect(&ok, NULL, &a, &b));
  EXPECT_EQ(ok, 1);
  mcclPeerInfo c = b;
  c.hostHash ^= 1;  // another host
  EXPECT_OK(mcclShmTransport.canConnect(&ok, NULL, &a, &c));
  EXPECT_EQ(ok, 0);
  c = b;
  c.shmDev ^= 1;  // same host, another /dev/shm (a different container)
  EXPECT_OK(mcclShmTransport.canConnect(&ok, NULL, &a, &c));
  EXPECT_EQ(ok, 0);
  setParam("MCCL_SHM_DISABLE", "1");
  EXPECT_OK(mcclShmTransport.canConnect(&ok, NULL, &a, &b));
  setParam("MCCL_SHM_DISABLE", NULL);
  EXPECT_EQ(ok, 0);
  ok = 5;
  EXPECT_RES(mcclShmTransport.canConnect(&ok, NULL, NULL, &b), mcclInvalidArgument);
  EXPECT_EQ(ok, 5);
  EXPECT_RES(mcclFillPeerInfo(-1, 0, &a), mcclInvalidArgument);
}

static void opsTable(void) {
  const struct mcclTransport* t = &mcclShmTransport;
  EXPECT_EQ(strcmp(t->name, "SHM"), 0);
  EXPECT_TRUE(t->canConnect != NULL);
  const struct mcclTransportComm* sides[2] = {&t->send, &t->recv};
  for (int i = 0; i < 2; i++) {
    EXPECT_TRUE(sides[i]->setup && sides[i]->connect && sides[i]->free);
    EXPECT_TRUE(sides[i]->proxySetup && sides[i]->proxyConnect && sides[i]->proxyFree && sides[i]->proxyProgress);
  }
  EXPECT_TRUE(t->send.proxyProgress != t->recv.proxyProgress);
  struct mcclConnector c;
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_SHM, t, 1, 3));
  EXPECT_TRUE(c.transportComm == &t->send);
  EXPECT_TRUE(c.proxyCall == mcclProxyCallDirect);
  EXPECT_TRUE(c.proxyConn == &c.proxyConnStorage && c.proxyConn->rank == 3 && c.proxyConn->send == 1);
  // SHM at its NCCL index of a transport table (this lab has SHM only), and the connector (and its
  // proxy half) record that index.
  struct mcclTransport* const shmOnly[MCCL_NUM_TRANSPORTS] = {NULL, &mcclShmTransport, NULL};
  EXPECT_EQ(mcclTransportIndex(shmOnly, t), TRANSPORT_SHM);
  EXPECT_EQ(c.transport, TRANSPORT_SHM);
  EXPECT_EQ(c.proxyConn->transport, TRANSPORT_SHM);
  EXPECT_EQ(mcclTransportIndex(shmOnly, NULL), TRANSPORT_UNDEFINED);
  EXPECT_EQ(mcclTransportIndex(NULL, t), TRANSPORT_UNDEFINED);
  struct mcclTransport stray = {"STRAY", NULL, {0}, {0}, NULL};
  EXPECT_EQ(mcclTransportIndex(shmOnly, &stray), TRANSPORT_UNDEFINED);
  EXPECT_RES(mcclConnectorInit(&c, MCCL_NUM_TRANSPORTS, t, 1, 0), mcclInvalidArgument);  // no such index
  EXPECT_RES(mcclConnectorInit(&c, TRANSPORT_UNDEFINED, t, 1, 0), mcclInvalidArgument);
  EXPECT_RES(mcclConnectorInit(&c, TRANSPORT_SHM, NULL, 1, 0), mcclInvalidArgument);
  EXPECT_RES(mcclConnectorInit(&c, TRANSPORT_SHM, t, 2, 0), mcclInvalidArgument);
  EXPECT_RES(mcclProxyCallDirect(&c, 42, NULL, 0, NULL, 0), mcclInvalidArgument);
}

// ---- loopback: both ends of one connection in this process (the /dev/shm path: same pid) ----

struct loop {
  struct mcclConnector s, r;
};

static void loopOpen(struct loop* l, uint64_t initialStep) {
  mcclPeerInfo me;
  struct mcclConnect sc, rc;
  struct mcclTransportCtx ctx;
  EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 1, 0));
  EXPECT_OK(mcclFillPeerInfo(0, 0, &me));
  EXPECT_OK(mcclConnectorInit(&l->s, TRANSPORT_SHM, &mcclShmTransport, 1, 0));
  EXPECT_OK(mcclConnectorInit(&l->r, TRANSPORT_SHM, &mcclShmTransport, 0, 0));
  l->s.initialStep = l->r.initialStep = initialStep;
  EXPECT_OK(l->s.transportComm->setup(&ctx, NULL, &me, &me, &sc, &l->s, 0, 0));
  EXPECT_OK(l->r.transportComm->setup(&ctx, NULL, &me, &me, &rc, &l->r, 0, 0));
  EXPECT_EQ(((struct mcclShmConnectInfo*)rc.data)->desc.kind, MCCL_SHM_IPC_LEGACY);
  EXPECT_OK(l->s.transportComm->connect(&ctx, &rc, 1, 0, &l->s));
  EXPECT_OK(l->r.transportComm->connect(&ctx, &sc, 1, 0, &l->r));
  EXPECT_EQ(l->s.connected, 1);
  EXPECT_EQ(l->r.connected, 1);
}

static void loopClose(struct loop* l) {
  EXPECT_OK(mcclConnectorFree(&l->s));
  EXPECT_OK(mcclConnectorFree(&l->r));
}

// One message through the loopback; checks the bytes and the counters.
static void loopMessage(struct loop* l, void* dsrc, void* ddst, unsigned char* hbuf, size_t n, uint64_t seed) {
  fillPattern(hbuf, n, seed);
  if (n) EXPECT_CUDA_OK(mcclTestCopyToDevice(dsrc, hbuf, n));
  if (n) EXPECT_CUDA_OK(mcclTestMemset(ddst, 0, n));
  // The transport's stream is non-blocking (as NCCL's proxy streams): it does not wait for the
  // legacy stream, so the fill and the memset must be complete before the op is posted.
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  struct mcclProxyOp ops[2];
  EXPECT_OK(mcclProxyOpInit(&ops[0], &l->s, dsrc, n, NULL));
  EXPECT_OK(mcclProxyOpInit(&ops[1], &l->r, ddst, n, NULL));
  EXPECT_TRUE(ops[0].ceBuff == dsrc && ops[1].ceBuff == ddst);  // the copy-engine mode's extra
  EXPECT_EQ(ops[0].nsteps, 0);                                  // left to the transport
  struct mcclProxyArgs args[2];
  EXPECT_OK(mcclProxyOpsWait(ops, 2, args));
  uint64_t steps = n == 0 ? 1 : (n + l->s.conn.stepSize - 1) / l->s.conn.stepSize;
  EXPECT_EQ(args[0].subs[0].nsteps, steps);
  EXPECT_EQ(args[1].subs[0].done, steps);
  EXPECT_EQ(args[0].state, mcclProxyOpNone);
  uint64_t end = args[0].subs[0].base + steps;
  EXPECT_TRUE(__atomic_load_n(l->s.conn.tail, __ATOMIC_ACQUIRE) == end);  // published everything
  EXPECT_TRUE(__atomic_load_n(l->r.conn.head, __ATOMIC_ACQUIRE) == end);  // and got all credit back
  memset(hbuf, 0, n);
  if (n) EXPECT_CUDA_OK(cudaMemcpy(hbuf, ddst, n, cudaMemcpyDeviceToHost));
  size_t bad = checkPattern(hbuf, n, seed);
  if (bad != (size_t)-1) mcclTestFailAt(__FILE__, __LINE__, "message of %zu bytes differs at offset %zu", n, bad);
}

// Each side's setup on its own: a buffer for its own page through the connector's proxy (the sender's head;
// the receiver's tail and connFifo, then its FIFOs, LL then SIMPLE), described for the peer in the connect
// info, /dev/shm for a peer in this process. Connect then joins the two views of each buffer, and free
// leaves no /dev/shm entry and no fd. For both connIndex rows of the context's sizes.
static void setupAsksForItsSide(void) {
  int files = mcclTestCountShm(), fds = mcclTestCountFds();
  mcclPeerInfo me;
  struct mcclTransportCtx ctx;
  EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 1, 0));
  EXPECT_OK(mcclFillPeerInfo(0, 0, &me));
  for (int connIndex = 0; connIndex < MCCL_MAX_CONNS; connIndex++) {
    int sizes[MCCL_NUM_PROTOCOLS];
    EXPECT_OK(mcclTransportBuffSizes(&ctx, connIndex, sizes));
    struct mcclConnector s, r;
    struct mcclConnect sc, rc;
    EXPECT_OK(mcclConnectorInit(&s, TRANSPORT_SHM, &mcclShmTransport, 1, 0));
    EXPECT_OK(mcclConnectorInit(&r, TRANSPORT_SHM, &mcclShmTransport, 0, 0));
    EXPECT_OK(s.transportComm->setup(&ctx, NULL, &me, &me, &sc, &s, 0, connIndex));
    EXPECT_OK(r.transportComm->setup(&ctx, NULL, &me, &me, &rc, &r, 0, connIndex));
    CHECK_STOPPED();
    struct mcclShmConnectInfo si, ri;
    memcpy(&si, sc.data, sizeof(si));
    memcpy(&ri, rc.data, sizeof(ri));
    EXPECT_EQ(si.rank, me.rank);
    EXPECT_EQ(ri.rank, me.rank);
    EXPECT_EQ(si.desc.kind, MCCL_SHM_IPC_LEGACY);
    EXPECT_EQ(ri.desc.kind, MCCL_SHM_IPC_LEGACY);
    EXPECT_GE(si.desc.legacy.shmSize, sizeof(struct mcclSendMem));
    EXPECT_GE(ri.desc.legacy.shmSize,
              sizeof(struct mcclRecvMem) + (size_t)sizes[MCCL_PROTO_LL] + (size_t)sizes[MCCL_PROTO_SIMPLE]);
    EXPECT_TRUE(si.buf.hptr != NULL && ri.buf.hptr != NULL);
    EXPECT_TRUE(s.transportResources != NULL && r.transportResources != NULL);
    EXPECT_OK(s.transportComm->connect(&ctx, &rc, 1, 0, &s));
    EXPECT_OK(r.transportComm->connect(&ctx, &sc, 1, 0, &r));
    CHECK_STOPPED();
    EXPECT_EQ(s.conn.stepSize, sizes[MCCL_PROTO_SIMPLE] / MCCL_STEPS);
    EXPECT_EQ(r.conn.llStepSize, sizes[MCCL_PROTO_LL] / MCCL_STEPS);
    // The sender's view of each FIFO's last byte is the receiver's: the buffer holds both FIFOs, in order.
    // SHM has no LL128 FIFO (host memory promises no 128-byte line delivery).
    EXPECT_TRUE(s.conn.buffs[MCCL_PROTO_LL128] == NULL && r.conn.buffs[MCCL_PROTO_LL128] == NULL);
    EXPECT_EQ(s.conn.ll128StepSize, 0);
    for (int proto = 0; proto < MCCL_NUM_PROTOCOLS; proto++) {
      if (proto == MCCL_PROTO_LL128) continue;
      unsigned char b = (unsigned char)(0xA0 + proto + 2 * connIndex), back = 0;
      size_t last = (size_t)sizes[proto] - 1;
      EXPECT_CUDA_OK(mcclTestCopyToDevice(s.conn.buffs[proto] + last, &b, 1));
      EXPECT_CUDA_OK(cudaMemcpy(&back, r.conn.buffs[proto] + last, 1, cudaMemcpyDeviceToHost));
      EXPECT_EQ(back, b);
    }
    EXPECT_OK(mcclConnectorFree(&s));
    EXPECT_OK(mcclConnectorFree(&r));
  }
  EXPECT_EQ(mcclTestCountShm(), files);
  EXPECT_EQ(mcclTestCountFds(), fds);
}

// The sender's step loop against a receiver this test plays by hand, one poll of the sender at a time: each
// slot's bytes and connFifo size arrive under the tail in step order, and the sender never gets more than
// MCCL_STEPS slots ahead of the credit handed back in head, also where the counters wrap. The receiver
// takes two slots every third poll, so the sender meets a full FIFO again and again.
static void senderAgainstHandReceiver(void) {
  setParam("MCCL_BUFFSIZE", "65536");  // 8 KiB slots
  int files = mcclTestCountShm(), fds = mcclTestCountFds();
  struct loop l;
  const uint64_t start = UINT64_MAX - 5;  // the counters wrap during the message
  loopOpen(&l, start);
  setParam("MCCL_BUFFSIZE", NULL);
  CHECK_STOPPED();
  const size_t stepSize = (size_t)l.r.conn.stepSize;
  EXPECT_EQ(stepSize, 8192);
  const size_t n = 21 * stepSize + 123 + mcclTestRand() % 1000;  // 22 steps: nearly three laps of the slots
  const uint64_t steps = (n + stepSize - 1) / stepSize;
  void* dsrc = NULL;
  EXPECT_CUDA_OK(cudaMalloc(&dsrc, n));
  unsigned char* want = malloc(n);
  unsigned char* got = calloc(1, n);
  EXPECT_TRUE(want != NULL && got != NULL);
  fillPattern(want, n, mcclTestSeed());
  EXPECT_CUDA_OK(mcclTestCopyToDevice(dsrc, want, n));
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  struct mcclProxyOp op;
  struct mcclProxyArgs args;
  EXPECT_OK(mcclProxyOpInit(&op, &l.s, dsrc, n, NULL));
  EXPECT_OK(mcclProxyOpToArgs(&op, &args));
  uint64_t head = start;  // the receiver's next step, and the credit it has handed back
  double t0 = mcclClockSec();
  for (int polls = 1; !mcclTestStopped() && (args.state != mcclProxyOpNone || head != start + steps); polls++) {
    if (mcclClockSec() - t0 > 30) {
      mcclTestFailAt(__FILE__, __LINE__, "sender stuck: step %llu of %llu received after 30 s",
                     (unsigned long long)(head - start), (unsigned long long)steps);
      break;
    }
    if (args.state != mcclProxyOpNone) EXPECT_OK(args.progress(NULL, &args));
    uint64_t tail = __atomic_load_n(l.r.conn.tail, __ATOMIC_ACQUIRE);
    EXPECT_LE(tail - head, (uint64_t)MCCL_STEPS);  // unsigned: holds across the wrap
    if (polls % 3 != 0) continue;
    for (int k = 0; k < 2 && tail != head && !mcclTestStopped(); k++, head++) {
      size_t off = (size_t)(head - start) * stepSize;
      size_t size = n - off < stepSize ? n - off : stepSize;
      int slot = (int)(head % MCCL_STEPS);
      EXPECT_EQ(l.r.conn.connFifo[slot].size, (ssize_t)size);
      EXPECT_CUDA_OK(cudaMemcpy(got + off, l.r.conn.buffs[MCCL_PROTO_SIMPLE] + (size_t)slot * stepSize, size,
                                cudaMemcpyDeviceToHost));
      __atomic_store_n(l.r.conn.head, head + 1, __ATOMIC_RELEASE);
    }
  }
  EXPECT_EQ(args.state, mcclProxyOpNone);
  EXPECT_EQ(args.subs[0].nsteps, steps);
  EXPECT_TRUE(head == start + steps);
  EXPECT_TRUE(__atomic_load_n(l.r.conn.tail, __ATOMIC_ACQUIRE) == start + steps);
  size_t bad = checkPattern(got, n, mcclTestSeed());
  if (bad != (size_t)-1) mcclTestFailAt(__FILE__, __LINE__, "message of %zu bytes differs at offset %zu", n, bad);
  free(want);
  free(got);
  EXPECT_CUDA_OK(cudaFree(dsrc));
  loopClose(&l);
  EXPECT_EQ(mcclTestCountShm(), files);
  EXPECT_EQ(mcclTestCountFds(), fds);
}

static void loopbackSizesAndWrap(void) {
  setParam("MCCL_BUFFSIZE", "65536");  // 8 KiB slots: many laps of the FIFO per message
  int files = mcclTestCountShm(), fds = mcclTestCountFds();
  struct loop l;
  const uint64_t start = UINT64_MAX - 13;  // the counters wrap during the second message
  loopOpen(&l, start);
  setParam("MCCL_BUFFSIZE", NULL);
  CHECK_STOPPED();
  EXPECT_EQ(l.s.conn.stepSize, 8192);
  const size_t maxN = 4 << 20;
  void *dsrc, *ddst;
  EXPECT_CUDA_OK(cudaMalloc(&dsrc, maxN));
  EXPECT_CUDA_OK(cudaMalloc(&ddst, maxN));
  unsigned char* hbuf = (unsigned char*)malloc(maxN);
  size_t sizes[] = {0,   1, 8191, 8192, 8193, 65536, 65537, 100000 + mcclTestRand() % 100000, 1 + mcclTestRand() % maxN,
                    maxN};
  uint64_t total = 0;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    loopMessage(&l, dsrc, ddst, hbuf, sizes[i], mcclTestSeed() + i);
    CHECK_STOPPED();
    total += sizes[i] == 0 ? 1 : (sizes[i] + 8191) / 8192;
  }
  EXPECT_TRUE(*l.s.conn.tail == start + total);  // wrapped past zero
  EXPECT_TRUE(*l.s.conn.tail < start);
  free(hbuf);
  EXPECT_CUDA_OK(cudaFree(dsrc));
  EXPECT_CUDA_OK(cudaFree(ddst));
  loopClose(&l);
  EXPECT_EQ(mcclTestCountShm(), files);
  EXPECT_EQ(mcclTestCountFds(), fds);
}

static void loopbackTimeoutAndAbort(void) {
  setParam("MCCL_BUFFSIZE", "65536");
  setParam("MCCL_SHM_TIMEOUT", "300");
  struct loop l;
  loopOpen(&l, 0);
  setParam("MCCL_BUFFSIZE", NULL);
  CHECK_STOPPED();
  void* dbuf;
  EXPECT_CUDA_OK(cudaMalloc(&dbuf, 16 * 8192));
  // A sender alone fills the 8 slots, then waits for credit that never comes.
  struct mcclProxyOp op;
  struct mcclProxyArgs args;
  EXPECT_OK(mcclProxyOpInit(&op, &l.s, dbuf, 16 * 8192, NULL));
  double t0 = mcclClockSec();
  EXPECT_RES(mcclProxyOpsWait(&op, 1, &args), mcclTimeout);
  double dt = mcclClockSec() - t0;
  EXPECT_EQ(args.subs[0].transmitted, MCCL_STEPS);  // exactly the credit it had
  EXPECT_GE(dt * 1000, 290);
  EXPECT_LT(dt, 10);
  loopClose(&l);
  // A receiver alone waits for a tail that never moves.
  loopOpen(&l, 0);
  CHECK_STOPPED();
  EXPECT_OK(mcclProxyOpInit(&op, &l.r, dbuf, 100, NULL));
  EXPECT_RES(mcclProxyOpsWait(&op, 1, &args), mcclTimeout);
  EXPECT_EQ(args.subs[0].transmitted, 0);
  loopClose(&l);
  // Abort wins even with no timeout at all.
  setParam("MCCL_SHM_TIMEOUT", "0");
  loopOpen(&l, 0);
  CHECK_STOPPED();
  volatile uint32_t abortFlag = 1;
  EXPECT_OK(mcclProxyOpInit(&op, &l.r, dbuf, 100, &abortFlag));
  EXPECT_RES(mcclProxyOpsWait(&op, 1, NULL), mcclInternalError);
  loopClose(&l);
  setParam("MCCL_SHM_TIMEOUT", NULL);
  EXPECT_CUDA_OK(cudaFree(dbuf));
}

static void connectorMisuse(void) {
  int files = mcclTestCountShm(), fds = mcclTestCountFds();
  struct mcclConnector c;
  struct mcclConnect ci;
  struct mcclProxyOp op;
  mcclPeerInfo me;
  struct mcclTransportCtx ctx, bad;
  memset(&ci, 0, sizeof(ci));
  EXPECT_OK(mcclTransportCtxInit(&ctx, 0, 1, 0));
  EXPECT_OK(mcclFillPeerInfo(0, 0, &me));
  EXPECT_OK(mcclConnectorInit(&c, TRANSPORT_SHM, &mcclShmTransport, 0, 0));
  EXPECT_RES(mcclProxyOpInit(&op, &c, NULL, 0, NULL), mcclInvalidUsage);                              // not connected
  EXPECT_RES(c.transportComm->connect(&ctx, &ci, 1, 0, &c), mcclInvalidUsage);                        // not set up
  EXPECT_RES(mcclShmTransport.send.setup(&ctx, NULL, &me, &me, &ci, &c, 0, 0), mcclInvalidArgument);  // recv connector
  EXPECT_RES(c.transportComm->setup(NULL, NULL, &me, &me, &ci, &c, 0, 0), mcclInvalidArgument);       // no context
  // The sizes come from the context (NCCL's comm->buffSizes), checked once where it is made ...
  setParam("MCCL_BUFFSIZE", "1000");
  EXPECT_RES(mcclTransportCtxInit(&bad, 0, 1, 0), mcclInvalidArgument);
  setParam("MCCL_BUFFSIZE", NULL);
  // ... and the hook reads them from there, not from the environment.
  bad = ctx;
  bad.buffSizes[0][MCCL_PROTO_SIMPLE] = 1000;
  EXPECT_RES(c.transportComm->setup(&bad, NULL, &me, &me, &ci, &c, 0, 0), mcclInvalidArgument);
  bad = ctx;  // the row of the connection's connIndex
  bad.buffSizes[1][MCCL_PROTO_SIMPLE] = 1000;
  EXPECT_RES(c.transportComm->setup(&bad, NULL, &me, &me, &ci, &c, 0, 1), mcclInvalidArgument);
  EXPECT_RES(c.transportComm->setup(&ctx, NULL, &me, &me, &ci, &c, 0, MCCL_MAX_CONNS), mcclInvalidArgument);
  // The one place every transport's setup takes its sizes from.
  int sizes[MCCL_NUM_PROTOCOLS] = {0, 0};
  EXPECT_OK(mcclTransportBuffSizes(&ctx, MCCL_P2P_CONN_INDEX, sizes));
  EXPECT_EQ(sizes[MCCL_PROTO_SIMPLE], ctx.buffSizes[MCCL_P2P_CONN_INDEX][MCCL_PROTO_SIMPLE]);
  EXPECT_EQ(sizes[MCCL_PROTO_LL], ctx.buffSizes[MCCL_P2P_CONN_INDEX][MCCL_PROTO_LL]);
  EXPECT_RES(mcclTransportBuffSizes(NULL, 0, sizes), mcclInvalidArgument);
  EXPECT_RES(mcclTransportBuffSizes(&ctx, 0, NULL), mcclInvalidArgument);
  EXPECT_RES(mcclTransportBuffSizes(&ctx, -1, sizes), mcclInvalidArgument);
  EXPECT_RES(mcclTransportBuffSizes(&bad, 1, sizes), mcclInvalidArgument);  // bad's row 1 holds 1000
  EXPECT_RES(mcclTransportCtxInit(&bad, 1, 1, 0), mcclInvalidArgument);     // rank out of range
  EXPECT_RES(mcclTransportCtxInit(NULL, 0, 1, 0), mcclInvalidArgument);
  EXPECT_OK(c.transportComm->setup(&ctx, NULL, &me, &me, &ci, &c, 0, 0));
  EXPECT_RES(c.transportComm->setup(&ctx, NULL, &me, &me, &ci, &c, 0, 0), mcclInvalidUsage);  // twice
  struct mcclConnect garbage;
  memset(&garbage, 0, sizeof(garbage));
  EXPECT_RES(c.transportComm->connect(&ctx, &garbage, 1, 0, &c), mcclInvalidArgument);  // kind 0
  EXPECT_EQ(c.connected, 0);
  EXPECT_OK(mcclConnectorFree(&c));
  EXPECT_OK(mcclConnectorFree(&c));  // twice is harmless
  // sizes that disagree: the receiver notices from connFifo
  struct loop l;
  loopOpen(&l, 0);
  CHECK_STOPPED();
  void* d;
  EXPECT_CUDA_OK(cudaMalloc(&d, 1 << 20));
  struct mcclProxyOp ops[2];
  EXPECT_OK(mcclProxyOpInit(&ops[0], &l.s, d, 1000, NULL));
  EXPECT_OK(mcclProxyOpInit(&ops[1], &l.r, d, 2000, NULL));
  EXPECT_RES(mcclProxyOpsWait(ops, 2, NULL), mcclRemoteError);
  // A posted op whose nsteps disagrees with its size, or a copy-engine op without a buffer, is refused
  // when it starts, before anything moves.
  struct mcclProxyOp wrong;
  EXPECT_OK(mcclProxyOpInit(&wrong, &l.s, d, 1000, NULL));
  wrong.nsteps = 2;
  EXPECT_RES(mcclProxyOpsWait(&wrong, 1, NULL), mcclInvalidUsage);
  wrong.nsteps = 0;
  wrong.ceBuff = NULL;
  EXPECT_RES(mcclProxyOpsWait(&wrong, 1, NULL), mcclInvalidUsage);
  EXPECT_RES(mcclProxyOpToArgs(NULL, NULL), mcclInvalidArgument);
  loopClose(&l);
  EXPECT_CUDA_OK(cudaFree(d));
  EXPECT_EQ(mcclTestCountShm(), files);
  EXPECT_EQ(mcclTestCountFds(), fds);
}

// SIGKILL in the middle of a single-process setup: a child allocates the buffers that the setup of 8
// connections (a send and a receive side each) allocates, the /dev/shm path forced as for peers in one
// process, reports their names and waits to be killed before any import. No name may exist, neither
// while it lives nor after the kill. (A buffer for another process keeps its name until its importer
// attaches: test_shm_pair's pairDevShm covers that path.)
enum { KILLED_SEGS = 16 };
static int setupThenWait(int out) {
  for (int i = 0; i < KILLED_SEGS; i++) {
    mcclShmIpcDesc_t d;
    void* h;
    if (mcclShmAllocateShareableBuffer((size_t)(64 + i) << 10, 1, &d, &h, NULL) != mcclSuccess) return 1;
    if (write(out, d.legacy.shmSuffix, sizeof(d.legacy.shmSuffix)) != (ssize_t)sizeof(d.legacy.shmSuffix)) return 2;
  }
  for (;;) pause();
}

static void setupKilledLeavesNothing(void) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  fflush(NULL);
  pid_t pid = mcclForkChild();
  if (pid == 0) {
    close(p[0]);
    _exit(setupThenWait(p[1]));
  }
  close(p[1]);
  char suffix[KILLED_SEGS][7];
  int got = 0;
  while (got < KILLED_SEGS && read(p[0], suffix[got], sizeof(suffix[got])) == (ssize_t)sizeof(suffix[got])) got++;
  EXPECT_EQ(got, KILLED_SEGS);
  int leftAlive = 0, leftDead = 0;
  char path[MCCL_SHM_PATH_MAX];
  for (int i = 0; i < got; i++) {
    snprintf(path, sizeof(path), "%s%.6s", MCCL_SHM_PREFIX, suffix[i]);
    leftAlive += pathExists(path);
  }
  EXPECT_EQ(kill(pid, SIGKILL), 0);
  int st = 0;
  EXPECT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  for (int i = 0; i < got; i++) {
    snprintf(path, sizeof(path), "%s%.6s", MCCL_SHM_PREFIX, suffix[i]);
    leftDead += pathExists(path);
  }
  close(p[0]);
  EXPECT_EQ(leftAlive, 0);
  EXPECT_EQ(leftDead, 0);
}

MCCL_TEST_MAIN(MCCL_TEST_CASE(layout), MCCL_TEST_CASE(shmOpenCreateAttach), MCCL_TEST_CASE(shmCloseUnlinksUnattached),
               MCCL_TEST_CASE(shmOpenRefusesExisting), MCCL_TEST_CASE(shmOpenBadArgs), MCCL_TEST_CASE(shmFullTmpfs),
               MCCL_TEST_CASE(shmFileSizeLimit), MCCL_TEST_CASE(shmDevicePointer), MCCL_TEST_CASE(ipcLegacyRoundTrip),
               MCCL_TEST_CASE(ipcCuMemRoundTrip), MCCL_TEST_CASE(ipcImportBadDesc), MCCL_TEST_CASE(canConnectRules),
               MCCL_TEST_CASE(opsTable), MCCL_TEST_CASE(setupAsksForItsSide), MCCL_TEST_CASE(senderAgainstHandReceiver),
               MCCL_TEST_CASE(loopbackSizesAndWrap), MCCL_TEST_CASE(loopbackTimeoutAndAbort),
               MCCL_TEST_CASE(connectorMisuse), MCCL_TEST_CASE(setupKilledLeavesNothing))
