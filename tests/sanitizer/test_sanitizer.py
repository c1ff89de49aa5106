"""gpu_memsafety.sanitizer.tool on CPU: fake compute-sanitizer binaries in the real layouts, version probing, argv."""
from __future__ import annotations

import inspect
import os
import stat
import time
from pathlib import Path
from typing import Any, Sequence

import pytest

from gpu_memsafety.sanitizer.tool import (
    INJECTION_LIB,
    SANITIZER_ERROR_EXITCODE,
    SANITIZER_INTERNAL_EXITCODE,
    SUBREAPER,
    TOOL_OPTIONS,
    TOOLS,
    SanitizerInfo,
    SanitizerLookup,
    locate,
    memcheck_command,
    parse_version,
    version,
)
from repo_paths import SANITIZER_DATA as DATA

BANNER = "NVIDIA (R) Compute Sanitizer\nCopyright (c) 2020-2025 NVIDIA Corporation\n"


def write_exe(path: Path, body: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(mode)
    return path


def fake_binary(path: Path, ver: str = "2025.3.1", mode: int = 0o755) -> Path:
    return write_exe(path, f"cat <<'EOF'\n{BANNER}Version {ver}.0 (build 1) (public-release)\nEOF\n", mode)


def launcher_files(directory: Path, subreaper_mode: int | None = 0o755) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / INJECTION_LIB).write_bytes(b"\x7fELF fake")
    (directory / "libsanitizer-collection.so").write_bytes(b"\x7fELF fake")
    if subreaper_mode is not None:
        write_exe(directory / SUBREAPER, "exit 0\n", subreaper_mode)


def toolkit(root: Path, ver: str = "2025.3.1") -> Path:
    """<root>/bin/compute-sanitizer wrapper -> <root>/compute-sanitizer/compute-sanitizer (toolkit, wheel 13.4+)."""
    real = fake_binary(root / "compute-sanitizer" / "compute-sanitizer", ver)
    launcher_files(real.parent)
    wrapper = 'exec "$(dirname "$0")/../compute-sanitizer/compute-sanitizer" "$@"\n'  # as in the 13.5.25 wheel
    write_exe(root / "bin" / "compute-sanitizer", wrapper)
    return real


def flat_wheel(site_dir: Path, subreaper_in_lib: bool = False) -> Path:
    """nvidia/cu13/bin/compute-sanitizer + nvidia/cu13/lib/*.so, no subreaper (wheels 13.0-13.3)."""
    binary = fake_binary(site_dir / "nvidia" / "cu13" / "bin" / "compute-sanitizer", "2025.3.1", 0o744)
    launcher_files(binary.parent.parent / "lib", 0o755 if subreaper_in_lib else None)
    return binary


def run_locate(tmp_path: Path, env: dict[str, str] | None = None, site_dirs: Sequence[Path] = (),
               **kw: Any) -> SanitizerLookup:
    return locate(env or {"PATH": ""}, site_dirs=[str(s) for s in site_dirs],
                  system_root=kw.pop("system_root", tmp_path / "no-usr-local"), cache_dir=tmp_path / "cache",
                  **kw)


# ------------------------------------------------------------------------------------------------ version

def test_parse_version_from_real_output() -> None:
    assert parse_version((DATA / "version-2025.3.1.txt").read_text()) == "2025.3.1"
    assert parse_version((DATA / "help-2026.4.0.txt").read_text()) == "2026.4.0"
    assert parse_version("compute-sanitizer: command not found") == ""


def test_version_default_timeout_is_10_s() -> None:
    assert inspect.signature(version).parameters["timeout_s"].default == 10


def test_version_of_fake(tmp_path: Path) -> None:
    probe = version(fake_binary(tmp_path / "cs", "2024.1.2"))
    assert (probe.version, probe.error) == ("2024.1.2", "")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_version_hang_is_reported_not_raised(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    hang = write_exe(tmp_path / "cs", f"sleep 30 &\necho $! > {pid_file}\nwait\n")
    start = time.monotonic()
    probe = version(hang, timeout_s=0.5)
    # the wrapper's `sleep 30` child holds the pipe: only killing the whole group returns well before it ends
    # (the margin is for a loaded machine's scheduling, not for the probe)
    assert time.monotonic() - start < 15.0
    assert probe.version == "" and "did not finish within 0.5 s" in probe.error
    time.sleep(0.1)
    assert not _alive(int(pid_file.read_text()))


def test_version_nonzero_exit_is_reported(tmp_path: Path) -> None:
    probe = version(write_exe(tmp_path / "cs", "echo 'libfoo.so: cannot open' >&2\nexit 3\n"))
    assert probe.version == "" and "exited 3" in probe.error and "libfoo.so: cannot open" in probe.error


def test_version_not_executable_or_missing_is_reported(tmp_path: Path) -> None:
    garbage = tmp_path / "cs"
    garbage.write_bytes(b"\x00\x01not an executable")
    garbage.chmod(0o755)
    assert "cannot execute" in version(garbage).error
    assert "cannot execute" in version(tmp_path / "missing").error


def test_version_without_version_line_is_reported(tmp_path: Path) -> None:
    probe = version(write_exe(tmp_path / "cs", "echo hello\n"))
    assert probe.version == "" and "printed no version" in probe.error and "hello" in probe.error


# ------------------------------------------------------------------------------------------------- locate

def test_found_on_path(tmp_path: Path) -> None:
    binary = fake_binary(tmp_path / "bin" / "compute-sanitizer", "2025.3.1")
    launcher_files(binary.parent)
    lookup = run_locate(tmp_path, {"PATH": f"{tmp_path / 'empty'}{os.pathsep}{binary.parent}"})
    assert lookup.found is not None
    assert (lookup.found.path, lookup.found.version, lookup.found.source) == (str(binary), "2025.3.1", "PATH")
    assert lookup.found.env == {} and lookup.found.repaired == ""
    assert lookup.searched[:2] == [str(tmp_path / "empty" / "compute-sanitizer"), str(binary)]


def test_found_via_cuda_home_wrapper_resolves_real_binary(tmp_path: Path) -> None:
    real = toolkit(tmp_path / "cuda-home", "2025.3.1")
    lookup = run_locate(tmp_path, {"PATH": "", "CUDA_HOME": str(tmp_path / "cuda-home"),
                                   "CUDA_PATH": str(tmp_path / "elsewhere")})
    assert lookup.found is not None
    assert (lookup.found.path, lookup.found.source) == (str(real), "CUDA_HOME")
    assert lookup.searched == [str(tmp_path / "cuda-home" / "bin" / "compute-sanitizer")]


def test_cuda_path_is_searched_after_cuda_home(tmp_path: Path) -> None:
    toolkit(tmp_path / "cp", "2023.1.0")
    env = {"PATH": "", "CUDA_HOME": str(tmp_path / "nothing"), "CUDA_PATH": str(tmp_path / "cp")}
    lookup = run_locate(tmp_path, env)
    assert lookup.found is not None and (lookup.found.source, lookup.found.version) == ("CUDA_PATH", "2023.1.0")
    assert lookup.searched[0] == str(tmp_path / "nothing" / "bin" / "compute-sanitizer")


def test_system_cuda_dirs_newest_first(tmp_path: Path) -> None:
    usr = tmp_path / "usr-local"
    for name, ver in [("cuda-12.8", "2025.1.0"), ("cuda-13.10", "2026.9.0"), ("cuda-13.0", "2025.3.1")]:
        toolkit(usr / name, ver)
    lookup = run_locate(tmp_path, system_root=usr)
    assert lookup.searched == [str(usr / d / "bin" / "compute-sanitizer") for d in ("cuda", "cuda-13.10")]
    assert lookup.found is not None and lookup.found.version == "2026.9.0"
    assert lookup.found.source == str(usr / "cuda-13.10")


def test_flat_wheel_without_subreaper_is_rejected_with_reason(tmp_path: Path) -> None:
    site_dir = tmp_path / "site"
    binary = flat_wheel(site_dir)
    lookup = run_locate(tmp_path, site_dirs=[site_dir])
    assert lookup.found is None
    (rejected,) = lookup.rejected
    assert rejected.path == str(binary) and rejected.source == "wheel" and rejected.version == "2025.3.1"
    assert SUBREAPER in rejected.problem and ">=13.4" in rejected.problem and not rejected.usable
    assert SUBREAPER in lookup.describe()


def test_complete_wheel_wins_over_flat_one(tmp_path: Path) -> None:
    flat_wheel(tmp_path / "old")
    real = toolkit(tmp_path / "new" / "nvidia" / "cu13", "2026.4.0")
    lookup = run_locate(tmp_path, site_dirs=[tmp_path / "old", tmp_path / "new"])
    assert lookup.found is not None and lookup.found.path == str(real)
    assert [r.source for r in lookup.rejected] == ["wheel"]


def test_lost_exec_bits_are_repaired_in_cache(tmp_path: Path) -> None:
    root = tmp_path / "site" / "nvidia" / "cu13"
    real = toolkit(root, "2026.4.0")
    (real.parent / SUBREAPER).chmod(0o644)  # what Python's zipfile extraction leaves
    lookup = run_locate(tmp_path, site_dirs=[tmp_path / "site"])
    found = lookup.found
    assert found is not None and found.usable
    cached = Path(found.path)
    assert cached.parent.parent == tmp_path / "cache" and found.origin == str(real)
    assert f"{SUBREAPER} not executable" in found.repaired
    assert os.access(cached.parent / SUBREAPER, os.X_OK)
    assert (cached.parent / INJECTION_LIB).is_symlink()
    assert not (real.parent / SUBREAPER).stat().st_mode & stat.S_IXUSR  # the installed copy is untouched
    again = run_locate(tmp_path, site_dirs=[tmp_path / "site"])
    assert again.found is not None and again.found.path == found.path


def test_flat_layout_with_helpers_in_lib_is_colocated(tmp_path: Path) -> None:
    flat_wheel(tmp_path / "site", subreaper_in_lib=True)
    lookup = run_locate(tmp_path, site_dirs=[tmp_path / "site"])
    assert lookup.found is not None, lookup.describe()
    cached = Path(lookup.found.path).parent
    assert {SUBREAPER, INJECTION_LIB, "compute-sanitizer"} <= {p.name for p in cached.iterdir()}
    assert "not next to the binary" in lookup.found.repaired


def test_hanging_and_failing_candidates_are_rejected_and_search_goes_on(tmp_path: Path) -> None:
    hang = write_exe(tmp_path / "a" / "compute-sanitizer", "sleep 30\n")
    launcher_files(hang.parent)
    bad = write_exe(tmp_path / "b" / "compute-sanitizer", "exit 1\n")
    launcher_files(bad.parent)
    good = fake_binary(tmp_path / "c" / "compute-sanitizer")
    launcher_files(good.parent)
    path = os.pathsep.join(str(p.parent) for p in (hang, bad, good))
    lookup = run_locate(tmp_path, {"PATH": path}, timeout_s=0.5)
    assert lookup.found is not None and lookup.found.path == str(good)
    errors = [r.version_error for r in lookup.rejected]
    assert "did not finish" in errors[0] and "exited 1" in errors[1]


def test_same_binary_reached_twice_is_examined_once(tmp_path: Path) -> None:
    toolkit(tmp_path / "tk")
    (tmp_path / "tk" / "compute-sanitizer" / SUBREAPER).unlink()
    env = {"PATH": str(tmp_path / "tk" / "bin"), "CUDA_HOME": str(tmp_path / "tk")}
    lookup = run_locate(tmp_path, env)
    assert lookup.searched[:2] == [str(tmp_path / "tk" / "bin" / "compute-sanitizer")] * 2
    assert lookup.found is None and len(lookup.rejected) == 1


def test_info_usable_requires_version() -> None:
    assert SanitizerInfo("/x", "2025.3.1", "PATH").usable
    assert not SanitizerInfo("/x", "", "PATH", version_error="exited 1").usable
    assert not SanitizerInfo("/x", "2025.3.1", "wheel", problem="missing").usable


# -------------------------------------------------------------------------------------------- the command

INFO = SanitizerInfo("/opt/cs/compute-sanitizer", "2025.3.1", "PATH")


def value_after(argv: list[str], flag: str) -> str:
    assert argv.count(flag) == 1, flag
    return argv[argv.index(flag) + 1]


def test_memcheck_command_flags() -> None:
    argv = memcheck_command(INFO, xml_path="/r/out.xml", target_argv=["python", "-m", "w", "--case", "x"])
    assert argv[0] == INFO.path and argv[-5:] == ["python", "-m", "w", "--case", "x"]
    assert value_after(argv, "--tool") == "memcheck"
    assert "--xml" in argv and value_after(argv, "--save") == "/r/out.xml"
    assert value_after(argv, "--print-limit") == "0"
    assert value_after(argv, "--error-exitcode") == str(SANITIZER_ERROR_EXITCODE)
    assert value_after(argv, "--launch-timeout") == "60"
    assert value_after(argv, "--destroy-on-device-error") == "kernel"
    assert value_after(argv, "--show-backtrace") == "device"
    assert value_after(argv, "--check-exit-code") == "yes"
    assert value_after(argv, "--padding") == str(1 << 20)   # other allocations kept 1 MiB past a flush end
    assert all(isinstance(a, str) for a in argv)


def test_print_limit_zero_means_unlimited_in_real_help() -> None:
    assert "Use 0 for unlimited printing." in (DATA / "help-2025.3.1.txt").read_text()


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("help_file", ["help-2025.3.1.txt", "help-2026.4.0.txt"])
def test_every_option_exists_in_real_help(tool: str, help_file: str) -> None:
    argv = memcheck_command(INFO, tool=tool, xml_path="o.xml", target_argv=["t"])
    options = [a for a in argv if a.startswith("--")]
    help_text = (DATA / help_file).read_text()
    assert set(TOOL_OPTIONS[tool]) & set(options) == {a for a in TOOL_OPTIONS[tool] if a.startswith("--")}
    for option in options:
        assert f"  {option} " in help_text or f"[ {option} ]" in help_text, option


def test_tool_specific_options() -> None:
    race = memcheck_command(INFO, tool="racecheck", xml_path="o.xml", target_argv=["t"])
    assert value_after(race, "--racecheck-report") == "analysis"
    init = memcheck_command(INFO, tool="initcheck", xml_path="o.xml", target_argv=["t"])
    assert value_after(init, "--check-api-memory-access") == "yes" and "--racecheck-report" not in init


def test_save_path_percent_is_escaped_and_extra_goes_before_target() -> None:
    argv = memcheck_command(INFO, xml_path="/r/100%/o.xml", target_argv=["t"], extra=("--padding", "512"),
                            launch_timeout_s=0)
    assert value_after(argv, "--save") == "/r/100%%/o.xml"
    assert argv[-3:] == ["--padding", "512", "t"] and value_after(argv, "--launch-timeout") == "0"


@pytest.mark.parametrize("kwargs,message", [
    ({"tool": "asan"}, "unknown compute-sanitizer tool 'asan'"),
    ({"target_argv": "python w.py"}, "never a shell string"),
    ({"target_argv": []}, "non-empty"),
    ({"xml_path": ""}, "xml_path is required"),
    ({"launch_timeout_s": -1}, "launch_timeout_s"),
])
def test_memcheck_command_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    args = {"xml_path": "o.xml", "target_argv": ["t"], **kwargs}
    with pytest.raises(ValueError, match=message):
        memcheck_command(INFO, **args)


def test_exit_codes_are_distinct_from_common_ones() -> None:
    common = {0, 1, 2, 3, 4, 5, 120, 124, 125, 126, 127, SANITIZER_INTERNAL_EXITCODE}
    assert SANITIZER_ERROR_EXITCODE not in common and 0 < SANITIZER_ERROR_EXITCODE < 128
    text = (DATA / "cpu-wheel-13.0.85-no-subreaper.txt").read_text()
    assert text.rstrip().endswith(f"rc={SANITIZER_INTERNAL_EXITCODE}")
