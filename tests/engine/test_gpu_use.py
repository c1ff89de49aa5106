"""gpu_memsafety.engine.gpu_use: every worker process holds its GPU shared; a run that must be alone on the GPU (the
last run of a case whose memcheck record was lost in every run so far) has it to itself, ahead of processes that
start after it asked, and no wait is unbounded.

flock locks belong to open files, so two `using` blocks of one process (or of two threads) conflict exactly as two
processes do: the tests hold one in a thread and probe with the other."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gpu_memsafety.engine import gpu_use
from gpu_memsafety.engine.gpu_use import using

GPU = "GPU-ffd9986b-ae81-9ce8-58ce-7acb2ea7ec53"


@pytest.fixture(autouse=True)
def lock_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(gpu_use.DIR_ENV, str(tmp_path / "locks"))
    return tmp_path / "locks"


def test_processes_share_the_gpu_and_a_lone_run_waits_for_them_all() -> None:
    with using(GPU, exclusive=False) as one, using(GPU, exclusive=False) as two:
        assert (one.alone, two.alone) == (False, False) and one.waited_s < 1 and two.waited_s < 1
        with using(GPU, exclusive=True, wait_s=0.3) as lone:
            assert lone.exclusive and not lone.alone and lone.waited_s >= 0.3    # ran anyway, and says so
    with using(GPU, exclusive=True, wait_s=0.3) as lone:
        assert lone.alone and lone.waited_s < 0.3
        with using(GPU, exclusive=False, wait_s=0.2) as late:
            assert late.waited_s >= 0.2                                       # kept out while the lone run ran


def test_a_lone_run_goes_ahead_of_processes_that_start_after_it_asked() -> None:
    """flock does not queue: without the gate, new shared holders would keep a lone run waiting for as long as some
    process of ours runs (at 16 workers, nearly always)."""
    running = threading.Event()
    release = threading.Event()
    got: list[gpu_use.Held] = []

    def earlier_process() -> None:
        with using(GPU, exclusive=False):
            running.set()
            release.wait(5)

    def lone_run() -> None:
        with using(GPU, exclusive=True, wait_s=5) as held:
            got.append(held)

    first = threading.Thread(target=earlier_process)
    first.start()
    assert running.wait(5)
    lone = threading.Thread(target=lone_run)
    lone.start()
    time.sleep(0.3)                          # the lone run now holds the gate and waits for the earlier process
    with using(GPU, exclusive=False, wait_s=0.3) as later:
        assert later.waited_s >= 0.3         # a process starting now waits at the gate (here: until its bound)
    release.set()
    first.join(5)
    lone.join(5)
    assert got and got[0].alone and got[0].waited_s >= 0.3


def test_a_lone_run_that_could_not_be_alone_does_not_hold_the_others_back() -> None:
    with using(GPU, exclusive=False):
        with using(GPU, exclusive=True, wait_s=0.2) as lone:
            assert not lone.alone
            with using(GPU, exclusive=False, wait_s=0.2) as other:
                assert other.waited_s < 0.2        # it let go of the gate when its wait ran out


def test_no_gpu_nothing_to_share(lock_folder: Path) -> None:
    with using(None, exclusive=True) as held:
        assert (held.alone, held.waited_s, held.gpu) == (False, 0.0, "")
    assert not lock_folder.exists()


@pytest.mark.e2e
def test_every_worker_process_holds_its_gpu_and_the_judge_says_which_runs_alone(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Runner._supervise: a process holds the GPU shared while it runs, and alone when asked; the batch keeps how
    alone it was."""
    from gpu_memsafety.detectors.modes import MODES
    from gpu_memsafety.engine.runner import Runner, RunOptions
    from gpu_memsafety.engine.batches import Batch
    from tests.judge.test_judge import CASE, scenario

    seen: list[tuple[bool, bool]] = []

    def held_run(self: Runner, *args: object) -> Batch:
        with using(GPU, exclusive=True, wait_s=0.1) as lone, using(GPU, exclusive=False, wait_s=0.1) as other:
            seen.append((lone.alone, other.waited_s >= 0.1))
        return Batch()

    monkeypatch.setattr(Runner, "_supervise_held", held_run)
    runner = Runner(RunOptions(mode=MODES["memcheck"], workdir=tmp_path / "w", gpu_available=True,
                               cuda_visible_devices=GPU))
    items = [(scenario(), CASE)]
    shared = runner._supervise([], items, tmp_path, True)
    alone = runner._supervise([], items, tmp_path, True, alone=True)
    assert seen == [(False, False), (False, True)]    # shared: no lone run gets in; alone: nobody else does
    assert shared.gpu_use is None
    assert alone.gpu_use is not None and alone.gpu_use["alone"] is True and alone.gpu_use["gpu"] == GPU
