// Lab 08 demo, one process (no mpirun: MPI starts as a singleton): the network plugin on its own,
// as the NET transport's proxy drives it. mcclNetGet loads libmccl-net-mpi.so by dlopen, then the
// process connects to itself through the plugin's calls (listen -> connect / accept), registers two
// host buffers, posts an irecv and an isend of one FIFO slot's worth of bytes, and tests both
// requests until they are done, as netSendProxyProgress and netRecvProxyProgress do for every step.
// `mpirun -np 4 .../mpi_demo` shows the same plugin carrying a ring allreduce between posed hosts.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mccl_args.h"
#include "mccl_net.h"

#define SLOT_BYTES (64 * 1024)  // one SIMPLE step of a small FIFO

int main(int argc, char** argv) {
  mcclArgsCheck(argc, argv, 0, "",
                "  One process: loads the MPI net plugin and moves one slot through it to itself.\n"
                "  Under mpirun (several ranks, posed hosts) see mpi_demo.");
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // the proxy thread calls MPI too
  const mcclNet_t* net = NULL;
  mcclResult_t r = mcclNetGet(&net);  // step 1: dlopen, the plugin symbol, its init
  if (r != mcclSuccess) {
    printf("demo: cannot load the network plugin: %s\n", mcclGetErrorString(r));
    MPI_Finalize();
    return 1;
  }
  int ndev = 0;
  mcclNetProperties_t props;
  net->devices(&ndev);
  net->getProperties(0, &props);
  printf("plugin %s: %d device(s), device 0 '%s', buffers: %s\n", net->name, ndev, props.name,
         props.ptrSupport & MCCL_PTR_HOST ? "host" : "?");

  // Step 2: the receiver listens and hands its handle to the sender (the NET transport's setup sends
  // it through the bootstrap); connect and accept return at once and are called until both are ready.
  char handle[MCCL_NET_HANDLE_MAXSIZE];
  void *listenComm = NULL, *sendComm = NULL, *recvComm = NULL;
  if (net->listen(0, handle, &listenComm) != mcclSuccess) return 1;
  for (int spins = 0; (sendComm == NULL || recvComm == NULL) && spins < 1000000; spins++) {
    if (sendComm == NULL && net->connect(0, handle, &sendComm) != mcclSuccess) return 1;
    if (recvComm == NULL && net->accept(listenComm, &recvComm) != mcclSuccess) return 1;
  }
  if (sendComm == NULL || recvComm == NULL) {
    printf("demo: the connection did not complete\n");
    return 1;
  }
  printf("connected: send comm %p, recv comm %p\n", sendComm, recvComm);

  // Step 3: one slot. The receiver's proxy posts irecv into the slot the kernel freed; the sender's
  // proxy posts isend once the kernel's tail says the slot is full; test says when each is done.
  char* src = (char*)malloc(SLOT_BYTES);
  char* dst = (char*)calloc(1, SLOT_BYTES);
  for (int i = 0; i < SLOT_BYTES; i++) src[i] = (char)(i * 7 + 1);
  void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
  net->regMr(sendComm, src, SLOT_BYTES, MCCL_PTR_HOST, &smh);
  net->regMr(recvComm, dst, SLOT_BYTES, MCCL_PTR_HOST, &rmh);
  void* data[1] = {dst};
  size_t sizes[1] = {SLOT_BYTES};
  int tags[1] = {0};
  void* mhs[1] = {rmh};
  while (rreq == NULL) net->irecv(recvComm, 1, data, sizes, tags, mhs, &rreq);
  while (sreq == NULL) net->isend(sendComm, src, SLOT_BYTES, 0, smh, &sreq);
  int sdone = 0, rdone = 0, sbytes = 0, rbytes = 0;
  while (!sdone || !rdone) {
    if (!sdone) net->test(sreq, &sdone, &sbytes);  // sender: done -> the proxy publishes head
    if (!rdone) net->test(rreq, &rdone, &rbytes);  // receiver: done -> the proxy publishes tail
  }
  int same = memcmp(src, dst, SLOT_BYTES) == 0;
  printf("isend done (%d bytes), irecv done (%d bytes): the slot arrived %s\n", sbytes, rbytes,
         same ? "intact" : "DAMAGED");

  net->deregMr(sendComm, smh);
  net->deregMr(recvComm, rmh);
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
  free(src);
  free(dst);
  MPI_Finalize();
  return same ? 0 : 1;
}
