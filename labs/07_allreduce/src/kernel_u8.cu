// Lab 07: the kernels for uint8_t (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(u8, uint8_t);
