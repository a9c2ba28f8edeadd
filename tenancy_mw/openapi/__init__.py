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
    """STAND-IN: *document* with each fragment's paths and components added; a copy.

    As the real one, a path and method or a component that two describe differently is a
    ``ValueError``.
    """
    merged = copy.deepcopy(document)
    for fragment in fragments:
        for section, entries in [("paths", fragment.get("paths", {}))] + [
            ("components/" + kind, named) for kind, named in fragment.get("components", {}).items()
        ]:
            if section == "paths":
                for path, item in entries.items():
                    _add(merged.setdefault("paths", {}).setdefault(path, {}), item, path)
            else:
                _add(merged.setdefault("components", {}).setdefault(section.split("/")[1], {}), entries, section)
    return merged


def _add(target: dict, entries: dict, where: str) -> None:
    for name, value in entries.items():
        if name in target and target[name] != value:
            raise ValueError("%s %s is described differently in two documents" % (where, name))
        target[name] = copy.deepcopy(value)
