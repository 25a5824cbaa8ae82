/**
 * @file mccl_prims.h
 * @brief Lab 06: what the host needs to run the device-side primitives: data types, reduction
 * operations, the work a kernel block performs on its connections, and the launch through the
 * driver API (NCCL's ncclDevWorkColl + ncclLaunchKernel, reduced to one primitive per launch).
 * @ingroup lab06
 */
#ifndef MCCL_PRIMS_H_
#define MCCL_PRIMS_H_

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "mccl_conn.h"
#include "mccl_result.h"
#include "mccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @addtogroup lab06
 * @brief NCCL 2.28.9 src/device/prims_simple.h, prims_ll.h, primitives.h, common.h, op128.h,
 * reduce_kernel.h: GPU threads that wait for a peer's tail (or head), copy or reduce one slot of the
 * connection's FIFO, and publish their own tail (or head); the SIMPLE and LL protocols; abort.
 *
 * A launch runs one primitive (mcclDevOp) on `nchannels` connections: block b drives channel b,
 * i.e. `recvConns[b]` and/or `sendConns[b]`, on its contiguous part of the buffers.
 *
 * @code
 * struct mcclDevWork w = {0};
 * w.op = mcclDevOpSend; w.proto = MCCL_PROTO_SIMPLE; w.dtype = mcclUint8; w.redop = mcclSum;
 * w.src = devSrc; w.count = nbytes; w.sendConns = devConns; w.nchannels = 2;
 * w.abortFlag = devAbort; w.status = devStatus;
 * MCCLCHECK(mcclDevLaunch(&w, 256, stream));
 * MCCLCHECK(mcclDevWait(stream, hostAbort, hostStatus, timeoutMs));
 * @endcode
 * @{
 */

/** @brief The primitive a launch performs (the public ops of NCCL's Primitives). */
enum mcclDevOp {
  mcclDevOpNone = -1,              /**< not one op: a lab 07 kernel (its trace names no op); never launched here */
  mcclDevOpSend = 0,               /**< src -> send FIFO */
  mcclDevOpRecv = 1,               /**< recv FIFO -> dst */
  mcclDevOpCopySend = 2,           /**< src -> dst and send FIFO */
  mcclDevOpRecvCopySend = 3,       /**< recv FIFO -> dst and send FIFO */
  mcclDevOpRecvReduceSend = 4,     /**< recv FIFO (op) src -> send FIFO */
  mcclDevOpRecvReduceCopy = 5,     /**< recv FIFO (op) src -> dst */
  mcclDevOpRecvReduceCopySend = 6, /**< recv FIFO (op) src -> dst and send FIFO */
  mcclDevOpNum = 7                 /**< number of ops */
};

/** @brief The reduction a kernel runs (NCCL's ncclDevRedOp_t): what the host's mcclRedOp_t becomes for a
 *  call's type (NCCL's hostToDevRedOp; lab 07's enqueue). The 64-bit argument that goes with it is the
 *  scalar's bits for PreMulSum and the divisor for SumPostDiv. */
enum mcclDevRedOp {
  mcclDevSum = 0,        /**< a + b */
  mcclDevProd = 1,       /**< a * b */
  mcclDevMax = 2,        /**< max(a, b) */
  mcclDevMin = 3,        /**< min(a, b) */
  mcclDevPreMulSum = 4,  /**< each rank's input times a scalar, then the sum (avg of floating types) */
  mcclDevSumPostDiv = 5, /**< the sum, divided by the argument at the end (avg of integers) */
  mcclNumDevRedOps = 6   /**< number of device operations */
};

/** @brief Most threads per block mcclDevLaunch accepts (the kernel's launch bound). */
#define MCCL_DEV_MAX_THREADS 1024
/** @brief Threads per block when mcclDevLaunch is given 0. */
#define MCCL_DEV_DEFAULT_NTHREADS 512
/** @brief Default SIMPLE chunking: FIFO slots per chunk and per slice (NCCL's ALLREDUCE_CHUNKSTEPS
 *  and ALLREDUCE_SLICESTEPS: half and a quarter of MCCL_STEPS). */
#define MCCL_DEV_DEFAULT_CHUNKSTEPS 4
/** @brief Default SIMPLE slots per slice. */
#define MCCL_DEV_DEFAULT_SLICESTEPS 2
/** @brief Bytes a SIMPLE slice leaves free at the end of its slots, for a P2P sender that starts it past the slot's
 *  start (mcclConnFifo::mode MCCL_MODE_OFFSET: at its user buffer's offset modulo 16; one 256-byte slice quantum). */
#define MCCL_SIMPLE_SHIFT_ROOM 256
/** @brief Slots of a slice smaller than this (bytes) are never shifted, and the slice fills them. */
#define MCCL_SIMPLE_SHIFT_MIN_BYTES 4096
/** @brief Data bytes a SIMPLE slice of `slotBytes` bytes of FIFO slots carries, on every transport (so both ends of
 *  a connection, whatever the next one is, cut a chunk into the same slices). */
#define MCCL_SIMPLE_SLICE_DATA(slotBytes) \
  ((slotBytes) >= MCCL_SIMPLE_SHIFT_MIN_BYTES ? (slotBytes)-MCCL_SIMPLE_SHIFT_ROOM : (slotBytes))
/** @brief Most channels (blocks) one launch drives. */
#define MCCL_DEV_MAX_CHANNELS 64

/** @brief mcclDevWork::status values, written by the kernel into host-mapped memory. */
enum mcclDevStatus {
  mcclDevStatusRunning = 0, /**< not finished (the host sets this before the launch) */
  mcclDevStatusDone = 1,    /**< every block finished its part */
  mcclDevStatusAborted = 2  /**< a block saw the abort flag and left early */
};

/**
 * @brief One launch's work, passed by value as the kernel's only argument (NCCL's
 * ncclDevKernelArgs + ncclDevWorkColl). Pointers are device addresses.
 */
struct mcclDevWork {
  int op;                         /**< enum mcclDevOp */
  int proto;                      /**< MCCL_PROTO_SIMPLE or MCCL_PROTO_LL */
  int dtype;                      /**< mcclDataType_t */
  int redop;                      /**< mcclRedOp_t (reducing ops only; mcclSum otherwise); avg sums, then
                                       postOp divides by redOpArg (mcclDevSumPostDiv) */
  int postOp;                     /**< 1: apply the operation's post step (avg: divide) to what is stored;
                                       only for recvReduceCopy and recvReduceCopySend */
  int nchannels;                  /**< blocks, one per channel, 1..MCCL_DEV_MAX_CHANNELS */
  const void* src;                /**< input elements, for ops that read one */
  void* dst;                      /**< output elements, for ops that write one */
  size_t count;                   /**< elements (of dtype) the op moves in all channels together */
  struct mcclConnInfo* recvConns; /**< nchannels receive connections (device copies), or NULL */
  struct mcclConnInfo* sendConns; /**< nchannels send connections (device copies), or NULL */
  uint64_t redOpArg;              /**< avg's divisor (the number of contributions) */
  int chunkSteps;                 /**< SIMPLE: FIFO slots per chunk, a power of two <= MCCL_STEPS; 0: default */
  int sliceSteps;                 /**< SIMPLE: slots per slice, a power of two <= chunkSteps; 0: default */
  volatile uint32_t* abortFlag;   /**< device view of a host-mapped flag; non-zero aborts; may be NULL */
  int* status;                    /**< device view of a host-mapped enum mcclDevStatus; may be NULL */
  int trace;                      /**< 1: threads narrate their roles with device printf (the demo) */
};

/**
 * @brief Check a work description and launch it: one block per channel, nthreads threads each,
 * through cudaGetFuncBySymbol + cuLaunchKernel with the work packed as the only parameter (NCCL's
 * launch shape). Asynchronous on `stream`; sets *work->status (host view) is the caller's job.
 * @param[in] work      the work; validated (op, proto, dtype, redop, counts, pointers, chunking).
 * @param[in] nthreads  threads per block: a multiple of 32, 32..1024 (one warp holds SIMPLE's four
 *                      role threads), or 0 for the default (MCCL_DEV_DEFAULT_NTHREADS).
 * @param[in] stream    the stream.
 * @return mcclSuccess; mcclInvalidArgument naming the bad field; mcclUnhandledCudaError.
 */
mcclResult_t mcclDevLaunch(const struct mcclDevWork* work, int nthreads, cudaStream_t stream);

/**
 * @brief The device function of a kernel on device `dev`, for cuLaunchKernel (NCCL looks its kernels
 * up once with cudaGetFuncBySymbol): looked up with `dev` current on first use, then cached. Every
 * lab that launches its own kernels (lab 06's mcclDevLaunch, lab 07's collectives) uses this one cache.
 * @param[in]  dev     the device the launch is for.
 * @param[in]  kernel  the kernel's host symbol, e.g. `(const void*)myKernel`.
 * @param[out] fn      the function (a CUfunction for the driver API).
 * @return mcclSuccess; mcclInvalidArgument (NULL); mcclInvalidUsage (device beyond 64);
 *         mcclInternalError (more than 64 kernels on a device); mcclUnhandledCudaError.
 */
mcclResult_t mcclDevGetFunction(int dev, const void* kernel, cudaFunction_t* fn);
/**
 * @brief Load every kernel of the program (those MCCL_KERNEL_REGISTER names, mccl_device.h) into device `dev`'s
 * context now, as NCCL's ncclInitKernelsForDevice: under CUDA's lazy loading the first launch of a kernel loads it,
 * and a load waits for the device's work in flight, which can be waiting for another device's launch that the same
 * thread has yet to make (two ranks driven from one thread). A no-op on the sim, whose kernels need no loading.
 * @param[in] dev  the device whose context loads them.
 * @return mcclSuccess; mcclUnhandledCudaError (a kernel the driver could not load).
 */
mcclResult_t mcclDevLoadKernels(int dev);

/**
 * @brief Launch `fn` (from mcclDevGetFunction), a kernel of one parameter, on `stream` as a programmatic
 * dependent launch: cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, as NCCL
 * launches its kernels (src/enqueue.cc ncclLaunchKernel). The parameter's bytes go as one buffer
 * (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE), of which only the first `argsBytes` are passed: a kernel
 * whose parameter has room for many work items gets only the ones a launch carries (NCCL's
 * kernelArgsSize); the rest of its parameter is undefined and must not be read. The grid may start while
 * the previous grid on the stream is still finishing (its blocks become resident, its launch cost overlaps
 * the previous kernel's tail), so the kernel MUST call cudaGridDependencySynchronize() before it touches
 * memory that earlier work on the stream writes or reads; in a CUDA graph the attribute becomes a
 * programmatic edge. On the sim the attribute changes nothing (a sim stream runs one grid at a time).
 * @param[in] fn         the device function.
 * @param[in] nblocks    blocks (x).
 * @param[in] nthreads   threads per block (x).
 * @param[in] stream     the stream.
 * @param[in] args       the parameter's bytes (copied before the call returns).
 * @param[in] argsBytes  how many of them: 1 .. the parameter's size, a multiple of 4.
 * @return mcclSuccess; mcclInvalidArgument (NULL fn or args, nblocks < 1, nthreads not 1..1024, argsBytes
 *         0 or not a multiple of 4); mcclUnhandledCudaError (the driver's error is logged).
 */
mcclResult_t mcclDevLaunchDependent(cudaFunction_t fn, int nblocks, int nthreads, cudaStream_t stream, const void* args,
                                    size_t argsBytes);

/**
 * @brief Wait for the kernels on `stream` to finish, aborting them after `timeoutMs` of waiting
 * (the abort flag is set, the kernel leaves within MCCL_SPINS_BEFORE_CHECK_ABORT spins), then read
 * the status word the kernel wrote.
 * @param[in] stream     the stream.
 * @param[in] abortFlag  host view of the launch's abort flag (set here on timeout), or NULL.
 * @param[in] status     host view of the launch's status word, or NULL.
 * @param[in] timeoutMs  > 0: abort after this long; <= 0: wait as long as it takes.
 * @return mcclSuccess (status Done); mcclTimeout (aborted here on timeout); mcclInternalError
 *         (the kernel reports it was aborted through the flag by someone else); mcclUnhandledCudaError.
 */
mcclResult_t mcclDevWait(cudaStream_t stream, volatile uint32_t* abortFlag, volatile int* status, int64_t timeoutMs);

/**
 * @brief Size in bytes of one element of a data type.
 * @param[in] dtype  an mcclDataType_t value.
 * @return the size; 0 for an unknown type.
 */
size_t mcclTypeSize(int dtype);
/**
 * @brief Name of a data type ("float32", ...).
 * @param[in] dtype  an mcclDataType_t value.
 * @return a static string; "unknown" for a bad value.
 */
const char* mcclTypeName(int dtype);
/**
 * @brief Name of a reduction operation ("sum", ...).
 * @param[in] redop  an mcclRedOp_t value.
 * @return a static string; "unknown" for a bad value.
 */
const char* mcclOpName(int redop);
/**
 * @brief Name of a primitive ("recvReduceCopySend", ...).
 * @param[in] op  an enum mcclDevOp value.
 * @return a static string; "unknown" for a bad value.
 */
const char* mcclDevOpName(int op);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
