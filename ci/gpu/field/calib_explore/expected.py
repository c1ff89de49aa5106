"""What explore must find in test_shapes.py, computed from a case's values alone (no torch, no triton: the checker
`check.py` imports it): every planted bug's exact bytes at every shape, [] where the shape does not trigger it.
The suite's listed values come from here too (LISTED), so that the tests and their expectations cannot drift."""
from __future__ import annotations

BLOCK = 64          # _tail_read / _tail_write block
BT = 16             # _seq_scale chunk
ROWS = 3            # _row_scale rows
F32 = I32 = 4

# The values each test lists: none of them triggers its bug (the suite passes silently, and clean, without explore).
LISTED = {
    "n": [64, 128],                         # block tail: multiples of BLOCK
    "cu_seqlens": [[0, 100, 300]],          # every sequence at least one chunk
    "cols": [64, 128],                      # powers of two
    "experts": [4, 8],                      # more than one expert
    "offsets": [[0, 5, 12]],                # no empty segment
    "shape": [(4, 64)],                     # a multiple of BLOCK elements
}
SEQ = 128                                   # test_module_constant_tail's module-level length (32-element blocks)
ROWS_OF_FIXTURE = 256                       # the zeros fixture's length (test_fixture_constant_write)


def _ceil(n: int, b: int) -> int:
    return -(-n // b) * b


def tail(kind: str, buffer: str, n: int, block: int, width: int = F32) -> list[tuple]:
    end = _ceil(n, block)
    return [(kind, buffer, "past_end", n * width, end * width)] if end > n else []


def block_tail_read(p: dict) -> list[tuple]:
    return tail("overread", "x_ptr", p["n"], BLOCK)


def shorter_than_a_chunk(p: dict) -> list[tuple]:
    offs = p["cu_seqlens"]
    total, last_start = offs[-1], offs[-2]          # every sequence's first chunk is read whole: the last start's
    return [("overread", "x_ptr", "past_end", total * F32, (last_start + BT) * F32)] if last_start + BT > total else []


def non_power_of_two_columns(p: dict) -> list[tuple]:
    n = p["cols"]
    block = 1 << (n - 1).bit_length()
    end = (ROWS - 1) * n + block                    # the last row's whole block
    return [("overread", "x_ptr", "past_end", ROWS * n * F32, end * F32)] if block > n else []


def one_expert(p: dict) -> list[tuple]:
    return [("overread", "counts_ptr", "past_end", I32, 2 * I32)] if p["experts"] == 1 else []


def empty_segment(p: dict) -> list[tuple]:
    offs = p["offsets"]
    total = offs[-1]
    empty_at_end = any(a == b == total for a, b in zip(offs, offs[1:]))
    return [("overread", "x_ptr", "past_end", total * F32, total * F32 + F32)] if empty_at_end else []


def block_tail_write(p: dict) -> list[tuple]:
    m, n = p["shape"]
    return tail("overwrite", "out_ptr", m * n, BLOCK)


def module_constant_tail(p: dict) -> list[tuple]:
    return tail("overread", "x_ptr", p["module.SEQ"], 32)


def fixture_constant_write(p: dict) -> list[tuple]:
    return tail("overwrite", "out_ptr", p["module.ROWS_OF_FIXTURE"], p.get("module.BLOCK", BLOCK))


# test function -> its expectation; each has a clean twin `<name>_fixed` that must show no finding at any shape.
EXPECT = {
    "test_block_tail_read": block_tail_read,
    "test_shorter_than_a_chunk": shorter_than_a_chunk,
    "test_non_power_of_two_columns": non_power_of_two_columns,
    "test_one_expert": one_expert,
    "test_empty_segment": empty_segment,
    "test_block_tail_write": block_tail_write,
    "test_module_constant_tail": module_constant_tail,
    "test_fixture_constant_write": fixture_constant_write,
}
