// Lab 07: the kernels for int8_t (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(i8, int8_t);
