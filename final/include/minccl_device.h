/**
 * @file minccl_device.h
 * @brief libminccl's device API, host half: NCCL 2.28's ncclDevCommCreate, ncclDevCommDestroy and the team
 * calls of nccl_device/core.h with the mccl prefix, over lab 09.
 * @ingroup final
 *
 * The objects (mcclDevComm, struct mcclWindow_vidmem, mcclTeam, the requirements and barrier handles) are lab
 * 09's, in mccl_dev_comm.h, with the fields and layout of NCCL's own (nccl_device/impl/comm__types.h,
 * core__types.h, lsa_barrier__types.h): the NCCL drop-in hands them to kernels compiled against NCCL's
 * headers unchanged. mcclLsaBarrierCreateRequirement, which needs no communicator, is declared there too.
 * Every window of mcclCommWindowRegister is a device window (its mcclWindow_t points at a struct
 * mcclWindow_vidmem in device memory), so it serves mcclAllReduce and a kernel alike. Kernels written on the
 * API use lab 09's `device/dev_api.cuh`, or, through the drop-in, NCCL's nccl_device.h.
 *
 * @code
 * mcclWindow_t win;
 * mcclCommWindowRegister(comm, buf, bytes, &win, MCCL_WIN_COLL_SYMMETRIC);  // collective
 * mcclDevCommRequirements reqs = MCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
 * reqs.lsaBarrierCount = nBlocks;                                           // one barrier per block
 * mcclDevComm dc;
 * mcclDevCommCreate(comm, &reqs, &dc);                                      // collective
 * myKernel<<<nBlocks, threads, 0, stream>>>(dc, win, ...);                  // dc by value
 * cudaStreamSynchronize(stream);
 * mcclDevCommDestroy(comm, &dc);
 * mcclCommWindowDeregister(comm, win);
 * @endcode
 * @{
 */
#ifndef MINCCL_DEVICE_H_
#define MINCCL_DEVICE_H_

#include "mccl_dev_comm.h"
#include "minccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Create a device communicator (NCCL's ncclDevCommCreate): its resource window holds
 * max(barrierCount, lsaBarrierCount) LSA barriers and the requirements' buffers, zeroed, mapped by every LSA
 * peer at the window stride; lab 09's mcclLabDevCommCreate. Collective; inside mcclGroupStart / mcclGroupEnd
 * it runs at the group's end (one thread per communicator, after the group's window registrations) and
 * *devComm is written then. A rank that refuses its arguments still takes part, as a refusal, so that every
 * rank fails at once.
 * @param[in]  comm     a ready communicator (not revoked or finalized).
 * @param[in]  reqs     the requirements, the same on every rank (copied: a grouped call does not keep it).
 * @param[out] devComm  the device communicator; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (dead comm, NULL reqs or devComm, negative counts, more barriers or
 *         bytes than the resource window holds); mcclInvalidUsage (revoked, finalized or unready comm, with
 *         nothing allocated; GIN, multimem or LL all-to-all requirements, which minccl does not serve).
 */
mcclResult_t mcclDevCommCreate(mcclComm_t comm, const mcclDevCommRequirements* reqs, mcclDevComm* devComm);

/**
 * @brief Free a device communicator's resource window (NCCL's ncclDevCommDestroy). Not collective. The kernels
 * that use it must have ended. Allowed on a revoked or finalized communicator, as the other calls that free.
 * @param[in] comm     the communicator it was created on.
 * @param[in] devComm  from mcclDevCommCreate on comm.
 * @return mcclSuccess; mcclInvalidArgument (dead comm, NULL, destroyed already, or made on another communicator).
 */
mcclResult_t mcclDevCommDestroy(mcclComm_t comm, const mcclDevComm* devComm);

/** @brief Every rank: {nRanks, rank, 1} (NCCL's ncclTeamWorld(ncclComm_t)).
 *  @param[in] comm the communicator. @return the team; {0, 0, 0} (and a warning) for a dead or unready comm. */
mcclTeam mcclTeamWorld(mcclComm_t comm);
/** @brief The ranks that reach this rank's memory by load/store (NCCL's ncclTeamLsa(ncclComm_t)); lab 09's rule.
 *  @param[in] comm the communicator. @return the team; {0, 0, 0} for a dead or unready comm. */
mcclTeam mcclTeamLsa(mcclComm_t comm);
/** @brief The ranks at this rank's LSA index on every LSA team (NCCL's ncclTeamRail(ncclComm_t)).
 *  @param[in] comm the communicator. @return the team; {0, 0, 0} for a dead or unready comm. */
mcclTeam mcclTeamRail(mcclComm_t comm);
/** @brief World rank of member `rank` of team (NCCL's ncclTeamRankToWorld(ncclComm_t, ...)).
 *  @param[in] comm the communicator. @param[in] team a team with this rank. @param[in] rank an index in team.
 *  @return the world rank; -1 for a dead or unready comm. */
int mcclTeamRankToWorld(mcclComm_t comm, mcclTeam team, int rank);
/** @brief LSA rank of member `rank` of team (NCCL's ncclTeamRankToLsa(ncclComm_t, ...)).
 *  @param[in] comm the communicator. @param[in] team a team with this rank. @param[in] rank an index in team.
 *  @return the LSA rank; -1 for a dead or unready comm. */
int mcclTeamRankToLsa(mcclComm_t comm, mcclTeam team, int rank);

#ifdef __cplusplus
}
#endif
/** @} */
#endif
