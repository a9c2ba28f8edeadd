"""Real servers for the tests: gunicorn on a free loopback port, raw HTTP."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on *host* (a loopback address) that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_for_port(
    port: int, timeout: float = 20.0, process: subprocess.Popen | None = None, host: str = "127.0.0.1"
) -> None:
    """Wait until *host*:*port* accepts connections, or raise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError("server exited with %s before listening" % process.returncode)
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on %s:%d after %.0fs" % (host, port, timeout))


@dataclass
class Response:
    """What came back: status, headers (lower-case names) and body bytes."""

    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


class GunicornServer:
    """gunicorn serving a paste config, with several worker processes, on a loopback *host* (127.0.0.1)."""

    def __init__(self, ini_path, name="main", workers=2, env=None, cwd=".", log_dir=".", host="127.0.0.1"):
        self.ini_path = os.path.abspath(os.path.join(cwd, ini_path))
        self.name = name
        self.workers = workers
        self.env = dict(os.environ, **(env or {}))
        self.cwd = cwd
        self.host = host
        self.port = free_port(host)
        self.log_path = os.path.join(str(log_dir), "gunicorn-%s-%d.log" % (host, self.port))
        self.process = None

    @property
    def url(self) -> str:
        return "http://%s:%d" % (self.host, self.port)

    def start(self) -> None:
        gunicorn = os.path.join(os.path.dirname(sys.executable), "gunicorn")
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                gunicorn,
                "--paste",
                "%s#%s" % (self.ini_path, self.name),
                "--bind",
                "%s:%d" % (self.host, self.port),
                "--workers",
                str(self.workers),
                "--chdir",
                self.cwd,
                "--graceful-timeout",
                "2",
                # Several servers run at once: no shared control socket.
                "--no-control-socket",
            ],
            cwd=self.cwd,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(self.port, process=self.process, host=self.host)
        except RuntimeError:
            self.stop()
            with open(self.log_path, "rb") as log:
                raise RuntimeError("gunicorn did not start:\n" + log.read().decode(errors="replace")) from None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "_log", None):
            self._log.close()

    def log(self) -> str:
        with open(self.log_path, "rb") as log:
            return log.read().decode(errors="replace")

    def request(self, method: str, target: str, headers: dict | None = None, body: bytes | None = None) -> Response:
        """Send *target* exactly as given (no client-side quoting or normalising)."""
        return http_request(self.port, method, target, headers, body, host=self.host)


def call(server: GunicornServer, method: str, target: str, body=None, headers: dict | None = None) -> Response:
    """One request to *server*; a dict *body* goes as JSON, with its ``Content-Type`` unless *headers* name one."""
    headers = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    return server.request(method, target, headers, body)


def http_request(
    port: int,
    method: str,
    target: str,
    headers: dict | None = None,
    body: bytes | None = None,
    timeout: float = 10.0,
    host: str = "127.0.0.1",
) -> Response:
    """One request to *host*:*port*, *target* sent exactly as given (no client-side quoting or normalising)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def raw_request(
    port: int,
    method: str,
    target: str,
    headers=(),
    body: bytes = b"",
    timeout: float = 10.0,
    send_length: bool = True,
    half_close: bool = False,
) -> int:
    """Send one request byte for byte (no client-side checks); return the status, or 0 if the server hung up.

    ``send_length=False`` leaves framing to *headers*; ``half_close`` shuts the
    sending side after the body (a client that stops early).
    """
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: 127.0.0.1:%d" % port, "Connection: close"]
    lines += ["%s: %s" % (name, value) for name, value in headers]
    if body and send_length:
        lines.append("Content-Length: %d" % len(body))
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    status_line = received.split(b"\r\n", 1)[0].split()
    return int(status_line[1]) if len(status_line) >= 2 and status_line[1].isdigit() else 0
