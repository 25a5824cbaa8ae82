# Lab 06 under gdb: `make gdb LAB=06`. One process: the demo connects device 0 to device 1 over P2P,
# then over SHM, and on each connection runs a sender kernel and a receiver kernel (SIMPLE, then LL,
# then LL128 over P2P).
# On the sim every GPU thread is a host thread (named b<block>.t<thread>; `info threads` lists
# them), so gdb breaks inside the kernels like in any function, and threadIdx / blockIdx / blockDim
# are variables it prints. Each stop prints what matters there; type `continue` (or `c`) to go on.
# The kernel breakpoints fire once per step: each is disabled after 3 stops (`enable N` brings it
# back). Needs gdb 12 or newer (a breakpoint on `waitPeer` without its template arguments).
# `make gdb` sets every MCCL_*_TIMEOUT to 0: the demo waits for kernels stopped here.
source labs/lab-common.gdb
set $mccl_kstops = 3

# ---- host side: the connection a kernel will drive ----------------------------------------------

# P2P proxySetup: the side's memory is allocated on the current device (the proxy's) with lab 01,
# and its handle named for export. `finish`, then `print *(struct mcclP2pBuff*)respBuff`.
break p2pProxySetup
commands
  # (no "%s" with string literals here: gdb would allocate them in the process, an inferior call,
  # which gdb 13 cannot make on some x86 machines: "Couldn't write extended state status")
  if connection->send
    printf "P2P proxySetup for the send side\n"
  else
    printf "P2P proxySetup for the recv side\n"
  end
  if $mccl_autorun
    continue
  end
end

# The sender maps the receiver's memory on its own device: after `finish`, send->conn.buffs and
# tail point into it, send->conn.head into its own page.
break p2pSendConnect
commands
  printf "P2P send connect: initial step %lu\n", send->initialStep
  if $mccl_autorun
    continue
  end
end

# The receiver maps the sender's page for its head.
break p2pRecvConnect
commands
  printf "P2P recv connect: initial step %lu\n", recv->initialStep
  if $mccl_autorun
    continue
  end
end

# The copy of mcclConnInfo a kernel loads: print the host side it is made from.
break mcclDevConnCreate
commands
  printf "device copy of %d conns: SIMPLE FIFO %p, LL FIFO %p, LL128 FIFO %p (P2P only), step %lu\n", n, connectors[0].conn.buffs[2], connectors[0].conn.buffs[0], connectors[0].conn.buffs[1], connectors[0].conn.step
  if $mccl_autorun
    continue
  end
end

# The launch: the work struct is the kernel's only argument (NCCL's launch shape: the kernel found
# with cudaGetFuncBySymbol, then cuLaunchKernel). Shown for the first 4 launches.
break mcclDevLaunch
set $mccl_bp_launch = $bpnum
set $mccl_launches = 0
commands
  printf "launch: op %d (0 send, 1 recv), proto %d (0 LL, 1 LL128, 2 SIMPLE), %lu bytes, %d threads, recvConns %p, sendConns %p\n", work->op, work->proto, work->count, nthreads, work->recvConns, work->sendConns
  set $mccl_launches = $mccl_launches + 1
  if $mccl_launches >= 4
    printf "(lab.gdb: breakpoint %d disabled after 4 launches; `enable %d` brings it back)\n", $mccl_bp_launch, $mccl_bp_launch
    disable $mccl_bp_launch
  end
  if $mccl_autorun
    continue
  end
end

# ---- inside the kernels (SIMPLE) ---------------------------------------------------------------

# Thread 0 holds the wait role: WaitRecv in the receiver (spins on the sender's tail), WaitSend in
# the sender (spins on the receiver's head). Stopped at the start of waitPeer, before the spin:
# `step` is where it stands, *connStepPtr the peer's counter it polls. Every thread of the block
# calls waitPeer; the condition keeps the role thread (gdb tests it per call, without stopping).
break waitPeer if threadIdx.x == 0
set $mccl_bp_wait = $bpnum
set $mccl_waits = 0
commands
  if flags & 0x04
    printf "[kernel] WaitRecv, block %d thread %d at step %lu: the peer's tail is %lu; spins until tail >= %lu\n", blockIdx.x, threadIdx.x, step, *connStepPtr, step + stepPerSlice
  else
    printf "[kernel] WaitSend, block %d thread %d at step %lu: the peer's head is %lu; spins until head + 8 >= %lu\n", blockIdx.x, threadIdx.x, step, *connStepPtr, step + stepPerSlice
  end
  set $mccl_waits = $mccl_waits + 1
  if $mccl_waits >= $mccl_kstops
    printf "(lab.gdb: breakpoint %d disabled after %d stops; `enable %d` brings it back)\n", $mccl_bp_wait, $mccl_kstops, $mccl_bp_wait
    disable $mccl_bp_wait
  end
  if $mccl_autorun
    continue
  end
end

# The last thread holds the post role: PostSend publishes tail (after a fence: the slot's data
# first), PostRecv publishes head (the slot is free again). The store itself is NCCL's
# st_relaxed_sys_global (op128.h): here `v` is the value being published and `*p` the counter
# before it; `up` goes to postPeer (`print step`). Stores from elsewhere (the LL head, the
# credit returned at construction) do not stop: the condition asks for postPeer as the caller.
break st_relaxed_sys_global if $_caller_matches(".*::postPeer<")
set $mccl_bp_post = $bpnum
set $mccl_posts = 0
commands
  up-silently
  if flags & 0x10
    printf "[kernel] PostSend, block %d thread %d: publishes tail = %lu (it was %lu)\n", blockIdx.x, threadIdx.x, step, *connStepPtr
  else
    printf "[kernel] PostRecv, block %d thread %d: publishes head = %lu (it was %lu)\n", blockIdx.x, threadIdx.x, step, *connStepPtr
  end
  down-silently
  set $mccl_posts = $mccl_posts + 1
  if $mccl_posts >= $mccl_kstops
    printf "(lab.gdb: breakpoint %d disabled after %d stops; `enable %d` brings it back)\n", $mccl_bp_post, $mccl_kstops, $mccl_bp_post
    disable $mccl_bp_post
  end
  if $mccl_autorun
    continue
  end
end

# ---- inside the kernels (LL) -------------------------------------------------------------------

# LL has no tail: the flags in the lines are the signal. One thread per block waits for send
# credit (WaitSend: thread nthreads - WARP_SIZE, the first of the last warp). Every thread calls
# waitSend; the condition keeps that one (and leaves LL128's waitSend, below, to its own stop).
break waitSend if threadIdx.x == blockDim.x - 32 && !$_caller_matches(".*ProtoLL128")
set $mccl_bp_llwait = $bpnum
set $mccl_llwaits = 0
commands
  printf "[kernel] LL WaitSend, block %d thread %d: step %lu, the receiver's head is %lu\n", blockIdx.x, threadIdx.x, sendConnHead, *sendConnHeadPtr
  set $mccl_llwaits = $mccl_llwaits + 1
  if $mccl_llwaits >= $mccl_kstops
    printf "(lab.gdb: breakpoint %d disabled after %d stops; `enable %d` brings it back)\n", $mccl_bp_llwait, $mccl_kstops, $mccl_bp_llwait
    disable $mccl_bp_llwait
  end
  if $mccl_autorun
    continue
  end
end

# ---- inside the kernels (LL128, P2P only) ---------------------------------------------------------

# LL128's WaitSend is thread 0, named with its template arguments (the demo's byte-moving kernel) so
# that only LL128's stops here. The slot it waits for holds 128-byte lines: 15 data words and, last,
# the flag word of the step that wrote it. `x/16gx sendBuff` shows the first line of slot 0 as the
# receiver's memory holds it (after the first step: the data, then the flag in the 16th word).
break Primitives<unsigned char, FuncSum<unsigned char>, ProtoLL128>::waitSend if threadIdx.x == 0
set $mccl_bp_ll128wait = $bpnum
set $mccl_ll128waits = 0
commands
  printf "[kernel] LL128 WaitSend, block %d thread %d: step %lu, the receiver's head is %lu, %d words per slot\n", blockIdx.x, threadIdx.x, sendConnHead, *sendConnHeadPtr, stepWords
  set $mccl_ll128waits = $mccl_ll128waits + 1
  if $mccl_ll128waits >= $mccl_kstops
    printf "(lab.gdb: breakpoint %d disabled after %d stops; `enable %d` brings it back)\n", $mccl_bp_ll128wait, $mccl_kstops, $mccl_bp_ll128wait
    disable $mccl_bp_ll128wait
  end
  if $mccl_autorun
    continue
  end
end

run
