"""The demo's Routes map on its own: decoded segments in and out, 404 and 405 with Allow."""

from __future__ import annotations

import doctest

import pytest
from demo_compute import microversions, router
from demo_compute.router import MethodNotAllowed, NoRoute, Router


@pytest.mark.parametrize("module", [router, microversions])
def test_the_module_examples_hold(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.fixture
def servers():
    routes = Router()
    routes.connect("/v2.1/{project_id}/servers", "list", ("GET", "HEAD"))
    routes.connect("/v2.1/{project_id}/servers", "create", ("POST",))
    routes.connect("/v2.1/{project_id}/servers/{server_id}/tags/{tag}", "tag", ("GET", "PUT", "DELETE"))
    return routes


def test_segments_are_matched_and_handed_back_decoded(servers):
    # Canonical segments are decoded: a "/", "%" or space in one stays inside it.
    assert servers.match(("v2.1", "Bob's Tenant", "servers", "a/b", "tags", "50% off"), "PUT") == (
        "tag",
        {"project_id": "Bob's Tenant", "server_id": "a/b", "tag": "50% off"},
    )
    assert servers.match(("v2.1", "∑∞", "servers"), "POST") == ("create", {"project_id": "∑∞"})


def test_other_methods_are_405_with_every_method_the_path_takes(servers):
    with pytest.raises(MethodNotAllowed) as raised:
        servers.match(("v2.1", "acme", "servers"), "DELETE")
    assert raised.value.allow == ["GET", "HEAD", "POST"]


@pytest.mark.parametrize(
    "segments",
    [("v2.1", "acme"), ("v2.1", "acme", "servers", "x"), ("v2.1", "", "servers"), ("v2", "acme", "servers")],
)
def test_paths_no_route_has_are_404(servers, segments):
    with pytest.raises(NoRoute):
        servers.match(segments, "GET")
