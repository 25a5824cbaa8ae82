# Lab 10 under gdb: `make gdb LAB=10`. One process, one communicator per device (the sim's 4), CTA policy ZERO:
# the demo's collectives run on the copy engines, so no kernel thread ever stops here. Every stop is on the host
# thread that queues memory operations and copies; what it queues runs later on the stream workers. Each stop
# prints what matters there; `continue` (or `c`) goes on.
source labs/lab-common.gdb

# A memory-op sync on rank 0: the value it will write (seq + 1) and the array it uses; its flags as they are.
# Disabled after 2 stops (`enable N` brings it back).
break mcclCeMemOpSync if comm->rank == 0
set $mccl_bp_sync = $bpnum
set $mccl_syncs = 0
commands
  printf "rank 0 queues a sync: last value %u, next array %s; its flags: ceReady[1] %u, ceComplete[1] %u\n", comm->ceColl.seq, comm->ceColl.useComplete ? "ceComplete" : "ceReady", ((struct mcclSymSignals*)comm->signalWin->buff)->ceReady[1], ((struct mcclSymSignals*)comm->signalWin->buff)->ceComplete[1]
  set $mccl_syncs = $mccl_syncs + 1
  if $mccl_syncs >= 2
    printf "(lab.gdb: breakpoint %d disabled after 2 stops; `enable %d` brings it back)\n", $mccl_bp_sync, $mccl_bp_sync
    disable $mccl_bp_sync
  end
  if $mccl_autorun
    continue
  end
end

# A collective handed to the copy engines by lab 07's plan layer (rank 0's first one only).
break mcclLaunchCeColl if comm->rank == 0
set $mccl_bp_coll = $bpnum
commands
  printf "rank 0 runs function %d on the copy engines: %zu elements of %zu bytes, recvbuff %p in window %p\n", args->func, args->nElts, args->eltSize, args->recvBuff, args->recvWin->buff
  disable $mccl_bp_coll
  if $mccl_autorun
    continue
  end
end

# The batch of rank 0's copies to its peers, between the two syncs (first one only; its own block's copy is a
# batch of its own, on the side stream): where each goes.
break mcclCeLaunchBatch if comm->rank == 0 && b->n > 0 && !b->local[0]
set $mccl_bp_batch = $bpnum
commands
  printf "rank 0 queues %zu copies of %zu bytes; the first goes to %p (a peer's window as mapped here)\n", b->n, b->sizes[0], b->dsts[0]
  disable $mccl_bp_batch
  if $mccl_autorun
    continue
  end
end

run
