"""The packages as a distributor gets them: build, check, and test from the sdist.

``python -m build`` makes the sdist and, from it, the wheel; ``twine check``
checks both.  The sdist is unpacked, the wheel built from it installed
into a fresh virtualenv under the sdist's own ``constraints.txt`` (with the
``sql`` extra and :data:`SDIST_TEST_REQUIREMENTS`, what those tests
import), and the fast part of the suite runs from the unpacked tree: the doctests of
the package, ``doc/`` and ``README.rst`` and the unit tests in
:data:`SDIST_TESTS`, which start no server and no database (the full suite
twice would not fit the CI budget; doc/contributing.rst says so).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

import tenancy_mw

REPO = Path(__file__).resolve().parents[2]

#: What runs from the unpacked sdist: unit tests and doctests, no servers, no databases.
SDIST_TESTS = [
    "tenancy_mw",
    "README.rst",
    "doc",
    "tests/unit/core/test_paths.py",
    "tests/unit/tenants/test_ids.py",
    "tests/unit/cull/test_rules.py",
    "tests/unit/tenants/test_path_filter.py",
    "tests/unit/cull/test_filter.py",
    "tests/unit/core/test_options.py",
    "tests/project/test_shipping.py",
]

#: What those tests import besides the package and its ``sql`` extra (versions from constraints.txt).
SDIST_TEST_REQUIREMENTS = ["pytest", "hypothesis", "WebTest", "PasteDeploy", "Paste"]

#: What the sdist must carry for its tests, docs and demo.
SDIST_MUST_HOLD = [
    "LICENSE",
    "README.rst",
    "constraints.txt",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "Makefile",
    "tenancy_mw/py.typed",
    "tests/conftest.py",
    "tests/support/apps.py",
    "tests/support/cull-paste.ini",
    "doc/conf.py",
    "doc/index.rst",
    "doc/pipeline.dot",
    "doc/tenancy_mw.conf.sample",
    "examples/api-paste.ini",
    "examples/tenancy_mw_demo.conf",
    "releasenotes/source/conf.py",
]


def _run(*args, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, **kwargs)
    command = " ".join(map(str, args))
    assert result.returncode == 0, "%s failed:\n%s\n%s" % (command, result.stdout[-3000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", out, REPO)
    return out


def _one(dist: Path, pattern: str) -> Path:
    (found,) = dist.glob(pattern)
    return found


def test_build_makes_an_sdist_and_a_wheel_that_twine_accepts(dist):
    sdist = _one(dist, "tenancy_mw-%s.tar.gz" % tenancy_mw.__version__)
    wheel = _one(dist, "tenancy_mw-%s-py3-none-any.whl" % tenancy_mw.__version__)
    _run(sys.executable, "-m", "twine", "check", "--strict", sdist, wheel)
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = [path for path in SDIST_MUST_HOLD if path not in names]
    assert not missing, "the sdist lacks %s (MANIFEST.in)" % missing
    assert not [n for n in names if n.startswith(("doc/build/", "examples/state/", ".venv")) or "__pycache__" in n]
    with zipfile.ZipFile(wheel) as whl:
        wheel_names = whl.namelist()
    assert "tenancy_mw/py.typed" in wheel_names
    assert "tenancy_mw-%s.dist-info/licenses/LICENSE" % tenancy_mw.__version__ in wheel_names
    assert not [n for n in wheel_names if n.startswith("tests/")]


def test_the_sdist_passes_its_tests_in_a_fresh_virtualenv(dist, tmp_path):
    sdist = _one(dist, "tenancy_mw-*.tar.gz")
    wheel = _one(dist, "tenancy_mw-*.whl")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    tree = tmp_path / sdist.name[: -len(".tar.gz")]
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run(
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "-c",
        tree / "constraints.txt",
        "%s[sql,policy]" % wheel,  # the package's doctests need every feature extra
        *SDIST_TEST_REQUIREMENTS,
        env=environ,
    )
    # The demo walkthrough's doctest starts the demo's servers and drives them with
    # openstacksdk: it runs in the full suite, not here.
    result = _run(
        python, "-m", "pytest", "-q", "--ignore=doc/demo-walkthrough.rst", *SDIST_TESTS, cwd=tree, env=environ
    )
    assert " passed" in result.stdout, result.stdout[-2000:]
    assert " failed" not in result.stdout, result.stdout[-2000:]
