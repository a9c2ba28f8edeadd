"""``bench/tags.py`` (``make bench-tags``) runs end to end on a small data set; its numbers are never judged here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from tests.conftest import require
from tests.support import databases

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "tags.py"


def test_small_run_on_both_servers_reports_every_query():
    name = "tenancy_bt_%d" % os.getpid()
    engines = {}
    for backend, admin_url in (("postgresql", databases.POSTGRES_ADMIN_URL), ("mariadb", databases.MARIADB_ADMIN_URL)):
        engine = databases.admin_engine(admin_url)
        require(engine is not None, backend)
        engines[backend] = engine
    try:
        proc = subprocess.run(
            [sys.executable, str(BENCH), "--database", name, "--resources", "3000", "--repeats", "2"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        sys.path.insert(0, str(REPO / "bench"))
        try:
            import tags as bench_tags
        finally:
            sys.path.remove(str(REPO / "bench"))
        lines = proc.stdout.splitlines()
        for backend in ("postgresql", "mariadb"):
            for query_name, _, _ in bench_tags.QUERIES:
                assert any(line.startswith(backend) and (" %s " % query_name) in line for line in lines), (
                    backend,
                    query_name,
                )
        assert "r=3000 t=5 p=1000" in proc.stdout
        # Where both formulations are one statement, the table never reads
        # noise as one being slower: both columns are the same pooled runs.
        same_rows = [line.split() for line in lines if line.startswith(("postgresql", "mariadb")) and " yes " in line]
        assert same_rows, proc.stdout
        for fields in same_rows:
            assert fields[-3] == "1.000", fields
    finally:
        with engines["postgresql"].connect() as conn:
            conn.execute(sa.text("DROP DATABASE IF EXISTS %s WITH (FORCE)" % name))
        with engines["mariadb"].connect() as conn:
            conn.execute(sa.text("DROP DATABASE IF EXISTS %s" % name))
        for engine in engines.values():
            engine.dispose()
