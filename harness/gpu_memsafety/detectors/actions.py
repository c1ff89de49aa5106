"""Worker-side actions: how a case is launched for the detectors of a mode (the worker calls them, never branches).

An action is a function `(worker, adapter, case) -> dict`: it runs the adapter on contexts the worker makes
(`worker.context(...)`), and returns the case's result fields (gpu_memsafety.job.WorkerResult) with the detectors'
evidence under "evidence", keyed by detector name. A detector names the action it needs
(gpu_memsafety.detectors.base.Detector.action); detectors that only watch the plain launch share `once`. The actions
here are stress (production conditions, no detector); the plain launch and the helpers every detector's action
uses (launched, marker_check) are in gpu_memsafety.detectors.launch, below this module's layer; the detectors'
own actions live in their modules and are named in ACTIONS as "module:function", imported in the worker only
(they import torch).

A mode with several actions (a stage that runs poison and uninit) runs each on the case in turn; `combine` adds
their results up into one.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from gpu_memsafety.detectors.registry import UNITS

ONCE = "once"
STRESS = "stress"
# The plain launch, production stress, and each detector's own action (Detector.action, Detector.action_at).
ACTIONS: dict[str, str] = {
    ONCE: "gpu_memsafety.detectors.launch:once",
    STRESS: "gpu_memsafety.detectors.actions:stress",
    **{unit.action: unit.action_at for unit in UNITS.values() if unit.action},
}

Action = Callable[[Any, Any, Any], dict[str, Any]]


def resolve(name: str) -> Action:
    """The function an action name stands for (imported on first use)."""
    if name not in ACTIONS:
        raise KeyError(f"unknown worker action {name!r}; known: {', '.join(ACTIONS)}")
    module, func = ACTIONS[name].split(":", 1)
    return getattr(importlib.import_module(module), func)


def stress(worker: Any, adapter: Any, case: Any) -> dict[str, Any]:
    """Production conditions: caching allocator on, no guards, no placement; count clean iterations."""
    iterations = worker.job.iterations
    done = launches = 0
    info = None
    for _ in range(iterations):
        ctx = worker.context(case, production=True)
        info = adapter(case, ctx)
        worker.sync()
        done += 1
        launches += info.launches
        (worker.out / "stress.progress").write_text(str(done))
    return {"kernel": info.kernel if info else "", "arch": worker.arch(), "launches": launches, "buffers": [],
            "evidence": {STRESS: {"iterations": done}}}


def combine(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """Several actions' results for one case as one: the first one's buffer map, kernel and notes; launches and
    kernel time added; every detector's evidence, merged by the detector (Unit.merge_evidence: the guard markers of
    every launch that checked them)."""
    if len(bodies) == 1:
        return bodies[0]
    merged = dict(bodies[0])
    merged["launches"] = sum(b.get("launches", 0) for b in bodies)
    merged["kernel_seconds"] = sum(b.get("kernel_seconds", 0.0) for b in bodies)
    merged["watched"] = sorted({w for b in bodies for w in b.get("watched", [])})
    merged["passes"] = [p for b in bodies for p in b.get("passes", [])]
    evidence: dict[str, Any] = {}
    for body in bodies:
        for name, value in body.get("evidence", {}).items():
            evidence[name] = UNITS[name].merge_evidence(evidence.get(name), value) if name in UNITS else value
    merged["evidence"] = evidence
    return merged
