"""The least configuration each filter is built with in the generic tests.

Most filters build from no options at all; one with required options (a
store, the cells to ask) lists the smallest valid set here, touching no
server.  tests/unit/core/test_options.py builds every filter of
``tenancy_mw.opts.FILTERS`` with these.
"""

from __future__ import annotations

#: Filter name -> paste-style options it needs at the least.
MINIMAL_OPTIONS: dict[str, dict[str, str]] = {
    # The registry is opened when the filter loads; an in-memory one needs no tables for that.
    "tenant_admin": {"connection": "sqlite://"},
    "id_resolver": {
        "cells": "cell1=sqlite://",
        "resources": "/os-services/{id} services id uuid",
        "uuid_microversion": "compute 2.53",
        "max_microversion": "2.90",
    },
}


def minimal_options(name: str, **more: str) -> dict[str, str]:
    """The least options of filter *name*, with *more* on top."""
    return {**MINIMAL_OPTIONS.get(name, {}), **more}
