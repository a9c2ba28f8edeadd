"""``admin_cull``: keep admin calls off a public endpoint.

The tenants spec says admin calls SHOULD NOT be reachable from public
endpoints, and suggests "reverse proxy filters employed to cull admin calls
before they reach the service implementation".  This is that filter: put it
in the public pipeline of a service served on a public and an admin
endpoint, and the admin calls never reach the app through the public one.

What it culls
    With no options, the spec's admin calls (:data:`~tenancy_mw.cull_rules.DEFAULT_RULES`):

    - ``PUT`` and ``DELETE`` on ``/{version}/{tenantId}`` (create, delete a tenant);
    - every method on any ``.../action/move`` URL (moves of a resource or
      of a whole tenant, and the move actions ``GET`` acquires);
    - every call under ``/{version}/{tenantId}/action/`` (the tenant admin
      API's action namespace).

    ``GET``/``HEAD`` of a tenant stay public unless ``cull_tenant_reads``
    is on.  Operators add their own rules with ``rules``, one per line,
    in the syntax of :mod:`tenancy_mw.cull_rules`; a bad rule fails when the
    pipeline loads, naming it.

How it decides
    On the canonical form of the path (:mod:`tenancy_mw.paths`), the same
    one ``tenant_path`` uses, whether or not ``tenant_path`` runs before it.
    A path with no canonical form (``%2F``, ``%00``, ``%252F``, dot
    segments, invalid UTF-8, ...) is answered ``400`` and never reaches the
    app.  The method is upper-cased, ``HEAD`` counts as ``GET``, and a
    method override (the ``X-HTTP-Method-Override``, ``X-HTTP-Method`` and
    ``X-Method-Override`` headers, a ``_method`` query parameter or form
    field) is judged as the method it names: a request is culled if any of
    its methods is (``method_override = refuse`` answers ``400`` to any
    override instead).  Rules match leniently (see
    :mod:`tenancy_mw.cull_rules`): literal segments ignore case, path
    parameters and extensions, ``{version}`` is looked for at every
    segment, and a backslash is also read as a separator, so what a lenient
    router could take for an admin call is culled too.

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

    from tenancy_mw.admin_cull import AdminCull
    public_app = AdminCull(service_app, {"cull_status": "403"})
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from urllib.parse import parse_qsl

from oslo_config import cfg

from tenancy_mw.base import TenancyMiddleware
from tenancy_mw.cull_rules import DEFAULT_RULES, TENANT_READ_RULE, PathView, RuleError, parse_rules
from tenancy_mw.errors import REQUEST_ID_KEY
from tenancy_mw.paths import PathRefused, canonical_path, shorten
from tenancy_mw.tenant_ids import DEFAULT_VERSION_PATTERN

__all__ = ["OVERRIDE_HEADERS", "AdminCull"]

LOG = logging.getLogger(__name__)

#: environ keys of the method-override headers that are judged (or refused).
OVERRIDE_HEADERS = ("HTTP_X_HTTP_METHOD_OVERRIDE", "HTTP_X_HTTP_METHOD", "HTTP_X_METHOD_OVERRIDE")

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

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
    cfg.StrOpt(
        "version_pattern",
        default=DEFAULT_VERSION_PATTERN,
        help="Regular expression a whole version segment matches (Python re syntax; applied ignoring case).",
    ),
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
        try:
            self.version_re = re.compile(options.version_pattern, re.IGNORECASE)
        except re.error as exc:
            raise self.config_error("version_pattern", options.version_pattern, str(exc)) from None
        if self.version_re.fullmatch(""):
            raise self.config_error("version_pattern", options.version_pattern, "it matches an empty segment")
        sources = list(DEFAULT_RULES) if options.default_rules else []
        if options.cull_tenant_reads:
            sources.append(TENANT_READ_RULE)
        try:
            operator_rules = parse_rules(options.rules)
        except RuleError as exc:
            raise self.config_error("rules", options.rules, str(exc)) from None
        self.rules = parse_rules(sources) + operator_rules
        self.cull_status = options.cull_status
        self.refuse_overrides = options.method_override == "refuse"
        self.admin_roles = frozenset(r.strip().lower() for r in options.admin_roles if r.strip())

    def __call__(self, environ: dict, start_response: Callable):
        try:
            canonical = canonical_path(environ)
        except PathRefused as exc:
            LOG.info("admin_cull refused path %r: %s", exc.value, exc.detail)
            return self.error(environ, start_response, 400, "tenancy.bad-path." + exc.rule, exc.detail)
        method = environ.get("REQUEST_METHOD", "GET").upper()
        methods = {method}
        if method == "HEAD":
            methods.add("GET")
        try:
            overrides = self._overrides(environ, method)
        except _UnreadableForm as exc:
            return self.error(
                environ,
                start_response,
                400,
                "tenancy.unreadable-form",
                "The form body could not be read to look for a _method field: %s" % shorten(str(exc)),
            )
        if overrides:
            if self.refuse_overrides:
                return self.error(
                    environ,
                    start_response,
                    400,
                    "tenancy.method-override-refused",
                    "Method overrides are not accepted here (got %s)." % ", ".join(sorted(map(repr, overrides))),
                )
            methods.update(overrides)
            if "HEAD" in overrides:
                methods.add("GET")
        view = PathView(canonical.collapsed, self.version_re)
        for rule in self.rules:
            if rule.matches_view(view, methods):
                if self.admin_roles and self._is_confirmed_admin(environ):
                    break
                return self._cull(environ, start_response, method, canonical, rule)
        return self.application(environ, start_response)

    @staticmethod
    def _overrides(environ: dict, method: str) -> set[str]:
        found = set()
        for key in OVERRIDE_HEADERS:
            value = environ.get(key)
            if value is not None:
                named = {v.strip().upper() for v in value.split(",") if v.strip()}
                found.update(named or {"<empty>"})
        query = environ.get("QUERY_STRING", "")
        if "_method" in query.lower():
            for key, value in parse_qsl(query, keep_blank_values=True):
                if key.lower() == "_method":
                    found.add(value.strip().upper() or "<empty>")
        content_type = environ.get("CONTENT_TYPE", "").lower()
        if method == "POST" and content_type.startswith(_FORM_TYPES):
            found.update(_form_method_fields(environ))
        return found

    def _is_confirmed_admin(self, environ: dict) -> bool:
        if environ.get("HTTP_X_IDENTITY_STATUS") != "Confirmed":
            return False
        roles = environ.get("HTTP_X_ROLES", "")
        return any(role.strip().lower() in self.admin_roles for role in roles.split(","))

    def _cull(self, environ: dict, start_response: Callable, method: str, canonical, rule) -> list[bytes]:
        LOG.info(
            "admin_cull culled %s %s from %s (request %s, rule %r)",
            method,
            shorten(str(canonical), 300),
            environ.get("REMOTE_ADDR", "-"),
            environ.get(REQUEST_ID_KEY, "-"),
            rule.source,
        )
        if self.cull_status == 404:
            return self.error(environ, start_response, 404, "tenancy.not-found", "The resource could not be found.")
        return self.error(
            environ,
            start_response,
            403,
            "tenancy.admin-call",
            "%s %s is an admin call, not available on this endpoint." % (method, shorten(str(canonical))),
        )


class _UnreadableForm(ValueError):
    """A form body that could not be parsed: it is refused, not passed on unjudged."""


def _form_method_fields(environ: dict) -> set[str]:
    """``_method`` fields of a form body; the body is left readable from its start."""
    import webob

    request = webob.Request(environ)
    try:
        body = request.body
        values = request.POST.getall("_method") if b"_method" in body.lower() else []
    except Exception as exc:  # noqa: BLE001 - any parse failure is refused by the caller
        raise _UnreadableForm(str(exc) or type(exc).__name__) from None
    finally:
        # webob leaves a seekable copy in wsgi.input; rewind it for the app.
        request.body_file_raw.seek(0)
    if b"_method" in body.lower() and not values:
        # Another parser might still find the field this one could not.
        raise _UnreadableForm("it mentions _method but holds no _method field this filter can read")
    return {str(v).strip().upper() or "<empty>" for v in values}
