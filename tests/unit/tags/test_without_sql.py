"""The tag model and the ``tag_query`` filter work without the ``sql`` extra (SQLAlchemy absent)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import tenancy_mw

# The tenancy_mw under test, first on the child's path.
SOURCE_ROOT = str(Path(tenancy_mw.__file__).resolve().parent.parent)

# Run in a fresh interpreter in which sqlalchemy and alembic cannot be
# imported, as in an install without the ``sql`` extra.
BLOCK_SQL = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class NoSQL(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("sqlalchemy", "alembic"):
                raise ModuleNotFoundError("No module named %r (blocked)" % name, name=name)
            return None

    sys.meta_path.insert(0, NoSQL())
    """
)


def run_without_sql(code: str) -> subprocess.CompletedProcess:
    """Run *code* after :data:`BLOCK_SQL`, warnings as errors (but webob's, as in pyproject.toml); its output."""
    return subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-W",
            "ignore:'cgi' is deprecated:DeprecationWarning",
            "-c",
            BLOCK_SQL + textwrap.dedent(code),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")]))},
        check=True,
        timeout=60,
    )


def test_the_tag_query_filter_parses_and_answers_without_sqlalchemy():
    result = run_without_sql(
        """
        import json
        from tenancy_mw.tags.filter import TagQueryFilter

        def app(environ, start_response):
            query = environ["tenancy.tag_query"]
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps([sorted(query.tags), query.matches({"red", "blue"})]).encode()]

        def call(query_string):
            environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/v2.1/servers", "QUERY_STRING": query_string,
                       "SERVER_NAME": "localhost", "SERVER_PORT": "80", "wsgi.url_scheme": "http"}
            statuses = []
            body = b"".join(TagQueryFilter.factory({})(app)(environ, lambda s, h, e=None: statuses.append(s)))
            return statuses[0], body.decode()

        print(call("tags=red,blue&not-tags=old"))
        print(call("tags=a/b")[0])
        print("sqlalchemy" in sys.modules)
        """
    )
    ok, refused, sqlalchemy_loaded = result.stdout.splitlines()
    assert ok == "('200 OK', '[[\"blue\", \"red\"], true]')"
    assert refused == "400 Bad Request"
    assert sqlalchemy_loaded == "False"


def test_the_tag_model_imports_and_matches_without_sqlalchemy():
    result = run_without_sql(
        """
        from tenancy_mw.tags.model import parse_tag_query, validate_tag

        query = parse_tag_query("tags-any=web,db&not-tags-any=old,new")
        print(query.matches({"web"}), query.matches({"web", "old", "new"}), validate_tag("Red "))
        """
    )
    assert result.stdout.split() == ["True", "False", "Red"]


def test_the_sql_half_says_which_extra_it_needs():
    result = run_without_sql(
        """
        from tenancy_mw.extras import MissingExtra
        from tenancy_mw.tags.model import parse_tag_query

        for use in (lambda: __import__("tenancy_mw.tags.sql"), lambda: parse_tag_query("tags=a").where(None)):
            try:
                use()
            except MissingExtra as exc:
                print(exc)
        """
    )
    # SQLAlchemy comes through tenancy_mw.core.sql, the one module importing it, which names the extra.
    message = "tenancy_mw.core.sql needs 'sqlalchemy', which is not installed: pip install 'tenancy_mw[sql]'"
    assert result.stdout.splitlines() == [message, message]
