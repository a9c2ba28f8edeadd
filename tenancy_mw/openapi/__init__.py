"""STAND-IN for the library's OpenAPI package (helper ``oa`` writes the real one).

Only the three names the demo's ``demo_compute.openapi`` uses, so the demo's
document and its fuzzer can be built before the real package lands: the
lead replaces this whole file with ``oa``'s ``tenancy_mw/openapi/``.  Here
:func:`describe_pipeline` describes nothing (empty ``paths`` and
``components``).
"""

from __future__ import annotations

import copy

__all__ = ["OPENAPI_VERSION", "describe_pipeline", "merge"]

#: The OpenAPI version of every document this package makes.
OPENAPI_VERSION = "3.1.0"


def describe_pipeline(app, *, tag_collections=(), prefix: str = "") -> dict:
    """STAND-IN: an empty fragment (the real one describes the tenancy_mw filters in *app*'s chain)."""
    return {"openapi": OPENAPI_VERSION, "paths": {}, "components": {}}


def merge(document: dict, *fragments: dict) -> dict:
    """STAND-IN: *document* with each fragment's paths (per method) and components added; a copy."""
    merged = copy.deepcopy(document)
    for fragment in fragments:
        for path, item in fragment.get("paths", {}).items():
            merged.setdefault("paths", {}).setdefault(path, {}).update(copy.deepcopy(item))
        for kind, entries in fragment.get("components", {}).items():
            merged.setdefault("components", {}).setdefault(kind, {}).update(copy.deepcopy(entries))
    return merged
