"""The Makefile's virtualenv: an absolute VENV, and a VENV of another Python made anew."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

REPO = Path(__file__).resolve().parents[2]


def _make_command(*args: str, directory: Path = REPO) -> list[str]:
    """The command line of make running the Makefile of *directory* with *args*."""
    return ["make", "--no-print-directory", "-C", str(directory), *args]


def _make(*args: str, cwd: Path) -> str:
    """The output of this checkout's make with *args*, run from *cwd*; it must succeed."""
    result = subprocess.run(
        _make_command(*args), capture_output=True, text=True, cwd=cwd, env=_without_outer_make(), check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


#: What a make running these tests hands down: its own flags, and the
#: settings given on its command line, which make exports to every recipe
#: (`tox` runs `make test VENV={envdir}`: a `make clean` that read that VENV
#: would delete the virtualenv running the tests).
OUTER_MAKE_SETTINGS = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "VENV", "PYTHON", "STAMP", "PYTEST_ARGS")


def _without_outer_make() -> dict[str, str]:
    """This process's environment without :data:`OUTER_MAKE_SETTINGS`."""
    return {key: value for key, value in os.environ.items() if key not in OUTER_MAKE_SETTINGS}


def _python(version: str) -> str | None:
    """A Python *version* interpreter that runs: on PATH, or one pyenv installed but has not enabled."""
    candidates = [shutil.which("python" + version)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%s.*/bin/python%s" % (version, version))))
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "pass"], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


def _version(venv: Path) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_a_venv_of_another_python_is_made_anew(tmp_path):
    """`make test PYTHON=python3.12` over a .venv made by another Python must not reuse it."""
    pythons = [_python("3.11"), _python("3.12")]
    require(all(pythons), "python3.11 and python3.12")
    venv = tmp_path / "venv"  # absolute, and make runs from another folder
    first = _make("venv", "VENV=%s" % venv, "PYTHON=%s" % pythons[0], cwd=tmp_path)
    assert "making %s" % venv in first
    assert _version(venv) == "3.11"
    again = _make("venv", "VENV=%s" % venv, "PYTHON=%s" % pythons[0], cwd=tmp_path)
    assert "making" not in again
    switched = _make("venv", "VENV=%s" % venv, "PYTHON=%s" % pythons[1], cwd=tmp_path)
    assert "making %s" % venv in switched
    assert _version(venv) == "3.12"


def test_install_stamps_carry_the_interpreter():
    """A stamp of another Python's install never satisfies this one's target."""
    dry = _make("-n", "lint", "VENV=/nonexistent/venv", cwd=REPO)
    assert "/nonexistent/venv/bin/.installed-cpython-3" in dry
    assert "/nonexistent/venv/bin/ruff check" in dry


def test_clean_leaves_only_what_git_holds(tmp_path):
    """`make clean` in a clone removes what the builds, the tests, the demo and the bytecode wrote there:
    afterwards git sees nothing untracked and nothing ignored."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    shutil.copy(REPO / "Makefile", clone / "Makefile")  # this checkout's, committed or not
    status = ["git", "status", "--porcelain", "--ignored"]
    before = subprocess.run(status, capture_output=True, text=True, cwd=clone, check=True).stdout
    written = [
        "tenancy_mw/__pycache__/filters.cpython-311.pyc",
        "tests/unit/tags/__pycache__/test_sql.cpython-311-pytest-8.pyc",
        "examples/state/demo.sqlite",
        "examples/demo.sqlite",
        "doc/build/html/index.html",
        "releasenotes/build/html/index.html",
        ".venv/bin/python",
        ".venv-py3.12/bin/python",
        ".mypy_cache/3.11/x.json",
        "tenancy_mw.egg-info/PKG-INFO",
    ]
    for name in written:
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text("x")
    dirty = subprocess.run(status, capture_output=True, text=True, cwd=clone, check=True).stdout
    assert len(dirty.splitlines()) >= len(before.splitlines()) + 8, dirty  # git sees each written folder
    environment = _without_outer_make()
    subprocess.run(_make_command("clean", directory=clone), env=environment, check=True, timeout=60)
    assert subprocess.run(status, capture_output=True, text=True, cwd=clone, check=True).stdout == before


def test_python_named_by_version_is_found_where_pyenv_put_it():
    """`make test PYTHON=python3.12` uses an installed 3.12 even when the name on PATH is a shim that refuses."""
    require(_python("3.12") is not None, "python3.12")
    dry = _make("-n", "venv", "VENV=/nonexistent/venv", "PYTHON=python3.12", cwd=REPO)
    assert "does not run" not in dry.split("||")[0]
    assert 'test -n "cpython-312"' in dry


def test_every_suite_runs_and_a_failing_one_is_named(tmp_path):
    """`make test` runs its suites side by side; one that fails is named in a "make test:" line, the
    others still run, and make fails.

    The suites run as `make test` runs them (its `test-suites` step), on this interpreter's virtualenv
    with install stamps of the test's own, so nothing is installed.  Of the other Pythons, one exists
    nowhere (so no virtualenv is made for it: it is reported missing) and the main Python's four runs
    fail at once (an unknown pytest option): the OpenStack tests run after failed slow tests too.
    """
    (tmp_path / "stamp-test").touch()
    this = "%d.%d" % sys.version_info[:2]
    settings = [
        "VENV=%s" % sys.prefix,
        "PYTHON=%s" % sys.executable,
        "STAMP=%s" % (tmp_path / "stamp"),
        "TESTED_PYTHONS=%s 9.8" % this,
        "PYTEST_ARGS=--no-such-option-here",
    ]
    environment = _without_outer_make()
    environment.pop("CI", None)  # under CI=true a missing Python fails, which is not this test's point
    command = _make_command("test-suites", *settings)
    dry = subprocess.run([*command, "-n"], capture_output=True, text=True, env=environment, check=False, timeout=120)
    # Never installs anything (were a stamp missing, it would, into this very virtualenv).
    assert "pip install" not in dry.stdout, dry.stdout
    assert " -m venv " not in dry.stdout, dry.stdout
    result = subprocess.run(command, capture_output=True, text=True, env=environment, check=False, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert result.stderr.count("--no-such-option-here") == 4, output  # pytest's own complaint, from each run
    reports = sorted(line for line in result.stderr.splitlines() if line.startswith("make test:"))
    assert reports == [
        'make test: failed (see the "make test:" lines above)',
        "make test: the OpenStack tests on python%s failed" % this,
        "make test: the other slow tests on python%s failed" % this,
        "make test: the slow tests of tests/functional on python%s failed" % this,
        "make test: the tests not marked slow on python%s failed" % this,
    ], output
    assert "python9.8 is missing: the suite did not run on it" in result.stderr  # it was tried all the same


def _collected(*make_targets: str, stamp: Path) -> list[str]:
    """The test ids the runs of *make_targets* collect, as `make test` runs them (collection only)."""
    environment = _without_outer_make()
    ids = []
    for target in make_targets:
        settings = ["VENV=%s" % sys.prefix, "PYTHON=%s" % sys.executable, "STAMP=%s" % stamp]
        # --collect-only beside the runs' own -q: one test id a line.
        command = _make_command(target, *settings, "PYTEST_ARGS=--collect-only")
        result = subprocess.run(command, capture_output=True, text=True, env=environment, check=False, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        ids += [line for line in result.stdout.splitlines() if "::" in line]
    return ids


def test_the_slow_runs_of_make_test_take_every_slow_test_once(tmp_path):
    """`make test` spreads the main Python's slow tests over three runs (tests/functional, the others, then
    tests/openstack): together they are exactly the slow tests, none in two runs."""
    (tmp_path / "stamp-test").touch()
    runs = _collected("test-main-servers", "test-main-slow", "test-main-openstack", stamp=tmp_path / "stamp")
    every = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "slow", "--collect-only", "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=300,
    )
    slow = [line for line in every.stdout.splitlines() if "::" in line]
    assert len(runs) == len(set(runs)), "a slow test runs twice"
    assert sorted(runs) == sorted(slow), "in no run: %s; not slow: %s" % (set(slow) - set(runs), set(runs) - set(slow))
    assert any(test.startswith("tests/functional/") for test in runs)
    assert any(test.startswith("tests/project/test_bench_load.py") for test in slow)  # a load run: never niced
