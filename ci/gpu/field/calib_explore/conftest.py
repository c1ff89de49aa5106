"""Without a GPU the calibration's Triton kernels run in Triton's interpreter, on CPU tensors (test_widths.DEVICE):
set before test_widths.py imports triton."""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
