// Lab 07: the allreduce kernel for __nv_bfloat16 (allreduce_kernels.cuh).
#include "allreduce_kernels.cuh"

MCCL_DEFINE_ALLREDUCE_KERNEL(bf16, __nv_bfloat16);
