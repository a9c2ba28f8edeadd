"""Tags: validate them, parse tag queries, filter resources by tag in Python or in SQL.

Pure helpers: SQLAlchemy Core and the standard library, no WSGI machinery.
The ``tag_query`` filter (:mod:`tenancy_mw.tag_query`), the tag store
(:mod:`tenancy_mw.tag_store`) and the tag API (:mod:`tenancy_mw.tag_api`)
are built on them.

A tag (the tags spec, ``tag-instances``, and the API-WG tags guideline):

- a string of 1 to 60 **bytes** of UTF-8 (``"é" * 30`` is the longest run
  of ``é``);
- case sensitive, and compared exactly (``Red``, ``red`` and ``red `` are
  three tags);
- without ``/`` or ``,``.

Three rules are this library's, for the same reason as the tenant id ones
(:mod:`tenancy_mw.tenant_ids`): a tag must be usable in a URL path
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
    tenancy_mw.tags.InvalidTagQuery: Tag 'a/b' in parameter tags contains '/', ...

In SQL, :meth:`TagQuery.where` gives a WHERE clause for the caller's own
query, over the tag table of :func:`define_tables`::

    servers_page = q.apply(sa.select(servers).order_by(servers.c.id).limit(50),
                           servers.c.id)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple
from urllib.parse import unquote_to_bytes

from tenancy_mw.extras import missing_extra

try:
    import sqlalchemy as sa
    from sqlalchemy.ext.compiler import compiles
    from sqlalchemy.sql.expression import ColumnElement
except ImportError as exc:
    raise missing_extra("sql", __name__, exc) from exc

from tenancy_mw.paths import Refused, shorten
from tenancy_mw.sql import ExactString, is_mysql, table_options

__all__ = [
    "EMPTY_QUERY",
    "MAX_QUERY_TAGS",
    "MAX_RESOURCE_ID_LENGTH",
    "MAX_TAG_BYTES",
    "PARAMETERS",
    "SEMANTICS",
    "TAGS",
    "TAG_LOCKS",
    "InvalidTag",
    "InvalidTagQuery",
    "TagQuery",
    "TagTables",
    "define_tables",
    "parse_tag_query",
    "validate_tag",
]

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

TAG_TABLE = "tenancy_mw_tags"
TAG_LOCK_TABLE = "tenancy_mw_tag_locks"

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
        tenancy_mw.tags.InvalidTag: Tag 'xxx...' is 61 bytes of UTF-8; at most 60 are allowed.
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


# Tables ------------------------------------------------------------------


class TagTables(NamedTuple):
    """The tag table and its lock table, as defined on one ``MetaData``."""

    tags: sa.Table
    locks: sa.Table


def define_tables(metadata: sa.MetaData) -> TagTables:
    """Define the tag tables on *metadata* (for a service's own ``create_all``).

    ``tenancy_mw_tags`` holds one row per (resource id, tag): the unique
    pair is its primary key, and a second index on (tag, resource id) serves
    the queries that start from a tag.  Both columns compare exactly on
    every backend (:class:`~tenancy_mw.sql.ExactString`), so ``Foo`` and
    ``foo`` are two tags on MariaDB too.

    ``tenancy_mw_tag_locks`` holds one row per resource whose tags were
    ever written: writers lock it (``SELECT ... FOR UPDATE``) so that two
    requests adding tags to one resource at once never pass the limit
    together (:mod:`tenancy_mw.tag_store`).

    The Alembic component ``tags`` (``tenancy-mw-manage db upgrade
    --component tags``) builds the same tables; a test checks they match.
    """
    tags = sa.Table(  # type: ignore[call-overload]
        TAG_TABLE,
        metadata,
        sa.Column("resource_id", ExactString(MAX_RESOURCE_ID_LENGTH), primary_key=True),
        # 60 characters hold any 60 bytes; the byte limit is checked before.
        sa.Column("tag", ExactString(MAX_TAG_BYTES), primary_key=True),
        sa.Index("ix_tenancy_mw_tags_tag_resource", "tag", "resource_id"),
        **table_options(),
    )
    locks = sa.Table(  # type: ignore[call-overload]
        TAG_LOCK_TABLE,
        metadata,
        sa.Column("resource_id", ExactString(MAX_RESOURCE_ID_LENGTH), primary_key=True),
        **table_options(),
    )
    return TagTables(tags, locks)


_METADATA = sa.MetaData()
#: The tag table, on a ``MetaData`` of this module (the default of every helper).
TAGS, TAG_LOCKS = define_tables(_METADATA)


# Queries -----------------------------------------------------------------


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

    def where(self, resource_id: sa.ColumnElement, tags: sa.Table | None = None) -> sa.ColumnElement:
        """A SQL condition, true for the resources that pass the query.

        :param resource_id: the resource id column of the caller's query
            (``servers.c.id``); its values are the tag table's
            ``resource_id`` (compare them as the same type: a string column,
            :class:`~tenancy_mw.sql.ExactString` on MariaDB for index use).
        :param tags: the tag table (default :data:`TAGS`).

        Every condition is an ``EXISTS``, ``NOT EXISTS`` or scalar count
        subquery over its own alias of the tag table, correlated to
        *resource_id*, never a join: a resource is one row of the result
        however many tags match, so ``LIMIT`` and pagination count
        resources.  Nothing is added to the caller's query; use the
        condition in ``.where()`` (which returns a new statement), or
        :meth:`apply`.

        The formulation, after :meth:`simplified` (a contradiction is
        ``false`` without a subquery), measured against one ``EXISTS`` per
        tag in ``bench/tags.py``:

        - each required tag: its own ``EXISTS`` (the database starts from the
          rarest one, a unique index lookup);
        - ``any_of``: one ``EXISTS (... tag IN (...))``, one semi-join where
          an ``OR`` of subqueries is one probe per tag and row.  Next to a
          required tag, MySQL/MariaDB keep one ``EXISTS`` per tag: their
          optimizer materialises each tag's ids once and checks the
          required tag's candidates against them, faster than the
          semi-join;
        - each excluded tag: its own ``NOT EXISTS`` (an anti-join that reads
          the (tag, resource id) index in resource order; one ``NOT EXISTS``
          over an ``IN`` list cannot, and measured slower);
        - ``not_all_of`` of three tags or more:
          ``(SELECT count(*) ... tag IN (...)) < n``, one index range probe
          where PostgreSQL's plan for an ``OR`` of three ``NOT EXISTS`` is
          twenty times slower; of two tags, and on MySQL/MariaDB, one
          ``NOT EXISTS`` per tag (measured as fast).
        """
        table = TAGS if tags is None else tags
        simple = self.simplified()
        if simple is None:
            return sa.false()
        all_of, any_of, none_of, not_all_of = simple
        clauses = [_has_tag(table, resource_id, tag) for tag in sorted(all_of)]
        if any_of:
            semi_join = _has_any(table, resource_id, any_of)
            if all_of:
                has_one = sa.or_(*[_has_tag(table, resource_id, tag) for tag in sorted(any_of)])
                semi_join = _MySQLVariant(has_one, semi_join)  # type: ignore[assignment]
            clauses.append(semi_join)
        clauses += [sa.not_(_has_tag(table, resource_id, tag)) for tag in sorted(none_of)]  # type: ignore[misc]
        if not_all_of:
            lacks_one = sa.or_(*[sa.not_(_has_tag(table, resource_id, tag)) for tag in sorted(not_all_of)])
            if len(not_all_of) > 2:
                lacks_one = _MySQLVariant(lacks_one, _count(table, resource_id, not_all_of) < len(not_all_of))
            clauses.append(lacks_one)  # type: ignore[arg-type]
        if not clauses:
            return sa.true()
        return sa.and_(*clauses)

    def apply(self, statement: sa.Select, resource_id: sa.ColumnElement, tags: sa.Table | None = None) -> sa.Select:
        """A new statement: *statement* with :meth:`where` added; *statement* itself is unchanged.

        The empty query returns *statement* as it is.
        """
        if not self:
            return statement
        return statement.where(self.where(resource_id, tags))


def _has_tag(table: sa.Table, resource_id: sa.ColumnElement, tag: str) -> sa.Exists:
    """``EXISTS (the row (resource_id, tag))``."""
    alias = table.alias()
    return sa.exists().where(alias.c.resource_id == resource_id, alias.c.tag == tag).correlate_except(alias)


def _has_any(table: sa.Table, resource_id: sa.ColumnElement, tags: Iterable[str]) -> sa.Exists:
    """``EXISTS (a row of resource_id with one of tags)``."""
    alias = table.alias()
    tags = sorted(tags)
    match = alias.c.tag == tags[0] if len(tags) == 1 else alias.c.tag.in_(tags)
    return sa.exists().where(alias.c.resource_id == resource_id, match).correlate_except(alias)


def _count(table: sa.Table, resource_id: sa.ColumnElement, tags: Iterable[str]) -> sa.ScalarSelect:
    """``(SELECT count(*) of the rows of resource_id with one of tags)``."""
    alias = table.alias()
    return (
        sa.select(sa.func.count())
        .select_from(alias)
        .where(alias.c.resource_id == resource_id, alias.c.tag.in_(sorted(tags)))
        .correlate_except(alias)
        .scalar_subquery()
    )


class _MySQLVariant(ColumnElement):
    """A boolean condition written one way for MySQL/MariaDB and another for every other database.

    Both forms mean the same; which one a database's optimizer runs faster
    is measured in ``bench/tags.py``.  Statements holding it are not cached
    by SQLAlchemy (they are cheap to compile).
    """

    inherit_cache = False
    # Not Boolean: a database without a boolean type would compare it to 1,
    # which keeps MySQL/MariaDB from materialising the subqueries inside.
    type = sa.types.NullType()

    def __init__(self, mysql_form: sa.ColumnElement, other_form: sa.ColumnElement) -> None:
        self.mysql_form = mysql_form
        self.other_form = other_form

    def get_children(self, **kwargs):
        return [self.mysql_form, self.other_form]


@compiles(_MySQLVariant)
def _compile_mysql_variant(element: _MySQLVariant, compiler, **kwargs) -> str:
    chosen = element.mysql_form if is_mysql(compiler.dialect) else element.other_form
    # Grouped: it stands as one condition among the ANDed others.
    return compiler.process(chosen.self_group(), **kwargs)


#: The query of a request without tag parameters (guideline semantics): matches everything.
EMPTY_QUERY = TagQuery()


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
    found: dict[str, list[str]] = {}
    if isinstance(query, (str, bytes)):
        text = query if isinstance(query, str) else query.decode("latin-1")
        if "tags" not in text and "%" not in text:
            # No tag parameter can be in it (an encoded name holds a '%').
            return EMPTY_QUERY if not_tags_semantics == "guideline" else TagQuery(semantics=not_tags_semantics)
        for name, value in _query_pairs(query):
            if name in _FIELDS:
                found.setdefault(name, []).append(value)
    else:
        # items(), not a dict's keys: a multidict (webob's req.GET) yields a
        # repeated parameter once per value, and every value counts.
        for name, value in query.items():  # type: ignore[assignment]
            if name in _FIELDS:
                if isinstance(value, str):
                    found.setdefault(name, []).append(value)
                elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
                    found.setdefault(name, []).extend(value)
                else:
                    raise InvalidTagQuery(
                        "not-a-string",
                        "Parameter %s holds %s, not a string." % (name, shorten(repr(value))),
                        value,
                        name,
                    )
    fields = {}
    total = 0
    for name, values in found.items():
        for value in values:
            if not isinstance(value, str):
                raise InvalidTagQuery(
                    "not-a-string", "Parameter %s holds %s, not a string." % (name, shorten(repr(value))), value, name
                )
        joined = values[0] if len(values) == 1 else ",".join(values)
        tags = frozenset(joined.split(","))
        # One regular expression for the whole list; item by item only when
        # it finds something to refuse (or a '.' that could be a dot segment).
        if not _PLAIN_LIST.fullmatch(joined) or ("." in joined and ("." in tags or ".." in tags)):
            _check_items(joined, name)
        total += len(tags)
        fields[_FIELDS[name]] = tags
    if max_tags is not None and total > max_tags:
        raise InvalidTagQuery(
            "too-many-tags",
            "The query names %d tags in tags, tags-any, not-tags and not-tags-any together; at most %d are allowed."
            % (total, max_tags),
            total,
            ",".join(n for n in PARAMETERS if n in found),
        )
    return TagQuery(
        fields.get("tags", _NONE),
        fields.get("tags_any", _NONE),
        fields.get("not_tags", _NONE),
        fields.get("not_tags_any", _NONE),
        not_tags_semantics,
    )


_NONE: frozenset = frozenset()


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


def _query_pairs(query: str | bytes) -> list[tuple[str, str]]:
    """The decoded ``(name, value)`` pairs of the tag parameters of a query string.

    Other parameters are skipped undecoded: they are the service's business.
    Decoding is form decoding (``+`` is a space, ``%XX`` a byte), then UTF-8.
    """
    # A WSGI QUERY_STRING is the raw bytes as latin-1 text (PEP 3333).
    text = query.decode("latin-1") if isinstance(query, bytes) else query
    pairs = []
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
        pairs.append((name, value))
    return pairs


def _form_decode(text: str) -> str:
    """``+`` to space, ``%XX`` to bytes, latin-1 text to bytes, all read as UTF-8 (strictly)."""
    try:
        raw = text.replace("+", " ").encode("latin-1")
    except UnicodeEncodeError:
        # Text a caller already decoded (not a WSGI QUERY_STRING).
        raw = text.replace("+", " ").encode("utf-8", "surrogatepass")
    return unquote_to_bytes(raw).decode("utf-8")
