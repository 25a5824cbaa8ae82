/* The NCCL drop-in's private header: what the generated stubs (nccl_stubs.c), the hand-written entry
 * points (nccl_dropin.c) and the device API's host calls (nccl_device.cu, C++) share. Compiled against
 * NCCL 2.28's own nccl.h. */
#ifndef MCCL_NCCL_DROPIN_H_
#define MCCL_NCCL_DROPIN_H_

#include <nccl.h>
#include "minccl.h"

#if NCCL_MAJOR != 2 || NCCL_MINOR != 28
#error "the minccl drop-in implements NCCL 2.28's ABI: compile it against an NCCL 2.28 nccl.h (NCCL_INCLUDE=...)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* An NCCL call minccl does not implement: one WARN per call name and process, then ncclInvalidUsage. */
ncclResult_t mcclDropinUnimplemented(const char* call);
/* A call of NCCL's whose feature minccl refuses (GIN, the LL all-to-all): one WARN per call name and process
 * naming `what`, then ncclInvalidUsage. */
ncclResult_t mcclDropinRefused(const char* call, const char* what);

/* Exported beside NCCL's names (the one extra symbol, see final/nccl/extra_symbols.txt): how many
 * NCCL calls minccl has served in this process. A client checks it to know minccl, not NCCL, ran. */
unsigned long long mcclDropinCalls(void);

/* A served call: counted in mcclDropinCalls. */
void mcclDropinServed(void);

/* minccl's result as NCCL's (mcclTimeout and mcclNotImplemented have no NCCL twin). */
ncclResult_t mcclDropinResult(mcclResult_t r);

/* Find comm among the live communicators and hold it for one call (mcclDropinCommPut when done): the minccl
 * communicator behind it, or an NCCL error named after `call`. */
ncclResult_t mcclDropinCommGet(ncclComm_t comm, const char* call, mcclComm_t* out);
/* The end of a call that mcclDropinCommGet held comm for; returns res. */
ncclResult_t mcclDropinCommPut(ncclComm_t comm, ncclResult_t res);

#ifdef __cplusplus
}
#endif
#endif
