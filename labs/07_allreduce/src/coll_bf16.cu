// Lab 07: Reduce and ReduceScatter for __nv_bfloat16 (coll_kernels.cuh).
#include "coll_kernels.cuh"

MCCL_DEFINE_COLL_KERNEL(bf16, __nv_bfloat16);
