"""Upstream code the scenarios run: the catalogue of pinned wheels (catalogue.py) and their hashes (pins.py)."""
