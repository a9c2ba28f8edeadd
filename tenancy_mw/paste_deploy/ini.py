"""A paste file as paste reads it, and edits that keep every other line.

paste.deploy reads ``api-paste.ini`` with :mod:`configparser` (its
``NicerConfigParser``: ``%`` interpolation, keys lower-cased, ``here`` and
``__file__`` in ``[DEFAULT]``).  :func:`read_config` reads it the same way,
so a file paste refuses is refused here too.  configparser forgets comments
and layout, so edits go through :class:`PasteLines`, which finds where each
section and key is in the text and changes only the lines it must.

Nothing here imports paste, WSGI machinery or SQLAlchemy.

    >>> text = "[pipeline:main]\\n# the public pipeline\\npipeline = authtoken\\n    app\\n"
    >>> lines = PasteLines(text)
    >>> [word for word, _, _ in lines.words("pipeline:main", "pipeline")]
    ['authtoken', 'app']
    >>> lines.insert_words("pipeline:main", "pipeline", 0, ["tenant_path"], after=True)
    >>> print(lines.text(), end="")
    [pipeline:main]
    # the public pipeline
    pipeline = authtoken tenant_path
        app
"""

from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass, field

__all__ = ["PasteFileError", "PasteLines", "read_config"]

# configparser's own patterns (configparser.RawConfigParser.SECTCRE, _OPT_TMPL with "=" and ":").
_SECTION_RE = re.compile(r"\[(?P<header>.+)\]")
_OPTION_RE = re.compile(r"(?P<option>.*?)\s*(?P<vi>[=:])\s*(?P<value>.*)$")
_COMMENT_PREFIXES = ("#", ";")


class PasteFileError(ValueError):
    """A paste file that cannot be read as paste.deploy reads it (the message says where)."""


def read_config(text: str, source: str = "api-paste.ini") -> configparser.ConfigParser:
    """Parse *text* as paste.deploy does; raise :class:`PasteFileError` naming *source* if it cannot.

    ``[DEFAULT]`` holds ``here`` (the file's folder) and ``__file__``, as
    paste gives them, so ``%(here)s`` works.

        >>> read_config("[app:main]\\nuse = egg:x\\npath = %(here)s/data\\n", "/etc/nova/api-paste.ini").get(
        ...     "app:main", "path")
        '/etc/nova/data'
        >>> read_config("[app:main]\\n[app:main]\\n")
        Traceback (most recent call last):
        ...
        tenancy_mw.paste_deploy.ini.PasteFileError: While reading from 'api-paste.ini' [line 2]: section ...exists
    """
    path = os.path.abspath(source)
    parser = configparser.ConfigParser(defaults={"here": os.path.dirname(path), "__file__": path})
    try:
        parser.read_string(text, source=source)
    except configparser.Error as exc:
        raise PasteFileError(" ".join(str(exc).split())) from None
    return parser


@dataclass
class _Entry:
    """Where one key of a section is: its key line and its continuation lines (comments excluded)."""

    lines: list[int]
    value_start: int


@dataclass
class _Section:
    header_line: int
    last_line: int
    entries: dict[str, _Entry] = field(default_factory=dict)


class PasteLines:
    """The lines of a paste file, with where each section and key is; edits keep every other line.

    Sections are found as configparser finds them (a value goes on while
    lines are indented deeper than its key; comment lines inside it are
    skipped), keys lower-cased as paste sees them.  See the module
    documentation for an example.
    """

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines(keepends=True)
        self.sections: dict[str, _Section] = {}
        self._scan()

    def _scan(self) -> None:
        section: _Section | None = None
        entry: _Entry | None = None
        indent = 0
        for index, line in enumerate(self._lines):
            stripped = line.strip()
            if not stripped or stripped.startswith(_COMMENT_PREFIXES):
                continue
            level = len(line) - len(line.lstrip())
            if entry is not None and level > indent:
                entry.lines.append(index)
            else:
                indent = level
                entry = None
                header = _SECTION_RE.match(stripped)
                if header:
                    section = self.sections.setdefault(header.group("header"), _Section(index, index))
                elif section is not None:
                    option = _OPTION_RE.match(stripped)
                    if option:
                        start = level + option.start("value")
                        entry = _Entry([index], start)
                        section.entries[option.group("option").strip().lower()] = entry
            if section is not None:
                section.last_line = index

    def text(self) -> str:
        """The file's text with the edits made so far."""
        return "".join(self._lines)

    def words(self, section: str, key: str) -> list[tuple[str, int, int]]:
        """The words of a key's value, each as ``(word, line index, column)``."""
        entry = self.sections[section].entries[key]
        found = []
        for position, index in enumerate(entry.lines):
            start = entry.value_start if position == 0 else 0
            line = self._lines[index].rstrip("\r\n")
            for match in re.finditer(r"\S+", line[start:]):
                found.append((match.group(), index, start + match.start()))
        return found

    def insert_words(self, section: str, key: str, position: int, words: list[str], *, after: bool) -> None:
        """Insert *words* after (or before) the word at *position* of a key's value, on that word's line."""
        word, index, column = self.words(section, key)[position]
        line = self._lines[index]
        added = " ".join(words)
        if after:
            column += len(word)
            self._lines[index] = line[:column] + " " + added + line[column:]
        else:
            self._lines[index] = line[:column] + added + " " + line[column:]

    def append(self, text: str) -> None:
        """Add *text* at the end of the file, after a blank line."""
        if self._lines and not self._lines[-1].endswith("\n"):
            self._lines[-1] += "\n"
        if self._lines and self._lines[-1].strip():
            self._lines.append("\n")
        self._lines.append(text)
