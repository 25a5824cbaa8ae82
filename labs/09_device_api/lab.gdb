# Lab 09 under gdb: `make gdb LAB=09`. One process, one communicator per device (the sim's 4): the demo makes
# a device communicator (its resource window holds the LSA barriers), a device window at NCCL's 4 GiB stride,
# then runs kernels written on the device API. On the sim every GPU thread is a host thread, so gdb stops
# inside a barrier's wait with the peer's inbox slot in hand. Each stop prints what matters there; `continue`
# (or `c`) goes on.
# gdbcheck: stop order varies
source labs/lab-common.gdb

# The device communicator: requirements become a layout of the resource window (barriers first).
break mcclLabDevCommCreate if comm->rank == 0
commands
  printf "rank %d creates a device communicator: lsaBarrierCount %d, barrierCount %d\n", comm->rank, reqs->lsaBarrierCount, reqs->barrierCount
  if $mccl_autorun
    continue
  end
end

# A device window: every LSA peer's buffer, mapped again at lsaRank * stride. Stops once per rank.
break windowMap
commands
  printf "rank %d maps window %p for LSA rank %d of %d\n", comm->rank, win, lsaRank, lsaSize
  if $mccl_autorun
    continue
  end
end

# Inside a barrier's wait (a kernel thread): `slot` is where `peer` stores its arrivals in this rank's inbox,
# `want` the epoch + 1 the session waits for. Disabled after 3 stops (`enable N` brings it back).
break mcclLsaBarrierWaitSlot
set $mccl_bp_wait = $bpnum
set $mccl_waits = 0
commands
  printf "[kernel] block %d thread %d waits for peer %d: its slot holds %u, the session waits for %u\n", blockIdx.x, threadIdx.x, peer, *slot, want
  set $mccl_waits = $mccl_waits + 1
  if $mccl_waits >= 3
    printf "(lab.gdb: breakpoint %d disabled after 3 stops; `enable %d` brings it back)\n", $mccl_bp_wait, $mccl_bp_wait
    disable $mccl_bp_wait
  end
  if $mccl_autorun
    continue
  end
end

run
