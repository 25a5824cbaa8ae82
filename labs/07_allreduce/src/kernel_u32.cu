// Lab 07: the kernels for uint32_t (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(u32, uint32_t);
