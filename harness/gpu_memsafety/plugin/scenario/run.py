"""A scenario run under pytest, the engine behind its hooks: every scenario case is a pytest item; `make sanitize` is
pytest over scenarios/.

The hooks are the face's (fixtures/scenario_run.py, registered by the plugin only when the command line asks for a
scenario run); each is one call here: `configure`, `plan`, `CaseNode.run_case`, `finish`, `terminal_summary`.

Options live in one group (fixtures/options.py) and are validated once into a `SanitizeConfig`
(gpu_memsafety.plugin.settings). After collection the cases are cut into batches (harness/gpu_memsafety/engine/schedule.py: `--gpu-memsafety-shard K/N`
first, then batches by expected cost, longest first); each batch is an `xdist_group`, and with `--dist
loadgroup` (what `-n` means for a scenario run) xdist hands whole batches to whichever worker is free. A batch
runs in one worker process (the runner's job). Each xdist worker holds its own GPU through a lock
(harness/gpu_memsafety/util/gpus.py), so a restarted worker takes a free one.

Results travel to the controller as user_properties; the controller keeps one result per case id, marks
the case that was running when a pytest worker died, or when the run was interrupted (Ctrl-C, SIGTERM),
`crashed`, lists the cases that never ran (plugin/scenario/controller.py), and writes the reports (JSON, JUnit,
Markdown). A case that fails says why in a `key = value` block (the face's CaseItem).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_memsafety.engine import schedule
from gpu_memsafety.plugin import interrupts
from gpu_memsafety.plugin.face import arg_paths
from gpu_memsafety.util import gpus
from gpu_memsafety.plugin.scenario.discovery import FILES, SCENARIOS, discover_scenarios
from gpu_memsafety.plugin.settings import CONFIG, RUN_ID_KEY, SanitizeConfig, load_baseline_option
from gpu_memsafety.plugin.scenario.controller import (STATE, ControllerState, batch_summary, batch_times, case_id_of,
                                                      crash_result, final_results, worker_crash)
from gpu_memsafety.plugin.scenario.shards import record_matrix, shard_manifest
from gpu_memsafety.judge.rules import apply_baseline
from gpu_memsafety.model import CaseResult
from gpu_memsafety.report.locate import definition_site
from gpu_memsafety.scenario import registry
from gpu_memsafety.scenario.definition import Case, Scenario
from gpu_memsafety.engine.runner import RunOptions, Runner
from gpu_memsafety.util import jsonio

RESULT_KEY = "gpu_memsafety_result"


def configure(config: pytest.Config) -> None:
    """The scenario run's pytest_configure: its markers, its options validated, the controller's hooks."""
    _terminate_as_interrupt()            # before discovery: a stop signal while vetting cleans up too
    _host_on_import_path(config)
    from gpu_memsafety.util.preflight import PreflightError, stack
    try:
        stack()
    except PreflightError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped with the reason when none is found")
    config.addinivalue_line("markers", "scenario(name): a harness scenario case")
    config.addinivalue_line("markers", "sm90: exercises a Hopper-only code path (sm_90)")
    config.addinivalue_line("markers", "xdist_group(name): the batch a scenario case runs in")
    for tag in sorted({t for s in discover_scenarios(config).values() for c in _cases_or_none(s) for t in c.tags}):
        config.addinivalue_line("markers", f"{tag}: scenario cases tagged {tag!r} (select with -m {tag})")
    config.stash[CONFIG] = SanitizeConfig.from_pytest(config, discover_scenarios(config))
    _start_reports(config)
    config.stash[STATE] = ControllerState(rootpath=Path(config.rootpath), scenario_files=set(config.stash[FILES]))
    if not _is_xdist_worker():
        config.pluginmanager.register(_Controller(config.stash[STATE]), "gpu-memsafety-controller")
    if not _is_xdist_worker() and _runs_scenarios(config) and config.getoption("dist", "no") in ("load", "worksteal"):
        # Per-item load balancing would split a batch over workers and run it twice: balance whole batches.
        config.option.dist = "loadgroup"
    if not _is_xdist_worker() and config.getoption("dist", "no") == "loadgroup":
        config.option.loadscopereorder = False      # keep the plan's longest-first order, not xdist's by-count one
    _terminate_as_interrupt()
    if any(config.pluginmanager.hasplugin(name) for name in ("xdist", "xdist.plugin")):   # `-p xdist.plugin` names it so
        config.pluginmanager.register(_XdistHooks(), "gpu-memsafety-xdist")


def _host_on_import_path(config: pytest.Config) -> None:
    """The run's rootdir first on sys.path, as pytest's rootdir conftest would put it: a host repository's
    scenarios import its own packages (`kernels.my_kernel`) whichever way pytest was started, and the worker
    processes inherit the same path (util.paths.inherited_pythonpath)."""
    import sys
    root = str(Path(config.rootpath).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)


def _cases_or_none(scenario: Scenario) -> list[Case]:
    """A scenario's cases; none when its definition is bad: collecting its file reports the error, and the
    run's reports say failed (never a configuration crash that leaves the previous reports in place)."""
    try:
        return scenario.build()
    except registry.ScenarioError:
        return []


def _is_xdist_worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def _runs_scenarios(config: pytest.Config) -> bool:
    """The command line names scenario files or a directory holding some (scenarios/, a --gpu-memsafety-scenario-path)."""
    files = config.stash.get(FILES, set())
    return any(a in files or (a.is_dir() and any(f.is_relative_to(a) for f in files)) for a in arg_paths(config))


def _terminate_as_interrupt() -> None:
    """SIGTERM (a cancelled CI job, `kill`, make passing on its signal) and SIGHUP end the run like Ctrl-C: the running
    worker processes are killed, and the reports say the run was interrupted (util.signals; the plugin installs it
    first thing, before scenario files are vetted, this again in case it was loaded on its own)."""
    from gpu_memsafety.util.signals import stop_as_interrupt
    stop_as_interrupt()


class _XdistHooks:
    """Hooks only xdist knows about (registered only when xdist is installed)."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[RUN_ID_KEY] = node.config.stash[CONFIG].run_id
        node.workerinput[DIST_KEY] = node.config.getoption("dist", "no")

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getoption("dist", "no") != "loadgroup":
            return None
        from gpu_memsafety.plugin.scenario.xdist_sched import BatchScheduling
        return BatchScheduling(config, log)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        state = node.config.stash[STATE]
        for nodeid in ids:
            if state.is_scenario_nodeid(nodeid):
                state.expected.setdefault(case_id_of(nodeid), nodeid)


def _start_reports(config: pytest.Config) -> None:
    """Controller only: check --gpu-memsafety-report-dir before anything runs, and replace the previous run's reports with
    this run's "did not finish" set (gpu_memsafety.report.start_report_dir)."""
    cfg = config.stash[CONFIG]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    from gpu_memsafety import report as rp
    if cfg.report_dir is None or config.getoption("collectonly") or config.getoption("help"):
        return  # nothing will run: the previous reports stay as they are
    import socket
    try:
        rp.start_report_dir(cfg.report_dir, run_id=cfg.run_id, started=_iso(cfg.started),
                            argv=list(config.invocation_params.args), environment={"hostname": socket.gethostname()},
                            mode=cfg.mode.name)
    except rp.ReportDirError as exc:
        raise pytest.UsageError(f"--gpu-memsafety-report-dir: {exc}") from None


_RUNNER = pytest.StashKey["SessionRunner"]()


def auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: workers chosen from the GPUs' memory, the cores and the number of cases (gpus.scenario_workers)."""
    from gpu_memsafety.util.gpus import discover, visible_gpus
    devices, _ = visible_gpus()
    memory = {g.uuid: g.memory_mib for g in discover().gpus}
    cases = sum(len(_cases_or_none(s)) for s in discover_scenarios(config).values())
    return gpus.scenario_workers([memory.get(d.uuid, 0) for d in devices], os.cpu_count() or 1, cases)


def plan(config: pytest.Config, items: list[pytest.Item]) -> None:
    """(pytest_collection_modifyitems, after -k / -m deselection: plan only what runs.)
    Shard, then cut into batches (each an xdist_group), longest batch first; other tests keep their place.

    Under `--dist loadgroup` the batch name is appended to the node id ('...::case@batch'), as xdist does for
    its xdist_group marks (its own hook has run by now, and on a worker it only knows the command line's
    --dist, not the loadgroup the controller chose for `-n`)."""
    cases = [i for i in items if isinstance(i, CaseNode)]
    if not cases:
        return
    cfg = config.stash[CONFIG]
    jobs = [schedule.Job(i.case.id, i.scenario.name, cfg.costs.get(i.case.id) or i.scenario.cost(i.case),
                         i.scenario.runs_alone(i.case)) for i in cases]
    info: dict[str, Any] = {"cases_before_shard": len(jobs), "selection": _digest(j.id for j in jobs)}
    if cfg.shard is not None:
        record_matrix(config, cfg, jobs, on_worker=_is_xdist_worker())
        mine = {j.id for j in schedule.select_shard(jobs, cfg.shard)}
        dropped = [i for i in cases if i.case.id not in mine]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        cases = [i for i in cases if i.case.id in mine]
        jobs = [j for j in jobs if j.id in mine]
        info["shard"] = {"index": cfg.shard.index, "count": cfg.shard.count, "cases": len(jobs),
                         "cases_in_all_shards": info["cases_before_shard"], "selection": info["selection"]}
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    batches = schedule.plan(jobs, workers, cfg.batch_size)
    by_id = {i.case.id: i for i in cases}
    ordered: list[pytest.Item] = []
    grouped = _dist(config) == "loadgroup"
    for batch in batches:
        for cid in batch.ids:
            item = by_id[cid]
            item.batch = batch.name
            item.add_marker(pytest.mark.xdist_group(batch.name))
            if grouped and not item.nodeid.endswith(f"@{batch.name}"):
                item._nodeid = f"{item.nodeid}@{batch.name}"      # noqa: SLF001 - xdist's loadgroup convention
            item.user_properties.append((PLAN_KEY, json.dumps({**info, "batch": batch.name, "batch_cost_s": round(batch.cost, 3),
                                                               "workers": workers, "batches": len(batches)})))
            ordered.append(item)
    others = [i for i in items if not isinstance(i, CaseNode)]
    items[:] = others + ordered
    config.stash[_PLAN] = {**info, "workers": workers, "batches": [
        {"name": b.name, "cases": len(b.ids), "expected_s": round(b.cost, 3)} for b in batches]}


def _dist(config: pytest.Config) -> str:
    """The distribution mode the controller chose (workers re-parse the command line and see only that)."""
    given = getattr(config, "workerinput", {}).get(DIST_KEY)
    return str(given) if given else str(config.getoption("dist", "no"))


DIST_KEY = "gpu_memsafety_dist"


def _digest(ids: Any) -> str:
    """Names the case list a run was cut from: shards of one run agree on it."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


PLAN_KEY = "gpu_memsafety_plan"
_PLAN = pytest.StashKey[dict]()


def collects(config: pytest.Config, file_path: Path) -> bool:
    """Whether a file is one of this run's scenario files (pytest_collect_file)."""
    return file_path.suffix == ".py" and file_path.resolve() in config.stash.get(FILES, set())


def outside_rootdir(config: pytest.Config, file_path: Path) -> bool:
    """Outside the rootdir pytest would name a scenario file "" (an initial path's own name): its absolute path is
    its node id, so that reports, --dist loadfile and crash records can tell such files apart."""
    return not file_path.resolve().is_relative_to(Path(config.rootpath).resolve())


def selected(config: pytest.Config, path: Path) -> tuple[Scenario | None, list[Case]]:
    """The scenario a file defines and its cases this run selects (--gpu-memsafety-scenario, -tag, -case)."""
    cfg = config.stash[CONFIG]
    scenario = next(s for s in config.stash[SCENARIOS].values() if Path(s.source.file) == path.resolve())
    if cfg.scenarios and scenario.name not in cfg.scenarios:
        return scenario, []
    wanted = {_canonical(c) for c in cfg.cases}
    return scenario, [case for case in scenario.build() if not (cfg.tags and not set(cfg.tags) & set(case.tags))
                      and not (cfg.cases and case.id not in wanted)]


def _canonical(case_id: str) -> str:
    name, inner = registry.split_case_id(case_id)
    return f"{name}[{inner}]"


class CaseNode(pytest.Item):
    """A scenario case as a pytest item: its batch, and its result from this process's runner (the face's CaseItem
    turns the result into pytest's outcome)."""

    def __init__(self, *, scenario: Scenario, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.case = case
        self.batch = f"{scenario.name}.{case.id}" if scenario.runs_alone(case) else scenario.name

    def run_case(self) -> CaseResult:
        """This case's result (its whole batch runs the first time one of its cases asks), kept on its report."""
        result = _session_runner(self.session).result_for(self)
        self.user_properties.append((RESULT_KEY, json.dumps(result.to_json())))
        return result

    def rerun_command(self) -> str:
        from gpu_memsafety.cli.repro import rerun_command
        cfg = self.config.stash[CONFIG]
        return rerun_command(self.scenario, self.case, cfg.mode.name, cfg.cover)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.case.id


class SessionRunner:
    """Per-process (xdist worker) runner: runs the batch of the item asked for, all of it, in one worker
    process, on this worker's GPU."""

    def __init__(self, session: pytest.Session) -> None:
        from gpu_memsafety.sanitizer import tool as sanitizer
        cfg = session.config.stash[CONFIG]
        self.cfg = cfg
        self.session = session
        self.worker_id = os.environ.get("PYTEST_XDIST_WORKER") or "main"
        self.results: dict[str, CaseResult] = {}
        self.workdir = cfg.run_dir / f"{self.worker_id}-{os.getpid()}"
        self.baseline = load_baseline_option(cfg.baseline)
        from gpu_memsafety.util.gpus import visible_gpus
        devices, why = visible_gpus()
        self.claim = gpus.claim(devices, cfg.run_dir / "gpu-locks", self.worker_id)
        self.sanitizer = sanitizer.locate() if cfg.mode.tools else None
        self.gpu_missing = why

    def result_for(self, item: CaseNode) -> CaseResult:
        if item.case.id not in self.results:
            self._run_batch(item)
        return self.results[item.case.id]

    def _run_batch(self, item: CaseNode) -> None:
        batch = [i for i in self.session.items if isinstance(i, CaseNode) and i.batch == item.batch
                 and i.case.id not in self.results] or [item]
        if item not in batch:
            batch = [item]
        for cid, message in self._killed_earlier(item.batch).items():
            # A pytest worker died while this case ran (xdist gives its batch to this worker): not run again.
            victim = next((i for i in batch if i.case.id == cid), None)
            if victim is not None:
                self.results[cid] = crash_result(cid, message, self.cfg, None, victim.scenario, victim.case)
                batch.remove(victim)
        if item.case.id in self.results:
            return
        claim = self.claim
        runner = Runner(RunOptions(
            mode=self.cfg.mode, workdir=self.workdir / item.batch, cuda_visible_devices=claim.device.uuid if claim else None,
            gpu_available=claim is not None, gpu_missing_reason=self.gpu_missing, sanitizer=self.sanitizer,
            flush_backend=self.cfg.flush_backend, cover=self.cfg.cover, iterations=self.cfg.iterations,
            debug=self.cfg.debug, allow_unsupported=self.cfg.allow_unsupported))
        t0 = time.time()
        results = runner.run([(i.scenario, i.case) for i in batch])
        where = {"name": item.batch, "worker": self.worker_id, "cases": len(batch), "wall_s": round(time.time() - t0, 3),
                 "processes": runner.processes}
        for result in results:
            result.details["batch"] = where
            if claim is not None:
                result.details["gpu"] = claim.to_json()
            self.results[result.case_id] = apply_baseline(result, self.baseline)

    def _killed_earlier(self, batch: str) -> dict[str, str]:
        """Cases that were running in an earlier attempt at this batch by a pytest worker that has died."""
        from gpu_memsafety.engine.runner import unfinished_cases
        from gpu_memsafety.engine.worker import process_alive
        found: dict[str, str] = {}
        for attempt in sorted(self.cfg.run_dir.glob(f"*/{batch}")):
            worker, _, pid = attempt.parent.name.rpartition("-")
            if attempt.parent == self.workdir or not pid.isdigit() or process_alive(int(pid)):
                continue
            for cid in unfinished_cases(attempt):
                found.setdefault(cid, f"the pytest worker running this case crashed (xdist worker {worker}, pid {pid}, "
                                      f"died while the case ran; killed from outside, e.g. by the OOM killer); "
                                      f"the case was not run again")
        return found


def _session_runner(session: pytest.Session) -> SessionRunner:
    if _RUNNER not in session.stash:
        session.stash[_RUNNER] = SessionRunner(session)
    return session.stash[_RUNNER]


class _Controller:
    """Hooks of the controlling process (the only process without xdist): gathers what ControllerState holds."""

    def __init__(self, state: ControllerState) -> None:
        self.state = state

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            if isinstance(item, CaseNode):
                self.state.expected.setdefault(item.case.id, item.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A scenario file that cannot be collected (a bad definition) is a failed entry in the reports."""
        if report.failed and self.state.is_scenario_nodeid(report.nodeid):
            self.state.broken.setdefault(report.nodeid.split("::", 1)[0], str(report.longrepr)[-4000:])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Each case's result (from any xdist worker); a case that failed without a result (its xdist worker
        crashed, or setup failed) is remembered with the worker it ran on."""
        if not self.state.is_scenario_nodeid(report.nodeid):
            return
        state = self.state
        props = dict(report.user_properties)
        if PLAN_KEY in props and not state.plan:
            state.plan = jsonio.loads(props[PLAN_KEY])
        if RESULT_KEY in props and report.when == "call":
            result = CaseResult.from_json(jsonio.loads(props[RESULT_KEY]))
            state.results.setdefault(result.case_id, result)
        elif report.failed:
            node = getattr(report, "node", None)
            worker = str(getattr(node, "workerinput", {}).get("workerid", "")) if node is not None else ""
            text = str(report.longrepr)[-2000:]
            if not worker_crash(text):
                text = f"pytest's {report.when} phase failed (no result was recorded):\n{text}"
            state.failures.append((report.nodeid, worker, text))


def finish(session: pytest.Session, exitstatus: int) -> None:
    """pytest_sessionfinish: one result per case, the reports built and written, the exit status they tell."""
    if _is_xdist_worker() or session.config.getoption("collectonly"):
        return
    cfg = session.config.stash[CONFIG]
    state = session.config.stash[STATE]
    if not (state.results or state.failures or state.expected or state.broken):
        return
    interrupted = int(exitstatus) == int(pytest.ExitCode.INTERRUPTED)
    results, not_run = final_results(state, cfg, interrupted)
    from gpu_memsafety import report as rp
    from gpu_memsafety.cli.env import environment
    plan = session.config.stash.get(_PLAN, None) or state.plan
    shard = None
    if cfg.shard is not None:
        shard = {**rp.shard_record(cfg.shard.index, cfg.shard.count, cfg.run_group),
                 "selection": (plan or {}).get("selection", ""), "cases": (plan or {}).get("shard", {}).get("cases"),
                 "cases_in_all_shards": (plan or {}).get("cases_before_shard")}
        found = shard_manifest(session.config, cfg)
        if found is not None:       # none: merge says this shard cannot be checked (no process collected the matrix)
            shard["manifest"] = found
    how = "stopped before every case ran" if not_run else ""
    if interrupted:
        from gpu_memsafety.util.signals import RECEIVED
        signal_name = RECEIVED[-1] if RECEIVED else ""
        how = interrupts.describe(signal_name)
    root = Path(session.config.rootpath).resolve()
    scenarios = session.config.stash.get(SCENARIOS, {})
    batches = batch_times(results)
    extra = {"batches": batches, "workers": (plan or {}).get("workers"),
             # the run's wall time (configuration to the end of the last case) and its worker processes
             "wall_s": round(time.time() - cfg.started, 3),
             "processes": sum(len(b.get("processes") or ()) for b in batches),
             "dist": str(session.config.getoption("dist", "no")), "root": root.as_posix(),
             "scenarios": {name: definition_site(sc.source.file, name, root)
                           for name, sc in sorted(scenarios.items()) if sc.source is not None}}
    if cfg.baseline is not None:
        from gpu_memsafety.judge.baseline import run_record
        extra["baseline"] = run_record(cfg.baseline, results, {c.id for sc in scenarios.values() for c in sc.build()},
                                       root)
    doc = rp.build_report(results, environment(), started=_iso(cfg.started), finished=_iso(time.time()),
                          argv=list(session.config.invocation_params.args), run_id=cfg.run_id, interrupted=how,
                          not_run=not_run, shard=shard, run_extra=extra)
    session.config.stash[_REPORT] = doc
    if doc["summary"]["status"] in (rp.FAILED, rp.INTERRUPTED) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the exit code tells the reports' story
    elif doc["summary"]["status"] == rp.EMPTY and session.exitstatus == 0:
        # Every case collected and none checked (no GPU for a GPU-only mode, a selection of cases this machine
        # cannot run): pytest's own "no tests ran" (exit 5), never a green job that checked nothing.
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
    if cfg.report_dir is not None:
        try:
            paths = rp.write_reports(doc, cfg.report_dir)
        except rp.ReportDirError as exc:  # disk full, I/O error: said at the end of the run, and a failure
            session.config.stash[_PATHS] = {"reports NOT written": str(exc)}
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        session.config.stash[_PATHS] = {k: str(v) for k, v in paths.items()}


_REPORT = pytest.StashKey[dict]()
_PATHS = pytest.StashKey[dict]()


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _REPORT not in config.stash:
        return
    from gpu_memsafety.plugin.run_summary import write_end
    doc = config.stash[_REPORT]
    write_end(terminalreporter, "GPU memory-safety: kernel x architecture", doc, config.stash.get(_PATHS, {}),
              [batch_summary(doc["run"].get("batches") or [])])
