"""The tag store on SQLite, PostgreSQL and MariaDB: CRUD, exact comparison, the limit under concurrency, batches."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from tenancy_mw import migrations, sql
from tenancy_mw.tag_store import TagLimitExceeded, TagStore
from tenancy_mw.tags import InvalidTag


@pytest.fixture(scope="module")
def migrated_url(module_sql_url):
    """A database per backend for the module, with the ``tags`` component applied by its migration."""
    migrations.upgrade(module_sql_url, ["tags"])
    yield module_sql_url
    migrations.downgrade(module_sql_url, "tags")


@pytest.fixture
def store(migrated_url):
    tag_store = TagStore(migrated_url, max_tags=5)
    with tag_store.engine.begin() as conn:
        conn.execute(tag_store.tags.delete())
        conn.execute(tag_store.locks.delete())
    yield tag_store
    tag_store.engine.dispose()


def test_add_check_remove(store):
    assert store.add_tag("r1", "red") is True
    assert store.add_tag("r1", "red") is False
    assert store.has_tag("r1", "red")
    assert not store.has_tag("r2", "red")
    assert store.tags_of("r1") == ["red"]
    assert store.remove_tag("r1", "red") is True
    assert store.remove_tag("r1", "red") is False
    assert store.tags_of("r1") == []


def test_tags_compare_exactly_on_every_backend(store):
    # nova's MySQL table took 'Foo' for 'foo' and silently stored nothing.
    for tag in ("foo", "Foo", "FOO", "foo "):
        assert store.add_tag("r1", tag) is True, tag
    assert store.tags_of("r1") == ["FOO", "Foo", "foo", "foo "]
    assert not store.has_tag("r1", "fOo")
    assert store.remove_tag("r1", "Foo") is True
    assert store.tags_of("r1") == ["FOO", "foo", "foo "]


def test_resource_ids_compare_exactly(store):
    store.add_tag("abc", "x")
    assert store.tags_of("ABC") == []
    assert store.tags_of("abc ") == []


def test_unicode_tags_of_sixty_bytes(store):
    tag = "é" * 30
    assert store.add_tag("r1", tag) is True
    assert store.tags_of("r1") == [tag]
    with pytest.raises(InvalidTag):
        store.add_tag("r1", "é" * 31)


def test_the_limit_counts_after_already_there(store):
    store.replace_tags("r1", ["a", "b", "c", "d", "e"])
    # Re-adding a tag of a full resource is "already there", not "too many".
    assert store.add_tag("r1", "c") is False
    with pytest.raises(TagLimitExceeded) as caught:
        store.add_tag("r1", "f")
    assert "at most 5" in caught.value.detail
    assert store.tags_of("r1") == ["a", "b", "c", "d", "e"]


def test_replace_keeps_what_stays_and_changes_nothing_when_refused(store):
    store.replace_tags("r1", ["a", "b"])
    assert store.replace_tags("r1", ["b", "c"]) == ["b", "c"]
    with pytest.raises(TagLimitExceeded):
        store.replace_tags("r1", list("abcdef"))
    with pytest.raises(ValueError, match="duplicate"):
        store.replace_tags("r1", ["x", "x"])
    with pytest.raises(InvalidTag):
        store.replace_tags("r1", ["x", "a/b"])
    assert store.tags_of("r1") == ["b", "c"]
    assert store.replace_tags("r1", []) == []
    assert store.tags_of("r1") == []


def test_remove_all_and_forget(store):
    store.replace_tags("r1", ["a", "b"])
    store.replace_tags("r2", ["a"])
    assert store.remove_all("r1") == 2
    store.forget("r2")
    assert store.tags_of_many(["r1", "r2"]) == {"r1": [], "r2": []}
    with store.engine.connect() as conn:
        assert (
            conn.execute(
                sa.select(sa.func.count()).select_from(store.locks).where(store.locks.c.resource_id == "r2")
            ).scalar()
            == 0
        )


def test_batch_is_one_query_for_a_page(store):
    for number in range(30):
        store.replace_tags("r%02d" % number, ["t%d" % (number % 3), "all"])
    statements = []

    def count(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", count)
    try:
        found = store.tags_of_many(["r%02d" % n for n in range(30)] + ["none"])
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", count)
    assert len(statements) == 1
    assert found["r04"] == ["all", "t1"]
    assert found["none"] == []
    assert len(found) == 31


def _add_after(store, barrier, outcomes, resource_id, tag):
    barrier.wait()
    try:
        outcomes.append(store.add_tag(resource_id, tag))
    except TagLimitExceeded:
        outcomes.append("full")


@pytest.mark.parametrize("start", [0, 3], ids=["first-write", "lock-row-exists"])
def test_concurrent_adds_near_the_limit_never_pass_it(store, start):
    """Eight clients add eight different tags to one resource at once; only the free places are taken."""
    for round_number in range(3):
        resource_id = "race-%d-%d" % (start, round_number)
        if start:
            store.replace_tags(resource_id, ["old%d" % n for n in range(start)])
        barrier = threading.Barrier(8)
        outcomes = []
        threads = [
            threading.Thread(target=_add_after, args=(store, barrier, outcomes, resource_id, "new%d" % n))
            for n in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(map(str, outcomes)) == ["True"] * (5 - start) + ["full"] * (3 + start)
        assert len(store.tags_of(resource_id)) == 5


def test_store_of_an_engine_and_its_own_tables():
    metadata = sa.MetaData()
    from tenancy_mw.tags import define_tables

    tables = define_tables(metadata)
    engine = sql.create_engine("sqlite://")
    metadata.create_all(engine)
    store = TagStore(engine, tables=tables)
    store.add_tag("x", "y")
    assert store.tags_of("x") == ["y"]
    with pytest.raises(ValueError, match="max_tags"):
        TagStore(engine, max_tags=0)
    store.close()  # the service's engine: left open
    assert store.tags_of("x") == ["y"]
    engine.dispose()
    with pytest.raises(ValueError, match="resource id"):
        store.add_tag("", "y")


@pytest.mark.parametrize("removal", ["remove_all", "remove_tag"])
def test_removals_wait_for_a_writer_of_the_same_resource(store, removal):
    """A removal waits for a replace of the same resource in flight, so the two never interleave.

    Without the lock, ``DELETE .../tags`` racing ``PUT .../tags ["a", "c"]``
    on a resource tagged a, b could end with only ``c`` (the replace kept
    ``a`` as already there while the removal deleted it): neither order of
    the two requests gives that set.
    """
    store.replace_tags("held", ["a", "b"])
    locks = store.locks
    finished = threading.Event()
    outcome = []

    def remove():
        outcome.append(store.remove_all("held") if removal == "remove_all" else store.remove_tag("held", "a"))
        finished.set()

    # Another writer holds the resource's lock row, as replace_tags does mid-flight.
    with store.engine.connect() as holder:
        with holder.begin():
            holder.execute(locks.update().where(locks.c.resource_id == "held").values(resource_id="held"))
            thread = threading.Thread(target=remove)
            thread.start()
            assert not finished.wait(0.5), "the removal ran while another writer held the resource"
            holder.execute(store.tags.insert().values(resource_id="held", tag="c"))
        thread.join(10)
    assert finished.is_set()
    # The removal ran after the writer: it saw (and removed) the writer's tag c.
    expected = ([3], []) if removal == "remove_all" else ([True], ["b", "c"])
    assert (outcome, store.tags_of("held")) == expected


def test_a_string_is_not_taken_for_a_list_of_tags_or_ids(store):
    """``replace_tags("r", "abc")`` would tag r with a, b and c; ``tags_of_many("abc")`` read three ids."""
    with pytest.raises(TypeError, match="not a string"):
        store.replace_tags("str-1", "abc")
    with pytest.raises(TypeError, match="not a string"):
        store.tags_of_many("abc")
    assert store.tags_of("str-1") == []
