"""A filter that spends a fixed CPU time on every request, for the load bench's own test.

``tests/project/test_bench_load.py`` serves it under gunicorn: a row with it must
cost about that much more server CPU per request than the bare app, which
proves the bench counts its workers' CPU time (not only the master's).
"""

from __future__ import annotations

import time


def filter_factory(global_conf: dict, cpu_ms: str = "2", **local_conf: str):
    """``paste.filter_factory``: burn *cpu_ms* milliseconds of this process's CPU per request."""
    budget = float(cpu_ms) / 1000

    def wrap(app):
        def busy(environ, start_response):
            # process_time counts CPU, not wall time: a loaded machine does
            # not shorten the burn.
            end = time.process_time() + budget
            while time.process_time() < end:
                pass
            return app(environ, start_response)

        return busy

    return wrap
