"""Store keys and stored records: JSON, signed, bound to their key.

Pure helpers, no WSGI machinery.

- **Keys are hashes.**  :meth:`RecordCodec.store_key` is an HMAC of the
  scope (the tenant) and the token under a key derived from ``secret``:
  no raw token or tenant id ever reaches the store, and someone who can
  read the store cannot compute the key of a token they know.
- **Values are JSON, never pickle**, so reading a shared cache never runs
  code.  A response body is kept as base64 text.
- **Values are signed** (HMAC-SHA256 under a second key derived from
  ``secret``), as keystonemiddleware protects its memcache data, and the
  signature covers the store key: an entry that was altered, written by a
  process with another secret, or copied under another key (another
  tenant's token) fails :meth:`RecordCodec.decode` and is never replayed.

Example::

    >>> codec = RecordCodec("s3cret")
    >>> key = codec.store_key("acme", "token-1")
    >>> key.startswith("tmw-idem:") and "acme" not in key
    True
    >>> lease = Record.lease(owner="o1", fingerprint="f" * 64, now=1700000000)
    >>> codec.decode(key, codec.encode(key, lease)) == lease
    True
    >>> codec.decode(codec.store_key("other", "token-1"), codec.encode(key, lease))
    Traceback (most recent call last):
      ...
    tenancy_mw.idempotency.records.InvalidRecord: ...
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import NamedTuple

__all__ = ["FORMAT_VERSION", "InvalidRecord", "Record", "RecordCodec"]

#: Written in every record; a record of another format is not replayed.
FORMAT_VERSION = 1

_PREFIX = b"tmw1."
PENDING = "pending"
DONE = "done"


# Built once: json.dumps() with options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


class InvalidRecord(ValueError):
    """A stored value that fails its signature or does not parse: never replayed."""


class Record(NamedTuple):
    """What the store holds for one token.

    :ivar state: ``"pending"`` (a lease: the first request is running) or
        ``"done"`` (its response is stored).
    :ivar owner: the id of the request that claimed the token.
    :ivar fingerprint: the fingerprint of that request.
    :ivar created: when it was claimed, Unix seconds.
    :ivar status: the response status line (``"201 Created"``), when done.
    :ivar headers: the response headers, ``[(name, value), ...]``, when done.
    :ivar body: the response body, when done.
    """

    state: str
    owner: str
    fingerprint: str
    created: float
    status: str = ""
    headers: tuple = ()
    body: bytes = b""

    @classmethod
    def lease(cls, owner: str, fingerprint: str, now: float) -> Record:
        """The in-flight record of a request that just claimed its token."""
        return cls(PENDING, owner, fingerprint, now)

    def done(self, status: str, headers: list, body: bytes) -> Record:
        """This lease completed with a response."""
        return Record(DONE, self.owner, self.fingerprint, self.created, status, tuple(map(tuple, headers)), body)

    @property
    def in_flight(self) -> bool:
        """True while the first request still runs."""
        return self.state == PENDING


class RecordCodec:
    """Keys and signed values for one ``secret`` (see the module documentation)."""

    def __init__(self, secret: str | bytes) -> None:
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        if not secret:
            raise ValueError("an empty secret signs nothing")
        # Two keys from one secret: the store key reveals nothing about the MAC key.
        self._key_key = hmac.new(secret, b"tenancy_mw idempotency store key", hashlib.sha256).digest()
        self._mac_key = hmac.new(secret, b"tenancy_mw idempotency record mac", hashlib.sha256).digest()

    def store_key(self, scope: str, token: str, shared: bool = False) -> str:
        """The store key of *token* in *scope*: ASCII, 73 characters.

        *scope* is a tenant id, or with *shared* the ``shared_scope`` of
        tenant-less requests: the two never meet, even when a tenant has
        the shared scope's name.
        """
        scope_bytes = scope.encode("utf-8", "surrogatepass")
        # Length-prefixed: ("ab", "c") and ("a", "bc") never meet.
        message = b"%s%d:%s%s" % (b"s" if shared else b"t", len(scope_bytes), scope_bytes,
                                  token.encode("utf-8", "surrogatepass"))
        return "tmw-idem:" + hmac.digest(self._key_key, message, "sha256").hex()

    def _mac(self, key: str, payload: bytes) -> bytes:
        mac = hmac.digest(self._mac_key, key.encode("ascii") + b"\0" + payload, "sha256")
        return base64.urlsafe_b64encode(mac).rstrip(b"=")

    def encode(self, key: str, record: Record) -> bytes:
        """The signed JSON value of *record* under *key* (ASCII bytes, no line breaks)."""
        document = {
            "v": FORMAT_VERSION,
            "state": record.state,
            "owner": record.owner,
            "fp": record.fingerprint,
            "created": record.created,
        }
        if record.state == DONE:
            document["status"] = record.status
            document["headers"] = [list(pair) for pair in record.headers]
            document["body"] = base64.b64encode(record.body).decode("ascii")
        payload = _ENCODER.encode(document).encode("ascii")
        return _PREFIX + self._mac(key, payload) + b"." + payload

    def decode(self, key: str, value: bytes) -> Record:
        """The record in *value*, stored under *key*; :class:`InvalidRecord` if it is not ours."""
        if not isinstance(value, bytes) or not value.startswith(_PREFIX):
            raise InvalidRecord("not a tenancy_mw idempotency record")
        mac, dot, payload = value[len(_PREFIX):].partition(b".")
        if not dot or not hmac.compare_digest(mac, self._mac(key, payload)):
            raise InvalidRecord("signature mismatch: altered, signed with another secret, or stored under another key")
        try:
            document = json.loads(payload)
            if document.get("v") != FORMAT_VERSION or document["state"] not in (PENDING, DONE):
                raise InvalidRecord("unknown record format %r" % document.get("v"))
            state = document["state"]
            if state == DONE:
                headers = tuple((str(name), str(value)) for name, value in document["headers"])
                body = base64.b64decode(document["body"], validate=True)
                status = str(document["status"])
            else:
                headers, body, status = (), b"", ""
            record = Record(state, str(document["owner"]), str(document["fp"]), float(document["created"]),
                            status, headers, body)
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            # A signed record that does not parse: written by a buggy or newer version.
            raise InvalidRecord("unreadable record: %s" % exc) from None
        return record
