"""Which form of ``tags-any`` a compiled PostgreSQL tag condition holds, for the tag tests.

One reading for the bench and the tests: ``bench/tags.py``'s ``form_name``,
with the tests' name for the semi-join.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path

BENCH_TAGS = Path(__file__).resolve().parents[2] / "bench" / "tags.py"


@cache
def _form_name():
    spec = importlib.util.spec_from_file_location("tenancy_bench_tags", BENCH_TAGS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.form_name


def form_of(sql_text: str) -> str:
    """per-row, driven, grouped, semi-join or per-tag, read off *sql_text* (``bench/tags.py``'s ``form_name``).

    Example::

        >>> form_of("x IN (SELECT t.resource_id FROM t WHERE t.tag IN (1) GROUP BY t.resource_id)")
        'grouped'
    """
    form = _form_name()(sql_text)
    return "semi-join" if form == "semi" else form
