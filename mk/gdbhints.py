# Runs inside gdb (gdbcheck.sh, second pass): the demo is stopped at lab.gdb's first breakpoint.
# Reads the "then try" column of the README's gdb table, and at the first stop of each breakpoint
# runs that cell's commands (every `backticked` span, in order) exactly as a reader would type
# them, then `continue`s until every process has exited. Prints, for gdbcheck.sh to judge:
#   MCCL-HINT-FAIL <breakpoint>: `<command>`: <gdb's error>
#   MCCL-HINT-UNRUN <breakpoint>            (the breakpoint never stopped, so its hints never ran)
#   MCCL-ORDER <first stops, in order>
#   MCCL-ORDER-WRONG ...                    (the table's rows are not in first-stop order)
#   MCCL-HINTS-DONE <commands run>
import os
import re

import gdb


def readTable(path):
    rows, inSection, header = [], False, None
    for line in open(path, encoding="utf-8"):
        if line.startswith("## "):
            if inSection and rows:
                break
            inSection = line.strip().lower().startswith("## step through it in gdb")
            continue
        if not inSection or not line.startswith("|"):
            continue
        # split on | not escaped as \|
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        cmds = re.findall(r"`([^`]+)`", cells[-1]) if header[-1] == "then try" else []
        rows.append((names, cmds))
    return header, rows


readme = os.environ["MCCL_GDB_README"]
header, rows = readTable(readme)
if header is None or header[-1] != "then try":
    print("MCCL-HINT-FAIL table: no gdb table whose last column is 'then try' in %s" % readme)
hints, rowOf, tableOrder = {}, {}, []
for r, (names, cmds) in enumerate(rows):
    # A row naming several breakpoints: their stops may come in any order (threads or processes
    # racing); its commands run at the first stop of the row's first name.
    for n in names:
        tableOrder.append(n)
        rowOf[n] = r
    if names:
        hints[names[0]] = cmds

bpName = {b.number: b.location for b in gdb.breakpoints()}
stops = []


def onStop(event):
    if isinstance(event, gdb.BreakpointEvent):
        stops.append(event.breakpoints[0].number)


def anyLive():
    return any(i.pid > 0 for i in gdb.inferiors())


gdb.events.stop.connect(onStop)
try:
    stops.append(int(gdb.parse_and_eval("$_hit_bpnum")))
except gdb.error:
    pass

order, ran, done = [], 0, set()
for _ in range(10000):
    if not anyLive():
        break
    if stops:
        name = bpName.get(stops[-1])
        stops.clear()
        if name is not None and name not in order:
            order.append(name)
        if name in hints and name not in done:
            done.add(name)
            for cmd in hints[name]:
                print("(gdb) %s" % cmd)
                try:
                    gdb.execute(cmd)
                    ran += 1
                except gdb.error as e:
                    print("MCCL-HINT-FAIL %s: `%s`: %s" % (name, cmd, e))
                    break
                if not anyLive():
                    break
            if stops:  # a hint (finish, next) stopped at another breakpoint: that stop counts
                continue
    if not anyLive():
        break
    # As a person types it: lab-common.gdb's hook selects a live inferior first (and clears one
    # that exited while gdb stopped it). gdb 13 with schedule-multiple can fail with "No such
    # process" when a process exits during a stop: a zombie is cleared and `continue` tried again.
    # A `continue` that fails because no process is left is the end of the run, not a failure.
    err = None
    for attempt in range(3):
        try:
            gdb.execute("continue")
            err = None
            break
        except gdb.error as e:
            err = e
            if "No such process" not in str(e):
                break
            for i in gdb.inferiors():
                if i.pid > 0:
                    try:
                        st = open("/proc/%d/stat" % i.pid).read().rsplit(")", 1)[1].split()[0]
                    except OSError:
                        st = "gone"
                    print("# inferior %d (pid %d) state %s" % (i.num, i.pid, st))
                    if st in ("Z", "X", "gone"):
                        print("(gdb) kill inferiors %d" % i.num)
                        gdb.execute("kill inferiors %d" % i.num)
    if err is not None and anyLive():
        print("MCCL-HINT-FAIL end: `continue` with a process still running: %s" % err)
        break

rowsSeen = []
for n in order:
    if n in rowOf and rowOf[n] not in rowsSeen:
        rowsSeen.append(rowOf[n])
for n in tableOrder:
    if n in hints and hints[n] and n not in done:
        print("MCCL-HINT-UNRUN %s" % n)
print("MCCL-ORDER %s" % " ".join(order))
if rowsSeen != sorted(rowsSeen):
    print("MCCL-ORDER-WRONG the README's gdb table lists them in another order than the stops")
print("MCCL-TABLE %s" % " ".join(tableOrder))
print("MCCL-HINTS-DONE %d" % ran)
