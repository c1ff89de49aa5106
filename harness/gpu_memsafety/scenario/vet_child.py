"""The child side of scenario vetting (gpu_memsafety.scenario.vetting): `python -m gpu_memsafety.scenario.vet_child JOB`.

Imports each scenario file of the job in turn, under vetting.watch at the file-descriptor level, and appends
one JSON line per file to the job's log: {"file", "started"} before the import, {"file", "problems",
"warnings"} after it. The parent reads the log even when this process was killed (a hung import) or ended
itself (os._exit at import): the last file started and never finished is the culprit. The process is a child
subreaper, so what an import starts (a daemon included) is found and killed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from gpu_memsafety.scenario import registry
from gpu_memsafety.scenario.vetting import Effects, watch
from gpu_memsafety.util import procs
from gpu_memsafety.util import jsonio


def main(job_path: str) -> int:
    job = jsonio.loads(Path(job_path).read_text())
    procs.subreaper()          # orphans of what an import starts become ours, so they are found and killed
    with open(job["log"], "a", buffering=1) as log:
        for data in job["sources"]:
            source = registry.Source.from_json(data)
            log.write(json.dumps({"file": source.file, "started": True}) + "\n")
            effects, problems = Effects(), []
            try:
                with watch(effects, fd_level=True):
                    registry.load_unvetted(source)
            except registry.ScenarioError as exc:
                problems.append(exc.problem)          # names the file already
            except Exception as exc:  # noqa: BLE001 - any failure of a user's file is its verdict
                problems.append(f"importing {source.file} failed: {type(exc).__name__}: {exc}")
            problems += [f"importing {source.file}: {p}" for p in effects.problems]   # what only the child sees
            log.write(json.dumps({"file": source.file, "problems": problems, "warnings": effects.warnings}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
