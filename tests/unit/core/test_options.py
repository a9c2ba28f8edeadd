"""Options over their lifetime: renamed options, service defaults, per-filter namespaces."""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import webtest
from oslo_config import cfg
from paste.deploy import loadapp

from tenancy_mw import opts
from tenancy_mw.core.base import ConfigError, TenancyMiddleware
from tests.support.apps import Recorder
from tests.support.filter_configs import minimal_options

FILTERS = {cls.opt_group: cls for cls in opts.FILTERS}


class Renamed(TenancyMiddleware):
    """A filter whose options were renamed in a later release."""

    opt_group = "tenancy_test_renamed"
    opts = [
        cfg.StrOpt("tenant_header", default="X-Tenant-Id", deprecated_name="tenant_hdr", help="New name."),
        cfg.ListOpt(
            "admin_roles",
            default=["admin"],
            deprecated_opts=[cfg.DeprecatedOpt("admin_role_names", group="tenancy_test_renamed")],
            help="New name, declared with deprecated_opts.",
        ),
        cfg.BoolOpt(
            "legacy_mode",
            default=False,
            deprecated_for_removal=True,
            deprecated_since="0.2",
            deprecated_reason="Nothing needs it.",
            help="Going away.",
        ),
    ]

    def configure(self, options):
        self.header = options.tenant_header
        self.roles = options.admin_roles


def _paste(tmp_path, body: str):
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        "[pipeline:main]\npipeline = renamed app\n\n"
        "[filter:renamed]\npaste.filter_factory = tests.unit.core.test_options:Renamed.factory\n%s\n"
        "[app:app]\npaste.app_factory = tests.support.apps:recorder_factory\nrecord_file = unused\n" % body
    )
    return loadapp("config:%s" % ini)


def test_paste_takes_a_renamed_option_under_its_old_name_and_logs_it(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tenancy_mw.base")
    app = _paste(tmp_path, "tenant_hdr = X-Old-Header\nadmin_role_names = root, operator\n")
    assert app.header == "X-Old-Header"
    assert app.roles == ["root", "operator"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    expected = 'tenancy_mw tenancy_test_renamed: option "tenant_hdr" is deprecated; use option "tenant_header" instead.'
    assert expected in warnings
    assert any('"admin_role_names" is deprecated; use option "admin_roles"' in w for w in warnings)


def test_oslo_config_file_takes_the_old_name_too(tmp_path):
    conf_file = tmp_path / "service.conf"
    conf_file.write_text("[tenancy_test_renamed]\ntenant_hdr = X-From-File\n")
    conf = cfg.ConfigOpts()
    conf([], project="tenancy-test", default_config_files=[str(conf_file)])
    assert Renamed(Recorder(), conf).header == "X-From-File"


def test_old_and_new_name_together_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="options tenant_header and its deprecated name tenant_hdr are both set"):
        _paste(tmp_path, "tenant_hdr = X-Old\ntenant_header = X-New\n")


def test_an_option_deprecated_for_removal_logs_when_set(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tenancy_mw.base")
    _paste(tmp_path, "legacy_mode = true\n")
    expected = '"legacy_mode" is deprecated for removal since 0.2 (Nothing needs it.)'
    assert any(expected in r.getMessage() for r in caplog.records)


def test_new_names_log_nothing_and_typos_stay_errors(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tenancy_mw.base")
    assert _paste(tmp_path, "tenant_header = X-New\n").header == "X-New"
    assert not caplog.records
    with pytest.raises(ConfigError, match="unknown option tenant_headr"):
        _paste(tmp_path, "tenant_headr = X-New\n")


def _options_module(group: str):
    """The module whose ``list_opts`` the filter's namespace names (it offers ``set_defaults`` too)."""
    (entry,) = [e for e in metadata.entry_points(group="oslo.config.opts") if e.name == "tenancy_mw." + group]
    return importlib.import_module(entry.value.split(":")[0])


@pytest.fixture
def restore_defaults():
    """Put every filter's defaults back after a test that changes them."""
    saved = [(opt, opt.default) for cls in opts.FILTERS for opt in cls.all_opts()]
    yield
    for opt, default in saved:
        opt.default = default


@pytest.mark.parametrize("group", sorted(FILTERS))
def test_set_defaults_changes_what_a_filter_is_built_with(group, restore_defaults):
    module = _options_module(group)
    module.set_defaults(error_format="nova")
    assert FILTERS[group](Recorder(), minimal_options(group)).options.error_format == "nova"
    # A value in the paste section (or dict) still wins.
    built = FILTERS[group](Recorder(), minimal_options(group, error_format="api-wg"))
    assert built.options.error_format == "api-wg"
    # Other filters keep their own default.
    for other, cls in FILTERS.items():
        if other != group:
            assert cls(Recorder(), minimal_options(other)).options.error_format == "api-wg", other


@pytest.mark.parametrize("group", sorted(FILTERS))
def test_set_defaults_refuses_unknown_names_and_bad_values_and_then_changes_nothing(group, restore_defaults):
    module = _options_module(group)
    with pytest.raises(ConfigError, match="unknown option error_fromat; known options are: .*error_format"):
        module.set_defaults(error_format="nova", error_fromat="nova")
    with pytest.raises(ConfigError, match=r"set_defaults\(error_format='xml'\) is invalid"):
        module.set_defaults(error_format="xml")
    assert FILTERS[group](Recorder(), minimal_options(group)).options.error_format == "api-wg"


def test_set_defaults_checks_each_value_of_a_multi_valued_option(restore_defaults):
    from tenancy_mw.cull import filter as admin_cull

    with pytest.raises(ConfigError, match="a multi-valued option takes a list"):
        admin_cull.set_defaults(rules="PUT /os-services/**")
    admin_cull.set_defaults(rules=["PUT,DELETE /os-services/**"])
    app = webtest.TestApp(admin_cull.AdminCull(Recorder(), {}))
    app.delete("/v2.1/acme/os-services/1", status=404)
    app.get("/v2.1/acme/os-services")


def test_service_defaults_reach_a_paste_pipeline(tmp_path, restore_defaults):
    """What a service does at start-up: its defaults, then api-paste.ini without them."""
    from tenancy_mw.cull import filter as admin_cull
    from tenancy_mw.tenants import path_filter as tenant_path

    tenant_path.set_defaults(error_format="nova")
    admin_cull.set_defaults(cull_status=403)
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        "[pipeline:main]\npipeline = admin_cull tenant_path app\n\n"
        "[filter:admin_cull]\nuse = egg:tenancy_mw#admin_cull\n\n"
        "[filter:tenant_path]\nuse = egg:tenancy_mw#tenant_path\n\n"
        "[app:app]\npaste.app_factory = tests.support.apps:recorder_factory\nrecord_file = %s\n"
        % (tmp_path / "records.jsonl")
    )
    app = webtest.TestApp(loadapp("config:%s" % ini))
    assert app.get("/v2.1/%s/servers" % ("x" * 256), status=400).json["badRequest"]["code"] == 400
    assert app.put("/v2.1/acme", status=403).json["errors"][0]["code"] == "tenancy.admin-call"


@pytest.mark.parametrize("group", sorted(FILTERS))
def test_each_filter_has_its_own_namespace_returning_copies(group):
    (entry,) = [e for e in metadata.entry_points(group="oslo.config.opts") if e.name == "tenancy_mw." + group]
    list_opts = entry.load()
    assert list_opts is _options_module(group).list_opts
    ((listed_group, listed),) = list_opts()
    assert listed_group == group
    own = FILTERS[group].all_opts()
    assert [o.dest for o in listed] == [o.dest for o in own]
    assert not {id(o) for o in listed} & {id(o) for o in own}
    listed[0].default = "changed by a caller"
    assert FILTERS[group].all_opts()[0].default != "changed by a caller"


def test_umbrella_namespace_returns_copies():
    listed = [o for _, group_opts in opts.list_opts() for o in group_opts]
    own = [o for cls in opts.FILTERS for o in cls.all_opts()]
    assert [o.dest for o in listed] == [o.dest for o in own]
    assert not {id(o) for o in listed} & {id(o) for o in own}


def test_a_filter_namespace_generates_a_sample_with_that_filter_alone(tmp_path):
    generator = Path(sys.executable).with_name("oslo-config-generator")
    for group in FILTERS:
        out = tmp_path / ("%s.conf" % group)
        subprocess.run([str(generator), "--namespace", "tenancy_mw." + group, "--output-file", str(out)], check=True)
        sample = out.read_text()
        sections = [line for line in sample.splitlines() if line.startswith("[")]
        assert sections == ["[DEFAULT]", "[%s]" % group], (group, sections)
        for opt in FILTERS[group].all_opts():
            assert ("\n#%s =" % opt.dest) in sample, (group, opt.dest)


LAYOUT_FILTERS = ("tenant_path", "tenant_admin", "id_resolver")


def test_the_url_layout_options_are_one_declaration_each_filter_holds_a_copy_of():
    from tenancy_mw.tenants.ids import tenant_layout_opts

    shared = {opt.dest: opt for opt in tenant_layout_opts()}
    seen_ids: set[int] = set()
    for group in LAYOUT_FILTERS:
        own = {opt.dest: opt for opt in FILTERS[group].all_opts() if opt.dest in shared}
        assert set(own) == set(shared), group
        for name, opt in own.items():
            assert (type(opt), opt.default, opt.help) == (type(shared[name]), shared[name].default, shared[name].help)
            assert id(opt) not in seen_ids
            seen_ids.add(id(opt))


def test_a_layout_default_set_for_one_filter_leaves_the_others_alone(restore_defaults):
    from tenancy_mw.tenants import path_filter as tenant_path

    tenant_path.set_defaults(tenant_in_path="always", tenantless_collections=["widgets"])
    assert FILTERS["tenant_path"](Recorder(), {}).layout.tenant_in_path == "always"
    for group in ("tenant_admin", "id_resolver"):
        built = FILTERS[group](Recorder(), minimal_options(group))
        try:
            assert built.layout.tenant_in_path == "optional"
            assert "servers" in built.layout.collections
        finally:
            closer = getattr(built, "close", None) or built.lookup.close
            closer()
    with pytest.raises(ConfigError, match=r"set_defaults\(tenant_in_path='sometimes'\) is invalid"):
        tenant_path.set_defaults(tenant_in_path="sometimes")


def test_the_layout_options_read_from_an_oslo_config_file(tmp_path):
    conf_file = tmp_path / "service.conf"
    conf_file.write_text(
        "[tenant_path]\ntenant_in_path = optional\ntenant_id_pattern = [0-9a-f-]+\n"
        "tenantless_collections = widgets,gadgets\ntoken_tenant = true\n"
    )
    conf = cfg.ConfigOpts()
    conf([], project="tenancy-test", default_config_files=[str(conf_file)])
    layout = FILTERS["tenant_path"](Recorder(), conf).layout
    assert (layout.collections, layout.tenant_id_pattern) == ({"widgets", "gadgets"}, "[0-9a-f-]+")
