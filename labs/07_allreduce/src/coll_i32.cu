// Lab 07: Reduce and ReduceScatter for int32_t (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(i32, int32_t);
