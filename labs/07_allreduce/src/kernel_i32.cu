// Lab 07: the kernels for int32_t (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(i32, int32_t);
