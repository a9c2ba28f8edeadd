"""id_resolver's part of ``make bench``: its pass-through rows, and the cells latency table.

Rows (in ``run.py``'s table, against the bare app and ``RequestId``)
    ``id_resolver pass-through``: a request no resource route matches, the
    path nearly every request of a service takes; ``id_resolver except
    word``: ``/os-hypervisors/detail``, which matches a route but names one
    of its ``except=`` words.  Neither touches a database.

Cells latency (a table of its own)
    Ten SQLite cells, each slowed by 20 ms per query (a ``sleep`` in the
    engine's ``before_cursor_execute`` hook, which lets other threads run,
    as waiting on a network does).  Resolving one integer id (found in one
    cell, so every cell must answer) is timed three ways in the same run:
    one cell alone, the ten cells asked one after another (what the spec
    describes and nova's single-id lookups do), and the ``id_resolver``
    filter asking them concurrently (a whole WSGI request).  Goal: the
    concurrent resolve within 1.5 times one cell's latency.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

from tenancy_mw.cells.filter import IdResolver

CELLS = 10
CELL_LATENCY_S = 0.020
#: The goal: concurrent resolve <= this many times one cell's latency.
GOAL_RATIO = 1.5

RESOURCES = "/os-services/{id} services id uuid\n/os-hypervisors/{id} compute_nodes id uuid except=detail"
TENANT = "8f14e45fceea167a5a36dedd4bea2543"


def _filter(app: Callable, cells: str = "c1=sqlite://") -> IdResolver:
    return IdResolver(
        app,
        {
            "cells": cells,
            "resources": RESOURCES,
            "uuid_microversion": "compute 2.53",
            "max_microversion": "2.90",
            "legacy_version_header": "X-OpenStack-Nova-API-Version",
        },
    )


def cases(case_class: type, target: Callable, goal: float) -> list:
    """The rows of id_resolver in run.py's table (built with run.py's ``Case`` and ``target``)."""

    def untouched(seen: dict) -> bool:
        return "tenancy.cell" not in seen

    return [
        case_class("id_resolver pass-through", "id_resolver", _filter,
                   target("/v2.1/%s/servers/detail?limit=20" % TENANT), goal=goal, reaches_app=untouched),
        case_class("id_resolver except word", "id_resolver", _filter,
                   target("/v2.1/os-hypervisors/detail"), goal=goal, reaches_app=untouched),
    ]


def _slow(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "before_cursor_execute")
    def _wait(*_args):
        time.sleep(CELL_LATENCY_S)


def _make_cells(folder: Path) -> dict[str, str]:
    cells = {}
    for number in range(1, CELLS + 1):
        url = "sqlite:///%s" % (folder / ("cell%d.sqlite" % number))
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE services (id INTEGER PRIMARY KEY, uuid VARCHAR(36))")
            conn.exec_driver_sql("CREATE INDEX services_uuid ON services (uuid)")
            # Id 1 in every cell; the id timed, 4242, only in the last.
            conn.exec_driver_sql("INSERT INTO services VALUES (1, NULL)")
            if number == CELLS:
                conn.exec_driver_sql("INSERT INTO services VALUES (4242, NULL)")
        engine.dispose()
        cells["cell%d" % number] = url
    return cells


def _timed(call: Callable[[], object], rounds: int) -> list[float]:
    call()  # warm-up: connections, threads
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def cells_latency(quick: bool = False) -> dict:
    """Time one resolve: one cell, ten cells one after another, ten cells at once through the filter."""
    rounds = 3 if quick else 15
    with tempfile.TemporaryDirectory() as folder:
        cells = _make_cells(Path(folder))
        statuses = []

        def app(environ, start_response):
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b"{}"]

        resolver = _filter(app, ", ".join("%s=%s" % item for item in cells.items()))
        try:
            engines = list(resolver.lookup.engines.values())
            for engine in engines:
                _slow(engine)
            statement = resolver.lookup.statements("services").by_id

            def one_cell():
                with engines[-1].connect() as conn:
                    assert conn.execute(statement, {"ident": 4242}).first() is not None

            def one_after_another():
                found = []
                for engine in engines:
                    with engine.connect() as conn:
                        found.extend(conn.execute(statement, {"ident": 4242}).all())
                assert len(found) == 1

            environ = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": "/v2.1/os-services/4242",
                       "SERVER_NAME": "bench", "SERVER_PORT": "80", "wsgi.url_scheme": "http"}

            def concurrent():
                body = b"".join(resolver(dict(environ), lambda status, headers, exc_info=None:
                                         statuses.append(status)))
                assert statuses[-1].startswith("200"), (statuses[-1], body)

            results = {
                "one cell": _timed(one_cell, rounds),
                "%d cells one after another" % CELLS: _timed(one_after_another, rounds),
                "%d cells at once (id_resolver)" % CELLS: _timed(concurrent, rounds),
            }
        finally:
            resolver.lookup.close()
    medians = {name: statistics.median(times) for name, times in results.items()}
    single = medians["one cell"]
    concurrent_median = medians["%d cells at once (id_resolver)" % CELLS]
    ratio = concurrent_median / single
    return {
        "cells": CELLS,
        "latency_per_query_ms": CELL_LATENCY_S * 1000,
        "rounds": rounds,
        "median_ms": {name: value * 1000 for name, value in medians.items()},
        "concurrent_over_one_cell": ratio,
        "sequential_over_concurrent": medians["%d cells one after another" % CELLS] / concurrent_median,
        "goal_ratio": GOAL_RATIO,
        "result": "PASS" if ratio <= GOAL_RATIO else "MISS",
    }


def cells_table(report: dict) -> str:
    """The cells latency results as text."""
    lines = [
        "id_resolver across cells: %d cells, each +%.0f ms per query; median of %d resolves"
        % (report["cells"], report["latency_per_query_ms"], report["rounds"]),
        "goal id_resolver:  concurrent resolve <= %.1f x one cell's latency" % report["goal_ratio"],
        "",
        "%-34s %10s" % ("how", "ms"),
        "-" * 45,
    ]
    for name, value in report["median_ms"].items():
        lines.append("%-34s %10.1f" % (name, value))
    lines.append(
        "concurrent / one cell = %.2f  %s   (one after another / concurrent = %.1fx)"
        % (report["concurrent_over_one_cell"], report["result"], report["sequential_over_concurrent"])
    )
    return "\n".join(lines)
