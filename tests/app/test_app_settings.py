"""Settings: device lists (fake CPU devices for tests), environment, limits."""

import pytest

from app.settings import Settings, is_loopback, parse_devices


@pytest.mark.parametrize(
    "spec, labels",
    [
        ("cpu", ["cpu:0"]),
        ("cpu*3", ["cpu:0", "cpu:1", "cpu:2"]),
        ("cpu,cpu,cpu", ["cpu:0", "cpu:1", "cpu:2"]),
        ("cuda:0,cuda:3", ["cuda:0", "cuda:3"]),
        ("cuda*2", ["cuda:0", "cuda:1"]),
        (" CUDA:1 , cpu ", ["cuda:1", "cpu:0"]),
    ],
)
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


@pytest.mark.parametrize(
    "host, loop",
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
        ("example.org", False),
    ],
)
def test_loopback(host, loop):
    assert is_loopback(host) is loop


def test_every_documented_variable_is_read(monkeypatch, tmp_path):
    """Each RMSNORM_ variable of the service (README, docs, tests) sets its field; none is silently ignored."""
    env = {
        "RMSNORM_DATA_DIR": str(tmp_path / "d"),
        "RMSNORM_HOST": "0.0.0.0",
        "RMSNORM_PORT": "8123",
        "RMSNORM_API_TOKEN": "tok",
        "RMSNORM_ALLOW_NO_TOKEN": "1",
        "RMSNORM_EXPOSED": "true",
        "RMSNORM_ALLOWED_HOSTS": "bench.example, other.example",
        "RMSNORM_MAX_BODY_BYTES": "4096",
        "RMSNORM_MAX_IMPORT_BYTES": "8192",
        "RMSNORM_MAX_QUEUE": "2",
        "RMSNORM_DEVICES": "cpu*2",
        "RMSNORM_RESULTS_DIR": str(tmp_path / "r"),
        "RMSNORM_CEILING_BYTES": "65536",
        "RMSNORM_CASE_TIMEOUT_S": "7.5",
        "RMSNORM_PLUGINS": "a.b, c:d",
        "RMSNORM_SELF_CHECK": "gpu",
        "RMSNORM_START_WORKERS": "0",
        "RMSNORM_STATIC_DIR": str(tmp_path / "s"),
        "RMSNORM_TEMPLATES_DIR": str(tmp_path / "t"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s = Settings.from_env()
    assert (s.data_dir, s.host, s.port, s.api_token) == (tmp_path / "d", "0.0.0.0", 8123, "tok")
    assert s.allow_no_token and s.exposed_declared and s.exposed
    assert s.allowed_hosts == ("bench.example", "other.example")
    assert (s.max_body_bytes, s.max_import_bytes, s.max_queue) == (4096, 8192, 2)
    assert s.devices == ("cpu:0", "cpu:1") and s.results_dir == tmp_path / "r"
    assert (s.ceiling_bytes, s.case_timeout_s, s.plugins) == (65536, 7.5, ("a.b", "c:d"))
    assert s.self_check == "gpu" and s.start_workers is False
    assert (s.static_dir, s.templates_dir) == (tmp_path / "s", tmp_path / "t")
    assert Settings.from_env(max_queue=5, exposed=False).max_queue == 5  # keywords win
    monkeypatch.setenv("RMSNORM_SELF_CHECK", "sometimes")
    with pytest.raises(ValueError, match="RMSNORM_SELF_CHECK"):
        Settings.from_env()


def test_defaults(monkeypatch):
    for key in (
        "RMSNORM_HOST",
        "RMSNORM_PORT",
        "RMSNORM_API_TOKEN",
        "RMSNORM_MAX_QUEUE",
        "RMSNORM_CASE_TIMEOUT_S",
        "RMSNORM_MAX_BODY_BYTES",
        "RMSNORM_EXPOSED",
        "RMSNORM_SELF_CHECK",
        "RMSNORM_PLUGINS",
    ):
        monkeypatch.delenv(key, raising=False)
    s = Settings.from_env()
    assert (s.host, s.port, s.api_token, s.max_queue, s.case_timeout_s) == ("127.0.0.1", 8000, None, 8, 900.0)
    assert s.max_body_bytes == 1 << 20 and not s.exposed and s.self_check == "off" and s.plugins == ()


def test_default_folders_are_the_checkouts(monkeypatch):
    """One home for the repository root (engine.device.PACKAGE_ROOT): the service's static/, templates/ and
    results/ are there, and git is asked there (a header names the commit it was measured at)."""
    for key in ("RMSNORM_STATIC_DIR", "RMSNORM_TEMPLATES_DIR", "RMSNORM_RESULTS_DIR"):
        monkeypatch.delenv(key, raising=False)
    from engine import device

    s = Settings.from_env()
    assert (s.templates_dir / "index.html").is_file() and (s.static_dir / "js").is_dir()
    assert s.results_dir == device.PACKAGE_ROOT / "results" and (device.PACKAGE_ROOT / "app" / "settings.py").is_file()
