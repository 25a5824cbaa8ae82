// Lab 06: the kernel for the reducing ops on uint64_t (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(u64, uint64_t);
