"""Requests that must not be taken for one another, and answers that must be whole (found in review)."""

from __future__ import annotations

import json
import time

from tenancy_mw.idempotency.filter import Idempotency
from tenancy_mw.idempotency.fingerprint import fingerprint
from tests.support.idempotency import CountingApp, post

PATH = "/v2.1/acme/servers/1"


def test_the_media_type_is_part_of_the_fingerprint():
    body = b'{"op": "remove", "path": "/name"}'
    merge = fingerprint("PATCH", PATH, "", body, "application/merge-patch+json")
    patch = fingerprint("PATCH", PATH, "", body, "application/json-patch+json")
    assert merge != patch
    form = fingerprint("POST", PATH, "", b"a=1", "application/x-www-form-urlencoded")
    text = fingerprint("POST", PATH, "", b"a=1", "text/plain")
    assert form != text
    # Parameters and case do not change a JSON body's meaning.
    assert fingerprint("POST", PATH, "", b'{"a": 1}', "application/json") == fingerprint(
        "POST", PATH, "", b'{"a":1}', "Application/JSON; charset=utf-8"
    )


def test_json_numbers_that_differ_never_share_a_fingerprint():
    def fp(body: bytes) -> str:
        return fingerprint("POST", PATH, "", body, "application/json")

    # Beyond float range: both would read as Infinity.
    assert fp(b'{"n": 1e400}') != fp(b'{"n": 2e400}')
    # Beyond float precision: both would read as 0.1.
    assert fp(b'{"n": 0.1}') != fp(b'{"n": 0.10000000000000000001}')
    assert fp(b'{"n": 12345678901234567890.5}') != fp(b'{"n": 12345678901234567890.0}')
    # NaN and Infinity are not JSON; each is kept apart from the other.
    assert fp(b'{"n": NaN}') != fp(b'{"n": Infinity}')
    # Exact numbers still canonicalise: key order, spacing and 1.50 == 1.5.
    assert fp(b'{"b": 1.50, "a": 2}') == fp(b'{"a":2,"b":1.5}')


def test_chunked_body_the_filter_cannot_read_is_refused_not_fingerprinted_empty():
    app = CountingApp()
    idem = Idempotency(app, {"backend": "memory"})
    env = {"CONTENT_LENGTH": "", "wsgi.input_terminated": False, "HTTP_TRANSFER_ENCODING": "chunked"}
    status, _headers, body = post(idem, "t1", environ=env)
    assert status == 411
    assert json.loads(body)["errors"][0]["code"] == "idempotency.length-required"
    assert app.calls == 0


def test_shared_scope_never_meets_a_tenant_of_the_same_name():
    app = CountingApp()
    idem = Idempotency(app, {"backend": "memory", "shared_scope": "acme", "keystone_scope": "false"})
    target = "/v2.1/servers"
    assert post(idem, "tok", tenant="acme", target=target)[0] == 201
    status, headers, _ = post(idem, "tok", tenant=None, target=target)
    assert status == 201
    assert "Idempotent-Replayed" not in headers
    assert app.calls == 2


def test_replay_current_keeps_what_the_get_wrote_with_write():
    made = []

    def app(environ, start_response):
        if environ["REQUEST_METHOD"] == "GET":
            write = start_response("200 OK", [("Content-Type", "application/json")])
            write(b'{"server": ')
            return [b'{"status": "ACTIVE"}}']
        made.append(1)
        environ["wsgi.input"].read()
        start_response("202 Accepted", [("Location", "/v2.1/acme/servers/1"), ("Content-Type", "application/json")])
        return [b'{"server": {"status": "BUILD"}}']

    idem = Idempotency(app, {"backend": "memory", "replay": "current"})
    assert post(idem, "tok")[0] == 202
    status, headers, body = post(idem, "tok")
    assert status == 202
    assert json.loads(body) == {"server": {"status": "ACTIVE"}}
    assert int(headers["Content-Length"]) == len(body)
    assert len(made) == 1


def test_replay_carries_no_cookie_no_connection_named_header_and_no_length_on_204():
    calls = []

    def app(environ, start_response):
        calls.append(1)
        environ["wsgi.input"].read()
        start_response(
            "204 No Content",
            [
                ("Set-Cookie", "session=abc; HttpOnly"),
                ("Connection", "X-Hop"),
                ("X-Hop", "per-connection"),
                ("X-Kept", "yes"),
            ],
        )
        return []

    idem = Idempotency(app, {"backend": "memory"})
    first = post(idem, "tok")
    assert first[0] == 204
    assert first[1]["Set-Cookie"].startswith("session=")
    status, headers, body = post(idem, "tok")
    assert (status, body) == (204, b"")
    assert headers["Idempotent-Replayed"] == "true"
    assert headers["X-Kept"] == "yes"
    assert "Set-Cookie" not in headers
    assert "X-Hop" not in headers
    assert "Connection" not in headers
    assert "Content-Length" not in headers
    assert len(calls) == 1


def test_sql_claims_racing_a_release_all_get_an_answer(sql_url):
    """A release (5xx, app error) deleting the row while retries insert it: InnoDB answers some of
    those inserts with a deadlock.  Each must still get "claimed" or "taken", never a store error
    (a 503, or under fail_open a second, unprotected run)."""
    import threading

    from tenancy_mw.idempotency.sql_store import SqlStore, metadata, records
    from tenancy_mw.idempotency.stores import StoreError

    store = SqlStore(sql_url, timeout=5.0, purge_interval=0)
    metadata.create_all(store.engine)
    try:
        for trial in range(3):
            key = "k%d" % trial
            assert store.claim(key, b"lease", 60).claimed
            answers = []

            def claim(key=key, answers=answers):
                try:
                    answers.append(store.claim(key, b"retry", 60).claimed)
                except StoreError as exc:
                    answers.append(exc)

            with store.engine.connect() as conn:
                transaction = conn.begin()
                conn.execute(records.delete().where(records.c.key == key))  # the release, not yet committed
                threads = [threading.Thread(target=claim) for _ in range(3)]
                for thread in threads:
                    thread.start()
                time.sleep(0.4)  # the three inserts now wait on the deleted row
                transaction.commit()
            for thread in threads:
                thread.join()
            assert sorted(answers, key=repr) == [False, False, True], answers
    finally:
        store.close()


def test_canonical_body_json_reads_one_unambiguous_document_or_none():
    from tenancy_mw.idempotency.fingerprint import canonical_body_json

    assert canonical_body_json(b'{ "b": [1, 2.0], "a": "\\u00e9" }') == '{"a":"é","b":[1,2.0]}'.encode()
    assert canonical_body_json(b'{"a": 1, "a": 2}') is None
    assert canonical_body_json(b"not json") is None


def test_canonical_json_is_the_old_name_of_canonical_body_json_and_warns():
    import pytest

    from tenancy_mw.idempotency import fingerprint as module

    with pytest.warns(DeprecationWarning, match=r"fingerprint\.canonical_body_json"):
        old = module.canonical_json
    assert old is module.canonical_body_json
    with pytest.warns(DeprecationWarning, match="canonical_body_json"):
        from tenancy_mw.idempotency.fingerprint import canonical_json  # noqa: F401
