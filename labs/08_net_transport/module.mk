# Lab 08: the mpirun tests run with 4 ranks (posing as 2 hosts x 2 ranks, and as 4 hosts x 1).
labs/08_net_transport_MPI_NP := 4
# mpi_net_plugin: one sender and one receiver, below the communicator.
labs/08_net_transport_mpi_net_plugin_MPI_NP := 2

# The network plugin over Open MPI: its own shared object next to the labs' libraries, loaded by
# dlopen (MCCL_NET_PLUGIN), so that the labs' archives, final/ and the drop-in never link MPI. Of
# minccl it links only common's mccl_utils.h helpers (their one object), not an archive.
NET_MPI_PLUGIN := $(LIB)/libmccl-net-mpi.so
NET_MPI_PLUGIN_OBJS := $(OBJ)/labs/08_net_transport/plugin/net_mpi.o $(OBJ)/common/src/utils.o
$(OBJ)/labs/08_net_transport/plugin/net_mpi.o: labs/08_net_transport/plugin/net_mpi.c | $(BACKEND_DEP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(MPI_CFLAGS) $(CFLAGS) -c $< -o $@
$(NET_MPI_PLUGIN): $(NET_MPI_PLUGIN_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libmccl-net-mpi.so -o $@ $^ $(MPI_LIBS)
ALL_LIBS += $(NET_MPI_PLUGIN)
# What `make test LAB=08` builds besides the lab's archive and binaries: the tests load the plugin.
labs/08_net_transport_TARGETS := $(NET_MPI_PLUGIN)

# The one-process demo starts MPI as a singleton (the plugin needs it): an MPI program not named mpi_*.
MPI_SRCS += labs/08_net_transport/examples/demo.c
