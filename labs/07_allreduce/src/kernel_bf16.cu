// Lab 07: the kernels for __nv_bfloat16 (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(bf16, __nv_bfloat16);
