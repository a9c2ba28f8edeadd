"""Real memcached servers for the tests, on free loopback ports.

``memcached`` is Debian's package (``make test`` installs it).  Usage::

    server = MemcachedServer()      # started; server.address == "127.0.0.1:PORT"
    server.kill()                   # SIGKILL, as a crashed node
    server.start()                  # back, on the same port, empty
    server.stop()

Fixtures in ``tests/conftest.py`` built on it:

- ``memcached_server``: one server for a test module;
- ``memcached_cluster``: three servers for a test module (a test may kill
  one and start it again).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

from tests.support.servers import free_port, wait_for_port

#: Where Debian installs memcached; PATH is searched first.
MEMCACHED = shutil.which("memcached") or "/usr/bin/memcached"


def available() -> bool:
    """True when a memcached binary is installed."""
    return os.access(MEMCACHED, os.X_OK)


class MemcachedServer:
    """One memcached process on 127.0.0.1, 64 MB, TCP only."""

    def __init__(self, memory_mb: int = 64) -> None:
        self.port = free_port()
        self.memory_mb = memory_mb
        self.process: subprocess.Popen | None = None
        self.start()

    @property
    def address(self) -> str:
        """``host:port``, as ``memcached_servers`` takes it."""
        return "127.0.0.1:%d" % self.port

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start it (again, on the same port); it starts empty."""
        args = [MEMCACHED, "-l", "127.0.0.1", "-p", str(self.port), "-U", "0", "-m", str(self.memory_mb), "-t", "1"]
        if os.geteuid() == 0:
            args += ["-u", "root"]  # memcached refuses to run as root otherwise
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, timeout=10, process=self.process)

    def kill(self) -> None:
        """SIGKILL it, as a node that crashed: no goodbye to open connections."""
        if self.running:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """Stop it for good."""
        if self.running:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def flush(self) -> None:
        """Empty it (``flush_all``)."""
        import socket

        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(b"flush_all\r\n")
            sock.recv(64)


def start_servers(count: int, require) -> list[MemcachedServer]:
    """*count* running servers; *require* is :func:`tests.conftest.require` (skip, or fail under CI)."""
    require(available(), "memcached (%s; Debian package memcached, installed by make test)" % MEMCACHED)
    return [MemcachedServer() for _ in range(count)]
