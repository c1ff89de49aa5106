"""Fake compute-sanitizers for CPU tests: small Python scripts that take the real tool's arguments (options, then the
worker's command line), run the worker or not, and write what a real run would (tests/engine/test_fault_injection.py,
test_hazard_modes.py, test_cover.py, test_planted_unwatched.py). `PARSE_ARGS` is the part every fake shares;
`install` writes one where the runner finds it; `memcheck` is memcheck's view of a placement: it runs the worker,
then reports the accesses it is told about exactly where memcheck would, outside the buffer's allocation, and
never inside it (a back guard)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gpu_memsafety.sanitizer.tool import SanitizerInfo, SanitizerLookup

# The fake's command line, as gpu_memsafety.sanitizer.tool builds the real one: options (`--xml` takes no value, `--save` the
# XML's path), then the target's argv. Leaves `xml_path` and `target`. Needs sys and Path imported.
PARSE_ARGS = '''\
args = sys.argv[1:]
xml_path = None
i = 0
while i < len(args) and args[i].startswith("--"):
    if args[i] == "--xml":
        i += 1
        continue
    if args[i] == "--save":
        xml_path = Path(args[i + 1].replace("%%", "%"))
    i += 2
target = args[i:]
'''

# Runs the worker, then does what memcheck does with the accesses it is told about, for every case that ran: a
# record only for an access that lies outside its buffer's allocation (an exact allocation), none for one
# that lands in the buffer's own back guard. ACCESSES: "expected" (every byte range the case's expectation names,
# the scenario found through gpu_memsafety.scenario.registry) or a list of (buffer, offset from its end, size, direction).
FAKE_MEMCHECK = '''\
import json, subprocess, sys
from pathlib import Path

ACCESSES = {accesses!r}
''' + PARSE_ARGS + '''print("========= COMPUTE-SANITIZER", flush=True)
code = subprocess.call(target)
job = json.loads(Path(target[-1]).read_text())


def accesses(case, buffers):
    if ACCESSES != "expected":
        return [(name, buffers[name]["nbytes"] + off, size, d) for name, off, size, d in ACCESSES if name in buffers]
    from gpu_memsafety.scenario import registry
    scenario, found = registry.find_case(f"{{case['scenario']}}[{{case['variant']}}-{{case['label']}}]")
    return [(e.buffer, lo, hi - lo, "write" if e.kind == "overwrite" else "read")
            for e in scenario.expect(found).findings for lo, hi in e.ranges or ()]


records = []
for index, case in enumerate(job["cases"]):
    path = Path(job["out_dir"], f"{{index}}.json")
    if not path.exists():
        continue
    buffers = {{b["name"]: b for b in json.loads(path.read_text())["buffers"]}}
    for name, offset, size, direction in accesses(case, buffers):
        buf = buffers[name]
        address = buf["tensor_addr"] + offset
        if buf["alloc_base"] <= address and address + size <= buf["alloc_base"] + buf["alloc_size"]:
            continue
        records.append("<record><kind>Precise</kind><level>Error</level><what>"
                       f"<text>Invalid __global__ {{direction}} of size {{size}} bytes is out of bounds</text>"
                       f"<space>__global__</space><size>{{size}}</size><direction>{{direction}}</direction>"
                       f"<error>out of bounds</error><address>{{address:#x}}</address></what>"
                       "<where><func>fake</func></where></record>")
xml_path.write_text('<?xml version="1.0"?>\\n<ComputeSanitizerOutput>\\n' + "".join(records) + "</ComputeSanitizerOutput>\\n")
print(f"========= ERROR SUMMARY: {{len(records)}} error{{'' if len(records) == 1 else 's'}}", flush=True)
sys.exit(86 if records else code)
'''


def install(directory: Path, name: str, source: str) -> SanitizerLookup:
    """The fake `source` written into `directory` as an executable, as gpu_memsafety.sanitizer.tool would have found a real one."""
    script = directory / name
    script.write_text(f"#!{sys.executable}\n" + source)
    script.chmod(0o755)
    return SanitizerLookup(found=SanitizerInfo(path=str(script), version="2025.3.1", source="test"),
                           searched=[str(script)])


def memcheck(directory: Path, accesses: Any) -> SanitizerLookup:
    """FAKE_MEMCHECK for these accesses ("expected", or (buffer, offset from its end, size, direction) tuples)."""
    return install(directory, f"fake-memcheck-{abs(hash(repr(accesses)))}", FAKE_MEMCHECK.format(accesses=accesses))
