"""engine.ceiling: the copy ceiling, measured on the CPU with small buffers (the GPU path is the same
arithmetic over CUDA events)."""

import pytest
import torch

from engine import ceiling


def test_measure_copy_reports_read_plus_write_bytes_over_the_median():
    nbytes = 1 << 20
    got = ceiling.measure_copy(torch.device("cpu"), nbytes=nbytes, repetitions=3)
    assert got.nbytes == nbytes and got.median_us > 0
    assert got.GBps == pytest.approx(2 * nbytes / (got.median_us * 1e-6) / 1e9)
    assert "CPU memcpy" in got.method and "1 MiB" in got.method and "median of 3" in got.method
    assert "reduced" not in got.method


def test_the_buffer_is_cut_to_fit_free_memory_and_says_so(monkeypatch):
    monkeypatch.setattr(ceiling, "free_memory_bytes", lambda device: 10 << 20)  # room for 2 × 2 MiB at 0.4
    got = ceiling.measure_copy(torch.device("cpu"), nbytes=64 << 20, repetitions=2)
    assert got.nbytes < 64 << 20 and got.nbytes % 16 == 0 and got.nbytes == (int((10 << 20) * 0.4) // 2) // 16 * 16
    assert "reduced from 64 MiB" in got.method


def test_requested_bytes_env_and_defaults(monkeypatch):
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    monkeypatch.delenv(ceiling.CEILING_BYTES_ENV, raising=False)
    assert ceiling.requested_bytes(cpu) == ceiling.GIB and ceiling.requested_bytes(gpu) == 2 * ceiling.GIB
    monkeypatch.setenv(ceiling.CEILING_BYTES_ENV, "4096")
    assert ceiling.requested_bytes(cpu) == 4096
    assert ceiling.requested_bytes(cpu, 12345) == 12345  # an explicit size wins over the env
    with pytest.raises(ValueError, match="positive"):
        ceiling.requested_bytes(cpu, 0)


@pytest.mark.parametrize(
    "nbytes,text",
    [(3 << 30, "3 GiB"), (5 << 20, "5 MiB"), (1 << 10, "1 KiB"), (1000, "1000 B"), ((1 << 20) + 1, "1048577 B")],
)
def test_human_sizes(nbytes, text):
    assert ceiling._human(nbytes) == text
