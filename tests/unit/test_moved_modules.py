"""The module paths of 0.1 still import in 0.2.0, as the new modules, with a warning that names the new path."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tenancy_mw._moved import MOVED

#: The old paths whose new module needs the ``sql`` extra, which the test environment has.
OLD_PATHS = sorted(MOVED)


@pytest.mark.parametrize("old", OLD_PATHS)
def test_an_old_path_imports_as_the_new_module_with_a_warning_naming_it(old):
    # A fresh interpreter: in this one the old path may already be cached as the new module.
    code = (
        "import warnings, importlib\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    module = importlib.import_module(%r)\n"
        "print(module.__name__)\n"
        "print([str(w.message) for w in caught if w.category is DeprecationWarning])\n" % old
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    name, warnings_seen = done.stdout.splitlines()
    assert name == MOVED[old]
    assert "%s moved to %s" % (old, MOVED[old]) in warnings_seen


def test_the_old_path_is_the_new_module_itself_private_names_included():
    sys.modules.pop("tenancy_mw.paths", None)
    with pytest.warns(DeprecationWarning, match="tenancy_mw.paths moved to tenancy_mw.core.paths"):
        old = importlib.import_module("tenancy_mw.paths")
    assert old is importlib.import_module("tenancy_mw.core.paths")
    assert old._compute is importlib.import_module("tenancy_mw.core.paths")._compute


def test_an_old_name_of_the_tag_model_comes_from_the_tags_package_with_a_warning():
    import tenancy_mw.tags
    from tenancy_mw.tags.model import validate_tag

    with pytest.warns(DeprecationWarning, match=r"tenancy_mw\.tags\.validate_tag moved to tenancy_mw\.tags\.model"):
        assert tenancy_mw.tags.validate_tag is validate_tag


def test_a_star_import_of_the_old_tag_module_gives_its_names_with_warnings():
    from tenancy_mw.tags import model, sql

    namespace: dict = {}
    with pytest.warns(DeprecationWarning, match=r"moved to tenancy_mw\.tags\.(model|sql)") as warned:
        exec("from tenancy_mw.tags import *", namespace)  # noqa: S102 - a star import needs a fresh namespace
    assert namespace["parse_tag_query"] is model.parse_tag_query
    assert namespace["TAGS"] is sql.TAGS
    assert {"validate_tag", "TagTables", "define_tables", "count_tags"} <= namespace.keys()
    assert any("tenancy_mw.tags.TAGS moved to tenancy_mw.tags.sql" in str(w.message) for w in warned)


def test_a_name_the_tag_model_never_had_is_an_attribute_error():
    import tenancy_mw.tags

    with pytest.raises(AttributeError, match="no_such_name"):
        tenancy_mw.tags.no_such_name  # noqa: B018 - the access is the test


def test_every_moved_module_exists_at_its_new_path_and_no_old_file_is_left():
    import tenancy_mw

    package = tenancy_mw.__path__[0]
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        assert not (Path(package) / (old.split(".")[-1] + ".py")).exists(), old


def test_the_six_filter_classes_come_from_the_package_face():
    import tenancy_mw

    names = {cls: getattr(tenancy_mw, cls).__name__ for cls in tenancy_mw.FILTERS}
    assert names == {cls: cls for cls in tenancy_mw.FILTERS}
    assert len(tenancy_mw.FILTERS) == 6


@pytest.mark.parametrize(
    ("module", "logger"),
    [
        ("tenancy_mw.core.base", "tenancy_mw.base"),
        ("tenancy_mw.tenants.path_filter", "tenancy_mw.tenant_path"),
        ("tenancy_mw.tenants.admin.filter", "tenancy_mw.tenant_admin"),
        ("tenancy_mw.tenants.admin.state", "tenancy_mw.tenant_admin"),
        ("tenancy_mw.cull.filter", "tenancy_mw.admin_cull"),
        ("tenancy_mw.cells.filter", "tenancy_mw.id_resolver"),
        ("tenancy_mw.cells.lookup", "tenancy_mw.cell_lookup"),
        ("tenancy_mw.cells.backfill", "tenancy_mw.uuid_backfill"),
        ("tenancy_mw.tags.filter", "tenancy_mw.tag_query"),
        ("tenancy_mw.tags.store", "tenancy_mw.tag_store"),
        ("tenancy_mw.tags.api", "tenancy_mw.tag_api"),
        ("tenancy_mw.idempotency.filter", "tenancy_mw.idempotency.filter"),
    ],
)
def test_the_loggers_keep_the_names_operators_route_on(module, logger):
    assert importlib.import_module(module).LOG.name == logger
