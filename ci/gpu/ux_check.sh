#!/usr/bin/env bash
# Issue 51 on a GPU (about 4 minutes): `pytest --gpu-memsafety` as a user runs it on a kernel repository of their
# own (written here: a package with a Triton kernel that reads 16 B past its input and one that writes 8 B past its
# output, and a test file), in the three ways that reach a GPU: the bare flag (complete: a markers pass, then
# memcheck children), =markers (in the pytest process) and =memcheck (children). $OUT/check.txt says PASS or FAIL
# for each of (per mode):
#   counted-once  pytest's summary line says "2 failed, 1 passed" (never "passed" plus errors at teardown), the
#                 progress line has M for each test with a finding, pytest's own --junitxml counts 3 tests, 2 failures
#   width         no line of pytest's output is longer than 120 columns (wide.txt lists any)
#   once          each finding's `kernel: mykern/kernels.py:LINE` line appears once (memcheck names the line; markers
#                 cannot, and says the test's line instead)
#   located       report.sarif, junit.xml and gl-code-quality-report.json place the memcheck findings at the kernel's
#                 line (the markers' at the test's)
# and keeps, under $OUT/<mode>/: stdout.txt (pytest's output), junit-pytest.xml, reports/ (every report file).
set -u
set -o pipefail
export PYTHONUNBUFFERED=1
REPO=$PWD; source "$REPO/ci/gpu/runenv.sh"
whole BUDGET 480 0 86400
OUT=${OUT:-/tmp/out}; fresh_run_folder ux-r; mkdir -p "$OUT"
export GPU_MEMSAFETY_CACHE="$REPO/.cache/build"
source "$(dirname "$0")/steps.sh"
PY="$REPO/.venv/bin/python"
BUDGET_S=$BUDGET; T_START=$(date +%s); LOGS="$R"
step bootstrap 150 make .venv/.bootstrap-gpu
SUITE=$R/kernelrepo; mkdir -p "$SUITE/mykern" "$SUITE/tests"; : > "$SUITE/mykern/__init__.py"
printf '[pytest]\npythonpath = .\n' > "$SUITE/pytest.ini"
cat > "$SUITE/mykern/kernels.py" <<'PY'
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src_ptr + offs, mask=offs < n + 4)          # READ_LINE: 16 B past src's end
    tl.store(dst_ptr + offs, x, mask=offs < n)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 2, mask=offs < n + 2)      # WRITE_LINE: 8 B past out's end


def copy(src):
    dst = torch.empty_like(src)
    copy_kernel[(triton.cdiv(src.numel(), 64),)](src, dst, src.numel(), BLOCK=64)
    return dst


def scale(x):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
PY
cat > "$SUITE/tests/test_k.py" <<'PY'
import torch
from mykern.kernels import copy, scale


def test_copy():
    a = torch.arange(1000, dtype=torch.float32, device="cuda")
    assert torch.equal(copy(a), a)


def test_scale():
    a = torch.arange(1000, dtype=torch.float32, device="cuda")
    assert torch.equal(scale(a), a * 2)


def test_plain():
    assert 1 + 1 == 2
PY
for mode in complete markers memcheck; do
  mkdir -p "$OUT/$mode"
  step "ux-$mode" 100 bash -c "cd '$SUITE' && '$PY' -m pytest -p no:cacheprovider --gpu-memsafety=$mode tests \
      --junitxml '$OUT/$mode/junit-pytest.xml' --gpu-memsafety-report-dir '$OUT/$mode/reports' > '$OUT/$mode/stdout.txt' 2>&1"
  awk 'length($0) > 120' "$OUT/$mode/stdout.txt" > "$OUT/$mode/wide.txt"
done
cp "$SUITE/mykern/kernels.py" "$SUITE/tests/test_k.py" "$OUT/"
"$PY" - "$OUT" "$SUITE" > "$OUT/check.txt" 2>&1 <<'PY'
import json, re, sys
import xml.etree.ElementTree as ET
from pathlib import Path
out, suite = Path(sys.argv[1]), Path(sys.argv[2])
kernels = (suite / "mykern" / "kernels.py").read_text().splitlines()
line = {m: next(i for i, t in enumerate(kernels, 1) if m in t) for m in ("READ_LINE", "WRITE_LINE")}
def check(mode, name, ok, why=""):
    print(f"{'PASS' if ok else 'FAIL'} {mode} {name}{': ' + why if why and not ok else ''}")
for mode in ("complete", "markers", "memcheck"):
    d = out / mode
    try:
        text = (d / "stdout.txt").read_text()
    except OSError as exc:
        check(mode, "ran", False, str(exc)); continue
    last = text.strip().splitlines()[-1] if text.strip() else ""
    sees_read = mode != "markers"
    want = "2 failed, 1 passed" if sees_read else "1 failed, 2 passed"
    check(mode, "counted-once", want in last and "error" not in last, last)
    try:
        s = ET.parse(d / "junit-pytest.xml").getroot().find("testsuite")
        check(mode, "junit-pytest", (s.get("tests"), s.get("failures"), s.get("errors")) ==
              ("3", "2" if sees_read else "1", "0"), str(s.attrib))
    except Exception as exc:                 # noqa: BLE001
        check(mode, "junit-pytest", False, repr(exc))
    check(mode, "width", not (d / "wide.txt").read_text().strip(), (d / "wide.txt").read_text()[:500])
    places = [f"kernel: mykern/kernels.py:{line['READ_LINE']}"] if mode != "markers" else []
    places += [f"kernel: mykern/kernels.py:{line['WRITE_LINE']}"] if mode != "markers" else []
    check(mode, "once", all(text.count(p) == 1 for p in places), str({p: text.count(p) for p in places}))
    try:
        sarif = json.loads((d / "reports" / "report.sarif").read_text())
        got = sorted((r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                      r["locations"][0]["physicalLocation"]["region"]["startLine"])
                     for r in sarif["runs"][0]["results"] if r.get("locations"))
        check(mode, "located-sarif", all(uri == "mykern/kernels.py" for uri, _ in got) if mode != "markers" else bool(got), str(got))
        junit = [(c.get("name"), c.get("file"), c.get("line")) for c in ET.parse(d / "reports" / "junit.xml").getroot().iter("testcase")]
        print(f"INFO {mode} junit.xml places: {junit}")
        cq = [(i["check_name"], i["location"]) for i in json.loads((d / "reports" / "gl-code-quality-report.json").read_text())]
        print(f"INFO {mode} code quality places: {cq}")
    except Exception as exc:                 # noqa: BLE001
        check(mode, "located", False, repr(exc))
PY
cat "$OUT/check.txt"
