# Lab 08 under gdb: `make gdb LAB=08`. One process (MPI as a singleton) loads the MPI net plugin and
# moves one FIFO slot to itself through it: the calls the NET transport's proxy makes for every
# step. Each stop prints what matters there; type `continue` (or `c`) to go on.
set pagination off
set print pretty on
set breakpoint pending on
if $_isvoid($mccl_autorun)
  set $mccl_autorun = 0
end

# The loader: dlopen of MCCL_NET_PLUGIN, its mcclNetPlugin_v1 symbol, then its init.
break mcclNetGet
commands
  printf "loading the network plugin (MCCL_NET_PLUGIN or libmccl-net-mpi.so)\n"
  if $mccl_autorun
    continue
  end
end

# The sender's side of a step: the slot's bytes go out as one MPI_Isend on the plugin's communicator.
break mpiIsend
commands
  printf "isend of %zu bytes, tag %d\n", size, tag
  if $mccl_autorun
    continue
  end
end

# The receiver's side: one MPI_Irecv into the slot, posted before the data arrives.
break mpiIrecv
commands
  printf "irecv of up to %zu bytes\n", sizes[0]
  if $mccl_autorun
    continue
  end
end

run
