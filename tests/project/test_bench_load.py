"""``bench/load.py`` (the load run of ``make bench``) works; its goals are never judged here.

A tiny run: gunicorn serving the bare app, ``RequestId``, a filter that
burns 2 ms of CPU per request, and the demo's full public pipeline, each
driven by wrk for a second, plus a short memory check.  The test checks
the table is there and well formed, and that the CPU accounting sees the
workers: the busy row costs about 2 ms more per request than the bare app.
Nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil

import pytest

from tests.conftest import require
from tests.support.bench import bench_module

BUSY_MS = 2


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    require(shutil.which("wrk") is not None, "wrk (Debian package wrk; make test installs it)")
    load = bench_module("load")
    filters = load.public_filters(load.demo_config())
    app = load.APP_SECTION.split(":", 1)[1]
    rows = [
        load.Row(load.BARE, [app]),
        load.Row(load.REQUEST_ID, ["request_id", app]),
        load.Row("busy", ["busy", app]),
        load.Row(load.FULL, filters + [app], expect={"tenant_id": load.TENANT, "tags": ["prod", "web"]}),
    ]
    busy = {"filter:busy": {"paste.filter_factory": "tests.support.busy_filter:filter_factory", "cpu_ms": str(BUSY_MS)}}
    out = tmp_path_factory.mktemp("load") / "load.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = load.main(["--quick", "--memory-requests", "400", "--json", str(out)], rows=rows, extra_sections=busy)
    return code, printed.getvalue(), json.loads(out.read_text(encoding="utf-8"))


def test_table_lists_every_row_with_numbers(quick_run):
    code, text, _report = quick_run
    assert code == 0, text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["row", "req/s"])
    body = lines[header + 2 : header + 6]
    names = [re.split(r"\s{2,}", line)[0] for line in body]
    assert names == ["bare app", "RequestId", "busy", "public pipeline"]
    for line in body:
        req_s, cpu, added, ratio = line.split()[-4:]
        assert float(req_s) > 0, line
        assert float(cpu) > 0, line
        if line.startswith("bare app"):
            assert (added, ratio) == ("-", "-")
        else:
            assert re.fullmatch(r"-?\d+\.\d", added), line
            assert re.fullmatch(r"-?\d+\.\d\d|nan", ratio), line


def test_goal_lines_say_pass_or_miss(quick_run):
    _code, text, report = quick_run
    # A quick run on a busy machine can measure no CPU added by RequestId:
    # then the line says the ratio was not measured (and MISS), never "nan".
    assert re.search(
        r"^goal: public pipeline's added CPU/request <= 2 x RequestId's: ([\d.]+ x|%s)  (PASS|MISS)$"
        % re.escape(bench_module("load").NOT_MEASURED),
        text,
        re.M,
    )
    assert "nan x" not in text
    assert re.search(r"^goal: worker RSS growth from request 4 to \d+ < 5 MB: .* (PASS|MISS)$", text, re.M)
    memory = report["memory"]
    assert memory["requests"] >= 400
    assert memory["rss_first_bytes"] > 1024 * 1024
    assert memory["rss_last_bytes"] > 1024 * 1024


def test_cpu_accounting_counts_the_workers(quick_run):
    # The busy filter runs in the workers only: if their CPU time were not
    # counted, its row would cost no more than the bare app's.
    _code, _text, report = quick_run
    rows = {row["name"]: row for row in report["rows"]}
    assert rows["bare app"]["cpu_us_per_request"] > 0
    assert rows["busy"]["added_cpu_us"] >= 0.75 * BUSY_MS * 1000, rows["busy"]
    assert rows["busy"]["requests"] > 0


def test_a_run_where_request_id_added_no_cpu_says_so_and_misses():
    """The ratio has no meaning then: the goal line names why, and cannot pass."""
    load = bench_module("load")
    rows = [
        {"name": load.REQUEST_ID, "ratio_to_request_id": float("nan")},
        {"name": load.FULL, "ratio_to_request_id": float("nan")},
    ]
    (line,) = load.report_lines(rows, None)
    assert line.endswith("RequestId's: %s  MISS" % load.NOT_MEASURED)
    rows[1]["ratio_to_request_id"] = 1.5
    (line,) = load.report_lines(rows, None)
    assert line.endswith("RequestId's: 1.50 x  PASS")
