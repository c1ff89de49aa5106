"""Issue 53, class 2: every text the harness writes to a terminal, a CI log or a file is neutral, whatever leads a
command (any Unicode white space a runner trims) or wherever `##[` stands. End to end: the gpu_memsafety_guarded
fixture's teardown error, a usage error quoting what it refused (the run group), the CLI's output and errors."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_memsafety.util.neutral import NeutralWriter, neutral_output
from hostile_text import ATTACKS, RUNNER_WHITESPACE, assert_neutral, commands
from repo_paths import HELPERS

PROPERTIES = settings(max_examples=80, derandomize=True, database=None, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_", "CI"))}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", CUDA_VISIBLE_DEVICES="", GPU_MEMSAFETY_CACHE=str(folder / "cache"),
               PYTHONPATH=os.pathsep.join(p for p in (str(HELPERS), os.environ.get("PYTHONPATH", "")) if p))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "gpu_memsafety.fixtures.plugin", "-p", "no:cacheprovider",
                           *args], cwd=folder, env=env, capture_output=True, text=True, timeout=240)


NAMED = '''import torch


def test_named(gpu_memsafety_guarded):
    out = gpu_memsafety_guarded.empty({name!r}, (10,), torch.uint8, device="cpu")
    out.as_strided((12,), (1,))[10:] = 7
'''


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["a\n::stop-commands::tok", "b\n\u3000::add-mask::s", "c ##[add-mask]s"])
def test_the_guarded_fixtures_failure_message_is_neutral(tmp_path: Path, name: str) -> None:
    """Issue 53: a tensor name with `\\n::stop-commands::` reached column 0 of the teardown error."""
    (tmp_path / "test_named.py").write_text(NAMED.format(name=name))
    proc = pytest_in(tmp_path, "-q", "test_named.py")
    assert "marker byte(s) changed (past_end bytes 10..11)" in proc.stdout, proc.stdout[-2000:]
    assert_neutral(proc.stdout + proc.stderr, "pytest output")


@pytest.mark.e2e
def test_a_refused_run_group_is_echoed_neutral(tmp_path: Path) -> None:
    """Issue 53: the run-group refusal echoed `##[add-mask]`."""
    proc = pytest_in(tmp_path, "--gpu-memsafety-scenarios", "--gpu-memsafety-run-group", "##[add-mask]sec\x01ret",
                     "--collect-only")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    assert "run group" in proc.stderr and "add-mask" in proc.stderr
    assert_neutral(proc.stdout + proc.stderr, "usage error")


def test_the_cli_writes_every_line_neutral(tmp_path: Path) -> None:
    """A command's error quoting a file name (`render` of a report that is not there) is neutral."""
    from gpu_memsafety.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = main(["render", str(tmp_path / "x\n\u3000::add-mask::s ##[error]y" / "report.json"), "-o", str(tmp_path / "o")])
    finally:
        sys.stdout, sys.stderr = saved
    assert code != 0 and "add-mask" in err.getvalue()
    assert_neutral(out.getvalue() + err.getvalue(), "cli")


LED = st.tuples(st.text(st.sampled_from(RUNNER_WHITESPACE), max_size=4),
                st.sampled_from(["::", "::add-mask::", "##[", "##[add-mask]", "##vso[", ":", "#", "##"])).map("".join)
TEXT = st.lists(st.sampled_from(ATTACKS) | LED | st.sampled_from(["\n", "x", " ", "\r", "\x1b["]) | st.text(max_size=4),
                max_size=12).map("".join)


@PROPERTIES
@given(text=TEXT, cuts=st.lists(st.integers(0, 200), max_size=8))
def test_a_neutral_writer_is_neutral_however_the_text_is_split_into_writes(text: str, cuts: list[int]) -> None:
    sink = io.StringIO()
    writer = NeutralWriter(sink)  # type: ignore[arg-type]
    points = sorted({min(c, len(text)) for c in cuts})
    for start, end in zip([0, *points], [*points, len(text)]):
        writer.write(text[start:end])
        if end % 2:
            writer.flush()
    writer.close_line()
    assert_neutral(sink.getvalue(), "writer")
    if not commands(text) and text.isprintable():     # ordinary text passes unchanged
        assert sink.getvalue() == text


@PROPERTIES
@given(text=TEXT)
def test_every_text_sink_is_neutral(text: str) -> None:
    """The sinks this issue named, fed any text: the fixture's message, a usage error, print() under the CLI's
    streams (adapter exception text and `baseline check` go through the renderers of test_properties_hostile)."""
    from gpu_memsafety.fixtures.guarded import failure_message
    from gpu_memsafety.fixtures.plugin import _neutral_usage
    from gpu_memsafety.model import ByteRange
    assert_neutral(failure_message({text: [ByteRange("past_end", 10, 12)]}), "fixture")
    assert_neutral(str(_neutral_usage(pytest.UsageError(f"--x: {text!r} {text}"))), "usage error")
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        with neutral_output():
            print(f"error: {text}", file=sys.stderr)
            print(text, end="")
    finally:
        sys.stdout, sys.stderr = saved
    assert_neutral(out.getvalue() + err.getvalue(), "print")
