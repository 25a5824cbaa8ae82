// The host calls of NCCL 2.28's device API (nccl_device/core.h, lsa_barrier.h, gin_barrier.h, ll_a2a.h), served
// by minccl_device.h's calls over lab 09. The objects they make are read by kernels compiled against NCCL's own
// headers, so every one is checked here, field by field, against NCCL's definition: the device communicator
// (impl/comm__types.h), the window a kernel dereferences through ncclWindow_t (impl/core__types.h), the
// communicator's window table, the LSA barrier's handle (impl/lsa_barrier__types.h) and the requirements.
// NCCL's device headers are CUDA C++, hence this file is too; it holds host code only.
//
// GIN (the network half of the device API) and multimem are refused by name: the device communicator has no
// GIN context (ginContextCount 0) and no multicast object is ever made. The LL all-to-all is refused too.
#include <stddef.h>
#include <string.h>
#include <nccl.h>
#include <nccl_device.h>
#include "minccl_device.h"
#include "nccl_dropin.h"

// ---- the ABI: NCCL's device objects are lab 09's ---------------------------------------------------------
#define SAME_SIZE(N, M) static_assert(sizeof(N) == sizeof(M) && alignof(N) == alignof(M), #N " and " #M " differ")
#define SAME_FIELD(N, M, f) static_assert(offsetof(N, f) == offsetof(M, f), #N "::" #f " is not where " #M " has it")
#define SAME_FIELD2(N, M, fn, fm) static_assert(offsetof(N, fn) == offsetof(M, fm), #N "::" #fn " is not " #M "::" #fm)

SAME_SIZE(ncclTeam, mcclTeam);
SAME_FIELD(ncclTeam, mcclTeam, nRanks);
SAME_FIELD(ncclTeam, mcclTeam, rank);
SAME_FIELD(ncclTeam, mcclTeam, stride);

SAME_SIZE(ncclWindow_vidmem, mcclWindow_vidmem);
SAME_FIELD(ncclWindow_vidmem, mcclWindow_vidmem, winHost);
SAME_FIELD(ncclWindow_vidmem, mcclWindow_vidmem, lsaFlatBase);
SAME_FIELD(ncclWindow_vidmem, mcclWindow_vidmem, lsaRank);
SAME_FIELD(ncclWindow_vidmem, mcclWindow_vidmem, worldRank);
SAME_FIELD(ncclWindow_vidmem, mcclWindow_vidmem, stride4G);
SAME_FIELD(ncclWindow_vidmem, mcclWindow_vidmem, mcOffset4K);
SAME_FIELD(ncclWindow_vidmem, mcclWindow_vidmem, ginOffset4K);
SAME_FIELD(ncclWindow_vidmem, mcclWindow_vidmem, ginWins);
static_assert(NCCL_GIN_MAX_CONTEXTS == MCCL_GIN_MAX_CONTEXTS, "GIN context counts differ");

SAME_SIZE(ncclMultimemHandle, mcclMultimemHandle);
SAME_SIZE(ncclLsaBarrierHandle, mcclLsaBarrierHandle);
SAME_FIELD(ncclLsaBarrierHandle, mcclLsaBarrierHandle, bufHandle);
SAME_FIELD(ncclLsaBarrierHandle, mcclLsaBarrierHandle, nBarriers);
SAME_SIZE(ncclGinBarrierHandle, mcclGinBarrierHandle);
SAME_FIELD(ncclGinBarrierHandle, mcclGinBarrierHandle, signal0);
SAME_FIELD(ncclGinBarrierHandle, mcclGinBarrierHandle, bufHandle);
SAME_SIZE(ncclDevResourceHandle_t, mcclDevResourceHandle);

SAME_SIZE(ncclDevCommWindowTable, mcclDevCommWindowTable);
SAME_SIZE(ncclDevCommWindowTable::Entry, mcclDevCommWindowTableEntry);
SAME_FIELD(ncclDevCommWindowTable::Entry, mcclDevCommWindowTableEntry, base);
SAME_FIELD(ncclDevCommWindowTable::Entry, mcclDevCommWindowTableEntry, size);
SAME_FIELD(ncclDevCommWindowTable::Entry, mcclDevCommWindowTableEntry, window);
SAME_FIELD(ncclDevCommWindowTable, mcclDevCommWindowTable, entries);
SAME_FIELD(ncclDevCommWindowTable, mcclDevCommWindowTable, next);
static_assert(sizeof(((ncclDevCommWindowTable*)0)->entries) / sizeof(ncclDevCommWindowTable::Entry) ==
                  MCCL_DEV_WINDOW_TABLE_ENTRIES,
              "window table blocks differ");

SAME_SIZE(ncclDevComm, mcclDevComm);
SAME_FIELD(ncclDevComm, mcclDevComm, rank);
SAME_FIELD(ncclDevComm, mcclDevComm, nRanks);
SAME_FIELD(ncclDevComm, mcclDevComm, nRanks_rcp32);
SAME_FIELD(ncclDevComm, mcclDevComm, lsaRank);
SAME_FIELD(ncclDevComm, mcclDevComm, lsaSize);
SAME_FIELD(ncclDevComm, mcclDevComm, lsaSize_rcp32);
SAME_FIELD(ncclDevComm, mcclDevComm, windowTable);
SAME_FIELD(ncclDevComm, mcclDevComm, resourceWindow);
SAME_FIELD(ncclDevComm, mcclDevComm, resourceWindow_inlined);
SAME_FIELD(ncclDevComm, mcclDevComm, lsaMultimem);
SAME_FIELD(ncclDevComm, mcclDevComm, lsaBarrier);
SAME_FIELD(ncclDevComm, mcclDevComm, railGinBarrier);
SAME_FIELD(ncclDevComm, mcclDevComm, ginContextCount);
SAME_FIELD(ncclDevComm, mcclDevComm, ginTypes);
SAME_FIELD(ncclDevComm, mcclDevComm, ginHandles);
SAME_FIELD(ncclDevComm, mcclDevComm, ginSignalBase);
SAME_FIELD(ncclDevComm, mcclDevComm, ginSignalCount);
SAME_FIELD(ncclDevComm, mcclDevComm, ginCounterBase);
SAME_FIELD(ncclDevComm, mcclDevComm, ginCounterCount);
SAME_FIELD(ncclDevComm, mcclDevComm, ginSignalShadows);

SAME_SIZE(ncclDevResourceRequirements, mcclDevResourceRequirements);
SAME_FIELD(ncclDevResourceRequirements, mcclDevResourceRequirements, next);
SAME_FIELD(ncclDevResourceRequirements, mcclDevResourceRequirements, bufferSize);
SAME_FIELD(ncclDevResourceRequirements, mcclDevResourceRequirements, bufferAlign);
SAME_FIELD(ncclDevResourceRequirements, mcclDevResourceRequirements, outBufferHandle);
SAME_FIELD(ncclDevResourceRequirements, mcclDevResourceRequirements, ginSignalCount);
SAME_FIELD(ncclDevResourceRequirements, mcclDevResourceRequirements, ginCounterCount);
SAME_FIELD(ncclDevResourceRequirements, mcclDevResourceRequirements, outGinSignalStart);
SAME_FIELD(ncclDevResourceRequirements, mcclDevResourceRequirements, outGinCounterStart);

SAME_SIZE(ncclTeamRequirements, mcclTeamRequirements);
SAME_FIELD(ncclTeamRequirements, mcclTeamRequirements, next);
SAME_FIELD(ncclTeamRequirements, mcclTeamRequirements, team);
SAME_FIELD(ncclTeamRequirements, mcclTeamRequirements, multimem);
SAME_FIELD(ncclTeamRequirements, mcclTeamRequirements, outMultimemHandle);

SAME_SIZE(ncclDevCommRequirements, mcclDevCommRequirements);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, resourceRequirementsList);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, teamRequirementsList);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, lsaMultimem);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, barrierCount);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, lsaBarrierCount);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, railGinBarrierCount);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, lsaLLA2ABlockCount);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, lsaLLA2ASlotCount);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, ginForceEnable);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, ginContextCount);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, ginSignalCount);
SAME_FIELD(ncclDevCommRequirements, mcclDevCommRequirements, ginCounterCount);

// NCCL's objects, seen as lab 09's (the assertions above make the two one layout).
template <typename M, typename N>
static M* as(N* p) {
  static_assert(sizeof(M) == sizeof(N), "one layout");
  return reinterpret_cast<M*>(p);
}
static ncclTeam_t toNcclTeam(mcclTeam t) {
  ncclTeam_t n;
  n.nRanks = t.nRanks;
  n.rank = t.rank;
  n.stride = t.stride;
  return n;
}
static mcclTeam fromNcclTeam(ncclTeam_t n) {
  mcclTeam t = {n.nRanks, n.rank, n.stride};
  return t;
}

// ---- device communicators --------------------------------------------------------------------------------
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclDevCommCreate", &mc);
  if (res != ncclSuccess) return res;
  mcclDropinServed();
  res = mcclDropinResult(mcclDevCommCreate(mc, as<const mcclDevCommRequirements>(reqs), as<mcclDevComm>(outDevComm)));
  return mcclDropinCommPut(comm, res);
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  mcclComm_t mc;
  ncclResult_t res = mcclDropinCommGet(comm, "ncclDevCommDestroy", &mc);
  if (res != ncclSuccess) return res;
  mcclDropinServed();
  res = mcclDropinResult(mcclDevCommDestroy(mc, as<const mcclDevComm>(devComm)));
  return mcclDropinCommPut(comm, res);
}

// ---- teams -----------------------------------------------------------------------------------------------
// A communicator that is not live gives the empty team (or -1), as NCCL's own do when theirs cannot answer.
template <typename R, typename F>
static R teamCall(ncclComm_t comm, const char* call, R none, F f) {
  mcclComm_t mc;
  if (mcclDropinCommGet(comm, call, &mc) != ncclSuccess) return none;
  mcclDropinServed();
  R r = f(mc);
  mcclDropinCommPut(comm, ncclSuccess);
  return r;
}

ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  return toNcclTeam(
      teamCall(comm, "ncclTeamWorld", mcclTeam{0, 0, 0}, [](mcclComm_t mc) { return mcclTeamWorld(mc); }));
}
ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  return toNcclTeam(teamCall(comm, "ncclTeamLsa", mcclTeam{0, 0, 0}, [](mcclComm_t mc) { return mcclTeamLsa(mc); }));
}
ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  return toNcclTeam(teamCall(comm, "ncclTeamRail", mcclTeam{0, 0, 0}, [](mcclComm_t mc) { return mcclTeamRail(mc); }));
}
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  return teamCall(comm, "ncclTeamRankToWorld", -1,
                  [&](mcclComm_t mc) { return mcclTeamRankToWorld(mc, fromNcclTeam(team), rank); });
}
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  return teamCall(comm, "ncclTeamRankToLsa", -1,
                  [&](mcclComm_t mc) { return mcclTeamRankToLsa(mc, fromNcclTeam(team), rank); });
}

// ---- requirements ----------------------------------------------------------------------------------------
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq) {
  mcclDropinServed();
  return mcclDropinResult(mcclLsaBarrierCreateRequirement(
      fromNcclTeam(team), nBarriers, as<mcclLsaBarrierHandle>(outHandle), as<mcclDevResourceRequirements>(outReq)));
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  (void)comm, (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
  return mcclDropinRefused("ncclGinBarrierCreateRequirement",
                           "GIN (the device API's network half, GPU-initiated networking)");
}
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  (void)maxElts, (void)maxEltSize;
  (void)mcclDropinRefused("ncclLLA2ACalcSlots", "the LL all-to-all of the device API");
  return 0;
}
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq) {
  (void)nBlocks, (void)nSlots, (void)outHandle, (void)outReq;
  return mcclDropinRefused("ncclLLA2ACreateRequirement", "the LL all-to-all of the device API");
}
