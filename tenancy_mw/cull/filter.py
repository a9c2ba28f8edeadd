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
    :data:`~tenancy_mw.cull.forms.FORM_BODY_LIMIT` bytes, once per request
    (:mod:`tenancy_mw.cull.forms`).  ``method_override =
    refuse`` answers ``400`` to overrides instead and never reads a form
    body.  A rule naming action keys (``POST /servers/*/action
    (os-migrateLive,evacuate)``) culls only a request whose JSON body has
    one of them as a top-level key: the body is read only when such a rule
    matches the path and no other rule culls it, under the same bound, once
    (:mod:`tenancy_mw.cull.actions`); a body that is not one JSON object
    is answered ``400``, one over the bound ``413``.
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
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.core.errors import REQUEST_ID_KEY, Refusal
from tenancy_mw.core.paths import (
    REJUDGE_KEY,
    REWRITTEN_KEY,
    CanonicalPath,
    PathRefused,
    canonical_path,
    check_target_length,
    compile_version_pattern,
    max_target_length_opt,
    routed_path,
    shorten,
    version_pattern_opt,
)
from tenancy_mw.cull.actions import body_action_keys
from tenancy_mw.cull.forms import (
    FORM_BODY_LIMIT,
    FORM_OVERRIDES_KEY,
    form_overrides,
    has_body,
    has_form_body,
    reads_form,
)
from tenancy_mw.cull.overrides import (
    OVERRIDE_HEADERS,
    TooManyCandidates,
    media_type_versions,
    override_header_values,
    override_names,
    urlencoded_method_overrides,
)
from tenancy_mw.cull.policy import PolicyError, derive_from_options, log_derivation
from tenancy_mw.cull.rules import (
    DEFAULT_RULES,
    TENANT_READ_RULE,
    CullRule,
    PathView,
    RuleError,
    RuleTable,
    parse_rules,
    prepare_folding,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

# FORM_BODY_LIMIT, FORM_OVERRIDES_KEY (tenancy_mw.cull.forms) and
# OVERRIDE_HEADERS (tenancy_mw.cull.overrides) stay importable from here,
# where they were defined first.
__all__ = ["FORM_BODY_LIMIT", "FORM_OVERRIDES_KEY", "OVERRIDE_HEADERS", "AdminCull", "list_opts", "set_defaults"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.admin_cull")

OPTS = [
    cfg.MultiStrOpt(
        "rules",
        default=[],
        help="Extra admin calls to cull, one rule per line: METHODS /pattern, e.g. 'PUT,DELETE /os-services/**' "
        "or '* /os-hypervisors/**'. Methods: comma-separated, or *. Pattern tokens: literal, * (one segment), "
        "** (any number), {version}, {tenant}. A rule may end with the JSON body's action keys in parentheses, "
        "'(os-migrateLive,evacuate)': it then culls only a body with one of those top-level keys. "
        "See the admin_cull documentation for where patterns are tried.",
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
    cfg.IntOpt(
        "max_action_body_size",
        default=112 * 1024,
        min=1024,
        max=1024 * 1024,
        help="The largest body, in bytes, read for its action keys on the path of a rule that names them "
        "(a rule ending in '(evacuate)'); a larger one there is refused (413). The default is "
        "oslo.middleware sizelimit's, which nova's and cinder's pipelines apply before the filter.",
    ),
    cfg.StrOpt(
        "policy_namespace",
        help="Also cull the admin calls of a service's own policy: the name its oslo.policy defaults are "
        "registered under (entry point group oslo.policy.policies: nova, cinder). Every documented operation "
        "that oslo.policy lets an admin call and neither a member nor a reader of the project is culled; "
        "see the admin_cull documentation for how the rule that gates an operation is found. Needs "
        "oslo.policy (tenancy_mw[policy]). Print the result first with: tenancy-mw-manage cull derive.",
    ),
    cfg.StrOpt(
        "policy_file",
        help="With policy_namespace: the policy file whose overrides count. Default: the one the service's "
        "configuration names ([oslo_policy] policy_file and policy_dirs of the configuration this filter "
        "reads: the service's own when it loads its paste file).",
    ),
    cfg.ListOpt(
        "policy_admin_roles",
        default=["admin", "member", "reader"],
        help="With policy_namespace: the roles of the admin oslo.policy is asked about (with their implied roles).",
    ),
    cfg.ListOpt(
        "policy_member_roles",
        default=["member", "reader"],
        help="With policy_namespace: the roles of the member oslo.policy is asked about.",
    ),
    cfg.ListOpt(
        "policy_reader_roles",
        default=["reader"],
        help="With policy_namespace: the roles of the reader oslo.policy is asked about.",
    ),
    cfg.MultiStrOpt(
        "policy_member_calls",
        default=[],
        help="With policy_namespace: operations that are members' calls here although the derivation culls "
        "them (undecided, or decided from documentation that misleads), one per line as it prints them "
        "(METHOD /path, or METHOD /path (action)); they are not culled, and each decided one is logged at "
        "load. Undecided operations not named here are culled.",
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
        self.rules = parse_rules(sources) + operator_rules + self._policy_rules(options)
        prepare_folding()
        # One table of every rule, whatever its methods: most requests find
        # no rule that may match their path, by a few lookups, and stop there.
        self._table = RuleTable(self.rules)
        self.cull_status = options.cull_status
        self.max_segments = options.max_segments
        self.max_target_length = options.max_target_length
        self.max_action_body_size = options.max_action_body_size
        self.refuse_overrides = options.method_override == "refuse"
        self.admin_roles = frozenset(r.strip().lower() for r in options.admin_roles if r.strip())

    def _policy_rules(self, options) -> list:
        """The rules derived from the service's policy (``policy_namespace``), logged; none without it."""
        if not options.policy_namespace:
            return []
        try:
            derivation = derive_from_options(options, self.oslo_conf)
            rules = parse_rules(derivation.rule_lines())
        except (PolicyError, RuleError) as exc:
            raise self.config_error("policy_namespace", options.policy_namespace, str(exc)) from None
        log_derivation(LOG, derivation)
        return rules

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
        route it.  The request's method is judged first; then, if the path
        is admin for another method, each method an override names.
        """
        try:
            canonical, views = self._views(environ)
            method = environ.get("REQUEST_METHOD", "GET").upper()
            if self.refuse_overrides:
                self._refuse_named_overrides(environ)
            table = self._table
            if len(views) == 1 and views[0].simple:
                rules = table.simple_candidates(views[0])
            else:
                rules = table.candidates(views, "\n".join(view.folded for view in views))
            if not rules:
                return None  # most requests: no rule may match the path, whatever the method
            judged = _judged_as(method)
            keyed = None
            others = None
            for rule in rules:
                if rule.methods is not None and rule.methods.isdisjoint(judged):
                    # A rule of another method: it matters only with an override.
                    others = [rule] if others is None else others + [rule]
                    continue
                for view in views:
                    if rule.matches_path(view):
                        if rule.action_keys is None:
                            return self._cull_unless_admin(environ, method, canonical, rule)
                        # Judged by the body's keys once no rule culls on the path alone.
                        keyed = [rule] if keyed is None else keyed + [rule]
                        break
            if keyed is not None:
                culled = self._cull_by_action(environ, [(method, rule) for rule in keyed], canonical)
                if culled is not None:
                    return culled
            # Most requests carry nothing that could name another method (no
            # override header, no query or form that could spell _method):
            # then no rule of another method is matched at all.
            if others is None or not _may_override(environ, method):
                return None
            others = [rule for rule in others if any(rule.matches_path(view) for view in views)]
            return self._judge_overrides(environ, method, canonical, others) if others else None
        except PathRefused as exc:
            LOG.info("admin_cull refused path %r: %s", shorten(str(exc.value), 300), exc.detail)
            return functools.partial(self.refuse_path, environ, refused=exc)
        except Refusal as refusal:  # UnreadableBody too
            return functools.partial(self.answer, environ, refusal=refusal)

    def _views(self, environ: dict) -> tuple[CanonicalPath, list[PathView]]:
        """The canonical path and every view of it to judge; raises PathRefused or Refusal."""
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
        if raw is None or len(raw) > self.max_target_length:
            check_target_length(environ, self.max_target_length)
        canonical = canonical_path(environ)
        segments = canonical.segments
        if "" in segments:
            views = [self._view(canonical)]
        else:
            # _view(), the usual case inlined: canonical segments, none empty.
            views = [PathView(segments, self.version_re, canonical.prefix_length, canonical=True)]
        if environ.get(REWRITTEN_KEY):
            views.append(self._view(routed_path(environ)))
        accept = environ.get("HTTP_ACCEPT", "")
        content_type = environ.get("CONTENT_TYPE", "")
        if "version" in accept.lower() or "version" in content_type.lower():
            try:
                versions = media_type_versions(accept, content_type)
            except TooManyCandidates as exc:
                raise Refusal(400, "tenancy.too-many-versions", str(exc)) from None
            views += [self._mounted_view(view, version) for version in versions for view in list(views)]
        for view in views:
            depth = len(view.segments) + (view.folded.count("\\") if "\\" in view.folded else 0)
            if depth > self.max_segments:
                detail = "The path has %d segments (backslashes counted); at most %d are accepted here." % (
                    depth,
                    self.max_segments,
                )
                raise Refusal(400, "tenancy.path-too-deep", detail)
        return canonical, views

    def _refuse_named_overrides(self, environ: dict) -> None:
        """``method_override = refuse``: raise a Refusal when a header or the query names a method."""
        try:
            named = _header_and_query_overrides(environ)
        except TooManyCandidates as exc:
            raise Refusal(400, "tenancy.method-override-refused", str(exc)) from None
        if named:
            raise Refusal(
                400,
                "tenancy.method-override-refused",
                "Method overrides are not accepted here (got %s)." % ", ".join(sorted(map(repr, named))),
            )

    def _judge_overrides(self, environ: dict, method: str, canonical, others: list[CullRule]) -> Callable | None:
        """Judge the methods the request's overrides name; *others* are the rules of other methods its path matches."""
        if self.refuse_overrides:
            # Header and query overrides were refused already.  A body a
            # framework would read a form from is not read in this mode: on
            # a path that is admin for another method it is refused unread.
            if has_form_body(environ, method):
                raise Refusal(
                    400,
                    "tenancy.method-override-refused",
                    "A form body is not accepted on this path: it could carry a _method override, and method"
                    " overrides are not accepted here.",
                )
            return None
        keyed = []
        for override in self._named_overrides(environ, method):
            for rule in others:
                if rule.applies_to(_judged_as(override)):
                    named = "%s (as %s)" % (method, override)
                    if rule.action_keys is None:
                        return self._cull_unless_admin(environ, named, canonical, rule)
                    keyed.append((named, rule))
        return self._cull_by_action(environ, keyed, canonical) if keyed else None

    def _cull_by_action(self, environ: dict, keyed: list[tuple[str, CullRule]], canonical) -> Callable | None:
        """Cull if the body names an action key of a rule whose path and method matched; *keyed* holds (method, rule).

        The body is read only here (:func:`~tenancy_mw.cull.actions.body_action_keys`,
        once per request); a confirmed admin passes without it being read.
        """
        if self.admin_roles and self._is_confirmed_admin(environ):
            return None
        keys = body_action_keys(environ, self.max_action_body_size)
        for method, rule in keyed:
            if rule.accepts_keys(keys):
                return self._cull(environ, method, canonical, rule)
        return None

    @staticmethod
    def _named_overrides(environ: dict, method: str) -> set[str]:
        """Every method the override headers, the query and a form body name; the body read last."""
        try:
            return _header_and_query_overrides(environ) | form_overrides(environ, method)
        except TooManyCandidates as exc:
            raise Refusal(400, "tenancy.unreadable-form", str(exc)) from None

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
        return PathView(segments, self.version_re, prefix, canonical=True)

    def _mounted_view(self, view: PathView, version: str) -> PathView:
        """*view* as a urlmap in front of the app routes it under *version*: ``SCRIPT_NAME += /version``."""
        prefix = view.prefix_length
        segments = view.segments[:prefix] + (version,) + view.segments[prefix:]
        return PathView(segments, self.version_re, prefix + 1)

    def _answer(self, environ: dict, status: int, code: str, detail: str) -> Callable:
        """The answer of a refused request: a callable taking ``start_response``."""
        return functools.partial(self.answer, environ, refusal=Refusal(status, code, detail))

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
    if override_header_values(environ):
        return True
    query = environ.get("QUERY_STRING", "")
    # webob decodes keys, so an escape may spell _method too.
    if query and ("%" in query or "method" in query.lower()):
        return True
    # has_form_body(), spelled out: one call less on every request that gets here.
    return reads_form(environ, method) and has_body(environ)


def _header_and_query_overrides(environ: dict) -> set[str]:
    """The methods the override headers and ``_method`` query parameters name."""
    return override_names(override_header_values(environ)) | _query_overrides(environ)


def _query_overrides(environ: dict) -> set[str]:
    """``_method`` query parameters, found as webob finds them: ``&`` and ``;``
    separators, percent-decoded keys, any case; one linear pass
    (:func:`~tenancy_mw.cull.overrides.urlencoded_method_overrides`)."""
    query = environ.get("QUERY_STRING", "")
    if not query:
        return set()
    return urlencoded_method_overrides(query.encode("latin-1", "replace"), "query string")


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of this filter's options: the ``tenancy_mw.admin_cull`` ``oslo.config.opts`` namespace."""
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
