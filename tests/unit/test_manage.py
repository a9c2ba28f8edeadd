"""``tenancy-mw-manage``: the command as an operator runs it (a real subprocess)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

import tenancy_mw
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


@pytest.mark.parametrize(
    "url", ["postgresql+psycopg2://root@127.0.0.1:1/nothing", "sqlite:////proc/no-such-dir/y.sqlite"]
)
def test_unreachable_database_is_one_line_not_a_traceback(url):
    result = manage("db", "current", "--url", url)
    assert result.returncode == 1
    assert result.stderr.startswith("tenancy-mw-manage: ")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


#: Every verb that works on the library's tables, and the component whose tables it needs.
TABLE_VERBS = [
    (("tenants", "purge", "--registry-only"), "tenants", "tenancy_tenants"),
    (("tenants", "show", "acme"), "tenants", "tenancy_tenants"),
    (("idempotency", "purge"), "idempotency", "tenancy_mw_idempotency"),
]


@pytest.mark.parametrize(("verb", "component", "table"), TABLE_VERBS, ids=[" ".join(v[0][:2]) for v in TABLE_VERBS])
def test_a_database_without_the_librarys_tables_names_the_db_upgrade_that_makes_them(sql_url, verb, component, table):
    """On SQLite, PostgreSQL and MariaDB alike: one line saying the tables are not there and the command that
    makes them (with the verb's --component), never the driver's "no such table" alone; that command works."""
    result = manage(*verb, "--url", sql_url)
    assert result.returncode == 1, (result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("tenancy-mw-manage: the database has no table %s: " % table), line
    assert "Traceback" not in result.stderr
    assert "database error" not in line
    prefix, _, command = line.partition("create them with: ")
    assert "tenancy_mw's tables are not there" in prefix
    words = shlex.split(command)
    assert words[:3] == ["tenancy-mw-manage", "db", "upgrade"]
    assert words[-2:] == ["--component", component]
    # The command it names is the one to run: then the verb works.
    made = manage(*words[1:])
    assert made.returncode == 0, made.stderr
    again = manage(*verb, "--url", sql_url)
    assert again.returncode == (1 if verb[1] == "show" else 0), again.stderr
    assert "no tenant 'acme'" in again.stderr if verb[1] == "show" else again.stderr == ""


def test_run_as_python_dash_m_a_verbs_failure_is_one_line_not_a_traceback():
    # As the docs run the cull verb with a service's Python: python -m tenancy_mw.manage.
    checkout = os.path.dirname(os.path.dirname(tenancy_mw.__file__))  # this checkout first on the path
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")])))
    result = subprocess.run(
        [sys.executable, "-m", "tenancy_mw.manage", "cull", "derive", "--namespace", "no-such-service"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("tenancy-mw-manage: no policy defaults are registered as 'no-such-service'")
    assert "Traceback" not in result.stderr
