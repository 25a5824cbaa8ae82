// Lab 07: Reduce and ReduceScatter for int8_t (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(i8, int8_t);
