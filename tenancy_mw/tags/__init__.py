"""Simple string tags.

The tag model and query parser, their SQL, the tag store, the tag API and
the ``tag_query`` filter.

Until 0.2.0 ``tenancy_mw.tags`` was the tag model's module; its names,
taken from this package, still work for one release with a
:class:`DeprecationWarning` naming :mod:`tenancy_mw.tags.model`.
"""


def __getattr__(name: str):
    """An old name of the tag model's module, from :mod:`tenancy_mw.tags.model`, with a warning."""
    import importlib

    from tenancy_mw._moved import warn_moved

    model = importlib.import_module("tenancy_mw.tags.model")
    if name.startswith("__") or not hasattr(model, name):
        raise AttributeError("module 'tenancy_mw.tags' has no attribute %r" % name)
    warn_moved("tenancy_mw.tags.%s" % name, "tenancy_mw.tags.model.%s" % name)
    return getattr(model, name)
