"""GPU memory-safety regression harness: the engine.

Guard-marker buffers, compute-sanitizer runs, attribution of every bad access to a buffer and a logical
place, verdicts against expectations, and reports. The pure modules (model, layout, parse, attribute,
verdict, report, merge, baseline) import no torch, triton or CUDA.
"""
__version__ = "0.1.0"
