"""``tenancy-mw-manage paste``: the recipe and the checker as commands.

``paste add --service nova|cinder [--endpoint public|admin] PASTE_FILE [--output FILE] [--set FILTER.OPTION=VALUE ...]``
    Print *PASTE_FILE* with the tenancy_mw filters added
    (:func:`~tenancy_mw.paste_deploy.add_filters`), or write it to
    ``--output`` (which may be *PASTE_FILE* itself).  Exit 1 when the file
    does not fit the recipe, 2 on a usage error (a bad ``--set``, a file
    that cannot be read).
``paste check PASTE_FILE [--auth-strategy NAME|all]``
    One line per finding (:func:`~tenancy_mw.paste_deploy.check`); exit 0
    when there is none, 1 when there are, 2 on a usage error or a file
    paste could not read.

    >>> import contextlib, io
    >>> from tenancy_mw.manage import main
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     status = main(["paste", "check", "/nonexistent/api-paste.ini"])
    >>> status
    2
    >>> print(err.getvalue(), end="")
    tenancy-mw-manage: cannot read /nonexistent/api-paste.ini: No such file or directory
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile

from tenancy_mw.paste_deploy.check import check
from tenancy_mw.paste_deploy.ini import PasteFileError
from tenancy_mw.paste_deploy.recipe import RECIPES, RecipeError, SettingError, add_filters, parse_settings

__all__ = ["register"]


def _fail(message: str, status: int) -> int:
    print("tenancy-mw-manage: %s" % message, file=sys.stderr)
    return status


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise PasteFileError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc)) from None


def _write(path: str, text: str) -> None:
    """Write *path* whole or not at all (a half-written api-paste.ini would stop the service).

    A file written over keeps its mode, owner and group (the service may
    read it under its own user); a symlink stays one, its target rewritten.
    """
    path = os.path.realpath(path)
    try:
        original: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        original = None
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tenancy-mw-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        if original is not None:
            _keep_owner(temporary, original)
        # After chown, which may clear set-id bits.
        os.chmod(temporary, stat.S_IMODE(original.st_mode) if original else 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _keep_owner(path: str, original: os.stat_result) -> None:
    """Give *path* the owner and group of *original*: root may; others may keep a group they are in."""
    if os.geteuid() == 0:
        os.chown(path, original.st_uid, original.st_gid)
    elif original.st_gid != os.getegid():
        with contextlib.suppress(PermissionError):
            os.chown(path, -1, original.st_gid)


def _add(args: argparse.Namespace) -> int:
    try:
        settings = parse_settings(args.set or [])
        result = add_filters(
            _read(args.paste_file), args.service, endpoint=args.endpoint, settings=settings, source=args.paste_file
        )
    except (SettingError, PasteFileError) as exc:
        return _fail(str(exc), 2)
    except RecipeError as exc:
        return _fail(str(exc), 1)
    if args.output:
        try:
            _write(args.output, result)
        except OSError as exc:
            return _fail("cannot write %s: %s" % (args.output, exc.strerror or exc), 1)
    else:
        sys.stdout.write(result)
    return 0


def _check(args: argparse.Namespace) -> int:
    try:
        findings = check(_read(args.paste_file), auth_strategy=args.auth_strategy, source=args.paste_file)
    except PasteFileError as exc:
        return _fail(str(exc), 2)
    for finding in findings:
        print(finding)
    return 1 if findings else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``paste`` group to ``tenancy-mw-manage``."""
    group = subparsers.add_parser("paste", help="add the filters to a service's api-paste.ini, and check one")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")

    add = verbs.add_parser("add", help="add the filters to nova's or cinder's own api-paste.ini")
    add.add_argument("--service", required=True, choices=sorted(RECIPES))
    add.add_argument("--endpoint", default="public", choices=["public", "admin"], help="default: public")
    add.add_argument("paste_file", metavar="PASTE_FILE")
    add.add_argument("--output", metavar="FILE", help="write the result here (default: standard output)")
    add.add_argument(
        "--set",
        action="append",
        metavar="FILTER.OPTION=VALUE",
        help="an option of one of the added filters, e.g. idempotency.backend=memcached; repeat for several",
    )
    add.set_defaults(func=_add)

    check_verb = verbs.add_parser("check", help="report what a paste file does wrong with the filters")
    check_verb.add_argument("paste_file", metavar="PASTE_FILE")
    check_verb.add_argument(
        "--auth-strategy",
        default="keystone",
        metavar="NAME",
        help="the pipeline each auth-strategy composite runs (the service's auth_strategy; default: "
        "keystone), or 'all' for every one",
    )
    check_verb.set_defaults(func=_check)
