// Lab 07: the allreduce entry point (NCCL's ncclAllReduce -> ncclEnqueueCheck / ArgsCheck, then
// tuning.cc's choice of algorithm and protocol, then the launch). Every argument is checked here,
// before anything reaches the stream.
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include "allreduce_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"

// ---- tuning: one table, by rank count and size (NCCL's tuning.cc computes times from bandwidth
// and latency tables; lab 07 keeps the cut-over points themselves) ------------------------------
//
// Bytes are per rank (count * type size). Rows 2 and 3-4 are measured with lab 07's bench --tune
// (every algorithm forced, float32 sum, out of place, eager, time per call) on 4x H100 (NV18, every
// pair). The 4-rank row last at aee9b41 (two-shot loads several ranks' packs before it uses any),
// docs/results/2026-11-26-h100x4-b/tune-aee9b41/tune4.log:
//   128 KiB: one-shot 7.1 us, two-shot 9.2, ring (LL) 11.8            -> one-shot up to 128 KiB
//   256 KiB: two-shot 9.3, one-shot 10.7, ring (LL) 12.1              -> two-shot above
//     2 MiB: two-shot 17.4, ring (LL) 26.1, ring (SIMPLE) 37.0
//    16 MiB: two-shot 85.8, ring (SIMPLE) 87.9                        -> two-shot up to 16 MiB
//    32 MiB: ring (SIMPLE) 160.2, two-shot 166.5                      -> then the ring (SIMPLE)
// (At 71893f4, before that change, two-shot was 11.2 us at 256 KiB and 97.2 at 16 MiB, so one-shot
// served to 256 KiB and the ring from 16 MiB: docs/results/2026-11-26-h100x4/tune-71893f4/.)
// Again at bbb9be6, with the rings' 1 MiB FIFO (docs/results/2026-11-26-h100x4-c/bench-bbb9be6/tune4.log):
// 128 KiB one-shot 7.00, two-shot 9.09; 256 KiB two-shot 9.31, one-shot 10.86; 16 MiB two-shot 85.53,
// ring 86.34; 32 MiB ring 158.25, two-shot 164.90: the same row. One-shot's pull changed after it
// (4317e3d: a graph's 128 KiB on 4 ranks 6.20 -> 5.26 us); its 256 KiB against two-shot is not re-measured.
// The 2-rank row was measured at 71893f4 (tune-71893f4/tune2.log, devices 0 and 1) and again at aee9b41
// (tune-aee9b41/tune2.log), which kept it:
//   256 KiB: one-shot 6.4 us (aee9b41 6.3), ring (LL) 8.1 (8.2), two-shot 9.1 (8.9) -> one-shot up to 256 KiB
//   512 KiB: ring (LL) 9.6 (9.7), two-shot 9.9 (9.6)                 -> a tie: the ring with LL up to 512 KiB
//     1 MiB: two-shot 10.8 (11.0), ring (LL) 13.4 (13.5)              -> two-shot above
//    64 MiB: two-shot 206.5 (211.4), ring (SIMPLE) 215.7 (219.9); before 71893f4 (2x H100, 9b35177) the
//            bench's table gave 256 MiB two-shot 877.8 us (in place 860.9), ring 920.3, and 512 MiB
//            two-shot 1748.0 (1703.0), ring 1731.5 (1856.8)          -> two-shot up to 256 MiB
//   With the rings' 1 MiB FIFO (bf1a4f1, docs/results/2026-11-26-h100x2-c/bench-bf1a4f1/bench07_tune.log):
//    64 MiB: two-shot 213.2, ring (SIMPLE) 222.2; 128 MiB: ring 408.7, two-shot 418.8; 256 MiB: ring 785.0,
//            two-shot 830.0; 512 MiB: ring 1549.3, two-shot 1653.9 -> two-shot up to 64 MiB
// One-shot with SIMPLE (2 ranks only; docs/results/2026-11-27-h100x2/oneshot-simple/tune2.log, 2x H100):
//   256 KiB: one-shot (LL) 5.62, one-shot (SIMPLE) 6.11, ring (LL) 8.16, two-shot 9.35
//   512 KiB: one-shot (SIMPLE) 7.02, two-shot 9.46, ring (LL) 9.80  -> SIMPLE above LL's 256 KiB
//     2 MiB: one-shot (SIMPLE) 12.04, two-shot 14.08
//     4 MiB: one-shot (SIMPLE) 18.71, two-shot 20.12                -> up to its 4 MiB scratch
//     8 MiB: two-shot 32.82 (and on to 64 MiB as before)
//   With it the 2-rank row has no ring between the symmetric algorithms: without windows one-shot
//   still runs to 4 MiB (it needs only the signal area), then the ring.
// Before 71893f4, on 2x H100 and again on 2x H200 (be40d7a, docs/results/2026-11-26-h200x2-b/bench-be40d7a/
// bench07_tune.log), 1 MiB was a tie between the ring's LL and two-shot, so two-shot started above 1 MiB.
// The H200 figures then: 256 KiB one-shot 6.23 us, ring (LL) 7.98, two-shot 11.67; 512 KiB ring (LL) 9.56,
// two-shot 12.01; 1 MiB two-shot 13.31, ring (LL) 13.49; 2 MiB two-shot 16.26, ring (SIMPLE) 19.15; 64 MiB
// two-shot 213.4, ring (SIMPLE) 219.2. Neither row after 71893f4 is measured on H200s (none was lent).
// The ring's LL is faster than its SIMPLE up to 2 MiB on 4 ranks (26.1 vs 37.0 us; 4 MiB 48.8 vs 46.8) and
// up to 1 MiB on 2 (13.5 vs 17.3; 2 MiB 21.4 vs 20.3), which matters where two-shot cannot run (buffers
// outside windows). The 5-8 rank row is NOT measured (no 8-GPU run): a guess, below the 4-rank cut-overs
// because one-shot's traffic and two-shot's barrier waits grow with the ranks.
#define MCCL_TUNE_ONESHOT_MAX_2R (256u << 10)       // 2 ranks: one-shot (LL) up to here
#define MCCL_TUNE_ONESHOT_SIMPLE_MAX_2R (4u << 20)  // 2 ranks: then one-shot (SIMPLE) up to here
#define MCCL_TUNE_TWOSHOT_MAX_2R (64u << 20)        // 2 ranks: then two-shot up to here, then the ring
#define MCCL_TUNE_LL_MAX_2R (1u << 20)         // 2 ranks: the ring uses LL up to here
#define MCCL_TUNE_ONESHOT_MAX_4R (128u << 10)  // 3-4 ranks: one-shot up to here, two-shot right above
#define MCCL_TUNE_TWOSHOT_MAX_4R (16u << 20)   // 3-4 ranks: two-shot up to here, then the ring
#define MCCL_TUNE_LL_MAX_4R (2u << 20)         // 3-4 ranks: the ring uses LL up to here
#define MCCL_TUNE_ONESHOT_MAX_8R (16u << 10)  // 5-8 ranks
#define MCCL_TUNE_TWOSHOT_MAX_8R (1u << 20)
#define MCCL_TUNE_LL_MAX (256u << 10)  // more than 4 ranks: the ring uses LL up to here, SIMPLE above

// One row per rank count: one-shot with LL up to oneShotMax, then (2 ranks) one-shot with SIMPLE up
// to oneShotSimpleMax; above them two-shot up to twoShotMax (when both buffers are in windows), then
// the ring; the ring's protocol is LL up to llMax.
static const struct {
  int maxRanks;
  size_t oneShotMax, oneShotSimpleMax, twoShotMax, llMax;
} tuneTable[] = {
    {2, MCCL_TUNE_ONESHOT_MAX_2R, MCCL_TUNE_ONESHOT_SIMPLE_MAX_2R, MCCL_TUNE_TWOSHOT_MAX_2R, MCCL_TUNE_LL_MAX_2R},
    {4, MCCL_TUNE_ONESHOT_MAX_4R, 0, MCCL_TUNE_TWOSHOT_MAX_4R, MCCL_TUNE_LL_MAX_4R},
    {8, MCCL_TUNE_ONESHOT_MAX_8R, 0, MCCL_TUNE_TWOSHOT_MAX_8R, MCCL_TUNE_LL_MAX},
    {MCCL_LAB_MAX_RANKS, 0, 0, 0, MCCL_TUNE_LL_MAX},  // beyond 8 ranks: the ring only
};

int mcclLabOneShotFits(int nRanks, size_t bytes, int p) {
  if (nRanks == 1) return 1;
  return p == MCCL_PROTO_LL ? bytes <= MCCL_ONESHOT_MAX_BYTES : nRanks == 2 && bytes <= MCCL_ONESHOT_SIMPLE_MAX_BYTES;
}

mcclResult_t mcclLabSelectAlgorithm(int nRanks, size_t bytes, int symmetric, int* algo, int* proto) {
  MCCL_ARGCHECK(algo != NULL && proto != NULL, "algo %p / proto %p is NULL", (void*)algo, (void*)proto);
  MCCL_ARGCHECK(nRanks >= 1 && nRanks <= MCCL_LAB_MAX_RANKS, "nRanks %d", nRanks);
  MCCL_ARGCHECK(symmetric >= 0 && symmetric <= 2, "symmetric %d (0, 1 or 2)", symmetric);
  int a = MCCL_ALGO_RING;
  size_t i = 0;
  while (nRanks > tuneTable[i].maxRanks) i++;  // the last row covers MCCL_LAB_MAX_RANKS
  if (symmetric && nRanks > 1) {
    if ((bytes <= tuneTable[i].oneShotMax && mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_LL)) ||
        (bytes <= tuneTable[i].oneShotSimpleMax && mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_SIMPLE)))
      a = MCCL_ALGO_ONESHOT;
    else if (symmetric == 2 && bytes <= tuneTable[i].twoShotMax)  // two-shot right above one-shot
      a = MCCL_ALGO_TWOSHOT;
  }
  int p = bytes <= tuneTable[i].llMax ? MCCL_PROTO_LL : MCCL_PROTO_SIMPLE;
  const char* env = mcclParamAlgo();
  const int algoForced = env != NULL;
  if (env) {
    if (strcasecmp(env, "ring") == 0)
      a = MCCL_ALGO_RING;
    else if (strcasecmp(env, "oneshot") == 0)
      a = MCCL_ALGO_ONESHOT;
    else if (strcasecmp(env, "twoshot") == 0)
      a = MCCL_ALGO_TWOSHOT;
    else {
      WARN("Invalid argument: MCCL_ALGO '%s' (ring, oneshot or twoshot)", env);
      return mcclInvalidArgument;
    }
    if (a == MCCL_ALGO_ONESHOT && (!symmetric || (!mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_LL) &&
                                                  !mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_SIMPLE)))) {
      WARN(
          "Invalid argument: MCCL_ALGO=%s needs a signal area (at most %d ranks, cuMem on) and at most %d bytes, or "
          "%d on 2 ranks (%d ranks, %zu bytes asked)",
          env, MCCL_SYM_MAX_RANKS, MCCL_ONESHOT_MAX_BYTES, MCCL_ONESHOT_SIMPLE_MAX_BYTES, nRanks, bytes);
      return mcclInvalidArgument;
    }
    if (a == MCCL_ALGO_TWOSHOT && symmetric != 2) {
      WARN(
          "Invalid argument: MCCL_ALGO=%s needs sendbuff and recvbuff in registered windows "
          "(mcclLabWindowRegister)",
          env);
      return mcclInvalidArgument;
    }
  }
  // One-shot's protocol: LL up to the row's one-shot size (or where SIMPLE cannot run), SIMPLE above.
  if (a == MCCL_ALGO_ONESHOT)
    p = bytes <= tuneTable[i].oneShotMax || !mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_SIMPLE) ? MCCL_PROTO_LL
                                                                                                  : MCCL_PROTO_SIMPLE;
  env = mcclParamProto();
  if (env) {
    if (strcasecmp(env, "simple") == 0)
      p = MCCL_PROTO_SIMPLE;
    else if (strcasecmp(env, "ll") == 0)
      p = MCCL_PROTO_LL;
    else {
      WARN("Invalid argument: MCCL_PROTO '%s' (simple or ll)", env);
      return mcclInvalidArgument;
    }
  }
  // A protocol one-shot cannot run at this size: refused if one-shot was forced too, else the ring.
  if (a == MCCL_ALGO_ONESHOT && !mcclLabOneShotFits(nRanks, bytes, p)) {
    if (algoForced) {
      WARN("Invalid argument: one-shot with MCCL_PROTO=%s runs up to %d bytes%s (%d ranks, %zu bytes asked)", env,
           p == MCCL_PROTO_LL ? MCCL_ONESHOT_MAX_BYTES : MCCL_ONESHOT_SIMPLE_MAX_BYTES,
           p == MCCL_PROTO_LL ? "" : " on 2 ranks", nRanks, bytes);
      return mcclInvalidArgument;
    }
    a = MCCL_ALGO_RING;
  }
  *algo = a;
  *proto = p;
  return mcclSuccess;
}

mcclResult_t mcclLabAllReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, mcclRedOp_t op,
                              mcclLabComm* comm, cudaStream_t stream) {
  MCCL_ARGCHECK(comm != NULL, "comm is NULL");
  MCCL_ARGCHECK((int)dtype >= 0 && (int)dtype < mcclNumTypes, "dtype %d (0 .. %d)", (int)dtype, mcclNumTypes - 1);
  MCCL_ARGCHECK((int)op >= 0 && (int)op < mcclNumOps, "op %d (0 .. %d)", (int)op, mcclNumOps - 1);
  size_t esize = mcclTypeSize(dtype);
  MCCL_ARGCHECK(count <= SIZE_MAX / esize, "count %zu (x %zu-byte %s overflows)", count, esize, mcclTypeName(dtype));
  MCCL_ARGCHECK(count == 0 || sendbuff != NULL, "sendbuff is NULL with count %zu", count);
  MCCL_ARGCHECK(count == 0 || recvbuff != NULL, "recvbuff is NULL with count %zu", count);
  if (__atomic_load_n(comm->abortFlag, __ATOMIC_ACQUIRE)) {
    WARN("Invalid usage: rank %d's communicator was aborted", comm->rank);
    return mcclInvalidUsage;
  }
  size_t bytes = count * esize;
  mcclLabWindow *sw = NULL, *rw = NULL;
  size_t soff = 0, roff = 0;
  MCCLCHECK(mcclLabWindowFind(comm, sendbuff, bytes, &sw, &soff));
  MCCLCHECK(mcclLabWindowFind(comm, recvbuff, bytes, &rw, &roff));
  // 1: the signal area exists (one-shot possible); 2: and both buffers are in windows (two-shot too).
  int symmetric = comm->signalWin == NULL ? 0 : (sw != NULL && rw != NULL) ? 2 : 1;
  struct mcclAllReduceArgs a;
  memset(&a, 0, sizeof(a));
  MCCLCHECK(mcclLabSelectAlgorithm(comm->nRanks, bytes, symmetric, &a.algorithm, &a.proto));
  if (a.algorithm == MCCL_ALGO_RING) a.proto = mcclLabCommProto(comm, bytes, a.proto);
  a.nChannels = comm->nChannels;
  a.rank = comm->rank;
  a.nRanks = comm->nRanks;
  a.ringIndex = comm->ring.index;
  a.dtype = (int)dtype;
  a.op = (int)op;
  a.count = count;
  a.sendbuff = sendbuff;
  a.recvbuff = recvbuff;
  a.redOpArg = op == mcclAvg ? (uint64_t)comm->nRanks : 1;
  a.recvConns = comm->devRecvConns;
  a.sendConns = comm->devSendConns;
  a.abortFlag = comm->abortFlagDev;
  a.trace = mcclParamKernelTrace() != 0;
  if (a.algorithm != MCCL_ALGO_RING) {
    for (int p = 0; p < comm->nRanks; p++) a.signalPeers[p] = (char*)comm->signalWin->peerPtrs[p];
    a.seqCounters = comm->seqCounters;
  }
  if (a.algorithm == MCCL_ALGO_TWOSHOT) {
    a.sendPeers = sw->devPeerPtrs;
    a.sendOffset = soff;
    a.recvPeers = rw->devPeerPtrs;
    a.recvOffset = roff;
  }
  TRACE(MCCL_COLL, "rank %d: allreduce %zu x %s %s, algorithm %d proto %d", comm->rank, count, mcclTypeName(dtype),
        mcclOpName(op), a.algorithm, a.proto);
  // >>> The lead's kernels: lab 07 src/*.cu implements mcclLabAllReduceLaunch (launch only, on `stream`).
  return mcclLabAllReduceLaunch(comm, &a, stream);
}
