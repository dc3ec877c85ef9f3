"""Test setup shared by the whole suite.

Without a GPU, Triton kernels run under Triton's interpreter on CPU tensors: the variable must be set
before `triton` is first imported, so it is set here, at collection time."""

import os
import shutil

if not shutil.which("nvidia-smi") and "TRITON_INTERPRET" not in os.environ:
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402


@pytest.fixture
def device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
