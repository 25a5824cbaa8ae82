// Lab 07 benchmark: allreduce_perf's table for lab 07's algorithms beside NCCL's ncclAllReduce.
// mpirun -np N, one process per GPU (rank r on local device r, as nccl-tests -g 1).
//
// Rows. For each size (a line each, printed as it is measured): NCCL on cudaMalloc buffers, NCCL on
// symmetric windows (ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC), as nccl-tests
// -R 2; where the library has them), then each of our algorithms: the ring (protocol as the tuning
// table picks it), one-shot, two-shot and "auto" (the table's choice, named in the row). Ours run on
// mcclMemAlloc buffers registered as lab 07 windows. Columns as nccl-tests': size, count, type,
// redop, then out-of-place and in-place time (us per call), algbw = bytes / time, busbw = algbw *
// 2(n-1)/n and #wrong; then ratio = NCCL's best time (of its rows) / ours, per placement (> 1: ours
// is faster). An algorithm is chosen per row through MCCL_ALGO / MCCL_PROTO (set, then
// mcclParamResetAll), so each row is exactly what a user forcing it would get.
//
// Timing. Per row and placement: -w warm-up calls, a barrier, then -n calls back to back between two
// CUDA events on the stream (eager launches), time per call, max over ranks. With -G N the -n calls
// are captured once into a CUDA graph, replayed once to warm up, then N times between the events
// (time per call = elapsed / (N * n)); the cuda backend only (the sim has no graphs). Data are checked
// by -c N calls per row and placement before the timing (default 1; eager calls also under -G; the
// wrong elements of the N are summed): every element against the reduction of a
// known per-rank pattern computed on the host, plus 64 bytes past the end that must stay untouched.
//
// SHM. Our connections read MCCL_P2P_DISABLE and NCCL reads NCCL_P2P_DISABLE once per process, at
// the first communicator, so the SHM bar is a run of its own: --shm sets both before anything
// starts. The symmetric algorithms map peers' memory directly (NVLink), whatever the ring's
// transport, so an SHM run times the ring only (unless --algo names others).
//
// --tune times ring/LL, ring/SIMPLE, one-shot and two-shot at 8 B .. 64 MiB (out-of-place, NCCL left
// out) and prints the fastest per size and the cut-over points for src/allreduce.c's table.
//
// Files. --csv FILE and --json FILE write every row and placement as a record (common/include/
// mccl_benchout.h: size, count, type, redop, lib, algo, placement, time_us, algbw, busbw, wrong,
// nccl_time_us, ratio) after the run's metadata (date, device, driver, commit, ...): what `make plot`
// draws. -d all and -o all sweep every type and operation, as nccl-tests does; the summary of the bars
// then covers the first (type, operation). A line per size goes to stderr when stderr is a terminal,
// or with --progress.
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
#include "mccl_alloc.h"
#include "mccl_allreduce.h"
#include "mccl_args.h"
#include "mccl_benchout.h"
#include "mccl_checks.h"
#include "mccl_nccl.h"
#include "mccl_param.h"

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
#define MAX_SIZES 64

// ---- settings ------------------------------------------------------------------------------------

enum { kRing, kOneshot, kTwoshot, kAuto, kRingLL, kRingSimple, kNumVariants };
static const struct {
  const char* name;   // --algo spelling
  const char* algo;   // MCCL_ALGO, NULL: the table
  const char* proto;  // MCCL_PROTO, NULL: the table
} kVariant[kNumVariants] = {{"ring", "ring", NULL}, {"oneshot", "oneshot", NULL}, {"twoshot", "twoshot", NULL},
                            {"auto", NULL, NULL},   {"ring-ll", "ring", "ll"},    {"ring-simple", "ring", "simple"}};

static struct {
  size_t minBytes, maxBytes;
  int factor, iters, warm, check, graph, dtype, op, nChannels, reg, useNccl, shm, tune, progress;
  int variants[kNumVariants], nVariants, algoGiven;
  int types[mcclNumTypes], nTypes, ops[mcclNumOps], nOps;  // -d, -o (all: every one); dtype, op: the current
  const char *csv, *json;
} opt;

static int rank, nranks, sim;

static const char* const kOptions[] = {"-b=",    "-e=",    "-f=",     "-n=",        "-w=",         "-c=",       "-d=",
                                       "-o=",    "-G=",    "-R=",     "--algo=",    "--channels=", "--no-nccl", "--shm",
                                       "--tune", "--csv=", "--json=", "--progress", NULL};

static const char* kHelp =
    "Lab 07's allreduce beside NCCL's ncclAllReduce (MCCL_NCCL_LIB, NCCL_NVLS_ENABLE=0), under mpirun -np N\n"
    "(one GPU per process). Columns as nccl-tests; ratio = NCCL's best time / ours (> 1: ours is faster).\n"
    "Defaults in brackets are the GPU's / the sim's.\n"
    "  -b, -e BYTES   smallest, largest size [8, 512M / 8, 32K; --tune: 8, 64M]\n"
    "  -f N           multiply the size by N between rows [2 / 8]\n"
    "  -n N, -w N     timed calls per row (time per call is reported) and warm-up calls [50, 5 / 2, 1]\n"
    "  -c N           check the results with N calls per row and placement, outside the timing; 0: no check [1]\n"
    "  -d TYPE        int8 uint8 int32 (int) uint32 int64 uint64 float16 (half) float32 (float) float64\n"
    "                 (double) bfloat16, or all [float32]\n"
    "  -o OP          sum prod max min avg, or all [sum]\n"
    "  -G N           capture the -n calls in a CUDA graph and replay it N times (cuda backend only) [0: eager]\n"
    "  -R 0|2         2: also time NCCL on ncclMemAlloc buffers registered as symmetric windows [2]\n"
    "  --algo LIST    comma list of ours: ring oneshot twoshot auto ring-ll ring-simple\n"
    "                 [ring,oneshot,twoshot,auto; --shm: ring; --tune: ring-ll,ring-simple,oneshot,twoshot]\n"
    "  --channels N   our communicator's channels, 1..64 [MCCL_NCHANNELS]\n"
    "  --no-nccl      do not load NCCL\n"
    "  --shm          MCCL_P2P_DISABLE=1 and NCCL_P2P_DISABLE=1 before init: the SHM bar's run\n"
    "  --tune         time every algorithm (out-of-place, no NCCL) and print the fastest per size and the\n"
    "                 cut-over points for src/allreduce.c\n"
    "  --csv FILE     also write every row and placement to FILE as CSV (metadata as '# key: value' lines)\n"
    "  --json FILE    the same as one JSON object {\"metadata\": {...}, \"rows\": [...]} (make plot reads both)\n"
    "  --progress     a line per size on stderr (the default when stderr is a terminal)\n"
    "The last lines summarise issue 10's bars (2 ranks): ours (the best algorithm per size), NCCL's, met or\n"
    "MISSED. A full set is three runs: plain (eager and bandwidth bars), -G 1 (graph bar), --shm (SHM bar).";

static int parseType(const char* s) {
  static const struct {
    const char* name;
    int dtype;
  } names[] = {{"int8", mcclInt8},       {"char", mcclInt8},      {"uint8", mcclUint8},      {"int32", mcclInt32},
               {"int", mcclInt32},       {"uint32", mcclUint32},  {"int64", mcclInt64},      {"uint64", mcclUint64},
               {"float16", mcclFloat16}, {"half", mcclFloat16},   {"float32", mcclFloat32},  {"float", mcclFloat32},
               {"float64", mcclFloat64}, {"double", mcclFloat64}, {"bfloat16", mcclBfloat16}};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcasecmp(s, names[i].name) == 0) return names[i].dtype;
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

static void parseAlgos(const char* s) {
  char buf[256], msg[400];
  snprintf(buf, sizeof(buf), "%s", s);
  opt.nVariants = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int v = -1;
    for (int i = 0; i < kNumVariants; i++)
      if (strcasecmp(tok, kVariant[i].name) == 0) v = i;
    if (v < 0) {
      snprintf(msg, sizeof(msg), "--algo: '%s' is not one of ring, oneshot, twoshot, auto, ring-ll, ring-simple", tok);
      mcclArgsFail(msg);
    }
    int dup = 0;
    for (int i = 0; i < opt.nVariants; i++) dup |= opt.variants[i] == v;
    if (!dup) opt.variants[opt.nVariants++] = v;
  }
  if (opt.nVariants == 0) mcclArgsFail("--algo: the list is empty");
}

static void parseOptions(int argc, char** argv) {
  mcclArgsCheckOpts(argc, argv, kOptions,
                    "[-b BYTES] [-e BYTES] [-f N] [-n N] [-w N] [-c 0|1] [-d TYPE] [-o OP] [-G N] [-R 0|2] "
                    "[--algo LIST] [--channels N] [--no-nccl] [--shm] [--tune] [--csv FILE] [--json FILE] [--progress]",
                    kHelp);
  const long long G = 1LL << 30;
  opt.tune = mcclArgsOpt(argc, argv, "--tune") != NULL;
  opt.shm = mcclArgsOpt(argc, argv, "--shm") != NULL;
  opt.minBytes = (size_t)mcclArgsOptInt(argc, argv, "-b", 8, 1, 8 * G);
  opt.maxBytes = (size_t)mcclArgsOptInt(argc, argv, "-e",
                                        opt.tune ? (sim ? 32 * KiB : 64 * MiB)
                                        : sim    ? 32 * KiB
                                                 : 512 * MiB,
                                        1, 8 * G);
  opt.factor = (int)mcclArgsOptInt(argc, argv, "-f", sim ? 8 : 2, 2, 1024);
  opt.iters = (int)mcclArgsOptInt(argc, argv, "-n", sim ? 2 : 50, 1, 1000000);
  opt.warm = (int)mcclArgsOptInt(argc, argv, "-w", sim ? 1 : 5, 0, 1000000);
  opt.check = (int)mcclArgsOptInt(argc, argv, "-c", 1, 0, 1000);
  opt.graph = (int)mcclArgsOptInt(argc, argv, "-G", 0, 0, 100000);
  opt.reg = (int)mcclArgsOptInt(argc, argv, "-R", 2, 0, 2);
  opt.nChannels = (int)mcclArgsOptInt(argc, argv, "--channels", 0, 1, MCCL_SIGNAL_MAX_BLOCKS);
  opt.useNccl = mcclArgsOpt(argc, argv, "--no-nccl") == NULL && !opt.tune;
  const char* s = mcclArgsOpt(argc, argv, "-d");
  if (s && strcasecmp(s, "all") == 0)
    for (int t = 0; t < mcclNumTypes; t++) opt.types[opt.nTypes++] = t;
  else
    opt.types[opt.nTypes++] = s ? parseType(s) : mcclFloat32;
  s = mcclArgsOpt(argc, argv, "-o");
  if (s && strcasecmp(s, "all") == 0)
    for (int o = 0; o < mcclNumOps; o++) opt.ops[opt.nOps++] = o;
  else
    opt.ops[opt.nOps++] = s ? parseOp(s) : mcclSum;
  opt.dtype = opt.types[0];
  opt.op = opt.ops[0];
  opt.csv = mcclArgsOpt(argc, argv, "--csv");
  opt.json = mcclArgsOpt(argc, argv, "--json");
  if (opt.csv && !*opt.csv) mcclArgsFail("--csv: the file name is empty");
  if (opt.json && !*opt.json) mcclArgsFail("--json: the file name is empty");
  if (opt.csv && opt.json && strcmp(opt.csv, opt.json) == 0) mcclArgsFail("--csv and --json name the same file");
  opt.progress = mcclArgsOpt(argc, argv, "--progress") != NULL;
  char msg[200];
  if (opt.reg == 1) mcclArgsFail("-R 1: local registration is not offered; 0 or 2");
  if (opt.minBytes > opt.maxBytes) {
    snprintf(msg, sizeof(msg), "-b %zu is larger than -e %zu", opt.minBytes, opt.maxBytes);
    mcclArgsFail(msg);
  }
  if (opt.graph && sim) {
    fprintf(stderr, "-G: the sim backend has no CUDA graphs; run -G on the cuda backend (BACKEND=cuda)\n");
    exit(2);
  }
  if (opt.tune && opt.graph) mcclArgsFail("--tune times eager launches; leave -G out");
  s = mcclArgsOpt(argc, argv, "--algo");
  opt.algoGiven = s != NULL;
  if (s) {
    parseAlgos(s);
  } else if (opt.tune) {
    parseAlgos("ring-ll,ring-simple,oneshot,twoshot");
  } else if (opt.shm) {
    parseAlgos("ring");
  } else {
    parseAlgos("ring,oneshot,twoshot,auto");
  }
}

// ---- the pattern and its reduction ---------------------------------------------------------------
//
// Element i of rank r depends on key(i) (a hash of i, 0..7) and r only, so the expected result of
// element i is one of 8 values, computed once per row. Values are small integers, exact in every
// type (sums stay within bfloat16's 256 up to 64 ranks); integers wrap as the kernels' do.

static uint32_t patKey(size_t i) {
  return (uint32_t)(((uint64_t)i * 0x9E3779B97F4A7C15ull) >> 61);
}

static int64_t patValue(uint32_t key, int r, int op, int n) {
  if (op == mcclMax || op == mcclMin) return (int64_t)((key * (uint32_t)(r + 1) + (uint32_t)r) % (uint32_t)(n + 4));
  int64_t v = (int64_t)((key * (uint32_t)(r + 1) + (uint32_t)r) % 5u);
  return op == mcclProd ? (v == 0 ? 2 : 1) : v;
}

static int isFloat(int t) {
  return t == mcclFloat16 || t == mcclFloat32 || t == mcclFloat64 || t == mcclBfloat16;
}

static uint16_t floatToHalf(float f) {  // exact for the pattern's small integers; rounds down otherwise
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int e = (int)((x >> 23) & 0xff) - 127 + 15;
  if (f == 0) return (uint16_t)sign;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) return (uint16_t)sign;
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((x >> 13) & 0x3ffu));
}

static double halfToDouble(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static double bf16ToDouble(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static void storeElem(void* p, size_t i, int t, int64_t v) {
  switch (t) {
    case mcclInt8:
      ((int8_t*)p)[i] = (int8_t)v;
      break;
    case mcclUint8:
      ((uint8_t*)p)[i] = (uint8_t)v;
      break;
    case mcclInt32:
      ((int32_t*)p)[i] = (int32_t)v;
      break;
    case mcclUint32:
      ((uint32_t*)p)[i] = (uint32_t)v;
      break;
    case mcclInt64:
      ((int64_t*)p)[i] = v;
      break;
    case mcclUint64:
      ((uint64_t*)p)[i] = (uint64_t)v;
      break;
    case mcclFloat16:
      ((uint16_t*)p)[i] = floatToHalf((float)v);
      break;
    case mcclFloat32:
      ((float*)p)[i] = (float)v;
      break;
    case mcclFloat64:
      ((double*)p)[i] = (double)v;
      break;
    default: {  // bfloat16: the top half of the float (exact for small integers)
      float f = (float)v;
      uint32_t x;
      memcpy(&x, &f, 4);
      ((uint16_t*)p)[i] = (uint16_t)(x >> 16);
    }
  }
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
  switch (t) {
    case mcclFloat16:
      return halfToDouble(((const uint16_t*)p)[i]);
    case mcclFloat32:
      return ((const float*)p)[i];
    case mcclFloat64:
      return ((const double*)p)[i];
    default:
      return bf16ToDouble(((const uint16_t*)p)[i]);
  }
}

static int64_t wrapInt(int64_t v, int t) {
  uint8_t tmp[8];
  storeElem(tmp, 0, t, v);
  return loadInt(tmp, 0, t);
}

struct expected {
  int64_t i[8];
  double f[8], tol[8];
};

static void expectedValues(struct expected* x) {
  int t = opt.dtype, op = opt.op, n = nranks;
  double rel = t == mcclFloat16 ? 1e-3 : t == mcclBfloat16 ? 8e-3 : t == mcclFloat32 ? 1e-6 : 1e-12;
  for (uint32_t k = 0; k < 8; k++) {
    int64_t acc = patValue(k, 0, op, n);
    double facc = (double)acc;
    for (int r = 1; r < n; r++) {
      int64_t v = patValue(k, r, op, n);
      if (op == mcclProd)
        acc *= v, facc *= (double)v;
      else if (op == mcclMax)
        acc = v > acc ? v : acc, facc = (double)acc;
      else if (op == mcclMin)
        acc = v < acc ? v : acc, facc = (double)acc;
      else
        acc += v, facc += (double)v;  // sum, avg
      if (!isFloat(t)) acc = wrapInt(acc, t);
    }
    if (op == mcclAvg) {
      facc /= n;
      if (!isFloat(t)) acc = t == mcclUint64 ? (int64_t)((uint64_t)acc / (uint64_t)n) : wrapInt(acc / n, t);
    }
    x->i[k] = acc;
    x->f[k] = facc;
    x->tol[k] = op == mcclAvg ? rel * fabs(facc) + 1e-12 : 0;
  }
}

static void* hostBuf;  // pattern staging and result readback
static size_t hostBytes;

// Wrong elements (and bytes past the end); the first few are shown on stderr.
static long checkResult(const void* host, size_t count, const struct expected* x, const char* what) {
  long bad = 0;
  int t = opt.dtype;
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

// ---- targets -------------------------------------------------------------------------------------

enum { kOurs, kNccl, kNcclSym };
typedef struct {
  int kind, variant;
  void *send, *recv;
} target;

static struct {
  mcclLabComm* comm;
  cudaStream_t stream;
  cudaEvent_t start, stop;
  mcclNcclApi api;
  mcclNcclComm ncclComm;
  int (*ncclMemAlloc)(void**, size_t);
  int (*ncclMemFree)(void*);
  int (*ncclWinRegister)(mcclNcclComm, void*, size_t, void**, int);
  int (*ncclWinDeregister)(mcclNcclComm, void*);
  int haveWin, symLevel;
} g;

static int allOk(int ok) {
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok;
}

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Wait for the stream, at most WAIT_TIMEOUT_SEC: a kernel waiting on a peer that never comes is
// reported (and the run ended) rather than waited on forever.
static mcclResult_t waitStream(void) {
  double t0 = nowSec();
  for (;;) {
    cudaError_t e = cudaStreamQuery(g.stream);
    if (e == cudaSuccess) return mcclSuccess;
    if (e != cudaErrorNotReady) CUDACHECK(e);
    if (nowSec() - t0 > WAIT_TIMEOUT_SEC) {
      fprintf(stderr, "rank %d: an allreduce did not finish in %.0f s (a peer stuck or gone?)\n", rank,
              WAIT_TIMEOUT_SEC);
      if (g.comm) mcclLabCommAbort(g.comm);
      return mcclSystemError;
    }
    usleep(20);
  }
}

// MCCL_ALGO / MCCL_PROTO for a variant of ours; the parameters are read again at the next call.
// Only called with the stream drained and every rank between barriers.
static void setVariant(int v) {
  if (kVariant[v].algo)
    setenv("MCCL_ALGO", kVariant[v].algo, 1);
  else
    unsetenv("MCCL_ALGO");
  if (kVariant[v].proto)
    setenv("MCCL_PROTO", kVariant[v].proto, 1);
  else
    unsetenv("MCCL_PROTO");
  mcclParamResetAll();
}

// Whether a variant of ours can run at this size (so a forced algorithm is never refused mid-row).
static int variantRuns(int v, size_t bytes) {
  if (v == kOneshot) return g.symLevel >= 1 && bytes <= MCCL_ONESHOT_MAX_BYTES && nranks <= MCCL_SYM_MAX_RANKS;
  if (v == kTwoshot) return g.symLevel == 2 && nranks <= MCCL_SYM_MAX_RANKS;
  return 1;
}

static const char* algoName(int a) {
  return a == MCCL_ALGO_ONESHOT ? "oneshot" : a == MCCL_ALGO_TWOSHOT ? "twoshot" : "ring";
}

// The row's label: what runs (for the ring and auto, the table's protocol and algorithm).
static void rowLabel(const target* t, size_t bytes, char* buf, size_t len) {
  if (t->kind == kNccl) {
    snprintf(buf, len, "nccl");
    return;
  }
  if (t->kind == kNcclSym) {
    snprintf(buf, len, "nccl-sym");
    return;
  }
  int a = MCCL_ALGO_RING, p = MCCL_PROTO_SIMPLE;
  if (mcclLabSelectAlgorithm(nranks, bytes, g.symLevel, &a, &p) != mcclSuccess) {
    snprintf(buf, len, "%s?", kVariant[t->variant].name);
    return;
  }
  const char* proto = p == MCCL_PROTO_LL ? "LL" : "SIMPLE";
  if (t->variant == kAuto)
    snprintf(buf, len, "auto:%s%s%s", algoName(a), a == MCCL_ALGO_RING ? "/" : "", a == MCCL_ALGO_RING ? proto : "");
  else if (a == MCCL_ALGO_RING)
    snprintf(buf, len, "ring/%s", proto);
  else
    snprintf(buf, len, "%s", algoName(a));
}

static mcclResult_t enqueue(const target* t, size_t count, int inPlace) {
  const void* src = inPlace ? t->recv : t->send;
  if (t->kind == kOurs)
    return mcclLabAllReduce(src, t->recv, count, (mcclDataType_t)opt.dtype, (mcclRedOp_t)opt.op, g.comm, g.stream);
  // NCCL's ncclDataType_t and ncclRedOp_t number the types and operations as lab 06 does.
  int e = g.api.allReduce(src, t->recv, count, opt.dtype, opt.op, g.ncclComm, g.stream);
  if (e != 0) {
    fprintf(stderr, "rank %d: ncclAllReduce failed: %s\n", rank, g.api.getErrorString(e));
    return mcclRemoteError;
  }
  return mcclSuccess;
}

// One untimed call on the pattern; the wrong elements (and bytes written past the end) of all ranks.
static mcclResult_t validate(const target* t, size_t count, int inPlace, long* wrong) {
  size_t bytes = count * mcclTypeSize(opt.dtype);
  // Peers' calls of the previous row may still store into this rank's buffers until they end.
  MCCLCHECK(waitStream());
  MPI_Barrier(MPI_COMM_WORLD);
  CUDACHECK(cudaMemsetAsync(t->recv, 0xff, bytes + SLACK_BYTES, g.stream));
  if (inPlace) CUDACHECK(cudaMemcpyAsync(t->recv, t->send, bytes, cudaMemcpyDeviceToDevice, g.stream));
  MCCLCHECK(waitStream());
  MPI_Barrier(MPI_COMM_WORLD);
  MCCLCHECK(enqueue(t, count, inPlace));
  MCCLCHECK(waitStream());  // no barrier: when this rank's call has ended, its result must be whole
  CUDACHECK(cudaMemcpy(hostBuf, t->recv, bytes + SLACK_BYTES, cudaMemcpyDeviceToHost));
  struct expected x;
  expectedValues(&x);
  char what[64];
  rowLabel(t, bytes, what, sizeof(what));
  snprintf(what + strlen(what), sizeof(what) - strlen(what), " %zu B %s", bytes, inPlace ? "in-place" : "out-of-place");
  long bad = checkResult(hostBuf, count, &x, what);
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  *wrong = bad;
  return mcclSuccess;
}

// Seconds per call, the max over ranks.
static mcclResult_t measure(const target* t, size_t count, int inPlace, double* sec) {
  for (int i = 0; i < opt.warm; i++) MCCLCHECK(enqueue(t, count, inPlace));
  MCCLCHECK(waitStream());
  float ms = 0;
  double calls = opt.iters;
  if (opt.graph == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    CUDACHECK(cudaEventRecord(g.start, g.stream));
    for (int i = 0; i < opt.iters; i++) MCCLCHECK(enqueue(t, count, inPlace));
    CUDACHECK(cudaEventRecord(g.stop, g.stream));
  } else {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDACHECK(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal));
    mcclResult_t res = mcclSuccess;
    for (int i = 0; i < opt.iters && res == mcclSuccess; i++) res = enqueue(t, count, inPlace);
    cudaError_t ce = cudaStreamEndCapture(g.stream, &graph);
    MCCLCHECK(res);
    CUDACHECK(ce);
    CUDACHECKGOTO(cudaGraphInstantiateWithFlags(&exec, graph, 0), res, graphDone);
    CUDACHECKGOTO(cudaGraphLaunch(exec, g.stream), res, graphDone);  // warm-up replay
    MCCLCHECKGOTO(waitStream(), res, graphDone);
    MPI_Barrier(MPI_COMM_WORLD);
    CUDACHECKGOTO(cudaEventRecord(g.start, g.stream), res, graphDone);
    for (int i = 0; i < opt.graph; i++) CUDACHECKGOTO(cudaGraphLaunch(exec, g.stream), res, graphDone);
    CUDACHECKGOTO(cudaEventRecord(g.stop, g.stream), res, graphDone);
    calls *= opt.graph;
  graphDone:
    if (res != mcclSuccess) {
      waitStream();
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    MCCLCHECK(res);
  }
  MCCLCHECK(waitStream());
  CUDACHECK(cudaEventElapsedTime(&ms, g.start, g.stop));
  *sec = (double)ms * 1e-3 / calls;
  MPI_Allreduce(MPI_IN_PLACE, sec, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return mcclSuccess;
}

struct rowResult {
  double sec[2];  // [out-of-place, in-place]; 0: not run
  long wrong[2];  // -1: not checked
};

static mcclResult_t runRow(const target* t, size_t count, int placements, struct rowResult* r) {
  memset(r, 0, sizeof(*r));
  r->wrong[0] = r->wrong[1] = -1;
  if (t->kind == kOurs) {
    MPI_Barrier(MPI_COMM_WORLD);
    setVariant(t->variant);
  }
  for (int ip = 0; ip < placements; ip++) {
    for (int c = 0; c < opt.check; c++) {  // -c N: N checked calls, their wrong elements summed
      long wrong = 0;
      MCCLCHECK(validate(t, count, ip, &wrong));
      r->wrong[ip] = (c == 0 ? 0 : r->wrong[ip]) + wrong;
    }
    MCCLCHECK(measure(t, count, ip, &r->sec[ip]));
  }
  return mcclSuccess;
}

static double busFactor(void) {
  return nranks > 1 ? 2.0 * (nranks - 1) / nranks : 1.0;
}

static void printHeader(void) {
  if (rank != 0) return;
  printf("#%87s %39s\n", "out-of-place", "in-place");
  printf("#%11s %12s %8s %6s %-16s %9s %7s %7s %6s %9s %7s %7s %6s %6s %6s\n", "size", "count", "type", "redop", "algo",
         "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "ratio", "ratio");
  printf("#%11s %12s %8s %6s %-16s %9s %7s %7s %6s %9s %7s %7s %6s %6s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
         "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "oop", "ip");
  fflush(stdout);
}

static void printRow(const char* label, size_t bytes, size_t count, const struct rowResult* r, const double* ncclBest) {
  if (rank != 0) return;
  printf("%12zu %12zu %8s %6s %-16s", bytes, count, mcclTypeName(opt.dtype), mcclOpName(opt.op), label);
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
static mcclBenchOut* benchOut;

static mcclResult_t recordRow(const char* lib, const char* variant, const char* label, size_t bytes, size_t count,
                              const struct rowResult* r, const double* ncclBest) {
  if (rank != 0 || benchOut == NULL) return mcclSuccess;
  for (int ip = 0; ip < 2; ip++) {
    if (r->sec[ip] <= 0) continue;
    mcclBenchRecord rec = {.bytes = bytes,
                           .count = count,
                           .type = mcclTypeName(opt.dtype),
                           .redop = mcclOpName(opt.op),
                           .lib = lib,
                           .variant = variant,
                           .algo = label,
                           .inPlace = ip,
                           .timeUs = r->sec[ip] * 1e6,
                           .wrong = r->wrong[ip],
                           .ncclTimeUs = ncclBest ? ncclBest[ip] * 1e6 : 0};
    mcclBenchRecordRates(&rec, nranks);
    MCCLCHECK(mcclBenchOutRecord(benchOut, &rec));
  }
  return mcclSuccess;
}

// ---- the sweep, the summary and --tune ------------------------------------------------------------

struct sizeStat {
  size_t bytes;
  double ours, nccl;  // best seconds per call over algorithms and placements (rows with #wrong 0); 0: none
  char oursAlgo[24], ncclAlgo[24];
  double tune[kNumVariants];  // --tune: out-of-place seconds per variant
};
static struct sizeStat stats[MAX_SIZES];
static int nStats;
static long totalWrong;

static void keepBest(double* best, char* bestName, const struct rowResult* r, const char* label) {
  for (int ip = 0; ip < 2; ip++)
    if (r->sec[ip] > 0 && r->wrong[ip] <= 0 && (*best == 0 || r->sec[ip] < *best)) {
      *best = r->sec[ip];
      snprintf(bestName, 24, "%s%s", label, ip ? " ip" : "");
    }
}

static const char* fmtSize(size_t b, char* buf, size_t len);

// Sizes of the sweep at the current type (a size with no whole element is left out).
static int sweepSizes(size_t* sizes) {
  size_t esize = mcclTypeSize(opt.dtype);
  int n = 0;
  for (size_t b = opt.minBytes; b <= opt.maxBytes && n < MAX_SIZES; b *= (size_t)opt.factor)
    if (b / esize > 0) sizes[n++] = b / esize * esize;
  return n;
}

// The progress lines: done of total sizes (over every type and operation), from t0.
static struct {
  int on, done, total;
  double t0;
} progress;

// One (type, operation): every size, NCCL's rows first. keepStats: this combination feeds the summary.
static mcclResult_t sweep(target* ours, int nOurs, target* nccl, int nNccl, int keepStats) {
  size_t esize = mcclTypeSize(opt.dtype), sizes[MAX_SIZES];
  int nSizes = sweepSizes(sizes);
  for (int si = 0; si < nSizes; si++) {
    size_t bytes = sizes[si], count = bytes / esize;
    struct sizeStat scratch, *st = keepStats ? &stats[nStats++] : &scratch;
    memset(st, 0, sizeof(*st));
    st->bytes = bytes;
    double ncclBest[2] = {0, 0};
    for (int i = 0; i < nNccl; i++) {
      struct rowResult r;
      MCCLCHECK(runRow(&nccl[i], count, 2, &r));
      char label[32];
      rowLabel(&nccl[i], bytes, label, sizeof(label));
      printRow(label, bytes, count, &r, NULL);
      MCCLCHECK(recordRow("nccl", label, label, bytes, count, &r, NULL));
      for (int ip = 0; ip < 2; ip++)
        if (r.sec[ip] > 0 && (ncclBest[ip] == 0 || r.sec[ip] < ncclBest[ip])) ncclBest[ip] = r.sec[ip];
      keepBest(&st->nccl, st->ncclAlgo, &r, label);
      for (int ip = 0; ip < 2; ip++) totalWrong += r.wrong[ip] > 0 ? r.wrong[ip] : 0;
    }
    for (int i = 0; i < nOurs; i++) {
      if (!variantRuns(ours[i].variant, bytes)) continue;
      struct rowResult r;
      MCCLCHECK(runRow(&ours[i], count, opt.tune ? 1 : 2, &r));
      char label[32];
      rowLabel(&ours[i], bytes, label, sizeof(label));
      printRow(label, bytes, count, &r, ncclBest);
      MCCLCHECK(recordRow("minccl", kVariant[ours[i].variant].name, label, bytes, count, &r, ncclBest));
      keepBest(&st->ours, st->oursAlgo, &r, label);
      st->tune[ours[i].variant] = r.wrong[0] <= 0 ? r.sec[0] : 0;
      for (int ip = 0; ip < 2; ip++) totalWrong += r.wrong[ip] > 0 ? r.wrong[ip] : 0;
    }
    progress.done++;
    if (progress.on && rank == 0) {
      char what[96], sz[32];
      snprintf(what, sizeof(what), "%s %s %s done", fmtSize(bytes, sz, sizeof(sz)), mcclTypeName(opt.dtype),
               mcclOpName(opt.op));
      mcclBenchProgress(progress.done, progress.total, what, nowSec() - progress.t0);
    }
  }
  return mcclSuccess;
}

static const char* fmtSize(size_t b, char* buf, size_t len) {
  if (b >= MiB && b % MiB == 0)
    snprintf(buf, len, "%zu MiB", b / MiB);
  else if (b >= KiB && b % KiB == 0)
    snprintf(buf, len, "%zu KiB", b / KiB);
  else
    snprintf(buf, len, "%zu B", b);
  return buf;
}

static void barLine(const char* what, int isTime, double ours, const char* oursAlgo, double nccl, double goal,
                    const char* why) {
  char o[40], n[40], v[16];
  if (why) {
    printf("# %-40s %14s %14s %-8s %s\n", what, "-", "-", "-", why);
    return;
  }
  snprintf(o, sizeof(o), isTime ? "%.2f us" : "%.1f GB/s", ours);
  if (nccl > 0)
    snprintf(n, sizeof(n), isTime ? "%.2f us" : "%.1f GB/s", nccl);
  else
    snprintf(n, sizeof(n), "-");
  int met = isTime ? ours <= goal : ours >= goal;
  snprintf(v, sizeof(v), "%s", ours > 0 && met ? "met" : "MISSED");
  char extra[96] = "";
  if (nccl > 0) snprintf(extra, sizeof(extra), "  x%.2f NCCL", isTime ? nccl / ours : ours / nccl);
  printf("# %-40s %14s %14s %-8s %s %.1f%s (%s)%s\n", what, o, n, v, isTime ? "<=" : ">=", goal,
         isTime ? " us" : " GB/s", oursAlgo, extra);
}

// The worst size of 8 B - 8 KiB (each size at its best algorithm): the bar holds for every size.
static void latencyBar(const char* what, double goal) {
  double ours = 0, nccl = 0;
  char algo[64] = "", sz[32];
  int n = 0, missing = 0;
  for (int i = 0; i < nStats; i++) {
    if (stats[i].bytes > 8 * KiB) continue;
    n++;
    missing |= stats[i].ours <= 0;
    if (stats[i].ours > ours) {
      ours = stats[i].ours;
      snprintf(algo, sizeof(algo), "worst %s: %s", fmtSize(stats[i].bytes, sz, sizeof(sz)), stats[i].oursAlgo);
    }
    if (stats[i].nccl > nccl) nccl = stats[i].nccl;
  }
  if (n == 0)
    barLine(what, 1, 0, "", 0, goal, "no size of 8 B - 8 KiB in the sweep");
  else if (missing)
    barLine(what, 1, 0, "", 0, goal, "MISSED: a size had no correct row");
  else
    barLine(what, 1, ours * 1e6, algo, nccl * 1e6, goal, NULL);
}

static void bandwidthBar(const char* what, size_t bytes, double goal) {
  for (int i = 0; i < nStats; i++) {
    if (stats[i].bytes != bytes) continue;
    double f = (double)bytes * busFactor() / 1e9;
    barLine(what, 0, stats[i].ours > 0 ? f / stats[i].ours : 0, stats[i].oursAlgo,
            stats[i].nccl > 0 ? f / stats[i].nccl : 0, goal, NULL);
    return;
  }
  barLine(what, 0, 0, "", 0, goal, "size not in the sweep (-b, -e, -f)");
}

static void summary(int shmMode) {
  if (rank != 0) return;
  printf(
      "\n# ==== summary: issue 10's bars, %s backend, %d ranks%s, %s %s; best algorithm and placement per size, "
      "NCCL's best of its rows\n",
      MCCL_BACKEND_NAME, nranks, nranks == 2 ? "" : " (the bars are set for 2 ranks)", mcclTypeName(opt.dtype),
      mcclOpName(opt.op));
  printf("# %-40s %14s %14s %-8s %s\n", "bar", "ours", "NCCL", "verdict", "target (our best row)");
  const char* noGraph = "not this run: -G 1 measures it";
  const char* noEager = "not this run: leave -G out";
  const char* noShm = "not this run: --shm measures it";
  const char* isShm = "not this run: an --shm run (leave --shm out)";
  if (shmMode) {
    barLine("8 B - 8 KiB, eager launches", 1, 0, "", 0, 4.0, isShm);
    barLine("8 B - 8 KiB, CUDA graph", 1, 0, "", 0, 2.5, isShm);
  } else if (opt.graph) {
    barLine("8 B - 8 KiB, eager launches", 1, 0, "", 0, 4.0, noEager);
    latencyBar("8 B - 8 KiB, CUDA graph", 2.5);
  } else {
    latencyBar("8 B - 8 KiB, eager launches", 4.0);
    barLine("8 B - 8 KiB, CUDA graph", 1, 0, "", 0, 2.5, noGraph);
  }
  if (shmMode) {
    barLine("2 MiB busbw", 0, 0, "", 0, 180, isShm);
    barLine("32 MiB busbw", 0, 0, "", 0, 320, isShm);
    barLine("512 MiB busbw", 0, 0, "", 0, 360, isShm);
    bandwidthBar("512 MiB busbw, SHM", 512 * MiB, 34);
  } else {
    bandwidthBar("2 MiB busbw", 2 * MiB, 180);
    bandwidthBar("32 MiB busbw", 32 * MiB, 320);
    bandwidthBar("512 MiB busbw", 512 * MiB, 360);
    barLine("512 MiB busbw, SHM", 0, 0, "", 0, 34, noShm);
  }
  printf("# data check: %ld wrong elements in all rows%s\n", totalWrong, opt.check ? "" : " (-c 0: not checked)");
  fflush(stdout);
}

static void tuneSummary(void) {
  if (rank != 0) return;
  printf("\n# ==== --tune: out-of-place us per call, %d ranks, %d channels (rows with wrong data left out)\n", nranks,
         g.comm->nChannels);
  printf("#%11s", "size");
  for (int i = 0; i < opt.nVariants; i++) printf(" %12s", kVariant[opt.variants[i]].name);
  printf("  fastest\n");
  size_t lastOne = 0, lastTwo = 0, lastLL = 0;
  for (int s = 0; s < nStats; s++) {
    printf("%12zu", stats[s].bytes);
    int best = -1;
    for (int i = 0; i < opt.nVariants; i++) {
      int v = opt.variants[i];
      double t = stats[s].tune[v];
      if (t > 0)
        printf(" %12.2f", t * 1e6);
      else
        printf(" %12s", "-");
      if (t > 0 && (best < 0 || t < stats[s].tune[best])) best = v;
    }
    printf("  %s\n", best < 0 ? "-" : kVariant[best].name);
    if (best == kOneshot) lastOne = stats[s].bytes;
    if (best == kTwoshot) lastTwo = stats[s].bytes;
    double ll = stats[s].tune[kRingLL], simple = stats[s].tune[kRingSimple];
    if (ll > 0 && (simple <= 0 || ll < simple)) lastLL = stats[s].bytes;
  }
  const char* suffix = nranks <= 2 ? "2R" : nranks <= 4 ? "4R" : "8R";
  char a[32], b[32], c[32];
  printf("# cut-over points (largest size where each is fastest; check the table for a non-monotonic middle):\n");
  printf("#   MCCL_TUNE_ONESHOT_MAX_%s = %zu (%s)\n", suffix, lastOne, fmtSize(lastOne, a, sizeof(a)));
  if (lastTwo < lastOne) lastTwo = lastOne;  // two-shot never fastest: its range is empty
  printf("#   MCCL_TUNE_TWOSHOT_MAX_%s = %zu (%s)%s\n", suffix, lastTwo, fmtSize(lastTwo, b, sizeof(b)),
         lastTwo && lastTwo == stats[nStats - 1].bytes ? " (fastest up to the largest size tuned: raise -e)" : "");
  printf("#   MCCL_TUNE_LL_MAX = %zu (%s)\n", lastLL, fmtSize(lastLL, c, sizeof(c)));
  printf("# data check: %ld wrong elements in all rows\n", totalWrong);
  fflush(stdout);
}

// ---- set-up --------------------------------------------------------------------------------------

static mcclResult_t fillPattern(void* dst, size_t count) {
  size_t esize = mcclTypeSize(opt.dtype), chunk = (64 * MiB) / esize;
  for (size_t off = 0; off < count; off += chunk) {
    size_t n = count - off < chunk ? count - off : chunk;
    for (size_t i = 0; i < n; i++) storeElem(hostBuf, i, opt.dtype, patValue(patKey(off + i), rank, opt.op, nranks));
    CUDACHECK(cudaMemcpy((char*)dst + off * esize, hostBuf, n * esize, cudaMemcpyHostToDevice));
  }
  return mcclSuccess;
}

static void openNccl(size_t allocBytes, void** bufs, void** wins, int* haveNccl, int* haveSym, const char** why) {
  *haveNccl = *haveSym = 0;
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  if (!allOk(mcclNcclOpen(mcclParamNcclLib(), &g.api, why))) return;
  mcclNcclUniqueId nid;
  memset(&nid, 0, sizeof(nid));
  int e = rank == 0 ? g.api.getUniqueId(&nid) : 0;
  MPI_Bcast(&nid, sizeof(nid), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (allOk(e == 0)) e = g.api.commInitRank(&g.ncclComm, nranks, nid, rank);
  if (!allOk(e == 0)) {
    *why = "ncclCommInitRank failed";
    return;
  }
  *haveNccl = allOk(cudaMalloc(&bufs[0], allocBytes) == cudaSuccess && cudaMalloc(&bufs[1], allocBytes) == cudaSuccess);
  if (!*haveNccl) {
    *why = "cudaMalloc of NCCL's buffers failed";
    return;
  }
  if (opt.reg != 2 || opt.shm) return;
  *(void**)&g.ncclMemAlloc = dlsym(g.api.lib, "ncclMemAlloc");
  *(void**)&g.ncclMemFree = dlsym(g.api.lib, "ncclMemFree");
  *(void**)&g.ncclWinRegister = dlsym(g.api.lib, "ncclCommWindowRegister");
  *(void**)&g.ncclWinDeregister = dlsym(g.api.lib, "ncclCommWindowDeregister");
  if (!allOk(g.ncclMemAlloc && g.ncclMemFree && g.ncclWinRegister && g.ncclWinDeregister)) return;
  if (!allOk(g.ncclMemAlloc(&bufs[2], allocBytes) == 0 && g.ncclMemAlloc(&bufs[3], allocBytes) == 0)) return;
  int ok = g.ncclWinRegister(g.ncclComm, bufs[2], allocBytes, &wins[0], NCCL_WIN_COLL_SYMMETRIC) == 0;
  ok = ok && g.ncclWinRegister(g.ncclComm, bufs[3], allocBytes, &wins[1], NCCL_WIN_COLL_SYMMETRIC) == 0;
  *haveSym = allOk(ok);
}

// The --csv / --json files (rank 0), after the metadata every chart title uses.
static mcclResult_t openOutput(int dev, int argc, char** argv, int haveNccl, int shmMode) {
  if (rank != 0 || (opt.csv == NULL && opt.json == NULL)) return mcclSuccess;
  mcclBenchMeta meta;
  mcclBenchMetaFill(&meta, dev, argc, argv);
  char v[64];
  MCCLCHECK(mcclBenchMetaAdd(&meta, "program", "lab 07 mpi_bench_allreduce"));
  snprintf(v, sizeof(v), "%d", nranks);
  MCCLCHECK(mcclBenchMetaAdd(&meta, "nranks", v));
  snprintf(v, sizeof(v), "%d", g.comm->nChannels);
  MCCLCHECK(mcclBenchMetaAdd(&meta, "channels", v));
  MCCLCHECK(mcclBenchMetaAdd(&meta, "transport", nranks < 2 ? "none" : shmMode ? "SHM" : "P2P"));
  if (opt.graph)
    snprintf(v, sizeof(v), "CUDA graph: -n %d calls replayed -G %d times, -w %d", opt.iters, opt.graph, opt.warm);
  else
    snprintf(v, sizeof(v), "eager: -n %d calls, -w %d warm-up", opt.iters, opt.warm);
  MCCLCHECK(mcclBenchMetaAdd(&meta, "timing", v));
  if (haveNccl) {
    snprintf(v, sizeof(v), "%d.%d.%d", g.api.version / 10000, g.api.version / 100 % 100, g.api.version % 100);
    MCCLCHECK(mcclBenchMetaAdd(&meta, "nccl", v));
  }
  return mcclBenchOutOpen(opt.csv, opt.json, &meta, &benchOut);
}

static mcclResult_t run(int argc, char** argv) {
  MPI_Comm local;
  int localRank = 0, ndev = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &localRank);
  MPI_Comm_free(&local);
  CUDACHECK(cudaGetDeviceCount(&ndev));
  int dev = localRank % ndev;
  CUDACHECK(cudaSetDevice(dev));
  size_t allocBytes = opt.maxBytes + SLACK_BYTES;  // -e rounded down to whole elements of any type fits
  hostBytes = allocBytes > 64 * MiB ? allocBytes : 64 * MiB;
  hostBuf = malloc(hostBytes);
  if (hostBuf == NULL) {
    fprintf(stderr, "rank %d: out of host memory (%zu bytes)\n", rank, hostBytes);
    return mcclSystemError;
  }

  // Our communicator, buffers and windows.
  mcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (rank == 0) MCCLCHECK(mcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  MCCLCHECK(mcclLabCommInit(&g.comm, nranks, &id, rank, dev, opt.nChannels));
  CUDACHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  CUDACHECK(cudaEventCreate(&g.start));
  CUDACHECK(cudaEventCreate(&g.stop));
  void *send = NULL, *recv = NULL;
  mcclLabWindow *sendWin = NULL, *recvWin = NULL;
  MCCLCHECK(mcclMemAlloc(&send, allocBytes));
  MCCLCHECK(mcclMemAlloc(&recv, allocBytes));
  g.haveWin = allOk(mcclCuMemEnable() && g.comm->signalWin != NULL);
  if (g.haveWin) {
    MCCLCHECK(mcclLabWindowRegister(g.comm, send, allocBytes, &sendWin));
    MCCLCHECK(mcclLabWindowRegister(g.comm, recv, allocBytes, &recvWin));
  }
  g.symLevel = g.comm->signalWin == NULL ? 0 : g.haveWin ? 2 : 1;
  int shmMode = nranks > 1 && g.comm->transport[0] == TRANSPORT_SHM;

  // NCCL's: cudaMalloc buffers, and symmetric windows where the library has them.
  void* nbufs[4] = {NULL, NULL, NULL, NULL};
  void* nwins[2] = {NULL, NULL};
  int haveNccl = 0, haveSym = 0;
  const char* why = sim ? "sim backend: NCCL needs real GPUs" : opt.tune ? "--tune" : "--no-nccl";
  if (!sim && opt.useNccl) openNccl(allocBytes, nbufs, nwins, &haveNccl, &haveSym, &why);

  target ours[kNumVariants], nccl[2];
  int nOurs = 0, nNccl = 0;
  for (int i = 0; i < opt.nVariants; i++) ours[nOurs++] = (target){kOurs, opt.variants[i], send, recv};
  if (haveNccl) nccl[nNccl++] = (target){kNccl, 0, nbufs[0], nbufs[1]};
  if (haveSym) nccl[nNccl++] = (target){kNcclSym, 0, nbufs[2], nbufs[3]};

  if (rank == 0) {
    char checkHow[64] = "off";
    if (opt.check)
      snprintf(checkHow, sizeof(checkHow), "%d call%s per row, outside the timing", opt.check,
               opt.check == 1 ? "" : "s");
    printf("# lab 07 allreduce%s, %s backend, %d ranks (one device each), %d channels, ring over %s%s\n",
           opt.tune ? " --tune" : "", MCCL_BACKEND_NAME, nranks, g.comm->nChannels,
           nranks < 2 ? "nothing (1 rank)"
           : shmMode  ? "SHM"
                      : "P2P",
           g.symLevel == 2   ? "; symmetric windows"
           : g.symLevel == 1 ? "; signal area only (no two-shot)"
                             : "; ring only");
    printf("# timing: %s, -n %d calls per row after -w %d warm-up, time per call, max over ranks; check: %s\n",
           opt.graph ? "the -n calls captured in a CUDA graph, replayed -G times" : "eager launches back to back",
           opt.iters, opt.warm, checkHow);
    if (opt.graph) printf("# graph replays per row: %d (after one warm-up replay)\n", opt.graph);
    if (haveNccl)
      printf("# NCCL %d.%d.%d: %s, NCCL_NVLS_ENABLE=0%s; rows nccl (cudaMalloc)%s\n", g.api.version / 10000,
             g.api.version / 100 % 100, g.api.version % 100, mcclParamNcclLib(), opt.shm ? ", NCCL_P2P_DISABLE=1" : "",
             haveSym ? " and nccl-sym (ncclMemAlloc + ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC)" : "");
    else
      printf("# NCCL: skipped (%s)\n", why);
    if (shmMode && !opt.algoGiven) printf("# SHM run: the ring only (the symmetric algorithms do not use SHM)\n");
    printf("# busbw = algbw * 2(n-1)/n; ratio = NCCL's best time / ours (> 1: ours is faster)\n");
    fflush(stdout);
  }

  MCCLCHECK(openOutput(dev, argc, argv, haveNccl, shmMode));
  progress.on = mcclBenchProgressOn(opt.progress);
  progress.t0 = nowSec();
  for (int ti = 0; ti < opt.nTypes; ti++) {
    opt.dtype = opt.types[ti];
    size_t sizes[MAX_SIZES];
    progress.total += opt.nOps * sweepSizes(sizes);
  }
  printHeader();
  for (int ti = 0; ti < opt.nTypes; ti++) {
    for (int oi = 0; oi < opt.nOps; oi++) {
      opt.dtype = opt.types[ti];
      opt.op = opt.ops[oi];
      // The pattern, in every send buffer (only out-of-place calls read them; in-place ones copy it).
      size_t esize = mcclTypeSize(opt.dtype), count = opt.maxBytes / esize;
      MCCLCHECK(fillPattern(send, count));
      if (haveNccl) MCCLCHECK(fillPattern(nbufs[0], count));
      if (haveSym) MCCLCHECK(fillPattern(nbufs[2], count));
      MCCLCHECK(sweep(ours, nOurs, nccl, nNccl, ti == 0 && oi == 0));
    }
  }
  opt.dtype = opt.types[0];
  opt.op = opt.ops[0];
  mcclResult_t outRes = mcclBenchOutClose(benchOut);
  benchOut = NULL;
  MCCLCHECK(outRes);
  if (opt.tune)
    tuneSummary();
  else
    summary(shmMode);

  MPI_Barrier(MPI_COMM_WORLD);
  if (haveSym) {
    g.ncclWinDeregister(g.ncclComm, nwins[0]);
    g.ncclWinDeregister(g.ncclComm, nwins[1]);
  }
  if (g.ncclMemFree) {
    if (nbufs[2]) g.ncclMemFree(nbufs[2]);
    if (nbufs[3]) g.ncclMemFree(nbufs[3]);
  }
  if (nbufs[0]) cudaFree(nbufs[0]);
  if (nbufs[1]) cudaFree(nbufs[1]);
  if (g.ncclComm) g.api.commDestroy(g.ncclComm);
  mcclNcclClose(&g.api);
  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the peers' buffers before they go
  if (sendWin) MCCLCHECK(mcclLabWindowDeregister(g.comm, sendWin));
  if (recvWin) MCCLCHECK(mcclLabWindowDeregister(g.comm, recvWin));
  MCCLCHECK(mcclMemFree(send));
  MCCLCHECK(mcclMemFree(recv));
  CUDACHECK(cudaEventDestroy(g.start));
  CUDACHECK(cudaEventDestroy(g.stop));
  CUDACHECK(cudaStreamDestroy(g.stream));
  MCCLCHECK(mcclLabCommDestroy(g.comm));
  free(hostBuf);
  unsetenv("MCCL_ALGO");
  unsetenv("MCCL_PROTO");
  return mcclSuccess;
}

int main(int argc, char** argv) {
  sim = strcmp(MCCL_BACKEND_NAME, "sim") == 0;
  parseOptions(argc, argv);
  if (opt.graph && (!cudaStreamBeginCapture || !cudaStreamEndCapture || !cudaGraphInstantiateWithFlags ||
                    !cudaGraphLaunch || !cudaGraphExecDestroy || !cudaGraphDestroy)) {
    fprintf(stderr, "-G: this CUDA runtime has no graph calls\n");
    return 2;
  }
  if (opt.shm) {  // before any communicator: both libraries read these once
    setenv("MCCL_P2P_DISABLE", "1", 1);
    setenv("NCCL_P2P_DISABLE", "1", 1);
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int ndev = 0, rc = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    if (rank == 0) printf("# lab 07 bench: skipped, no CUDA device\n");
  } else if (nranks > MCCL_LAB_MAX_RANKS) {
    if (rank == 0) printf("# lab 07 bench: at most %d ranks\n", MCCL_LAB_MAX_RANKS);
    rc = 2;
  } else {
    mcclResult_t r = run(argc, argv);
    if (r != mcclSuccess) {
      fprintf(stderr, "rank %d: bench failed: %s\n", rank, mcclGetErrorString(r));
      rc = 1;
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (totalWrong > 0) {  // as nccl-tests: wrong data fails the run (the count is the same on every rank)
      if (rank == 0) fprintf(stderr, "lab 07 bench: %ld wrong elements: FAILED\n", totalWrong);
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}
