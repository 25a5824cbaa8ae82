/**
 * @file mccl_enqueue.h
 * @brief Lab 07: the enqueue layer's objects (NCCL 2.28.9 src/include/comm.h ncclTaskColl / ncclTaskP2p /
 * ncclKernelPlanner, src/include/device.h ncclKernelPlan): a call becomes a task, a group's tasks wait in
 * their communicator's planner, and at the group's end they become plans, each one kernel launch.
 * @ingroup lab07
 *
 * A call's path (src/enqueue.c, src/group.c): mcclLabAllReduce -> enqueueCheck (NCCL's ncclEnqueueCheck:
 * the argument checks, then taskAppend: the host operation becomes the device one) -> the task waits in
 * comm->planner -> mcclLabGroupEnd (outside a group a call is a group of one) -> connect what the
 * point-to-point tasks need -> planTasks (NCCL's ncclLaunchPrepare: algorithm and protocol from the
 * tuning table, work items into plans) -> mcclLabLaunchPlan (NCCL's ncclLaunchKernel) -> the kernel,
 * which dispatches each work item on (function, algorithm, protocol).
 */
#ifndef MCCL_ENQUEUE_H_
#define MCCL_ENQUEUE_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "mccl_dev_work.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup lab07
 * @{ */

/** @name CTA policies
 * What a communicator may spend SMs on (NCCL's NCCL_CTA_POLICY_*, ncclConfig_t.CTAPolicy; MCCL_CTA_POLICY
 * overrides): the default and EFFICIENCY run every collective in kernels; ZERO runs the functions the copy
 * engines serve (lab 10) without a kernel where the buffers allow it.
 * @{ */
#define MCCL_CTA_POLICY_DEFAULT 0x00    /**< kernels, as many blocks as the tuning gives */
#define MCCL_CTA_POLICY_EFFICIENCY 0x01 /**< NCCL: fewer blocks on registered buffers; minccl: as the default */
#define MCCL_CTA_POLICY_ZERO 0x02       /**< no SM where the copy engines can do it */
/** @} */

struct mcclLabWindow;

/** @brief One call as its group keeps it until the group ends (NCCL's ncclTaskColl and ncclTaskP2p in one). */
struct mcclLabTask {
  int func;                      /**< enum mcclFunc: Broadcast .. AllReduce, or Send / Recv (AlltoAll, Gather and
                                      Scatter are enqueued as Send and Recv tasks, unless they run on the copy
                                      engines) */
  const void* sendbuff;          /**< input (Send: the bytes sent) */
  void* recvbuff;                /**< output (Recv: where the bytes go) */
  size_t count;                  /**< elements, as the call gave them */
  int dtype;                     /**< mcclDataType_t */
  int devRedOp;                  /**< enum mcclDevRedOp: the call's operation for its type (NCCL's hostToDevRedOp) */
  int redOpArgIsPtr;             /**< 1: redOpArg is the device address of PreMulSum's scalar */
  int userOp;                    /**< 1: an operation from mcclLabRedOpCreatePreMulSum (its scalar may differ between
                                      ranks, so no algorithm may apply one rank's scalar to another's input) */
  uint64_t redOpArg;             /**< PreMulSum's scalar bits (or address), SumPostDiv's divisor */
  int root;                      /**< Broadcast, Reduce: the root; Send, Recv: the peer */
  cudaStream_t stream;           /**< the caller's stream */
  int ce;                        /**< 1: the copy engines run it (CTA policy ZERO, recvbuff in a window: lab 10) */
  struct mcclLabWindow* sendWin; /**< copy engines: the window holding sendbuff, or NULL */
  struct mcclLabWindow* recvWin; /**< copy engines: the window holding recvbuff */
  struct mcclLabTask* next;      /**< the planner's list, in call order */
  int opHost;                    /**< the call's mcclRedOp_t as the user passed it (NCCL's opHost) */
  int callFunc;                  /**< AlltoAll, Gather, Scatter: on the first Send or Recv task of the call, its
                                      enum mcclFunc + 1 (the watchdog records the call from it); 0 on every other
                                      task */
  int callRoot;                  /**< with callFunc: the call's root */
};

/** @brief A communicator's tasks between a group's start and its end (NCCL's ncclKernelPlanner). */
struct mcclLabPlanner {
  struct mcclLabTask* head;      /**< tasks in call order */
  struct mcclLabTask* tail;      /**< the last one */
  struct mcclLabTask* freeTasks; /**< task structs to reuse */
  int nTasks;                    /**< tasks waiting */
  void* group;                   /**< the group (a thread's) that holds this communicator, or NULL */
  struct mcclLabComm* groupNext; /**< the next communicator of that group */
};

/** @brief The kernels a plan can launch (NCCL's generic kernel and its symmetric ones). */
enum mcclLabKernel {
  MCCL_KERNEL_GENERIC = 0,        /**< mcclGenericKernel_<type>: ring, two-shot, one rank, point-to-point works */
  MCCL_KERNEL_ONESHOT_LL = 1,     /**< mcclOneShotLLKernel_<type>: one-shot AllReduce, AllGather (a 1-byte type's
                                       kernel) or ReduceScatter works, LL lines */
  MCCL_KERNEL_ONESHOT_SIMPLE = 2, /**< mcclOneShotSimpleKernel_<type>: one-shot AllReduce works, SIMPLE (2 ranks) */
  MCCL_NUM_KERNELS = 3            /**< number of kernels per type */
};

/** @brief One kernel launch (NCCL's ncclKernelPlan): which kernel, its grid, and its argument with the works. */
struct mcclLabPlan {
  int kernel;   /**< enum mcclLabKernel */
  int dtype;    /**< the kernel's element type (-1 until a work that reduces sets it) */
  int nBlocks;  /**< blocks: the most any of its works uses */
  int nThreads; /**< threads per block: the most any of its works uses */
  size_t bytes; /**< the bytes of its collective works together */
  size_t workBytes[MCCL_DEV_ARGS_BYTES / sizeof(struct mcclDevWorkColl)]; /**< each collective work's bytes: the
                                             generic kernel's channels are shared out by them */
  int workMaxChannels[MCCL_DEV_ARGS_BYTES / sizeof(struct mcclDevWorkColl)]; /**< the most channels each collective
                                             work wants (MCCL_THREAD_THRESHOLDS; the communicator's by default) */
  cudaStream_t stream;                                                    /**< where it is launched */
  struct mcclDevKernelArgsStorage args; /**< the header and the works (args.args.nColl, args.args.nP2p) */
};

/** @} */

#ifdef __cplusplus
}
#endif
#endif
