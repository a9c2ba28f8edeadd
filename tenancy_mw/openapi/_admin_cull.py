"""What ``admin_cull`` adds to every operation it passes on: its refusals of requests it cannot judge.

Where it reads a form body (a path that is admin for another method than
the request's) and where it reads a JSON body for its action keys (a path
a keyed rule, ``POST /servers/*/action (os-migrateLive,evacuate)``,
matches) is found by asking the filter itself (its ``judge``), as
:func:`tenancy_mw.openapi.cull` does.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tenancy_mw.cull.actions import UNREADABLE_BODY_CODE
from tenancy_mw.cull.forms import FORM_BODY_LIMIT
from tenancy_mw.cull.overrides import MAX_CANDIDATES
from tenancy_mw.openapi._build import Context, refuse_path, version_headers, version_sample

__all__ = ["contribute", "operations"]


def operations(middleware: Any, depth: int, context: Context) -> list:
    """``admin_cull`` answers no call of its own: what it culls is not part of the endpoint's API."""
    return []


# The requests it cannot judge, by error code (tenancy_mw.cull.filter, tenancy_mw.cull.forms).
_UNJUDGED = {
    "tenancy.bad-environ": "a WSGI environ it cannot read",
    "tenancy.too-many-versions": "too many versions in Accept or Content-Type",
    "tenancy.path-too-deep": "more path segments than max_segments",
    "tenancy.method-override-refused": "a method override (method_override = refuse)",
}

# The values a path parameter is given to find out whether it can make a call's path an admin one: an ordinary
# value, one read as a version (then the segment after it reads as a tenant), the spec's admin segment.
_SAMPLES = ("x1", "v1", "action")

# The code of a form body it cannot read for _method (tenancy_mw.cull.forms).
_UNREADABLE_FORM = "tenancy.unreadable-form"
_FORM = "application/x-www-form-urlencoded"
# A body that is one JSON object (its key no action) and a url-encoded form naming _method more often than the
# filter checks: refused 400 only where the filter reads a form, also where it reads the action keys first.
_FORM_PROBE = json.dumps({"tenancy-openapi-probe": "_method " * (MAX_CANDIDATES + 1)}).encode()
# A body that is neither JSON nor a form: refused 400 only where the filter reads the JSON body's action keys.
_JSON_PROBE = b"not json"
# The megabyte of FORM_BODY_LIMIT, as the descriptions say it.
_LIMIT = "%d MiB" % (FORM_BODY_LIMIT >> 20)


@dataclass
class _Reading:
    """What the filter reads on the calls of one operation, and what it culls there by the body."""

    #: It reads a form body for a ``_method`` field on some call.
    form: bool = False
    #: ... on a call where no JSON body is read first (or for a confirmed admin, whose body is never read for keys).
    form_first: bool = False
    #: It reads a JSON body for its action keys on some call.
    json_body: bool = False
    #: The action keys (as the rules spell them) whose body it culls on some call.
    admin_keys: list[str] = field(default_factory=list)
    #: It reads the body of every call it passes on (none is passed unread; no ``admin_roles`` lets one by).
    every_body: bool = False


def contribute(middleware: Any, depth: int, context: Context) -> None:
    """Its ``400``/``414`` refusals on every operation after it; its cull where a parameter can make an admin path.

    A tenant, a resource or a tag named like an admin segment (``action``)
    makes a call of the service's API a path the cull rules refuse
    (``cull_status``).  Where it reads the body (a form for ``_method``,
    a JSON body for a keyed rule's action keys), what it answers a body it
    cannot read, and the cull of a body naming an admin action.
    """
    fmt, headers = middleware.error_format, version_headers(middleware)
    culled = (404, "tenancy.not-found") if middleware.cull_status == 404 else (403, "tenancy.admin-call")
    for operation in context.below(depth):
        refuse_path(operation, middleware, "admin_cull", True)
        parameter = any(name != "version" for name in re.findall(r"{(\w+)}", operation.path))
        # A path parameter can make a path deeper than max_segments (a tenant id of backslashes); so can a long
        # mount, with one more segment for a version an Accept header names.
        deep = parameter or operation.path.count("/") + 1 > middleware.max_segments
        for code, why in _UNJUDGED.items():
            if code == "tenancy.method-override-refused" and not middleware.refuse_overrides:
                continue
            if code == "tenancy.path-too-deep" and not deep:
                continue
            operation.refuse(400, code, why + " (admin_cull).", fmt, headers)
        reading = _reading(middleware, operation)
        _refuse_forms(operation, reading, fmt, headers)
        _refuse_bodies(operation, reading, culled, fmt, headers, middleware.max_action_body_size)
        if parameter:
            operation.refuse(
                *culled,
                "a path parameter that makes the call one of the cull rules' admin paths (such as a tenant, a "
                "resource or a tag named action) (admin_cull, cull_status).",
                fmt,
                headers,
            )


def _refuse_forms(operation: Any, reading: _Reading, fmt: str, headers: dict) -> None:
    """Its answers to a form body it reads for a ``_method`` field (none under ``method_override = refuse``)."""
    if reading.form_first:
        operation.refuse(
            413,
            "tenancy.form-too-large",
            "a form body over %s (FORM_BODY_LIMIT) where a path parameter (or the path itself, such as "
            "/{version}/servers, a tenant call to a router) makes the path an admin one for another method, "
            "which a _method field could name (admin_cull)." % _LIMIT,
            fmt,
            headers,
        )
    if reading.form:
        operation.refuse(
            400,
            _UNREADABLE_FORM,
            "there, a form body it cannot read for a _method field (cut short, malformed), or method "
            "overrides naming too many methods (admin_cull).",
            fmt,
            headers,
        )


def _refuse_bodies(operation: Any, reading: _Reading, culled: tuple, fmt: str, headers: dict, limit: int) -> None:
    """Its answers where a keyed rule has it read the JSON body's action keys: bodies it cannot read, admin actions."""
    if not reading.json_body:
        return
    if reading.every_body:
        # No filter after it answers 411 there: it reads every body first (411 when it cannot) and hands on its
        # Content-Length.
        operation.responses.pop("411", None)
    where = "where a cull rule names action keys (a body is read for its top-level keys)"
    operation.refuse(
        400,
        UNREADABLE_BODY_CODE,
        "%s, a body that is not one JSON object (invalid JSON, an array or a scalar, nested deeper than 100 "
        "levels, more than 4096 arrays and objects), a bad Content-Length, or a body that ends before its "
        "Content-Length (admin_cull)." % where,
        fmt,
        headers,
    )
    operation.refuse(
        411,
        UNREADABLE_BODY_CODE,
        "%s, a Transfer-Encoding without Content-Length on a server that does not end the body (admin_cull)." % where,
        fmt,
        headers,
    )
    operation.refuse(
        413,
        "tenancy.body-too-large",
        "%s, a body over %d bytes (max_action_body_size), too large to read for its action (admin_cull)."
        % (where, limit),
        fmt,
        headers,
    )
    if reading.admin_keys:
        operation.refuse(
            *culled,
            "a JSON body with an admin action as a top-level key (%s; compared case-folded, duplicate keys "
            "included): the cull rules' action keys (admin_cull, cull_status)." % ", ".join(reading.admin_keys),
            fmt,
            headers,
        )


def _reading(culler: Any, operation: Any) -> _Reading:
    """What *culler* reads of a body on the calls of *operation*, asked of its own ``judge``.

    Each call is made from the template with every parameter one of
    :data:`_SAMPLES`, and judged with bodies only a reading refuses
    ``400``: a JSON object that is a form naming ``_method`` too often
    (refused where it reads a form, never under ``method_override =
    refuse``), and a body that is not JSON (refused where it reads the
    action keys, also as a method an override names); then, there, with
    ``{key: {}}`` for each action key of its rules.
    """
    reading = _Reading()
    method, keys = operation.method.upper(), _action_keys(culler)
    every_body = bool(keys) and not culler.admin_roles
    for path in _calls(culler, operation):
        probe = _answer(culler, _environ(method, path, "text/plain", _JSON_PROBE)) if keys else None
        direct = _refused(probe, UNREADABLE_BODY_CODE)
        every_body = every_body and probe is not None  # read here, or refused on the path alone
        if _reads_form(culler, method, path):
            reading.form = True
            # A keyed path's JSON body is read (under the same bound) before a form: 413 is the JSON reading's.
            reading.form_first = reading.form_first or not direct or bool(culler.admin_roles)
        for override in _keyed_overrides(culler, method, path, direct, keys):
            reading.json_body = True
            for key in keys:
                body = json.dumps({key: {}}).encode()
                if key not in reading.admin_keys and _culls(culler, method, path, body, override):
                    reading.admin_keys.append(key)
    reading.every_body = every_body and reading.json_body
    return reading


def _reads_form(culler: Any, method: str, path: str) -> bool:
    """Whether *culler* reads a form body for a ``_method`` field on a call of *method* on *path*.

    It does where the path is an admin call for a method other than the
    request's (then a ``_method`` could name it), which its own rules
    decide; never under ``method_override = refuse``.
    """
    if culler.refuse_overrides:
        return False
    return _refused(_answer(culler, _environ(method, path, _FORM, _FORM_PROBE)), _UNREADABLE_FORM)


def _keyed_overrides(culler: Any, method: str, path: str, direct: bool, keys: list[str]) -> list[str | None]:
    """How a call of *method* on *path* has its JSON body read for action keys: as itself (``None``, when
    *direct*), and as each method of a keyed rule that an override header names."""
    found: list[str | None] = [None] if direct else []
    if keys and not culler.refuse_overrides:
        for other in sorted(_keyed_methods(culler) - {method}):
            answer = _answer(culler, _environ(method, path, "text/plain", _JSON_PROBE, other))
            if _refused(answer, UNREADABLE_BODY_CODE):
                found.append(other)
    return found


def _action_keys(culler: Any) -> list[str]:
    """The action keys of *culler*'s rules as they are written (``os-migrateLive``), each once."""
    keys: list[str] = []
    for rule in culler.rules:
        if rule.action_keys is None:
            continue
        for key in rule.source[rule.source.rindex("(") + 1 : -1].split(","):
            if key.strip() not in keys:
                keys.append(key.strip())
    return keys


def _keyed_methods(culler: Any) -> set[str]:
    """The methods *culler*'s keyed rules name (a rule for every method is tried with the call's own)."""
    return {m for rule in culler.rules if rule.action_keys is not None and rule.methods for m in rule.methods}


def _calls(culler: Any, operation: Any) -> Iterator[str]:
    """The paths of *operation*'s template with each parameter one of :data:`_SAMPLES` (``{version}`` a version)."""
    names = re.findall(r"{(\w+)}", operation.path)
    version = version_sample(culler)
    samples = tuple(version if sample == "v1" else sample for sample in _SAMPLES)
    values = [(version,) if name == "version" else samples for name in names]
    pieces = re.split(r"{\w+}", operation.path)
    for chosen in itertools.product(*values):
        yield pieces[0] + "".join(value + piece for value, piece in zip(chosen, pieces[1:], strict=True))


def _environ(method: str, path: str, content_type: str, body: bytes, override: str | None = None) -> dict:
    """A request's environ: *body* of *content_type*, and an ``X-HTTP-Method-Override`` naming *override*."""
    environ = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
    }
    if override is not None:
        environ["HTTP_X_HTTP_METHOD_OVERRIDE"] = override
    return environ


def _refused(answer: tuple[int, str | None] | None, code: str) -> bool:
    """Whether *answer* (of :func:`_answer`) is a ``400`` with *code* (in the ``nova`` shape, which names none: any)."""
    return answer is not None and answer[0] == 400 and answer[1] in (code, None)


def _culls(culler: Any, method: str, path: str, body: bytes, override: str | None) -> bool:
    """Whether *culler* culls the call with the JSON *body* (answers ``cull_status``)."""
    answer = _answer(culler, _environ(method, path, "application/json", body, override))
    return answer is not None and answer[0] == culler.cull_status


def _answer(culler: Any, environ: dict) -> tuple[int, str | None] | None:
    """The status and error code of *culler*'s answer to *environ* (``None``: passed on; no code in nova's shape)."""
    answer = culler.judge(environ)
    if answer is None:
        return None
    statuses: list[str] = []
    body = b"".join(answer(lambda status, headers, exc_info=None: statuses.append(status)))
    try:
        errors = json.loads(body).get("errors")
    except ValueError:
        errors = None
    code = errors[0].get("code") if isinstance(errors, list) and errors and isinstance(errors[0], dict) else None
    return int(statuses[0].split(" ", 1)[0]), code
