/**
 * @file mccl_dev_api.h
 * @brief Lab 09: the device API's host half and the objects kernels read: the device communicator
 * (mcclDevComm), teams, the LSA barrier's handle, device windows whose peers sit in one flat range at a
 * stride of whole 4 GiB units, and the requirements a device communicator is created from.
 * @ingroup lab09
 */
#ifndef MCCL_DEV_API_H_
#define MCCL_DEV_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "mccl_allreduce.h"
#include "mccl_dev_comm.h"
#include "mccl_result.h"
#include "mccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup lab09 Lab 09: the device API
 * @brief Kernels that communicate by themselves (NCCL 2.28.9 src/include/nccl_device/, src/dev_runtime.cc,
 * src/device/symmetric/): a device communicator made from requirements, teams and their rank conversions,
 * cooperative groups, LSA barrier sessions, and pointers into peers' symmetric windows found by arithmetic
 * on one flat base. The device half is in `device/dev_api.cuh` (for `.cu` files, on both backends).
 *
 * @code
 * mcclLabWindow* w;                                               // lab 07: collective, every rank
 * MCCLCHECK(mcclLabWindowRegister(comm, buf, bytes, &w));
 * mcclWindow_t win;                                               // this rank's device view of it
 * MCCLCHECK(mcclDevWindowCreate(comm, w, &win));
 * mcclDevCommRequirements reqs = MCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
 * reqs.lsaBarrierCount = nBlocks;                                 // one barrier per block
 * mcclDevComm dc;
 * MCCLCHECK(mcclLabDevCommCreate(comm, &reqs, &dc));                 // collective
 * MCCLCHECK(mcclDevAllReduceOneShot(&dc, win, 0, out, count, mcclFloat32, nBlocks, stream));
 * cudaStreamSynchronize(stream);
 * MCCLCHECK(mcclLabDevCommDestroy(comm, &dc));
 * MCCLCHECK(mcclDevWindowDestroy(comm, win));
 * MCCLCHECK(mcclLabWindowDeregister(comm, w));
 * @endcode
 * @{
 */

/**
 * @brief The LSA team of a communicator: the ranks of this rank's host, when every host's ranks are
 * consecutive in the world and every host has as many; otherwise this rank alone (NCCL's devr lsaSelf /
 * lsaSize rule: an LSA team must be a contiguous range of world ranks, and all of them of one size).
 * @param[in]  comm     the communicator.
 * @param[out] lsaRank  this rank's index in it.
 * @param[out] lsaSize  its size.
 * @return mcclSuccess; mcclInvalidArgument (NULL).
 */
mcclResult_t mcclDevLsaTeamOf(const mcclLabComm* comm, int* lsaRank, int* lsaSize);

/**
 * @brief Create a device communicator (NCCL's ncclDevCommCreate). Collective over the communicator: the
 * resource window (LSA barriers, then the requirements' buffers, zeroed) is registered on every rank as a lab
 * 07 window and mapped at NCCL's 4 GiB stride (mcclDevWindowCreate). A rank whose requirements are refused
 * still takes part in that registration with a refusal, so every rank fails at once. `windowTable` points at
 * the communicator's table of device windows, which lists every device window made on it, before or after.
 * @param[in]  comm     the communicator (not aborted).
 * @param[in]  reqs     the requirements, the same on every rank.
 * @param[out] devComm  the device communicator, to pass by value to kernels; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (NULL, negative counts, more barriers or buffer bytes than
 *         MCCL_DEV_RESOURCE_MAX_BYTES hold); mcclInvalidUsage (an aborted communicator: nothing is allocated;
 *         GIN, multimem or LL all-to-all requirements: not served); errors of the layers below.
 */
mcclResult_t mcclLabDevCommCreate(mcclLabComm* comm, const mcclDevCommRequirements* reqs, mcclDevComm* devComm);

/**
 * @brief Free a device communicator's resource window (NCCL's ncclDevCommDestroy). Not collective. Kernels
 * that use it must have ended (synchronize their streams first).
 * @param[in] comm     the communicator it was created on.
 * @param[in] devComm  from mcclLabDevCommCreate on comm.
 * @return mcclSuccess; mcclInvalidArgument (NULL, destroyed already, or created on another communicator).
 */
mcclResult_t mcclLabDevCommDestroy(mcclLabComm* comm, const mcclDevComm* devComm);

/**
 * @brief The device view of a lab 07 window (NCCL's window handle, ncclWindow_t): a new reservation of
 * lsaSize * stride bytes, the stride the largest buffer rounded up to whole 4 GiB units, where each LSA
 * peer's buffer, already mapped by the window, is mapped again at lsaRank * stride; and a struct
 * mcclWindow_vidmem in device memory that describes it, entered in the communicator's window table. Not collective.
 * @param[in]  comm    the communicator (not aborted).
 * @param[in]  win     a window of comm (mcclLabWindowRegister).
 * @param[out] devWin  the device window; written only on success.
 * @return mcclSuccess; mcclInvalidArgument (NULL); mcclInvalidUsage (aborted communicator; a window not
 *         registered on comm; a window that is not symmetric: an LSA peer's buffer is not mapped);
 *         errors of lab 01 and lab 03.
 */
mcclResult_t mcclDevWindowCreate(mcclLabComm* comm, mcclLabWindow* win, mcclWindow_t* devWin);

/**
 * @brief Unmap and free a device window. Not collective; kernels that use it must have ended.
 * @param[in] comm    the communicator it was created on.
 * @param[in] devWin  from mcclDevWindowCreate, or NULL (a no-op).
 * @return mcclSuccess; mcclInvalidArgument (destroyed already, or created on another communicator).
 */
mcclResult_t mcclDevWindowDestroy(mcclLabComm* comm, mcclWindow_t devWin);

/**
 * @brief The host's copy of a device window (what kernels read through devWin).
 * @param[in]  comm    the communicator.
 * @param[in]  devWin  from mcclDevWindowCreate on comm.
 * @param[out] out     the copy.
 * @return mcclSuccess; mcclInvalidArgument (NULL, not a live device window of comm).
 */
mcclResult_t mcclDevWindowGetHost(const mcclLabComm* comm, mcclWindow_t devWin, struct mcclWindow_vidmem* out);

/**
 * @brief The lab 07 window a device window is the device view of.
 * @param[in]  comm    the communicator.
 * @param[in]  devWin  from mcclDevWindowCreate on comm.
 * @param[out] labWin  the window.
 * @return mcclSuccess; mcclInvalidArgument (NULL, not a live device window of comm).
 */
mcclResult_t mcclDevWindowLabWindow(const mcclLabComm* comm, mcclWindow_t devWin, mcclLabWindow** labWin);

/**
 * @brief Destroy every device communicator and device window still made on comm, before comm itself goes
 * (final/'s communicator destroy and abort). Not collective; kernels that use them must have ended.
 * @param[in] comm  the communicator.
 * @return mcclSuccess; mcclInvalidArgument (NULL); the first error met (every object is freed all the same).
 */
mcclResult_t mcclLabDevRelease(mcclLabComm* comm);

/** @brief The world team of a communicator (NCCL's ncclTeamWorld(ncclComm_t)). @param[in] comm the communicator.
 *  @return the team ({0, 0, 0} for NULL). */
mcclTeam mcclLabTeamWorld(const mcclLabComm* comm);
/** @brief The LSA team (NCCL's ncclTeamLsa(ncclComm_t)). @param[in] comm the communicator.
 *  @return the team ({0, 0, 0} for NULL). */
mcclTeam mcclLabTeamLsa(const mcclLabComm* comm);
/** @brief The rail team: the ranks at this rank's LSA index on every host (NCCL's ncclTeamRail(ncclComm_t)).
 *  @param[in] comm the communicator. @return the team ({0, 0, 0} for NULL). */
mcclTeam mcclLabTeamRail(const mcclLabComm* comm);
/** @brief World rank of `rank` of team (NCCL's ncclTeamRankToWorld(ncclComm_t, ...)).
 *  @param[in] comm the communicator. @param[in] team a team of it. @param[in] rank an index in team.
 *  @return the world rank (-1 for NULL). */
int mcclLabTeamRankToWorld(const mcclLabComm* comm, mcclTeam team, int rank);
/** @brief LSA rank of `rank` of team (NCCL's ncclTeamRankToLsa(ncclComm_t, ...)).
 *  @param[in] comm the communicator. @param[in] team a team of it. @param[in] rank an index in team.
 *  @return the LSA rank (-1 for NULL). */
int mcclLabTeamRankToLsa(const mcclLabComm* comm, mcclTeam team, int rank);

/**
 * @brief Launch the lab's one-shot allreduce (sum) written on the device API: after an LSA barrier, every
 * rank reads every peer's input through the window and writes the sum to its own output, then a barrier
 * lets the inputs be reused. One block per LSA barrier.
 * @param[in] devComm     its LSA barriers: at least nBlocks.
 * @param[in] sendWin     the input's window (mcclDevWindowCreate).
 * @param[in] sendOffset  the input's offset in it.
 * @param[out] recvbuff   this rank's output (device memory; may be the input itself).
 * @param[in] count       elements.
 * @param[in] type        mcclFloat32 or mcclBfloat16.
 * @param[in] nBlocks     1 .. devComm->lsaBarrier.nBarriers.
 * @param[in] stream      the stream.
 * @return mcclSuccess; mcclInvalidArgument (NULL, type, nBlocks); mcclUnhandledCudaError.
 */
mcclResult_t mcclDevAllReduceOneShot(const mcclDevComm* devComm, mcclWindow_t sendWin, size_t sendOffset,
                                     void* recvbuff, size_t count, mcclDataType_t type, int nBlocks,
                                     cudaStream_t stream);

/**
 * @brief Launch the lab's two-shot allreduce (sum): each rank reduces its part of the input from every
 * peer and stores it into every peer's output, then a barrier.
 * @param[in] devComm     its LSA barriers: at least nBlocks.
 * @param[in] sendWin     the input's window.
 * @param[in] sendOffset  the input's offset in it.
 * @param[in] recvWin     the output's window (may be sendWin, at another or the same offset).
 * @param[in] recvOffset  the output's offset in it.
 * @param[in] count       elements.
 * @param[in] type        mcclFloat32 or mcclBfloat16.
 * @param[in] nBlocks     1 .. devComm->lsaBarrier.nBarriers.
 * @param[in] stream      the stream.
 * @return as mcclDevAllReduceOneShot.
 */
mcclResult_t mcclDevAllReduceTwoShot(const mcclDevComm* devComm, mcclWindow_t sendWin, size_t sendOffset,
                                     mcclWindow_t recvWin, size_t recvOffset, size_t count, mcclDataType_t type,
                                     int nBlocks, cudaStream_t stream);

/**
 * @brief Launch the lab's allgather: every rank reads each peer's `bytes` through the window into
 * recvbuff + peer * bytes.
 * @param[in] devComm     its LSA barriers: at least nBlocks.
 * @param[in] sendWin     the input's window.
 * @param[in] sendOffset  the input's offset in it.
 * @param[out] recvbuff   lsaSize * bytes of device memory.
 * @param[in] bytes       bytes per rank.
 * @param[in] nBlocks     1 .. devComm->lsaBarrier.nBarriers.
 * @param[in] stream      the stream.
 * @return as mcclDevAllReduceOneShot.
 */
mcclResult_t mcclDevAllGather(const mcclDevComm* devComm, mcclWindow_t sendWin, size_t sendOffset, void* recvbuff,
                              size_t bytes, int nBlocks, cudaStream_t stream);

/**
 * @brief Launch the fused allreduce + RMSNorm: out[r][i] = s[r][i] * w[i] / sqrt(mean_i(s[r][i]^2) + eps),
 * where s is the sum over ranks of each rank's x (rows x hidden), read from the peers in one kernel.
 * @param[in] devComm  its LSA barriers: at least nBlocks.
 * @param[in] xWin     the hidden state's window.
 * @param[in] xOffset  its offset in it.
 * @param[in] weight   hidden elements, device memory.
 * @param[out] out     rows x hidden elements, device memory.
 * @param[in] rows     >= 0.
 * @param[in] hidden   >= 1.
 * @param[in] eps      added to the mean square.
 * @param[in] type     mcclFloat32 or mcclBfloat16 (of x, weight and out).
 * @param[in] nBlocks  1 .. devComm->lsaBarrier.nBarriers.
 * @param[in] stream   the stream.
 * @return as mcclDevAllReduceOneShot.
 */
mcclResult_t mcclDevAllReduceRmsNorm(const mcclDevComm* devComm, mcclWindow_t xWin, size_t xOffset, const void* weight,
                                     void* out, int rows, int hidden, float eps, mcclDataType_t type, int nBlocks,
                                     cudaStream_t stream);

/**
 * @brief The second step of the unfused version: RMSNorm of rows x hidden elements, one block per row.
 * @param[in] in      rows x hidden, device memory (an allreduce's output).
 * @param[in] weight  hidden elements.
 * @param[out] out    rows x hidden.
 * @param[in] rows    >= 0.
 * @param[in] hidden  >= 1.
 * @param[in] eps     added to the mean square.
 * @param[in] type    mcclFloat32 or mcclBfloat16.
 * @param[in] stream  the stream.
 * @return mcclSuccess; mcclInvalidArgument; mcclUnhandledCudaError.
 */
mcclResult_t mcclDevRmsNorm(const void* in, const void* weight, void* out, int rows, int hidden, float eps,
                            mcclDataType_t type, cudaStream_t stream);

/**
 * @brief Launch the lab's barrier exercise kernel: `iters` LSA barrier sessions in a row on one block per
 * barrier; before each, every rank stores the iteration into its slot of `win`, after it checks every peer's
 * slot, counting mismatches into *errors (device memory). mode 0: sync(acq_rel); 1: arrive(release) then
 * wait(acquire); 2: sync(seq_cst); 3: relaxed arrive and wait with fences around them.
 * @param[in] devComm  its LSA barriers: at least nBlocks.
 * @param[in] win      a window of at least 2 * lsaSize * nBlocks * 8 bytes.
 * @param[in] iters    >= 0.
 * @param[in] mode     0 .. 3.
 * @param[in] nBlocks  1 .. devComm->lsaBarrier.nBarriers.
 * @param[in] nThreads threads per block, 1 .. 1024 (the session's cooperative group is the CTA).
 * @param[out] errors  device: mismatches seen, added to.
 * @param[in] stream   the stream.
 * @return mcclSuccess; mcclInvalidArgument; mcclUnhandledCudaError.
 */
mcclResult_t mcclDevBarrierTest(const mcclDevComm* devComm, mcclWindow_t win, int iters, int mode, int nBlocks,
                                int nThreads, uint32_t* errors, cudaStream_t stream);

/**
 * @brief Launch the lab's pointer check: every rank stores (its rank, peer) into word `rank` of every peer's
 * window through mcclGetPeerPointer, then after a barrier reads every peer's word through mcclGetLsaPointer
 * and checks the local pointer; mismatches are added to *errors.
 * @param[in] devComm  one LSA barrier at least.
 * @param[in] win      a window of at least lsaSize * 8 bytes.
 * @param[out] errors  device: mismatches seen, added to.
 * @param[in] stream   the stream.
 * @return mcclSuccess; mcclInvalidArgument; mcclUnhandledCudaError.
 */
mcclResult_t mcclDevPeerPointerTest(const mcclDevComm* devComm, mcclWindow_t win, uint32_t* errors,
                                    cudaStream_t stream);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
