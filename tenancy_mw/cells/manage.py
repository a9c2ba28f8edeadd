"""``tenancy-mw-manage ids backfill``: the cells capability's verbs.

The verb and its options are defined beside the work it does
(:func:`tenancy_mw.cells.backfill.register`); this module is where
``tenancy-mw-manage`` finds them, as it finds every capability's.
"""

from __future__ import annotations

from tenancy_mw.cells.backfill import register

__all__ = ["register"]
