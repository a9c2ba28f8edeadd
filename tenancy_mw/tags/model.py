"""Tags: validate them, parse tag queries, match resources against a query.

Pure helpers: the standard library only, neither SQLAlchemy nor WSGI
machinery, so the ``tag_query`` filter (:mod:`tenancy_mw.tags.filter`)
runs without the ``sql`` extra.  The tag tables and the SQL condition of a
query are in :mod:`tenancy_mw.tags.sql`; the tag store
(:mod:`tenancy_mw.tags.store`) and the tag API (:mod:`tenancy_mw.tags.api`)
are built on both.

A tag (the tags spec, ``tag-instances``, and the API-WG tags guideline):

- a string of 1 to 60 **bytes** of UTF-8 (``"é" * 30`` is the longest run
  of ``é``);
- case sensitive, and compared exactly (``Red``, ``red`` and ``"red "`` are
  three tags);
- without ``/`` or ``,``.

Three rules are this library's, for the same reason as the tenant id ones
(:mod:`tenancy_mw.tenants.ids`): a tag must be usable in a URL path
(``PUT .../tags/{tag}``), and the canonical path form refuses control
characters, dot segments and double encoding there.  So a tag holding a
control character (U+0000-U+001F, U+007F), text that reads as a
percent-escape (``%2F``, ``%u0041``), or being ``.`` or ``..`` is refused
everywhere, in a body as in a query, rather than stored and then never
addressable.

Queries: the four parameters of the spec, each a comma-separated list.  By
the spec's and the guideline's words (the default, ``guideline``):

=================  ===========================  ================================
parameter          keeps a resource that has    ``a,b``
=================  ===========================  ================================
``tags``           every tag listed             a AND b
``tags-any``       at least one tag listed      a OR b
``not-tags``       none of the tags listed      NOT (a OR b)
``not-tags-any``   not all of the tags listed   NOT (a AND b)
=================  ===========================  ================================

nova and neutron shipped the two ``not-`` parameters the other way round
(``not-tags=a,b`` is NOT (a AND b) there).  ``not_tags_semantics="nova"``
reads them that way, for services whose clients expect nova's answers.

A parameter given several times is merged into one list (openstacksdk sends
a Python list as repeated parameters; neutron merges them too).  Parameters
combine with AND.  A contradictory query (``tags=blue&not-tags=blue``) is
valid and matches nothing.

Example::

    >>> q = parse_tag_query("tags=red,blue&not-tags=old")
    >>> sorted(q.tags), sorted(q.not_tags)
    (['blue', 'red'], ['old'])
    >>> q.matches({"red", "blue", "new"}), q.matches({"red", "blue", "old"})
    (True, False)
    >>> parse_tag_query("tags=a/b")
    Traceback (most recent call last):
      ...
    tenancy_mw.tags.model.InvalidTagQuery: Tag 'a/b' in parameter tags contains '/', ...

In SQL (with the ``sql`` extra), :meth:`TagQuery.where` gives a WHERE
clause for the caller's own query, over the tag table of
:func:`tenancy_mw.tags.sql.define_tables`::

    servers_page = q.apply(sa.select(servers).order_by(servers.c.id).limit(50),
                           servers.c.id)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote_to_bytes

from tenancy_mw.core.paths import Refused, shorten

if TYPE_CHECKING:
    from tenancy_mw.core.sql import sa
    from tenancy_mw.tags.sets import TagSets

__all__ = [
    "EMPTY_QUERY",
    "MAX_QUERY_TAGS",
    "MAX_RESOURCE_ID_LENGTH",
    "MAX_TAG_BYTES",
    "PARAMETERS",
    "SEMANTICS",
    "InvalidTag",
    "InvalidTagQuery",
    "TagQuery",
    "parse_tag_query",
    "validate_tag",
]

#: Names this module held (``tenancy_mw.tags`` before 0.2.0) that are
#: :mod:`tenancy_mw.tags.sql`'s now: still found here for one release, with
#: a warning (:func:`__getattr__`).
MOVED_TO_SQL = frozenset(
    {
        "GROUPED_ANY_BESIDE",
        "GROUPED_ANY_MAX",
        "GROUPED_ANY_REQUIRED_MAX",
        "GROUPED_ANY_SMALL",
        "GROUPED_MIN_CANDIDATES",
        "TAGS",
        "TAG_COUNT_CAP",
        "TAG_LOCKS",
        "TAG_LOCK_TABLE",
        "TAG_TABLE",
        "TagStatistics",
        "TagTables",
        "count_tags",
        "define_tables",
        "tag_statistics",
        "_METADATA",
        "_STATISTICS_SQL",
        "_DialectVariant",
        "_any_is_small",
        "_check_candidates",
        "_compile_dialect_variant",
        "_count",
        "_count_of",
        "_has_any",
        "_has_tag",
        "_in_grouped",
        "_is_count",
    }
)

#: The spec's limit on a tag, in bytes of UTF-8.
MAX_TAG_BYTES = 60
#: Longest resource id the tag table holds, in characters.
MAX_RESOURCE_ID_LENGTH = 255
#: The query parameters, in the order of :class:`TagQuery`'s fields.
PARAMETERS = ("tags", "tags-any", "not-tags", "not-tags-any")
#: Values of ``not_tags_semantics``.
SEMANTICS = ("guideline", "nova")
#: Most tags one query may name, all parameters together (default of the
#: ``tag_query`` filter's ``max_query_tags``): each is a subquery in SQL.
MAX_QUERY_TAGS = 50

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Printable ASCII but '/', ',' and '%', 1 to 60 characters: valid at a glance.
_PLAIN_TAG = re.compile(r"[ -$&-+\-.0-~]{1,60}")
_PLAIN_LIST = re.compile(r"[ -$&-+\-.0-~]{1,60}(?:,[ -$&-+\-.0-~]{1,60})*")
_ESCAPE_TEXT = re.compile(r"%(?:[0-9A-Fa-f]{2}|[Uu][0-9A-Fa-f]{4})")
_FIELDS = {"tags": "tags", "tags-any": "tags_any", "not-tags": "not_tags", "not-tags-any": "not_tags_any"}


class InvalidTag(Refused):
    """A tag that breaks a rule.

    Its ``rule`` is one of ``"not-a-string"``, ``"empty"``, ``"too-long"``,
    ``"slash"``, ``"comma"``, ``"control-character"``, ``"percent-escape"``,
    ``"dot-segment"``, ``"not-unicode"``.
    """


class InvalidTagQuery(Refused):
    """A tag query parameter that cannot be read.

    :ivar parameter: the parameter (``"tags"``, ...) it was found in.
    """

    def __init__(self, rule: str, detail: str, value: object, parameter: str) -> None:
        super().__init__(rule, detail, value)
        self.parameter = parameter


def validate_tag(tag: object, where: str = "") -> str:
    """Return *tag* if it is a valid tag, else raise :class:`InvalidTag`.

    *where* is added to the message after the tag (``"in parameter tags"``).

    Example::

        >>> validate_tag("Red ")
        'Red '
        >>> validate_tag("x" * 61)
        Traceback (most recent call last):
          ...
        tenancy_mw.tags.model.InvalidTag: Tag 'xxx...' is 61 bytes of UTF-8; at most 60 are allowed.
    """
    if type(tag) is str and _PLAIN_TAG.fullmatch(tag) and tag != "." and tag != "..":
        return tag
    at = (" " + where) if where else ""
    if not isinstance(tag, str):
        raise InvalidTag("not-a-string", "Tag %s%s is not a string." % (shorten(repr(tag)), at), tag)
    if not tag:
        raise InvalidTag("empty", "An empty tag%s: a tag has 1 to %d bytes." % (at, MAX_TAG_BYTES), tag)
    try:
        size = len(tag.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidTag(
            "not-unicode", "Tag %r%s is not valid Unicode (a lone surrogate)." % (shorten(tag), at), tag
        ) from None
    if size > MAX_TAG_BYTES:
        raise InvalidTag(
            "too-long",
            "Tag %r%s is %d bytes of UTF-8; at most %d are allowed." % (shorten(tag, 20), at, size, MAX_TAG_BYTES),
            tag,
        )
    if "/" in tag:
        raise InvalidTag("slash", "Tag %r%s contains '/', which no tag may contain." % (shorten(tag), at), tag)
    if "," in tag:
        raise InvalidTag(
            "comma",
            "Tag %r%s contains ',', which no tag may contain (it separates tags in a list)." % (shorten(tag), at),
            tag,
        )
    if not tag.isprintable() and _CONTROL.search(tag):
        raise InvalidTag("control-character", "Tag %r%s contains a control character." % (shorten(tag), at), tag)
    if "%" in tag and _ESCAPE_TEXT.search(tag):
        raise InvalidTag(
            "percent-escape",
            "Tag %r%s contains text that reads as a percent-escape; it could not be used in a URL path."
            % (shorten(tag), at),
            tag,
        )
    if tag in (".", ".."):
        raise InvalidTag("dot-segment", "Tag %r%s cannot be used in a URL path (a dot segment)." % (tag, at), tag)
    return tag


class TagQuery(NamedTuple):
    """A parsed tag query: what the four parameters asked for.

    The fields hold what each parameter held, whatever the semantics:
    ``tags`` the tags of ``tags=``, ``not_tags`` those of ``not-tags=``, and
    so on, as frozensets of ``str``.  ``semantics`` says how the two ``not-``
    fields are read (``"guideline"`` or ``"nova"``, see the module doc);
    :meth:`matches` and :meth:`where` follow it.

    The empty query (no parameters) matches every resource.
    """

    tags: frozenset = frozenset()
    tags_any: frozenset = frozenset()
    not_tags: frozenset = frozenset()
    not_tags_any: frozenset = frozenset()
    semantics: str = "guideline"

    def __bool__(self) -> bool:
        """True when the query has at least one tag parameter."""
        return bool(self.tags or self.tags_any or self.not_tags or self.not_tags_any)

    def conditions(self) -> tuple[frozenset, frozenset, frozenset, frozenset]:
        """The query as ``(all_of, any_of, none_of, not_all_of)``, whatever the semantics.

        A resource passes when it has every tag of *all_of*, at least one of
        *any_of* (when not empty), none of *none_of*, and lacks at least one
        of *not_all_of* (when not empty).
        """
        if self.semantics == "nova":
            return self.tags, self.tags_any, self.not_tags_any, self.not_tags
        return self.tags, self.tags_any, self.not_tags, self.not_tags_any

    def matches(self, tags: Iterable[str]) -> bool:
        """Whether a resource with *tags* passes the query.

        Example::

            >>> q = TagQuery(not_tags_any=frozenset({"a", "b"}))
            >>> q.matches(["a"]), q.matches(["a", "b"])
            (True, False)
        """
        if isinstance(tags, (set, frozenset)):
            have = tags
        elif isinstance(tags, (str, bytes)):
            # Iterable too: "red" would be read as the tags r, e and d.
            raise TypeError("matches() takes an iterable of tags, not a string (%s)" % shorten(repr(tags)))
        else:
            have = frozenset(tags)
        all_of, any_of, none_of, not_all_of = self.conditions()
        if all_of and not all_of <= have:
            return False
        if any_of and any_of.isdisjoint(have):
            return False
        if none_of and not none_of.isdisjoint(have):
            return False
        if not_all_of and not_all_of <= have:
            return False
        return True

    def simplified(self) -> tuple[frozenset, frozenset, frozenset, frozenset] | None:
        """:meth:`conditions` with what follows from the others left out; ``None`` if nothing can match.

        - a tag both required and excluded: nothing matches;
        - *any_of* met by a required tag, or *not_all_of* met by an excluded
          tag: that condition goes;
        - excluded tags cannot meet *any_of*: they leave it (nothing matches
          if none is left); required tags cannot help meet *not_all_of*:
          they leave it (nothing matches if none is left);
        - *any_of* of one tag is a required tag; *not_all_of* of one tag is
          an excluded tag.
        """
        all_of, any_of, none_of, not_all_of = self.conditions()
        if not all_of.isdisjoint(none_of):
            return None
        if any_of:
            if not any_of.isdisjoint(all_of):
                any_of = frozenset()
            else:
                any_of = any_of - none_of
                if not any_of:
                    return None
        if not_all_of:
            if not not_all_of.isdisjoint(none_of):
                not_all_of = frozenset()
            else:
                not_all_of = not_all_of - all_of
                if not not_all_of:
                    return None
        if len(any_of) == 1:
            all_of, any_of = all_of | any_of, frozenset()
        if len(not_all_of) == 1:
            none_of, not_all_of = none_of | not_all_of, frozenset()
        return all_of, any_of, none_of, not_all_of

    def where(
        self,
        resource_id: sa.ColumnElement,
        tags: sa.Table | None = None,
        counts: Mapping[str, int] | None = None,
        candidates: int | None = None,
        *,
        marker: str | None = None,
        limit: int | None = None,
        sets: TagSets | None = None,
    ) -> sa.ColumnElement:
        """A SQL condition, true for the resources that pass the query (needs the ``sql`` extra).

        :param resource_id: the resource id column of the caller's query
            (``servers.c.id``).
        :param tags: the tag table (default
            :data:`tenancy_mw.tags.sql.TAGS`).
        :param counts: how many resources carry each tag of the query; it
            only shapes the SQL of PostgreSQL (with *candidates*) and of
            MySQL/MariaDB, never the rows found.
        :param candidates: about how many rows the caller's query selects
            before this condition (``None`` for a tenant's own list).
        :param marker: the page starts after this resource id (the page
            ordered by *resource_id*, ascending); the condition then holds
            only for the ids after it.
        :param limit: the page's size (the statement's ``LIMIT``), when
            known; it may shape PostgreSQL's SQL of the page, never the
            rows found.
        :param sets: the tag set table and its rows, only while its
            triggers keep it in step (:func:`tenancy_mw.tags.sets.read_tag_sets`);
            it may shape PostgreSQL's SQL, never the rows found.

        :func:`tenancy_mw.tags.sql.tag_condition` of this query, where the
        parameters and the SQL are described: ``EXISTS`` and ``NOT EXISTS``
        subqueries, never a join, so ``LIMIT`` counts resources.
        """
        # Imported here: the query model itself needs no SQLAlchemy.
        from tenancy_mw.tags.sql import tag_condition

        return tag_condition(self, resource_id, tags, counts, candidates, marker=marker, limit=limit, sets=sets)

    def apply(
        self,
        statement: sa.Select,
        resource_id: sa.ColumnElement,
        tags: sa.Table | None = None,
        counts: Mapping[str, int] | None = None,
        candidates: int | None = None,
        *,
        marker: str | None = None,
        limit: int | None = None,
        sets: TagSets | None = None,
    ) -> sa.Select:
        """A new statement: *statement* with :meth:`where` added; *statement* itself is unchanged.

        The empty query without a *marker* returns *statement* as it is.
        """
        if not self and marker is None:
            return statement
        condition = self.where(resource_id, tags, counts, candidates, marker=marker, limit=limit, sets=sets)
        return statement.where(condition)

    def tags_to_count(self) -> frozenset[str]:
        """The tags whose counts :meth:`where` reads: ``frozenset()`` when none matters.

        Those of ``tags`` and ``tags-any`` (after :meth:`simplified`), when a
        ``tags-any`` of two tags or more is left; a service fetches their
        counts (:func:`count_tags`) only then.
        """
        simple = self.simplified()
        if simple is None or not simple[1]:
            return frozenset()
        return simple[0] | simple[1]


#: The query of a request without tag parameters (guideline semantics): matches everything.
EMPTY_QUERY = TagQuery()
_NONE: frozenset = frozenset()


def parse_tag_query(
    query: str | bytes | Mapping[str, str | Iterable[str]],
    not_tags_semantics: str = "guideline",
    max_tags: int | None = MAX_QUERY_TAGS,
) -> TagQuery:
    """Read the four tag parameters from *query*; raise :class:`InvalidTagQuery` on a bad one.

    :param query: a URL query string (a WSGI ``QUERY_STRING``: percent-encoded,
        UTF-8 once decoded; ``+`` is a space), or a mapping of parameter name
        to a comma-separated string or a list of them (a multidict such as
        webob's ``req.GET`` too: a repeated parameter is merged).  Other
        parameters are ignored.
    :param not_tags_semantics: ``"guideline"`` or ``"nova"`` (module doc).
    :param max_tags: most tags all parameters may name together (``None``:
        no limit); each is a subquery in SQL.

    Every item is checked: an empty one (``tags=``, ``tags=a,,b``), a tag
    over 60 bytes, one with ``/`` or the other refusals of
    :func:`validate_tag` is an error naming the tag, the parameter and the
    rule.

    Example::

        >>> parse_tag_query("tags=a&tags=b,c").tags == {"a", "b", "c"}
        True
        >>> parse_tag_query({"not-tags": ["x", "y"]}, "nova").conditions()[3] == {"x", "y"}
        True
    """
    if not_tags_semantics not in SEMANTICS:
        raise ValueError("not_tags_semantics must be one of %s, not %r" % (", ".join(SEMANTICS), not_tags_semantics))
    if isinstance(query, (str, bytes)):
        text = query if isinstance(query, str) else query.decode("latin-1")
        if "tags" not in text and "%" not in text:
            # No tag parameter can be in it (an encoded name holds a '%').
            return EMPTY_QUERY if not_tags_semantics == "guideline" else TagQuery(semantics=not_tags_semantics)
        found = _values_in_string(query)
    else:
        found = _values_in_mapping(query)
    fields = {_FIELDS[name]: _parameter_tags(name, values) for name, values in found.items()}
    _check_total(fields, max_tags)
    return TagQuery(
        fields.get("tags", _NONE),
        fields.get("tags_any", _NONE),
        fields.get("not_tags", _NONE),
        fields.get("not_tags_any", _NONE),
        not_tags_semantics,
    )


def _values_in_mapping(query: Mapping[str, str | Iterable[str]]) -> dict[str, list[str]]:
    """``{parameter: [value, ...]}`` of the tag parameters of a mapping or multidict."""
    found: dict[str, list[str]] = {}
    # items(), not a dict's keys: a multidict (webob's req.GET) yields a
    # repeated parameter once per value, and every value counts.
    for name, value in query.items():
        if name not in _FIELDS:
            continue
        values = [value] if isinstance(value, str) else value
        if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
            values = [value]
        for item in values:
            if not isinstance(item, str):
                raise InvalidTagQuery(
                    "not-a-string", "Parameter %s holds %s, not a string." % (name, shorten(repr(item))), item, name
                )
            found.setdefault(name, []).append(item)
    return found


def _parameter_tags(name: str, values: list[str]) -> frozenset:
    """The tags of one parameter (strings), its repeated values merged; :class:`InvalidTagQuery` for a bad one."""
    joined = values[0] if len(values) == 1 else ",".join(values)
    tags = frozenset(joined.split(","))
    # One regular expression for the whole list; item by item only when
    # it finds something to refuse (or a '.' that could be a dot segment).
    if not _PLAIN_LIST.fullmatch(joined) or ("." in joined and ("." in tags or ".." in tags)):
        _check_items(joined, name)
    return tags


def _check_total(fields: Mapping[str, frozenset], max_tags: int | None) -> None:
    """:class:`InvalidTagQuery` when the parameters name more than *max_tags* tags together."""
    total = sum(len(tags) for tags in fields.values())
    if max_tags is not None and total > max_tags:
        raise InvalidTagQuery(
            "too-many-tags",
            "The query names %d tags in tags, tags-any, not-tags and not-tags-any together; at most %d are allowed."
            % (total, max_tags),
            total,
            ",".join(name for name in PARAMETERS if _FIELDS[name] in fields),
        )


def _check_items(joined: str, name: str) -> None:
    """Check each tag of a comma-separated list; :class:`InvalidTagQuery` names the first bad one."""
    for item in joined.split(","):
        try:
            validate_tag(item)
        except InvalidTag:
            try:
                validate_tag(item, "in parameter %s" % name)
            except InvalidTag as exc:
                raise InvalidTagQuery(exc.rule, exc.detail, item, name) from None


def _values_in_string(query: str | bytes) -> dict[str, list[str]]:
    """``{parameter: [value, ...]}`` of the tag parameters of a query string, decoded, in the order found.

    Other parameters are skipped undecoded: they are the service's business.
    Decoding is form decoding (``+`` is a space, ``%XX`` a byte), then UTF-8.
    """
    # A WSGI QUERY_STRING is the raw bytes as latin-1 text (PEP 3333).
    text = query.decode("latin-1") if isinstance(query, bytes) else query
    found: dict[str, list[str]] = {}
    for part in text.split("&"):
        name, _, value = part.partition("=")
        if name not in _FIELDS:
            if "%" not in name and "+" not in name:
                continue
            try:
                name = _form_decode(name)
            except UnicodeDecodeError:
                continue
            if name not in _FIELDS:
                continue
        if "%" in value or "+" in value or not value.isascii():
            try:
                value = _form_decode(value)
            except UnicodeDecodeError:
                raise InvalidTagQuery(
                    "invalid-utf8",
                    "Parameter %s is not valid UTF-8 once percent-decoded: %r." % (name, shorten(value)),
                    value,
                    name,
                ) from None
        found.setdefault(name, []).append(value)
    return found


def _form_decode(text: str) -> str:
    """``+`` to space, ``%XX`` to bytes, latin-1 text to bytes, all read as UTF-8 (strictly)."""
    try:
        raw = text.replace("+", " ").encode("latin-1")
    except UnicodeEncodeError:
        # Text a caller already decoded (not a WSGI QUERY_STRING).
        raw = text.replace("+", " ").encode("utf-8", "surrogatepass")
    return unquote_to_bytes(raw).decode("utf-8")


def __getattr__(name: str) -> Any:
    """A name this module held, from :mod:`tenancy_mw.tags.sql`, with a :class:`DeprecationWarning`."""
    if name not in MOVED_TO_SQL:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    from tenancy_mw._moved import warn_moved
    from tenancy_mw.tags import sql

    warn_moved("tenancy_mw.tags.model.%s" % name, "tenancy_mw.tags.sql.%s" % name)
    return getattr(sql, name)
