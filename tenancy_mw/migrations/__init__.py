"""The Alembic environment of every table tenancy_mw owns.

One environment, one branch per component: each component (the tenant
registry, the idempotency store, the tag table, ...) keeps its migrations in
``versions/<component>/`` and its first migration carries the branch label
``<component>``.  A service applies only the components it uses, and its own
Alembic history is never touched: tenancy_mw records its revisions in a
table of its own, :data:`VERSION_TABLE`.

From the command line (``tenancy-mw-manage``, :mod:`tenancy_mw.manage`)::

    tenancy-mw-manage db upgrade --url postgresql+psycopg2://nova@db/nova
    tenancy-mw-manage db upgrade --url ... --component tenants --component tags
    tenancy-mw-manage db current --url ...

From Python::

    from tenancy_mw import migrations
    migrations.upgrade("sqlite:////var/lib/svc/tenancy.sqlite")            # every component
    migrations.upgrade(url, components=["tenants"])                        # one
    migrations.current(url)        # {"tenants": "<revision>", ...}
    migrations.downgrade(url, "tenants")                                   # drop its tables

A new component: make ``versions/<name>/`` (with an empty ``__init__.py``,
so the package ships it) and put its first migration there with
``branch_labels = ("<name>",)`` and ``down_revision = None``; later ones
chain on it.  Column types come from :mod:`tenancy_mw.core.sql` so identifiers
compare exactly on every backend.  See ``README.rst`` beside this file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tenancy_mw.extras import missing_extra

try:
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
except ImportError as exc:
    raise missing_extra("sql", __name__, exc) from exc

from tenancy_mw.core import sql
from tenancy_mw.core.sql import URL, make_url

__all__ = [
    "VERSION_TABLE",
    "MigrationError",
    "components",
    "current",
    "downgrade",
    "upgrade",
]

#: The table tenancy_mw records its applied revisions in (never ``alembic_version``,
#: which the service's own migrations may use).
VERSION_TABLE = "tenancy_mw_version"

#: Where this environment lives; components are the folders of ``versions/``.
HERE = os.path.dirname(os.path.abspath(__file__))


class MigrationError(ValueError):
    """A migration request that cannot be carried out (an unknown component, say)."""


def _versions_dir() -> str:
    return os.path.join(HERE, "versions")


def components() -> list[str]:
    """The components that ship migrations, sorted: the folders of ``versions/``.

    Example::

        >>> isinstance(components(), list)
        True
    """
    root = _versions_dir()
    return sorted(
        name
        for name in os.listdir(root)
        if not name.startswith(("_", ".")) and os.path.isdir(os.path.join(root, name))
    )


def _config(url: str | URL, connection=None) -> Config:
    config = Config()
    config.set_main_option("script_location", HERE)
    # Every component's folder, so the revision graph is always whole; which
    # branches are applied is chosen per command.
    locations = [os.path.join(_versions_dir(), name) for name in components()]
    config.set_main_option("version_locations", os.pathsep.join(locations) or _versions_dir())
    config.set_main_option("path_separator", "os")
    # The URL goes in attributes, not the ini options: configparser would
    # read a '%' of a password as interpolation.
    config.attributes["url"] = make_url(url)
    config.attributes["connection"] = connection
    return config


def _check(names: Iterable[str] | None) -> list[str]:
    known = components()
    if names is None:
        return known
    names = list(names)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise MigrationError(
            "unknown component%s %s; the components are: %s"
            % ("s" if len(unknown) > 1 else "", ", ".join(map(repr, unknown)), ", ".join(known) or "(none)")
        )
    return names


def upgrade(url: str | URL, components: Iterable[str] | None = None, sql_only: bool = False) -> list[str]:
    """Bring *components* (default: all) to their newest revision in the database at *url*.

    Returns the components upgraded.  With *sql_only*, nothing is run: the
    SQL is written to standard output (Alembic's offline mode), for a DBA.
    Safe to run again: an up-to-date component is left as it is.
    """
    names = _check(components)
    config = _config(url)
    for name in names:
        command.upgrade(config, "%s@head" % name, sql=sql_only)
    return names


def downgrade(url: str | URL, component: str, revision: str = "base") -> None:
    """Take *component* back to *revision*; ``base`` (the default) drops its tables."""
    (name,) = _check([component])
    target = "%s@%s" % (name, revision) if revision == "base" else revision
    command.downgrade(_config(url), target)


def current(url: str | URL) -> dict[str, str]:
    """The revision each applied component is at, ``{component: revision}``.

    A component that was never applied is not in the result.
    """
    engine = sql.create_engine(url)
    try:
        with engine.connect() as conn:
            heads = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_heads()
    finally:
        engine.dispose()
    script = ScriptDirectory.from_config(_config(url))
    result = {}
    for head in heads:
        labels = set()
        for revision in script.iterate_revisions(head, "base"):
            labels |= set(revision.branch_labels)
        name = next((label for label in labels if label in components()), head)
        result[name] = head
    return dict(sorted(result.items()))
