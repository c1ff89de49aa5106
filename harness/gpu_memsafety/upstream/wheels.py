"""Reading a wheel's members, independent of the catalogue (cli/upstream.py): which members a folder prefix selects,
the headers a header includes from the same wheel (its include closure), and the sha256 the wheel's own RECORD
gives each file (PEP 376/427). Pure of torch/triton/CUDA, standard library only."""
from __future__ import annotations

import base64
import csv
import io
import re
import zipfile
from typing import Callable, Iterable, Sequence


def selected(names: Iterable[str], members: Sequence[str]) -> list[str]:
    return [n for n in names if not n.endswith("/") and any(n == m or (m.endswith("/") and n.startswith(m))
                                                           for m in members)]


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def _normalized(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def include_closure(names: Iterable[str], read: Callable[[str], bytes], roots: Sequence[str],
                    include_dirs: Sequence[str]) -> list[str]:
    """The headers `roots` include, directly or not, that the wheel holds: each `#include` resolved against the
    including file's folder, then against `include_dirs` (wheel paths ending in "/"); one the wheel lacks (a
    toolkit or system header) is left to the compiler. Every #include counts, whatever #if guards it, so the set
    may hold a header the build skips, never miss one it reads."""
    have = set(names)
    seen: set[str] = set()
    todo = [r for r in roots if r in have]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        folder = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
        for target in _INCLUDE.findall(read(name).decode("utf-8", "replace")):
            for candidate in (_normalized(folder + target), *(_normalized(d + target) for d in include_dirs)):
                if candidate in have:
                    todo.append(candidate)
                    break
    return sorted(seen)



def record_hashes(zf: zipfile.ZipFile) -> dict[str, str]:
    """{member: sha256 hex} from the wheel's one `*.dist-info/RECORD` (urlsafe base64 sha256); ValueError without it."""
    records = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        raise ValueError(f"{len(records)} RECORD files, not one")
    hashes: dict[str, str] = {}
    for row in csv.reader(io.StringIO(zf.read(records[0]).decode("utf-8"))):
        if len(row) >= 2 and row[1].startswith("sha256="):
            digest = row[1][len("sha256="):]
            hashes[row[0]] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return hashes
