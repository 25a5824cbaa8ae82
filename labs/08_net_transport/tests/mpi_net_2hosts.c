// Lab 08 under mpirun -np 4, posing as 2 hosts x 2 ranks (MCCL_HOSTID per rank): each ring has two
// NET edges and two P2P/SHM edges; allreduce and the other collectives against the CPU reference.
#define NET_RANKS_PER_HOST 2
#include "net_tests.h"

MCCL_TEST_MAIN_MPI_THREADS(MPI_THREAD_MULTIPLE, NET_TEST_CASES)
