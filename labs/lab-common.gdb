# Sourced by every labs/NN_*/lab.gdb (gdb runs from the repository root: `make gdb LAB=NN`).
set pagination off
set print pretty on
set breakpoint pending on
set confirm off
# $mccl_autorun = 1 (the batch check in `make test`): each breakpoint's commands end in `continue`.
if $_isvoid($mccl_autorun)
  set $mccl_autorun = 0
end
# A forked process that exits is selected by gdb, and `continue` would then answer "The program is
# not being run" while the other process waits: before each `continue`, select a live inferior.
# (Not from the exit event itself: gdb 13 aborts when an inferior is switched there.)
python
import gdb

def _mcclSelectLive():
    if gdb.selected_inferior().pid == 0:
        live = [i for i in gdb.inferiors() if i.pid > 0]
        if live:
            gdb.execute("inferior %d" % live[0].num, to_string=True)
            print("[lab.gdb] inferior %d selected (the other one has exited)" % live[0].num)

def _mcclOnExit(event):
    live = [i for i in gdb.inferiors() if i.pid > 0 and i.num != event.inferior.num]
    if not live:
        code = getattr(event, "exit_code", None)
        print("[lab.gdb] the demo has finished%s: `run` starts it again, `quit` leaves gdb" %
              ("" if code is None else " (exit code %d)" % code))

gdb.events.exited.connect(_mcclOnExit)
end
define hook-continue
  python _mcclSelectLive()
end
