"""The bench's scripts (``bench/*.py``) as modules, for the tests that check them or read from them."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


@cache
def bench_module(name: str) -> ModuleType:
    """``bench/<name>.py``, loaded once as ``tenancy_bench_<name>``.

    Example::

        >>> bench_module("tags").form_name("x IN (SELECT t.resource_id FROM t GROUP BY t.resource_id)")
        'grouped'
    """
    spec = importlib.util.spec_from_file_location("tenancy_bench_%s" % name, BENCH / ("%s.py" % name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
