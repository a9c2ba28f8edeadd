"""PostgreSQL's tag sets: each resource's tags as one array, kept in step with the tag table by triggers.

The tag table holds one row per (resource id, tag), which answers a
query of one or two tags from its indexes.  A query of many parts
(``tags=a&tags-any=b,c&not-tags=d&not-tags-any=e,f``) joins as many
subqueries, and where each part alone leaves many rows the planner has
no good order to join them in.  The tag set table holds one row per
resource, its tags in an array with a GIN index, so the whole query is
one test of one row: ``tags @> required AND tags && any AND NOT tags &&
excluded AND NOT tags @> not_all``.  :func:`tenancy_mw.tags.sql.tag_condition`
uses it where ``bench/tags.py --sweep`` measured it fastest
(:data:`tenancy_mw.tags.sql.SETS_REQUIRED_MAX`,
:data:`tenancy_mw.tags.sql.SETS_DENSE_MIN_SHARE`).  Where few sets pass,
it finds them first from the set index and then looks each up among the
caller's rows (*matches_first* of :func:`in_tag_sets`,
:data:`tenancy_mw.tags.sql.SETS_MATCHES_FIRST_MAX`).

PostgreSQL only, and only while two triggers keep it in step: the rows
are written by PostgreSQL itself, in the same transaction as every write
of the tag table (``INSERT``, ``UPDATE``, ``DELETE``, ``COPY``,
``TRUNCATE``), whoever writes it, so the set a query reads is the tag rows
it would read.  :class:`~tenancy_mw.tags.store.TagStore` asks whether both
triggers are there and enabled (:func:`read_tag_sets`) with its
statistics, once per ``statistics_ttl``: a database migrated before the
table came, or one whose trigger stays disabled, gets the other forms (a
bulk load disables it inside its own transaction: ``doc/tags.rst``, "The
tag table").

The table, its index and the triggers come with the tags component's
second migration (``tenancy-mw-manage db upgrade --component tags``), which
also fills the table from the tag rows already there, and, for a
``create_all`` of :func:`~tenancy_mw.tags.sql.define_tables`, with the new
tag table itself (:data:`TAG_SETS_DDL`).

Example (PostgreSQL)::

    with engine.connect() as conn:
        if read_tag_sets(conn) is not None:
            red = conn.execute(sa.select(TAG_SETS.c.resource_id).where(TAG_SETS.c.tags.contains(["red"])))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from tenancy_mw.core.sql import ExactString, postgresql, sa
from tenancy_mw.tags.model import MAX_RESOURCE_ID_LENGTH

__all__ = [
    "FILL_TAG_SETS",
    "MATCHES_CTE",
    "SYNC_TRIGGER",
    "TAG_SETS",
    "TAG_SETS_DDL",
    "TAG_SETS_DROP",
    "TAG_SET_TABLE",
    "TRUNCATE_TRIGGER",
    "TagSets",
    "in_tag_sets",
    "read_tag_sets",
]

#: The name of :func:`in_tag_sets`' common table expression of the matching ids (*matches_first*).
MATCHES_CTE = "tenancy_mw_tag_set_matches"
#: The tag set table's name (beside the tag table ``tenancy_mw_tags``, in the same schema).
TAG_SET_TABLE = "tenancy_mw_tag_sets"
#: The row trigger that keeps :data:`TAG_SET_TABLE` in step with the tag table.
SYNC_TRIGGER = "tenancy_mw_tag_sets_sync"
#: The statement trigger that empties :data:`TAG_SET_TABLE` when the tag table is truncated.
TRUNCATE_TRIGGER = "tenancy_mw_tag_sets_truncate"
#: The statement that fills the tag set table from the tag table (empty before).
FILL_TAG_SETS = (
    "INSERT INTO tenancy_mw_tag_sets (resource_id, tags)"
    " SELECT resource_id, array_agg(tag::text ORDER BY tag) FROM tenancy_mw_tags GROUP BY resource_id"
)

_METADATA = sa.MetaData()
#: The tag set table (PostgreSQL only): one row per resource with tags, and its tags.
#: On its own ``MetaData``: a ``create_all`` of the tag tables makes it
#: only on PostgreSQL, through :data:`TAG_SETS_DDL`.
TAG_SETS = sa.Table(
    TAG_SET_TABLE,
    _METADATA,
    # The tag table's type, so a marker's range means the same on both.
    sa.Column("resource_id", ExactString(MAX_RESOURCE_ID_LENGTH), primary_key=True),
    sa.Column("tags", postgresql.ARRAY(sa.Text), nullable=False),
    sa.Index("ix_tenancy_mw_tag_sets_tags", "tags", postgresql_using="gin"),
)

#: The statements that make the tag set table and the triggers that keep
#: it in step (PostgreSQL), in order, for a ``create_all`` (the tag table
#: is new and empty there).  The tags component's migration
#: ``9b51e2d04c7a`` holds its own copy, as migrations do, with the lock and
#: the fill a table with rows needs (a test checks both build the same
#: catalog): a change here is a new migration too.
TAG_SETS_DDL = (
    "CREATE TABLE tenancy_mw_tag_sets (resource_id VARCHAR(255) NOT NULL PRIMARY KEY, tags TEXT[] NOT NULL)",
    "CREATE INDEX ix_tenancy_mw_tag_sets_tags ON tenancy_mw_tag_sets USING gin (tags)",
    # Each row's change is applied to the set's latest version: an upsert
    # waits for a concurrent writer of the same set and then works on its
    # result, so two READ COMMITTED transactions tagging one resource at
    # once keep both.  A snapshot that cannot see the set it must change
    # (REPEATABLE READ begun before the set was filled) gets a
    # serialization failure, never a set left behind.  The functions keep
    # the search_path they were made with: a writer's own path never
    # points them at another schema's table.  No % in the text: offline
    # SQL and DDL events would double it.
    """CREATE FUNCTION tenancy_mw_tag_sets_sync() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE tenancy_mw_tag_sets SET tags = array_remove(tags, OLD.tag::text)
            WHERE resource_id = OLD.resource_id;
        IF NOT FOUND AND current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
                MESSAGE = 'the tag set of ' || OLD.resource_id || ' is not in this transaction''s snapshot';
        END IF;
        DELETE FROM tenancy_mw_tag_sets WHERE resource_id = OLD.resource_id AND tags = '{}';
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO tenancy_mw_tag_sets AS sets (resource_id, tags) VALUES (NEW.resource_id, ARRAY[NEW.tag::text])
            ON CONFLICT (resource_id)
            DO UPDATE SET tags = array_append(array_remove(sets.tags, NEW.tag::text), NEW.tag::text);
    END IF;
    RETURN NULL;
END
$$""",
    # A TRUNCATE that names the set table too has emptied it already (new,
    # empty storage) and holds it open: truncating it again there would
    # fail.  The storage's size, not a read of the rows: an older snapshot
    # (REPEATABLE READ) may not see rows another writer added since.
    """CREATE FUNCTION tenancy_mw_tag_sets_truncate() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF pg_relation_size('tenancy_mw_tag_sets') > 0 THEN
        TRUNCATE tenancy_mw_tag_sets;
    END IF;
    RETURN NULL;
END
$$""",
    "CREATE TRIGGER tenancy_mw_tag_sets_sync AFTER INSERT OR UPDATE OR DELETE ON tenancy_mw_tags"
    " FOR EACH ROW EXECUTE FUNCTION tenancy_mw_tag_sets_sync()",
    "CREATE TRIGGER tenancy_mw_tag_sets_truncate AFTER TRUNCATE ON tenancy_mw_tags"
    " FOR EACH STATEMENT EXECUTE FUNCTION tenancy_mw_tag_sets_truncate()",
)
#: The statements that remove what :data:`TAG_SETS_DDL` made (the tag table stays).
TAG_SETS_DROP = (
    "DROP TRIGGER IF EXISTS tenancy_mw_tag_sets_truncate ON tenancy_mw_tags",
    "DROP TRIGGER IF EXISTS tenancy_mw_tag_sets_sync ON tenancy_mw_tags",
    "DROP FUNCTION IF EXISTS tenancy_mw_tag_sets_truncate()",
    "DROP FUNCTION IF EXISTS tenancy_mw_tag_sets_sync()",
    "DROP TABLE IF EXISTS tenancy_mw_tag_sets",
)


class TagSets(NamedTuple):
    """The tag set table where it is kept in step, and how many resources it holds (PostgreSQL's estimate)."""

    table: sa.Table
    rows: int


# The table is there and the trigger fires for ordinary sessions ('O'), or
# always ('A'); 'D' (disabled) and 'R' (replicas only) leave it behind.
# reltuples: the planner's row count (-1 before the table is first analysed).
_IN_STEP_SQL = sa.text(
    "SELECT c.reltuples FROM pg_catalog.pg_class c WHERE c.oid = to_regclass(:sets)"
    " AND has_table_privilege(c.oid, 'SELECT') AND"
    " (SELECT count(*) FROM pg_catalog.pg_trigger t WHERE t.tgrelid = to_regclass(:tags)"
    "  AND t.tgname IN (:sync, :truncate) AND t.tgenabled IN ('O', 'A')) = 2"
)


def read_tag_sets(connection: sa.Connection, tags: sa.Table | None = None) -> TagSets | None:
    """The tag set table and its row count, if it is there and kept in step with the tag table *tags*; else ``None``.

    One catalog query, no read of the tables: the set table exists, the
    session's role may read it, and both its triggers on the tag table are
    enabled.  ``None`` on another
    database or before PostgreSQL 12, and for a tag table other than ``tenancy_mw_tags`` on the
    search path (a schema named on the table included: the triggers follow
    the table they were made beside).  *rows*: PostgreSQL's estimate, 0
    before it first analysed the table.  A trigger left enabled in the
    ``replica`` session role (``session_replication_role``) does not fire
    there: a logical replica that receives the tag table alone, or a bulk
    load in that role, must refill the sets itself.

    Example (PostgreSQL)::

        sets = read_tag_sets(conn)
        condition = query.where(servers.c.id, counts=counts, candidates=rows, sets=sets)
    """
    if connection.dialect.name != "postgresql":
        return None
    if (connection.dialect.server_version_info or (0,)) < (12,):
        # The matches-first form's MATERIALIZED (in_tag_sets) came in 12.
        return None
    if tags is not None and (tags.name != "tenancy_mw_tags" or tags.schema is not None):
        return None
    names = {"tags": "tenancy_mw_tags", "sets": TAG_SET_TABLE, "sync": SYNC_TRIGGER, "truncate": TRUNCATE_TRIGGER}
    found = connection.execute(_IN_STEP_SQL, names).first()
    if found is None:
        return None
    return TagSets(TAG_SETS, max(0, int(found[0])))


def in_tag_sets(
    resource_id: sa.ColumnElement,
    simple: tuple[frozenset, frozenset, frozenset, frozenset],
    after: Callable[[sa.FromClause], list[sa.ColumnElement]] | None = None,
    sets: sa.Table = TAG_SETS,
    *,
    matches_first: bool = False,
) -> sa.ColumnElement:
    """``resource_id IN (the ids whose tag set passes the simplified query)``, NULL-safe.

    *simple*: the query's required, ``tags-any``, excluded and
    ``not-tags-any`` tags (:meth:`~tenancy_mw.tags.model.TagQuery.simplified`),
    at least one required or ``tags-any`` tag; *after*: given the set
    table's alias, the conditions that start it at the page's marker.
    *matches_first*: the matching ids in a ``MATERIALIZED`` common table
    expression inside the ``IN`` (PostgreSQL 12 or later), so that
    PostgreSQL finds every match from the set index first and then looks
    each up among the caller's rows, rather than read the sets in id order
    until the page fills; for queries that few sets pass (the rows found
    are the same).

    Example::

        >>> ids = sa.table("servers", sa.column("id")).c.id
        >>> condition = in_tag_sets(ids, (frozenset({"red"}), frozenset(), frozenset({"old"}), frozenset()))
        >>> print(" ".join(str(condition.compile(dialect=postgresql.dialect())).split()))
        ... # doctest: +NORMALIZE_WHITESPACE
        servers.id IS NOT NULL AND servers.id IN (SELECT tenancy_mw_tag_sets_1.resource_id
        FROM tenancy_mw_tag_sets AS tenancy_mw_tag_sets_1 WHERE (tenancy_mw_tag_sets_1.tags @> %(tags_1)s::TEXT[])
        AND NOT (tenancy_mw_tag_sets_1.tags && %(tags_2)s::TEXT[]))
    """
    all_of, any_of, none_of, not_all_of = simple
    if not (all_of or any_of):
        raise ValueError("the tag set form needs a required or tags-any tag")
    alias = sets.alias()
    tags = alias.c.tags
    tests = []
    if all_of:
        tests.append(tags.contains(sorted(all_of)))
    if any_of:
        tests.append(tags.overlap(sorted(any_of)))
    if none_of:
        tests.append(sa.not_(tags.overlap(sorted(none_of))))
    if not_all_of:
        tests.append(sa.not_(tags.contains(sorted(not_all_of))))
    ids = sa.select(alias.c.resource_id).where(*tests, *(after(alias) if after else ()))
    if matches_first:
        # Materialised, the CTE is planned apart for all its rows (the set
        # index's bitmap), and the planner, without statistics for it,
        # looks each match up in the caller's ids instead of merging them.
        matches = ids.cte(MATCHES_CTE, nesting=True).prefix_with("MATERIALIZED")
        ids = sa.select(matches.c.resource_id)
    return sa.and_(resource_id.is_not(None), resource_id.in_(ids))
