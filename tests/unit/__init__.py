"""Unit tests, a folder per capability of tenancy_mw, in-process."""
