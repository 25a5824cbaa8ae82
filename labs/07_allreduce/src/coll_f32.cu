// Lab 07: Reduce and ReduceScatter for float (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(f32, float);
