// The allreduce benchmark driver of lab 07's mpi_bench_allreduce and final's allreduce_perf
// (mccl_allreduce_bench.h): nccl-tests' flags and table, NCCL beside ours, the check, the timing,
// the files and the summary. A program gives it its allreduce as callbacks.
//
// Timing. Per row and placement: -w warm-up calls, a barrier, then -n calls back to back between two
// CUDA events on each stream (eager launches), time per call, max over devices and ranks. With -G N
// the -n calls are captured once into a CUDA graph, replayed once to warm up, then N times between
// the events (time per call = elapsed / (N * n)); the cuda backend only (the sim has no graphs), one
// device per process. Data are checked by -c N calls per row and placement before the timing: every
// element against the reduction of a known per-rank pattern computed on the host, plus 64 bytes past
// the end that must stay untouched.
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include "mccl_allreduce_bench.h"
#include "mccl_args.h"
#include "mccl_benchout.h"
#include "mccl_checks.h"
#include "mccl_elt.h"
#include "mccl_nccl.h"
#include "mccl_param.h"
#include "mccl_prims.h"
#include "mccl_utils.h"

// CUDA graphs: the sim implements no graph calls, so they are weak references, NULL there.
#pragma weak cudaStreamBeginCapture
#pragma weak cudaStreamEndCapture
#pragma weak cudaGraphInstantiateWithFlags
#pragma weak cudaGraphLaunch
#pragma weak cudaGraphExecDestroy
#pragma weak cudaGraphDestroy

#define KiB (1024UL)
#define MiB (1024UL * 1024UL)
#define SLACK_BYTES 64          // checked past the end of every result
#define WAIT_TIMEOUT_SEC 120.0  // a stream that does not drain in this long is a hang
#define NCCL_WIN_COLL_SYMMETRIC 0x01

// ---- flags ----------------------------------------------------------------------------------------

static const char* const kCommon[] = {
    "-b=", "-e=", "-f=", "-n=", "-w=", "-c=", "-d=", "-o=", "-G=", "-R=", "--csv=", "--json=", "--progress", NULL};

static int parseType(const char* s) {
  for (int t = 0; t < mcclNumTypes; t++)
    if (strcasecmp(s, mcclTypeName(t)) == 0) return t;
  static const struct {
    const char* name;
    int dtype;
  } aliases[] = {
      {"char", mcclInt8}, {"int", mcclInt32}, {"half", mcclFloat16}, {"float", mcclFloat32}, {"double", mcclFloat64}};
  for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
    if (strcasecmp(s, aliases[i].name) == 0) return aliases[i].dtype;
  char msg[160];
  snprintf(msg, sizeof(msg), "-d: unknown type '%s' (a type of --help, or all)", s);
  mcclArgsFail(msg);
  return -1;
}

static int parseOp(const char* s) {
  for (int o = 0; o < mcclNumOps; o++)
    if (strcasecmp(s, mcclOpName(o)) == 0) return o;
  char msg[160];
  snprintf(msg, sizeof(msg), "-o: unknown operation '%s' (sum, prod, max, min, avg or all)", s);
  mcclArgsFail(msg);
  return -1;
}

void mcclArBenchParse(int argc, char** argv, const mcclArBenchSpec* spec, mcclArBenchOpts* o) {
  const char* options[64];
  int n = 0;
  for (int i = 0; kCommon[i]; i++) options[n++] = kCommon[i];
  if (spec->maxLocal > 1) options[n++] = "-g=";
  for (int i = 0; spec->extraOptions && spec->extraOptions[i] && n < 63; i++) options[n++] = spec->extraOptions[i];
  options[n] = NULL;
  char usage[640];
  snprintf(usage, sizeof(usage),
           "[-b BYTES] [-e BYTES] [-f N] [-n N] [-w N] [-c N] [-d TYPE] [-o OP] [-G N] [-R 0|2]%s [--csv FILE] "
           "[--json FILE] [--progress]%s%s",
           spec->maxLocal > 1 ? " [-g N]" : "", spec->usage && *spec->usage ? " " : "", spec->usage ? spec->usage : "");
  mcclArgsCheckOpts(argc, argv, options, usage, spec->help);
  int sim = strcmp(MCCL_BACKEND_NAME, "sim") == 0;
  const long long G = 1LL << 30;
  memset(o, 0, sizeof(*o));
  o->minBytes = (size_t)mcclArgsOptInt(argc, argv, "-b", 8, 1, 8 * G);
  o->maxBytes = (size_t)mcclArgsOptInt(argc, argv, "-e", sim ? 32 * KiB : 512 * MiB, 1, 8 * G);
  o->factor = (int)mcclArgsOptInt(argc, argv, "-f", sim ? 8 : 2, 2, 1024);
  o->iters = (int)mcclArgsOptInt(argc, argv, "-n", sim ? 2 : 50, 1, 1000000);
  o->warm = (int)mcclArgsOptInt(argc, argv, "-w", sim ? 1 : 5, 0, 1000000);
  o->check = (int)mcclArgsOptInt(argc, argv, "-c", 1, 0, 1000);
  o->graph = (int)mcclArgsOptInt(argc, argv, "-G", 0, 0, 100000);
  o->reg = (int)mcclArgsOptInt(argc, argv, "-R", 2, 0, 2);
  o->nLocal = spec->maxLocal > 1 ? (int)mcclArgsOptInt(argc, argv, "-g", 1, 1, spec->maxLocal) : 1;
  const char* s = mcclArgsOpt(argc, argv, "-d");
  if (s && strcasecmp(s, "all") == 0)
    for (int t = 0; t < mcclNumTypes; t++) o->types[o->nTypes++] = t;
  else
    o->types[o->nTypes++] = s ? parseType(s) : mcclFloat32;
  s = mcclArgsOpt(argc, argv, "-o");
  if (s && strcasecmp(s, "all") == 0)
    for (int op = 0; op < mcclNumOps; op++) o->ops[o->nOps++] = op;
  else
    o->ops[o->nOps++] = s ? parseOp(s) : mcclSum;
  o->csv = mcclArgsOpt(argc, argv, "--csv");
  o->json = mcclArgsOpt(argc, argv, "--json");
  if (o->csv && !*o->csv) mcclArgsFail("--csv: the file name is empty");
  if (o->json && !*o->json) mcclArgsFail("--json: the file name is empty");
  if (o->csv && o->json && strcmp(o->csv, o->json) == 0) mcclArgsFail("--csv and --json name the same file");
  o->progress = mcclArgsOpt(argc, argv, "--progress") != NULL;
  char msg[200];
  if (o->reg == 1) mcclArgsFail("-R 1: local registration is not offered; 0 or 2");
  if (o->minBytes > o->maxBytes) {
    snprintf(msg, sizeof(msg), "-b %zu is larger than -e %zu", o->minBytes, o->maxBytes);
    mcclArgsFail(msg);
  }
  if (o->graph && sim) {
    fprintf(stderr, "-G: the sim backend has no CUDA graphs; run -G on the cuda backend (BACKEND=cuda)\n");
    exit(2);
  }
  if (o->graph && o->nLocal > 1) mcclArgsFail("-G: graphs are captured with one device per process (-g 1, mpirun)");
  if (o->graph && (!cudaStreamBeginCapture || !cudaStreamEndCapture || !cudaGraphInstantiateWithFlags ||
                   !cudaGraphLaunch || !cudaGraphExecDestroy || !cudaGraphDestroy)) {
    fprintf(stderr, "-G: this CUDA runtime has no graph calls\n");
    exit(2);
  }
}

const char* mcclArBenchFmtSize(size_t b, char* buf, size_t len) {
  if (b >= MiB && b % MiB == 0)
    snprintf(buf, len, "%zu MiB", b / MiB);
  else if (b >= KiB && b % KiB == 0)
    snprintf(buf, len, "%zu KiB", b / KiB);
  else
    snprintf(buf, len, "%zu B", b);
  return buf;
}

// ---- the run's state ------------------------------------------------------------------------------

enum { kOurs, kNccl, kNcclSym };
typedef struct {
  int kind;
  const mcclArBenchTarget* t;  // ours; NCCL's: its own below
  mcclArBenchTarget own;
} target;

struct sizeStat {
  size_t bytes;
  double ours, nccl;  // best seconds per call over targets and placements (rows with #wrong 0); 0: none
  char oursAlgo[24], ncclAlgo[24];
};

static struct {
  const mcclArBenchSetup* s;
  const mcclArBenchOpts* o;
  int rank, nprocs, nranks, nLocal, dtype, op;  // rank, nprocs: MPI's; nranks: devices in all
  cudaEvent_t start[MCCL_ARB_MAX_LOCAL], stop[MCCL_ARB_MAX_LOCAL];
  mcclNcclApi api;
  mcclNcclComm ncclComm[MCCL_ARB_MAX_LOCAL];
  int (*ncclMemAlloc)(void**, size_t);
  int (*ncclMemFree)(void*);
  int (*ncclWinRegister)(mcclNcclComm, void*, size_t, void**, int);
  int (*ncclWinDeregister)(mcclNcclComm, void*);
  void *nbufs[4][MCCL_ARB_MAX_LOCAL], *nwins[2][MCCL_ARB_MAX_LOCAL];
  int haveNccl, haveSym, ownNcclBufs;
  void* hostBuf;  // pattern staging and result readback
  size_t hostBytes;
  struct sizeStat stats[MCCL_ARB_MAX_SIZES];
  int nStats;
  long totalWrong;
  mcclBenchOut* out;
  int progressOn, progressDone, progressTotal;
  double t0;
} B;

static int globalRank(int local) {
  return B.rank * B.nLocal + local;
}

static int allOk(int ok) {
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok;
}

// ---- the pattern and its reduction ---------------------------------------------------------------
//
// Element i of rank r depends on key(i) (a hash of i, 0..7) and r only, so the expected result of
// element i is one of 8 values, computed once per row. Values are small integers, exact in every
// type but fp8 (sums stay within bfloat16's 256 up to 64 ranks); integers wrap as the kernels' do.
// Floating types are reduced here as the kernels reduce them (mccl_elt.h: the inputs as the type holds
// them, every step rounded to it, fp8 through half), in rank order; where the rounding depends on the
// order the ranks are reduced in (fp8's sums, avg's products by 1/nranks), within a bound.

static uint32_t patKey(size_t i) {
  return (uint32_t)(((uint64_t)i * 0x9E3779B97F4A7C15ull) >> 61);
}

static int64_t patValue(uint32_t key, int r, int op, int n) {
  if (op == mcclMax || op == mcclMin) return (int64_t)((key * (uint32_t)(r + 1) + (uint32_t)r) % (uint32_t)(n + 4));
  int64_t v = (int64_t)((key * (uint32_t)(r + 1) + (uint32_t)r) % 5u);
  return op == mcclProd ? (v == 0 ? 2 : 1) : v;
}

static int isFloat(int t) {
  return mcclEltIsFloat((mcclDataType_t)t);
}

// Integers as the type holds them (wrapped), floats as doubles.
static int64_t loadInt(const void* p, size_t i, int t) {
  switch (t) {
    case mcclInt8:
      return ((const int8_t*)p)[i];
    case mcclUint8:
      return ((const uint8_t*)p)[i];
    case mcclInt32:
      return ((const int32_t*)p)[i];
    case mcclUint32:
      return ((const uint32_t*)p)[i];
    case mcclInt64:
      return ((const int64_t*)p)[i];
    default:
      return (int64_t)((const uint64_t*)p)[i];
  }
}
static double loadFloat(const void* p, size_t i, int t) {
  return mcclEltGet((mcclDataType_t)t, p, i);
}

static int64_t wrapInt(int64_t v, int t) {
  uint8_t tmp[8];
  mcclEltSetInt((mcclDataType_t)t, tmp, 0, v);
  return loadInt(tmp, 0, t);
}

struct expected {
  int64_t i[8];
  double f[8], tol[8];
};

// A floating type's reduction of element key k, as the kernels compute it in rank order (avg: NCCL's
// PreMulSum, each input times 1/n rounded to the type, then summed); *absMax gets the largest partial
// result's magnitude.
static double floatReduce(uint32_t k, int t, int op, int n, double* absMax) {
  const mcclDataType_t d = (mcclDataType_t)t;
  const double scale = mcclEltRound(d, 1.0 / n);
  double acc = 0;
  *absMax = 0;
  for (int r = 0; r < n; r++) {
    double v = mcclEltRound(d, (double)patValue(k, r, op, n));
    if (op == mcclAvg) v = mcclEltOpResult(d, v * scale);
    if (r == 0)
      acc = v;
    else if (op == mcclProd)
      acc = mcclEltOpResult(d, acc * v);
    else if (op == mcclMax)
      acc = fmax(acc, v);
    else if (op == mcclMin)
      acc = fmin(acc, v);
    else
      acc = mcclEltOpResult(d, acc + v);  // sum, avg
    if (fabs(acc) > *absMax) *absMax = fabs(acc);
  }
  return acc;
}

static void expectedValues(struct expected* x) {
  int t = B.dtype, op = B.op, n = B.nranks;
  const int fp8 = t == mcclFloat8e4m3 || t == mcclFloat8e5m2;
  for (uint32_t k = 0; k < 8; k++) {
    int64_t acc = patValue(k, 0, op, n);
    for (int r = 1; r < n && !isFloat(t); r++) {
      int64_t v = patValue(k, r, op, n);
      if (op == mcclProd)
        acc *= v;
      else if (op == mcclMax)
        acc = v > acc ? v : acc;
      else if (op == mcclMin)
        acc = v < acc ? v : acc;
      else
        acc += v;  // sum, avg
      acc = wrapInt(acc, t);
    }
    if (op == mcclAvg && !isFloat(t))
      acc = t == mcclUint64 ? (int64_t)((uint64_t)acc / (uint64_t)n) : wrapInt(acc / n, t);
    x->i[k] = acc;
    x->tol[k] = 0;
    if (!isFloat(t)) continue;
    double absMax;
    x->f[k] = floatReduce(k, t, op, n, &absMax);
    // Sums are exact but for fp8's, and avg's products too when 1/n is a power of two. Otherwise each of
    // the n - 1 additions (and n products) rounds by half a unit in the last place at most, at the
    // partial results' magnitude, in whatever order the kernels add: within n + 1 units of it both ways.
    const int pow2 = (n & (n - 1)) == 0;
    if ((op == mcclSum && fp8) || (op == mcclAvg && (fp8 || !pow2))) {
      int e;
      (void)frexp(absMax > 0 ? absMax : 1, &e);
      x->tol[k] = (n + 1) * ldexp(1.0, e - mcclEltMantBits((mcclDataType_t)t));
    }
  }
}

static long checkResult(const void* host, size_t count, const struct expected* x, const char* what, int rank) {
  long bad = 0;
  int t = B.dtype;
  for (size_t i = 0; i < count; i++) {
    uint32_t k = patKey(i);
    int wrong;
    if (isFloat(t)) {
      double g = loadFloat(host, i, t), d = fabs(g - x->f[k]);
      wrong = !(d <= x->tol[k]) && !(isinf(g) && isinf(x->f[k]) && (g > 0) == (x->f[k] > 0));
      if (wrong && bad < 4) fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i, g, x->f[k]);
    } else {
      wrong = loadInt(host, i, t) != x->i[k];
      if (wrong && bad < 4)
        fprintf(stderr, "rank %d: %s: element %zu is %lld, expected %lld\n", rank, what, i,
                (long long)loadInt(host, i, t), (long long)x->i[k]);
    }
    bad += wrong;
  }
  const unsigned char* tail = (const unsigned char*)host + count * mcclTypeSize(t);
  for (size_t b = 0; b < SLACK_BYTES; b++) {
    if (tail[b] != 0xff && bad < 4) fprintf(stderr, "rank %d: %s: byte %zu past the end was written\n", rank, what, b);
    bad += tail[b] != 0xff;
  }
  return bad;
}

// ---- calls ----------------------------------------------------------------------------------------

// Wait for every local stream, at most WAIT_TIMEOUT_SEC: a kernel waiting on a peer that never
// comes is reported (and the run ended) rather than waited on forever.
static mcclResult_t waitStreams(void) {
  double t0 = mcclClockSec();
  for (int l = 0; l < B.nLocal; l++) {
    for (;;) {
      cudaError_t e = cudaStreamQuery(B.s->streams[l]);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) CUDACHECK(e);
      if (mcclClockSec() - t0 > WAIT_TIMEOUT_SEC) {
        fprintf(stderr, "rank %d: an allreduce did not finish in %.0f s (a peer stuck or gone?)\n", globalRank(l),
                WAIT_TIMEOUT_SEC);
        if (B.s->ops.abort) B.s->ops.abort(B.s->ops.ctx);
        return mcclSystemError;
      }
      usleep(20);
    }
  }
  return mcclSuccess;
}

// One iteration: the call of every local device (in a group when there are several).
static mcclResult_t enqueue(const target* t, size_t count, int inPlace) {
  const mcclArBenchOps* ops = &B.s->ops;
  int group = B.nLocal > 1;
  mcclResult_t res = mcclSuccess;
  if (t->kind == kOurs) {
    if (group && ops->groupStart) MCCLCHECK(ops->groupStart(ops->ctx));
    for (int l = 0; l < B.nLocal && res == mcclSuccess; l++)
      res = ops->enqueue(ops->ctx, t->t, l, inPlace ? t->t->recv[l] : t->t->send[l], t->t->recv[l], count, B.dtype,
                         B.op, B.s->streams[l]);
    if (group && ops->groupEnd) {
      mcclResult_t r = ops->groupEnd(ops->ctx);
      if (res == mcclSuccess) res = r;
    }
    return res;
  }
  // NCCL's ncclDataType_t and ncclRedOp_t number the types and operations as lab 06 does.
  int e = 0;
  if (group) B.api.groupStart();
  for (int l = 0; l < B.nLocal && e == 0; l++)
    e = B.api.allReduce(inPlace ? t->t->recv[l] : t->t->send[l], t->t->recv[l], count, B.dtype, B.op, B.ncclComm[l],
                        B.s->streams[l]);
  if (group) {
    int e2 = B.api.groupEnd();
    if (e == 0) e = e2;
  }
  if (e != 0) {
    fprintf(stderr, "rank %d: ncclAllReduce failed: %s\n", B.rank, B.api.getErrorString(e));
    return mcclRemoteError;
  }
  return mcclSuccess;
}

static void rowLabel(const target* t, size_t bytes, char* buf, size_t len) {
  if (t->kind != kOurs)
    snprintf(buf, len, "%s", t->kind == kNccl ? "nccl" : "nccl-sym");
  else if (B.s->ops.label)
    B.s->ops.label(B.s->ops.ctx, t->t, bytes, buf, len);
  else
    snprintf(buf, len, "%s", t->t->variant);
}

static mcclResult_t fillPattern(void* dst, int rank, size_t count) {
  size_t esize = mcclTypeSize(B.dtype), chunk = (64 * MiB) / esize;
  for (size_t off = 0; off < count; off += chunk) {
    size_t n = count - off < chunk ? count - off : chunk;
    for (size_t i = 0; i < n; i++)
      mcclEltSetInt((mcclDataType_t)B.dtype, B.hostBuf, i, patValue(patKey(off + i), rank, B.op, B.nranks));
    CUDACHECK(cudaMemcpy((char*)dst + off * esize, B.hostBuf, n * esize, cudaMemcpyHostToDevice));
  }
  // The copies may return before they land, and the calls run on non-blocking streams: wait for them.
  CUDACHECK(cudaStreamSynchronize(cudaStreamLegacy));
  return mcclSuccess;
}

// -c: one untimed call on the pattern; the wrong elements (and bytes written past the end) of all ranks.
static mcclResult_t validate(const target* t, size_t count, int inPlace, long* wrong) {
  size_t bytes = count * mcclTypeSize(B.dtype);
  // Peers' calls of the previous row may still store into this rank's buffers until they end.
  MCCLCHECK(waitStreams());
  MPI_Barrier(MPI_COMM_WORLD);
  for (int l = 0; l < B.nLocal; l++) {
    CUDACHECK(cudaSetDevice(B.s->devs[l]));
    CUDACHECK(cudaMemsetAsync(t->t->recv[l], 0xff, bytes + SLACK_BYTES, B.s->streams[l]));
    if (inPlace)
      CUDACHECK(cudaMemcpyAsync(t->t->recv[l], t->t->send[l], bytes, cudaMemcpyDeviceToDevice, B.s->streams[l]));
  }
  MCCLCHECK(waitStreams());
  MPI_Barrier(MPI_COMM_WORLD);
  MCCLCHECK(enqueue(t, count, inPlace));
  MCCLCHECK(waitStreams());  // no barrier: when this rank's call has ended, its result must be whole
  struct expected x;
  expectedValues(&x);
  char what[64];
  rowLabel(t, bytes, what, sizeof(what));
  snprintf(what + strlen(what), sizeof(what) - strlen(what), " %zu B %s", bytes, inPlace ? "in-place" : "out-of-place");
  long bad = 0;
  for (int l = 0; l < B.nLocal; l++) {
    CUDACHECK(cudaSetDevice(B.s->devs[l]));
    CUDACHECK(cudaMemcpy(B.hostBuf, t->t->recv[l], bytes + SLACK_BYTES, cudaMemcpyDeviceToHost));
    bad += checkResult(B.hostBuf, count, &x, what, globalRank(l));
  }
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  *wrong = bad;
  return mcclSuccess;
}

static mcclResult_t recordEvents(cudaEvent_t* ev) {
  for (int l = 0; l < B.nLocal; l++) CUDACHECK(cudaEventRecord(ev[l], B.s->streams[l]));
  return mcclSuccess;
}

// -G: the -n calls captured once, replayed once to warm up, then -G times between the events.
static mcclResult_t measureGraph(const target* t, size_t count, int inPlace) {
  cudaStream_t stream = B.s->streams[0];
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  CUDACHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  mcclResult_t res = mcclSuccess;
  for (int i = 0; i < B.o->iters && res == mcclSuccess; i++) res = enqueue(t, count, inPlace);
  cudaError_t ce = cudaStreamEndCapture(stream, &graph);
  MCCLCHECK(res);
  CUDACHECK(ce);
  CUDACHECKGOTO(cudaGraphInstantiateWithFlags(&exec, graph, 0), res, graphDone);
  CUDACHECKGOTO(cudaGraphLaunch(exec, stream), res, graphDone);  // warm-up replay
  MCCLCHECKGOTO(waitStreams(), res, graphDone);
  MPI_Barrier(MPI_COMM_WORLD);
  CUDACHECKGOTO(cudaEventRecord(B.start[0], stream), res, graphDone);
  for (int i = 0; i < B.o->graph; i++) CUDACHECKGOTO(cudaGraphLaunch(exec, stream), res, graphDone);
  CUDACHECKGOTO(cudaEventRecord(B.stop[0], stream), res, graphDone);
graphDone:
  if (res != mcclSuccess) waitStreams();
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  return res;
}

// Seconds per call, the max over devices and ranks.
static mcclResult_t measure(const target* t, size_t count, int inPlace, double* sec) {
  for (int i = 0; i < B.o->warm; i++) MCCLCHECK(enqueue(t, count, inPlace));
  MCCLCHECK(waitStreams());
  double calls = B.o->iters;
  if (B.o->graph == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    MCCLCHECK(recordEvents(B.start));
    for (int i = 0; i < B.o->iters; i++) MCCLCHECK(enqueue(t, count, inPlace));
    MCCLCHECK(recordEvents(B.stop));
  } else {
    MCCLCHECK(measureGraph(t, count, inPlace));
    calls *= B.o->graph;
  }
  MCCLCHECK(waitStreams());
  *sec = 0;
  for (int l = 0; l < B.nLocal; l++) {
    float ms = 0;
    CUDACHECK(cudaEventElapsedTime(&ms, B.start[l], B.stop[l]));
    if ((double)ms * 1e-3 / calls > *sec) *sec = (double)ms * 1e-3 / calls;
  }
  MPI_Allreduce(MPI_IN_PLACE, sec, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return mcclSuccess;
}

static mcclResult_t runRow(const target* t, size_t count, int placements, mcclArBenchRow* r) {
  memset(r, 0, sizeof(*r));
  r->wrong[0] = r->wrong[1] = -1;
  if (t->kind == kOurs && B.s->ops.beginRow) {
    MCCLCHECK(waitStreams());
    MPI_Barrier(MPI_COMM_WORLD);
    B.s->ops.beginRow(B.s->ops.ctx, t->t);
  }
  for (int ip = 0; ip < placements; ip++) {
    for (int c = 0; c < B.o->check; c++) {  // -c N: N checked calls, their wrong elements summed
      long wrong = 0;
      MCCLCHECK(validate(t, count, ip, &wrong));
      r->wrong[ip] = (c == 0 ? 0 : r->wrong[ip]) + wrong;
    }
    MCCLCHECK(measure(t, count, ip, &r->sec[ip]));
  }
  return mcclSuccess;
}

// ---- the table and the files ----------------------------------------------------------------------

static double busFactor(void) {
  return B.nranks > 1 ? 2.0 * (B.nranks - 1) / B.nranks : 1.0;
}

static void printHeader(void) {
  if (B.rank != 0) return;
  printf("#%92s %39s\n", "out-of-place", "in-place");
  printf("#%11s %12s %8s %6s %4s %-16s %9s %7s %7s %6s %9s %7s %7s %6s %6s %6s\n", "size", "count", "type", "redop",
         "root", "algo", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "ratio", "ratio");
  printf("#%11s %12s %8s %6s %4s %-16s %9s %7s %7s %6s %9s %7s %7s %6s %6s %6s\n", "(B)", "(elements)", "", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "oop", "ip");
  fflush(stdout);
}

static void printRow(const char* label, size_t bytes, size_t count, const mcclArBenchRow* r, const double* ncclBest) {
  if (B.rank != 0) return;
  printf("%12zu %12zu %8s %6s %4d %-16s", bytes, count, mcclTypeName(B.dtype), mcclOpName(B.op), -1, label);
  for (int ip = 0; ip < 2; ip++) {
    if (r->sec[ip] <= 0) {
      printf(" %9s %7s %7s %6s", "-", "-", "-", "-");
      continue;
    }
    double algbw = (double)bytes / r->sec[ip] / 1e9;
    char w[16];
    if (r->wrong[ip] < 0)
      snprintf(w, sizeof(w), "N/A");
    else
      snprintf(w, sizeof(w), "%ld", r->wrong[ip]);
    printf(" %9.2f %7.2f %7.2f %6s", r->sec[ip] * 1e6, algbw, algbw * busFactor(), w);
  }
  for (int ip = 0; ip < 2; ip++) {
    if (ncclBest && ncclBest[ip] > 0 && r->sec[ip] > 0)
      printf(" %6.2f", ncclBest[ip] / r->sec[ip]);
    else
      printf(" %6s", "-");
  }
  printf("\n");
  fflush(stdout);
}

// The row's records in the --csv / --json files (rank 0; placements that ran).
static mcclResult_t recordRow(const char* lib, const char* variant, const char* label, size_t bytes, size_t count,
                              const mcclArBenchRow* r, const double* ncclBest) {
  if (B.rank != 0 || B.out == NULL) return mcclSuccess;
  for (int ip = 0; ip < 2; ip++) {
    if (r->sec[ip] <= 0) continue;
    mcclBenchRecord rec = {.bytes = bytes,
                           .count = count,
                           .type = mcclTypeName(B.dtype),
                           .redop = mcclOpName(B.op),
                           .lib = lib,
                           .variant = variant,
                           .algo = label,
                           .inPlace = ip,
                           .timeUs = r->sec[ip] * 1e6,
                           .wrong = r->wrong[ip],
                           .ncclTimeUs = ncclBest ? ncclBest[ip] * 1e6 : 0};
    mcclBenchRecordRates(&rec, B.nranks);
    MCCLCHECK(mcclBenchOutRecord(B.out, &rec));
  }
  return mcclSuccess;
}

static void keepBest(double* best, char* bestName, const mcclArBenchRow* r, const char* label) {
  for (int ip = 0; ip < 2; ip++)
    if (r->sec[ip] > 0 && r->wrong[ip] <= 0 && (*best == 0 || r->sec[ip] < *best)) {
      *best = r->sec[ip];
      snprintf(bestName, 24, "%s%s", label, ip ? " ip" : "");
    }
}

// Sizes of the sweep at the current type (a size with no whole element is left out).
static int sweepSizes(size_t* sizes) {
  size_t esize = mcclTypeSize(B.dtype);
  int n = 0;
  for (size_t b = B.o->minBytes; b <= B.o->maxBytes && n < MCCL_ARB_MAX_SIZES; b *= (size_t)B.o->factor)
    if (b / esize > 0) sizes[n++] = b / esize * esize;
  return n;
}

// One (type, operation): every size, NCCL's rows first. keepStats: this combination feeds the summary.
static mcclResult_t sweep(const target* ours, int nOurs, const target* nccl, int nNccl, int keepStats) {
  size_t esize = mcclTypeSize(B.dtype), sizes[MCCL_ARB_MAX_SIZES];
  int nSizes = sweepSizes(sizes);
  for (int si = 0; si < nSizes; si++) {
    size_t bytes = sizes[si], count = bytes / esize;
    struct sizeStat scratch, *st = keepStats ? &B.stats[B.nStats++] : &scratch;
    memset(st, 0, sizeof(*st));
    st->bytes = bytes;
    double ncclBest[2] = {0, 0};
    char label[32];
    for (int i = 0; i < nNccl; i++) {
      mcclArBenchRow r;
      MCCLCHECK(runRow(&nccl[i], count, 2, &r));
      rowLabel(&nccl[i], bytes, label, sizeof(label));
      printRow(label, bytes, count, &r, NULL);
      MCCLCHECK(recordRow("nccl", label, label, bytes, count, &r, NULL));
      for (int ip = 0; ip < 2; ip++)
        if (r.sec[ip] > 0 && (ncclBest[ip] == 0 || r.sec[ip] < ncclBest[ip])) ncclBest[ip] = r.sec[ip];
      keepBest(&st->nccl, st->ncclAlgo, &r, label);
      for (int ip = 0; ip < 2; ip++) B.totalWrong += r.wrong[ip] > 0 ? r.wrong[ip] : 0;
    }
    for (int i = 0; i < nOurs; i++) {
      if (B.s->ops.runs && !B.s->ops.runs(B.s->ops.ctx, ours[i].t, bytes)) continue;
      mcclArBenchRow r;
      MCCLCHECK(runRow(&ours[i], count, B.s->oopOnly ? 1 : 2, &r));
      rowLabel(&ours[i], bytes, label, sizeof(label));
      printRow(label, bytes, count, &r, ncclBest);
      MCCLCHECK(recordRow(ours[i].t->lib, ours[i].t->variant, label, bytes, count, &r, ncclBest));
      keepBest(&st->ours, st->oursAlgo, &r, label);
      if (B.s->ops.onRow) B.s->ops.onRow(B.s->ops.ctx, ours[i].t, bytes, &r);
      for (int ip = 0; ip < 2; ip++) B.totalWrong += r.wrong[ip] > 0 ? r.wrong[ip] : 0;
    }
    B.progressDone++;
    if (B.progressOn && B.rank == 0) {
      char what[96], sz[32];
      snprintf(what, sizeof(what), "%s %s %s done", mcclArBenchFmtSize(bytes, sz, sizeof(sz)), mcclTypeName(B.dtype),
               mcclOpName(B.op));
      mcclBenchProgress(B.progressDone, B.progressTotal, what, mcclClockSec() - B.t0);
    }
  }
  return mcclSuccess;
}

// ---- the summary ---------------------------------------------------------------------------------
//
// A few sizes that stand for the whole sweep, so that a long table ends in lines a reader can compare
// at a glance: the sweep's two ends and, where the sweep has them, 8 KiB (still latency-bound), 2 MiB
// (between latency and bandwidth), 32 MiB and 512 MiB (bandwidth-bound). For each, our best row and
// placement beside NCCL's best, and the ratio of their times; nothing is judged against a target.

static const size_t kSummarySizes[] = {8 * KiB, 2 * MiB, 32 * MiB, 512 * MiB};

static int isSummarySize(int i) {
  if (i == 0 || i == B.nStats - 1) return 1;
  for (size_t k = 0; k < sizeof(kSummarySizes) / sizeof(kSummarySizes[0]); k++)
    if (B.stats[i].bytes == kSummarySizes[k]) return 1;
  return 0;
}

// One side's time (us) and bus bandwidth (GB/s), or dashes where it has no correct row.
static void summaryCells(double sec, size_t bytes, char* time, char* busbw, size_t len) {
  if (sec <= 0) {
    snprintf(time, len, "-");
    snprintf(busbw, len, "-");
    return;
  }
  snprintf(time, len, "%.2f", sec * 1e6);
  snprintf(busbw, len, "%.2f", (double)bytes * busFactor() / sec / 1e9);
}

static void summary(int shmMode) {
  if (B.rank != 0) return;
  char how[64];
  if (B.o->graph)
    snprintf(how, sizeof(how), "CUDA graph");
  else
    snprintf(how, sizeof(how), "eager launches");
  if (shmMode) snprintf(how + strlen(how), sizeof(how) - strlen(how), ", P2P disabled (SHM)");
  if (B.s->netMode) snprintf(how + strlen(how), sizeof(how) - strlen(how), ", ranks posed as hosts (NET)");
  printf("\n# ==== summary: %s backend, %d ranks, %s %s, %s; per size: our best row and placement, NCCL's best\n",
         MCCL_BACKEND_NAME, B.nranks, mcclTypeName(B.o->types[0]), mcclOpName(B.o->ops[0]), how);
  printf("# %12s %10s %10s %-22s %10s %10s %-22s %6s\n", "size", "ours", "busbw", "our row", "NCCL", "busbw",
         "NCCL's row", "ratio");
  printf("# %12s %10s %10s %-22s %10s %10s\n", "(B)", "(us)", "(GB/s)", "", "(us)", "(GB/s)");
  for (int i = 0; i < B.nStats; i++) {
    const struct sizeStat* st = &B.stats[i];
    if (!isSummarySize(i)) continue;
    char ot[24], ob[24], nt[24], nb[24], ratio[24];
    summaryCells(st->ours, st->bytes, ot, ob, sizeof(ot));
    summaryCells(st->nccl, st->bytes, nt, nb, sizeof(nt));
    if (st->ours > 0 && st->nccl > 0)
      snprintf(ratio, sizeof(ratio), "%.2f", st->nccl / st->ours);
    else
      snprintf(ratio, sizeof(ratio), "-");
    printf("# %12zu %10s %10s %-22s %10s %10s %-22s %6s\n", st->bytes, ot, ob, st->ours > 0 ? st->oursAlgo : "-", nt,
           nb, st->nccl > 0 ? st->ncclAlgo : "-", ratio);
  }
  printf("# ratio = NCCL's time / ours (> 1: minccl is faster); -: no correct row, or NCCL not in this run\n");
  fflush(stdout);
}
// ---- NCCL -----------------------------------------------------------------------------------------

static void openNccl(size_t allocBytes, const char** why) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  if (!allOk(mcclNcclOpen(mcclParamNcclLib(), &B.api, why))) return;
  mcclNcclUniqueId nid;
  memset(&nid, 0, sizeof(nid));
  int e = B.rank == 0 ? B.api.getUniqueId(&nid) : 0;
  MPI_Bcast(&nid, sizeof(nid), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (allOk(e == 0)) {
    if (B.nLocal > 1) B.api.groupStart();
    for (int l = 0; l < B.nLocal && e == 0; l++) {
      cudaSetDevice(B.s->devs[l]);
      e = B.api.commInitRank(&B.ncclComm[l], B.nranks, nid, globalRank(l));
    }
    if (B.nLocal > 1 && e == 0) e = B.api.groupEnd();
  }
  if (!allOk(e == 0)) {
    *why = "ncclCommInitRank failed";
    return;
  }
  int ok = 1;
  B.ownNcclBufs = !B.s->ncclSameBuffers;
  for (int l = 0; l < B.nLocal; l++) {
    cudaSetDevice(B.s->devs[l]);
    if (B.ownNcclBufs)
      ok = ok && cudaMalloc(&B.nbufs[0][l], allocBytes) == cudaSuccess &&
           cudaMalloc(&B.nbufs[1][l], allocBytes) == cudaSuccess;
  }
  B.haveNccl = allOk(ok);
  if (!B.haveNccl) {
    *why = "cudaMalloc of NCCL's buffers failed";
    return;
  }
  if (B.o->reg != 2 || B.s->shmMode || B.s->netMode) return;
  *(void**)&B.ncclMemAlloc = dlsym(B.api.lib, "ncclMemAlloc");
  *(void**)&B.ncclMemFree = dlsym(B.api.lib, "ncclMemFree");
  *(void**)&B.ncclWinRegister = dlsym(B.api.lib, "ncclCommWindowRegister");
  *(void**)&B.ncclWinDeregister = dlsym(B.api.lib, "ncclCommWindowDeregister");
  if (!allOk(B.ncclMemAlloc && B.ncclMemFree && B.ncclWinRegister && B.ncclWinDeregister)) return;
  for (int l = 0; l < B.nLocal; l++) {
    cudaSetDevice(B.s->devs[l]);
    ok = ok && B.ncclMemAlloc(&B.nbufs[2][l], allocBytes) == 0 && B.ncclMemAlloc(&B.nbufs[3][l], allocBytes) == 0;
  }
  if (!allOk(ok)) return;
  if (B.nLocal > 1) B.api.groupStart();
  for (int l = 0; l < B.nLocal; l++) {
    ok =
        ok && B.ncclWinRegister(B.ncclComm[l], B.nbufs[2][l], allocBytes, &B.nwins[0][l], NCCL_WIN_COLL_SYMMETRIC) == 0;
    ok =
        ok && B.ncclWinRegister(B.ncclComm[l], B.nbufs[3][l], allocBytes, &B.nwins[1][l], NCCL_WIN_COLL_SYMMETRIC) == 0;
  }
  if (B.nLocal > 1) ok = B.api.groupEnd() == 0 && ok;
  B.haveSym = allOk(ok);
}

static void closeNccl(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  for (int l = 0; l < B.nLocal; l++) {
    cudaSetDevice(B.s->devs[l]);
    if (B.haveSym) {
      B.ncclWinDeregister(B.ncclComm[l], B.nwins[0][l]);
      B.ncclWinDeregister(B.ncclComm[l], B.nwins[1][l]);
    }
    for (int b = 2; b < 4; b++)
      if (B.nbufs[b][l]) B.ncclMemFree(B.nbufs[b][l]);
    for (int b = 0; b < 2; b++)
      if (B.ownNcclBufs && B.nbufs[b][l]) cudaFree(B.nbufs[b][l]);
    if (B.ncclComm[l]) B.api.commDestroy(B.ncclComm[l]);
  }
  mcclNcclClose(&B.api);
}

// ---- the run --------------------------------------------------------------------------------------

// The --csv / --json files (rank 0), after the metadata every chart title uses.
static mcclResult_t openOutput(int argc, char** argv) {
  if (B.rank != 0 || (B.o->csv == NULL && B.o->json == NULL)) return mcclSuccess;
  mcclBenchMeta meta;
  mcclBenchMetaFill(&meta, B.s->devs[0], argc, argv);
  char v[96];
  MCCLCHECK(mcclBenchMetaAdd(&meta, "program", B.s->program));
  snprintf(v, sizeof(v), "%d", B.nranks);
  MCCLCHECK(mcclBenchMetaAdd(&meta, "nranks", v));
  snprintf(v, sizeof(v), "%d process%s x %d device%s", B.nprocs, B.nprocs == 1 ? "" : "es", B.nLocal,
           B.nLocal == 1 ? "" : "s");
  MCCLCHECK(mcclBenchMetaAdd(&meta, "processes", v));
  for (int i = 0; i < B.s->nMeta; i++) MCCLCHECK(mcclBenchMetaAdd(&meta, B.s->metaKey[i], B.s->metaValue[i]));
  if (B.o->graph)
    snprintf(v, sizeof(v), "CUDA graph: -n %d calls replayed -G %d times, -w %d", B.o->iters, B.o->graph, B.o->warm);
  else
    snprintf(v, sizeof(v), "eager: -n %d calls, -w %d warm-up", B.o->iters, B.o->warm);
  MCCLCHECK(mcclBenchMetaAdd(&meta, "timing", v));
  if (B.haveNccl) {
    snprintf(v, sizeof(v), "%d.%d.%d", B.api.version / 10000, B.api.version / 100 % 100, B.api.version % 100);
    MCCLCHECK(mcclBenchMetaAdd(&meta, "nccl", v));
  }
  return mcclBenchOutOpen(B.o->csv, B.o->json, &meta, &B.out);
}

static void printPreamble(const char* why) {
  if (B.rank != 0) return;
  char checkHow[64] = "off";
  if (B.o->check)
    snprintf(checkHow, sizeof(checkHow), "%d call%s per row, outside the timing", B.o->check,
             B.o->check == 1 ? "" : "s");
  printf("# timing: %s, -n %d calls per row after -w %d warm-up, time per call, max over ranks; check: %s\n",
         B.o->graph ? "the -n calls captured in a CUDA graph, replayed -G times" : "eager launches back to back",
         B.o->iters, B.o->warm, checkHow);
  if (B.o->graph) printf("# graph replays per row: %d (after one warm-up replay)\n", B.o->graph);
  if (B.haveNccl)
    printf("# NCCL %d.%d.%d: %s, NCCL_NVLS_ENABLE=0%s; rows nccl (%s)%s\n", B.api.version / 10000,
           B.api.version / 100 % 100, B.api.version % 100, mcclParamNcclLib(),
           getenv("NCCL_P2P_DISABLE") ? ", NCCL_P2P_DISABLE=1" : "",
           B.ownNcclBufs ? "cudaMalloc" : "the same buffers as ours",
           B.haveSym ? " and nccl-sym (ncclMemAlloc + ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC)" : "");
  else
    printf("# NCCL: skipped (%s)\n", why);
  printf("# busbw = algbw * 2(n-1)/n; ratio = NCCL's best time / ours (> 1: ours is faster)\n");
  fflush(stdout);
}

static mcclResult_t runAll(const target* ours, int nOurs, const target* nccl, int nNccl, int argc, char** argv) {
  // Rank 0 opens the files; every rank learns whether it could, so all stop together (a rank that
  // went on alone would wait in the first collective for one that is tearing down).
  mcclResult_t openRes = openOutput(argc, argv);
  int openFailed = openRes != mcclSuccess;
  MPI_Allreduce(MPI_IN_PLACE, &openFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (openFailed) return openRes != mcclSuccess ? openRes : mcclSystemError;
  B.progressOn = mcclBenchProgressOn(B.o->progress);
  B.t0 = mcclClockSec();
  for (int ti = 0; ti < B.o->nTypes; ti++) {
    B.dtype = B.o->types[ti];
    size_t sizes[MCCL_ARB_MAX_SIZES];
    B.progressTotal += B.o->nOps * sweepSizes(sizes);
  }
  printHeader();
  for (int ti = 0; ti < B.o->nTypes; ti++) {
    for (int oi = 0; oi < B.o->nOps; oi++) {
      B.dtype = B.o->types[ti];
      B.op = B.o->ops[oi];
      // The pattern, in every send buffer (only out-of-place calls read them; in-place ones copy it).
      size_t count = B.o->maxBytes / mcclTypeSize(B.dtype);
      for (int l = 0; l < B.nLocal; l++) {
        CUDACHECK(cudaSetDevice(B.s->devs[l]));
        for (int i = 0; i < nOurs; i++)
          if (i == 0 || ours[i].t->send[l] != ours[0].t->send[l])
            MCCLCHECK(fillPattern(ours[i].t->send[l], globalRank(l), count));
        for (int i = 0; i < nNccl; i++)
          if (nOurs == 0 || nccl[i].t->send[l] != ours[0].t->send[l])
            MCCLCHECK(fillPattern(nccl[i].t->send[l], globalRank(l), count));
      }
      MCCLCHECK(sweep(ours, nOurs, nccl, nNccl, ti == 0 && oi == 0));
    }
  }
  B.dtype = B.o->types[0];
  B.op = B.o->ops[0];
  mcclResult_t outRes = mcclBenchOutClose(B.out);
  B.out = NULL;
  return outRes;
}

mcclResult_t mcclArBenchRun(const mcclArBenchSetup* s, const mcclArBenchOpts* o, int argc, char** argv,
                            long* totalWrong) {
  if (s == NULL || o == NULL || totalWrong == NULL || s->ops.enqueue == NULL || s->nLocal < 1 ||
      s->nLocal > MCCL_ARB_MAX_LOCAL || s->nOurs < 0 || s->nOurs > MCCL_ARB_MAX_TARGETS) {
    WARN("mcclArBenchRun: bad setup (NULL argument, no enqueue, or nLocal / nOurs out of range)");
    return mcclInvalidArgument;
  }
  memset(&B, 0, sizeof(B));
  B.s = s;
  B.o = o;
  B.nLocal = s->nLocal;
  MPI_Comm_rank(MPI_COMM_WORLD, &B.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &B.nprocs);
  B.nranks = B.nprocs * B.nLocal;
  B.dtype = o->types[0];
  B.op = o->ops[0];
  size_t allocBytes = o->maxBytes + SLACK_BYTES;
  B.hostBytes = allocBytes > 64 * MiB ? allocBytes : 64 * MiB;
  B.hostBuf = malloc(B.hostBytes);
  if (B.hostBuf == NULL) {
    fprintf(stderr, "rank %d: out of host memory (%zu bytes)\n", B.rank, B.hostBytes);
    return mcclSystemError;
  }
  mcclResult_t res = mcclSuccess;
  int l = 0;
  for (; l < B.nLocal; l++) {
    CUDACHECKGOTO(cudaSetDevice(s->devs[l]), res, events);
    CUDACHECKGOTO(cudaEventCreate(&B.start[l]), res, events);
    CUDACHECKGOTO(cudaEventCreate(&B.stop[l]), res, events);
  }

  const char* why = s->ncclWhyNot ? s->ncclWhyNot : "not asked";
  if (s->useNccl && strcmp(MCCL_BACKEND_NAME, "sim") == 0)
    why = "sim backend: NCCL needs real GPUs";
  else if (s->useNccl)
    openNccl(allocBytes, &why);

  target ours[MCCL_ARB_MAX_TARGETS], nccl[2];
  int nOurs = 0, nNccl = 0;
  for (int i = 0; i < s->nOurs; i++) ours[nOurs++] = (target){kOurs, &s->ours[i], {0}};
  if (B.haveNccl) {
    target* t = &nccl[nNccl++];
    *t = (target){kNccl, &t->own, {.lib = "nccl", .variant = "nccl"}};
    for (int k = 0; k < B.nLocal; k++) {
      t->own.send[k] = B.ownNcclBufs ? B.nbufs[0][k] : s->ours[0].send[k];
      t->own.recv[k] = B.ownNcclBufs ? B.nbufs[1][k] : s->ours[0].recv[k];
    }
  }
  if (B.haveSym) {
    target* t = &nccl[nNccl++];
    *t = (target){kNcclSym, &t->own, {.lib = "nccl", .variant = "nccl-sym"}};
    for (int k = 0; k < B.nLocal; k++) {
      t->own.send[k] = B.nbufs[2][k];
      t->own.recv[k] = B.nbufs[3][k];
    }
  }
  printPreamble(why);
  res = runAll(ours, nOurs, nccl, nNccl, argc, argv);
  if (res == mcclSuccess && s->summary) summary(s->shmMode);
  if (res == mcclSuccess && B.rank == 0) {
    printf("# data check: %ld wrong elements in all rows%s\n", B.totalWrong, o->check ? "" : " (-c 0: not checked)");
    fflush(stdout);
  }
  if (B.api.lib) closeNccl();
  *totalWrong = B.totalWrong;
events:
  for (int k = 0; k < l; k++) {
    cudaSetDevice(s->devs[k]);
    if (B.start[k]) cudaEventDestroy(B.start[k]);
    if (B.stop[k]) cudaEventDestroy(B.stop[k]);
  }
  if (B.out) mcclBenchOutClose(B.out);
  B.out = NULL;
  free(B.hostBuf);
  B.hostBuf = NULL;
  return res;
}

int mcclArBenchExitStatus(const char* program, int rank, mcclResult_t r, long totalWrong) {
  if (r != mcclSuccess) {
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, program, mcclGetErrorString(r));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (totalWrong > 0) {
    if (rank == 0) fprintf(stderr, "%s: %ld wrong elements: FAILED\n", program, totalWrong);
    return 1;
  }
  return 0;
}
