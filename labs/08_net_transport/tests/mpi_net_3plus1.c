// Lab 08 under mpirun -np 4, posing as 2 hosts of 3 ranks and 1 (MCCL_HOSTID per rank): the middle
// rank of the first host has no NET edge of its own, so what the ranks must agree on (the protocol,
// llDoesNotFit) cannot be decided from a rank's own edges.
#define NET_RANKS_PER_HOST 3
#include "net_tests.h"

MCCL_TEST_MAIN_MPI_THREADS(MPI_THREAD_MULTIPLE, NET_TEST_CASES)
