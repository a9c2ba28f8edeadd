"""``admin_cull``: keep admin calls off a public endpoint.

The tenants spec says admin calls SHOULD NOT be reachable from public
endpoints, and suggests "reverse proxy filters employed to cull admin calls
before they reach the service implementation".  This is that filter: put it
in the public pipeline of a service served on a public and an admin
endpoint, and the admin calls never reach the app through the public one.

What it culls
    With no options, the spec's admin calls (:data:`~tenancy_mw.cull.rules.DEFAULT_RULES`):

    - ``PUT`` and ``DELETE`` on ``/{version}/{tenantId}`` (create, delete a
      tenant), below any mount: also on any path ending in a version-like
      segment and one more (failing closed, see ``doc/admin_cull.rst``);
    - every method on any ``.../action/move`` or ``.../action/restore`` URL;
    - every call under ``/{version}/{tenantId}/action/``, and that action
      namespace wherever a lenient router (pecan's ``RestController``, a
      server resolving ``..``) could reach it from: ``/{version}/action/``,
      anything below an ``action`` segment at any depth, and ``GET`` of
      ``.../action`` at any depth.

    ``GET``/``HEAD`` of a tenant stay public unless ``cull_tenant_reads``
    is on.  Operators add their own rules with ``rules``, one per line,
    in the syntax of :mod:`tenancy_mw.cull.rules`; a bad rule fails when the
    pipeline loads, naming it.

How it decides
    On the canonical form of the path (:mod:`tenancy_mw.core.paths`), the same
    one ``tenant_path`` uses, whether or not ``tenant_path`` runs before it.
    A path with no canonical form (``%2F``, ``%00``, ``%252F``, dot
    segments, invalid UTF-8, ...) is answered ``400`` and never reaches the
    app.  Rules match leniently (see :mod:`tenancy_mw.cull.rules`), so
    what a lenient router could take for an admin call is culled too.  The
    method is upper-cased and ``HEAD`` counts as ``GET``.  When the path
    matches a rule but the method does not, method overrides (the
    ``X-HTTP-Method-Override``, ``X-HTTP-Method`` and ``X-Method-Override``
    headers, a ``_method`` query parameter or form field, found in one
    linear pass by :mod:`tenancy_mw.cull.overrides`) are judged as the methods
    they name; a form body is read only then, at most
    :data:`FORM_BODY_LIMIT` bytes, once per request.  ``method_override =
    refuse`` answers ``400`` to overrides instead and never reads a body.
    When ``tenant_path`` strips the tenant segment, before or after this
    filter, the stripped path the app routes on is judged too; when
    ``Accept`` or ``Content-Type`` name a ``version=`` (which a
    version-routing urlmap such as nova's routes on), the path is judged as
    mounted under each such version too.  A request target over
    ``max_target_length`` bytes is answered ``414``.

The answer
    ``404`` by default, so the admin API cannot be discovered from the
    public endpoint, or ``403`` (``cull_status``), in the shared JSON error
    shape.  Each culled call is logged at INFO with method, canonical path,
    client address and request id.

Single-endpoint deployments: ``admin_roles``
    With keystonemiddleware earlier in the pipeline, a call passes when it
    confirmed the token (``X-Identity-Status: Confirmed``) and ``X-Roles``
    holds one of ``admin_roles``.  Those headers are trusted only in that
    case, because keystonemiddleware strips client copies of them; without
    it in front, leave ``admin_roles`` empty (the default).

Usage in ``api-paste.ini``::

    [pipeline:public]
    pipeline = request_id admin_cull tenant_path service

    [filter:admin_cull]
    use = egg:tenancy_mw#admin_cull
    rules =
        PUT,DELETE /os-services/**
        *          /os-hypervisors/**

From Python::

    >>> from tenancy_mw.cull.filter import AdminCull
    >>> def service_app(environ, start_response):
    ...     start_response("204 No Content", [])
    ...     return []
    >>> public_app = AdminCull(service_app, {"cull_status": "403"})
    >>> from webtest import TestApp
    >>> TestApp(public_app).put("/v2.1/acme", status=403).json["errors"][0]["code"]
    'tenancy.admin-call'
    >>> TestApp(public_app).get("/v2.1/acme/servers").status
    '204 No Content'
"""

from __future__ import annotations

import functools
import io
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.core.errors import REQUEST_ID_KEY
from tenancy_mw.core.paths import (
    REJUDGE_KEY,
    REWRITTEN_KEY,
    PathRefused,
    canonical_path,
    check_target_length,
    compile_version_pattern,
    max_target_length_opt,
    routed_path,
    shorten,
    version_pattern_opt,
)
from tenancy_mw.cull.overrides import (
    TooManyCandidates,
    media_type_versions,
    multipart_method_overrides,
    override_names,
    urlencoded_method_overrides,
)
from tenancy_mw.cull.rules import (
    DEFAULT_RULES,
    TENANT_READ_RULE,
    PathView,
    RuleError,
    parse_rules,
    prepare_folding,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["FORM_BODY_LIMIT", "OVERRIDE_HEADERS", "AdminCull", "list_opts", "set_defaults"]

LOG = logging.getLogger(__name__)

#: environ keys of the method-override headers that are judged (or refused).
OVERRIDE_HEADERS = ("HTTP_X_HTTP_METHOD_OVERRIDE", "HTTP_X_HTTP_METHOD", "HTTP_X_METHOD_OVERRIDE")

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

#: The largest form body read to look for a ``_method`` field, in bytes; a
#: larger one on an admin path is refused (413) rather than passed unjudged.
FORM_BODY_LIMIT = 1024 * 1024

OPTS = [
    cfg.MultiStrOpt(
        "rules",
        default=[],
        help="Extra admin calls to cull, one rule per line: METHODS /pattern, e.g. 'PUT,DELETE /os-services/**' "
        "or '* /os-hypervisors/**'. Methods: comma-separated, or *. Pattern tokens: literal, * (one segment), "
        "** (any number), {version}, {tenant}. See the admin_cull documentation for where patterns are tried.",
    ),
    cfg.BoolOpt(
        "default_rules",
        default=True,
        help="Cull the tenants spec's admin calls: PUT/DELETE /{version}/{tenant}, any .../action/move, "
        "and everything under /{version}/{tenant}/action/.",
    ),
    cfg.BoolOpt(
        "cull_tenant_reads",
        default=False,
        help="Also cull GET and HEAD of /{version}/{tenant} (the spec lets the operator choose).",
    ),
    cfg.IntOpt(
        "cull_status",
        default=404,
        choices=[(404, "hide the admin API"), (403, "say it is forbidden here")],
        help="Status of the answer to a culled call.",
    ),
    cfg.StrOpt(
        "method_override",
        default="cull",
        choices=[
            ("cull", "judge the request under every method it names, and cull it if any is an admin call"),
            ("refuse", "answer 400 to any request that carries a method override"),
        ],
        help="What to do with X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override and _method.",
    ),
    version_pattern_opt("; applied ignoring case)."),
    cfg.IntOpt(
        "max_segments",
        default=100,
        min=8,
        help="Paths with more segments than this are refused (400) before any rule is tried: an API path has "
        "a few dozen at most, and a cap keeps matching cheap whatever the client sends.",
    ),
    max_target_length_opt(),
    cfg.ListOpt(
        "admin_roles",
        default=[],
        help="Single-endpoint mode: a call passes when keystonemiddleware confirmed the token and X-Roles holds "
        "one of these roles. Leave empty unless keystonemiddleware runs earlier in the pipeline.",
    ),
]


class AdminCull(TenancyMiddleware):
    """WSGI filter that answers admin calls itself instead of passing them on.

    See the module documentation for the rules and options.

    Example::

        >>> from webtest import TestApp
        >>> def app(environ, start_response):
        ...     start_response("200 OK", [("Content-Type", "text/plain")])
        ...     return [b"reached the service"]
        >>> public = TestApp(AdminCull(app, {}))
        >>> public.delete("/v2.1/acme", expect_errors=True).status_int
        404
        >>> public.get("/v2.1/acme/servers").text
        'reached the service'
    """

    opt_group = "admin_cull"
    opts = OPTS

    def configure(self, options) -> None:
        """Compile the version pattern and parse the rules; a bad one raises ConfigError naming it."""
        try:
            self.version_re = compile_version_pattern(options.version_pattern, ignore_case=True)
        except ValueError as exc:
            raise self.config_error("version_pattern", options.version_pattern, str(exc)) from None
        sources = list(DEFAULT_RULES) if options.default_rules else []
        if options.cull_tenant_reads:
            sources.append(TENANT_READ_RULE)
        try:
            operator_rules = parse_rules(options.rules)
        except RuleError as exc:
            raise self.config_error("rules", options.rules, str(exc)) from None
        self.rules = parse_rules(sources) + operator_rules
        prepare_folding()
        # Rules grouped by their first literal: one substring test skips a
        # whole group (most paths hold no "action" at all).
        self._unconditional = [rule for rule in self.rules if not rule.literals]
        groups: dict[str, list] = {}
        for rule in self.rules:
            if rule.literals:
                groups.setdefault(rule.literals[0], []).append(rule)
        self._literal_groups = list(groups.items())
        # The same, for each usual method, holding only the rules naming it:
        # a request tries no rule of another method unless it could carry
        # a method override.
        self._rules_by_method = {method: self._rules_for(judged) for method, judged in _JUDGED.items()}
        self.cull_status = options.cull_status
        self.max_segments = options.max_segments
        self.max_target_length = options.max_target_length
        self.refuse_overrides = options.method_override == "refuse"
        self.admin_roles = frozenset(r.strip().lower() for r in options.admin_roles if r.strip())

    def _rules_for(self, judged: frozenset[str]) -> tuple[list, list]:
        """The rules naming a method of *judged*: those without a literal, and those by first literal."""
        groups = [(literal, [r for r in group if r.applies_to(judged)]) for literal, group in self._literal_groups]
        return [r for r in self._unconditional if r.applies_to(judged)], [(lit, g) for lit, g in groups if g]

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        # judge(), inlined: one call less on every request.
        try:
            refusal = self._judge(environ)
        except (TypeError, AttributeError, UnicodeError):
            refusal = self._bad_environ(environ)
        if refusal is not None:
            return refusal(start_response)
        # Judge again if a filter after this one rewrites the path (tenant_path's strip_tenant).
        environ.setdefault(REJUDGE_KEY, []).append(self.judge)
        return self.application(environ, start_response)

    def judge(self, environ: dict) -> Callable[[Callable], list[bytes]] | None:
        """``None`` if the request may reach the app, else a callable that answers it.

        An environ value that is not the string PEP 3333 asks for (``None``,
        bytes, a number in ``REQUEST_METHOD``, ``CONTENT_TYPE``, a header,
        ...) is answered ``400``: never an exception, never passed unjudged.
        """
        try:
            return self._judge(environ)
        except (TypeError, AttributeError, UnicodeError):
            return self._bad_environ(environ)

    def _bad_environ(self, environ: dict) -> Callable:
        return self._answer(
            environ,
            400,
            "tenancy.bad-environ",
            "The request could not be read: a WSGI environ value is not a latin-1 string (PEP 3333).",
        )

    def _judge(self, environ: dict) -> Callable[[Callable], list[bytes]] | None:
        """``None`` if the request may reach the app, else a callable that answers it.

        The callable takes ``start_response`` and returns the WSGI body.
        Every view of the path is judged: the client's; after a rewrite by
        a tenancy filter, the one the app will route on; and each of those
        as mounted under a version a media type names (``Accept:
        application/json;version=2.1``), as a version-routing urlmap could
        route it.
        """
        try:
            raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
            if raw is None or len(raw) > self.max_target_length:
                check_target_length(environ, self.max_target_length)
            canonical = canonical_path(environ)
            views = [self._view(canonical)]
            if environ.get(REWRITTEN_KEY):
                views.append(self._view(routed_path(environ)))
            accept = environ.get("HTTP_ACCEPT", "")
            content_type = environ.get("CONTENT_TYPE", "")
            if "version" in accept.lower() or "version" in content_type.lower():
                views += [self._mounted_view(view, version) for version in media_type_versions(
                    accept, content_type) for view in list(views)]
        except PathRefused as exc:
            LOG.info("admin_cull refused path %r: %s", shorten(str(exc.value), 300), exc.detail)
            return functools.partial(self.refuse_path, environ, refused=exc)
        except TooManyCandidates as exc:
            return self._answer(environ, 400, "tenancy.too-many-versions", str(exc))
        for view in views:
            depth = len(view.segments) + (view.folded.count("\\") if "\\" in view.folded else 0)
            if depth > self.max_segments:
                detail = "The path has %d segments (backslashes counted); at most %d are accepted here." % (
                    depth,
                    self.max_segments,
                )
                return self._answer(environ, 400, "tenancy.path-too-deep", detail)
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if self.refuse_overrides:
            try:
                named = _header_overrides(environ) | _query_overrides(environ)
            except TooManyCandidates as exc:
                return self._answer(environ, 400, "tenancy.method-override-refused", str(exc))
            if named:
                return self._refuse_overrides(environ, named)
        judged = _JUDGED.get(method) or _judged_as(method)
        folded = views[0].folded if len(views) == 1 else "\n".join(view.folded for view in views)
        table = self._rules_by_method.get(method)
        unconditional, groups = table if table is not None else self._rules_for(judged)
        rules = unconditional
        for literal, group in groups:
            if literal in folded:
                rules = rules + group
        for rule in rules:
            for view in views:
                if rule.matches_path(view):
                    return self._cull_unless_admin(environ, method, canonical, rule)
        # The request may name another method: judge the path against the
        # rules for other methods, then what the overrides name.  Most
        # requests carry nothing that could name one (no override header,
        # no query or form that could spell _method): they stop here,
        # before any rule for another method is tried.
        if not _may_override(environ, method):
            return None
        others = [
            rule
            for rule in self._unconditional + [r for lit, group in self._literal_groups if lit in folded for r in group]
            if not rule.applies_to(judged) and any(rule.matches_path(view) for view in views)
        ]
        if not others:
            return None
        if self.refuse_overrides:
            # Header and query overrides were refused above.  A body a
            # framework would read a form from is not read in this mode: on
            # a path that is admin for another method it is refused unread.
            if _has_form_body(environ, method):
                return self._answer(
                    environ,
                    400,
                    "tenancy.method-override-refused",
                    "A form body is not accepted on this path: it could carry a _method override, and method"
                    " overrides are not accepted here.",
                )
            return None
        try:
            overrides = _header_overrides(environ) | _query_overrides(environ) | _form_overrides(environ, method)
        except TooManyCandidates as exc:
            return self._answer(environ, 400, "tenancy.unreadable-form", str(exc))
        except _UnreadableBody as exc:
            return self._answer(environ, exc.status, exc.code, exc.detail)
        for override in overrides:
            for rule in others:
                if rule.applies_to(_judged_as(override)):
                    return self._cull_unless_admin(environ, "%s (as %s)" % (method, override), canonical, rule)
        return None

    def _cull_unless_admin(self, environ: dict, method: str, canonical, rule) -> Callable | None:
        if self.admin_roles and self._is_confirmed_admin(environ):
            return None
        return self._cull(environ, method, canonical, rule)

    def _view(self, canonical) -> PathView:
        segments = canonical.segments
        prefix = canonical.prefix_length
        if "" in segments:
            prefix = sum(1 for s in segments[:prefix] if s)
            segments = canonical.collapsed
        return PathView(segments, self.version_re, prefix)

    def _mounted_view(self, view: PathView, version: str) -> PathView:
        """*view* as a urlmap in front of the app routes it under *version*: ``SCRIPT_NAME += /version``."""
        prefix = view.prefix_length
        segments = view.segments[:prefix] + (version,) + view.segments[prefix:]
        return PathView(segments, self.version_re, prefix + 1)

    def _answer(self, environ: dict, status: int, code: str, detail: str) -> Callable:
        def answer(start_response):
            return self.error(environ, start_response, status, code, detail)

        return answer

    def _refuse_overrides(self, environ: dict, named: set) -> Callable:
        return self._answer(
            environ,
            400,
            "tenancy.method-override-refused",
            "Method overrides are not accepted here (got %s)." % ", ".join(sorted(map(repr, named))),
        )

    def _is_confirmed_admin(self, environ: dict) -> bool:
        if environ.get("HTTP_X_IDENTITY_STATUS") != "Confirmed":
            return False
        roles = environ.get("HTTP_X_ROLES", "")
        return any(role.strip().lower() in self.admin_roles for role in roles.split(","))

    def _cull(self, environ: dict, method: str, canonical, rule) -> Callable:
        LOG.info(
            "admin_cull culled %s %s from %s (request %s, rule %r)",
            method,
            shorten(str(canonical), 300),
            environ.get("REMOTE_ADDR", "-"),
            environ.get(REQUEST_ID_KEY, "-"),
            rule.source,
        )
        if self.cull_status == 404:
            return self._answer(environ, 404, "tenancy.not-found", "The resource could not be found.")
        return self._answer(
            environ,
            403,
            "tenancy.admin-call",
            "%s %s is an admin call, not available on this endpoint." % (method, shorten(str(canonical))),
        )


# The usual methods' answers of _judged_as, made once.
_JUDGED = {m: frozenset((m,)) for m in ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")}
_JUDGED["HEAD"] = frozenset(("HEAD", "GET"))


def _judged_as(method: str) -> frozenset[str]:
    """The methods a request with *method* is judged as: HEAD is a GET too."""
    judged = _JUDGED.get(method)
    if judged is None:
        judged = frozenset((method,))
    return judged


def _may_override(environ: dict, method: str) -> bool:
    """A cheap test: could this request carry a method override at all?"""
    if _override_values(environ):
        return True
    query = environ.get("QUERY_STRING", "")
    # webob decodes keys, so an escape may spell _method too.
    if query and ("%" in query or "method" in query.lower()):
        return True
    if _reads_form(environ, method):
        return _has_body(environ)
    return False


def _has_body(environ: dict) -> bool:
    return environ.get("CONTENT_LENGTH", "") not in ("", "0") or bool(environ.get("wsgi.input_terminated"))


def _has_form_body(environ: dict, method: str) -> bool:
    """Whether the request has a body a framework would read a form from."""
    return _reads_form(environ, method) and _has_body(environ)


def _reads_form(environ: dict, method: str) -> bool:
    """Whether webob would parse this request's body as a form: the same test as ``Request.POST``."""
    content_type = environ.get("CONTENT_TYPE")
    if content_type:
        content_type = content_type.split(";", 1)[0].strip().lower()
    if content_type:
        return content_type in _FORM_TYPES
    return method == "POST"


def _header_overrides(environ: dict) -> set[str]:
    return override_names(_override_values(environ))


def _override_values(environ: dict) -> list:
    """The values of the override headers, in every ``environ`` spelling a framework reads as them.

    A conforming server writes ``HTTP_X_HTTP_METHOD_OVERRIDE`` only, but
    Django's ``request.headers`` also reads ``HTTP_X-HTTP-METHOD-OVERRIDE``
    or ``HTTP_x_http_method_override`` as that header (as ``tenant_path``'s
    ``remove_header`` says for the tenant header).  One pass over the
    joined key names finds whether any other spelling is there.
    """
    try:
        names: str | None = "\n\n".join(environ).upper()
    except TypeError:  # a key that is not a string: look at each
        names = None
    # Every spelling of an override header holds METHOD once upper-cased:
    # when no key but REQUEST_METHOD does, there is none (the usual case,
    # found by one C-speed count).
    if names is not None and names.count("METHOD") == ("REQUEST_METHOD" in environ):
        return []
    values = [environ[key] for key in OVERRIDE_HEADERS if key in environ]
    odd = names is None
    if names is not None and names.count("METHOD") > len(values) + ("REQUEST_METHOD" in environ):
        # "\n\n" between names: two spellings side by side still count twice.
        spaced = "\n\n%s\n\n" % names.replace("-", "_")
        odd = any(spaced.count("\n%s\n" % key) > (key in environ) for key in OVERRIDE_HEADERS)
    if odd:
        values += [
            value
            for name, value in environ.items()
            if isinstance(name, str)
            and name not in OVERRIDE_HEADERS
            and name.upper().replace("-", "_") in OVERRIDE_HEADERS
        ]
    return values


def _query_overrides(environ: dict) -> set[str]:
    """``_method`` query parameters, found as webob finds them: ``&`` and ``;``
    separators, percent-decoded keys, any case; one linear pass
    (:func:`~tenancy_mw.cull.overrides.urlencoded_method_overrides`)."""
    query = environ.get("QUERY_STRING", "")
    if not query:
        return set()
    return urlencoded_method_overrides(query.encode("latin-1", "replace"), "query string")


class _UnreadableBody(ValueError):
    """A body that could not be read to look for ``_method``: refused, never passed on unjudged."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


#: environ key caching the ``_method`` fields found in the body, with the
#: ``wsgi.input`` they were found in: a second judge (after a strip, or a
#: second admin_cull) reuses them instead of reading the body again.
FORM_OVERRIDES_KEY = "tenancy.form_overrides"


def _form_overrides(environ: dict, method: str) -> set[str]:
    """``_method`` fields of a form body, for every request webob would read a form from.

    webob parses a form body for a POST with no or a form content type and
    for any other method with a form content type; so does this.  The body
    is read once, at most :data:`FORM_BODY_LIMIT` bytes, scanned in one
    linear pass (:mod:`tenancy_mw.cull.overrides`), and left for the app as a
    fresh stream; the finding is cached in the environ.
    """
    if not _reads_form(environ, method):
        return set()
    cached = environ.get(FORM_OVERRIDES_KEY)
    if cached is not None and cached[0] is environ.get("wsgi.input"):
        return set(cached[1])
    content_type = environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
    length = environ.get("CONTENT_LENGTH", "").strip()
    try:
        size = int(length) if length else None
    except ValueError:
        raise _UnreadableBody(400, "tenancy.unreadable-form", "Content-Length %r is not a number." % length) from None
    if size is None and not environ.get("wsgi.input_terminated"):
        return set()  # WSGI: no Content-Length and no terminated input means no body
    if size is not None and size > FORM_BODY_LIMIT:
        raise _UnreadableBody(
            413,
            "tenancy.form-too-large",
            "A form body of %d bytes is too large to check for a _method field here (at most %d)."
            % (size, FORM_BODY_LIMIT),
        )
    try:
        data = environ["wsgi.input"].read(size if size is not None else FORM_BODY_LIMIT + 1)
    except Exception as exc:  # noqa: BLE001 - a broken body (bad chunking, early close) is refused
        raise _UnreadableBody(400, "tenancy.unreadable-form", "The body could not be read: %s" % exc) from None
    if len(data) > FORM_BODY_LIMIT:
        raise _UnreadableBody(
            413, "tenancy.form-too-large", "The form body is too large to check for a _method field here."
        )
    if size is not None and len(data) < size:
        raise _UnreadableBody(
            400, "tenancy.unreadable-form", "The body ended after %d of %d bytes." % (len(data), size)
        )
    body = io.BytesIO(data)
    environ["wsgi.input"] = body
    environ["CONTENT_LENGTH"] = str(len(data))
    try:
        if content_type == "multipart/form-data":
            found = multipart_method_overrides(data, _boundary(environ.get("CONTENT_TYPE", "")))
        else:
            found = urlencoded_method_overrides(data)
    except TooManyCandidates as exc:
        raise _UnreadableBody(400, "tenancy.unreadable-form", str(exc)) from None
    except ValueError as exc:
        raise _UnreadableBody(400, "tenancy.unreadable-form", "The form body could not be read: %s" % exc) from None
    environ[FORM_OVERRIDES_KEY] = (body, frozenset(found))
    return found


# RFC 2046 boundary characters; a boundary outside them (quotes, backslashes)
# is read differently by different parsers, so it is refused, not guessed.
_BOUNDARY_CHARS = re.compile(r"[0-9A-Za-z'()+_,./:=? -]{0,69}[0-9A-Za-z'()+_,./:=?-]")


def _boundary(content_type: str) -> bytes | None:
    """The ``boundary`` parameter of a multipart content type, or ``None``; one linear pass.

    Raises :class:`ValueError` when the content type names ``boundary``
    more than once (parsers differ on which one wins) or its value is not
    made of RFC 2046 boundary characters.
    """
    lowered = content_type.lower()
    mentions = lowered.count("boundary")
    if not mentions:
        return None
    if mentions > 1:
        raise ValueError("the Content-Type names a multipart boundary more than once")
    rest = content_type[lowered.find("boundary") + len("boundary"):].lstrip()
    if not rest.startswith("="):
        return None
    value = rest[1:].split(";", 1)[0].strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not _BOUNDARY_CHARS.fullmatch(value):
        raise ValueError("the multipart boundary %r is not made of RFC 2046 boundary characters" % shorten(value))
    return value.encode("latin-1")


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of this filter's options: the ``tenancy_mw.cull.filter`` ``oslo.config.opts`` namespace."""
    return AdminCull.list_opts()


def set_defaults(**defaults: Any) -> None:
    """Change this filter's defaults for the process (see :meth:`.TenancyMiddleware.set_defaults`).

    Example::

        >>> set_defaults(error_format="nova")
        >>> AdminCull(None, {}).options.error_format
        'nova'
        >>> set_defaults(error_format="api-wg")
    """
    AdminCull.set_defaults(**defaults)
