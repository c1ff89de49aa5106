"""Planted shared-memory overread: calibration for memcheck in shared memory (issue 26 item 3).

`kernels/planted/shared.cu`: a block that stages 250 floats in exactly 1,000 B of dynamic shared memory and reads
one float past them must be a memcheck `overread` of region `shared` (buffer `__shared__`: no buffer of the case)
in `planted_shared_overread`, naming the access size (4 B) and the line marked SHARED OVERREAD; its fixed twin must
be clean. The read stays inside the hardware's allocation unit and never reaches the output, so no other detector
can see it: in their modes the buggy variant is `not applicable`, saying so. CUDA only (needs a GPU and nvcc).
"""
from __future__ import annotations

from gpu_memsafety.kernels.planted.shared import KERNEL, VARIANTS
from gpu_memsafety.model import GUARD, MEMCHECK, OVERREAD, SHARED, SHARED_MEMORY, Expectation, ExpectedFinding
from gpu_memsafety.scenario.definition import Case, Param, Scenario

N = 4000


def _expect(case: Case) -> Expectation:
    if case.variant == "shared_overread":
        return Expectation((ExpectedFinding(OVERREAD, SHARED, region=SHARED_MEMORY),),
                           "reads one float past the block's shared memory")
    return Expectation()


SCENARIO = Scenario(
    name="planted_shared",
    summary="planted read one float past a block's dynamic shared memory (memcheck calibration) and its fixed twin",
    adapter="gpu_memsafety.kernels.planted.shared:run_case",
    params=(Param("n", int, low=1, high=1 << 28),),
    variants=tuple(VARIANTS),
    cases=lambda: [Case("planted_shared", v, {"n": N}, f"cuda-n{N}", ("calibration",)) for v in VARIANTS],
    expect=_expect,
    kernel=lambda case: KERNEL,
    needs_gpu=lambda case: True,
    detectors=(GUARD, MEMCHECK),     # the read is invisible to the others by construction
    timeout_s=120.0,
    cost_s=0.3,
)
