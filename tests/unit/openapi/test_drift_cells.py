"""``id_resolver``'s description against its answers: its routes' path items and its ``IdResolver*`` responses.

Two SQLite cells (tests/support/cells.py's rows: some ids in both) behind
``id_resolver``, driven into every answer: ids found, in two cells, in
none, malformed, uuids above and below the switch, versions malformed and
out of range, a path with no canonical form, and a third cell that refuses
connections.  Each answer the filter gives must be the listed response of
its status (headers, a body valid against its schema, an error code it
names) on a path the description has; each listed response must be given,
and each error code it names answered (in the API-WG shape, which carries it).
"""

from __future__ import annotations

import json
import re

import pytest
from openapi_spec_validator import validate
from oslo_middleware.request_id import RequestId

from tenancy_mw.cells.filter import IdResolver
from tenancy_mw.openapi import describe_pipeline
from tests.support.cells import closed_port_url, fill, row_uuid
from tests.support.databases import sqlite_url
from tests.support.openapi_checks import UNLISTED, body_problems, template_of
from tests.support.wsgi import call, make_environ

OPTIONS = {
    "resources": "/os-services/{id} services id uuid except=detail",
    "uuid_microversion": "compute 2.53",
    "max_microversion": "2.90",
    "legacy_version_header": "X-OpenStack-Nova-API-Version",
    "cell_timeout": "1",
}
#: (target, version header) of every request.
REQUESTS = [
    ("/v2.1/os-services/3", None),  # in one cell: passed on
    ("/v2.1/acme/os-services/detail", None),  # an except word: passed on
    ("/v2.1/os-services/2", None),  # in two cells
    ("/v2.1/acme/os-services/99", None),
    ("/v2.1/os-services/five", None),
    ("/v2.1/os-services/%s" % row_uuid("c-sqlite", "services", 3), None),
    ("/v2.1/os-services/%s" % row_uuid("c-sqlite", "services", 3), "compute 2.53"),
    ("/v2.1/os-services/3", "compute 2.53"),
    ("/v2.1/os-services/3", "compute 9.99"),
    ("/v2.1/os-services/3", "compute two"),
    ("/v2.1/os-services/%00", None),
]


def service(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json"), ("X-Served-By", "service")])
    return [b"{}"]


@pytest.fixture(scope="module", params=["api-wg", "nova"])
def driven(request, tmp_path_factory):
    """The description, and the answers of a pipeline with two cells and of one with a cell down."""
    folder = tmp_path_factory.mktemp("cells")
    cells = {}
    for cell in ("c-sqlite", "c-maria"):
        cells[cell] = sqlite_url(folder / ("%s.sqlite" % cell))
        fill(cells[cell], cell)
    answers, document = [], None
    for with_down in (False, True):
        conf = dict(cells, down=closed_port_url()) if with_down else cells
        options = {**OPTIONS, "error_format": request.param, "cells": ", ".join("%s=%s" % i for i in conf.items())}
        resolver = IdResolver(service, options)
        try:
            app = RequestId(resolver)
            described = describe_pipeline(app, prefix="/")
            assert document in (None, described)
            document = described
            for target, version in REQUESTS:
                headers = [("OpenStack-API-Version", version)] if version else []
                status, answer_headers, body = call(app, make_environ("GET", target, headers))
                answers.append((target, status, answer_headers, body))
        finally:
            resolver.lookup.close()
    validate({**document, "info": {"title": "cells", "version": "1"}})
    return document, answers


def test_the_routes_are_described_with_their_id(driven):
    document, _ = driven
    assert sorted(document["paths"]) == ["/{version}/os-services/{id}", "/{version}/{tenant_id}/os-services/{id}"]
    item = document["paths"]["/{version}/os-services/{id}"]
    (identifier,) = [p for p in item["parameters"] if p["name"] == "id"]
    assert {"enum": ["detail"]} in identifier["schema"]["anyOf"]
    assert {p["name"] for p in item["parameters"]} >= {"OpenStack-API-Version", "X-OpenStack-Nova-API-Version"}


def test_every_refusal_is_a_described_response_and_every_described_one_is_given(driven):
    document, answers = driven
    responses, found, given = document["components"]["responses"], [], set()
    for target, status, headers, body in answers:
        template_of(document, target)
        if "X-Served-By" in headers:
            continue
        name = "IdResolver%d" % status
        where = "GET %s -> %d" % (target, status)
        if name not in responses:
            found.append("%s: not described" % where)
            continue
        given.add(name)
        extra = {n.lower() for n in headers} - UNLISTED - {n.lower() for n in responses[name]["headers"]}
        found += ["%s: headers %s not listed" % (where, sorted(extra))] if extra else []
        found += body_problems(document, responses[name], json.loads(body), where)
    assert not found, "\n".join(found)
    assert given == set(responses)


@pytest.mark.parametrize("driven", ["api-wg"], indirect=True)  # nova's fault body names no error code
def test_every_error_code_a_response_names_is_answered(driven):
    document, answers = driven
    answered = {
        (status, json.loads(body)["errors"][0]["code"])
        for _, status, headers, body in answers
        if "X-Served-By" not in headers
    }
    missing = []
    for name, response in document["components"]["responses"].items():
        status = int(name[len("IdResolver") :])
        for code in re.findall(r"``([a-z0-9.*-]+)``", response["description"]):
            family = code[:-1] if code.endswith("*") else None
            if not any(s == status and (c == code or (family and c.startswith(family))) for s, c in answered):
                missing.append((status, code))
    assert not missing, "error codes described but never answered: %s" % missing
