"""The demo's two pipelines under real gunicorn, as ``make demo`` serves them, on free ports.

``public`` is examples/api-paste.ini's ``main`` pipeline, ``admin`` its
``admin`` pipeline; both on one SQLite database, one tenant registry and two
cell databases, all files in a folder of the caller's (never examples/state/).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from tests.support.servers import GunicornServer

#: The endpoint roles and the api-paste.ini pipeline serving each.
PIPELINES = (("public", "main"), ("admin", "admin"))


def _wait_until_serving(server: GunicornServer, attempts: int = 6) -> None:
    """Wait until the pipeline answers (gunicorn listens before its workers have loaded the app)."""
    for attempt in range(attempts):
        try:
            response = server.request("GET", "/")
        except OSError:
            if attempt == attempts - 1:
                raise
            continue
        assert response.status == 200, (response.status, response.body)
        return


@contextlib.contextmanager
def serve_demo(
    state_dir, workers: int = 2, environment: dict[str, str] | None = None
) -> Iterator[dict[str, GunicornServer]]:
    """Start both pipelines (``{"public": server, "admin": server}``); stop them on exit.

    *environment* adds to (or overrides) the servers' ``OS_<GROUP>__<OPTION>`` settings.
    """
    from tests.functional.conftest import DEMO_INI, EXAMPLES_DIR, demo_server_env, migrated_registry, sqlite_url

    database_url = sqlite_url(os.path.join(str(state_dir), "demo.sqlite"))
    env = demo_server_env(database_url, migrated_registry(database_url, state_dir), state_dir)
    env.update(environment or {})
    servers: dict[str, GunicornServer] = {}
    try:
        for role, pipeline in PIPELINES:
            server = GunicornServer(
                DEMO_INI, name=pipeline, workers=workers, env=env, cwd=EXAMPLES_DIR, log_dir=state_dir
            )
            servers[role] = server
            server.start()
            _wait_until_serving(server)
        yield servers
    finally:
        for server in servers.values():
            server.stop()
