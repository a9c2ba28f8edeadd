"""Sphinx configuration of the release notes (``make releasenotes``, ``tox -e releasenotes``)."""

from __future__ import annotations

import tenancy_mw

project = "tenancy_mw release notes"
author = "tenancy_mw developers"
copyright = "tenancy_mw developers, Apache License 2.0"  # noqa: A001
version = release = tenancy_mw.__version__
extensions = ["reno.sphinxext"]
root_doc = "index"
exclude_patterns: list[str] = []
html_theme = "alabaster"
