// final/: the communicator behind mcclComm_t and what the group code shares with the API calls.
#ifndef MINCCL_INTERNAL_H_
#define MINCCL_INTERNAL_H_

#include "mccl_allreduce.h"
#include "minccl.h"
#include "minccl_device.h"

// Communicators of one process that belong to one clique (same unique id, or one mcclCommInitAll):
// an abort of one is a remote error for the others (mcclCommGetAsyncError).
struct mcclClique {
  mcclUniqueId id;  // the key (zero for an mcclCommInitAll clique, which is never looked up)
  int keyed;        // 1: found by id
  int refs;         // communicators holding it
  int aborted;      // atomic: a member was aborted
  struct mcclClique* next;
};

// NCCL's ncclComm, as far as the API needs: lab 07's communicator and the handle's own state.
//
// Lifetime (NCCL's contract for ncclCommAbort: any thread, any moment): every call that uses a handle
// enters it (mcclCommEnter: it must be in the live list; inFlight counts the calls inside) and leaves
// it when done. mcclCommDestroy / mcclCommAbort take it out of the list first, so no new call enters;
// abort raises the abort flag, so the calls inside (waits in the bootstrap, the proxy, a connection
// setup, an initialisation) end with an error; then both wait for inFlight to reach 0 before anything
// is freed. A handle is checked by looking it up in the list, never by reading it, and `uid` tells a new
// handle at a freed one's address from the old one.
struct mcclComm {
  mcclLabComm* lab;      // atomic: NULL until its initialisation has finished (grouped, non-blocking) or if it failed
  mcclLabComm* labInit;  // a deferred init's lab communicator, allocated first (its abort flag stops the init);
                         // never changes, and is `lab` too once the init has succeeded
  int rank, nRanks, cudaDev;
  mcclUniqueId id;            // for a deferred initialisation
  int asyncResult;            // atomic mcclResult_t: mcclInProgress while an initialisation runs, its error after
  struct mcclClique* clique;  // shared with the process's other members
  uint64_t uid;               // this handle's number in the process (never reused)
  int inFlight;               // calls inside (under the live list's lock)
  int revoked;                // atomic: mcclCommRevoke or an abort raised its flags
  int finalized;              // atomic: mcclCommFinalize waited for its kernels; only destroy or abort may follow
  int hasId;                  // made from a unique id (`id`; mcclCommInitAll's are not): mcclCommShrink needs it
  uint32_t shrinks;           // atomic: ids derived from `id` so far (mcclCommShrink's generation)
  struct mcclComm* next;      // the live list
};

// Enter a live communicator for one call (comm must be in the live list; with uid != 0, it must also be
// that handle and not a new one at the same address). Errors name `call`. mcclCommLeave when done.
mcclResult_t mcclCommEnter(struct mcclComm* comm, uint64_t uid, const char* call);
void mcclCommLeave(struct mcclComm* comm);
// A deferred initialisation (grouped, or non-blocking), run on a thread that entered the communicator:
// fills comm->lab or asyncResult.
mcclResult_t mcclCommInitDeferred(struct mcclComm* comm);
// Register a window now (arguments already checked): a lab 07 window and its lab 09 device window, whose
// device pointer is the handle.
mcclResult_t mcclWindowRegisterNow(struct mcclComm* comm, void* buff, size_t size, mcclWindow_t* win);
// mcclSuccess when comm can run calls; else mcclInvalidUsage, named after `call` (revoked, finalized, an
// initialisation pending or failed). comm must have been entered.
mcclResult_t mcclCommReady(const struct mcclComm* comm, const char* call);
// Create a device communicator now (devapi.c), and the requirements' copy a grouped creation keeps until then.
mcclResult_t mcclDevCommCreateNow(struct mcclComm* comm, const mcclDevCommRequirements* reqs, mcclDevComm* devComm);
mcclResult_t mcclDevReqsCopy(const mcclDevCommRequirements* reqs, mcclDevCommRequirements** out);
void mcclDevReqsFree(mcclDevCommRequirements* reqs);
// After the group's threads are joined, on the thread that ends the group: the buffer handles the copy's
// creation wrote go to the caller's variables (one write each, from one thread).
void mcclDevReqsDeliver(mcclDevCommRequirements* copy);

// Group: non-zero inside mcclGroupStart/End on this thread; record a communicator's creation or a
// window's registration (run at mcclGroupEnd; the collectives and point-to-point calls are lab 07's
// tasks, kept by its group). A record names its communicator by pointer and uid: one destroyed since is
// found gone at the group's end, which fails that record and runs the others.
int mcclGroupActive(void);
mcclResult_t mcclGroupRecordInit(struct mcclComm* comm);
mcclResult_t mcclGroupRecordWindow(struct mcclComm* comm, void* buff, size_t size, mcclWindow_t* win);
// Record a device communicator's creation (the group owns reqs, a copy, from now on, and frees it).
mcclResult_t mcclGroupRecordDevComm(struct mcclComm* comm, mcclDevCommRequirements* reqs, mcclDevComm* devComm);
// A communicator whose collective or point-to-point calls this thread's open group holds (its end enters
// every one still live before lab 07's group end runs their tasks).
mcclResult_t mcclGroupRecordUse(struct mcclComm* comm);

#endif
