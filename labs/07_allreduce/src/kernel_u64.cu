// Lab 07: the kernels for uint64_t (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(u64, uint64_t);
