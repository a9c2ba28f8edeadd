"""Give every row without a uuid a new one, in every cell: an online data migration.

The uuids spec adds a nullable ``uuid`` column to tables whose rows predate
it and asks for "online data migrations to add uuids to existing records
during an upgrade".  :func:`backfill_uuids` (and ``tenancy-mw-manage ids
backfill``) is that migration, for any table of the service's cell
databases.

Safe while the service is serving
    Rows are handled in batches of ``batch_size``, in id order, each batch
    one short transaction.  Each row is set with ``UPDATE table SET uuid =
    :new WHERE id = :id AND uuid IS NULL``: a row that got a uuid in the
    meantime (from the service, or from a second backfill running at the
    same time) is left alone, so no row ever gets two uuids, and a uuid a
    client may already have seen never changes.  The database's row lock
    makes the second writer wait for the first and then find the uuid set.
    No table is locked; no DDL runs.  Ids are bound parameters; table and
    column names are quoted by SQLAlchemy.

What it reports
    Per cell: how many rows it gave a uuid (:attr:`BackfillResult.updated`)
    and how many still have none when it finished
    (:attr:`BackfillResult.remaining`: rows written meanwhile without a
    uuid, or a failure).  Two backfills run at once report updates that add
    up to the rows that lacked a uuid.  A cell that fails is reported with
    its error; the others are still done.

From the command line::

    tenancy-mw-manage ids backfill --cells "cell1=postgresql+psycopg2://nova@db1/nova, cell2=..." \\
        --table services [--id-column id] [--uuid-column uuid] [--batch-size 200]

From Python::

    >>> from tenancy_mw.cells.backfill import backfill_uuids
    >>> import sqlalchemy as sa, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "cell1.sqlite")
    >>> engine = sa.create_engine("sqlite:///" + path)
    >>> with engine.begin() as conn:
    ...     _ = conn.exec_driver_sql("CREATE TABLE services (id INTEGER PRIMARY KEY, uuid VARCHAR(36))")
    ...     _ = conn.exec_driver_sql("INSERT INTO services (id) VALUES (1), (2), (3)")
    >>> engine.dispose()
    >>> [(r.cell, r.updated, r.remaining) for r in backfill_uuids({"cell1": "sqlite:///" + path}, "services")]
    [('cell1', 3, 0)]
"""

from __future__ import annotations

import argparse
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tenancy_mw.cells.ids import SpecError, check_names, parse_cells
from tenancy_mw.core import sql  # first: without the sql extra, it names it
from tenancy_mw.core.sql import error_summary, sa

__all__ = ["CELLS_ENV", "BackfillResult", "backfill_table", "backfill_uuids", "register"]

# The logger keeps its 0.1 name, which operators route on (doc/configuration.rst).
LOG = logging.getLogger("tenancy_mw.uuid_backfill")

#: Environment variable read when ``--cells`` is not given.
CELLS_ENV = "TENANCY_MW_CELLS"

#: A deadlock or lock timeout makes a batch start over, at most this many times.
_BATCH_ATTEMPTS = 5


@dataclass
class BackfillResult:
    """What a backfill did in one cell.

    :ivar cell: the cell's name.
    :ivar updated: rows given a uuid by this run.
    :ivar remaining: rows without a uuid when it finished (``None`` if it failed).
    :ivar error: the failure's one-line message, or ``None``.
    """

    cell: str
    updated: int = 0
    remaining: int | None = None
    error: str | None = None


def backfill_table(
    engine: sa.Engine,
    table: str,
    *,
    id_column: str = "id",
    uuid_column: str = "uuid",
    batch_size: int = 100,
    new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> tuple[int, int]:
    """Give every row of *table* in *engine*'s database that has no uuid a new one.

    Returns ``(updated, remaining)``; see the module documentation.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    check_names(table, id_column, uuid_column)
    schema, _, name = table.rpartition(".")
    tbl = sa.table(name, sa.column(id_column), sa.column(uuid_column), schema=schema or None)
    ident, uuid_col = tbl.c[id_column], tbl.c[uuid_column]
    first = sa.select(ident).where(uuid_col.is_(None)).order_by(ident).limit(batch_size)
    after = first.where(ident > sa.bindparam("after"))
    update = (
        sa.update(tbl)
        .where(ident == sa.bindparam("row_id"), uuid_col.is_(None))
        .values({uuid_column: sa.bindparam("new_uuid", type_=sa.String(36))})
    )
    updated = 0
    last = None
    while True:
        for attempt in range(1, _BATCH_ATTEMPTS + 1):
            try:
                with engine.begin() as conn:
                    if last is None:
                        ids = conn.execute(first).scalars().all()
                    else:
                        ids = conn.execute(after, {"after": last}).scalars().all()
                    done = 0
                    for row_id in ids:
                        result = conn.execute(update, {"row_id": row_id, "new_uuid": new_uuid()})
                        done += result.rowcount
                break
            except sa.exc.OperationalError as exc:
                # Deadlock or lock wait timeout against the service's own writes: this batch again.
                if attempt == _BATCH_ATTEMPTS or not sql.is_retryable(exc, lock_wait=True):
                    raise
                LOG.info("backfill of %s: batch after %r met a lock conflict, trying again", table, last)
        if not ids:
            break
        updated += done
        last = ids[-1]
    with engine.connect() as conn:
        remaining = conn.execute(sa.select(sa.func.count()).select_from(tbl).where(uuid_col.is_(None))).scalar_one()
    return updated, remaining


def backfill_uuids(
    cells: Mapping[str, str] | str,
    table: str,
    *,
    id_column: str = "id",
    uuid_column: str = "uuid",
    batch_size: int = 100,
) -> list[BackfillResult]:
    """:func:`backfill_table` in every cell, one after another; a failing cell does not stop the others.

    *cells* is ``{name: url}`` or the ``cells`` option's text.  Raises
    :class:`~tenancy_mw.cells.ids.SpecError` for a bad cell list or name.
    """
    check_names(table, id_column, uuid_column)
    results = []
    for name, url in parse_cells(cells).items():
        result = BackfillResult(name)
        engine = sql.create_engine(url)
        try:
            result.updated, result.remaining = backfill_table(
                engine, table, id_column=id_column, uuid_column=uuid_column, batch_size=batch_size
            )
        except sa.exc.SQLAlchemyError as exc:
            result.error = error_summary(exc)
            LOG.warning("backfill of %s in cell %s failed: %s", table, name, result.error)
        finally:
            engine.dispose()
        results.append(result)
    return results


def _ids_backfill(args: argparse.Namespace) -> int:
    from tenancy_mw.manage import CommandError

    if not args.cells:
        raise CommandError("no cells: give --cells 'name=URL, ...' or set $%s" % CELLS_ENV)
    try:
        results = backfill_uuids(
            args.cells, args.table, id_column=args.id_column, uuid_column=args.uuid_column, batch_size=args.batch_size
        )
    except SpecError as exc:
        raise CommandError(str(exc)) from None
    failed = False
    for result in results:
        if result.error:
            failed = True
            print("%s: failed after giving %d rows a uuid: %s" % (result.cell, result.updated, result.error))
        else:
            print("%s: %d rows given a uuid, %s left without one" % (result.cell, result.updated, result.remaining))
    print("total: %d rows given a uuid in %d cells" % (sum(r.updated for r in results), len(results)))
    return 1 if failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``ids backfill`` to ``tenancy-mw-manage``."""
    group = subparsers.add_parser("ids", help="resource ids across cell databases")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")
    backfill = verbs.add_parser(
        "backfill",
        help="give every row without a uuid a new one, in batches, in every cell (safe while serving)",
    )
    backfill.add_argument(
        "--cells",
        default=os.environ.get(CELLS_ENV),
        help="the cell databases, 'name=URL, name=URL' (default: $%s)" % CELLS_ENV,
    )
    backfill.add_argument("--table", required=True, help="the table, e.g. services")
    backfill.add_argument("--id-column", default="id", help="its integer id column (default: id)")
    backfill.add_argument("--uuid-column", default="uuid", help="its uuid column (default: uuid)")
    backfill.add_argument("--batch-size", type=_positive, default=100, help="rows per transaction (default: 100)")
    backfill.set_defaults(func=_ids_backfill)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not an integer" % text) from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
