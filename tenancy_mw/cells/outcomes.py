"""What the cells said about one id, and what it means: pure, no SQLAlchemy.

:class:`Found` is what :meth:`tenancy_mw.cells.lookup.CellLookup.find`
gathers from every cell; :func:`outcome` turns it into one
:class:`Resolved` record or the exception the rules of
:mod:`tenancy_mw.cells.lookup` give.  The ``id_resolver`` filter answers
from these, so they live apart from the lookup that queries databases
(which needs the ``sql`` extra); :mod:`tenancy_mw.cells.lookup` re-exports
them all.

Example::

    >>> outcome(Found(matches=[("cell1", {"id": 7})]), "services", 7, by_uuid=False)
    Resolved(cell='cell1', row={'id': 7})
    >>> outcome(Found(matches=[("cell1", {}), ("cell2", {})]), "services", 7, by_uuid=False)
    Traceback (most recent call last):
      ...
    tenancy_mw.cells.outcomes.AmbiguousId: services id 7 is in several cells: cell1, cell2
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

__all__ = [
    "AmbiguousId",
    "CellsUnavailable",
    "Found",
    "Lookup",
    "RecordNotFound",
    "ResolveError",
    "Resolved",
    "outcome",
]


class ResolveError(Exception):
    """Base of the outcomes of :meth:`~tenancy_mw.cells.lookup.CellLookup.resolve` that are not one record."""


class RecordNotFound(ResolveError):
    """No cell has the record, and every cell answered."""


class AmbiguousId(ResolveError):
    """An integer id found in several cells.

    :ivar cells: the names of the cells that have it.
    """

    def __init__(self, message: str, cells: list[str]) -> None:
        super().__init__(message)
        self.cells = cells


class CellsUnavailable(ResolveError):
    """The answer depends on cells that did not answer in time (or failed).

    :ivar cells: the names of those cells.
    """

    def __init__(self, message: str, cells: list[str]) -> None:
        super().__init__(message)
        self.cells = cells


class Resolved(NamedTuple):
    """A record found in exactly one cell: the cell's name and the row as a dict."""

    cell: str
    row: dict


@dataclass
class Found:
    """What the cells said about one id.

    :ivar matches: ``(cell, row)`` for every cell that has the record.
    :ivar unanswered: the cells that did not answer in time or failed.
    :ivar complete: False when the lookup stopped at the first match
        (a uuid) without waiting for the other cells.
    """

    matches: list[tuple[str, dict]] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    complete: bool = True


def outcome(found: Found, table: str, key: int | str, by_uuid: bool) -> Resolved:
    """The one record *found* names, or the exception the rules give.

    The rules are those of :meth:`~tenancy_mw.cells.lookup.CellLookup.resolve`: a uuid found
    anywhere is its cell; otherwise a cell that did not answer makes :class:`CellsUnavailable`,
    no match :class:`RecordNotFound` and several :class:`AmbiguousId`.
    """
    if by_uuid and found.matches:
        cell, row = found.matches[0]
        return Resolved(cell, row)
    if found.unanswered:
        raise CellsUnavailable(
            "%s %r could not be looked up: cell%s %s did not answer"
            % (table, key, "s" if len(found.unanswered) > 1 else "", ", ".join(found.unanswered)),
            found.unanswered,
        )
    if not found.matches:
        raise RecordNotFound("%s %r is in no cell" % (table, key))
    if len(found.matches) > 1:
        cells = [cell for cell, _ in found.matches]
        raise AmbiguousId("%s id %r is in several cells: %s" % (table, key, ", ".join(cells)), cells)
    cell, row = found.matches[0]
    return Resolved(cell, row)


class Lookup(Protocol):
    """What the ``id_resolver`` filter asks cells with: :class:`~tenancy_mw.cells.lookup.CellLookup` is one."""

    def find_id(
        self,
        table: str,
        ident: int | str,
        *,
        by_uuid: bool,
        id_column: str = "id",
        uuid_column: str = "uuid",
        tenant_column: str | None = None,
        tenant: str | None = None,
    ) -> Found:
        """What every cell says about *ident* in *table* (only *tenant*'s rows when *tenant_column* is set)."""
        ...

    def close(self) -> None:
        """Release what the lookup holds (threads, connections)."""
        ...
