"""Sphinx configuration of the tenancy_mw documentation (``make docs``, ``tox -e docs``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

import tenancy_mw

# doc/openapi_example.py (the example pipeline of openapi.rst) and its move provider import from here.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# reno reads the notes from git history; an unpacked sdist has none.
HAS_GIT = (Path(__file__).resolve().parent.parent / ".git").exists()

project = "tenancy_mw"
author = "tenancy_mw developers"
copyright = "tenancy_mw developers, Apache License 2.0"  # noqa: A001
version = release = tenancy_mw.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.graphviz",
    # ``.. show-options:: NAMESPACE``: the option reference, generated from the code.
    "oslo_config.sphinxext",
    # ``.. release-notes::``: the reno notes of releasenotes/notes/.
    *(["reno.sphinxext"] if HAS_GIT else []),
]

root_doc = "index"
# Built into doc/build; the sample config is included, not a page of its own.
exclude_patterns = ["build", "tenancy_mw.conf.sample"]
templates_path: list[str] = []
html_static_path: list[str] = []
html_theme = "alabaster"
html_title = "tenancy_mw %s" % release
html_theme_options = {"description": "Paste-deployable WSGI filters for multi-tenant OpenStack-style services"}

autodoc_member_order = "bysource"
autodoc_typehints = "description"
# The picture of the pipelines (doc/pipeline.dot) as SVG, drawn by graphviz's dot.
graphviz_output_format = "svg"
# Sections of the release notes page are not cross-referenced.
suppress_warnings: list[str] = []


class NoGitReleaseNotes(Directive):
    """``.. release-notes::`` where there is no git history to read the notes from."""

    optional_arguments = 1
    option_spec = {"reporoot": str, "branch": str}
    has_content = True

    def run(self) -> list[nodes.Node]:
        text = "This copy has no git history for reno to read: the notes are the YAML files in releasenotes/notes/."
        return [nodes.paragraph(text=text)]


def _rendered(document: dict) -> list[nodes.Node]:
    """A list of *document*'s calls with the statuses each answers, then the whole document as JSON."""
    calls = nodes.bullet_list()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue  # a path item's parameters
            line = nodes.paragraph()
            line += nodes.literal(text="%s %s" % (method.upper(), path))
            summary = operation.get("summary", operation.get("operationId", ""))
            line += nodes.Text(": %s (%s)" % (summary, ", ".join(operation["responses"])))
            calls += nodes.list_item("", line)
    text = json.dumps(document, indent=1, ensure_ascii=False, sort_keys=True)
    # Not highlighted: a highlighted document of this size is megabytes of markup.
    return [calls, nodes.literal_block(text, text, language="none")]


class OpenAPIExample(Directive):
    """``.. openapi-example::``: the OpenAPI document of doc/openapi_example.py, made at build time."""

    def run(self) -> list[nodes.Node]:
        import openapi_example

        return _rendered(openapi_example.document())


class DemoOpenAPI(Directive):
    """``.. demo-openapi:: public`` (or ``admin``): the document that endpoint of the demo serves at
    ``/openapi.json``, made at build time from examples/api-paste.ini (SQLite files in a temporary folder)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        import tempfile

        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
        try:
            from demo_compute.openapi import documents
        finally:
            sys.path.pop(0)
        with tempfile.TemporaryDirectory() as state:
            return _rendered(documents(state)[self.arguments[0]])


def setup(app):  # noqa: ANN001, ANN201 - Sphinx's hook
    """Add ``openapi-example`` and ``demo-openapi``; stand in for reno's directive in a tree without git
    history (an unpacked sdist)."""
    app.add_directive("openapi-example", OpenAPIExample)
    app.add_directive("demo-openapi", DemoOpenAPI)
    if not HAS_GIT:
        app.add_directive("release-notes", NoGitReleaseNotes)
