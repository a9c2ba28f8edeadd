"""The ``tag_query`` filter: what reaches the app, what is refused, its options from Python, paste and oslo.config."""

from __future__ import annotations

import json

import pytest
from oslo_config import cfg
from paste.deploy import loadapp

from tenancy_mw.core.base import ConfigError
from tenancy_mw.tags.filter import TAG_QUERY_KEY, TagQueryFilter
from tenancy_mw.tags.model import TagQuery
from tests.support.apps import Recorder
from tests.support.wsgi import call, make_environ


def through(app, method, target):
    recorder = Recorder()
    status, headers, body = call(TagQueryFilter(recorder, app), make_environ(method, target))
    return status, body, recorder.seen[0] if recorder.seen else None


def test_get_carries_the_parsed_query():
    status, _, seen = through({}, "GET", "/v2.1/acme/servers?tags=red,blue&tags-any=a&not-tags=x&not-tags-any=y,z")
    assert status == 200
    query = seen[TAG_QUERY_KEY]
    assert isinstance(query, TagQuery)
    assert (query.tags, query.tags_any, query.not_tags, query.not_tags_any) == (
        {"red", "blue"}, {"a"}, {"x"}, {"y", "z"})
    assert query.matches({"red", "blue", "a"})
    assert not query.matches({"red", "blue", "a", "x"})


def test_without_tag_parameters_the_object_is_there_and_matches_everything():
    _, _, seen = through({}, "GET", "/v2.1/acme/servers?limit=5")
    assert not seen[TAG_QUERY_KEY]
    assert seen[TAG_QUERY_KEY].matches(["anything"])


def test_head_is_parsed_and_other_methods_are_not():
    assert through({}, "HEAD", "/v2.1/acme/servers?tags=a")[2][TAG_QUERY_KEY].tags == {"a"}
    recorder = Recorder()
    environ = make_environ("POST", "/v2.1/acme/servers?tags=a%2Fb", body=b"{}")
    environ[TAG_QUERY_KEY] = "forged by an earlier filter"
    status, _, _ = call(TagQueryFilter(recorder, {}), environ)
    assert status == 200
    assert TAG_QUERY_KEY not in recorder.seen[0]


@pytest.mark.parametrize(
    ("target", "code", "fragment"),
    [
        ("/v2.1/acme/servers?tags=", "tenancy.invalid-tag-query.empty", "tags"),
        ("/v2.1/acme/servers?tags-any=a,,b", "tenancy.invalid-tag-query.empty", "tags-any"),
        ("/v2.1/acme/servers?not-tags=" + "x" * 61, "tenancy.invalid-tag-query.too-long", "61 bytes"),
        ("/v2.1/acme/servers?not-tags-any=a%2Fb", "tenancy.invalid-tag-query.slash", "'a/b'"),
        ("/v2.1/acme/servers?tags=%FF", "tenancy.invalid-tag-query.invalid-utf8", "UTF-8"),
    ],
)
def test_bad_parameters_are_a_json_400_naming_the_tag(target, code, fragment):
    status, body, seen = through({}, "GET", target)
    assert status == 400
    assert seen is None
    (error,) = json.loads(body)["errors"]
    assert error["code"] == code
    assert fragment in error["detail"]


def test_nova_semantics_option():
    _, _, seen = through({"not_tags_semantics": "nova"}, "GET", "/x?not-tags=a,b")
    query = seen[TAG_QUERY_KEY]
    assert query.semantics == "nova"
    # nova: not-tags=a,b drops only what has both.
    assert query.matches({"a"})
    assert not query.matches({"a", "b"})


def test_methods_and_max_query_tags_options():
    assert through({"methods": "GET,POST"}, "POST", "/x?tags=a")[2][TAG_QUERY_KEY].tags == {"a"}
    status, body, _ = through({"max_query_tags": "2"}, "GET", "/x?tags=a,b&not-tags=c")
    assert status == 400
    assert "at most 2" in body.decode()


@pytest.mark.parametrize(
    "conf",
    [{"not_tags_semantics": "neutron"}, {"methods": "get"}, {"max_query_tags": "0"}, {"not_tag_semantics": "nova"}],
)
def test_bad_options_fail_at_load(conf):
    with pytest.raises(ConfigError):
        TagQueryFilter(Recorder(), conf)


def test_options_from_an_oslo_config_file(tmp_path):
    config_file = tmp_path / "svc.conf"
    config_file.write_text("[tag_query]\nnot_tags_semantics = nova\n")
    conf = cfg.ConfigOpts()
    conf([], default_config_files=[str(config_file)])
    assert TagQueryFilter(Recorder(), conf).semantics == "nova"


def test_from_paste(tmp_path):
    ini = tmp_path / "paste.ini"
    ini.write_text(
        "[pipeline:main]\npipeline = tag_query recorder\n"
        "[filter:tag_query]\nuse = egg:tenancy_mw#tag_query\nnot_tags_semantics = nova\n"
        "[app:recorder]\npaste.app_factory = tests.support.apps:recorder_factory\nrecord_file = %s\n"
        % (tmp_path / "record.jsonl")
    )
    app = loadapp("config:%s" % ini)
    assert isinstance(app, TagQueryFilter)
    assert app.semantics == "nova"
    status, _, _ = call(app, make_environ("GET", "/x?tags=a"))
    assert status == 200
    assert call(app, make_environ("GET", "/x?tags=a/b"))[0] == 400

