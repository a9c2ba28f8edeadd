"""Microversions: the version a request asks for, and the version headers of an answer.

Pure helpers over microversion-parse; no WSGI machinery beyond reading the
``environ`` dict.

What a request asks for
    :func:`requested_version` reads ``OpenStack-API-Version: <type> X.Y``
    (then a service's legacy header, such as nova's
    ``X-OpenStack-Nova-API-Version``) with microversion-parse and places
    the version in the service's range: ``None`` when no header names one
    (the service's minimum), the maximum for ``latest``;
    :class:`VersionRefused` with ``400`` for a malformed version and
    ``406`` for one out of range, as nova answers.

The headers of an answer: the ``microversions`` option
    A microversioned service says in every answer under its versioned
    mount which version it served, and that the answer varies on the
    version headers: nova sends ``OpenStack-API-Version: compute 2.26``,
    ``X-OpenStack-Nova-API-Version: 2.26`` and ``Vary:
    OpenStack-API-Version, X-OpenStack-Nova-API-Version``, errors included.
    A filter answering in the service's place (a ``404`` for an unknown
    tenant, a culled call, a ``400`` for a bad path or tag) says the same
    when given the service's microversions, every filter's
    ``microversions`` option (:mod:`tenancy_mw.core.base`), read by
    :meth:`Microversions.parse`::

        VERSION_SEGMENT SERVICE_TYPE MIN MAX [LEGACY_HEADER]
        v2.1 compute 2.1 2.95 X-OpenStack-Nova-API-Version

    Under that version segment (the one ``tenant_path`` reads: the mount's
    last segment, else the first one after the mount), the answer carries
    the version the service would serve the request at, decided as nova
    decides it for its own error answers: the version asked for, the
    minimum when none is asked for, the maximum for ``latest``.  A request
    whose version the service cannot serve (malformed, out of range) gets
    ``Vary`` alone: its answer names no version it was not served at
    (nova sends no version headers with a malformed version).  Elsewhere
    (``/``, another version) an answer carries neither, as nova's root
    document does.

Example::

    >>> versions = Microversions.parse("v2.1 compute 2.1 2.53 X-OpenStack-Nova-API-Version")
    >>> versions.answer_headers({"PATH_INFO": "/v2.1/acme/servers",
    ...                          "HTTP_OPENSTACK_API_VERSION": "compute 2.26"})
    [('OpenStack-API-Version', 'compute 2.26'), ('X-OpenStack-Nova-API-Version', '2.26'), \
('Vary', 'OpenStack-API-Version, X-OpenStack-Nova-API-Version')]
    >>> versions.answer_headers({"PATH_INFO": "/"})
    []
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import microversion_parse

from tenancy_mw.core.paths import PathRefused, canonical_path, find_version, header_environ_key, shorten

__all__ = [
    "STANDARD_HEADER",
    "Microversions",
    "VersionRefused",
    "add_headers",
    "is_header_name",
    "parse_version",
    "requested_version",
]

#: The standard version header (the API-WG microversion guideline's).
STANDARD_HEADER = "OpenStack-API-Version"

_VERSION_TEXT = re.compile(r"\s*[0-9]+\s*\.\s*[0-9]+\s*")
# A requested version, as nova's APIVersionRequest takes it: ASCII digits, no sign, no leading
# zero.  parse_version_string is int() on each side, which also takes "+2", "5_3", " 53" and
# Unicode digits: a filter reading 2.53 where the service reads a malformed version.
_REQUESTED_VERSION = re.compile(r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)", re.ASCII)
# An HTTP header name (RFC 9110 token).
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
# A service type (the service-types authority's: lower-case letters, digits, hyphens).
_SERVICE_TYPE = re.compile(r"[a-z0-9][a-z0-9-]*")
_FORM = "VERSION_SEGMENT SERVICE_TYPE MIN MAX [LEGACY_HEADER]"


class VersionRefused(ValueError):
    """A requested microversion that cannot be served.

    :ivar status: 400 (malformed) or 406 (above the maximum or below the minimum).
    :ivar detail: a sentence for the client, naming the value.
    """

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def is_header_name(text: object) -> bool:
    """Whether *text* is an HTTP header name (a token)."""
    return isinstance(text, str) and _HEADER_NAME.fullmatch(text) is not None


def parse_version(text: object) -> microversion_parse.Version:
    """``X.Y`` as a Version, with microversion-parse; :class:`ValueError` if malformed.

    >>> parse_version("2.53")
    Version(major=2, minor=53)
    """
    if not isinstance(text, str) or not _VERSION_TEXT.fullmatch(text):
        raise ValueError("%r is not a version of the form X.Y" % (text,))
    return microversion_parse.parse_version_string(text)


def requested_version(
    headers: Mapping[str, str],
    service_type: str,
    *,
    maximum: microversion_parse.Version,
    minimum: microversion_parse.Version | None = None,
    legacy_headers: Iterable[str] = (),
) -> microversion_parse.Version | None:
    """The microversion a request asks for, placed in the service's range.

    *headers* may be a WSGI ``environ`` or its ``HTTP_*`` keys.  Returns
    ``None`` when no header names a version (the service's minimum),
    *maximum* for ``latest`` (any case).  Raises :class:`VersionRefused`:
    400 for a malformed version, 406 for one above *maximum* or below
    *minimum*.  Well-formed is ``X.Y`` in ASCII digits without sign or
    leading zero, as nova takes it (``2.0`` yes; ``2.053``, ``+2.53``,
    ``2.5_3``, ``2 . 53``, Unicode digits no), spaces around it allowed.

    Example::

        >>> from microversion_parse import Version
        >>> requested_version({"HTTP_OPENSTACK_API_VERSION": "compute latest"}, "compute",
        ...                   maximum=Version(2, 90))
        Version(major=2, minor=90)
    """
    requested = microversion_parse.get_version(dict(headers), service_type, legacy_headers=list(legacy_headers))
    if requested is None:
        return None
    requested = requested.strip()
    if requested.lower() == "latest":
        return maximum
    version = None
    if _REQUESTED_VERSION.fullmatch(requested):
        try:
            version = microversion_parse.parse_version_string(requested)
        except TypeError:
            version = None
    if version is None:
        raise VersionRefused(
            400,
            "Version %r is not of the form X.Y (for example %s) or 'latest'." % (shorten(requested, 40), maximum),
        )
    if version > maximum or (minimum is not None and version < minimum):
        raise VersionRefused(
            406,
            "Version %s is not supported by the API. Minimum is %s and maximum is %s."
            % (version, minimum if minimum is not None else "unset", maximum),
        )
    return version


class Microversions(NamedTuple):
    """A service's microversions under one version segment: what answers there say; see the module documentation.

    Made by :meth:`parse` from a ``microversions`` option value.
    """

    #: The version segment under which requests are microversioned (``v2.1``).
    segment: str
    #: The service type the standard header names (``compute``).
    service_type: str
    #: The oldest version, served when a request names none.
    minimum: microversion_parse.Version
    #: The newest version, which ``latest`` means.
    maximum: microversion_parse.Version
    #: The service's own version header (``X-OpenStack-Nova-API-Version``), if any.
    legacy_header: str | None = None

    @classmethod
    def parse(cls, text: str) -> Microversions:
        """The microversions *text* names (``VERSION_SEGMENT SERVICE_TYPE MIN MAX [LEGACY_HEADER]``).

        Raises :class:`ValueError` saying what is wrong.

        >>> Microversions.parse("v3 volume 3.0 3.70").legacy_header is None
        True
        >>> Microversions.parse("v2.1 compute 2.53 2.1")
        Traceback (most recent call last):
        ...
        ValueError: the minimum 2.53 is above the maximum 2.1
        """
        fields = (text or "").split()
        if len(fields) not in (4, 5):
            raise ValueError("not of the form %s (for example 'v2.1 compute 2.1 2.95')" % _FORM)
        segment, service_type, low, high = fields[:4]
        legacy = fields[4] if len(fields) == 5 else None
        if "/" in segment or "%" in segment:
            raise ValueError("the version segment %r is not one path segment as sent" % segment)
        if not _SERVICE_TYPE.fullmatch(service_type):
            raise ValueError("%r is not a service type (lower-case letters, digits and hyphens)" % service_type)
        minimum, maximum = parse_version(low), parse_version(high)
        if minimum > maximum:
            raise ValueError("the minimum %s is above the maximum %s" % (minimum, maximum))
        if legacy is not None and (not is_header_name(legacy) or legacy.lower() == STANDARD_HEADER.lower()):
            raise ValueError("%r is not the name of a service's own version header" % legacy)
        return cls(segment, service_type, minimum, maximum, legacy)

    @property
    def header_names(self) -> list[str]:
        """The version headers, the standard one first."""
        return [STANDARD_HEADER] + ([self.legacy_header] if self.legacy_header else [])

    @property
    def vary(self) -> tuple[str, str]:
        """The ``Vary`` header of an answer under the version segment: on every version header."""
        return ("Vary", ", ".join(self.header_names))

    def requested(self, environ: Mapping[str, object]) -> microversion_parse.Version | None:
        """The version *environ*'s request asks for (``None``: none); raises :class:`VersionRefused`."""
        # Only the version headers, and only as the strings PEP 3333 makes them (a bad environ's are ignored).
        found = {key: environ.get(key) for key in map(header_environ_key, self.header_names)}
        return requested_version(
            {key: value for key, value in found.items() if isinstance(value, str)},
            self.service_type,
            maximum=self.maximum,
            minimum=self.minimum,
            legacy_headers=[self.legacy_header] if self.legacy_header else [],
        )

    def headers(self, version: microversion_parse.Version | None) -> list[tuple[str, str]]:
        """The headers of an answer served at *version*: its version headers and ``Vary``; ``None``: ``Vary`` alone."""
        if version is None:
            return [self.vary]
        found = [(STANDARD_HEADER, "%s %s" % (self.service_type, version))]
        if self.legacy_header:
            found.append((self.legacy_header, str(version)))
        return [*found, self.vary]

    def answer_headers(self, environ: dict) -> list[tuple[str, str]]:
        """The headers of an answer to *environ*'s request, as the service's own would carry them.

        ``[]`` when the request is not under :attr:`segment`.
        """
        if not self.covers(environ):
            return []
        try:
            version = self.requested(environ)
        except VersionRefused:
            return self.headers(None)
        return self.headers(self.minimum if version is None else version)

    def covers(self, environ: dict) -> bool:
        """Whether *environ*'s request is under the microversioned version segment.

        Its canonical path's version segment (:func:`~tenancy_mw.core.paths.find_version`); for
        a path with no canonical form, ``SCRIPT_NAME`` and ``PATH_INFO`` as they are.
        """
        try:
            canonical = canonical_path(environ)
            segments, mount = canonical.segments, canonical.prefix_length
        except PathRefused:
            script = str(environ.get("SCRIPT_NAME", ""))
            segments = tuple((script + str(environ.get("PATH_INFO", ""))).split("/")[1:])
            mount = script.count("/")
        if "" in segments:
            mount -= segments[:mount].count("")
            segments = tuple(segment for segment in segments if segment)
        return find_version(segments, re.compile(re.escape(self.segment)), mount) >= 0


def add_headers(headers: Iterable[tuple[str, str]], extra: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """*headers* with *extra* added: a header of *extra* replaces one of the same name, but ``Vary`` lists both.

    >>> add_headers([("Vary", "Accept"), ("Allow", "GET")], [("Vary", "OpenStack-API-Version")])
    (('Allow', 'GET'), ('Vary', 'Accept, OpenStack-API-Version'))
    """
    extra = list(extra)
    if not extra:
        return tuple(headers)
    replaced = {name.lower() for name, _ in extra}
    vary: list[str] = []
    kept = []
    for name, value in [*headers, *extra]:
        if name.lower() == "vary":
            vary += [token.strip() for token in value.split(",") if token.strip()]
        elif name.lower() not in replaced or (name, value) in extra:
            kept.append((name, value))
    if vary:
        unique: dict[str, str] = {}
        for token in vary:
            unique.setdefault(token.lower(), token)
        kept.append(("Vary", ", ".join(unique.values())))
    return tuple(kept)
