// Lab 07: Reduce and ReduceScatter for int64_t (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(i64, int64_t);
