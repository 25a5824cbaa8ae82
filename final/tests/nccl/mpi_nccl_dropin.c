// A program written only against NCCL's nccl.h and linked with -lnccl, as any NCCL client is; the
// build links it to minccl's libnccl.so.2 (final/nccl.mk). Run under mpirun, one device per rank.
// It reports in the repository's test format without linking any of minccl's code (nccl_test_harness.h).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <time.h>
#include "nccl_test_harness.h"

static ncclComm_t comm;  // the world communicator, made by test_init

// ---- element conversions (values are small integers, exact in every type) -----------------------
// fp8 (OCP E4M3: bias 7, no infinities; E5M2: bias 15): exact values only, so no rounding is needed.
static uint8_t toFp8(double v, int manBits, int bias) {
  if (v == 0) return 0;
  uint8_t sign = v < 0 ? 0x80 : 0;
  int e = 0;
  double m = frexp(fabs(v), &e);  // |v| = m * 2^e, 0.5 <= m < 1
  int exp = e - 1 + bias;
  if (exp <= 0)  // subnormal: |v| = mant * 2^(1 - bias - manBits)
    return sign | (uint8_t)lrint(ldexp(fabs(v), bias - 1 + manBits));
  return sign | (uint8_t)(exp << manBits) | (uint8_t)lrint(ldexp(m * 2 - 1, manBits));
}
static double fromFp8(uint8_t b, int manBits, int bias) {
  int exp = (b & 0x7f) >> manBits, mant = b & ((1 << manBits) - 1);
  double v = exp == 0 ? ldexp(mant, 1 - bias - manBits) : ldexp(1.0 + ldexp(mant, -manBits), exp - bias);
  return b & 0x80 ? -v : v;
}
static uint16_t toHalf(double v) {  // 0 <= v < 2048, a multiple of 1/8
  if (v == 0) return 0;
  int e = 0;
  double m = frexp(v, &e);  // v = m * 2^e, 0.5 <= m < 1
  return (uint16_t)(((e - 1 + 15) << 10) | ((uint32_t)ldexp(m * 2 - 1, 10) & 0x3ff));
}
static double fromHalf(uint16_t h) {
  int e = (h >> 10) & 0x1f;
  if (e == 0) return ldexp(h & 0x3ff, -24);
  return ldexp(1.0 + (h & 0x3ff) / 1024.0, e - 15);
}
static size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}
static void put(void* buf, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclInt8:
      ((int8_t*)buf)[i] = (int8_t)v;
      break;
    case ncclUint8:
      ((uint8_t*)buf)[i] = (uint8_t)v;
      break;
    case ncclInt32:
      ((int32_t*)buf)[i] = (int32_t)v;
      break;
    case ncclUint32:
      ((uint32_t*)buf)[i] = (uint32_t)v;
      break;
    case ncclInt64:
      ((int64_t*)buf)[i] = (int64_t)v;
      break;
    case ncclUint64:
      ((uint64_t*)buf)[i] = (uint64_t)v;
      break;
    case ncclFloat16:
      ((uint16_t*)buf)[i] = toHalf(v);
      break;
    case ncclFloat32:
      ((float*)buf)[i] = (float)v;
      break;
    case ncclFloat64:
      ((double*)buf)[i] = v;
      break;
    case ncclBfloat16:
      ((uint16_t*)buf)[i] = ncclTestToBf16((float)v);
      break;
    case ncclFloat8e4m3:
      ((uint8_t*)buf)[i] = toFp8(v, 3, 7);
      break;
    case ncclFloat8e5m2:
      ((uint8_t*)buf)[i] = toFp8(v, 2, 15);
      break;
    default:
      break;
  }
}
static double get(const void* buf, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclInt8:
      return ((const int8_t*)buf)[i];
    case ncclUint8:
      return ((const uint8_t*)buf)[i];
    case ncclInt32:
      return ((const int32_t*)buf)[i];
    case ncclUint32:
      return ((const uint32_t*)buf)[i];
    case ncclInt64:
      return (double)((const int64_t*)buf)[i];
    case ncclUint64:
      return (double)((const uint64_t*)buf)[i];
    case ncclFloat16:
      return fromHalf(((const uint16_t*)buf)[i]);
    case ncclFloat32:
      return ((const float*)buf)[i];
    case ncclFloat64:
      return ((const double*)buf)[i];
    case ncclBfloat16:
      return ncclTestFromBf16(((const uint16_t*)buf)[i]);
    case ncclFloat8e4m3:
      return fromFp8(((const uint8_t*)buf)[i], 3, 7);
    case ncclFloat8e5m2:
      return fromFp8(((const uint8_t*)buf)[i], 2, 15);
    default:
      return NAN;
  }
}
static const char* typeName(ncclDataType_t t) {
  static const char* n[] = {"int8", "uint8", "int32",  "uint32", "int64",  "uint64",
                            "half", "float", "double", "bf16",   "f8e4m3", "f8e5m2"};
  return (int)t >= 0 && (int)t < ncclNumTypes ? n[t] : "?";
}
static int isFp8(ncclDataType_t t) {
  return t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}
static int isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || isFp8(t);
}

// Rank r's element i: 1..4, so products over 4 ranks stay within int8; fp8: 1..2, so sums over up to 4
// ranks and products stay exact in E5M2's 2-bit significand (and averages over 2 or 4 ranks).
static double valueT(int r, size_t i, ncclDataType_t t) {
  if (isFp8(t)) return (double)((i * 7 + (size_t)r * 3) % 2 + 1);
  return (double)((i * 7 + (size_t)r * 3) % 4 + 1);
}
static double value(int r, size_t i) {
  return valueT(r, i, ncclFloat32);
}

static double expected(ncclRedOp_t op, ncclDataType_t t, size_t i) {
  double acc = valueT(0, i, t);
  for (int r = 1; r < nranks; r++) {
    double v = valueT(r, i, t);
    if (op == ncclSum || op == ncclAvg)
      acc += v;
    else if (op == ncclProd)
      acc *= v;
    else if (op == ncclMax)
      acc = v > acc ? v : acc;
    else
      acc = v < acc ? v : acc;
  }
  if (op == ncclAvg) acc = isFloat(t) ? acc / nranks : floor(acc / nranks);  // NCCL: integer division
  return acc;
}

// One allreduce of count elements, checked everywhere; in place or not. Returns 0 when correct.
static int allreduceChecked(ncclComm_t c, ncclDataType_t t, ncclRedOp_t op, size_t count, int inPlace, void* dsend,
                            void* drecv) {
  size_t bytes = count * typeSize(t);
  void* host = malloc(bytes ? bytes : 1);
  int bad = 0;
  if (!host) {
    FAILF("malloc");
    return 1;
  }
  for (size_t i = 0; i < count; i++) put(host, t, i, valueT(rank, i, t));
  void* src = inPlace ? drecv : dsend;
  if (cudaMemcpyAsync(src, host, bytes, cudaMemcpyHostToDevice, stream) != cudaSuccess) {
    FAILF("cudaMemcpy to device");
    bad = 1;
    goto out;
  }
  ncclResult_t r = ncclAllReduce(src, drecv, count, t, op, c, stream);
  if (r != ncclSuccess) {
    FAILF("ncclAllReduce(%s, op %d, count %zu): %s", typeName(t), (int)op, count, ncclGetErrorString(r));
    bad = 1;
    goto out;
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaMemcpy(host, drecv, bytes, cudaMemcpyDeviceToHost)) {
    FAILF("synchronise / copy back");
    bad = 1;
    goto out;
  }
  for (size_t i = 0; i < count; i++) {
    double want = expected(op, t, i), got = get(host, t, i);
    if (got != want) {
      FAILF("allreduce %s op %d count %zu %s: element %zu is %g, expected %g", typeName(t), (int)op, count,
            inPlace ? "in place" : "out of place", i, got, want);
      bad = 1;
      break;
    }
  }
out:
  free(host);
  return bad;
}

// ---- tests -----------------------------------------------------------------------------------------
static void test_version(void) {
  int v = 0;
  CHECK_NCCL(ncclGetVersion(&v));
  if (v != NCCL_VERSION(2, 28, 9)) FAILF("ncclGetVersion reports %d, expected 22809", v);
  EXPECT_NCCL(ncclGetVersion(NULL), ncclInvalidArgument);
}

// The library this program was linked with is minccl's: it exports mcclDropinCalls, NCCL does not.
static void test_served_by_minccl(void) {
  unsigned long long (*calls)(void) = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "mcclDropinCalls");
  if (!calls)
    FAILF("mcclDropinCalls is not defined: this is not minccl's libnccl.so.2");
  else if (calls() == 0)
    FAILF("mcclDropinCalls() is 0 after ncclGetVersion");
}

static void test_init(void) {
  CHECK_NCCL(ncclTestCommInit(&comm));
  int n = -1, r = -1, d = -1, cur = -2;
  CHECK_NCCL(ncclCommCount(comm, &n));
  CHECK_NCCL(ncclCommUserRank(comm, &r));
  CHECK_NCCL(ncclCommCuDevice(comm, &d));
  CHECK_CUDA(cudaGetDevice(&cur));
  if (n != nranks || r != rank || d != cur)
    FAILF("count %d rank %d device %d, expected %d %d %d", n, r, d, nranks, rank, cur);
  ncclResult_t async = ncclInternalError;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess) FAILF("ncclCommGetAsyncError: %s", ncclGetErrorString(async));
}

#define NEED_COMM() \
  if (!comm) SKIPF("no communicator (test_init failed)")

static void test_allreduce_all(void) {
  NEED_COMM();
  const size_t counts[] = {1, 1031, 70000};
  size_t maxBytes = 70000 * 8;
  void *dsend = NULL, *drecv = NULL;
  CHECK_CUDA(cudaMalloc(&dsend, maxBytes));
  CHECK_CUDA(cudaMalloc(&drecv, maxBytes));
  for (int t = 0; t < ncclNumTypes && status != 1; t++)
    for (int op = 0; op < ncclNumOps && status != 1; op++)
      for (int c = 0; c < 3 && status != 1; c++)  // the large count (ring chunks) in float32 only: the sim is slow
        if ((c < 2 || t == ncclFloat32) && !(isFp8((ncclDataType_t)t) && nranks > 4))
          for (int inPlace = 0; inPlace < 2 && status != 1; inPlace++)
            (void)allreduceChecked(comm, (ncclDataType_t)t, (ncclRedOp_t)op, counts[c], inPlace, dsend, drecv);
  cudaFree(dsend);
  cudaFree(drecv);
}

// Types past fp8 and ops that were never created are refused before anything runs.
static void test_allreduce_refused(void) {
  NEED_COMM();
  void* d = NULL;
  CHECK_CUDA(cudaMalloc(&d, 64));
  EXPECT_NCCL(ncclAllReduce(d, d, 8, (ncclDataType_t)ncclNumTypes, ncclSum, comm, stream), ncclInvalidArgument);
  EXPECT_NCCL(ncclAllReduce(d, d, 8, (ncclDataType_t)-1, ncclSum, comm, stream), ncclInvalidArgument);
  EXPECT_NCCL(ncclAllReduce(d, d, 8, ncclFloat32, (ncclRedOp_t)(ncclNumOps + 3), comm, stream), ncclInvalidArgument);
  EXPECT_NCCL(ncclAllReduce(d, d, 8, ncclFloat32, ncclSum, NULL, stream), ncclInvalidArgument);
  cudaFree(d);
}

// The one call of nccl.h minccl does not serve warns, naming itself.
static void test_unimplemented(void) {
  NEED_COMM();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // nccl.h marks it so; programs still call it
  ncclResetDebugInit();
#pragma GCC diagnostic pop
  const char* last = ncclGetLastError(comm);
  if (last == NULL || strstr(last, "ncclResetDebugInit is not implemented") == NULL)
    FAILF("ncclResetDebugInit's warning: %s", last ? last : "(NULL)");
}

// Shrink without the last rank, which does not call it: the survivors' communicator counts one rank
// fewer, keeps their order and runs a checked allreduce; the parent goes on working for everybody.
static void test_shrink(void) {
  NEED_COMM();
  const int last = nranks - 1;
  ncclComm_t sub = NULL;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  EXPECT_NCCL(ncclCommShrink(comm, (int[]){rank}, 1, &sub, &cfg, NCCL_SHRINK_DEFAULT), ncclInvalidUsage);  // itself
  EXPECT_NCCL(ncclCommShrink(comm, (int[]){nranks}, 1, &sub, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_NCCL(ncclCommShrink(comm, (int[]){last}, 1, &sub, NULL, 7), ncclInvalidArgument);
  if (sub != NULL) FAILF("a refused ncclCommShrink wrote a communicator");
  if (rank != last) {
    CHECK_NCCL(ncclCommShrink(comm, (int[]){last}, 1, &sub, &cfg, NCCL_SHRINK_DEFAULT));
    int r = -1, n = -1;
    if (sub) {
      CHECK_NCCL(ncclCommUserRank(sub, &r));
      CHECK_NCCL(ncclCommCount(sub, &n));
    }
    if (r != rank || n != nranks - 1) FAILF("shrunk: rank %d of %d, expected %d of %d", r, n, rank, nranks - 1);
    void* d = NULL;
    CHECK_CUDA(cudaMalloc(&d, 4096 * 4));
    nranks--;  // the expected values are the survivors' (their ranks are unchanged), as allreduceChecked reads them
    if (sub) (void)allreduceChecked(sub, ncclFloat32, ncclSum, 4096, 1, d, d);
    nranks++;
    cudaFree(d);
    if (sub) CHECK_NCCL(ncclCommDestroy(sub));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  void* d = NULL;
  CHECK_CUDA(cudaMalloc(&d, 1024 * 4));
  (void)allreduceChecked(comm, ncclInt32, ncclSum, 1024, 1, d, d);
  cudaFree(d);
}

// ---- AlltoAll, Gather, Scatter -------------------------------------------------------------------
// Byte i of the block `from` sends to `to`: moved, never reduced, so any type's bytes will do.
static unsigned char blockByte(int from, int to, size_t i, int salt) {
  return (unsigned char)((i * 131 + (size_t)from * 31 + (size_t)to * 7 + (size_t)salt * 17) % 251);
}
#define POISON 0x5a

// kind 0 AlltoAll, 1 Gather, 2 Scatter, on nranks blocks of count elements; in place: Gather's sendbuff
// is recvbuff + rank * count, Scatter's recvbuff is sendbuff + rank * count. Both buffers (span bytes
// each) are checked whole after the call: the outputs, and poison everywhere else. p: use pncclX.
static const char* const a2aName[3] = {"alltoall", "gather", "scatter"};
static int a2aChecked(int kind, ncclDataType_t t, size_t count, int root, int inPlace, int p, char* dsend, char* drecv,
                      size_t span) {
  const size_t bytes = count * typeSize(t), total = bytes * (size_t)nranks;
  unsigned char *img = malloc(4 * span), *sImg = img, *rImg = img + span, *sGot = img + 2 * span,
                *rGot = img + 3 * span;
  if (!img) {
    FAILF("malloc");
    return 1;
  }
  const int salt = kind * 1000 + (int)t * 10 + (int)count % 10;
  memset(img, POISON, 2 * span);
  unsigned char *in = sImg, *out = rImg;
  if (inPlace && kind == 1) in = rImg + (size_t)rank * bytes;
  if (inPlace && kind == 2) out = sImg + (size_t)rank * bytes;
  for (int q = 0; q < nranks; q++)  // the input
    for (size_t i = 0; i < bytes; i++) {
      if (kind == 0) in[(size_t)q * bytes + i] = blockByte(rank, q, i, salt);
      if (kind == 1 && q == 0) in[i] = blockByte(rank, root, i, salt);
      if (kind == 2 && rank == root) in[(size_t)q * bytes + i] = blockByte(root, q, i, salt);
    }
  int bad = 1;
  if (cudaMemcpyAsync(dsend, sImg, span, cudaMemcpyHostToDevice, stream) != cudaSuccess ||
      cudaMemcpyAsync(drecv, rImg, span, cudaMemcpyHostToDevice, stream) != cudaSuccess) {
    FAILF("cudaMemcpy to device");
    goto out;
  }
  char *din = dsend + (in - sImg), *dout = drecv + (out - rImg);
  if (inPlace && kind == 1) din = drecv + (in - rImg);
  if (inPlace && kind == 2) dout = dsend + (out - sImg);
  ncclResult_t r = kind == 0   ? (p ? pncclAlltoAll : ncclAlltoAll)(din, dout, count, t, comm, stream)
                   : kind == 1 ? (p ? pncclGather : ncclGather)(din, dout, count, t, root, comm, stream)
                               : (p ? pncclScatter : ncclScatter)(din, dout, count, t, root, comm, stream);
  if (r != ncclSuccess) {
    FAILF("%s %s count %zu: %s (%s)", a2aName[kind], typeName(t), count, ncclGetErrorString(r), ncclGetLastError(NULL));
    goto out;
  }
  for (int q = 0; q < nranks; q++)  // what the call must leave
    for (size_t i = 0; i < bytes; i++) {
      if (kind == 0) out[(size_t)q * bytes + i] = blockByte(q, rank, i, salt);
      if (kind == 1 && rank == root) out[(size_t)q * bytes + i] = blockByte(q, root, i, salt);
      if (kind == 2 && q == 0) out[i] = blockByte(root, rank, i, salt);
    }
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpy(sGot, dsend, span, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(rGot, drecv, span, cudaMemcpyDeviceToHost) != cudaSuccess) {
    FAILF("synchronise / copy back");
    goto out;
  }
  bad = 0;
  for (size_t i = 0; i < 2 * span && !bad; i++)
    if (sGot[i] != sImg[i]) {
      FAILF("%s %s count %zu root %d %s: %s byte %zu is 0x%02x, expected 0x%02x (block bytes %zu)", a2aName[kind],
            typeName(t), count, root, inPlace ? "in place" : "out of place", i < span ? "sendbuff" : "recvbuff",
            i % span, sGot[i], sImg[i], total);
      bad = 1;
    }
out:
  free(img);
  return bad;
}

// Every type, counts 1, 7, 1023 and 4099 (not a multiple of 16 bytes), roots 0 and last, in place or
// not; a few through the pncclX names.
static void test_alltoall_gather_scatter(void) {
  NEED_COMM();
  static const size_t counts[] = {1, 7, 1023, 4099};
  const size_t span = 4099 * 8 * (size_t)nranks + 64;
  char *dsend = NULL, *drecv = NULL;
  CHECK_CUDA(cudaMalloc((void**)&dsend, span));
  CHECK_CUDA(cudaMalloc((void**)&drecv, span));
  int k = 0;
  for (int kind = 0; kind < 3 && status != 1; kind++)
    for (int t = 0; t < ncclNumTypes && status != 1; t++, k++)
      (void)a2aChecked(kind, (ncclDataType_t)t, counts[(t + kind) % 4], k % 2 ? nranks - 1 : 0,
                       kind != 0 && (t / 2) % 2, k % 5 == 0, dsend, drecv, span);
  // Taken as NCCL takes it: AlltoAll with sendbuff == recvbuff (nccl-tests' in-place rows). What lands
  // is not defined on more than one rank (the peers' blocks land while ours are sent), so it runs on a
  // communicator of one rank each (a split by rank), where the block stays as it was.
  ncclComm_t self = NULL;
  CHECK_NCCL(ncclCommSplit(comm, rank, 0, &self, NULL));
  const unsigned char pattern[4] = {1, 2, 3, 4};
  unsigned char back[4] = {0};
  CHECK_CUDA(cudaMemcpy(dsend, pattern, 4, cudaMemcpyHostToDevice));
  if (self) EXPECT_NCCL(ncclAlltoAll(dsend, dsend, 4, ncclInt8, self, stream), ncclSuccess);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaMemcpy(back, dsend, 4, cudaMemcpyDeviceToHost));
  if (memcmp(back, pattern, 4) != 0) FAILF("in-place AlltoAll on one rank changed its block");
  if (self) CHECK_NCCL(ncclCommDestroy(self));
  // Refused: a root out of range, AlltoAll buffers overlapping without being equal, count x type size
  // past 2^63 bytes.
  EXPECT_NCCL(ncclGather(dsend, drecv, 4, ncclInt8, nranks, comm, stream), ncclInvalidArgument);
  EXPECT_NCCL(ncclScatter(dsend, drecv, 4, ncclInt8, -1, comm, stream), ncclInvalidArgument);
  EXPECT_NCCL(ncclAlltoAll(dsend, dsend + 1, 4, ncclInt8, comm, stream), ncclInvalidArgument);
  EXPECT_NCCL(ncclAlltoAll(dsend, drecv, (size_t)1 << 63, ncclInt8, comm, stream), ncclInvalidArgument);
  cudaFree(dsend);
  cudaFree(drecv);
}

// ---- PreMulSum operations -------------------------------------------------------------------------
// Rank r's scalar: 1 + (r & 1), so the ranks' scalars differ.
static double preMulScalar(int r) {
  return 1.0 + (double)(r & 1);
}

// One allreduce (kind 0) or reduce-scatter (kind 1) of count elements per rank with this rank's
// PreMulSum operation (its scalar in host memory, or in device memory), destroyed right after the call.
static void preMulSumChecked(int kind, ncclDataType_t t, int onDevice, size_t count, char* dsend, char* drecv) {
  const size_t es = typeSize(t), inN = kind == 1 ? count * (size_t)nranks : count;
  char* host = malloc(inN * es + 8);
  if (!host) {
    FAILF("malloc");
    return;
  }
  void* dscalar = NULL;
  ncclRedOp_t op;
  put(host, t, 0, preMulScalar(rank));
  if (onDevice) {
    if (cudaMalloc(&dscalar, 8) != cudaSuccess ||
        cudaMemcpyAsync(dscalar, host, es, cudaMemcpyHostToDevice, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      FAILF("device scalar");
      goto out;
    }
  }
  ncclResult_t r = ncclRedOpCreatePreMulSum(&op, onDevice ? dscalar : (void*)host, t,
                                            onDevice ? ncclScalarDevice : ncclScalarHostImmediate, comm);
  if (r != ncclSuccess) {
    FAILF("ncclRedOpCreatePreMulSum(%s, %s): %s", typeName(t), onDevice ? "device" : "host", ncclGetErrorString(r));
    goto out;
  }
  for (size_t i = 0; i < inN; i++) put(host, t, i, valueT(rank, i, t));
  if (cudaMemcpyAsync(dsend, host, inN * es, cudaMemcpyHostToDevice, stream) != cudaSuccess) FAILF("cudaMemcpy");
  r = kind == 0 ? ncclAllReduce(dsend, drecv, count, t, op, comm, stream)
                : ncclReduceScatter(dsend, drecv, count, t, op, comm, stream);
  ncclResult_t d = ncclRedOpDestroy(op, comm);
  if (r != ncclSuccess || d != ncclSuccess) {
    FAILF("%s %s premulsum: %s, destroy %s", kind ? "reducescatter" : "allreduce", typeName(t), ncclGetErrorString(r),
          ncclGetErrorString(d));
    goto out;
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpy(host, drecv, count * es, cudaMemcpyDeviceToHost) != cudaSuccess) {
    FAILF("synchronise / copy back");
    goto out;
  }
  for (size_t i = 0; i < count; i++) {
    const size_t j = kind == 1 ? (size_t)rank * count + i : i;
    double want = 0;
    for (int q = 0; q < nranks; q++) want += preMulScalar(q) * valueT(q, j, t);
    if (get(host, t, i) != want) {
      FAILF("%s %s premulsum (%s scalar) count %zu: element %zu is %g, expected %g",
            kind ? "reducescatter" : "allreduce", typeName(t), onDevice ? "device" : "host", count, i, get(host, t, i),
            want);
      break;
    }
  }
  // Destroyed: refused by the next call and by a second destroy.
  EXPECT_NCCL(ncclAllReduce(dsend, drecv, count, t, op, comm, stream), ncclInvalidArgument);
  EXPECT_NCCL(ncclRedOpDestroy(op, comm), ncclInvalidArgument);
out:
  if (dscalar) cudaFree(dscalar);
  free(host);
}

static void test_premulsum(void) {
  NEED_COMM();
  static const ncclDataType_t types[] = {ncclFloat32, ncclFloat16, ncclBfloat16,   ncclFloat64,
                                         ncclInt32,   ncclUint8,   ncclFloat8e4m3, ncclFloat8e5m2};
  const size_t count = 1031;
  char* d = NULL;
  CHECK_CUDA(cudaMalloc((void**)&d, 2 * count * 8 * (size_t)nranks));
  for (int ti = 0; ti < 8 && status != 1; ti++)
    for (int kind = 0; kind < 2 && status != 1; kind++)
      for (int onDevice = 0; onDevice < 2 && status != 1; onDevice++)
        if (!(isFp8(types[ti]) && nranks > 2))  // sums of up to 2 x 2 + 2 x 1: exact in fp8 at 2 ranks
          preMulSumChecked(kind, types[ti], onDevice, count, d, d + count * 8 * (size_t)nranks);
  ncclRedOp_t op;
  float scalar = 2.0f;
  EXPECT_NCCL(ncclRedOpCreatePreMulSum(&op, NULL, ncclFloat32, ncclScalarHostImmediate, comm), ncclInvalidArgument);
  EXPECT_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, NULL), ncclInvalidArgument);
  EXPECT_NCCL(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  EXPECT_NCCL(ncclAllReduce(d, d, 4, ncclFloat16, op, comm, stream), ncclInvalidArgument);  // created for float
  CHECK_NCCL(pncclRedOpDestroy(op, comm));
  cudaFree(d);
}

// ---- ncclGroupSimulateEnd -------------------------------------------------------------------------
// A group simulated: an estimate above 0 and nothing launched; then bad simInfo.
static void test_group_simulate_end(void) {
  NEED_COMM();
  const size_t count = 4096;
  char* d = NULL;
  char* host = malloc(count * 4);
  if (!host) SKIPF("malloc");
  if (cudaMalloc((void**)&d, 2 * count * 4) != cudaSuccess) {
    free(host);
    FAILF("cudaMalloc");
    return;
  }
  memset(host, POISON, count * 4);
  if (cudaMemcpyAsync(d + count * 4, host, count * 4, cudaMemcpyHostToDevice, stream) != cudaSuccess) FAILF("copy");
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_NCCL(ncclGroupStart(), ncclSuccess);
  EXPECT_NCCL(ncclAllReduce(d, d + count * 4, count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  EXPECT_NCCL(ncclGather(d, d + count * 4, 16, ncclFloat32, 0, comm, stream), ncclSuccess);
  EXPECT_NCCL(ncclGroupSimulateEnd(&sim), ncclSuccess);
  if (!(sim.estimatedTime > 0)) FAILF("estimatedTime %g, expected > 0", (double)sim.estimatedTime);
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpy(host, d + count * 4, count * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    FAILF("synchronise / copy back");
  for (size_t i = 0; i < count * 4; i++)
    if ((unsigned char)host[i] != POISON) {
      FAILF("a simulated group wrote byte %zu of the output", i);
      break;
    }
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  EXPECT_NCCL(ncclGroupStart(), ncclSuccess);
  EXPECT_NCCL(ncclGroupSimulateEnd(&bad), ncclInvalidArgument);
  EXPECT_NCCL(ncclGroupStart(), ncclSuccess);
  EXPECT_NCCL(ncclGroupSimulateEnd(NULL), ncclInvalidArgument);
  EXPECT_NCCL(ncclGroupEnd(), ncclInvalidUsage);  // each refused simulation still ended its group
  cudaFree(d);
  free(host);
}

// The drop-in's collectives besides AllReduce, checked against the CPU reference: 0 AllGather,
// 1 ReduceScatter, 2 Broadcast, 3 Reduce; in place or not. Returns 0 when correct.
static const char* const collName[4] = {"allgather", "reducescatter", "broadcast", "reduce"};
static int collChecked(int kind, ncclDataType_t t, ncclRedOp_t op, int root, size_t count, int inPlace, char* dmem) {
  const size_t es = typeSize(t), bytes = count * es, big = bytes * (size_t)nranks;
  const size_t inN = kind == 1 ? count * nranks : count, outN = kind == 0 ? count * nranks : count;
  char* host = malloc(big * 2);
  if (!host) {
    FAILF("malloc");
    return 1;
  }
  // send at dmem, recv at dmem + big; in place: AllGather's input is the rank's block of recv,
  // ReduceScatter's output the rank's block of send, Broadcast's and Reduce's one buffer.
  char *send = dmem, *recv = dmem + big, *in = send, *out = recv;
  if (inPlace) {
    if (kind == 0)
      in = recv + (size_t)rank * bytes;
    else if (kind == 1)
      out = send + (size_t)rank * bytes;
    else
      in = out = recv;
  }
  int bad = 1;
  memset(host, 0x5a, big);
  if (cudaMemcpyAsync(recv, host, big, cudaMemcpyHostToDevice, stream) != cudaSuccess) goto fail;
  for (size_t i = 0; i < inN; i++) put(host, t, i, value(rank, i));
  if (cudaMemcpyAsync(in, host, inN * es, cudaMemcpyHostToDevice, stream) != cudaSuccess) goto fail;
  ncclResult_t r = kind == 0   ? ncclAllGather(in, out, count, t, comm, stream)
                   : kind == 1 ? ncclReduceScatter(in, out, count, t, op, comm, stream)
                   : kind == 2 ? ncclBroadcast(in, out, count, t, root, comm, stream)
                               : ncclReduce(in, out, count, t, op, root, comm, stream);
  if (r != ncclSuccess) {
    FAILF("%s %s count %zu: %s (%s)", collName[kind], typeName(t), count, ncclGetErrorString(r),
          ncclGetLastError(NULL));
    goto out;
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaMemcpy(host, out, outN * es, cudaMemcpyDeviceToHost))
    goto fail;
  bad = 0;
  if (kind == 3 && rank != root) goto out;  // Reduce writes only the root's output
  for (size_t i = 0; i < outN && !bad; i++) {
    double want = kind == 0   ? value((int)(i / count), i % count)
                  : kind == 1 ? expected(op, t, (size_t)rank * count + i)
                  : kind == 2 ? value(root, i)
                              : expected(op, t, i);
    double got = get(host, t, i);
    if (got != want) {
      FAILF("%s %s op %d root %d count %zu %s: element %zu is %g, expected %g", collName[kind], typeName(t), (int)op,
            root, count, inPlace ? "in place" : "out of place", i, got, want);
      bad = 1;
    }
  }
  goto out;
fail:
  FAILF("%s: cudaMemcpy / synchronise", collName[kind]);
out:
  free(host);
  return bad;
}

static void test_other_collectives(void) {
  NEED_COMM();
  static const ncclDataType_t types[] = {ncclFloat32, ncclInt32, ncclBfloat16};
  const size_t count = 1001;
  char* d = NULL;
  CHECK_CUDA(cudaMalloc((void**)&d, 2 * count * 8 * (size_t)nranks));
  int k = 0;
  for (int kind = 0; kind < 4 && status != 1; kind++)
    for (int ti = 0; ti < 3 && status != 1; ti++)
      for (int inPlace = 0; inPlace < 2 && status != 1; inPlace++, k++)
        (void)collChecked(kind, types[ti], k % 2 ? ncclMax : ncclSum, k % nranks, count, inPlace, d);
  cudaFree(d);
}

// One group: send count floats of d to `to`, receive count from `from` into d + count; check them.
static void sendRecvChecked(float* d, float* h, size_t count, int to, int from) {
  for (size_t i = 0; i < count; i++) h[i] = (float)(rank * 10000 + (int)i);
  if (cudaMemcpyAsync(d, h, count * sizeof(float), cudaMemcpyHostToDevice, stream) != cudaSuccess) FAILF("cudaMemcpy");
  ncclResult_t r1 = ncclGroupStart(), r2 = ncclSend(d, count, ncclFloat32, to, comm, stream);
  ncclResult_t r3 = ncclRecv(d + count, count, ncclFloat32, from, comm, stream), r4 = ncclGroupEnd();
  if (r1 || r2 || r3 || r4)
    FAILF("grouped ncclSend to %d / ncclRecv from %d: %s %s %s %s (%s)", to, from, ncclGetErrorString(r1),
          ncclGetErrorString(r2), ncclGetErrorString(r3), ncclGetErrorString(r4), ncclGetLastError(NULL));
  else if (cudaStreamSynchronize(stream) != cudaSuccess ||
           cudaMemcpy(h, d + count, count * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
    FAILF("synchronise / copy back");
  else
    for (size_t i = 0; i < count; i++)
      if (h[i] != (float)(from * 10000 + (int)i)) {
        FAILF("sendrecv: element %zu is %g, expected %g from rank %d", i, h[i], (float)(from * 10000 + (int)i), from);
        break;
      }
}

// nccl-tests' sendrecv: send to (rank+1)%n and receive from (rank-1+n)%n in one group; then any
// peer: the reverse ring (send to prev, receive from next).
static void test_sendrecv(void) {
  NEED_COMM();
  const size_t count = 4099;
  float *d = NULL, *h = malloc(count * sizeof(float));
  if (!h) SKIPF("malloc");
  if (cudaMalloc((void**)&d, 2 * count * sizeof(float)) != cudaSuccess) {
    free(h);
    FAILF("cudaMalloc");
    return;
  }
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  sendRecvChecked(d, h, count, next, prev);
  sendRecvChecked(d, h, count, prev, next);
  cudaFree(d);
  free(h);
}

static void test_config_nonblocking(void) {
  ncclUniqueId id;
  if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  ncclComm_t c = NULL;
  EXPECT_NCCL(ncclCommInitRankConfig(&c, nranks, id, rank, &bad), ncclInvalidArgument);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "dropin-nonblocking";  // accepted and ignored
  cfg.minCTAs = 4;
  ncclResult_t r = ncclCommInitRankConfig(&c, nranks, id, rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    FAILF("non-blocking ncclCommInitRankConfig: %s", ncclGetErrorString(r));
    return;
  }
  ncclResult_t async = ncclInProgress;
  time_t start = time(NULL);
  while (async == ncclInProgress && time(NULL) - start < 60) CHECK_NCCL(ncclCommGetAsyncError(c, &async));
  if (async != ncclSuccess) FAILF("non-blocking init ended with %s", ncclGetErrorString(async));
  void* d = NULL;
  CHECK_CUDA(cudaMalloc(&d, 4096 * 4));
  if (async == ncclSuccess) (void)allreduceChecked(c, ncclInt32, ncclSum, 4096, 1, d, d);
  cudaFree(d);
  CHECK_NCCL(ncclCommDestroy(c));
}

// Non-blocking init that can never finish (rank 0 alone with an id whose other ranks never come):
// ncclCommAbort ends it at once, well inside the bootstrap timeout. Every rank runs it on its own id.
static void test_nonblocking_abort(void) {
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t c = NULL;
  EXPECT_NCCL(ncclCommInitRankConfig(&c, 2, id, 0, &cfg), ncclInProgress);
  if (c == NULL) return;
  ncclResult_t async = ncclSuccess;
  CHECK_NCCL(ncclCommGetAsyncError(c, &async));
  if (async != ncclInProgress) FAILF("a non-blocking init waiting for its peer reports %s", ncclGetErrorString(async));
  void* d = NULL;
  CHECK_CUDA(cudaMalloc(&d, 64));
  // Not ready: refused at once, not blocked until the init ends.
  EXPECT_NCCL(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, c, stream), ncclInvalidUsage);
  cudaFree(d);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_NCCL(ncclCommAbort(c));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  printf("# rank %d: ncclCommAbort of a non-blocking init in progress took %.1f ms\n", rank, ms);
  if (ms > 1000) FAILF("ncclCommAbort of a non-blocking init took %.0f ms", ms);
  EXPECT_NCCL(ncclCommGetAsyncError(c, &async), ncclInvalidArgument);  // the handle is gone
}

// Revoke: the collectives after it are refused on every rank, the handle stays for destroy.
static void test_revoke(void) {
  NEED_COMM();
  ncclComm_t sub = NULL;
  CHECK_NCCL(ncclCommSplit(comm, 0, rank, &sub, NULL));
  if (sub == NULL) return;
  EXPECT_NCCL(ncclCommRevoke(sub, 1), ncclInvalidArgument);
  CHECK_NCCL(ncclCommRevoke(sub, NCCL_REVOKE_DEFAULT));
  void* d = NULL;
  CHECK_CUDA(cudaMalloc(&d, 64));
  EXPECT_NCCL(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, sub, stream), ncclInvalidUsage);
  cudaFree(d);
  int n = 0;
  CHECK_NCCL(ncclCommCount(sub, &n));  // queries still answer
  if (n != nranks) FAILF("revoked communicator: count %d, expected %d", n, nranks);
  CHECK_NCCL(ncclCommDestroy(sub));
}

static void test_register(void) {
  NEED_COMM();
  void* d = NULL;
  void* handle = NULL;
  CHECK_CUDA(cudaMalloc(&d, 1 << 16));
  CHECK_NCCL(ncclCommRegister(comm, d, 1 << 16, &handle));
  if (!handle) FAILF("ncclCommRegister gave no handle");
  int bogus;
  EXPECT_NCCL(ncclCommDeregister(comm, &bogus), ncclInvalidArgument);
  CHECK_NCCL(ncclCommDeregister(comm, handle));
  EXPECT_NCCL(ncclCommRegister(comm, NULL, 16, &handle), ncclInvalidArgument);
  cudaFree(d);
}

static void test_window(void) {
  NEED_COMM();
  const size_t count = 1 << 16;
  void* buf = NULL;
  ncclWindow_t win = NULL;
  CHECK_NCCL(ncclMemAlloc(&buf, count * sizeof(float)));
  CHECK_NCCL(ncclCommWindowRegister(comm, buf, count * sizeof(float), &win, NCCL_WIN_COLL_SYMMETRIC));
  for (int op = 0; op < ncclNumOps && status != 1; op++)
    (void)allreduceChecked(comm, ncclFloat32, op, 1000, 1, buf, buf);
  (void)allreduceChecked(comm, ncclBfloat16, ncclSum, count, 1, buf, buf);
  CHECK_NCCL(ncclCommWindowDeregister(comm, win));
  CHECK_NCCL(ncclMemFree(buf));
}

// The time ncclGroupSimulateEnd gives one AllGather of `count` floats from d to d + count on c.
static float allGatherEstimate(ncclComm_t c, char* d, size_t count) {
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_NCCL(ncclGroupStart(), ncclSuccess);
  EXPECT_NCCL(ncclAllGather(d, d + count * 4, count, ncclFloat32, c, stream), ncclSuccess);
  EXPECT_NCCL(ncclGroupSimulateEnd(&sim), ncclSuccess);
  return sim.estimatedTime;
}

// config.CTAPolicy = NCCL_CTA_POLICY_ZERO: AllGather, Broadcast, AlltoAll, Gather and Scatter on a window give
// NCCL's results, in and out of place; ncclGroupSimulateEnd costs an AllGather on the window as the copy
// engines (not as the world communicator's default policy does), the same one on a plain buffer alike; a split
// keeps ZERO; a policy that is none of the three is refused.
static void test_cta_policy_zero(void) {
  NEED_COMM();
  ncclUniqueId id;
  if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclComm_t zc = NULL, sub = NULL, world = comm;
  cfg.CTAPolicy = 3;
  EXPECT_NCCL(ncclCommInitRankConfig(&zc, nranks, id, rank, &cfg), ncclInvalidArgument);
  cfg.CTAPolicy = NCCL_CTA_POLICY_ZERO;
  CHECK_NCCL(ncclCommInitRankConfig(&zc, nranks, id, rank, &cfg));
  const size_t span = 4099 * 8 * (size_t)nranks + 64, count = 4096;
  char *buf = NULL, *buf2 = NULL, *plain = NULL;
  ncclWindow_t win = NULL, win2 = NULL;
  CHECK_NCCL(ncclMemAlloc((void**)&buf, 2 * span));
  CHECK_NCCL(ncclMemAlloc((void**)&buf2, 2 * span));
  CHECK_CUDA(cudaMalloc((void**)&plain, 2 * span));
  CHECK_NCCL(ncclCommWindowRegister(zc, buf, 2 * span, &win, NCCL_WIN_COLL_SYMMETRIC));
  comm = zc;  // the checkers run on `comm`
  for (int inPlace = 0; inPlace < 2 && status != 1; inPlace++) {
    (void)collChecked(0, ncclFloat32, ncclSum, 0, 1001, inPlace, buf);
    (void)collChecked(2, ncclBfloat16, ncclSum, nranks - 1, 1001, inPlace, buf);
    for (int kind = 0; kind < 3 && status != 1; kind++)
      (void)a2aChecked(kind, ncclInt8 + kind * 3, 1023 + (size_t)kind, inPlace ? nranks - 1 : 0, inPlace && kind, 0,
                       buf, buf + span, span);
  }
  comm = world;
  const float onWindow = allGatherEstimate(zc, buf, count), byDefault = allGatherEstimate(world, buf, count);
  if (onWindow == byDefault) FAILF("AllGather on a window: estimated %g us with policy ZERO, as by default", onWindow);
  const float plainZero = allGatherEstimate(zc, plain, count), plainDefault = allGatherEstimate(world, plain, count);
  if (plainZero != plainDefault)
    FAILF("AllGather on a plain buffer: %g us with policy ZERO, %g by default (both kernels)", plainZero, plainDefault);
  CHECK_NCCL(ncclCommSplit(zc, 0, rank, &sub, NULL));
  CHECK_NCCL(ncclCommWindowRegister(sub, buf2, 2 * span, &win2, NCCL_WIN_COLL_SYMMETRIC));
  const float split = allGatherEstimate(sub, buf2, count);
  if (split != onWindow) FAILF("a split of a ZERO communicator: %g us, its parent %g (not inherited)", split, onWindow);
  CHECK_NCCL(ncclCommWindowDeregister(sub, win2));
  CHECK_NCCL(ncclCommDestroy(sub));
  CHECK_NCCL(ncclCommWindowDeregister(zc, win));
  CHECK_NCCL(ncclCommDestroy(zc));
  CHECK_NCCL(ncclMemFree(buf));
  CHECK_NCCL(ncclMemFree(buf2));
  cudaFree(plain);
}

// Split the world in one color with the ranks in reverse order, then with every rank NOCOLOR.
static void test_split(void) {
  NEED_COMM();
  ncclComm_t sub = NULL;
  CHECK_NCCL(ncclCommSplit(comm, 7, nranks - rank, &sub, NULL));
  int r = -1, n = -1;
  CHECK_NCCL(ncclCommUserRank(sub, &r));
  CHECK_NCCL(ncclCommCount(sub, &n));
  if (r != nranks - 1 - rank || n != nranks)
    FAILF("split: rank %d of %d, expected %d of %d", r, n, nranks - 1 - rank, nranks);
  void* d = NULL;
  CHECK_CUDA(cudaMalloc(&d, 4096 * 8));
  (void)allreduceChecked(sub, ncclFloat64, ncclMax, 4096, 1, d, d);
  cudaFree(d);
  CHECK_NCCL(ncclCommDestroy(sub));
  ncclComm_t none = (ncclComm_t)&r;
  CHECK_NCCL(ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &none, NULL));
  if (none != NULL) FAILF("NCCL_SPLIT_NOCOLOR gave a communicator");
}

static void test_finalize_destroy(void) {
  NEED_COMM();
  CHECK_NCCL(ncclCommFinalize(comm));
  void* d = NULL;
  CHECK_CUDA(cudaMalloc(&d, 64));
  EXPECT_NCCL(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, comm, stream), ncclInvalidUsage);
  ncclComm_t sub = NULL;
  EXPECT_NCCL(ncclCommSplit(comm, 0, rank, &sub, NULL), ncclInvalidUsage);  // as NCCL: finalized is over
  if (sub != NULL) FAILF("ncclCommSplit of a finalized communicator wrote one");
  cudaFree(d);
  CHECK_NCCL(ncclCommDestroy(comm));
  comm = NULL;
  EXPECT_NCCL(ncclCommDestroy(NULL), ncclSuccess);
  // A second communicator, ended by ncclCommAbort.
  ncclComm_t c;
  CHECK_NCCL(ncclTestCommInit(&c));
  CHECK_NCCL(ncclCommAbort(c));
}

// ---- the cases -----------------------------------------------------------------------------------
static const struct testCase cases[] = {
    {"version", test_version},
    {"served_by_minccl", test_served_by_minccl},
    {"init", test_init},
    {"allreduce_all_types_ops", test_allreduce_all},
    {"allreduce_refused", test_allreduce_refused},
    {"unimplemented_calls", test_unimplemented},
    {"other_collectives", test_other_collectives},
    {"alltoall_gather_scatter", test_alltoall_gather_scatter},
    {"premulsum", test_premulsum},
    {"group_simulate_end", test_group_simulate_end},
    {"sendrecv", test_sendrecv},
    {"config_nonblocking", test_config_nonblocking},
    {"nonblocking_abort", test_nonblocking_abort},
    {"revoke", test_revoke},
    {"shrink", test_shrink},
    {"register", test_register},
    {"window", test_window},
    {"cta_policy_zero", test_cta_policy_zero},
    {"split", test_split},
    {"finalize_destroy", test_finalize_destroy},
};

static void cleanup(void) {
  if (comm) ncclCommDestroy(comm);
}

int main(int argc, char** argv) {
  return ncclTestMain(argc, argv, "final/mpi_nccl_dropin", cases, (int)(sizeof(cases) / sizeof(cases[0])), cleanup);
}
