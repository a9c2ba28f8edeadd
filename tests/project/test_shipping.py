"""What ships with every filter, and what the package promises about itself.

These tests are generic: a filter added to ``tenancy_mw/opts.py`` FILTERS
or as a ``paste.filter_factory`` entry point fails here, naming what is
missing, until it has everything ``doc/contributing.rst`` lists.
"""

from __future__ import annotations

import ast
import configparser
import importlib
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import tenancy_mw
from tenancy_mw import opts

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tenancy_mw"
FILTERS = {cls.opt_group: cls for cls in opts.FILTERS}
SETUP_CFG = configparser.ConfigParser()
SETUP_CFG.read(REPO / "setup.cfg")


def _entry_points(group: str) -> dict[str, str]:
    lines = SETUP_CFG["options.entry_points"][group].strip().splitlines()
    return dict((part.strip() for part in line.split("=", 1)) for line in lines if line.strip())


def _requirements(text: str) -> list[Requirement]:
    return [Requirement(line) for line in text.strip().splitlines() if line.strip() and not line.startswith("#")]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_paste_filter_is_listed_for_the_generator():
    assert set(_entry_points("paste.filter_factory")) == set(FILTERS)


def _options_module(name: str) -> str:
    """The module filter *name*'s ``oslo.config.opts`` namespace names: it offers ``list_opts`` and ``set_defaults``."""
    return _entry_points("oslo.config.opts")["tenancy_mw.%s" % name].split(":")[0]


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_module_offers_set_defaults_and_list_opts(name):
    path = _options_module(name)
    module = importlib.import_module(path)
    for function in ("set_defaults", "list_opts"):
        assert callable(getattr(module, function, None)), "%s.%s is missing" % (path, function)
        assert function in module.__all__, "add %r to %s.__all__" % (function, path)
    # The namespace keeps the filter's name wherever its module lives, in the filter's package.
    assert _entry_points("oslo.config.opts").get("tenancy_mw.%s" % name) == "%s:list_opts" % path
    assert FILTERS[name].__module__.rsplit(".", 1)[0] in path


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_has_its_page_made_from_the_code(name):
    pages = [p for p in (REPO / "doc").glob("*.rst") if ".. show-options:: tenancy_mw.%s\n" % name in p.read_text()]
    assert pages, "no page in doc/ shows the options of %s (doc/%s.rst, with .. show-options::)" % (name, name)
    page = pages[0]
    text = page.read_text()
    modules = {FILTERS[name].__module__, _options_module(name)}  # a filter package: either
    assert any(".. automodule:: %s\n" % module in text for module in modules), "no automodule of %s" % modules
    assert ".. show-options:: tenancy_mw.%s" % name in text
    assert "[filter:%s]" % name in text
    assert "use = egg:tenancy_mw#%s" % name in text
    assert "Status codes and failure behaviour" in text
    assert ".. autofunction:: %s.set_defaults" % _options_module(name) in text
    index = (REPO / "doc" / "index.rst").read_text()
    assert re.search(r"(?m)^   %s$" % re.escape(page.stem), index), (
        "add %s to the Filters toctree of doc/index.rst" % name
    )


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_has_a_release_note(name):
    notes = [p.read_text() for p in (REPO / "releasenotes" / "notes").glob("*.yaml")]
    assert any("features:" in note and "``%s``" % name in note for note in notes), (
        "add a release note (releasenotes/notes/) with a features entry naming ``%s``" % name
    )


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level modules the package imports (outside TYPE_CHECKING), and the files importing each."""
    found: dict[str, set[str]] = {}
    stdlib = set(sys.stdlib_module_names) | {"_typeshed"}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib and top != "tenancy_mw":
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_runtime_dependency_is_imported_by_the_package():
    providers = metadata.packages_distributions()
    imported = {_norm(dist) for top in _third_party_imports() for dist in providers.get(top, [top])}
    for requirement in _requirements(SETUP_CFG["options"]["install_requires"]):
        assert _norm(requirement.name) in imported, "%s is in install_requires but tenancy_mw never imports it" % (
            requirement.name
        )


def test_every_import_of_the_package_is_a_declared_dependency():
    providers = metadata.packages_distributions()
    extras = SETUP_CFG["options.extras_require"]
    declared = {_norm(r.name) for r in _requirements(SETUP_CFG["options"]["install_requires"])}
    for feature in ("sql", "policy"):
        declared |= {_norm(r.name) for r in _requirements(extras[feature])}
    for top, files in _third_party_imports().items():
        dists = {_norm(d) for d in providers.get(top, [top])}
        assert dists & declared, "%s (imported by %s) is in neither install_requires nor a feature extra" % (
            top,
            ", ".join(sorted(files)),
        )


def _without_sql(code: str) -> subprocess.CompletedProcess:
    """Run *code* in a Python where SQLAlchemy and alembic cannot be imported."""
    blocker = "import sys; sys.modules.update(sqlalchemy=None, alembic=None)\n"
    return subprocess.run([sys.executable, "-c", blocker + code], capture_output=True, text=True, cwd=REPO)


def test_sql_parts_name_the_extra_when_it_is_missing():
    # tenancy_mw.manage imports without it (its paste verbs need no SQL); its db verbs name the extra
    # (tests/unit/paste_deploy/test_recipe_and_check.py).
    for module in ("tenancy_mw.core.sql", "tenancy_mw.migrations"):
        result = _without_sql("import %s" % module)
        assert result.returncode == 1, module
        assert "pip install 'tenancy_mw[sql]'" in result.stderr, (module, result.stderr[-500:])


def test_every_filter_loads_without_the_sql_extra_or_names_it():
    """A filter that needs no SQL loads through paste without it; one that needs it says which extra to install."""
    code = (
        "from importlib import metadata\n"
        "for entry in metadata.entry_points(group='paste.filter_factory'):\n"
        "    if entry.value.startswith('tenancy_mw.'):\n"
        "        try:\n"
        "            entry.load()({})\n"
        "            print(entry.name, 'loads')\n"
        "        except ImportError as exc:\n"
        "            print(entry.name, 'refused:', exc)\n"
    )
    result = _without_sql(code)
    assert result.returncode == 0, result.stderr
    outcomes = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert set(outcomes) == set(FILTERS)
    assert outcomes["tenant_path"] == "loads"
    assert outcomes["admin_cull"] == "loads"
    for name, outcome in outcomes.items():
        assert outcome == "loads" or "pip install 'tenancy_mw[sql]'" in outcome, (name, outcome)


def test_one_version_one_license_typed():
    assert metadata.version("tenancy_mw") == tenancy_mw.__version__
    assert SETUP_CFG["metadata"]["version"] == "attr: tenancy_mw.__version__"
    assert (REPO / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert (PACKAGE / "py.typed").is_file()
    assert "py.typed" in SETUP_CFG["options.package_data"]["tenancy_mw"]


def _tested_pythons() -> list[str]:
    """The Python versions ``make test`` runs the suite on (Makefile ``TESTED_PYTHONS``)."""
    (tested,) = re.findall(r"(?m)^TESTED_PYTHONS := (.+)$", (REPO / "Makefile").read_text())
    return tested.split()


def test_classifiers_and_python_requires_name_the_tested_pythons():
    """setup.cfg, mypy and the docs claim exactly the Pythons make test runs the suite on."""
    tested = _tested_pythons()
    assert tested == sorted(set(tested), key=lambda v: tuple(map(int, v.split(".")))), tested
    assert "%d.%d" % sys.version_info[:2] in tested, "this Python is not in TESTED_PYTHONS %s" % tested
    listed = re.findall(r"Programming Language :: Python :: (3\.\d+)", SETUP_CFG["metadata"]["classifiers"])
    assert listed == tested, "setup.cfg classifiers %s, but make test runs the suite on %s" % (listed, tested)
    assert SETUP_CFG["options"]["python_requires"] == ">=%s" % tested[0]
    assert re.search(r'(?m)^python_version = "%s"$' % re.escape(tested[0]), (REPO / "pyproject.toml").read_text()), (
        "mypy's python_version (pyproject.toml) is not the oldest tested Python"
    )
    claim = "Python %s to %s" % (tested[0], tested[-1])
    for doc in ("README.rst", "doc/contributing.rst"):
        assert claim in " ".join((REPO / doc).read_text().split()), "%s does not say %r" % (doc, claim)


def _apt_packages() -> list[str]:
    """The Debian packages ``make test`` installs when missing: every ``*_PROGRAMS`` list of the Makefile."""
    makefile = (REPO / "Makefile").read_text()
    entries = " ".join(re.findall(r"(?m)^(?:TEST|DOC|BROWSER)_PROGRAMS := (.+)$", makefile)).split()
    return sorted({entry.split(":", 1)[1] for entry in entries})


def test_the_readme_says_what_make_test_installs_which_pythons_it_uses_and_how_long_it_takes():
    readme = " ".join((REPO / "README.rst").read_text().split())
    testing = readme.split("Testing =======")[1].split("Documentation ===")[0]
    packages = _apt_packages()
    assert {"memcached", "wrk", "chromium", "graphviz"} <= set(packages)  # what make test's targets install
    for package in packages:
        assert "``%s``" % package in testing, "README.rst's Testing does not name the Debian package %s" % package
    assert "apt-get" in testing
    for version in _tested_pythons()[1:]:
        assert "``python%s``" % version in testing, version
    assert "``.venv-py3.X``" in testing
    assert re.search(r"about \d+ minutes", testing)
    assert "says which" in testing  # what a failing main suite reports


def test_make_test_runs_the_suite_on_every_other_tested_python():
    """`make test` runs the suite on each tested Python besides its own (a dry run shows the commands)."""
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(REPO), "test-suites", "VENV=/nonexistent/venv"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    makefile = (REPO / "Makefile").read_text()
    assert "test-suites" in makefile.split("\ntest:")[1].split("\n\n")[0]  # `make test` runs test-suites
    this = "%d.%d" % sys.version_info[:2]
    for version in _tested_pythons():
        command = "/nonexistent/venv-py%s/bin/python -m pytest -m 'not slow'" % version
        if version == this:
            assert command not in result.stdout
        else:
            assert command in result.stdout, (version, result.stdout[-2000:])
    # and on its own Python, the whole suite in four runs: the slow tests of tests/functional, the other
    # slow tests, the OpenStack tests (tests/project/test_makefile.py checks they take each slow test once)
    assert re.search(r"/nonexistent/venv/bin/python -m pytest -m slow .* tests/functional ", result.stdout)
    assert "/nonexistent/venv/bin/python -m pytest -m slow" in result.stdout
    assert "/nonexistent/venv/bin/python -m pytest -m 'not slow'" in result.stdout
