"""PostgreSQL's tag set table: made with the tag table, kept in step by its trigger whoever writes, read only then."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from tenancy_mw import migrations
from tenancy_mw.core import sql
from tenancy_mw.tags.model import TagQuery, parse_tag_query
from tenancy_mw.tags.sets import (
    FILL_TAG_SETS,
    SYNC_TRIGGER,
    TAG_SET_TABLE,
    TAG_SETS,
    TAG_SETS_DDL,
    TRUNCATE_TRIGGER,
    TagSets,
    in_tag_sets,
    read_tag_sets,
)
from tenancy_mw.tags.sql import define_tables
from tenancy_mw.tags.store import TagStore
from tests.conftest import require
from tests.support import databases
from tests.support.tag_forms import form_of

POOL = ["a", "b", "c", "d", "e", "A", "a ", "é"]

_metadata = sa.MetaData()
RESOURCES = sa.Table("things", _metadata, sa.Column("id", sql.ExactString(40), primary_key=True))
TABLES = define_tables(_metadata)


@pytest.fixture(scope="module")
def pg_engine():
    """A PostgreSQL database of the module's own, with the resource and tag tables made by ``create_all``."""
    databases_made = databases.server_database("postgresql", require)
    engine = sql.create_engine(next(databases_made))
    _metadata.create_all(engine)
    yield engine
    engine.dispose()
    databases_made.close()  # drops the database


def sets_of(conn) -> dict[str, set[str]]:
    """The tag set table, read back: ``{resource_id: tags}``."""
    return {rid: set(tags) for rid, tags in conn.execute(sa.select(TAG_SETS.c.resource_id, TAG_SETS.c.tags))}


def tags_of(conn) -> dict[str, set[str]]:
    """The tag table's rows, grouped by resource: what the sets must hold."""
    found: dict[str, set[str]] = {}
    for rid, tag in conn.execute(sa.select(TABLES.tags.c.resource_id, TABLES.tags.c.tag)):
        found.setdefault(rid, set()).add(tag)
    return found


def test_the_tag_set_table_comes_and_goes_with_the_tag_table_on_postgresql_only(sql_url):
    """``create_all`` and ``drop_all`` of the tag tables: the set table and its trigger on PostgreSQL only."""
    metadata = sa.MetaData()
    define_tables(metadata)
    engine = sql.create_engine(sql_url)
    try:
        metadata.create_all(engine)
        postgresql = engine.dialect.name == "postgresql"
        assert (TAG_SET_TABLE in sa.inspect(engine).get_table_names()) is postgresql
        with engine.connect() as conn:
            assert (read_tag_sets(conn) is not None) is postgresql
        metadata.drop_all(engine)
        assert TAG_SET_TABLE not in sa.inspect(engine).get_table_names()
        if postgresql:
            with engine.connect() as conn:
                left = conn.execute(sa.text("SELECT count(*) FROM pg_proc WHERE proname LIKE 'tenancy_mw_tag_sets%'"))
                assert left.scalar_one() == 0
    finally:
        engine.dispose()


# Writes: (kind, resource, tag[, other]) drawn at random and applied with plain SQL.
writes = st.lists(
    st.tuples(
        st.sampled_from(["insert", "delete", "retag", "move", "delete-resource"]),
        st.sampled_from(["r1", "r2", "r3"]),
        st.sampled_from(POOL),
        st.sampled_from(POOL + ["r1", "r2", "r3"]),
    ),
    max_size=25,
)


def _apply(conn, kind: str, rid: str, tag: str, other: str) -> None:
    tags = TABLES.tags
    row = sa.and_(tags.c.resource_id == rid, tags.c.tag == tag)
    if kind == "insert":
        conn.execute(
            sa.text("INSERT INTO tenancy_mw_tags VALUES (:r, :t) ON CONFLICT DO NOTHING"), {"r": rid, "t": tag}
        )
    elif kind == "delete":
        conn.execute(tags.delete().where(row))
    elif kind == "delete-resource":
        conn.execute(tags.delete().where(tags.c.resource_id == rid))
    else:
        # An UPDATE of the tag, or of the resource it is on (where that row is
        # not there already): both sets change.
        moved = {"tag": other} if kind == "retag" else {"resource_id": other}
        taken = tags.alias("taken")
        there = sa.exists().where(
            taken.c.resource_id == moved.get("resource_id", rid), taken.c.tag == moved.get("tag", tag)
        )
        conn.execute(tags.update().where(row, ~there).values(**moved))


@settings(max_examples=40)
@given(batches=st.lists(writes, min_size=1, max_size=4), truncate=st.booleans())
def test_every_write_of_the_tag_table_keeps_the_sets_in_step(pg_engine, batches, truncate):
    """INSERT, DELETE, UPDATE of either column, in transactions of several writes, and TRUNCATE: the sets follow."""
    with pg_engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tenancy_mw_tags"))
    for batch in batches:
        with pg_engine.begin() as conn:
            for write in batch:
                _apply(conn, *write)
        with pg_engine.connect() as conn:
            assert sets_of(conn) == tags_of(conn)
    if truncate:
        with pg_engine.begin() as conn:
            conn.execute(sa.text("TRUNCATE tenancy_mw_tags"))
        with pg_engine.connect() as conn:
            assert sets_of(conn) == {}


def test_a_rolled_back_write_leaves_the_sets_as_they_were(pg_engine):
    with pg_engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tenancy_mw_tags"))
        conn.execute(TABLES.tags.insert(), [{"resource_id": "r1", "tag": "a"}])
    with pg_engine.connect() as conn:
        with conn.begin() as transaction:
            conn.execute(TABLES.tags.insert(), [{"resource_id": "r1", "tag": "b"}, {"resource_id": "r2", "tag": "c"}])
            conn.execute(TABLES.tags.delete().where(TABLES.tags.c.tag == "a"))
            transaction.rollback()
        assert sets_of(conn) == {"r1": {"a"}}


@pytest.mark.parametrize(
    ("first_writes", "expected"),
    [(("add a", "remove old"), {"a", "b"}), (("remove old",), {"b"}), (("remove old", "add a"), {"a", "b"})],
    ids=["adds-then-removes", "removes-the-last-tag", "removes-the-last-then-adds"],
)
def test_writers_of_one_resource_at_once_keep_each_others_tags(pg_engine, first_writes, expected):
    """Two transactions tag one resource at once, outside any store lock; the first may empty its set meanwhile."""
    with pg_engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tenancy_mw_tags"))
        conn.execute(TABLES.tags.insert(), [{"resource_id": "r1", "tag": "old"}])
    first = pg_engine.connect()
    try:
        first.begin()
        for write in first_writes:
            if write == "add a":
                first.execute(TABLES.tags.insert().values(resource_id="r1", tag="a"))
            else:
                first.execute(TABLES.tags.delete().where(TABLES.tags.c.tag == "old"))
        errors: list[BaseException] = []

        def second_writer():
            try:
                with pg_engine.begin() as conn:
                    # Waits on the first transaction's change of r1's set.
                    conn.execute(TABLES.tags.insert().values(resource_id="r1", tag="b"))
            except BaseException as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

        writer = threading.Thread(target=second_writer)
        writer.start()
        assert _waits_on_a_lock(pg_engine, "INSERT INTO tenancy_mw_tags"), "the second writer did not wait"
        first.commit()
        writer.join(30)
        assert not writer.is_alive()
        assert errors == []
    finally:
        first.close()
    with pg_engine.connect() as conn:
        assert sets_of(conn) == tags_of(conn) == {"r1": expected}


def _waits_on_a_lock(engine, statement_start: str, seconds: float = 30.0) -> bool:
    """Whether another session running *statement_start*... comes to wait on a lock within *seconds*."""
    deadline = time.monotonic() + seconds
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database() AND query LIKE :start"
                ),
                {"start": statement_start + "%"},
            ).scalar_one()
            if waiting:
                return True
            time.sleep(0.05)
    return False


def test_a_repeatable_read_writer_that_cannot_see_a_set_fails_to_serialize_never_leaves_it_behind(pg_engine):
    """As when a migration fills the sets after such a writer's snapshot: its delete is refused (40001), retryable."""
    with pg_engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tenancy_mw_tags"))
        conn.execute(TABLES.tags.insert(), [{"resource_id": "r1", "tag": "a"}, {"resource_id": "r1", "tag": "b"}])
    old_snapshot = pg_engine.connect().execution_options(isolation_level="REPEATABLE READ")
    try:
        old_snapshot.begin()
        assert old_snapshot.execute(sa.select(sa.func.count()).select_from(TABLES.tags)).scalar_one() == 2
        with pg_engine.begin() as conn:
            # The set row is made anew after the snapshot, as a migration's fill makes it.
            conn.execute(TAG_SETS.delete())
            conn.execute(sa.text(FILL_TAG_SETS))
        with pytest.raises(sa.exc.OperationalError) as refused:
            old_snapshot.execute(TABLES.tags.delete().where(TABLES.tags.c.tag == "a"))
        assert refused.value.orig.pgcode == "40001"
        assert sql.is_retryable(refused.value)
        old_snapshot.rollback()
    finally:
        old_snapshot.close()
    with pg_engine.connect() as conn:
        assert sets_of(conn) == tags_of(conn) == {"r1": {"a", "b"}}


def test_the_stores_writes_keep_the_sets_in_step(pg_engine):
    store = TagStore(pg_engine, tables=TABLES, max_tags=4)
    with pg_engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tenancy_mw_tags"))
    rng = random.Random(7)  # noqa: S311 - a repeatable sequence of writes
    for _ in range(60):
        rid = rng.choice(["r1", "r2", "r3"])
        verb = rng.choice(["add", "replace", "remove", "remove_all", "forget"])
        if verb == "add":
            try:
                store.add_tag(rid, rng.choice(POOL))
            except ValueError:
                pass  # over max_tags: nothing changed
        elif verb == "replace":
            store.replace_tags(rid, rng.sample(POOL, rng.randint(0, 4)))
        elif verb == "remove":
            store.remove_tag(rid, rng.choice(POOL))
        else:
            getattr(store, verb)(rid)
        with pg_engine.connect() as conn:
            assert sets_of(conn) == tags_of(conn)


IDS = ["r%02d" % n for n in range(12)]
resource_tags = st.dictionaries(st.sampled_from(IDS), st.frozensets(st.sampled_from(POOL), max_size=5), max_size=12)
tag_subsets = st.frozensets(st.sampled_from(POOL), max_size=4)
queries = st.builds(
    TagQuery, tag_subsets, tag_subsets, tag_subsets, tag_subsets, st.sampled_from(["guideline", "nova"])
)


#: Counts and candidates that make PostgreSQL test any query with a tags-any on the sets (SETS_DENSE_MIN_SHARE).
EVERY_TAG_COMMON = dict.fromkeys(POOL, 1_000_000)


@settings(max_examples=60)
@given(
    resources=resource_tags,
    query=queries,
    marker=st.sampled_from([None, "r", "r03", "r05 ", "r11", "s"]),
)
def test_the_set_form_finds_exactly_what_matches_accepts(pg_engine, resources, query, marker):
    """Through ``tag_condition`` with the sets, on a first page and after a marker: what ``matches`` keeps."""
    with pg_engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tenancy_mw_tags"))
        conn.execute(RESOURCES.delete())
        conn.execute(RESOURCES.insert(), [{"id": rid} for rid in IDS])
        rows = [{"resource_id": rid, "tag": tag} for rid, tags in resources.items() for tag in tags]
        if rows:
            conn.execute(TABLES.tags.insert(), rows)
    expected = [rid for rid in IDS if query.matches(resources.get(rid, set())) and (marker is None or rid > marker)]
    condition = query.where(
        RESOURCES.c.id, TABLES.tags, EVERY_TAG_COMMON, 1_000_000, marker=marker, sets=TagSets(TAG_SETS, 12)
    )
    simple = query.simplified()
    assert ("tenancy_mw_tag_sets" in str(condition.compile(pg_engine))) == bool(simple and simple[1])
    statement = sa.select(RESOURCES.c.id).where(condition).order_by(RESOURCES.c.id)
    with pg_engine.connect() as conn:
        assert list(conn.execute(statement).scalars()) == expected
    if simple and (simple[0] or simple[1]):
        # The set form of any query with a required tag, tags-any or not.
        # Both ways of reading the sets: as the planner likes, and the matches first.
        after = None if marker is None else (lambda alias: [alias.c.resource_id > marker])
        for matches_first in (False, True):
            direct = sa.select(RESOURCES.c.id).where(
                in_tag_sets(RESOURCES.c.id, simple, after=after, matches_first=matches_first)
            )
            with pg_engine.connect() as conn:
                assert list(conn.execute(direct.order_by(RESOURCES.c.id)).scalars()) == expected


def test_the_tag_sets_are_left_alone_before_postgresql_12():
    """PostgreSQL 11 knows no ``MATERIALIZED`` (the matches-first form): no sets there, read before any query.

    A stand-in connection: no PostgreSQL 11 runs here, and the answer comes from the dialect's version alone.
    """

    class Dialect:
        name = "postgresql"
        server_version_info = (11, 22)

    class OldServer:
        dialect = Dialect()

        def execute(self, *args, **kwargs):
            raise AssertionError("queried the catalog of a server it cannot use")

    assert read_tag_sets(OldServer()) is None  # type: ignore[arg-type]
    Dialect.server_version_info = None  # type: ignore[assignment]
    assert read_tag_sets(OldServer()) is None  # type: ignore[arg-type]


def test_the_set_form_needs_a_required_or_tags_any_tag():
    with pytest.raises(ValueError, match="required or tags-any"):
        in_tag_sets(RESOURCES.c.id, (frozenset(), frozenset(), frozenset({"a"}), frozenset()))


def test_a_set_table_not_in_step_is_not_in_step(pg_engine):
    """A disabled trigger (a bulk load) or a tag table of another name: the store must not read the sets."""
    with pg_engine.connect() as conn:
        assert read_tag_sets(conn, TABLES.tags) is not None
        other = sa.Table("other_tags", sa.MetaData(), sa.Column("resource_id", sa.Text))
        assert read_tag_sets(conn, other) is None
        in_a_schema = sa.Table("tenancy_mw_tags", sa.MetaData(schema="public"), sa.Column("resource_id", sa.Text))
        assert read_tag_sets(conn, in_a_schema) is None
    for trigger in (SYNC_TRIGGER, TRUNCATE_TRIGGER):
        with pg_engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE tenancy_mw_tags DISABLE TRIGGER %s" % trigger))
        try:
            with pg_engine.connect() as conn:
                assert read_tag_sets(conn, TABLES.tags) is None, trigger
        finally:
            with pg_engine.begin() as conn:
                conn.execute(sa.text("ALTER TABLE tenancy_mw_tags ENABLE TRIGGER %s" % trigger))


def test_the_migration_makes_the_sets_on_postgresql_only_and_fills_them_from_the_tags_there(sql_url):
    """Upgrading a tag table with rows fills the sets from them; downgrading one revision removes the sets alone."""
    migrations.upgrade(sql_url, ["tags"])
    migrations.downgrade(sql_url, "tags", "7d3c1a9e4b20")
    engine = sql.create_engine(sql_url)
    try:
        assert TAG_SET_TABLE not in sa.inspect(engine).get_table_names()
        with engine.begin() as conn:
            conn.execute(TABLES.tags.insert(), [{"resource_id": "r1", "tag": t} for t in ("a", "b")])
        migrations.upgrade(sql_url, ["tags"])
        postgresql = engine.dialect.name == "postgresql"
        assert (TAG_SET_TABLE in sa.inspect(engine).get_table_names()) is postgresql
        with engine.connect() as conn:
            assert (read_tag_sets(conn) is not None) is postgresql
            if postgresql:
                assert sets_of(conn) == {"r1": {"a", "b"}}
        migrations.downgrade(sql_url, "tags", "7d3c1a9e4b20")
        assert TAG_SET_TABLE not in sa.inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert tags_of(conn) == {"r1": {"a", "b"}}
    finally:
        engine.dispose()


# The catalog of what the set DDL makes: table columns, indexes, functions, triggers.
_CATALOG = {
    "columns": "SELECT column_name, data_type, character_maximum_length, is_nullable FROM information_schema.columns"
    " WHERE table_name = 'tenancy_mw_tag_sets' ORDER BY column_name",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'tenancy_mw_tag_sets' ORDER BY indexname",
    "functions": "SELECT proname, pg_get_functiondef(oid) FROM pg_proc WHERE proname LIKE 'tenancy_mw_tag_sets%'"
    " ORDER BY proname",
    "triggers": "SELECT tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger"
    " WHERE tgrelid = 'tenancy_mw_tags'::regclass AND NOT tgisinternal ORDER BY tgname",
}


def _catalog(url: str) -> dict[str, list[tuple]]:
    engine = sql.create_engine(url)
    try:
        with engine.connect() as conn:
            return {part: [tuple(row) for row in conn.execute(sa.text(query))] for part, query in _CATALOG.items()}
    finally:
        engine.dispose()


def test_the_migration_and_create_all_build_the_same_set_table_and_trigger(make_database):
    """The migration's own copy of the DDL and the runtime's (``create_all``) give PostgreSQL the same catalog."""
    migrated, created = make_database("postgresql"), make_database("postgresql")
    migrations.upgrade(migrated, ["tags"])
    engine = sql.create_engine(created)
    try:
        define_tables(sa.MetaData()).tags.metadata.create_all(engine)
    finally:
        engine.dispose()
    by_migration, by_create_all = _catalog(migrated), _catalog(created)
    assert by_migration == by_create_all
    assert [name for name, *_ in by_migration["triggers"]] == [SYNC_TRIGGER, "tenancy_mw_tag_sets_truncate"]
    assert len(by_migration["functions"]) == 2
    assert len(by_migration["indexes"]) == 2


def _fill_and_analyse(engine, resources: dict[str, set[str]]) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tenancy_mw_tags"))
        conn.execute(RESOURCES.delete())
        conn.execute(RESOURCES.insert(), [{"id": rid} for rid in resources])
        conn.execute(
            TABLES.tags.insert(), [{"resource_id": r, "tag": t} for r, tags in resources.items() for t in tags]
        )
        # Counted before COMMIT returns (else they may read as changed since the ANALYZE below).
        conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("ANALYZE tenancy_mw_tags"))
        conn.execute(sa.text("ANALYZE tenancy_mw_tag_sets"))


def test_the_store_tests_a_dense_query_on_the_sets_only_while_their_trigger_keeps_them_in_step(pg_engine):
    """A ``tags-any`` on most resources over many candidates: the set form, the same rows; with the trigger off, not."""
    rng = random.Random(3)  # noqa: S311 - repeatable test data
    resources = {"r%05d" % n: {t for t in ("a", "b", "c") if rng.random() < 0.8} for n in range(3000)}
    _fill_and_analyse(pg_engine, resources)
    query = parse_tag_query("tags-any=a,b&not-tags-any=a,c")
    expected = sorted(rid for rid, tags in resources.items() if query.matches(tags))[:50]
    page = sa.select(RESOURCES.c.id).order_by(RESOURCES.c.id).limit(50)

    def page_of(store):
        condition = store.where(query, RESOURCES.c.id, candidates=30_000, limit=50)
        sql_text = str(condition.compile(pg_engine))
        with pg_engine.connect() as conn:
            return "tenancy_mw_tag_sets" in sql_text, list(conn.execute(page.where(condition)).scalars())

    assert page_of(TagStore(pg_engine, tables=TABLES, statistics_ttl=0)) == (True, expected)
    with pg_engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE tenancy_mw_tags DISABLE TRIGGER %s" % SYNC_TRIGGER))
    try:
        assert page_of(TagStore(pg_engine, tables=TABLES, statistics_ttl=0)) == (False, expected)
    finally:
        with pg_engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE tenancy_mw_tags ENABLE TRIGGER %s" % SYNC_TRIGGER))


def test_a_tag_table_in_a_named_schema_gets_no_set_table_and_is_read_alone(make_database):
    """The set DDL names no schema: for tag tables in one it stays out, and the store reads no sets for them."""
    url = make_database("postgresql")
    engine = sql.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE SCHEMA elsewhere"))
        tables = define_tables(sa.MetaData(schema="elsewhere"))
        tables.tags.metadata.create_all(engine)
        inspector = sa.inspect(engine)
        assert TAG_SET_TABLE not in inspector.get_table_names(schema="elsewhere")
        assert TAG_SET_TABLE not in inspector.get_table_names()
        with engine.connect() as conn:
            assert read_tag_sets(conn, tables.tags) is None
    finally:
        engine.dispose()


def test_a_truncate_naming_the_set_table_too_empties_both(pg_engine):
    """As a test fixture's "truncate every table" does: the trigger's own TRUNCATE must not fail there."""
    with pg_engine.begin() as conn:
        conn.execute(TABLES.tags.insert(), [{"resource_id": "r7", "tag": "a"}])
    with pg_engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE tenancy_mw_tags, tenancy_mw_tag_sets"))
    with pg_engine.connect() as conn:
        assert sets_of(conn) == tags_of(conn) == {}


def test_a_truncate_from_an_older_snapshot_empties_the_sets_it_cannot_see(pg_engine):
    """REPEATABLE READ: a set added after the snapshot goes with the tag rows the TRUNCATE removes."""
    with pg_engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE tenancy_mw_tags"))
    old_snapshot = pg_engine.connect().execution_options(isolation_level="REPEATABLE READ")
    try:
        old_snapshot.begin()
        assert old_snapshot.execute(sa.select(sa.func.count()).select_from(TAG_SETS)).scalar_one() == 0
        with pg_engine.begin() as conn:
            conn.execute(TABLES.tags.insert(), [{"resource_id": "r8", "tag": "a"}])
        old_snapshot.execute(sa.text("TRUNCATE tenancy_mw_tags"))
        old_snapshot.commit()
    finally:
        old_snapshot.close()
    with pg_engine.connect() as conn:
        assert sets_of(conn) == tags_of(conn) == {}


def test_create_all_on_an_autocommit_connection_makes_the_sets(make_database):
    """No statement of the runtime DDL needs a transaction block (a LOCK would: it is the migration's alone)."""
    engine = sql.create_engine(make_database("postgresql"))
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            define_tables(sa.MetaData()).tags.metadata.create_all(conn)
            assert read_tag_sets(conn) is not None
    finally:
        engine.dispose()


def test_the_offline_migration_sql_holds_the_functions_as_written(capsys):
    """``tenancy-mw-manage db upgrade --sql``: the DBA's script creates the same functions (no doubled %)."""
    migrations.upgrade("postgresql://nobody@127.0.0.1:1/none", ["tags"], sql_only=True)
    script = capsys.readouterr().out
    for statement in TAG_SETS_DDL:
        assert statement in script
    assert FILL_TAG_SETS in script
    assert (
        script.index("LOCK TABLE tenancy_mw_tags") < script.index(FILL_TAG_SETS) < script.index(SYNC_TRIGGER + " AFTER")
    )


def test_a_role_that_may_not_read_the_sets_is_never_sent_to_them(pg_engine):
    """A reader granted the tag table alone: the sets are not in step for it, so its queries keep the tag table."""
    role = "tenancy_sets_reader_%d" % os.getpid()
    with pg_engine.begin() as conn:
        conn.execute(sa.text("CREATE ROLE %s" % role))
        conn.execute(sa.text("GRANT SELECT ON tenancy_mw_tags TO %s" % role))
    try:
        with pg_engine.connect() as conn:
            conn.execute(sa.text("SET ROLE %s" % role))
            assert read_tag_sets(conn, TABLES.tags) is None
            conn.execute(sa.text("RESET ROLE"))
            conn.execute(sa.text("GRANT SELECT ON tenancy_mw_tag_sets TO %s" % role))
            conn.execute(sa.text("SET ROLE %s" % role))
            assert read_tag_sets(conn, TABLES.tags) is not None
            conn.execute(sa.text("RESET ROLE"))
            conn.commit()
    finally:
        try:
            with pg_engine.begin() as conn:
                conn.execute(sa.text("REVOKE ALL ON tenancy_mw_tags, tenancy_mw_tag_sets FROM %s" % role))
        finally:
            with pg_engine.begin() as conn:
                conn.execute(sa.text("DROP ROLE %s" % role))


def test_tag_sets_that_are_not_a_table_and_a_row_count_are_refused_by_name():
    with pytest.raises(ValueError, match="sets must be None or a TagSets"):
        parse_tag_query("tags-any=a,b").where(RESOURCES.c.id, sets=TagSets(TAG_SETS, None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sets must be None or a TagSets"):
        parse_tag_query("tags-any=a,b").where(RESOURCES.c.id, sets=TAG_SETS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sets must be None or a TagSets"):
        parse_tag_query("tags-any=a,b").where(RESOURCES.c.id, sets=TagSets(None, 5))  # type: ignore[arg-type]


def test_the_store_merges_a_whole_collections_rows_only_beside_tags_any_tags_it_has_counted(pg_engine):
    """Required tags and a ``tags-any`` on a first page of the whole collection: merged where the page fills soon.

    A ``tags-any`` tag outside the statistics' common ones is counted (up to
    their bound), not taken at the bound: two tags on one resource each
    would otherwise look like 10,000 each, and the page like full after a
    few dozen ids, where the merge would read every row of ``r``.  (Over
    more candidates than ``GROUPED_ANY_SMALL``: the store reads no counts
    for a tenant-sized page of such a query.)
    """
    resources = {"r%05d" % n: {"r"} | ({"a"} if n % 3 == 0 else {"b"} if n % 3 == 1 else set()) for n in range(30_000)}
    resources["r00005"].add("x")
    resources["r15000"].add("y")
    _fill_and_analyse(pg_engine, resources)
    store = TagStore(pg_engine, tables=TABLES, statistics_ttl=0)
    page = sa.select(RESOURCES.c.id).order_by(RESOURCES.c.id).limit(50)
    for query_string, merged in (("tags=r&tags-any=a,b", True), ("tags=r&tags-any=x,y", False)):
        query = parse_tag_query(query_string)
        condition = store.where(query, RESOURCES.c.id, candidates=30_000, limit=50)
        assert (form_of(str(page.where(condition).compile(pg_engine))) == "merged") is merged, query_string
        expected = sorted(rid for rid, tags in resources.items() if query.matches(tags))[:50]
        with pg_engine.connect() as conn:
            assert list(conn.execute(page.where(condition)).scalars()) == expected
