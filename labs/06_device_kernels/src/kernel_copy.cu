// Lab 06: the kernel for the copy ops (bytes, any type) (kernels.cuh).
#include "kernels.cuh"

MCCL_DEFINE_DEV_KERNEL(copy, mcclCopyBytes);
