"""Tags in SQL: the tag tables, the SQL condition of a tag query, tag counts and statistics.

SQLAlchemy Core, no WSGI machinery; it needs the ``sql`` extra.  The query
model it compiles (:class:`~tenancy_mw.tags.model.TagQuery`, parsed by
:func:`~tenancy_mw.tags.model.parse_tag_query`) is in
:mod:`tenancy_mw.tags.model`, which imports no SQLAlchemy; its
:meth:`~tenancy_mw.tags.model.TagQuery.where` and
:meth:`~tenancy_mw.tags.model.TagQuery.apply` are :func:`tag_condition`.

Example::

    >>> from tenancy_mw.tags.model import parse_tag_query
    >>> servers = sa.table("servers", sa.column("id"))
    >>> condition = tag_condition(parse_tag_query("tags=red"), servers.c.id)
    >>> sql_text = sa.select(servers.c.id).where(condition).compile(compile_kwargs={"literal_binds": True})
    >>> print(" ".join(str(sql_text).split()))  # doctest: +NORMALIZE_WHITESPACE
    SELECT servers.id FROM servers WHERE EXISTS (SELECT * FROM tenancy_mw_tags AS tenancy_mw_tags_1
    WHERE tenancy_mw_tags_1.resource_id = servers.id AND tenancy_mw_tags_1.tag = 'red')

Every condition is an ``EXISTS``, ``NOT EXISTS`` or scalar count subquery
over its own alias of the tag table, correlated to the caller's resource id
column, never a join: a resource is one row of the result however many tags
match, so ``LIMIT`` and pagination count resources.  Nothing is added to the
caller's query; use the condition in ``.where()`` (which returns a new
statement), or :meth:`~tenancy_mw.tags.model.TagQuery.apply`.

The formulation, after :meth:`~tenancy_mw.tags.model.TagQuery.simplified`
(a contradiction is ``false`` without a subquery), measured against one
``EXISTS`` per tag on every page of a million resources in ``bench/tags.py``
(``doc/tags.rst``, "Which SQL, and who decides", has the table of forms):

- each required tag: its own ``EXISTS``; each excluded tag its own ``NOT
  EXISTS``;
- ``not_all_of``: ``(SELECT count(*) ... tag IN (...)) < n`` on PostgreSQL
  from three tags, else an ``OR`` of ``NOT EXISTS`` (on PostgreSQL over
  fewer than :data:`GROUPED_MIN_CANDIDATES` known *candidates* beside a
  ``tags-any``, each with ``OFFSET 0``: probed per row, never a tag's rows
  hashed whole);
- ``any_of``: one ``EXISTS (... tag IN (...))`` by default; on MySQL/MariaDB
  one ``EXISTS`` per tag beside an excluded tag, beside a required tag
  without *counts*, and where *counts* put it on more than
  :data:`MYSQL_SEMI_JOIN_MAX` rows; on PostgreSQL, given
  *candidates* (at least :data:`GROUPED_MIN_CANDIDATES`) and *counts*,
  driven from the tag table beside a rare-ish required tag
  (:data:`DRIVEN_REQUIRED_MAX`) when the rows it reads are few beside the
  candidates (:data:`DRIVEN_MAX_SHARE`, :data:`DRIVEN_BESIDE_RARE_MAX_SHARE`;
  on a later page whose size is known, also when they are few beside the
  candidates the other forms read before the page is full,
  :data:`DRIVEN_AFTER_MARKER_FACTOR`), grouped when its tags are on few
  rows (:data:`GROUPED_ANY_MAX`), one ``EXISTS`` per tag without a required
  tag at middling sizes (:data:`PROBED_ANY_ALONE_MAX`; beside a
  ``not-tags-any``, :data:`PROBED_BESIDE_NOT_ANY_MAX`) and beside a rare
  required tag (:data:`PROBED_REQUIRED_MAX`); over fewer
  candidates, without a required tag, grouped on a later page whose
  marker's range goes inside when its tags' rows after the marker are few
  beside the candidates (over more than :data:`PER_ROW_CANDIDATES_MAX`,
  :data:`GROUPED_AFTER_MARKER_MAX_SHARE`), else
  one ``EXISTS`` per tag for a middling set alone that they
  outnumber, for a set beside a ``not-tags-any`` on at most
  :data:`PROBED_BESIDE_NOT_ANY_MAX` rows (over middling candidates, on a
  page whose marker's range stays out of the subqueries,
  :data:`PROBED_BESIDE_NOT_ANY_MIDDLING_MAX`), or beside a required tag rarer
  than the set and than them; beside a ``not-tags-any`` and a required tag
  over more than :data:`PER_ROW_CANDIDATES_MAX`, driven where that tag is
  on a middling number of rows, the set on at most :data:`GROUPED_ANY_MAX`
  and the two on at most :data:`DRIVEN_BESIDE_NOT_ANY_FACTOR` times the
  candidates, else one ``EXISTS`` per tag (on a page whose marker's range
  goes inside the subqueries, by the rows after it, and driven beside a
  rare required tag unless the set is larger by
  :data:`PROBED_AFTER_MARKER_ANY_FACTOR`);
- the whole query, on PostgreSQL given *counts* and at most
  :data:`PER_ROW_CANDIDATES_MAX` candidates, where the ``tags-any`` is on
  at least :data:`PER_ROW_ANY_FACTOR` times the candidates' rows
  (:data:`PER_ROW_ANY_ALONE_FACTOR` alone) and the
  rarest required tag on :data:`PER_ROW_REQUIRED_FACTOR` times: **per
  row**, each ``EXISTS`` above with ``OFFSET 0``, which PostgreSQL probes
  once per candidate rather than join (it would read the large sets whole
  first), and no marker range inside any (a ``not-tags-any`` of three tags
  or more stays a count, which it runs per row anyway);
- the whole query, on PostgreSQL given *counts*, *candidates* and *sets*
  (the tag set table where it is kept in step, :mod:`tenancy_mw.tags.sets`),
  for a ``tags-any`` over at least :data:`GROUPED_MIN_CANDIDATES` beside a
  required tag on at most :data:`SETS_REQUIRED_MAX` rows, or over more than
  :data:`PER_ROW_CANDIDATES_MAX` where its tags keep a large share of them
  (:data:`SETS_DENSE_MIN_SHARE`, :data:`SETS_DENSE_MIN_MATCHES`), or beside
  a ``not-tags-any`` and a required tag on more than
  :data:`PROBED_REQUIRED_MAX` rows, over more than ``PER_ROW_CANDIDATES_MAX``
  (not on a later page of fewer than ``GROUPED_MIN_CANDIDATES``) and on a
  first page over fewer, where the counts are known and the sets expected
  to pass the set index are at most :data:`SETS_BESIDE_NOT_ANY_FACTOR`
  times the candidates or :data:`SETS_BESIDE_NOT_ANY_MIN_MATCHES` (there
  before the per-row form): **one test
  of each resource's set**, ``resource_id IN (SELECT ... FROM
  tenancy_mw_tag_sets WHERE tags @> ... AND tags && ...)``, a marker's
  range inside and beside it; **its matches first** (the same subquery
  in a ``MATERIALIZED`` common table expression, which PostgreSQL reads
  whole from the set index before it looks each match up among the
  candidates) where few sets pass: beside a required tag with a count,
  over more than ``PER_ROW_CANDIDATES_MAX`` candidates, on a first page
  where the required and ``tags-any`` tags are expected together on at
  most :data:`SETS_MATCHES_FIRST_MAX` resources (but one ``EXISTS`` per
  tag where, given the page's *limit* and neither an excluded tag nor a
  ``not-tags-any``, it fills the page from fewer of the required tag's
  rows than the sets expected to match), and on a later page of
  fewer than ``GROUPED_MIN_CANDIDATES`` beside a ``not-tags-any`` and a
  required tag on more than ``PROBED_REQUIRED_MAX`` rows after the
  marker (its range inside), in place of one ``EXISTS`` per tag, on at
  most :data:`SETS_MATCHES_FIRST_LATER_MAX` (this rule before the others
  of the sets, but over half the set table's rows or more, where those
  take the query);
- the required tags and ``tags-any``, on PostgreSQL given *counts*,
  *candidates* of at least half the set table's rows, *sets* and the
  page's *limit*, on a first page of a query with nothing else, where the
  tags' rows read until the page fills are few beside the matches
  (:data:`MERGED_MATCHES_FACTOR`, :data:`MERGED_ROWS_MAX`): **merged in id
  order**, each tag's rows an ordered subquery of its own behind ``OFFSET
  0``, the ``tags-any`` ones in a ``UNION ALL``, the required ones
  semi-joined to it (before every other rule; the page ordered by the id,
  ascending, as a marker's is);
- a *marker*: ``resource_id > marker``, last (on PostgreSQL left out where
  ``any_of`` is a driven or grouped ``IN``, which holds it), and the same
  range inside the subqueries the database joins (not those it probes per
  row under an ``OR``; on MySQL/MariaDB only when no tag is excluded): the
  database reads the tag index from the marker on rather than from the
  first id.  Inside only where the caller's id column's type says it sorts
  as the tag table's (an ``ExactString``; on PostgreSQL and SQLite a string
  type naming no collation, nor in a ``with_variant``, and not ``CITEXT``);
  elsewhere ``resource_id > marker`` alone holds the page.

These names were :mod:`tenancy_mw.tags.model`'s (and, before 0.2.0, the
module ``tenancy_mw.tags``'s); taken from there they still work for one
release, with a :class:`DeprecationWarning` naming this module.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from tenancy_mw.core.sql import (
    ColumnElement,
    ExactString,
    InternalTraversal,
    compiles,
    is_mysql,
    postgresql,
    sa,
    table_options,
)
from tenancy_mw.tags.model import MAX_RESOURCE_ID_LENGTH, MAX_TAG_BYTES, TagQuery
from tenancy_mw.tags.sets import TAG_SETS_DDL, TAG_SETS_DROP, TagSets, in_tag_sets

__all__ = [
    "GROUPED_ANY_BESIDE",
    "GROUPED_ANY_MAX",
    "GROUPED_ANY_REQUIRED_MAX",
    "GROUPED_AFTER_MARKER_MAX_SHARE",
    "GROUPED_ANY_SMALL",
    "GROUPED_MIN_CANDIDATES",
    "DRIVEN_BESIDE_NOT_ANY_FACTOR",
    "DRIVEN_AFTER_MARKER_ANY_FACTOR",
    "DRIVEN_AFTER_MARKER_FACTOR",
    "DRIVEN_BESIDE_RARE_MAX_SHARE",
    "DRIVEN_MAX_SHARE",
    "DRIVEN_REQUIRED_MAX",
    "MERGED_MATCHES_FACTOR",
    "MERGED_ROWS_MAX",
    "MYSQL_SEMI_JOIN_MAX",
    "PER_ROW_ANY_ALONE_FACTOR",
    "PER_ROW_ANY_FACTOR",
    "PER_ROW_CANDIDATES_MAX",
    "PER_ROW_REQUIRED_FACTOR",
    "PROBED_AFTER_MARKER_ANY_FACTOR",
    "PROBED_ANY_ALONE_MAX",
    "PROBED_BESIDE_NOT_ANY_MAX",
    "PROBED_BESIDE_NOT_ANY_MIDDLING_MAX",
    "PROBED_REQUIRED_MAX",
    "SETS_BESIDE_NOT_ANY_FACTOR",
    "SETS_BESIDE_NOT_ANY_MIN_MATCHES",
    "SETS_DENSE_MIN_MATCHES",
    "SETS_DENSE_MIN_SHARE",
    "SETS_MATCHES_FIRST_LATER_MAX",
    "SETS_MATCHES_FIRST_MAX",
    "SETS_REQUIRED_MAX",
    "TAGS",
    "TAG_COUNT_CAP",
    "TAG_LOCKS",
    "TagStatistics",
    "TagTables",
    "check_page",
    "count_tags",
    "define_tables",
    "tag_condition",
    "tag_statistics",
]

#: On PostgreSQL, given tag counts and at least :data:`GROUPED_MIN_CANDIDATES`
#: candidate rows, ``tags-any`` is one grouped ``IN`` (its resource ids
#: sorted once) rather than a semi-join when its tags are on at most
#: :data:`GROUPED_ANY_SMALL` rows together; next to required tags (the
#: rarest on at least half as many rows), at most :data:`GROUPED_ANY_BESIDE`;
#: or at most this many and fewer than the rarest required tag's, itself on
#: at most :data:`GROUPED_ANY_REQUIRED_MAX` (:func:`tag_condition`).  The
#: numbers come from ``bench/tags.py --sweep`` and its table; the times in
#: these comments are from the run each rule was set by, some on earlier
#: machines (``bench/README.rst`` has the latest run).
GROUPED_ANY_MAX = 100_000
#: See :data:`GROUPED_ANY_MAX`.  Alone, over a million candidates, one
#: sweep (``bench/tags.py --sweep``) had the grouped form faster than one
#: ``EXISTS`` per tag at 21,000 rows (24 against 27 ms) and slower at
#: 31,000 (27 against 22), another had it slower at both; in two runs of
#: the table, ``tags-any 44k`` after marker ``4`` (29,000 rows after it)
#: took 24 ms grouped against 18 per tag when this was 30,000.
GROUPED_ANY_SMALL = 25_000
#: See :data:`GROUPED_ANY_MAX`.
GROUPED_ANY_BESIDE = 45_000
#: See :data:`GROUPED_ANY_MAX`.
GROUPED_ANY_REQUIRED_MAX = 200_000
#: On PostgreSQL, given counts and :data:`GROUPED_MIN_CANDIDATES` candidates
#: or more, ``tags-any`` beside a required tag on at most
#: this many rows is one subquery of the tag table with the required tags
#: (``id IN (SELECT ... GROUP BY ...)``): the database finds the matching ids inside
#: the tag table's indexes, from whichever of its sets is smaller, before it
#: reads a row of the caller's table (``tags=tag0100&tags-any=tag0030,tag0040``:
#: 10 ms against 47 ms for one ``EXISTS`` per tag).  Over fewer candidates,
#: beside a ``not-tags-any``: :data:`DRIVEN_BESIDE_NOT_ANY_FACTOR`.
DRIVEN_REQUIRED_MAX = 75_000
#: On PostgreSQL the driven form reads its tags' rows whole whatever the
#: page, and the other forms a share of them in proportion to the
#: candidates; so over :data:`GROUPED_MIN_CANDIDATES` or more it is taken
#: only when the rarest required tag's rows and the ``tags-any`` set's
#: together are at most this share of the candidates (over fewer, beside a
#: ``not-tags-any``: :data:`DRIVEN_BESIDE_NOT_ANY_FACTOR`)
#: (``bench/tags.py --sweep`` on an earlier machine:
#: ``tags=tag0100&tags-any=tag0008,tag0012``, 150,000 rows, over ~250,000
#: candidates driven 89 ms against 29 ms for the semi-join, over a million
#: 79 against 86; ``tags=tag0020`` beside
#: sets of 172,000 and 225,000 rows over a million, driven 186 and 144 ms
#: against 103 and 108 for the semi-join).
DRIVEN_MAX_SHARE = 0.2
#: :data:`DRIVEN_MAX_SHARE` beside a required tag on at most
#: :data:`PROBED_REQUIRED_MAX` rows, which adds few rows of its own to read
#: (``bench/tags.py --sweep``, "beside a rare required tag", over a million
#: candidates: ``tags=tag0050`` and ``tag0040`` beside
#: ``tags-any=tag0006,tag0009``, 189,000 rows, driven 40 ms against 53 and
#: 51 ms for one ``EXISTS`` per tag).  Not more: over ~750,000 candidates,
#: timed apart from the bench, the driven form was 5 to 14 % slower than one
#: ``EXISTS`` per tag at 0.30 to 0.32 (``tag0050`` and ``tag0030`` beside
#: 219,000 rows), though the sweeps' pages of ~500,000 had it faster (in 8
#: of 12 rows at 0.30 to 0.48 of the candidates in one, in 10 of 15 in the
#: next: ``bench/README.rst``).
DRIVEN_BESIDE_RARE_MAX_SHARE = 0.25
#: On PostgreSQL, a later page over :data:`GROUPED_MIN_CANDIDATES` or more
#: candidates whose marker's range goes inside the tag subqueries and whose
#: size (``limit``) is known: beside a required tag on at most
#: :data:`DRIVEN_REQUIRED_MAX` rows after the marker, with the ``tags-any``
#: set on at most :data:`DRIVEN_AFTER_MARKER_ANY_FACTOR` times its rows there,
#: the driven form is also taken where that tag's rows and the set's after
#: the marker are at most this many times the candidates the other forms
#: read before the page is full: the limit over the share of candidates
#: that pass (the required tag's rows over the candidates, times the set's
#: rows over them, at most 1: as if the tags fell independently, the set's
#: rows an upper bound of the resources carrying one of it), or all of them
#: if fewer than the limit pass.  The driven form reads the tag rows after
#: the marker, fewer on each later page; the others read candidates until
#: the page is full, about as many on every page, where the share rule of
#: :data:`DRIVEN_MAX_SHARE` (the rows against all the candidates after the
#: marker) gives every page of a collection the first page's form.  Only on
#: later pages: over whole collections the sweeps had first pages where the
#: rule would drive and the driven form lost (``tags=tag0020`` beside
#: 172,000 rows over a million, 1.3 by this rule: 186 ms against 103 on an
#: earlier machine).  Timed on ``bench/tags.py``'s data (27 November 2026,
#: 11 runs each; the ratios by this load's statistics, ``tag0004`` 162,333
#: rows, ``tag0010`` and ``tag0030`` 87,500, scaled to the share of the
#: marker): ``combined`` after ``c``, 0.9, driven 21.9 ms against 41.0
#: grouped (the rule's page); after ``8``, 1.8, 30.9 against 35.0, and after
#: ``4``, 2.7, 35.4 against 34.4 (neither taken: ``tag0004`` is on 81,000
#: and 122,000 rows after them, over ``DRIVEN_REQUIRED_MAX``; so the factor's
#: upper side rests on pages the rule does not take); the whole collection,
#: 3.6, 48.0 against 39.4; ``tags=tag0020&tags-any=tag0005,tag0008`` after
#: ``8``, 0.9, 20.5 against 27.8 for one ``EXISTS`` per tag.  Beside a
#: required tag on at most :data:`PROBED_REQUIRED_MAX` rows one ``EXISTS``
#: per tag drives from that tag's rows instead; there the rule rests on
#: the timings (``tag0030`` to ``tag0040`` beside ``tag0005,tag0008`` after
#: ``c``, 10.8 to 12.4 ms driven against 25.4 to 31.5), not on the reasoning.
DRIVEN_AFTER_MARKER_FACTOR = 2
#: See :data:`DRIVEN_AFTER_MARKER_FACTOR`: the rule is taken only as far as
#: it was timed.  A required tag counted 0 (outside the statistics' most
#: common tags, and rare by their bound) has rows the rule cannot weigh,
#: and no page was timed under it with the set on more than 25 times the
#: required tag's rows (this load's sets reach 25.5 times ``tag0100``'s,
#: whose pages the share rule drives: ``tags=tag0100&tags-any=tag0005,tag0008``
#: after marker ``8``, 16.5 ms against 22.6 for one ``EXISTS`` per tag).
#: Where the share rule drives beside such rarer tags, the driven form was
#: faster still (``tag0200`` and ``tag0400``, counted 0, beside
#: ``tag0005,tag0008`` after ``8``: 4.7 ms against 10.4, 2.2 against 5.8;
#: 27 November 2026, 11 runs), so the bound is cautious, not a crossing.
DRIVEN_AFTER_MARKER_ANY_FACTOR = 25
#: On PostgreSQL, given counts and more than :data:`PER_ROW_CANDIDATES_MAX`
#: candidates but fewer than :data:`GROUPED_MIN_CANDIDATES`, ``tags-any``
#: beside a ``not-tags-any`` and a required tag on more than
#: :data:`PROBED_REQUIRED_MAX` rows and at most
#: :data:`GROUPED_ANY_REQUIRED_MAX`, with a set on at most
#: :data:`GROUPED_ANY_MAX`, is driven when that tag's rows and the set's are
#: at most this many times the candidates, and otherwise (beside any
#: required tag) one ``EXISTS`` per tag, never the semi-join (after a
#: marker whose range goes inside the tag subqueries, by the rows after
#: it: :data:`PROBED_AFTER_MARKER_ANY_FACTOR`): PostgreSQL
#: checks the ``not-tags-any`` on every candidate before a semi-join's set
#: narrows them, where the driven form finds the few ids from the tag table
#: first and one ``EXISTS`` per tag checks the hashed tags first.  Timed
#: beside ``not-tags-any=tag0001,tag0003`` and ``tag0001,tag0006`` over
#: ~23,000, ~62,000 and ~94,000 candidates (``bench/tags.py``'s data, 5 runs
#: each, 27 November 2026, on a machine about half as fast as the one of
#: the times above, the ``not-tags-any`` probed per row in the forms the
#: store picks): driven up to 2.3 times the candidates, within 10 % of the
#: straightforward SQL (one ``EXISTS`` per tag) or faster
#: (``tags=tag0020&tags-any=tag0100,tag0200`` over ~62,000, 0.8 times: 33
#: ms against 83 for the straightforward SQL and 35 for the semi-join);
#: from 2.8 to 3.0 times either may win by far
#: (``tags=tag0004&tags-any=tag0010,tag0030`` over ~94,000, 2.9 times:
#: driven 134 against 209; ``tags=tag0004&tags-any=tag0100,tag0200`` over
#: ~62,000, 3.0 times: 71 against 40).  Of the 75 pages, the semi-join was
#: faster than both in one, by 4 % (a set of 188,000 rows beside
#: ``tag0004`` over ~23,000), and up to 29 times slower (tags outside the
#: common ones beside ``tag0100``; the same SQL in 3, where the
#: ``tags-any`` holds the required tag).  Beside a ``not-tags`` without a
#: ``not-tags-any`` (an anti-join, which PostgreSQL runs after the others)
#: the driven form was slower than the form taken in 33 of 40 such pages,
#: and nothing changes there.
DRIVEN_BESIDE_NOT_ANY_FACTOR = 2.5
#: On PostgreSQL, the rule of :data:`DRIVEN_BESIDE_NOT_ANY_FACTOR` on a later
#: page whose marker's range goes inside the tag subqueries (a filtered
#: list's next page), read with the rows after the marker (``TagStore``
#: scales the counts to the planner's share of tag rows after it): where the
#: rarest required tag is on at most :data:`PROBED_REQUIRED_MAX` rows there,
#: driven, unless the ``tags-any`` set is on at least this many times its
#: rows (one ``EXISTS`` per tag, which drives from that tag and probes the
#: set); the driven form finds the few ids from the tag rows after the
#: marker first.  Timed on 122 such pages, apart from the bench's runs
#: (``bench/tags.py``'s data, 5 or 7 runs each, 27 November 2026; ~27,000,
#: ~58,000, ~62,000 and ~88,000 candidates, 0.06 to 0.996 of the tag rows
#: after the marker; doc/tags.rst): the store's pick was more than 5 %
#: above the straightforward SQL on 32 of them before this rule (mostly the
#: semi-join; up to 3.0 times: ``tags=tag0002&tags-any=tag0100,tag0200``
#: over ~27,000 after ``2``, 55.1 ms against 18.3), on 6 with it (up to
#: 1.16 times).  Where the required tag is that rare, the set beside it on
#: 6 or more times its rows took one ``EXISTS`` per tag
#: (``tags=tag0100&tags-any=tag0005,tag0008`` after ``c``: 5.0 ms against
#: 12.5 driven), on 1.1 times or fewer the driven form
#: (``tags=tag0004&tags-any=tag0100,tag0200`` after ``f``: 3.7 ms against
#: 55 per tag); no page had a ratio between, so 3 lies between the two,
#: not on a measured crossing.
PROBED_AFTER_MARKER_ANY_FACTOR = 3
#: On PostgreSQL, given counts, ``tags-any`` alone on more than
#: :data:`GROUPED_ANY_SMALL` rows and at most this many is one ``EXISTS`` per
#: tag under an ``OR``: PostgreSQL hashes each tag's ids once and scans the
#: ids in order (``tags-any=tag0030,tag0040``, 44,000 rows: 17 ms against
#: 38 ms for the semi-join and 26 ms grouped).
PROBED_ANY_ALONE_MAX = 60_000
#: On PostgreSQL, given counts and candidates, ``tags-any`` without required
#: tags beside a ``not-tags-any`` is one ``EXISTS`` per tag when its tags are
#: on at most this many rows together (over :data:`GROUPED_MIN_CANDIDATES`
#: candidates or more, on more than :data:`GROUPED_ANY_SMALL`, where the
#: grouped form wins).  PostgreSQL checks a ``not-tags-any`` (an ``OR`` of
#: ``NOT EXISTS``, or a count) as a filter on every candidate before it
#: joins them to a semi-join's set; beside one ``EXISTS`` per tag, whose
#: hashed sets it checks first, only on the rows they let through
#: (``bench/tags.py --sweep``, "beside a not-tags-any", where the store
#: picked this before the per-row form, which now takes the ~4,000 page
#: (:data:`PER_ROW_CANDIDATES_MAX`): a ``tags-any`` of 91,000 rows beside
#: ``not-tags-any=tag0001,tag0003``, one ``EXISTS`` per tag 27 ms against
#: 31 ms for the semi-join over ~4,000 candidates, 39 against 111 over
#: ~62,000, 49 against 133 over ~250,000; of 146,000 rows the semi-join
#: won over ~4,000 and ~250,000 candidates and tied over ~62,000: 55
#: against 59 ms, 90 against 86, 32 against 63; over middling candidates
#: later sweeps had one ``EXISTS`` per tag win there:
#: :data:`PROBED_BESIDE_NOT_ANY_MIDDLING_MAX`).
PROBED_BESIDE_NOT_ANY_MAX = 100_000
#: :data:`PROBED_BESIDE_NOT_ANY_MAX` over :func:`_middling` candidates (more
#: than :data:`PER_ROW_CANDIDATES_MAX`, fewer than
#: :data:`GROUPED_MIN_CANDIDATES`) on a page whose marker's range does not
#: go inside the tag subqueries (a first page, a filtered list): there the
#: semi-join checks the ``not-tags-any`` on nearly every candidate before
#: its set narrows them.  ``bench/tags.py --sweep``, "beside a
#: not-tags-any", over ~62,000 candidates, ``tags-any=tag0008,tag0012``
#: (140,000 to 148,700 rows by each load's statistics): one ``EXISTS`` per
#: tag won in the last three sweeps, each on another machine (119.8 ms
#: against 163.1 for the semi-join, 52.0 against 75.1, and on 27 November
#: 2026 37.3 against 55.4), after one where the two tied (a set of 146,000
#: rows, 86 against 90); beside ``tag0006,tag0009`` (181,000 to 189,000
#: rows) the semi-join took 24.3 ms against 46.6.  No set between was
#: timed, nor a middling page but ~62,000 candidates: the bound lies
#: between the two sets and is carried over the middling range.  Over
#: ~250,000 candidates the semi-join won at 140,000 rows in each sweep
#: (24.1 against 39.9 in the last), where :data:`PROBED_BESIDE_NOT_ANY_MAX`
#: holds; so does it on a later page whose marker's range goes inside the
#: subqueries, where the semi-join reads only the set's rows after the
#: marker and one ``EXISTS`` per tag hashes each tag's rows whole.
PROBED_BESIDE_NOT_ANY_MIDDLING_MAX = 160_000
#: On PostgreSQL, given counts and at least :data:`GROUPED_MIN_CANDIDATES`
#: candidates, ``tags-any`` beside a required tag on at most this many rows
#: is one ``EXISTS`` per tag (the straightforward SQL) where it is neither
#: driven nor grouped: PostgreSQL drives from that tag's rows and probes the
#: set; the semi-join's plan varies, up to 2.4 times slower and up to 18 %
#: faster (30 % once) in two sweeps (``bench/tags.py --sweep``, "beside a rare required tag":
#: ``tags=tag0050&tags-any=tag0008,tag0012``, 14,000 and 143,000 rows, over
#: ~250,000 candidates 28 ms against 42 ms for the semi-join; ``tags=tag0100``
#: beside them over ~125,000, 9 against 21).  Beside ``tags=tag0020``,
#: 35,000 rows, the two take turns: the semi-join 0.64 to 1.04 of one
#: ``EXISTS`` per tag over ~125,000 and ~500,000 candidates, up to 1.35
#: over ~250,000.
PROBED_REQUIRED_MAX = 25_000
#: On PostgreSQL, given counts and at most this many candidates, a query
#: with a ``tags-any`` whose tags are on at least :data:`PER_ROW_ANY_FACTOR`
#: times as many rows as the candidates (:data:`PER_ROW_ANY_ALONE_FACTOR`
#: for a ``tags-any`` alone), and whose rarest required tag (if
#: any) on at least :data:`PER_ROW_REQUIRED_FACTOR` times as many, is
#: checked **per row**: every tag ``EXISTS`` is probed once per candidate
#: (``OFFSET 0`` keeps PostgreSQL from turning it into a join).  Otherwise
#: its planner sorts or hashes the large sets whole before it reads a
#: candidate: ``combined`` over ~4,000 candidates 11 ms per row against 68
#: ms for the semi-join and 74 for one ``EXISTS`` per tag, over ~16,000 43
#: against 103 and 83 (``bench/tags.py --sweep``, 27 November 2026; the
#: factors' other times were taken beside that sweep, on its data).  A probe
#: costs about 2.5 microseconds, so this many candidates cost at most about
#: 50 ms per tag checked.
PER_ROW_CANDIDATES_MAX = 20_000
#: See :data:`PER_ROW_CANDIDATES_MAX`.  Over ~4,000 candidates a
#: ``tags-any`` of 17,500 rows (about four times) per row took 8.7 ms against 4.8
#: for the semi-join; ``combined rare`` over ~1,000, 6,300 rows, 2.4 ms
#: against 4.8; ``combined`` over ~16,000 (about six times) 43 against 103.
PER_ROW_ANY_FACTOR = 5
#: :data:`PER_ROW_ANY_FACTOR` for a ``tags-any`` alone (no other part of the
#: query), whose semi-join reads its set in id order and stops with the
#: page: over ~4,000 candidates, ``tags-any 28k`` (6.5 times by the
#: estimates) per row took 8.5 ms against 6.4 for the semi-join, ``tags-any
#: 44k`` (9.4 times) 8.6 against 8.7; over ~1,000, ``tags-any`` (17,500
#: rows) 2.8 against 4.5 in the sweep.
PER_ROW_ANY_ALONE_FACTOR = 10
#: See :data:`PER_ROW_CANDIDATES_MAX`.  PostgreSQL merges a required tag's
#: rows in id order, cheaply, so only a tag far more common than the
#: candidates makes probing pay: ``rare + any big`` over ~1,000 candidates
#: (``tag0100``, 7,000 rows, about 7 times) per row took 2.6 ms against 0.7;
#: ``combined`` over ~16,000 (``tag0004``, 165,000 rows, about 10 times) 43
#: ms against 103, at the edge (165,333 by the statistics, 16,213
#: candidates by the planner): an estimate 2 % off the other way gives that
#: page the semi-join again, but where the tag sets are kept in step,
#: whose rule takes it either way (:data:`SETS_BESIDE_NOT_ANY_FACTOR`).
PER_ROW_REQUIRED_FACTOR = 10
#: On MySQL/MariaDB, given counts, ``tags-any`` with no tag excluded (alone
#: or beside required tags) is one semi-join
#: (``EXISTS (... tag IN (...))``) when its tags are on at most this many
#: rows together after the page's marker, as the database estimates them
#: (``EXPLAIN``: InnoDB counts a short range exactly and a long one at about
#: twice its rows), and one ``EXISTS`` per tag beyond: the semi-join reads
#: the whole set, the other stops once the page is full.  At a million
#: resources (``bench/tags.py``, MariaDB 10.11): ``tags-any=tag0600,tag0900``,
#: 1,900 rows, 13 ms against 676 ms; ``tags-any=tag0030,tag0040``, 88,000 by
#: estimate, 357 ms against 224 ms; ``tags-any=tag0008,tag0012`` after marker
#: ``8``, 150,000 by estimate, 588 ms against 18 ms; beside a required tag,
#: ``tags=tag0001&tags-any=tag0600,tag0900``: 18 ms against 1,200 ms.
MYSQL_SEMI_JOIN_MAX = 30_000
#: Fewest rows the caller's query must select before the tag condition for
#: the grouped form to be considered: the semi-join probes each candidate
#: beside small sets (beside large ones, over few candidates, the per-row
#: form: :data:`PER_ROW_CANDIDATES_MAX`), which beats reading a whole tag
#: set when candidates are few (a tenant's own list), and loses when the
#: page walks a large collection.  But for a later page:
#: :data:`GROUPED_AFTER_MARKER_MAX_SHARE`.
GROUPED_MIN_CANDIDATES = 100_000
#: On PostgreSQL, a later page over more than :data:`PER_ROW_CANDIDATES_MAX`
#: and fewer than :data:`GROUPED_MIN_CANDIDATES` candidates whose marker's
#: range goes inside the tag subqueries, with a ``tags-any`` and no required
#: tag, takes the grouped form where the set's rows after the marker are at
#: most this share of the candidates: it reads only those.  Timed on
#: ``bench/tags.py``'s data after marker ``f`` (~62,000 candidates, 27
#: November 2026, 11 runs each, the store's own SQL): ``tags-any 28k``, a
#: share of 0.03, 2.3 ms against 6.5 for the semi-join the store took
#: before; ``any+not-any``, 0.05, 5.5 against 16.5 for one ``EXISTS`` per
#: tag; ``tags-any=tag0008,tag0012&not-tags-any=tag0001,tag0003``, 0.14,
#: 8.6 against 44.4 for the semi-join; ``tags-any common``, about 0.35,
#: no clear winner (grouped 13.0 against 14.8 for the semi-join timed
#: apart, 18.9 against 16.1 in the table's runs after and before); and
#: over first pages of ~62,000 and ~16,000 candidates, where the grouped
#: form reads the whole set, a ``tags-any`` of 17,500 rows
#: (0.28 and 1.1) lost to the semi-join, 13.6 against 10.5 and 11.2 against
#: 6.4.  The share lies between the timed ones, not on a measured crossing.
GROUPED_AFTER_MARKER_MAX_SHARE = 0.2
#: Default most rows :func:`count_tags` reads per tag: what the choice of
#: :func:`tag_condition` needs to know, and no more.
TAG_COUNT_CAP = GROUPED_ANY_REQUIRED_MAX + 1

#: On PostgreSQL, where the tag set table is kept in step
#: (:mod:`tenancy_mw.tags.sets`), a query with a ``tags-any`` is one test of
#: each resource's set over at least :data:`GROUPED_MIN_CANDIDATES`
#: candidates beside a required tag on at most this many rows: the planner
#: reads that tag's entries of the set index (``bench/tags.py --sweep``,
#: ``tags=tag0040&tags-any=tag0008,tag0012`` over ~500,000 candidates:
#: 12.7 ms against 58.9 for the other forms, the straightforward SQL too).
SETS_REQUIRED_MAX = 25_000
#: ... and over more than :data:`PER_ROW_CANDIDATES_MAX` candidates where the
#: required and ``tags-any`` tags keep at least this share of the
#: resources, and :data:`SETS_DENSE_MIN_MATCHES` of the candidates: the
#: planner then reads the sets in id order and fills the page soon
#: (``tags-any=tag0008,tag0012&not-tags-any=tag0001,tag0003`` over ~62,000
#: candidates: 4.5 ms against 53.5).  Sparser, it may read the sets in id
#: order far (``tags=tag0004&tags-any=tag0040,tag0060``: 74.5 ms against 28.7).
SETS_DENSE_MIN_SHARE = 0.05
#: ... the matches among the candidates, by that share, that such a page needs
#: for the tag set form (:data:`SETS_DENSE_MIN_SHARE`), by the planner's
#: estimate of the candidates.  Near the share's bound the planner's own
#: plan of the sets turns over within a few thousand matches:
#: ``bench/tags.py --sweep``, 21 runs, 28 November 2026, on the code before
#: this bound, over ~62,000 candidates (68,040 by the planner),
#: ``tags-any=tag0020,tag0050`` beside
#: a ``not-tags`` or a ``not-tags-any`` (5.4 % by that load's statistics,
#: 4.9 % in fact: about 3,700 matches by the estimates) took 129.5 and
#: 149.5 ms on the sets against 46.3 and 52.8 for the straightforward SQL,
#: where ``tags-any=tag0020,tag0030`` beside the ``not-tags-any`` (about
#: 4,200) took 13.5 against 35.2.  A bound between two measured points,
#: which a load's statistics move by about a tenth (2,000 before that sweep).
SETS_DENSE_MIN_MATCHES = 4_000
#: On PostgreSQL, with the tag set table, a first page over at most
#: :data:`PER_ROW_CANDIDATES_MAX` candidates beside a ``not-tags-any`` and a
#: required tag on more than :data:`PROBED_REQUIRED_MAX` rows, whose tags'
#: counts are known (none left out nor at :data:`TAG_COUNT_CAP`), is one
#: test of each resource's set where the sets expected to pass the set
#: index (the required and ``tags-any`` tags together, taken as
#: independent) are at most this many times the candidates: the index's
#: work grows with those sets, the other forms' with the candidates, each
#: probed for the ``not-tags-any``.  The store gives it its cautious counts
#: there (a ``tags-any`` tag outside the statistics' common ones on as many
#: rows as the least common), so that a rare tag never reads as none
#: (``bench/tags.py``'s data, 11 runs each, 28 November 2026: ``combined``,
#: about 14,700 sets, over ~4,000, ~7,800, ~11,700 and ~16,000 candidates
#: 20.8, 21.4, 21.9 and 22.9 ms against 10.9, 21.5 and 32.3 per row and
#: 72.5 for the semi-join the store took on the last; ``combined rare``,
#: about 1,200 sets by those counts, over ~4,000 to ~16,000, 2.7 to 3.9 ms
#: against 17.2 to 17.9 for the semi-join; over ~1,000 this factor alone
#: keeps the semi-join: :data:`SETS_BESIDE_NOT_ANY_MIN_MATCHES`).  Over
#: more candidates such a query takes the sets on every first page
#: (:func:`_by_tag_sets`).
SETS_BESIDE_NOT_ANY_FACTOR = 2
#: ... or at most this many sets, whatever the candidates: so few cost the
#: set index little, while the semi-join a store falls back on there
#: probes each candidate for the ``not-tags-any`` (``bench/tags.py``'s
#: data, 21 runs each in balanced orders, 28 November 2026, on a machine
#: about 1.85 times slower than the one of the numbers above:
#: ``combined rare``, about 1,270 sets by that load's cautious counts and
#: 410 in fact, over ~4, ~60 and ~250 candidates 0.6, 0.7 and 1.2 ms
#: against 0.8, 1.0 and 3.0 for the straightforward SQL, 1.1, 1.4 and 2.6
#: for the semi-join and 0.6, 0.6 and 1.1 per row; ``tag0008`` beside
#: ``tag0060,tag0090``, about 1,700 sets: 0.6, 1.1 and 1.7 against 0.7,
#: 1.6 and 2.6 straightforward and 0.5, 1.0 and 1.8 per row, the form
#: the store took before).
SETS_BESIDE_NOT_ANY_MIN_MATCHES = 2_000
#: On PostgreSQL, with the tag set table, a first page over more than
#: :data:`PER_ROW_CANDIDATES_MAX` candidates beside a counted required tag
#: and a ``tags-any`` whose tags together are expected on at most this many
#: resources (the tags taken as independent) finds those sets first, from
#: the set index, and then looks each up among the candidates (*matches_first*
#: of :func:`~tenancy_mw.tags.sets.in_tag_sets`), rather than let the
#: planner read the sets in id order until the page fills.  Its cost grows
#: mostly with the matches (``bench/tags.py --sweep``, 21 runs,
#: 28 November 2026: ``tags=tag0030&tags-any=tag0008,tag0012``, about 3,100
#: matches, over ~250,000 candidates 9.4 ms against 46.0 for the
#: straightforward SQL and 11.8 for the plain set form;
#: ``tags=tag0020&tags-any=tag0006,tag0009``, about 6,300, 16.7 against 43.7
#: and 33.4).  Where the caller gives the page's limit, one ``EXISTS`` per
#: tag instead, beside neither an excluded tag nor a ``not-tags-any``,
#: where it fills the page from fewer of the required tag's rows than the
#: sets expected to match (:func:`_fills_from_required`;
#: ``tags=tag0020&tags-any=tag0005,tag0008`` over the whole collection,
#: about 4,600 rows to read against 7,200 matches, 37.7 ms against 55.2
#: and 52.6 found first in the sweep before the rule; the merged form,
#: :data:`MERGED_MATCHES_FACTOR`, now takes that page before this rule).
#: 8,000 before the sweep of 28 November 2026 (21 runs), where that query,
#: about 8,400 matches by that load's statistics (7,500 in fact), over
#: ~125,000, ~250,000 and ~500,000 candidates took 26.2, 24.4 and 33.0 ms
#: found first against 48.9, 68.2 and 52.8 for the semi-join the store
#: took at 8,000.
SETS_MATCHES_FIRST_MAX = 9_000
#: ... and a later page of a list of fewer than :data:`GROUPED_MIN_CANDIDATES`
#: beside a ``not-tags-any`` and a required tag on more than
#: :data:`PROBED_REQUIRED_MAX` rows after the marker, in place of one
#: ``EXISTS`` per tag (not of the driven or grouped forms, which the other
#: rules give such pages where they serve), where at most this many sets
#: are expected to pass: the counts after the marker taken as independent
#: over the whole set table (as :func:`_by_tag_sets` takes them).  The set
#: index is read whole whatever the marker, so after a late marker, where
#: the required tag has few rows left, the other forms stay
#: (``tags=tag0012&tags-any=tag0005,tag0008&not-tags-any=tag0001,tag0003``
#: after ``c``: 45.3 ms found first in a sweep without this bound, 26.3
#: for one ``EXISTS`` per tag in the final one).  ``bench/tags.py
#: --sweep``, lists of ~58,600 candidates, 21 runs:
#: ``tags=tag0004&tags-any=tag0010,tag0030&not-tags-any=tag0001,tag0003``
#: after ``01`` and ``4``, 27.9 and 27.2 ms against 59.3 and 64.5 for the
#: straightforward SQL (62.3 and 62.8 for one ``EXISTS`` per tag, the form
#: taken before); beside ``tag0002``, 47.1, 41.3 and 37.1 after ``01``,
#: ``4`` and ``8`` against 51.3, 63.9 and 72.0.
SETS_MATCHES_FIRST_LATER_MAX = 30_000
# And beside a not-tags-any and a required tag on more than
# PROBED_REQUIRED_MAX rows, where one EXISTS per tag reads much of both
# (tags=tag0004&tags-any=tag0010,tag0030&not-tags-any=tag0001,tag0003 over
# ~94,000: 33.6 ms against 86.5; combined, all four parameters, on every
# page of the whole collection: 30 to 34 ms against 31 to 154); for this
# reason not on a later page of a list of fewer than GROUPED_MIN_CANDIDATES,
# whose set scan runs from the marker past the list's own bound (after c:
# 66.0 against 23.4); the share rule may still take such a page.


#: On PostgreSQL, with the tag set table, the first page of a whole
#: collection (candidates at least half the set table's rows, its tagged
#: resources) whose limit the caller gives, of a query of required tags
#: and a ``tags-any`` and nothing else, *merges* the tags' rows in id
#: order: each tag's rows are read from the (tag, resource id) index as
#: they are stored, already in id order, the ``tags-any`` tags' merged into
#: one stream, and only until the page fills (:func:`_merges`).  Where the
#: rows so read, estimated from the counts (each tag's rows over the share
#: of the id range the page spans), are at most this many times the
#: matches expected over the collection: the other forms' work grows with
#: the matches (every set that passes, or a probe for each row of the
#: required tag), this form's with the rows it reads.  ``bench/tags.py``'s
#: data, 5 runs each, 28 November 2026, over the whole collection, the
#: ratios by that load's statistics: ``tags=tag0004&tags-any=tag0020,tag0030``
#: (about 22,000 rows read, 2.1 times the matches) 35.7 ms against 75.8
#: for the form the store took before (grouped); ``tag0004`` beside
#: ``tag0030,tag0040`` (4.95 times) 39.7 against 61.3 (the matches first);
#: ``tag0020`` beside ``tag0006,tag0009`` (4.1 times) 49.5 against 94.5;
#: and beyond the factor, ``tag0020`` beside ``tag0008,tag0012`` (5.7
#: times) 58.6 against 39.0, ``tag0004`` beside ``tag0040,tag0060`` (10
#: times) 67.1 against 45.7.
MERGED_MATCHES_FACTOR = 5
#: ... and at most this many rows in all: a guard, not a measured
#: crossing (within the factor the bench's tags stay under it; past it a
#: page reads much of each stream: ``tags=tag0001&tags-any=tag0100,tag0200``,
#: about 104,000 rows, 21 times the matches, took 69.5 ms against 47.2 for
#: the matches first).
MERGED_ROWS_MAX = 60_000


TAG_TABLE = "tenancy_mw_tags"
TAG_LOCK_TABLE = "tenancy_mw_tag_locks"

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

    On PostgreSQL, creating the tag table also makes the tag set table
    and the triggers that keep it in step (:mod:`tenancy_mw.tags.sets`),
    and dropping it drops them; not for a *metadata* that names a schema
    (the store then reads the tag table alone).

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
    for event, statements in (("after_create", TAG_SETS_DDL), ("before_drop", TAG_SETS_DROP)):
        for statement in statements:
            ddl = sa.DDL(statement).execute_if(dialect="postgresql", callable_=_on_search_path)
            sa.event.listen(tags, event, ddl)
    return TagTables(tags, locks)


def _on_search_path(ddl: object, target: object, bind: object, *args: object, **kwargs: object) -> bool:
    """Whether the tag set DDL serves *target*: a tag table named by no schema, as the DDL names it."""
    return getattr(target, "schema", None) is None


_METADATA = sa.MetaData()
#: The tag table, on a ``MetaData`` of this module (the default of every helper).
TAGS, TAG_LOCKS = define_tables(_METADATA)


# Conditions --------------------------------------------------------------


def tag_condition(
    query: TagQuery,
    resource_id: sa.ColumnElement,
    tags: sa.Table | None = None,
    counts: Mapping[str, int] | None = None,
    candidates: int | None = None,
    *,
    marker: str | None = None,
    limit: int | None = None,
    sets: TagSets | None = None,
) -> sa.ColumnElement:
    """A SQL condition, true for the resources that pass *query*.

    What :meth:`TagQuery.where <tenancy_mw.tags.model.TagQuery.where>` returns.

    :param query: the parsed tag query.
    :param resource_id: the resource id column of the caller's query
        (``servers.c.id``); its values are the tag table's ``resource_id``
        (compare them as the same type: a string column,
        :class:`~tenancy_mw.core.sql.ExactString` on MariaDB for index use).
    :param tags: the tag table (default :data:`TAGS`).
    :param counts: how many resources carry each tag of the query
        (:meth:`TagStatistics.counts`, :func:`count_tags`; a count at the cap
        of :func:`count_tags` reads as "at least"; a tag left out counts as
        common).  With *candidates*, it shapes PostgreSQL's form of
        ``tags-any``; on MySQL/MariaDB, whatever the candidates, that of a
        ``tags-any`` beside no excluded tag (:data:`MYSQL_SEMI_JOIN_MAX`).
        Counts of the rows after *marker* serve best, as ``TagStore`` gives
        them.  The rows found never depend on it, only the speed.
    :param candidates: about how many rows the caller's query selects
        before this condition: a page over a whole large collection (an
        administrator's list of every tenant's resources) passes the table's
        row count or an estimate of it; a tenant's own list passes nothing.
        ``None``: PostgreSQL's SQL does not depend on *counts*; below
        :data:`GROUPED_MIN_CANDIDATES` only some forms do (the module doc),
        and a ``not-tags-any`` of two tags beside a ``tags-any`` is probed
        per row whatever the counts.
    :param marker: the page starts after this resource id (OpenStack's
        ``?marker=``, the last id of the previous page; the page is ordered
        by *resource_id*, ascending): the condition then holds only for ids
        after it, and the tag subqueries start there too where they can
        (the module doc, "a *marker*").
    :param limit: the page's ``LIMIT``, when known (on PostgreSQL it may shape the page's SQL, not its rows).
    :param sets: the tag set table and its rows
        (:func:`~tenancy_mw.tags.sets.read_tag_sets`), only while its
        triggers keep it in step with *tags* (PostgreSQL 12 or later): with
        *counts* and *candidates*, PostgreSQL may test the query on it.

    :meth:`tenancy_mw.tags.store.TagStore.where` passes PostgreSQL's own
    statistics as *counts* (:func:`tag_statistics`), and *sets*.  The SQL
    each part of the query becomes: the module doc.
    """
    _check_candidates(candidates)
    _check_sets(sets)
    check_page(marker, limit)
    simple = query.simplified()
    if simple is None:
        return sa.false()
    page = _Page(resource_id, marker, limit=limit)
    return _paged_condition(TAGS if tags is None else tags, page, simple, _Counts(counts, candidates), sets)


class _Counts(NamedTuple):
    """What the forms may read: the tag counts and the candidates (``None``: unknown)."""

    tags: Mapping[str, int] | None
    candidates: int | None


def _paged_condition(
    table: sa.Table, requested: _Page, simple: tuple, counts: _Counts, sets: TagSets | None = None
) -> sa.ColumnElement:
    """The ANDed clauses of the simplified query *simple* on the *requested* page (its order found here).

    *sets*: the tag set table, where PostgreSQL may use it (:func:`_tag_sets_form`).
    """
    resource_id, marker = requested.resource_id, requested.marker
    page = requested._replace(order=_shared_order(resource_id.type, table.c.resource_id.type))
    clauses, paged_inside = _clauses(table, page, simple, counts)
    if not clauses:
        return sa.true()
    condition = sa.and_(*clauses)
    forms = {}
    if paged_inside:
        # PostgreSQL: its form of tags-any is an IN over tag rows already
        # after the marker, which holds the page.  Said outside too, the
        # planner counts the range twice, expects too few rows and merges
        # the caller's whole id range instead of probing the ids found
        # (bench/tags.py tags-any after marker c: 35 ms; without: 6 ms).
        forms["postgresql"] = sa.and_(*clauses[:-1])
    if marker is not None and (simple[2] or simple[3]):
        # MySQL/MariaDB: the range inside the subqueries only where no tag
        # is excluded.  Beside a NOT EXISTS, MariaDB 10.11 given the range
        # may read every id after the marker first (bench/tags.py after
        # marker f: any+not-tags 4.3 s against 168 ms); without one, the
        # range makes later pages up to a hundred times faster.
        outside, _ = _clauses(table, page._replace(inside=False), simple, counts)
        forms["mysql"] = sa.and_(*outside)
    form = _tag_sets_form(simple, counts, sets.rows, page) if sets is not None else None
    if form == "merged":
        forms["postgresql"] = _in_merged(table, page, simple[0], simple[1])
    elif form == "per-tag":
        forms["postgresql"] = sa.and_(*_clauses(table, page._replace(per_tag=True), simple, counts)[0])
    elif form and sets is not None:
        # Before the per-row form: over its few candidates the sets are
        # taken only where few pass the set index (SETS_BESIDE_NOT_ANY_FACTOR, _MIN_MATCHES).
        forms["postgresql"] = _in_tag_sets(sets.table, page, simple, matches_first=form == "matched")
    elif _query_per_row(simple, counts):
        # PostgreSQL: few candidates beside large sets (PER_ROW_CANDIDATES_MAX).
        forms["postgresql"] = sa.and_(*_clauses(table, page.each_row(), simple, _Counts(None, None))[0])
    return _DialectVariant(condition, **forms) if forms else condition


def _by_tag_sets(simple: tuple, counts: _Counts, resources: int, *, first_page: bool) -> bool:
    """Whether PostgreSQL tests the whole query on the tag set table (which holds *resources* rows).

    Only for a ``tags-any``, given counts and candidates: over at least
    :data:`GROUPED_MIN_CANDIDATES` candidates beside a required tag on at
    most :data:`SETS_REQUIRED_MAX` rows; over more than
    :data:`PER_ROW_CANDIDATES_MAX` beside a ``not-tags-any`` and a
    required tag on more than :data:`PROBED_REQUIRED_MAX` rows, on a
    *first_page* or over at least ``GROUPED_MIN_CANDIDATES``, and on a
    first page over fewer where, the counts known, at most
    :data:`SETS_BESIDE_NOT_ANY_FACTOR` times the candidates (or
    :data:`SETS_BESIDE_NOT_ANY_MIN_MATCHES`) are expected to pass the set
    index; and over
    more than ``PER_ROW_CANDIDATES_MAX``, where the required and ``tags-any``
    tags together keep at least :data:`SETS_DENSE_MIN_SHARE` of the
    resources (the larger of *resources* and the candidates), and that
    share of the candidates is at least :data:`SETS_DENSE_MIN_MATCHES`.

    Example::

        >>> simple = (frozenset(), frozenset({"a", "b"}), frozenset(), frozenset({"c", "d"}))
        >>> _by_tag_sets(simple, _Counts({"a": 120_000, "b": 90_000}, 62_000), 1_000_000, first_page=False)
        True
        >>> _by_tag_sets(simple, _Counts({"a": 20_000, "b": 9_000}, 62_000), 1_000_000, first_page=True)
        False
    """
    all_of, any_of, _, not_all_of = simple
    tags, candidates = counts
    if tags is None or candidates is None or not any_of:
        return False
    if all_of and candidates >= GROUPED_MIN_CANDIDATES and _rarest(tags, all_of) <= SETS_REQUIRED_MAX:
        return True
    beside_not_any = bool(all_of and not_all_of) and _rarest(tags, all_of) > PROBED_REQUIRED_MAX
    if candidates <= PER_ROW_CANDIDATES_MAX:
        if not (beside_not_any and first_page and candidates > 0):
            return False
        passing = _expected_matches(all_of, any_of, tags, max(resources, candidates))
        most = max(SETS_BESIDE_NOT_ANY_FACTOR * candidates, SETS_BESIDE_NOT_ANY_MIN_MATCHES)
        return passing is not None and passing <= most
    if beside_not_any and (first_page or candidates >= GROUPED_MIN_CANDIDATES):
        return True
    share = _positive_share(all_of, any_of, tags, max(resources, candidates))
    return share >= SETS_DENSE_MIN_SHARE and share * candidates >= SETS_DENSE_MIN_MATCHES


def _tag_sets_form(simple: tuple, counts: _Counts, resources: int, page: _Page) -> str | None:
    """PostgreSQL's form on *page* where the tag sets are kept: merged, matched, sets, per-tag (by name), ``None``.

    The tags' rows merged in id order first, where they fill the page soon
    (:func:`_merges`; it needs the set table's row count, not the table).

    The matches first (:func:`_matches_first`) before the plain set form
    (:func:`_by_tag_sets`), but over at least half the set table's
    *resources*, where the plain form's own rules take the query: there the
    planner fills the page early from the sets in id order (``bench/tags.py
    --sweep``, ``tags=tag0040&tags-any=tag0008,tag0012`` over the whole
    collection: 9.9 ms, and 13.5 found first in a sweep without this rule).
    One ``EXISTS`` per tag (``"per-tag"``) in place of the matches first
    where it fills the page sooner (:func:`_fills_from_required`);
    ``None``: the other forms' rules decide.
    """
    if _merges(simple, counts, resources, page):
        return "merged"
    plain = _by_tag_sets(simple, counts, resources, first_page=page.marker is None)
    if plain and counts.candidates is not None and 2 * counts.candidates >= resources:
        return "sets"
    if _matches_first(simple, counts, resources, page):
        return "per-tag" if _fills_from_required(simple, counts, resources, page) else "matched"
    return "sets" if plain else None


def _merges(simple: tuple, counts: _Counts, resources: int, page: _Page) -> bool:
    """Whether PostgreSQL merges the tags' rows in id order until the first *page* fills (:func:`_in_merged`).

    Only for required tags and a ``tags-any``, nothing else, their counts
    known, on a first page of known *limit* over at least half of the
    *resources* (a tenant's few rows would spread the page over the whole
    id range), with an id column that sorts as the tag table's.  The page
    is taken as ordered by the id, ascending (a descending one would read
    each stream whole).  The page
    spans about *limit* over the expected matches among the candidates of
    the id range; each stream is read that far.  Where those rows are at
    most :data:`MERGED_MATCHES_FACTOR` times the expected matches and at
    most :data:`MERGED_ROWS_MAX`.

    Example::

        >>> first = _Page(sa.column("id"), None, order="default", limit=1000)
        >>> simple = (frozenset({"a"}), frozenset({"b", "c"}), frozenset(), frozenset())
        >>> _merges(simple, _Counts({"a": 170_000, "b": 40_000, "c": 22_000}, 10**6), 10**6, first)
        True
        >>> _merges(simple, _Counts({"a": 40_000, "b": 40_000, "c": 22_000}, 10**6), 10**6, first)
        False
    """
    all_of, any_of, none_of, not_all_of = simple
    tags, candidates = counts
    if page.marker is not None or page.limit is None or page.order is None or none_of or not_all_of:
        return False
    if tags is None or not candidates or not (all_of and any_of) or 2 * candidates < resources:
        return False
    resources = max(resources, candidates)
    matches = _expected_matches(all_of, any_of, tags, resources)
    if not matches:
        return False
    spanned = min(1.0, page.limit / (matches * candidates / resources))
    read = spanned * (_rows(tags, all_of) + _rows(tags, any_of))
    return read <= min(MERGED_MATCHES_FACTOR * matches, MERGED_ROWS_MAX)


def _in_merged(table: sa.Table, page: _Page, all_of: frozenset, any_of: frozenset) -> sa.ColumnElement:
    """``resource_id IN`` the ids of every tag of *all_of* and one of *any_of*, from the tags' rows in id order.

    PostgreSQL's form for :func:`_merges`.  Each tag's rows come from the
    (tag, resource id) index in a subquery of its own, ordered and behind
    ``OFFSET 0``: so fenced, the planner knows each is in id order (it does
    not see that through a ``UNION ALL`` of plain selects, and sorts them
    all first), merges the ``tags-any`` streams without a sort, semi-joins
    the required ones in step, and the caller's ordered page stops them
    once it is full.
    """
    anys = sa.union_all(*[_ordered_rows(table, tag) for tag in sorted(any_of)]).subquery()
    required = []
    for tag in sorted(all_of):
        rows = _ordered_rows(table, tag).subquery()
        required.append(anys.c.resource_id.in_(sa.select(rows.c.resource_id)))
    ids = sa.select(anys.c.resource_id).where(anys.c.resource_id.is_not(None), *required)
    resource_id = page.resource_id
    return sa.and_(resource_id.is_not(None), resource_id.in_(ids))


def _ordered_rows(table: sa.Table, tag: str) -> sa.Select:
    """*tag*'s resource ids in id order, fenced (``OFFSET 0``): a stream of :func:`_in_merged`."""
    alias = table.alias()
    ordered = sa.select(alias.c.resource_id).where(alias.c.tag == tag).order_by(alias.c.resource_id)
    return ordered.offset(sa.literal_column("0"))


def _fills_from_required(simple: tuple, counts: _Counts, resources: int, page: _Page) -> bool:
    """Whether one ``EXISTS`` per tag fills a first *page* from fewer required-tag rows than the sets that match.

    PostgreSQL reads the rarest required tag's rows in id order and probes
    each for the rest, until the page's *limit* is found: about *limit*
    over the share of those rows that are candidates and pass the rest
    (the other required tags and a ``tags-any`` tag, the tags taken as
    independent: the expected matches over the rarest tag's rows).  The
    matches first read every set that matches, whatever the page.  Only on
    a first page of known *limit* beside no ``not-tags-any`` or excluded
    tag (probed on each row read, they would thin it further than counted).

    Example::

        >>> first = _Page(sa.column("id"), None, limit=1000)
        >>> simple = (frozenset({"a"}), frozenset({"b", "c"}), frozenset(), frozenset())
        >>> _fills_from_required(simple, _Counts({"a": 33_000, "b": 120_000, "c": 99_000}, 10**6), 10**6, first)
        True
        >>> _fills_from_required(simple, _Counts({"a": 33_000, "b": 120_000, "c": 99_000}, 500_000), 10**6, first)
        False
    """
    all_of, any_of, none_of, not_all_of = simple
    tags, candidates = counts
    if page.marker is not None or page.limit is None or none_of or not_all_of or tags is None or not candidates:
        return False
    resources = max(resources, candidates)
    matches = _expected_matches(all_of, any_of, tags, resources)
    rarest = _rarest(tags, all_of)
    if not matches or not rarest:
        return False
    # Read until the page fills (or every row of the rarest tag, more than the matches).
    share = matches / rarest * candidates / resources
    return page.limit / share < matches


def _matches_first(simple: tuple, counts: _Counts, resources: int, page: _Page) -> bool:
    """Whether PostgreSQL finds the tag sets that pass the query first, then looks each up among the candidates.

    Only beside a required tag and a ``tags-any`` whose counts are known
    (not a required tag that reads as rare, 0: under the statistics' floor,
    nor a tag left out or at :data:`TAG_COUNT_CAP`, "at least"), over more
    than :data:`PER_ROW_CANDIDATES_MAX` candidates.  On a first
    page, where at most :data:`SETS_MATCHES_FIRST_MAX` sets are expected
    to pass among the set table's *resources* (or the candidates, if
    more); on a later *page*, as :data:`SETS_MATCHES_FIRST_LATER_MAX` says.

    Example::

        >>> first = _Page(sa.column("id"), None)
        >>> simple = (frozenset({"a"}), frozenset({"b", "c"}), frozenset(), frozenset())
        >>> _matches_first(simple, _Counts({"a": 30_000, "b": 100_000, "c": 90_000}, 250_000), 10**6, first)
        True
        >>> _matches_first(simple, _Counts({"a": 180_000, "b": 100_000, "c": 90_000}, 250_000), 10**6, first)
        False
    """
    all_of, any_of, _, not_all_of = simple
    tags, candidates = counts
    if tags is None or candidates is None or candidates <= PER_ROW_CANDIDATES_MAX or not (all_of and any_of):
        return False
    rarest = _rarest(tags, all_of)
    matches = _expected_matches(all_of, any_of, tags, max(resources, candidates))
    if rarest == 0 or matches is None:
        return False
    if page.marker is None:
        return matches <= SETS_MATCHES_FIRST_MAX
    if not (not_all_of and page.ranged) or candidates >= GROUPED_MIN_CANDIDATES:
        # Without the marker's range inside (an id column sorting otherwise), every match would be read.
        return False
    if matches > SETS_MATCHES_FIRST_LATER_MAX:
        return False
    if rarest <= PROBED_REQUIRED_MAX:
        # The set index is read whole whatever the marker: after a late one,
        # the required tag's few rows there are cheaper to join.
        return False
    # Only in place of one EXISTS per tag; the driven and grouped forms serve their own pages.
    form = _postgresql_form_name(all_of, any_of, tags, candidates, True, ranged=page.ranged, limit=page.limit)
    return form == "per-tag"


def _expected_matches(all_of: frozenset, any_of: frozenset, counts: Mapping[str, int], resources: int) -> int | None:
    """How many of *resources* carry every required tag and one of *any_of* (:func:`_positive_share`).

    ``None`` where a tag's count is not known: left out, or at
    :data:`TAG_COUNT_CAP` ("at least"); and over no resources.  Rounded:
    the float product of exact shares may land a hair over a bound it meets.
    """
    if resources <= 0 or any(counts.get(tag, TAG_COUNT_CAP) == TAG_COUNT_CAP for tag in all_of | any_of):
        return None
    return round(_positive_share(all_of, any_of, counts, resources) * resources)


def _positive_share(all_of: frozenset, any_of: frozenset, counts: Mapping[str, int], resources: int) -> float:
    """The share of *resources* that carry every required tag and one of *any_of*, the tags taken as independent."""
    share = min(1.0, _rows(counts, any_of) / resources)
    for tag in all_of:
        share *= min(1.0, _count_of(counts, tag) / resources)
    return share


def _in_tag_sets(sets: sa.Table, page: _Page, simple: tuple, *, matches_first: bool = False) -> sa.ColumnElement:
    """The whole query on the tag set table, on the page: its range inside where it can go, and beside.

    Beside too: else the planner may merge the caller's ids from the first
    one (bench/tags.py ``tags-any common`` after marker c: 69.8 ms without,
    1.8 with).  *matches_first*: :func:`_matches_first`.
    """
    condition = in_tag_sets(page.resource_id, simple, after=page.ids_after, sets=sets, matches_first=matches_first)
    if page.marker is None:
        return condition
    return sa.and_(condition, page.resource_id > page.marker)


def _query_per_row(simple: tuple, counts: _Counts) -> bool:
    """:func:`_per_row` for the simplified query *simple*, alone when it has nothing but a ``tags-any``."""
    all_of, any_of, none_of, not_all_of = simple
    return _per_row(all_of, any_of, counts, alone=not (all_of or none_of or not_all_of))


def _per_row(all_of: frozenset, any_of: frozenset, counts: _Counts, *, alone: bool) -> bool:
    """Whether PostgreSQL checks the query per row: few candidates beside large sets (:data:`PER_ROW_CANDIDATES_MAX`).

    *all_of* and *any_of*: the required and ``tags-any`` tags of the
    simplified query; *alone*: it has no other part (no required or
    excluded tag, no ``not-tags-any``).  Only with a ``tags-any``, whose
    set the other forms may read whole or hash, and with counts and
    candidates.

    Example::

        >>> _per_row(frozenset(), frozenset({"a", "b"}), _Counts({"a": 20_000, "b": 10_000}, 4_000), alone=False)
        True
        >>> _per_row(frozenset(), frozenset({"a", "b"}), _Counts({"a": 20_000, "b": 10_000}, 4_000), alone=True)
        False
    """
    tags, candidates = counts
    if not any_of or tags is None or not candidates or candidates > PER_ROW_CANDIDATES_MAX:
        return False
    factor = PER_ROW_ANY_ALONE_FACTOR if alone else PER_ROW_ANY_FACTOR
    if _rows(tags, any_of) < factor * candidates:
        return False
    return not all_of or _rarest(tags, all_of) >= PER_ROW_REQUIRED_FACTOR * candidates


def _clauses(table: sa.Table, page: _Page, simple: tuple, counts: _Counts) -> tuple[list[sa.ColumnElement], bool]:
    """The conditions of the simplified query, to be ANDed, the page's last.

    With whether PostgreSQL's form holds the page without the last (its
    ``tags-any`` an ``IN`` over tag rows after the marker).
    """
    all_of, any_of, none_of, not_all_of = simple
    clauses: list[sa.ColumnElement] = []
    paged_inside = False
    if any_of:
        positive, paged_inside = _positive_condition(
            table, page, all_of, any_of, counts, not (none_of or not_all_of), beside_not_any=bool(not_all_of)
        )
        clauses.append(positive)
    else:
        clauses += [_has_tag(table, page, tag) for tag in sorted(all_of)]
    clauses += [sa.not_(_has_tag(table, page, tag)) for tag in sorted(none_of)]
    if not_all_of:
        probed = bool(any_of) and _below_grouped_min(counts.candidates)
        clauses.append(_lacks_one_condition(table, page, not_all_of, each_row=probed))
    if page.marker is not None:
        # Last: where the rest is one EXISTS per tag, the statement is then
        # the one a caller writes by hand (the same plan, as bench/tags.py shows).
        clauses.append(page.resource_id > page.marker)
    return clauses, paged_inside


class _Page(NamedTuple):
    """The caller's resource id column, and the marker the page starts after (``None``: the first page).

    *order* is how the caller's id column and the tag table's compare
    (:func:`_shared_order`): the marker's range goes inside the tag
    subqueries only where it means there what it means on the caller's
    column.
    """

    resource_id: sa.ColumnElement
    marker: str | None
    order: str | None = None
    #: Whether the marker's range may go inside the subqueries the database joins.
    inside: bool = True
    #: Whether each tag subquery is probed once per row (:data:`PER_ROW_CANDIDATES_MAX`).
    per_row: bool = False
    #: The page's size, when the caller gives it.
    limit: int | None = None
    #: Whether PostgreSQL's ``tags-any`` is one ``EXISTS`` per tag, whatever the counts (:func:`_fills_from_required`).
    per_tag: bool = False

    def rows_of(self, alias: sa.FromClause) -> list[sa.ColumnElement]:
        """The conditions tying *alias*'s rows to the caller's row, the marker's among them."""
        joined = alias.c.resource_id == self.resource_id
        # The marker's range is implied by the caller's row (it is after the
        # marker), but the planner does not carry a range across the join:
        # said here, it starts the tag index scan at the marker.
        after = self.ids_after(alias)
        if after and self.order == "default":
            # Left out on MySQL/MariaDB (ids_after), without a stray "true" there.
            return [_DialectVariant(sa.and_(joined, *after), mysql=joined)]
        return [joined, *after]

    def probed(self) -> _Page:
        """This page for subqueries under an ``OR``: the marker not inside them.

        The planner runs those once per row (it cannot join them); with a
        range it would rather read every tag row after the marker into a
        hash (``not-tags-any`` of two common tags: 5 ms became 107 ms at a
        million resources, ``bench/tags.py --pages``).
        """
        return self._replace(inside=False)

    def each_row(self) -> _Page:
        """This page for subqueries probed per row (``OFFSET 0``), the marker not inside them.

        The per-row form's, and a ``not-tags-any``'s beside a ``tags-any``
        over fewer than :data:`GROUPED_MIN_CANDIDATES` candidates.
        """
        return self._replace(inside=False, per_row=True)

    def exists(self, alias: sa.FromClause, *conditions: sa.ColumnElement) -> sa.Exists:
        """``EXISTS`` of *alias*'s rows of the caller's row that meet *conditions*.

        In the per-row form with ``OFFSET 0``: PostgreSQL turns no subquery
        with an ``OFFSET`` into a join, so it probes it once per candidate
        rather than read every row of the tag into a hash or a sort first.
        """
        if not self.per_row:
            return sa.exists().where(*self.rows_of(alias), *conditions).correlate_except(alias)
        probe: sa.Select = sa.select(sa.literal_column("1")).select_from(alias).where(*self.rows_of(alias), *conditions)
        return probe.offset(sa.literal_column("0")).correlate_except(alias).exists()

    @property
    def ranged(self) -> bool:
        """Whether the marker's range goes inside the subqueries the database joins (:meth:`ids_after`)."""
        return self.marker is not None and self.order is not None and self.inside

    def ids_after(self, alias: sa.FromClause) -> list[sa.ColumnElement]:
        """The marker's condition on *alias*'s own ids, where their order is the caller's column's.

        Where the two columns sort otherwise (a case-insensitive id column
        beside the tag table's exact one: ``a`` < ``B`` to it, ``B`` < ``a``
        byte-wise), a range on the tag table's ids would drop the rows the
        caller's order puts after the marker; there only the caller's own
        ``resource_id > marker`` holds the page.
        """
        if not self.ranged:
            return []
        after = alias.c.resource_id > self.marker
        if self.order == "exact":
            return [after]
        # Each in the database's default order: the same but on MySQL/MariaDB,
        # whose default collation is the table's (case-insensitive, as a rule).
        return [_DialectVariant(after, mysql=sa.true())]


def _shared_order(caller: sa.types.TypeEngine, tags: sa.types.TypeEngine) -> str | None:
    """How the caller's id column and the tag table's sort, from their types.

    ``"exact"``: both :class:`~tenancy_mw.core.sql.ExactString`;
    ``"default"``: both ExactString or string types naming no collation (or
    untyped), in the database's default order, which is ExactString's except
    on MySQL/MariaDB; ``None``: unknown (a collation of the column's own).
    """
    kinds = {_order_of(caller), _order_of(tags)}
    if kinds == {"exact"}:
        return "exact"
    return "default" if None not in kinds else None


def _order_of(column_type: sa.types.TypeEngine) -> str | None:
    """``"exact"``, ``"default"`` or ``None`` (unknown) for one column's type (:func:`_shared_order`).

    The type's variants for other databases (``with_variant``) count too:
    one of them with a collation of its own makes the order unknown, and
    ``"exact"`` (which only MySQL/MariaDB need) is the type MySQL/MariaDB use.
    """
    variants = dict(getattr(column_type, "_variant_mapping", None) or {})
    kinds = {_own_order_of(each) for each in (column_type, *variants.values())}
    if None in kinds:
        return None
    on_mysql = {_own_order_of(variants.get(name, column_type)) for name in ("mysql", "mariadb")}
    return "exact" if on_mysql == {"exact"} else "default"


def _own_order_of(column_type: sa.types.TypeEngine) -> str | None:
    """:func:`_order_of` of the type itself, without its variants."""
    if isinstance(column_type, ExactString):
        return "exact"
    if isinstance(column_type, postgresql.CITEXT):
        # Case-insensitive, whatever its collation: lower(a) < lower(b).
        return None
    if isinstance(column_type, sa.types.NullType) or (
        isinstance(column_type, sa.String) and column_type.collation is None
    ):
        return "default"
    return None


def check_page(marker: object, limit: object) -> None:
    """:class:`ValueError` unless *marker* is ``None`` or a resource id, and *limit* ``None`` or 1 or more."""
    # No NUL: no resource id holds one (PostgreSQL's text cannot), and
    # PostgreSQL's driver would refuse the statement with it.
    if marker is not None and not (
        isinstance(marker, str) and 1 <= len(marker) <= MAX_RESOURCE_ID_LENGTH and "\x00" not in marker
    ):
        raise ValueError(
            "marker must be a resource id (a string of 1 to %d characters, no NUL), not %r"
            % (MAX_RESOURCE_ID_LENGTH, marker)
        )
    if limit is not None and not (_is_count(limit) and int(limit) >= 1):  # type: ignore[call-overload]
        raise ValueError("limit must be a number of rows (an int of 1 or more), not %r" % (limit,))


def _positive_condition(
    table: sa.Table,
    page: _Page,
    all_of: frozenset,
    any_of: frozenset,
    counts: _Counts,
    positive: bool,
    *,
    beside_not_any: bool,
) -> tuple[sa.ColumnElement, bool]:
    """The required tags and ``tags-any`` together, in each database's fastest form.

    *counts*: those each database's form may read; *positive*: the query
    excludes no tag; *beside_not_any*: it has a ``not-tags-any``.  With whether
    PostgreSQL's form is an ``IN`` over tag rows after the page's marker.
    """
    required = [_has_tag(table, page, tag) for tag in sorted(all_of)]
    semi_join: sa.ColumnElement = sa.and_(*required, _has_any(table, page, any_of))
    per_tag = sa.and_(*required, sa.or_(*[_has_tag(table, page.probed(), tag) for tag in sorted(any_of)]))
    # MySQL/MariaDB: the semi-join only for a set it reads quickly whole,
    # and never beside a NOT EXISTS (MariaDB 10.11 then took 15 to 88 times
    # as long: bench/tags.py combined rare, any+not-tags).  Without counts,
    # the semi-join for a tags-any alone, as always before.
    small = counts.tags is not None and not _more_than(counts.tags, any_of, MYSQL_SEMI_JOIN_MAX)
    mysql_form = semi_join if positive and (small or (counts.tags is None and not all_of)) else per_tag
    postgresql_form, found_in_tags = _postgresql_form(
        table, page, all_of, any_of, counts, semi_join, per_tag, beside_not_any=beside_not_any
    )
    condition = _DialectVariant(semi_join, mysql=mysql_form, postgresql=postgresql_form)
    return condition, found_in_tags and page.ranged


def _postgresql_form(
    table: sa.Table,
    page: _Page,
    all_of: frozenset,
    any_of: frozenset,
    counts: _Counts,
    semi_join: sa.ColumnElement,
    per_tag: sa.ColumnElement,
    *,
    beside_not_any: bool,
) -> tuple[sa.ColumnElement, bool]:
    """PostgreSQL's form of the required tags and ``tags-any``: *semi_join* without counts or candidates.

    *per_tag* is one ``EXISTS`` per ``tags-any`` tag beside the required
    tags; *beside_not_any*: the query has a ``not-tags-any``.  With whether
    the form is an ``IN`` of ids found in the tag table (driven or grouped).
    """
    tags, candidates = counts
    if page.per_tag:
        return per_tag, False
    if tags is None or candidates is None:
        return semi_join, False
    form = _postgresql_form_name(all_of, any_of, tags, candidates, beside_not_any, ranged=page.ranged, limit=page.limit)
    if form == "driven":
        return _in_positive_set(table, page, all_of, any_of), True
    if form == "grouped":
        required = [_has_tag(table, page, tag) for tag in sorted(all_of)]
        return sa.and_(*required, _in_grouped(table, page, any_of)), True
    return (per_tag if form == "per-tag" else semi_join), False


def _postgresql_form_name(
    all_of: frozenset,
    any_of: frozenset,
    counts: Mapping[str, int],
    candidates: int,
    beside_not_any: bool,
    *,
    ranged: bool = False,
    limit: int | None = None,
) -> str:
    """PostgreSQL's form of ``tags-any`` by *counts* over *candidates*: driven, grouped, per-tag or semi-join.

    *all_of* and *any_of*: the required and ``tags-any`` tags of the
    simplified query; *beside_not_any*: it has a ``not-tags-any``;
    *ranged*: the page's marker goes inside the tag subqueries (the
    semi-join then reads only the set's rows after it; beside a required
    tag and a ``not-tags-any`` over middling candidates *counts* are read
    as the rows after the marker, :func:`_beside_not_any_form`; over
    more, with the page's *limit*, :func:`_driven_after_marker`).  The rules are the
    module doc's; :func:`tag_condition` builds the SQL of the form named
    here.

    Example::

        >>> _postgresql_form_name(frozenset(), frozenset({"a", "b"}), {"a": 9_000, "b": 6_000}, 10**6, False)
        'grouped'
        >>> _postgresql_form_name(frozenset(), frozenset({"a", "b"}), {"a": 9_000, "b": 6_000}, 4_000, False)
        'semi-join'
    """
    if candidates >= GROUPED_MIN_CANDIDATES:
        if all_of and (
            _driven(all_of, any_of, counts, candidates)
            or (ranged and limit is not None and _driven_after_marker(all_of, any_of, counts, candidates, limit))
        ):
            return "driven"
        if _any_is_small(all_of, any_of, counts):
            return "grouped"
        if not all_of and not _more_than(counts, any_of, _per_tag_most(beside_not_any, candidates, ranged=ranged)):
            return "per-tag"
        if all_of and _rarest(counts, all_of) <= PROBED_REQUIRED_MAX:
            return "per-tag"
    elif ranged and not all_of and _middling(candidates) and _grouped_after_marker(any_of, counts, candidates):
        return "grouped"
    elif beside_not_any and all_of and _middling(candidates):
        return _beside_not_any_form(all_of, any_of, counts, candidates, ranged=ranged)
    elif _probed_over_few(all_of, any_of, counts, candidates, beside_not_any, ranged=ranged):
        return "per-tag"
    return "semi-join"


def _driven(all_of: frozenset, any_of: frozenset, counts: Mapping[str, int], candidates: int) -> bool:
    """Whether PostgreSQL finds the ids beside required tags faster from the tag table alone (the driven form).

    The rarest required tag on at most :data:`DRIVEN_REQUIRED_MAX` rows, and
    its rows with the set's at most :data:`DRIVEN_MAX_SHARE` of the candidates
    (:data:`DRIVEN_BESIDE_RARE_MAX_SHARE` when it is on at most
    :data:`PROBED_REQUIRED_MAX`).
    """
    rarest = _rarest(counts, all_of)
    rows = rarest + _rows(counts, any_of)
    share = DRIVEN_BESIDE_RARE_MAX_SHARE if rarest <= PROBED_REQUIRED_MAX else DRIVEN_MAX_SHARE
    return rarest <= DRIVEN_REQUIRED_MAX and rows <= share * candidates


def _driven_after_marker(
    all_of: frozenset, any_of: frozenset, counts: Mapping[str, int], candidates: int, limit: int
) -> bool:
    """Whether a later page's driven form reads few rows beside the candidates read otherwise.

    :data:`DRIVEN_AFTER_MARKER_FACTOR`.

    *counts* and *candidates*: after the marker; *limit*: the page's size.
    Never beside a set on more than :data:`DRIVEN_AFTER_MARKER_ANY_FACTOR`
    times the required tag's rows there (so never beside a tag on 0 rows
    but for an empty set, which the share rule drives anyway).

    Example::

        >>> after = {"r": 40_000, "a": 17_000, "b": 5_000}
        >>> _driven_after_marker(frozenset("r"), frozenset("ab"), after, 250_000, 1000)
        True
        >>> _driven_after_marker(frozenset("r"), frozenset("ab"), after, 250_000, 100)
        False
    """
    rarest = _rarest(counts, all_of)
    rows = _rows(counts, any_of)
    # A tag counted 0 beside any set is refused by the factor.
    if rarest > DRIVEN_REQUIRED_MAX or rows > DRIVEN_AFTER_MARKER_ANY_FACTOR * rarest:
        return False
    density = rarest / candidates * min(1.0, rows / candidates)
    read = candidates if density * candidates <= limit else limit / density
    return rarest + rows <= DRIVEN_AFTER_MARKER_FACTOR * read


def _grouped_after_marker(any_of: frozenset, counts: Mapping[str, int], candidates: int) -> bool:
    """Whether a later page over middling candidates groups its ``tags-any``: :data:`GROUPED_AFTER_MARKER_MAX_SHARE`.

    Example::

        >>> _grouped_after_marker(frozenset("ab"), {"a": 2_000, "b": 1_000}, 62_000)
        True
    """
    return _rows(counts, any_of) <= GROUPED_AFTER_MARKER_MAX_SHARE * candidates


def _driven_beside_not_any(all_of: frozenset, any_of: frozenset, counts: Mapping[str, int], candidates: int) -> bool:
    """Whether the driven form beats one ``EXISTS`` per tag beside a ``not-tags-any`` over :func:`_middling` candidates.

    The rarest required tag (*all_of*) on more than
    :data:`PROBED_REQUIRED_MAX` rows (from a rarer one, one ``EXISTS`` per
    tag drives) and at most :data:`GROUPED_ANY_REQUIRED_MAX`; the
    ``tags-any`` set on at most :data:`GROUPED_ANY_MAX`; the two together
    on at most :data:`DRIVEN_BESIDE_NOT_ANY_FACTOR` times the candidates.

    Example::

        >>> _driven_beside_not_any(frozenset("r"), frozenset("ab"), {"r": 186_000, "a": 20_000, "b": 10_000}, 94_000)
        True
        >>> _driven_beside_not_any(frozenset("r"), frozenset("ab"), {"r": 7_000, "a": 20_000, "b": 10_000}, 94_000)
        False
    """
    rarest = _rarest(counts, all_of)
    rows = _rows(counts, any_of)
    if not PROBED_REQUIRED_MAX < rarest <= GROUPED_ANY_REQUIRED_MAX or rows > GROUPED_ANY_MAX:
        return False
    return rarest + rows <= DRIVEN_BESIDE_NOT_ANY_FACTOR * candidates


def _beside_not_any_form(
    all_of: frozenset, any_of: frozenset, counts: Mapping[str, int], candidates: int, *, ranged: bool
) -> str:
    """Driven or per-tag beside a required tag and a ``not-tags-any`` over :func:`_middling` candidates.

    Driven where :func:`_driven_beside_not_any` says so, else one ``EXISTS``
    per tag; but on a page whose marker's range goes inside the tag
    subqueries (*ranged*: *counts* are then the rows after the marker,
    which ``TagStore`` estimates), where the rarest required tag is on at
    most :data:`PROBED_REQUIRED_MAX` rows, driven too, unless the set is
    on at least :data:`PROBED_AFTER_MARKER_ANY_FACTOR` times its rows.

    Example::

        >>> after = {"r": 10_000, "a": 5_000, "b": 5_000}
        >>> _beside_not_any_form(frozenset("r"), frozenset("ab"), after, 58_000, ranged=True)
        'driven'
        >>> _beside_not_any_form(frozenset("r"), frozenset("ab"), after, 58_000, ranged=False)
        'per-tag'
    """
    if _driven_beside_not_any(all_of, any_of, counts, candidates):
        return "driven"
    rarest = _rarest(counts, all_of)
    if ranged and rarest <= PROBED_REQUIRED_MAX and _rows(counts, any_of) < PROBED_AFTER_MARKER_ANY_FACTOR * rarest:
        # From a tag that rare after the marker the driven form finds the
        # few ids first (bench/tags.py's data after marker f: 3.7 ms
        # against 55 for one EXISTS per tag).
        return "driven"
    return "per-tag"


def _per_tag_most(beside_not_any: bool, candidates: int, *, ranged: bool) -> int:
    """Most rows of a ``tags-any`` without required tags that PostgreSQL gets as one ``EXISTS`` per tag.

    Beside a ``not-tags-any`` over :func:`_middling` *candidates* on a page
    whose marker's range stays out of the tag subqueries (not *ranged*):
    :data:`PROBED_BESIDE_NOT_ANY_MIDDLING_MAX`.
    """
    if not beside_not_any:
        return PROBED_ANY_ALONE_MAX
    if _middling(candidates) and not ranged:
        return PROBED_BESIDE_NOT_ANY_MIDDLING_MAX
    return PROBED_BESIDE_NOT_ANY_MAX


def _probed_over_few(
    all_of: frozenset,
    any_of: frozenset,
    counts: Mapping[str, int],
    candidates: int,
    beside_not_any: bool,
    *,
    ranged: bool,
) -> bool:
    """Whether one ``EXISTS`` per tag beats the semi-join over fewer than :data:`GROUPED_MIN_CANDIDATES` candidates.

    Without a required tag: beside a ``not-tags-any`` (*beside_not_any*), a
    set on at most :data:`PROBED_BESIDE_NOT_ANY_MAX` rows, whatever the
    candidates (the semi-join would check the ``not-tags-any`` on every
    candidate first; over :func:`_middling` candidates on a page whose
    marker's range stays out of the tag subqueries, not *ranged*,
    :data:`PROBED_BESIDE_NOT_ANY_MIDDLING_MAX`: :func:`_per_tag_most`); otherwise a middling set (more than
    :data:`GROUPED_ANY_SMALL` rows, at most :data:`PROBED_ANY_ALONE_MAX`)
    that the candidates outnumber; PostgreSQL hashes each tag's ids once
    rather than probe the semi-join per row (``bench/tags.py --sweep``,
    ~62,000 candidates: ``tags-any`` of 44,000 rows 18 ms against 42 ms,
    of 28,000 rows 22 ms against 32 ms).  Beside required tags: the rarest on
    no more rows than the candidates and fewer than the set's; PostgreSQL
    then drives from that tag's rows and probes the set, where the
    semi-join reads the larger set (``rare + any big`` at ~62,000: 19 ms
    against 45 ms).  With fewer candidates than the required tag's rows,
    the semi-join probes the candidates instead (the same query at
    ~4,000: 2.0 ms against 7.2 ms).  Beside required tags this form is the
    straightforward SQL itself, so a count that errs (``TagStore`` takes a
    required tag outside the statistics' most common ones as rare where
    they bound it tightly) costs at most what the straightforward SQL
    costs.
    """
    rows = _rows(counts, any_of)
    if all_of:
        rarest = _rarest(counts, all_of)
        return rarest <= candidates and rarest < rows
    if beside_not_any:
        return rows <= _per_tag_most(beside_not_any, candidates, ranged=ranged)
    return GROUPED_ANY_SMALL < rows <= min(_per_tag_most(beside_not_any, candidates, ranged=ranged), candidates)


def _form_settled(
    all_of: frozenset, any_of: frozenset, counts: Mapping[str, int], candidates: int, beside_not_any: bool
) -> bool:
    """Whether PostgreSQL's form by *counts* over *candidates* is also a later page's, whatever its marker.

    Then the store need not scale the counts to the tag rows after the
    marker (:func:`_later_page_counts`, two ``EXPLAIN``): never for the
    per-row form (:func:`_per_row`); over
    :data:`GROUPED_MIN_CANDIDATES` or more, driven (:func:`_driven`: fewer
    rows keep both of its bounds) and grouped without a required tag; over
    fewer, one ``EXISTS`` per tag beside a required tag and the semi-join
    beside one on at least the set's rows (:func:`_probed_over_few`); beside
    a required tag and a ``not-tags-any`` over middling candidates
    (:func:`_beside_not_any_form`, by the rows after the marker) only where
    the rarest required tag is on at most :data:`PROBED_REQUIRED_MAX` rows
    (fewer rows keep it so, and the set's ratio to it); without a required tag
    over middling candidates, only a set already grouped
    (:data:`GROUPED_AFTER_MARKER_MAX_SHARE`; fewer rows may group a larger
    one); otherwise without a required tag, beside a ``not-tags-any``
    (*beside_not_any*: whatever the share, the
    whole table's counts choose between one ``EXISTS`` per tag and the
    semi-join) and wherever the whole table's give the semi-join.
    Up to rounding: the store rounds each scaled count alone, so beside a
    rarest required tag on about as many rows as the set (where the two
    forms cost alike), or a set on about
    :data:`PROBED_AFTER_MARKER_ANY_FACTOR` times its rows, or a required
    tag that scales to 0 rows (then one ``EXISTS`` per tag), the page
    after the marker may get the other form than the one said settled.
    """
    if _per_row(all_of, any_of, _Counts(counts, candidates), alone=False):
        # Fewer rows after the marker may make the sets too small for it
        # (alone=False: the lower bound, so never said settled wrongly).
        # TagStore asks this only over more candidates than the per-row
        # form takes; a caller of tag_condition may pass any.
        return False
    if candidates >= GROUPED_MIN_CANDIDATES:
        if all_of:
            return _driven(all_of, any_of, counts, candidates)
        return _any_is_small(all_of, any_of, counts)
    if all_of and beside_not_any and _middling(candidates):
        # Fewer rows keep a tag that rare, and the set's ratio to it.
        return _rarest(counts, all_of) <= PROBED_REQUIRED_MAX
    if all_of:
        # Scaling keeps the rarest tag's share of the set's rows and makes it
        # only fewer than the candidates: per-tag stays per-tag, and a rarest
        # tag on at least the set's rows keeps the semi-join.
        probed = _probed_over_few(all_of, any_of, counts, candidates, beside_not_any, ranged=True)
        return probed or _rarest(counts, all_of) >= _rows(counts, any_of)
    if _middling(candidates):
        # Fewer rows after the marker may make the set few enough to group.
        return _grouped_after_marker(any_of, counts, candidates)
    if beside_not_any:
        return True
    return _postgresql_form_name(all_of, any_of, counts, candidates, beside_not_any, ranged=True) != "per-tag"


def _later_page_counts(
    all_of: frozenset,
    any_of: frozenset,
    whole: Mapping[str, int],
    after: Mapping[str, int],
    candidates: int,
    beside_not_any: bool,
) -> Mapping[str, int]:
    """The counts that choose a later page's form: *after* the marker, but *whole* for one ``EXISTS`` per tag.

    The driven, grouped and semi-join forms read the tag rows after the
    marker; one ``EXISTS`` per tag without required tags hashes each
    tag's rows whole, so where *after* gives it, the whole table's
    counts decide between it and the semi-join (``tags-any common`` after
    marker ``f``: 350,000 rows, 26,000 after it, 130 ms per tag against 32
    ms for the semi-join in ``bench/README.rst``'s table).
    """
    if all_of or _postgresql_form_name(all_of, any_of, after, candidates, beside_not_any, ranged=True) != "per-tag":
        return after
    return whole


def _more_than(counts: Mapping[str, int], tags: Iterable[str], most: int) -> bool:
    """Whether *tags* are on more than *most* rows together by *counts* (a tag left out: common)."""
    return _rows(counts, tags) > most


def _rows(counts: Mapping[str, int], tags: Iterable[str]) -> int:
    """The rows of *tags* together by *counts* (a tag left out: common)."""
    return sum(_count_of(counts, tag) for tag in tags)


def _rarest(counts: Mapping[str, int], tags: Iterable[str]) -> int:
    """The rows of the rarest of *tags* by *counts*."""
    return min(_count_of(counts, tag) for tag in tags)


def _lacks_one_condition(table: sa.Table, page: _Page, not_all_of: frozenset, *, each_row: bool) -> sa.ColumnElement:
    """``not-tags-any`` (guideline): one ``NOT EXISTS`` per tag, a count below *n* on PostgreSQL from three tags.

    *each_row*: beside a ``tags-any`` over fewer known candidates than
    :data:`GROUPED_MIN_CANDIDATES` (:func:`_below_grouped_min`: the
    planner's estimate, which :meth:`~tenancy_mw.tags.store.TagStore.apply`
    asks only for a ``tags-any``), PostgreSQL's ``NOT
    EXISTS`` of two tags are probes per row (``OFFSET 0``), never a hash of
    a tag's rows read whole: it checks them only on the rows the rest of
    the query lets through, but may cost the hash for the tag's every row
    (``tags=tag0004&tags-any=tag0100,tag0200&not-tags-any=tag0001,tag0006``
    over ~23,000 candidates, ``bench/tags.py``'s data: 116 ms hashing
    ``tag0006``'s 112,000 rows for 98 probes, 24 ms probed).
    """
    probed = page.probed()
    lacks_one = _lacks_one(table, probed, not_all_of)
    if len(not_all_of) > 2:
        return _DialectVariant(_count(table, probed, not_all_of) < len(not_all_of), mysql=lacks_one)
    if each_row:
        return _DialectVariant(lacks_one, postgresql=_lacks_one(table, page.each_row(), not_all_of))
    return lacks_one


def _lacks_one(table: sa.Table, page: _Page, not_all_of: frozenset) -> sa.ColumnElement:
    """An ``OR`` of one ``NOT EXISTS`` per tag of *not_all_of*."""
    return sa.or_(*[sa.not_(_has_tag(table, page, tag)) for tag in sorted(not_all_of)])


def _below_grouped_min(candidates: int | None) -> bool:
    """Whether the caller's query leaves a known number of candidates under :data:`GROUPED_MIN_CANDIDATES`."""
    return candidates is not None and candidates < GROUPED_MIN_CANDIDATES


def _middling(candidates: int) -> bool:
    """Over more candidates than :data:`PER_ROW_CANDIDATES_MAX` and fewer than :data:`GROUPED_MIN_CANDIDATES`."""
    return PER_ROW_CANDIDATES_MAX < candidates < GROUPED_MIN_CANDIDATES


def _has_tag(table: sa.Table, page: _Page, tag: str) -> sa.Exists:
    """``EXISTS (the row (resource_id, tag))``."""
    alias = table.alias()
    return page.exists(alias, alias.c.tag == tag)


def _has_any(table: sa.Table, page: _Page, tags: Iterable[str]) -> sa.Exists:
    """``EXISTS (a row of resource_id with one of tags)``."""
    alias = table.alias()
    tags = sorted(tags)
    match = alias.c.tag == tags[0] if len(tags) == 1 else alias.c.tag.in_(tags)
    return page.exists(alias, match)


def _any_is_small(all_of: frozenset, any_of: frozenset, counts: Mapping[str, int]) -> bool:
    """Whether PostgreSQL reads ``tags-any`` faster sorted whole (grouped ``IN``) than as a semi-join.

    A tag missing from *counts* counts as common.  The semi-join reads the
    tags' rows in id order and stops once the page is full, so it wins when
    they are common; beside a rare required tag, which the database drives
    from and probes, the driven form or one ``EXISTS`` per tag wins.  Sorting the set whole wins when it is
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
    rarest = _rarest(counts, all_of)
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


def _check_sets(sets: object) -> None:
    """:class:`ValueError` unless *sets* is ``None`` or a :class:`~tenancy_mw.tags.sets.TagSets` of a row count."""
    if sets is not None and not (
        isinstance(sets, TagSets) and isinstance(sets.table, sa.Table) and _is_count(sets.rows)
    ):
        raise ValueError("sets must be None or a TagSets of a table and its rows (read_tag_sets), not %r" % (sets,))


def _check_candidates(candidates: object) -> None:
    """:class:`ValueError` unless *candidates* is ``None`` or a number of rows."""
    if candidates is not None and not _is_count(candidates):
        raise ValueError("candidates must be a number of rows (an int of 0 or more), not %r" % (candidates,))


def _in_grouped(table: sa.Table, page: _Page, tags: Iterable[str]) -> sa.ColumnElement:
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
    ids = sa.select(alias.c.resource_id).where(match, alias.c.resource_id.is_not(None), *page.ids_after(alias))
    resource_id = page.resource_id
    return sa.and_(resource_id.is_not(None), resource_id.in_(ids.group_by(alias.c.resource_id)))


def _in_positive_set(table: sa.Table, page: _Page, all_of: frozenset, any_of: frozenset) -> sa.ColumnElement:
    """``resource_id IN (the ids with one of any_of and every tag of all_of, from the tag table alone)``, NULL-safe.

    PostgreSQL's form beside a rare-ish required tag: inside the tag table's
    two indexes it drives from the smaller set and probes the others, so
    the caller's rows are read only for ids that pass.
    """
    found = table.alias()
    tags = sorted(any_of)
    match = found.c.tag == tags[0] if len(tags) == 1 else found.c.tag.in_(tags)
    required = []
    for tag in sorted(all_of):
        alias = table.alias()
        # The marker here too: PostgreSQL may hash a required tag's rows
        # rather than probe them (tags 3 rare+any after marker 8: 34 ms, 10 ms with it).
        joined = [alias.c.resource_id == found.c.resource_id, alias.c.tag == tag, *page.ids_after(alias)]
        required.append(sa.exists().where(*joined).correlate_except(alias))
    ids = sa.select(found.c.resource_id).where(
        match, *required, found.c.resource_id.is_not(None), *page.ids_after(found)
    )
    resource_id = page.resource_id
    return sa.and_(resource_id.is_not(None), resource_id.in_(ids.group_by(found.c.resource_id)))


def _count(table: sa.Table, page: _Page, tags: Iterable[str]) -> sa.ScalarSelect:
    """``(SELECT count(*) of the rows of resource_id with one of tags)``."""
    alias = table.alias()
    return (
        sa.select(sa.func.count())
        .select_from(alias)
        .where(*page.rows_of(alias), alias.c.tag.in_(sorted(tags)))
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

    def self_group(self, against=None):
        # Each form grouped as SQLAlchemy groups it where the variant stands:
        # an OR inside an AND gets its parentheses, an AND inside an AND
        # none, so a form that is what a person writes compiles to the very
        # same text (the same statement, bench/tags.py).
        return _DialectVariant(
            self.default.self_group(against=against),
            mysql=self.mysql.self_group(against=against),
            postgresql=self.postgresql.self_group(against=against),
        )

    def form_for(self, dialect: sa.engine.Dialect) -> sa.ColumnElement:
        """The form *dialect* runs."""
        if is_mysql(dialect):
            return self.mysql
        if dialect.name == "postgresql":
            return self.postgresql
        return self.default


@compiles(_DialectVariant)
def _compile_dialect_variant(element: _DialectVariant, compiler, **kwargs) -> str:
    # Already grouped for where it stands (_DialectVariant.self_group).
    return compiler.process(element.form_for(compiler.dialect), **kwargs)


def count_tags(
    connection: sa.Connection,
    tags: Iterable[str],
    table: sa.Table | None = None,
    cap: int = TAG_COUNT_CAP,
) -> dict[str, int]:
    """How many resources carry each of *tags*, counting each only up to *cap*; one statement.

    Each count reads at most *cap* entries of the (tag, resource id) index,
    so a common tag costs no more than a rare one beyond that: the counts
    :func:`tag_condition` needs, for which "at least *cap*" is enough.

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
        """``{tag: estimated rows}`` for *tags*, the *counts* of :func:`tag_condition`."""
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

    Example (the counts of :func:`tag_condition`)::

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
