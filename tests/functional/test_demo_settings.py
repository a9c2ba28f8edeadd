"""examples/tenancy_mw_demo.conf has one group per filter of examples/api-paste.ini, and no other.

Read as an operator would check it: the filters the two pipelines run (their
``use = egg:...`` entry points), the option groups each one reads, and the
groups the settings file holds.  A filter whose group is missing runs on its
defaults without a word (as the demo's ``admin_cull`` did, culling none of
nova's admin calls); a group no filter reads is a setting nobody applies.
"""

from __future__ import annotations

import configparser
from importlib import metadata

from oslo_config import cfg

from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.cull.filter import AdminCull
from tests.functional.conftest import DEMO_INI, EXAMPLES_DIR

SETTINGS = EXAMPLES_DIR + "/tenancy_mw_demo.conf"
#: The app's own group (demo_compute.config.GROUP).
APP_GROUP = "demo_compute"


def _paste() -> configparser.ConfigParser:
    paste = configparser.ConfigParser(interpolation=None)
    paste.read(DEMO_INI)
    return paste


def _filter_class(use: str) -> type:
    """The class an ``egg:DIST#NAME`` filter entry point builds (its factory's ``__self__``)."""
    distribution, _, name = use.removeprefix("egg:").partition("#")
    (entry,) = [e for e in metadata.distribution(distribution).entry_points if e.name == name]
    assert entry.group == "paste.filter_factory", entry
    return entry.load().__self__


def groups_read_by(cls: type) -> set[str]:
    """The oslo.config groups a filter class reads its options from."""
    if issubclass(cls, TenancyMiddleware):
        return {cls.opt_group}
    # Another library's filter: the groups it registers when built on a ConfigOpts of its own.
    conf = cfg.ConfigOpts()
    before = set(conf)
    cls(None, conf)
    return set(conf) - before


def filter_groups() -> dict[str, set[str]]:
    """``{filter section: groups it reads}`` of every filter the pipelines of api-paste.ini run."""
    paste = _paste()
    used = {
        name
        for section in paste.sections()
        if section.startswith("pipeline:")
        for name in paste[section]["pipeline"].split()
    }
    return {
        # The demo's own filters (paste.filter_factory, no "use") read no options.
        name: groups_read_by(_filter_class(paste["filter:" + name]["use"]))
        if "use" in paste["filter:" + name]
        else set()
        for name in sorted(used)
        if paste.has_section("filter:" + name)
    }


def settings_groups() -> set[str]:
    # strict=False: an oslo.config file repeats the key of a multi-valued option.
    settings = configparser.ConfigParser(interpolation=None, strict=False)
    settings.read(SETTINGS)
    return set(settings.sections())


def test_every_filter_of_the_pipelines_has_its_group_and_every_group_a_reader():
    by_filter = filter_groups()
    # Both pipelines' filters were found, the oslo.middleware one included.
    assert set(by_filter) == {
        "request_id",
        "openapi",
        "admin_cull",
        "tenant_path",
        "tenant_admin",
        "tenant_admin_api",
        "idempotency",
        "tag_query",
        "id_resolver",
    }
    assert by_filter["request_id"] == set()  # oslo.middleware's RequestId has no options
    assert by_filter["openapi"] == set()  # the demo's document filter neither
    read = set().union(*by_filter.values())
    missing = sorted(read - settings_groups())
    assert not missing, "filters of api-paste.ini without their group in tenancy_mw_demo.conf: %s" % missing
    unread = sorted(settings_groups() - read - {APP_GROUP})
    assert not unread, "groups of tenancy_mw_demo.conf no filter reads: %s" % unread
    assert APP_GROUP in settings_groups()


def test_admin_cull_has_rules_for_novas_admin_calls():
    """The group is not there for show: it holds README.rst's os-services rule and os-hypervisors."""
    from demo_compute import config

    conf = cfg.ConfigOpts()
    conf.register_opts(AdminCull.all_opts(), group="admin_cull")
    conf([], project=config.PROJECT, default_config_files=[SETTINGS])
    assert [" ".join(rule.split()) for rule in conf.admin_cull.rules] == [
        "PUT,DELETE /os-services/**",
        "* /os-hypervisors/**",
    ]
