"""The tag store on SQLite, PostgreSQL and MariaDB: CRUD, exact comparison, the limit under concurrency, batches."""

from __future__ import annotations

import enum
import threading

import pytest
import sqlalchemy as sa

from tenancy_mw import migrations
from tenancy_mw.core import sql
from tenancy_mw.tags.model import InvalidTag, parse_tag_query
from tenancy_mw.tags.sets import SYNC_TRIGGER, TAG_SETS, TagSets
from tenancy_mw.tags.sql import (
    DRIVEN_REQUIRED_MAX,
    GROUPED_ANY_SMALL,
    GROUPED_MIN_CANDIDATES,
    MYSQL_SEMI_JOIN_MAX,
    PER_ROW_CANDIDATES_MAX,
    TAG_COUNT_CAP,
    TagStatistics,
)
from tenancy_mw.tags.store import TagLimitExceeded, TagStore, _rows_under_limit
from tests.conftest import require
from tests.support import databases
from tests.support.tag_forms import form_of


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


@pytest.fixture
def pg_store(make_database):
    """A store on a fresh PostgreSQL database of its own, the ``tags`` component applied."""
    url = make_database("postgresql")
    migrations.upgrade(url, ["tags"])
    tag_store = TagStore(url)
    yield tag_store
    tag_store.close()


def _given_statistics(tag_store: TagStore, statistics: TagStatistics, sets: TagSets | None = None) -> None:
    """Make *tag_store* hold *statistics* as if just read from pg_stats, and *sets* (none: the other forms)."""
    tag_store._statistics = (statistics, sets, float("inf"))


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


class _Statements:
    """The statements an engine sends while the block runs."""

    def __init__(self, engine):
        self.engine = engine
        self.sent: list[str] = []

    def _seen(self, conn, cursor, statement, parameters, context, executemany):
        self.sent.append(statement)

    def __enter__(self):
        sa.event.listen(self.engine, "before_cursor_execute", self._seen)
        return self.sent

    def __exit__(self, *exc_info):
        sa.event.remove(self.engine, "before_cursor_execute", self._seen)


def _servers(store, ids):
    """A table of server ids beside the store's tag table; returns its id column."""
    table = sa.Table("servers_for_tag_store", sa.MetaData(), sa.Column("id", sql.ExactString(40), primary_key=True))
    table.drop(store.engine, checkfirst=True)
    table.create(store.engine)
    with store.engine.begin() as conn:
        conn.execute(table.insert(), [{"id": server_id} for server_id in ids])
    return table


def _analysed(store):
    """Let PostgreSQL gather the tag table's statistics (autovacuum would, later)."""
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.execute(sa.text("ANALYZE %s" % store.tags.name))
            conn.commit()


def test_where_reads_statistics_only_given_candidates_and_then_reuses_them(store):
    store.replace_tags("s1", ["red", "web"])
    store.replace_tags("s2", ["blue"])
    store.replace_tags("s3", ["web"])
    _analysed(store)
    servers = _servers(store, ["s1", "s2", "s3", "s4"])
    try:
        query = parse_tag_query("tags=web&tags-any=red,blue")
        page = sa.select(servers.c.id).order_by(servers.c.id)
        found, statistics_reads = [], []
        for candidates in (None, GROUPED_MIN_CANDIDATES, GROUPED_MIN_CANDIDATES):
            with _Statements(store.engine) as sent:
                condition = store.where(query, servers.c.id, candidates)
            statistics_reads.append(sum("pg_stats" in text for text in sent))
            with store.engine.connect() as conn:
                found.append(conn.execute(page.where(condition)).scalars().all())
        assert found == [["s1"]] * 3
        # A tenant's own list (no candidates) reads nothing; a page over a
        # large collection reads PostgreSQL's statistics once, then reuses
        # them; elsewhere nothing is ever read.
        if store.engine.dialect.name == "postgresql":
            assert statistics_reads == [0, 1, 0]
            assert store.tag_statistics().counts(["web", "red"]) == {"web": 2, "red": 1}
        else:
            assert statistics_reads == [0, 0, 0]
            assert store.tag_statistics() is None
    finally:
        servers.drop(store.engine)


def test_a_tags_any_reads_the_statistics_over_few_candidates_too(store):
    """Up to PER_ROW_CANDIDATES_MAX candidates a tags-any reads the statistics; then only beside a not-tags-any."""
    store.replace_tags("s1", ["red", "web"])
    store.replace_tags("s2", ["blue"])
    store.replace_tags("s3", ["red", "web", "db"])
    _analysed(store)
    servers = _servers(store, ["s1", "s2", "s3", "s4"])
    queries = {
        "tags-any=red,blue&not-tags=db": ["s1", "s2"],
        "tags=web&tags-any=red,blue&not-tags-any=db,green": ["s1", "s3"],
        "tags-any=red,blue": ["s1", "s2", "s3"],
        "tags-any=red,blue&not-tags-any=web,db": ["s1", "s2"],
    }
    try:
        page = sa.select(servers.c.id).order_by(servers.c.id)
        for candidates in (4_000, PER_ROW_CANDIDATES_MAX, PER_ROW_CANDIDATES_MAX + 1, GROUPED_ANY_SMALL):
            statistics_reads = []
            for query_string, expected_rows in queries.items():
                fresh = TagStore(store.engine, statistics_ttl=0)
                with _Statements(store.engine) as sent:
                    condition = fresh.where(parse_tag_query(query_string), servers.c.id, candidates)
                statistics_reads.append(sum("pg_stats" in text for text in sent))
                with store.engine.connect() as conn:
                    assert conn.execute(page.where(condition)).scalars().all() == expected_rows
            # On PostgreSQL: each once up to PER_ROW_CANDIDATES_MAX (the
            # per-row form); beyond, only those beside a not-tags-any
            # (PROBED_BESIDE_NOT_ANY_MAX, DRIVEN_BESIDE_NOT_ANY_FACTOR).
            if store.engine.dialect.name != "postgresql":
                expected = [0, 0, 0, 0]
            elif candidates <= PER_ROW_CANDIDATES_MAX:
                expected = [1, 1, 1, 1]
            else:
                expected = [0, 1, 0, 1]
            assert statistics_reads == expected, candidates
    finally:
        servers.drop(store.engine)


def test_where_on_the_callers_connection_takes_no_second_one_from_the_pool(migrated_url):
    """A service holding its one pooled connection can still build the condition on it."""
    engine = sql.create_engine(migrated_url, pool_size=1, max_overflow=0, pool_timeout=2)
    tag_store = TagStore(engine)
    try:
        tag_store.replace_tags("s1", ["red"])
        _analysed(tag_store)
        servers = sa.table("servers", sa.column("id"))
        with engine.connect() as held:
            condition = tag_store.where(
                parse_tag_query("tags-any=red,blue"), servers.c.id, GROUPED_MIN_CANDIDATES, connection=held
            )
        assert condition is not None
    finally:
        engine.dispose()


def test_statistics_are_reused_for_statistics_ttl_seconds(migrated_url):
    if not migrated_url.startswith("postgresql"):
        # Nothing to reuse elsewhere: no statistics are ever read.
        elsewhere = TagStore(migrated_url)
        with _Statements(elsewhere.engine) as sent:
            assert elsewhere.tag_statistics() is None
        elsewhere.close()
        assert sent == []
        return
    kept = TagStore(migrated_url, statistics_ttl=300)
    fresh = TagStore(migrated_url, statistics_ttl=0)
    try:
        with kept.engine.begin() as conn:
            conn.execute(kept.tags.delete())
        for number in range(10):
            kept.add_tag("s%d" % number, "red")
        _analysed(kept)
        assert kept.tag_statistics().counts(["red"]) == {"red": 10} == fresh.tag_statistics().counts(["red"])
        for number in range(10, 30):
            kept.add_tag("s%d" % number, "red")
        _analysed(kept)
        # The kept estimate is stale until it expires; estimates shape SQL only.
        assert kept.tag_statistics().counts(["red"]) == {"red": 10}
        assert fresh.tag_statistics().counts(["red"]) == {"red": 30}
        with _Statements(kept.engine) as sent:
            kept.tag_statistics()
        assert sent == []
    finally:
        kept.close()
        fresh.close()


def _form(store, query_string, statistics, candidates=10**7, marker=None, sets=None):
    """The form of tags-any the store takes on PostgreSQL over a large collection, given these statistics and *sets*.

    After *marker*, on an id column that sorts as the tag table's (its range goes inside the subqueries).
    """
    from sqlalchemy.dialects import postgresql

    _given_statistics(store, statistics, sets)
    servers = sa.table("servers", sa.column("id", sql.ExactString(40) if marker else None))
    condition = store.where(parse_tag_query(query_string), servers.c.id, candidates, marker=marker)
    return form_of(str(condition.compile(dialect=postgresql.dialect())))


def test_where_takes_postgresqls_estimates_cautiously(migrated_url):
    if not migrated_url.startswith("postgresql"):
        return  # only PostgreSQL's SQL reads its statistics (MariaDB's: its EXPLAIN, tested below)
    tag_store = TagStore(migrated_url)
    try:
        common = {"big": 500_000, "large": 150_000, "mid": 60_000, "least": 7_000}
        fresh = TagStatistics(common, other=1_000, changed=0)
        # Two tags outside the common ones: each as many rows as the least common (7,000): small.
        assert _form(tag_store, "tags-any=x,y", fresh) == "grouped"
        # Five of them: 35,000 rows, over GROUPED_ANY_SMALL alone: middling, one EXISTS per tag.
        assert _form(tag_store, "tags-any=v,w,x,y,z", fresh) == "per-tag"
        # A required tag outside the common ones is rare: one subquery of the
        # tag table finds the ids, driven from the smaller set.
        assert _form(tag_store, "tags=rare&tags-any=x,y", fresh) == "driven"
        assert _form(tag_store, "tags=least&tags-any=mid,big", fresh) == "driven"
        # Unless the rows it reads whole (567,000) are more than a quarter of
        # the candidates: then one EXISTS per tag, driven from the rare
        # required tag's rows (PROBED_REQUIRED_MAX); from a more common one,
        # the semi-join.
        assert _form(tag_store, "tags=least&tags-any=mid,big", fresh, GROUPED_MIN_CANDIDATES) == "per-tag"
        assert _form(tag_store, "tags=mid&tags-any=least,big", fresh, GROUPED_MIN_CANDIDATES) == "semi-join"
        assert _form(tag_store, "tags=mid&tags-any=x,y", fresh) == "driven"
        assert _form(tag_store, "tags=large&tags-any=x,y", fresh) == "grouped"
        assert _form(tag_store, "tags=big&tags-any=mid,least", fresh) == "semi-join"
        # Alone, past PROBED_ANY_ALONE_MAX (67,000 rows here): the semi-join.
        assert _form(tag_store, "tags-any=mid,least", fresh) == "semi-join"
        assert _form(tag_store, "tags-any=big,mid", fresh) == "semi-join"
        # Beside a not-tags-any, a set on up to PROBED_BESIDE_NOT_ANY_MAX rows
        # (mid and least: 67,000) is one EXISTS per tag over fewer candidates
        # too; over middling ones up to PROBED_BESIDE_NOT_ANY_MIDDLING_MAX
        # (large and least: 157,000); big and least (507,000), the semi-join.
        assert _form(tag_store, "tags-any=mid,least&not-tags-any=a,b", fresh, 62_000) == "per-tag"
        assert _form(tag_store, "tags-any=mid,least&not-tags-any=a,b", fresh) == "per-tag"
        assert _form(tag_store, "tags-any=large,least&not-tags-any=a,b", fresh, 62_000) == "per-tag"
        assert _form(tag_store, "tags-any=large,least&not-tags-any=a,b", fresh) == "semi-join"
        assert _form(tag_store, "tags-any=big,least&not-tags-any=a,b", fresh, 62_000) == "semi-join"
        assert _form(tag_store, "tags-any=mid,least", fresh, 62_000) == "semi-join"
        # Over ~4,000 the set (67,000) is more than ten times the candidates: per row.
        assert _form(tag_store, "tags-any=mid,least&not-tags-any=a,b", fresh, 4_000) == "per-row"
        assert _form(tag_store, "tags-any=mid,least", fresh, 4_000) == "per-row"
        # Tags outside the common ones count nothing for it, but beside a
        # not-tags-any their cautious rows still choose: 2 x 7,000, one EXISTS
        # per tag; 20 x 7,000 = 140,000, the semi-join.
        assert _form(tag_store, "tags-any=least,x&not-tags-any=a,b", fresh, 4_000) == "per-tag"
        many = ",".join("u%02d" % n for n in range(20))
        assert _form(tag_store, "tags-any=%s&not-tags-any=a,b" % many, fresh, 4_000) == "semi-join"
        # Statistics older than GROUPED_ANY_SMALL changed rows are not used at all.
        stale = fresh._replace(changed=GROUPED_ANY_SMALL + 1)
        assert _form(tag_store, "tags-any=x,y", stale) == "semi-join"
        assert _form(tag_store, "tags=mid&tags-any=x,y", stale) == "semi-join"
        assert _form(tag_store, "tags=large&tags-any=x,y", stale) == "semi-join"
    finally:
        tag_store.close()


def test_required_tags_outside_the_common_ones_are_counted_where_the_statistics_bound_them_loosely(migrated_url):
    """On a large collection a tag outside pg_stats' list may be common: counted, up to DRIVEN_REQUIRED_MAX + 1."""
    if not migrated_url.startswith("postgresql"):
        return  # only PostgreSQL's SQL reads its statistics
    tag_store = TagStore(migrated_url)
    try:
        with tag_store.engine.begin() as conn:
            conn.execute(tag_store.tags.delete())
            rows = [{"resource_id": "r%05d" % n, "tag": "plenty"} for n in range(26_000)]
            rows += [{"resource_id": "r%05d" % n, "tag": "many"} for n in range(DRIVEN_REQUIRED_MAX + 1)]
            conn.execute(tag_store.tags.insert(), rows + [{"resource_id": "r%05d" % n, "tag": "few"} for n in range(5)])
        set_rows = {"big": 150_000, "mid": 80_000}
        loose = TagStatistics(set_rows | {"floor": 30_000}, other=1_000, changed=0)
        tight = TagStatistics(set_rows | {"floor": 20_000}, other=1_000, changed=0)
        # The list's least common tag on more than PROBED_REQUIRED_MAX rows:
        # counted.  5 rows: driven up to a quarter (230,005 of a million read).
        assert _form(tag_store, "tags=few&tags-any=big,mid", loose, 10**6) == "driven"
        # 26,000 rows: more than PROBED_REQUIRED_MAX, so a fifth (256,000 is
        # over it), and no EXISTS per tag: the semi-join.
        assert _form(tag_store, "tags=plenty&tags-any=big,mid", loose, 10**6) == "semi-join"
        # On at most PROBED_REQUIRED_MAX: rare, nothing read, driven.
        with _Statements(tag_store.engine) as sent:
            assert _form(tag_store, "tags=plenty&tags-any=big,mid", tight, 10**6) == "driven"
        assert sent == []
        # A tag counted to the cap is common, not on exactly the cap: beside
        # a not-tags-any over 90,000 candidates, 75,001 rows and the set's
        # 60,000 would be driven (DRIVEN_BESIDE_NOT_ANY_FACTOR), a common
        # tag (over GROUPED_ANY_REQUIRED_MAX) gets one EXISTS per tag;
        # 26,000 rows, counted exactly, driven.
        middling = TagStatistics({"x": 30_000, "y": 30_000}, other=100, changed=0)
        assert _form(tag_store, "tags=many&tags-any=x,y&not-tags-any=a,b", middling, 90_000) == "per-tag"
        assert _form(tag_store, "tags=plenty&tags-any=x,y&not-tags-any=a,b", middling, 90_000) == "driven"
        # A tag counted to the cap is as common as the statistics' bound for
        # it allows (at least TAG_COUNT_CAP): the bound, not the cap, where
        # the list's least common tag is on more rows.
        assert tag_store._required_outside(frozenset({"many", "plenty"}), 30_000, None) == {
            "many": TAG_COUNT_CAP,
            "plenty": 26_000,
        }
        assert tag_store._required_outside(frozenset({"many"}), 300_000, None) == {"many": 300_000}
        # After a marker that bound is scaled to the rows after it, as every
        # count: a twentieth of them is left, and the page is driven.
        _analysed(tag_store)
        assert _form(tag_store, "tags=many&tags-any=x,y&not-tags-any=a,b", middling, 90_000, "r70000") == "driven"
    finally:
        with tag_store.engine.begin() as conn:
            conn.execute(tag_store.tags.delete())
        tag_store.close()


def test_where_reads_only_what_can_change_the_form(migrated_url):
    """No EXPLAIN of the share after the marker where fewer rows keep the form; no statistics where they never count."""
    if not migrated_url.startswith("postgresql"):
        return  # only PostgreSQL's counts are scaled to the marker
    tag_store = TagStore(migrated_url)
    fresh = TagStore(migrated_url, statistics_ttl=0)
    try:
        common = {"big": 500_000, "large": 150_000, "mid": 60_000, "least": 7_000}
        _given_statistics(tag_store, TagStatistics(common, other=1_000, changed=0))
        servers = sa.table("servers", sa.column("id", sql.ExactString(40)))

        def page_after(store, query_string, candidates=GROUPED_MIN_CANDIDATES):
            with _Statements(store.engine) as sent:
                condition = store.where(parse_tag_query(query_string), servers.c.id, candidates, marker="m")
            return form_of(str(condition.compile(store.engine))), len(sent)

        # Fewer rows keep the driven form, and the grouped one without a required tag.
        assert page_after(tag_store, "tags=rare&tags-any=x,y") == ("driven", 0)
        assert page_after(tag_store, "tags-any=x,y") == ("grouped", 0)
        # Fewer candidates than a first page groups: after a marker whose
        # range goes inside, a set on at most GROUPED_ANY_SMALL rows (x and y,
        # outside the common tags: 7,000 each at most) is grouped, as fewer
        # rows keep it; a larger one is asked about (two EXPLAIN).
        assert page_after(tag_store, "tags-any=x,y", GROUPED_MIN_CANDIDATES - 1) == ("grouped", 0)
        # Over a tenant-sized page without a not-tags-any nothing is read: the semi-join.
        assert page_after(tag_store, "tags-any=x,y", GROUPED_ANY_SMALL) == ("semi-join", 0)
        assert page_after(tag_store, "tags-any=mid,x", GROUPED_MIN_CANDIDATES - 1)[1] == 2
        # Beside a required tag there: one EXISTS per tag when it is the rarer
        # (fewer rows keep it), the semi-join when the set is (they keep that too).
        assert page_after(tag_store, "tags=rare&tags-any=x,y", GROUPED_MIN_CANDIDATES - 1) == ("per-tag", 0)
        assert page_after(tag_store, "tags=large&tags-any=x,y", GROUPED_MIN_CANDIDATES - 1) == ("semi-join", 0)
        # Beside a not-tags-any over few candidates the whole table's counts
        # choose whatever the share: nothing is asked (but for the per-row
        # form, up to PER_ROW_CANDIDATES_MAX, where the whole table's give it).
        assert page_after(tag_store, "tags-any=least,x&not-tags-any=a,b", 4_000) == ("per-tag", 0)
        # Over middling candidates without a required tag, a set on more than
        # GROUPED_ANY_SMALL rows may be few enough after the marker to group:
        # the planner is asked, with a not-tags-any or without.
        assert page_after(tag_store, "tags-any=large,least&not-tags-any=a,b", 62_000)[1] == 2
        assert page_after(tag_store, "tags-any=mid,least", 62_000)[1] == 2
        # Without candidates (a tenant's own list) not even the statistics are read.
        assert page_after(fresh, "tags=rare&tags-any=x,y", None) == ("semi-join", 0)
        # More required rows than candidates, fewer than the set's: the share after the marker decides.
        assert page_after(tag_store, "tags=mid&tags-any=big,large", 50_000)[1] == 2
        # A form that fewer rows could change: the planner is asked for the share.
        assert page_after(tag_store, "tags-any=mid,least")[1] == 2
        # Beside a required tag and a not-tags-any over middling candidates
        # the rows after the marker choose the form; a required tag already
        # on at most PROBED_REQUIRED_MAX rows keeps it (and the set's ratio).
        assert page_after(tag_store, "tags=large&tags-any=mid,least&not-tags-any=a,b", 62_000)[1] == 2
        assert page_after(tag_store, "tags=least&tags-any=x,y&not-tags-any=a,b", 62_000) == ("driven", 0)
        assert page_after(tag_store, "tags=least&tags-any=mid,large&not-tags-any=a,b", 62_000) == ("per-tag", 0)
        # The driven form refused for the rows it would read (567,000 over
        # 100,000 candidates), one EXISTS per tag: a later page's share may allow it.
        assert page_after(tag_store, "tags=least&tags-any=mid,big") == ("per-tag", 2)
    finally:
        tag_store.close()
        fresh.close()


def test_few_candidates_beside_sets_the_statistics_show_large_are_checked_per_row(migrated_url):
    """combined on a tenant's page of ~4,000: per row where pg_stats' common tags make the sets large."""
    if not migrated_url.startswith("postgresql"):
        return  # only PostgreSQL's SQL reads its statistics
    tag_store = TagStore(migrated_url)
    try:
        common = {"big": 500_000, "large": 150_000, "mid": 60_000, "least": 7_000}
        statistics = TagStatistics(common, other=1_000, changed=0)
        # 210,000 rows over 4,000 candidates (52 times), the required tag 125 times.
        assert _form(tag_store, "tags=big&tags-any=large,mid&not-tags=z", statistics, 4_000) == "per-row"
        # A required tag outside the common ones may be rare: not per row,
        # and no counts at all (the semi-join, as before the per-row form).
        assert _form(tag_store, "tags=other&tags-any=large,mid", statistics, 4_000) == "semi-join"
        # Tags outside them count nothing here (the other rules take them as
        # up to 7,000 rows each): 7,000 + 0 + 0 is under five times 4,000
        # (21,000 would be over).
        assert _form(tag_store, "tags-any=least,x,y&not-tags=z", statistics, 4_000) == "semi-join"
        # The store's own factor: beside another part five times, alone ten
        # (mid and least, 67,000 rows over 10,000 candidates: 6.7 times).
        assert _form(tag_store, "tags-any=mid,least&not-tags=z", statistics, 10_000) == "per-row"
        assert _form(tag_store, "tags-any=mid,least", statistics, 10_000) == "semi-join"
        assert _form(tag_store, "tags-any=least,mid", statistics, PER_ROW_CANDIDATES_MAX) == "semi-join"
        assert _form(tag_store, "tags-any=large,mid", statistics, PER_ROW_CANDIDATES_MAX) == "per-row"
        # Statistics gathered before too many rows changed: none count.
        stale = TagStatistics(common, other=1_000, changed=GROUPED_ANY_SMALL + 1)
        assert _form(tag_store, "tags-any=large,mid", stale, 4_000) == "semi-join"
    finally:
        tag_store.close()


def test_a_first_page_of_few_candidates_beside_a_not_tags_any_takes_the_tag_sets_where_few_pass(migrated_url):
    """combined on a tenant's page: the sets where at most twice the candidates pass their index, else per row."""
    if not migrated_url.startswith("postgresql"):
        return  # only PostgreSQL keeps tag sets
    tag_store = TagStore(migrated_url)
    try:
        common = {"big": 500_000, "large": 150_000, "mid": 60_000, "least": 7_000}
        statistics = TagStatistics(common, other=1_000, changed=0)
        sets = TagSets(TAG_SETS, 1_000_000)
        # large with mid or least: 150,000 x 67,000 / 1,000,000 = 10,050 sets pass the index.
        query = "tags=large&tags-any=mid,least&not-tags-any=a,b"
        assert _form(tag_store, query, statistics, 5_025, sets=sets) == "sets"
        assert _form(tag_store, query, statistics, 5_024, sets=sets) == "per-row"
        # Not where the sets are not kept in step.
        assert _form(tag_store, query, statistics, 5_025) == "per-row"
        # Tags-any tags outside the common ones count as the least common, 7,000
        # each: 150,000 x 14,000 / 1,000,000 = 2,100 sets, so over 1,050 candidates.
        rare_any = "tags=large&tags-any=x,y&not-tags-any=a,b"
        assert _form(tag_store, rare_any, statistics, 1_050, sets=sets) == "sets"
        assert _form(tag_store, rare_any, statistics, 1_049, sets=sets) == "semi-join"
        assert _form(tag_store, "tags=large&tags-any=x,y&not-tags=a", statistics, 4_000, sets=sets) == "semi-join"
        # Per row without the sets beside its counts, where x counts 0: those
        # would expect 9,000 sets (under twice 4,600), the cautious ones 10,050.
        assert _form(tag_store, "tags=large&tags-any=mid,x&not-tags-any=a,b", statistics, 4_600, sets=sets) == "per-row"
    finally:
        tag_store.close()


def test_after_a_marker_the_per_row_form_is_judged_on_the_share_of_the_sets_after_it(pg_store):
    """A page near the end: the other forms read only the tag rows after the marker, so the sets count that share."""
    servers = sa.table("servers", sa.column("id", sql.ExactString(40)))
    with pg_store.engine.begin() as conn:
        rows = [{"resource_id": "r%05d" % n, "tag": tag} for n in range(20_000) for tag in ("x", "y")]
        conn.execute(pg_store.tags.insert(), rows)
        conn.exec_driver_sql("ANALYZE tenancy_mw_tags")
    query = parse_tag_query("tags-any=x,y")
    _given_statistics(pg_store, TagStatistics({"x": 20_000, "y": 20_000}, other=0, changed=0))

    def form(marker, candidates=1_000):
        with _Statements(pg_store.engine) as sent:
            condition = pg_store.where(query, servers.c.id, candidates, marker=marker)
        return form_of(str(condition.compile(pg_store.engine))), len(sent)

    # 40,000 rows, 40 times the candidates: per row, nothing asked.
    assert form(None) == ("per-row", 0)
    # After r19000 about a twentieth is left, 2,000 rows: the semi-join.
    assert form("r19000") == ("semi-join", 2)
    # After r05000, three quarters: still per row, once the planner's share is known.
    assert form("r05000") == ("per-row", 2)
    # Beside a not-tags-any, a share too small for it leaves the choice to
    # the whole table's rows: over PROBED_BESIDE_NOT_ANY_MAX the semi-join
    # (not one EXISTS per tag, which hashes the sets whole), at most it one
    # EXISTS per tag.
    query = parse_tag_query("tags-any=x,y&not-tags-any=a,b")
    _given_statistics(pg_store, TagStatistics({"x": 80_000, "y": 70_000}, other=0, changed=0))
    assert form("r19000", 4_000) == ("semi-join", 2)
    _given_statistics(pg_store, TagStatistics({"x": 40_000, "y": 40_000}, other=0, changed=0))
    assert form("r19000", 4_000) == ("per-tag", 2)
    assert form(None, 4_000) == ("per-row", 0)


def test_after_a_marker_one_exists_per_tag_is_judged_on_the_whole_tables_rows(migrated_url):
    """tags-any common after marker f: one EXISTS per tag hashes each tag's rows whole, the other forms the share."""
    if not migrated_url.startswith("postgresql"):
        return  # only PostgreSQL's counts are scaled to the marker
    tag_store = TagStore(migrated_url)
    try:
        with tag_store.engine.begin() as conn:
            conn.execute(tag_store.tags.delete())
        for number in range(100):
            tag_store.add_tag("r%03d" % number, "big")
        _analysed(tag_store)  # after r089: a tenth of the tag rows, as the planner sees them
        common = {"big": 500_000, "mid": 60_000, "half": 45_000, "least": 7_000}
        _given_statistics(tag_store, TagStatistics(common, other=1_000, changed=0))
        servers = sa.table("servers", sa.column("id", sql.ExactString(40)))

        def form_after(query_string, candidates):
            """The form of the page after r089."""
            condition = tag_store.where(parse_tag_query(query_string), servers.c.id, candidates, marker="r089")
            return form_of(str(condition.compile(tag_store.engine)))

        # 560,000 rows, about 56,000 after the marker: per tag by that share,
        # but it would hash all 560,000: the semi-join, as for the whole table.
        statistics = tag_store._statistics[0]
        assert form_after("tags-any=big,mid", 60_000) == "semi-join"
        assert form_after("tags-any=big,mid", 60_000) == _form(tag_store, "tags-any=big,mid", statistics, 60_000)
        # 67,000 rows, about 6,700 after it: grouped, which reads only those.
        assert form_after("tags-any=mid,least", 10**6) == "grouped"
        assert _form(tag_store, "tags-any=mid,least", statistics, 10**6) == "semi-join"
        # 52,000 rows, about 5,200 after it, over fewer candidates than a
        # first page groups: grouped too, which reads only those, though the
        # whole table's would give one EXISTS per tag.
        assert form_after("tags-any=half,least", 60_000) == "grouped"
        assert _form(tag_store, "tags-any=half,least", statistics, 60_000) == "per-tag"
    finally:
        tag_store.close()


def test_reading_statistics_leaves_the_callers_connection_as_it_was(migrated_url):
    tag_store = TagStore(migrated_url, statistics_ttl=0)
    servers = sa.table("servers", sa.column("id"))
    query = parse_tag_query("tags-any=red,blue")
    try:
        _analysed(tag_store)
        with tag_store.engine.connect() as conn:
            # Outside a transaction: none is left open, so the caller can begin its own.
            tag_store.where(query, servers.c.id, GROUPED_MIN_CANDIDATES, connection=conn)
            assert not conn.in_transaction()
            with conn.begin():
                conn.execute(tag_store.tags.insert().values(resource_id="kept-by-caller", tag="kept"))
                # Inside the caller's transaction: it goes on, and commits what it did.
                tag_store.where(query, servers.c.id, GROUPED_MIN_CANDIDATES, connection=conn)
                assert conn.in_transaction()
        assert tag_store.tags_of("kept-by-caller") == ["kept"]
        with pytest.raises(TypeError, match="session.connection"):
            tag_store.where(query, servers.c.id, GROUPED_MIN_CANDIDATES, connection=object())
    finally:
        tag_store.close()


def test_a_failed_statistics_read_falls_back_to_the_semi_join(migrated_url, caplog):
    if not migrated_url.startswith("postgresql"):
        return  # nothing is read elsewhere
    tag_store = TagStore(migrated_url, statistics_ttl=0)
    servers = sa.table("servers", sa.column("id"))
    try:
        with tag_store.engine.connect() as conn, conn.begin():
            # The caller's transaction has failed: the read cannot run in it.
            with pytest.raises(sa.exc.DBAPIError):
                conn.execute(sa.text("SELECT 1/0"))
            condition = tag_store.where(
                parse_tag_query("tags-any=red,blue"), servers.c.id, GROUPED_MIN_CANDIDATES, connection=conn
            )
            conn.rollback()
        assert "EXISTS" in str(condition.compile(tag_store.engine))
        assert "Could not read PostgreSQL's statistics" in caplog.text
    finally:
        tag_store.close()


def test_apply_pages_through_matches_on_every_backend(store):
    for number in range(12):
        store.replace_tags("s%02d" % number, ["red"] if number % 3 else ["blue", "web"])
    servers = _servers(store, ["s%02d" % number for number in range(12)])
    try:
        query = parse_tag_query("tags-any=blue,red&not-tags=web")
        page = sa.select(servers.c.id).order_by(servers.c.id).limit(3)
        seen, marker = [], None
        with store.engine.connect() as conn:
            while True:
                ids = conn.execute(store.apply(page, query, servers.c.id, marker=marker, limit=3, connection=conn))
                found = ids.scalars().all()
                seen += found
                if len(found) < 3:
                    break
                marker = found[-1]
        assert seen == ["s%02d" % number for number in range(12) if number % 3]
    finally:
        servers.drop(store.engine)


def test_apply_asks_the_planner_and_a_wrong_hint_changes_nothing(store):
    store.replace_tags("s1", ["red", "web"])
    store.replace_tags("s2", ["blue"])
    _analysed(store)
    servers = _servers(store, ["s1", "s2", "s3"])
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.execute(sa.text("ANALYZE %s" % servers.name))
            conn.commit()
    try:
        query = parse_tag_query("tags-any=red,blue")
        page = sa.select(servers.c.id).where(servers.c.id != "s3").order_by(servers.c.id).limit(10)
        with store.engine.connect() as conn:
            truthful = store.apply(page, query, servers.c.id, candidates=None, connection=conn)
            with _Statements(store.engine) as sent:
                wrong = store.apply(page, query, servers.c.id, candidates=10**9, connection=conn)
            assert conn.execute(wrong).scalars().all() == ["s1", "s2"]
        texts = [str(statement.compile(store.engine)) for statement in (truthful, wrong)]
        if store.engine.dialect.name == "postgresql":
            # Three rows, whatever the caller says: the planner's estimate
            # keeps the form for few candidates (no statistics read).
            assert any(text.startswith("EXPLAIN (FORMAT JSON)") for text in sent)
            assert not any("pg_stats" in text for text in sent)
            assert store.planned_rows(page, servers.c.id, "s1") <= 3
            assert form_of(texts[1]) == form_of(texts[0]) == "semi-join"
        elif sql.is_mysql(store.engine.dialect):
            # MySQL/MariaDB: its estimate of each tag's rows, never of the
            # caller's statement or its hint; two rows: the semi-join.
            assert len(sent) == 2, sent
            assert all(text.startswith("EXPLAIN SELECT 1") for text in sent), sent
            assert all(store.tags.name in text and "servers" not in text for text in sent)
            assert store.planned_rows(page) is None
            assert texts[0] == texts[1]
            assert " OR " not in texts[0]
        else:
            # Elsewhere the SQL never depends on rows: nothing is asked.
            assert sent == []
            assert store.planned_rows(page) is None
            assert texts[0] == texts[1]
    finally:
        servers.drop(store.engine)


def test_mariadb_reads_a_tags_any_whole_only_where_it_estimates_few_rows(make_database):
    """The semi-join reads the whole set: past MYSQL_SEMI_JOIN_MAX rows by MariaDB's estimate, one EXISTS per tag."""
    url = make_database("mariadb")
    migrations.upgrade(url, ["tags"])
    store = TagStore(url)
    # InnoDB's estimate of a long range is off by up to about twice either way.
    common = 3 * MYSQL_SEMI_JOIN_MAX
    ids = ["r%06d" % number for number in range(common)]
    try:
        with store.engine.begin() as conn:
            conn.execute(store.tags.insert(), [{"resource_id": rid, "tag": "common"} for rid in ids])
            conn.execute(store.tags.insert(), [{"resource_id": rid, "tag": "rare"} for rid in ids[::200]])
            conn.execute(store.tags.insert(), [{"resource_id": rid, "tag": "odd"} for rid in ids[1::300]])
            conn.exec_driver_sql("ANALYZE TABLE %s" % store.tags.name)
        exact = sa.Table("servers_exact", sa.MetaData(), sa.Column("id", sql.ExactString(40), primary_key=True))
        loose = sa.Table("servers_loose", sa.MetaData(), sa.Column("id", sa.String(40), primary_key=True))
        for table in (exact, loose):
            table.create(store.engine)
            with store.engine.begin() as conn:
                conn.execute(table.insert(), [{"id": rid} for rid in ids[-700:]])

        def page(query, table, marker=None):
            condition = store.where(parse_tag_query(query), table.c.id, marker=marker)
            text = str(condition.compile(store.engine))
            with store.engine.connect() as conn:
                found = conn.execute(sa.select(table.c.id).where(condition).order_by(table.c.id)).scalars().all()
            return ("per-tag" if " OR " in text else "semi-join"), found

        last = ids[-700:]
        either = set(ids[::200] + ids[1::300])
        assert page("tags-any=rare,odd", exact) == ("semi-join", [rid for rid in last if rid in either])
        assert page("tags-any=common,rare", exact) == ("per-tag", last)
        # After a marker near the end few rows are left, where the range goes
        # inside the subquery (ExactString ids); a loose column reads them all.
        marker = ids[-600]
        assert page("tags-any=common,rare", exact, marker) == ("semi-join", ids[-599:])
        assert page("tags-any=common,rare", loose, marker) == ("per-tag", ids[-599:])
        # Beside a required tag too; beside an excluded one no estimate is read.
        assert page("tags=common&tags-any=rare,odd", exact) == page("tags-any=rare,odd", exact)
        with _Statements(store.engine) as sent:
            assert page("tags-any=rare,odd&not-tags=common", exact) == ("per-tag", [])
        assert not any(text.startswith("EXPLAIN") for text in sent)
    finally:
        store.close()


def test_an_explain_without_a_rows_column_is_no_estimate(make_database):
    """MySQL 8 with explain_format=JSON or TREE answers EXPLAIN without a rows column: no estimate, not 0 rows.

    Read as 0 rows a tag of a million rows would take the semi-join, which
    reads the whole set.  SQLite's EXPLAIN (its bytecode) has no rows column
    either: it stands for such a plan here.
    """
    from tenancy_mw.tags.store import _explained_tag_rows

    store = TagStore(make_database("sqlite"), create_tables=True)
    try:
        store.replace_tags("s1", ["red", "blue"])
        with store.engine.connect() as conn:
            assert _explained_tag_rows(conn, store.tags, ["red", "blue"], None) is None
            assert _explained_tag_rows(conn, store.tags, ["red", "blue"], "s0") is None
    finally:
        store.close()


def _forms_after_markers(store, tag_rows: str, query_string: str, candidates: int):
    """The tag table filled by *tag_rows* (a SELECT of resource_id, tag) and analysed: the form of each page.

    The returned ``form(marker, limit=None)`` is PostgreSQL's form of
    *query_string* on the page after *marker*, of *limit* rows, over
    *candidates*, among the forms of the tag table alone: the tag sets'
    trigger is disabled, as on a database whose sets are not kept in step
    (tests/unit/tags/test_sets.py has the set form).
    """
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE tenancy_mw_tags DISABLE TRIGGER %s" % SYNC_TRIGGER)
        conn.exec_driver_sql("INSERT INTO tenancy_mw_tags (resource_id, tag) " + tag_rows)
        # Report the rows to the statistics before COMMIT returns: a session
        # that reported less than a second before holds them back (up to 10 s
        # idle), and counted after the ANALYZE below they would read as
        # changed since it (n_mod_since_analyze): over GROUPED_ANY_SMALL, the
        # statistics would be stale and the store would take no counts.
        conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
    _analysed(store)
    servers = sa.table("servers", sa.column("id", sql.ExactString(40)))
    query = parse_tag_query(query_string)

    def form(marker, limit=None):
        condition = store.where(query, servers.c.id, candidates, marker=marker, limit=limit)
        return form_of(str(condition.compile(store.engine)))

    return form


def test_postgresql_chooses_the_form_for_the_tag_rows_after_the_marker(pg_store):
    """A later page reads only the share of each tag's rows after the marker: the form is chosen for that share."""
    # 40,000 rows of tags-any (x and y), more than GROUPED_ANY_SMALL.
    form = _forms_after_markers(
        pg_store,
        "SELECT 'r' || lpad(n::text, 6, '0'), CASE WHEN mod(n, 2) = 0 THEN 'x' ELSE 'y' END"
        " FROM generate_series(0, 39999) AS n",
        "tags-any=x,y",
        GROUPED_MIN_CANDIDATES,
    )
    assert GROUPED_ANY_SMALL < 40_000
    assert form(None) == "per-tag"
    # After r036000 a tenth of them is left: PostgreSQL sorts that few whole.
    assert form("r036000") == "grouped"


def test_a_filtered_lists_later_page_beside_a_not_tags_any_is_chosen_for_the_rows_after_its_marker(pg_store):
    """Early marker: the first page's rule; late marker: few rows of the required tag left, driven from them."""
    # r on 40,000 resources, x on 20,000 of them and y on 10,000: 70,000
    # rows, over 2.5 times 25,000 candidates (DRIVEN_BESIDE_NOT_ANY_FACTOR).
    form = _forms_after_markers(
        pg_store,
        "SELECT 'r' || lpad(n::text, 6, '0'), tag FROM generate_series(0, 39999) AS n,"
        " LATERAL (VALUES ('r'), (CASE WHEN mod(n, 2) = 0 THEN 'x' WHEN mod(n, 4) = 1 THEN 'y' END)) AS t(tag)"
        " WHERE tag IS NOT NULL",
        "tags=r&tags-any=x,y&not-tags-any=a,b",
        25_000,
    )
    assert form(None) == "per-tag"
    assert form("r000100") == "per-tag"  # nearly every row after it
    # After r036000 a tenth is left: 4,000 rows of r, 3,000 of the set.
    assert form("r036000") == "driven"


def test_a_later_page_of_a_whole_collection_is_driven_by_the_rows_after_its_marker_and_its_size(pg_store):
    """DRIVEN_AFTER_MARKER_FACTOR: the store's counts after the marker and the page's limit drive a later page."""
    # 400,000 resources: r on a fifth (80,000), x on an eleventh (36,364),
    # y on a thirteenth (30,770); the caller's 200,000 rows after r200000.
    form = _forms_after_markers(
        pg_store,
        "SELECT 'r' || lpad(n::text, 6, '0'), tag FROM generate_series(0, 399999) AS n,"
        " LATERAL (VALUES (CASE WHEN mod(n, 5) = 0 THEN 'r' END), (CASE WHEN mod(n, 11) = 0 THEN 'x' END),"
        " (CASE WHEN mod(n, 13) = 0 THEN 'y' END)) AS t(tag) WHERE tag IS NOT NULL",
        "tags=r&tags-any=x,y",
        200_000,
    )
    # The tags' counts exactly (ANALYZE samples them), as the arithmetic
    # below takes them; the share after the marker is still the planner's.
    _given_statistics(pg_store, TagStatistics({"r": 80_000, "x": 36_364, "y": 30_770}, other=0, changed=0))
    # After r200000, about half of each: r on 40,000, the set on 33,567; 73,567
    # rows, over DRIVEN_MAX_SHARE of the candidates.  0.2 of them carry r,
    # 0.168 by the set's rows: a page of 1,000 is full after some 29,800
    # candidates, one of 2,000 after 59,500, and the rows are over twice
    # the first and under twice the second.
    assert form("r200000", limit=2000) == "driven"
    assert form("r200000", limit=1000) == "grouped"
    assert form("r200000") == "grouped"  # its size unknown


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_connection_in_autocommit_gets_the_estimates_too(make_database, backend, caplog):
    """No savepoint outside a transaction block: an AUTOCOMMIT connection is read as it is, and nothing is logged."""
    url = make_database(backend)
    migrations.upgrade(url, ["tags"])
    store = TagStore(url)
    try:
        store.replace_tags("s1", ["r", "x"])
        store.replace_tags("s2", ["y"])
        _analysed(store)
        servers = _servers(store, ["s1", "s2"])
        query = parse_tag_query("tags=r&tags-any=x,y")
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.select(servers.c.id)).all()  # the caller's own work first
            condition = store.where(query, servers.c.id, GROUPED_MIN_CANDIDATES, connection=conn)
            assert conn.execute(sa.select(servers.c.id).where(condition)).scalars().all() == ["s1"]
            if backend == "postgresql":
                assert store.tag_statistics(conn) is not None
        assert not [record for record in caplog.records if record.levelname == "WARNING"], caplog.text
        # MariaDB's estimate (two rows) keeps the semi-join beside the required
        # tag; without one it would be one EXISTS per tag.  PostgreSQL's
        # statistics and its tag sets, read on that connection too, make it
        # the set form (a rare required tag over many candidates).
        expected = {"postgresql": "sets", "mariadb": "semi-join"}[backend]
        assert form_of(str(condition.compile(store.engine))) == expected
        servers.drop(store.engine)
    finally:
        store.close()


def _plan_cost(conn: sa.Connection, statement: sa.Select) -> float:
    text = str(statement.compile(conn.engine, compile_kwargs={"literal_binds": True}))
    return float(conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + text).scalar_one()[0]["Plan"]["Total Cost"])


def test_the_planners_estimate_leaves_postgresqls_jit_unloaded(pg_store):
    """The store's EXPLAIN loads no JIT into the caller's session where the caller's own page does not.

    Once a session has loaded LLVM, each parallel worker of its later
    queries loads it again, about 17 ms a query on the bench's machine.
    """
    store = pg_store
    with store.engine.connect() as conn:
        require(conn.exec_driver_sql("SELECT pg_jit_available()").scalar_one(), "PostgreSQL's JIT (LLVM)")
        conn.invalidate()  # asking loads it: this session goes
    with store.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE servers (id VARCHAR(40) PRIMARY KEY)")
        conn.exec_driver_sql(
            "INSERT INTO servers SELECT 's' || lpad(n::text, 6, '0') FROM generate_series(1, 100000) AS n"
        )
        conn.exec_driver_sql(
            "INSERT INTO tenancy_mw_tags (resource_id, tag)"
            " SELECT id, CASE WHEN id < 's050000' THEN 'x' ELSE 'y' END"
            " FROM servers WHERE mod(substr(id, 2)::int, 50) = 0"
        )
        conn.exec_driver_sql("ANALYZE servers")
        conn.exec_driver_sql("ANALYZE tenancy_mw_tags")
    servers = sa.table("servers", sa.column("id", sql.ExactString(40)))
    page = sa.select(servers.c.id).order_by(servers.c.id).limit(100)
    query = parse_tag_query("tags-any=x,y")
    every_row = sa.select(sa.literal_column("1")).select_from(servers)
    with store.engine.connect() as conn:
        applied = store.apply(page, query, servers.c.id, marker="s025000", limit=100)
        # JIT for any plan costed over the page's, as reading every server is.
        page_cost, every_cost = _plan_cost(conn, applied), _plan_cost(conn, every_row)
        assert page_cost * 2 < every_cost
        threshold = (page_cost + every_cost) / 2
        conn.exec_driver_sql("SET jit_above_cost = %f" % threshold)
        assert not databases.postgres_jit_loaded(conn, require)

        applied = store.apply(page, query, servers.c.id, marker="s025000", limit=100, connection=conn)
        assert store.planned_rows(page, servers.c.id, "s025000", connection=conn) > 50_000
        assert len(conn.execute(applied).all()) == 100
        assert not databases.postgres_jit_loaded(conn, require)

        # What an EXPLAIN of every row (as the store's once was) does.
        conn.exec_driver_sql("EXPLAIN " + str(every_row.compile(store.engine)))
        assert databases.postgres_jit_loaded(conn, require)


def test_the_planners_estimate_is_the_statements_own_beside_init_plans_and_ctes(pg_store):
    """The rows the store reads are the caller's statement's, not those of a sub-plan PostgreSQL lists beside it."""
    store = pg_store
    with store.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE tenants (id INT PRIMARY KEY, name VARCHAR(20))")
        conn.exec_driver_sql("INSERT INTO tenants SELECT n, 't' || n FROM generate_series(1, 50) AS n")
        conn.exec_driver_sql("CREATE TABLE servers (id VARCHAR(40) PRIMARY KEY, tenant INT)")
        conn.exec_driver_sql(
            "INSERT INTO servers SELECT 's' || lpad(n::text, 6, '0'), mod(n, 50) + 1"
            " FROM generate_series(1, 20000) AS n"
        )
        conn.exec_driver_sql("ANALYZE tenants")
        conn.exec_driver_sql("ANALYZE servers")
    tenants = sa.table("tenants", sa.column("id", sa.Integer), sa.column("name", sa.String))
    servers = sa.table("servers", sa.column("id", sql.ExactString(40)), sa.column("tenant", sa.Integer))
    acme = sa.select(tenants.c.id).where(tenants.c.name == "t7")
    mine = sa.select(servers.c.id).where(servers.c.tenant < 26)
    materialized = mine.cte("mine").prefix_with("MATERIALIZED")
    ladder = sa.select(sa.literal(1).label("n")).cte("ladder", recursive=True)
    ladder = ladder.union_all(sa.select(ladder.c.n + 1).where(ladder.c.n < 10))
    statements = {
        "scalar subquery": sa.select(servers.c.id).where(servers.c.tenant == acme.scalar_subquery()),
        "uncorrelated exists": sa.select(servers.c.id).where(acme.exists()),
        "materialized cte": sa.select(materialized.c.id).where(materialized.c.id > "s010000"),
        "recursive cte": sa.select(servers.c.id).where(servers.c.tenant.in_(sa.select(ladder.c.n))),
    }
    with store.engine.connect() as conn:
        for name, statement in statements.items():
            whole = sa.select(sa.literal_column("1")).select_from(statement.subquery())
            text = str(whole.compile(store.engine, compile_kwargs={"literal_binds": True}))
            plan = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + text).scalar_one()[0]["Plan"]
            assert plan["Plan Rows"] > 100, name
            assert store.planned_rows(statement, connection=conn) == plan["Plan Rows"], name
        # A Gather over the whole plan, the Limit under it, as PostgreSQL's debugging setting puts it.
        estimate = store.planned_rows(mine, connection=conn)
        setting = "force_parallel_mode" if conn.dialect.server_version_info < (16,) else "debug_parallel_query"
        conn.exec_driver_sql("SET max_parallel_workers_per_gather = 2")  # with none, no Gather at all
        conn.exec_driver_sql("SET %s = on" % setting)
        sent = []

        def record(_conn, cursor, statement, parameters, *_):
            sent.append(cursor.mogrify(statement, parameters).decode())

        sa.event.listen(conn, "before_cursor_execute", record)
        assert store.planned_rows(mine, connection=conn) == estimate > 5_000
        sa.event.remove(conn, "before_cursor_execute", record)
        (explain,) = [text for text in sent if text.startswith("EXPLAIN")]
        assert conn.exec_driver_sql(explain.replace("%", "%%")).scalar_one()[0]["Plan"]["Node Type"] == "Gather"


def _node(kind: str, rows: int, *children: dict, relation: str = "Outer") -> dict:
    return {"Node Type": kind, "Plan Rows": rows, "Parent Relationship": relation, "Plans": list(children)}


def test_the_rows_under_the_limit_are_its_outer_inputs_and_nothing_else():
    """The estimate is read off the Limit's Outer input only: beside InitPlans, under a Gather, or not at all."""
    init_plan = _node("Seq Scan", 1, relation="InitPlan")
    scan = _node("Seq Scan", 250_000)
    assert _rows_under_limit(_node("Limit", 1, init_plan, scan)) == 250_000
    assert _rows_under_limit(_node("Gather", 1, _node("Limit", 1, init_plan, scan))) == 250_000
    for plan in (
        scan,  # no Limit on top: not a plan of the store's statement
        _node("Limit", 1, init_plan),  # no Outer input
        _node("Gather", 1),
        _node("Sort", 9, _node("Limit", 1, scan)),  # a Limit inside something else
    ):
        with pytest.raises(LookupError):
            _rows_under_limit(plan)


class _Status(enum.Enum):
    ACTIVE = "active"
    ERROR = "error"


def test_the_planner_estimates_statements_with_in_lists_and_typed_values(store, caplog):
    """The caller's statement is explained as it would be executed: its IN lists expanded, its values bound by type."""
    table = sa.Table(
        "servers_explained",
        sa.MetaData(),
        sa.Column("id", sql.ExactString(40), primary_key=True),
        sa.Column("tenant", sa.String(20)),
        sa.Column("status", sa.Enum(_Status)),
    )
    table.drop(store.engine, checkfirst=True)
    table.create(store.engine)
    try:
        with store.engine.begin() as conn:
            rows = [{"id": "s%03d" % n, "tenant": "t%d" % (n % 4), "status": _Status.ACTIVE} for n in range(200)]
            conn.execute(table.insert(), rows)
        page = sa.select(table.c.id).order_by(table.c.id).limit(10)
        statements = {
            "in-list": page.where(table.c.tenant.in_(["t1", "t2"])),
            "enum": page.where(table.c.status == _Status.ACTIVE),
            "enum-in-list": page.where(table.c.status.in_([_Status.ACTIVE, _Status.ERROR])),
            "cte": sa.select(sa.select(table).where(table.c.tenant == "t1").cte("mine").c.id),
        }
        query = parse_tag_query("tags-any=red,blue")
        caplog.set_level("WARNING", logger="tenancy_mw.tag_store")
        for name, statement in statements.items():
            ids = statement.selected_columns.id
            planned = store.planned_rows(statement, ids, "s100")
            if store.engine.dialect.name == "postgresql":
                assert planned is not None, name
                assert planned >= 1, name
            else:
                assert planned is None, name
            with store.engine.connect() as conn:
                assert conn.execute(store.apply(statement, query, ids, marker="s100", connection=conn)).all() == []
        assert "Could not ask PostgreSQL" not in caplog.text
        # A value the caller binds only when it executes: no estimate (logged), never an error out of apply.
        unbound = page.where(table.c.tenant == sa.bindparam("tenant"))
        applied = store.apply(unbound, query, table.c.id, marker="s100")
        assert store.planned_rows(unbound) is None
        with store.engine.connect() as conn:
            assert conn.execute(applied, {"tenant": "t1"}).all() == []
    finally:
        table.drop(store.engine)


def test_apply_without_a_tag_query_or_marker_returns_the_statement_itself(store):
    page = sa.select(sa.table("servers", sa.column("id")).c.id)
    assert store.apply(page, parse_tag_query(""), page.selected_columns.id) is page


@pytest.mark.parametrize("ttl", [-1, float("nan")])
def test_statistics_ttl_must_be_a_number_of_seconds(ttl):
    with pytest.raises(ValueError, match="statistics_ttl"):
        TagStore("sqlite://", statistics_ttl=ttl)


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
    from tenancy_mw.tags.sql import define_tables

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


@pytest.mark.parametrize("bad", ["1000000", -5, 2.5], ids=["text", "negative", "float"])
def test_where_refuses_candidates_that_are_not_a_number_of_rows(bad):
    tag_store = TagStore("sqlite://", create_tables=True)
    try:
        with pytest.raises(ValueError, match="candidates"):
            tag_store.where(parse_tag_query("tags-any=a,b"), sa.table("servers", sa.column("id")).c.id, bad)
    finally:
        tag_store.close()
