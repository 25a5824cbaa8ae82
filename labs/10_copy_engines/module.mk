# Lab 10: the mpirun tests run with 2, 3 and 4 ranks.
labs/10_copy_engines_MPI_NP := 2 3 4
