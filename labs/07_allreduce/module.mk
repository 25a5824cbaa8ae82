# Lab 07: the mpirun tests run with 2, 3 and 4 ranks (rings of odd length too).
labs/07_allreduce_MPI_NP := 2 3 4
# mpi_allreduce8 is the 8-rank run (two ranks per sim device), once.
labs/07_allreduce_mpi_allreduce8_MPI_NP := 8
