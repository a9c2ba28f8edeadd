"""Parsers and validators of ``id_resolver``: resource ids, cell lists,
resource routes, microversions.

Pure helpers: no WSGI machinery, no database connection and no SQLAlchemy
at import (only :func:`parse_cells` needs it, to check the URLs, and
imports it when called); the SQL side is :mod:`tenancy_mw.cells.lookup`.

Ids
    :func:`parse_uuid` takes a uuid in canonical hyphenated form
    (``8-4-4-4-12`` hexadecimal digits, any case) and returns it in lower
    case; :func:`parse_integer_id` takes ASCII decimal digits (leading
    zeros allowed) up to 2**63 - 1, the largest ``BIGINT``.  Anything else
    (spaces, signs, ``1.0``, ``0x10``, Unicode digits, uuids without hyphens
    or in braces, SQL metacharacters) raises :class:`InvalidId`, so it never
    reaches a query.

Cells
    :func:`parse_cells` reads ``name=SQLAlchemy-URL`` items separated by
    commas or new lines.  A comma inside a URL must be percent-encoded
    (``%2C``).

Resources
    :func:`parse_resources` reads one resource per line, ``ROUTE TABLE
    ID_COLUMN UUID_COLUMN [except=WORD,...] [tenant=COLUMN]``.  ``ROUTE``
    is a path such as ``/os-hypervisors/{id}/uptime``: literal segments and
    exactly one ``{id}``.  ``except=`` lists words that hold the ``{id}``
    place in the service's own routes (``detail``, ``statistics``, the
    legacy ``os-services`` actions ``enable``, ``disable``, ...): requests
    with one of them there are passed on untouched.  ``tenant=COLUMN``
    makes a resource tenant-owned: only rows whose COLUMN is the request's
    tenant (``tenant_path``'s ``environ['tenancy.tenant_id']``) are looked
    at.

Microversions
    :func:`requested_version` reads the version with microversion-parse
    (``get_version`` then ``parse_version_string``) and places it in the
    service's range; :class:`VersionRefused` carries 400 (malformed) or 406
    (out of range).  Both are :mod:`tenancy_mw.core.microversions`' (every
    filter's error answers carry version headers), importable from here too.

Example::

    >>> parse_uuid("8E6E4AB6-0662-4FF5-8994-DDE92BEDADA1")
    '8e6e4ab6-0662-4ff5-8994-dde92bedada1'
    >>> parse_integer_id("42")
    42
    >>> sorted(parse_cells("cell1=sqlite:////tmp/c1.db, cell2=sqlite:////tmp/c2.db"))
    ['cell1', 'cell2']
    >>> parse_resources(["/os-services/{id} services id uuid"])[0].table
    'services'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import microversion_parse

from tenancy_mw.core import microversions
from tenancy_mw.core.microversions import VersionRefused, requested_version
from tenancy_mw.core.paths import Refused, shorten

__all__ = [
    "MAX_CELL_TIMEOUT",
    "MAX_INTEGER_ID",
    "InvalidId",
    "Resource",
    "SpecError",
    "VersionRefused",
    "check_names",
    "looks_like_uuid",
    "parse_cells",
    "parse_integer_id",
    "parse_resources",
    "parse_service_version",
    "parse_uuid",
    "parse_version",
    "requested_version",
]

#: The largest integer id looked up: the largest signed 64-bit integer
#: (``BIGINT``); a larger one cannot be a row's id on any backend.
MAX_INTEGER_ID = 2**63 - 1

#: The longest ``cell_timeout``, in seconds.  It is handed to the drivers (libpq keepalive idle
#: time, TCP_USER_TIMEOUT, statement timeouts), which refuse values far beyond it (Linux takes
#: at most 32767 s of keepalive idle time): a larger one would make every lookup fail.
MAX_CELL_TIMEOUT = 600.0

_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_INTEGER = re.compile(r"[0-9]+")
_CELL_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ID_PLACEHOLDER = "{id}"
_RESOURCE_FORM = "ROUTE TABLE ID_COLUMN UUID_COLUMN [except=WORD,...] [tenant=COLUMN]"


class InvalidId(Refused):
    """A resource id that is not of the form asked for.

    Its ``rule`` is ``"not-a-uuid"``, ``"not-an-integer"`` or
    ``"integer-too-large"``.
    """


class SpecError(ValueError):
    """A cell list, resource line or version in a configuration that cannot be used."""


def looks_like_uuid(text: str) -> bool:
    """True if *text* is a uuid in canonical hyphenated form, any case."""
    return _UUID.fullmatch(text) is not None


def parse_uuid(text: str) -> str:
    """*text* in lower case if it is a canonical hyphenated uuid, else :class:`InvalidId`.

    Example::

        >>> parse_uuid("{8e6e4ab6-0662-4ff5-8994-dde92bedada1}")
        Traceback (most recent call last):
          ...
        tenancy_mw.cells.ids.InvalidId: Invalid uuid '{8e6e4ab6-...}': ...
    """
    if not isinstance(text, str) or not _UUID.fullmatch(text):
        raise InvalidId(
            "not-a-uuid",
            "Invalid uuid %r: from this microversion on, ids are uuids in canonical hyphenated form "
            "(8-4-4-4-12 hexadecimal digits)." % shorten(str(text)),
            text,
        )
    return text.lower()


def parse_integer_id(text: str) -> int:
    """The integer *text* spells in ASCII decimal digits, else :class:`InvalidId`.

    Example::

        >>> parse_integer_id("+5")
        Traceback (most recent call last):
          ...
        tenancy_mw.cells.ids.InvalidId: Invalid id '+5': ...
    """
    if not isinstance(text, str) or not _INTEGER.fullmatch(text):
        raise InvalidId(
            "not-an-integer",
            "Invalid id %r: below the uuid microversion, ids are decimal integers (digits 0-9 only)."
            % shorten(str(text)),
            text,
        )
    # Bounded before int(): a million digits must not cost a conversion.  The leading zeros go
    # too: int() refuses more than 4300 digits, zeros included.
    digits = text.lstrip("0") or "0"
    if len(digits) > 19 or int(digits) > MAX_INTEGER_ID:
        raise InvalidId(
            "integer-too-large",
            "Invalid id %r: larger than %d, the largest id there can be." % (shorten(text), MAX_INTEGER_ID),
            text,
        )
    return int(digits)


def parse_cells(spec: str | Iterable[str] | Mapping[str, str]) -> dict[str, str]:
    """``{name: url}`` from ``name=URL`` items separated by commas or new lines.

    A mapping is checked and returned as a dict.  Names are letters, digits,
    ``_``, ``.`` and ``-``; each must be unique; each URL must parse as a
    SQLAlchemy URL.  Raises :class:`SpecError` naming the bad item (with any
    password hidden), and :class:`~tenancy_mw.extras.MissingExtra` when the
    ``sql`` extra (SQLAlchemy) is not installed.
    """
    is_url = _url_checker()
    items = [(str(name), str(url)) for name, url in spec.items()] if isinstance(spec, Mapping) else _cell_items(spec)
    cells: dict[str, str] = {}
    for name, url in items:
        if not _CELL_NAME.fullmatch(name):
            raise SpecError("cell name %r: use letters, digits, '_', '.' and '-'" % name)
        if name in cells:
            raise SpecError("cell %r is named twice" % name)
        if not is_url(url):
            raise SpecError("cell %s: %r is not a SQLAlchemy URL" % (name, _hide_password(url)))
        cells[name] = url
    if not cells:
        raise SpecError("no cells: give at least one name=URL item")
    return cells


def _cell_items(spec: str | Iterable[str]) -> list[tuple[str, str]]:
    """The ``(name, url)`` pairs of ``name=URL`` items separated by commas or new lines."""
    texts = [spec] if isinstance(spec, str) else list(spec)
    items = []
    for text in texts:
        for item in re.split(r"[,\n]", text or ""):
            item = item.strip()
            if not item:
                continue
            name, sep, url = item.partition("=")
            if not sep:
                raise SpecError("cell item %r is not of the form name=URL" % _hide_password(item))
            items.append((name.strip(), url.strip()))
    return items


def _url_checker() -> Callable[[str], bool]:
    """A test of SQLAlchemy URLs; imported here, not with the module, which needs no SQLAlchemy."""
    from tenancy_mw.core.sql import make_url, sa  # MissingExtra, naming the sql extra, without it

    ArgumentError = sa.exc.ArgumentError

    def is_url(url: str) -> bool:
        try:
            make_url(url)
        except ArgumentError:
            return False
        return True

    return is_url


def _hide_password(text: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", text)


@dataclass(frozen=True)
class Resource:
    """One resource of ``resources``: where its id is in the path, where its rows are.

    :ivar route: the route as written, e.g. ``/os-hypervisors/{id}/uptime``.
    :ivar segments: the route's segments; the id's place holds ``None``.
    :ivar id_index: the index of the ``{id}`` segment.
    :ivar table: the table (``schema.table`` allowed) in every cell database.
    :ivar id_column: the integer primary key column.
    :ivar uuid_column: the uuid column.
    :ivar except_words: words the service itself routes on in the id's place.
    :ivar tenant_column: for a resource owned by a tenant, the column holding
        its tenant id; lookups then see only the request's tenant's rows.
    """

    route: str
    segments: tuple[str | None, ...]
    id_index: int
    table: str
    id_column: str
    uuid_column: str
    except_words: frozenset[str] = frozenset()
    tenant_column: str | None = None

    @property
    def schema(self) -> str | None:
        """The schema part of :attr:`table`, or ``None``."""
        return self.table.rpartition(".")[0] or None

    @property
    def table_name(self) -> str:
        """:attr:`table` without its schema."""
        return self.table.rpartition(".")[2]

    def match(self, segments: tuple[str, ...]) -> str | None:
        """The id segment if *segments* (after the version, and the tenant) follow this route, else ``None``."""
        if len(segments) != len(self.segments):
            return None
        for literal, segment in zip(self.segments, segments, strict=True):
            if literal is not None and literal != segment:
                return None
        return segments[self.id_index]


def _parse_route(route: str, line: str) -> tuple[tuple[str | None, ...], int]:
    if not route.startswith("/") or route == "/":
        raise SpecError("resource %r: the route must be a path such as /os-services/{id}" % line)
    pieces = route.strip("/").split("/")
    if pieces.count(_ID_PLACEHOLDER) != 1:
        raise SpecError("resource %r: the route must hold {id} exactly once" % line)
    segments: list[str | None] = []
    for piece in pieces:
        if piece == _ID_PLACEHOLDER:
            segments.append(None)
        elif not piece or "{" in piece or "}" in piece or "%" in piece:
            raise SpecError("resource %r: route segment %r is not a literal or {id}" % (line, piece))
        else:
            segments.append(piece)
    return tuple(segments), pieces.index(_ID_PLACEHOLDER)


def check_names(table: str, *columns: str) -> None:
    """Raise :class:`SpecError` unless *table* (``schema.table`` allowed) and *columns* are plain SQL names.

    Example::

        >>> check_names("nova.services", "id", "uuid")
        >>> check_names("services; DROP TABLE x", "id")
        Traceback (most recent call last):
          ...
        tenancy_mw.cells.ids.SpecError: 'services; DROP TABLE x' is not a table or column name
    """
    parts = table.split(".")
    if len(parts) > 2:
        raise SpecError("%r is not a table or column name" % table)
    for name in [*parts, *columns]:
        if not _IDENTIFIER.fullmatch(name):
            raise SpecError("%r is not a table or column name" % (table if name in parts else name))


def parse_resources(lines: str | Iterable[str]) -> list[Resource]:
    """The resources of ``ROUTE TABLE ID_COLUMN UUID_COLUMN [except=WORD,...] [tenant=COLUMN]`` lines.

    Blank lines and lines starting with ``#`` are skipped.  Raises
    :class:`SpecError` naming a bad line.

    Example::

        >>> [r.route for r in parse_resources('''
        ...     /os-hypervisors/{id} compute_nodes id uuid except=detail,statistics
        ...     /os-hypervisors/{id}/uptime compute_nodes id uuid''')]
        ['/os-hypervisors/{id}', '/os-hypervisors/{id}/uptime']
    """
    texts = [lines] if isinstance(lines, str) else list(lines)
    resources = []
    seen = set()
    for text in texts:
        for line in (text or "").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            resource = _parse_resource(line)
            if resource.segments in seen:
                raise SpecError("resource %r: route %s is given twice" % (line, resource.route))
            seen.add(resource.segments)
            resources.append(resource)
    if not resources:
        raise SpecError("no resources: give at least one ROUTE TABLE ID_COLUMN UUID_COLUMN line")
    return resources


def _parse_resource(line: str) -> Resource:
    """The resource of one ``ROUTE TABLE ID_COLUMN UUID_COLUMN [except=WORD,...] [tenant=COLUMN]`` line."""
    fields = line.split()
    if len(fields) < 4:
        raise SpecError("resource %r: expected %s" % (line, _RESOURCE_FORM))
    route, table, id_column, uuid_column = fields[:4]
    segments, id_index = _parse_route(route, line)
    _check_resource_names(line, table, id_column, uuid_column)
    options = _resource_options(fields[4:], line)
    tenant_column = options.get("tenant")
    if tenant_column is not None:
        _check_resource_names(line, table, tenant_column)
    except_words = frozenset(word for word in options.get("except", "").split(",") if word)
    return Resource(route, segments, id_index, table, id_column, uuid_column, except_words, tenant_column)


def _check_resource_names(line: str, table: str, *columns: str) -> None:
    """:func:`check_names`, its error naming the resource *line*."""
    try:
        check_names(table, *columns)
    except SpecError as exc:
        raise SpecError("resource %r: %s" % (line, exc)) from None


def _resource_options(fields: list[str], line: str) -> dict[str, str]:
    """``{"except": ..., "tenant": ...}`` from a resource line's ``except=`` and ``tenant=`` fields."""
    options: dict[str, str] = {}
    for field in fields:
        key, sep, value = field.partition("=")
        if key not in ("except", "tenant") or not sep or not value or key in options:
            raise SpecError(
                "resource %r: %r is not one of except=WORD,... and tenant=COLUMN; expected %s"
                % (line, field, _RESOURCE_FORM)
            )
        options[key] = value
    return options


def parse_version(text: str) -> microversion_parse.Version:
    """``X.Y`` as a Version, with microversion-parse; :class:`SpecError` if malformed."""
    try:
        return microversions.parse_version(text)
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def parse_service_version(text: str) -> tuple[str, microversion_parse.Version]:
    """``"compute 2.53"`` as ``("compute", Version(2, 53))``; :class:`SpecError` if malformed."""
    fields = (text or "").split()
    if len(fields) != 2:
        raise SpecError("%r is not of the form 'SERVICE_TYPE X.Y' (for example 'compute 2.53')" % (text,))
    return fields[0], parse_version(fields[1])
