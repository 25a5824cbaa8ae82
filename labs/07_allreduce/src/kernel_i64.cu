// Lab 07: the kernels for int64_t (dev_kernels.cuh).
#include "dev_kernels.cuh"

MCCL_DEFINE_KERNELS(i64, int64_t);
