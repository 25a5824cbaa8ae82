# Lab 06 under gdb: `make gdb LAB=06`. One process: the demo connects device 0 to device 1 over
# P2P, then over SHM, and shows each side's view of the connection. Each stop prints what matters
# there; type `continue` (or `c`) to go on. `finish` then `print *connector` (or `p connector->conn`)
# shows the addresses a kernel will use.
set pagination off
set print pretty on
set breakpoint pending on
if $_isvoid($mccl_autorun)
  set $mccl_autorun = 0
end

# P2P proxySetup: the side's memory is allocated on the current device (the proxy's) with lab 01,
# and its handle named for export. `finish`, then `print *(struct mcclP2pBuff*)respBuff`.
break p2pProxySetup
commands
  printf "P2P proxySetup for the %s side\n", connection->send ? "send" : "recv"
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
  printf "device copy of %d conns: SIMPLE FIFO %p, LL FIFO %p, step %lu\n", n, connectors[0].conn.buffs[1], connectors[0].conn.buffs[0], connectors[0].conn.step
  if $mccl_autorun
    continue
  end
end

run
