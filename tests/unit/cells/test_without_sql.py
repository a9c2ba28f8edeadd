"""The cells' pure parts (id parsers, microversion gate, the id_resolver filter) without the sql extra.

Each test runs a Python whose import system refuses SQLAlchemy and alembic,
as on a host where ``tenancy_mw`` was installed without ``[sql]``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: Put first on sys.meta_path: SQLAlchemy and alembic are "not installed".
BLOCK_SQL = textwrap.dedent(
    """
    import sys

    class NoSql:
        blocked = ("sqlalchemy", "alembic")

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.blocked:
                raise ModuleNotFoundError("No module named %r" % name, name=name)
            return None

    sys.meta_path.insert(0, NoSql())
    """
)

#: Builds the filter as its tests do, with a lookup that is not SQL, and calls it.
FILTER_WITHOUT_SQL = textwrap.dedent(
    """
    import tenancy_mw.cells.ids as ids
    from tenancy_mw.cells.filter import IdResolver
    from tenancy_mw.cells.outcomes import Found

    assert ids.parse_integer_id("42") == 42
    assert not [name for name in sys.modules if name.split(".")[0] in ("sqlalchemy", "alembic")]

    class OneCell:
        # Service 4 is in cell "c1"; nothing else is anywhere.
        def find_id(self, table, ident, *, by_uuid, **_columns):
            if (table, ident, by_uuid) == ("services", 4, False):
                return Found(matches=[("c1", {"id": 4, "uuid": "6f70656e-0000-4000-8000-000000000004"})])
            return Found()

        def close(self):
            pass

    seen = []

    def service(environ, start_response):
        seen.append({key: environ.get(key) for key in ("tenancy.cell", "tenancy.resource_id")})
        start_response("204 No Content", [])
        return []

    app = IdResolver(service, {"resources": "/os-services/{id} services id uuid",
                               "uuid_microversion": "compute 2.53", "max_microversion": "2.90"},
                     lookup=OneCell())

    def call(path, version="compute 2.1"):
        answer = []
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "SCRIPT_NAME": "",
                   "HTTP_OPENSTACK_API_VERSION": version, "wsgi.url_scheme": "http",
                   "SERVER_NAME": "localhost", "SERVER_PORT": "80"}
        b"".join(app(environ, lambda status, headers, exc_info=None: answer.append(status)))
        return answer[0]

    print(call("/v2.1/os-services/4"), call("/v2.1/os-services/5"), call("/v2.1/os-services/five"),
          call("/v2.1/os-services/4", "compute 2.99"), call("/v2.1/servers"), seen)
    assert not [name for name in sys.modules if name.split(".")[0] in ("sqlalchemy", "alembic")]
    """
)


def run_without_sql(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_SQL + code], capture_output=True, text=True, timeout=120)


def test_the_blocker_hides_sqlalchemy():
    result = run_without_sql("import sqlalchemy")
    assert result.returncode != 0
    assert "No module named 'sqlalchemy'" in result.stderr


def test_the_id_parsers_and_the_filter_work_without_sqlalchemy():
    result = run_without_sql(FILTER_WITHOUT_SQL)
    assert result.returncode == 0, result.stderr
    statuses = result.stdout.split(" [")[0]
    assert statuses == "204 No Content 404 Not Found 400 Bad Request 406 Not Acceptable 204 No Content"
    assert "[{'tenancy.cell': 'c1', 'tenancy.resource_id': 4}, {'tenancy.cell': None" in result.stdout


def test_a_filter_configured_with_cell_databases_names_the_missing_extra_at_load():
    code = textwrap.dedent(
        """
        from tenancy_mw.cells.filter import IdResolver
        from tenancy_mw.extras import MissingExtra

        try:
            IdResolver(None, {"cells": "c1=sqlite://", "resources": "/os-services/{id} services id uuid",
                              "uuid_microversion": "compute 2.53", "max_microversion": "2.90"})
        except MissingExtra as exc:
            print(exc)
        """
    )
    result = run_without_sql(code)
    assert result.returncode == 0, result.stderr
    assert "pip install 'tenancy_mw[sql]'" in result.stdout
    assert "sqlalchemy" in result.stdout


def test_the_sql_lookup_itself_names_the_missing_extra():
    result = run_without_sql("import tenancy_mw.cells.lookup")
    assert result.returncode != 0
    assert "MissingExtra" in result.stderr
    assert "pip install 'tenancy_mw[sql]'" in result.stderr
