"""The one error renderer (tenancy_mw.core.errors): both body shapes, the WSGI answer, bad-path refusals."""

from __future__ import annotations

import json

import pytest
from oslo_config import cfg

from tenancy_mw.core import errors
from tenancy_mw.core.base import TenancyMiddleware
from tenancy_mw.core.paths import PathRefused, TargetTooLong, canonicalize
from tests.support.apps import Recorder


class StartResponse:
    """Records what a WSGI callable passed to ``start_response``."""

    status: str | None = None
    headers: list[tuple[str, str]] = []

    def __call__(self, status, headers, exc_info=None):
        self.status = status
        self.headers = list(headers)


def _render(environ=None, *args, **kwargs):
    start_response = StartResponse()
    body = b"".join(errors.render_error(environ or {"REQUEST_METHOD": "GET"}, start_response, *args, **kwargs))
    return start_response, body


def test_the_error_formats_are_api_wg_then_nova():
    assert errors.ERROR_FORMATS == ("api-wg", "nova")


def test_api_wg_body_follows_the_guideline():
    body = errors.error_body(404, "tenancy.not-found", "No such tenant 'acme'.", request_id="req-1")
    assert body == {
        "errors": [
            {
                "request_id": "req-1",
                "code": "tenancy.not-found",
                "status": 404,
                "title": "Not Found",
                "detail": "No such tenant 'acme'.",
            }
        ]
    }


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (400, "badRequest"),
        (403, "forbidden"),
        (404, "itemNotFound"),
        (409, "conflictingRequest"),
        (503, "serviceUnavailable"),
    ],
)
def test_nova_body_is_named_by_status(status, name):
    assert errors.error_body(status, "tenancy.x", "Why.", error_format="nova") == {
        name: {"code": status, "message": "Why."}
    }


def test_nova_body_of_a_status_nova_has_no_name_for_is_a_compute_fault():
    assert errors.error_body(418, "tenancy.x", "Why.", error_format="nova") == {
        "computeFault": {"code": 418, "message": "Why."}
    }


def test_render_error_answers_json_with_its_length_and_the_request_id():
    environ = {"REQUEST_METHOD": "GET", errors.REQUEST_ID_KEY: "req-abc"}
    start_response, body = _render(environ, 409, "tenancy.conflict", "Taken.", headers=[("Retry-After", "1")])
    assert start_response.status == "409 Conflict"
    headers = dict(start_response.headers)
    assert headers["Content-Type"] == "application/json"
    assert headers["Content-Length"] == str(len(body))
    assert headers["Retry-After"] == "1"
    (error,) = json.loads(body)["errors"]
    assert (error["request_id"], error["code"], error["detail"]) == ("req-abc", "tenancy.conflict", "Taken.")


def test_render_error_without_a_request_id_says_null():
    _, body = _render(None, 400, "tenancy.x", "Why.")
    assert json.loads(body)["errors"][0]["request_id"] is None


def test_render_error_to_head_sends_the_headers_only():
    start_response, body = _render({"REQUEST_METHOD": "HEAD"}, 404, "tenancy.not-found", "None.")
    assert body == b""
    assert int(dict(start_response.headers)["Content-Length"]) > 0


def _refused(path: str) -> PathRefused:
    with pytest.raises(PathRefused) as raised:
        canonicalize(path)
    return raised.value


@pytest.mark.parametrize("error_format", errors.ERROR_FORMATS)
def test_render_path_refusal_answers_400_with_the_rule_in_the_code(error_format):
    refused = _refused("/v2.1/a%2Fb")
    start_response = StartResponse()
    body = json.loads(b"".join(errors.render_path_refusal({}, start_response, refused, error_format=error_format)))
    assert start_response.status == "400 Bad Request"
    if error_format == "nova":
        assert body == {"badRequest": {"code": 400, "message": refused.detail}}
    else:
        assert body["errors"][0]["code"] == "tenancy.bad-path.encoded-slash"


def test_render_path_refusal_keeps_a_too_long_target_at_414():
    start_response = StartResponse()
    refused = TargetTooLong("target-too-long", "Too long.", "/x")
    body = json.loads(b"".join(errors.render_path_refusal({}, start_response, refused)))
    assert start_response.status.startswith("414 ")  # the phrase varies with the Python version
    assert body["errors"][0]["code"] == "tenancy.bad-path.target-too-long"


class Strict(TenancyMiddleware):
    """Refuses every path that has no canonical form, as the filters do."""

    opt_group = "tenancy_test_strict"
    opts = [cfg.BoolOpt("unused", default=False, help="No option of its own.")]

    def __call__(self, environ, start_response):
        try:
            canonicalize(environ["PATH_INFO"])
        except PathRefused as exc:
            return self.refuse_path(environ, start_response, exc)
        return self.application(environ, start_response)


@pytest.mark.parametrize(("error_format", "key"), [("api-wg", "errors"), ("nova", "badRequest")])
def test_a_filter_refuses_a_bad_path_in_its_error_format(error_format, key):
    start_response = StartResponse()
    strict = Strict(Recorder(), {"error_format": error_format})
    body = json.loads(b"".join(strict({"REQUEST_METHOD": "GET", "PATH_INFO": "/v2.1/../x"}, start_response)))
    assert start_response.status == "400 Bad Request"
    assert list(body) == [key]


class Picky(TenancyMiddleware):
    """Refuses a request from deep in a helper by raising the one Refusal."""

    opt_group = "tenancy_test_picky"
    opts = [cfg.BoolOpt("unused", default=False, help="No option of its own.")]

    def __call__(self, environ, start_response):
        try:
            self._check(environ)
        except errors.Refusal as refusal:
            return self.answer(environ, start_response, refusal)
        return self.application(environ, start_response)

    def _check(self, environ):
        if environ["REQUEST_METHOD"] not in ("GET", "HEAD"):
            raise errors.Refusal(405, "tenancy.method-not-allowed", "Only GET here.", headers=(("Allow", "GET, HEAD"),))


def test_a_refusal_carries_its_status_code_detail_and_headers():
    refusal = errors.Refusal(409, "tenancy.conflict", "Taken.", headers=[("Retry-After", "1")])
    assert (refusal.status, refusal.code, refusal.detail, refusal.headers) == (
        409,
        "tenancy.conflict",
        "Taken.",
        (("Retry-After", "1"),),
    )
    assert str(refusal) == "Taken."
    assert isinstance(refusal, Exception)


@pytest.mark.parametrize("error_format", errors.ERROR_FORMATS)
def test_render_refusal_is_render_error_byte_for_byte(error_format):
    environ = {"REQUEST_METHOD": "GET", errors.REQUEST_ID_KEY: "req-1"}
    refusal = errors.Refusal(503, "tenancy.registry-unavailable", "Later.", headers=(("Retry-After", "5"),))
    by_refusal = StartResponse()
    body = b"".join(errors.render_refusal(environ, by_refusal, refusal, error_format=error_format))
    by_args = StartResponse()
    expected = b"".join(
        errors.render_error(
            environ,
            by_args,
            503,
            "tenancy.registry-unavailable",
            "Later.",
            error_format=error_format,
            headers=(("Retry-After", "5"),),
        )
    )
    assert body == expected
    assert (by_refusal.status, by_refusal.headers) == (by_args.status, by_args.headers)


@pytest.mark.parametrize(
    ("error_format", "expected"),
    [
        (
            "api-wg",
            {
                "errors": [
                    {
                        "request_id": None,
                        "code": "tenancy.method-not-allowed",
                        "status": 405,
                        "title": "Method Not Allowed",
                        "detail": "Only GET here.",
                    }
                ]
            },
        ),
        ("nova", {"badMethod": {"code": 405, "message": "Only GET here."}}),
    ],
)
def test_a_filter_answers_a_raised_refusal_in_its_error_format(error_format, expected):
    start_response = StartResponse()
    picky = Picky(Recorder(), {"error_format": error_format})
    body = json.loads(b"".join(picky({"REQUEST_METHOD": "POST", "PATH_INFO": "/v2.1/x"}, start_response)))
    assert start_response.status == "405 Method Not Allowed"
    assert body == expected
    assert dict(start_response.headers)["Allow"] == "GET, HEAD"


def test_a_filter_passes_a_request_it_does_not_refuse():
    start_response = StartResponse()
    recorder = Recorder()
    Picky(recorder, {})({"REQUEST_METHOD": "GET", "PATH_INFO": "/v2.1/x"}, start_response)
    assert start_response.status.startswith("200")
    assert len(recorder.seen) == 1
