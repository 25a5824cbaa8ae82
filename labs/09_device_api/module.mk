# Lab 09: the mpirun tests run with 2, 3 and 4 ranks (LSA teams of odd size too).
labs/09_device_api_MPI_NP := 2 3 4
