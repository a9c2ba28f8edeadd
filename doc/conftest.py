"""Fixtures of the documentation's doctests (``--doctest-glob=*.rst``).

:doc:`demo-walkthrough` talks to a running demo: its doctest gets both of the
demo's pipelines under gunicorn on free ports, their URLs in
``TENANCY_DEMO_PUBLIC_URL`` and ``TENANCY_DEMO_ADMIN_URL`` (what the page
reads, ``make demo``'s ports by default).
"""

from __future__ import annotations

import os
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

WALKTHROUGH = "demo-walkthrough.rst"


def pytest_collection_modifyitems(items):
    """openstacksdk warns about its own deprecated internals on every call: not the page's concern."""
    for item in items:
        if item.path.name == WALKTHROUGH:
            item.add_marker(pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning"))


@pytest.fixture(autouse=True)
def _demo_for_the_walkthrough(request, tmp_path, monkeypatch):
    if request.node.path.name != WALKTHROUGH:
        yield
        return
    from tests.support.demo import serve_demo

    with serve_demo(tmp_path) as servers:
        monkeypatch.setenv("TENANCY_DEMO_PUBLIC_URL", servers["public"].url)
        monkeypatch.setenv("TENANCY_DEMO_ADMIN_URL", servers["admin"].url)
        yield
