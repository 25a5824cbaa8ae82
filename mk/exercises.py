#!/usr/bin/env python3
"""Exercises: the labs as a learner's assignment, generated from the solutions (docs/exercises.md).

A solution region in a lab source is a pair of line comments naming one exercise:

    // EXERCISE(01.map) optional words for the reader
    ... the solution ...
    // END EXERCISE(01.map)

A begin line may end with `STUB: <code>`: what the region becomes in the learner tree (default
`return mcclExerciseStub("01.map");`, for a function returning mcclResult_t). The exercises of a lab,
in order, with their title, what each teaches, the hint and the tests each unlocks, are in
labs/NN_name/exercises.txt: the one place that lists them.

  exercises.py gen OUT [--probe] [--force] [--labs=NN,..]
                                             write a tree where every region is a stub (a learner's tree),
                                             or, with --probe, where a region is a stub only while
                                             MCCL_EXERCISE_PROBE names it or is `all` (CI's checker:
                                             one build checks every stub, alone or all together);
                                             --labs: only those labs' regions (the rest kept as is)
  exercises.py check                         regions and exercises.txt agree (ids, order, pairs)
  exercises.py list [LAB]                    id, lab, tests: one line per exercise
  exercises.py derive PROBE_DIR [LAB] [--write]
                                             per exercise, in a built probe tree, the lab's tests it unlocks:
                                             pass with it and the ones before it solved, the later ones
                                             stubbed, and fail once it is stubbed too; --write puts them in
                                             exercises.txt
  exercises.py objects [OBJDIR] [--labs=NN,..]
                                             the objects that compile every file holding a region (CI)
  exercises.py readme                        rewrite each lab README's "## Exercises" section from exercises.txt
                                             (check fails while one is stale)
  exercises.py solve TREE ID... [--ref=DIR]  copy the reference solution of those exercises into the learner
                                             tree TREE (from DIR, default REF_TREE of this tree's
                                             mk/learner.mk, else this tree), between the marker lines
"""
import configparser
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BEGIN = re.compile(r"^(\s*)// EXERCISE\((\d\d\.[A-Za-z0-9_]+)\)(.*)$")
END = re.compile(r"^(\s*)// END EXERCISE\((\d\d\.[A-Za-z0-9_]+)\)\s*$")
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")


def die(msg):
    sys.stderr.write("exercises: %s\n" % msg)
    sys.exit(2)


def tree_files(src):
    """The files of the source tree: git's (tracked and untracked-not-ignored), else a walk without build*."""
    try:
        out = subprocess.run(["git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode()
        return sorted(f for f in set(out.split("\0")) if f and os.path.isfile(os.path.join(src, f)))
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(src):
            rel = os.path.relpath(d, src)
            dirs[:] = [x for x in dirs if not (rel == "." and (x.startswith("build") or x.startswith(".")))]
            files += [os.path.normpath(os.path.join(rel, n)) for n in names]
        return sorted(files)


def regions(path, text):
    """[(begin line index, end line index, id, stub code or None)] of one file; dies on a broken pair."""
    out, open_ = [], None
    for i, line in enumerate(text.split("\n")):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if open_:
                die("%s:%d: EXERCISE(%s) inside EXERCISE(%s)" % (path, i + 1, b.group(2), open_[1]))
            rest = b.group(3)
            stub = rest.split("STUB:", 1)[1].strip() if "STUB:" in rest else None
            open_ = (i, b.group(2), stub)
        elif e:
            if not open_ or open_[1] != e.group(2):
                die("%s:%d: END EXERCISE(%s) without its EXERCISE line" % (path, i + 1, e.group(2)))
            out.append((open_[0], i, open_[1], open_[2]))
            open_ = None
        elif "EXERCISE(" in line and "// " in line and not line.lstrip().startswith("*"):
            if re.search(r"//\s*(END )?EXERCISE\(", line):
                die("%s:%d: malformed exercise marker (want '// EXERCISE(NN.name)' alone on its line)" % (path, i + 1))
    if open_:
        die("%s:%d: EXERCISE(%s) never ends" % (path, open_[0] + 1, open_[1]))
    return out


def default_stub(ex):
    return 'return mcclExerciseStub("%s");' % ex


def transform(text, regs, probe):
    lines = text.split("\n")
    out, last = [], 0
    for b, e, ex, stub in regs:
        indent = re.match(r"^\s*", lines[b]).group(0)
        code = stub or default_stub(ex)
        out += lines[last:b + 1]
        if probe:
            # The stub, or else the solution: a region's declarations are never used after its END line.
            out.append('%sif (mcclExerciseProbe("%s")) { %s } else {' % (indent, ex, code))
            out += lines[b + 1:e]
            out += [indent + "}", lines[e]]
        else:
            out.append(indent + code)
            out.append(lines[e])
        last = e + 1
    out += lines[last:]
    return "\n".join(out)


def lab_dirs(src=ROOT):
    base = os.path.join(src, "labs")
    return sorted(d for d in os.listdir(base) if re.match(r"^\d\d_", d) and os.path.isdir(os.path.join(base, d)))


def load_exercises(src=ROOT):
    """{lab dir: [(id, fields)]} from each labs/NN_x/exercises.txt, in file order."""
    labs = {}
    for d in lab_dirs(src):
        p = os.path.join(src, "labs", d, "exercises.txt")
        if not os.path.exists(p):
            continue
        cp = configparser.ConfigParser(interpolation=None)
        cp.optionxform = str
        with open(p) as f:
            cp.read_file(f)
        labs[d] = [(s, dict(cp[s])) for s in cp.sections()]
    return labs


def all_regions(src=ROOT):
    found = {}
    for f in tree_files(src):
        if not f.endswith(SOURCE_EXT) or not (f.startswith("labs/") or f.startswith("final/")):
            continue
        with open(os.path.join(src, f)) as fh:
            text = fh.read()
        if "EXERCISE(" in text:
            for b, e, ex, stub in regions(f, text):
                found.setdefault(ex, []).append((f, b + 1, e + 1))
    return found


def readme_section(d, exs, found):
    num = d[:2]
    out = ["## Exercises",
           "Learn by doing: `make exercises` writes a learner tree where the solutions below are stubs that",
           "fail with `mcclNotImplemented` and print their name. There `make grade LAB=%s` scores each" % num,
           "exercise by the tests it unlocks, which need only it and those above it: do them in order.",
           "`make grade LAB=%s USE_REF=1` starts here on the reference build of the labs below. Generated from" % num,
           "`exercises.txt` (`mk/exercises.py readme`); how it works: [docs/exercises.md](../../docs/exercises.md).",
           "",
           "| # | exercise | in | what it teaches | read in NCCL 2.28.9 |",
           "| --- | --- | --- | --- | --- |"]
    for i, (ex, f) in enumerate(exs, 1):
        files = sorted({w[0].split("/", 2)[2] for w in found.get(ex, [])})
        out.append("| %d | `%s`: %s | %s | %s | %s |" % (i, ex, f.get("title", ""), ", ".join("`%s`" % x for x in files),
                                                       f.get("teaches", ""), f.get("hint", "")))
    out.append("")
    return "\n".join(out) + "\n"


def readme(src=ROOT, write=True):
    """Rewrite (or, write=False, compare) each lab README's Exercises section; the stale ones' paths."""
    labs, found, stale = load_exercises(src), all_regions(src), []
    for d, exs in labs.items():
        p = os.path.join(src, "labs", d, "README.md")
        with open(p) as f:
            text = f.read()
        want = readme_section(d, exs, found)
        m = re.search(r"^## Exercises\n.*?(?=^## |\Z)", text, re.S | re.M)
        new = text[:m.start()] + want + text[m.end():] if m else text.rstrip("\n") + "\n\n" + want
        if new != text:
            stale.append(os.path.relpath(p, src))
            if write:
                with open(p, "w") as f:
                    f.write(new)
    return stale


def check(src=ROOT):
    labs, found = load_exercises(src), all_regions(src)
    errs, listed = [], set()
    errs += ["%s: its Exercises section is stale: run mk/exercises.py readme" % p for p in readme(src, write=False)]
    for d, exs in labs.items():
        num = d[:2]
        if not 3 <= len(exs) <= 8:
            errs.append("labs/%s/exercises.txt: %d exercises (want 3 to 8)" % (d, len(exs)))
        for ex, fields in exs:
            listed.add(ex)
            if not ex.startswith(num + "."):
                errs.append("labs/%s/exercises.txt: [%s] does not start with %s." % (d, ex, num))
            for k in ("title", "teaches", "hint", "tests"):
                if not fields.get(k, "").strip():
                    errs.append("labs/%s/exercises.txt: [%s] has no %s" % (d, ex, k))
            if ex not in found:
                errs.append("labs/%s/exercises.txt: [%s] marks no region in any source" % (d, ex))
    for ex, where in found.items():
        if ex not in listed:
            errs.append("%s:%d: EXERCISE(%s) is not in its lab's exercises.txt" % (where[0][0], where[0][1], ex))
    for e in errs:
        print(e)
    n = sum(len(v) for v in labs.values())
    print("exercises: %d in %d labs, %d regions%s" % (n, len(labs), sum(len(v) for v in found.values()),
                                                     "" if not errs else ", %d problems" % len(errs)))
    return 1 if errs else 0


def in_labs(ex, labs):
    """Whether exercise ex (NN.name) belongs to one of labs (a list of NN), or labs is None (all)."""
    return labs is None or ex[:2] in labs


def gen(out, probe=False, force=False, src=ROOT, labs=None):
    out = os.path.abspath(out)
    if os.path.commonpath([out, src]) == src and not os.path.relpath(out, src).startswith("build"):
        die("%s is inside the source tree: choose a directory outside it (or under build*/)" % out)
    if os.path.exists(out) and os.listdir(out):
        if not force:
            die("%s exists and is not empty: it may hold a learner's work. Remove it, or pass "
                "EXERCISES_FORCE=1 to overwrite every file the generator writes" % out)
    if check(src) != 0:
        die("fix the problems above first")
    nreg = 0
    for f in tree_files(src):
        s, d = os.path.join(src, f), os.path.join(out, f)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        if f.endswith(SOURCE_EXT):
            with open(s) as fh:
                text = fh.read()
            regs = [g for g in regions(f, text) if in_labs(g[2], labs)] if "EXERCISE(" in text else []
            if regs:
                nreg += len(regs)
                with open(d, "w") as fh:
                    fh.write(transform(text, regs, probe))
                shutil.copymode(s, d)
                continue
        if os.path.exists(d):
            os.unlink(d)
        shutil.copy2(s, d)
    with open(os.path.join(out, "mk", "learner.mk"), "w") as fh:
        fh.write("# Written by `make exercises` (mk/exercises.py): this tree is a learner's tree.\n"
                 "MCCL_LEARNER := %s\n"
                 "# The reference tree: USE_REF=1 links its archives for the labs below LAB.\n"
                 "REF_TREE ?= %s\n" % ("probe" if probe else "1", src))
    print("exercises: wrote %s (%d regions %s)" % (out, nreg, "probed by MCCL_EXERCISE_PROBE" if probe else "stubbed"))
    if not probe:
        git_init(out)


def git_init(out):
    """Make a new learner tree a git repository with one commit of what gen wrote, so that a learner can see
    (git diff) and undo (git checkout) their own work. The identity is given on the command line: the machine
    may have no git user configured. A tree that is a repository already (EXERCISES_FORCE=1 over a learner's
    tree) is left as it is: its history is the learner's."""
    if os.path.exists(os.path.join(out, ".git")):
        print("exercises: %s is a git repository already: its history is left alone (git diff shows what the "
              "generator rewrote)" % out)
        return
    git = ["git", "-C", out, "-c", "init.defaultBranch=main", "-c", "user.name=minccl",
           "-c", "user.email=minccl@localhost", "-c", "commit.gpgsign=false"]
    try:
        for args in (["init", "-q"], ["add", "-A"],
                     ["commit", "-q", "--no-verify", "-m",
                      "The labs with their exercises as stubs (make exercises): the starting point"]):
            subprocess.run(git + args, check=True, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except OSError as e:
        sys.stderr.write("exercises: no git (%s): %s is not a repository; the tree is usable all the same\n" % (e, out))
    except subprocess.CalledProcessError as e:
        sys.stderr.write("exercises: git %s failed in %s: %s\n" % (e.cmd[len(git)], out, (e.stderr or "").strip()))
    else:
        print("exercises: %s is a git repository with one commit: git diff shows your work" % out)


def ref_tree(tree):
    """The reference tree of a tree: REF_TREE in its mk/learner.mk (a learner tree), else the tree itself."""
    p = os.path.join(tree, "mk", "learner.mk")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                m = re.match(r"^REF_TREE\s*\??=\s*(\S+)", line)
                if m:
                    return m.group(1)
    return tree


def solve(tree, ids, ref=None):
    """Copy the reference solution of each exercise in ids into the tree (a learner tree), region by region:
    the lines between the markers, which the learner's tree must still have. Returns the files rewritten."""
    ref = os.path.abspath(ref or ref_tree(ROOT))
    tree = os.path.abspath(tree)
    if ref == tree:
        die("%s is the reference tree: solve writes into a learner tree" % tree)
    wanted, found, written = set(ids), set(), []
    for f in tree_files(ref):
        if not f.endswith(SOURCE_EXT):
            continue
        with open(os.path.join(ref, f)) as fh:
            text = fh.read()
        if "EXERCISE(" not in text:
            continue
        regs = [g for g in regions(f, text) if g[2] in wanted]
        if not regs:
            continue
        ref_lines = text.split("\n")
        path = os.path.join(tree, f)
        with open(path) as fh:
            mine = fh.read()
        mine_regs = [g for g in regions(f, mine) if g[2] in wanted]
        if [g[2] for g in mine_regs] != [g[2] for g in regs]:
            die("%s: the markers of %s are not all there (a region's two marker lines must stay for solve)" %
                (path, ", ".join(sorted({g[2] for g in regs}))))
        lines = mine.split("\n")
        # From the last region up, so that the line numbers of the ones above stay right.
        for (b, e, ex, _), (rb, re_, _, _) in reversed(list(zip(mine_regs, regs))):
            lines[b + 1:e] = ref_lines[rb + 1:re_]
            found.add(ex)
        with open(path, "w") as fh:
            fh.write("\n".join(lines))
        written.append(f)
    missing = wanted - found
    if missing:
        die("no region of %s in %s" % (", ".join(sorted(missing)), ref))
    return written


def run_outcomes(probe_dir, lab, stubs, test=None):
    """{test: set of PASS/FAIL/SKIP} and the output of `make test LAB=lab` in a built probe tree with the regions
    of stubs (a list of ids) stubbed; test: run only that one."""
    env = dict(os.environ, MCCL_EXERCISE_PROBE=",".join(stubs))
    env.setdefault("MCCL_TEST_TIMEOUT", "300")  # a stub that leaves a test waiting costs minutes, not 15
    cmd = ["make", "-C", probe_dir, "--no-print-directory", "BACKEND=sim", "test", "LAB=" + lab]
    if test:
        cmd.append("T=%s[%s]" % (test[:-1], test[-1]))  # a glob matches the whole name only
    out = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         errors="replace").stdout
    outcomes = {}
    for line in out.split("\n"):
        m = re.match(r"^(PASS|FAIL|SKIP) (\S+)", line)
        if m:
            outcomes.setdefault(m.group(2), set()).add(m.group(1))
    return outcomes, out


def passed(outcomes):
    return [t for t, o in outcomes.items() if o == {"PASS"}]


def derive(probe_dir, lab=None, write=False, src=ROOT):
    """Per exercise k of a lab (e1..eN in exercises.txt's order), the tests it unlocks: those that pass with
    e1..ek solved and e(k+1)..eN stubbed, but not with ek stubbed as well. So the tests listed for an exercise
    depend only on it and the ones before it: solving the first k exercises, in order, makes exactly k done."""
    for d, exs in load_exercises(src).items():
        if lab and not d.startswith(lab):
            continue
        p = os.path.join(src, "labs", d, "exercises.txt")
        with open(p) as f:
            text = f.read()
        ids = [ex for ex, _ in exs]
        listed = {ex: fields.get("tests", "").split() for ex, fields in exs}
        runs = []
        for k in range(len(ids) + 1):  # k solved, the rest stubbed; k = 0 is every stub on
            outcomes, _ = run_outcomes(probe_dir, d[:2], ids[k:])
            runs.append(outcomes)
            sys.stderr.write("derive: %s, %d of %d solved: %d passed\n" % (d, k, len(ids), len(passed(outcomes))))
        # A test that fails where fewer exercises were stubs than in a run it passed in (or with none) may be
        # one that fails now and then: it runs once more, alone.
        for k in range(1, len(ids) + 1):
            earlier = set().union(*(passed(runs[j]) for j in range(k)))
            for t, o in list(runs[k].items()):
                if "FAIL" in o and (t in earlier or k == len(ids)):
                    again, _ = run_outcomes(probe_dir, d[:2], ids[k:], t)
                    if again.get(t) == {"PASS"}:
                        sys.stderr.write("derive: %s failed with %d of %d solved, passed run again alone\n" %
                                         (t, k, len(ids)))
                        runs[k][t] = {"PASS"}
        ref = passed(runs[-1])
        kept = {}  # what a probe tree cannot run keeps the exercise exercises.txt lists it under
        for t, o in runs[-1].items():
            if "FAIL" in o:
                owners = [ex for ex in ids if t in listed[ex]]
                if owners:
                    kept.setdefault(owners[-1], []).append(t)
                sys.stderr.write("derive: %s fails in the probe tree with every exercise solved: %s\n" %
                                 (t, "kept under " + owners[-1] if owners else "left out"))
        for k, ex in enumerate(ids, 1):
            before, now = set(passed(runs[k - 1])), set(passed(runs[k]))
            for t in sorted(before - now):
                sys.stderr.write("derive: %s passes with %s stubbed but not once it is solved: left out\n" % (t, ex))
            unlocked = [t for t in ref if t in now and t not in before] + kept.get(ex, [])
            print("%s\t%s" % (ex, " ".join(unlocked) or "NONE"))
            sys.stdout.flush()
            text = re.sub(r"(\[%s\]\n(?:(?!\[).*\n)*?)tests =.*\n(?:[ \t]+.*\n)*" % re.escape(ex),
                          lambda m: m.group(1) + "tests =\n" + "".join("  %s\n" % t for t in unlocked or ["NONE"]),
                          text)
        if write:
            with open(p, "w") as f:
                f.write(text)


def objects(objdir, src=ROOT, labs=None):
    """The objects that compile the files holding regions: a .c/.cu's own, a header's first includer in its lab."""
    objs = set()
    for ex, where in all_regions(src).items():
        if not in_labs(ex, labs):
            continue
        for f, _, _ in where:
            if f.endswith((".c", ".cu")):
                objs.add(os.path.join(objdir, f + ".o" if f.endswith(".cu") else f[:-2] + ".o"))
                continue
            lab = "/".join(f.split("/")[:2])
            base = os.path.basename(f)
            for cu in sorted(x for x in tree_files(src) if x.startswith(lab + "/src/") and x.endswith((".cu", ".c"))):
                with open(os.path.join(src, cu)) as fh:
                    if base in fh.read() or cu.endswith(".cu"):
                        objs.add(os.path.join(objdir, cu + ".o" if cu.endswith(".cu") else cu[:-2] + ".o"))
                        break
    return sorted(objs)


def labs_arg(argv):
    """The NN list of a --labs=NN,.. argument (None: every lab)."""
    for a in argv:
        if a.startswith("--labs="):
            return [x.strip()[:2] for x in a[7:].replace(" ", ",").split(",") if x.strip()] or None
    return None


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd = argv[0]
    if cmd == "check":
        return check()
    if cmd == "objects":
        args = [a for a in argv[1:] if not a.startswith("--")]
        print(" ".join(objects(args[0] if args else "build/sim/obj", labs=labs_arg(argv))))
        return 0
    if cmd == "readme":
        for p in readme():
            print("wrote %s" % p)
        return 0
    if cmd == "list":
        for d, exs in load_exercises().items():
            if len(argv) > 1 and not d.startswith(argv[1]):
                continue
            for ex, fields in exs:
                print("%s\t%s\t%s" % (ex, d, " ".join(fields.get("tests", "").split())))
        return 0
    if cmd == "derive":
        args = [a for a in argv[1:] if not a.startswith("--")]
        if not args:
            die("usage: exercises.py derive PROBE_DIR [LAB] [--write]")
        derive(os.path.abspath(args[0]), args[1] if len(args) > 1 else None, write="--write" in argv)
        return 0
    if cmd == "solve":
        args = [a for a in argv[1:] if not a.startswith("--")]
        refs = [a[6:] for a in argv[1:] if a.startswith("--ref=")]
        if len(args) < 2:
            die("usage: exercises.py solve TREE ID... [--ref=DIR]")
        for f in solve(args[0], args[1:], refs[0] if refs else None):
            print("solved: %s" % f)
        return 0
    if cmd == "gen":
        args = [a for a in argv[1:] if not a.startswith("--")]
        if len(args) != 1:
            die("usage: exercises.py gen OUT [--probe] [--force] [--labs=NN,..]")
        gen(args[0], probe="--probe" in argv, force="--force" in argv, labs=labs_arg(argv))
        return 0
    die("unknown command %s (gen, check, list)" % cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
