# Lab 07 under gdb: `make gdb LAB=07`. One process, one communicator per device: the connection
# machinery connects each ring channel, then a window maps every peer's buffer. Each stop prints
# what matters there; type `continue` (or `c`) to go on.
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

run
