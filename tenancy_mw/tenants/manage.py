"""``tenancy-mw-manage tenants ...``: maintenance of the tenant registry.

``tenants purge --url URL [--retention 30d] [--dry-run]``
    Remove for good the tenants deleted more than the retention period ago
    (``30d`` by default, at most 1000 years; ``s``, ``m``, ``h``, ``d``, ``w`` units, ``0`` for
    every deleted tenant), with every move record naming them, and print
    what was removed.  A purged tenant id is unknown again (``404``) and
    may be created anew.  Run it from cron.
``tenants show --url URL TENANT_ID``
    Print one tenant's registry entry as JSON (exit 1 if unknown).

The library call behind ``purge`` is :func:`tenancy_mw.tenants.registry.purge`.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import timedelta

from tenancy_mw import manage
from tenancy_mw.tenants.registry import DEFAULT_RETENTION, TenantRegistry

__all__ = ["parse_duration", "register"]

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
    registry = TenantRegistry(manage.require_url(args))
    try:
        report = registry.purge(args.retention, dry_run=args.dry_run)
    finally:
        registry.close()
    print(("would have " if args.dry_run else "") + str(report))
    return 0


def _show(args: argparse.Namespace) -> int:
    registry = TenantRegistry(manage.require_url(args))
    try:
        tenant = registry.get(args.tenant_id)
    finally:
        registry.close()
    if tenant is None:
        raise manage.CommandError("no tenant %r" % args.tenant_id)
    print(json.dumps(dict(tenant.summary(), representation=tenant.representation), indent=2, sort_keys=True))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``tenants`` group to ``tenancy-mw-manage``."""
    group = subparsers.add_parser("tenants", help="maintain the tenant registry (tenant_admin)")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")

    purge = verbs.add_parser("purge", help="remove tenants deleted longer ago than the retention period")
    manage.add_url_argument(purge)
    purge.add_argument(
        "--retention",
        type=parse_duration,
        default=DEFAULT_RETENTION,
        help="how long a deleted tenant stays recoverable (default: 30d; units s, m, h, d, w)",
    )
    purge.add_argument("--dry-run", action="store_true", help="report what would be purged; remove nothing")
    purge.set_defaults(func=_purge)
    manage.needs_tables(purge, "tenants")

    show = verbs.add_parser("show", help="print one tenant's registry entry as JSON")
    manage.add_url_argument(show)
    show.add_argument("tenant_id")
    show.set_defaults(func=_show)
    manage.needs_tables(show, "tenants")
