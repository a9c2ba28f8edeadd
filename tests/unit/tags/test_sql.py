"""The SQL of tag queries on every backend: the tables, the condition, tag counts and statistics."""

from __future__ import annotations

import itertools
import time

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.dialects.postgresql import CITEXT

from tenancy_mw.core import sql
from tenancy_mw.tags import model
from tenancy_mw.tags import sql as tags_sql
from tenancy_mw.tags.model import TagQuery, parse_tag_query
from tenancy_mw.tags.sets import TAG_SETS, TagSets
from tenancy_mw.tags.sql import (
    DRIVEN_AFTER_MARKER_ANY_FACTOR,
    DRIVEN_AFTER_MARKER_FACTOR,
    DRIVEN_BESIDE_NOT_ANY_FACTOR,
    DRIVEN_BESIDE_RARE_MAX_SHARE,
    DRIVEN_MAX_SHARE,
    DRIVEN_REQUIRED_MAX,
    GROUPED_AFTER_MARKER_MAX_SHARE,
    GROUPED_ANY_BESIDE,
    GROUPED_ANY_MAX,
    GROUPED_ANY_REQUIRED_MAX,
    GROUPED_ANY_SMALL,
    GROUPED_MIN_CANDIDATES,
    MYSQL_SEMI_JOIN_MAX,
    PER_ROW_ANY_ALONE_FACTOR,
    PER_ROW_ANY_FACTOR,
    PER_ROW_CANDIDATES_MAX,
    PER_ROW_REQUIRED_FACTOR,
    PROBED_AFTER_MARKER_ANY_FACTOR,
    PROBED_ANY_ALONE_MAX,
    PROBED_BESIDE_NOT_ANY_MAX,
    PROBED_BESIDE_NOT_ANY_MIDDLING_MAX,
    PROBED_REQUIRED_MAX,
    SETS_BESIDE_NOT_ANY_FACTOR,
    SETS_BESIDE_NOT_ANY_MIN_MATCHES,
    SETS_REQUIRED_MAX,
    TAG_COUNT_CAP,
    TagStatistics,
    count_tags,
    define_tables,
    tag_condition,
    tag_statistics,
)
from tests.support.tag_forms import form_of

# -- SQL -------------------------------------------------------------------

POOL = ["a", "b", "c", "d", "e", "A", "a "]  # case and trailing space make other tags

_metadata = sa.MetaData()
RESOURCES = sa.Table("things", _metadata, sa.Column("id", sql.ExactString(40), primary_key=True), **sql.table_options())
TABLES = define_tables(_metadata)


@pytest.fixture(scope="module")
def tag_engine(module_sql_url):
    """One engine per backend on a database of the module's own, with the tables made."""
    engine = sql.create_engine(module_sql_url)
    _metadata.create_all(engine)
    yield engine
    engine.dispose()


def fill(engine, resources: dict[str, set[str]]) -> None:
    with engine.begin() as conn:
        conn.execute(TABLES.tags.delete())
        conn.execute(RESOURCES.delete())
        if resources:
            conn.execute(RESOURCES.insert(), [{"id": rid} for rid in resources])
        rows = [{"resource_id": rid, "tag": tag} for rid, tags in resources.items() for tag in tags]
        if rows:
            conn.execute(TABLES.tags.insert(), rows)
        if engine.dialect.name == "postgresql":
            # Counted before COMMIT returns, not up to 10 s later: after an
            # ANALYZE they would read as rows changed since it.
            conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))


def sql_result(
    engine, query: TagQuery, limit: int | None = None, counts=None, marker: str | None = None, candidates=None
) -> list[str]:
    statement = sa.select(RESOURCES.c.id).order_by(RESOURCES.c.id)
    if limit is not None:
        statement = statement.limit(limit)
    # With counts, a page said to walk a large collection unless told
    # otherwise: the counts then choose PostgreSQL's form of tags-any (TagQuery.where).
    if candidates is None and counts is not None:
        candidates = GROUPED_MIN_CANDIDATES
    statement = query.apply(statement, RESOURCES.c.id, TABLES.tags, counts, candidates, marker=marker, limit=limit)
    with engine.connect() as conn:
        return list(conn.execute(statement).scalars())


# Counts that make every tag rare: on PostgreSQL, tags-any takes its grouped
# form; None leaves the semi-join.  Both must find the same rows.
ALL_RARE = dict.fromkeys(POOL, 0)
# Counts that make every tag common, over one candidate: on PostgreSQL the
# per-row form (PER_ROW_CANDIDATES_MAX).
ALL_COMMON = dict.fromkeys(POOL, TAG_COUNT_CAP)
# Counts of middling tags over a filtered page of 62,000 candidates: on
# PostgreSQL a not-tags-any probed per row and, beside it, a required tag
# and a tags-any of up to three tags, the driven form without a marker
# (DRIVEN_BESIDE_NOT_ANY_FACTOR) and one EXISTS per tag after one.
MIDDLING = dict.fromkeys(POOL, 30_000)
MIDDLING_CANDIDATES = 62_000


tag_sets = st.frozensets(st.sampled_from(POOL), max_size=5)
queries = st.builds(
    TagQuery,
    tag_sets,
    tag_sets,
    tag_sets,
    tag_sets,
    st.sampled_from(["guideline", "nova"]),
)
resource_sets = st.dictionaries(
    st.sampled_from(["r%02d" % n for n in range(12)]), st.frozensets(st.sampled_from(POOL), max_size=6), max_size=12
)


#: The profile's health checks (tests/conftest.py) and a function-scoped
#: fixture shared by a property test's examples: each fills the tables anew.
SHARED_FIXTURE_CHECKS = [*settings().suppress_health_check, HealthCheck.function_scoped_fixture]


@settings(max_examples=60, suppress_health_check=SHARED_FIXTURE_CHECKS)
@given(resources=resource_sets, query_list=st.lists(queries, min_size=1, max_size=6))
def test_sql_returns_exactly_what_matches_accepts(tag_engine, resources, query_list):
    fill(tag_engine, resources)
    for query in query_list:
        expected = sorted(rid for rid, tags in resources.items() if query.matches(tags))
        assert sql_result(tag_engine, query) == expected, query
        assert sql_result(tag_engine, query, counts=ALL_RARE) == expected, query
        assert sql_result(tag_engine, query, counts=ALL_COMMON, candidates=1) == expected, query
        middling = sql_result(tag_engine, query, counts=MIDDLING, candidates=MIDDLING_CANDIDATES)
        assert middling == expected, query
        with tag_engine.connect() as conn:
            counted = count_tags(conn, query.tags_to_count(), TABLES.tags)
        assert sql_result(tag_engine, query, counts=counted) == expected, (query, counted)


@settings(max_examples=40, suppress_health_check=SHARED_FIXTURE_CHECKS)
@given(
    resources=resource_sets,
    query=queries,
    # "r05 ": an id with a trailing space, after r05 (MariaDB's NO PAD collation; a PAD SPACE one would not see it).
    marker=st.sampled_from(["r%02d" % n for n in range(12)] + ["r", "r05x", "r05 ", "s"]),
    limit=st.integers(1, 4),
)
def test_a_page_after_a_marker_is_the_next_rows_that_match(tag_engine, resources, query, marker, limit):
    fill(tag_engine, resources)
    matching = sorted(rid for rid, tags in resources.items() if query.matches(tags))
    expected = [rid for rid in matching if rid > marker][:limit]
    assert sql_result(tag_engine, query, limit=limit, marker=marker) == expected, (query, marker)
    assert sql_result(tag_engine, query, limit=limit, marker=marker, counts=ALL_RARE) == expected, (query, marker)
    per_row = sql_result(tag_engine, query, limit=limit, marker=marker, counts=ALL_COMMON, candidates=1)
    assert per_row == expected, (query, marker)
    middling = sql_result(
        tag_engine, query, limit=limit, marker=marker, counts=MIDDLING, candidates=MIDDLING_CANDIDATES
    )
    assert middling == expected, (query, marker)


def test_walking_every_page_finds_every_match_once(tag_engine):
    resources = {"r%02d" % n: ({"a"} if n % 3 else {"b"}) | ({"c"} if n % 2 else set()) for n in range(30)}
    fill(tag_engine, resources)
    query = parse_tag_query("tags-any=a,c&not-tags=x")
    seen: list[str] = []
    marker = None
    while True:
        page = sql_result(tag_engine, query, limit=4, marker=marker)
        seen += page
        if len(page) < 4:
            break
        marker = page[-1]
    assert seen == sorted(rid for rid, tags in resources.items() if query.matches(tags))


#: A collation of the caller's id column that orders case-insensitively, unlike the tag table's exact
#: one: MariaDB's server default (a plain String), SQLite's NOCASE, PostgreSQL's ICU root collation.
LOOSE_COLLATIONS = {"sqlite": "NOCASE", "postgresql": "und-x-icu", "mysql": None}
LOOSE_QUERIES = [
    "tags=x",
    "not-tags=y",
    "tags-any=x,z",
    "tags=x&tags-any=y,z",
    "not-tags-any=y,x,z",
    "tags=x&not-tags=y",
]


# PostgreSQL's forms: semi-join; grouped and driven; per tag and driven; grouped beside a common tag.
LOOSE_COUNTS = [None, dict.fromkeys("xyz", 10), dict.fromkeys("xyz", 20_000), {"x": 10**6, "y": 20_000, "z": 20_000}]


@pytest.mark.parametrize("declared", ["on-the-type", "in-a-variant"])
@pytest.mark.parametrize("counts", LOOSE_COUNTS, ids=["no-counts", "rare", "middling", "beside-common"])
def test_pages_keep_the_order_of_a_callers_id_column_that_orders_otherwise(tag_engine, counts, declared):
    """The page is the caller's: after the marker in the order of the caller's id column, not the tag table's.

    ``a`` < ``B`` < ``c`` to a case-insensitive column, ``B`` < ``a`` < ``c`` byte-wise: the page after
    ``a`` holds ``B`` when it matches (a range on the tag table's exact ids would leave it out, or let
    its excluded tag go unseen).  The collation may be the type's own or that of the type's variant for
    the database (``String(40).with_variant(String(40, collation=...), "postgresql")``).
    """
    collation = LOOSE_COLLATIONS[tag_engine.dialect.name]
    id_type = sa.String(40, collation=collation)
    if declared == "in-a-variant":
        id_type = sa.String(40).with_variant(id_type, tag_engine.dialect.name)
    loose = sa.Table("loose_things", sa.MetaData(), sa.Column("id", id_type, primary_key=True), **sql.table_options())
    resources = {"a": {"x"}, "B": {"x", "y"}, "c": {"x", "z"}}
    fill(tag_engine, resources)
    loose.create(tag_engine)
    try:
        with tag_engine.begin() as conn:
            conn.execute(loose.insert(), [{"id": rid} for rid in resources])
            in_order = conn.execute(sa.select(loose.c.id).order_by(loose.c.id)).scalars().all()
        assert in_order == ["a", "B", "c"]
        candidates = None if counts is None else GROUPED_MIN_CANDIDATES
        for query_string in LOOSE_QUERIES:
            query = parse_tag_query(query_string)
            seen: list[str] = []
            marker = None
            with tag_engine.connect() as conn:
                while True:
                    page = sa.select(loose.c.id).order_by(loose.c.id).limit(1)
                    page = query.apply(page, loose.c.id, TABLES.tags, counts, candidates, marker=marker, limit=1)
                    found = conn.execute(page).scalars().all()
                    seen += found
                    if not found:
                        break
                    marker = found[-1]
            assert seen == [rid for rid in in_order if query.matches(resources[rid])], query_string
    finally:
        loose.drop(tag_engine)


def test_a_page_after_a_marker_on_a_citext_id_column_is_after_it_as_the_column_compares(tag_engine):
    """PostgreSQL's CITEXT compares case-insensitively: ``b`` is not after ``B``, ``A`` not after ``a``.

    The tag table's ids compare case-sensitively, in one order or another by
    the database's collation; a range on them would let one of those in (or
    leave a row out) where the IN forms of tags-any hold the page alone.
    """
    if tag_engine.dialect.name != "postgresql":
        return  # CITEXT is PostgreSQL's
    with tag_engine.begin() as conn:
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS citext")
    loose = sa.Table("citext_things", sa.MetaData(), sa.Column("id", CITEXT, primary_key=True))
    resources = {"A": {"x"}, "b": {"x", "y"}, "c": {"y"}}
    fill(tag_engine, resources)
    loose.create(tag_engine)
    try:
        with tag_engine.begin() as conn:
            conn.execute(loose.insert(), [{"id": rid} for rid in resources])
        query = parse_tag_query("tags-any=x,y")
        for counts in (None, ALL_RARE | {"x": 1, "y": 1}):
            candidates = None if counts is None else GROUPED_MIN_CANDIDATES
            for marker in ("a", "B", "b"):
                page = sa.select(loose.c.id).order_by(loose.c.id)
                with tag_engine.connect() as conn:
                    # The column's own order, as the database compares it.
                    expected = conn.execute(page.where(loose.c.id > marker)).scalars().all()
                    tagged = query.apply(page, loose.c.id, TABLES.tags, counts, candidates, marker=marker)
                    assert conn.execute(tagged).scalars().all() == expected, (marker, counts)
    finally:
        loose.drop(tag_engine)


@pytest.mark.parametrize(
    ("id_type", "inside"),
    [
        (sql.ExactString(40), {"sqlite", "postgresql", "mysql"}),
        (sa.String(40), {"sqlite", "postgresql"}),
        (None, {"sqlite", "postgresql"}),
        (sa.String(40, collation="NOCASE"), set()),
        # Case-insensitive on PostgreSQL whatever its collation.
        (CITEXT(40), set()),
        # A collation of its own on one database is a collation of its own.
        (sa.String(40).with_variant(sa.String(40, collation="und-x-icu"), "postgresql"), set()),
        (sql.ExactString(40).with_variant(sa.String(40), "postgresql"), {"sqlite", "postgresql", "mysql"}),
    ],
    ids=["exact", "plain", "untyped", "own-collation", "citext", "collation-in-a-variant", "plain-variant"],
)
def test_the_marker_goes_inside_the_tag_subqueries_only_where_the_id_column_sorts_as_the_tag_tables(id_type, inside):

    things = sa.table("things", sa.column("id", id_type))
    # No excluded tag: MySQL/MariaDB take the range inside too (where the order allows).
    condition = parse_tag_query("tags=a&tags-any=b,c").where(things.c.id, marker="m")
    for dialect in (sqlite.dialect(), postgresql.dialect(), mysql.dialect()):
        text = str(sa.select(things.c.id).where(condition).compile(dialect=dialect))
        assert (".resource_id >" in text) == (dialect.name in inside), (dialect.name, text)
        assert "things.id >" in text  # the page itself, on every backend


@pytest.mark.parametrize(
    ("marker", "limit"),
    [("", None), (None, 0), (None, -1), (None, 1.5), (None, True), (7, None), ("x" * 256, None), ("a\x00b", None)],
    ids=[
        "empty-marker",
        "zero-limit",
        "negative-limit",
        "float-limit",
        "bool-limit",
        "int-marker",
        "long-marker",
        "nul-marker",
    ],
)
def test_a_page_that_is_not_a_marker_and_a_limit_is_refused_naming_it(marker, limit):
    with pytest.raises(ValueError, match="marker" if limit is None else "limit"):
        parse_tag_query("tags=a").where(RESOURCES.c.id, marker=marker, limit=limit)


def test_sql_never_duplicates_rows_so_limit_counts_resources(tag_engine):
    fill(tag_engine, {"r1": {"a", "b", "c"}, "r2": {"a", "b", "c"}, "r3": {"a"}, "r4": {"d"}})
    query = parse_tag_query("tags-any=a,b,c")
    assert sql_result(tag_engine, query, limit=2) == ["r1", "r2"]
    assert sql_result(tag_engine, query) == ["r1", "r2", "r3"]
    both = parse_tag_query("tags=a,b&tags-any=b,c&not-tags-any=a,d")
    assert sql_result(tag_engine, both) == ["r1", "r2"]


def test_the_grouped_form_of_tags_any_pages_resources_too(tag_engine):
    fill(tag_engine, {"r1": {"a", "b", "c"}, "r2": {"a", "b", "c"}, "r3": {"a"}, "r4": {"d"}})
    query = parse_tag_query("tags-any=a,b,c")
    assert sql_result(tag_engine, query, limit=2, counts=ALL_RARE) == ["r1", "r2"]
    assert sql_result(tag_engine, query, counts=ALL_RARE) == ["r1", "r2", "r3"]
    beside = parse_tag_query("tags=a&tags-any=b,d&not-tags=x")
    assert sql_result(tag_engine, beside, limit=1, counts=ALL_RARE) == ["r1"]
    assert sql_result(tag_engine, beside, counts=ALL_RARE) == ["r1", "r2"]


@pytest.mark.parametrize("counts", [None, ALL_RARE], ids=["semi-join", "grouped"])
def test_a_null_id_never_passes_tags_any_and_passes_its_negation(tag_engine, counts):
    """Two-valued like EXISTS: ``NOT (tags-any)`` keeps a row whose id is NULL (``x IN (...)`` alone would not)."""
    null_id = sa.cast(sa.null(), sql.ExactString(40))
    condition = parse_tag_query("tags-any=a,b").where(null_id, TABLES.tags, counts, GROUPED_MIN_CANDIDATES)
    with tag_engine.connect() as conn:
        assert conn.execute(sa.select(sa.literal(1)).where(condition)).all() == []
        assert conn.execute(sa.select(sa.literal(1)).where(sa.not_(condition))).all() == [(1,)]


def test_count_tags_counts_exactly_up_to_the_cap_in_one_statement(tag_engine):
    fill(tag_engine, {"r1": {"a", "A", "a "}, "r2": {"a", "b"}, "r3": {"a"}, "r4": {"b"}})
    statements = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    sa.event.listen(tag_engine, "before_cursor_execute", seen)
    try:
        with tag_engine.connect() as conn:
            counted = count_tags(conn, ["a", "A", "a ", "b", "zzz"], TABLES.tags)
            capped = count_tags(conn, ["a", "b"], TABLES.tags, cap=2)
            nothing = count_tags(conn, [], TABLES.tags)
    finally:
        sa.event.remove(tag_engine, "before_cursor_execute", seen)
    assert counted == {"a": 3, "A": 1, "a ": 1, "b": 2, "zzz": 0}
    assert capped == {"a": 2, "b": 2}
    assert nothing == {}
    assert len(statements) == 2
    with pytest.raises(ValueError, match="cap"):
        count_tags(None, ["a"], TABLES.tags, cap=0)


#: An id column that sorts otherwise than the tag table's on PostgreSQL: a marker stays outside the subqueries.
LOOSE_IDS = sa.table("loose", sa.column("id", sa.String(40, collation="und-x-icu"))).c.id


def _condition_sql(
    query_string: str, counts, candidates=GROUPED_MIN_CANDIDATES, marker=None, dialect=None, limit=None, ids=None
) -> str:
    """The SQL of the query's condition on *dialect* (PostgreSQL's by default), on *ids* (the resources' id)."""

    query = parse_tag_query(query_string)
    column = RESOURCES.c.id if ids is None else ids
    condition = query.where(column, TABLES.tags, counts, candidates, marker=marker, limit=limit)
    return str(condition.compile(dialect=dialect or postgresql.dialect()))


def _grouped(query_string: str, counts, candidates=GROUPED_MIN_CANDIDATES) -> bool:
    return _pg_form(query_string, counts, candidates) == "grouped"


def _pg_form(query_string: str, counts, candidates=GROUPED_MIN_CANDIDATES, marker=None, limit=None) -> str:
    """PostgreSQL's form of the query's positive part (:func:`tests.support.tag_forms.form_of`)."""
    return form_of(_condition_sql(query_string, counts, candidates, marker, limit=limit))


def test_postgresql_sorts_tags_any_whole_only_when_the_counts_say_it_is_small():
    small = GROUPED_ANY_SMALL // 2
    # Alone: grouped up to GROUPED_ANY_SMALL rows together, one EXISTS per
    # tag up to PROBED_ANY_ALONE_MAX, a semi-join beyond.
    assert _grouped("tags-any=x,y", {"x": small, "y": small})
    assert _pg_form("tags-any=x,y", {"x": small, "y": small + 1}) == "per-tag"
    middling = PROBED_ANY_ALONE_MAX // 2
    assert _pg_form("tags-any=x,y", {"x": middling, "y": middling}) == "per-tag"
    assert _pg_form("tags-any=x,y", {"x": middling, "y": middling + 1}) == "semi-join"
    # Beside required tags on at least half as many rows: up to GROUPED_ANY_BESIDE ...
    beside = GROUPED_ANY_BESIDE // 2
    assert _grouped("tags=r&tags-any=x,y", {"r": TAG_COUNT_CAP, "x": beside, "y": beside})
    # ... then up to GROUPED_ANY_MAX when fewer than the rarest required
    # tag's rows, which are themselves not more than GROUPED_ANY_REQUIRED_MAX.
    half, required = GROUPED_ANY_MAX // 2, GROUPED_ANY_REQUIRED_MAX
    assert _grouped("tags=r,s&tags-any=x,y", {"r": required, "s": TAG_COUNT_CAP, "x": half, "y": half})
    assert not _grouped("tags=r&tags-any=x,y", {"r": GROUPED_ANY_MAX - 1, "x": half, "y": half})
    assert not _grouped("tags=r&tags-any=x,y", {"r": required + 1, "x": half, "y": half})
    assert not _grouped("tags=r&tags-any=x,y", {"r": TAG_COUNT_CAP, "x": half, "y": half + 1})
    # Beside a required tag on at most DRIVEN_REQUIRED_MAX rows, its rows and
    # the set's at most DRIVEN_MAX_SHARE of the candidates: one subquery of
    # the tag table finds the ids from the smaller set.
    assert _pg_form("tags=r&tags-any=x,y", {"r": 770, "x": 10_000, "y": 10_000}, 10**6) == "driven"
    assert _pg_form("tags=r,s&tags-any=x,y", {"r": TAG_COUNT_CAP, "s": 999, "x": 1_000, "y": 1_000}) == "driven"
    assert _pg_form("tags=r&tags-any=x,y", {"r": DRIVEN_REQUIRED_MAX, "x": 10**6, "y": 10**6}, 10**8) == "driven"
    assert _pg_form("tags=r&tags-any=x,y", {"r": DRIVEN_REQUIRED_MAX + 1, "x": 10**6, "y": 10**6}, 10**8) == "semi-join"


def test_postgresql_drives_from_the_tag_table_only_over_four_or_five_times_the_rows_it_reads():
    """rare + any big: 150,000 tag rows read whole lose over 250,000 candidates, win over a million."""
    counts = {"r": 7_000, "x": 90_000, "y": 53_000}
    read = sum(counts.values())
    assert _pg_form("tags=r&tags-any=x,y", counts, 10**6) == "driven"
    # Beside a rare required tag (PROBED_REQUIRED_MAX) up to a quarter of them;
    # below that share, one EXISTS per tag drives from the rare tag's rows.
    assert _pg_form("tags=r&tags-any=x,y", counts, int(read / DRIVEN_BESIDE_RARE_MAX_SHARE)) == "driven"
    assert _pg_form("tags=r&tags-any=x,y", counts, int(read / DRIVEN_BESIDE_RARE_MAX_SHARE) + 1) == "driven"
    assert _pg_form("tags=r&tags-any=x,y", counts, int(read / DRIVEN_BESIDE_RARE_MAX_SHARE) - 1) == "per-tag"
    assert _pg_form("tags=r&tags-any=x,y", counts, 250_000) == "per-tag"
    # Beside a more common one, a fifth; below it the semi-join.
    common = {"r": PROBED_REQUIRED_MAX + 1, "x": 90_000, "y": 53_000}
    common_read = sum(common.values())
    assert _pg_form("tags=r&tags-any=x,y", common, int(common_read / DRIVEN_MAX_SHARE)) == "driven"
    assert _pg_form("tags=r&tags-any=x,y", common, int(common_read / DRIVEN_MAX_SHARE) - 1) == "semi-join"
    assert _pg_form("tags=r&tags-any=x,y", common, int(common_read / DRIVEN_BESIDE_RARE_MAX_SHARE)) == "semi-join"
    # A small set beside a middling required tag falls back on the grouped form.
    middling = {"r": 60_000, "x": 20_000, "y": 20_000}
    assert _pg_form("tags=r&tags-any=x,y", middling, 10**6) == "driven"
    assert _pg_form("tags=r&tags-any=x,y", middling, 250_000) == "grouped"
    # No counts, or a tag without one: common, the semi-join.
    assert not _grouped("tags-any=x,y", None)
    assert not _grouped("tags-any=x,y", {"x": 1})
    # A tags-any met by a required tag is gone before any choice.
    assert not _grouped("tags=x&tags-any=x,y", {"x": 1, "y": 1})


def test_few_candidates_are_never_grouped_whatever_the_counts():
    """A tenant's own list: the semi-join probes its few ids; the grouped form would read the whole tag set."""
    assert not _grouped("tags-any=x,y", ALL_RARE | {"x": 1, "y": 1}, candidates=None)
    assert not _grouped("tags-any=x,y", {"x": 1, "y": 1}, candidates=GROUPED_MIN_CANDIDATES - 1)
    assert _grouped("tags-any=x,y", {"x": 1, "y": 1}, candidates=GROUPED_MIN_CANDIDATES)


def test_few_candidates_beside_large_sets_are_checked_per_row():
    """combined over ~4,000 candidates: each tag probed per candidate, not a set of 92,000 rows sorted first."""
    most = PER_ROW_CANDIDATES_MAX
    beside = "tags-any=x,y&not-tags=z"
    huge = {"x": 10**7, "y": 10**7}
    assert _pg_form(beside, huge, most) == "per-row"
    assert _pg_form("tags-any=x,y", huge, most) == "per-row"
    # One candidate more: not per row, however large the sets.
    assert _pg_form(beside, huge, most + 1) == "semi-join"
    assert _pg_form("tags-any=x,y", huge, most + 1) == "semi-join"
    # Beside another part, the set on PER_ROW_ANY_FACTOR times the
    # candidates' rows, not one fewer; alone, PER_ROW_ANY_ALONE_FACTOR times.
    for query, factor in ((beside, PER_ROW_ANY_FACTOR), ("tags-any=x,y", PER_ROW_ANY_ALONE_FACTOR)):
        assert _pg_form(query, {"x": factor * 4_000, "y": 0}, 4_000) == "per-row"
        assert _pg_form(query, {"x": factor * 4_000 - 1, "y": 0}, 4_000) == "semi-join"
    assert PER_ROW_ANY_FACTOR < PER_ROW_ANY_ALONE_FACTOR
    # The rarest required tag on PER_ROW_REQUIRED_FACTOR times as many, not one fewer.
    required = PER_ROW_REQUIRED_FACTOR * 4_000
    assert _pg_form("tags=r&tags-any=x,y", huge | {"r": required}, 4_000) == "per-row"
    assert _pg_form("tags=r&tags-any=x,y", huge | {"r": required - 1}, 4_000) == "semi-join"
    # Without counts or candidates, or without a tags-any: never.
    assert _pg_form(beside, None, 4_000) == "semi-join"
    assert _pg_form(beside, huge, None) == "semi-join"
    assert "OFFSET" not in _condition_sql("tags=x,y&not-tags=z", huge | {"z": 10**6}, 4_000)


def test_the_per_row_form_probes_every_tag_and_is_postgresqls_only():
    """Every EXISTS of the per-row form has OFFSET 0 (no join); MySQL/MariaDB and SQLite keep their SQL."""

    counts = dict.fromkeys("rxyzabc", 10**6)
    query = parse_tag_query("tags=r&tags-any=x,y&not-tags=z&not-tags-any=a,b")
    condition = query.where(RESOURCES.c.id, TABLES.tags, counts, 4_000, marker="m")
    text = str(condition.compile(dialect=postgresql.dialect()))
    assert text.count("EXISTS") == text.count("OFFSET 0") == 5
    # The marker once, outside (the ids are ExactString: any other form
    # puts its range inside the joined subqueries too).
    assert text.count("> %(id_") == 1, text
    assert (
        str(
            query.where(RESOURCES.c.id, TABLES.tags, counts, None, marker="m").compile(dialect=postgresql.dialect())
        ).count("> %(")
        > 1
    )
    for dialect in (mysql.dialect(), sqlite.dialect()):
        beyond = query.where(RESOURCES.c.id, TABLES.tags, counts, PER_ROW_CANDIDATES_MAX + 1, marker="m")
        assert str(condition.compile(dialect=dialect)) == str(beyond.compile(dialect=dialect))
    # A not-tags-any of three tags is a count, which PostgreSQL runs per row anyway.
    three = parse_tag_query("tags-any=x,y&not-tags-any=a,b,c").where(RESOURCES.c.id, TABLES.tags, counts, 4_000)
    text = str(three.compile(dialect=postgresql.dialect()))
    assert text.count("EXISTS") == text.count("OFFSET 0") == 1
    assert "count(*)" in text


def test_fewer_candidates_than_grouping_needs_but_more_than_the_set_hash_each_tag():
    """A filtered page of 62,000 candidates: one EXISTS per tag hashes a middling set once, as over the whole table."""
    middling = {"x": GROUPED_ANY_SMALL // 2 + 1, "y": GROUPED_ANY_SMALL // 2 + 1}
    rows = sum(middling.values())
    assert _pg_form("tags-any=x,y", middling, candidates=rows) == "per-tag"
    assert _pg_form("tags-any=x,y&not-tags=a", middling, candidates=rows) == "per-tag"
    # Fewer candidates than the set's rows, a small set, or no candidates
    # at all: the semi-join probes the candidates.
    assert _pg_form("tags-any=x,y", middling, candidates=rows - 1) == "semi-join"
    assert _pg_form("tags-any=x,y", {"x": 1, "y": 1}, candidates=GROUPED_MIN_CANDIDATES - 1) == "semi-join"
    assert _pg_form("tags-any=x,y", middling, candidates=None) == "semi-join"


def test_beside_a_not_tags_any_a_set_of_up_to_100k_rows_160k_over_middling_candidates_is_hashed_per_tag():
    """any+not-any: the semi-join would check the not-tags-any on every candidate before joining them to the set."""
    most = PROBED_BESIDE_NOT_ANY_MAX
    at_most = {"x": most // 2, "y": most - most // 2}
    over = {"x": most // 2, "y": most - most // 2 + 1}
    small = {"x": 1_000, "y": 1_000}
    query = "tags-any=x,y&not-tags-any=a,b"
    for candidates in (250, 4_000, 62_000, GROUPED_MIN_CANDIDATES - 1):
        # Over a page of at most a fifth of the set's rows, per row (PER_ROW_ANY_FACTOR).
        per_row = candidates <= PER_ROW_CANDIDATES_MAX
        large = "per-row" if per_row and candidates * PER_ROW_ANY_FACTOR <= most else None
        large_alone = "per-row" if per_row and candidates * PER_ROW_ANY_ALONE_FACTOR <= most else None
        small_per_row = per_row and candidates * PER_ROW_ANY_FACTOR <= sum(small.values())
        assert _pg_form(query, at_most, candidates) == (large or "per-tag")
        assert _pg_form(query, small, candidates) == ("per-row" if small_per_row else "per-tag")
        # Over middling candidates, up to PROBED_BESIDE_NOT_ANY_MIDDLING_MAX.
        middling = PER_ROW_CANDIDATES_MAX < candidates < GROUPED_MIN_CANDIDATES
        assert _pg_form(query, over, candidates) == (large or ("per-tag" if middling else "semi-join"))
        most_middling = PROBED_BESIDE_NOT_ANY_MIDDLING_MAX
        at_most_middling = {"x": most_middling // 2, "y": most_middling - most_middling // 2}
        assert _pg_form(query, at_most_middling, candidates) == (large or ("per-tag" if middling else "semi-join"))
        over_middling = {"x": most_middling // 2, "y": most_middling - most_middling // 2 + 1}
        assert _pg_form(query, over_middling, candidates) == (large or "semi-join")
        # A later page whose marker's range goes inside: PROBED_BESIDE_NOT_ANY_MAX.
        assert _pg_form(query, over, candidates, marker="m") == (large or "semi-join")
        # Without it, over fewer candidates than the set: the semi-join.
        assert _pg_form("tags-any=x,y", at_most, candidates) == (large_alone or "semi-join")
        assert _pg_form("tags-any=x,y&not-tags=a", small, candidates) == ("per-row" if small_per_row else "semi-join")
    # Over many candidates a small set stays grouped; one up to the bound,
    # per tag (alone only up to PROBED_ANY_ALONE_MAX).
    assert _pg_form(query, small, GROUPED_MIN_CANDIDATES) == "grouped"
    assert _pg_form(query, at_most, 10**6) == "per-tag"
    assert _pg_form(query, over, 10**6) == "semi-join"
    assert _pg_form("tags-any=x,y", at_most, 10**6) == "semi-join"
    # Beside a required tag: per row over few candidates, one EXISTS per
    # tag over middling ones (the semi-join never: DRIVEN_BESIDE_NOT_ANY_FACTOR);
    # without counts or candidates, the semi-join.
    assert _pg_form("tags=r&" + query, at_most | {"r": 500_000}, 62_000) == "per-tag"
    assert _pg_form("tags=r&" + query, at_most | {"r": 500_000}, 4_000) == "per-row"
    assert _pg_form(query, None, 4_000) == "semi-join"
    assert _pg_form(query, at_most, None) == "semi-join"


def test_beside_a_not_tags_any_middling_candidates_are_driven_or_per_tag_never_the_semi_join():
    """combined over ~94,000 candidates: driven finds the few ids first; a semi-join checks the not-tags-any on all."""
    query = "tags=r&tags-any=x,y&not-tags-any=a,b"
    at_most = {"r": 186_000, "x": 30_000, "y": 9_000}
    least = 90_000  # the fewest candidates: the rows on DRIVEN_BESIDE_NOT_ANY_FACTOR times as many
    assert sum(at_most.values()) == DRIVEN_BESIDE_NOT_ANY_FACTOR * least
    # The required tag's rows and the set's on DRIVEN_BESIDE_NOT_ANY_FACTOR
    # times the candidates, not one fewer; beyond, one EXISTS per tag.
    assert _pg_form(query, at_most, least) == "driven"
    assert _pg_form(query, at_most, least - 1) == "per-tag"
    assert _pg_form(query, at_most, GROUPED_MIN_CANDIDATES - 1) == "driven"
    assert _pg_form(query, at_most, GROUPED_MIN_CANDIDATES) == "grouped"  # the rules of many (GROUPED_ANY_BESIDE)
    # More than PER_ROW_CANDIDATES_MAX candidates (there, per row or as before).
    few = {"r": 30_000, "x": 100, "y": 100}
    assert _pg_form(query, few, PER_ROW_CANDIDATES_MAX + 1) == "driven"
    assert _pg_form(query, few, PER_ROW_CANDIDATES_MAX) == "semi-join"
    # The rarest required tag on more than PROBED_REQUIRED_MAX (rarer: one
    # EXISTS per tag drives from it) and at most GROUPED_ANY_REQUIRED_MAX.
    small = {"x": 10_000, "y": 10_000}
    for required, form in (
        (PROBED_REQUIRED_MAX, "per-tag"),
        (PROBED_REQUIRED_MAX + 1, "driven"),
        (GROUPED_ANY_REQUIRED_MAX, "driven"),
        (GROUPED_ANY_REQUIRED_MAX + 1, "per-tag"),
    ):  # (GROUPED_ANY_REQUIRED_MAX + the set's 20,000 rows: 2.4 times 90,000)
        assert _pg_form(query, small | {"r": required}, 90_000) == form, required
        both = "tags=r,s&tags-any=x,y&not-tags-any=a,b"
        assert _pg_form(both, small | {"r": required, "s": 10**6}, 90_000) == form, required
    # The set on at most GROUPED_ANY_MAX rows.
    assert _pg_form(query, {"r": 35_000, "x": GROUPED_ANY_MAX - 1, "y": 1}, 90_000) == "driven"
    assert _pg_form(query, {"r": 35_000, "x": GROUPED_ANY_MAX, "y": 1}, 90_000) == "per-tag"
    # Never the semi-join, whose plan checks the not-tags-any on every
    # candidate first: a required tag on more rows than the candidates
    # and than the set (_probed_over_few would keep it) is per tag here.
    assert _pg_form(query, {"r": 500_000, "x": 200_000, "y": 100_000}, 62_000) == "per-tag"
    assert _pg_form("tags=r&tags-any=x,y", {"r": 500_000, "x": 200_000, "y": 100_000}, 62_000) == "semi-join"
    # After a marker whose range goes inside the subqueries, the same rule
    # on the rows after it (the next test).
    assert _pg_form(query, at_most, least, marker="f") == "driven"
    assert _pg_form(query, {"r": 7_000, "x": 30_000, "y": 9_000}, least, marker="f") == "per-tag"
    # A marker that stays outside (an id column that sorts otherwise): the rule holds.
    text = _condition_sql(query, at_most, least, "f", ids=LOOSE_IDS)
    assert "GROUP BY" in text  # driven
    assert text.count("EXISTS") == 3  # the required tag's inside it, two NOT EXISTS
    # Only beside a not-tags-any: beside a not-tags, or nothing, as before.
    assert _pg_form("tags=r&tags-any=x,y&not-tags=a", at_most, 94_000) == "semi-join"
    assert _pg_form("tags=r&tags-any=x,y", at_most, 94_000) == "semi-join"
    # Without counts or candidates: the semi-join.
    assert _pg_form(query, None, 94_000) == "semi-join"
    assert _pg_form(query, at_most, None) == "semi-join"


def test_after_a_marker_beside_a_not_tags_any_a_rare_required_tag_drives_unless_the_set_is_larger():
    """A filtered list's later page: counts of the rows after the marker; one EXISTS per tag reads them a range each."""
    query = "tags=r&tags-any=x,y&not-tags-any=a,b"
    rare = PROBED_REQUIRED_MAX
    factor = PROBED_AFTER_MARKER_ANY_FACTOR
    for candidates in (PER_ROW_CANDIDATES_MAX + 1, 58_000, GROUPED_MIN_CANDIDATES - 1):
        # The rarest required tag on at most PROBED_REQUIRED_MAX rows after
        # the marker: driven while the set is on fewer than the factor times
        # its rows, one EXISTS per tag from there (it drives from that tag).
        below = {"r": rare, "x": factor * rare - 1, "y": 0}
        at = {"r": rare, "x": factor * rare, "y": 0}
        assert _pg_form(query, below, candidates, marker="m") == "driven", candidates
        assert _pg_form(query, at, candidates, marker="m") == "per-tag", candidates
        # On a first page the same counts are one EXISTS per tag (rarer than
        # PROBED_REQUIRED_MAX: it drives), as before.
        assert _pg_form(query, below, candidates) == "per-tag", candidates
        # A required tag the statistics do not show (0 rows): one EXISTS per tag.
        assert _pg_form(query, {"r": 0, "x": 10, "y": 10}, candidates, marker="m") == "per-tag"
        # Over more rows the rule of DRIVEN_BESIDE_NOT_ANY_FACTOR, as on a first
        # page; never the semi-join.
        many = {"r": rare + 1, "x": 10_000, "y": 0}
        assert _pg_form(query, many, candidates, marker="m") == "driven" == _pg_form(query, many, candidates)
        common = {"r": GROUPED_ANY_REQUIRED_MAX + 1, "x": 10_000, "y": 0}
        assert _pg_form(query, common, candidates, marker="m") == "per-tag"
    # One row over PROBED_REQUIRED_MAX the driven form needs that rule: the
    # rows on at most DRIVEN_BESIDE_NOT_ANY_FACTOR times the candidates.
    over = {"r": rare + 1, "x": 40_000, "y": 0}
    assert rare + 1 + 40_000 > DRIVEN_BESIDE_NOT_ANY_FACTOR * (PER_ROW_CANDIDATES_MAX + 1)
    assert _pg_form(query, over, PER_ROW_CANDIDATES_MAX + 1, marker="m") == "per-tag"
    assert _pg_form(query, over | {"r": rare}, PER_ROW_CANDIDATES_MAX + 1, marker="m") == "driven"
    # Only over middling candidates: over GROUPED_MIN_CANDIDATES the rules
    # of many (from a tag this rare, one EXISTS per tag), over fewer than
    # PER_ROW_CANDIDATES_MAX those of few.
    below = {"r": rare, "x": factor * rare - 1, "y": 0}
    assert _pg_form(query, below, GROUPED_MIN_CANDIDATES, marker="m") == "per-tag"
    assert _pg_form(query, {"r": 20_000, "x": 30_000, "y": 0}, PER_ROW_CANDIDATES_MAX, marker="m") == "per-tag"
    # A marker that stays outside the subqueries (an id column that sorts
    # otherwise): the first page's rule.
    assert "GROUP BY" not in _condition_sql(query, below, 58_000, "m", ids=LOOSE_IDS)
    # Beside a not-tags alone the rule is not taken.
    assert _pg_form("tags=r&tags-any=x,y&not-tags=a", below, 58_000, marker="m") != "driven"


def test_a_later_page_over_many_candidates_is_driven_where_its_rows_are_few_beside_what_fills_the_page():
    """After a marker the other forms still read candidates until the page is full; the driven form fewer rows."""
    query = "tags=r&tags-any=x,y"
    candidates = 250_000
    # r on 40,000 rows after the marker, the set on 22,000: 0.248 of the
    # candidates, over DRIVEN_MAX_SHARE, so not driven by share.
    after = {"r": 40_000, "x": 17_000, "y": 5_000}
    assert 62_000 > DRIVEN_MAX_SHARE * candidates
    assert _pg_form(query, after, candidates) != "driven"
    assert _pg_form(query, after, candidates, marker="m") != "driven"  # the page's size unknown
    # A candidate passes with the share 0.16 * 0.088 = 0.01408: a page of
    # `limit` is full after limit / 0.01408 of them; driven while the 62,000
    # rows are at most DRIVEN_AFTER_MARKER_FACTOR times that (limit 436.48).
    bound = 62_000 * (40_000 / candidates) * (22_000 / candidates) / DRIVEN_AFTER_MARKER_FACTOR
    assert 436 < bound < 437
    assert _pg_form(query, after, candidates, marker="m", limit=437) == "driven"
    assert _pg_form(query, after, candidates, marker="m", limit=436) != "driven"
    assert _pg_form(query, after, candidates, marker="m", limit=1000) == "driven"
    assert _pg_form(query, after, candidates, limit=1000) != "driven"  # a first page: the share rule
    # A page that never fills reads every candidate: 10,000 of 100,000 carry
    # r and all carry one of the set (200,000 rows, the share counted at most
    # 1), so 10,000 pass; a page of 20,000 reads all 100,000, and 210,000 rows
    # are over twice that (unclamped, 20,000 / 0.1 would be 200,000).
    wide = {"r": 10_000, "x": 100_000, "y": 100_000}
    assert _pg_form(query, wide, 100_000, marker="m", limit=20_000) != "driven"
    assert _pg_form(query, wide, 100_000, marker="m", limit=9_000) != "driven"  # 90,000: fewer still
    # 30,000 carry r, 40,000 rows in the set: 12,000 pass, under a page of
    # 20,000, so all 100,000 are read, over half the rows.
    assert _pg_form(query, {"r": 30_000, "x": 20_000, "y": 20_000}, 100_000, marker="m", limit=20_000) == "driven"
    # The set's share counts at most 1: 30,000 pass (not 36,000), a page of
    # 25,000 is full after 83,333 candidates, and 150,000 rows are under twice that.
    crowded = {"r": 30_000, "x": 60_000, "y": 60_000}
    assert _pg_form(query, crowded, 100_000, marker="m", limit=25_000) == "driven"
    assert _pg_form(query, crowded, 100_000, marker="m", limit=22_000) != "driven"  # 73,333: under 75,000
    # A required tag counted 0 (rare by the statistics' bound, its rows
    # unknown), or one the set outnumbers DRIVEN_AFTER_MARKER_ANY_FACTOR
    # times: one EXISTS per tag drives from its rows.
    assert _pg_form(query, {"r": 0, "x": 200_000, "y": 200_000}, candidates, marker="m", limit=1000) != "driven"
    rarer = {"r": 30_000, "x": DRIVEN_AFTER_MARKER_ANY_FACTOR * 30_000, "y": 0}
    assert _pg_form(query, rarer, 10**6, marker="m", limit=10**6) == "driven"
    assert _pg_form(query, rarer | {"y": 1}, 10**6, marker="m", limit=10**6) != "driven"
    # Only a required tag on at most DRIVEN_REQUIRED_MAX rows after the marker.
    common = {"r": DRIVEN_REQUIRED_MAX + 1, "x": 1_000, "y": 1_000}
    assert _pg_form(query, common, candidates, marker="m", limit=10**6) != "driven"
    assert _pg_form(query, common | {"r": DRIVEN_REQUIRED_MAX}, candidates, marker="m", limit=10**6) == "driven"
    # A dense page fills after few candidates, which the semi-join reads.
    dense = {"r": 75_000, "x": 60_000, "y": 60_000}
    assert _pg_form(query, dense, 150_000, marker="m", limit=1000) != "driven"
    # Under GROUPED_MIN_CANDIDATES the rules of fewer candidates, and a
    # marker that stays outside the subqueries (an id column that sorts
    # otherwise) is a first page's rule.
    assert _pg_form(query, after, GROUPED_MIN_CANDIDATES - 1, marker="m", limit=1000) != "driven"
    assert form_of(_condition_sql(query, after, candidates, "m", limit=1000, ids=LOOSE_IDS)) != "driven"


def test_a_later_page_over_middling_candidates_groups_a_set_few_after_its_marker():
    """GROUPED_AFTER_MARKER_MAX_SHARE: after a marker whose range goes inside, grouped reads only those rows."""

    def grouped(query, counts, candidates, marker=None):
        # The tags-any's IN (... GROUP BY ...); a not-tags-any beside it may be probed per row.
        return "GROUP BY" in _condition_sql(query, counts, candidates, marker)

    for query in ("tags-any=x,y", "tags-any=x,y&not-tags-any=a,b", "tags-any=x,y&not-tags=a"):
        for candidates in (PER_ROW_CANDIDATES_MAX + 1, 62_000, GROUPED_MIN_CANDIDATES - 1):
            most = int(GROUPED_AFTER_MARKER_MAX_SHARE * candidates)
            at_most = {"x": most // 2, "y": most - most // 2}
            over = {"x": most // 2, "y": most - most // 2 + 1}
            assert grouped(query, at_most, candidates, marker="m"), (query, candidates)
            assert not grouped(query, over, candidates, marker="m"), (query, candidates)
            assert not grouped(query, at_most, candidates)  # a first page reads the whole set
        # Over a tenant-sized page or fewer, not.
        assert not grouped(query, {"x": 10, "y": 10}, PER_ROW_CANDIDATES_MAX, marker="m")
    # Beside it a not-tags-any is probed per row (OFFSET 0), and the grouped
    # IN holds the page: PostgreSQL's SQL says the marker inside it only;
    # MySQL's (one EXISTS per tag, the range outside) says it outside.
    few = {"x": 1_000, "y": 1_000}
    sql_text = _condition_sql("tags-any=x,y&not-tags-any=a,b", few, 62_000, "m")
    assert sql_text.count("OFFSET 0") == 2
    assert "GROUP BY" in sql_text
    assert "things.id >" not in sql_text
    mysql_text = _condition_sql("tags-any=x,y&not-tags-any=a,b", few, 62_000, "m", dialect=mysql.dialect())
    assert "things.id >" in mysql_text
    # Beside a required tag, the rules of required tags.
    assert _pg_form("tags=r&tags-any=x,y", few | {"r": 10**6}, 62_000, marker="m") == "semi-join"
    # A marker that stays outside the subqueries: a first page's rule.
    assert "GROUP BY" not in _condition_sql("tags-any=x,y", few, 62_000, "m", ids=LOOSE_IDS)


def test_over_few_candidates_a_not_tags_any_of_two_tags_is_probed_per_row():
    """PostgreSQL would hash a not-tags-any tag's rows whole (116 ms) to check a few candidates (24 ms probed)."""

    def offsets(query_string, candidates, dialect=None, counts=MIDDLING):
        return _condition_sql(query_string, counts, candidates, dialect=dialect).count("OFFSET 0")

    for query in ("tags=r&tags-any=x,y&not-tags-any=a,b", "tags-any=x,y&not-tags-any=a,b&not-tags=c"):
        assert offsets(query, 62_000) == 2
        assert offsets(query, GROUPED_MIN_CANDIDATES - 1) == 2
        assert offsets(query, GROUPED_MIN_CANDIDATES) == 0
        assert offsets(query, None) == 0
        # Whatever the counts: only the candidates decide.
        assert offsets(query, 62_000, counts=None) == 2
        for dialect in (mysql.dialect(), sqlite.dialect()):
            assert offsets(query, 62_000, dialect) == 0
    # Three tags or more: a count, which PostgreSQL runs per row anyway.
    assert offsets("tags-any=x,y&not-tags-any=a,b,c", 62_000) == 0
    # Without a tags-any, whatever the candidates: TagStore.apply asks the
    # planner only for a tags-any, and a caller's hint never changes the SQL.
    assert offsets("not-tags-any=a,b", 62_000) == 0
    assert offsets("tags=r&not-tags-any=a,b&not-tags=c", 62_000) == 0
    # After a marker the probes hold no range (PostgreSQL would read every
    # tag row after it into a hash); the page's own range stays outside.
    after = parse_tag_query("tags=r&tags-any=x,y&not-tags-any=a,b").where(
        RESOURCES.c.id, TABLES.tags, {"r": 7_000, "x": 30_000, "y": 30_000}, 62_000, marker="m"
    )
    text = str(after.compile(dialect=postgresql.dialect()))
    probes = text.split("OFFSET 0")[:-1]
    assert len(probes) == 2
    for probe in probes:
        assert " > " not in probe[probe.rindex("EXISTS") :], text
    assert "things.id > %(" in text, text


def test_many_candidates_beside_a_rare_required_tag_drive_from_it_per_tag_unless_driven_or_grouped():
    """rare + any big over 125,000 to 500,000 candidates: the semi-join would merge every candidate's id first."""
    big = {"x": 90_000, "y": 54_000}
    most = PROBED_REQUIRED_MAX
    for candidates in (GROUPED_MIN_CANDIDATES, 250_000, 500_000, 10**6, 10**8):
        assert _pg_form("tags=r&tags-any=x,y", big | {"r": most}, candidates) in ("per-tag", "driven")
        # The rarest required tag decides; one on more rows keeps the semi-join.
        assert _pg_form("tags=r,s&tags-any=x,y", big | {"r": most, "s": 500_000}, candidates) in ("per-tag", "driven")
        assert _pg_form("tags=r&tags-any=x,y", big | {"r": most + 1}, candidates) in ("semi-join", "driven")
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": most}, 250_000) == "per-tag"
    # The driven form's quarter (DRIVEN_BESIDE_RARE_MAX_SHARE) up to that bound, a fifth beyond.
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": most}, 700_000) == "driven"
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": most + 1}, 700_000) == "semi-join"
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": most + 1}, 250_000) == "semi-join"
    # Where the rows it reads are few beside the candidates: driven, first.
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": most}, 10**6) == "driven"
    # A small set is grouped, first; without counts, the semi-join.
    assert _pg_form("tags=r&tags-any=x,y", {"r": most, "x": 10_000, "y": 10_000}, 150_000) == "grouped"
    assert _pg_form("tags=r&tags-any=x,y", None, 250_000) == "semi-join"


def test_fewer_candidates_beside_a_rare_required_tag_drive_from_it_per_tag():
    """rare + any big on a filtered page: one EXISTS per tag lets PostgreSQL drive from the rare tag's rows."""
    big = {"x": 90_000, "y": 54_000}
    # The rarest required tag on no more rows than the candidates and
    # fewer than the set's: one EXISTS per tag (the straightforward SQL).
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": 7_000}, candidates=62_000) == "per-tag"
    assert _pg_form("tags=r,s&tags-any=x,y", big | {"r": 7_000, "s": 500_000}, candidates=7_000) == "per-tag"
    # More required rows than candidates: the semi-join probes the candidates.
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": 7_000}, candidates=6_999) == "semi-join"
    # A set on no more rows than the required tag: the semi-join probes the set.
    small = {"x": 10_000, "y": 10_000}
    assert _pg_form("tags=r&tags-any=x,y", small | {"r": 19_999}, candidates=62_000) == "per-tag"
    assert _pg_form("tags=r&tags-any=x,y", small | {"r": 20_000}, candidates=62_000) == "semi-join"
    # A required tag on at least the set's rows: the semi-join.
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": 144_000}, candidates=GROUPED_MIN_CANDIDATES - 1) == "semi-join"
    # No counts, or no candidates: the semi-join.
    assert _pg_form("tags=r&tags-any=x,y", None, candidates=62_000) == "semi-join"
    assert _pg_form("tags=r&tags-any=x,y", big | {"r": 7_000}, candidates=None) == "semi-join"


def test_a_form_said_settled_is_the_one_the_rows_after_any_marker_give_too():
    """TagStore skips the two EXPLAINs of a marker's share where _form_settled says a later page keeps the form."""
    sizes = [5_000, 25_000, 50_000, 50_001, 100_000]  # sums on both sides of PROBED_BESIDE_NOT_ANY_MAX
    pairs = [(x, y) for x in sizes for y in sizes if x <= y]
    grid_candidates = [20_000, 20_001, 62_000, GROUPED_MIN_CANDIDATES - 1, GROUPED_MIN_CANDIDATES, 250_000, 10**6]
    checked = 0
    for required, beside_not_any in itertools.product([None, 7_000, 20_000, 60_000, 80_000, 250_000], [False, True]):
        query_string = ("tags=r&" if required is not None else "") + "tags-any=x,y"
        query_string += "&not-tags-any=a,b" if beside_not_any else ""
        all_of = frozenset("r") if required is not None else frozenset()
        for x, y in pairs:
            counts = {"x": x, "y": y} | ({"r": required} if required is not None else {})
            for candidates in grid_candidates:
                if not tags_sql._form_settled(all_of, frozenset("xy"), counts, candidates, beside_not_any):
                    continue
                form = _pg_form(query_string, counts, candidates, marker="m")
                for share in (0.5, 0.1):
                    scaled = {tag: int(round(count * share)) for tag, count in counts.items()}
                    later = tags_sql._later_page_counts(
                        all_of, frozenset("xy"), counts, scaled, candidates, beside_not_any
                    )
                    assert _pg_form(query_string, later, candidates, marker="m") == form, (counts, candidates, share)
                checked += 1
    assert checked > 300  # the grid reaches settled forms of every kind, not a handful
    # Over middling candidates without a required tag, a set on more than
    # GROUPED_AFTER_MARKER_MAX_SHARE of them may be grouped after the
    # marker, with a not-tags-any or without; one on at most that is grouped already.
    middling = {"x": 6_200, "y": 6_201}
    assert 12_400 == GROUPED_AFTER_MARKER_MAX_SHARE * 62_000
    assert not tags_sql._form_settled(frozenset(), frozenset("xy"), middling, 62_000, True)
    assert not tags_sql._form_settled(frozenset(), frozenset("xy"), middling, 62_000, False)
    small = {"x": 6_200, "y": 6_200}
    assert tags_sql._form_settled(frozenset(), frozenset("xy"), small, 62_000, True)
    assert tags_sql._form_settled(frozenset(), frozenset("xy"), small, 62_000, False)


def test_a_later_page_chooses_one_exists_per_tag_on_the_whole_tables_rows():
    """One EXISTS per tag hashes each tag's rows whole; the other forms read the rows after the marker."""
    xy = frozenset("xy")
    common = {"x": 300_000, "y": 50_000}
    after = {"x": 15_000, "y": 15_000}  # 30,000: per tag by the share alone
    assert tags_sql._later_page_counts(frozenset(), xy, common, after, 62_000, False) == common
    assert _pg_form(
        "tags-any=x,y", tags_sql._later_page_counts(frozenset(), xy, common, after, 62_000, False), 62_000
    ) == ("semi-join")
    middling = {"x": 25_000, "y": 20_000}
    assert _pg_form(
        "tags-any=x,y", tags_sql._later_page_counts(frozenset(), xy, middling, after, 62_000, False), 62_000
    ) == ("per-tag")
    # Grouped and semi-join by the share: the share.
    few = {"x": 5_000, "y": 5_000}
    assert tags_sql._later_page_counts(frozenset(), xy, common, few, 10**6, False) == few
    assert tags_sql._later_page_counts(frozenset(), xy, common, few, 62_000, False) == few
    # Beside required tags, the share always (their EXISTS carry the marker).
    assert tags_sql._later_page_counts(
        frozenset("r"), xy, common | {"r": 7_000}, after | {"r": 700}, 62_000, False
    ) == (after | {"r": 700})
    # Beside a not-tags-any: per tag by the share, the semi-join by the whole.
    assert tags_sql._later_page_counts(frozenset(), xy, common, after, 62_000, True) == common


@pytest.mark.parametrize("bad", [-1, 1.5, "12", None, True], ids=["negative", "float", "text", "none", "bool"])
def test_a_count_that_is_not_a_number_of_resources_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"counts\['x'\]"):
        _condition_sql("tags-any=x,y", {"x": bad, "y": 1})


@pytest.mark.parametrize("bad", [-1, 1.5, "1000000", True], ids=["negative", "float", "text", "bool"])
def test_candidates_that_are_not_a_number_of_rows_are_refused(bad):
    with pytest.raises(ValueError, match="candidates"):
        parse_tag_query("tags-any=x,y").where(RESOURCES.c.id, TABLES.tags, None, bad)


def test_sqlite_sql_never_depends_on_the_counts():

    for query_string in ("tags=r&tags-any=x,y&not-tags-any=a,b,c", "tags-any=x,y"):
        query = parse_tag_query(query_string)
        with_counts = query.where(RESOURCES.c.id, TABLES.tags, {"r": 9, "x": 1, "y": 10**6}, GROUPED_MIN_CANDIDATES)
        without = query.where(RESOURCES.c.id, TABLES.tags)
        assert str(with_counts.compile(dialect=sqlite.dialect())) == str(without.compile(dialect=sqlite.dialect()))


def _mysql_form(query_string: str, counts, candidates=None, marker=None) -> str:

    condition = parse_tag_query(query_string).where(RESOURCES.c.id, TABLES.tags, counts, candidates, marker=marker)
    text = str(condition.compile(dialect=mysql.dialect(is_mariadb=True)))
    # The semi-join is the one EXISTS over tag IN (...); a not-tags-any has an OR of its own on MySQL.
    return "semi-join" if " IN (" in text else "per-tag"


def test_mysql_reads_a_tags_any_whole_only_when_the_counts_say_it_is_small_and_no_tag_is_excluded():
    half = MYSQL_SEMI_JOIN_MAX // 2
    # Alone: the semi-join up to MYSQL_SEMI_JOIN_MAX rows, whatever the candidates.
    assert _mysql_form("tags-any=x,y", {"x": half, "y": half}) == "semi-join"
    assert _mysql_form("tags-any=x,y", {"x": half, "y": half + 1}) == "per-tag"
    assert _mysql_form("tags-any=x,y", {"x": half, "y": half + 1}, GROUPED_MIN_CANDIDATES, "m") == "per-tag"
    # A tag without a count is common; no counts at all: the semi-join.
    assert _mysql_form("tags-any=x,y", {"x": 1}) == "per-tag"
    assert _mysql_form("tags-any=x,y", None) == "semi-join"
    # Beside a required tag: the semi-join only for a set known to be small.
    assert _mysql_form("tags=r&tags-any=x,y", {"r": 10**6, "x": 1, "y": 1}) == "semi-join"
    assert _mysql_form("tags=r&tags-any=x,y", {"r": 1, "x": half, "y": half + 1}) == "per-tag"
    assert _mysql_form("tags=r&tags-any=x,y", None) == "per-tag"
    # Beside an excluded tag one EXISTS per tag, whatever the counts.
    assert _mysql_form("tags-any=x,y&not-tags=z", {"x": 1, "y": 1}) == "per-tag"
    assert _mysql_form("tags=r&tags-any=x,y&not-tags-any=z,w", {"x": 1, "y": 1}) == "per-tag"


def test_tags_to_count_names_what_the_choice_reads():
    assert parse_tag_query("tags=r&tags-any=x,y&not-tags=z").tags_to_count() == {"r", "x", "y"}
    assert parse_tag_query("tags=r&not-tags=z").tags_to_count() == frozenset()
    # One tags-any tag is a required tag; one met by a required tag is gone.
    assert parse_tag_query("tags-any=x").tags_to_count() == frozenset()
    assert parse_tag_query("tags=x&tags-any=x,y").tags_to_count() == frozenset()
    assert parse_tag_query("tags=x&not-tags=x&tags-any=a,b").tags_to_count() == frozenset()


# Tags whose text an array literal must quote or escape, read back from pg_stats.
AWKWARD_TAGS = ['say "hi"', "back\\slash", "{braces}", "NULL", "two words", "é∑", "a;b"]


def test_tag_statistics_are_postgresqls_estimates_once_analysed(tag_engine):
    resources = {"r%02d" % n: ({"common", "a"} if n % 2 else {"common"}) for n in range(40)}
    for number, tag in enumerate(AWKWARD_TAGS):
        resources["r%02d" % number] = resources["r%02d" % number] | {tag}
    fill(tag_engine, resources)
    with tag_engine.connect() as conn:
        if tag_engine.dialect.name != "postgresql":
            assert tag_statistics(conn, TABLES.tags) is None
            return
        conn.execute(sa.text("ANALYZE %s" % TABLES.tags.name))
        conn.commit()
        statistics = tag_statistics(conn, TABLES.tags)
    assert isinstance(statistics, TagStatistics)
    assert statistics.counts(["common", "a"]) == {"common": 40, "a": 20}
    assert statistics.changed == 0
    # Each awkward tag is on one resource: among the common values or
    # estimated as the rest, never misread as another text.
    assert set(statistics.common) <= {"common", "a", *AWKWARD_TAGS}
    assert statistics.counts(AWKWARD_TAGS) == dict.fromkeys(AWKWARD_TAGS, 1)


def test_tag_statistics_count_the_rows_changed_since_postgresql_gathered_them(tag_engine):
    """A tag made common since the last ANALYZE still reads as rare: ``changed`` says how stale they are."""
    if tag_engine.dialect.name != "postgresql":
        return  # no statistics elsewhere (test_tag_statistics_are_postgresqls_estimates_once_analysed)
    fill(tag_engine, {"r%02d" % n: {"old"} for n in range(20)})
    with tag_engine.connect() as conn:
        conn.execute(sa.text("ANALYZE %s" % TABLES.tags.name))
        conn.commit()
        conn.execute(TABLES.tags.insert(), [{"resource_id": "r%02d" % n, "tag": "new"} for n in range(20)])
        conn.commit()
        # PostgreSQL publishes a session's counters when it next reports: ask it to, then wait a moment.
        conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))
        conn.commit()
        for _ in range(50):
            statistics = tag_statistics(conn, TABLES.tags)
            conn.rollback()
            if statistics.changed:
                break
            time.sleep(0.1)
    assert statistics.changed >= 20
    assert statistics.counts(["new"]) == {"new": statistics.other}


def test_tag_statistics_are_none_before_postgresql_analyses_the_table(tag_engine):
    """A table never analysed (and any table elsewhere than PostgreSQL): no estimate, so no counts."""
    fresh = sa.Table(
        "tags_never_analysed",
        sa.MetaData(),
        sa.Column("resource_id", sql.ExactString(40), primary_key=True),
        sa.Column("tag", sql.ExactString(60), primary_key=True),
    )
    fresh.create(tag_engine)
    try:
        with tag_engine.connect() as conn:
            conn.execute(fresh.insert(), [{"resource_id": "r1", "tag": "a"}])
            assert tag_statistics(conn, fresh) is None
    finally:
        fresh.drop(tag_engine)


# Every shape that puts a tags-any (or a not-tags-any of three) in a
# dialect-specific form, each form on each backend.
ADAPTED_QUERIES = ["tags-any=a,b", "tags=c&tags-any=a,b", "not-tags-any=a,b,c", "tags=a&not-tags=d&tags-any=b,c"]


@pytest.mark.parametrize("counts", [None, ALL_RARE], ids=["semi-join", "grouped"])
def test_an_adapted_statement_keeps_the_subqueries_correlated(tag_engine, counts):
    """ClauseAdapter, as the ORM uses it for aliases and unions, reaches inside the per-database forms."""
    from sqlalchemy.sql.util import ClauseAdapter

    resources = {"r1": {"a"}, "r2": {"b", "c"}, "r3": {"d"}, "r4": set()}
    fill(tag_engine, resources)
    alias = RESOURCES.alias("adapted")
    for query_string in ADAPTED_QUERIES:
        query = parse_tag_query(query_string)
        candidates = None if counts is None else GROUPED_MIN_CANDIDATES
        statement = sa.select(RESOURCES.c.id).where(query.where(RESOURCES.c.id, TABLES.tags, counts, candidates))
        adapted = ClauseAdapter(alias).traverse(statement.order_by(RESOURCES.c.id))
        with tag_engine.connect() as conn:
            found = conn.execute(adapted).scalars().all()
        assert found == sorted(rid for rid, tags in resources.items() if query.matches(tags)), query_string


def test_an_orm_union_filtered_by_tags_any_keeps_one_tenant_to_its_own_rows(tag_engine):
    """The reviewer's case: a legacy ORM union, then the tag filter; another tenant's tag must not let rows through."""
    from sqlalchemy.orm import DeclarativeBase, Session

    class Base(DeclarativeBase):
        pass

    class Server(Base):
        __tablename__ = "orm_servers_for_tags"
        id = sa.Column(sql.ExactString(40), primary_key=True)
        tenant = sa.Column(sa.String(20))

    Base.metadata.create_all(tag_engine)
    try:
        fill(tag_engine, {"s1": {"red"}})
        with Session(tag_engine) as session:
            session.add_all(
                [Server(id="s1", tenant="other"), Server(id="s2", tenant="me"), Server(id="s3", tenant="me")]
            )
            session.commit()
            for counts in (None, {"red": 1, "blue": 0}):
                candidates = None if counts is None else GROUPED_MIN_CANDIDATES
                condition = parse_tag_query("tags-any=red,blue").where(Server.id, TABLES.tags, counts, candidates)
                mine = session.query(Server).filter(Server.tenant == "me")
                found = mine.union(session.query(Server).filter(Server.id == "s2")).filter(condition).all()
                assert found == [], counts
    finally:
        Base.metadata.drop_all(tag_engine)


def test_exact_comparison_on_every_backend(tag_engine):
    fill(tag_engine, {"r1": {"a"}, "r2": {"A"}, "r3": {"a "}})
    assert sql_result(tag_engine, parse_tag_query("tags=a")) == ["r1"]
    assert sql_result(tag_engine, parse_tag_query("tags=A")) == ["r2"]
    assert sql_result(tag_engine, parse_tag_query("tags=a+")) == ["r3"]
    assert sql_result(tag_engine, parse_tag_query("not-tags=a")) == ["r2", "r3"]


def test_the_callers_query_is_not_changed(tag_engine):
    statement = sa.select(RESOURCES.c.id).where(RESOURCES.c.id != "x").order_by(RESOURCES.c.id)
    before = str(statement.compile(tag_engine))
    query = parse_tag_query("tags=a&not-tags=b")
    filtered = query.apply(statement, RESOURCES.c.id, TABLES.tags)
    assert filtered is not statement
    assert str(statement.compile(tag_engine)) == before
    assert "EXISTS" in str(filtered.compile(tag_engine))
    assert parse_tag_query("").apply(statement, RESOURCES.c.id, TABLES.tags) is statement


def test_a_caller_query_that_joins_the_tag_table_itself(tag_engine):
    # Every condition is over its own alias: a caller's join of the tag
    # table cannot capture the subqueries' correlation.
    fill(tag_engine, {"r1": {"a", "b"}, "r2": {"a"}})
    tags = TABLES.tags
    statement = (
        sa.select(RESOURCES.c.id, tags.c.tag)
        .join(tags, tags.c.resource_id == RESOURCES.c.id)
        .where(parse_tag_query("tags=b").where(RESOURCES.c.id, tags))
        .order_by(RESOURCES.c.id, tags.c.tag)
    )
    with tag_engine.connect() as conn:
        assert conn.execute(statement).all() == [("r1", "a"), ("r1", "b")]


# -- the names that moved here from tenancy_mw.tags.model ----------------------

# tenancy_mw.tags.model's __all__ before its SQL moved to tenancy_mw.tags.sql.
OLD_MODEL_NAMES = [
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
MOVED = sorted(set(OLD_MODEL_NAMES) - set(model.__all__))


def test_every_old_model_name_is_in_model_or_sql_and_only_one():
    import tenancy_mw.tags

    # A star import of the 0.1 module gives exactly these names.
    assert tenancy_mw.tags.__all__ == OLD_MODEL_NAMES
    assert set(OLD_MODEL_NAMES) <= set(model.__all__) | set(tags_sql.__all__)
    assert not set(model.__all__) & set(tags_sql.__all__)
    assert set(MOVED) <= model.MOVED_TO_SQL
    assert all(name in vars(tags_sql) and name not in vars(model) for name in model.MOVED_TO_SQL)


@pytest.mark.parametrize("name", MOVED)
def test_a_name_moved_to_tags_sql_still_comes_from_model_with_a_warning(name):
    with pytest.warns(
        DeprecationWarning, match=r"tenancy_mw\.tags\.model\.%s moved to tenancy_mw\.tags\.sql\.%s" % (name, name)
    ):
        value = getattr(model, name)
    assert value is getattr(tags_sql, name)


def test_importing_a_moved_name_from_model_warns_naming_tags_sql():
    with pytest.warns(DeprecationWarning, match=r"tenancy_mw\.tags\.sql\.define_tables"):
        from tenancy_mw.tags.model import define_tables as old_define_tables
    assert old_define_tables is define_tables


def test_model_has_no_name_it_never_had():
    with pytest.raises(AttributeError, match="no_such_name"):
        model.no_such_name  # noqa: B018 - the access is the test


@pytest.mark.parametrize("name", [*OLD_MODEL_NAMES, "_has_tag", "_check_candidates"])
def test_the_old_module_finds_each_name_where_it_is_now(name):
    """``tenancy_mw.tags.<name>`` (the module of 0.1) warns naming the module that holds it now."""
    import tenancy_mw.tags

    new = tags_sql if name in model.MOVED_TO_SQL else model
    with pytest.warns(DeprecationWarning, match=r"tenancy_mw\.tags\.%s moved to %s\.%s" % (name, new.__name__, name)):
        value = getattr(tenancy_mw.tags, name)
    assert value is vars(new)[name]


def test_tag_query_where_is_tag_condition():
    query = parse_tag_query("tags=a&tags-any=b,c&not-tags=d&not-tags-any=e,f,g")
    resource_id = RESOURCES.c.id
    assert str(query.where(resource_id, TABLES.tags)) == str(tag_condition(query, resource_id, TABLES.tags))
    statement = sa.select(RESOURCES.c.id)
    assert str(query.apply(statement, resource_id)) == str(statement.where(tag_condition(query, resource_id)))


def _compiled(query_string: str, dialect, marker="m") -> str:
    condition = parse_tag_query(query_string).where(RESOURCES.c.id, TABLES.tags, marker=marker)
    return str(condition.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def test_the_marker_goes_inside_the_subqueries_each_database_joins():

    inside = "resource_id > 'm'"
    # PostgreSQL: inside every EXISTS / NOT EXISTS it joins, and last outside.
    text = _compiled("tags=a&not-tags=b", postgresql.dialect())
    assert text.count(inside) == 2
    assert text.endswith("things.id > 'm'")
    # Not inside the ones it probes per row under an OR (not-tags-any).
    assert inside not in _compiled("not-tags-any=a,b", postgresql.dialect())
    # MariaDB: inside the joined positive subqueries when no tag is excluded
    # (the required tag's, the semi-join's; not the per-tag probes under an OR) ...
    assert _compiled("tags=a&tags-any=b,c", mysql.dialect()).count(inside) == 1
    assert _compiled("tags=a,b", mysql.dialect()).count(inside) == 2
    assert _compiled("tags-any=b,c", mysql.dialect()).count(inside) == 1
    # ... and inside none beside an excluded tag.
    assert inside not in _compiled("tags=a&tags-any=b,c&not-tags=d", mysql.dialect())
    assert inside not in _compiled("tags-any=b,c&not-tags-any=d,e", mysql.dialect())
    # Every form still ends with the page's own condition.
    for text in (_compiled("tags=a&not-tags=d", mysql.dialect()), _compiled("", postgresql.dialect())):
        assert text.endswith("things.id > 'm'"), text


def test_postgresqls_in_forms_hold_the_page_without_the_range_said_twice():
    """An IN over tag rows after the marker holds the page; said outside too, the planner counts the range twice."""

    def text_of(resource_id, query_string, counts):
        condition = parse_tag_query(query_string).where(
            resource_id, TABLES.tags, counts, GROUPED_MIN_CANDIDATES, marker="m"
        )
        return str(condition.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))

    grouped = text_of(RESOURCES.c.id, "tags-any=b,c", {"b": 1, "c": 1})
    driven = text_of(RESOURCES.c.id, "tags=a&tags-any=b,c&not-tags=d", {"a": 1, "b": 1, "c": 1})
    for text in (grouped, driven):
        assert "GROUP BY" in text
        assert "things.id > 'm'" not in text
    assert grouped.count("resource_id > 'm'") == 1
    # A column of a collation of its own: no range inside, the page's own outside.
    loose = sa.Table("loose_things", sa.MetaData(), sa.Column("id", sa.String(40, collation="und-x-icu")))
    text = text_of(loose.c.id, "tags-any=b,c", {"b": 1, "c": 1})
    assert "resource_id > 'm'" not in text
    assert text.endswith("loose_things.id > 'm'")
    # The semi-join and one EXISTS per tag keep it last.
    assert text_of(RESOURCES.c.id, "tags-any=b,c", None).endswith("things.id > 'm'")


def test_the_driven_forms_required_tags_start_at_the_marker_too():
    """Each required tag's EXISTS inside the driven IN reads its tag from the marker on, not from the first id."""

    counts = {"a": 1, "e": 1, "b": 1, "c": 1}
    condition = parse_tag_query("tags=a,e&tags-any=b,c").where(
        RESOURCES.c.id, TABLES.tags, counts, GROUPED_MIN_CANDIDATES, marker="m"
    )
    text = str(condition.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    inner = text[text.index("IN (SELECT") : text.index("GROUP BY")]
    assert inner.count("EXISTS") == 2
    # The ids found, and each of the two required tags' rows.
    assert inner.count("resource_id > 'm'") == 3, text


def _form_with_sets(
    query_string: str, counts: dict, candidates: int, resources: int | None = 1_000_000, marker=None, limit=None
) -> str:
    """The form PostgreSQL gets given the tag set table of *resources* rows (``None``: no tag set table)."""
    sets = None if resources is None else TagSets(TAG_SETS, resources)
    query = parse_tag_query(query_string)
    condition = tag_condition(
        query, RESOURCES.c.id, TABLES.tags, counts, candidates, marker=marker, limit=limit, sets=sets
    )
    return form_of(str(sa.select(RESOURCES.c.id).where(condition).compile(dialect=postgresql.dialect())))


def test_beside_a_required_tag_on_few_rows_many_candidates_are_tested_on_the_tag_sets():
    # r with a or b: 12,500 expected matches, over SETS_MATCHES_FIRST_MAX (fewer are found first).
    counts = {"r": SETS_REQUIRED_MAX, "a": 300_000, "b": 200_000}
    assert _form_with_sets("tags=r&tags-any=a,b", counts, GROUPED_MIN_CANDIDATES) == "sets"
    assert (
        _form_with_sets("tags=r&tags-any=a,b", {**counts, "r": SETS_REQUIRED_MAX + 1}, GROUPED_MIN_CANDIDATES) != "sets"
    )
    assert _form_with_sets("tags=r&tags-any=a,b", counts, GROUPED_MIN_CANDIDATES - 1) != "sets"


def test_a_query_keeping_a_large_share_of_many_candidates_is_tested_on_the_tag_sets():
    # a or b on 5 % of a million resources: 4,100 of 82,000 candidates.
    dense = {"a": 30_000, "b": 20_000}
    assert _form_with_sets("tags-any=a,b&not-tags-any=c,d", dense, 82_000) == "sets"
    assert _form_with_sets("tags-any=a,b&not-tags-any=c,d", {"a": 30_000, "b": 19_999}, 82_000) != "sets"
    # The share, but fewer than SETS_DENSE_MIN_MATCHES (4,000) of the candidates: 3,999.
    assert _form_with_sets("tags-any=a,b", dense, 79_980) != "sets"
    assert _form_with_sets("tags-any=a,b", dense, 80_000) == "sets"
    # Over more candidates than resources in the sets, the share is of the candidates.
    assert _form_with_sets("tags-any=a,b", dense, 1_000_000, resources=1_000) == "sets"
    assert _form_with_sets("tags-any=a,b", dense, 2_000_000, resources=1_000) != "sets"
    # Few candidates are checked per row first.
    assert _form_with_sets("tags-any=a,b", {"a": 300_000, "b": 200_000}, PER_ROW_CANDIDATES_MAX) != "sets"


def test_the_tag_set_form_is_postgresqls_only_and_needs_counts_candidates_and_a_tags_any():
    sets = TagSets(TAG_SETS, 1_000_000)
    counts = {"a": 300_000, "b": 200_000, "r": 0}
    for query_string, known, candidates in [
        ("tags-any=a,b", counts, None),
        ("tags-any=a,b", None, 1_000_000),
        ("tags=r", counts, 1_000_000),
    ]:
        condition = tag_condition(
            parse_tag_query(query_string), RESOURCES.c.id, TABLES.tags, known, candidates, sets=sets
        )
        assert "tenancy_mw_tag_sets" not in str(condition.compile(dialect=postgresql.dialect()))
    condition = tag_condition(
        parse_tag_query("tags-any=a,b"), RESOURCES.c.id, TABLES.tags, counts, 1_000_000, sets=sets
    )
    assert "tenancy_mw_tag_sets" in str(condition.compile(dialect=postgresql.dialect()))
    for dialect in (sqlite.dialect(), mysql.dialect()):
        assert "tenancy_mw_tag_sets" not in str(condition.compile(dialect=dialect))


def _later_set_page_sql(resource_id: sa.ColumnElement) -> str:
    """PostgreSQL's SQL of ``tags-any=a,b`` after marker ``m`` over many candidates, with the tag sets, on one line."""
    condition = tag_condition(
        parse_tag_query("tags-any=a,b"),
        resource_id,
        TABLES.tags,
        {"a": 300_000, "b": 200_000},
        500_000,
        marker="m",
        sets=TagSets(TAG_SETS, 1_000_000),
    )
    return " ".join(
        str(condition.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})).split()
    )


def test_a_later_page_of_the_tag_set_form_holds_the_marker_inside_and_beside():
    sql_text = _later_set_page_sql(RESOURCES.c.id)
    assert "tenancy_mw_tag_sets_1.resource_id > 'm'" in sql_text
    assert sql_text.endswith("AND things.id > 'm'")


def test_the_tag_set_form_keeps_the_marker_beside_it_alone_where_the_id_column_sorts_otherwise():
    """A case-insensitive id column (CITEXT) sorts ``a`` before ``B``; the set table's ids do not: no range inside."""
    sql_text = _later_set_page_sql(sa.table("servers", sa.column("id", CITEXT())).c.id)
    assert "tenancy_mw_tag_sets" in sql_text
    assert "tenancy_mw_tag_sets_1.resource_id >" not in sql_text
    assert sql_text.endswith("AND servers.id > 'm'")


def test_few_expected_matches_beside_a_counted_required_tag_are_found_first_on_a_first_page():
    # r with a or b on 30,000 x 190,000 / 1,000,000: 5,700 expected matches.
    counts = {"r": 30_000, "a": 100_000, "b": 90_000}
    assert _form_with_sets("tags=r&tags-any=a,b", counts, 250_000) == "matched"
    assert _form_with_sets("tags=r&tags-any=a,b", counts, 1_000_000) == "matched"
    # At the bound (r on 45,000 with a or b on 200,000: 9,000) and one over it (r on 45,005: 9,001).
    at_bound = {"r": 45_000, "a": 100_000, "b": 100_000}
    assert _form_with_sets("tags=r&tags-any=a,b", at_bound, 250_000) == "matched"
    assert _form_with_sets("tags=r&tags-any=a,b", {**at_bound, "r": 45_005}, 250_000) != "matched"
    # Before the plain set form's own rule (SETS_REQUIRED_MAX): its counts (3,750 expected matches) find them first.
    assert _form_with_sets("tags=r&tags-any=a,b", {"r": 25_000, "a": 90_000, "b": 60_000}, 100_000) == "matched"
    # A required tag that reads as rare (0: under the statistics' floor, its rows unknown): not found first.
    assert _form_with_sets("tags=r&tags-any=a,b", {**counts, "r": 0}, 250_000) != "matched"
    # No required tag, or no more than PER_ROW_CANDIDATES_MAX candidates: not found first.
    assert _form_with_sets("tags-any=a,b", {"a": 5_000, "b": 4_000}, 250_000) != "matched"
    assert _form_with_sets("tags=r&tags-any=a,b", counts, PER_ROW_CANDIDATES_MAX) != "matched"
    # The same counts after a marker, without a not-tags-any: not a later page's case.
    assert _form_with_sets("tags=r&tags-any=a,b", counts, 250_000, marker="m") != "matched"
    # A tag left out of the counts or at TAG_COUNT_CAP ("at least"): its matches are not known.
    assert _form_with_sets("tags=r&tags-any=a,b", {"a": 100_000, "b": 90_000}, 250_000) != "matched"
    assert _form_with_sets("tags=r&tags-any=a,b", {**counts, "r": TAG_COUNT_CAP}, 250_000) != "matched"


def test_a_first_page_that_fills_from_the_required_tags_first_rows_is_one_exists_per_tag_not_the_matches_first():
    # r on 33,000 rows, a or b on 20 %: 6,600 expected matches, under SETS_MATCHES_FIRST_MAX.  Over the whole
    # collection a page of 1,000 fills from about 5,000 of r's rows (1,000 / 0.2): fewer than the matches.
    query = "tags=r&tags-any=a,b"
    counts = {"r": 33_000, "a": 120_000, "b": 80_000}
    assert _form_with_sets(query, counts, 1_000_000, limit=1000) == "per-tag"
    # Without the page's limit, on half the collection (10,000 rows to read), or with a larger page: found first.
    assert _form_with_sets(query, counts, 1_000_000) == "matched"
    assert _form_with_sets(query, counts, 500_000, limit=1000) == "matched"
    assert _form_with_sets(query, counts, 1_000_000, limit=1400) == "matched"
    # The bound: 5,000 rows to read against r on 25,001 rows (5,000 matches) and on 25,005 (5,001).
    assert _form_with_sets(query, {**counts, "r": 25_001}, 1_000_000, limit=1000) == "matched"
    assert _form_with_sets(query, {**counts, "r": 25_005}, 1_000_000, limit=1000) == "per-tag"
    # Two required tags: r on 9 %, s on 10 %, a or b on 80 %: 7,200 matches.  A row of r passes the rest on
    # 8 %, so 1,000 / 0.08 = 12,500 of its rows would be read (not 1,000 / 0.8): found first.
    two = {"r": 90_000, "s": 100_000, "a": 500_000, "b": 300_000}
    assert _form_with_sets("tags=r,s&tags-any=a,b", two, 1_000_000, limit=1000) == "matched"
    assert _form_with_sets("tags=r,s&tags-any=a,b", two, 1_000_000, limit=500) == "per-tag"
    # Not beside a not-tags-any or an excluded tag (probed on each row read).  r on 20,000 with a or b on 40 %
    # over just under half the collection: 5,000 rows to read against 8,000 matches; below half, the matches
    # first come before the plain sets' own rule (SETS_REQUIRED_MAX), which would take it.
    beside = {"r": 20_000, "a": 250_000, "b": 150_000}
    assert _form_with_sets(query, beside, 499_999, limit=1000) == "per-tag"
    assert _form_with_sets(query + "&not-tags-any=c,d", beside, 499_999, limit=1000) == "matched"
    assert _form_with_sets(query + "&not-tags=c", counts, 1_000_000, limit=1000) != "per-tag"
    # Nor on a later page (its rows after the marker are not what these counts say); asked directly, as the
    # matches first come on a later page beside a not-tags-any only.
    simple = (frozenset("r"), frozenset("ab"), frozenset(), frozenset())
    whole = tags_sql._Counts(counts, 1_000_000)
    first = tags_sql._Page(RESOURCES.c.id, None, limit=1000)
    assert tags_sql._fills_from_required(simple, whole, 1_000_000, first)
    assert not tags_sql._fills_from_required(simple, whole, 1_000_000, first._replace(marker="8"))


def test_the_per_tag_form_of_a_page_filling_from_the_required_tag_is_one_plain_exists_per_tag():
    query = parse_tag_query("tags=r&tags-any=a,b")
    counts = {"r": 33_000, "a": 120_000, "b": 80_000}
    sets = TagSets(TAG_SETS, 1_000_000)
    chosen = tag_condition(query, RESOURCES.c.id, TABLES.tags, counts, 1_000_000, limit=1000, sets=sets)
    compiled = chosen.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
    sql_text = " ".join(str(compiled).split())
    # The straightforward SQL: r, then a or b, each an EXISTS on the caller's row; no sets, no grouping, no probing.
    assert sql_text.count("EXISTS (") == 3
    assert all(".tag = '%s'" % tag in sql_text for tag in "rab")
    assert not any(part in sql_text for part in ("tenancy_mw_tag_sets", "GROUP BY", "OFFSET", " IN ("))


def test_over_half_the_collection_the_plain_set_forms_rule_comes_before_the_matches_first():
    # r on SETS_REQUIRED_MAX rows with a or b: 3,750 expected matches; the plain form's rule takes it too.
    counts = {"r": SETS_REQUIRED_MAX, "a": 90_000, "b": 60_000}
    assert _form_with_sets("tags=r&tags-any=a,b", counts, 500_000) == "sets"
    assert _form_with_sets("tags=r&tags-any=a,b", counts, 499_999) == "matched"
    # Where the plain form's rules do not take it (r over SETS_REQUIRED_MAX), found first over the whole collection too.
    assert _form_with_sets("tags=r&tags-any=a,b", {**counts, "r": 30_000}, 1_000_000) == "matched"


def test_a_short_lists_later_page_beside_a_common_required_tag_and_a_not_tags_any_finds_the_matches_first():
    query = "tags=r&tags-any=a,b&not-tags-any=c,d"
    # After the marker: r on 180,000 rows, with a or b: 15,300 expected matches, in place of one EXISTS per tag.
    counts = {"r": 180_000, "a": 50_000, "b": 35_000}
    assert _form_with_sets(query, counts, 62_000, marker="m", resources=None) == "per-tag"
    assert _form_with_sets(query, counts, 62_000, marker="m") == "matched"
    # Where the other rules give the driven form, it stays.
    driven = {"r": 100_000, "a": 30_000, "b": 20_000}
    assert _form_with_sets(query, driven, 62_000, marker="m", resources=None) == "driven"
    assert _form_with_sets(query, driven, 62_000, marker="m") != "matched"
    # A required tag on PROBED_REQUIRED_MAX rows or fewer after the marker: not first (the set index is read whole).
    few_after = {"r": PROBED_REQUIRED_MAX, "a": 200_000, "b": 100_000}
    assert _form_with_sets(query, few_after, 62_000, marker="m", resources=None) == "per-tag"
    assert _form_with_sets(query, few_after, 62_000, marker="m") != "matched"
    assert _form_with_sets(query, {**few_after, "r": PROBED_REQUIRED_MAX + 1}, 62_000, marker="m") == "matched"
    # Over SETS_MATCHES_FIRST_LATER_MAX matches (45,000), not first.
    assert _form_with_sets(query, {**counts, "a": 150_000, "b": 100_000}, 62_000, marker="m") != "matched"
    # A list of GROUPED_MIN_CANDIDATES or more, or no not-tags-any: not this case.
    assert _form_with_sets(query, counts, GROUPED_MIN_CANDIDATES, marker="m") != "matched"
    assert _form_with_sets("tags=r&tags-any=a,b", counts, 62_000, marker="m") != "matched"


def test_a_later_page_is_not_found_first_where_the_marker_cannot_go_inside():
    """A case-insensitive id column (CITEXT): no range inside, so every match would be read; not found first."""
    condition = tag_condition(
        parse_tag_query("tags=r&tags-any=a,b&not-tags-any=c,d"),
        sa.table("servers", sa.column("id", CITEXT())).c.id,
        TABLES.tags,
        {"r": 180_000, "a": 50_000, "b": 35_000},
        62_000,
        marker="m",
        sets=TagSets(TAG_SETS, 1_000_000),
    )
    assert form_of(str(condition.compile(dialect=postgresql.dialect()))) != "matched"


def test_the_matches_first_are_one_materialised_expression_holding_the_marker_inside_and_beside():
    condition = tag_condition(
        parse_tag_query("tags=r&tags-any=a,b&not-tags-any=c,d"),
        RESOURCES.c.id,
        TABLES.tags,
        {"r": 180_000, "a": 50_000, "b": 35_000},
        62_000,
        marker="m",
        sets=TagSets(TAG_SETS, 1_000_000),
    )
    sql_text = " ".join(
        str(condition.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})).split()
    )
    matches = "WITH tenancy_mw_tag_set_matches AS MATERIALIZED (SELECT tenancy_mw_tag_sets_1.resource_id"
    assert "things.id IN (" + matches in sql_text
    inside = sql_text[sql_text.index(matches) : sql_text.index(") SELECT tenancy_mw_tag_set_matches.resource_id")]
    assert "tenancy_mw_tag_sets_1.tags @> ARRAY['r']" in inside
    assert "tenancy_mw_tag_sets_1.resource_id > 'm'" in inside
    assert sql_text.endswith("AND things.id > 'm'")


def test_beside_a_not_tags_any_and_a_common_required_tag_the_tag_sets_serve_but_on_a_short_lists_later_pages():
    query = "tags=r&tags-any=a,b&not-tags-any=c,d"
    # Sparse: r with a or b on 1.25 % of the resources, under SETS_DENSE_MIN_SHARE,
    # and 12,500 expected matches, over SETS_MATCHES_FIRST_MAX (fewer are found first).
    counts = {"r": PROBED_REQUIRED_MAX + 1, "a": 300_000, "b": 200_000}
    assert _form_with_sets(query, counts, 62_000) == "sets"
    # A later page of the short list: not the plain sets (their scan would run past the list's bound);
    # these 12,500 expected matches are found first, 32,000 are not.
    assert _form_with_sets(query, counts, 62_000, marker="m") == "matched"
    more = {"r": 40_000, "a": 600_000, "b": 200_000}
    assert _form_with_sets(query, more, 62_000, marker="m") not in ("sets", "matched")
    assert _form_with_sets(query, counts, GROUPED_MIN_CANDIDATES, marker="m") == "sets"
    # A required tag on PROBED_REQUIRED_MAX rows or fewer (20,000 with a or b on 60 %: 12,000 matches): neither.
    assert _form_with_sets(query, {"r": 20_000, "a": 300_000, "b": 300_000}, 62_000) not in ("sets", "matched")
    assert _form_with_sets("tags=r&tags-any=a,b", counts, 62_000) != "sets"
    # Such a later page still takes the sets by the share rule where its tags keep enough.
    dense = {"r": 500_000, "a": 300_000, "b": 300_000}
    assert _form_with_sets(query, dense, 62_000, marker="m") == "sets"


def test_a_first_page_of_few_candidates_beside_a_not_tags_any_takes_the_tag_sets_where_few_pass_their_index():
    query = "tags=r&tags-any=a,b&not-tags-any=c,d"
    # r on 16 % and a or b on 9 %: 14,400 sets pass the index; per row over fewer than half as many candidates.
    counts = {"r": 160_000, "a": 60_000, "b": 30_000}
    passing = 14_400
    assert passing == 160_000 * 90_000 // 1_000_000
    bound = passing // SETS_BESIDE_NOT_ANY_FACTOR
    assert _form_with_sets(query, counts, bound) == "sets"
    assert _form_with_sets(query, counts, bound - 1) == "per-row"
    # The rule comes before the per-row form, whose counts these are (r on over PER_ROW_REQUIRED_FACTOR times them).
    assert _form_with_sets(query, counts, bound - 1, resources=None) == "per-row"
    assert _form_with_sets(query, counts, bound, resources=None) == "per-row"
    # Tags-any tags counted 0 pass no sets, whatever the candidates (the store counts such tags cautiously).
    rare = {"r": 80_000, "a": 0, "b": 0}
    assert _form_with_sets(query, rare, 250) == "sets"
    assert _form_with_sets(query, rare, 250, resources=None) == "semi-join"
    # Not on a later page, not without a not-tags-any, not beside a rare required tag.
    assert _form_with_sets(query, counts, bound, marker="m") != "sets"
    assert _form_with_sets("tags=r&tags-any=a,b&not-tags=c", counts, bound) != "sets"
    assert _form_with_sets(query, {**counts, "r": PROBED_REQUIRED_MAX}, PER_ROW_CANDIDATES_MAX) != "sets"
    # Not for a count not known: r with a or b would pass 6,030 sets were b at TAG_COUNT_CAP, under 20,000.
    few = {"r": 30_000, "a": 1_000, "b": 1_000}
    assert _form_with_sets(query, few, 10_000) == "sets"
    assert _form_with_sets(query, {"r": 30_000, "a": 1_000}, 10_000) != "sets"
    assert _form_with_sets(query, {**few, "b": TAG_COUNT_CAP}, 10_000) != "sets"
    # No candidates, an empty set table: the other forms, no division by nothing.
    assert _form_with_sets(query, few, 0, resources=0) != "sets"
    assert _form_with_sets(query, few, 0) != "sets"


def test_a_first_page_of_few_candidates_beside_a_not_tags_any_takes_the_tag_sets_where_at_most_a_floor_pass():
    query = "tags=r&tags-any=a,b&not-tags-any=c,d"
    # r on 10 % and a or b on 20,000 rows: 2,000 sets, SETS_BESIDE_NOT_ANY_MIN_MATCHES, over 250 candidates
    # (a factor of SETS_BESIDE_NOT_ANY_FACTOR would allow 500); 20,010 rows: 2,001 sets, not.
    counts = {"r": 100_000, "a": 12_000, "b": 8_000}
    assert SETS_BESIDE_NOT_ANY_MIN_MATCHES == 100_000 * 20_000 // 1_000_000
    assert _form_with_sets(query, counts, 250) == "sets"
    assert _form_with_sets(query, {**counts, "b": 8_010}, 250) != "sets"
    # Without the sets, those 250 candidates are checked per row (a or b on over PER_ROW_ANY_FACTOR times them).
    assert _form_with_sets(query, counts, 250, resources=None) == "per-row"
    # Still a first page only, and beside a common required tag only.
    assert _form_with_sets(query, counts, 250, marker="m") != "sets"
    assert _form_with_sets(query, {**counts, "r": PROBED_REQUIRED_MAX}, 250) != "sets"


def test_a_whole_collections_first_page_of_required_tags_and_a_tags_any_merges_their_rows_in_id_order():
    query = "tags=r&tags-any=a,b"
    # r on 170,000 rows, a or b on 62,000: 10,540 expected matches over a million.  A page of 1,000 spans
    # 1,000 / 10,540 of the ids, so about 22,000 of the three tags' rows are read: at most 5 times the matches.
    counts = {"r": 170_000, "a": 40_000, "b": 22_000}
    assert _form_with_sets(query, counts, 1_000_000, limit=1000) == "merged"
    # The factor's bound: r on R rows beside a or b on 100,000 reads 10,000 + 10**9 / R rows against R / 10
    # matches, so 5 times the matches (R / 2) near R = 55,826.
    bound = {"a": 60_000, "b": 40_000}
    assert _form_with_sets(query, {**bound, "r": 55_850}, 1_000_000, limit=1000) == "merged"
    assert _form_with_sets(query, {**bound, "r": 55_800}, 1_000_000, limit=1000) != "merged"
    # The cap: r on 900,000 beside a or b on 17,000 reads 59,900 rows (5 x the matches: 76,500); on 16,000, 63,600.
    assert _form_with_sets(query, {"r": 900_000, "a": 9_000, "b": 8_000}, 1_000_000, limit=1000) == "merged"
    assert _form_with_sets(query, {"r": 900_000, "a": 8_000, "b": 8_000}, 1_000_000, limit=1000) != "merged"
    # Half the set table's rows as candidates, and one fewer: a tenant's rows would spread the page far.
    assert _form_with_sets(query, counts, 500_000, limit=1000) == "merged"
    assert _form_with_sets(query, counts, 499_999, limit=1000) != "merged"
    # Two required tags: their rows are read too (r and s on 60 %, a or b on 20 %: 72,000 matches).
    two = {"r": 600_000, "s": 600_000, "a": 100_000, "b": 100_000}
    assert _form_with_sets("tags=r,s&tags-any=a,b", two, 1_000_000, limit=1000) == "merged"


def test_rows_are_merged_only_for_a_known_first_page_of_required_tags_and_a_tags_any_alone():
    query = "tags=r&tags-any=a,b"
    counts = {"r": 170_000, "a": 40_000, "b": 22_000}
    assert _form_with_sets(query, counts, 1_000_000) != "merged"
    assert _form_with_sets(query, counts, 1_000_000, limit=1000, marker="8") != "merged"
    assert _form_with_sets(query, counts, 1_000_000, limit=1000, resources=None) != "merged"
    assert _form_with_sets(query + "&not-tags=c", counts, 1_000_000, limit=1000) != "merged"
    assert _form_with_sets(query + "&not-tags-any=c,d", counts, 1_000_000, limit=1000) != "merged"
    assert _form_with_sets("tags-any=a,b", counts, 1_000_000, limit=1000) != "merged"
    # A required tag that reads as rare (0: no matches expected), or one whose count is not known: no span.
    assert _form_with_sets(query, {**counts, "r": 0}, 1_000_000, limit=1000) != "merged"
    assert _form_with_sets(query, {**counts, "r": TAG_COUNT_CAP}, 1_000_000, limit=1000) != "merged"
    # An id column that sorts otherwise than the tag table's: no merge of the two orders.
    simple = (frozenset("r"), frozenset("ab"), frozenset(), frozenset())
    first = tags_sql._Page(RESOURCES.c.id, None, order="default", limit=1000)
    whole = tags_sql._Counts(counts, 1_000_000)
    assert tags_sql._merges(simple, whole, 1_000_000, first)
    assert not tags_sql._merges(simple, whole, 1_000_000, first._replace(order=None))


def test_the_merged_form_reads_each_tags_rows_in_its_own_ordered_subquery():
    query = parse_tag_query("tags=r,s&tags-any=a,b,c")
    counts = {"r": 600_000, "s": 600_000, "a": 100_000, "b": 100_000, "c": 100_000}
    sets = TagSets(TAG_SETS, 1_000_000)
    chosen = tag_condition(query, RESOURCES.c.id, TABLES.tags, counts, 1_000_000, limit=1000, sets=sets)
    compiled = chosen.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
    sql_text = " ".join(str(compiled).split())
    # Five fenced streams, the three tags-any ones merged; no sets, no EXISTS, no grouping.
    assert sql_text.count("OFFSET 0") == 5
    assert sql_text.count("UNION ALL") == 2
    assert all(".tag = '%s'" % tag in sql_text for tag in "rsabc")
    assert not any(part in sql_text for part in ("tenancy_mw_tag_sets", "EXISTS", "GROUP BY"))
    # The other databases keep their own forms.
    for dialect in (mysql.dialect(), sqlite.dialect()):
        assert "UNION ALL" not in str(chosen.compile(dialect=dialect))


#: Counts that make every tag common over a million resources: a first page of a query of required tags and a
#: tags-any alone merges their rows on PostgreSQL (MERGED_MATCHES_FACTOR).
MERGED_COUNTS = dict.fromkeys(POOL, 600_000)


@settings(max_examples=60, suppress_health_check=SHARED_FIXTURE_CHECKS)
@given(resources=resource_sets, query=queries, limit=st.integers(1, 6))
def test_a_first_page_of_merged_rows_is_the_first_rows_that_match(tag_engine, resources, query, limit):
    fill(tag_engine, resources)
    expected = sorted(rid for rid, tags in resources.items() if query.matches(tags))[:limit]
    condition = query.where(
        RESOURCES.c.id, TABLES.tags, MERGED_COUNTS, 1_000_000, limit=limit, sets=TagSets(TAG_SETS, 1_000_000)
    )
    statement = sa.select(RESOURCES.c.id).where(condition).order_by(RESOURCES.c.id).limit(limit)
    simple = query.simplified()
    if tag_engine.dialect.name == "postgresql" and simple and simple[0] and simple[1] and not (simple[2] or simple[3]):
        assert form_of(str(statement.compile(tag_engine))) == "merged"
    with tag_engine.connect() as conn:
        assert list(conn.execute(statement).scalars()) == expected, query
