# Lab 02 under gdb: `make gdb LAB=02` runs the demo and stops where host memory is made
# device-visible. Each stop prints what matters there; `continue` (or `c`) goes on.
# The cu*/cuda* breakpoints are inside the sim backend (libsimcuda, built with -g), so their
# arguments print by name; on a GPU host the driver has no debug info: `finish` in the mccl
# functions instead.
source labs/lab-common.gdb

# The gate: MCCL_CUMEM_HOST_ENABLE (1, 0, -1 auto); the self-test runs on the first call.
break mcclCuMemHostEnable
commands
  # The environment as gdb started the process (`show environment`), not a call to mcclParamCumemHostEnable():
  # gdb 13 cannot call functions in the process on some x86 machines ("Couldn't write extended
  # state status"). `finish` shows what the gate decided.
  printf "mcclCuMemHostEnable: the gate reads MCCL_CUMEM_HOST_ENABLE (unset: -1, auto)\n"
  show environment MCCL_CUMEM_HOST_ENABLE
  if $mccl_autorun
    continue
  end
end

# The one-granule self-test (once per process): `finish`, then `print selfTestPassed`.
break hostSelfTest
commands
  printf "hostSelfTest: trying one granule of cuMem host-NUMA memory\n"
  if $mccl_autorun
    continue
  end
end

# Location type 3 is CU_MEM_LOCATION_TYPE_HOST_NUMA; the id is the device's HOST_NUMA_ID (or 0).
break cuMemCreate
commands
  printf "cuMemCreate: %lu bytes, location type %d id %d, handle types 0x%x\n", \
    size, prop->location.type, prop->location.id, prop->requestedHandleTypes
  if $mccl_autorun
    continue
  end
end

break mcclCuMemHostAlloc
commands
  printf "mcclCuMemHostAlloc: %lu bytes\n", size
  if $mccl_autorun
    continue
  end
end

# Two grants for a host mapping: location type 1 (the device), then 3 (the host NUMA node).
break cuMemSetAccess
commands
  printf "cuMemSetAccess: 0x%lx, %lu bytes, location type %d id %d, flags %d\n", \
    ptr, size, desc[0].location.type, desc[0].location.id, desc[0].flags
  if $mccl_autorun
    continue
  end
end

break mcclCudaHostCalloc
commands
  printf "mcclCudaHostCalloc: %lu x %lu bytes\n", nelem, elemSize
  if $mccl_autorun
    continue
  end
end

# Mode 2 is cudaStreamCaptureModeRelaxed (going in), then the caller's mode coming back.
break cudaThreadExchangeStreamCaptureMode
commands
  printf "cudaThreadExchangeStreamCaptureMode: setting mode %d\n", *mode
  if $mccl_autorun
    continue
  end
end

# The gate-picked free routes by the pointer: `step` to see which branch it takes.
break mcclHostFree
commands
  printf "mcclHostFree: %p\n", ptr
  if $mccl_autorun
    continue
  end
end

break mcclCuMemHostFree
commands
  printf "mcclCuMemHostFree: %p\n", ptr
  if $mccl_autorun
    continue
  end
end

run
