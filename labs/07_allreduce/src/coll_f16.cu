// Lab 07: Reduce and ReduceScatter for __half (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(f16, __half);
