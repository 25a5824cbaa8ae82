// final/: the communicator behind mcclComm_t and what the group code shares with the API calls.
#ifndef MINCCL_INTERNAL_H_
#define MINCCL_INTERNAL_H_

#include "mccl_allreduce.h"
#include "minccl.h"

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
struct mcclComm {
  mcclLabComm* lab;  // NULL until a grouped mcclCommInitRank has run at mcclGroupEnd (or if it failed)
  int rank, nRanks, cudaDev;
  mcclUniqueId id;            // for a grouped initialisation
  int asyncResult;            // atomic mcclResult_t: mcclInProgress while a grouped init waits, its error after
  struct mcclClique* clique;  // shared with the process's other members
  struct mcclComm* next;      // the live list
};

// Is comm a live communicator (created, not yet destroyed)? Errors name `call`.
mcclResult_t mcclCommCheck(const struct mcclComm* comm, const char* call);
// A grouped initialisation, run at mcclGroupEnd (on its own thread): fills comm->lab or asyncResult.
mcclResult_t mcclCommInitDeferred(struct mcclComm* comm);
// Register a window now (arguments already checked).
mcclResult_t mcclWindowRegisterNow(struct mcclComm* comm, void* buff, size_t size, mcclWindow_t* win);

// Group: non-zero inside mcclGroupStart/End on this thread; record a communicator's creation or a
// window's registration (run at mcclGroupEnd; the collectives and point-to-point calls are lab 07's
// tasks, kept by its group); forget a communicator being destroyed (its records fail the group's end).
int mcclGroupActive(void);
mcclResult_t mcclGroupRecordInit(struct mcclComm* comm);
mcclResult_t mcclGroupRecordWindow(struct mcclComm* comm, void* buff, size_t size, mcclWindow_t* win);
void mcclGroupForget(struct mcclComm* comm);

#endif
