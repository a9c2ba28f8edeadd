"""tenancy_mw.tenants.moves, the interface a service implements so tenant_admin can move its resources.

What a service author checks: the value types render as the move action
document shows them, ``state_tag`` is stable and changes with any part,
``load_provider`` finds the provider the ``move_provider`` option names (or
says why not), and the provider written as the module documentation shows
moves widgets through the filter.
"""

from __future__ import annotations

import re
import types

import pytest
import webtest

from tenancy_mw import migrations
from tenancy_mw.tenants import moves
from tenancy_mw.tenants.admin import TenantAdmin
from tenancy_mw.tenants.moves import MoveProvider, MoveRefused, ResourceState, TenantResources, load_provider, state_tag
from tenancy_mw.tenants.path_filter import TenantPath
from tests.support.widgets import WidgetMoves, WidgetService

# ResourceState, TenantResources, MoveRefused ------------------------------------


def test_a_resource_state_document_names_its_path_state_tag_and_deletion():
    state = ResourceState(("widgets", "42"), {"name": "w", "size": 3}, tag="v7")
    assert state.document() == {"path": "widgets/42", "state": {"name": "w", "size": 3}, "tag": "v7", "deleted": False}
    assert ResourceState(("widgets", "42"), deleted=True).document()["deleted"] is True


def test_without_a_tag_the_document_derives_one_from_the_state():
    one = ResourceState(("widgets", "1"), {"name": "w", "size": 3})
    same = ResourceState(("widgets", "1"), {"size": 3, "name": "w"})
    other = ResourceState(("widgets", "1"), {"name": "w", "size": 4})
    assert one.document()["tag"] == same.document()["tag"] == state_tag([{"name": "w", "size": 3}])
    assert one.document()["tag"] != other.document()["tag"]
    assert re.fullmatch("[0-9a-f]{64}", one.document()["tag"])


def test_resource_states_are_frozen_and_keep_their_own_state_dict():
    first, second = ResourceState(("a",)), ResourceState(("b",))
    assert first.state is not second.state
    with pytest.raises(AttributeError):
        first.tag = "changed"  # type: ignore[misc]


def test_tenant_resources_default_to_no_list_and_no_metadata():
    resources = TenantResources(count=3, tag="t")
    assert (resources.resources, resources.metadata) == (None, {})


def test_move_refused_carries_status_and_detail():
    refused = MoveRefused(403, "Tenant dst is over its quota.")
    assert (refused.status, refused.detail, str(refused)) == (403, "Tenant dst is over its quota.", refused.detail)


# state_tag -----------------------------------------------------------------------


def test_state_tag_is_stable_and_changes_with_order_and_boundaries():
    assert state_tag(["a", "b"]) == state_tag(("a", "b"))
    assert state_tag(["a", "b"]) != state_tag(["b", "a"])
    # The parts are delimited: moving a character across a boundary changes the tag.
    assert state_tag(["ab", "c"]) != state_tag(["a", "bc"]) != state_tag(["abc"])
    assert state_tag([]) != state_tag([""])


def test_state_tag_takes_json_values_and_strings_apart():
    assert state_tag([{"b": 1, "a": 2}]) == state_tag([{"a": 2, "b": 1}])
    assert state_tag([1]) == state_tag(["1"])  # a JSON value is tagged as its JSON text
    assert state_tag(["\ud800"])  # a lone surrogate (a name read from a filesystem) does not fail


# load_provider ---------------------------------------------------------------------


def test_load_provider_by_colon_or_dotted_path_calls_it_with_the_application():
    service = WidgetService()
    for dotted in ("tests.support.widgets:WidgetMoves", "tests.support.widgets.WidgetMoves"):
        provider = load_provider(dotted, service)
        assert isinstance(provider, WidgetMoves)
        assert provider.service is service
    assert load_provider("tests.support.widgets:widget_moves_factory", service).service is service


def test_load_provider_follows_attributes_after_the_colon(monkeypatch):
    holder = types.SimpleNamespace(Moves=WidgetMoves)
    monkeypatch.setattr("tests.support.widgets.holder", holder, raising=False)
    assert isinstance(load_provider("tests.support.widgets:holder.Moves", WidgetService()), WidgetMoves)


@pytest.mark.parametrize(
    ("dotted", "says"),
    [
        ("WidgetMoves", "not a dotted path"),
        ("tests.support.widgets:", "not a dotted path"),
        ("no.such.module:Moves", "cannot import 'no.such.module'"),
        ("tests.support.widgets:NoSuchMoves", "has no 'NoSuchMoves'"),
        ("tests.support.widgets:WidgetService", "calling 'tests.support.widgets:WidgetService' with the application"),
        ("builtins:repr", "not a tenancy_mw.tenants.moves.MoveProvider"),
    ],
)
def test_load_provider_says_what_is_wrong(dotted, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        load_provider(dotted, WidgetService())


def test_a_provider_must_implement_every_method():
    class Partial(MoveProvider):
        def resource_state(self, tenant_id, path):
            return None

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]


# The documented provider, through the filter -----------------------------------------


def _documented_provider() -> type:
    """The WidgetMoves class of the module documentation, as a service author would copy it."""
    block = moves.__doc__.split("one on SQLAlchemy)::\n", 1)[1].split("\nRules a provider follows:", 1)[0]
    code = "\n".join(line[4:] for line in block.splitlines())
    namespace: dict = {}
    exec(compile(code, "tenancy_mw.tenants.moves.__doc__", "exec"), namespace)  # noqa: S102  # the library's own text
    return namespace["WidgetMoves"]


@pytest.fixture
def documented(tmp_path, monkeypatch):
    url = "sqlite:///%s" % (tmp_path / "tenants.sqlite")
    migrations.upgrade(url, ["tenants"])
    monkeypatch.setattr("tests.support.widgets.DocumentedMoves", _documented_provider(), raising=False)
    service = WidgetService()
    admin = TenantAdmin(service, {"connection": url, "move_provider": "tests.support.widgets:DocumentedMoves"})
    yield webtest.TestApp(TenantPath(admin, {})), service
    admin.close()


def test_the_documented_provider_moves_a_widget_and_its_tenant(documented):
    app, service = documented
    for tenant in ("src", "dst", "third"):
        app.put_json("/v1.0/%s" % tenant, {}, status=201)
    app.put("/v1.0/src/widgets/w1", status=201)
    app.put("/v1.0/src/widgets/w2", status=201)
    shown = app.get("/v1.0/src/widgets/w1/action/move?dest=dst").json["move"]
    assert shown["resource"] == {"path": "widgets/w1", "state": {"name": "w1"}, "tag": "1", "deleted": False}
    moved = app.post("/v1.0/src/widgets/w1/action/move?dest=dst", status=303)
    assert moved.headers["Location"].endswith("/v1.0/dst/widgets/w1")
    assert app.get("/v1.0/src/widgets/w1", status=301).headers["Location"].endswith("/v1.0/dst/widgets/w1")
    whole = app.get("/v1.0/dst/action/move?dest=third").json["move"]["resources"]
    assert (whole["count"], [r["path"] for r in whole["list"]]) == (1, ["widgets/w1"])
    app.post("/v1.0/src/action/move?dest=third", status=303)
    assert sorted(service.widgets) == [("dst", "w1"), ("third", "w2")]


def test_the_documented_provider_refuses_what_is_not_there(documented):
    app, _ = documented
    for tenant in ("src", "dst"):
        app.put_json("/v1.0/%s" % tenant, {}, status=201)
    missing = app.post("/v1.0/src/widgets/nope/action/move?dest=dst", status=404)
    assert missing.json["errors"][0]["code"] == "tenancy.move-resource-not-found"
    not_movable = app.get("/v1.0/src/gadgets/1/action/move?dest=dst", status=404)
    assert not_movable.json["errors"][0]["code"] == "tenancy.move-resource-not-found"
