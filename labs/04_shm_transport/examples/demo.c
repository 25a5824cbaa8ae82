// Lab 04 demo: a message from one process's device to another's through the SHM FIFO.
//
// The parent forks a child before touching CUDA (a CUDA context does not survive fork). The
// parent is the receiver and narrates: it opens shareable buffers on both paths, shows the
// connection memory, connects to the child and prints head/tail/connFifo as the steps go by.
// The child is the sender. Under gdb the parent is the one followed (see lab.gdb).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mccl_args.h"
#include "mccl_alloc.h"
#include "mccl_fork.h"
#include "mccl_host_alloc.h"
#include "mccl_shm_pair.h"

#define MSG_BYTES (9 * 8192 + 3)  // ten 8 KiB steps (more than the 8 slots), the last one 3 bytes

static int die(const char* what, mcclResult_t r) {
  fprintf(stderr, "demo: %s failed: %s\n", what, mcclGetErrorString(r));
  return 1;
}
#define TRY(call)                                \
  do {                                           \
    mcclResult_t r_ = (call);                    \
    if (r_ != mcclSuccess) return die(#call, r_); \
  } while (0)

static int sender(uint64_t hash) {
  struct mcclShmPairEnd e;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return 1;
  cudaSetDevice(0);
  TRY(mcclShmPairConnect(&e, 0, hash, 0, 1, 0, 0, NULL));
  unsigned char host[MSG_BYTES];
  for (int i = 0; i < MSG_BYTES; i++) host[i] = (unsigned char)(i % 251);
  void* dev;
  if (cudaMalloc(&dev, MSG_BYTES) != cudaSuccess) return 1;
  cudaMemcpy(dev, host, MSG_BYTES, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();  // the copy may return before it lands; the proxy's copy engine reads it next
  struct mcclProxyOp op;
  struct mcclProxyArgs args;
  TRY(mcclProxyOpInit(&op, &e.conns[1], dev, MSG_BYTES, NULL));
  TRY(mcclProxyOpsWait(&op, 1, &args));
  printf("  [sender  pid %d] sent %d bytes from device 0 in %llu steps\n", (int)getpid(), MSG_BYTES,
         (unsigned long long)args.subs[0].nsteps);
  fflush(stdout);
  // Close only once the receiver says it has every byte, as NCCL tears down after a barrier. Under
  // gdb this also keeps the sender from exiting while the receiver is stopped at a breakpoint: gdb 13
  // then fails the next `continue` ("Couldn't get registers: No such process") and loses its place.
  char b;
  TRY(mcclIpcSocketRecvMsg(&e.sock, &b, 1, NULL));
  cudaFree(dev);
  TRY(mcclShmPairClose(&e));
  return 0;
}

static void showConn(const char* when, const struct mcclConnector* c, const struct mcclProxySubArgs* op) {
  uint64_t head = __atomic_load_n(c->conn.head, __ATOMIC_ACQUIRE);
  uint64_t tail = __atomic_load_n(c->conn.tail, __ATOMIC_ACQUIRE);
  printf("  %-34s tail %llu  head %llu  issued %llu  done %llu   connFifo sizes [", when, (unsigned long long)tail,
         (unsigned long long)head, (unsigned long long)op->transmitted, (unsigned long long)op->done);
  for (int s = 0; s < MCCL_STEPS; s++) printf("%s%zd", s ? " " : "", c->conn.connFifo[s].size);
  printf("]\n");
}

static int demoBuffers(void) {
  printf("\n[1] The /dev/shm path (NCCL's legacy path): a file made by mkstemp, fallocated, mapped, registered\n");
  mcclShmIpcDesc_t desc, imported;
  void *h, *d, *h2;
  TRY(mcclShmAllocateShareableBuffer(1 << 20, 1, &desc, &h, &d));
  printf("  created %s%s (%zu bytes, mode 0600): host %p, device %p\n", MCCL_SHM_PREFIX, desc.legacy.shmSuffix,
         desc.legacy.shmSize, h, d);
  strcpy((char*)h, "hello through /dev/shm");
  TRY(mcclShmImportShareableBuffer(&desc, -1, &h2, NULL, &imported));
  char path[MCCL_SHM_PATH_MAX];
  snprintf(path, sizeof(path), "%s%s", MCCL_SHM_PREFIX, desc.legacy.shmSuffix);
  printf("  attached at %p through the creator's fd, reads \"%s\"; %s is %s\n", h2, (char*)h2, path,
         access(path, F_OK) == 0 ? "still there" : "gone (unlinked when made: every importer is in this process)");
  TRY(mcclShmIpcClose(&imported));
  TRY(mcclShmIpcClose(&desc));

  printf("\n[2] The cuMem path: host-NUMA memory (lab 02) exported as a POSIX fd (lab 03)\n");
  if (!(mcclCuMemEnable() && mcclCuMemHostEnable())) {
    printf("  not available here (MCCL_CUMEM_HOST_ENABLE=0 or the driver refuses it): connections use /dev/shm\n");
    return 0;
  }
  TRY(mcclShmAllocateShareableBuffer(1 << 20, 0, &desc, &h, &d));
  printf("  allocated %zu bytes at %p (same address for host and device), handle type %d\n", desc.cumem.size, h,
         (int)desc.cumem.type);
  strcpy((char*)h, "hello through cuMem");
  int fd;
  TRY(mcclShmExportFd(&desc, &fd));
  TRY(mcclShmImportShareableBuffer(&desc, fd, &h2, NULL, &imported));
  close(fd);
  printf("  exported as fd %d, imported at %p, reads \"%s\"; nothing was created in /dev/shm\n", fd, h2, (char*)h2);
  TRY(mcclShmIpcClose(&imported));
  TRY(mcclShmIpcClose(&desc));
  return 0;
}

static int receiver(uint64_t hash, volatile uint32_t* abortFlag) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return die("cudaGetDeviceCount", mcclUnhandledCudaError);
  int dev = ndev > 1 ? 1 : 0;
  cudaSetDevice(dev);
  printf("minccl lab 04 (%s backend): receiver pid %d on device %d, sender pid forked on device 0\n",
         MCCL_BACKEND_NAME, (int)getpid(), dev);
  if (demoBuffers()) return 1;

  int buffSize;
  TRY(mcclShmBuffSize(&buffSize));
  printf("\n[3] Connection memory: MCCL_BUFFSIZE %d -> MCCL_STEPS %d slots of %d bytes\n", buffSize, MCCL_STEPS,
         buffSize / MCCL_STEPS);
  printf("  sender's page  (mcclSendMem, %zu B): head at +%zu (the credit the receiver returns)\n",
         sizeof(struct mcclSendMem), offsetof(struct mcclSendMem, head));
  printf("  receiver's page (mcclRecvMem, %zu B): tail at +%zu, connFifo[%d] at +%zu, then the FIFO at +%zu\n",
         sizeof(struct mcclRecvMem), offsetof(struct mcclRecvMem, tail), MCCL_STEPS,
         offsetof(struct mcclRecvMem, connFifo), sizeof(struct mcclRecvMem));

  printf("\n[4] Connect: each side's setup allocates its page, the peers swap descriptors, connect imports\n");
  struct mcclShmPairEnd e;
  TRY(mcclShmPairConnect(&e, 1, hash, dev, 0, 1, 0, abortFlag));
  struct mcclConnector* c = &e.conns[0];
  const char* kinds[] = {"empty", "/dev/shm", "cuMem"};
  printf("  my page + FIFO: %s buffer; the sender's page imported (kind %s); stepSize %d\n",
         kinds[e.myDesc[0].kind], kinds[e.myDesc[0].kind], c->conn.stepSize);

  printf("\n[5] %d bytes through the FIFO: the receiver waits for tail, copies the slot out, returns head\n",
         MSG_BYTES);
  void* dbuf;
  if (cudaMalloc(&dbuf, MSG_BYTES) != cudaSuccess) return die("cudaMalloc", mcclUnhandledCudaError);
  // The posted op (what to move: connection, size, and here the copy-engine mode's buffer) becomes
  // progress state (how far it got), which the hook advances until its state is None.
  struct mcclProxyOp op;
  struct mcclProxyArgs args;
  TRY(mcclProxyOpInit(&op, c, dbuf, MSG_BYTES, abortFlag));
  TRY(mcclProxyOpToArgs(&op, &args));
  const struct mcclProxySubArgs* sub = &args.subs[0];
  uint64_t lastT = (uint64_t)-1, lastD = (uint64_t)-1, lastTail = (uint64_t)-1;
  while (args.state != mcclProxyOpNone) {
    TRY(args.progress(NULL, &args));
    uint64_t tail = __atomic_load_n(c->conn.tail, __ATOMIC_ACQUIRE);
    if (sub->transmitted != lastT || sub->done != lastD || tail != lastTail) {
      char when[64];
      snprintf(when, sizeof(when), "step %llu/%llu:", (unsigned long long)sub->done, (unsigned long long)sub->nsteps);
      showConn(when, c, sub);
      lastT = sub->transmitted;
      lastD = sub->done;
      lastTail = tail;
    }
  }
  char b = 1;  // every step is in: the sender may close (and exit)
  TRY(mcclIpcSocketSendMsg(&e.sock, &b, 1, -1, e.peer, e.hash));
  unsigned char host[MSG_BYTES];
  cudaMemcpy(host, dbuf, MSG_BYTES, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < MSG_BYTES; i++) bad += host[i] != (unsigned char)(i % 251);
  printf("  received %d bytes on device %d: %s\n", MSG_BYTES, dev, bad ? "CORRUPTED" : "every byte matches");
  cudaFree(dbuf);
  TRY(mcclShmPairClose(&e));
  return bad != 0;
}

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "Lab 04's narrated example: a message from a forked sender's device to this process's device\n"
                "through the SHM FIFO.\n"
                "Settings come from MCCL_* environment variables (docs/parameters.md).");
  // Small slots so a short message takes several steps. (`make gdb` turns the timeouts off.)
  setvbuf(stdout, NULL, _IOLBF, 0);
  setenv("MCCL_BUFFSIZE", "65536", 0);
  uint64_t hash = ((uint64_t)getpid() << 20) ^ 0x5eed;
  // The sender dies with the receiver; a failed sender aborts the receiver's waits; a failed
  // receiver kills the sender (mccl_fork.h): an error on either side ends both.
  pid_t child = mcclForkChild();
  if (child < 0) return 1;
  if (child == 0) _exit(sender(hash));
  volatile uint32_t abortFlag = 0;
  mcclChildWatch* watch;
  if (mcclChildWatchStart(child, &abortFlag, &watch) != mcclSuccess) return 1;
  int rc = receiver(hash, &abortFlag);
  int st = 0;
  if (mcclChildWatchEnd(watch, rc != 0, &st) != mcclSuccess || !WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  printf("\n[6] Closed both ends; no mccl-* file of ours is left in /dev/shm. Demo %s.\n", rc ? "FAILED" : "done");
  return rc;
}
