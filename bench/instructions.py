"""Instructions per request of ``make bench`` rows, counted by valgrind's callgrind.

Timings on a shared machine move with its load; instruction counts barely
move, so they compare a change before and after where timings cannot::

    .venv/bin/python bench/instructions.py "admin_cull GET" "admin_cull DELETE"
    .venv/bin/python bench/instructions.py --admin-cull          # every admin_cull row

One ``valgrind --tool=callgrind`` run serves every named row (and the bare
app, to subtract): for each, a warm-up, then ``--calls`` requests exactly as
``run.py`` times them.  The script calls ``os.getppid()`` just before and
just after each timed loop and callgrind dumps its counters whenever
``getppid`` is entered (``--dump-before=getppid``), so each loop's count is
one dump; start-up, imports and warm-up fall in other dumps.  The hash seed
is fixed (``PYTHONHASHSEED=0``) so two runs of the same code count the same
to a few hundred instructions per request.

Instruction counts are not time: a 1 MiB copy costs few instructions next
to the cache misses and page faults it causes.  Judge the worst-case rows on
``make bench``'s times; use these counts for the per-request code path.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BARE = "bare app"
#: Requests per loop: enough to make the few hundred instructions of the
#: ``getppid`` calls and the loop set-up vanish; the 1 MiB rows use fewer.
DEFAULT_CALLS = 2000
HEAVY_CALLS = 20
WARM_UP = 200


def _serve(names: list[str], calls: int) -> None:
    """Under callgrind: serve each row's request *calls* times between two ``getppid`` calls."""
    sys.path.insert(0, str(HERE))
    import run  # noqa: PLC0415 - imported under valgrind only

    by_name = {case.name: case for case in run.CASES}
    for name in names:
        case = by_name[name]
        row = run.build(case)
        count = calls if case.share >= 0.01 else max(1, min(calls, HEAVY_CALLS))
        for _ in range(min(WARM_UP, count)):
            run._serve(row.app, row.template, case.body)
        print("%s\t%d" % (name, count), flush=True)
        os.getppid()  # callgrind dumps here: everything before the loop
        for _ in range(count):
            run._serve(row.app, row.template, case.body)
        os.getppid()  # and here: the loop alone


def _totals(path: Path) -> int:
    match = re.search(r"^(?:summary|totals): (\d+)", path.read_text(encoding="latin-1"), re.MULTILINE)
    if match is None:
        raise SystemExit("no instruction total in %s" % path)
    return int(match.group(1))


def count(names: list[str], calls: int) -> list[tuple[str, int, float]]:
    """``(row, requests, instructions per request)`` for *names*, from one callgrind run."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="tenancy-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=getppid",
            "--callgrind-out-file=%s" % out,
            sys.executable,
            __file__,
            "--serve",
            "--calls",
            str(calls),
            *names,
        ]
        env = dict(os.environ, PYTHONHASHSEED="0")
        proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit("callgrind run failed:\n" + proc.stdout + proc.stderr[-3000:])
        served = [line.split("\t") for line in proc.stdout.splitlines() if "\t" in line]
        dumps = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
        # Two dumps per row: before its loop (set-up) and after it (the loop).
        loops = [_totals(path) for path in dumps[1::2]]
        if len(loops) != len(served):
            raise SystemExit("expected %d loop dumps, found %d" % (len(served), len(loops)))
        return [(name, int(n), total / int(n)) for (name, n), total in zip(served, loops, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", nargs="*", help="row names of bench/run.py")
    parser.add_argument("--admin-cull", action="store_true", help="every admin_cull row")
    parser.add_argument("--calls", type=int, default=DEFAULT_CALLS, help="requests per row (1 MiB rows: at most 20)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve(args.rows, args.calls)
        return 0
    rows = list(args.rows)
    if args.admin_cull:
        sys.path.insert(0, str(HERE))
        import run  # noqa: PLC0415 - only for the row names

        rows += [case.name for case in run.CASES if case.filter == "admin_cull" and case.name not in rows]
    if not rows:
        parser.error("name at least one row, or --admin-cull")
    results = count([BARE] + [name for name in rows if name != BARE], args.calls)
    bare = results[0][2]
    print("%-36s %8s %14s %14s" % ("case", "requests", "Ir/request", "Ir - bare"))
    for name, calls, per_request in results:
        print(
            "%-36s %8d %14.0f %14s" % (name, calls, per_request, "-" if name == BARE else "%.0f" % (per_request - bare))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
