# Lab 03 under gdb: `make gdb LAB=03`. Two processes: the demo forks an exporter (the child,
# inferior 2) and the parent imports. gdb keeps both (detach-on-fork off) and runs both whenever
# you continue (schedule-multiple on), so the exporter's breakpoints stop too; `info inferiors`
# lists them, `inferior 2` switches to the child, `inferior 1` back to the parent.
# Each stop prints what matters there; type `continue` (or `c`) to go on.
set detach-on-fork off
set follow-fork-mode parent
set schedule-multiple on
source labs/lab-common.gdb
# gdbcheck: stop order varies (the two processes run at once)

# Both processes: the socket each binds. rank 0 is the importer, rank 1 the exporter.
break mcclIpcSocketInit
commands
  printf "[inferior %d] socket for rank %d, hash 0x%lx\n", $_inferior, rank, hash
  if $mccl_autorun
    continue
  end
end

# Exporter: the allocation it will share (cuMemCreate with a POSIX-fd handle type).
break mcclCuMemAlloc
commands
  printf "[inferior %d] allocating %lu bytes, handle types 0x%x\n", $_inferior, size, type
  if $mccl_autorun
    continue
  end
end

# Exporter: the export; `set $d = desc`, `finish`, then `print *$d` (README table).
break mcclIpcExportHandle
commands
  printf "[inferior %d] exporting handle 0x%llx, %lu bytes, as type 0x%x\n", $_inferior, handle, size, type
  if $mccl_autorun
    continue
  end
end

# Exporter (descriptor + fd) and importer (the small acks): sendFd -1 means no fd.
break mcclIpcSocketSendMsg
commands
  printf "[inferior %d] sending %d header bytes, fd %d, to rank %d\n", $_inferior, hdrLen, sendFd, rank
  if $mccl_autorun
    continue
  end
end

# Where the fd crosses: the kernel installs a new descriptor in this process; `info proc` gives
# the pid, and /proc/<pid>/fd shows it appear.
break mcclIpcSocketRecvMsg
commands
  printf "[inferior %d] waiting for %d header bytes on %s\n", $_inferior, hdrLen, handle->socketName
  if $mccl_autorun
    continue
  end
end

# Importer: desc is what came over the wire, fd the received descriptor.
break mcclIpcImport
commands
  printf "[inferior %d] importing type 0x%x, %lu bytes from pid %d, fd %d, for device %d\n", $_inferior, desc->handleType, desc->size, desc->ownerPid, fd, cudaDev
  print *desc
  if $mccl_autorun
    continue
  end
end

# Importer: the end of the mapping's life.
break mcclIpcUnmap
commands
  printf "[inferior %d] unmapping %p\n", $_inferior, ptr
  if $mccl_autorun
    continue
  end
end

run
