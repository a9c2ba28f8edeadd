"""The pure tag helpers: validation, the query parser, ``matches()``, and the SQL condition on every backend."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenancy_mw.core import sql
from tenancy_mw.tags.model import (
    GROUPED_ANY_BESIDE,
    GROUPED_ANY_MAX,
    GROUPED_ANY_REQUIRED_MAX,
    GROUPED_ANY_SMALL,
    GROUPED_MIN_CANDIDATES,
    TAG_COUNT_CAP,
    InvalidTag,
    InvalidTagQuery,
    TagQuery,
    TagStatistics,
    count_tags,
    define_tables,
    parse_tag_query,
    tag_statistics,
    validate_tag,
)

# -- validation ---------------------------------------------------------------


@pytest.mark.parametrize(
    "tag",
    [
        "red",
        "Red",
        "red ",
        " x",
        "é" * 30,
        "∑" * 20,
        "a" * 60,
        "100%",
        "a.b",
        "tags",
        "with space",
        "emoji-😀",
        "%",
        "%zz",
    ],
)
def test_valid_tags(tag):
    assert validate_tag(tag) == tag


@pytest.mark.parametrize(
    ("tag", "rule", "fragment"),
    [
        ("", "empty", "empty tag"),
        ("a" * 61, "too-long", "61 bytes"),
        ("é" * 31, "too-long", "62 bytes"),  # 31 characters, but 62 bytes: the spec counts bytes
        ("∑" * 21, "too-long", "63 bytes"),
        ("a/b", "slash", "'/'"),
        ("a,b", "comma", "','"),
        ("a\nb", "control-character", "control character"),
        ("a\x00", "control-character", "control character"),
        ("%2F", "percent-escape", "percent-escape"),
        ("%u0041", "percent-escape", "percent-escape"),
        (".", "dot-segment", "dot segment"),
        ("..", "dot-segment", "dot segment"),
        ("\ud800", "not-unicode", "lone surrogate"),
        (5, "not-a-string", "not a string"),
        (None, "not-a-string", "not a string"),
    ],
)
def test_invalid_tags_name_the_rule(tag, rule, fragment):
    with pytest.raises(InvalidTag) as caught:
        validate_tag(tag)
    assert caught.value.rule == rule
    assert fragment in caught.value.detail


# -- the parser ---------------------------------------------------------------


def test_the_four_parameters_of_the_spec():
    query = parse_tag_query("tags=red,blue&tags-any=green,orange&not-tags=old&not-tags-any=a,b&limit=5")
    assert query.tags == {"red", "blue"}
    assert query.tags_any == {"green", "orange"}
    assert query.not_tags == {"old"}
    assert query.not_tags_any == {"a", "b"}
    assert all(isinstance(field, frozenset) for field in query[:4])


def test_no_tag_parameters_matches_everything():
    for query_string in ("", "limit=10&marker=x", "name=tags"):
        query = parse_tag_query(query_string)
        assert not query
        assert query.matches([])
        assert query.matches(["anything"])


def test_a_repeated_parameter_is_merged():
    # openstacksdk sends a Python list as repeated parameters.
    assert parse_tag_query("tags=a&tags=b,c&tags=a").tags == {"a", "b", "c"}


def test_percent_encoding_and_plus_are_decoded_once():
    query = parse_tag_query("tags=%E2%88%91,a+b,%25zz")
    assert query.tags == {"∑", "a b", "%zz"}


def test_an_encoded_parameter_name_is_read_too():
    assert parse_tag_query("%74ags=red").tags == {"red"}


def test_tags_are_case_sensitive():
    query = parse_tag_query("tags=Red")
    assert query.matches(["Red"])
    assert not query.matches(["red"])


@pytest.mark.parametrize(
    ("query_string", "rule", "fragments"),
    [
        ("tags=", "empty", ["empty tag", "tags"]),
        ("tags-any=a,,b", "empty", ["empty tag", "tags-any"]),
        ("not-tags=a,", "empty", ["not-tags"]),
        ("tags=" + "x" * 61, "too-long", ["61 bytes", "tags"]),
        ("not-tags-any=a%2Fb", "slash", ["'a/b'", "not-tags-any"]),
        ("tags=a%0Ab", "control-character", ["tags"]),
        ("tags=%252F", "percent-escape", ["'%2F'"]),
        ("tags=%FF", "invalid-utf8", ["not valid UTF-8", "tags"]),
    ],
)
def test_bad_parameters_name_the_tag_parameter_and_rule(query_string, rule, fragments):
    with pytest.raises(InvalidTagQuery) as caught:
        parse_tag_query(query_string)
    assert caught.value.rule == rule
    for fragment in fragments:
        assert fragment in caught.value.detail


def test_a_wsgi_query_string_with_raw_utf8_bytes():
    # PEP 3333: a server may hand raw bytes as latin-1 text.
    raw = "tags=∑".encode().decode("latin-1")
    assert parse_tag_query(raw).tags == {"∑"}


def test_too_many_tags_in_one_query():
    names = ",".join("t%d" % n for n in range(51))
    with pytest.raises(InvalidTagQuery) as caught:
        parse_tag_query("tags=" + names)
    assert caught.value.rule == "too-many-tags"
    assert parse_tag_query("tags=" + names, max_tags=None).tags


def test_a_mapping_as_input():
    query = parse_tag_query({"tags": "a,b", "not-tags": ["c", "d,e"], "other": "x"})
    assert query.tags == {"a", "b"}
    assert query.not_tags == {"c", "d", "e"}


def test_unknown_semantics_is_refused():
    with pytest.raises(ValueError, match="not_tags_semantics"):
        parse_tag_query("tags=a", "neutron")


# -- matches(): the spec's sentences ---------------------------------------


def matching(query_string, semantics="guideline"):
    query = parse_tag_query(query_string, semantics)
    resources = {"none": set(), "red": {"red"}, "blue": {"blue"}, "both": {"red", "blue"}, "green": {"green"}}
    return sorted(name for name, tags in resources.items() if query.matches(tags))


def test_matches_follows_the_guideline():
    assert matching("tags=red,blue") == ["both"]
    assert matching("tags-any=red,blue") == ["blue", "both", "red"]
    # "do not have the red nor the blue tag"
    assert matching("not-tags=red,blue") == ["green", "none"]
    # "do not have the red tag, or do not have the blue tag"
    assert matching("not-tags-any=red,blue") == ["blue", "green", "none", "red"]


def test_nova_semantics_swap_the_not_parameters():
    assert matching("not-tags=red,blue", "nova") == ["blue", "green", "none", "red"]
    assert matching("not-tags-any=red,blue", "nova") == ["green", "none"]
    query = parse_tag_query("not-tags=red,blue", "nova")
    # The fields still hold what each parameter held.
    assert query.not_tags == {"red", "blue"}
    assert not query.not_tags_any


def test_a_contradictory_query_is_valid_and_matches_nothing():
    assert matching("tags=blue&not-tags=blue") == []
    assert matching("tags=red,blue&not-tags-any=red,blue") == []


# -- pure ------------------------------------------------------------------
# tenancy_mw.tags.model and tenancy_mw.tags.store import no WSGI machinery: checked
# with the other pure helpers in tests/unit/test_hot_path.py.


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


def sql_result(engine, query: TagQuery, limit: int | None = None, counts=None) -> list[str]:
    statement = sa.select(RESOURCES.c.id).order_by(RESOURCES.c.id)
    if limit is not None:
        statement = statement.limit(limit)
    # With counts, a page said to walk a large collection: the counts then
    # choose PostgreSQL's form of tags-any (TagQuery.where).
    candidates = None if counts is None else GROUPED_MIN_CANDIDATES
    with engine.connect() as conn:
        return list(conn.execute(query.apply(statement, RESOURCES.c.id, TABLES.tags, counts, candidates)).scalars())


# Counts that make every tag rare: on PostgreSQL, tags-any takes its grouped
# form; None leaves the semi-join.  Both must find the same rows.
ALL_RARE = dict.fromkeys(POOL, 0)


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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(resources=resource_sets, query_list=st.lists(queries, min_size=1, max_size=6))
def test_sql_returns_exactly_what_matches_accepts(tag_engine, resources, query_list):
    fill(tag_engine, resources)
    for query in query_list:
        expected = sorted(rid for rid, tags in resources.items() if query.matches(tags))
        assert sql_result(tag_engine, query) == expected, query
        assert sql_result(tag_engine, query, counts=ALL_RARE) == expected, query
        with tag_engine.connect() as conn:
            counted = count_tags(conn, query.tags_to_count(), TABLES.tags)
        assert sql_result(tag_engine, query, counts=counted) == expected, (query, counted)


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


def _pg_sql(query_string: str, counts, candidates=GROUPED_MIN_CANDIDATES) -> str:
    from sqlalchemy.dialects import postgresql

    query = parse_tag_query(query_string)
    return str(query.where(RESOURCES.c.id, TABLES.tags, counts, candidates).compile(dialect=postgresql.dialect()))


def _grouped(query_string: str, counts, candidates=GROUPED_MIN_CANDIDATES) -> bool:
    return "GROUP BY" in _pg_sql(query_string, counts, candidates)


def test_postgresql_sorts_tags_any_whole_only_when_the_counts_say_it_is_small():
    small = GROUPED_ANY_SMALL // 2
    # Alone: grouped up to GROUPED_ANY_SMALL rows together, a semi-join beyond.
    assert _grouped("tags-any=x,y", {"x": small, "y": small})
    assert not _grouped("tags-any=x,y", {"x": small, "y": small + 1})
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
    # A rare required tag drives the semi-join better whatever the set.
    assert not _grouped("tags=r&tags-any=x,y", {"r": 770, "x": 10_000, "y": 10_000})
    assert not _grouped("tags=r,s&tags-any=x,y", {"r": TAG_COUNT_CAP, "s": 999, "x": 1_000, "y": 1_000})
    # No counts, or a tag without one: common, the semi-join.
    assert not _grouped("tags-any=x,y", None)
    assert not _grouped("tags-any=x,y", {"x": 1})
    # A tags-any met by a required tag is gone before any choice.
    assert not _grouped("tags=x&tags-any=x,y", {"x": 1, "y": 1})


def test_few_candidates_keep_the_semi_join_whatever_the_counts():
    """A tenant's own list: the semi-join probes its few ids; the grouped form would read the whole tag set."""
    assert not _grouped("tags-any=x,y", ALL_RARE | {"x": 1, "y": 1}, candidates=None)
    assert not _grouped("tags-any=x,y", {"x": 1, "y": 1}, candidates=GROUPED_MIN_CANDIDATES - 1)
    assert _grouped("tags-any=x,y", {"x": 1, "y": 1}, candidates=GROUPED_MIN_CANDIDATES)


@pytest.mark.parametrize("bad", [-1, 1.5, "12", None, True], ids=["negative", "float", "text", "none", "bool"])
def test_a_count_that_is_not_a_number_of_resources_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"counts\['x'\]"):
        _pg_sql("tags-any=x,y", {"x": bad, "y": 1})


@pytest.mark.parametrize("bad", [-1, 1.5, "1000000", True], ids=["negative", "float", "text", "bool"])
def test_candidates_that_are_not_a_number_of_rows_are_refused(bad):
    with pytest.raises(ValueError, match="candidates"):
        parse_tag_query("tags-any=x,y").where(RESOURCES.c.id, TABLES.tags, None, bad)


def test_only_postgresql_sql_depends_on_the_counts():
    from sqlalchemy.dialects import mysql, sqlite

    query = parse_tag_query("tags=r&tags-any=x,y&not-tags-any=a,b,c")
    counts = {"r": 9, "x": 1, "y": 1}
    for dialect in (sqlite.dialect(), mysql.dialect(), mysql.dialect(is_mariadb=True)):
        with_counts = query.where(RESOURCES.c.id, TABLES.tags, counts, GROUPED_MIN_CANDIDATES)
        assert str(with_counts.compile(dialect=dialect)) == str(
            query.where(RESOURCES.c.id, TABLES.tags).compile(dialect=dialect)
        ), dialect.name


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


def test_a_multidict_as_input_merges_repeated_parameters():
    """webob's ``req.GET`` holds a repeated parameter once per value: all of them count, not the last."""
    from webob.multidict import MultiDict

    query = parse_tag_query(MultiDict([("tags", "a"), ("tags", "b,c"), ("not-tags", "x")]))
    assert query.tags == {"a", "b", "c"}
    assert query.not_tags == {"x"}


@pytest.mark.parametrize("value", [None, 3, b"red"], ids=["none", "int", "bytes"])
def test_a_mapping_value_that_is_not_text_is_refused_with_the_parameter(value):
    with pytest.raises(InvalidTagQuery) as caught:
        parse_tag_query({"tags-any": value})
    assert caught.value.rule == "not-a-string"
    assert caught.value.parameter == "tags-any"


def test_matches_refuses_a_bare_string():
    """``matches("red")`` would test the tags r, e and d."""
    with pytest.raises(TypeError, match="not a string"):
        parse_tag_query("tags=r,e,d").matches("red")
