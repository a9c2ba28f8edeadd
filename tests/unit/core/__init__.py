"""Unit tests of tenancy_mw.core."""
