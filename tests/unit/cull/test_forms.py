"""Reading a form body for ``_method`` (tenancy_mw.cull.forms).

Which requests a framework reads a form from, reading the body once and
within FORM_BODY_LIMIT, leaving the app the same bytes, caching the
finding, and refusing (UnreadableBody, never an unjudged pass) a body that
is too large, cut short, unreadable, or one the scanner refuses.
"""

from __future__ import annotations

import io

import pytest

from tenancy_mw.cull import filter as cull_filter
from tenancy_mw.cull.forms import (
    FORM_BODY_LIMIT,
    FORM_OVERRIDES_KEY,
    UnreadableBody,
    form_overrides,
    has_body,
    has_form_body,
    reads_form,
)
from tenancy_mw.cull.overrides import OVERRIDE_HEADERS
from tests.support.wsgi import make_environ

URLENCODED = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data; boundary=zz"


def form_environ(body: bytes, content_type: str | None = URLENCODED, method: str = "POST") -> dict:
    headers = (("Content-Type", content_type),) if content_type else ()
    return make_environ(method, "/v2.1/acme", headers, body)


class CountingInput(io.BytesIO):
    """A body stream that counts its reads."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads = 0

    def read(self, *args):
        self.reads += 1
        return super().read(*args)


class BrokenInput:
    """A body stream that fails, as a dropped chunked upload does."""

    def read(self, *args):
        raise OSError("connection reset")


@pytest.mark.parametrize(
    ("method", "content_type", "expected"),
    [
        ("POST", None, True),
        ("POST", URLENCODED, True),
        ("PUT", "Multipart/Form-Data; boundary=zz", True),
        ("DELETE", URLENCODED + "; charset=utf-8", True),
        ("PUT", None, False),
        ("POST", "application/json", False),
    ],
)
def test_a_form_is_read_where_webob_reads_one(method, content_type, expected):
    environ = {"CONTENT_TYPE": content_type} if content_type else {}
    assert reads_form(environ, method) is expected


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"CONTENT_LENGTH": "0"}, False),
        ({"CONTENT_LENGTH": "12"}, True),
        ({"wsgi.input_terminated": True}, True),
    ],
)
def test_a_body_is_a_content_length_or_a_terminated_input(environ, expected):
    assert has_body(environ) is expected
    assert has_form_body(dict(environ, CONTENT_TYPE=URLENCODED), "PUT") is expected
    assert has_form_body(dict(environ, CONTENT_TYPE="application/json"), "POST") is False


def test_method_fields_are_found_and_the_app_gets_the_same_bytes():
    body = b"name=web1&_method=DELETE"
    environ = form_environ(body)
    assert form_overrides(environ, "POST") == {"DELETE"}
    assert environ["wsgi.input"].read() == body
    assert environ["CONTENT_LENGTH"] == str(len(body))


def test_multipart_fields_are_found_with_the_boundary_of_the_content_type():
    body = b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nput\r\n--zz--\r\n'
    assert form_overrides(form_environ(body, MULTIPART), "POST") == {"PUT"}


def test_the_body_is_read_once_and_the_finding_cached():
    body = b"a=1&_method=PATCH"
    environ = form_environ(body)
    stream = CountingInput(body)
    environ["wsgi.input"] = stream
    assert form_overrides(environ, "POST") == {"PATCH"}
    assert form_overrides(environ, "POST") == {"PATCH"}
    assert stream.reads == 1
    assert environ[FORM_OVERRIDES_KEY][1] == {"PATCH"}


def test_a_new_body_stream_is_read_again():
    environ = form_environ(b"_method=PUT")
    assert form_overrides(environ, "POST") == {"PUT"}
    environ["wsgi.input"] = io.BytesIO(b"_method=DELETE")
    environ["CONTENT_LENGTH"] = "14"
    assert form_overrides(environ, "POST") == {"DELETE"}


def test_requests_without_a_form_are_not_read():
    environ = form_environ(b'{"_method": "DELETE"}', "application/json")
    environ["wsgi.input"] = BrokenInput()
    assert form_overrides(environ, "POST") == set()
    environ = form_environ(b"")
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input"] = BrokenInput()
    assert form_overrides(environ, "POST") == set()


def test_a_chunked_body_is_read_up_to_the_limit():
    environ = form_environ(b"")
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input_terminated"] = True
    environ["wsgi.input"] = io.BytesIO(b"_method=PUT")
    assert form_overrides(environ, "POST") == {"PUT"}
    environ = form_environ(b"")
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input_terminated"] = True
    environ["wsgi.input"] = io.BytesIO(b"a" * (FORM_BODY_LIMIT + 1))
    with pytest.raises(UnreadableBody) as caught:
        form_overrides(environ, "POST")
    assert (caught.value.status, caught.value.code) == (413, "tenancy.form-too-large")


def _refusal(environ: dict) -> tuple[int, str]:
    with pytest.raises(UnreadableBody) as caught:
        form_overrides(environ, "POST")
    return caught.value.status, caught.value.code


def test_a_declared_length_over_the_limit_is_refused_unread():
    environ = form_environ(b"")
    environ["CONTENT_LENGTH"] = str(FORM_BODY_LIMIT + 1)
    environ["wsgi.input"] = BrokenInput()
    assert _refusal(environ) == (413, "tenancy.form-too-large")


@pytest.mark.parametrize(
    ("length", "stream"),
    [("ten", io.BytesIO(b"a=1")), ("20", io.BytesIO(b"a=1")), ("3", BrokenInput())],
    ids=["not-a-number", "cut-short", "broken-stream"],
)
def test_a_body_that_cannot_be_read_whole_is_refused(length, stream):
    environ = form_environ(b"")
    environ["CONTENT_LENGTH"] = length
    environ["wsgi.input"] = stream
    assert _refusal(environ) == (400, "tenancy.unreadable-form")


def test_a_negative_content_length_is_refused_before_any_read():
    # read(-1) would take the whole stream, however long, before the limit is checked.
    reads = []

    class RecordingInput(io.BytesIO):
        def read(self, *args):
            reads.append(args)
            return super().read(*args)

    environ = form_environ(b"")
    environ["CONTENT_LENGTH"] = "-1"
    environ["wsgi.input"] = RecordingInput(b"a=1&" * (FORM_BODY_LIMIT // 2))
    assert _refusal(environ) == (400, "tenancy.unreadable-form")
    assert reads == []


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (URLENCODED, b"&".join([b"_method=GET"] * 100)),
        ("multipart/form-data; boundary=a; boundary=b", b"--a\r\n"),
        (MULTIPART, b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nPUT'),
    ],
    ids=["too-many-mentions", "two-boundaries", "part-without-end"],
)
def test_a_body_the_scanner_refuses_is_refused(content_type, body):
    assert _refusal(form_environ(body, content_type)) == (400, "tenancy.unreadable-form")


def test_the_filter_module_still_offers_the_names_defined_there_first():
    assert cull_filter.FORM_BODY_LIMIT == FORM_BODY_LIMIT
    assert cull_filter.FORM_OVERRIDES_KEY == FORM_OVERRIDES_KEY
    assert cull_filter.OVERRIDE_HEADERS == OVERRIDE_HEADERS
