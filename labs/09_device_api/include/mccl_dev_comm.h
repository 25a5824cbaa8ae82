/**
 * @file mccl_dev_comm.h
 * @brief Lab 09: the objects of the device API that the host makes and kernels read, in NCCL 2.28.9's layout
 * (nccl_device/impl/comm__types.h, core__types.h, lsa_barrier__types.h): the device communicator, device
 * windows, teams, barrier handles and the requirements a device communicator is made from, with the team
 * arithmetic and the LSA barrier's requirement, which need no communicator. C11, C++ and CUDA; no other
 * header of minccl, so final/'s installed minccl_device.h can include it.
 * @ingroup lab09
 */
#ifndef MCCL_DEV_COMM_H_
#define MCCL_DEV_COMM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mccl_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab09
 *  @{
 */

/** @brief Host and device inline functions: the teams' arithmetic runs on both sides. */
#if defined(__CUDACC__)
#define MCCL_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define MCCL_HOST_DEVICE_INLINE static inline
#endif

/** @brief Contexts a window names for GIN (NCCL_GIN_MAX_CONTEXTS): kept for the layout, always empty here. */
#define MCCL_GIN_MAX_CONTEXTS 4
/** @brief The unit of the resource window's handles: a handle is an offset in 128-byte lines. */
#define MCCL_DEV_RESOURCE_LINE 128
/** @brief The most bytes a device communicator's resource window holds (barriers and extra buffers). */
#define MCCL_DEV_RESOURCE_MAX_BYTES ((size_t)256 << 20)

/** @brief A set of ranks as (nRanks, this rank's index in it, the world distance between neighbours)
 *  (NCCL's ncclTeam). */
typedef struct mcclTeam {
  int nRanks; /**< ranks in the team */
  int rank;   /**< this rank's index in the team */
  int stride; /**< world ranks between consecutive members */
} mcclTeam;
/** @brief NCCL's ncclTeam_t spelling. */
typedef mcclTeam mcclTeam_t;

/** @brief A handle to a buffer of the resource window: its offset in MCCL_DEV_RESOURCE_LINE lines. */
typedef uint32_t mcclDevResourceHandle;

/**
 * @brief A window as kernels see it, in device memory (NCCL's ncclWindow_vidmem, same layout): rank r of
 * the LSA team has its buffer at lsaFlatBase + r * (stride4G << 32); this rank's is at lsaRank.
 */
struct mcclWindow_vidmem {
  void* winHost;                        /**< the host's record of this window (lab 09's, opaque) */
  char* lsaFlatBase;                    /**< LSA rank 0's buffer; every LSA rank's follows at the stride */
  int lsaRank;                          /**< this rank in the LSA team */
  int worldRank;                        /**< this rank in the world */
  uint32_t stride4G;                    /**< bytes between two ranks' buffers, in units of 4 GiB */
  uint32_t mcOffset4K;                  /**< multicast offset: no multimem here, always 0 */
  uint32_t ginOffset4K;                 /**< GIN offset: no GIN here, always 0 */
  void* ginWins[MCCL_GIN_MAX_CONTEXTS]; /**< GIN windows: always NULL */
};
/** @brief A device window: a device pointer (NCCL's ncclWindow_t). */
typedef struct mcclWindow_vidmem* mcclWindow_t;

/** @brief A multicast object's base (NCCL's ncclMultimemHandle): never set, multimem is refused. */
typedef struct mcclMultimemHandle {
  void* mcBasePtr; /**< always NULL */
} mcclMultimemHandle;

/** @brief An LSA barrier's memory in the resource window and how many barriers it holds
 *  (NCCL's ncclLsaBarrierHandle). */
typedef struct mcclLsaBarrierHandle {
  mcclDevResourceHandle bufHandle; /**< where its state starts */
  int nBarriers;                   /**< independent barriers (a session names one by index) */
} mcclLsaBarrierHandle;

/** @brief A GIN barrier's handle (NCCL's ncclGinBarrierHandle): kept for the layout, always zero. */
typedef struct mcclGinBarrierHandle {
  uint32_t signal0;                /**< first GIN signal */
  mcclDevResourceHandle bufHandle; /**< its memory */
} mcclGinBarrierHandle;

/** @brief Window table blocks hold this many entries each (NCCL's ncclDevCommWindowTable::entries). */
#define MCCL_DEV_WINDOW_TABLE_ENTRIES 32

/** @brief One window of a communicator's window table: the user's buffer and its device window, or all zero. */
struct mcclDevCommWindowTableEntry {
  uintptr_t base;      /**< the buffer's address, as registered */
  uintptr_t size;      /**< its bytes */
  mcclWindow_t window; /**< its device window */
};

/**
 * @brief A communicator's table of device windows, in device memory: what a kernel searches to find the window
 * that holds a pointer (NCCL's ncclDevCommWindowTable, read by ncclFindWindow). Blocks of
 * MCCL_DEV_WINDOW_TABLE_ENTRIES entries chained by `next`; a free entry is all zero.
 */
struct mcclDevCommWindowTable {
  struct mcclDevCommWindowTableEntry entries[MCCL_DEV_WINDOW_TABLE_ENTRIES]; /**< the windows */
  struct mcclDevCommWindowTable* next;                                       /**< the next block, or NULL */
};

/**
 * @brief The device communicator a kernel takes by value (NCCL's ncclDevComm, same layout): ranks, the LSA
 * team, and the resource window that holds the LSA barriers and the buffers the requirements asked for.
 */
typedef struct mcclDevComm {
  int rank;                                        /**< this rank in the world */
  int nRanks;                                      /**< world size */
  uint32_t nRanks_rcp32;                           /**< reciprocal of nRanks for division without a divide */
  int lsaRank;                                     /**< this rank in the LSA team */
  int lsaSize;                                     /**< ranks that reach each other's memory by load/store */
  uint32_t lsaSize_rcp32;                          /**< reciprocal of lsaSize */
  struct mcclDevCommWindowTable* windowTable;      /**< the communicator's windows, device memory */
  mcclWindow_t resourceWindow;                     /**< the resource window, device memory */
  struct mcclWindow_vidmem resourceWindow_inlined; /**< a copy of it, so kernels skip one load */
  mcclMultimemHandle lsaMultimem;                  /**< multicast of the LSA team: none */
  mcclLsaBarrierHandle lsaBarrier;                 /**< the LSA barriers in the resource window */
  mcclGinBarrierHandle railGinBarrier;             /**< the rail team's GIN barrier: none */
  uint8_t ginContextCount;                         /**< GIN contexts: 0 */
  uint8_t ginTypes[4];                             /**< unused */
  void* ginHandles[4];                             /**< unused */
  uint32_t ginSignalBase;                          /**< unused */
  int ginSignalCount;                              /**< unused */
  uint32_t ginCounterBase;                         /**< unused */
  int ginCounterCount;                             /**< unused */
  uint64_t* ginSignalShadows;                      /**< unused */
} mcclDevComm;

/** @brief One buffer a device communicator's resource window holds (NCCL's ncclDevResourceRequirements). */
typedef struct mcclDevResourceRequirements {
  struct mcclDevResourceRequirements* next; /**< the list */
  size_t bufferSize;                        /**< bytes */
  size_t bufferAlign;                       /**< alignment (at least MCCL_DEV_RESOURCE_LINE), a power of two or 0 */
  mcclDevResourceHandle* outBufferHandle;   /**< if non-NULL, set to the buffer's handle by mcclLabDevCommCreate */
  int ginSignalCount;                       /**< must be 0: no GIN */
  int ginCounterCount;                      /**< must be 0: no GIN */
  uint32_t* outGinSignalStart;              /**< ignored */
  uint32_t* outGinCounterStart;             /**< ignored */
} mcclDevResourceRequirements;

/** @brief A team the device communicator should prepare (NCCL's ncclTeamRequirements): only multimem is asked
 *  for this way, and multimem is refused. */
typedef struct mcclTeamRequirements {
  struct mcclTeamRequirements* next;     /**< the list */
  mcclTeam team;                         /**< the team */
  bool multimem;                         /**< must be false */
  mcclMultimemHandle* outMultimemHandle; /**< ignored */
} mcclTeamRequirements;

/** @brief What a device communicator must hold (NCCL's ncclDevCommRequirements, same fields). */
typedef struct mcclDevCommRequirements {
  mcclDevResourceRequirements* resourceRequirementsList; /**< extra buffers in the resource window, or NULL */
  mcclTeamRequirements* teamRequirementsList;            /**< teams with multimem: must hold none */
  bool lsaMultimem;                                      /**< multicast on the LSA team: refused (mcclInvalidUsage) */
  int barrierCount;        /**< barriers over the world (LSA part; a rail part would need GIN) */
  int lsaBarrierCount;     /**< LSA barriers; the communicator gets max(barrierCount, lsaBarrierCount) */
  int railGinBarrierCount; /**< must be 0: no GIN */
  int lsaLLA2ABlockCount;  /**< must be 0: the LL all-to-all is not served */
  int lsaLLA2ASlotCount;   /**< must be 0 */
  bool ginForceEnable;     /**< must be false: no GIN */
  int ginContextCount;     /**< a hint (as in NCCL): ignored, the communicator has 0 */
  int ginSignalCount;      /**< must be 0 */
  int ginCounterCount;     /**< must be 0 */
} mcclDevCommRequirements;

/** @brief Requirements that ask for nothing (NCCL's `= {}`): set the counts you need. */
#define MCCL_DEV_COMM_REQUIREMENTS_INITIALIZER \
  { NULL, NULL, false, 0, 0, 0, 0, 0, false, 0, 0, 0 }

/**
 * @brief The requirement of `nBarriers` LSA barriers over `team` (NCCL's ncclLsaBarrierCreateRequirement):
 * the resource buffer their state needs, (3 + team.nRanks) * nBarriers 32-bit words (an epoch per barrier for
 * unicast and for multicast, a multicast inbox, and an inbox slot per peer), and the handle that will name it.
 * Chain outReq into mcclDevCommRequirements::resourceRequirementsList; mcclLabDevCommCreate fills the handle.
 * @param[in]  team       the team (nRanks >= 1).
 * @param[in]  nBarriers  >= 0.
 * @param[out] outHandle  the barrier's handle (bufHandle set by mcclLabDevCommCreate).
 * @param[out] outReq     the requirement, zeroed then filled.
 * @return mcclSuccess; mcclInvalidArgument (NULL, bad team, negative or overflowing count).
 */
mcclResult_t mcclLsaBarrierCreateRequirement(mcclTeam team, int nBarriers, mcclLsaBarrierHandle* outHandle,
                                             mcclDevResourceRequirements* outReq);

/** @brief Whether member `bRank` of team b is a member of team a (NCCL's ncclTeamRankIsMember).
 *  @param[in] a a team. @param[in] b a team with this rank. @param[in] bRank an index in b.
 *  @return true if it is. */
MCCL_HOST_DEVICE_INLINE bool mcclTeamRankIsMember(mcclTeam a, mcclTeam b, int bRank) {
  int wrank = (bRank - b.rank) * b.stride;
  int arank = a.rank + wrank / a.stride;
  return 0 <= arank && arank < a.nRanks && wrank % a.stride == 0;
}
/** @brief Index in team a of member `bRank` of team b (NCCL's ncclTeamRankToTeam).
 *  @param[in] a a team. @param[in] b a team with this rank. @param[in] bRank an index in b.
 *  @return the index in a. */
MCCL_HOST_DEVICE_INLINE int mcclTeamRankToTeam(mcclTeam a, mcclTeam b, int bRank) {
  return a.rank + (bRank - b.rank) * b.stride / a.stride;
}
/** @brief The inner factor of a team cut in groups of innerSize consecutive members (NCCL's ncclTeamInnerFactor).
 *  @param[in] parent the team. @param[in] innerSize group size. @return the group with this rank. */
MCCL_HOST_DEVICE_INLINE mcclTeam mcclTeamInnerFactor(mcclTeam parent, int innerSize) {
  mcclTeam t = {innerSize, parent.rank % innerSize, parent.stride};
  return t;
}
/** @brief The outer factor: this rank's index across the groups (NCCL's ncclTeamOuterFactor).
 *  @param[in] parent the team. @param[in] innerSize group size. @return the team across groups. */
MCCL_HOST_DEVICE_INLINE mcclTeam mcclTeamOuterFactor(mcclTeam parent, int innerSize) {
  mcclTeam t = {parent.nRanks / innerSize, parent.rank / innerSize, parent.stride * innerSize};
  return t;
}
/** @brief Offset of a resource buffer in the resource window (NCCL's ncclGetResourceBufferOffset).
 *  @param[in] h the handle. @return bytes. */
MCCL_HOST_DEVICE_INLINE size_t mcclGetResourceBufferOffset(mcclDevResourceHandle h) {
  return (size_t)h * MCCL_DEV_RESOURCE_LINE;
}

/** @} */

#ifdef __cplusplus
}
#endif
#endif
