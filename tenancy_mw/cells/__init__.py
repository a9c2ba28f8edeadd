"""Uuids instead of database ids across cells.

The id parsers and the microversion gate (pure), the cell lookup, the
``id_resolver`` filter and the uuid backfill.
"""
