# Lab 07 under gdb: `make gdb LAB=07`. One process, one communicator per device (the sim's 4): the
# connection machinery connects each ring channel, a window maps every peer's buffer, then each
# allreduce's plan is launched and the ring kernel runs, and on the sim its GPU threads are host
# threads (`info threads`), so gdb stops inside it at a middle step of runRing. Each stop prints what
# matters there; `continue` (or `c`) goes on.
# gdbcheck: stop order varies
set pagination off
set print pretty on
set breakpoint pending on
if $_isvoid($mccl_autorun)
  set $mccl_autorun = 0
end

# Lab 06's ncclTransportP2pSetup: every recorded channel of one rank is selected, set up, swapped
# through the bootstrap and connected. `print ctx->connectSend[0]` shows the channel masks.
break mcclTransportP2pSetup
commands
  printf "rank %d of %d connects %d channel(s)\n", ctx->rank, ctx->nRanks, ctx->nChannels
  if $mccl_autorun
    continue
  end
end

# A window: the buffer's handle goes to the proxy, then every rank imports every peer's.
break labWindowMap
commands
  printf "rank %d maps a %zu-byte window at %p\n", comm->rank, size, buff
  if $mccl_autorun
    continue
  end
end

# The enqueue layer's launch (plan.c): a group's tasks became a plan, and this is its one kernel launch
# (its works are filled; the header's pointers are set below). Rank 0's only, 5 stops: the demo's ring
# allreduce (SIMPLE, then LL), its one-shot and two-shot (its work carries the table's protocol, which
# two-shot's loads and stores ignore), then its group of 8 allreduces planned into one launch of the
# one-shot kernel: 8 works there. Each collective work prints its function, algorithm, protocol, count (elements) and channels
# [channelLo, channelLo + nChannels) of the generic kernel (one-shot's works have none: the kernel cuts
# their concatenation over its blocks). `print *plan` shows the rest, `print plan->args.args` the header.
break mcclLabLaunchPlan if comm->rank == 0
commands
  set $mccl_w = (struct mcclDevWorkColl*)plan->args.works
  printf "rank %d launches the %s kernel (dtype ", comm->rank, kernelNames[plan->kernel]
  output (mcclDataType_t)plan->dtype
  printf "): nColl %d, nP2p %d\n", plan->args.args.nColl, plan->args.args.nP2p
  set $mccl_i = 0
  while $mccl_i < plan->args.args.nColl
    printf "  work %d: ", $mccl_i
    output (enum mcclFunc)$mccl_w[$mccl_i].func
    printf " "
    output (enum mcclAlgo)$mccl_w[$mccl_i].algorithm
    if $mccl_w[$mccl_i].protocol == 2
      printf " SIMPLE"
    else
      if $mccl_w[$mccl_i].protocol == 1
        printf " LL128"
      else
        printf " LL"
      end
    end
    printf ", count %lu, channelLo %d nChannels %d\n", $mccl_w[$mccl_i].count, $mccl_w[$mccl_i].channelLo, $mccl_w[$mccl_i].nChannels
    set $mccl_i = $mccl_i + 1
  end
  if $mccl_autorun
    continue
  end
end

# Inside the ring kernel: recvReduceSend, runRing's middle steps (steps 1 and 2 of each rank's
# schedule on 4 ranks, as the demo prints it under [2]). Thread 0 holds the WaitRecv role: it spins
# on the previous rank's tail (*connStepPtr: the slots that rank has published into our FIFO) until
# it reaches step + stepPerSlice. The chunk is the element offset over the demo's 64-element chunks
# (one channel), the step follows from it and the ring position. The first allreduce is the SIMPLE
# ring; the breakpoint is disabled after 3 stops, before the LL ring (whose class has no connStepPtr).
break recvReduceSend if threadIdx.x == 0
set $mccl_bp_rrs = $bpnum
set $mccl_rrs = 0
commands
  set $mccl_n = kShmem.args.nRanks
  set $mccl_ix = kShmem.comm.ringIndex
  set $mccl_chunk = (int)(inpIx / 64)
  printf "[kernel] rank %d (ring position %d of %d), step %d: recvReduceSend chunk %d; the previous rank's tail is %lu, its first slice needs tail >= %lu\n", kShmem.args.rank, $mccl_ix, $mccl_n, ($mccl_ix - $mccl_chunk + $mccl_n) % $mccl_n - 1, $mccl_chunk, *connStepPtr, step + stepPerSlice
  set $mccl_rrs = $mccl_rrs + 1
  if $mccl_rrs >= 3
    printf "(lab.gdb: breakpoint %d disabled after 3 stops; `enable %d` brings it back)\n", $mccl_bp_rrs, $mccl_bp_rrs
    disable $mccl_bp_rrs
  end
  if $mccl_autorun
    continue
  end
end

run
