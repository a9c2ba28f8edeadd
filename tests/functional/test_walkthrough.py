"""doc/demo-walkthrough.rst's curl session runs, as written, against the demo's two real pipelines.

Every ``$`` line of the page's ``console`` blocks runs in one bash session, in
page order, with ``make demo``'s ports (8774, 8775) replaced by the free
ports the two pipelines were started on; each command's output must match
the lines the page shows under it (doctest rules: ``...`` matches anything,
runs of whitespace are equal).  The page's Python session is a doctest
(doc/conftest.py).
"""

from __future__ import annotations

import configparser
import doctest
import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.support.demo import serve_demo

PAGE = Path(REPO_ROOT, "doc", "demo-walkthrough.rst")
_MARK = "@@walkthrough-command-done@@"
_PORTS = {"public": "127.0.0.1:8774", "admin": "127.0.0.1:8775"}


def console_commands(rst: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` of every ``$`` line in the page's ``.. code-block:: console`` blocks."""
    commands: list[tuple[str, list[str]]] = []
    lines = rst.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() != ".. code-block:: console":
            index += 1
            continue
        index += 1
        while index < len(lines) and (not lines[index].strip() or lines[index].strip().startswith(":")):
            index += 1
        while index < len(lines) and (lines[index].startswith("   ") or not lines[index].strip()):
            text = lines[index][3:]
            if text.startswith("$ "):
                commands.append((text[2:], []))
            elif text.strip() and commands:
                commands[-1][1].append(text)
            index += 1
    return [(command, "\n".join(expected) + "\n") for command, expected in commands]


def test_the_page_has_a_curl_session():
    commands = console_commands(PAGE.read_text(encoding="utf-8"))
    assert len(commands) >= 10
    assert all(command.startswith("curl ") for command, _ in commands)
    assert all(expected.strip() for _, expected in commands)


def test_the_page_says_how_openstacksdk_gets_installed():
    """The SDK session needs a package `make demo` does not install: the page says how, with the tested release."""
    page = " ".join(PAGE.read_text(encoding="utf-8").split())
    command = ".venv/bin/python -m pip install -c constraints.txt openstacksdk"
    assert command in page
    # The constraint pins the release the suite's own SDK session (doc/conftest.py) runs.
    pins = Path(REPO_ROOT, "constraints.txt").read_text(encoding="utf-8").splitlines()
    assert "openstacksdk==%s" % metadata.version("openstacksdk") in pins
    # And the page is right that make demo does not: it installs the demo extra, which has no openstacksdk.
    assert "$(PIP_INSTALL) -e '.[demo]'" in Path(REPO_ROOT, "Makefile").read_text(encoding="utf-8")
    setup = configparser.ConfigParser()
    setup.read(Path(REPO_ROOT, "setup.cfg"))
    assert "openstacksdk" not in setup["options.extras_require"]["demo"]


def test_every_curl_command_of_the_walkthrough_gives_what_the_page_shows(tmp_path):
    commands = console_commands(PAGE.read_text(encoding="utf-8"))
    with serve_demo(tmp_path) as servers:
        ports = {_PORTS[role]: "127.0.0.1:%d" % server.port for role, server in servers.items()}

        def live(text: str) -> str:
            return re.sub("|".join(map(re.escape, ports)), lambda match: ports[match.group(0)], text)

        script = "".join("%s\necho %s\n" % (live(command), _MARK) for command, _ in commands)
        ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, check=False)
    outputs = ran.stdout.replace("\r", "").split(_MARK + "\n")
    assert len(outputs) == len(commands) + 1, ran.stderr
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for (command, expected), got in zip(commands, outputs, strict=False):
        if not checker.check_output(live(expected), got, flags):
            pytest.fail("$ %s\nexpected:\n%sgot:\n%s" % (command, expected, got))
