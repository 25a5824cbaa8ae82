// Lab 07: the entry points of NCCL's other ring collectives (NCCL 2.28.9 src/collectives.cc:
// ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter -> ncclEnqueueCheck's ArgsCheck), the
// protocol choice, and their launch as src/launch.c launches the allreduce: the kernel of the element
// type (the copy kernel for the collectives that move bytes), the arguments packed as its one
// parameter, cudaGetFuncBySymbol + a dependent grid (mcclDevLaunchDependent), no host synchronisation.
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include "allreduce_internal.h"
#include "coll_args.h"
#include "mccl_checks.h"
#include "mccl_collectives.h"
#include "mccl_debug.h"
#include "mccl_param.h"

static const char* const funcNames[mcclNumCollFuncs] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter"};

// ---- kernels ---------------------------------------------------------------------------------------
#define MCCL_COLL_KERNEL(suffix) extern void mcclCollKernel_##suffix(struct mcclCollArgs args);
MCCL_COLL_KERNEL(i8)
MCCL_COLL_KERNEL(u8)
MCCL_COLL_KERNEL(i32)
MCCL_COLL_KERNEL(u32)
MCCL_COLL_KERNEL(i64)
MCCL_COLL_KERNEL(u64)
MCCL_COLL_KERNEL(f16)
MCCL_COLL_KERNEL(f32)
MCCL_COLL_KERNEL(f64)
MCCL_COLL_KERNEL(bf16)
MCCL_COLL_KERNEL(copy)
#undef MCCL_COLL_KERNEL

// Indexed by mcclDataType_t; the last entry is the copy kernel.
#define COLL_COPY_KERNEL mcclNumTypes
static void (*const kernelSyms[mcclNumTypes + 1])(struct mcclCollArgs) = {
    mcclCollKernel_i8,  mcclCollKernel_u8,   mcclCollKernel_i32, mcclCollKernel_u32,
    mcclCollKernel_i64, mcclCollKernel_u64,  mcclCollKernel_f16, mcclCollKernel_f32,
    mcclCollKernel_f64, mcclCollKernel_bf16, mcclCollKernel_copy};
_Static_assert(mcclInt8 == 0 && mcclBfloat16 == 9 && mcclNumTypes == 10, "kernelSyms follows mcclDataType_t");

// Threads per block as the allreduce ring: SIMPLE's copies want many threads, LL is latency bound.
#define COLL_THREADS_SIMPLE 512
#define COLL_THREADS_LL 256

static mcclResult_t collLaunch(mcclLabComm* comm, struct mcclCollArgs* a, cudaStream_t stream) {
  // Every collective takes the allreduce ring's chunking: chunks of half the FIFO in slices of a
  // quarter. NCCL's Broadcast and Reduce move one slot per step (BROADCAST_/REDUCE_CHUNKSTEPS 1 in
  // src/include/collectives.h); that was measured no faster here (lab 07 README).
  a->chunkSteps = MCCL_DEV_DEFAULT_CHUNKSTEPS;
  a->sliceSteps = MCCL_DEV_DEFAULT_SLICESTEPS;
  const int copy = a->func == mcclCollBroadcast || a->func == mcclCollAllGather;
  cudaFunction_t fn;
  MCCLCHECK(mcclDevGetFunction(comm->cudaDev, (const void*)kernelSyms[copy ? COLL_COPY_KERNEL : a->dtype], &fn));
  const int nthreads = a->proto == MCCL_PROTO_LL ? COLL_THREADS_LL : COLL_THREADS_SIMPLE;
  void* params[] = {a};
  MCCLCHECK(mcclDevLaunchDependent(fn, a->nChannels, nthreads, stream, params));
  return mcclSuccess;
}

// ---- checks and the call -----------------------------------------------------------------------------
static int overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

// LL up to MCCL_COLL_LL_MAX_BYTES of the larger buffer, SIMPLE above; MCCL_PROTO overrides.
static mcclResult_t selectProto(size_t bytes, int* proto) {
  int p = bytes <= MCCL_COLL_LL_MAX_BYTES ? MCCL_PROTO_LL : MCCL_PROTO_SIMPLE;
  const char* env = mcclParamProto();
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
  *proto = p;
  return mcclSuccess;
}

// What every collective checks first (NCCL's ArgsCheck and CommCheck): the communicator, the type,
// the operation for the reducing ones, the root for the rooted ones, and that the larger buffer's
// size (count * type size * blocks) fits a size_t.
static mcclResult_t checkCommon(int func, mcclLabComm* comm, size_t count, mcclDataType_t dtype, mcclRedOp_t op,
                                int root, size_t blocks) {
  MCCL_ARGCHECK(comm != NULL, "%s: comm is NULL", funcNames[func]);
  MCCL_ARGCHECK((int)dtype >= 0 && (int)dtype < mcclNumTypes, "%s: dtype %d (0 .. %d)", funcNames[func], (int)dtype,
                mcclNumTypes - 1);
  if (func == mcclCollReduce || func == mcclCollReduceScatter)
    MCCL_ARGCHECK((int)op >= 0 && (int)op < mcclNumOps, "%s: op %d (0 .. %d)", funcNames[func], (int)op,
                  mcclNumOps - 1);
  if (func == mcclCollBroadcast || func == mcclCollReduce)
    MCCL_ARGCHECK(root >= 0 && root < comm->nRanks, "%s: root %d (ranks 0 .. %d)", funcNames[func], root,
                  comm->nRanks - 1);
  size_t esize = mcclTypeSize(dtype);
  MCCL_ARGCHECK(count <= SIZE_MAX / esize / blocks, "%s: count %zu (x %zu-byte %s x %zu overflows)", funcNames[func],
                count, esize, mcclTypeName(dtype), blocks);
  return mcclSuccess;
}

// Fill the arguments every collective shares, check the abort flag, choose the protocol and launch.
static mcclResult_t collStart(int func, const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype,
                              mcclRedOp_t op, int root, size_t protoBytes, mcclLabComm* comm, cudaStream_t stream) {
  if (__atomic_load_n(comm->abortFlag, __ATOMIC_ACQUIRE)) {
    WARN("Invalid usage: rank %d's communicator was aborted", comm->rank);
    return mcclInvalidUsage;
  }
  struct mcclCollArgs a;
  memset(&a, 0, sizeof(a));
  MCCLCHECK(selectProto(protoBytes, &a.proto));
  a.proto = mcclLabCommProto(comm, protoBytes, a.proto);
  if (count == 0) return mcclSuccess;  // NCCL: nothing to move, nothing enqueued
  const int copy = func == mcclCollBroadcast || func == mcclCollAllGather;
  a.func = func;
  a.nChannels = comm->nChannels;
  a.nRanks = comm->nRanks;
  a.root = root;
  a.dtype = (int)dtype;
  a.op = copy ? (int)mcclSum : (int)op;
  a.count = copy ? count * mcclTypeSize(dtype) : count;
  a.sendbuff = sendbuff;
  a.recvbuff = recvbuff;
  a.redOpArg = !copy && op == mcclAvg ? (uint64_t)comm->nRanks : 1;
  a.recvConns = comm->devRecvConns;
  a.sendConns = comm->devSendConns;
  a.abortFlag = comm->abortFlagDev;
  a.trace = mcclParamKernelTrace() != 0;
  for (int k = 0; k < comm->nRanks; k++) a.ringRanks[k] = comm->ring.userRanks[(comm->ring.index + k) % comm->nRanks];
  TRACE(MCCL_COLL, "rank %d: %s %zu x %s %s root %d, proto %d", comm->rank, funcNames[func], count, mcclTypeName(dtype),
        copy ? "-" : mcclOpName(op), root, a.proto);
  return collLaunch(comm, &a, stream);
}

mcclResult_t mcclLabBroadcast(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, int root,
                              mcclLabComm* comm, cudaStream_t stream) {
  MCCLCHECK(checkCommon(mcclCollBroadcast, comm, count, dtype, mcclSum, root, 1));
  size_t bytes = count * mcclTypeSize(dtype);
  MCCL_ARGCHECK(count == 0 || recvbuff != NULL, "Broadcast: recvbuff is NULL with count %zu", count);
  if (comm->rank == root) {
    MCCL_ARGCHECK(count == 0 || sendbuff != NULL, "Broadcast: sendbuff is NULL on the root (rank %d) with count %zu",
                  root, count);
    MCCL_ARGCHECK(sendbuff == recvbuff || !overlaps(sendbuff, bytes, recvbuff, bytes),
                  "Broadcast: sendbuff %p and recvbuff %p overlap (%zu bytes) without being equal", sendbuff, recvbuff,
                  bytes);
  }
  return collStart(mcclCollBroadcast, sendbuff, recvbuff, count, dtype, mcclSum, root, bytes, comm, stream);
}

mcclResult_t mcclLabReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t dtype, mcclRedOp_t op,
                           int root, mcclLabComm* comm, cudaStream_t stream) {
  MCCLCHECK(checkCommon(mcclCollReduce, comm, count, dtype, op, root, 1));
  size_t bytes = count * mcclTypeSize(dtype);
  MCCL_ARGCHECK(count == 0 || sendbuff != NULL, "Reduce: sendbuff is NULL with count %zu", count);
  if (comm->rank == root) {
    MCCL_ARGCHECK(count == 0 || recvbuff != NULL, "Reduce: recvbuff is NULL on the root (rank %d) with count %zu", root,
                  count);
    MCCL_ARGCHECK(sendbuff == recvbuff || !overlaps(sendbuff, bytes, recvbuff, bytes),
                  "Reduce: sendbuff %p and recvbuff %p overlap (%zu bytes) without being equal", sendbuff, recvbuff,
                  bytes);
  }
  return collStart(mcclCollReduce, sendbuff, recvbuff, count, dtype, op, root, bytes, comm, stream);
}

mcclResult_t mcclLabAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, mcclDataType_t dtype,
                              mcclLabComm* comm, cudaStream_t stream) {
  MCCLCHECK(checkCommon(mcclCollAllGather, comm, sendcount, dtype, mcclSum, 0, (size_t)(comm ? comm->nRanks : 1)));
  size_t bytes = sendcount * mcclTypeSize(dtype), total = bytes * (size_t)comm->nRanks;
  MCCL_ARGCHECK(sendcount == 0 || sendbuff != NULL, "AllGather: sendbuff is NULL with sendcount %zu", sendcount);
  MCCL_ARGCHECK(sendcount == 0 || recvbuff != NULL, "AllGather: recvbuff is NULL with sendcount %zu", sendcount);
  const uintptr_t own = (uintptr_t)recvbuff + (size_t)comm->rank * bytes;  // no arithmetic on a NULL pointer
  MCCL_ARGCHECK((uintptr_t)sendbuff == own || !overlaps(sendbuff, bytes, recvbuff, total),
                "AllGather: sendbuff %p overlaps recvbuff %p (%zu bytes) but is not rank %d's block %p (in place)",
                sendbuff, recvbuff, total, comm->rank, (void*)own);
  return collStart(mcclCollAllGather, sendbuff, recvbuff, sendcount, dtype, mcclSum, 0, total, comm, stream);
}

mcclResult_t mcclLabReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, mcclDataType_t dtype,
                                  mcclRedOp_t op, mcclLabComm* comm, cudaStream_t stream) {
  MCCLCHECK(checkCommon(mcclCollReduceScatter, comm, recvcount, dtype, op, 0, (size_t)(comm ? comm->nRanks : 1)));
  size_t bytes = recvcount * mcclTypeSize(dtype), total = bytes * (size_t)comm->nRanks;
  MCCL_ARGCHECK(recvcount == 0 || sendbuff != NULL, "ReduceScatter: sendbuff is NULL with recvcount %zu", recvcount);
  MCCL_ARGCHECK(recvcount == 0 || recvbuff != NULL, "ReduceScatter: recvbuff is NULL with recvcount %zu", recvcount);
  const uintptr_t own = (uintptr_t)sendbuff + (size_t)comm->rank * bytes;
  MCCL_ARGCHECK((uintptr_t)recvbuff == own || !overlaps(recvbuff, bytes, sendbuff, total),
                "ReduceScatter: recvbuff %p overlaps sendbuff %p (%zu bytes) but is not rank %d's block %p (in place)",
                recvbuff, sendbuff, total, comm->rank, (void*)own);
  return collStart(mcclCollReduceScatter, sendbuff, recvbuff, recvcount, dtype, op, 0, total, comm, stream);
}
