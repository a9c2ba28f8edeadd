"""Old public names kept working for one release, with a warning that names the new one.

A module that renames a public function keeps the old name reachable
through a module ``__getattr__`` (PEP 562): the old name is then looked up
only when nothing else has it, so it costs nothing to the new name's users.

Example::

    >>> import warnings
    >>> def tidy(text):
    ...     return text.strip()
    >>> __getattr__ = renamed_names("example", {"clean": "tidy"}, globals())
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     __getattr__("clean")(" a ")
    'a'
    >>> print(caught[0].message)
    example.clean is deprecated: use example.tidy (the old name will be removed in the next release)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["renamed_names"]


def renamed_names(module: str, renames: Mapping[str, str], namespace: Mapping[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for *module* under which each old name in *renames* gives its new name's object.

    :param module: the module's dotted name, for the warning.
    :param renames: old name -> new name.
    :param namespace: the module's ``globals()``, where the new names live.

    Each use of an old name warns with a :class:`DeprecationWarning` naming
    the new one; any other missing name raises :class:`AttributeError`.
    """

    def __getattr__(name: str) -> Any:
        new = renames.get(name)
        if new is None:
            raise AttributeError("module %r has no attribute %r" % (module, name))
        warnings.warn(
            "%s.%s is deprecated: use %s.%s (the old name will be removed in the next release)"
            % (module, name, module, new),
            DeprecationWarning,
            stacklevel=2,
        )
        return namespace[new]

    return __getattr__
