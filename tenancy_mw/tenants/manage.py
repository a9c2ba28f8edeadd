"""``tenancy-mw-manage tenants ...``: maintenance of the tenant registry.

``tenants purge --paste FILE#PIPELINE [--retention 30d] [--dry-run]``
    Remove for good the tenants deleted more than the retention period ago
    (``30d`` by default, at most 1000 years; ``s``, ``m``, ``h``, ``d``, ``w`` units, ``0`` for
    every deleted tenant): the service's resources of each, then its
    registry row and every move record naming it; print what was removed.
    A purged tenant id is unknown again (``404``) and may be created anew,
    empty.  Run it from cron, from the folder the service runs in.

    ``--paste`` names the service's paste file and the pipeline that
    serves the admin API (``api-paste.ini#admin``): the command loads it
    as the server does (the working folder importable, as under
    gunicorn), and takes the registry (``connection``) and the service's
    :class:`~tenancy_mw.tenants.removal.TenantRemoval` (``move_provider``)
    from its ``tenant_admin`` filter.  So it needs PasteDeploy, which the
    service has.  A service that removes deleted tenants' resources itself
    purges the registry alone with ``--url URL --registry-only``; with
    neither, the command refuses (exit 2) rather than forget tenants whose
    resources stay for the next holder of the id to see.

    Safe to stop at any point and to run twice at once: a tenant is marked
    purging first, its resources removed next (under its row lock, while
    it is still marked), its row last; the next run finishes tenants a
    stopped one left marked.  Exit 1 when the service's
    removal failed for a tenant (it stays marked; the next run retries).

    With the pipeline's ``tenant_admin`` sharing tenant states through
    memcached (``state_memcached_servers``), every worker sees the purge on
    its next request; with ``--registry-only``, give the same servers as
    ``--state-memcached-servers``.  A failure to tell memcached is logged;
    the purge stands.
``tenants show --url URL TENANT_ID``
    Print one tenant's registry entry as JSON (exit 1 if unknown).

The library call behind ``purge`` is :meth:`tenancy_mw.tenants.registry.TenantRegistry.purge`.

For tests only: ``$TENANCY_MW_TEST_PURGE_STOP_AT`` set to a step of
:data:`~tenancy_mw.tenants.registry.PURGE_STEPS` makes ``purge`` stop
after that step of its first tenant, say so on standard error, and wait
to be killed (the tests kill it there and run it again).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

from tenancy_mw import manage
from tenancy_mw.tenants.registry import DEFAULT_RETENTION, PURGE_STEPS, TenantRegistry
from tenancy_mw.tenants.removal import TenantRemoval
from tenancy_mw.tenants.shared_state import SharedTenantStates

if TYPE_CHECKING:
    from tenancy_mw.tenants.admin.filter import TenantAdmin

__all__ = ["STOP_AT_ENV", "parse_duration", "pipeline_admin", "register"]

#: For tests only: the purge step (of :data:`~tenancy_mw.tenants.registry.PURGE_STEPS`) to stop after.
STOP_AT_ENV = "TENANCY_MW_TEST_PURGE_STOP_AT"

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
#: The longest retention: deletions older than that cannot have happened.
_LONGEST = timedelta(days=1000 * 365)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """``"30d"`` -> ``timedelta(days=30)``; units ``s m h d w``; ``"0"`` is zero.

    Example::

        >>> parse_duration("36h")
        datetime.timedelta(days=1, seconds=43200)
    """
    if text.strip() == "0":
        return timedelta(0)
    match = _DURATION.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(
            "%r is not a duration such as 30d, 12h, 90m or 0 (units: s, m, h, d, w)" % text
        )
    try:
        duration = timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
    except OverflowError:
        duration = _LONGEST + _LONGEST
    if duration > _LONGEST:
        raise argparse.ArgumentTypeError("%r is longer than %d years" % (text, _LONGEST.days // 365))
    return duration


def _purge(args: argparse.Namespace) -> int:
    registry, removal, close = _purge_target(args)
    try:
        report = registry.purge(args.retention, dry_run=args.dry_run, removal=removal, on_step=_stop_hook())
    finally:
        close()
    print(("would have " if args.dry_run else "") + str(report))
    return 1 if report.failed else 0


def _purge_target(args: argparse.Namespace) -> tuple[TenantRegistry, TenantRemoval | None, Callable[[], None]]:
    """The registry and removal ``purge`` works with, and what closes them; a usage error exits 2."""
    if args.paste:
        if args.registry_only:
            args.usage_error("--registry-only purges the registry alone: give it --url, not --paste")
        if args.state_memcached_servers:
            args.usage_error("--state-memcached-servers is for --registry-only: with --paste the pipeline's are used")
        admin = pipeline_admin(args.paste)
        _check_same_registry(args.url, admin.registry)
        return admin.registry, admin.removal, admin.close
    if not args.registry_only:
        args.usage_error(
            "purge deletes the service's resources of each purged tenant through its TenantRemoval: give --paste "
            "FILE#PIPELINE (the paste pipeline whose tenant_admin names it in move_provider), or --url URL "
            "--registry-only if the service removes deleted tenants' resources itself"
        )
    shared = _shared_states(args)
    registry = TenantRegistry(manage.require_url(args), on_change=shared.announce if shared else None)

    def close() -> None:
        registry.close()
        if shared is not None:
            shared.close()

    return registry, None, close


def _check_same_registry(url: str | None, registry: TenantRegistry) -> None:
    """Refuse a ``--url`` (or ``$TENANCY_MW_DATABASE_URL``) naming another registry than the pipeline's."""
    from tenancy_mw.core.sql import sa

    if url and sa.engine.make_url(url) != registry.engine.url:
        raise manage.CommandError(
            "--url (or $%s) names another database than the pipeline's tenant_admin connection (%s); leave it out"
            % (manage.DATABASE_URL_ENV, registry.engine.url.render_as_string(hide_password=True))
        )


def pipeline_admin(spec: str) -> TenantAdmin:
    """The ``tenant_admin`` of the paste pipeline *spec* (``FILE#NAME``; ``main`` without ``#``) with a removal.

    The pipeline is loaded as a server loads it, the working folder
    importable (as gunicorn makes it).  Raises
    :class:`~tenancy_mw.manage.CommandError` naming what is missing.
    """
    from tenancy_mw.tenants.admin.filter import TenantAdmin

    path, _, name = spec.partition("#")
    name = name or "main"
    try:
        from paste.deploy import loadapp
    except ImportError:
        raise manage.CommandError("--paste loads the service's pipeline with PasteDeploy: install it") from None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        app = loadapp("config:" + os.path.abspath(path), name=name)
    except (LookupError, ImportError, ValueError) as exc:
        raise manage.CommandError("cannot load pipeline %r of %s: %s" % (name, path, exc)) from None
    admins = [found for found in _apps_in(app) if isinstance(found, TenantAdmin) and found.admin_api]
    for admin in admins:
        if admin.removal is not None:
            return admin
    raise manage.CommandError(
        "pipeline %r of %s has no tenant_admin (admin_api = true) whose move_provider is a "
        "tenancy_mw.tenants.removal.TenantRemoval (%d tenant_admin found); name the admin pipeline, or purge "
        "with --url URL --registry-only" % (name, path, len(admins))
    )


def _apps_in(app: object) -> Iterator[object]:
    """*app* and every app it wraps: ``application`` (filters) and ``applications`` (paste's urlmap)."""
    stack, seen = [app], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        inner = getattr(current, "application", None)
        if inner is not None:
            stack.append(inner)
        for entry in getattr(current, "applications", None) or ():
            if isinstance(entry, tuple) and len(entry) == 2:
                stack.append(entry[1])


def _stop_hook() -> Callable[[str, str], None] | None:
    """For tests only (:data:`STOP_AT_ENV`): stop after a named purge step, and wait to be killed."""
    wanted = os.environ.get(STOP_AT_ENV)
    if not wanted:
        return None
    if wanted not in PURGE_STEPS:
        raise manage.CommandError("$%s is %r, not one of %s" % (STOP_AT_ENV, wanted, ", ".join(PURGE_STEPS)))

    def stop(step: str, tenant_id: str) -> None:
        if step == wanted:
            print("tenancy-mw-manage: stopped after step %s of tenant %r" % (step, tenant_id), file=sys.stderr)
            sys.stderr.flush()
            while True:
                time.sleep(60)

    return stop


def _shared_states(args: argparse.Namespace) -> SharedTenantStates | None:
    """The memcached client of ``--state-memcached-servers``, or ``None``: registry writers tell it what changed."""
    servers = [server.strip() for server in (args.state_memcached_servers or "").split(",") if server.strip()]
    if not servers:
        return None
    try:
        return SharedTenantStates(servers)
    except ValueError as exc:
        raise manage.CommandError("--state-memcached-servers: %s" % exc) from None


def _show(args: argparse.Namespace) -> int:
    registry = TenantRegistry(manage.require_url(args))
    try:
        tenant = registry.get(args.tenant_id)
    finally:
        registry.close()
    if tenant is None:
        raise manage.CommandError("no tenant %r" % args.tenant_id)
    purge_started = tenant.purge_started.strftime("%Y-%m-%dT%H:%M:%SZ") if tenant.purge_started else None
    shown = dict(tenant.summary(), representation=tenant.representation, purge_started=purge_started)
    print(json.dumps(shown, indent=2, sort_keys=True))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``tenants`` group to ``tenancy-mw-manage``."""
    group = subparsers.add_parser("tenants", help="maintain the tenant registry (tenant_admin)")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")

    purge = verbs.add_parser(
        "purge", help="remove tenants deleted longer ago than the retention period, and their resources"
    )
    purge.add_argument(
        "--paste",
        metavar="FILE#PIPELINE",
        help="the service's paste file and its admin pipeline (e.g. api-paste.ini#admin): its tenant_admin's "
        "registry and move_provider (a TenantRemoval) are used; run from the folder the service runs in",
    )
    manage.add_url_argument(purge)
    purge.add_argument(
        "--registry-only",
        action="store_true",
        help="with --url: forget the tenants in the registry only (the service removes their resources itself)",
    )
    purge.add_argument(
        "--retention",
        type=parse_duration,
        default=DEFAULT_RETENTION,
        help="how long a deleted tenant stays recoverable (default: 30d; units s, m, h, d, w)",
    )
    purge.add_argument("--dry-run", action="store_true", help="report what would be purged; remove nothing")
    purge.add_argument(
        "--state-memcached-servers",
        metavar="HOST:PORT,...",
        help="with --registry-only: tenant_admin's state_memcached_servers, to tell every worker of the purge at "
        "once (with --paste, the pipeline's own are used)",
    )
    purge.set_defaults(func=_purge, usage_error=purge.error)
    manage.needs_tables(purge, "tenants")

    show = verbs.add_parser("show", help="print one tenant's registry entry as JSON")
    manage.add_url_argument(show)
    show.add_argument("tenant_id")
    show.set_defaults(func=_show)
    manage.needs_tables(show, "tenants")
