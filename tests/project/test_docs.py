"""The documentation's examples run, and its pages look rendered in a browser.

Doctests of ``doc/*.rst`` and ``README.rst`` run through pytest's
``--doctest-glob`` (pyproject.toml); here: no Python example escapes them,
the ``api-paste.ini`` snippets load, and the browser check of ``make
docs-check`` tells a rendered page from raw reStructuredText.
"""

from __future__ import annotations

import configparser
import importlib
import json
import re
from pathlib import Path

import docutils.core
import docutils.nodes
import pytest
from paste.deploy import loadfilter

from tenancy_mw.core.base import ConfigError
from tests.conftest import require
from tests.support import browser

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = sorted((REPO / "doc").glob("*.rst")) + [REPO / "README.rst"]


def _documented_modules() -> list[str]:
    modules = []
    for path in DOC_FILES:
        modules += re.findall(r"(?m)^\.\. automodule:: (\S+)", path.read_text())
    return sorted(set(modules))


def _literal_blocks(rst: str) -> list[docutils.nodes.literal_block]:
    # Sphinx-only directives and roles are reported and skipped; only literal blocks matter here.
    settings = {"report_level": 5, "halt_level": 5, "warning_stream": False}
    document = docutils.core.publish_doctree(rst, settings_overrides=settings)
    return list(document.findall(docutils.nodes.literal_block))


def _looks_like_python(text: str) -> bool:
    try:
        compile(text, "<doc>", "exec")
    except SyntaxError:
        return False
    return bool(re.search(r"(?m)^\s*(from \S+ import|import \S+|def |class |\w+ = \w+\()", text))


def _sources():
    for path in DOC_FILES:
        yield path.name, path.read_text()
    for module in _documented_modules():
        yield module, importlib.import_module(module).__doc__ or ""


@pytest.mark.parametrize(("where", "rst"), list(_sources()), ids=lambda v: v if len(v) < 40 else "")
def test_every_python_example_is_a_doctest(where, rst):
    for block in _literal_blocks(rst):
        text = block.astext()
        language = " ".join(block.get("classes", []))
        if ">>>" in text or "template" in language or "doctest" in language:
            continue
        assert not _looks_like_python(text), (
            "%s: a Python example that is not a doctest (write it with >>>, or mark a template to fill in "
            "with ':class: template'):\n%s" % (where, text)
        )


def _ini_snippets():
    for path in DOC_FILES:
        for block in _literal_blocks(path.read_text()):
            text = block.astext()
            if "template" in block.get("classes", []):
                continue
            if "[filter:" in text and "egg:tenancy_mw#" in text:
                yield path.name, text


@pytest.mark.parametrize(("where", "ini"), list(_ini_snippets()), ids=lambda v: v if len(v) < 40 else "")
def test_every_paste_snippet_loads(where, ini, tmp_path):
    """Each ``[filter:...]`` section a page shows is a working one, as written."""
    path = tmp_path / "api-paste.ini"
    path.write_text(ini)
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(ini)
    sections = [s.split(":", 1)[1] for s in parser.sections() if s.startswith("filter:")]
    loaded = 0
    for name in sections:
        if parser["filter:" + name].get("use", "").startswith("egg:tenancy_mw#"):
            factory = loadfilter("config:%s" % path, name=name)
            try:
                assert callable(factory(lambda environ, start_response: [])), (where, name)
            except ConfigError as exc:
                # An option naming the service's own code (a move provider, the policy of a service this
                # virtualenv does not hold) is all that may not load here.
                assert re.search(
                    r"cannot import '(?!tenancy_mw)[\w.]+'|no policy defaults are registered as '(nova|cinder)'",
                    str(exc),
                ), (where, name, exc)
            loaded += 1
    assert loaded, where


def test_docs_show_options_of_namespaces_that_exist():
    from importlib import metadata

    namespaces = {e.name for e in metadata.entry_points(group="oslo.config.opts")}
    for path in DOC_FILES:
        for namespace in re.findall(r"(?m)^\.\. show-options:: (\S+)", path.read_text()):
            assert namespace in namespaces, (path.name, namespace)


@pytest.fixture(scope="module")
def chromium():
    found = browser.find_chromium()
    require(found is not None, "chromium (Debian package chromium)")
    return found


def test_browser_check_passes_a_rendered_page_and_fails_raw_rst(chromium, tmp_path):
    rendered = tmp_path / "rendered.html"
    rendered.write_text(
        "<html><head><title>tenant_path — tenancy_mw</title></head><body><h1>tenant_path</h1>"
        "<p>See <code>.. show-options::</code> in code, which is fine.</p><pre>Title\n=====\n</pre></body></html>"
    )
    raw = tmp_path / "raw.html"
    raw.write_text(
        "<html><head><title>tenant_path — tenancy_mw</title></head><body><h1>tenant_path</h1><p>Options\n"
        "=======\n\n.. show-options:: tenancy_mw.tenants.path_filter\n\nSee :class:`TenantPath`.</p></body></html>"
    )
    assert browser.page_problems(browser.dump_dom(chromium, rendered.as_uri())) == []
    problems = browser.page_problems(browser.dump_dom(chromium, raw.as_uri()))
    assert any("raw directive" in p for p in problems), problems
    assert any("raw role" in p for p in problems), problems
    assert any("raw section underline" in p for p in problems), problems
    missing = browser.page_problems(browser.dump_dom(chromium, (tmp_path / "missing.html").as_uri()))
    assert any("did not load" in p for p in missing), missing


def test_the_docs_render_each_demo_endpoints_document_whole(tmp_path, monkeypatch):
    """``.. demo-openapi:: public|admin`` (doc/demo-openapi.rst) lists every call of the document that
    endpoint serves, and holds the document itself, as the demo builds it."""
    monkeypatch.syspath_prepend(str(REPO / "doc"))
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    conf = importlib.import_module("conf")
    from demo_compute.openapi import documents

    page = (REPO / "doc" / "demo-openapi.rst").read_text()
    served = documents(str(tmp_path))
    for role in ("public", "admin"):
        assert ".. demo-openapi:: %s" % role in page
        calls, block = conf._rendered(served[role])
        listed = [item.astext().split(":", 1)[0] for item in calls.children]
        expected = [
            "%s %s" % (method.upper(), path)
            for path, item in served[role]["paths"].items()
            for method in item
            if method in ("get", "put", "post", "delete", "head", "patch")
        ]
        assert listed == expected
        assert len(expected) > 10
        assert json.loads(block.astext()) == served[role]
