"""Microversions of the demo, the way nova negotiates them.

A client asks for a version with ``OpenStack-API-Version: compute 2.26`` or
nova's legacy ``X-OpenStack-Nova-API-Version: 2.26``; the standard header
wins when both are there.  No header means the minimum, ``2.1``; ``latest``
means the maximum.  A malformed version is ``400``, one outside the range
``406``, as nova answers.  Every answer under ``/v2.1`` carries the version
it was served at in both headers, and ``Vary`` on both.

Parsing is microversion-parse's; this module only adds the range::

    >>> negotiate({"HTTP_OPENSTACK_API_VERSION": "compute 2.26"})
    Version(major=2, minor=26)
    >>> negotiate({})
    Version(major=2, minor=1)
    >>> str(negotiate({"HTTP_X_OPENSTACK_NOVA_API_VERSION": "latest"})) == str(MAX_VERSION)
    True
"""

from __future__ import annotations

from collections.abc import Mapping

import microversion_parse

from tenancy_mw.cells.ids import VersionRefused, requested_version

__all__ = [
    "LEGACY_HEADER",
    "MAX_VERSION",
    "MIN_VERSION",
    "SERVICE_TYPE",
    "VersionError",
    "negotiate",
    "response_headers",
]

SERVICE_TYPE = "compute"
#: nova's own header, which older clients (python-novaclient) still send.
LEGACY_HEADER = "X-OpenStack-Nova-API-Version"
MIN_VERSION = microversion_parse.Version(2, 1)
#: Tags in server views from 2.26; uuids for services and hypervisors from 2.53.
MAX_VERSION = microversion_parse.Version(2, 53)


class VersionError(ValueError):
    """A requested version the demo cannot serve: ``status`` is 400 (malformed) or 406 (out of range)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def negotiate(environ: Mapping[str, object]) -> microversion_parse.Version:
    """The version a request is served at; :class:`VersionError` when it cannot be.

    The reading and the range check are tenancy_mw's
    (:func:`tenancy_mw.cells.ids.requested_version`), so this app and its
    ``id_resolver`` filter always agree on a request's version.
    """
    try:
        version = requested_version(
            environ, SERVICE_TYPE, maximum=MAX_VERSION, minimum=MIN_VERSION, legacy_headers=[LEGACY_HEADER]
        )
    except VersionRefused as exc:
        raise VersionError(exc.status, exc.detail) from None
    return MIN_VERSION if version is None else version


def response_headers(version: microversion_parse.Version | None) -> list[tuple[str, str]]:
    """The version headers of an answer served at *version* (``None``: the minimum), with ``Vary``."""
    version = version or MIN_VERSION
    return [
        ("OpenStack-API-Version", "%s %s" % (SERVICE_TYPE, version)),
        (LEGACY_HEADER, str(version)),
        ("Vary", "OpenStack-API-Version, %s" % LEGACY_HEADER),
    ]
