// Lab 07, private: what the host side and the launch code share. Not installed.
#ifndef MCCL_ALLREDUCE_INTERNAL_H_
#define MCCL_ALLREDUCE_INTERNAL_H_

#include "mccl_allreduce.h"

#ifdef __cplusplus
extern "C" {
#endif

// The kernel launch (lab 07's device code, written by the lead in src/*.cu): launch the kernel for
// args->algorithm on `stream` with no host synchronisation. mcclLabAllReduce has checked every
// argument and filled every field of *args before it calls this.
mcclResult_t mcclLabAllReduceLaunch(mcclLabComm* comm, const struct mcclAllReduceArgs* args, cudaStream_t stream);

// window.c: register a window without adding it to the communicator's list (the signal area), and
// free one whatever list it is on.
mcclResult_t labWindowMap(mcclLabComm* comm, void* buff, size_t size, mcclLabWindow** win);
mcclResult_t labWindowUnmap(mcclLabComm* comm, mcclLabWindow* win);

#ifdef __cplusplus
}
#endif
#endif
