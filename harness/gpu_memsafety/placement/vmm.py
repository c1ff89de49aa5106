"""Guard-page allocations through the CUDA virtual-memory API (cuda-bindings).

A reservation of virtual addresses is mapped only up to the end of the buffer; the page after it stays
reserved and unmapped, so no other allocation can ever land there (allocate_flush_end). The front page
(allocate_front_page) is the mirror: the granule before the mapping stays unmapped and the tensor starts on
the first mapped byte, so the first byte read or written before it faults. The first byte read or written past
the tensor's end faults in hardware, at full speed, with no sanitizer; under memcheck the same access is
outside every allocation, so memcheck reports it on every run, whatever the allocator does elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from gpu_memsafety.placement import layout as L
from gpu_memsafety.placement.layout import round_up

# Pages left unmapped after the buffer. One granule (2 MiB on Hopper) is far past any tile overrun.
GUARD_GRANULES_AFTER = 1


class VmmUnavailable(RuntimeError):
    """cuda-bindings is missing or the device does not support virtual memory management."""


def _driver() -> Any:
    try:
        from cuda.bindings import driver  # type: ignore[import-not-found]
    except ImportError:
        try:
            from cuda import cuda as driver  # type: ignore[import-not-found,no-redef]
        except ImportError as exc:
            raise VmmUnavailable(f"cuda-bindings is not installed ({exc})") from exc
    return driver


def _check(result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    driver = _driver()
    if err != driver.CUresult.CUDA_SUCCESS:
        raise VmmUnavailable(f"{what} failed: {err}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


@dataclass
class VmmBlock:
    """Owns a reservation, its physical memory and the mapping; `close` gives all three back."""

    reserve_base: int
    reserve_size: int
    mapped_size: int
    handle: Any
    mapped_base: int = 0           # where the mapping starts: reserve_base, or one granule later (front page)
    closed: bool = False

    def close(self) -> None:
        if self.closed:
            return
        d = _driver()
        _check(d.cuMemUnmap(self.mapped_base or self.reserve_base, self.mapped_size), "cuMemUnmap")
        _check(d.cuMemRelease(self.handle), "cuMemRelease")
        _check(d.cuMemAddressFree(self.reserve_base, self.reserve_size), "cuMemAddressFree")
        self.closed = True


class _CudaArray:
    """Minimal __cuda_array_interface__ so torch can wrap the mapped bytes without copying."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3, "strides": None,
        }


def _prop(device_index: int) -> Any:
    d = _driver()
    prop = d.CUmemAllocationProp()
    prop.type = d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device_index
    return prop


def _map(total: int, device: torch.device, *, page_before: bool) -> tuple[int, int, int, VmmBlock]:
    """Reserve `total` bytes rounded up to whole granules plus one unmapped granule, after the mapping
    (page_before False) or before it (True); map and open the rest. Returns (mapped start, mapped size,
    granule, owner)."""
    if device.type != "cuda":
        raise VmmUnavailable(f"guard pages need a CUDA device, got {device}")
    torch.cuda.init()
    index = device.index if device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(index):
        torch.empty(1, device=device)  # make the primary context current for the driver calls
        d = _driver()
        prop = _prop(index)
        gran = _check(d.cuMemGetAllocationGranularity(prop, d.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity")
        mapped = round_up(total, gran)
        reserve = mapped + GUARD_GRANULES_AFTER * gran
        base = int(_check(d.cuMemAddressReserve(reserve, gran, 0, 0), "cuMemAddressReserve"))
        start = base + GUARD_GRANULES_AFTER * gran if page_before else base
        handle = _check(d.cuMemCreate(mapped, prop, 0), "cuMemCreate")
        _check(d.cuMemMap(start, mapped, 0, handle, 0), "cuMemMap")
        access = d.CUmemAccessDesc()
        access.location = prop.location
        access.flags = d.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        _check(d.cuMemSetAccess(start, mapped, [access], 1), "cuMemSetAccess")
    return start, mapped, gran, VmmBlock(base, reserve, mapped, handle, mapped_base=start)


def allocate_flush_end(total: int, device: torch.device) -> tuple[torch.Tensor, int, int, str, VmmBlock]:
    """`total` bytes whose last byte is the last mapped byte before an unmapped guard granule."""
    start, mapped, _, block = _map(total, device, page_before=False)
    first = start + mapped - total
    storage = torch.as_tensor(_CudaArray(first, total), device=device)
    return storage, start, mapped, "vmm", block


def allocate_front_page(total: int, device: torch.device) -> tuple[torch.Tensor, int, int, str, VmmBlock]:
    """`total` bytes whose first byte is the first mapped byte after an unmapped guard granule (layout
    GUARD_PAGE_FRONT: the tensor starts there, so the first byte read or written before it faults)."""
    start, mapped, _, block = _map(total, device, page_before=True)
    storage = torch.as_tensor(_CudaArray(start, total), device=device)
    return storage, start, mapped, "vmm", block


# Which allocator each page placement uses (gpu_memsafety.placement.guard.Arena picks from it).
ALLOCATORS = {L.GUARD_PAGE_BACK: allocate_flush_end, L.GUARD_PAGE_FRONT: allocate_front_page}
