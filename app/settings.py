"""Service settings: where data lives, where to listen, who may start a sweep, how long a queue may grow,
and which devices get a benchmark worker.

Every field has an environment variable (read by `Settings.from_env`) and a keyword (used by `serve` and the
CLI flags); keywords win over the environment.

| field          | env                      | default                                                |
|----------------|--------------------------|--------------------------------------------------------|
| data_dir       | RMSNORM_DATA_DIR         | ./data (the SQLite store lives there)                  |
| host, port     | RMSNORM_HOST, _PORT      | 127.0.0.1, 8000                                        |
| api_token      | RMSNORM_API_TOKEN        | none                                                   |
| allow_no_token | RMSNORM_ALLOW_NO_TOKEN   | off: a non-loopback bind without a token refuses writes |
| max_queue      | RMSNORM_MAX_QUEUE        | 8 jobs waiting per device; one more is answered 429     |
| devices        | RMSNORM_DEVICES          | every visible GPU (CUDA_VISIBLE_DEVICES), else one cpu  |
| results_dir    | RMSNORM_RESULTS_DIR      | the repository's results/ (imported at start; "" = off) |
| ceiling_bytes  | RMSNORM_CEILING_BYTES    | the engine's default copy size                          |
| case_timeout_s | RMSNORM_CASE_TIMEOUT_S   | 900 s: a case still running then is an error row, its worker restarted |
| plugins        | RMSNORM_PLUGINS          | none (module or module:object paths, comma-separated)   |
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout (or editable install) holding static/, templates/ and results/."""

DEFAULT_MAX_QUEUE = 8
_TRUE = {"1", "true", "yes", "on"}


def parse_devices(spec: str) -> list[str]:
    """Turn a device list into worker labels.

    ``"cuda:0,cuda:2"`` → ``["cuda:0", "cuda:2"]``; ``"cpu*3"`` or ``"cpu,cpu,cpu"`` → ``["cpu:0", "cpu:1", "cpu:2"]``
    (three fake CPU devices, for tests); ``"cuda*2"`` → ``["cuda:0", "cuda:1"]``; ``"cpu"`` → ``["cpu:0"]``.
    Raises ValueError naming the bad part."""
    labels: list[str] = []
    counters = {"cpu": 0, "cuda": 0}
    for raw in spec.split(","):
        part = raw.strip().lower()
        if not part:
            continue
        star = re.fullmatch(r"(cpu|cuda)\s*\*\s*(\d+)", part)
        if star:
            kind, count = star.group(1), int(star.group(2))
            if count < 1:
                raise ValueError(f"device count must be at least 1 in {raw.strip()!r}")
            for _ in range(count):
                labels.append(f"{kind}:{counters[kind]}")
                counters[kind] += 1
            continue
        if part in ("cpu", "cuda"):
            labels.append(f"{part}:{counters[part]}")
            counters[part] += 1
            continue
        indexed = re.fullmatch(r"(cpu|cuda):(\d+)", part)
        if indexed:
            kind, index = indexed.group(1), int(indexed.group(2))
            labels.append(f"{kind}:{index}")
            counters[kind] = max(counters[kind], index + 1)
            continue
        raise ValueError(f"cannot read device {raw.strip()!r}: use cuda:N, cpu, cpu:N, cpu*K or cuda*K")
    if not labels:
        raise ValueError("the device list is empty")
    if len(set(labels)) != len(labels):
        raise ValueError(f"a device is listed twice in {spec!r}")
    return labels


def visible_gpu_labels() -> list[str]:
    """``cuda:0 … cuda:K-1`` for the GPUs this process may use (torch honours CUDA_VISIBLE_DEVICES); [] without any."""
    try:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        count = 0
    return [f"cuda:{i}" for i in range(count)]


def is_loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _env_bool(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("data")
    host: str = "127.0.0.1"
    port: int = 8000
    api_token: str | None = None
    allow_no_token: bool = False
    max_queue: int = DEFAULT_MAX_QUEUE
    devices: tuple[str, ...] | None = None
    """Worker labels (``cuda:N`` / ``cpu:N``); ``None`` = discover at start (`resolved_devices`)."""
    results_dir: Path | None = PROJECT_ROOT / "results"
    static_dir: Path = PROJECT_ROOT / "static"
    templates_dir: Path = PROJECT_ROOT / "templates"
    ceiling_bytes: int | None = None
    case_timeout_s: float = 900.0
    """A case (warm-up, compile and timing) still unanswered after this long is a hung kernel: its worker is killed
    and restarted and the case becomes an error row, so one bad kernel never blocks a device's queue."""
    plugins: tuple[str, ...] = ()
    start_workers: bool = True
    """Start the worker processes when the app starts (False: on the first benchmark, as tests may prefer)."""

    def __post_init__(self) -> None:
        if self.max_queue < 0:
            raise ValueError(f"max_queue must be 0 or more, got {self.max_queue}")
        if not self.case_timeout_s > 0:
            raise ValueError(f"case_timeout_s must be positive, got {self.case_timeout_s}")
        if not (0 < self.port < 65536):
            raise ValueError(f"port must be 1..65535, got {self.port}")
        if self.devices is not None:
            object.__setattr__(self, "devices", tuple(parse_devices(",".join(self.devices))))
        object.__setattr__(self, "data_dir", Path(self.data_dir))
        if self.results_dir is not None:
            object.__setattr__(self, "results_dir", Path(self.results_dir))

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        """Settings from the environment, then ``overrides`` (keywords whose value is None are ignored)."""
        env: dict = {}
        if os.environ.get("RMSNORM_DATA_DIR"):
            env["data_dir"] = Path(os.environ["RMSNORM_DATA_DIR"])
        if os.environ.get("RMSNORM_HOST"):
            env["host"] = os.environ["RMSNORM_HOST"]
        port = _env_int("RMSNORM_PORT", None)
        if port is not None:
            env["port"] = port
        if os.environ.get("RMSNORM_API_TOKEN"):
            env["api_token"] = os.environ["RMSNORM_API_TOKEN"]
        env["allow_no_token"] = _env_bool("RMSNORM_ALLOW_NO_TOKEN")
        max_queue = _env_int("RMSNORM_MAX_QUEUE", None)
        if max_queue is not None:
            env["max_queue"] = max_queue
        if os.environ.get("RMSNORM_DEVICES", "").strip() and os.environ["RMSNORM_DEVICES"].strip().lower() != "auto":
            env["devices"] = tuple(parse_devices(os.environ["RMSNORM_DEVICES"]))
        if "RMSNORM_RESULTS_DIR" in os.environ:
            value = os.environ["RMSNORM_RESULTS_DIR"].strip()
            env["results_dir"] = Path(value) if value else None
        ceiling = _env_int("RMSNORM_CEILING_BYTES", None)
        if ceiling is not None:
            env["ceiling_bytes"] = ceiling
        case_timeout = _env_int("RMSNORM_CASE_TIMEOUT_S", None)
        if case_timeout is not None:
            env["case_timeout_s"] = float(case_timeout)
        for key, value in overrides.items():
            if value is None:
                continue
            if key == "devices" and isinstance(value, str):
                value = None if value.strip().lower() == "auto" else tuple(parse_devices(value))
                if value is None:
                    env.pop("devices", None)
                    continue
            env[key] = value
        return cls(**env)

    def with_(self, **changes) -> "Settings":
        return replace(self, **changes)

    def resolved_devices(self) -> list[str]:
        """The worker labels: the configured list, else every visible GPU, else one CPU device."""
        if self.devices:
            return list(self.devices)
        return visible_gpu_labels() or ["cpu:0"]

    @property
    def db_path(self) -> Path:
        return self.data_dir / "runs.sqlite3"

    @property
    def exposed(self) -> bool:
        """Bound to an address other machines can reach."""
        return not is_loopback(self.host)

    def write_refusal(self, presented_token: str | None) -> tuple[int, str] | None:
        """Why a write request (POST /benchmark, DELETE, import) must be refused, as (status, reason); None = allowed.

        On loopback anyone local may write. Bound elsewhere, the token is required; with no token configured,
        writes are refused unless `allow_no_token` was set deliberately."""
        if not self.exposed:
            return None
        if self.api_token:
            if presented_token == self.api_token:
                return None
            if not presented_token:
                return 401, (f"this server listens on {self.host}, so writes need the API token: send the header "
                             "'Authorization: Bearer <token>' (or 'X-API-Token: <token>')")
            return 403, "the API token sent does not match RMSNORM_API_TOKEN"
        if self.allow_no_token:
            return None
        return 403, (f"this server listens on {self.host} with no API token configured, so it runs no one's sweep: "
                     "set RMSNORM_API_TOKEN (or RMSNORM_ALLOW_NO_TOKEN=1 to allow writes without one)")
