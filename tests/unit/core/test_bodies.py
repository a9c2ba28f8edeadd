"""``tenancy_mw.core.bodies``: reading a JSON body as webob would, with a limit, one error per way it can fail."""

from __future__ import annotations

import io

import pytest

from tenancy_mw.core.bodies import MAX_DEPTH, BodyError, read_json_body


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
