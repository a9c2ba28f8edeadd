"""What ``tag_query`` adds: the four tag parameters of a collection's list, and its ``400``."""

from __future__ import annotations

from typing import Any

from tenancy_mw.openapi._build import Context, schema_ref, version_headers
from tenancy_mw.tags.model import PARAMETERS

__all__ = ["contribute", "operations", "parameters"]

# What each parameter selects, by not_tags_semantics.
_MEANINGS = {
    "guideline": {"tags": "all of", "tags-any": "any of", "not-tags": "none of", "not-tags-any": "not all of"},
    "nova": {"tags": "all of", "tags-any": "any of", "not-tags": "not all of", "not-tags-any": "none of"},
}


def operations(middleware: Any, depth: int, context: Context) -> list:
    """``tag_query`` answers no call of its own."""
    return []


def parameters(semantics: str, max_tags: int) -> list[dict]:
    """The four query parameters, read with *semantics* (``not_tags_semantics``), *max_tags* in all."""
    return [
        {
            "name": name,
            "in": "query",
            "required": False,
            "description": "Resources with %s these tags: a comma-separated list (the parameter repeated is "
            "merged). At most %d tags in the four parameters together." % (_MEANINGS[semantics][name], max_tags),
            "style": "form",
            "explode": False,
            "schema": {"type": "array", "minItems": 1, "maxItems": max_tags, "items": schema_ref("Tag")},
        }
        for name in PARAMETERS
    ]


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """Its parameters on the list calls after it, its ``400`` on every call of its methods."""
    methods = {method.lower() for method in middleware.methods}
    for operation in context.below(depth):
        if operation.method not in methods:
            continue
        if operation.kind == "list":
            for parameter in parameters(middleware.semantics, middleware.max_query_tags):
                operation.parameter(parameter)
        operation.refuse(
            400,
            "tenancy.invalid-tag-query.",
            "a tag parameter breaks a rule (an empty item, a tag breaking Tag's rules, more than max_query_tags tags).",
            middleware.error_format,
            version_headers(middleware),
        )
