"""Look at built documentation pages in a real browser: headless Chromium.

``python -m tests.support.browser BUILD_DIR PAGE...`` (``make docs-check``)
renders each page with Debian's ``chromium``, dumps the DOM it built and
fails (exit 1) when a page did not load, has no rendered title and
headings, or shows raw reStructuredText: a literal ``.. directive::``, a
``:role:`...``` or a section underline in the visible text, or a docutils
error box.  Code blocks are left out of the look (they may show
reStructuredText on purpose).

Without Chromium the check is skipped, except under ``CI=true``, where it
fails, as the tests' :func:`tests.conftest.require` does.
"""

from __future__ import annotations

import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["CHROMIUM_FLAGS", "dump_dom", "find_chromium", "page_problems"]

#: A quiet, throw-away browser: no sandbox (root in CI), no GPU, no network of its own.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)

_RAW_RST = [
    (re.compile(r"(^|\n)\s*\.\. [A-Za-z][\w:-]*::"), "a raw directive"),
    (re.compile(r":(?:[a-z]+:)?(?:doc|ref|class|func|meth|mod|attr|data|option|obj|exc|term)+:`"), "a raw role"),
    (re.compile(r"(^|\n)\s*([=\-~^\"'#*+])\2{3,}\s*(\n|$)"), "a raw section underline"),
    (re.compile(r"System Message:|Unknown (?:directive|interpreted text role)"), "a docutils error"),
]


def find_chromium() -> str | None:
    """The Chromium program, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def dump_dom(chromium: str, url: str, timeout: float = 60) -> str:
    """The DOM Chromium built for *url*, as HTML; a fresh profile each time."""
    with tempfile.TemporaryDirectory(prefix="tenancy-chromium-") as profile:
        result = subprocess.run(
            [chromium, *CHROMIUM_FLAGS, "--user-data-dir=" + profile, "--dump-dom", url],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError("chromium exited %d on %s: %s" % (result.returncode, url, result.stderr[-2000:].decode()))
    return result.stdout.decode("utf-8", errors="replace")


class _Page(html.parser.HTMLParser):
    """Collects the title, the headings and the visible text outside code blocks."""

    _HIDDEN = {"script", "style", "pre", "code", "title", "head"}

    def __init__(self) -> None:
        super().__init__()
        self.title = ""
        self.headings: list[str] = []
        self.text: list[str] = []
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("br", "img", "meta", "link", "input", "hr"):
            return
        self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if "title" in self._stack:
            self.title += data
        if any(t in self._stack for t in ("h1", "h2", "h3")):
            self.headings.append(data.strip())
        if not any(t in self._HIDDEN for t in self._stack):
            self.text.append(data)


def page_problems(dom: str, expect_title: str = "tenancy_mw") -> list[str]:
    """What is wrong with a rendered page, as sentences; empty when it looks right."""
    page = _Page()
    page.feed(dom)
    problems = []
    if "chrome-error://" in dom or "ERR_FILE_NOT_FOUND" in dom or expect_title not in page.title:
        problems.append("the page did not load (title %r)" % page.title.strip())
    if not [h for h in page.headings if h]:
        problems.append("no rendered heading")
    text = "".join(page.text)
    for pattern, what in _RAW_RST:
        found = pattern.search(text)
        if found:
            problems.append("shows %s: %r" % (what, found.group(0).strip()))
    return problems


def main(argv: list[str]) -> int:
    """Check PAGE... of BUILD_DIR; exit status 1 on any problem."""
    if len(argv) < 2:
        print("usage: python -m tests.support.browser BUILD_DIR PAGE...", file=sys.stderr)
        return 2
    build_dir, pages = Path(argv[0]).resolve(), argv[1:]
    chromium = find_chromium()
    if chromium is None:
        message = "chromium is missing (Debian: apt-get install chromium)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            print("docs-check: %s; it is required under CI=true" % message, file=sys.stderr)
            return 1
        print("docs-check: skipped, %s" % message, file=sys.stderr)
        return 0
    failed = False
    for page in pages:
        path = build_dir / page
        problems = page_problems(dump_dom(chromium, path.as_uri())) if path.is_file() else ["no such file"]
        for problem in problems:
            print("docs-check: %s: %s" % (page, problem), file=sys.stderr)
        failed = failed or bool(problems)
        if not problems:
            print("docs-check: %s renders in Chromium" % page)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
