"""Which buffers a case covers: the buffers that get the mode's watch placement (an exact allocation of their own,
or a guard page), so that the detectors that need one (memcheck, guard page) see past their ends.

Pure, and imported by the scenario definitions, the run context and the job records alike.
"""
from __future__ import annotations

COVER_ALL = "all"            # every buffer the adapter allocates through the context (the default)
COVER_WATCHED = "watched"    # only the buffers allocated with watch=True (the behaviour before issue 20)
COVERS = (COVER_ALL, COVER_WATCHED)
COVER_SCENARIO = "scenario"  # run-wide option: each scenario's own `cover` (the default)
COVER_OPTIONS = (COVER_SCENARIO, *COVERS)


def resolve_cover(option: str, scenario_cover: str) -> str:
    """What a case covers: the run-wide option (`--gpu-memsafety-cover`), unless it defers to the scenario's own `cover`."""
    if option not in COVER_OPTIONS:
        raise ValueError(f"cover option {option!r} is not one of {', '.join(COVER_OPTIONS)}")
    return _known(scenario_cover if option == COVER_SCENARIO else option)


def covers(cover: str, watch: bool) -> bool:
    """The one place that decides whether a buffer is covered (gets the mode's watch placement): every buffer
    under `all`, only a buffer allocated with watch=True under `watched`."""
    return _known(cover) == COVER_ALL or watch


def _known(cover: str) -> str:
    if cover not in COVERS:
        raise ValueError(f"cover {cover!r} is not one of {', '.join(COVERS)}")
    return cover
