"""``tenant_path``: take the tenant id from ``/{version}/{tenantId}/...``.

The tenants spec puts the tenant id right after the version segment.  This
filter finds it, checks it against the spec's rules and hands it to the
wrapped service:

- ``environ['tenancy.tenant_id']``: the decoded tenant id (a ``str``);
- the ``X-Tenant-Id`` request header (name set by ``tenant_header``), unless
  ``set_tenant_header = false``.  It carries the id's UTF-8 bytes, which a
  WSGI ``environ`` holds as a latin-1 ``str`` (PEP 3333); read the
  ``environ`` key for the decoded text.

A copy of that header sent by the client is removed from every request,
whatever its path: a client never chooses its tenant by header.

Which requests it touches
    The path is put in the canonical form of :mod:`tenancy_mw.paths` first
    (a path with no canonical form, such as one holding ``%2F`` or
    ``%00``, is answered ``400`` whatever its shape).  The version segment
    is the first segment matching ``version_pattern`` among those of the
    mount point (``SCRIPT_NAME``) and the first one after it; the tenant
    segment is the next one.  Requests with no tenant segment (``/``, the
    version documents ``/v2.1`` and ``/v2.1/``, ``/healthcheck``) pass
    untouched.  An empty tenant segment (``/v2.1//servers``) or a tenant id
    breaking a rule of :mod:`tenancy_mw.tenant_ids` is answered ``400``,
    naming the rule.

Optional: ``strip_tenant``
    The wrapped app sees the path without the tenant segment
    (``/v2.1/servers``) and the tenant segment is appended to
    ``SCRIPT_NAME``.  When the app is mounted at the version (nova's
    ``/v2.1`` urlmap), that keeps ``SCRIPT_NAME + PATH_INFO`` equal to the
    URL; when the version is in ``PATH_INFO``, links the app builds from
    ``SCRIPT_NAME`` will put the tenant before the version.  Only a tenant
    segment inside ``PATH_INFO`` can be stripped.

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

From Python::

    from tenancy_mw.tenant_path import TenantPath
    app = TenantPath(my_wsgi_app, {"tenant_header": "X-Project-Name"})
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from oslo_config import cfg

from tenancy_mw.base import TenancyMiddleware
from tenancy_mw.paths import PathRefused, canonical_path, remember_rewrite, shorten
from tenancy_mw.tenant_ids import (
    DEFAULT_VERSION_PATTERN,
    InvalidTenantId,
    tenant_segment_index,
    validate_tenant_id,
)

__all__ = ["TENANT_ID_KEY", "TenantPath", "header_environ_key"]

LOG = logging.getLogger(__name__)

#: Where the decoded tenant id is left for the wrapped app.
TENANT_ID_KEY = "tenancy.tenant_id"

OPTS = [
    cfg.StrOpt(
        "version_pattern",
        default=DEFAULT_VERSION_PATTERN,
        help="Regular expression a whole version segment matches (Python re syntax). "
        "The tenant id is the segment after it.",
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
        help="Remove the tenant segment from PATH_INFO (the app sees /{version}/...) and "
        "append it to SCRIPT_NAME.",
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
]

_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


def header_environ_key(name: str) -> str:
    """The WSGI ``environ`` key of request header *name*: ``X-Tenant-Id`` -> ``HTTP_X_TENANT_ID``."""
    return "HTTP_" + name.upper().replace("-", "_")


class TenantPath(TenancyMiddleware):
    """WSGI filter that takes the tenant id from ``/{version}/{tenantId}``.

    See the module documentation for what it does and its options.

    Example::

        >>> from webtest import TestApp
        >>> def app(environ, start_response):
        ...     start_response("200 OK", [("Content-Type", "text/plain")])
        ...     return [environ.get("tenancy.tenant_id", "-").encode()]
        >>> TestApp(TenantPath(app, {})).get("/v2.1/acme/servers").text
        'acme'
    """

    opt_group = "tenant_path"
    opts = OPTS

    def configure(self, options) -> None:
        """Compile the version pattern and check the header name; a bad one raises ConfigError."""
        try:
            self.version_re = re.compile(options.version_pattern)
        except re.error as exc:
            raise self.config_error("version_pattern", options.version_pattern, str(exc)) from None
        if self.version_re.fullmatch(""):
            raise self.config_error(
                "version_pattern", options.version_pattern, "it matches an empty segment"
            )
        if not _HEADER_NAME.fullmatch(options.tenant_header or ""):
            raise self.config_error("tenant_header", options.tenant_header, "not an HTTP header name")
        self.header_key = header_environ_key(options.tenant_header)
        self.set_header = options.set_tenant_header
        self.strip = options.strip_tenant
        self.check_project = options.check_token_project
        self.admin_roles = frozenset(role.strip().lower() for role in options.admin_roles if role.strip())

    def __call__(self, environ: dict, start_response: Callable):
        environ.pop(self.header_key, None)
        try:
            canonical = canonical_path(environ)
        except PathRefused as exc:
            LOG.debug("tenant_path refused %r: %s", exc.value, exc.detail)
            return self.error(environ, start_response, 400, "tenancy.bad-path." + exc.rule, exc.detail)
        index = tenant_segment_index(canonical, self.version_re, canonical.prefix_length)
        if index < 0:
            return self.application(environ, start_response)
        tenant_id = canonical.segments[index]
        try:
            validate_tenant_id(tenant_id)
        except InvalidTenantId as exc:
            LOG.debug("tenant_path refused tenant id %r: %s", tenant_id, exc.detail)
            return self.error(
                environ, start_response, 400, "tenancy.invalid-tenant-id." + exc.rule, exc.detail
            )
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
        if self.set_header:
            environ[self.header_key] = tenant_id.encode("utf-8").decode("latin-1")
        if self.strip and index >= canonical.prefix_length:
            refusal = self._strip(environ, canonical, index)
            if refusal is not None:
                return refusal(start_response)
        return self.application(environ, start_response)

    def _token_may_use(self, environ: dict, tenant_id: str) -> bool:
        if environ.get("HTTP_X_IDENTITY_STATUS") != "Confirmed":
            return True
        project = environ.get("HTTP_X_PROJECT_ID")
        if not project or project == tenant_id.encode("utf-8").decode("latin-1"):
            return True
        roles = environ.get("HTTP_X_ROLES", "")
        return any(role.strip().lower() in self.admin_roles for role in roles.split(","))

    @staticmethod
    def _strip(environ: dict, canonical, index: int):
        """Move the tenant segment to SCRIPT_NAME; return a refusal from a filter that re-judged it, or None."""
        path_info = environ.get("PATH_INFO", "")
        pieces = path_info.split("/")
        # pieces[0] is the empty string before PATH_INFO's leading slash.
        position = index - canonical.prefix_length + 1
        tenant_piece = pieces.pop(position)
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + "/" + tenant_piece
        environ["PATH_INFO"] = "/".join(pieces) if len(pieces) > 1 else ""
        # A culling filter that passed the client's path judges the path the
        # app will now route on, too.
        return remember_rewrite(environ, canonical)
