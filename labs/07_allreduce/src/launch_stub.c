// Lab 07: STUB, to be replaced by the lead's kernel launch (src/*.cu). Until the kernels exist,
// every allreduce that passes the argument checks ends here with an error: never a silent success.
// Delete this file when mcclLabAllReduceLaunch is written.
#include "allreduce_internal.h"
#include "mccl_checks.h"
#include "mccl_debug.h"

mcclResult_t mcclLabAllReduceLaunch(mcclLabComm* comm, const struct mcclAllReduceArgs* args, cudaStream_t stream) {
  (void)comm;
  (void)stream;
  WARN("mcclLabAllReduceLaunch: the lab 07 kernels are not written yet (algorithm %d, %zu elements)",
       args ? args->algorithm : -1, args ? args->count : (size_t)0);
  return mcclInternalError;
}
