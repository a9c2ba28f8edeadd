"""Which form of ``tags-any`` a compiled PostgreSQL tag condition holds, for the tag tests.

One reading for the bench and the tests: ``bench/tags.py``'s ``form_name``,
with the tests' name for the semi-join.
"""

from __future__ import annotations

from tests.support.bench import bench_module


def form_of(sql_text: str) -> str:
    """The form of *sql_text* (``form_name``): matched, merged, sets, per-row, driven, grouped, semi-join or per-tag.

    Example::

        >>> form_of("x IN (SELECT t.resource_id FROM t WHERE t.tag IN (1) GROUP BY t.resource_id)")
        'grouped'
    """
    form = bench_module("tags").form_name(sql_text)
    return "semi-join" if form == "semi" else form
