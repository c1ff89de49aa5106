"""The CPU control's kernels run in Triton's interpreter: set before torchao imports triton."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")     # pure Triton: torchao's C++ ops are not needed
