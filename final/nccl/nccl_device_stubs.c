// The host calls of NCCL 2.28's device API (nccl_device.h and nccl_device/*.h: device communicators,
// teams, barrier and LL all-to-all requirements). minccl has no device API: each warns once and
// refuses. The headers are CUDA C++, so the signatures are written here with opaque pointers; the one
// value type, ncclTeam_t, is mirrored (nccl_device/core.h: struct ncclTeam { int nRanks, rank, stride; }).
// PyTorch's libtorch_cuda links ncclDevCommCreate/Destroy, so the library must define them to load.
#include <nccl.h>
#include "nccl_dropin.h"

typedef struct {
  int nRanks, rank, stride;
} mcclNcclTeam;  // NCCL's ncclTeam_t, returned by value in registers as NCCL returns it

static mcclNcclTeam noTeam(const char* call) {
  mcclDropinUnimplemented(call);
  mcclNcclTeam t = {0, 0, 0};
  return t;
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* outDevComm) {
  (void)comm, (void)reqs, (void)outDevComm;
  return mcclDropinUnimplemented("ncclDevCommCreate");
}
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm) {
  (void)comm, (void)devComm;
  return mcclDropinUnimplemented("ncclDevCommDestroy");
}
mcclNcclTeam ncclTeamWorld(ncclComm_t comm) {
  (void)comm;
  return noTeam("ncclTeamWorld");
}
mcclNcclTeam ncclTeamLsa(ncclComm_t comm) {
  (void)comm;
  return noTeam("ncclTeamLsa");
}
mcclNcclTeam ncclTeamRail(ncclComm_t comm) {
  (void)comm;
  return noTeam("ncclTeamRail");
}
int ncclTeamRankToWorld(ncclComm_t comm, mcclNcclTeam team, int rank) {
  (void)comm, (void)team, (void)rank;
  mcclDropinUnimplemented("ncclTeamRankToWorld");
  return -1;
}
int ncclTeamRankToLsa(ncclComm_t comm, mcclNcclTeam team, int rank) {
  (void)comm, (void)team, (void)rank;
  mcclDropinUnimplemented("ncclTeamRankToLsa");
  return -1;
}
ncclResult_t ncclLsaBarrierCreateRequirement(mcclNcclTeam team, int nBarriers, void* outHandle, void* outReq) {
  (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
  return mcclDropinUnimplemented("ncclLsaBarrierCreateRequirement");
}
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, mcclNcclTeam team, int nBarriers, void* outHandle,
                                             void* outReq) {
  (void)comm, (void)team, (void)nBarriers, (void)outHandle, (void)outReq;
  return mcclDropinUnimplemented("ncclGinBarrierCreateRequirement");
}
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  (void)maxElts, (void)maxEltSize;
  mcclDropinUnimplemented("ncclLLA2ACalcSlots");
  return 0;
}
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, void* outHandle, void* outReq) {
  (void)nBlocks, (void)nSlots, (void)outHandle, (void)outReq;
  return mcclDropinUnimplemented("ncclLLA2ACreateRequirement");
}
