"""The tags of any collection's resources, in the tag table: read, add, replace, remove.

Pure SQLAlchemy (no WSGI): :mod:`tenancy_mw.tags.api` serves it over HTTP,
and a service calls it directly for its own views (``tags`` in a list of
servers: :meth:`TagStore.tags_of_many`, one query per page, no N+1).

The tables are those of :func:`tenancy_mw.tags.sql.define_tables`, made by
``tenancy-mw-manage db upgrade --component tags`` (or a service's own
``create_all`` on tables defined on its ``MetaData``).  Resource ids are
strings of 1 to 255 characters; the store does not know which collection a
resource belongs to, so the ids of every collection sharing one tag table
must be unique across them (uuids are).  The service checks that a resource
exists and belongs to the tenant before it calls the store
(:mod:`tenancy_mw.tags.api` does that with the check the service plugs in).

**The limit, under concurrency.**  At most ``max_tags`` tags per resource
(50 by default, the spec's number).  Every write that can add tags runs in
one transaction that first locks the resource's row of the lock table
(``SELECT ... FOR UPDATE``; the row is created on first use), then reads
the current tags, then writes.  Two requests adding different tags to one
resource at once are thus serialised, and the second sees the first's tag
before it counts: the resource never ends above the limit, on PostgreSQL
and MariaDB (row locks) as on SQLite (one writer at a time).  Locking the
resource's tag rows would not do: a resource with no tags has no row to
lock, and rows added by another transaction are not locked by a count.
The rare deadlock two first-time writers can meet on MariaDB is retried.
Removals take the same lock (without making a row), so a ``DELETE`` never
lands between a replace's read and its write.

**The counts** :meth:`TagStore.where` and :meth:`TagStore.apply` pass to the
SQL (:func:`tenancy_mw.tags.sql.tag_condition`).  On PostgreSQL, for a
``tags-any`` of two tags or more given at most
:data:`~tenancy_mw.tags.sql.PER_ROW_CANDIDATES_MAX`, the counts are its
statistics' most common tags (any other counts 0) where they give the
per-row form; before it, on a first page beside a ``not-tags-any`` and a
required tag, the cautious ones below where they give the tag set form
(:data:`~tenancy_mw.tags.sql.SETS_BESIDE_NOT_ANY_FACTOR`,
:data:`~tenancy_mw.tags.sql.SETS_BESIDE_NOT_ANY_MIN_MATCHES`; the sets are
passed with no other counts there); else, for one without required tags
beside a ``not-tags-any``, counts that keep the form the cautious ones
below give.  Given more than
:data:`~tenancy_mw.tags.sql.GROUPED_ANY_SMALL` (more than
``PER_ROW_CANDIDATES_MAX`` beside a ``not-tags-any``), the counts are
PostgreSQL's own statistics (:meth:`tag_statistics`), read once per
``statistics_ttl`` seconds on *connection* (the caller's, so no second
connection is taken from the pool) or on one of the store's, and taken
cautiously: a ``tags-any`` tag outside the most common ones counts as many
rows as the least common of them (where that would merge a first page,
:data:`~tenancy_mw.tags.sql.MERGED_MATCHES_FACTOR`, it is counted up to
that bound), a required tag outside them as rare (over
many candidates the ids are then found from it, the driven form, where the
rows it reads are few beside them; elsewhere one ``EXISTS`` per tag, the
straightforward SQL; where that bound is over
:data:`~tenancy_mw.tags.sql.PROBED_REQUIRED_MAX` rows, such a tag is
counted, up to :data:`~tenancy_mw.tags.sql.DRIVEN_REQUIRED_MAX` + 1 index
entries, and at that cap taken as common, the statistics' bound or
``TAG_COUNT_CAP``), and none counts at all when more than
:data:`~tenancy_mw.tags.sql.GROUPED_ANY_SMALL` rows changed since PostgreSQL
gathered them.  After a *marker* (where its range goes inside the tag
subqueries) they are scaled to the share of the tag rows after it, as the
planner estimates it (two ``EXPLAIN``, where fewer rows may change the
form): a later page reads only those, but for one ``EXISTS`` per tag without
required tags, which hashes each tag's rows whole: where the scaled counts
give that form, the whole table's decide between it and the semi-join.  A
tenant's own list passes no *candidates*, and nothing is read there.  On
MySQL/MariaDB, for a ``tags-any`` beside no excluded tag, the counts are its
own estimate of each tag's rows after the marker (one ``EXPLAIN`` per tag),
whatever *candidates*.  With PostgreSQL's counts (but the per-row form's,
and those for a ``tags-any`` without required tags over few candidates),
the store passes the tag set table where its triggers keep it in step
(:func:`tenancy_mw.tags.sets.read_tag_sets`, read with the statistics and as
rarely).

Checks happen in the spec's order, not nova's: a tag already there is "already
there" (nothing to add) even when the resource is at the limit.

Example::

    >>> store = TagStore("sqlite://", create_tables=True)
    >>> store.add_tag("srv-1", "red"), store.add_tag("srv-1", "red")
    (True, False)
    >>> store.replace_tags("srv-2", ["b", "a"])
    ['a', 'b']
    >>> store.tags_of_many(["srv-1", "srv-2", "srv-3"])
    {'srv-1': ['red'], 'srv-2': ['a', 'b'], 'srv-3': []}
    >>> store.close()
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable

from tenancy_mw.core import sql  # first: without the sql extra, it names it
from tenancy_mw.core.paths import shorten
from tenancy_mw.core.sql import URL, compiles, postgresql, sa, sqlite
from tenancy_mw.tags.model import MAX_RESOURCE_ID_LENGTH, TagQuery, validate_tag
from tenancy_mw.tags.sets import TagSets, read_tag_sets
from tenancy_mw.tags.sql import (
    DRIVEN_REQUIRED_MAX,
    GROUPED_ANY_SMALL,
    MYSQL_SEMI_JOIN_MAX,
    PER_ROW_CANDIDATES_MAX,
    PROBED_BESIDE_NOT_ANY_MAX,
    PROBED_REQUIRED_MAX,
    TAG_COUNT_CAP,
    TAG_LOCKS,
    TAGS,
    TagStatistics,
    TagTables,
    _by_tag_sets,
    _check_candidates,
    _Counts,
    _form_settled,
    _later_page_counts,
    _merges,
    _more_than,
    _Page,
    _query_per_row,
    _shared_order,
    check_page,
    count_tags,
    tag_statistics,
)

__all__ = ["DEFAULT_MAX_TAGS", "DEFAULT_STATISTICS_TTL", "TagLimitExceeded", "TagStore"]

#: The spec's limit of tags per resource.
DEFAULT_MAX_TAGS = 50
#: Seconds :meth:`TagStore.tag_statistics` reuses PostgreSQL's statistics.
DEFAULT_STATISTICS_TTL = 300.0

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.tag_store")

# Ids per query in tags_of_many: below SQLite's limit of bound parameters.
_BATCH = 10_000
# Deadlocks and serialisation failures (sql.is_retryable): the transaction is run again.
_ATTEMPTS = 5


class TagLimitExceeded(ValueError):
    """Adding the tags would take a resource over the limit; nothing was changed.

    :ivar limit: the most tags a resource may have.
    :ivar count: how many it would have had.
    :ivar detail: a sentence for the client.
    """

    def __init__(self, resource_id: str, count: int, limit: int) -> None:
        self.limit = limit
        self.count = count
        self.detail = "Resource %r would have %d tags; at most %d are allowed." % (shorten(resource_id), count, limit)
        super().__init__(self.detail)


def _check_resource_id(resource_id: object) -> str:
    if not isinstance(resource_id, str) or not 1 <= len(resource_id) <= MAX_RESOURCE_ID_LENGTH:
        raise ValueError(
            "resource id %s is not a string of 1 to %d characters"
            % (shorten(repr(resource_id)), MAX_RESOURCE_ID_LENGTH)
        )
    return resource_id


def _refuse_text(values: object, name: str) -> None:
    # A string is iterable too: "abc" would be read as "a", "b", "c".
    if isinstance(values, (str, bytes)):
        raise TypeError("%s must be an iterable of strings, not a string (%s)" % (name, shorten(repr(values))))


class _Explain(sa.sql.expression.Executable, sa.sql.expression.ClauseElement):
    """``EXPLAIN`` of a statement, executed as SQLAlchemy executes the statement itself (as JSON on PostgreSQL)."""

    # Compiled anew each time: a cached compilation would be matched to the
    # columns of a statement that selects none of its own.
    inherit_cache = False

    def __init__(self, statement: sa.Select) -> None:
        self.statement = statement


@compiles(_Explain)
def _compile_explain(element: _Explain, compiler, **kwargs) -> str:
    explain = "EXPLAIN (FORMAT JSON) " if compiler.dialect.name == "postgresql" else "EXPLAIN "
    return explain + compiler.process(element.statement, **kwargs)


def _explained_tag_rows(
    conn: sa.Connection, table: sa.Table, tags: Iterable[str], after: str | None
) -> dict[str, int] | None:
    """MySQL/MariaDB's estimate of each tag's rows (after resource id *after*): one ``EXPLAIN`` each, no row read.

    It stops once the tags estimated are on more than
    :data:`~tenancy_mw.tags.sql.MYSQL_SEMI_JOIN_MAX` rows together: the
    others, left out, count as common, which decides the same.  ``None``
    when the plan has no ``rows`` column (MySQL's ``explain_format`` set to
    ``JSON`` or ``TREE``): no estimate, rather than every tag on no row.
    """
    counts: dict[str, int] = {}
    for tag in sorted(tags):
        rows: sa.Select = sa.select(sa.literal_column("1")).select_from(table).where(table.c.tag == tag)
        if after is not None:
            rows = rows.where(table.c.resource_id > after)
        plan = conn.execute(_Explain(rows)).mappings().first()
        if plan is not None and "rows" not in plan:
            return None
        # No plan row, or none counted: a range the optimizer found empty.
        counts[tag] = int((plan and plan.get("rows")) or 0)
        if sum(counts.values()) > MYSQL_SEMI_JOIN_MAX:
            break
    return counts


def _rows_under_limit(node: dict) -> int:
    """The estimated rows of the input of the top ``Limit`` of an ``EXPLAIN (FORMAT JSON)`` plan.

    That input is the Limit's ``Outer`` child: the InitPlans and CTEs of the
    statement hang beside it, listed first.  Only a ``Gather`` may sit above
    the Limit (``debug_parallel_query``).  ``LookupError`` for another plan.
    """
    while node["Node Type"] == "Gather":
        node = _outer_child(node)
    if node["Node Type"] != "Limit":
        raise LookupError("no Limit on top but %s" % node["Node Type"])
    return int(_outer_child(node)["Plan Rows"])


def _outer_child(node: dict) -> dict:
    for child in node.get("Plans", ()):
        if child.get("Parent Relationship") == "Outer":
            return child
    raise LookupError("no Outer child under %s" % node.get("Node Type"))


def _autocommits(connection: sa.Connection) -> bool:
    """Whether *connection* runs in ``AUTOCOMMIT`` (its own option, or its engine's)."""
    if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        return True
    # The engine's isolation_level shows only here (SQLAlchemy 2.x).
    return bool(getattr(connection, "_is_autocommit_isolation", lambda: False)())


def _ceiling(statistics: TagStatistics) -> int:
    """The most rows a tag outside the *statistics*' common ones is on: the least common's, or their estimate."""
    return max(statistics.other, min(statistics.common.values(), default=0))


def _cautious_counts(all_of: frozenset, any_of: frozenset, statistics: TagStatistics) -> dict[str, int]:
    """The *statistics*' counts of the required and ``tags-any`` tags, those outside the common ones taken cautiously.

    A tag outside the common ones is on at most as many rows as the least
    common of them (:func:`_ceiling`): that bound for a ``tags-any`` tag
    (the grouped form reads them all, the tag sets test them all); for a
    required tag, rare (the page is then found from its rows: driven, or
    one ``EXISTS`` per tag).
    """
    ceiling = _ceiling(statistics)
    counts = {tag: statistics.common.get(tag, ceiling) for tag in any_of}
    counts.update((tag, statistics.common.get(tag, 0)) for tag in all_of)
    return counts


def _check_connection(connection: object) -> None:
    if connection is not None and not isinstance(connection, sa.Connection):
        raise TypeError(
            "connection must be a SQLAlchemy Connection (a Session's is session.connection()), not %r"
            % type(connection).__name__
        )


class TagStore:
    """Tags of resources in the tag tables of a database.

    :param engine: a SQLAlchemy engine or URL (made with
        :func:`tenancy_mw.core.sql.create_engine`); the service's own engine when
        it filters its own queries by tag (same database).
    :param tables: the tag tables (default: those of :mod:`tenancy_mw.tags.sql`).
    :param max_tags: the most tags one resource may have.
    :param create_tables: create missing tables (tests, demos; a service
        runs ``tenancy-mw-manage db upgrade``).
    :param statistics_ttl: seconds the tag statistics read for
        :meth:`where` are reused (0: read every time).  They only choose the
        SQL's shape, so stale ones cost speed, never a wrong row.
    """

    def __init__(
        self,
        engine: sa.Engine | str | URL,
        tables: TagTables | None = None,
        max_tags: int = DEFAULT_MAX_TAGS,
        create_tables: bool = False,
        statistics_ttl: float = DEFAULT_STATISTICS_TTL,
    ) -> None:
        if max_tags < 1:
            raise ValueError("max_tags must be at least 1, not %r" % (max_tags,))
        if not statistics_ttl >= 0:
            raise ValueError("statistics_ttl must be 0 or more seconds, not %r" % (statistics_ttl,))
        self.statistics_ttl = statistics_ttl
        # (statistics or None, tag sets or None, monotonic time they expire): one tuple,
        # replaced whole, so threads read it without a lock; one thread at a
        # time reads them anew while the others keep the previous ones.
        self._statistics: tuple[TagStatistics | None, TagSets | None, float] = (None, None, -1.0)
        self._statistics_refresh = threading.Lock()
        # An engine made here is this store's to close; the service's own is not.
        self._owns_engine = not isinstance(engine, sa.Engine)
        self.engine = engine if isinstance(engine, sa.Engine) else sql.create_engine(engine)
        self.tags, self.locks = tables or TagTables(TAGS, TAG_LOCKS)
        self.max_tags = max_tags
        if create_tables:
            self.tags.metadata.create_all(self.engine, tables=[self.tags, self.locks])
        dialect = self.engine.dialect
        self._sqlite = dialect.name == "sqlite"
        # Only PostgreSQL's and MySQL's SQL depends on the counts (TagQuery.where).
        self._postgresql = dialect.name == "postgresql"
        self._mysql = sql.is_mysql(dialect)
        if dialect.name == "postgresql":
            self._insert_ignore = lambda table: postgresql.insert(table).on_conflict_do_nothing()
        elif dialect.name == "sqlite":
            self._insert_ignore = lambda table: sqlite.insert(table).on_conflict_do_nothing()  # type: ignore[assignment,return-value]
        else:
            self._insert_ignore = lambda table: table.insert().prefix_with("IGNORE")
        # Every write transaction reads what committed before it got the lock.
        self._write_options = {} if dialect.name == "sqlite" else {"isolation_level": "READ COMMITTED"}

    def close(self) -> None:
        """Close the connections of the engine this store made from a URL (a service's own engine is left open)."""
        if self._owns_engine:
            self.engine.dispose()

    # Reading ---------------------------------------------------------------

    def tags_of(self, resource_id: str) -> list[str]:
        """The tags of *resource_id*, sorted (by code point)."""
        return self.tags_of_many([resource_id])[resource_id]

    def tags_of_many(self, resource_ids: Iterable[str]) -> dict[str, list[str]]:
        """``{resource_id: sorted tags}`` for every id given, in one query (per 10,000 ids).

        Ids without tags map to ``[]``.  For list views: one query per page
        instead of one per resource.
        """
        _refuse_text(resource_ids, "resource_ids")
        ids = list(dict.fromkeys(resource_ids))
        found: dict[str, list[str]] = {resource_id: [] for resource_id in ids}
        table = self.tags
        with self.engine.connect() as conn:
            for start in range(0, len(ids), _BATCH):
                chunk = ids[start : start + _BATCH]
                query = sa.select(table.c.resource_id, table.c.tag).where(table.c.resource_id.in_(chunk))
                for resource_id, tag in conn.execute(query):
                    # Exact comparison is the database's job (ExactString);
                    # a key it matched loosely is not ours to show.
                    if resource_id in found:
                        found[resource_id].append(tag)
        for tags in found.values():
            tags.sort()
        return found

    def where(
        self,
        query: TagQuery,
        resource_id: sa.ColumnElement,
        candidates: int | None = None,
        connection: sa.Connection | None = None,
        *,
        marker: str | None = None,
        limit: int | None = None,
    ) -> sa.ColumnElement:
        """The SQL condition of *query* on *resource_id*, over this store's tag table.

        :meth:`TagQuery.where <tenancy_mw.tags.model.TagQuery.where>` with the tag counts it can
        use, and the tag set table where it is kept in step.  *candidates*: about how many rows
        the caller's whole query leaves before this condition, its filters and paging marker
        included (``None``, the default, whenever it is not known).  *marker* and *limit*: the
        page (:func:`~tenancy_mw.tags.sql.tag_condition`).  Which counts it reads, and when: the
        module doc, "The counts".

        Example::

            >>> import sqlalchemy as sa
            >>> from tenancy_mw.tags.model import parse_tag_query
            >>> store = TagStore("sqlite://", create_tables=True)
            >>> _ = store.replace_tags("srv-1", ["red"]), store.replace_tags("srv-2", ["blue"])
            >>> servers = sa.table("servers", sa.column("id"))
            >>> with store.engine.begin() as conn:
            ...     _ = conn.exec_driver_sql("CREATE TABLE servers (id TEXT PRIMARY KEY)")
            ...     _ = conn.exec_driver_sql("INSERT INTO servers VALUES ('srv-1'), ('srv-2'), ('srv-3')")
            ...     red_or_green = store.where(parse_tag_query("tags-any=red,green"), servers.c.id)
            ...     conn.execute(sa.select(servers.c.id).where(red_or_green)).scalars().all()
            ['srv-1']
            >>> store.close()
        """
        _check_candidates(candidates)
        _check_connection(connection)
        counts, sets = self._counts_for(query, resource_id, candidates, connection, marker=marker, limit=limit)
        return query.where(resource_id, self.tags, counts, candidates, marker=marker, limit=limit, sets=sets)

    def _counts_for(
        self,
        query: TagQuery,
        resource_id: sa.ColumnElement,
        candidates: int | None,
        connection: sa.Connection | None,
        *,
        marker: str | None,
        limit: int | None,
    ) -> tuple[dict[str, int] | None, TagSets | None]:
        """The tag counts :meth:`where` passes, each database's own (``None`` where none serve), and the tag sets.

        *marker* and *limit*: the page's.  Where the counts would merge the
        tags' rows, the ``tags-any`` tags outside the statistics' common
        ones are counted first (:meth:`_merge_counts`).

        The tag set table where the SQL may use it: on PostgreSQL, beside
        counts, as read with the statistics they come from (one read of
        both, so that a refresh by another thread between them cannot pair
        counts chosen for the sets with no sets).
        """
        if self._mysql:
            return self._mysql_estimates(query, resource_id, marker, connection), None
        if not (self._postgresql and candidates is not None):
            return None, None
        simple = query.simplified()
        if simple is None:
            return None, None
        all_of, any_of, _, not_all_of = simple
        if len(any_of) < 2:
            return None, None
        # Over a tenant-sized page (up to GROUPED_ANY_SMALL) the counts serve
        # only for the per-row form (PER_ROW_CANDIDATES_MAX) and beside a
        # not-tags-any (PROBED_BESIDE_NOT_ANY_MAX, PROBED_BESIDE_NOT_ANY_MIDDLING_MAX,
        # DRIVEN_BESIDE_NOT_ANY_FACTOR, GROUPED_AFTER_MARKER_MAX_SHARE there):
        # nothing is read for anything else.
        if PER_ROW_CANDIDATES_MAX < candidates <= GROUPED_ANY_SMALL and not not_all_of:
            return None, None
        statistics, sets = self._statistics_and_sets(connection)
        # Too many rows changed since PostgreSQL's last ANALYZE: a tag made
        # common since then would still read as rare.
        if statistics is None or statistics.changed > GROUPED_ANY_SMALL:
            return None, None
        if candidates <= PER_ROW_CANDIDATES_MAX:
            page = (marker, resource_id)
            return self._few_candidates_counts(simple, (statistics, sets), candidates, page, connection)
        counts = self._estimated_counts(all_of, any_of, statistics, connection)
        if marker is None and limit is not None and sets is not None:
            merge_page = (resource_id, limit)
            counts = self._merge_counts(simple, counts, (statistics, sets), candidates, merge_page, connection)
        if counts and marker is not None and self._ranged(resource_id):
            if not _form_settled(all_of, any_of, counts, candidates, bool(not_all_of)):
                after = self._after_marker(counts, marker, connection)
                counts = dict(_later_page_counts(all_of, any_of, counts, after, candidates, bool(not_all_of)))
        return counts, sets

    def apply(
        self,
        statement: sa.Select,
        query: TagQuery,
        resource_id: sa.ColumnElement,
        *,
        marker: str | None = None,
        limit: int | None = None,
        candidates: int | None = None,
        connection: sa.Connection | None = None,
    ) -> sa.Select:
        """*statement* with the condition of *query* (and the page after *marker*) added; the SQL chosen by estimate.

        Where the SQL's form depends on how many rows the caller's query
        leaves before the tag condition (PostgreSQL, a ``tags-any`` of two
        tags or more), the store asks PostgreSQL's planner for its estimate
        of *statement*'s rows after the marker (``EXPLAIN``, no read of the
        data; a few milliseconds) rather than trusting a number the
        caller cannot check.  *candidates* is used only where no estimate
        can be had (another database needs none; a failed ``EXPLAIN`` is
        logged): a wrong hint never changes the SQL when the planner
        answers.  *statement* itself is unchanged; its ``ORDER BY`` and
        ``LIMIT`` are the caller's (by *resource_id*, ascending, for a
        *marker*).

        Example::

            >>> import sqlalchemy as sa
            >>> from tenancy_mw.tags.model import parse_tag_query
            >>> store = TagStore("sqlite://", create_tables=True)
            >>> for n, tags in enumerate([["red"], ["blue"], ["red", "blue"], ["red"]]):
            ...     _ = store.replace_tags("srv-%d" % n, tags)
            >>> servers = sa.table("servers", sa.column("id"))
            >>> with store.engine.begin() as conn:
            ...     _ = conn.exec_driver_sql("CREATE TABLE servers (id TEXT PRIMARY KEY)")
            ...     _ = conn.exec_driver_sql("INSERT INTO servers VALUES ('srv-0'), ('srv-1'), ('srv-2'), ('srv-3')")
            ...     page = sa.select(servers.c.id).order_by(servers.c.id).limit(2)
            ...     red = parse_tag_query("tags=red")
            ...     first = conn.execute(store.apply(page, red, servers.c.id, limit=2)).scalars().all()
            ...     after = store.apply(page, red, servers.c.id, marker=first[-1], limit=2)
            ...     second = conn.execute(after).scalars().all()
            >>> first, second
            (['srv-0', 'srv-2'], ['srv-3'])
            >>> store.close()
        """
        _check_candidates(candidates)
        _check_connection(connection)
        check_page(marker, limit)
        if not query and marker is None:
            return statement
        rows = candidates
        if self._postgresql and query.tags_to_count():
            planned = self.planned_rows(statement, resource_id, marker, connection)
            rows = candidates if planned is None else planned
        return statement.where(self.where(query, resource_id, rows, connection, marker=marker, limit=limit))

    def planned_rows(
        self,
        statement: sa.Select,
        resource_id: sa.ColumnElement | None = None,
        marker: str | None = None,
        connection: sa.Connection | None = None,
    ) -> int | None:
        """PostgreSQL's estimate of the rows *statement* selects (after *marker* on *resource_id*); ``None`` elsewhere.

        ``EXPLAIN (FORMAT JSON) SELECT 1 FROM (statement) LIMIT 1``, the
        statement without its own ``ORDER BY``, ``LIMIT`` and ``OFFSET`` and
        sent as SQLAlchemy sends it (its ``IN`` lists expanded, its values
        bound by their columns' types): the planner's estimate of the rows
        of the limit's input, no read of the data.  On *connection* (left as
        it was, as for :meth:`tag_statistics`) or one of the store's;
        ``None`` on another database, when ``EXPLAIN`` fails, as for a
        statement with a parameter bound only when it is executed, and for
        a plan without that limit on top (both logged).

        The ``LIMIT 1`` costs the plan to its first row, as the caller's
        page is, not to every row, so that it rarely goes over
        ``jit_above_cost`` where the caller's own page does not (a
        statement that sorts or hashes many rows before its first still
        may).  Over it, PostgreSQL loads its JIT into the session, and every
        parallel worker of the session's later queries loads it again.
        """
        if not self._postgresql:
            return None
        counted = statement.order_by(None).limit(None).offset(None)
        if marker is not None and resource_id is not None:
            counted = counted.where(resource_id > marker)
        # One untyped column over the statement: the plan's row is read as it
        # comes, not through the result types of the statement's own columns.
        # LIMIT 1 keeps the plan's cost near its first row's, as the caller's
        # page does: a plan of a large statement costed for every row goes
        # over jit_above_cost, and PostgreSQL then loads its JIT (LLVM) into
        # the session, where every parallel worker of its later queries
        # loads it again (about 17 ms a query).
        explained = _Explain(sa.select(sa.literal_column("1")).select_from(counted.subquery()).limit(1))

        def explain(conn: sa.Connection) -> object:
            return conn.execute(explained).scalar_one()

        try:
            plan = self._read_on(connection, explain)
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Could not ask PostgreSQL for its estimate of a tag query's rows: %s", sql.error_summary(exc))
            return None
        try:
            return _rows_under_limit((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            LOG.warning("PostgreSQL's plan of a tag query has no rows under its LIMIT (%r): %.500r", exc, plan)
            return None

    def _mysql_estimates(
        self, query: TagQuery, resource_id: sa.ColumnElement, marker: str | None, connection: sa.Connection | None
    ) -> dict[str, int] | None:
        """The counts :meth:`where` passes on MySQL/MariaDB: its estimate of each ``tags-any`` tag's rows on the page.

        Only for a ``tags-any`` of two tags or more beside no excluded tag,
        the queries whose SQL there depends on them (``None`` otherwise, and
        when ``EXPLAIN`` fails: logged).  After *marker* where the marker's
        range goes inside the subquery (both id columns ExactString).
        """
        simple = query.simplified()
        if simple is None or len(simple[1]) < 2 or simple[2] or simple[3]:
            return None
        exact = _shared_order(resource_id.type, self.tags.c.resource_id.type) == "exact"
        after = marker if exact else None
        try:
            counts = self._read_on(connection, lambda conn: _explained_tag_rows(conn, self.tags, simple[1], after))
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Could not ask MySQL for its estimate of a tag query's rows: %s", sql.error_summary(exc))
            return None
        if counts is None:
            LOG.warning("MySQL's EXPLAIN of %s gave no rows column (explain_format not TRADITIONAL?)", self.tags.name)
        return counts

    def _few_candidates_counts(
        self,
        simple: tuple,
        read: tuple[TagStatistics, TagSets | None],
        candidates: int,
        page: tuple[str | None, sa.ColumnElement],
        connection: sa.Connection | None,
    ) -> tuple[dict[str, int] | None, TagSets | None]:
        """The counts over at most ``PER_ROW_CANDIDATES_MAX`` candidates (``None`` where none serve), and the sets.

        *simple*: the simplified query; *read*: the statistics and the tag
        set table read with them; *page*: the marker and the caller's id
        column.  For the per-row form, the statistics' most common tags,
        any other counting 0: it pays beside large sets only, so a tag they
        do not show as common is taken as small.  After a *marker* whose
        range goes inside the tag subqueries, scaled to the tag rows after
        it (two ``EXPLAIN``, asked only where the whole table's give the
        form): the other forms read only those.  Otherwise, for a
        ``tags-any`` without required tags beside a ``not-tags-any``, counts
        that keep the form the whole table's cautious counts give
        (:meth:`_estimated_counts`): one ``EXISTS`` per tag on up to
        ``PROBED_BESIDE_NOT_ANY_MAX`` rows, the semi-join (``None``) beyond;
        never counts that give the per-row form.  On a first page where the
        tag set table is in step, the cautious counts where they give its
        form (:data:`~tenancy_mw.tags.sql.SETS_BESIDE_NOT_ANY_FACTOR`,
        :data:`~tenancy_mw.tags.sql.SETS_BESIDE_NOT_ANY_MIN_MATCHES`): a
        ``tags-any`` tag outside the common ones counts as many rows as the
        least common, so the sets expected to pass are not read low.
        """
        all_of, any_of, _, not_all_of = simple
        statistics, sets = read
        marker, resource_id = page
        if all_of and not_all_of and sets is not None and marker is None and candidates > 0:
            # The tag sets where few pass their index (SETS_BESIDE_NOT_ANY_FACTOR, _MIN_MATCHES),
            # before the per-row form, as the SQL weighs them.  Nothing read:
            # a required tag outside the common ones counts as rare, no sets.
            cautious = _cautious_counts(all_of, any_of, statistics)
            if _by_tag_sets(simple, _Counts(cautious, candidates), sets.rows, first_page=True):
                return cautious, sets
        # No sets beside the counts below: a tag they count 0 may be large.
        common = {tag: statistics.common.get(tag, 0) for tag in all_of | any_of}
        if _query_per_row(simple, _Counts(common, candidates)):
            if marker is not None and self._ranged(resource_id):
                common = self._after_marker(common, marker, connection)
            if _query_per_row(simple, _Counts(common, candidates)):
                return common, None
        if all_of or not not_all_of:
            return None, None
        cautious = self._estimated_counts(all_of, any_of, statistics, connection)
        return (None if _more_than(cautious, any_of, PROBED_BESIDE_NOT_ANY_MAX) else common), None

    def _ranged(self, resource_id: sa.ColumnElement) -> bool:
        """Whether a marker's range goes inside the tag subqueries: *resource_id* sorts as the tag table's ids."""
        return self._id_order(resource_id) is not None

    def _id_order(self, resource_id: sa.ColumnElement) -> str | None:
        """How *resource_id* and the tag table's ids compare (:func:`~tenancy_mw.tags.sql._shared_order`)."""
        return _shared_order(resource_id.type, self.tags.c.resource_id.type)

    def _after_marker(self, counts: dict[str, int], marker: str, connection: sa.Connection | None) -> dict[str, int]:
        """*counts* scaled to the tag rows after *marker*, the share PostgreSQL's planner estimates (*counts* if none).

        The marker's range goes inside the tag subqueries, so a later page
        reads only that share of each tag's rows, and the form is chosen for
        it (:meth:`where` asks only where fewer rows may change the form).
        """
        ids = sa.select(self.tags.c.resource_id)
        after = self.planned_rows(ids, self.tags.c.resource_id, marker, connection)
        every = self.planned_rows(ids, None, None, connection)
        if after is None or not every:
            return counts
        share = min(1.0, after / every)
        return {tag: int(round(count * share)) for tag, count in counts.items()}

    def _estimated_counts(
        self, all_of: frozenset, any_of: frozenset, statistics: TagStatistics, connection: sa.Connection | None
    ) -> dict[str, int]:
        """The counts :meth:`where` passes on PostgreSQL, from its *statistics* (fresh enough to serve).

        *all_of* and *any_of*: the required and ``tags-any`` tags of the
        simplified query (only a ``tags-any`` of two tags or more has forms
        to choose from).  :func:`_cautious_counts`, and where their bound for
        a tag outside the common ones is over ``PROBED_REQUIRED_MAX``, the
        required tags outside them counted (:meth:`_required_outside`).
        """
        counts = _cautious_counts(all_of, any_of, statistics)
        ceiling = _ceiling(statistics)
        if ceiling > PROBED_REQUIRED_MAX:
            counts.update(self._required_outside(all_of - statistics.common.keys(), ceiling, connection))
        return counts

    def _required_outside(self, tags: frozenset, ceiling: int, connection: sa.Connection | None) -> dict[str, int]:
        """Required *tags* outside the statistics' common ones, each counted up to ``DRIVEN_REQUIRED_MAX + 1``.

        Only where the bound the statistics give them (*ceiling*) is over
        :data:`~tenancy_mw.tags.sql.PROBED_REQUIRED_MAX`: "rare" may then be
        common enough that the driven form's share for a rare tag reads
        too many rows.  A bounded read of the tag index; a tag at the cap
        counts as common: *ceiling*, or :data:`~tenancy_mw.tags.sql.TAG_COUNT_CAP`
        (as a tag left out) if that is more; if the read fails (logged),
        *ceiling* for each.
        """
        if not tags:
            return {}
        cap = DRIVEN_REQUIRED_MAX + 1
        try:
            counted = self._read_on(connection, lambda conn: count_tags(conn, tags, self.tags, cap))
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Could not count the required tags of a tag query: %s", sql.error_summary(exc))
            return dict.fromkeys(tags, ceiling)
        # A count at the cap is "at least": common, as an uncounted tag, for
        # the rules that read past it (GROUPED_ANY_REQUIRED_MAX); outside the
        # statistics' list the tag is on at most about *ceiling* rows, so the
        # larger of the two is the bound a later page scales to the rows
        # after its marker.
        common = max(ceiling, TAG_COUNT_CAP)
        return {tag: common if count >= cap else count for tag, count in counted.items()}

    def _merge_counts(
        self,
        simple: tuple,
        counts: dict[str, int],
        read: tuple[TagStatistics, TagSets],
        candidates: int,
        page: tuple[sa.ColumnElement, int],
        connection: sa.Connection | None,
    ) -> dict[str, int]:
        """*counts*, with the tags outside the statistics' common ones counted where they would merge.

        The merged form (:data:`~tenancy_mw.tags.sql.MERGED_MATCHES_FACTOR`)
        reads its streams until the page fills: a rare tag taken at the
        statistics' bound for the others (:func:`_cautious_counts`; a
        required tag's failed count, :meth:`_required_outside`) would make
        the page look full soon, and the merge would read a stream to the
        end.  So where *counts* would merge a first page, the required and
        ``tags-any`` tags outside the common ones are counted, each up to
        that bound (one bounded read of the tag index, never more than a
        tag's rows): the rule then decides on them, and every other rule
        reads them too on that page.  If the read fails (logged), they count
        as left out (:data:`~tenancy_mw.tags.sql.TAG_COUNT_CAP`, common):
        no merge, nor the matches first.  *read*: the statistics and the
        tag sets; *page*: the caller's id column and the limit.
        """
        statistics, sets = read
        resource_id, limit = page
        outside = (simple[0] | simple[1]) - statistics.common.keys()
        if not outside:
            return counts
        first = _Page(resource_id, None, self._id_order(resource_id), limit=limit)
        if not _merges(simple, _Counts(counts, candidates), sets.rows, first):
            return counts
        bound = max(_ceiling(statistics), 1)
        try:
            counted = self._read_on(connection, lambda conn: count_tags(conn, outside, self.tags, bound))
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Could not count the tags-any tags of a tag query: %s", sql.error_summary(exc))
            counted = dict.fromkeys(outside, TAG_COUNT_CAP)
        return {**counts, **counted}

    def tag_statistics(self, connection: sa.Connection | None = None) -> TagStatistics | None:
        """PostgreSQL's estimate of how many resources carry each tag, reused for ``statistics_ttl`` seconds.

        :func:`tenancy_mw.tags.sql.tag_statistics`: one catalog query, no read
        of the tag table, on *connection* (a SQLAlchemy ``Connection``; a
        session's is ``session.connection()``) or on one of the store's.
        The caller's connection is left as it was: inside its transaction
        the read runs in a savepoint, outside it the transaction the read
        began is ended.  ``None`` on another database, before PostgreSQL
        has analysed the table, and when the read fails (logged; the SQL
        then needs no statistics).  While one thread reads them anew, the
        others keep the previous ones.
        """
        _check_connection(connection)
        return self._statistics_and_sets(connection)[0]

    def _statistics_and_sets(self, connection: sa.Connection | None) -> tuple[TagStatistics | None, TagSets | None]:
        """:meth:`tag_statistics` and the tag set table where it is kept in step, read together.

        Counts on PostgreSQL come only from these statistics: without
        counts the set form is never chosen.
        """
        if not self._postgresql:
            return None, None
        statistics, sets, expires = self._statistics
        if expires > time.monotonic() or not self._statistics_refresh.acquire(blocking=False):
            return statistics, sets
        try:
            statistics, sets = self._read_statistics(connection)
            self._statistics = (statistics, sets, time.monotonic() + self.statistics_ttl)
        finally:
            self._statistics_refresh.release()
        return statistics, sets

    def _read_statistics(self, connection: sa.Connection | None) -> tuple[TagStatistics | None, TagSets | None]:
        """The statistics, and the tag set table if it is kept in step (read with them, as rarely).

        Each read failing alone is logged and leaves the other.
        """
        try:
            statistics = self._read_on(connection, lambda conn: tag_statistics(conn, self.tags))
        except sa.exc.DBAPIError as exc:
            LOG.warning("Could not read PostgreSQL's statistics of %s: %s", self.tags.name, sql.error_summary(exc))
            statistics = None
        try:
            sets = self._read_on(connection, lambda conn: read_tag_sets(conn, self.tags))
        except sa.exc.DBAPIError as exc:
            LOG.warning("Could not read whether the tag set table is in step: %s", sql.error_summary(exc))
            sets = None
        return statistics, sets

    def _read_on(self, connection: sa.Connection | None, read):
        """*read(conn)* on *connection*, left as it was (a savepoint inside its transaction), or on the store's own.

        A connection in ``AUTOCOMMIT`` reads as it is.
        """
        if connection is None:
            with self.engine.connect() as own:
                return read(own)
        if _autocommits(connection):
            # Each statement is its own transaction: nothing to leave as it
            # was, and a savepoint outside a transaction block is an error.
            return read(connection)
        if connection.in_transaction():
            with connection.begin_nested():
                return read(connection)
        try:
            return read(connection)
        finally:
            connection.rollback()

    def has_tag(self, resource_id: str, tag: str) -> bool:
        """Whether *resource_id* has *tag* (compared exactly)."""
        table = self.tags
        query = sa.select(table.c.tag).where(table.c.resource_id == resource_id, table.c.tag == tag)
        with self.engine.connect() as conn:
            return any(found == tag for found in conn.execute(query).scalars())

    # Writing ---------------------------------------------------------------

    def add_tag(self, resource_id: str, tag: str) -> bool:
        """Add *tag*; ``True`` when added, ``False`` when it was there already.

        Raises :class:`TagLimitExceeded` (nothing changed) when the resource
        has ``max_tags`` tags and *tag* is not one of them.
        """
        _check_resource_id(resource_id)
        validate_tag(tag)

        def work(conn):
            current = self._lock_and_read(conn, resource_id)
            if tag in current:
                return False
            if len(current) >= self.max_tags:
                raise TagLimitExceeded(resource_id, len(current) + 1, self.max_tags)
            conn.execute(self.tags.insert().values(resource_id=resource_id, tag=tag))
            return True

        return self._write(work)

    def replace_tags(self, resource_id: str, tags: Iterable[str]) -> list[str]:
        """Make *tags* the resource's whole set of tags; return it sorted.

        Raises ``ValueError`` for a duplicate, :class:`~tenancy_mw.tags.model.InvalidTag`
        for a bad tag and :class:`TagLimitExceeded` for too many; nothing is
        changed then.
        """
        _check_resource_id(resource_id)
        _refuse_text(tags, "tags")
        wanted = list(tags)
        for tag in wanted:
            validate_tag(tag)
        if len(set(wanted)) != len(wanted):
            raise ValueError("the tags hold a duplicate")
        if len(wanted) > self.max_tags:
            raise TagLimitExceeded(resource_id, len(wanted), self.max_tags)
        wanted_set = set(wanted)

        def work(conn):
            current = self._lock_and_read(conn, resource_id)
            gone = current - wanted_set
            new = wanted_set - current
            if gone:
                conn.execute(
                    self.tags.delete().where(self.tags.c.resource_id == resource_id, self.tags.c.tag.in_(sorted(gone)))
                )
            if new:
                conn.execute(self.tags.insert(), [{"resource_id": resource_id, "tag": tag} for tag in sorted(new)])

        self._write(work)
        return sorted(wanted_set)

    def remove_tag(self, resource_id: str, tag: str) -> bool:
        """Remove *tag*; ``False`` when the resource did not have it."""
        table = self.tags
        return (
            self._remove(resource_id, table.delete().where(table.c.resource_id == resource_id, table.c.tag == tag)) > 0
        )

    def remove_all(self, resource_id: str) -> int:
        """Remove every tag of *resource_id*; return how many there were."""
        table = self.tags
        return self._remove(resource_id, table.delete().where(table.c.resource_id == resource_id))

    def forget(self, resource_id: str) -> None:
        """Remove every trace of *resource_id* (its tags and lock row): call it when the resource is deleted."""
        self._remove(
            resource_id,
            self.tags.delete().where(self.tags.c.resource_id == resource_id),
            self.locks.delete().where(self.locks.c.resource_id == resource_id),
        )

    # Internals -------------------------------------------------------------

    def _write(self, work):
        """Run *work(conn)* in a write transaction; run it again after a deadlock."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with self.engine.connect() as conn:
                    if self._write_options:
                        conn = conn.execution_options(**self._write_options)
                    with conn.begin():
                        return work(conn)
            except sa.exc.DBAPIError as exc:
                if attempt == _ATTEMPTS or not sql.is_retryable(exc):
                    raise
                time.sleep(0.01 * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _remove(self, resource_id: str, statement, *more) -> int:
        """Run the delete *statement* (then *more*) under the resource's lock; its row count.

        Removals wait for a writer of the same resource too: a ``DELETE``
        slipping between a replace's read and its commit would leave a set
        that neither order of the two requests gives.  No lock row is made
        for a resource that never had one (it never had a writer to wait for).
        """

        def work(conn):
            if not self._sqlite:
                # SQLite: the delete itself takes the database's one write lock.
                locks = self.locks
                conn.execute(
                    sa.select(locks.c.resource_id).where(locks.c.resource_id == resource_id).with_for_update()
                ).first()
            count = conn.execute(statement).rowcount
            for other in more:
                conn.execute(other)
            return count

        return self._write(work)

    def _lock_and_read(self, conn: sa.Connection, resource_id: str) -> set[str]:
        """Lock the resource's lock row (made on first use); return its current tags."""
        locks = self.locks
        if self._sqlite:
            # SQLite locks the whole database for a writer; a transaction
            # must write first, or it may fail at once instead of waiting.
            conn.execute(self._insert_ignore(locks).values(resource_id=resource_id))
            return self._read(conn, resource_id)
        lock = sa.select(locks.c.resource_id).where(locks.c.resource_id == resource_id).with_for_update()
        if conn.execute(lock).first() is None:
            # First write for this resource.  Insert-or-ignore, then lock:
            # a concurrent first writer's row is waited for, never duplicated.
            conn.execute(self._insert_ignore(locks).values(resource_id=resource_id))
            conn.execute(lock).first()
        return self._read(conn, resource_id)

    def _read(self, conn: sa.Connection, resource_id: str) -> set[str]:
        table = self.tags
        return set(conn.execute(sa.select(table.c.tag).where(table.c.resource_id == resource_id)).scalars())
