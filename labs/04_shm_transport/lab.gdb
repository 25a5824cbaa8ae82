# Lab 04 under gdb: `make gdb LAB=04`. Two processes: the demo forks the sender (the child,
# inferior 2) before any CUDA call and the parent (inferior 1) receives and narrates. gdb keeps
# both (detach-on-fork off) and runs both whenever you continue (schedule-multiple on), so the
# sender's breakpoints stop too; `info inferiors` lists them, `inferior 2` switches to the child.
# `make gdb` sets every MCCL_*_TIMEOUT to 0 unless you set it: a peer parked at a breakpoint is
# waited for forever instead of timing out (a peer that fails or dies still ends the wait).
# Each stop prints what matters there; type `continue` (or `c`) to go on.
set detach-on-fork off
set follow-fork-mode parent
set schedule-multiple on
source labs/lab-common.gdb

# A /dev/shm segment being created (refcount > 0: shmPath "" gets mkstemp's name) or attached
# (refcount -1: the last attacher unlinks it; for peers in one process the creator unlinks it at once
# and the attach opens /proc/self/fd/N). `finish`, then `shell ls -l /dev/shm` to see it.
break mcclShmOpen
commands
  printf "[inferior %d] mcclShmOpen \"%s\" size %lu refcount %d (> 0 create, < 0 attach)\n", $_inferior, shmPath, shmSize, refcount
  if $mccl_autorun
    continue
  end
end

# The choice between the two paths: legacy forces /dev/shm; else cuMem host-NUMA when enabled.
break mcclShmAllocateShareableBuffer
commands
  printf "[inferior %d] shareable buffer of %lu bytes, legacy %d\n", $_inferior, size, legacy
  if $mccl_autorun
    continue
  end
end

# The importer acts on the descriptor's tag: kind 1 /dev/shm (fd -1), kind 2 cuMem (the fd).
break mcclShmImportShareableBuffer
commands
  printf "[inferior %d] importing kind %d with fd %d\n", $_inferior, desc->kind, fd
  print *desc
  if $mccl_autorun
    continue
  end
end

# Each side's proxy allocates its page: the sender one mcclSendMem, the receiver the mcclRecvMem
# page plus the FIFO. `print *(struct mcclShmRequest*)reqBuff` shows the request.
break shmProxySetup
commands
  printf "[inferior %d] proxySetup send=%d: %lu bytes, initial step %lu\n", $_inferior, connection->send, ((struct mcclShmRequest*)reqBuff)->size, ((struct mcclShmRequest*)reqBuff)->initialStep
  if $mccl_autorun
    continue
  end
end

# The receiver's connect: after it, conn.tail is its own page, conn.head the sender's.
break shmRecvConnect
commands
  printf "[inferior %d] receiver connects to rank %d\n", $_inferior, ((struct mcclShmConnectInfo*)connectInfo->data)->rank
  if $mccl_autorun
    continue
  end
end

# The sender publishes a step: the slot's copy from its device has landed, so it writes the slot's
# size into connFifo and then tail (a release store). Once per step; `disable 6` to stop stopping.
break shmPostTail
commands
  printf "[inferior %d] sender publishes slot %d: %ld bytes, tail -> %lu\n", $_inferior, slot, size, tail
  if $mccl_autorun
    continue
  end
end

# The receiver returns a slot: its copy to the device has landed, so head moves (the credit the
# sender waits for in `step - head >= MCCL_STEPS`). `print *sub` shows the op's progress state (base, nsteps, transmitted, done).
break shmPostHead
commands
  printf "[inferior %d] receiver returns credit: head -> %lu\n", $_inferior, head
  print sendMem->head
  if $mccl_autorun
    continue
  end
end

run
