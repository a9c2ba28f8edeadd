"""``version_discovery``: a tenant's ``GET`` also carries the service's version document.

The document is what the service answers, under :data:`DISCOVERY_MEMBER`,
to a plain ``GET /{version}`` below the same mount: asked once per such
``GET`` with a sub-request (:mod:`tenancy_mw.core.subrequest`) that
carries none of the client's credentials, cookies, tenant header,
conditions or version headers.  The service failing only leaves the
member out (logged).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from tenancy_mw.core.errors import Refusal
from tenancy_mw.core.paths import CanonicalPath, shorten
from tenancy_mw.core.subrequest import call_application, plain_get
from tenancy_mw.tenants.admin.representation import reject_constant

__all__ = ["DISCOVERY_BODY_LIMIT", "DISCOVERY_MEMBER", "drop_version_member", "service_version", "with_version"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tenant_admin")

#: The member of the service's version document that ``version_discovery`` adds to a tenant's GET.
DISCOVERY_MEMBER = "version"
#: The largest answer ``version_discovery`` reads from the service (a version document is about 500 bytes).
DISCOVERY_BODY_LIMIT = 65536


def version_location(canonical: CanonicalPath, index: int) -> tuple[str, str]:
    """``SCRIPT_NAME`` and ``PATH_INFO`` (WSGI strings) of the tenant's URL without its tenant segment."""
    # The tenant segment may be inside SCRIPT_NAME (tenant_path's
    # strip_tenant on an API mounted at its version): cut the mount there too.
    mount_end = min(index, canonical.prefix_length)
    script, path = (
        "".join("/" + segment for segment in part).encode("utf-8").decode("latin-1")
        for part in (canonical.segments[:mount_end], canonical.segments[mount_end:index])
    )
    return script, path


def service_version(application: Callable, environ: dict, canonical: CanonicalPath, index: int) -> dict | None:
    """The ``version`` member of the service's answer to ``GET /{version}``, or ``None`` (logged).

    The sub-request is a new, plain ``GET`` of the tenant's URL without
    its last segment: of the request it copies only what locates the
    service (server and ``wsgi.*`` keys, ``Host``, forwarding headers)
    and the request id.
    """
    script, path = version_location(canonical, index)
    where = shorten(script + path or "/")
    try:
        status, body = call_application(application, plain_get(environ, script, path), DISCOVERY_BODY_LIMIT)
        document = json.loads(body, parse_constant=reject_constant) if status[:3] == "200" else None
    except Exception as exc:  # the service failing is no reason to fail the tenant's GET
        LOG.warning(
            "tenant_admin: version_discovery: GET %s failed (%s: %s); the tenant is shown without %r",
            where,
            type(exc).__name__,
            shorten(str(exc)),
            DISCOVERY_MEMBER,
        )
        return None
    member = document.get(DISCOVERY_MEMBER) if isinstance(document, dict) else None
    if not isinstance(member, dict):
        LOG.warning(
            "tenant_admin: version_discovery: the service answers GET %s with %s, not a JSON object "
            "holding a %r object; the tenant is shown without it",
            where,
            status,
            DISCOVERY_MEMBER,
        )
        return None
    return member


def with_version(representation: dict, version: dict, tenant_id: str) -> dict:
    """A copy of *representation* with the service's *version* added (a tenant's own member wins, logged)."""
    document = dict(representation)
    if DISCOVERY_MEMBER in document:
        # Stored before the option was turned on: the tenant's data is not
        # replaced, but a client discovering versions reads it.
        LOG.warning(
            "tenant_admin: version_discovery: tenant %r holds its own %r member, shown instead of the "
            "service's version document; PUT the tenant without it",
            shorten(tenant_id),
            DISCOVERY_MEMBER,
        )
    else:
        document[DISCOVERY_MEMBER] = version
    return document


def drop_version_member(representation: dict, current: Callable[[], dict | None]) -> dict:
    """A PUT's *representation* without the member a GET showed; ``400`` when it is not *current*'s document."""
    if DISCOVERY_MEMBER not in representation:
        return representation
    # What a GET showed, sent back: the service's document is not the tenant's data.
    if representation[DISCOVERY_MEMBER] != current():
        raise Refusal(
            400,
            "tenancy.representation-reserved-member",
            "The tenant representation may not hold %r other than the service's version document: "
            "with version_discovery, GET of the tenant carries that document under this name." % DISCOVERY_MEMBER,
        )
    return {k: v for k, v in representation.items() if k != DISCOVERY_MEMBER}
