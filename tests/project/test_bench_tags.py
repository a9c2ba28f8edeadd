"""``bench/tags.py`` (``make bench-tags``) runs end to end on a small data set; its numbers are never judged here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from tenancy_mw.tags.model import parse_tag_query
from tests.conftest import require
from tests.support import databases
from tests.support.bench import bench_module

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "tags.py"


def run_bench(*arguments: str) -> subprocess.CompletedProcess:
    """``bench/tags.py`` with *arguments*, which must succeed."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), *arguments], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_every_postgresql_session_of_the_bench_has_jit_as_asked():
    """``--jit off``: JIT off in each session; ``--jit loaded``: on and LLVM already in each session's process."""
    admin = databases.admin_engine(databases.POSTGRES_ADMIN_URL)
    require(admin is not None, "postgresql")
    admin.dispose()
    bench_tags = bench_module("tags")
    saved = bench_tags.DATABASE, bench_tags.JIT_MODE
    bench_tags.DATABASE = sa.make_url(bench_tags.ADMIN_URLS["postgresql"]).database
    try:
        for mode, expected in (("off", ("off", False)), ("loaded", ("on", True))):
            bench_tags.JIT_MODE = mode
            engine = bench_tags.engine_for("postgresql")
            try:
                for _ in range(2):  # a new session, then the same one back from the pool after its reset
                    with engine.connect() as conn:
                        jit = conn.exec_driver_sql("SHOW jit").scalar_one()
                        assert (jit, databases.postgres_jit_loaded(conn, require)) == expected, mode
            finally:
                engine.dispose()
    finally:
        bench_tags.DATABASE, bench_tags.JIT_MODE = saved


def test_small_run_on_both_servers_reports_every_query():
    name = "tenancy_bt_%d" % os.getpid()
    engines = {}
    for backend, admin_url in (("postgresql", databases.POSTGRES_ADMIN_URL), ("mariadb", databases.MARIADB_ADMIN_URL)):
        engine = databases.admin_engine(admin_url)
        require(engine is not None, backend)
        engines[backend] = engine
    try:
        proc = run_bench("--database", name, "--resources", "3000", "--repeats", "2")
        bench_tags = bench_module("tags")
        lines = proc.stdout.splitlines()
        for backend in ("postgresql", "mariadb"):
            for query_name, _, _ in bench_tags.QUERIES:
                assert any(line.startswith(backend) and (" %s " % query_name) in line for line in lines), (
                    backend,
                    query_name,
                )
        assert "r=3000 t=5 p=1000" in proc.stdout
        assert "JIT in the bench's sessions: off" in proc.stdout
        # Where both formulations are one statement, the table never reads
        # noise as one being slower: both columns are the same pooled runs.
        same_rows = [line.split() for line in lines if line.startswith(("postgresql", "mariadb")) and " yes " in line]
        assert same_rows, proc.stdout
        for fields in same_rows:
            assert fields[fields.index("yes") - 1] == "1.000", fields
        # The sweep behind TagQuery.where's thresholds runs too, and says
        # which form the store picked for each query.
        proc = run_bench(
            "--database", name, "--resources", "3000", "--repeats", "1", "--sweep", "--backend", "postgresql"
        )
        assert "JIT in the bench's sessions: off" in proc.stdout.splitlines()[0]
        sizes, rest = proc.stdout.split("beside a not-tags-any")
        not_any, rest = rest.split("beside a rare required tag")
        rare_required, rest = rest.split("beside a required tag and a not-tags-any")
        required_not_any, rest = rest.split("later pages of a filtered list")
        later, _ = rest.split("filtered pages")
        sweep_rows = [line.split() for line in sizes.splitlines() if "tags-any=" in line]
        expected = sum(1 for r in bench_tags.SWEEP_REQUIRED for pair in bench_tags.SWEEP_ANY if r not in pair)
        assert len(sweep_rows) == expected, proc.stdout
        # 3,000 resources: fewer candidates than GROUPED_MIN_CANDIDATES, so
        # the store keeps the semi-join whatever the tags.
        assert all(fields[-2] == "semi" for fields in sweep_rows), proc.stdout
        # Beside a not-tags-any, on each page, one EXISTS per tag for sets
        # this small (PROBED_BESIDE_NOT_ANY_MAX), or per row.
        labels = {label for _, _, label in bench_tags.SWEEP_NOT_ANY_PAGES}
        not_any_rows = [fields for fields in map(str.split, not_any.splitlines()) if fields and fields[0] in labels]
        assert len(not_any_rows) == len(bench_tags.SWEEP_NOT_ANY_PAGES) * len(bench_tags.SWEEP_ANY), proc.stdout
        # Over these few candidates the larger sets are checked per row
        # (PER_ROW_ANY_FACTOR): on each page, every set checked per row is
        # larger than every set given one EXISTS per tag.
        assert all(fields[-2] in ("per-tag", "per-row") for fields in not_any_rows), proc.stdout
        for label in labels:
            on_page = [fields for fields in not_any_rows if fields[0] == label]
            per_row = [int(fields[1]) for fields in on_page if fields[-2] == "per-row"]
            per_tag = [int(fields[1]) for fields in on_page if fields[-2] == "per-tag"]
            assert not per_row or not per_tag or min(per_row) > max(per_tag), proc.stdout
        assert any(fields[-2] == "per-row" for fields in not_any_rows), proc.stdout
        # Beside rare required tags, each large set on each page.
        required_rows = [line.strip() for line in rare_required.splitlines() if "&tags-any=" in line]
        per_page = len(bench_tags.SWEEP_RARE_REQUIRED) * bench_tags.SWEEP_RARE_REQUIRED_SETS
        for _, _, label in bench_tags.SWEEP_RARE_REQUIRED_PAGES:
            assert sum(row.startswith(label + " ") for row in required_rows) == per_page, proc.stdout
        assert len(required_rows) == per_page * len(bench_tags.SWEEP_RARE_REQUIRED_PAGES), proc.stdout
        # Beside a required tag and a not-tags-any, each set on each page of
        # middling candidates.
        both = [line.split() for line in required_not_any.splitlines() if "&not-tags-any=" in line]
        per_page = len(bench_tags.SWEEP_REQUIRED_NOT_ANY) * len(bench_tags.SWEEP_REQUIRED_NOT_ANY_SETS)
        for _, _, label in bench_tags.SWEEP_REQUIRED_NOT_ANY_PAGES:
            assert sum(fields[0] == label for fields in both) == per_page, proc.stdout
        assert len(both) == per_page * len(bench_tags.SWEEP_REQUIRED_NOT_ANY_PAGES), proc.stdout
        # Later pages of a filtered list: each query on each page.
        later_rows = [line.split() for line in later.splitlines() if "&not-tags-any=" in line]
        per_page = len(bench_tags.SWEEP_LATER_SETS) + 2  # and combined, combined rare
        for _, _, label in bench_tags.SWEEP_LATER_PAGES:
            assert sum(fields[0] == label for fields in later_rows) == per_page, proc.stdout
        assert len(later_rows) == per_page * len(bench_tags.SWEEP_LATER_PAGES), proc.stdout
        assert all(fields[-2] in {"per-row", "driven", "grouped", "semi", "per-tag"} for fields in later_rows)
        # Then the forms on pages whose own condition leaves fewer
        # candidates, each row naming the form the store picked.
        filtered = proc.stdout.split("filtered pages")[1].splitlines()[2:]
        any_queries = [q for _, q, _ in bench_tags.QUERIES if len(parse_tag_query(q).simplified()[1]) >= 2]
        assert len(filtered) == len(bench_tags.SWEEP_PAGES) * len(any_queries), proc.stdout
        assert all(line.split()[-1] in {"per-row", "driven", "grouped", "semi", "per-tag"} for line in filtered)
    finally:
        with engines["postgresql"].connect() as conn:
            conn.execute(sa.text("DROP DATABASE IF EXISTS %s WITH (FORCE)" % name))
        with engines["mariadb"].connect() as conn:
            conn.execute(sa.text("DROP DATABASE IF EXISTS %s" % name))
        for engine in engines.values():
            engine.dispose()
