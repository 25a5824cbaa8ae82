/* The NCCL drop-in's private header: what the generated stubs (nccl_stubs.c) and the hand-written
 * entry points (nccl_dropin.c) share. Compiled against NCCL 2.28's own nccl.h. */
#ifndef MCCL_NCCL_DROPIN_H_
#define MCCL_NCCL_DROPIN_H_

#include <nccl.h>

#if NCCL_MAJOR != 2 || NCCL_MINOR != 28
#error "the minccl drop-in implements NCCL 2.28's ABI: compile it against an NCCL 2.28 nccl.h (NCCL_INCLUDE=...)"
#endif

/* An NCCL call minccl does not implement: one WARN per call name and process, then ncclInvalidUsage. */
ncclResult_t mcclDropinUnimplemented(const char* call);

/* Exported beside NCCL's names (the one extra symbol, see final/nccl/extra_symbols.txt): how many
 * NCCL calls minccl has served in this process. A client checks it to know minccl, not NCCL, ran. */
unsigned long long mcclDropinCalls(void);

#endif
