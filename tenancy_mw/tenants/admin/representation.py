"""The body of a tenant ``PUT``: a JSON object of at most ``max_body_bytes``, or an :class:`.Refusal` saying why not.

Not :func:`tenancy_mw.core.bodies.read_json_body`: the tenants spec's
answers differ from it (an empty body is ``{}``, not an error; a body the
JSON reader would take may still be refused here: a repeated key, ``NaN``,
a number JSON cannot carry back; and every error has its own
``tenancy.representation-*`` or ``tenancy.*-body`` code).
"""

from __future__ import annotations

import json
import re

from tenancy_mw.core import bodies
from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.paths import shorten
from tenancy_mw.tenants.registry import canonical_document_json

__all__ = ["read_body", "read_representation"]

_JSON_TYPES = re.compile(r"\s*application/(?:[\w.+-]+\+)?json\s*(?:;.*)?", re.IGNORECASE)


def read_representation(environ: dict, max_body: int) -> dict:
    """The PUT body as a JSON object (``{}`` when empty), or an :class:`.Refusal` naming what is wrong."""
    content_type = environ.get("CONTENT_TYPE", "")
    if content_type and not _JSON_TYPES.fullmatch(content_type):
        raise Refusal(
            415,
            "tenancy.representation-not-json",
            "Content-Type %r is not JSON; send the tenant representation as application/json." % shorten(content_type),
        )
    raw = read_body(environ, max_body)
    if not raw.strip():
        return {}
    document = _parse(raw)
    if not isinstance(document, dict):
        raise Refusal(
            400,
            "tenancy.representation-not-an-object",
            "The tenant representation must be a JSON object ({...}); got %s %s."
            % (type(document).__name__, shorten(json.dumps(document))),
        )
    _check_canonical(document)
    return document


def _parse(raw: bytes) -> object:
    try:
        text = raw.decode("utf-8")
        return json.loads(text, object_pairs_hook=_unique_object, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        # ValueError: bad JSON, bytes that are not UTF-8, a repeated key, NaN.
        raise Refusal(
            400,
            "tenancy.representation-not-json",
            "The tenant representation %r is not valid JSON: %s."
            % (shorten(raw.decode("utf-8", "replace")), shorten(str(exc) or type(exc).__name__)),
        ) from None


def _check_canonical(document: dict) -> None:
    """Refuse what the registry could not store as canonical JSON."""
    try:
        canonical_document_json(document)
    except RecursionError:
        detail = "The tenant representation is nested too deeply."
        raise Refusal(400, "tenancy.representation-not-json", detail) from None
    except ValueError:
        # json.loads reads 1e999 as a float infinity, which JSON cannot carry back.
        detail = "The tenant representation holds a number too large for JSON (such as 1e999)."
        raise Refusal(400, "tenancy.representation-not-json", detail) from None


def read_body(environ: dict, limit: int) -> bytes:
    """The request body, at most *limit* bytes, by the one body reader (:func:`tenancy_mw.core.bodies.read_body`).

    Its refusals keep tenant_admin's codes: ``tenancy.representation-too-large``
    (413) and ``tenancy.`` followed by the reader's rule for the others.
    """
    try:
        return bodies.read_body(environ, limit)
    except bodies.BodyError as exc:
        code = "tenancy.representation-too-large" if exc.status == 413 else "tenancy." + exc.rule
        raise Refusal(exc.status, code, exc.detail) from None


def reject_constant(name: str) -> None:
    """A ``parse_constant`` for :func:`json.loads`: ``NaN`` and ``Infinity`` are not JSON."""
    raise ValueError("%s is not JSON" % name)


def _unique_object(pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        duplicate = next(key for key in keys if keys.count(key) > 1)
        raise ValueError("key %r appears more than once" % duplicate)
    return dict(pairs)
