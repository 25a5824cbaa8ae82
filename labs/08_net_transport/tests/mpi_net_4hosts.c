// Lab 08 under mpirun -np 4, posing as 4 hosts x 1 rank (MCCL_HOSTID per rank): every ring edge is NET.
#define NET_RANKS_PER_HOST 1
#include "net_tests.h"

MCCL_TEST_MAIN_MPI_THREADS(MPI_THREAD_MULTIPLE, NET_TEST_CASES)
