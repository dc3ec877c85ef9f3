"""Settings: device lists (fake CPU devices for tests), environment, limits."""

import pytest

from app.settings import Settings, is_loopback, parse_devices


@pytest.mark.parametrize("spec, labels", [
    ("cpu", ["cpu:0"]),
    ("cpu*3", ["cpu:0", "cpu:1", "cpu:2"]),
    ("cpu,cpu,cpu", ["cpu:0", "cpu:1", "cpu:2"]),
    ("cuda:0,cuda:3", ["cuda:0", "cuda:3"]),
    ("cuda*2", ["cuda:0", "cuda:1"]),
    (" CUDA:1 , cpu ", ["cuda:1", "cpu:0"]),
])
def test_parse_devices(spec, labels):
    assert parse_devices(spec) == labels


@pytest.mark.parametrize("spec", ["gpu", "cuda:0,cuda:0", "cpu*0", "", "cuda:x"])
def test_parse_devices_rejects(spec):
    with pytest.raises(ValueError):
        parse_devices(spec)


def test_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RMSNORM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RMSNORM_DEVICES", "cpu*2")
    monkeypatch.setenv("RMSNORM_MAX_QUEUE", "3")
    monkeypatch.setenv("RMSNORM_RESULTS_DIR", "")
    settings = Settings.from_env()
    assert settings.data_dir == tmp_path and settings.db_path.parent == tmp_path
    assert settings.resolved_devices() == ["cpu:0", "cpu:1"]
    assert settings.max_queue == 3 and settings.results_dir is None
    # keywords win over the environment; "auto" means discover
    assert Settings.from_env(devices="cpu*4").resolved_devices() == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    assert Settings.from_env(devices="auto").devices is None
    monkeypatch.setenv("RMSNORM_MAX_QUEUE", "lots")
    with pytest.raises(ValueError, match="RMSNORM_MAX_QUEUE"):
        Settings.from_env()


def test_default_devices_without_gpu_is_one_cpu(monkeypatch):
    monkeypatch.delenv("RMSNORM_DEVICES", raising=False)
    import torch

    expected = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else ["cpu:0"]
    assert Settings.from_env().resolved_devices() == expected


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                        ("0.0.0.0", False), ("10.0.0.5", False), ("example.org", False)])
def test_loopback(host, loop):
    assert is_loopback(host) is loop
