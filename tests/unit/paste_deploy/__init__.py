"""Unit tests of tenancy_mw.paste_deploy."""
