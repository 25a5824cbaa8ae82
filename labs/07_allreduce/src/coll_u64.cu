// Lab 07: Reduce and ReduceScatter for uint64_t (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(u64, uint64_t);
