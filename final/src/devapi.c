// final/: the host half of NCCL's device API (src/dev_runtime.cc's ncclDevCommCreate, ncclDevCommDestroy and
// the team calls of src/dev_runtime.cc / src/init.cc in NCCL 2.28.9) over lab 09. A call enters the
// communicator as every other call does, so a communicator destroyed or aborted from another thread is found
// gone, never read; a revoked, finalized or unready one refuses before anything is allocated.
#include <stdlib.h>
#include <string.h>
#include "mccl_checks.h"
#include "mccl_debug.h"
#include "mccl_dev_api.h"
#include "minccl_internal.h"

void mcclDevReqsFree(mcclDevCommRequirements* reqs) {
  if (reqs == NULL) return;
  while (reqs->resourceRequirementsList) {
    mcclDevResourceRequirements* next = reqs->resourceRequirementsList->next;
    free(reqs->resourceRequirementsList);
    reqs->resourceRequirementsList = next;
  }
  while (reqs->teamRequirementsList) {
    mcclTeamRequirements* next = reqs->teamRequirementsList->next;
    free(reqs->teamRequirementsList);
    reqs->teamRequirementsList = next;
  }
  free(reqs);
}

// A grouped creation runs at the group's end, when the caller's requirements (often on its stack) may be
// gone: the group keeps a copy, lists included (NCCL's deepCopyDevCommRequirements). A program that drives
// several devices from one thread hands every communicator the same requirements, and the group creates them
// on a thread each: so each copied buffer requirement gets a handle of its own, which mcclDevReqsDeliver
// passes to the caller's variable once the threads are done, instead of every thread writing it.
struct reqCopy {
  mcclDevResourceRequirements r;     // first: the list links and frees it as a mcclDevResourceRequirements
  mcclDevResourceHandle* callerOut;  // the caller's outBufferHandle
  mcclDevResourceHandle handle;      // where the creation writes
};

void mcclDevReqsDeliver(mcclDevCommRequirements* copy) {
  for (mcclDevResourceRequirements* r = copy ? copy->resourceRequirementsList : NULL; r; r = r->next) {
    struct reqCopy* c = (struct reqCopy*)r;
    if (c->callerOut && r->outBufferHandle == &c->handle) *c->callerOut = c->handle;
  }
}

mcclResult_t mcclDevReqsCopy(const mcclDevCommRequirements* reqs, mcclDevCommRequirements** out) {
  mcclDevCommRequirements* c = (mcclDevCommRequirements*)malloc(sizeof(*c));
  if (c == NULL) goto oom;
  *c = *reqs;
  c->resourceRequirementsList = NULL;
  c->teamRequirementsList = NULL;
  mcclDevResourceRequirements** rr = &c->resourceRequirementsList;
  for (const mcclDevResourceRequirements* r = reqs->resourceRequirementsList; r; r = r->next) {
    struct reqCopy* cp = (struct reqCopy*)malloc(sizeof(*cp));
    if (cp == NULL) goto oom;
    cp->r = *r;
    cp->r.next = NULL;
    cp->callerOut = r->outBufferHandle;
    cp->handle = 0;
    if (r->outBufferHandle) cp->r.outBufferHandle = &cp->handle;
    *rr = &cp->r;
    rr = &(*rr)->next;
  }
  mcclTeamRequirements** tr = &c->teamRequirementsList;
  for (const mcclTeamRequirements* t = reqs->teamRequirementsList; t; t = t->next) {
    if ((*tr = (mcclTeamRequirements*)malloc(sizeof(**tr))) == NULL) goto oom;
    **tr = *t;
    (*tr)->next = NULL;
    tr = &(*tr)->next;
  }
  *out = c;
  return mcclSuccess;
oom:
  WARN("Out of memory copying a grouped mcclDevCommCreate's requirements");
  mcclDevReqsFree(c);
  return mcclSystemError;
}

mcclResult_t mcclDevCommCreateNow(struct mcclComm* comm, const mcclDevCommRequirements* reqs, mcclDevComm* devComm) {
  MCCLCHECK(mcclCommReady(comm, "mcclDevCommCreate"));
  int saved = -1;
  CUDACHECK(cudaGetDevice(&saved));
  CUDACHECK(cudaSetDevice(comm->cudaDev));
  mcclResult_t res = mcclLabDevCommCreate(comm->lab, reqs, devComm);
  cudaSetDevice(saved);
  return res;
}

// Creation is collective: a rank whose arguments are refused still takes part, as a refusal (lab 09 registers
// no buffer for it), now or at its group's end, so that every rank fails at once instead of the peers waiting.
mcclResult_t mcclDevCommCreate(mcclComm_t comm, const mcclDevCommRequirements* reqs, mcclDevComm* devComm) {
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclDevCommCreate"));
  mcclResult_t res = mcclCommReady(comm, "mcclDevCommCreate");
  if (res == mcclSuccess && mcclGroupActive()) {
    mcclDevCommRequirements* copy = NULL;
    if (reqs == NULL || devComm == NULL) {
      WARN(
          "Invalid argument: mcclDevCommCreate on rank %d: reqs %p or devComm %p is NULL; it takes part in the "
          "creation as a refusal",
          comm->rank, (const void*)reqs, (void*)devComm);
      res = mcclGroupRecordDevComm(comm, NULL, NULL);
      if (res == mcclSuccess) res = mcclInvalidArgument;
    } else if ((res = mcclDevReqsCopy(reqs, &copy)) == mcclSuccess) {
      res = mcclGroupRecordDevComm(comm, copy, devComm);
    }
  } else if (res == mcclSuccess) {
    res = mcclDevCommCreateNow(comm, reqs, devComm);
  }
  mcclCommLeave(comm);
  return res;
}

mcclResult_t mcclDevCommDestroy(mcclComm_t comm, const mcclDevComm* devComm) {
  MCCLCHECK(mcclCommEnter(comm, 0, "mcclDevCommDestroy"));
  mcclResult_t res = mcclSuccess;
  mcclLabComm* lab = __atomic_load_n(&comm->lab, __ATOMIC_ACQUIRE);
  int saved = -1;
  if (lab == NULL) {
    WARN(
        "Invalid argument: mcclDevCommDestroy: rank %d's communicator was never initialised, so devComm %p is "
        "not one of its device communicators",
        comm->rank, (const void*)devComm);
    res = mcclInvalidArgument;
  } else if (cudaGetDevice(&saved) != cudaSuccess || cudaSetDevice(comm->cudaDev) != cudaSuccess) {
    WARN("mcclDevCommDestroy: rank %d: cannot select device %d", comm->rank, comm->cudaDev);
    res = mcclUnhandledCudaError;
  } else {
    res = mcclLabDevCommDestroy(lab, devComm);
  }
  if (saved >= 0) cudaSetDevice(saved);
  mcclCommLeave(comm);
  return res;
}

// The team calls answer from the communicator's lab 07 half; one that cannot answer warns and gives the
// empty team, or -1 (NCCL returns whatever its communicator holds; here nothing is read from a dead one).
static mcclLabComm* teamComm(struct mcclComm* comm, const char* call) {
  if (mcclCommEnter(comm, 0, call) != mcclSuccess) return NULL;
  mcclLabComm* lab = __atomic_load_n(&comm->lab, __ATOMIC_ACQUIRE);
  if (lab == NULL) {
    WARN("Invalid usage: %s: rank %d's communicator is not initialised", call, comm->rank);
    mcclCommLeave(comm);
  }
  return lab;
}

static mcclTeam teamOf(struct mcclComm* comm, const char* call, mcclTeam (*of)(const mcclLabComm*)) {
  mcclTeam t = {0, 0, 0};
  mcclLabComm* lab = teamComm(comm, call);
  if (lab == NULL) return t;
  t = of(lab);
  mcclCommLeave(comm);
  return t;
}

static int rankIn(struct mcclComm* comm, const char* call, int (*to)(const mcclLabComm*, mcclTeam, int), mcclTeam team,
                  int rank) {
  mcclLabComm* lab = teamComm(comm, call);
  if (lab == NULL) return -1;
  int r = to(lab, team, rank);
  mcclCommLeave(comm);
  return r;
}

mcclTeam mcclTeamWorld(mcclComm_t comm) {
  return teamOf(comm, "mcclTeamWorld", mcclLabTeamWorld);
}

mcclTeam mcclTeamLsa(mcclComm_t comm) {
  return teamOf(comm, "mcclTeamLsa", mcclLabTeamLsa);
}

mcclTeam mcclTeamRail(mcclComm_t comm) {
  return teamOf(comm, "mcclTeamRail", mcclLabTeamRail);
}

int mcclTeamRankToWorld(mcclComm_t comm, mcclTeam team, int rank) {
  return rankIn(comm, "mcclTeamRankToWorld", mcclLabTeamRankToWorld, team, rank);
}

int mcclTeamRankToLsa(mcclComm_t comm, mcclTeam team, int rank) {
  return rankIn(comm, "mcclTeamRankToLsa", mcclLabTeamRankToLsa, team, rank);
}
