"""The one JSON reader: every JSON input (reports, baselines, job and result files, cost files, manifests, plans)
is parsed here, and an object that names a key twice is refused.

Python's json keeps the last of two equal keys without a word, so a file whose `"accepted"` list is given twice
would be read as its last list: what a reader shows and what the file says would differ. `loads` refuses such
text with DuplicateKeyError naming the key (callers that know the file name it too), and refuses NaN and
Infinity, which are not JSON.
"""
from __future__ import annotations

import json
import os
from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} appears twice in one object (each key once: which value is meant?)")
        self.key = key


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise DuplicateKeyError(key)
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str | bytes) -> Any:
    """Parse strict JSON: no key twice in an object, no NaN/Infinity. Raises json.JSONDecodeError or ValueError."""
    return json.loads(text, object_pairs_hook=_unique_object, parse_constant=_reject_constant)


def load_path(path: str | os.PathLike[str]) -> Any:
    """Read and parse a JSON file the harness itself wrote (a job, a result, a plan); errors name the file."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        return loads(text)
    except ValueError as exc:
        raise ValueError(f"{os.fspath(path)}: {exc}") from None
