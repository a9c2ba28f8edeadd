"""Unit tests of tenancy_mw.tags."""
