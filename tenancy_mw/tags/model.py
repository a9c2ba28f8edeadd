"""Tags: validate them, parse tag queries, filter resources by tag in Python or in SQL.

Pure helpers: SQLAlchemy Core and the standard library, no WSGI machinery.
The ``tag_query`` filter (:mod:`tenancy_mw.tags.filter`), the tag store
(:mod:`tenancy_mw.tags.store`) and the tag API (:mod:`tenancy_mw.tags.api`)
are built on them.

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

In SQL, :meth:`TagQuery.where` gives a WHERE clause for the caller's own
query, over the tag table of :func:`define_tables`::

    servers_page = q.apply(sa.select(servers).order_by(servers.c.id).limit(50),
                           servers.c.id)
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple
from urllib.parse import unquote_to_bytes

from tenancy_mw.extras import missing_extra

try:
    import sqlalchemy as sa
    from sqlalchemy.ext.compiler import compiles
    from sqlalchemy.sql.expression import ColumnElement
    from sqlalchemy.sql.visitors import InternalTraversal
except ImportError as exc:
    raise missing_extra("sql", __name__, exc) from exc

from tenancy_mw.core.paths import Refused, shorten
from tenancy_mw.core.sql import ExactString, is_mysql, table_options

__all__ = [
    "EMPTY_QUERY",
    "GROUPED_ANY_BESIDE",
    "GROUPED_ANY_MAX",
    "GROUPED_ANY_REQUIRED_MAX",
    "GROUPED_ANY_SMALL",
    "GROUPED_MIN_CANDIDATES",
    "MAX_QUERY_TAGS",
    "MAX_RESOURCE_ID_LENGTH",
    "MAX_TAG_BYTES",
    "PARAMETERS",
    "SEMANTICS",
    "TAGS",
    "TAG_COUNT_CAP",
    "TAG_LOCKS",
    "InvalidTag",
    "InvalidTagQuery",
    "TagQuery",
    "TagStatistics",
    "TagTables",
    "count_tags",
    "tag_statistics",
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
#: On PostgreSQL, given tag counts and at least :data:`GROUPED_MIN_CANDIDATES`
#: candidate rows, ``tags-any`` is one grouped ``IN`` (its resource ids
#: sorted once) rather than a semi-join when its tags are on at most
#: :data:`GROUPED_ANY_SMALL` rows together; next to required tags (the
#: rarest on at least half as many rows), at most :data:`GROUPED_ANY_BESIDE`;
#: or at most this many and fewer than the rarest required tag's, itself on
#: at most :data:`GROUPED_ANY_REQUIRED_MAX` (:meth:`TagQuery.where`).  The
#: numbers come from ``bench/tags.py --sweep`` (``bench/README.rst``).
GROUPED_ANY_MAX = 100_000
#: See :data:`GROUPED_ANY_MAX`.
GROUPED_ANY_SMALL = 30_000
#: See :data:`GROUPED_ANY_MAX`.
GROUPED_ANY_BESIDE = 45_000
#: See :data:`GROUPED_ANY_MAX`.
GROUPED_ANY_REQUIRED_MAX = 200_000
#: Fewest rows the caller's query must select before the tag condition for
#: the grouped form to be considered: the semi-join probes each candidate,
#: which beats reading a whole tag set when candidates are few (a tenant's
#: own list), and loses when the page walks a large collection.
GROUPED_MIN_CANDIDATES = 100_000
#: Default most rows :func:`count_tags` reads per tag: what the choice of
#: :meth:`TagQuery.where` needs to know, and no more.
TAG_COUNT_CAP = GROUPED_ANY_REQUIRED_MAX + 1


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
    every backend (:class:`~tenancy_mw.core.sql.ExactString`), so ``Foo`` and
    ``foo`` are two tags on MariaDB too.

    ``tenancy_mw_tag_locks`` holds one row per resource whose tags were
    ever written: writers lock it (``SELECT ... FOR UPDATE``) so that two
    requests adding tags to one resource at once never pass the limit
    together (:mod:`tenancy_mw.tags.store`).

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

    def where(
        self,
        resource_id: sa.ColumnElement,
        tags: sa.Table | None = None,
        counts: Mapping[str, int] | None = None,
        candidates: int | None = None,
    ) -> sa.ColumnElement:
        """A SQL condition, true for the resources that pass the query.

        :param resource_id: the resource id column of the caller's query
            (``servers.c.id``); its values are the tag table's
            ``resource_id`` (compare them as the same type: a string column,
            :class:`~tenancy_mw.core.sql.ExactString` on MariaDB for index use).
        :param tags: the tag table (default :data:`TAGS`).
        :param counts: how many resources carry each tag of the query
            (:meth:`TagStatistics.counts`, :func:`count_tags`; a count at
            the cap of :func:`count_tags` reads as "at least"; a tag left
            out counts as common).  With *candidates*, it shapes
            PostgreSQL's form of ``tags-any``; the rows found never depend
            on it, only the speed.
        :param candidates: about how many rows the caller's query selects
            before this condition: a page over a whole large collection
            (an administrator's list of every tenant's resources) passes the
            table's row count or an estimate of it; a tenant's own list
            passes nothing.  Below :data:`GROUPED_MIN_CANDIDATES`, or
            ``None``, the SQL does not depend on *counts*.

        :meth:`tenancy_mw.tags.store.TagStore.where` passes PostgreSQL's own
        statistics as *counts* (:func:`tag_statistics`).

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
          semi-join.  On PostgreSQL, given *candidates* (at least
          :data:`GROUPED_MIN_CANDIDATES`) and *counts* that show the
          ``any_of`` tags on few rows (the thresholds of
          :data:`GROUPED_ANY_MAX`): ``id IN (SELECT resource_id ... GROUP
          BY resource_id)``, the set sorted once in id order, where the
          semi-join may sort it twice (its de-duplication does not keep the
          order) or probe it for every candidate.  For common tags, or few
          candidates, that form would read and sort every row of the set
          while the semi-join stops after a page or probes a few ids (94 ms
          against 2.3 ms for ``tags-any=tag0003,tag0005,tag0007`` in
          ``bench/tags.py``);
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
        _check_candidates(candidates)
        simple = self.simplified()
        if simple is None:
            return sa.false()
        all_of, any_of, none_of, not_all_of = simple
        clauses: list[sa.ColumnElement] = [_has_tag(table, resource_id, tag) for tag in sorted(all_of)]
        if any_of:
            semi_join: sa.ColumnElement = _has_any(table, resource_id, any_of)
            mysql_form = semi_join
            if all_of:
                mysql_form = sa.or_(*[_has_tag(table, resource_id, tag) for tag in sorted(any_of)])
            postgresql_form = semi_join
            if (
                counts is not None
                and candidates is not None
                and candidates >= GROUPED_MIN_CANDIDATES
                and _any_is_small(all_of, any_of, counts)
            ):
                postgresql_form = _in_grouped(table, resource_id, any_of)
            clauses.append(_DialectVariant(semi_join, mysql=mysql_form, postgresql=postgresql_form))
        clauses += [sa.not_(_has_tag(table, resource_id, tag)) for tag in sorted(none_of)]
        if not_all_of:
            lacks_one: sa.ColumnElement = sa.or_(
                *[sa.not_(_has_tag(table, resource_id, tag)) for tag in sorted(not_all_of)]
            )
            if len(not_all_of) > 2:
                lacks_one = _DialectVariant(_count(table, resource_id, not_all_of) < len(not_all_of), mysql=lacks_one)
            clauses.append(lacks_one)
        if not clauses:
            return sa.true()
        return sa.and_(*clauses)

    def apply(
        self,
        statement: sa.Select,
        resource_id: sa.ColumnElement,
        tags: sa.Table | None = None,
        counts: Mapping[str, int] | None = None,
        candidates: int | None = None,
    ) -> sa.Select:
        """A new statement: *statement* with :meth:`where` added; *statement* itself is unchanged.

        The empty query returns *statement* as it is.
        """
        if not self:
            return statement
        return statement.where(self.where(resource_id, tags, counts, candidates))

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


def _any_is_small(all_of: frozenset, any_of: frozenset, counts: Mapping[str, int]) -> bool:
    """Whether PostgreSQL reads ``tags-any`` faster sorted whole (grouped ``IN``) than as a semi-join.

    A tag missing from *counts* counts as common.  The semi-join reads the
    tags' rows in id order and stops once the page is full, so it wins when
    they are common; it also wins beside a rare required tag, which the
    database drives from and probes.  Sorting the set whole wins when it is
    small, and beside a required tag of middling frequency, whose rows the
    database merges in id order (the thresholds: :data:`GROUPED_ANY_MAX`).
    """
    total = 0
    for tag in any_of:
        total += _count_of(counts, tag)
        if total > GROUPED_ANY_MAX:
            return False
    if not all_of:
        return total <= GROUPED_ANY_SMALL
    rarest = min(_count_of(counts, tag) for tag in all_of)
    if rarest * 2 < total:
        return False
    return total <= GROUPED_ANY_BESIDE or total < rarest <= GROUPED_ANY_REQUIRED_MAX


def _count_of(counts: Mapping[str, int], tag: str) -> int:
    """*tag*'s count in *counts* (common when missing); :class:`ValueError` for one that is not a count."""
    count = counts.get(tag, TAG_COUNT_CAP)
    if not _is_count(count):
        raise ValueError("counts[%r] must be a number of resources (an int of 0 or more), not %r" % (tag, count))
    return int(count)


def _is_count(value: object) -> bool:
    """An integer of 0 or more (numpy's too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0


def _check_candidates(candidates: object) -> None:
    """:class:`ValueError` unless *candidates* is ``None`` or a number of rows."""
    if candidates is not None and not _is_count(candidates):
        raise ValueError("candidates must be a number of rows (an int of 0 or more), not %r" % (candidates,))


def _in_grouped(table: sa.Table, resource_id: sa.ColumnElement, tags: Iterable[str]) -> sa.ColumnElement:
    """``resource_id IN (SELECT resource_id ... tag IN (tags) GROUP BY resource_id)``, NULL-safe.

    PostgreSQL's form of ``tags-any``.  Its planner turns the ``EXISTS``
    form into a semi-join whose inner side it de-duplicates with a sort that
    does not keep its order, then sorts the same rows again to merge them in
    id order; the ``GROUP BY`` is de-duplicated once, in id order, and the
    merge reads it as it comes (``bench/README.rst``).
    """
    alias = table.alias()
    tags = sorted(tags)
    match = alias.c.tag == tags[0] if len(tags) == 1 else alias.c.tag.in_(tags)
    # Neither side NULL: then IN is two-valued like EXISTS, also under NOT
    # (a tag table of the caller's own may allow a NULL resource_id).
    ids = sa.select(alias.c.resource_id).where(match, alias.c.resource_id.is_not(None))
    return sa.and_(resource_id.is_not(None), resource_id.in_(ids.group_by(alias.c.resource_id)))


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


class _DialectVariant(ColumnElement):
    """A boolean condition written one way by default and other ways for named databases.

    Every form means the same; which one a database's optimizer runs fastest
    is measured in ``bench/tags.py``.  *mysql* serves MySQL and MariaDB,
    *postgresql* PostgreSQL, *default* every other database (SQLite, ...).
    """

    inherit_cache = True
    # Not Boolean: a database without a boolean type would compare it to 1,
    # which keeps MySQL/MariaDB from materialising the subqueries inside.
    type = sa.types.NullType()

    def __init__(
        self,
        default: sa.ColumnElement,
        mysql: sa.ColumnElement | None = None,
        postgresql: sa.ColumnElement | None = None,
    ) -> None:
        self.default = default
        self.mysql = default if mysql is None else mysql
        self.postgresql = default if postgresql is None else postgresql

    # Declared so that cloning and adaptation (ClauseAdapter,
    # replace_selectable, the ORM's aliasing and unions) reach the forms
    # inside: without it they keep the caller's original column and the
    # subqueries stop being correlated (every row would pass).  It also
    # makes the statements cacheable, each form with a key of its own.
    _traverse_internals = [
        ("default", InternalTraversal.dp_clauseelement),
        ("mysql", InternalTraversal.dp_clauseelement),
        ("postgresql", InternalTraversal.dp_clauseelement),
    ]

    def get_children(self, **kwargs):
        return [self.default, self.mysql, self.postgresql]

    def form_for(self, dialect: sa.engine.Dialect) -> sa.ColumnElement:
        """The form *dialect* runs."""
        if is_mysql(dialect):
            return self.mysql
        if dialect.name == "postgresql":
            return self.postgresql
        return self.default


@compiles(_DialectVariant)
def _compile_dialect_variant(element: _DialectVariant, compiler, **kwargs) -> str:
    # Grouped: it stands as one condition among the ANDed others.
    return compiler.process(element.form_for(compiler.dialect).self_group(), **kwargs)


def count_tags(
    connection: sa.Connection,
    tags: Iterable[str],
    table: sa.Table | None = None,
    cap: int = TAG_COUNT_CAP,
) -> dict[str, int]:
    """How many resources carry each of *tags*, counting each only up to *cap*; one statement.

    Each count reads at most *cap* entries of the (tag, resource id) index,
    so a common tag costs no more than a rare one beyond that: the counts
    :meth:`TagQuery.where` needs, for which "at least *cap*" is enough.

    Example::

        >>> import sqlalchemy as sa
        >>> from tenancy_mw.tags.store import TagStore
        >>> store = TagStore("sqlite://", create_tables=True)
        >>> _ = store.replace_tags("srv-1", ["red", "blue"]), store.replace_tags("srv-2", ["red"])
        >>> with store.engine.connect() as conn:
        ...     count_tags(conn, ["red", "blue", "green"]) == {"red": 2, "blue": 1, "green": 0}
        True
        >>> store.close()
    """
    table = TAGS if table is None else table
    if cap < 1:
        raise ValueError("cap must be at least 1, not %r" % (cap,))
    names = sorted(set(tags))
    if not names:
        return {}
    columns = []
    for index, tag in enumerate(names):
        alias = table.alias()
        rows = sa.select(sa.literal(1)).select_from(alias).where(alias.c.tag == tag).limit(cap).subquery()
        columns.append(sa.select(sa.func.count()).select_from(rows).scalar_subquery().label("c%d" % index))
    found = connection.execute(sa.select(*columns)).one()
    return dict(zip(names, (int(value) for value in found), strict=True))


class TagStatistics(NamedTuple):
    """PostgreSQL's own estimate of how many resources carry each tag (:func:`tag_statistics`).

    :ivar common: the most common tags (``pg_stats.most_common_vals``), each
        with its estimated number of rows.
    :ivar other: the estimated rows of any other tag, as the planner
        estimates them: the rows left by the common ones, shared evenly
        among the other distinct tags.
    :ivar changed: rows inserted, updated or deleted since the statistics
        were gathered (``n_mod_since_analyze``): a tag made common since
        then is still estimated as ``other`` (autovacuum re-analyses after
        about a tenth of the table has changed).
    """

    common: Mapping[str, int]
    other: int
    changed: int

    def counts(self, tags: Iterable[str]) -> dict[str, int]:
        """``{tag: estimated rows}`` for *tags*, the *counts* of :meth:`TagQuery.where`."""
        return {tag: self.common.get(tag, self.other) for tag in tags}


# pg_stats of the very table to_regclass() finds (by its schema and name),
# the statistics of its children included for an inheritance parent.
_STATISTICS_SQL = sa.text(
    """
    SELECT s.most_common_vals::text::text[], s.most_common_freqs, s.n_distinct, c.reltuples,
           coalesce(a.n_mod_since_analyze, 0)
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = :column
    LEFT JOIN pg_stat_all_tables a ON a.relid = c.oid
    WHERE c.oid = to_regclass(:qualified)
    ORDER BY s.inherited DESC
    LIMIT 1
    """
)


def tag_statistics(connection: sa.Connection, table: sa.Table | None = None) -> TagStatistics | None:
    """PostgreSQL's estimate of the tag table's tag frequencies, from ``pg_stats``; ``None`` when there is none.

    One catalog query, no read of the table: the numbers the planner itself
    works with, as fresh as the last ``ANALYZE`` (autovacuum runs it as the
    table grows; a partitioned table needs its own).  ``None`` on another
    database, and for a table PostgreSQL has no statistics of yet.

    Example (the counts of :meth:`TagQuery.where`)::

        stats = tag_statistics(conn)
        condition = query.where(servers.c.id, counts=stats and stats.counts(query.tags_to_count()),
                                candidates=1_000_000)
    """
    if connection.dialect.name != "postgresql":
        return None
    table = TAGS if table is None else table
    qualified = connection.dialect.identifier_preparer.format_table(table)
    row = connection.execute(_STATISTICS_SQL, {"qualified": qualified, "column": table.c.tag.name}).first()
    if row is None:
        return None
    values, frequencies, distinct, rows, changed = row
    if rows is None or rows <= 0:
        return None
    values = values or []
    frequencies = frequencies or []
    distinct = -distinct * rows if distinct < 0 else distinct
    common = {value: int(round(share * rows)) for value, share in zip(values, frequencies, strict=True)}
    left = max(0.0, 1.0 - sum(frequencies)) * rows
    other = int(round(left / max(1.0, distinct - len(common))))
    return TagStatistics(common, other, int(changed))


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
