// Lab 07: the send/receive kernel, for every type: it moves bytes (sendrecv_kernels.cuh).
#include "sendrecv_kernels.cuh"

MCCL_DEFINE_SENDRECV_KERNEL();
