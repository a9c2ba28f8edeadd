"""What the package promises its users: entry points, paste loading, the sample config."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import webtest
from paste.deploy import loadapp

from tenancy_mw import opts

REPO = Path(__file__).resolve().parents[2]
FILTERS = ["tenant_path", "admin_cull", "id_resolver", "tenant_admin", "idempotency", "tag_query"]


@pytest.mark.parametrize("name", FILTERS)
def test_filter_entry_points_resolve(name):
    (entry,) = [e for e in metadata.entry_points(group="paste.filter_factory") if e.name == name]
    assert entry.dist.name.replace("-", "_") == "tenancy_mw"
    factory = entry.load()
    assert callable(factory({}, ))


def test_oslo_config_opts_entry_point():
    (entry,) = [e for e in metadata.entry_points(group="oslo.config.opts") if e.name == "tenancy_mw"]
    assert entry.load() is opts.list_opts


def test_every_filter_is_listed_for_the_generator():
    groups = dict(opts.list_opts())
    assert set(groups) == set(FILTERS)
    for group, options in groups.items():
        names = [o.name for o in options]
        assert "error_format" in names, group
        assert len(names) == len(set(names)), group


def test_paste_pipeline_with_egg_use(tmp_path):
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        """
[pipeline:main]
pipeline = request_id tenant_path app

[filter:request_id]
use = egg:oslo.middleware#request_id

[filter:tenant_path]
use = egg:tenancy_mw#tenant_path
tenant_header = X-Project-Name

[app:app]
paste.app_factory = tests.support.apps:recorder_factory
record_file = %s
"""
        % (tmp_path / "records.jsonl")
    )
    app = webtest.TestApp(loadapp("config:%s" % ini))
    response = app.get("/v2.1/acme/servers", headers={"X-Project-Name": "forged"})
    assert response.json["tenant_id"] == "acme"
    assert response.json["headers"]["HTTP_X_PROJECT_NAME"] == "acme"


def test_paste_bad_option_fails_when_the_pipeline_loads(tmp_path):
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        """
[pipeline:main]
pipeline = tenant_path app

[filter:tenant_path]
use = egg:tenancy_mw#tenant_path
version_pattern = v(

[app:app]
paste.app_factory = tests.support.apps:recorder_factory
record_file = unused
"""
    )
    with pytest.raises(ValueError, match="version_pattern"):
        loadapp("config:%s" % ini)


def test_sample_config_is_current(tmp_path):
    """doc/tenancy_mw.conf.sample is what `make genconfig` writes today."""
    out = tmp_path / "sample.conf"
    generator = Path(sys.executable).with_name("oslo-config-generator")
    subprocess.run(
        [str(generator), "--namespace", "tenancy_mw", "--wrap-width", "79", "--output-file", str(out)],
        check=True,
    )
    committed = (REPO / "doc" / "tenancy_mw.conf.sample").read_text()
    assert out.read_text() == committed, "run `make genconfig` and commit doc/tenancy_mw.conf.sample"
    for group in FILTERS:
        assert "[%s]" % group in committed


def test_paste_bad_cull_rule_fails_when_the_pipeline_loads(tmp_path):
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        """
[pipeline:main]
pipeline = admin_cull app

[filter:admin_cull]
use = egg:tenancy_mw#admin_cull
rules =
    PUT,DELETE /os-services/**
    GET os-hypervisors

[app:app]
paste.app_factory = tests.support.apps:recorder_factory
record_file = unused
"""
    )
    with pytest.raises(ValueError, match="rule 'GET os-hypervisors': the pattern must start with '/'"):
        loadapp("config:%s" % ini)


def test_cull_rules_from_an_oslo_config_file(tmp_path):
    from oslo_config import cfg

    from tenancy_mw.cull.filter import AdminCull
    from tests.support.apps import Recorder
    from tests.support.wsgi import call, make_environ

    conf_file = tmp_path / "service.conf"
    conf_file.write_text(
        "[admin_cull]\nrules = PUT,DELETE /os-services/**\nrules = * /os-hypervisors/**\ncull_status = 403\n"
    )
    conf = cfg.ConfigOpts()
    conf([], project="tenancy-test", default_config_files=[str(conf_file)])
    recorder = Recorder()
    app = AdminCull(recorder, conf)
    assert call(app, make_environ("DELETE", "/v2.1/acme/os-services/1"))[0] == 403
    assert call(app, make_environ("GET", "/v2.1/acme/os-hypervisors"))[0] == 403
    assert call(app, make_environ("GET", "/v2.1/acme/os-services"))[0] == 200
    assert len(recorder.seen) == 1
