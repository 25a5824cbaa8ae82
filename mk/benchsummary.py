"""The closing summary of the allreduce benchmarks (labs/07_allreduce/benchlib/mpi_allreduce_bench.c), as
the shell tests that check it read it: final/tests/test_allreduce_perf.sh and
labs/07_allreduce/tests/test_bench_out.sh import this module (the tests run from the repository root)."""


def summary(log, title):
    """The summary titled `title` in the lines `log`: (its column header's fields, its rows), each row the
    fields after the leading '#'. Lines of the other ranks that print in between are skipped; the rows end
    at the first line that does not start with a size."""
    at = [i for i, l in enumerate(log) if l.startswith(title)]
    assert len(at) == 1, "no summary titled '%s': %s" % (title, [l for l in log if "summary" in l])
    after = [l for l in log[at[0] + 1:] if l.startswith("#")]  # the other ranks' lines may come in between
    rows = []
    for l in after[2:]:
        f = l.split()
        if len(f) < 2 or not f[1].isdigit():
            break
        rows.append(f[1:])
    return after[0].split(), rows
