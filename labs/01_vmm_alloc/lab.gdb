# Lab 01 under gdb: `make gdb LAB=01` runs the demo and stops at each step of a VMM allocation.
# Each stop prints what matters there; type `continue` (or `c`) to go on, `bt` to see who called.
# The cu* breakpoints are inside the sim backend (libsimcuda, built with -g), so their arguments
# print by name; on a GPU host libcuda has no debug info: there, use `finish` in the mccl
# functions instead, and cuda-gdb for device code.
source labs/lab-common.gdb

# The gate: MCCL_CUMEM_ENABLE (1 on, 0 off, -2 auto-detect). `finish` shows what it decided.
break mcclCuMemEnable
commands
  # The environment as gdb started the process (`show environment`), not a call to mcclParamCumemEnable():
  # gdb 13 cannot call functions in the process on some x86 machines ("Couldn't write extended
  # state status"). `finish` shows what the gate decided.
  printf "mcclCuMemEnable: the gate reads MCCL_CUMEM_ENABLE (unset: -2, auto-detect)\n"
  show environment MCCL_CUMEM_ENABLE
  if $mccl_autorun
    continue
  end
end

# The public allocation (its granularity, create and access calls stop first: see the README table).
break mcclMemAlloc
commands
  printf "mcclMemAlloc: %lu bytes on the current device\n", size
  if $mccl_autorun
    continue
  end
end

# Granularity: option 0 is MINIMUM (mcclCuMemAlloc), 1 RECOMMENDED (mcclMemAlloc).
break cuMemGetAllocationGranularity
commands
  printf "cuMemGetAllocationGranularity: option %d, location type %d id %d\n", \
    option, prop->location.type, prop->location.id
  if $mccl_autorun
    continue
  end
end

# The physical allocation: size already rounded; handle types 0x1 POSIX fd, 0x8 fabric.
break cuMemCreate
commands
  printf "cuMemCreate: %lu bytes, handle types 0x%x, location type %d id %d\n", \
    size, prop->requestedHandleTypes, prop->location.type, prop->location.id
  if $mccl_autorun
    continue
  end
end

# Who may touch the mapping: `print *desc@count` lists every device granted access.
break cuMemSetAccess
commands
  printf "cuMemSetAccess: 0x%lx, %lu bytes, %lu descriptor(s); the first for location type %d id %d\n", \
    ptr, size, count, desc[0].location.type, desc[0].location.id
  if $mccl_autorun
    continue
  end
end

# The public free: it finds the owning device and the path from the pointer alone.
break mcclMemFree
commands
  printf "mcclMemFree: %p\n", ptr
  if $mccl_autorun
    continue
  end
end

# The VMM free: unmap, release, address free. `next` through it and watch each call's result.
break mcclCuMemFree
commands
  printf "mcclCuMemFree: %p\n", ptr
  if $mccl_autorun
    continue
  end
end

run
