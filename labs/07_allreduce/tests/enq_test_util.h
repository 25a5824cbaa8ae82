// Lab 07 tests: one call of any of NCCL 2.28's collectives on one rank (AllReduce, Broadcast, Reduce,
// AllGather, ReduceScatter, AlltoAll, Gather, Scatter): where its input and output are (in place or
// not), its input, its PreMulSum operation when it has one, the call, and the check of its output
// against the CPU reference of ar_test_util.h. Shared by the one-process tests (a set of up to 4
// devices driven by one thread, enqSetRun), the mpirun ones (one rank a process, enqRunOnRank), lab
// 08's and final/'s.
//
// Inputs are ar_test_util.h's (seed, rank, element, type, op) values, so every rank checks its output
// alone; the functions that do not reduce move the values of the call's op as they are. A buffer of
// several blocks (ReduceScatter's and AlltoAll's input, the root's Scatter input) has block b filled
// with seed + b, so rank r's ReduceScatter output is the allreduce reference of seed + r, its AlltoAll
// block p is rank p's block r, and its Scatter output the root's block r. Outputs start poisoned
// (0xa5): an element a kernel misses, or writes where it must not (Reduce's non-roots), shows.
#ifndef ENQ_TEST_UTIL_H_
#define ENQ_TEST_UTIL_H_

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ar_test_util.h"
#include "mccl_collectives.h"
#include "mccl_test.h"

#define ENQ_POISON 0xa5

struct enqCall {
  int func;            // enum mcclFunc: Broadcast .. AllReduce, AlltoAll, Scatter, Gather
  mcclDataType_t t;    // the type
  mcclRedOp_t op;      // AllReduce, Reduce, ReduceScatter: a built-in operation or AR_PREMULSUM
  int scalarOnDevice;  // AR_PREMULSUM: the scalar in device memory (mcclScalarDevice), else host-immediate
  size_t count;        // NCCL's count (AllGather's sendcount, ReduceScatter's recvcount, per rank pair for AlltoAll)
  int root;            // Broadcast, Reduce, Gather, Scatter
  int inPlace;         // the call's in-place form (AlltoAll's is not defined: always out of place)
  uint64_t seed;
};

static const char* enqFuncName(int func) {
  switch (func) {
    case mcclFuncBroadcast:
      return "Broadcast";
    case mcclFuncReduce:
      return "Reduce";
    case mcclFuncAllGather:
      return "AllGather";
    case mcclFuncReduceScatter:
      return "ReduceScatter";
    case mcclFuncAllReduce:
      return "AllReduce";
    case mcclFuncAlltoAll:
      return "AlltoAll";
    case mcclFuncScatter:
      return "Scatter";
    default:
      return "Gather";
  }
}
static inline int enqReduces(int func) {
  return func == mcclFuncAllReduce || func == mcclFuncReduce || func == mcclFuncReduceScatter;
}
// The functions every test runs, in enum order.
static const int enqFuncs[] = {mcclFuncBroadcast, mcclFuncReduce,   mcclFuncAllGather, mcclFuncReduceScatter,
                               mcclFuncAllReduce, mcclFuncAlltoAll, mcclFuncScatter,   mcclFuncGather};
#define ENQ_NFUNCS 8

// Blocks of the send and recv buffers on `rank` (of count elements each).
static inline size_t enqSendBlocks(const struct enqCall* c, int rank, int nranks) {
  if (c->func == mcclFuncReduceScatter || c->func == mcclFuncAlltoAll) return (size_t)nranks;
  if (c->func == mcclFuncScatter) return rank == c->root ? (size_t)nranks : 0;
  return 1;
}
static inline size_t enqRecvBlocks(const struct enqCall* c, int rank, int nranks) {
  if (c->func == mcclFuncAllGather || c->func == mcclFuncAlltoAll) return (size_t)nranks;
  if (c->func == mcclFuncGather) return rank == c->root ? (size_t)nranks : 0;
  return 1;
}
static inline size_t enqBytes(const struct enqCall* c) {
  return c->count * mcclTypeSize(c->t);
}

// Where the call reads and writes on `rank`, given its send and recv buffers: in place, AllGather's and
// the root's Gather input is the rank's (the root's) block of the output, ReduceScatter's and the root's
// Scatter output the rank's (root's) block of the input, AllReduce's, Broadcast's and Reduce's the same
// buffer.
static inline void enqPlace(const struct enqCall* c, int rank, void* send, void* recv, void** in, void** out) {
  const size_t bytes = enqBytes(c);
  *in = send;
  *out = recv;
  if (!c->inPlace || c->func == mcclFuncAlltoAll) return;
  switch (c->func) {
    case mcclFuncAllGather:
      *in = (char*)recv + (size_t)rank * bytes;
      break;
    case mcclFuncGather:
      if (rank == c->root) *in = (char*)recv + (size_t)rank * bytes;
      break;
    case mcclFuncReduceScatter:
      *in = recv;
      *out = (char*)recv + (size_t)rank * bytes;
      break;
    case mcclFuncScatter:
      if (rank == c->root) {
        *in = recv;
        *out = (char*)recv + (size_t)rank * bytes;
      }
      break;
    default:
      *in = recv;
      break;
  }
}

// Set the rank's buffers up for the call (output poisoned, then the input, in place inside it) and
// return where the call reads and writes. host: scratch of at least both buffers' bytes. 0 or the
// failing line.
static inline int enqPrepare(const struct enqCall* c, int rank, int nranks, void* send, void* recv, void* host,
                             void** in, void** out) {
  enqPlace(c, rank, send, recv, in, out);
  const size_t bytes = enqBytes(c);
  const size_t inBlocks = enqSendBlocks(c, rank, nranks), outBlocks = enqRecvBlocks(c, rank, nranks);
  const int multiBlockIn =
      c->func == mcclFuncReduceScatter || c->func == mcclFuncAlltoAll || c->func == mcclFuncScatter;
  memset(host, ENQ_POISON, outBlocks * bytes);
  if (outBlocks * bytes > 0 && mcclTestCopyToDevice(recv, host, outBlocks * bytes) != cudaSuccess) return __LINE__;
  for (size_t b = 0; b < inBlocks; b++)
    arFill((char*)host + b * bytes, c->t, c->op, c->count, rank, c->seed + (multiBlockIn ? b : 0));
  if (inBlocks * bytes > 0 && mcclTestCopyToDevice(*in, host, inBlocks * bytes) != cudaSuccess) return __LINE__;
  return 0;
}

// The rank's PreMulSum operation for a call (its scalar, arPreMulScalar(rank), in the call's type, in host
// memory or in device memory at *devScalar, which the caller frees after the call).
static inline mcclResult_t enqCreateOp(const struct enqCall* c, mcclLabComm* comm, mcclRedOp_t* op, void** devScalar) {
  uint64_t bits = 0;
  *devScalar = NULL;
  mcclEltSet(c->t, &bits, 0, arPreMulScalar(comm->rank));
  if (!c->scalarOnDevice) return mcclLabRedOpCreatePreMulSum(op, &bits, c->t, mcclScalarHostImmediate, comm);
  if (cudaMalloc(devScalar, 8) != cudaSuccess || mcclTestCopyToDevice(*devScalar, &bits, 8) != cudaSuccess)
    return mcclUnhandledCudaError;
  return mcclLabRedOpCreatePreMulSum(op, *devScalar, c->t, mcclScalarDevice, comm);
}

// The call itself, as an application makes it, with the operation it needs (op: from enqCreateOp for
// AR_PREMULSUM).
static inline mcclResult_t enqIssueOp(const struct enqCall* c, mcclRedOp_t op, const void* in, void* out,
                                      mcclLabComm* comm, cudaStream_t stream) {
  switch (c->func) {
    case mcclFuncAllReduce:
      return mcclLabAllReduce(in, out, c->count, c->t, op, comm, stream);
    case mcclFuncBroadcast:
      return mcclLabBroadcast(in, out, c->count, c->t, c->root, comm, stream);
    case mcclFuncReduce:
      return mcclLabReduce(in, out, c->count, c->t, op, c->root, comm, stream);
    case mcclFuncAllGather:
      return mcclLabAllGather(in, out, c->count, c->t, comm, stream);
    case mcclFuncReduceScatter:
      return mcclLabReduceScatter(in, out, c->count, c->t, op, comm, stream);
    case mcclFuncAlltoAll:
      return mcclLabAlltoAll(in, out, c->count, c->t, comm, stream);
    case mcclFuncScatter:
      return mcclLabScatter(in, out, c->count, c->t, c->root, comm, stream);
    default:
      return mcclLabGather(in, out, c->count, c->t, c->root, comm, stream);
  }
}

// The first byte where got and want differ, described in why; 0 if none.
static inline int enqCompare(const void* got, const void* want, size_t bytes, size_t esize, const char* what, char* why,
                             size_t whyLen) {
  for (size_t i = 0; i < bytes; i++)
    if (((const unsigned char*)got)[i] != ((const unsigned char*)want)[i]) {
      snprintf(why, whyLen, "%s: element %zu (byte %zu): expected 0x%02x, got 0x%02x", what, i / esize, i,
               ((const unsigned char*)want)[i], ((const unsigned char*)got)[i]);
      return 1;
    }
  return 0;
}

// Check the rank's output after the call (out as enqPrepare returned it); 0 if right, else 1 with the
// first wrong element in why.
static inline int enqVerify(const struct enqCall* c, int rank, int nranks, const void* out, char* why, size_t whyLen) {
  const size_t es = mcclTypeSize(c->t), bytes = c->count * es;
  const size_t outBytes = enqRecvBlocks(c, rank, nranks) * bytes;
  if (outBytes == 0) return 0;
  char *got = (char*)malloc(outBytes), *want = (char*)malloc(outBytes);
  int bad = 1;
  if (got == NULL || want == NULL) {
    snprintf(why, whyLen, "out of host memory");
    goto out;
  }
  if (cudaMemcpy(got, out, outBytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    snprintf(why, whyLen, "cudaMemcpy of the output failed");
    goto out;
  }
  bad = 0;
  switch (c->func) {
    case mcclFuncAllReduce:
      bad = arCheck(got, c->t, c->op, c->count, nranks, c->seed, why, whyLen);
      break;
    case mcclFuncReduceScatter:
      bad = arCheck(got, c->t, c->op, c->count, nranks, c->seed + (uint64_t)rank, why, whyLen);
      break;
    case mcclFuncReduce:  // the result on the root; elsewhere the output untouched
      if (rank == c->root) {
        bad = arCheck(got, c->t, c->op, c->count, nranks, c->seed, why, whyLen);
      } else if (c->inPlace) {
        arFill(want, c->t, c->op, c->count, rank, c->seed);
        bad = enqCompare(got, want, bytes, es, "non-root's input", why, whyLen);
      } else {
        memset(want, ENQ_POISON, bytes);
        bad = enqCompare(got, want, bytes, es, "non-root's recvbuff (must stay untouched)", why, whyLen);
      }
      break;
    case mcclFuncBroadcast:
      arFill(want, c->t, c->op, c->count, c->root, c->seed);
      bad = enqCompare(got, want, bytes, es, "root's data", why, whyLen);
      break;
    case mcclFuncScatter:  // the root's block `rank`
      arFill(want, c->t, c->op, c->count, c->root, c->seed + (uint64_t)rank);
      bad = enqCompare(got, want, bytes, es, "root's block", why, whyLen);
      break;
    default:  // AllGather, Gather (root): block p is rank p's input; AlltoAll: block p is rank p's block `rank`
      for (int p = 0; p < nranks && !bad; p++) {
        char what[32];
        snprintf(what, sizeof(what), "block %d", p);
        arFill(want + (size_t)p * bytes, c->t, c->op, c->count, p,
               c->seed + (c->func == mcclFuncAlltoAll ? (uint64_t)rank : 0));
        bad = enqCompare(got + (size_t)p * bytes, want + (size_t)p * bytes, bytes, es, what, why, whyLen);
      }
      break;
  }
out:
  free(got);
  free(want);
  return bad;
}

// A call described for a failure message.
static inline void enqDescribe(const struct enqCall* c, char* buf, size_t len) {
  snprintf(
      buf, len, "%s %s %s%s count %zu root %d %s", enqFuncName(c->func), mcclTypeName(c->t),
      enqReduces(c->func) ? arOpName(c->op) : "-",
      enqReduces(c->func) && c->op == AR_PREMULSUM ? (c->scalarOnDevice ? " (device scalar)" : " (host scalar)") : "",
      c->count, c->root, c->inPlace && c->func != mcclFuncAlltoAll ? "in place" : "out of place");
}

// Bytes each of a rank's send and recv buffers needs for any of the calls of count elements of t.
static inline size_t enqBufferBytes(size_t count, mcclDataType_t t, int nranks) {
  return count * mcclTypeSize(t) * (size_t)nranks;
}
// Bytes each of the send and recv buffers needs for this call on any of nranks ranks (the root's are the
// largest).
static inline size_t enqCallBytes(const struct enqCall* c, int nranks) {
  const size_t in = enqSendBlocks(c, c->root, nranks), out = enqRecvBlocks(c, c->root, nranks);
  return (in > out ? in : out) * enqBytes(c);
}

// An environment variable for a failure message ("-" when unset).
static inline const char* enqEnv(const char* name) {
  const char* v = getenv(name);
  return v ? v : "-";
}

// ---- One rank a process (the mpirun tests) ----------------------------------------------------------
// One call on this rank of comm (every rank makes the same one): its buffers set up, the call made (with
// the rank's PreMulSum operation for AR_PREMULSUM, destroyed once the call is done), waited for, and its
// output checked here. send, recv: `bytes` each; host: scratch of as many.
static inline void enqRunOnRank(const struct enqCall* c, mcclLabComm* comm, void* send, void* recv, void* host,
                                size_t bytes, cudaStream_t stream) {
  CHECK_STOPPED();
  const int rank = comm->rank, n = comm->nRanks;
  void *in, *out, *devScalar = NULL;
  char what[160], why[200];
  enqDescribe(c, what, sizeof(what));
  if (enqCallBytes(c, n) > bytes) {
    mcclTestFailAt(__FILE__, __LINE__, "%s: buffers of %zu bytes are too small", what, bytes);
    return;
  }
  int line = enqPrepare(c, rank, n, send, recv, host, &in, &out);
  if (line) {
    mcclTestFailAt(__FILE__, line, "%s: setting rank %d's buffers up", what, rank);
    return;
  }
  mcclRedOp_t op = c->op;
  if (enqReduces(c->func) && c->op == AR_PREMULSUM) EXPECT_OK(enqCreateOp(c, comm, &op, &devScalar));
  EXPECT_OK(enqIssueOp(c, op, in, out, comm, stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(stream));
  if (op >= mcclNumOps) EXPECT_OK(mcclLabRedOpDestroy(op, comm));
  if (devScalar) EXPECT_CUDA_OK(cudaFree(devScalar));
  if (enqVerify(c, rank, n, out, why, sizeof(why)))
    mcclTestFailAt(__FILE__, __LINE__, "%s (%s/%s): rank %d: %s", what, enqEnv("MCCL_ALGO"), enqEnv("MCCL_PROTO"), rank,
                   why);
}

// ---- One process driving up to ENQ_MAXDEV devices (mcclLabCommInitAll; 4 on sim) --------------------
#define ENQ_MAXDEV 4
#define ENQ_MAXCALLS (MCCL_SIGNAL_MAX_BLOCKS + 3)  // calls of one enqSetRun

static inline int enqDevices(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}
// Ranks per device (MCCL_TEST_RANKS_PER_GPU, default 1): on a host with fewer GPUs than a case's ranks, several
// ranks share one (P2P within a device) and the case checks data, never time. Rank i is on device i % devices.
static inline int enqRanksPerDevice(void) {
  const char* v = getenv("MCCL_TEST_RANKS_PER_GPU");
  const int k = v ? atoi(v) : 1;
  return k < 1 ? 1 : k;
}
static inline int enqRanksHere(void) {
  const int n = enqDevices() * enqRanksPerDevice();
  return n < ENQ_MAXDEV ? n : ENQ_MAXDEV;
}

// n ranks of one communicator (a device each), each with a send and a recv buffer of `bytes` and a
// stream; host: scratch of `bytes`.
struct enqSet {
  int n;
  size_t bytes;  // of each send and recv buffer
  mcclLabComm* comm[ENQ_MAXDEV];
  void *send[ENQ_MAXDEV], *recv[ENQ_MAXDEV];
  cudaStream_t stream[ENQ_MAXDEV];
  void* host;
};

struct enqInitArg {
  mcclLabComm** comm;
  const mcclUniqueId* id;
  int n, rank, dev, nChannels;
  mcclResult_t res;
};
static inline void* enqInitOne(void* p) {
  struct enqInitArg* a = (struct enqInitArg*)p;
  a->res = cudaSetDevice(a->dev) == cudaSuccess
               ? mcclLabCommInit(a->comm, a->n, a->id, a->rank, a->dev, a->nChannels, mcclLocalTransports)
               : mcclUnhandledCudaError;
  return NULL;
}

static inline void enqSetUp(struct enqSet* s, int n, int nChannels, size_t bytes) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->bytes = bytes;
  if (n <= enqDevices()) {
    EXPECT_OK(mcclLabCommInitAll(s->comm, n, NULL, nChannels, mcclLocalTransports));
  } else {  // ranks sharing devices, which CommInitAll refuses (as NCCL's): a thread per rank, as it does
    mcclUniqueId id;
    EXPECT_OK(mcclGetUniqueId(&id));
    struct enqInitArg a[ENQ_MAXDEV];
    pthread_t th[ENQ_MAXDEV];
    for (int i = 0; i < n; i++) {
      a[i] = (struct enqInitArg){&s->comm[i], &id, n, i, i % enqDevices(), nChannels, mcclSuccess};
      EXPECT_TRUE(pthread_create(&th[i], NULL, enqInitOne, &a[i]) == 0);
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) EXPECT_OK(a[i].res);
  }
  for (int i = 0; i < n && s->comm[i]; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(s->comm[i]->cudaDev));
    EXPECT_CUDA_OK(cudaMalloc(&s->send[i], bytes));
    EXPECT_CUDA_OK(cudaMalloc(&s->recv[i], bytes));
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&s->stream[i], cudaStreamNonBlocking));
  }
  s->host = malloc(bytes);
  EXPECT_TRUE(s->host != NULL);
}

static inline void enqTearDown(struct enqSet* s) {
  for (int i = 0; i < s->n; i++) {
    if (s->comm[i] == NULL) continue;
    cudaSetDevice(s->comm[i]->cudaDev);
    if (s->stream[i]) EXPECT_CUDA_OK(cudaStreamDestroy(s->stream[i]));
    if (s->send[i]) EXPECT_CUDA_OK(cudaFree(s->send[i]));
    if (s->recv[i]) EXPECT_CUDA_OK(cudaFree(s->recv[i]));
    EXPECT_OK(mcclLabCommDestroy(s->comm[i]));
  }
  free(s->host);
  memset(s, 0, sizeof(*s));
}

static inline void enqSyncAll(struct enqSet* s) {
  for (int i = 0; i < s->n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(s->comm[i]->cudaDev));
    EXPECT_CUDA_OK(cudaStreamSynchronize(s->stream[i]));
  }
}

// k calls on every rank of the set, call j on slot j of the buffers (from byte j * slot), made rank after
// rank: in one group spanning every rank's communicator (grouped; one thread drives them all), or each
// call alone (every rank's launched before any is waited for). Then every output is checked, and each
// communicator launched wantLaunches kernels (0: not checked).
static inline void enqSetRun(struct enqSet* s, const struct enqCall* calls, int k, size_t slot, int grouped,
                             uint64_t wantLaunches) {
  CHECK_STOPPED();
  void* in[ENQ_MAXDEV][ENQ_MAXCALLS];
  void* out[ENQ_MAXDEV][ENQ_MAXCALLS];
  uint64_t before[ENQ_MAXDEV];
  char what[160], why[200];
  if (k > ENQ_MAXCALLS || (size_t)k * slot > s->bytes) {
    mcclTestFailAt(__FILE__, __LINE__, "%d calls of %zu bytes: buffers of %zu bytes are too small", k, slot, s->bytes);
    return;
  }
  for (int j = 0; j < k; j++) {
    if (enqCallBytes(&calls[j], s->n) <= slot) continue;
    enqDescribe(&calls[j], what, sizeof(what));
    mcclTestFailAt(__FILE__, __LINE__, "call %d, %s: a slot of %zu bytes is too small", j, what, slot);
    return;
  }
  for (int i = 0; i < s->n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(s->comm[i]->cudaDev));
    before[i] = s->comm[i]->nLaunches;
    for (int j = 0; j < k; j++) {
      int line = enqPrepare(&calls[j], s->comm[i]->rank, s->n, (char*)s->send[i] + j * slot,
                            (char*)s->recv[i] + j * slot, s->host, &in[i][j], &out[i][j]);
      if (line) mcclTestFailAt(__FILE__, line, "call %d: setting rank %d's buffers up", j, i);
    }
  }
  CHECK_STOPPED();
  if (grouped) EXPECT_OK(mcclLabGroupStart());
  for (int i = 0; i < s->n; i++) {
    if (!grouped) EXPECT_CUDA_OK(cudaSetDevice(s->comm[i]->cudaDev));
    for (int j = 0; j < k; j++)
      EXPECT_OK(enqIssueOp(&calls[j], calls[j].op, in[i][j], out[i][j], s->comm[i], s->stream[i]));
  }
  if (grouped) EXPECT_OK(mcclLabGroupEnd());
  CHECK_STOPPED();
  enqSyncAll(s);
  CHECK_STOPPED();
  for (int i = 0; i < s->n; i++) {
    EXPECT_CUDA_OK(cudaSetDevice(s->comm[i]->cudaDev));
    if (wantLaunches) EXPECT_EQ(s->comm[i]->nLaunches - before[i], wantLaunches);
    for (int j = 0; j < k; j++) {
      if (!enqVerify(&calls[j], s->comm[i]->rank, s->n, out[i][j], why, sizeof(why))) continue;
      enqDescribe(&calls[j], what, sizeof(what));
      mcclTestFailAt(__FILE__, __LINE__, "call %d, %s (%s/%s, %d ranks): rank %d: %s", j, what, enqEnv("MCCL_ALGO"),
                     enqEnv("MCCL_PROTO"), s->n, i, why);
      return;
    }
  }
}

#endif
