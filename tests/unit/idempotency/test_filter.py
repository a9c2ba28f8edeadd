"""The idempotency filter in process, on every store: memory, real memcached, SQLite, PostgreSQL, MariaDB."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid

import pytest

from tenancy_mw.core.base import ConfigError
from tenancy_mw.idempotency.filter import Idempotency
from tenancy_mw.idempotency.records import RecordCodec
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.idempotency import BACKENDS, CREATE_BODY, SECRET, CountingApp, post, store_options


@pytest.fixture(scope="module", params=BACKENDS)
def options(request, tmp_path_factory):
    """The filter options of one store, shared by the module's tests on that backend."""
    return store_options(request.param, request, tmp_path_factory)


@pytest.fixture
def build(options):
    """``build(app, **more_options)``: the filter on this module's store; its store is closed after the test."""
    made = []

    def _build(app, **more):
        middleware = Idempotency(app, dict(options, **more))
        made.append(middleware)
        return middleware

    yield _build
    for middleware in made:
        middleware.store.close()


def expiry_wait(options, ttl: int = 1) -> float:
    """Seconds after which an item of *ttl* seconds is surely gone: memcached counts whole seconds on its own clock."""
    return ttl + (1.2 if options["backend"] == "memcached" else 0.2)


def new_token() -> str:
    return "tok-" + uuid.uuid4().hex


def test_replay_is_the_original_byte_for_byte_and_marked(build):
    app = CountingApp(extra_headers=[("X-Trace", "a b"), ("Connection", "close")])
    idem = build(app)
    token = new_token()
    status, headers, body = post(idem, token)
    assert status == 201
    assert "Idempotent-Replayed" not in headers
    again_status, again_headers, again_body = post(idem, token)
    assert (again_status, again_body) == (201, body)
    assert again_headers["Idempotent-Replayed"] == "true"
    assert again_headers["Location"] == headers["Location"]
    assert again_headers["X-Trace"] == "a b"
    assert "Connection" not in again_headers  # hop-by-hop: about one connection only
    assert app.calls == 1


def test_idempotency_key_header_quoted_or_bare_is_the_same_token(build):
    app = CountingApp()
    idem = build(app)
    token = new_token()
    first = post(idem, headers=[("Idempotency-Key", '"%s"' % token)])
    second = post(idem, headers=[("Idempotency-Key", token)])
    third = post(idem, token)  # X-Client-Token: the same token
    assert first[2] == second[2] == third[2]
    assert app.calls == 1


def test_json_key_order_and_spacing_do_not_matter_but_content_does(build):
    app = CountingApp()
    idem = build(app)
    token = new_token()
    post(idem, token, body=b'{"server": {"name": "web1", "flavorRef": "1"}}')
    same = post(idem, token, body=b'{"server":{"flavorRef":"1",\n "name":"web1"}}')
    assert same[0] == 201
    assert same[1]["Idempotent-Replayed"] == "true"
    other = post(idem, token, body=b'{"server": {"name": "web2", "flavorRef": "1"}}')
    assert other[0] == 409
    error = json.loads(other[2])["errors"][0]
    assert error["code"] == "idempotency.token-reused"
    assert token in error["detail"]
    assert app.calls == 1


def test_path_query_and_method_are_part_of_the_fingerprint(build):
    app = CountingApp()
    idem = build(app, methods="POST,PATCH")
    token = new_token()
    post(idem, token, target="/v2.1/acme/servers?a=1&b=2")
    assert post(idem, token, target="/v2.1/acme/servers?b=2&a=1")[0] == 201  # same query, reordered
    assert post(idem, token, target="/v2.1/acme/servers?a=1&b=3")[0] == 409
    assert post(idem, token, target="/v2.1/acme/servers/x?a=1&b=2")[0] == 409
    assert post(idem, token, target="/v2.1/acme/servers?a=1&b=2", method="PATCH")[0] == 409
    assert app.calls == 1


def test_mismatch_status_422_as_in_the_ietf_draft(build):
    idem = build(CountingApp(), mismatch_status="422")
    token = new_token()
    post(idem, token)
    assert post(idem, token, body=b'{"server": {"name": "other"}}')[0] == 422


def test_two_tenants_may_use_one_token(build):
    app = CountingApp()
    idem = build(app)
    token = new_token()
    a = post(idem, token, tenant="acme")
    b = post(idem, token, tenant="globex")
    assert a[2] != b[2]
    assert app.calls == 2
    assert post(idem, token, tenant="acme")[2] == a[2]
    assert post(idem, token, tenant="globex")[2] == b[2]
    assert app.calls == 2


def test_keystone_project_scopes_only_when_confirmed(build):
    app = CountingApp()
    idem = build(app)
    token = new_token()
    confirmed = {"HTTP_X_IDENTITY_STATUS": "Confirmed", "HTTP_X_PROJECT_ID": "p-1"}
    first = post(idem, token, tenant=None, target="/v2.1/p-1/servers", environ=confirmed)
    assert first[0] == 201
    assert post(idem, token, tenant=None, target="/v2.1/p-1/servers", environ=confirmed)[2] == first[2]
    other = dict(confirmed, HTTP_X_PROJECT_ID="p-2")
    other_answer = post(idem, token, tenant=None, target="/v2.1/p-1/servers", environ=other)
    assert "Idempotent-Replayed" not in other_answer[1]
    unconfirmed = {"HTTP_X_IDENTITY_STATUS": "Invalid", "HTTP_X_PROJECT_ID": "p-1"}
    refused = post(idem, token, tenant=None, target="/v2.1/p-1/servers", environ=unconfirmed)
    assert refused[0] == 400
    assert json.loads(refused[2])["errors"][0]["code"] == "idempotency.no-tenant"
    assert app.calls == 2


def test_no_tenant_refused_or_shared_scope(build):
    app = CountingApp()
    token = new_token()
    assert post(build(app), token, tenant=None, target="/healthcheck")[0] == 400
    shared = build(app, shared_scope="-")
    first = post(shared, token, tenant=None, target="/v2.1/servers")
    assert first[0] == 201
    assert post(shared, token, tenant=None, target="/v2.1/servers")[2] == first[2]
    assert app.calls == 1


def test_5xx_is_not_stored_and_the_retry_runs(build):
    app = CountingApp(status="503 Service Unavailable")
    idem = build(app)
    token = new_token()
    assert post(idem, token)[0] == 503
    app.status = "201 Created"
    retry = post(idem, token)
    assert retry[0] == 201
    assert "Idempotent-Replayed" not in retry[1]
    assert app.calls == 2
    assert post(idem, token)[1]["Idempotent-Replayed"] == "true"


def test_429_is_released_but_4xx_answers_are_stored(build):
    app = CountingApp(status="429 Too Many Requests")
    idem = build(app)
    token = new_token()
    post(idem, token)
    post(idem, token)
    assert app.calls == 2
    app.status = "400 Bad Request"
    other = new_token()
    post(idem, other)
    assert post(idem, other)[1]["Idempotent-Replayed"] == "true"
    assert app.calls == 3


def test_app_exception_releases_the_token(build):
    calls = []

    def broken(environ, start_response):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        start_response("201 Created", [("Content-Type", "text/plain")])
        return [b"made"]

    idem = build(broken)
    token = new_token()
    with pytest.raises(RuntimeError):
        post(idem, token)
    assert post(idem, token)[2] == b"made"
    assert len(calls) == 2


def test_oversized_response_is_answered_whole_not_stored_and_released(build, caplog):
    app = CountingApp(body_size=1_200_000)
    idem = build(app)
    token = new_token()
    with caplog.at_level(logging.WARNING, logger="tenancy_mw.idempotency.filter"):
        status, _, body = post(idem, token)
    assert status == 201
    assert len(body) == 1_200_000
    assert "not stored" in caplog.text
    status, headers, body = post(idem, token)
    assert len(body) == 1_200_000
    assert "Idempotent-Replayed" not in headers
    assert app.calls == 2


def test_response_just_under_the_limit_is_stored(build):
    app = CountingApp(body_size=600_000)  # base64: 800 kB, under max_stored_bytes
    idem = build(app)
    token = new_token()
    post(idem, token)
    status, headers, body = post(idem, token)
    assert headers["Idempotent-Replayed"] == "true"
    assert len(body) == 600_000
    assert app.calls == 1


def test_in_flight_retry_gets_409_with_retry_after(build):
    app = CountingApp(sleep_first=1.0)
    idem = build(app)
    token = new_token()
    results = {}
    first = threading.Thread(target=lambda: results.setdefault("first", post(idem, token)))
    first.start()
    time.sleep(0.3)
    status, headers, body = post(idem, token)
    first.join()
    assert status == 409
    assert headers["Retry-After"] == "1"
    assert json.loads(body)["errors"][0]["code"] == "idempotency.in-flight"
    assert results["first"][0] == 201
    assert app.calls == 1


def test_in_flight_wait_gets_the_first_answer(build):
    app = CountingApp(sleep_first=0.8)
    idem = build(app, in_flight="wait", in_flight_timeout="5")
    token = new_token()
    results = {}
    first = threading.Thread(target=lambda: results.setdefault("first", post(idem, token)))
    first.start()
    time.sleep(0.2)
    status, headers, body = post(idem, token)
    first.join()
    assert (status, body) == (201, results["first"][2])
    assert headers["Idempotent-Replayed"] == "true"
    assert app.calls == 1


def test_expired_record_lets_the_token_run_again(build, options):
    app = CountingApp()
    idem = build(app, expiration="1")
    token = new_token()
    post(idem, token)
    time.sleep(expiry_wait(options))
    again = post(idem, token)
    assert "Idempotent-Replayed" not in again[1]
    assert app.calls == 2


def test_slow_first_request_never_overwrites_the_newer_owner(build, options, caplog):
    """Lease expiry: A's claim runs out while A is still working; B claims, runs, stores; A's late answer loses."""
    # A 2-second lease: the stores count whole seconds (memcached on its own
    # clock, the SQL store's expiry time truncated), so a 1-second one may
    # end at once, and B's own claim could run out before B stores (seen
    # under make test's load: B's response not stored, the replay ran again).
    # A answers only once B has (no race between the two).
    b_answered = threading.Event()
    app = CountingApp(first_waits_for=b_answered)
    idem = build(app, lease_ttl="2")
    token = new_token()
    results = {}
    slow = threading.Thread(target=lambda: results.setdefault("a", post(idem, token)))
    with caplog.at_level(logging.WARNING, logger="tenancy_mw.idempotency.filter"):
        slow.start()
        deadline = time.monotonic() + 10
        while app.calls == 0 and time.monotonic() < deadline:  # A holds its claim from here
            time.sleep(0.01)
        time.sleep(expiry_wait(options, ttl=2))  # A's 2 s lease is gone
        try:
            b = post(idem, token)
        finally:
            b_answered.set()
            slow.join()
    assert b[0] == 201
    assert "Idempotent-Replayed" not in b[1]
    assert results["a"][0] == 201
    assert results["a"][2] != b[2]
    assert "taken over" in caplog.text
    replay = post(idem, token)
    assert replay[2] == b[2]  # B's record stands
    assert app.calls == 2


def test_tampered_record_is_never_replayed(build, caplog):
    app = CountingApp()
    idem = build(app)
    token = new_token()
    post(idem, token)
    key = idem.codec.store_key("acme", token)
    stored = idem.store.read(key)
    mac, _, payload = stored[len(b"tmw1."):].partition(b".")
    document = json.loads(payload)
    document["body"] = base64.b64encode(b'{"server": {"id": 1, "status": "PWNED"}}').decode()
    forged = b"tmw1." + mac + b"." + json.dumps(document).encode()  # the old signature kept
    assert _overwrite(idem.store, key, forged)
    with caplog.at_level(logging.ERROR, logger="tenancy_mw.idempotency.filter"):
        status, _, body = post(idem, token)
    assert status == 503
    assert b"PWNED" not in body
    assert "not valid" in caplog.text
    assert app.calls == 1


def test_foreign_record_under_another_tenants_key_is_never_replayed(build):
    """A record copied under another key (another tenant's token) fails its signature."""
    app = CountingApp()
    idem = build(app, on_store_error="fail_open")
    token = new_token()
    post(idem, token, tenant="acme")
    acme_record = idem.store.read(idem.codec.store_key("acme", token))
    _overwrite(idem.store, idem.codec.store_key("globex", token), acme_record)
    status, headers, body = post(idem, token, tenant="globex")
    assert "Idempotent-Replayed" not in headers
    assert app.calls == 2  # fail_open: ran, unprotected; acme's answer was not shown


def test_record_signed_with_another_secret_is_not_replayed(build):
    app = CountingApp()
    token = new_token()
    post(build(app), token)
    status, headers, _ = post(build(app, secret="another-secret"), token)
    assert "Idempotent-Replayed" not in headers
    assert app.calls == 2  # the other secret gives another key: a fresh token there


def _overwrite(store, key, value) -> bool:
    """Put *value* under *key* in any store, as someone with access to the store could."""
    if store.name == "memory":
        store._items[key] = ("x", time.time() + 60, value)
        return True
    if store.name == "memcached":
        from pymemcache.client.base import Client

        host, port = store.server_of(key).rsplit(":", 1)
        client = Client((host, int(port)), default_noreply=False)
        try:
            return client.set(key, value, expire=60)
        finally:
            client.close()
    import sqlalchemy as sa

    from tenancy_mw.idempotency.sql_store import records

    with store.engine.begin() as conn:
        conn.execute(records.delete().where(records.c.key == key))
        conn.execute(records.insert().values(key=key, owner="x" * 32, expires_at=int(time.time()) + 60, value=value))
    return sa is not None


def test_replay_current_gets_the_resource_now(build):
    app = CountingApp(status="202 Accepted")
    idem = build(app, replay="current")
    token = new_token()
    first = post(idem, token)
    assert json.loads(first[2])["server"]["status"] == "BUILD"
    status, headers, body = post(idem, token)
    assert status == 202
    assert json.loads(body) == {"server": {"id": "1", "status": "ACTIVE"}}
    assert headers["Idempotent-Replayed"] == "true"
    assert headers["Location"] == first[1]["Location"]
    assert int(headers["Content-Length"]) == len(body)
    assert app.calls == 2  # the POST and the GET; no second create


def test_requests_without_a_token_or_on_other_methods_pass_untouched(build):
    app = CountingApp()
    idem = build(app)
    post(idem)
    post(idem)
    get_status, _, _ = post(idem, new_token(), method="GET", body=b"")
    assert get_status == 200
    assert app.calls == 3
    assert app.bodies[0] == CREATE_BODY


def test_app_reads_the_same_body_the_filter_fingerprinted(build):
    app = CountingApp()
    idem = build(app)
    post(idem, new_token())
    assert app.bodies == [CREATE_BODY]


def test_store_timeouts_and_secret_are_required_options():
    for options, name in [
        ({"backend": "memcached", "memcached_servers": "127.0.0.1:11211"}, "secret"),
        ({"backend": "memcached", "secret": SECRET}, "memcached_servers"),
        ({"backend": "memcached", "secret": SECRET, "memcached_servers": "nohost"}, "memcached_servers"),
        ({"backend": "sql", "secret": SECRET}, "connection"),
        ({"backend": "sql", "secret": SECRET, "connection": "nodb://x"}, "connection"),
        ({"backend": "redis"}, "backend"),
        ({"replay": "sometimes"}, "replay"),
        ({"on_store_error": "shrug"}, "on_store_error"),
        ({"mismatch_status": "400"}, "mismatch_status"),
        ({"methods": ""}, "methods"),
    ]:
        with pytest.raises(ConfigError) as raised:
            Idempotency(CountingApp(), options)
        assert name in str(raised.value), (options, str(raised.value))


def test_codec_keys_hide_token_and_tenant():
    codec = RecordCodec(SECRET)
    key = codec.store_key("acme", "my-token")
    assert "acme" not in key
    assert "my-token" not in key
    assert len(key) < 250
    assert key.isascii()
    assert " " not in key
    assert key != codec.store_key("acme2", "my-token") != codec.store_key("acme", "my-token2")
    assert RecordCodec("other").store_key("acme", "my-token") != key


# Only the filter's own handling below: one store is enough.


def test_memory_store_logs_an_error_under_several_processes(caplog):
    idem = Idempotency(CountingApp(), {"backend": "memory"})
    with caplog.at_level(logging.ERROR, logger="tenancy_mw.idempotency.filter"):
        post(idem, None, environ={"wsgi.multiprocess": True})
        post(idem, None, environ={"wsgi.multiprocess": True})
    assert caplog.text.count("several") == 1  # once, on the first request
    single = Idempotency(CountingApp(), {"backend": "memory"})
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="tenancy_mw.idempotency.filter"):
        post(single, None, environ={"wsgi.multiprocess": False})
    assert caplog.text == ""


def test_bad_tokens_and_bodies_are_4xx_and_never_reach_the_app():
    app = CountingApp()
    idem = Idempotency(app, {"backend": "memory", "max_body_bytes": "100"})
    cases = [
        ({"headers": [("X-Client-Token", "")]}, 400, "idempotency.invalid-token.empty"),
        ({"headers": [("X-Client-Token", "x" * 256)]}, 400, "idempotency.invalid-token.too-long"),
        ({"headers": [("X-Client-Token", "a\x01b")]}, 400, "idempotency.invalid-token.not-printable-ascii"),
        ({"headers": [("X-Client-Token", "caf\xe9")]}, 400, "idempotency.invalid-token.not-printable-ascii"),
        ({"headers": [("Idempotency-Key", '"a" "b"')]}, 400, "idempotency.invalid-token.bad-quoting"),
        ({"headers": [("Idempotency-Key", '"a\\x"')]}, 400, "idempotency.invalid-token.bad-quoting"),
        ({"headers": [("X-Client-Token", "a"), ("Idempotency-Key", "b")]}, 400, "idempotency.conflicting-tokens"),
        ({"token": "t", "body": b"x" * 101}, 413, "idempotency.body-too-large"),
        ({"token": "t", "environ": {"CONTENT_LENGTH": "12x"}}, 400, "idempotency.bad-content-length"),
        ({"token": "t", "environ": {"CONTENT_LENGTH": "500"}}, 413, "idempotency.body-too-large"),
        ({"token": "t", "environ": {"CONTENT_LENGTH": "90"}}, 400, "idempotency.unreadable-body"),
    ]
    for kwargs, status, code in cases:
        answer = post(idem, **kwargs)
        assert answer[0] == status, (kwargs, answer)
        assert json.loads(answer[2])["errors"][0]["code"] == code
    # 255 printable characters, spaces and quotes included, are a valid token.
    quoted = '"a \\"q\\" \\\\%s"' % ("z" * 248)  # unquoted: a "q" \ and 248 z, 255 characters
    assert post(idem, headers=[("Idempotency-Key", quoted)])[0] == 201
    assert post(idem, "~" * 255)[0] == 201
    # Both headers, one quoted and one bare, naming one token: fine.
    assert post(idem, headers=[("X-Client-Token", "same"), ("Idempotency-Key", '"same"')])[0] == 201
    assert app.calls == 3


def test_chunked_body_without_length_is_read_up_to_the_limit():
    app = CountingApp()
    idem = Idempotency(app, {"backend": "memory", "max_body_bytes": "100"})
    env = {"CONTENT_LENGTH": "", "wsgi.input_terminated": True}
    assert post(idem, "t1", environ=env)[0] == 201
    assert app.bodies == [CREATE_BODY]
    assert post(idem, "t2", body=b"y" * 101, environ=env)[0] == 413


def test_options_from_an_oslo_config_file(tmp_path):
    from oslo_config import cfg

    config = tmp_path / "svc.conf"
    config.write_text("[idempotency]\nbackend = memory\nreplay = current\nmethods = POST,PATCH\n")
    conf = cfg.ConfigOpts()
    conf(["--config-file", str(config)])
    idem = Idempotency(CountingApp(), conf)
    assert idem.replay_current
    assert idem.methods == {"POST", "PATCH"}


def test_sql_store_down_is_503_or_unprotected(caplog):
    from tests.support.servers import free_port

    url = "postgresql+psycopg2://root@127.0.0.1:%d/nothing" % free_port()
    app = CountingApp()
    closed = Idempotency(app, {"backend": "sql", "connection": url, "secret": SECRET, "store_timeout": "1"})
    status, headers, body = post(closed, new_token())
    assert status == 503
    assert headers["Retry-After"] == "1"
    assert app.calls == 0
    opened = Idempotency(app, {"backend": "sql", "connection": url, "secret": SECRET, "store_timeout": "1",
                               "on_store_error": "fail_open"})
    with caplog.at_level(logging.WARNING, logger="tenancy_mw.idempotency.filter"):
        assert post(opened, new_token())[0] == 201
    assert "unprotected" in caplog.text
    assert app.calls == 1


# Scope in both URL layouts, behind a real tenant_path -----------------------------------------------------

KEYPAIR_BODY = b'{"keypair": {"name": "k1"}}'


def confirmed(project: str) -> dict:
    """What keystonemiddleware leaves in environ for a token it validated."""
    return {"HTTP_X_IDENTITY_STATUS": "Confirmed", "HTTP_X_PROJECT_ID": project, "HTTP_X_ROLES": "member"}


@pytest.mark.parametrize("token_tenant", ["false", "true"])
@pytest.mark.parametrize("layout", ["/v2.1/{project}/os-keypairs", "/v2.1/os-keypairs"])
def test_the_same_token_and_body_from_two_projects_get_separate_answers(build, layout, token_tenant):
    # The cross-project replay: another project's member sent the first one's token and body.
    app = CountingApp()
    pipeline = TenantPath(build(app), {"token_tenant": token_tenant})
    token = new_token()
    answers = {}
    for project in ("6f70656e", "0a1b2c3d"):
        target = layout.format(project=project)
        answers[project] = post(pipeline, token, tenant=None, target=target, body=KEYPAIR_BODY,
                                environ=confirmed(project))
        assert answers[project][0] == 201
        assert "Idempotent-Replayed" not in answers[project][1]
    assert answers["6f70656e"][2] != answers["0a1b2c3d"][2]
    assert app.calls == 2
    for project, first in answers.items():
        again = post(pipeline, token, tenant=None, target=layout.format(project=project), body=KEYPAIR_BODY,
                     environ=confirmed(project))
        assert (again[2], again[1]["Idempotent-Replayed"]) == (first[2], "true")
    assert app.calls == 2


def test_a_path_tenant_that_differs_from_the_token_keeps_the_tokens_scope(build):
    app = CountingApp()
    pipeline = TenantPath(build(app), {})
    token = new_token()
    first = post(pipeline, token, tenant=None, target="/v2.1/6f70656e/servers", environ=confirmed("6f70656e"))
    assert first[0] == 201
    # Another project naming the first one's tenant in its path does not reach the first one's scope ...
    other = post(pipeline, token, tenant=None, target="/v2.1/6f70656e/servers", environ=confirmed("0a1b2c3d"))
    assert other[0] == 201
    assert "Idempotent-Replayed" not in other[1]
    assert other[2] != first[2]
    # ... and the first project naming another tenant stays in its own: the token is taken (another path).
    moved = post(pipeline, token, tenant=None, target="/v2.1/0a1b2c3d/servers", environ=confirmed("6f70656e"))
    assert moved[0] == 409
    assert json.loads(moved[2])["errors"][0]["code"] == "idempotency.token-reused"
    assert app.calls == 2
