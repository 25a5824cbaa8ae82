// Lab 08 (and final/'s NET test): one machine poses as several hosts under mpirun. Before main,
// every rank sets MCCL_HOSTID from its world rank (Open MPI's OMPI_COMM_WORLD_RANK): ranks r and r'
// are on one "host" when r / NET_RANKS_PER_HOST == r' / NET_RANKS_PER_HOST.
#ifndef NET_POSE_H_
#define NET_POSE_H_

#include <stdio.h>
#include <stdlib.h>

#ifndef NET_RANKS_PER_HOST
#error "define NET_RANKS_PER_HOST before including net_pose.h"
#endif

__attribute__((constructor)) static void netPoseHosts(void) {
  const char* r = getenv("OMPI_COMM_WORLD_RANK");
  if (r == NULL) return;  // --list, or not under mpirun: one host
  char id[64];
  snprintf(id, sizeof(id), "mccl-pose-host-%d", atoi(r) / NET_RANKS_PER_HOST);
  setenv("MCCL_HOSTID", id, 1);
}

static inline int netHostOf(int rank) {
  return rank / NET_RANKS_PER_HOST;
}
#endif
