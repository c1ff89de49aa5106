"""Byte accounting for triton_kernels' Hopper mxfp4 weight scales, and where the unmasked K walk lands.

Why this exists: the last-expert OOB read (scenarios/last_expert_oob_read.py) is a question of arithmetic. The harness must know,
before anything runs, how many bytes the kernel reads past the scale storage, which logical scale each
byte stands for, and which sizes are safe, so that a memcheck record can be checked against a prediction
and not only counted. Pure: imports no torch, triton or CUDA; the device side is `gpu_memsafety.kernels.mxfp4.moe`.

Derivation (triton_kernels as bundled in sgl-kernel 0.3.21, API `matmul_ogs`; sglang's `_swizzle_mxfp4`)
------------------------------------------------------------------------------------------------------
1. Checkpoint orientation. sglang loads `w13_weight_scale` / `w2_weight_scale` as uint8 E8M0 of shape
   [E, N, K/32]: N output rows (2 x intermediate for gate-up, hidden for down), K the reduction axis
   (hidden for gate-up, intermediate for down). One byte per 32 K values ("group"): K=2880 -> 90 groups.
2. Matmul orientation. `_swizzle_mxfp4` transposes to [E, K/32, N] before `convert_layout`, so the
   triton_kernels `Tensor` the matmul gets has shape [E, G, N]: the K-group axis is axis 1 (`mx_axis=1`),
   N is last. The sm90 fix pads G from K/32 to round_up(K, 128)/32 with byte 127 (2^0) before this step.
3. HopperMXScaleLayout.swizzle_data (num_warps w = 8): because mx_axis is the second-to-last axis it
   works on the contiguous [E, N, G] view, pads N to a multiple of 32*w (256) and G to a multiple of 2
   (SWIZZLE_ALIGN_K; this is the only K padding the layout does), reshapes [N', G'] to
   (a, b=2, w, c=2, d=8, k=G'/2, e=2) with n = a*32w + b*16w + wi*16 + c*8 + d and g = 2k + e, permutes to
   (a, w, k, b, d, e, c) and flattens to rows of G'*32 bytes:
       row = a*w + wi                      (N'/32 rows per expert)
       col = k*64 + b*32 + d*4 + e*2 + c   (G'*32 bytes per row)
   and returns the transposed *view* [E, G'*32, N'/32] with strides (N'/32 * G'*32, 1, G'*32). The buffer
   underneath is [E, N'/32, G'*32], contiguous, row after row, expert after expert.
4. The kernel (`_matmul_ogs`, HOPPER_SCALE branch): `opt_flags_nvidia.compute_block_k` forces
   BLOCK_K = 128 for 4-bit weights without native mxfp (sm90), so MX_SCALE_BLOCK_K = 4 groups and
   PACKED_MX_BLOCK = 4*32 = 128 bytes along the swizzled K axis; SCALE_BLOCK_N = BLOCK_N/32 rows
   (BLOCK_N = 256 with num_warps 8). Per tile it loads, with no mask,
       WMxScale + expt_id*stride_e + offs_k_scale*1 + offs_n_scale*(G'*32),
       offs_k_scale = 128*tile + [0, 128),   offs_n_scale = pid_n*SCALE_BLOCK_N + [0, SCALE_BLOCK_N),
   for tile = 0 .. cdiv(K, 128) - 1 (the K loop runs over the *logical* K; split-k only spreads the same
   tiles over programs). The values and x are masked by K; the scales are not.
5. So every row walks cdiv(K,128)*128 bytes = 4*cdiv(K,128) groups, while it holds G'*32 bytes. For
   K = 2880: 23 tiles = 2944 bytes = 92 groups against 2880 bytes = 90 groups: 64 bytes (groups 90, 91)
   past the end of every row. Rows are contiguous, so row r's excess is the first 64 bytes of row r+1;
   the last row of expert e runs into expert e+1. Only the last row of the last expert leaves the tensor:
   **64 distinct bytes past the end**, the same for every E and N (E=4/N=256, gpt-oss 20b/120b, TP shards)
   as long as the last expert gets tokens and its last row is read (it is: grid_n*BLOCK_N/32 = N'/32).
   Those bytes stand, for the kernel, for groups 90..91 of n in {112..127, 240..255} (+ 256*a) of the last
   row. With the sm90 pad, G' = 92 and the walk ends exactly at the end: 0 bytes.
   The sglang fix PR (#36456) quotes "3,072 B past the end" for E=128, N=1536, K=2880: that is 64 bytes
   times the 48 rows of the last expert, i.e. bytes walked past each *row*; all but the last row's 64
   land inside the next row. What leaves the allocation, by this code, is 64 bytes: memcheck decides.
Not sure / to check on the H200: how many memcheck records 64 bytes make (one per thread and access:
it depends on the vector width Triton picks and on how many programs walk the last tile of the last
expert); compare distinct addresses, never the record count.

The batched mode (x [E, M, K], no routing) has a second, independent bug in this copy: with split-k
(`compute_split_k`, chosen when the grid is small) the scratchpad is allocated [split_k, 1, M, N] float32
without the batch axis, but the kernel writes slot `pid_k + pid_e` (Y += pid_k*stride_y_k +
start_z*stride_y_z, both strides M*N): experts >= 1 write past the scratchpad. Upstream disabled split-k
for batched matmul in triton-lang/triton PR #8252 and fixed the allocation in #8327; see
`batched_split_k_overwrite_bytes`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

MX_BLOCK = 32          # values per E8M0 scale byte (OCP MX block size)
HOPPER_BLOCK_K = 128   # opt_flags_nvidia.compute_block_k on sm90 for 4-bit weights
NUM_WARPS = 8          # sglang swizzles with num_warps=8; the kernel then runs with 8 warps
SWIZZLE_ALIGN_K = 2    # HopperMXScaleLayout pads the group axis to a multiple of 2, not of BLOCK_K/32
E8M0_ONE = 127         # E8M0 byte for 2^0 = 1.0, what sglang's sm90 fix pads with
H200_SMS = 132         # streaming multiprocessors of an H200 SXM; compute_split_k divides by it
VALUE_ALIGN_N = 16     # HopperMXValueLayout pads N to 1*2*4*2*1
VALUE_ALIGN_KBYTES = 32  # HopperMXValueLayout pads K/2 bytes to 4*2*4*1*1 (mma_version 3)

# Triton kernel names per API generation. The name a sanitizer reports is the kernel's `repr`:
# the prefix, then `_<layouts>_<ydtype>x<xdtype>x<wdtype>_<BLOCK_M>x<BLOCK_N>x<BLOCK_K>x<SPLIT_K>`, then
# `_<fused activation>` if any, e.g. `_matmul_ogs_NNT_fp32xbf16xmxfp4_32x256x128x5`.
# On sm90 mxfp4 only the non-persistent kernel runs (no TMA for mxfp4 on Hopper).
MATMUL_KERNELS = {
    "matmul_ogs": ("_matmul_ogs", "_p_matmul_ogs"),
    "matmul": ("_matmul", "_p_matmul"),
}


class LayoutError(ValueError):
    """Sizes this layout or the kernel cannot take."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return cdiv(a, b) * b


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def k_groups(K: int) -> int:
    """Scale bytes per row in the checkpoint: one per 32 values of K (2880 -> 90)."""
    return cdiv(K, MX_BLOCK)


def k_tiles(K: int, block_k: int = HOPPER_BLOCK_K) -> int:
    """Iterations of the kernel's K loop (2880 -> 23)."""
    return cdiv(K, block_k)


def groups_walked(K: int, block_k: int = HOPPER_BLOCK_K) -> int:
    """Scale groups each row's unmasked loads cover: whole tiles of block_k/32 groups (2880 -> 92)."""
    return k_tiles(K, block_k) * (block_k // MX_BLOCK)


def padded_groups(K: int, block_k: int = HOPPER_BLOCK_K) -> int:
    """Group count after sglang's sm90 fix: round_up(K, 128)/32 (2880 -> 92; no change if K % 128 == 0)."""
    return round_up(K, block_k) // MX_BLOCK


# Downstream workarounds for the unmasked Hopper scale load: (groups the scale is padded to, fill byte).
# sglang 0.5.19+ (mxfp4.py _pad_hopper_mxfp4_scale): E8M0 127 (= 1.0) up to round_up(K, 128)/32 groups.
# vLLM PR #47910: 0 up to a multiple of 4 groups ("remove once Triton 3.8.0+").
PAD_POLICIES = ("none", "sglang", "vllm")
VLLM_PAD_MULTIPLE = 4
PAD_SOURCES = {"sglang": "sglang 0.5.19+ mxfp4.py (_pad_hopper_mxfp4_scale; PR #36456)",
               "vllm": "vLLM PR #47910"}


def pad_groups(policy: str, K: int) -> tuple[int, int] | None:
    """(groups, fill byte) a policy pads K's scales to; None for 'none'. Both policies give padded_groups(K)
    groups whenever K is a multiple of 32 (round_up(K, 128)/32 == round_up(K/32, 4)); they differ in the fill."""
    if policy == "none":
        return None
    if policy == "sglang":
        return padded_groups(K), E8M0_ONE
    if policy == "vllm":
        return round_up(k_groups(K), VLLM_PAD_MULTIPLE), 0
    raise LayoutError(f"unknown pad policy {policy!r}; known: {', '.join(PAD_POLICIES)}")


def stored_groups(K: int, *, padded: bool, block_k: int = HOPPER_BLOCK_K) -> int:
    """Groups per row in the swizzled storage: the (padded) count rounded up to SWIZZLE_ALIGN_K."""
    groups = padded_groups(K, block_k) if padded else k_groups(K)
    return round_up(groups, SWIZZLE_ALIGN_K)


def needs_pad(K: int, block_k: int = HOPPER_BLOCK_K) -> bool:
    """True when the unpadded storage is shorter than the walk: the kernel then reads past each row.

    Note: K = 2912 (91 groups) needs none, the layout's own align-2 zero pad reaches 92; sglang's fix pads
    every K % 128 != 0, which is harmless when not needed.
    """
    return stored_groups(K, padded=False, block_k=block_k) < groups_walked(K, block_k)


def block_n(N: int, num_warps: int = NUM_WARPS) -> int:
    """BLOCK_N that opt_flags_nvidia.compute_block_n picks with a Hopper scale layout."""
    if num_warps == 4:
        return 128
    if N > 128:
        return 256
    return max(16, min(128, next_power_of_2(N)))


@dataclass(frozen=True)
class ScaleLayout:
    """Hopper mxfp4 scale storage of one weight (all experts), and the kernel's walk over it."""

    E: int
    N: int
    K: int
    padded: bool
    num_warps: int = NUM_WARPS
    block_k: int = HOPPER_BLOCK_K

    def __post_init__(self) -> None:
        if min(self.E, self.N, self.K) <= 0:
            raise LayoutError(f"E, N, K must be positive, got E={self.E} N={self.N} K={self.K}")
        if self.num_warps <= 0 or self.num_warps & (self.num_warps - 1):
            raise LayoutError(f"num_warps must be a power of 2, got {self.num_warps}")
        if self.block_k % (2 * MX_BLOCK):
            raise LayoutError(f"block_k must be a multiple of 64 (2 groups), got {self.block_k}")
        if self.block_n % (32 * self.num_warps):
            raise LayoutError(f"N={self.N} gives BLOCK_N={self.block_n}, not a multiple of {32 * self.num_warps}: "
                              f"_matmul_ogs static_asserts BLOCK_N % (2*num_warps*2*8) == 0")

    # --- group counts along K ---
    @property
    def k_groups(self) -> int:
        return k_groups(self.K)

    @property
    def k_tiles(self) -> int:
        return k_tiles(self.K, self.block_k)

    @property
    def groups_walked(self) -> int:
        return groups_walked(self.K, self.block_k)

    @property
    def logical_groups(self) -> int:
        """Groups in the scale tensor handed to the swizzle (92 with the sm90 pad, else 90)."""
        return padded_groups(self.K, self.block_k) if self.padded else self.k_groups

    @property
    def stored_groups(self) -> int:
        return stored_groups(self.K, padded=self.padded, block_k=self.block_k)

    # --- shapes ---
    @property
    def checkpoint_shape(self) -> tuple[int, int, int]:
        """[E, N, K/32]: the scale as sglang loads it (before any pad)."""
        return (self.E, self.N, self.k_groups)

    @property
    def matmul_shape(self) -> tuple[int, int, int]:
        """[E, G, N]: the triton_kernels Tensor shape the matmul sees; the K-group axis is axis 1."""
        return (self.E, self.logical_groups, self.N)

    @property
    def n_padded(self) -> int:
        return round_up(self.N, 32 * self.num_warps)

    @property
    def rows(self) -> int:
        """Swizzled rows per expert: 32 values of N per row."""
        return self.n_padded // 32

    @property
    def row_bytes(self) -> int:
        return self.stored_groups * 32

    @property
    def expert_bytes(self) -> int:
        return self.rows * self.row_bytes

    @property
    def nbytes(self) -> int:
        return self.E * self.expert_bytes

    @property
    def storage_shape(self) -> tuple[int, int, int]:
        """torch shape of `Tensor.storage.data` (a transposed view): [E, G'*32, N'/32]."""
        return (self.E, self.row_bytes, self.rows)

    @property
    def storage_strides(self) -> tuple[int, int, int]:
        return (self.expert_bytes, 1, self.row_bytes)

    # --- the kernel's walk ---
    @property
    def block_n(self) -> int:
        return block_n(self.N, self.num_warps)

    @property
    def rows_read(self) -> int:
        """Rows of each expert the kernel loads: grid_n * BLOCK_N / 32 (all rows, for BLOCK_N = 32*w)."""
        return min(self.rows, cdiv(self.N, self.block_n) * self.block_n // 32)

    @property
    def walked_row_bytes(self) -> int:
        """Bytes the K loop covers in each row: k_tiles * block_k (2944 for K = 2880)."""
        return self.k_tiles * self.block_k

    @property
    def row_overrun(self) -> int:
        """Bytes each row's walk reaches past the end of that row (64 for K = 2880 unpadded)."""
        return max(0, self.walked_row_bytes - self.row_bytes)

    @property
    def overread_bytes(self) -> int:
        """Distinct bytes past the end of the whole storage (the last row of the last expert)."""
        last_row_start = (self.rows_read - 1) * self.row_bytes
        return max(0, last_row_start + self.walked_row_bytes - self.expert_bytes)


def scale_layout(E: int, N: int, K: int, *, padded: bool, num_warps: int = NUM_WARPS,
                 block_k: int = HOPPER_BLOCK_K) -> ScaleLayout:
    return ScaleLayout(E, N, K, padded, num_warps, block_k)


def expected_overread_bytes(E: int, N: int, K: int, *, padded: bool = False, num_warps: int = NUM_WARPS,
                            block_k: int = HOPPER_BLOCK_K) -> int:
    """Distinct bytes the unmasked HOPPER_SCALE load reads past the scale storage (64 for K=2880 unpadded)."""
    return scale_layout(E, N, K, padded=padded, num_warps=num_warps, block_k=block_k).overread_bytes


# --- which logical scale a byte stands for ---------------------------------------------------------------
SCALE = "scale"                  # a real scale byte of the checkpoint
N_PAD = "n_pad"                  # row padding of the swizzle (n >= N), zero
K_PAD_SM90 = "k_pad_sm90"        # sglang's sm90 pad, groups K/32 .. round_up(K,128)/32, byte 127
K_PAD_ALIGN = "k_pad_align"      # the layout's own align-2 zero pad of the group axis
PAST_END = "past_end"            # outside the storage; the kernel reads it as this (expert, n, group)


@dataclass(frozen=True)
class ScalePlace:
    """One byte offset into (or past) the scale storage, and the logical scale it stands for."""

    offset: int       # relative to the first byte of the storage
    expert: int
    row: int          # swizzled row inside the expert
    col: int          # byte inside the row (>= row_bytes: the kernel's walk past the row)
    n: int            # output row (0 .. N'-1)
    k_group: int      # scale group along K (>= stored groups past the end)
    kind: str

    def describe(self) -> str:
        where = f"expert {self.expert}, n {self.n}, k group {self.k_group}"
        return f"{where} ({self.kind})"


def decode_col(layout: ScaleLayout, row: int, col: int) -> tuple[int, int]:
    """(n, k_group) of swizzled (row, col) of one expert; col may run past the row like the kernel's walk."""
    w = layout.num_warps
    a, wi = divmod(row, w)
    k, rem = divmod(col, 64)
    b, rem = divmod(rem, 32)
    d, rem = divmod(rem, 4)
    e, c = divmod(rem, 2)
    return a * 32 * w + b * 16 * w + wi * 16 + c * 8 + d, 2 * k + e


def _kind(layout: ScaleLayout, n: int, group: int) -> str:
    if group >= layout.stored_groups:
        return PAST_END
    if n >= layout.N:
        return N_PAD
    if group < layout.k_groups:
        return SCALE
    if group < layout.logical_groups:
        return K_PAD_SM90
    return K_PAD_ALIGN


def locate_scale_byte(layout: ScaleLayout, offset: int) -> ScalePlace:
    """Logical place of a byte of the storage, or of a byte past its end that the kernel reads."""
    if 0 <= offset < layout.nbytes:
        expert, rest = divmod(offset, layout.expert_bytes)
        row, col = divmod(rest, layout.row_bytes)
    elif layout.nbytes <= offset < layout.nbytes + layout.overread_bytes:
        expert, row = layout.E - 1, layout.rows_read - 1
        col = offset - (expert * layout.expert_bytes + row * layout.row_bytes)
    else:
        raise LayoutError(f"offset {offset} is outside the storage (0..{layout.nbytes}) and the kernel's "
                          f"overread ({layout.overread_bytes} bytes)")
    n, group = decode_col(layout, row, col)
    return ScalePlace(offset, expert, row, col, n, group, _kind(layout, n, group))


def overread_map(E: int, N: int, K: int, padded: bool, *, num_warps: int = NUM_WARPS,
                 block_k: int = HOPPER_BLOCK_K) -> tuple[ScalePlace, ...]:
    """Every byte past the end that the kernel reads, with the (expert, n, k_group) it reads it as."""
    layout = scale_layout(E, N, K, padded=padded, num_warps=num_warps, block_k=block_k)
    end = layout.nbytes
    return tuple(locate_scale_byte(layout, end + j) for j in range(layout.overread_bytes))


def overread_outputs(E: int, N: int, K: int, padded: bool, *, num_warps: int = NUM_WARPS,
                     block_k: int = HOPPER_BLOCK_K) -> tuple[int, ...]:
    """The output rows n < N whose scales the bytes read past the end stand for: the rows whose result depends on
    them. () when every such byte stands for a padding row n >= N (the kernel computes it and never stores it:
    N = 2880, the last row's n are 2928..3071), or when nothing is read past the end."""
    return tuple(sorted({p.n for p in overread_map(E, N, K, padded, num_warps=num_warps, block_k=block_k) if p.n < N}))


def describe_range(layout: ScaleLayout, start: int, end: int) -> str:
    """Short logical description of bytes [start, end) for a finding: experts, n and k-group spans, kinds."""
    lo, hi = max(start, 0), min(end, layout.nbytes + layout.overread_bytes)
    if lo >= hi:
        return f"no scale byte in [{start}, {end}) (storage {layout.nbytes} B, overread {layout.overread_bytes} B)"
    places = [locate_scale_byte(layout, off) for off in range(lo, hi)]
    experts = sorted({p.expert for p in places})
    ns = sorted({p.n for p in places})
    groups = sorted({p.k_group for p in places})
    kinds = sorted({p.kind for p in places})
    return (f"expert {_span(experts)}, n {_span(ns)} ({len(ns)} distinct), k group {_span(groups)} "
            f"of {layout.stored_groups} stored / {layout.groups_walked} walked; {', '.join(kinds)}")


def _span(values: list[int]) -> str:
    return str(values[0]) if values[0] == values[-1] else f"{values[0]}..{values[-1]}"


# --- the value (weight) storage ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ValueLayout:
    """HopperMXValueLayout storage (mma_version 3) of mxfp4 weights [E, K, N] (two values per byte)."""

    E: int
    N: int
    K: int

    @property
    def k_bytes(self) -> int:
        return cdiv(self.K, 2)

    @property
    def n_padded(self) -> int:
        return round_up(self.N, VALUE_ALIGN_N)

    @property
    def k_bytes_padded(self) -> int:
        return round_up(self.k_bytes, VALUE_ALIGN_KBYTES)

    @property
    def storage_shape(self) -> tuple[int, int, int]:
        return (self.E, self.k_bytes_padded * 4, self.n_padded // 4)

    @property
    def storage_strides(self) -> tuple[int, int, int]:
        return (self.k_bytes_padded * self.n_padded, 1, self.k_bytes_padded * 4)

    @property
    def nbytes(self) -> int:
        return self.E * self.k_bytes_padded * self.n_padded


# --- what the kernel's opt flags will be on the H200 (a prediction; the adapter records the real ones) -----
@dataclass(frozen=True)
class OptFlagsEstimate:
    block_m: int
    block_n: int
    block_k: int
    split_k: int
    num_warps: int


def estimate_opt_flags(rows: int, N: int, K: int, n_experts: int, *, n_sms: int = H200_SMS,
                       num_warps: int = NUM_WARPS) -> OptFlagsEstimate:
    """opt_flags_nvidia of the sgl-kernel 0.3.21 copy, for sm90 mxfp4 with a Hopper scale layout.

    rows: x.shape[-2] in batched mode, n_tokens*top_k (the gather rows) with routing.
    block_m from rows // n_experts tokens per expert; split_k = min(n_sms // grid, cdiv(K,128) // 4)
    with grid = cdiv(rows, block_m) * cdiv(N, block_n) (the batch is not counted).
    """
    tokens_per_expert = max(1, rows // n_experts)
    bm = max(16, min(next_power_of_2(tokens_per_expert), 128))
    bn = block_n(N, num_warps)
    grid = cdiv(rows, bm) * cdiv(N, bn)
    split_k = max(1, min(n_sms // grid, k_tiles(K) // 4))
    return OptFlagsEstimate(bm, bn, HOPPER_BLOCK_K, split_k, num_warps)


def batched_split_k_overwrite_bytes(E: int, M: int, N: int, split_k: int, itemsize: int = 4) -> int:
    """Bytes written past the split-k scratchpad by batched matmul_ogs (x [E, M, K]) in this copy.

    The scratchpad is [split_k, 1, M, N] (fp32) and program (expert e, split p) writes slot e + p; slots
    split_k .. split_k + E - 2 do not exist: (E - 1) * M * N * itemsize bytes. 0 without split-k.
    """
    if split_k <= 1 or E <= 1:
        return 0
    return (E - 1) * M * N * itemsize


# --- reading kernel names back from a sanitizer record -----------------------------------------------------
@dataclass(frozen=True)
class KernelName:
    base: str
    layouts: str
    y_dtype: str
    x_dtype: str
    w_dtype: str
    block_m: int
    block_n: int
    block_k: int
    split_k: int
    suffix: str


_DTYPE = r"(?:mxfp\d+|[a-wyz0-9]+)"
_KERNEL_NAME = re.compile(
    r"^(?P<base>_p_matmul_ogs|_matmul_ogs|_p_matmul|_matmul)_(?P<layouts>[NT]{3})_"
    rf"(?P<y>{_DTYPE})x(?P<x>{_DTYPE})x(?P<w>{_DTYPE})_"
    r"(?P<bm>\d+)x(?P<bn>\d+)x(?P<bk>\d+)x(?P<sk>\d+)(?:_(?P<suffix>.+))?$")


def parse_kernel_name(name: str) -> KernelName | None:
    """Split a reported matmul kernel name into its blocks; None for any other kernel."""
    m = _KERNEL_NAME.match(name)
    if m is None:
        return None
    return KernelName(m["base"], m["layouts"], m["y"], m["x"], m["w"], int(m["bm"]), int(m["bn"]),
                      int(m["bk"]), int(m["sk"]), m["suffix"] or "")


def is_matmul_kernel(name: str, api_gen: str | None = None) -> bool:
    """True for a reported name of the MoE matmul kernel (of one API generation, or of either)."""
    parsed = parse_kernel_name(name)
    if parsed is None:
        return False
    return api_gen is None or parsed.base in MATMUL_KERNELS[api_gen]
