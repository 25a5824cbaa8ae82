// Lab 07: the one tuning table (NCCL's src/graph/tuning.cc computes times from bandwidth and latency
// tables and picks the fastest; lab 07 keeps the cut-over points themselves, which a learner can read and
// check with bench --tune, and a latency / bandwidth model for ncclGroupSimulateEnd's estimate). The
// values are in tuning.def, the measurements that placed them in tuning-basis.md; this file reads them,
// applies MCCL_ALGO / MCCL_PROTO, and is the one place that parses those two parameters.
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include "enqueue_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_param.h"

static const struct {
  int maxRanks;
  size_t oneShotMax, oneShotSimpleMax, twoShotMax, oneShotBareMax;
} tuneTable[] = {
#define MCCL_TUNE_ROW(maxRanks, oneShotMax, oneShotSimpleMax, twoShotMax, oneShotBareMax) \
  {maxRanks, oneShotMax, oneShotSimpleMax, twoShotMax, oneShotBareMax},
#include "tuning_expand.h"
};

static const struct {
  int maxRanks;
  size_t bytes;
} ceArTable[] = {
#define MCCL_TUNE_CE_AR_MIN(maxRanks, bytes) {maxRanks, bytes},
#include "tuning_expand.h"
};

// Where the table takes the copy-engine allreduce at this rank count: the smallest maxRanks at or above it (0: never).
static size_t ceArMin(int nRanks) {
  size_t i = 0;
  while (nRanks > ceArTable[i].maxRanks) i++;  // the last row covers MCCL_LAB_MAX_RANKS
  return ceArTable[i].bytes;
}

static const struct {
  int maxRanks, algo, proto;
  double latencyUs, busGBps;
} tuneModel[] = {
#define MCCL_TUNE_MODEL(maxRanks, algo, proto, latencyUs, busGBps) {maxRanks, algo, proto, latencyUs, busGBps},
#include "tuning_expand.h"
};

static const struct {
  int maxRanks, func;
  size_t oneShotMax, llMax, ll128Max;
} collTable[] = {
#define MCCL_TUNE_COLL(maxRanks, func, oneShotMax, llMax, ll128Max) {maxRanks, func, oneShotMax, llMax, ll128Max},
#include "tuning_expand.h"
};

// The ring's protocol for a collective: its function's row for this rank count (the smallest maxRanks at or
// above it): LL up to the row's LL cut-over, LL128 up to its LL128 cut-over, SIMPLE above. The
// ring's edges are not known here: a communicator whose ring cannot carry LL128 turns the table's LL128 into
// SIMPLE (mcclLabCommProto). One rank has no edge: it copies with LL or SIMPLE, never LL128.
static int collRow(int func, int nRanks) {
  int best = -1;
  for (size_t i = 0; i < sizeof(collTable) / sizeof(collTable[0]); i++)
    if (collTable[i].func == func && nRanks <= collTable[i].maxRanks &&
        (best < 0 || collTable[i].maxRanks < collTable[best].maxRanks))
      best = (int)i;
  return best;  // -1: no row (tuning.def has one per function up to MCCL_LAB_MAX_RANKS)
}

static int collProto(int func, int nRanks, size_t bytes) {
  const int best = collRow(func, nRanks);
  if (best < 0) return MCCL_PROTO_SIMPLE;
  if (bytes <= collTable[best].llMax) return MCCL_PROTO_LL;
  return bytes <= collTable[best].ll128Max && nRanks > 1 ? MCCL_PROTO_LL128 : MCCL_PROTO_SIMPLE;
}

// LL128 moves a slice that starts off a 16-byte boundary by trading packs between a warp's lanes (prims_ll128.cuh),
// where LL reads whole 8-byte words and SIMPLE shifts 16-byte packs in registers: in the table's LL128 band such
// buffers run LL up to twice the LL cut-over and SIMPLE above (tuning-basis.md: each was faster there than LL128).
int mcclLabMisalignedProto(int func, int nRanks, size_t bytes, int proto) {
  if (proto != MCCL_PROTO_LL128) return proto;
  const int row = collRow(func, nRanks);
  return row >= 0 && bytes <= 2 * collTable[row].llMax ? MCCL_PROTO_LL : MCCL_PROTO_SIMPLE;
}

// Whether one-shot can run an AllGather or ReduceScatter whose larger buffer is `bytes` (with LL only): the signal
// area's ranks, and each rank's part within its scratch.
static int collOneShotFits(int func, int nRanks, size_t bytes) {
  return (func == mcclFuncAllGather || func == mcclFuncReduceScatter) && nRanks > 1 && nRanks <= MCCL_SYM_MAX_RANKS &&
         bytes / (size_t)nRanks <= MCCL_ONESHOT_MAX_BYTES;
}

int mcclLabOneShotFits(int nRanks, size_t bytes, int p) {
  if (p == MCCL_PROTO_LL128) return 0;  // one-shot has an LL and a SIMPLE kernel only
  if (nRanks == 1) return 1;
  return p == MCCL_PROTO_LL ? bytes <= MCCL_ONESHOT_MAX_BYTES : nRanks == 2 && bytes <= MCCL_ONESHOT_SIMPLE_MAX_BYTES;
}

mcclResult_t mcclLabParamProto(int* proto) {
  const char* env = mcclParamProto();
  *proto = -1;
  if (env == NULL) return mcclSuccess;
  if (strcasecmp(env, "simple") == 0) {
    *proto = MCCL_PROTO_SIMPLE;
  } else if (strcasecmp(env, "ll") == 0) {
    *proto = MCCL_PROTO_LL;
  } else if (strcasecmp(env, "ll128") == 0) {
    *proto = MCCL_PROTO_LL128;
  } else {
    WARN("Invalid argument: MCCL_PROTO '%s' (simple, ll or ll128)", env);
    return mcclInvalidArgument;
  }
  return mcclSuccess;
}

// MCCL_ALGO: the algorithm AllReduce must use, or -1 unset.
static mcclResult_t paramAlgo(int* algo) {
  const char* env = mcclParamAlgo();
  *algo = -1;
  if (env == NULL) return mcclSuccess;
  if (strcasecmp(env, "ring") == 0) {
    *algo = MCCL_ALGO_RING;
  } else if (strcasecmp(env, "oneshot") == 0) {
    *algo = MCCL_ALGO_ONESHOT;
  } else if (strcasecmp(env, "twoshot") == 0) {
    *algo = MCCL_ALGO_TWOSHOT;
  } else if (strcasecmp(env, "ce") == 0) {
    *algo = MCCL_ALGO_CE;
  } else {
    WARN("Invalid argument: MCCL_ALGO '%s' (ring, oneshot, twoshot or ce)", env);
    return mcclInvalidArgument;
  }
  return mcclSuccess;
}

static size_t tuneRow(int nRanks) {
  size_t i = 0;
  while (nRanks > tuneTable[i].maxRanks) i++;  // the last row covers MCCL_LAB_MAX_RANKS
  return i;
}

// AllGather and ReduceScatter: one-shot with LL up to the row's one-shot size where it can run (a signal area),
// else the ring with the row's protocol. MCCL_ALGO=oneshot forces one-shot, refused where it cannot run; =ring the
// ring; the allreduce's other algorithms do not apply. A protocol other than LL forced: the ring.
static mcclResult_t collSelect(int func, int nRanks, size_t bytes, int symmetric, int envProto, int* algo, int* proto) {
  int forced;
  MCCLCHECK(paramAlgo(&forced));
  const int row = collRow(func, nRanks);
  const int fits = symmetric > 0 && collOneShotFits(func, nRanks, bytes);
  int a = fits && row >= 0 && bytes <= collTable[row].oneShotMax ? MCCL_ALGO_ONESHOT : MCCL_ALGO_RING;
  if (func == mcclFuncAllGather || func == mcclFuncReduceScatter) {
    if (forced == MCCL_ALGO_ONESHOT && (!fits || (envProto >= 0 && envProto != MCCL_PROTO_LL))) {
      WARN(
          "Invalid argument: MCCL_ALGO=oneshot for %s needs a signal area (at most %d ranks, cuMem on), LL and at most "
          "%d bytes per rank (%d ranks, %zu bytes asked)",
          func == mcclFuncAllGather ? "AllGather" : "ReduceScatter", MCCL_SYM_MAX_RANKS, MCCL_ONESHOT_MAX_BYTES, nRanks,
          bytes);
      return mcclInvalidArgument;
    }
    if (forced == MCCL_ALGO_ONESHOT || forced == MCCL_ALGO_RING) a = forced;
  }
  if (a == MCCL_ALGO_ONESHOT && envProto >= 0 && envProto != MCCL_PROTO_LL) a = MCCL_ALGO_RING;
  *algo = a;
  *proto = a == MCCL_ALGO_ONESHOT ? MCCL_PROTO_LL : envProto >= 0 ? envProto : collProto(func, nRanks, bytes);
  return mcclSuccess;
}

mcclResult_t mcclLabSelectAlgorithm(int func, int nRanks, size_t bytes, int symmetric, int* algo, int* proto) {
  MCCL_ARGCHECK(algo != NULL && proto != NULL, "algo %p / proto %p is NULL", (void*)algo, (void*)proto);
  MCCL_ARGCHECK(func >= mcclFuncBroadcast && func <= mcclFuncAllReduce, "func %d (a collective: %d .. %d)", func,
                mcclFuncBroadcast, mcclFuncAllReduce);
  MCCL_ARGCHECK(nRanks >= 1 && nRanks <= MCCL_LAB_MAX_RANKS, "nRanks %d", nRanks);
  MCCL_ARGCHECK(symmetric >= 0 && symmetric <= 3, "symmetric %d (0 .. 3)", symmetric);
  int envProto;
  MCCLCHECK(mcclLabParamProto(&envProto));
  if (func != mcclFuncAllReduce) return collSelect(func, nRanks, bytes, symmetric, envProto, algo, proto);
  const size_t i = tuneRow(nRanks);
  // One-shot with LL gives way to two-shot where both can run, and goes on against the ring where two-shot cannot.
  const size_t oneShotLlMax = symmetric >= 2 ? tuneTable[i].oneShotMax : tuneTable[i].oneShotBareMax;
  int a = MCCL_ALGO_RING;
  if (symmetric && nRanks > 1) {
    if ((bytes <= oneShotLlMax && mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_LL)) ||
        (bytes <= tuneTable[i].oneShotSimpleMax && mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_SIMPLE)))
      a = MCCL_ALGO_ONESHOT;
    else if (symmetric >= 2 && bytes <= tuneTable[i].twoShotMax)  // two-shot right above one-shot
      a = MCCL_ALGO_TWOSHOT;
    if (symmetric == 3 && ceArMin(nRanks) > 0 && bytes >= ceArMin(nRanks)) a = MCCL_ALGO_CE;
  }
  int forced;
  MCCLCHECK(paramAlgo(&forced));
  if (forced >= 0) {
    a = forced;
    if (a == MCCL_ALGO_ONESHOT && (!symmetric || (!mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_LL) &&
                                                  !mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_SIMPLE)))) {
      WARN(
          "Invalid argument: MCCL_ALGO=oneshot needs a signal area (at most %d ranks, cuMem on) and at most %d bytes, "
          "or %d on 2 ranks (%d ranks, %zu bytes asked)",
          MCCL_SYM_MAX_RANKS, MCCL_ONESHOT_MAX_BYTES, MCCL_ONESHOT_SIMPLE_MAX_BYTES, nRanks, bytes);
      return mcclInvalidArgument;
    }
    if (a == MCCL_ALGO_CE && symmetric != 3) {
      WARN(
          "Invalid argument: MCCL_ALGO=ce needs sendbuff and recvbuff in registered windows, apart (out of place), an "
          "operation every rank applies alike, the copy-engine collectives (lab 10) and no CUDA graph capture");
      return mcclInvalidArgument;
    }
    if (a == MCCL_ALGO_TWOSHOT && symmetric < 2) {
      WARN(
          "Invalid argument: MCCL_ALGO=twoshot needs sendbuff and recvbuff in registered windows "
          "(mcclLabWindowRegister) and an operation every rank applies alike (not a PreMulSum operation of "
          "mcclLabRedOpCreatePreMulSum, whose scalar is each rank's own)");
      return mcclInvalidArgument;
    }
  }
  // The ring's protocol is its row's; two-shot and the copy engines have none of their own (SIMPLE); one-shot's
  // is LL up to the row's one-shot size (or where SIMPLE cannot run), SIMPLE above.
  int p = a == MCCL_ALGO_RING ? collProto(mcclFuncAllReduce, nRanks, bytes) : MCCL_PROTO_SIMPLE;
  if (a == MCCL_ALGO_ONESHOT)
    p = bytes <= oneShotLlMax || !mcclLabOneShotFits(nRanks, bytes, MCCL_PROTO_SIMPLE) ? MCCL_PROTO_LL
                                                                                       : MCCL_PROTO_SIMPLE;
  if (envProto >= 0) p = envProto;
  // LL128 runs in the ring only: refused with a forced one-shot or two-shot, else the ring takes it.
  if (p == MCCL_PROTO_LL128 && a != MCCL_ALGO_RING && nRanks > 1) {
    if (forced >= 0) {
      WARN("Invalid argument: MCCL_PROTO=ll128 runs in the ring only (MCCL_ALGO=%s asked)",
           a == MCCL_ALGO_ONESHOT   ? "oneshot"
           : a == MCCL_ALGO_TWOSHOT ? "twoshot"
                                    : "ce");
      return mcclInvalidArgument;
    }
    a = MCCL_ALGO_RING;
  }
  // A protocol one-shot cannot run at this size: refused if one-shot was forced too, else the ring.
  if (a == MCCL_ALGO_ONESHOT && !mcclLabOneShotFits(nRanks, bytes, p)) {
    if (forced >= 0) {
      WARN("Invalid argument: one-shot with MCCL_PROTO=%s runs up to %d bytes%s (%d ranks, %zu bytes asked)",
           p == MCCL_PROTO_LL ? "ll" : "simple",
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

double mcclLabEstimateTime(int func, int algo, int proto, int nRanks, size_t bytes) {
  if (nRanks <= 1 || bytes == 0) return 0;
  if (func == mcclFuncSend || func == mcclFuncRecv || func == mcclFuncSendRecv) {
    algo = MCCL_ALGO_RING;
    proto = MCCL_PROTO_SIMPLE;
  }
  if (algo == MCCL_ALGO_TWOSHOT || algo == MCCL_ALGO_CE) proto = MCCL_PROTO_SIMPLE;
  // No LL128 model row has been fitted: it is costed as the ring's SIMPLE, whose bandwidth it approaches.
  if (proto == MCCL_PROTO_LL128) proto = MCCL_PROTO_SIMPLE;
  double busBytes = (double)bytes;
  if (func == mcclFuncAllReduce) busBytes *= 2.0 * (nRanks - 1) / nRanks;
  if (func == mcclFuncAllGather || func == mcclFuncReduceScatter) busBytes *= (double)(nRanks - 1) / nRanks;
  for (size_t i = 0; i < sizeof(tuneModel) / sizeof(tuneModel[0]); i++)
    if (nRanks <= tuneModel[i].maxRanks && tuneModel[i].algo == algo && tuneModel[i].proto == proto)
      return tuneModel[i].latencyUs + busBytes / (tuneModel[i].busGBps * 1e3);
  return 0;  // no row (one-shot with SIMPLE beyond 2 ranks never runs)
}
