"""The house's rules (``doc/contributing.rst``, "The house"), checked on the source.

- No function or method spans more than :data:`LONGEST` lines, from its
  ``def`` line to its last line.
- Each capability package that serves requests has its filter (a
  ``paste.filter_factory`` entry point), and no module takes another
  capability's private (underscore) names.
- Every ``tenancy-mw-manage`` verb is registered through a capability's
  ``manage`` module, all of them found by :data:`tenancy_mw.manage.VERB_MODULES`.
- SQLAlchemy is imported in one place, :mod:`tenancy_mw.core.sql`; every
  other module takes it from there, so a missing ``sql`` extra is named one
  way (:class:`~tenancy_mw.extras.MissingExtra`).

Read with :mod:`ast`, nothing imported but :mod:`tenancy_mw.manage`.
"""

from __future__ import annotations

import ast
import configparser
import re
from collections.abc import Iterator
from pathlib import Path

from tenancy_mw import manage

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tenancy_mw"
#: The most lines a function may span.
LONGEST = 60
#: Packages that are not capabilities with a filter: the core under them, the recipe, the migrations, the OpenAPI
#: descriptions.
NOT_FILTER_PACKAGES = {"core", "paste_deploy", "migrations", "openapi"}


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _where(path: Path) -> str:
    return str(path.relative_to(REPO))


def _owner(module: str) -> str:
    """The part of the house *module* (dotted) belongs to: its capability package, or the package face."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else "tenancy_mw"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _capabilities() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())


# --- one job per function ---------------------------------------------------------------------


def test_no_function_spans_more_than_60_lines():
    offenders = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                span = node.end_lineno - node.lineno + 1
                if span > LONGEST:
                    offenders.append("%s:%d %s (%d lines)" % (_where(path), node.lineno, node.name, span))
    assert not offenders, "functions over %d lines (split them along their seams):\n%s" % (
        LONGEST,
        "\n".join(offenders),
    )


# --- a package per capability -----------------------------------------------------------------


def _filter_entry_points() -> dict[str, str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = config["options.entry_points"]["paste.filter_factory"].strip().splitlines()
    return dict((part.strip() for part in line.split("=", 1)) for line in lines)


def test_each_capability_package_has_its_filter():
    owners = {name: _owner(target.split(":")[0]) for name, target in _filter_entry_points().items()}
    assert "tenancy_mw" not in owners.values(), "a filter outside the capability packages: %s" % owners
    without = [c for c in _capabilities() if c not in NOT_FILTER_PACKAGES and c not in owners.values()]
    assert not without, "capability packages without a filter: %s" % without


def _private_names_taken(module: str, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``(line, dotted name)`` of each private name *module* takes from another part of the house."""
    mine = _owner(module)
    aliases: dict[str, str] = {}  # local name -> the tenancy_mw module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tenancy_mw"):
            for alias in node.names:
                full = "%s.%s" % (node.module, alias.name)
                aliases[alias.asname or alias.name] = full
                if _is_private(alias.name) and _owner(full if (PACKAGE / alias.name).is_dir() else node.module) != mine:
                    yield node.lineno, full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tenancy_mw.") and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _is_private(node.attr):
            target = aliases.get(node.value.id)
            if target and _owner(target) != mine:
                yield node.lineno, "%s.%s" % (target, node.attr)


def test_no_module_takes_another_capabilitys_private_names():
    offenders = []
    for path, tree in _modules():
        module = _module_name(path)
        offenders += ["%s:%d %s" % (_where(path), line, name) for line, name in _private_names_taken(module, tree)]
    assert not offenders, "private names taken across capabilities (make them public, or move them):\n%s" % (
        "\n".join(offenders)
    )


# --- one way to add a console verb ------------------------------------------------------------


def _adds_parsers(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_parser"
        for node in ast.walk(tree)
    )


def _register_sources(tree: ast.Module) -> set[str]:
    """The modules a ``manage`` module takes its ``register`` from (itself, when it defines it)."""
    found = {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    return {
        module
        for module in found
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == module and any(a.name == "register" for a in node.names)
    }


def test_verb_modules_are_the_capabilities_manage_modules():
    assert all(re.fullmatch(r"tenancy_mw\.\w+\.manage", name) for name in manage.VERB_MODULES), manage.VERB_MODULES
    on_disk = {_module_name(path) for path in PACKAGE.glob("*/manage.py")}
    assert set(manage.VERB_MODULES) == on_disk, "every <capability>/manage.py is in VERB_MODULES, and only those"
    for name in manage.VERB_MODULES:
        tree = ast.parse((REPO / (name.replace(".", "/") + ".py")).read_text())
        defines = any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body)
        assert defines or _register_sources(tree), "%s has no register(subparsers)" % name


def test_verbs_are_added_only_through_a_manage_module():
    allowed = set(manage.VERB_MODULES)
    for name in manage.VERB_MODULES:
        allowed |= _register_sources(ast.parse((REPO / (name.replace(".", "/") + ".py")).read_text()))
    elsewhere = [_where(path) for path, tree in _modules() if _adds_parsers(tree) and _module_name(path) not in allowed]
    assert not elsewhere, "verbs added outside the capabilities' manage modules: %s" % elsewhere
    assert "tenancy_mw.manage" not in allowed  # the command finds verbs; it holds none


# --- one way to import SQLAlchemy --------------------------------------------------------------


def _imported_modules(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def test_sqlalchemy_is_imported_only_by_the_core_sql_module():
    found = [
        "%s:%d imports %s" % (_where(path), line, name)
        for path, tree in _modules()
        if path != PACKAGE / "core" / "sql.py"
        for line, name in _imported_modules(tree)
        if name == "sqlalchemy" or name.startswith("sqlalchemy.")
    ]
    assert not found, "import SQLAlchemy from tenancy_mw.core.sql instead: %s" % found
