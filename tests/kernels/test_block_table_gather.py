"""CPU tests: the vLLM DeepSeek-V4 block-table gather model, the kernel extraction, the expectation table."""
from __future__ import annotations

import pytest

from gpu_memsafety.model import TRACE, GUARD_PAGE, MEMCHECK, OVERREAD, POISON
from gpu_memsafety.kernels.block_table_gather import cases as C
from gpu_memsafety.kernels.block_table_gather import layout as L
from gpu_memsafety.kernels.block_table_gather import vllm_kernel as V
from gpu_memsafety.scenarios import block_table_row_gather as S


def test_issue_call_reads_4_bytes_past_a_one_row_table():
    g, real = C.gather("issue", "unpadded")
    assert (g.rows, g.stride, real) == (1, 4, 1)
    assert g.reads(0) == [(0, 4), (4, 8), (8, 12), (12, 16)]     # entries 0, 70, 130, 255 -> blocks 0..3 of row 0
    assert g.reads(1) == [(16, 20)]                                # entry 5 -> block 0 of row 1; -1s load nothing
    assert L.outside(g) == {"past_end": [(16, 20)]}
    assert g.in_bounds(0) and not g.in_bounds(1)


def test_several_loads_past_the_end_merge_into_runs():
    g = L.Gather(((5, -1, 130, 255),), (1,), rows=1, stride=4, block_size=64)
    assert L.outside(g) == {"past_end": [(16, 20), (24, 32)]}
    g = L.Gather(((5,),), (-1,), rows=1, stride=4, block_size=64)
    assert L.outside(g) == {"before_start": [(-16, -12)]}


def test_padded_table_keeps_every_load_inside():
    for shape in C.SHAPES:
        g, _ = C.gather(shape, "padded")
        assert L.outside(g) == {} and all(g.in_bounds(t) for t in range(len(g.topk)))


def test_capture_call_reads_the_padding_tokens_rows():
    g, real = C.gather("capture", "unpadded")
    assert real == 3 and g.rows == 3
    past = L.outside(g)["past_end"]
    assert past[0][0] >= g.table_bytes and past[-1][1] <= len(g.topk) * g.stride * 4
    assert [g.in_bounds(t) for t in range(8)] == [True] * 3 + [False] * 5


def test_column_overrun_reads_the_element_after_the_last_row():
    g, _ = C.gather("issue", "column_overrun")
    assert L.outside(g) == {"past_end": [(16, 20)]}


def test_slot_ids_and_lengths():
    g, _ = C.gather("issue", "padded")
    table = [[7, 8, 9, 10], [0, 0, 0, 0]]
    assert L.slot_ids(g, table, 0) == [7 * 64 + 0, 8 * 64 + 6, 9 * 64 + 2, 10 * 64 + 63]
    assert L.slot_ids(g, table, 1) == [5, -1, -1, -1]
    assert L.topk_len(g, 1, True) == 1 and L.topk_len(g, 1, False) == 0


def test_expectation_table():
    cases = S.SCENARIO.cases()
    assert len(cases) == len(L.VERSIONS) * 5
    for case in cases:
        exp = S.SCENARIO.expect(case)
        assert exp.clean == (case.variant == "padded"), case.id
    issue = next(c for c in cases if c.variant == "unpadded" and c.params["shape"] == "issue")
    (f,) = S.SCENARIO.expect(issue).findings
    assert (f.kind, f.buffer, f.region, f.bytes, f.ranges) == (OVERREAD, "block_table", "past_end", 4, ((16, 20),))
    assert set(f.detectors) == {MEMCHECK, GUARD_PAGE, POISON, TRACE} and f.upstream == "vllm-project/vllm#55636"
    capture = next(c for c in cases if c.variant == "unpadded" and c.params["shape"] == "capture")
    (g,) = S.SCENARIO.expect(capture).findings
    assert g.bytes is None and g.ranges is None and g.region == "past_end"


def test_describe_names_rows_and_tokens():
    issue = next(c for c in S.SCENARIO.cases() if c.variant == "unpadded" and c.params["shape"] == "issue")
    assert S.SCENARIO.describe(issue, "block_table", 16, 20) == \
        "block_table row 1, block 0; row 1 is past the table's 1 row(s) (loaded for token(s) 1)"


MODULE_LEVEL = '''
import torch
from vllm.triton_utils import tl, triton


@triton.jit
def _compute_global_topk_indices_and_lens_kernel(
    a_ptr,
    TRITON_BLOCK_SIZE: tl.constexpr,
):
    x = tl.load(a_ptr)
    tl.store(a_ptr, x + 1)


def helper():
    pass
'''

IN_CLASS = '''
class ComputeGlobalTopkIndicesAndLensKernel(VllmTritonJitKernel["X"]):
    TRITON_BLOCK_SIZE = 1024

    @staticmethod
    @triton.jit
    def kernel(
        a_ptr,
        TRITON_BLOCK_SIZE: tl.constexpr,
    ):
        x = tl.load(a_ptr)
        tl.store(a_ptr, x + 1)

    def dispatch(self):
        pass
'''


def test_kernel_text_is_taken_as_published():
    text, first, last = V.kernel_text(MODULE_LEVEL, "_compute_global_topk_indices_and_lens_kernel", None)
    assert text.startswith("def _compute_global_topk_indices_and_lens_kernel(") and "tl.store(a_ptr, x + 1)" in text
    assert (first, last) == (7, 12) and "helper" not in text
    text, first, _ = V.kernel_text(IN_CLASS, "kernel", "ComputeGlobalTopkIndicesAndLensKernel")
    assert text.startswith("def kernel(\n    a_ptr,") and "dispatch" not in text
    module = V.generated_module("0.33.0", IN_CLASS)
    assert "@triton.jit\ndef kernel(" in module and "lines 7-12 (ComputeGlobalTopkIndicesAndLensKernel.kernel)" in module


def test_kernel_text_refuses_a_moved_kernel():
    with pytest.raises(V.KernelNotFound, match="not in"):
        V.kernel_text(MODULE_LEVEL, "kernel", "ComputeGlobalTopkIndicesAndLensKernel")
    with pytest.raises(V.KernelNotFound, match="not a @triton.jit"):
        V.kernel_text(MODULE_LEVEL, "helper", None)


def test_missing_vendor_is_unsupported_with_how_to_get(tmp_path):
    from gpu_memsafety.errors import Unsupported
    with pytest.raises(Unsupported, match="make upstream"):
        V.source_file("0.33.0", vendor=tmp_path)


_INTERPRETED_CHECK = """
import torch
from gpu_memsafety.detectors import trace_fidelity
from gpu_memsafety.kernels.block_table_gather import cases as C, layout as L, vllm_kernel as V
trace_fidelity.install()    # the interpreter as a case worker has it (numpy 2.4 refuses the plain one's int())
for version in L.VERSIONS:
    kernel = V.load(version)
    for shape in C.SHAPES:
        g, real = C.gather(shape, "padded")
        tokens, width = len(g.topk), len(g.topk[0])
        valid = torch.tensor([r < real for r in g.token_to_req])
        table = torch.randint(1, 1 << 16, (g.rows, g.stride), dtype=torch.int32)
        table[real:] = L.NULL_BLOCK_ID
        topk = torch.tensor(g.topk, dtype=torch.int32)
        slots = torch.empty((tokens, width), dtype=torch.int32)
        lens = torch.empty(tokens, dtype=torch.int32)
        kernel[(tokens,)](slots, slots.stride(0), lens, topk, topk.stride(0), width,
                          torch.tensor(g.token_to_req, dtype=torch.int32), table, table.stride(0), g.block_size,
                          valid, TRITON_BLOCK_SIZE=L.TRITON_BLOCK_SIZE)
        for t in range(tokens):
            assert slots[t].tolist() == L.slot_ids(g, table.tolist(), t), (version, shape, t)
            assert lens[t].item() == L.topk_len(g, t, bool(valid[t])), (version, shape, t)
print("checked", len(L.VERSIONS), "versions")
"""


@pytest.mark.e2e
def test_the_published_kernels_match_the_model_under_the_triton_interpreter(tmp_path):
    """The real vLLM kernels (both copies) on the CPU: the tokens whose loads stay in the table get the model's
    slot ids and lengths. Needs `make upstream --all` (the vLLM wheels are GPU-only fetches): skipped, and said
    so, where .vendor/ lacks them. In a child process: the interpreter must be on when triton is first imported
    (triton.language's own jit functions are interpreted only then), which an earlier test of this process may
    already have done without it."""
    import os
    import subprocess
    import sys

    from gpu_memsafety.upstream import catalogue as U
    missing = [v for v in L.VERSIONS if U.unpacked(U.artifact(f"vllm-{v}")) is None]
    if missing:
        pytest.skip(f"vLLM {', '.join(missing)} not unpacked: `python -m gpu_memsafety.cli.upstream --only vllm-...`")
    env = dict(os.environ, TRITON_INTERPRET="1", GPU_MEMSAFETY_CACHE=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _INTERPRETED_CHECK], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"checked {len(L.VERSIONS)} versions" in done.stdout
