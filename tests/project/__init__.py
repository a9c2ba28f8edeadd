"""Checks of the project itself: packaging, docs, the Makefile, the bench."""
