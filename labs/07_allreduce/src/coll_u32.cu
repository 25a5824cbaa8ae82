// Lab 07: Reduce and ReduceScatter for uint32_t (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(u32, uint32_t);
