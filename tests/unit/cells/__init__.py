"""Unit tests of tenancy_mw.cells."""
