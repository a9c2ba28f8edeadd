"""Microversions of the demo, the way nova negotiates them.

A client asks for a version with ``OpenStack-API-Version: compute 2.26`` or
nova's legacy ``X-OpenStack-Nova-API-Version: 2.26``; the standard header
wins when both are there.  No header means the minimum, ``2.1``; ``latest``
means the maximum.  A malformed version is ``400``, one outside the range
``406``, as nova answers.  Every answer under ``/v2.1`` carries the version
it was served at in both headers, and ``Vary`` on both; an answer to a
version the demo cannot serve (those ``400`` and ``406``) names none, with
``Vary`` alone, as nova's to a malformed one.

The range is declared once, in tenancy_mw's own form (:data:`SPEC`, a
:class:`tenancy_mw.core.microversions.Microversions`): the demo's filters
take the same value as their ``microversions`` option
(``tenancy_mw_demo.conf``), so their own answers (a ``404`` for an unknown
tenant, a culled call, a ``400``) carry the very headers the app's would.
Parsing is microversion-parse's, through tenancy_mw; this module only names
the range::

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

from tenancy_mw.core.microversions import Microversions, VersionRefused

__all__ = [
    "LEGACY_HEADER",
    "MAX_VERSION",
    "MICROVERSIONS",
    "MIN_VERSION",
    "SERVICE_TYPE",
    "SPEC",
    "VersionError",
    "negotiate",
    "response_headers",
]

SERVICE_TYPE = "compute"
#: nova's own header, which older clients (python-novaclient) still send.
LEGACY_HEADER = "X-OpenStack-Nova-API-Version"
#: The demo's microversions, as every filter's ``microversions`` option names them
#: (version segment, service type, minimum, maximum, legacy header).  Tags in server
#: views from 2.26; uuids for services and hypervisors from 2.53.
SPEC = "v2.1 %s 2.1 2.53 %s" % (SERVICE_TYPE, LEGACY_HEADER)
MICROVERSIONS = Microversions.parse(SPEC)
MIN_VERSION: microversion_parse.Version = MICROVERSIONS.minimum
MAX_VERSION: microversion_parse.Version = MICROVERSIONS.maximum


class VersionError(ValueError):
    """A requested version the demo cannot serve: ``status`` is 400 (malformed) or 406 (out of range)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def negotiate(environ: Mapping[str, object]) -> microversion_parse.Version:
    """The version a request is served at; :class:`VersionError` when it cannot be.

    The reading and the range check are tenancy_mw's
    (:meth:`~tenancy_mw.core.microversions.Microversions.requested`), so this
    app and its filters always agree on a request's version.
    """
    try:
        version = MICROVERSIONS.requested(environ)
    except VersionRefused as exc:
        raise VersionError(exc.status, exc.detail) from None
    return MIN_VERSION if version is None else version


def response_headers(version: microversion_parse.Version | None) -> list[tuple[str, str]]:
    """The version headers of an answer served at *version*, with ``Vary``; ``None`` (no version served): ``Vary``."""
    return MICROVERSIONS.headers(version)
