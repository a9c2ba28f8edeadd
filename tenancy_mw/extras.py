"""Optional dependencies ("extras") and the import error that names them.

A dependency that only some parts of the library need and that is heavy
is an extra (setup.cfg ``[options.extras_require]``) instead of a hard
requirement: today ``sql`` (SQLAlchemy and alembic, for the SQL-backed
stores, the migrations and ``tenancy-mw-manage``).  A module that needs
one imports it like this, so a pipeline that loads a filter built on it
fails with the command that fixes it:

.. code-block:: python
   :class: template

    try:
        import sqlalchemy as sa
    except ImportError as exc:
        raise missing_extra("sql", __name__, exc) from exc

Nothing here imports WSGI machinery.

    >>> error = missing_extra("sql", "tenancy_mw.core.sql", ImportError(name="sqlalchemy"))
    >>> print(error)
    tenancy_mw.core.sql needs 'sqlalchemy', which is not installed: pip install 'tenancy_mw[sql]'
"""

from __future__ import annotations

__all__ = ["MissingExtra", "missing_extra"]


class MissingExtra(ImportError):
    """An optional dependency is missing; the message names the extra that brings it."""


def missing_extra(extra: str, needed_by: str, exc: ImportError) -> MissingExtra:
    """The :class:`MissingExtra` for *needed_by* (a module), which failed to import with *exc*."""
    return MissingExtra(
        "%s needs %r, which is not installed: pip install 'tenancy_mw[%s]'" % (needed_by, exc.name, extra),
        name=exc.name,
    )
