# Lab 07: the mpirun tests run with 2, 3 and 4 ranks (rings of odd length too).
labs/07_allreduce_MPI_NP := 2 3 4
