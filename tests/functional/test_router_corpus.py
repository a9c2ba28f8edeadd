"""The bypass corpus through real routers, under the environs real servers build.

1. Each request of :func:`~tests.support.bypass_corpus.router_corpus` is
   sent once, byte for byte, to gunicorn, waitress and uWSGI serving an app
   that records the environ each server built (:mod:`tests.support.capture`).
2. Each captured environ is replayed through every router deployment of
   :mod:`tests.support.routers` (Routes as nova uses it, pecan
   RestControllers, Flask, Django, Paste's urlmap, nova's urlmap) *without*
   admin_cull: what reaches an admin handler is labelled admin, per router
   and server.
3. The same environs go through each documented pipeline order *with*
   admin_cull: no labelled request may reach the router at all, and no
   request may reach an admin handler.
"""

from __future__ import annotations

import json

import pytest

from tenancy_mw.cull.filter import AdminCull
from tenancy_mw.tenants.path_filter import TenantPath
from tests.conftest import REPO_ROOT
from tests.support.bypass_corpus import router_corpus
from tests.support.capture import SERVERS, capture, replay_environ
from tests.support.routers import DEPLOYMENTS

CORPUS = router_corpus()


def _strip(app):
    return TenantPath(app, {"strip_tenant": "true"})


# name: (the pipeline without admin_cull, that labels; the documented pipeline with it)
PIPELINES = {
    "admin_cull": (lambda app: app, lambda app: AdminCull(app, {})),
    "tenant_path admin_cull": (lambda app: TenantPath(app, {}), lambda app: TenantPath(AdminCull(app, {}), {})),
    "admin_cull tenant_path": (lambda app: TenantPath(app, {}), lambda app: AdminCull(TenantPath(app, {}), {})),
    "stripping tenant_path admin_cull": (_strip, lambda app: _strip(AdminCull(app, {}))),
    "admin_cull stripping tenant_path": (_strip, lambda app: AdminCull(_strip(app), {})),
}
# A stripping tenant_path only makes sense with the version in the path the filters see.
STRIPPING = {"stripping tenant_path admin_cull", "admin_cull stripping tenant_path"}


@pytest.fixture(scope="module")
def captured():
    """The corpus as each server hands it to an app: {server: [record or None]}."""
    return {server: capture(server, CORPUS, REPO_ROOT) for server in SERVERS}


def _handler(app, record) -> str:
    """The handler *app* dispatched the captured request to ("" if none, "error" for a filter's answer)."""
    captured = {}

    def start_response(status, headers, exc_info=None):
        captured["status"] = int(status.split()[0])

    chunks = app(replay_environ(record), start_response)
    try:
        body = b"".join(chunks)
    finally:
        if hasattr(chunks, "close"):
            chunks.close()
    try:
        return json.loads(body).get("handler", "error") if body.startswith(b"{") else ""
    except ValueError:
        return ""


def _run(deployment, pipeline, records):
    """{corpus index: handler} and the indexes that reached the router."""
    app, probe = deployment.build(pipeline)
    handlers, reached = {}, set()
    for index, record in enumerate(records):
        if record is None:
            continue  # the server refused it itself
        before = probe.hits
        handlers[index] = _handler(app, record)
        if probe.hits != before:
            reached.add(index)
    return handlers, reached


def test_every_server_passes_most_of_the_corpus_on(captured):
    for server, records in captured.items():
        passed = sum(record is not None for record in records)
        assert passed > len(CORPUS) * 0.7, (server, passed)


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d.name)
def test_no_admin_call_reaches_a_router_through_the_filters(captured, deployment):
    labelled_total = 0
    for server, records in captured.items():
        labels = {}
        for name, (bare, with_cull) in PIPELINES.items():
            if name in STRIPPING and deployment.mount is not None:
                continue
            key = bare(lambda environ, start_response: None).__class__.__name__ + str(name in STRIPPING)
            if key not in labels:
                handlers, _ = _run(deployment, bare, records)
                labels[key] = {i for i, h in handlers.items() if h.startswith("admin:")}
            admin = labels[key]
            labelled_total += len(admin)
            handlers, reached = _run(deployment, with_cull, records)
            leaked = sorted(admin & reached)
            assert leaked == [], (
                server,
                name,
                [(CORPUS[i].note, CORPUS[i].method, CORPUS[i].target, CORPUS[i].headers) for i in leaked[:10]],
            )
            reached_admin = sorted(i for i, h in handlers.items() if h.startswith("admin:"))
            assert reached_admin == [], (server, name, [(CORPUS[i].method, CORPUS[i].target) for i in reached_admin])
            # The filters still let public calls through to public handlers.
            public = [i for i, h in handlers.items() if h.startswith("public:")]
            assert len(public) >= (5 if name in STRIPPING else 10), (server, name, len(public))
    # The routers do route admin calls: the labels are not empty.
    assert labelled_total > 30, labelled_total


def test_the_routers_reach_admin_handlers_the_filters_must_stop(captured):
    """The issue's bypasses: each is routed to an admin handler by some router without the filter."""
    records = captured["uwsgi"]
    nova = "nova urlmap, filters in front"
    expectations = {
        (nova, "DELETE", "/acme", ("Accept", "application/json;version=2.1")),
        (nova, "POST", "/acme/action/restore", ("Content-Type", "application/json;version=2.1")),
        ("paste urlmap /v1 = versioned app, filters in front", "DELETE", "/v1/v2.1/acme", None),
        ("pecan get_one(tenant_id)", "POST", "/v2.1/action/restore", None),
        ("pecan get_one(*args)", "POST", "/v2.1/acme/x/action/restore", None),
        ("pecan get_one(*args)", "GET", "/v2.1/acme/a/b/action", None),
        ("pecan get_one(tenant_id)", "POST", "/v2.1/acme/x/../../action/restore", None),
    }
    by_name = {d.name: d for d in DEPLOYMENTS}
    for name, method, target, header in expectations:
        index = next(
            i for i, r in enumerate(CORPUS)
            if r.method == method and r.target == target and (header is None or r.headers == (header,))
        )
        only = [record if i == index else None for i, record in enumerate(records)]
        handlers, _ = _run(by_name[name], lambda app: app, only)
        assert handlers[index].startswith("admin:"), (name, method, target, handlers[index])
        _, reached = _run(by_name[name], lambda app: AdminCull(app, {}), only)
        assert index not in reached
