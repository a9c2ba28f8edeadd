"""Exactly once across processes: real gunicorn, 4 workers, 20 concurrent clients, one token.

For each store that claims to be shared (memcached, and SQL on SQLite,
PostgreSQL and MariaDB): a counting app behind ``tenant_path`` and
``idempotency`` gets 200 POSTs carrying one token from 20 clients at once.
The app must run exactly once, and every answer must be the original
response (byte for byte, the replays marked) or the in-flight 409.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tenancy_mw import migrations
from tests.support.idempotency import SECRET, count_lines

WORKERS = 4
CLIENTS = 20
REQUESTS = 200

PASTE = """
[pipeline:main]
pipeline = tenant_path idempotency counter

[filter:tenant_path]
use = egg:tenancy_mw#tenant_path

[filter:idempotency]
use = egg:tenancy_mw#idempotency
secret = {secret}
store_timeout = 20
{store}

[app:counter]
paste.app_factory = tests.support.idempotency:counting_app_factory
count_file = {count_file}
sleep = 1.0
"""


@pytest.fixture(params=["memcached", "sqlite", "postgresql", "mariadb"])
def store_lines(request, tmp_path):
    """The [filter:idempotency] lines of one shared store."""
    if request.param == "memcached":
        server = request.getfixturevalue("memcached_server")
        return "backend = memcached\nmemcached_servers = %s" % server.address
    if request.param == "sqlite":
        url = "sqlite:///%s" % (tmp_path / "idem.sqlite")
    else:
        url = request.getfixturevalue("make_database")(request.param)
    migrations.upgrade(url, ["idempotency"])
    return "backend = sql\nconnection = %s" % url.replace("%", "%%")


def test_one_token_from_20_clients_runs_once(serve_paste, tmp_path, store_lines):
    count_file = tmp_path / "count"
    ini = tmp_path / "idem-paste.ini"
    ini.write_text(PASTE.format(secret=SECRET, store=store_lines, count_file=count_file))
    server = serve_paste(str(ini), workers=WORKERS)
    token = uuid.uuid4().hex
    body = json.dumps({"server": {"name": "web1"}}).encode()
    headers = {"X-Client-Token": token, "Content-Type": "application/json"}

    def client(_):
        # Each client retries at its own pace, so the run spans the first
        # request's work (in-flight answers) and what follows (replays).
        answers = []
        for _ in range(REQUESTS // CLIENTS):
            answers.append(server.request("POST", "/v2.1/acme/servers", headers, body))
            time.sleep(0.2)
        return answers

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [answer for batch in pool.map(client, range(CLIENTS)) for answer in batch]

    assert count_lines(count_file) == 1, server.log()
    created = [a for a in answers if a.status == 201]
    originals = [a for a in created if "idempotent-replayed" not in a.headers]
    assert len(originals) == 1
    for answer in created:
        assert answer.body == originals[0].body
    replays = [a for a in created if a.headers.get("idempotent-replayed") == "true"]
    in_flight = [a for a in answers if a.status == 409]
    assert len(originals) + len(replays) + len(in_flight) == REQUESTS, sorted({a.status for a in answers})
    for answer in in_flight:
        assert answer.json()["errors"][0]["code"] == "idempotency.in-flight"
        assert answer.headers["retry-after"] == "1"
    assert in_flight
    assert replays
    pids = {a.json()["server"]["pid"] for a in created}
    assert len(pids) == 1  # every replay is the one original, whichever worker answered
