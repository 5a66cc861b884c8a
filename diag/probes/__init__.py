"""Probes: one source each. Pure parsers of text/JSON live beside the thin I/O that reads it."""
