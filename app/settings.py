"""Service settings (pydantic-settings): where data lives, where to listen, who may write, how big a body may be,
how long a queue may grow, and which devices get a benchmark worker.

Every field has an environment variable ``RMSNORM_<FIELD>`` and a keyword (used by `serve` and the CLI flags);
keywords win over the environment. Routes get the settings through the FastAPI dependency `get_settings`
(`create_app` points it at the app's own settings).

| field            | env                        | default                                                   |
|------------------|----------------------------|-----------------------------------------------------------|
| data_dir         | RMSNORM_DATA_DIR           | ./data (the SQLite store lives there)                     |
| host, port       | RMSNORM_HOST, _PORT        | 127.0.0.1, 8000                                           |
| api_token        | RMSNORM_API_TOKEN          | none                                                      |
| allow_no_token   | RMSNORM_ALLOW_NO_TOKEN     | off: an exposed service without a token refuses writes    |
| exposed          | RMSNORM_EXPOSED            | off: set it behind a reverse proxy on a loopback bind     |
| allowed_hosts    | RMSNORM_ALLOWED_HOSTS      | adds Host names to loopback names and IP literals (every request) |
| allowed_origins  | RMSNORM_ALLOWED_ORIGINS    | adds origins a write may come from besides the Host's own (a proxy) |
| heartbeat_s      | RMSNORM_HEARTBEAT_S        | 4 s: a stream silent this long gets a heartbeat line      |
| max_body_bytes   | RMSNORM_MAX_BODY_BYTES     | 1 MiB (POST /benchmark and every other body)              |
| max_import_bytes | RMSNORM_MAX_IMPORT_BYTES   | 16 MiB (POST /api/runs/import)                            |
| max_queue        | RMSNORM_MAX_QUEUE          | 8 jobs waiting per device; one more is answered 429       |
| devices          | RMSNORM_DEVICES            | every visible GPU (CUDA_VISIBLE_DEVICES), else one cpu    |
| results_dir      | RMSNORM_RESULTS_DIR        | the repository's results/ (imported at start; "" = off)   |
| ceiling_bytes    | RMSNORM_CEILING_BYTES      | the engine's default copy size                            |
| case_timeout_s   | RMSNORM_CASE_TIMEOUT_S     | 900 s: a case still running then is an error row, its worker restarted |
| plugins          | RMSNORM_PLUGINS            | none (module or module:object paths, comma-separated)     |
| self_check       | RMSNORM_SELF_CHECK         | off; "gpu": every worker runs one Triton case at start-up and /api/health answers 503 until it passed |
| ray_address      | RMSNORM_RAY_ADDRESS        | none: local worker processes; an address (``auto``: the running cluster) sends every case to a Ray actor holding one GPU of the cluster (app/fleet.py) |
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from engine.device import PACKAGE_ROOT as PROJECT_ROOT  # the one home of the repository root

DEFAULT_MAX_QUEUE = 8
MIB = 1 << 20
PLOTLY_JS = "plotly-basic.min.js"  # static/vendor/: plotly.js's partial bundle of the traces the page draws
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "ip6-localhost")


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


def _is_ip_literal(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def _comma_list(value):
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RMSNORM_", frozen=True, extra="forbid")

    data_dir: Path = Path("data")
    host: str = "127.0.0.1"
    port: int = Field(8000, gt=0, lt=65536)
    api_token: Optional[str] = None
    allow_no_token: bool = False
    exposed_declared: bool = Field(False, validation_alias="RMSNORM_EXPOSED")
    """Declared reachable from elsewhere (a reverse proxy in front of a loopback bind): writes need the token."""
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = LOOPBACK_NAMES
    """Host header names (port ignored) any request may carry besides loopback names and IP literals, which are
    always accepted (DNS rebinding needs a name the attacker owns); "*" = any."""
    allowed_origins: Annotated[tuple[str, ...], NoDecode] = ()
    """Origins (``https://bench.example.com``) a write may come from besides the one its Host header names: behind a
    reverse proxy that rewrites Host, the browser's origin. A write from any other origin is refused (403)."""
    heartbeat_s: float = Field(4.0, gt=0, le=5)
    """A stream that sent nothing for this long gets a ``heartbeat`` line (proxies and clients with read timeouts
    drop a silent connection; a case may run for minutes)."""
    max_body_bytes: int = Field(1 * MIB, ge=1024)
    max_import_bytes: int = Field(16 * MIB, ge=1024)
    max_queue: int = Field(DEFAULT_MAX_QUEUE, ge=0)
    devices: Annotated[Optional[tuple[str, ...]], NoDecode] = None
    """Worker labels (``cuda:N`` / ``cpu:N``); ``None`` = discover at start (`resolved_devices`)."""
    results_dir: Optional[Path] = PROJECT_ROOT / "results"
    static_dir: Path = PROJECT_ROOT / "static"
    templates_dir: Path = PROJECT_ROOT / "templates"
    ceiling_bytes: Optional[int] = Field(None, ge=1)
    case_timeout_s: float = Field(900.0, gt=0)
    """A case (warm-up, compile and timing) still unanswered after this long is a hung kernel: its worker is killed
    and restarted and the case becomes an error row, so one bad kernel never blocks a device's queue."""
    plugins: Annotated[tuple[str, ...], NoDecode] = ()
    self_check: Literal["off", "gpu"] = "off"
    ray_address: Optional[str] = Field(None, max_length=500)
    """A Ray cluster (``auto``, ``ray://host:10001``, ``host:6379``): the devices are its GPUs, one actor each
    (`app.fleet`); None = this host's GPUs through local worker processes. Configuration only, never a request's."""
    start_workers: bool = True
    """Start the worker processes when the app starts (False: on the first benchmark, as tests may prefer)."""

    @field_validator("devices", mode="before")
    @classmethod
    def _devices(cls, value):
        if value is None:
            return None
        if isinstance(value, str):
            value = value.strip()
            return None if value.lower() in ("", "auto") else tuple(parse_devices(value))
        return tuple(parse_devices(",".join(value)))

    @field_validator("plugins", "allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _lists(cls, value):
        return _comma_list(value)

    @field_validator("results_dir", mode="before")
    @classmethod
    def _results_dir(cls, value):
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("ray_address", mode="before")
    @classmethod
    def _ray_address(cls, value):
        return (
            None if isinstance(value, str) and not value.strip() else value.strip() if isinstance(value, str) else value
        )

    @field_validator("api_token", mode="before")
    @classmethod
    def _token(cls, value):
        return None if isinstance(value, str) and not value.strip() else value

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        """Settings from the environment, then ``overrides`` (keywords whose value is None are ignored). A bad value
        raises ValueError naming its environment variable."""
        if "exposed" in overrides:
            overrides["RMSNORM_EXPOSED"] = overrides.pop("exposed")
        try:
            return cls(**{key: value for key, value in overrides.items() if value is not None})
        except ValidationError as exc:
            problems = "; ".join(
                f"RMSNORM_{'.'.join(map(str, e['loc'])).upper().removeprefix('RMSNORM_')}: {e['msg']}"
                for e in exc.errors()
            )
            raise ValueError(problems) from None

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
        """Configured to listen on an address other machines can reach, or declared so (RMSNORM_EXPOSED). The
        address actually bound is checked per request too (`app.edge.write_refusal`)."""
        return self.exposed_declared or not is_loopback(self.host)

    def host_allowed(self, host_header: str | None) -> bool:
        """Whether a Host header (``name[:port]``) names this service: a loopback name, an IP literal (a page can
        only name an address literally if it was loaded from it, so no DNS rebinding), or a name of the allow-list."""
        if "*" in self.allowed_hosts:
            return True
        name = (host_header or "").strip().lower()
        if name.startswith("["):
            name = name[1:].partition("]")[0]
        elif name.count(":") == 1:
            name = name.partition(":")[0]
        if not name:
            return False
        if name in LOOPBACK_NAMES or _is_ip_literal(name):
            return True
        return name in {h.lower().strip("[]") for h in self.allowed_hosts}


@lru_cache(maxsize=1)
def _from_environment() -> Settings:
    return Settings.from_env()


def get_settings() -> Settings:
    """FastAPI dependency: the app's settings (`create_app` overrides it with its own; else the environment's)."""
    return _from_environment()


def write_refusal(
    settings: Settings, presented_token: str | None, *, exposed: bool | None = None, host_header: str | None = None
) -> tuple[int, str] | None:
    """Why a write request (POST /benchmark, DELETE, import) must be refused, as (status, reason); None = allowed.

    ``exposed``: whether this request reached the service on an address other machines can reach (default: what
    the settings say). Exposed, the token is required (constant-time compare); with no token configured, writes
    are refused unless `allow_no_token` was set deliberately. A write that no token protects must carry a Host
    header from `allowed_hosts` (a page on another origin that rebinds its DNS name to 127.0.0.1 cannot write)."""
    import hmac

    exposed = settings.exposed if exposed is None else exposed
    if exposed and settings.api_token:
        if presented_token and hmac.compare_digest(presented_token.encode(), settings.api_token.encode()):
            return None
        if not presented_token:
            return 401, (
                "this server is reachable from other machines, so writes need the API token: send the header "
                "'Authorization: Bearer <token>' (or 'X-API-Token: <token>')"
            )
        return 403, "the API token sent does not match RMSNORM_API_TOKEN"
    if exposed and not settings.allow_no_token:
        return 403, (
            "this server is reachable from other machines with no API token configured, so it runs no one's "
            "sweep: set RMSNORM_API_TOKEN (or RMSNORM_ALLOW_NO_TOKEN=1 to allow writes without one)"
        )
    if host_header is not None:
        return host_refusal(settings, host_header)
    return None


def host_refusal(settings: Settings, host_header: str | None) -> tuple[int, str] | None:
    """Why a request (any method: `app.edge.HostAndHeaders`) must be refused for its Host header; None = allowed.
    A page of another site whose DNS name now resolves to 127.0.0.1 (DNS rebinding) sends its own name."""
    if settings.host_allowed(host_header):
        return None
    extra = (
        f", or {', '.join(h for h in settings.allowed_hosts if h not in LOOPBACK_NAMES)}"
        if set(settings.allowed_hosts) - set(LOOPBACK_NAMES)
        else ""
    )
    return 403, (
        f"this service answers only a Host that is a loopback name, an IP address{extra}; this request "
        f"names Host {(host_header or '')[:100]!r} (set RMSNORM_ALLOWED_HOSTS to add it)"
    )
