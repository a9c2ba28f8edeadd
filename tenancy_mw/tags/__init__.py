"""Simple string tags.

The tag model and query parser (:mod:`tenancy_mw.tags.model`, no
SQLAlchemy), their SQL (:mod:`tenancy_mw.tags.sql`), the tag store, the tag
API and the ``tag_query`` filter.

Until 0.2.0 ``tenancy_mw.tags`` was the tag model's module; its names,
taken from this package, still work for one release with a
:class:`DeprecationWarning` naming the module that holds them now,
:mod:`tenancy_mw.tags.model` or :mod:`tenancy_mw.tags.sql`.
"""

# What ``from tenancy_mw.tags import *`` gave in 0.1; each name warns as it is taken.
_ALL_0_1 = (
    "EMPTY_QUERY",
    "GROUPED_ANY_BESIDE",
    "GROUPED_ANY_MAX",
    "GROUPED_ANY_REQUIRED_MAX",
    "GROUPED_ANY_SMALL",
    "GROUPED_MIN_CANDIDATES",
    "MAX_QUERY_TAGS",
    "MAX_RESOURCE_ID_LENGTH",
    "MAX_TAG_BYTES",
    "PARAMETERS",
    "SEMANTICS",
    "TAGS",
    "TAG_COUNT_CAP",
    "TAG_LOCKS",
    "InvalidTag",
    "InvalidTagQuery",
    "TagQuery",
    "TagStatistics",
    "TagTables",
    "count_tags",
    "tag_statistics",
    "define_tables",
    "parse_tag_query",
    "validate_tag",
)


def __getattr__(name: str):
    """An old name of the tag model's module, from where it is now, with a warning."""
    import importlib

    from tenancy_mw._moved import warn_moved

    if name == "__all__":
        return list(_ALL_0_1)
    model = importlib.import_module("tenancy_mw.tags.model")
    if name.startswith("__"):
        raise AttributeError("module 'tenancy_mw.tags' has no attribute %r" % name)
    # Checked first: model finds these too, but with a warning of its own.
    if name in model.MOVED_TO_SQL:
        new = importlib.import_module("tenancy_mw.tags.sql")
    elif name in vars(model):
        new = model
    else:
        raise AttributeError("module 'tenancy_mw.tags' has no attribute %r" % name)
    warn_moved("tenancy_mw.tags.%s" % name, "%s.%s" % (new.__name__, name))
    return getattr(new, name)
