// Lab 08: the network plugin over Open MPI (libmccl-net-mpi.so): minccl's NET transport hands slots
// to it; MPI's non-blocking point-to-point on a communicator of its own moves them (NCCL's own
// plugins do the same over sockets or IB verbs: src/transport/net_socket.cc, net_ib/).
// A listen handle carries the listener's world rank and a tag that is new in that process; connect
// sends a hello carrying the sender's rank on that tag, accept takes it, and from then on the tag
// carries the connection's messages in order (MPI does not overtake on one source, tag and comm).
// Built as its own shared object and loaded with dlopen, so nothing else in minccl links MPI. The
// proxy's threads call it, so MPI must run with MPI_THREAD_MULTIPLE.
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mccl_net.h"
#include "mccl_utils.h"

#define LOG_WARN 2  // mcclDebugLogLevel's WARN and INFO
#define LOG_INFO 3
#define HANDLE_MAGIC 0x6d70696eu  // "mpin"
#define MAX_REQUESTS 32           // per connection: at least MCCL_STEPS

// Exercise 08.plugin_io's stubs (docs/exercises.md) call these: this object is loaded by dlopen and does not link
// minccl's own. The proxy's progress thread calls isend/irecv/test, and an error there would reach neither the
// kernel nor the peers waiting on the slots, so the stub ends the process (mpirun then ends the job).
#define mcclExerciseStub netMpiExerciseStub
#define mcclExerciseProbe netMpiExerciseProbe
static __attribute__((unused)) mcclResult_t netMpiExerciseStub(const char* name) {
  fprintf(stderr, "MCCL EXERCISE %s not implemented: see the lab's README, section Exercises\n", name);
  _exit(1);
}
static __attribute__((unused)) int netMpiExerciseProbe(const char* name) {
  const char* probe = getenv("MCCL_EXERCISE_PROBE");
  if (probe == NULL) return 0;
  size_t len = strlen(name);
  for (const char* p = probe; *p != '\0'; p += strcspn(p, ",")) {  // as mcclExerciseProbe: a list, or all
    p += strspn(p, ",");
    size_t n = strcspn(p, ",");
    if ((n == len && strncmp(p, name, len) == 0) || (n == 3 && strncmp(p, "all", 3) == 0)) return 1;
  }
  return 0;
}

static mcclNetLogger_t logFn;
static MPI_Comm netComm = MPI_COMM_NULL;
static int worldRank = -1, tagUb = 32767;
static unsigned char* peerGone;  // per rank of netComm: taken as gone at a close (closeComm), atomics
// Per rank of netComm: its pid where it runs on this machine, else 0 (closeComm asks the kernel whether it lives).
static int* localPid;
static int nextTag = 1;  // atomics: listen runs on the proxy's service threads of several communicators

#define NETWARN(...)                                             \
  do {                                                           \
    if (logFn) logFn(LOG_WARN, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

struct mpiHandle {  // what travels in the listen handle (MCCL_NET_HANDLE_MAXSIZE bytes)
  uint32_t magic;
  int rank, tag;
  int stage;      // sender side: 0 nothing yet, 1 hello posted
  void* pending;  // sender side: the sendComm under construction
};
_Static_assert(sizeof(struct mpiHandle) <= MCCL_NET_HANDLE_MAXSIZE, "handle fits");

struct mpiRequest {
  MPI_Request req;
  int used;
};

struct mpiComm {  // a send or recv connection
  int peer, tag;
  int hello;  // the hello message's body (sender's rank)
  MPI_Request helloReq;
  struct mpiRequest reqs[MAX_REQUESTS];
};

struct mpiListen {
  int tag;
  int hello;
  MPI_Request helloReq;
};

static mcclResult_t mpiCheck(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return mcclSuccess;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  NETWARN("NET/MPI: %s failed: %s", call, msg);
  return mcclSystemError;
}
#define MPICHECK(call)                         \
  do {                                         \
    mcclResult_t r_ = mpiCheck((call), #call); \
    if (r_ != mcclSuccess) return r_;          \
  } while (0)

static mcclResult_t mpiInit(mcclNetLogger_t logFunction) {
  logFn = logFunction;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    NETWARN(
        "NET/MPI: MPI is %s: the application must call MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) "
        "before creating a communicator that spans hosts",
        finalized ? "finalized" : "not initialised");
    return mcclInvalidUsage;
  }
  int provided = MPI_THREAD_SINGLE;
  MPICHECK(MPI_Query_thread(&provided));
  if (provided != MPI_THREAD_MULTIPLE) {
    NETWARN(
        "NET/MPI: MPI runs at thread level %d, not MPI_THREAD_MULTIPLE (%d): minccl's proxy thread calls MPI "
        "beside the application; initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)",
        provided, MPI_THREAD_MULTIPLE);
    return mcclInvalidUsage;
  }
  MPICHECK(MPI_Comm_dup(MPI_COMM_WORLD, &netComm));  // collective: every process of the job
  MPICHECK(MPI_Comm_set_errhandler(netComm, MPI_ERRORS_RETURN));
  MPICHECK(MPI_Comm_rank(netComm, &worldRank));
  int worldSize = 0;
  MPICHECK(MPI_Comm_size(netComm, &worldSize));
  if (peerGone == NULL) peerGone = calloc((size_t)worldSize, 1);  // kept for the process's life
  if (peerGone == NULL) {
    NETWARN("NET/MPI: out of memory");
    return mcclSystemError;
  }
  // Every rank's host name and pid (collective, as the dup above): where a peer shares this machine, a close can
  // see that it has died instead of waiting out CLOSE_WAIT_MS for a send it will never take.
  struct {
    char host[64];
    int pid;
  } me, *all = calloc((size_t)worldSize, sizeof(me));
  if (localPid == NULL) localPid = calloc((size_t)worldSize, sizeof(int));
  if (all == NULL || localPid == NULL) {
    free(all);
    NETWARN("NET/MPI: out of memory");
    return mcclSystemError;
  }
  memset(&me, 0, sizeof(me));
  gethostname(me.host, sizeof(me.host) - 1);
  me.pid = (int)getpid();
  const int rc = MPI_Allgather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, netComm);
  for (int r = 0; rc == MPI_SUCCESS && r < worldSize; r++)
    localPid[r] = strcmp(all[r].host, me.host) == 0 ? all[r].pid : 0;
  free(all);
  MPICHECK(rc);
  int* ub = NULL;
  int flag = 0;
  MPICHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
  if (flag && ub) tagUb = *ub;
  if (logFn) logFn(LOG_INFO, __FILE__, __LINE__, "NET/MPI: rank %d, own communicator, tags up to %d", worldRank, tagUb);
  return mcclSuccess;
}

static mcclResult_t mpiDevices(int* ndev) {
  if (ndev == NULL) return mcclInvalidArgument;
  *ndev = 1;
  return mcclSuccess;
}

static mcclResult_t mpiGetProperties(int dev, mcclNetProperties_t* props) {
  if (dev != 0 || props == NULL) return mcclInvalidArgument;
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "MPI (Open MPI, rank %d)", worldRank);
  props->ptrSupport = MCCL_PTR_HOST;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  return mcclSuccess;
}

static mcclResult_t mpiListen(int dev, void* handle, void** listenComm) {
  if (dev != 0 || handle == NULL || listenComm == NULL) return mcclInvalidArgument;
  int tag = __atomic_fetch_add(&nextTag, 1, __ATOMIC_RELAXED);
  if (tag > tagUb) {
    NETWARN("NET/MPI: out of tags (%d listens, MPI_TAG_UB %d)", tag, tagUb);
    return mcclSystemError;
  }
  struct mpiListen* l = (struct mpiListen*)calloc(1, sizeof(*l));
  if (l == NULL) return mcclSystemError;
  l->tag = tag;
  int rc = MPI_Irecv(&l->hello, 1, MPI_INT, MPI_ANY_SOURCE, tag, netComm, &l->helloReq);
  if (rc != MPI_SUCCESS) {
    free(l);
    return mpiCheck(rc, "MPI_Irecv(hello)");
  }
  struct mpiHandle h;
  memset(&h, 0, sizeof(h));
  h.magic = HANDLE_MAGIC;
  h.rank = worldRank;
  h.tag = tag;
  memset(handle, 0, MCCL_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof(h));
  *listenComm = l;
  return mcclSuccess;
}

static mcclResult_t mpiConnect(int dev, void* handle, void** sendComm) {
  if (dev != 0 || handle == NULL || sendComm == NULL) return mcclInvalidArgument;
  struct mpiHandle h;
  memcpy(&h, handle, sizeof(h));
  *sendComm = NULL;
  if (h.magic != HANDLE_MAGIC || h.rank < 0 || h.tag < 1) {
    NETWARN("NET/MPI: connect with a handle that no listen made (magic %#x rank %d tag %d)", h.magic, h.rank, h.tag);
    return mcclInvalidArgument;
  }
  struct mpiComm* c = (struct mpiComm*)h.pending;
  if (h.stage == 0) {
    c = (struct mpiComm*)calloc(1, sizeof(*c));
    if (c == NULL) return mcclSystemError;
    c->peer = h.rank;
    c->tag = h.tag;
    c->hello = worldRank;
    int rc = MPI_Isend(&c->hello, 1, MPI_INT, c->peer, c->tag, netComm, &c->helloReq);
    if (rc != MPI_SUCCESS) {
      free(c);
      return mpiCheck(rc, "MPI_Isend(hello)");
    }
    h.stage = 1;
    h.pending = c;
    memcpy(handle, &h, sizeof(h));
  }
  int done = 0;
  MPICHECK(MPI_Test(&c->helloReq, &done, MPI_STATUS_IGNORE));
  if (!done) return mcclSuccess;  // not yet: call again
  h.stage = 2;
  h.pending = NULL;
  memcpy(handle, &h, sizeof(h));
  *sendComm = c;
  return mcclSuccess;
}

static mcclResult_t mpiAccept(void* listenComm, void** recvComm) {
  struct mpiListen* l = (struct mpiListen*)listenComm;
  if (l == NULL || recvComm == NULL) return mcclInvalidArgument;
  *recvComm = NULL;
  if (l->helloReq == MPI_REQUEST_NULL) {
    NETWARN("NET/MPI: a second accept on listen tag %d (one connection per listen)", l->tag);
    return mcclInvalidUsage;
  }
  int done = 0;
  MPI_Status st;
  MPICHECK(MPI_Test(&l->helloReq, &done, &st));
  if (!done) return mcclSuccess;
  struct mpiComm* c = (struct mpiComm*)calloc(1, sizeof(*c));
  if (c == NULL) return mcclSystemError;
  c->peer = st.MPI_SOURCE;
  c->tag = l->tag;
  c->helloReq = MPI_REQUEST_NULL;
  if (l->hello != c->peer) {
    NETWARN("NET/MPI: hello from rank %d names rank %d", c->peer, l->hello);
    free(c);
    return mcclRemoteError;
  }
  *recvComm = c;
  return mcclSuccess;
}

static mcclResult_t mpiRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)data, (void)size;
  if (comm == NULL || mhandle == NULL || type != MCCL_PTR_HOST) return mcclInvalidArgument;
  *mhandle = comm;  // MPI needs no registration; the handle only proves regMr was called
  return mcclSuccess;
}

static mcclResult_t mpiDeregMr(void* comm, void* mhandle) {
  return comm != NULL && mhandle == comm ? mcclSuccess : mcclInvalidArgument;
}

static struct mpiRequest* freeRequest(struct mpiComm* c) {
  for (int i = 0; i < MAX_REQUESTS; i++)
    if (!c->reqs[i].used) return &c->reqs[i];
  return NULL;
}

static mcclResult_t mpiIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  (void)tag;
  struct mpiComm* c = (struct mpiComm*)sendComm;
  if (c == NULL || request == NULL || mhandle != sendComm || size > INT_MAX || (size > 0 && data == NULL))
    return mcclInvalidArgument;
  // EXERCISE(08.plugin_io)
  *request = NULL;
  struct mpiRequest* r = freeRequest(c);
  if (r == NULL) return mcclSuccess;  // all in flight: post again later
  MPICHECK(MPI_Isend(data, (int)size, MPI_BYTE, c->peer, c->tag, netComm, &r->req));
  r->used = 1;
  *request = r;
  return mcclSuccess;
  // END EXERCISE(08.plugin_io)
}

static mcclResult_t mpiIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                             void** request) {
  (void)tags;
  struct mpiComm* c = (struct mpiComm*)recvComm;
  if (c == NULL || request == NULL || n != 1 || data == NULL || sizes == NULL || sizes[0] > INT_MAX ||
      mhandles == NULL || mhandles[0] != recvComm)
    return mcclInvalidArgument;
  // EXERCISE(08.plugin_io)
  *request = NULL;
  struct mpiRequest* r = freeRequest(c);
  if (r == NULL) return mcclSuccess;
  MPICHECK(MPI_Irecv(data[0], (int)sizes[0], MPI_BYTE, c->peer, c->tag, netComm, &r->req));
  r->used = 1;
  *request = r;
  return mcclSuccess;
  // END EXERCISE(08.plugin_io)
}

static mcclResult_t mpiTest(void* request, int* done, int* sizes) {
  struct mpiRequest* r = (struct mpiRequest*)request;
  if (r == NULL || done == NULL || !r->used) return mcclInvalidArgument;
  // EXERCISE(08.plugin_io)
  MPI_Status st;
  int flag = 0;
  MPICHECK(MPI_Test(&r->req, &flag, &st));
  *done = flag;
  if (!flag) return mcclSuccess;
  if (sizes) {
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    sizes[0] = count;
  }
  r->used = 0;
  return mcclSuccess;
  // END EXERCISE(08.plugin_io)
}

// Requests still posted at close (a receiver always has receives posted for the steps to come) are
// cancelled and completed, so that MPI no longer writes into the buffers about to be freed. A send that
// MPI cannot cancel (Open MPI does not cancel sends: one whose receiver is gone, after an abort, never
// completes) is waited for until CLOSE_WAIT_MS, then released with MPI_Request_free: its
// peer will never ask for its data, and waiting for it would hang the abort. A peer on this machine that has
// exited ends the wait at once (its pid, gathered at init, names no live process). A peer whose request was
// released once is taken as gone: later closes of its comms (one per channel) do not wait again, so an
// abort with a dead peer costs one wait, not one per channel. (A live peer's transfer in flight at an
// abort completes well within the wait.)
#define CLOSE_WAIT_MS 1000  // for all of one comm's requests together

// Whether a peer on this machine has exited: no such process, or a zombie (its launcher has not reaped it yet).
static int peerExited(int peer) {
  const int pid = localPid ? localPid[peer] : 0;
  if (pid <= 0) return 0;
  char path[64], stat[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 1;
  const size_t n = fread(stat, 1, sizeof(stat) - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char* paren = strrchr(stat, ')');  // "pid (comm) state ...": the name may hold spaces and parentheses
  return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

static mcclResult_t closeComm(struct mpiComm* c) {
  if (c == NULL) return mcclInvalidArgument;
  mcclResult_t res = mcclSuccess;
  for (int i = 0; i < MAX_REQUESTS; i++)
    if (c->reqs[i].used) MPI_Cancel(&c->reqs[i].req);
  const int gone = peerGone != NULL && __atomic_load_n(&peerGone[c->peer], __ATOMIC_RELAXED);
  const uint64_t deadline = mcclClockMs() + (gone ? 0 : CLOSE_WAIT_MS);
  for (int i = 0; i < MAX_REQUESTS; i++) {
    if (!c->reqs[i].used) continue;
    int done = 0, exited = 0;
    unsigned spins = 0;
    for (;;) {
      if (mpiCheck(MPI_Test(&c->reqs[i].req, &done, MPI_STATUS_IGNORE), "MPI_Test(cancelled)") != mcclSuccess) {
        res = mcclSystemError;
        break;
      }
      if (done || mcclClockMs() >= deadline) break;
      if (++spins % 1024 == 0 && (exited = peerExited(c->peer))) break;  // it will never take the send
      sched_yield();
    }
    if (!done && c->reqs[i].req != MPI_REQUEST_NULL) {
      if (peerGone != NULL && !__atomic_exchange_n(&peerGone[c->peer], 1, __ATOMIC_RELAXED))
        NETWARN("NET/MPI: a request to/from rank %d %s at close: released, and rank %d taken as gone", c->peer,
                exited ? "whose process has exited" : "neither completed nor cancelled within the close wait",
                c->peer);
      MPI_Request_free(&c->reqs[i].req);
    }
    c->reqs[i].used = 0;
  }
  free(c);
  return res;
}

static mcclResult_t mpiCloseSend(void* sendComm) {
  return closeComm((struct mpiComm*)sendComm);
}
static mcclResult_t mpiCloseRecv(void* recvComm) {
  return closeComm((struct mpiComm*)recvComm);
}

static mcclResult_t mpiCloseListen(void* listenComm) {
  struct mpiListen* l = (struct mpiListen*)listenComm;
  if (l == NULL) return mcclInvalidArgument;
  if (l->helloReq != MPI_REQUEST_NULL) {  // nobody connected: withdraw the hello receive
    MPI_Cancel(&l->helloReq);
    MPI_Wait(&l->helloReq, MPI_STATUS_IGNORE);
  }
  free(l);
  return mcclSuccess;
}

// The plugin's one exported symbol (NCCL's ncclNetPlugin_vN).
__attribute__((visibility("default"))) const mcclNet_t mcclNetPlugin_v1 = {
    "MPI",      mpiInit,  mpiDevices, mpiGetProperties, mpiListen,    mpiConnect,   mpiAccept,      mpiRegMr,
    mpiDeregMr, mpiIsend, mpiIrecv,   mpiTest,          mpiCloseSend, mpiCloseRecv, mpiCloseListen,
};
