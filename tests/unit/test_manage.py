"""``tenancy-mw-manage``: the command as an operator runs it (a real subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tenancy_mw import migrations

MANAGE = os.path.join(os.path.dirname(sys.executable), "tenancy-mw-manage")


def manage(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the installed console command; return its exit status and output."""
    full_env = dict(os.environ)
    full_env.pop("TENANCY_MW_DATABASE_URL", None)
    full_env.update(env or {})
    return subprocess.run([MANAGE, *args], capture_output=True, text=True, env=full_env, timeout=120)


def test_components_lists_the_shipped_migration_folders():
    result = manage("db", "components")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == migrations.components()


def test_unknown_component_is_a_usage_error_naming_it(tmp_path):
    result = manage("db", "upgrade", "--url", "sqlite:///%s/x.sqlite" % tmp_path, "--component", "no-such-thing")
    assert result.returncode == 2
    assert "'no-such-thing'" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_url_says_how_to_give_one():
    result = manage("db", "current")
    assert result.returncode == 1
    assert "--url" in result.stderr
    assert "TENANCY_MW_DATABASE_URL" in result.stderr


def test_url_from_the_environment(tmp_path):
    url = "sqlite:///%s/env.sqlite" % tmp_path
    result = manage("db", "upgrade", env={"TENANCY_MW_DATABASE_URL": url})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("upgraded: ")
    current = manage("db", "current", env={"TENANCY_MW_DATABASE_URL": url})
    assert current.returncode == 0, current.stderr
    # Every component was applied by the upgrade above.
    assert "(not applied)" not in current.stdout


def test_malformed_url_is_one_line_not_a_traceback():
    result = manage("db", "current", "--url", "not a url")
    assert result.returncode == 1
    assert "'not a url'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("url", ["postgresql+psycopg2://root@127.0.0.1:1/nothing", "sqlite:////proc/no-such-dir/y.sqlite"])
def test_unreachable_database_is_one_line_not_a_traceback(url):
    result = manage("db", "current", "--url", url)
    assert result.returncode == 1
    assert result.stderr.startswith("tenancy-mw-manage: ")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
