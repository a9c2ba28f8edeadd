"""OpenStack's paging of a list: the ``limit`` and ``marker`` parameters and the ``next`` link.

A list call of nova (and of most OpenStack services) answers one page at a
time.  The client asks ``?limit=N`` (at most *N* items) and
``?marker=ID`` (the items after the item *ID*, the last one of the
previous page); the page is ordered by something the marker fixes a place
in (nova: the server id, ascending, when the client asks no sort).  When a
page is full the answer links to the next one: nova's
``"servers_links": [{"rel": "next", "href": ...}]``, the same URL with
``marker`` set to the page's last id.  Clients (openstacksdk,
python-novaclient) follow that link, or send the marker themselves, until
a page comes back short.

The rules here are nova's (``nova.api.openstack.common``), decided where
nova leaves room:

``limit``
    Decimal digits only (nova's schema: ``^[0-9]*$``, at least one): no
    sign, no space, no ``1e3``, no ``1_000``.  A limit above *max_limit*
    (nova's ``[api] max_limit``, 1000 by default) is capped at it, as nova
    caps it; none at all is *max_limit* too.  ``limit=0`` is an empty page
    (nova's database layer answers ``[]``) with no next link.  Refused: a
    limit past a signed 64-bit integer (no database's ``LIMIT`` takes more;
    nova lets Python read any size and caps it).
``marker``
    A string of 1 to 255 characters (the ids :mod:`tenancy_mw.tags` stores),
    no control character.  Whether it names an item is the service's to
    say: nova answers ``400`` "marker [ID] not found".
Either, repeated
    Refused (``limit=1&limit=2``): nova's schema takes a list there and
    reads the last value; a client that sends two has a bug worth telling.
The ``next`` link
    Only when the page is full: as many items as the page's limit (the
    limit asked for, capped; *max_limit* when none was), as nova decides
    it.  A full last page gets a link too, to an empty page.  The link is
    the request's own URL, every other parameter kept as the client wrote
    it (tag filters, a parameter given twice, their order), ``marker``
    replaced where it was or added at the end.  (nova's link sorts the
    parameters and keeps one value of each.)

Nothing here imports WSGI or SQL machinery: it reads a query string or a
mapping of parameters and builds a URL.

Example, a service's list handler::

    >>> page = parse_page("tags=red&limit=2")
    >>> page
    Page(marker=None, limit=2)
    >>> ids = ["1b7f", "4c2e"]  # the page's ids, ordered, after page.marker, at most page.limit
    >>> next_link("http://compute/v2.1/acme/servers?tags=red&limit=2", ids, page)
    {'rel': 'next', 'href': 'http://compute/v2.1/acme/servers?tags=red&limit=2&marker=4c2e'}
    >>> parse_page("tags=red&limit=2&marker=4c2e")
    Page(marker='4c2e', limit=2)
    >>> parse_page("limit=ten")
    Traceback (most recent call last):
      ...
    tenancy_mw.core.paging.InvalidPage: limit 'ten' is not a whole number of items; send digits only, e.g. limit=10.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple
from urllib.parse import parse_qsl, quote, unquote_plus, urlsplit, urlunsplit

from tenancy_mw.core.paths import Refused, shorten

__all__ = [
    "DEFAULT_MAX_LIMIT",
    "MAX_LIMIT_VALUE",
    "MAX_MARKER_LENGTH",
    "InvalidPage",
    "Page",
    "next_link",
    "parse_page",
]

#: The most items of a page when the caller sets no other bound (nova's ``[api] max_limit``).
DEFAULT_MAX_LIMIT = 1000
#: The largest ``limit`` read (a signed 64-bit integer); a larger one is refused, a smaller one
#: above the page's bound capped.
MAX_LIMIT_VALUE = 2**63 - 1
#: The longest marker, in characters: the longest resource id of
#: :data:`tenancy_mw.tags.model.MAX_RESOURCE_ID_LENGTH` (and of nova's ids).
MAX_MARKER_LENGTH = 255

_DIGITS = re.compile(r"[0-9]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# More digits than this cannot be at most MAX_LIMIT_VALUE unless they start
# with zeros; longer input is refused before int() reads it.
_MAX_LIMIT_DIGITS = 64


class Page(NamedTuple):
    """One page of a list: after which item it starts, and how many items it holds at most.

    :ivar marker: the id the page starts after (``None``: the first page).
    :ivar limit: the most items on the page, ``0`` or more: the limit asked
        for, capped at the service's bound, or the bound when none was.
    """

    marker: str | None
    limit: int


class InvalidPage(Refused):
    """A ``limit`` or ``marker`` parameter that breaks a rule of :func:`parse_page` (answer ``400``).

    :ivar parameter: ``"limit"`` or ``"marker"``.
    :ivar rule: a short, stable name of the rule, e.g. ``"limit-not-a-number"``, for an error code.
    :ivar detail: a sentence for the client, naming the offending value.
    :ivar value: the offending value (a list of them when the parameter was repeated).
    """

    def __init__(self, parameter: str, rule: str, detail: str, value: object) -> None:
        super().__init__(rule, detail, value)
        self.parameter = parameter


def parse_page(params: str | Mapping, max_limit: int = DEFAULT_MAX_LIMIT) -> Page:
    """The page a list request asks for, from its query parameters; :class:`InvalidPage` if malformed.

    :param params: the query string (``environ["QUERY_STRING"]``, still
        percent-encoded), or the parameters already read: a multidict (a
        ``getall`` method, as webob's ``request.GET``) or a mapping of each
        name to its value or its list of values (:func:`urllib.parse.parse_qs`).
        Every other parameter is left alone.
    :param max_limit: the most items of a page (at least 1): a larger
        ``limit`` is capped at it, a missing one is it.

    The rules are the module's.  Examples::

        >>> parse_page("")
        Page(marker=None, limit=1000)
        >>> parse_page({"limit": "5000", "marker": "srv-1"}, max_limit=200)
        Page(marker='srv-1', limit=200)
        >>> parse_page({"limit": ["0"]})
        Page(marker=None, limit=0)
        >>> parse_page("limit=-1")
        Traceback (most recent call last):
          ...
        tenancy_mw.core.paging.InvalidPage: limit '-1' is not a whole number of items; send digits only, e.g. limit=10.
        >>> parse_page("marker=a&marker=b")
        Traceback (most recent call last):
          ...
        tenancy_mw.core.paging.InvalidPage: marker is given 2 times ('a', 'b'); give it once.
    """
    if isinstance(max_limit, bool) or not isinstance(max_limit, int) or max_limit < 1:
        raise ValueError("max_limit must be an int of 1 or more, not %r" % (max_limit,))
    limits, markers = _values(params, "limit"), _values(params, "marker")
    limit = max_limit if limits is None else min(_limit(limits), max_limit)
    return Page(None if markers is None else _marker(markers), limit)


def _values(params: str | Mapping, name: str) -> list[str] | None:
    """Every value of the parameter *name* in *params*, ``None`` when absent."""
    if isinstance(params, str):
        found = [value for key, value in parse_qsl(params, keep_blank_values=True) if key == name]
    elif hasattr(params, "getall"):
        found = list(params.getall(name))
    elif isinstance(params, Mapping):
        value = params.get(name)
        found = [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]
    else:
        raise TypeError("params must be a query string or a mapping of parameters, not %r" % (params,))
    for value in found:
        if not isinstance(value, str):
            raise TypeError("parameter %s has a value that is not a string: %r" % (name, value))
    return found or None


def _once(name: str, values: list[str]) -> str:
    if len(values) > 1:
        raise InvalidPage(
            name,
            name + "-repeated",
            "%s is given %d times (%s); give it once." % (name, len(values), shorten(", ".join(map(repr, values)))),
            values,
        )
    return values[0]


def _limit(values: list[str]) -> int:
    raw = _once("limit", values)
    if not _DIGITS.fullmatch(raw):
        raise InvalidPage(
            "limit",
            "limit-not-a-number",
            "limit %r is not a whole number of items; send digits only, e.g. limit=10." % shorten(raw),
            raw,
        )
    if len(raw) > _MAX_LIMIT_DIGITS or int(raw) > MAX_LIMIT_VALUE:
        raise InvalidPage(
            "limit",
            "limit-too-large",
            "limit %r is too large: at most %d is read (and capped at the page size)."
            % (shorten(raw), MAX_LIMIT_VALUE),
            raw,
        )
    return int(raw)


def _marker(values: list[str]) -> str:
    marker = _once("marker", values)
    if not marker:
        raise InvalidPage(
            "marker",
            "marker-empty",
            "marker is empty; send the id of the last item of the previous page, or no marker.",
            marker,
        )
    if len(marker) > MAX_MARKER_LENGTH:
        raise InvalidPage(
            "marker",
            "marker-too-long",
            "marker %r is %d characters long; an id has at most %d."
            % (shorten(marker), len(marker), MAX_MARKER_LENGTH),
            marker,
        )
    if _CONTROL.search(marker):
        raise InvalidPage(
            "marker", "marker-control-character", "marker %r contains a control character." % shorten(marker), marker
        )
    return marker


def next_link(url: str, ids: Sequence[str], page: Page) -> dict[str, str] | None:
    """The link to the page after *ids*, ``{"rel": "next", "href": ...}``, or ``None`` when *ids* is the last page.

    :param url: the request's URL, its query string as the client sent it.
    :param ids: the ids of the page's items, in the page's order (at most ``page.limit``).
    :param page: the page asked for (:func:`parse_page`).

    A link only when the page is full (``len(ids) == page.limit``, a limit
    of ``0`` never); its ``href`` is *url* with ``marker`` set to the last
    id, every other parameter kept as it was (the module's rules)::

        >>> page = parse_page("limit=2&tags-any=a,b&tags-any=c")
        >>> next_link("http://compute/v2.1/t/servers/detail?limit=2&tags-any=a,b&tags-any=c", ["x", "y"], page)["href"]
        'http://compute/v2.1/t/servers/detail?limit=2&tags-any=a,b&tags-any=c&marker=y'
        >>> next_link("http://compute/v2.1/t/servers?marker=w&limit=2", ["x", "y/z"], page)["href"]
        'http://compute/v2.1/t/servers?marker=y%2Fz&limit=2'
        >>> next_link("http://compute/v2.1/t/servers?limit=2", ["x"], page) is None
        True
    """
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of ids, not the string %r" % (ids,))
    if len(ids) > page.limit:
        raise ValueError("%d ids on a page of at most %d" % (len(ids), page.limit))
    if page.limit == 0 or len(ids) < page.limit:
        return None
    last = ids[-1]
    if not isinstance(last, str):
        raise TypeError("the last id must be a string, not %r" % (last,))
    scheme, netloc, path, query, fragment = urlsplit(url)
    marker = "marker=" + quote(last, safe="")
    kept, placed = [], False
    for piece in query.split("&"):
        if not piece:
            continue
        if unquote_plus(piece.partition("=")[0]) != "marker":
            kept.append(piece)
        elif not placed:
            kept.append(marker)
            placed = True
    if not placed:
        kept.append(marker)
    return {"rel": "next", "href": urlunsplit((scheme, netloc, path, "&".join(kept), fragment))}
