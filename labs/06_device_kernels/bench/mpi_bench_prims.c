// Lab 06 benchmark (mpirun -np 2; rank r drives device r, as nccl-tests -g 1): send/recv moved by
// kernels (mcclDevLaunch of op send on one rank, op recv on the other) over P2P and over SHM, one
// way (rank 0 -> rank 1) and both ways (each rank sends and receives at once: a send kernel and a
// receive kernel on two streams), beside lab 05's proxy-driven copy-engine SHM mode and beside NCCL's
// ncclSend/ncclRecv (dlopen of MCCL_NCCL_LIB), same sizes, same run, with a ratio column.
//
// Timing. Small sizes (<= --ll-max) use LL on one channel and eager launches: every iteration
// launches the kernels again, and a sample is the time per iteration over --batch back-to-back
// iterations (how the summary's 8 B latency is timed). Larger sizes use SIMPLE on -c channels of -t
// threads, one launch per sample. Each sample is timed with CUDA events on each rank, from a
// barrier to the end of both streams; the max over ranks is the sample, the median of -n samples
// after -w warm-up ones is printed. NCCL is timed by the same code. Lab 05's copy-engine mode runs on
// the proxy's own streams, so that table is host-timed on both sides (lab 05's method).
//
// NCCL's SHM path needs NCCL_P2P_DISABLE=1, which NCCL 2.28 reads once per process (the static
// ncclTopoUserP2pLevel of src/graph/paths.cc): a second communicator in this process would still
// use P2P. So each rank forks, before any CUDA call, a helper process that loads NCCL with
// NCCL_P2P_DISABLE=1 and runs the same timing code on request (a socketpair carries the requests,
// the unique id and the samples back).
//
// Data are checked once per row, outside the timed loop: the receiver's buffer against the
// sender's pattern, plus 64 bytes past the end that must stay untouched (#wrong counts 4-byte words).
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include "mccl_args.h"
#include "mccl_checks.h"
#include "mccl_devconn.h"
#include "mccl_nccl.h"
#include "mccl_param.h"
#include "mccl_prims.h"
#include "mccl_proxy.h"
#include "mccl_shm.h"
#include "mccl_benchout.h"
#include "mccl_utils.h"

#define KiB (1024UL)
#define MiB (1024UL * 1024UL)
#define MAX_SAMPLES 256
#define SLACK_BYTES 64  // checked past the end of every received message
#define WAIT_TIMEOUT_MS 60000

// ---- settings ------------------------------------------------------------------------------------

static struct {
  size_t minBytes, maxBytes, shmMaxBytes, p2pBytes, shmBytes, latBytes, llMax, minChannelBytes;
  int factor, nch, nthreads, llThreads, chunkSteps, sliceSteps, warm, iters, batch, useNccl;
  int sweepCh[MCCL_DEV_MAX_CHANNELS], nSweepCh, sweepThr[32], nSweepThr;
} opt;

static const char* const kOptions[] = {"-b=",
                                       "-e=",
                                       "-f=",
                                       "-c=",
                                       "-t=",
                                       "-n=",
                                       "-w=",
                                       "--batch=",
                                       "--ll-max=",
                                       "--ll-threads=",
                                       "--chunk-steps=",
                                       "--slice-steps=",
                                       "--min-channel-bytes=",
                                       "--p2p-bytes=",
                                       "--shm-bytes=",
                                       "--sweep-channels=",
                                       "--sweep-threads=",
                                       "--no-nccl",
                                       NULL};

static const char* kHelp =
    "Lab 06's benchmark, under mpirun -np 2 (rank r on device r): send/recv moved by kernels over P2P and\n"
    "SHM, one way and both ways, beside lab 05's copy-engine SHM mode and NCCL's ncclSend/ncclRecv\n"
    "(MCCL_NCCL_LIB; its SHM path runs in a helper process with NCCL_P2P_DISABLE=1). Defaults in\n"
    "brackets are the GPU's / the sim's.\n"
    "  -b, -e BYTES       smallest, largest size of the sweep [8; 512M / 256K]\n"
    "  -f N               multiply the size by N between rows [2 / 32]\n"
    "  -c N               SIMPLE channels (blocks) per direction, 1..64 [64 / 2]\n"
    "  -t N               SIMPLE threads per block, 64..1024, a multiple of 32 [512 / 64]\n"
    "  --ll-max BYTES     sizes up to this use LL on one channel, eager launches [16K]\n"
    "  --ll-threads N     LL threads per block [256 / 64]\n"
    "  --chunk-steps N, --slice-steps N   SIMPLE FIFO slots per chunk / slice (powers of two <= 8)\n"
    "                     [1, 1: NCCL's send/recv ProtoSimple<1,1>]\n"
    "  --min-channel-bytes BYTES  a SIMPLE size uses at most one channel per this many bytes [64K]\n"
    "  -n N, -w N         timed samples (median printed) and warm-up samples per row [20, 5 / 3, 1]\n"
    "  --batch N          eager launches per LL sample [100 / 5]\n"
    "  --p2p-bytes BYTES, --shm-bytes BYTES   the P2P and SHM sizes of the channel sweep and the summary\n"
    "                     [512M, 256M / 256K, 256K]; the SHM and copy-engine tables stop at --shm-bytes\n"
    "  --sweep-channels LIST, --sweep-threads LIST   comma lists: time those sizes with every\n"
    "                     channel count x thread count [8,16,24,32,48,64 and -t / 1,2 and -t]\n"
    "  --no-nccl          do not load NCCL\n"
    "Environment: MCCL_BUFFSIZE (SIMPLE FIFO per connection; this benchmark sets NCCL's 4 MiB, 8 slots\n"
    "of 512 KiB, NCCL's NVLink P2P chunk, unless it is set), MCCL_LL_BUFFSIZE, MCCL_NCCL_LIB;\n"
    "docs/parameters.md lists them all.\n"
    "The last lines are a summary: P2P at --p2p-bytes and 8 B, SHM at --shm-bytes, timed again with the\n"
    "defaults; ours, NCCL's and the ratio of their times.";

static void parseList(int argc, char** argv, const char* name, int* out, int* n, int max, int lo, int hi) {
  const char* s = mcclArgsOpt(argc, argv, name);
  if (s == NULL) return;
  char buf[512], msg[640];
  snprintf(buf, sizeof(buf), "%s", s);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char* end = NULL;
    long v = strtol(tok, &end, 10);
    if (end == tok || *end != '\0' || v < lo || v > hi || *n >= max) {
      snprintf(msg, sizeof(msg), "%s: '%s' is not a list of at most %d numbers in %d..%d", name, s, max, lo, hi);
      mcclArgsFail(msg);
    }
    out[(*n)++] = (int)v;
  }
  if (*n == 0) {
    snprintf(msg, sizeof(msg), "%s: the list is empty", name);
    mcclArgsFail(msg);
  }
}

static void parseOptions(int argc, char** argv, int sim) {
  mcclArgsCheckOpts(argc, argv, kOptions,
                    "[-b BYTES] [-e BYTES] [-f N] [-c N] [-t N] [-n N] [-w N] [--batch N] [--ll-max BYTES] "
                    "[--ll-threads N] [--chunk-steps N] [--slice-steps N] [--min-channel-bytes BYTES] "
                    "[--p2p-bytes BYTES] [--shm-bytes BYTES] [--sweep-channels LIST] [--sweep-threads LIST] "
                    "[--no-nccl]",
                    kHelp);
  const long long G = 1LL << 30;
  opt.minBytes = (size_t)mcclArgsOptInt(argc, argv, "-b", 8, 4, 4 * G);
  opt.maxBytes = (size_t)mcclArgsOptInt(argc, argv, "-e", sim ? 256 * KiB : 512 * MiB, 4, 4 * G);
  opt.factor = (int)mcclArgsOptInt(argc, argv, "-f", sim ? 32 : 2, 2, 1024);
  opt.nch = (int)mcclArgsOptInt(argc, argv, "-c", sim ? 2 : 64, 1, MCCL_DEV_MAX_CHANNELS);
  opt.nthreads = (int)mcclArgsOptInt(argc, argv, "-t", sim ? 64 : 512, 64, MCCL_DEV_MAX_THREADS);
  opt.llThreads = (int)mcclArgsOptInt(argc, argv, "--ll-threads", sim ? 64 : 256, 32, MCCL_DEV_MAX_THREADS);
  opt.llMax = (size_t)mcclArgsOptInt(argc, argv, "--ll-max", 16 * KiB, 0, 1 * MiB);
  opt.chunkSteps = (int)mcclArgsOptInt(argc, argv, "--chunk-steps", 1, 1, MCCL_STEPS);
  opt.sliceSteps = (int)mcclArgsOptInt(argc, argv, "--slice-steps", 1, 1, MCCL_STEPS);
  opt.minChannelBytes = (size_t)mcclArgsOptInt(argc, argv, "--min-channel-bytes", 64 * KiB, 512, 1 * G);
  opt.iters = (int)mcclArgsOptInt(argc, argv, "-n", sim ? 3 : 20, 1, MAX_SAMPLES / 2);
  opt.warm = (int)mcclArgsOptInt(argc, argv, "-w", sim ? 1 : 5, 0, MAX_SAMPLES / 2);
  opt.batch = (int)mcclArgsOptInt(argc, argv, "--batch", sim ? 5 : 100, 1, 100000);
  opt.p2pBytes = (size_t)mcclArgsOptInt(argc, argv, "--p2p-bytes", sim ? 256 * KiB : 512 * MiB, 4, 4 * G);
  opt.shmBytes = (size_t)mcclArgsOptInt(argc, argv, "--shm-bytes", sim ? 256 * KiB : 256 * MiB, 4, 4 * G);
  opt.latBytes = 8;
  opt.useNccl = mcclArgsOpt(argc, argv, "--no-nccl") == NULL;
  char msg[256];
  if (opt.nthreads % 32 != 0 || opt.llThreads % 32 != 0) {
    snprintf(msg, sizeof(msg), "-t %d / --ll-threads %d: threads per block must be a multiple of 32", opt.nthreads,
             opt.llThreads);
    mcclArgsFail(msg);
  }
  int isPow2 = (opt.chunkSteps & (opt.chunkSteps - 1)) == 0 && (opt.sliceSteps & (opt.sliceSteps - 1)) == 0;
  if (!isPow2 || opt.sliceSteps > opt.chunkSteps) {
    snprintf(msg, sizeof(msg), "--chunk-steps %d / --slice-steps %d: powers of two with slice <= chunk <= %d",
             opt.chunkSteps, opt.sliceSteps, MCCL_STEPS);
    mcclArgsFail(msg);
  }
  if (opt.minBytes > opt.maxBytes) {
    snprintf(msg, sizeof(msg), "-b %zu is larger than -e %zu", opt.minBytes, opt.maxBytes);
    mcclArgsFail(msg);
  }
  opt.shmMaxBytes = opt.maxBytes < opt.shmBytes ? opt.maxBytes : opt.shmBytes;
  if (sim) {
    opt.sweepCh[0] = 1, opt.sweepCh[1] = 2, opt.nSweepCh = 2;
  } else {
    static const int def[] = {8, 16, 24, 32, 48, 64};
    for (int i = 0; i < 6; i++) opt.sweepCh[i] = def[i];
    opt.nSweepCh = 6;
  }
  opt.sweepThr[0] = opt.nthreads, opt.nSweepThr = 1;
  parseList(argc, argv, "--sweep-channels", opt.sweepCh, &opt.nSweepCh, MCCL_DEV_MAX_CHANNELS, 1,
            MCCL_DEV_MAX_CHANNELS);
  parseList(argc, argv, "--sweep-threads", opt.sweepThr, &opt.nSweepThr, 32, 64, MCCL_DEV_MAX_THREADS);
  for (int i = 0; i < opt.nSweepThr; i++) {
    if (opt.sweepThr[i] % 32 != 0) {
      snprintf(msg, sizeof(msg), "--sweep-threads: %d is not a multiple of 32", opt.sweepThr[i]);
      mcclArgsFail(msg);
    }
  }
}

// ---- what one row measures -----------------------------------------------------------------------

enum { kOneWay = 0, kBothWays = 1 };
enum { kMethodEvents = 0, kMethodEager = 1, kMethodHost = 2 };
enum { kOursKernel = 0, kOursCe = 1, kNccl = 2 };

struct spec {
  size_t count;  // float32 elements
  int mode;      // kOneWay / kBothWays
  int method;    // kMethod*
  int proto, nch, nthreads;
  int warm, iters, batch;
};

// The per-rank state a measurement needs (parent: every kind; helper: NCCL only).
typedef struct {
  int kind;
  cudaStream_t sendStream, recvStream;
  cudaEvent_t start, recvDone, end;
  void *src, *dst;
  // kOursKernel
  struct mcclConnInfo *sendConns, *recvConns;
  volatile uint32_t* abortHost;
  uint32_t* abortDev;
  volatile int* statusHost;
  int* statusDev;
  // kOursCe
  mcclProxyState* proxy;
  struct mcclConnector *ceSend, *ceRecv;
  // kNccl
  mcclNcclApi* nccl;
  mcclNcclComm comm;
  int* barrierBuf;  // helper: one int on the device for the NCCL barrier
} target;

static int rank = 0, nranks = 0, inHelper = 0;

static int sends(int mode) {
  return mode == kBothWays || rank == 0;
}
static int recvs(int mode) {
  return mode == kBothWays || rank == 1;
}

static mcclResult_t barrier(target* t) {
  if (!inHelper) {
    MPI_Barrier(MPI_COMM_WORLD);
    return mcclSuccess;
  }
  // The helper has no MPI: an allreduce of one int, waited for, is a barrier between the two helpers.
  if (t->nccl->allReduce(t->barrierBuf, t->barrierBuf, 1, mcclNcclInt32, mcclNcclSum, t->comm, t->sendStream) != 0)
    return mcclRemoteError;
  CUDACHECK(cudaStreamSynchronize(t->sendStream));
  return mcclSuccess;
}

static mcclResult_t launchOurs(target* t, int send, const struct spec* s) {
  struct mcclDevWork w;
  memset(&w, 0, sizeof(w));
  w.op = send ? mcclDevOpSend : mcclDevOpRecv;
  w.proto = s->proto;
  w.dtype = mcclFloat32;
  w.redop = mcclSum;
  w.nchannels = s->nch;
  w.count = s->count;
  if (send)
    w.src = t->src, w.sendConns = t->sendConns;
  else
    w.dst = t->dst, w.recvConns = t->recvConns;
  w.chunkSteps = opt.chunkSteps;
  w.sliceSteps = opt.sliceSteps;
  w.abortFlag = t->abortDev;
  w.status = t->statusDev;
  return mcclDevLaunch(&w, s->nthreads, send ? t->sendStream : t->recvStream);
}

// One transfer, enqueued: sends on sendStream, receives on recvStream (NCCL: both on sendStream).
static mcclResult_t enqueue(target* t, const struct spec* s) {
  if (t->kind == kOursKernel) {
    if (sends(s->mode)) MCCLCHECK(launchOurs(t, 1, s));
    if (recvs(s->mode)) MCCLCHECK(launchOurs(t, 0, s));
    return mcclSuccess;
  }
  int peer = 1 - rank, e = t->nccl->groupStart();
  if (sends(s->mode)) e = e ? e : t->nccl->send(t->src, s->count, mcclNcclFloat32, peer, t->comm, t->sendStream);
  if (recvs(s->mode)) e = e ? e : t->nccl->recv(t->dst, s->count, mcclNcclFloat32, peer, t->comm, t->sendStream);
  int g = t->nccl->groupEnd();
  if (e || g) {
    fprintf(stderr, "rank %d: NCCL send/recv failed: %s\n", rank, t->nccl->getErrorString(e ? e : g));
    return mcclRemoteError;
  }
  return mcclSuccess;
}

// Lab 05's path: post the ops to the proxy, wait for them (its bench's timeOurs).
static mcclResult_t transferCe(target* t, const struct spec* s) {
  mcclProxyRequest rs = -1, rr = -1;
  size_t n = s->count * 4;
  if (recvs(s->mode)) MCCLCHECK(mcclProxyPostOp(t->proxy, t->ceRecv, t->dst, n, &rr));
  if (sends(s->mode)) MCCLCHECK(mcclProxyPostOp(t->proxy, t->ceSend, t->src, n, &rs));
  if (rs >= 0) MCCLCHECK(mcclProxyWait(t->proxy, rs));
  if (rr >= 0) MCCLCHECK(mcclProxyWait(t->proxy, rr));
  return mcclSuccess;
}

static mcclResult_t waitStream(target* t, cudaStream_t s) {
  if (t->kind == kOursKernel) return mcclDevWait(s, t->abortHost, t->statusHost, WAIT_TIMEOUT_MS);
  CUDACHECK(cudaStreamSynchronize(s));
  return mcclSuccess;
}

// The samples of one row on this rank (seconds per transfer), warm-up ones dropped.
static mcclResult_t measure(target* t, const struct spec* s, double* samples) {
  if (t->statusHost) *t->statusHost = mcclDevStatusRunning;
  for (int i = 0; i < s->warm + s->iters; i++) {
    double sec = 0;
    MCCLCHECK(barrier(t));
    if (s->method == kMethodHost) {
      double t0 = mcclClockSec();
      if (t->kind == kOursCe) {
        MCCLCHECK(transferCe(t, s));
      } else {
        MCCLCHECK(enqueue(t, s));
        MCCLCHECK(waitStream(t, t->sendStream));
        MCCLCHECK(waitStream(t, t->recvStream));
      }
      sec = mcclClockSec() - t0;
    } else {
      int n = s->method == kMethodEager ? s->batch : 1;
      CUDACHECK(cudaEventRecord(t->start, t->sendStream));
      CUDACHECK(cudaStreamWaitEvent(t->recvStream, t->start, 0));
      for (int b = 0; b < n; b++) MCCLCHECK(enqueue(t, s));
      CUDACHECK(cudaEventRecord(t->recvDone, t->recvStream));
      CUDACHECK(cudaStreamWaitEvent(t->sendStream, t->recvDone, 0));
      CUDACHECK(cudaEventRecord(t->end, t->sendStream));
      MCCLCHECK(waitStream(t, t->sendStream));
      float ms = 0;
      CUDACHECK(cudaEventElapsedTime(&ms, t->start, t->end));
      sec = (double)ms * 1e-3 / n;
    }
    if (i >= s->warm) samples[i - s->warm] = sec;
  }
  return mcclSuccess;
}

// ---- the helper process that runs NCCL with NCCL_P2P_DISABLE=1 -----------------------------------

enum { kCmdInit = 1, kCmdMeasure = 2, kCmdExit = 3 };
struct helperReq {
  int cmd, rank, nranks, dev;
  size_t maxBytes;
  mcclNcclUniqueId id;
  struct spec spec;
};
struct helperRep {
  int ok, version;
  char why[96];
  double samples[MAX_SAMPLES];
};

static int fullIo(int fd, void* buf, size_t n, int writing) {
  char* p = (char*)buf;
  while (n > 0) {
    ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static void helperMain(int fd) {
  inHelper = 1;
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  mcclNcclApi api;
  target t;
  memset(&t, 0, sizeof(t));
  t.kind = kNccl;
  t.nccl = &api;
  memset(&api, 0, sizeof(api));
  struct helperReq q;
  static struct helperRep r;
  while (fullIo(fd, &q, sizeof(q), 0) == 0 && q.cmd != kCmdExit) {
    memset(&r, 0, sizeof(r));
    const char* why = "";
    if (q.cmd == kCmdInit) {
      rank = q.rank;
      r.ok = mcclNcclOpen(mcclParamNcclLib(), &api, &why) && cudaSetDevice(q.dev) == cudaSuccess &&
             cudaMalloc(&t.src, q.maxBytes) == cudaSuccess && cudaMalloc(&t.dst, q.maxBytes) == cudaSuccess &&
             cudaMalloc((void**)&t.barrierBuf, sizeof(int)) == cudaSuccess &&
             cudaMemset(t.src, 1, q.maxBytes) == cudaSuccess &&
             cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess &&
             cudaStreamCreateWithFlags(&t.sendStream, cudaStreamNonBlocking) == cudaSuccess &&
             cudaStreamCreateWithFlags(&t.recvStream, cudaStreamNonBlocking) == cudaSuccess &&
             cudaEventCreate(&t.start) == cudaSuccess && cudaEventCreate(&t.recvDone) == cudaSuccess &&
             cudaEventCreate(&t.end) == cudaSuccess;
      if (!r.ok && api.lib == NULL)
        snprintf(r.why, sizeof(r.why), "%s", why);
      else if (!r.ok)
        snprintf(r.why, sizeof(r.why), "CUDA set-up of the helper failed");
      if (r.ok && api.commInitRank(&t.comm, q.nranks, q.id, q.rank) != 0) {
        r.ok = 0;
        snprintf(r.why, sizeof(r.why), "ncclCommInitRank with NCCL_P2P_DISABLE=1 failed");
      }
      r.version = api.version;
    } else if (q.cmd == kCmdMeasure) {
      r.ok = measure(&t, &q.spec, r.samples) == mcclSuccess;
    }
    if (fullIo(fd, &r, sizeof(r), 1) != 0) break;
  }
  if (t.comm) api.commDestroy(t.comm);
  _exit(0);
}

static struct {
  pid_t pid;
  int fd, ok, version;
} helper = {-1, -1, 0, 0};

// Fork before any CUDA call: a child of a process that initialised CUDA cannot use it.
static void helperStart(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return;
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    helperMain(sv[1]);
  }
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return;
  }
  helper.pid = pid;
  helper.fd = sv[0];
  // A helper stuck in NCCL (its peer failed) must not hang us: a reply takes at most this long.
  struct timeval tv = {300, 0};
  setsockopt(helper.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int helperCall(const struct helperReq* q, struct helperRep* r) {
  if (helper.fd < 0) return 0;
  if (fullIo(helper.fd, (void*)q, sizeof(*q), 1) != 0 || fullIo(helper.fd, r, sizeof(*r), 0) != 0) return 0;
  return r->ok;
}

static void helperStop(int kill_) {
  if (helper.pid <= 0) return;
  if (kill_)
    kill(helper.pid, SIGKILL);
  else {
    struct helperReq q;
    memset(&q, 0, sizeof(q));
    q.cmd = kCmdExit;
    fullIo(helper.fd, &q, sizeof(q), 1);
  }
  close(helper.fd);
  waitpid(helper.pid, NULL, 0);
  helper.pid = -1;
  helper.fd = -1;
}

// ---- rows ----------------------------------------------------------------------------------------

// The median over samples of the max over ranks.
static double reduceMedian(double* samples, int n) {
  MPI_Allreduce(MPI_IN_PLACE, samples, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return mcclBenchMedian(samples, n);
}

static int allOk(int ok) {
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok;
}

static uint32_t patternWord(int senderRank, size_t i) {
  return (uint32_t)((i + 1) * 2654435761u) ^ (0x5bd1e995u * (uint32_t)(senderRank + 1));
}

static uint32_t* hostBuf;  // readback of the receive buffer
static size_t hostBufBytes;

static mcclResult_t fillPattern(void* src, size_t bytes) {
  const size_t chunk = 4 * MiB;
  for (size_t off = 0; off < bytes; off += chunk) {
    size_t n = bytes - off < chunk ? bytes - off : chunk;
    for (size_t i = 0; i < n / 4; i++) hostBuf[i] = patternWord(rank, off / 4 + i);
    CUDACHECK(cudaMemcpy((char*)src + off, hostBuf, n, cudaMemcpyHostToDevice));
  }
  // The copies may return before they land, and the transfers run on non-blocking streams: wait for them.
  CUDACHECK(cudaStreamSynchronize(cudaStreamLegacy));
  return mcclSuccess;
}

// One untimed transfer; returns the wrong words summed over the receiving ranks.
static mcclResult_t validate(target* t, const struct spec* s, long* wrong) {
  size_t bytes = s->count * 4;
  CUDACHECK(cudaMemsetAsync(t->dst, 0xff, bytes + SLACK_BYTES, t->recvStream));
  CUDACHECK(cudaStreamSynchronize(t->recvStream));
  MPI_Barrier(MPI_COMM_WORLD);
  if (t->statusHost) *t->statusHost = mcclDevStatusRunning;
  if (t->kind == kOursCe) {
    MCCLCHECK(transferCe(t, s));
  } else {
    MCCLCHECK(enqueue(t, s));
    MCCLCHECK(waitStream(t, t->sendStream));
    MCCLCHECK(waitStream(t, t->recvStream));
  }
  long bad = 0;
  if (recvs(s->mode)) {
    CUDACHECK(cudaMemcpyAsync(hostBuf, t->dst, bytes + SLACK_BYTES, cudaMemcpyDeviceToHost, t->recvStream));
    CUDACHECK(cudaStreamSynchronize(t->recvStream));
    for (size_t i = 0; i < s->count; i++) bad += hostBuf[i] != patternWord(1 - rank, i);
    for (size_t i = s->count; i < s->count + SLACK_BYTES / 4; i++) bad += hostBuf[i] != 0xffffffffu;
  }
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  *wrong = bad;
  return mcclSuccess;
}

struct result {
  double ours, nccl;  // seconds per transfer; nccl 0 when not measured
  long wrong;
};

// One row: ours (validated once, then timed), then NCCL's (in this process or in the helper).
static mcclResult_t runRow(target* ours, target* nccl, int ncclInHelper, const struct spec* s, struct result* out) {
  double samples[MAX_SAMPLES];
  MCCLCHECK(validate(ours, s, &out->wrong));
  MCCLCHECK(measure(ours, s, samples));
  out->ours = reduceMedian(samples, s->iters);
  out->nccl = 0;
  if (ncclInHelper && helper.ok) {
    struct helperReq q;
    static struct helperRep r;
    memset(&q, 0, sizeof(q));
    q.cmd = kCmdMeasure;
    q.spec = *s;
    int ok = allOk(helperCall(&q, &r));
    if (ok)
      out->nccl = reduceMedian(r.samples, s->iters);
    else
      helper.ok = 0;
  } else if (!ncclInHelper && nccl != NULL) {
    MCCLCHECK(measure(nccl, s, samples));
    out->nccl = reduceMedian(samples, s->iters);
  }
  return mcclSuccess;
}

// Protocol, channels and timing a size gets: LL on one channel with eager launches up to --ll-max,
// SIMPLE on up to -c channels (one per --min-channel-bytes) above.
static struct spec rowSpec(size_t bytes, int mode, int method, int nch, int nthreads) {
  struct spec s;
  memset(&s, 0, sizeof(s));
  s.count = bytes / 4;
  s.mode = mode;
  s.warm = opt.warm;
  s.iters = opt.iters;
  s.batch = opt.batch;
  if (bytes <= opt.llMax) {
    s.proto = MCCL_PROTO_LL, s.nch = 1, s.nthreads = opt.llThreads;
    s.method = method == kMethodHost ? kMethodHost : kMethodEager;
  } else {
    size_t cap = bytes / opt.minChannelBytes;
    s.proto = MCCL_PROTO_SIMPLE, s.nthreads = nthreads;
    s.nch = (size_t)nch < cap ? nch : cap < 1 ? 1 : (int)cap;
    s.method = method;
  }
  return s;
}

static void printHeader(void) {
  if (rank != 0) return;
  printf("#%11s %12s %6s %-8s %-6s %3s %10s %8s %8s %7s %10s %8s %7s\n", "size", "count", "type", "dir", "proto", "ch",
         "time(us)", "algbw", "busbw", "#wrong", "nccl(us)", "ncclbw", "ratio");
}

static void printRow(const struct spec* s, const struct result* r, int ce) {
  if (rank != 0) return;
  size_t bytes = s->count * 4;
  double bw = (double)bytes / r->ours / 1e9;  // per direction; busbw = algbw for point-to-point
  printf("%12zu %12zu %6s %-8s %-6s %3d %10.2f %8.2f %8.2f %7ld", bytes, s->count, "float",
         s->mode == kBothWays ? "both" : "0->1",
         ce                          ? "CE"
         : s->proto == MCCL_PROTO_LL ? "LL"
                                     : "SIMPLE",
         ce ? 1 : s->nch, r->ours * 1e6, bw, bw, r->wrong);
  if (r->nccl > 0)
    printf(" %10.2f %8.2f %7.2f\n", r->nccl * 1e6, (double)bytes / r->nccl / 1e9, r->nccl / r->ours);
  else
    printf(" %10s %8s %7s\n", "-", "-", "-");
  fflush(stdout);
}

static mcclResult_t sweepSizes(target* ours, target* nccl, int ncclInHelper, size_t maxBytes, int method) {
  printHeader();
  for (size_t b = opt.minBytes; b <= maxBytes; b *= (size_t)opt.factor) {
    size_t bytes = b / 4 * 4;
    for (int mode = kOneWay; mode <= kBothWays; mode++) {
      struct spec s = rowSpec(bytes, mode, method, opt.nch, opt.nthreads);
      struct result r;
      MCCLCHECK(runRow(ours, nccl, ncclInHelper, &s, &r));
      printRow(&s, &r, ours->kind == kOursCe);
    }
  }
  return mcclSuccess;
}

// ---- set-up --------------------------------------------------------------------------------------

struct link {
  const char* name;
  struct mcclDevPairEnd* end;
  target t;
};

static mcclResult_t linkUp(mcclBootstrap* bs, mcclProxyState* proxy, mcclDevTransport_t which, int nch,
                           const target* base, struct link* l, int* ok) {
  *ok = 0;
  mcclResult_t res =
      mcclDevPairPeerCreate(bs, proxy, 1 - rank, nch, MCCL_DEVPAIR_SEND | MCCL_DEVPAIR_RECV, which, 0, &l->end);
  // Both sides agree before allocating, so a refused transport is refused on both.
  if (res == mcclInvalidUsage) return mcclSuccess;
  MCCLCHECK(res);
  l->t = *base;
  l->t.kind = kOursKernel;
  MCCLCHECK(mcclDevConnCreate(l->end->send, nch, &l->t.sendConns));
  MCCLCHECK(mcclDevConnCreate(l->end->recv, nch, &l->t.recvConns));
  *ok = 1;
  return mcclSuccess;
}

static void linkDown(struct link* l) {
  if (l->t.sendConns) mcclDevConnFree(l->t.sendConns);
  if (l->t.recvConns) mcclDevConnFree(l->t.recvConns);
  if (l->end) mcclDevPairPeerFree(l->end);
  memset(l, 0, sizeof(*l));
}

static int maxInt(const int* v, int n, int init) {
  for (int i = 0; i < n; i++) init = v[i] > init ? v[i] : init;
  return init;
}

// "512 MiB", "256 KiB", "8 B": the summary's sizes as people say them.
static const char* fmtSize(size_t b, char* buf, size_t len) {
  if (b >= MiB && b % MiB == 0)
    snprintf(buf, len, "%zu MiB", b / MiB);
  else if (b >= KiB && b % KiB == 0)
    snprintf(buf, len, "%zu KiB", b / KiB);
  else
    snprintf(buf, len, "%zu B", b);
  return buf;
}

// One line of the summary: ours and NCCL's time per transfer and bandwidth (per direction), and the ratio of
// the times; dashes where a side was not measured.
static void summaryLine(const char* what, size_t bytes, const struct result* r) {
  char cell[4][24], ratio[24];
  const double sec[2] = {r->ours, r->nccl};
  for (int i = 0; i < 2; i++) {
    if (sec[i] > 0) {
      snprintf(cell[2 * i], sizeof(cell[0]), "%.2f", sec[i] * 1e6);
      snprintf(cell[2 * i + 1], sizeof(cell[0]), "%.2f", (double)bytes / sec[i] / 1e9);
    } else {
      snprintf(cell[2 * i], sizeof(cell[0]), "-");
      snprintf(cell[2 * i + 1], sizeof(cell[0]), "-");
    }
  }
  if (r->ours > 0 && r->nccl > 0)
    snprintf(ratio, sizeof(ratio), "%.2f", r->nccl / r->ours);
  else
    snprintf(ratio, sizeof(ratio), "-");
  printf("# %-50s %10s %10s %10s %10s %6s\n", what, cell[0], cell[1], cell[2], cell[3], ratio);
}

static mcclResult_t run(int sim) {
  int dev = rank;
  CUDACHECK(cudaSetDevice(dev));
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (rank == 0) MCCLCHECK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  mcclProxyState* proxy = NULL;
  mcclBootstrap* bs = NULL;
  MCCLCHECK(mcclProxyCreate(rank, dev, NULL, mcclLocalTransports, &proxy));
  MCCLCHECK(mcclBootstrapInit(&id, rank, 2, dev, mcclProxyGetAddress(proxy), NULL, &bs));
  MCCLCHECK(mcclProxyInit(proxy, bs));

  // Buffers, streams, events, abort flag and status word shared by every target of this rank.
  size_t maxBytes = opt.maxBytes;
  if (opt.p2pBytes > maxBytes) maxBytes = opt.p2pBytes;
  if (opt.shmBytes > maxBytes) maxBytes = opt.shmBytes;
  maxBytes = maxBytes / 4 * 4;
  target base;
  memset(&base, 0, sizeof(base));
  CUDACHECK(cudaMalloc(&base.src, maxBytes + SLACK_BYTES));
  CUDACHECK(cudaMalloc(&base.dst, maxBytes + SLACK_BYTES));
  hostBufBytes = maxBytes + SLACK_BYTES;
  hostBuf = (uint32_t*)malloc(hostBufBytes);
  if (hostBuf == NULL) {
    fprintf(stderr, "rank %d: out of host memory (%zu bytes)\n", rank, hostBufBytes);
    return mcclSystemError;
  }
  MCCLCHECK(fillPattern(base.src, maxBytes));
  CUDACHECK(cudaStreamCreateWithFlags(&base.sendStream, cudaStreamNonBlocking));
  CUDACHECK(cudaStreamCreateWithFlags(&base.recvStream, cudaStreamNonBlocking));
  CUDACHECK(cudaEventCreate(&base.start));
  CUDACHECK(cudaEventCreate(&base.recvDone));
  CUDACHECK(cudaEventCreate(&base.end));
  MCCLCHECK(mcclDevAbortFlagCreate(&base.abortHost, &base.abortDev));
  int* status = NULL;
  CUDACHECK(cudaHostAlloc((void**)&status, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  *status = mcclDevStatusRunning;
  base.statusHost = status;
  CUDACHECK(cudaHostGetDevicePointer((void**)&base.statusDev, status, 0));
  base.proxy = proxy;

  // Our connections: P2P and SHM with enough channels for the sweep, one SHM channel for lab 05.
  int maxCh = maxInt(opt.sweepCh, opt.nSweepCh, opt.nch);
  struct link p2p, shm, ce;
  memset(&p2p, 0, sizeof(p2p));
  memset(&shm, 0, sizeof(shm));
  memset(&ce, 0, sizeof(ce));
  int haveP2p = 0, haveShm = 0, haveCe = 0;
  MCCLCHECK(linkUp(bs, proxy, mcclDevTransportP2p, maxCh, &base, &p2p, &haveP2p));
  MCCLCHECK(linkUp(bs, proxy, mcclDevTransportShm, maxCh, &base, &shm, &haveShm));
  MCCLCHECK(linkUp(bs, proxy, mcclDevTransportShm, 1, &base, &ce, &haveCe));
  target ceT = base;
  ceT.kind = kOursCe;
  if (haveCe) ceT.ceSend = &ce.end->send[0], ceT.ceRecv = &ce.end->recv[0];

  // NCCL: P2P here, SHM in the helper.
  mcclNcclApi api;
  memset(&api, 0, sizeof(api));
  target ncclT = base;
  ncclT.kind = kNccl;
  ncclT.nccl = &api;
  const char* why = sim ? "sim backend: NCCL needs real GPUs" : !opt.useNccl ? "--no-nccl" : "";
  int haveNccl = 0;
  if (!sim && opt.useNccl) {
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    unsetenv("NCCL_P2P_DISABLE");  // the P2P comparison; the helper has its own environment
    haveNccl = allOk(mcclNcclOpen(mcclParamNcclLib(), &api, &why));
    if (haveNccl) {
      mcclNcclUniqueId nid;
      memset(&nid, 0, sizeof(nid));
      int e = rank == 0 ? api.getUniqueId(&nid) : 0;
      MPI_Bcast(&nid, sizeof(nid), MPI_BYTE, 0, MPI_COMM_WORLD);
      if (allOk(e == 0)) e = api.commInitRank(&ncclT.comm, 2, nid, rank);
      haveNccl = allOk(e == 0);
      if (!haveNccl) why = "ncclCommInitRank failed";
    }
    // The helper's communicator: its own unique id, distributed by us.
    struct helperReq q;
    static struct helperRep r;
    memset(&q, 0, sizeof(q));
    q.cmd = kCmdInit;
    q.rank = rank;
    q.nranks = 2;
    q.dev = dev;
    q.maxBytes = (opt.shmBytes > opt.latBytes ? opt.shmBytes : opt.latBytes) + SLACK_BYTES;
    if (haveNccl && rank == 0 && api.getUniqueId(&q.id) != 0) helperStop(1);
    MPI_Bcast(&q.id, sizeof(q.id), MPI_BYTE, 0, MPI_COMM_WORLD);
    helper.ok = allOk(haveNccl && helperCall(&q, &r));
    helper.version = r.version;
    if (!helper.ok && haveNccl && rank == 0)
      printf("# NCCL SHM helper: not available (%s)\n", r.why[0] ? r.why : "helper process failed");
    if (!helper.ok) helperStop(1);
  }
  target* ncclP2p = haveNccl ? &ncclT : NULL;
  int buffSize = 0;
  MCCLCHECK(mcclShmBuffSize(&buffSize));

  if (rank == 0) {
    printf("# lab 06: send/recv moved by kernels, %s backend, 2 ranks (rank r on device r)\n", MCCL_BACKEND_NAME);
    printf(
        "# settings: MCCL_BUFFSIZE=%d (MCCL_STEPS=%d slots of %d B), chunkSteps %d sliceSteps %d; SIMPLE: -c %d "
        "channels x -t %d threads, one channel per %zu B at most; LL (<= %zu B): 1 channel x %d threads\n",
        buffSize, MCCL_STEPS, buffSize / MCCL_STEPS, opt.chunkSteps, opt.sliceSteps, opt.nch, opt.nthreads,
        opt.minChannelBytes, opt.llMax, opt.llThreads);
    printf(
        "# timing: median of %d samples after %d warm-up, max over ranks; SIMPLE: one launch per sample (CUDA "
        "events); LL: eager launches, %d back-to-back per sample, time per launch\n",
        opt.iters, opt.warm, opt.batch);
    if (haveNccl)
      printf("# NCCL %d.%d.%d: %s, NCCL_NVLS_ENABLE=0; its SHM path in a helper process with NCCL_P2P_DISABLE=1%s\n",
             api.version / 10000, api.version / 100 % 100, api.version % 100, mcclParamNcclLib(),
             helper.ok ? "" : " (unavailable)");
    else
      printf("# NCCL: skipped (%s)\n", why);
    printf(
        "# ratio = NCCL's time / ours (> 1: ours is faster); #wrong: 4-byte words received wrong (or written past "
        "the end)\n");
    fflush(stdout);
  }

  // The tables.
  if (rank == 0) printf("\n# ==== P2P (mcclP2pTransport), kernel-driven; NCCL: default transports (P2P)\n");
  if (haveP2p)
    MCCLCHECK(sweepSizes(&p2p.t, ncclP2p, 0, opt.maxBytes, kMethodEvents));
  else if (rank == 0)
    printf("# skipped: P2P cannot connect these devices (or MCCL_P2P_DISABLE=1)\n");
  if (rank == 0)
    printf(
        "\n# ==== SHM (mcclShmTransport, NCCL's default mode: the SMs load and store host memory), "
        "kernel-driven; NCCL: NCCL_P2P_DISABLE=1\n");
  if (haveShm)
    MCCLCHECK(sweepSizes(&shm.t, NULL, 1, opt.shmMaxBytes, kMethodEvents));
  else if (rank == 0)
    printf("# skipped: SHM cannot connect these ranks\n");
  if (rank == 0)
    printf(
        "\n# ==== SHM, lab 05's copy-engine mode (proxy-driven, NCCL 2.28's optional mode): host-timed, "
        "NCCL (NCCL_P2P_DISABLE=1) host-timed too\n");
  if (haveCe) MCCLCHECK(sweepSizes(&ceT, NULL, 1, opt.shmMaxBytes, kMethodHost));

  // Channel x thread sweep at the summary's sizes.
  struct best {
    double sec;
    int nch, nthreads;
  } best[2][2];  // [P2P, SHM][mode]
  memset(best, 0, sizeof(best));
  if (rank == 0) {
    printf("\n# ==== channel sweep at --p2p-bytes and --shm-bytes (SIMPLE; --sweep-channels, --sweep-threads)\n");
    printf("#%-9s %12s %-8s %3s %5s %10s %8s %7s\n", "transport", "size", "dir", "ch", "thr", "time(us)", "algbw",
           "#wrong");
  }
  for (int tr = 0; tr < 2; tr++) {
    struct link* l = tr == 0 ? &p2p : &shm;
    if (!(tr == 0 ? haveP2p : haveShm)) continue;
    size_t bytes = (tr == 0 ? opt.p2pBytes : opt.shmBytes) / 4 * 4;
    for (int i = 0; i < opt.nSweepCh; i++) {
      for (int j = 0; j < opt.nSweepThr; j++) {
        for (int mode = kOneWay; mode <= kBothWays; mode++) {
          struct spec s = rowSpec(bytes, mode, kMethodEvents, opt.sweepCh[i], opt.sweepThr[j]);
          struct result r;
          MCCLCHECK(runRow(&l->t, NULL, 0, &s, &r));
          if (r.wrong == 0 && (best[tr][mode].sec == 0 || r.ours < best[tr][mode].sec))
            best[tr][mode] = (struct best){r.ours, s.nch, s.nthreads};
          if (rank == 0)
            printf("%-10s %12zu %-8s %3d %5d %10.2f %8.2f %7ld\n", tr == 0 ? "P2P" : "SHM", bytes,
                   mode ? "both" : "0->1", s.nch, s.nthreads, r.ours * 1e6, (double)bytes / r.ours / 1e9, r.wrong);
        }
      }
    }
  }

  // The summary's rows, timed again with the default configuration, NCCL beside.
  struct result sum[6];
  memset(sum, 0, sizeof(sum));
  struct spec ss[6];
  ss[0] = rowSpec(opt.p2pBytes / 4 * 4, kOneWay, kMethodEvents, opt.nch, opt.nthreads);
  ss[1] = rowSpec(opt.p2pBytes / 4 * 4, kBothWays, kMethodEvents, opt.nch, opt.nthreads);
  ss[2] = rowSpec(opt.latBytes, kOneWay, kMethodEvents, opt.nch, opt.nthreads);
  ss[3] = rowSpec(opt.latBytes, kBothWays, kMethodEvents, opt.nch, opt.nthreads);
  ss[4] = rowSpec(opt.shmBytes / 4 * 4, kOneWay, kMethodEvents, opt.nch, opt.nthreads);
  ss[5] = rowSpec(opt.shmBytes / 4 * 4, kOneWay, kMethodHost, 1, opt.nthreads);
  if (haveP2p)
    for (int i = 0; i < 4; i++) MCCLCHECK(runRow(&p2p.t, ncclP2p, 0, &ss[i], &sum[i]));
  if (haveShm) MCCLCHECK(runRow(&shm.t, NULL, 1, &ss[4], &sum[4]));
  if (haveCe) MCCLCHECK(runRow(&ceT, NULL, 1, &ss[5], &sum[5]));
  if (rank == 0) {
    char what[96], extra[96], sz[32];
    long wrong = 0;
    for (int i = 0; i < 6; i++) wrong += sum[i].wrong;
    printf(
        "\n# ==== summary: %s backend, 2 ranks, these rows timed again with the default settings; NCCL's from "
        "the same run\n",
        MCCL_BACKEND_NAME);
    printf("# %-50s %10s %10s %10s %10s %6s\n", "row", "ours", "ours", "NCCL", "NCCL", "ratio");
    printf("# %-50s %10s %10s %10s %10s\n", "", "(us)", "(GB/s)", "(us)", "(GB/s)");
    if (haveP2p) {
      snprintf(what, sizeof(what), "P2P %s one way (c=%d t=%d)", fmtSize(opt.p2pBytes, sz, sizeof(sz)), ss[0].nch,
               ss[0].nthreads);
      summaryLine(what, ss[0].count * 4, &sum[0]);
      snprintf(what, sizeof(what), "P2P %s both ways, per direction", fmtSize(opt.p2pBytes, sz, sizeof(sz)));
      summaryLine(what, ss[1].count * 4, &sum[1]);
      summaryLine("P2P 8 B one way, LL, 1 channel, eager", ss[2].count * 4, &sum[2]);
      summaryLine("P2P 8 B both ways (nccl-tests sendrecv)", ss[3].count * 4, &sum[3]);
    }
    if (haveShm) {
      snprintf(what, sizeof(what), "SHM %s one way (c=%d t=%d)", fmtSize(opt.shmBytes, sz, sizeof(sz)), ss[4].nch,
               ss[4].nthreads);
      summaryLine(what, ss[4].count * 4, &sum[4]);
    }
    if (haveCe) {
      snprintf(what, sizeof(what), "SHM %s one way, lab 05 copy engine, host-timed",
               fmtSize(opt.shmBytes, sz, sizeof(sz)));
      summaryLine(what, ss[5].count * 4, &sum[5]);
    }
    printf("# ratio = NCCL's time / ours (> 1: ours is faster); -: not measured in this run\n");
    const double gb = 1e9;
    for (int tr = 0; tr < 2; tr++) {
      if (best[tr][0].sec <= 0) continue;
      size_t bytes = tr == 0 ? opt.p2pBytes : opt.shmBytes;
      snprintf(extra, sizeof(extra), "both ways: c=%d t=%d %.1f GB/s", best[tr][1].nch, best[tr][1].nthreads,
               best[tr][1].sec > 0 ? (double)bytes / best[tr][1].sec / gb : 0);
      printf("# best of the sweep, %s one way: c=%d t=%d %.1f GB/s; %s\n", tr == 0 ? "P2P" : "SHM", best[tr][0].nch,
             best[tr][0].nthreads, (double)bytes / best[tr][0].sec / gb, extra);
    }
    printf("# data check of the summary rows: %ld wrong words\n", wrong);
    fflush(stdout);
  }

  MPI_Barrier(MPI_COMM_WORLD);
  helperStop(!helper.ok);  // a helper that failed may be stuck in NCCL
  if (ncclT.comm) api.commDestroy(ncclT.comm);
  mcclNcclClose(&api);
  linkDown(&ce);
  linkDown(&shm);
  linkDown(&p2p);
  MCCLCHECK(mcclBootstrapClose(bs));
  MCCLCHECK(mcclProxyDestroy(proxy));
  cudaEventDestroy(base.start);
  cudaEventDestroy(base.recvDone);
  cudaEventDestroy(base.end);
  cudaStreamDestroy(base.sendStream);
  cudaStreamDestroy(base.recvStream);
  mcclDevAbortFlagFree(base.abortHost);
  cudaFreeHost(status);
  CUDACHECK(cudaFree(base.src));
  CUDACHECK(cudaFree(base.dst));
  free(hostBuf);
  return mcclSuccess;
}

int main(int argc, char** argv) {
  int sim = strcmp(MCCL_BACKEND_NAME, "sim") == 0;
  parseOptions(argc, argv, sim);
  setenv("MCCL_BUFFSIZE", "4194304", 0);  // NCCL's 4 MiB unless set: host-driven copies (docs/parameters.md)
  // The NCCL SHM helper is forked before MPI and CUDA start (see the top of this file).
  if (!sim && opt.useNccl) helperStart();
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int ndev = 0, rc = 0;
  if (nranks != 2) {
    if (rank == 0) printf("# lab 06 bench: run with exactly 2 ranks (mpirun -np 2)\n");
  } else if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    if (rank == 0) printf("# lab 06 bench: skipped, needs 2 CUDA devices\n");
  } else {
    mcclResult_t r = run(sim);
    if (r != mcclSuccess) {
      fprintf(stderr, "rank %d: bench failed: %s\n", rank, mcclGetErrorString(r));
      helperStop(1);
      rc = 1;
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  helperStop(1);
  MPI_Finalize();
  return rc;
}
