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
# The last process can exit in the moment gdb stops it to report the other one's exit (the parent
# returns from waitpid as soon as gdb has collected the child): gdb 13 then cannot read its
# registers ("No such process"). It has exited; `kill inferiors N` lets gdb reap it.
python
import gdb
import time

def _mcclProcState(pid):
    try:
        return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"

def _mcclReapExited(inf):
    # A process on its way out becomes a zombie within moments; wait up to 2 s for it.
    for _ in range(200):
        if _mcclProcState(inf.pid) in ("Z", "X", "gone"):
            pid = inf.pid
            try:
                gdb.execute("kill inferiors %d" % inf.num, to_string=True)
            except gdb.error:
                pass
            print("[lab.gdb] process %d exited while gdb was stopping it: inferior %d cleared" % (pid, inf.num))
            return True
        time.sleep(0.01)
    return False

def _mcclSelectLive():
    if gdb.selected_inferior().pid == 0:
        live = [i for i in gdb.inferiors() if i.pid > 0]
        if live:
            try:
                gdb.execute("inferior %d" % live[0].num, to_string=True)
            except gdb.error as e:
                if "No such process" not in str(e) or not _mcclReapExited(live[0]):
                    raise
                return
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
