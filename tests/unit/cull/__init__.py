"""Unit tests of tenancy_mw.cull."""
