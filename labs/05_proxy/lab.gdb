# Lab 05 under gdb: `make gdb LAB=05` runs the demo (rank 0 = this process, rank 1 = a forked
# child) and stops where the proxy does its work. At each stop: `info threads` lists the proxy
# threads (mccl-proxy-svc, mccl-proxy-prog), `thread N` switches to one, `bt` shows who called.
# To debug the child (rank 1) instead: `set follow-fork-mode child` before `run`; to keep both
# under gdb: `set detach-on-fork off`, then `info inferiors` and `inferior 2`.
source labs/lab-common.gdb
# Stay with rank 0; the child runs on its own (this is also what the batch check needs).
set follow-fork-mode parent
set detach-on-fork on

# The proxy starts: sockets bound, then two threads (the next two stops).
break mcclProxyCreate
commands
  printf "mcclProxyCreate: rank %d, device %d\n", rank, cudaDev
  if $mccl_autorun
    continue
  end
end

# The service thread's first moment: the address it listens on, and the lab 03 fd socket.
break mcclProxyService
commands
  printf "service thread up: listening on @%s, fd socket %s\n", ((mcclProxyState*)arg)->address, ((mcclProxyState*)arg)->uds.socketName
  if $mccl_autorun
    continue
  end
end

# The progress thread's first moment; idle, it spins MCCL_PROXY_SPIN_US, yields, then sleeps on
# sleepCond until the first post. (No function calls here: other threads are running.)
break mcclProxyProgress
commands
  printf "progress thread up: ring head %lu tail %lu (empty), it will sleep on sleepCond\n", ((mcclProxyState*)arg)->ringHead, ((mcclProxyState*)arg)->ringTail
  if $mccl_autorun
    continue
  end
end

# One request from a client (Init, Setup, Connect, Free, Stop): `print *p` shows the whole state.
break serviceRequest
commands
  printf "service: request from client %d (fd %d)\n", i, p->clientFds[i]
  if $mccl_autorun
    continue
  end
end

# Lazy export, client side: ask the peer's proxy for an fd of its cuMem handle.
break mcclProxyClientGetFdBlocking
commands
  printf "GetFd: asking rank %d's proxy for handle 0x%llx\n", peerRank, *(unsigned long long*)handle
  if $mccl_autorun
    continue
  end
end

# Lazy export, owner side: a GetFd (or QueryFd) arrived on this proxy's datagram socket.
break serviceUds
commands
  printf "fd service: a request on %s\n", p->uds.socketName
  if $mccl_autorun
    continue
  end
end

# The user thread posts one message into the ring; the progress thread takes it from there.
# (`if` here, not `?:` with strings: gdb puts a string literal in the process's memory with a call
# to malloc, and another thread stopping during that call ends these commands.)
break mcclProxyPostOp
commands
  if connector->send
    printf "post: %lu bytes on a send connector; ring head %lu tail %lu\n", nbytes, proxy->ringHead, proxy->ringTail
  else
    printf "post: %lu bytes on a recv connector; ring head %lu tail %lu\n", nbytes, proxy->ringHead, proxy->ringTail
  end
  if $mccl_autorun
    continue
  end
end

# Stop: progress thread joined first, then the Stop message ends the service loop.
break mcclProxyStop
commands
  printf "mcclProxyStop: rank %d\n", proxy->rank
  if $mccl_autorun
    continue
  end
end

run
