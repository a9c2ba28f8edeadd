"""Checks of answers against an OpenAPI document, for the drift tests of tests/unit/openapi."""

from __future__ import annotations

import json
import re

import jsonschema

#: Headers every answer may carry that no operation lists: the entity's own, and oslo.middleware's request id.
UNLISTED = {"content-type", "content-length", "x-openstack-request-id"}


def template_of(document: dict, target: str) -> str:
    """The path template of *document* that *target* is a call of (the most literal one)."""
    path, found = target.partition("?")[0], []
    for template in document["paths"]:
        pattern = re.sub(
            r"\\{(\w+)\\}", lambda m: ".+" if m.group(1) == "resource_path" else "[^/]+", re.escape(template)
        )
        if re.fullmatch(pattern, path):
            found.append((len(re.sub(r"{\w+}", "", template)), template))
    assert found, "%s is a call of no path of the description" % target
    return max(found)[1]


def response_key(responses: dict, status: int) -> str | None:
    """The key of *responses* that lists *status*: itself, its class (``4XX``), or ``default``."""
    for key in (str(status), "%dXX" % (status // 100), "default"):
        if key in responses:
            return key
    return None


def body_problems(document: dict, response: dict, value, where: str) -> list[str]:
    """What is wrong with the JSON body *value* of an answer listed as *response*."""
    content = response.get("content")
    if content is None:
        return ["%s: a body where none is described" % where]
    schema = {**content["application/json"]["schema"], "components": document["components"]}
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(value)]
    if errors:
        return ["%s: body %s: %s" % (where, json.dumps(value)[:200], errors[:2])]
    if isinstance(value, dict) and "errors" in value:
        code = value["errors"][0]["code"]
        allowed = re.findall(r"``([a-z0-9.*-]+)``", response["description"])
        if not any(code == a or (a.endswith("*") and code.startswith(a[:-1])) for a in allowed):
            return ["%s: error code %s is none of %s" % (where, code, allowed)]
    return []


def documented(document: dict) -> set[tuple[str, str, str]]:
    """Every (path, method, status key) the description lists."""
    return {
        (path, method, key)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        for key in operation["responses"]
    }
