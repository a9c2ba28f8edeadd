"""``tenant_path``: find the request's tenant, in ``/{version}/{tenantId}/...`` or the token.

The tenants spec puts the tenant id right after the version segment; nova
and cinder serve every route both with and without it
(``/v2.1/{project_id}/servers`` and ``/v2.1/servers``).  This filter decides
once, with the service's URL layout (:class:`~tenancy_mw.tenants.ids.TenantLayout`),
whether the path carries a tenant, checks it against the spec's rules and
hands it to the wrapped service:

- ``environ['tenancy.tenant_id']``: the decoded tenant id (a ``str``);
- ``environ['tenancy.tenant_source']``: ``"path"`` or ``"token"``;
- ``environ['tenancy.tenant_segment']``: the index of the tenant segment in
  the canonical path's segments, ``-1`` when the path carries none (set on
  every request passed on, so later filters never decide again);
- the ``X-Tenant-Id`` request header (name set by ``tenant_header``), unless
  ``set_tenant_header = false``.  It carries the id's UTF-8 bytes, which a
  WSGI ``environ`` holds as a latin-1 ``str`` (PEP 3333); read the
  ``environ`` key for the decoded text.

A copy of that header sent by the client is removed from every request,
whatever its path: a client never chooses its tenant by header.  A
collection name (``servers``) is never a tenant.

Which requests it touches
    The path is put in the canonical form of :mod:`tenancy_mw.core.paths` first
    (a path with no canonical form, such as one holding ``%2F`` or
    ``%00``, is answered ``400`` whatever its shape).  The version segment
    is the last segment of the mount point (``SCRIPT_NAME``) when it
    matches ``version_pattern`` (nova's ``/v2.1`` urlmap mount), else the
    first segment after the mount.  The service's own mount is the end of
    ``SCRIPT_NAME``: what comes before it, such as a client's
    ``X-Forwarded-Prefix`` that oslo.middleware's ``http_proxy_to_wsgi``
    prepends, is never read for a version or a tenant.  With
    ``tenant_in_path = optional`` (the default) the next segment is the
    tenant unless it is one of ``tenantless_collections`` (every name nova
    and cinder route without a project id); ``always`` takes it whatever it
    is, ``never`` never.  With ``tenant_id_pattern`` set, a segment after
    the version that is neither a listed collection nor a match is answered
    ``404`` (``tenancy.unknown-path-segment``): the filter cannot tell it
    apart, so it fails closed.  Requests with no tenant segment (``/``, the
    version documents ``/v2.1`` and ``/v2.1/``, ``/v2.1/servers``,
    ``/healthcheck``) pass with no tenant, or the token's (below).  An
    empty tenant segment (``/v2.1//servers``) or a tenant id breaking a rule
    of :mod:`tenancy_mw.tenants.ids` is answered ``400``, naming the rule.

Optional: ``token_tenant``
    With keystonemiddleware before this filter: a request whose path
    carries no tenant takes the project of a confirmed token
    (``X-Identity-Status: Confirmed`` and ``X-Project-Id``) as its tenant,
    ``tenancy.tenant_source = "token"``.  Those headers are trusted only
    because keystonemiddleware strips client copies of them; do not turn
    this on without it.

Optional: ``strip_tenant``
    The wrapped app sees the path without the tenant segment
    (``/v2.1/servers``) and the tenant segment is appended to
    ``SCRIPT_NAME``.  When the app is mounted at the version (nova's
    ``/v2.1`` urlmap), that keeps ``SCRIPT_NAME + PATH_INFO`` equal to the
    URL; when the version is in ``PATH_INFO``, links the app builds from
    ``SCRIPT_NAME`` will put the tenant before the version.  Only a tenant
    segment of the path, inside ``PATH_INFO``, can be stripped.

Optional: ``check_token_project``
    With keystonemiddleware before this filter: when it confirmed the token
    (``X-Identity-Status: Confirmed``) and the token's ``X-Project-Id``
    differs from the path's tenant, answer ``403`` unless ``X-Roles`` holds
    one of ``admin_roles`` (compared case-insensitively, as oslo.policy
    does).  Those headers are trusted only because keystonemiddleware
    strips client copies of them; do not turn this on without it.

Usage in ``api-paste.ini``::

    [filter:tenant_path]
    use = egg:tenancy_mw#tenant_path
    strip_tenant = false
    # nova: project ids in URLs are hex, as nova's router takes them.
    tenant_id_pattern = [0-9a-f-]+

From Python::

    >>> from tenancy_mw.tenants.path_filter import TenantPath
    >>> def my_wsgi_app(environ, start_response):
    ...     start_response("200 OK", [("Content-Type", "text/plain")])
    ...     return [environ.get("HTTP_X_PROJECT_NAME", "no tenant").encode()]
    >>> app = TenantPath(my_wsgi_app, {"tenant_header": "X-Project-Name"})
    >>> from webtest import TestApp
    >>> TestApp(app).get("/v2.1/acme/servers", headers={"X-Project-Name": "forged"}).text
    'acme'
    >>> TestApp(app).get("/v2.1/servers", headers={"X-Project-Name": "forged"}).text
    'no tenant'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from tenancy_mw.core.base import ConfigError, TenancyMiddleware

# header_environ_key is core.paths' (the core reads version headers too); it stays importable from here.
from tenancy_mw.core.paths import (
    CanonicalPath,
    PathRefused,
    Refused,
    canonical_path,
    check_target_length,
    header_environ_key,
    max_target_length_opt,
    remember_rewrite,
    shorten,
)
from tenancy_mw.tenants.ids import (
    MAX_TENANT_ID_LENGTH,
    InvalidTenantId,
    TenantLayout,
    tenant_layout_opts,
    validate_tenant_id,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = [
    "STRIPPED_KEY",
    "TENANT_ID_KEY",
    "TENANT_SEGMENT_KEY",
    "TENANT_SOURCE_KEY",
    "TenantPath",
    "header_environ_key",
    "list_opts",
    "mount_length",
    "remove_header",
    "set_defaults",
]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_path")

#: Where the decoded tenant id is left for the wrapped app.
TENANT_ID_KEY = "tenancy.tenant_id"
#: Where the tenant came from: ``"path"`` or ``"token"`` (set with :data:`TENANT_ID_KEY`).
TENANT_SOURCE_KEY = "tenancy.tenant_source"
#: The index of the tenant segment in the canonical path's segments, -1 when the path
#: carries none: ``tenant_path``'s decision, which the filters after it follow.
TENANT_SEGMENT_KEY = "tenancy.tenant_segment"
#: Set once a ``tenant_path`` with ``strip_tenant`` stripped the tenant
#: segment: a second stripping filter in the chain refuses to strip again.
STRIPPED_KEY = "tenancy.tenant_stripped"

OPTS = [
    *tenant_layout_opts(),
    cfg.BoolOpt(
        "token_tenant",
        default=False,
        help="A request whose path carries no tenant takes the project of the token keystonemiddleware confirmed "
        "(X-Identity-Status: Confirmed, X-Project-Id) as its tenant. Only with keystonemiddleware earlier in the "
        "pipeline: it removes client copies of those headers.",
    ),
    cfg.StrOpt(
        "tenant_header",
        default="X-Tenant-Id",
        help="Request header that carries the tenant id to the wrapped app. Any copy sent by "
        "the client is always removed.",
    ),
    cfg.BoolOpt(
        "set_tenant_header",
        default=True,
        help="Set tenant_header on requests that carry a tenant id.",
    ),
    cfg.BoolOpt(
        "strip_tenant",
        default=False,
        help="Remove the tenant segment from PATH_INFO (the app sees /{version}/...) and append it to SCRIPT_NAME.",
    ),
    cfg.BoolOpt(
        "check_token_project",
        default=False,
        help="Answer 403 when keystonemiddleware confirmed a token whose project "
        "(X-Project-Id) is not the path's tenant, unless the token has one of admin_roles. "
        "Only with keystonemiddleware earlier in the pipeline.",
    ),
    cfg.ListOpt(
        "admin_roles",
        default=["admin"],
        help="Roles (X-Roles) that may act on any tenant when check_token_project is on.",
    ),
    max_target_length_opt(),
]

_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


def remove_header(environ: dict, key: str) -> None:
    """Remove every ``environ`` spelling of the header whose canonical key is *key*.

    A conforming server writes a header only as ``HTTP_X_TENANT_ID``, but
    frameworks read other spellings as the same header (Django's
    ``request.headers`` and webob read ``HTTP_X-TENANT-ID`` and
    ``HTTP_x_tenant_id`` as ``X-Tenant-Id``), so every key that is *key*
    once upper-cased with ``-`` read as ``_`` goes.  One pass over the
    joined key names finds out whether there is any such spelling; the
    keys are looked at one by one only then.

    Example::

        >>> env = {"HTTP_X-TENANT-ID": "evil", "HTTP_x_tenant_id": "evil", "HTTP_HOST": "h"}
        >>> remove_header(env, "HTTP_X_TENANT_ID")
        >>> env
        {'HTTP_HOST': 'h'}
    """
    environ.pop(key, None)
    try:
        # Every other spelling upper-cases to the key once "-" reads as "_".
        # Whole names only: X-Tenant-Id-2 must not send every request down
        # the per-key loop below (waitress passes thousands of headers).
        if not _holds_spelling(environ, key):
            return
    except TypeError:  # a key that is not a string: look at each
        pass
    for name in [k for k in environ if isinstance(k, str) and k.upper().replace("-", "_") == key]:
        del environ[name]


def _holds_spelling(environ: dict, key: str) -> bool:
    """Whether some ``environ`` key other than *key* reads as *key*; one C-speed pass over the names.

    Raises ``TypeError`` when a key is not a string.
    """
    return ("\n%s\n" % key) in "\n%s\n" % "\n".join(environ).upper().replace("-", "_")


def mount_length(environ: dict, canonical: CanonicalPath) -> int:
    """How many leading segments of *canonical* are the service's mount, for ``TenantLayout.tenant_index``.

    ``canonical.prefix_length`` (the segments of ``SCRIPT_NAME``), except
    after a stripping ``tenant_path`` (``strip_tenant``) appended the tenant
    segment to ``SCRIPT_NAME`` and a router after it rewrote the path: the
    mount then holds that segment, which is still the path's tenant, so the
    mount is counted up to it.  It is recognised by what that filter left
    in ``environ`` (its segment index and tenant id), never by its shape:
    any other segment of the mount is never a tenant.

    Example (nova's ``/v2.1`` mount, ``acme`` stripped into it, then a router)::

        >>> from tenancy_mw.core.paths import canonicalize
        >>> routed = canonicalize("/v2.1/acme/servers", prefix_length=3)
        >>> stripped = {STRIPPED_KEY: True, TENANT_SEGMENT_KEY: 1, TENANT_ID_KEY: "acme"}
        >>> mount_length(stripped, routed), mount_length({}, routed)
        (1, 3)
    """
    length = canonical.prefix_length
    if environ.get(STRIPPED_KEY):
        index = environ.get(TENANT_SEGMENT_KEY)
        # Checked against the tenant id too: a filter that prepended to
        # SCRIPT_NAME since (a proxy's prefix) moved every segment.
        if (
            type(index) is int
            and 0 < index < length
            and index < len(canonical.segments)
            and canonical.segments[index] == environ.get(TENANT_ID_KEY)
        ):
            return index
    return length


def _attribute(app, name: str):
    """``getattr(app, name, None)``, also when the object's ``__getattr__`` raises something else."""
    try:
        return getattr(app, name, None)
    except Exception:  # noqa: BLE001 - any object may sit in a pipeline
        return None


class TenantPath(TenancyMiddleware):
    """WSGI filter that finds the request's tenant: ``/{version}/{tenantId}``, or the token's project.

    See the module documentation for what it does and its options;
    ``self.layout`` is its :class:`~tenancy_mw.tenants.ids.TenantLayout`.

    Example::

        >>> from webtest import TestApp
        >>> def app(environ, start_response):
        ...     start_response("200 OK", [("Content-Type", "text/plain")])
        ...     return [environ.get("tenancy.tenant_id", "-").encode()]
        >>> TestApp(TenantPath(app, {})).get("/v2.1/acme/servers").text
        'acme'
        >>> TestApp(TenantPath(app, {})).get("/v2.1/servers").text
        '-'
    """

    opt_group = "tenant_path"
    opts = OPTS

    def configure(self, options) -> None:
        """Build the URL layout and check the header name; a bad option raises ConfigError."""
        self.layout = TenantLayout.from_options(options, self.config_error)
        if not _HEADER_NAME.fullmatch(options.tenant_header or ""):
            raise self.config_error("tenant_header", options.tenant_header, "not an HTTP header name")
        self.header_key = header_environ_key(options.tenant_header)
        self.set_header = options.set_tenant_header
        self.strip = options.strip_tenant
        self.check_project = options.check_token_project
        self.token_tenant = options.token_tenant
        self.admin_roles = frozenset(role.strip().lower() for role in options.admin_roles if role.strip())
        self.max_target_length = options.max_target_length
        if self.strip:
            self._refuse_second_strip()

    def _refuse_second_strip(self) -> None:
        """Fail at load when the wrapped chain already holds a stripping tenant_path.

        Two strips would take two segments off the path (or fail on a short
        one); the chain is followed through every filter that keeps its
        wrapped app as ``application`` or ``app`` (oslo.middleware's, paste's,
        this library's) and into a Paste urlmap's apps.
        """
        pending, seen = [self.application], set[int]()
        while pending and len(seen) < 200:
            app = pending.pop()
            if app is None or id(app) in seen:
                continue
            seen.add(id(app))
            if isinstance(app, TenantPath) and app.strip:
                raise ConfigError(
                    "tenancy_mw tenant_path: option strip_tenant = True is invalid: another tenant_path with"
                    " strip_tenant already runs later in this pipeline; only one may strip the tenant segment"
                )
            pending += [_attribute(app, "application"), _attribute(app, "app")]
            mapped = _attribute(app, "applications")
            if isinstance(mapped, list):
                pending += [entry[1] for entry in mapped if isinstance(entry, tuple) and len(entry) == 2]

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        key = self.header_key
        environ.pop(key, None)
        try:
            # remove_header()'s test (hot path): any other spelling left?
            if _holds_spelling(environ, key):
                remove_header(environ, key)
        except TypeError:
            remove_header(environ, key)
        try:
            raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
            if raw is None or len(raw) > self.max_target_length:
                check_target_length(environ, self.max_target_length)
            canonical = canonical_path(environ)
            mount = canonical.prefix_length if STRIPPED_KEY not in environ else mount_length(environ, canonical)
            index = self.layout.tenant_index(canonical, mount)
        except (TypeError, AttributeError):
            return self.error(
                environ,
                start_response,
                400,
                "tenancy.bad-environ",
                "The request could not be read: a WSGI environ value is not a latin-1 string (PEP 3333).",
            )
        except Refused as exc:
            # A path with no canonical form (400, 414), or a segment the layout cannot tell apart (404).
            LOG.debug("tenant_path refused %r: %s", shorten(str(exc.value), 300), exc.detail)
            if isinstance(exc, PathRefused):
                return self.refuse_path(environ, start_response, exc)
            return self.error(environ, start_response, exc.status, "tenancy." + exc.rule, exc.detail)
        environ[TENANT_SEGMENT_KEY] = index
        if index >= 0:
            return self._path_tenant(environ, start_response, canonical, index)
        if self.token_tenant:
            return self._token_tenant(environ, start_response)
        return self.application(environ, start_response)

    def _path_tenant(self, environ: dict, start_response: Callable, canonical: CanonicalPath, index: int):
        """Check the path's tenant segment, hand it on (stripped with ``strip_tenant``), call the app."""
        tenant_id = canonical.segments[index]
        try:
            # A canonical segment already holds no '/', control character,
            # escape or dot segment: only its length is left to check here.
            if not 0 < len(tenant_id) <= MAX_TENANT_ID_LENGTH:
                validate_tenant_id(tenant_id)
        except InvalidTenantId as exc:
            LOG.debug("tenant_path refused tenant id %r: %s", tenant_id, exc.detail)
            return self.error(environ, start_response, 400, "tenancy.invalid-tenant-id." + exc.rule, exc.detail)
        if self.check_project and not self._token_may_use(environ, tenant_id):
            return self.error(
                environ,
                start_response,
                403,
                "tenancy.project-mismatch",
                "The token is scoped to project %r, not to tenant %r of the URL."
                % (shorten(environ["HTTP_X_PROJECT_ID"]), shorten(tenant_id)),
            )
        environ[TENANT_ID_KEY] = tenant_id
        environ[TENANT_SOURCE_KEY] = "path"
        if self.set_header:
            environ[self.header_key] = tenant_id if tenant_id.isascii() else tenant_id.encode("utf-8").decode("latin-1")
        if self.strip and index >= canonical.prefix_length:
            if environ.get(STRIPPED_KEY):
                # A second stripping tenant_path the load-time check could not see
                # (behind a router or urlmap it cannot look into).
                LOG.error("tenant_path: the tenant segment was already stripped; only one tenant_path may strip")
                return self.error(
                    environ,
                    start_response,
                    503,
                    "tenancy.misconfigured-pipeline",
                    "The service is misconfigured: two tenant_path filters strip the tenant segment.",
                )
            refusal = self._strip(environ, canonical, index)
            if refusal is not None:
                return refusal(start_response)
        return self.application(environ, start_response)

    def _token_tenant(self, environ: dict, start_response: Callable):
        """A path with no tenant: take the confirmed token's project as the tenant (``token_tenant``)."""
        project = environ.get("HTTP_X_PROJECT_ID")
        if not project or environ.get("HTTP_X_IDENTITY_STATUS") != "Confirmed":
            return self.application(environ, start_response)
        try:
            # keystonemiddleware's header: UTF-8 bytes as latin-1 text (PEP 3333).
            tenant_id = validate_tenant_id(project if project.isascii() else project.encode("latin-1").decode())
        except UnicodeError:
            return self.error(
                environ,
                start_response,
                400,
                "tenancy.invalid-tenant-id.not-utf-8",
                "The token's project id %r is not UTF-8 text." % shorten(project),
            )
        except InvalidTenantId as exc:
            return self.error(
                environ,
                start_response,
                400,
                "tenancy.invalid-tenant-id." + exc.rule,
                "The token's project id is not a valid tenant id: " + exc.detail,
            )
        environ[TENANT_ID_KEY] = tenant_id
        environ[TENANT_SOURCE_KEY] = "token"
        if self.set_header:
            environ[self.header_key] = project
        return self.application(environ, start_response)

    def _token_may_use(self, environ: dict, tenant_id: str) -> bool:
        if environ.get("HTTP_X_IDENTITY_STATUS") != "Confirmed":
            return True
        project = environ.get("HTTP_X_PROJECT_ID")
        if not project or project == tenant_id.encode("utf-8").decode("latin-1"):
            return True
        roles = environ.get("HTTP_X_ROLES", "")
        return any(role.strip().lower() in self.admin_roles for role in roles.split(","))

    def _strip(self, environ: dict, canonical, index: int):
        """Move the tenant segment to SCRIPT_NAME; return a refusal from a filter that re-judged it, or None."""
        path_info = environ.get("PATH_INFO", "")
        pieces = path_info.split("/")
        # pieces[0] is the empty string before PATH_INFO's leading slash.
        position = index - canonical.prefix_length + 1
        if position >= len(pieces) or pieces[position] != canonical.segments[index].encode("utf-8").decode("latin-1"):
            # PATH_INFO no longer holds the tenant where the client's path has it:
            # something between the server and this filter rewrote it.  Never strip a wrong segment.
            LOG.error("tenant_path: PATH_INFO %r does not hold the tenant segment to strip", shorten(path_info))

            def refusal(start_response):
                return self.error(
                    environ,
                    start_response,
                    503,
                    "tenancy.misconfigured-pipeline",
                    "The service is misconfigured: the path was rewritten before the tenant segment could be stripped.",
                )

            return refusal
        tenant_piece = pieces.pop(position)
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + "/" + tenant_piece
        environ["PATH_INFO"] = "/".join(pieces) if len(pieces) > 1 else ""
        environ[STRIPPED_KEY] = True
        # A culling filter that passed the client's path judges the path the
        # app will now route on, too.
        return remember_rewrite(environ, canonical)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Copies of this filter's options: the ``tenancy_mw.tenant_path`` ``oslo.config.opts`` namespace."""
    return TenantPath.list_opts()


def set_defaults(**defaults: Any) -> None:
    """Change this filter's defaults for the process (see :meth:`.TenancyMiddleware.set_defaults`).

    Example::

        >>> set_defaults(error_format="nova")
        >>> TenantPath(None, {}).options.error_format
        'nova'
        >>> set_defaults(error_format="api-wg")
    """
    TenantPath.set_defaults(**defaults)
