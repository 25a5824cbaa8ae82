# Breaking inside a kernel on the sim backend: each GPU thread is a host thread named b<block>.t<thread>,
# and threadIdx/blockIdx/blockDim/gridDim are per-thread variables gdb prints like any other.
#   gdb -x sim/tests/kernel.gdb build/sim/bin/sim/test_sim_kernel
# The condition reads threadIdx and blockIdx, so the breakpoint is hit only if gdb can read them.
set args indicesEveryThread
set breakpoint pending on
break indexKernel if blockIdx.x == 2 && threadIdx.x == 5 && blockDim.x == 64
commands
  print threadIdx
  print blockIdx
  print blockDim
  print gridDim
  print a
  info threads
  if $mccl_autorun
    continue
  end
end
run
