"""``tenancy_mw.core.bodies``: reading a JSON body as webob would, with a limit, one error per way it can fail."""

from __future__ import annotations

import io

import pytest

from tenancy_mw.core.bodies import MAX_DEPTH, BodyError, read_body, read_json_body


def environ(body: bytes, length: str | None = "auto", terminated: bool = False) -> dict:
    env = {"wsgi.input": io.BytesIO(body)}
    if length == "auto":
        env["CONTENT_LENGTH"] = str(len(body))
    elif length is not None:
        env["CONTENT_LENGTH"] = length
    if terminated:
        env["wsgi.input_terminated"] = True
    return env


def failure(env, limit=16):
    with pytest.raises(BodyError) as caught:
        read_json_body(env, limit, "{}")
    return caught.value.status, caught.value.rule


def test_reads_a_body_up_to_its_length():
    assert read_json_body(environ(b'{"a": 1}'), 16, "{}") == {"a": 1}
    # Never past Content-Length: the rest belongs to the next request.
    assert read_json_body(environ(b'{"a": 1}trailing', "8"), 64, "{}") == {"a": 1}


def test_a_chunked_body_is_read_up_to_the_limit():
    assert read_json_body(environ(b"[1, 2]", None, terminated=True), 16, "{}") == [1, 2]
    assert failure(environ(b"[" + b"1," * 20 + b"1]", None, terminated=True)) == (413, "body-too-large")


def test_the_failures():
    assert failure(environ(b"x" * 17)) == (413, "body-too-large")
    assert failure(environ(b"", None)) == (400, "bad-body")  # no length, not terminated: no body
    assert failure(environ(b"  ")) == (400, "bad-body")
    assert failure(environ(b"{", "abc")) == (400, "bad-body")
    assert failure(environ(b"{nope")) == (400, "bad-json")
    assert failure(environ(b"\xff\xfe")) == (400, "bad-json")
    assert failure(environ(b"[" * 5000 + b"]" * 5000), limit=20000) == (400, "bad-json")


@pytest.mark.parametrize("opening", [b"[", b'{"a":'])
def test_nesting_is_bounded_the_same_on_every_python(opening):
    """MAX_DEPTH levels are read; one more is 400 whether or not this Python's parser could go deeper."""
    closing = b"]" if opening == b"[" else b"}"
    deepest = opening * MAX_DEPTH + b"1" + closing * MAX_DEPTH
    assert read_json_body(environ(deepest), 10000, "{}") is not None
    too_deep = opening * (MAX_DEPTH + 1) + b"1" + closing * (MAX_DEPTH + 1)
    assert failure(environ(too_deep), limit=10000) == (400, "bad-json")
    assert failure(environ(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)), limit=10000) == (400, "bad-json")
    # Many brackets side by side are not nesting.
    assert read_json_body(environ(b"[" + b",".join([b"[]"] * 500) + b"]"), 10000, "{}") == [[]] * 500


def raw_failure(env, limit=16):
    with pytest.raises(BodyError) as caught:
        read_body(env, limit)
    return caught.value.status, caught.value.rule


class Trickle(io.BytesIO):
    """A server's input that gives at most three bytes per read."""

    def read(self, size=-1):
        return super().read(min(size, 3) if size >= 0 else 3)


class Broken(io.BytesIO):
    """A client that broke off: the server's input raises its own error type."""

    def read(self, size=-1):
        raise RuntimeError("connection reset")


def test_read_body_reads_the_raw_bytes_whole_and_never_past_content_length():
    assert read_body(environ(b"\xff\x00 raw"), 16) == b"\xff\x00 raw"
    assert read_body(environ(b"abcdef-next-request", "6"), 64) == b"abcdef"
    assert read_body({"CONTENT_LENGTH": "10", "wsgi.input": Trickle(b"0123456789")}, 16) == b"0123456789"
    assert read_body(environ(b"chunked", None, terminated=True), 16) == b"chunked"


def test_read_body_without_a_length_on_a_server_that_does_not_end_its_input_has_no_body():
    assert read_body(environ(b"ignored", None), 16) == b""
    assert read_body({"CONTENT_LENGTH": "0", "wsgi.input": io.BytesIO(b"x")}, 16) == b""
    assert read_body({"CONTENT_LENGTH": "4"}, 16) == b""  # no wsgi.input at all


def test_read_body_refusals():
    assert raw_failure(environ(b"x", "12x")) == (400, "bad-content-length")
    assert raw_failure(environ(b"x", "-1")) == (400, "bad-content-length")
    # Digits only: int() would read these as 1 (or 10), a server or proxy may not.
    for spelling in ("+1", "1_0", "\u0661", "1 1", " ", "0x1"):
        assert raw_failure(environ(b"x", spelling)) == (400, "bad-content-length"), spelling
    assert raw_failure(environ(b"x" * 17)) == (413, "body-too-large")
    assert raw_failure(environ(b"x" * 17, None, terminated=True)) == (413, "body-too-large")
    assert raw_failure({"CONTENT_LENGTH": "9", "wsgi.input": io.BytesIO(b"short")}) == (400, "unreadable-body")
    assert raw_failure({"CONTENT_LENGTH": "3", "wsgi.input": Broken(b"abc")}) == (400, "unreadable-body")
    chunked = {"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": io.BytesIO(b"3\r\nabc\r\n0\r\n\r\n")}
    assert raw_failure(chunked) == (411, "length-required")


def test_whitespace_around_the_content_length_is_allowed():
    # HTTP's optional whitespace around a header value; wsgiref and eventlet pass it on.
    for spelling in ("2 ", " 2", "2\t"):
        assert read_body(environ(b"{}next", spelling), 16) == b"{}", spelling


def test_exactly_the_limit_is_accepted():
    assert read_body(environ(b"x" * 16), 16) == b"x" * 16
    assert read_body(environ(b"x" * 16, None, terminated=True), 16) == b"x" * 16


def test_read_json_body_answers_what_read_body_refuses_as_a_bad_body_or_too_large():
    assert failure(environ(b"{}", "-1")) == (400, "bad-body")
    assert failure({"CONTENT_LENGTH": "9", "wsgi.input": io.BytesIO(b"{}")}) == (400, "bad-body")
    assert failure({"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": io.BytesIO(b"{}")}) == (400, "bad-body")
    assert failure(environ(b"{}", "17")) == (413, "body-too-large")
