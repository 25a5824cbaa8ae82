// Lab 07: Reduce and ReduceScatter for uint8_t (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(u8, uint8_t);
