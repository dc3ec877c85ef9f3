"""The engine's data shapes (pydantic v2): what a benchmark request is, and what a run produces.

The same models are the request body of ``POST /benchmark``, the lines of the stream, the rows of the
store and the contents of ``results/*.json`` (see docs/ARCHITECTURE.md). They import no torch, so the
service can validate a request without touching a device.

- `Sweep`: the request. Every field has a default; lists are non-empty, unique, at most 64 entries;
  dtype names are normalised to torch's spelling (``bf16`` → ``bfloat16``); implementation names are
  checked against the registry (pass ``context={"registry": reg}`` to `Sweep.model_validate` to use
  another registry than the global one).
- `Case`: one measurement (implementation, pass, dtype, M, N).
- `RunHeader`, `ResultRow`, `RunFile`: exactly the documented JSON; the field ``pass`` is a Python
  keyword, so the attribute is ``pass_`` and every dump uses the alias (``model_dump()`` → ``"pass"``).
  Rows and headers accept extra fields, so a newer engine's files still load here.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from rmsnorm_kernels.registry import Registry, default_registry  # noqa: F401  (re-exported)
from engine.presets import get_preset, random_widths
from rmsnorm_kernels.limits import DEFAULT_SM_COUNT, DEVICE_RE, MAX_N  # noqa: F401  (MAX_N, DEFAULT_SM_COUNT re-exported for the service)

MAX_LIST = 64
MAX_WIDTHS = 128
"""N may list more values than the other lists: a width scan (64 widths) plus random widths."""
MAX_M = 1 << 20
MAX_ELEMENTS = 1 << 31
"""Largest M·N of one case (elements of x)."""

DTYPE_ALIASES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}
"""Accepted dtype spellings → torch's spelling (also accepted with a ``torch.`` prefix)."""

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

Pass = Literal["fwd", "bwd"]
Status = Literal["ok", "skipped", "error", "wrong"]
"""``wrong``: timed, but the correctness gate found the output off the fp64 reference (never ranked best)."""
Mode = Literal["cuda", "cpu", "interpreter"]

UNIQUE = {"uniqueItems": True}
Rows = Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": MAX_M})]
Cols = Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": MAX_N})]
"""M and N: the limits are in the schema (so a fuzzer's schema-valid values pass) and enforced by the sweep's own
validators, whose messages name the value and the range."""
SHAPE_LIST = {"uniqueItems": True, "minItems": 1, "maxItems": MAX_LIST}
WIDTH_LIST = {"uniqueItems": True, "minItems": 1, "maxItems": MAX_WIDTHS}
Name = Annotated[str, Field(min_length=1, max_length=64)]
Short = Annotated[str, Field(max_length=200)]
"""Strings of imported files are bounded, so one file cannot make every listing megabytes long."""
Time = Annotated[float, Field(ge=0)]


def normalise_dtype(name: str) -> str:
    """``"bf16"`` → ``"bfloat16"``; raises ValueError naming the accepted spellings."""
    key = str(name).strip().lower()
    key = key[len("torch.") :] if key.startswith("torch.") else key
    try:
        return DTYPE_ALIASES[key]
    except KeyError:
        raise ValueError(
            f"unknown dtype {name!r}; use one of bfloat16, float16, float32 (or bf16, fp16, half, fp32, float)"
        ) from None


class AliasModel(BaseModel):
    """Dumps by alias by default, so ``pass_`` is written as ``"pass"`` everywhere."""

    model_config = ConfigDict(populate_by_name=True)

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("by_alias", True)
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        kwargs.setdefault("by_alias", True)
        return super().model_dump_json(**kwargs)


def _unique_bounded(values: list, field: str, limit: int = MAX_LIST) -> list:
    if not values:
        raise ValueError(f"{field} must not be empty")
    if len(values) > limit:
        raise ValueError(f"{field} has {len(values)} entries; at most {limit} are allowed")
    seen = set()
    dupes = [v for v in values if v in seen or seen.add(v)]
    if dupes:
        raise ValueError(f"{field} has repeated entries: {sorted(set(dupes))}")
    return values


class Sweep(AliasModel):
    """A benchmark request: every combination of implementations × passes × dtypes × M × N is one case."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    implementations: Optional[list[Name]] = Field(
        default=None,
        min_length=1,
        max_length=MAX_LIST,
        json_schema_extra=UNIQUE,
        description="implementation names; omitted or null = every implementation available here",
    )
    passes: list[Pass] = Field(
        default_factory=lambda: ["fwd", "bwd"], min_length=1, max_length=2, json_schema_extra=UNIQUE
    )
    dtypes: list[Annotated[str, Field(max_length=16)]] = Field(
        default_factory=lambda: ["bfloat16"],
        min_length=1,
        max_length=MAX_LIST,
        json_schema_extra=UNIQUE,
        description="bfloat16/float16/float32 or bf16/fp16/fp32/half/float",
    )
    M: list[Rows] = Field(
        default_factory=lambda: [4096, 16384, 65536],
        json_schema_extra=SHAPE_LIST,
        description=f"rows, 1..{MAX_M} (M·N at most {MAX_ELEMENTS})",
    )
    N: list[Cols] = Field(
        default_factory=lambda: [512, 1024, 2048, 4096, 8192, 16384],
        json_schema_extra=WIDTH_LIST,
        description=f"row length, 1..{MAX_N}",
    )
    random_widths: int = Field(
        default=0,
        ge=0,
        le=MAX_LIST - 1,
        description="add this many random widths (not multiples of 64) to N, drawn from `seed`",
    )
    seed: Optional[int] = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="seed of the random widths; omitted: a fresh one, recorded in the run's sweep",
    )
    repetitions: int = Field(default=100, ge=1, le=10000)
    warmup: int = Field(default=10, ge=0, le=1000)
    device: str = Field(default="auto", max_length=16, description='"auto", "cpu", "cuda" or "cuda:<index>"')
    timing: Literal["events", "cuda-graph"] = "events"
    triton_interpreter: bool = Field(
        default=False, description="on CPU, run Triton kernels under the Triton interpreter (interpreter timings)"
    )
    preset: Optional[str] = Field(
        default=None,
        max_length=32,
        description="a named shape preset (GET /api/presets), e.g. \"models\": its M and N replace the defaults; "
        "M/N given explicitly still win",
    )
    verify: bool = Field(default=True, description="check every case against the fp64 reference before timing it")
    profile: bool = Field(default=False, description="record each case's kernels (torch.profiler) with their times")
    baseline: str = Field(
        default="torch-native",
        max_length=64,
        description="the implementation the summary's per-shape speedups are relative to",
    )

    @field_validator("implementations")
    @classmethod
    def _known_implementations(cls, value: Optional[list[str]], info: ValidationInfo) -> Optional[list[str]]:
        if value is None:
            return None
        _unique_bounded(value, "implementations")
        registry = (info.context or {}).get("registry")
        if registry is None:
            registry = default_registry()
        unknown = [name for name in value if name not in registry]
        if unknown:
            known = ", ".join(registry.names()) or "none"
            raise ValueError(f"unknown implementation(s) {', '.join(map(repr, unknown))}; known: {known}")
        return value

    @field_validator("passes")
    @classmethod
    def _passes(cls, value: list[str]) -> list[str]:
        return _unique_bounded(value, "passes")

    @field_validator("dtypes", mode="before")
    @classmethod
    def _dtypes(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return value
        return _unique_bounded([normalise_dtype(v) for v in value], "dtypes")

    @field_validator("M")
    @classmethod
    def _m(cls, value: list[int]) -> list[int]:
        _unique_bounded(value, "M")
        bad = [m for m in value if not 1 <= m <= MAX_M]
        if bad:
            raise ValueError(f"M values must be in 1..{MAX_M}, got {bad}")
        return value

    @field_validator("N")
    @classmethod
    def _n(cls, value: list[int], info: ValidationInfo) -> list[int]:
        _unique_bounded(value, "N", MAX_WIDTHS)
        bad = [n for n in value if not 1 <= n <= MAX_N]
        if bad:
            raise ValueError(f"N values must be in 1..{MAX_N}, got {bad}")
        ms = info.data.get("M")
        if ms:
            too_big = [(m, n) for m in ms for n in value if m * n > MAX_ELEMENTS]
            if too_big:
                m, n = max(too_big, key=lambda mn: mn[0] * mn[1])
                raise ValueError(f"M·N must be at most {MAX_ELEMENTS} elements per case; M={m} × N={n} = {m * n}")
        return value

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            get_preset(value)  # ValueError naming the known presets
        return value

    @model_validator(mode="after")
    def _apply_preset(self) -> "Sweep":
        """A preset's M and N replace the defaults, then ``random_widths`` widths drawn from ``seed`` join N. "Explicit" means the field was in the request
        (pydantic's ``model_fields_set``): an explicit M or N wins, even when equal to the default; the other
        comes from the preset. The validated sweep then carries the resolved lists (and keeps ``preset``)."""
        if self.preset is not None:
            preset = get_preset(self.preset)
            explicit = self.model_fields_set
            if "M" not in explicit:
                self.M = list(preset["M"])
            if "N" not in explicit:
                self.N = list(preset["N"])
        elif not self.random_widths:
            return self
        if self.random_widths:
            if self.seed is None:
                self.seed = secrets.randbelow(2**31)
            # the same seed draws the same widths: validating the recorded sweep again adds nothing
            drawn = [n for n in random_widths(self.random_widths, self.seed) if n not in self.N]
            self.N = sorted(_unique_bounded([*self.N, *drawn], "N", MAX_WIDTHS))
        too_big = [(m, n) for m in self.M for n in self.N if m * n > MAX_ELEMENTS]
        if too_big:
            m, n = max(too_big, key=lambda mn: mn[0] * mn[1])
            raise ValueError(f"M·N must be at most {MAX_ELEMENTS} elements per case; M={m} × N={n} = {m * n}")
        return self

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        value = value.strip().lower()
        if not DEVICE_RE.match(value):
            raise ValueError(f'device must be "auto", "cpu", "cuda" or "cuda:<index>", got {value!r}')
        return value


class Case(AliasModel):
    """One measurement."""

    impl: str
    pass_: Pass = Field(alias="pass")
    dtype: str
    M: int
    N: int

    def label(self) -> str:
        return f"{self.impl} {self.pass_} {self.dtype} {self.M}x{self.N}"


class DeviceInfo(AliasModel):
    """The run header's ``device``."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    kind: Literal["cuda", "cpu"]
    index: Optional[int] = None
    name: Short
    uuid: Optional[Short] = None
    sm_count: int = Field(ge=0, description="streaming multiprocessors; on CPU the logical cores")
    memory_bytes: int = Field(ge=0)
    l2_bytes: int = Field(ge=0, description="L2 cache; on CPU the last-level cache")
    capability: Optional[Short] = None


class RowDevice(AliasModel):
    """A row's ``device``: enough to put it in its per-GPU lane."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    index: Optional[int] = None
    name: Short
    uuid: Optional[Short] = None


class RunHeader(AliasModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    run_id: Annotated[str, Field(min_length=1, max_length=200)]
    created_at: str = Field(max_length=64, description="ISO 8601 UTC, e.g. 2026-12-02T14:00:00Z")
    device: DeviceInfo
    ceiling_GBps: Optional[float] = Field(ge=0, description="measured copy bandwidth, read+write bytes / median time")
    ceiling_method: Annotated[str, Field(max_length=1000)]
    versions: dict[Annotated[str, Field(max_length=64)], Optional[Short]] = Field(max_length=64)
    git_commit: Optional[Short] = None
    host: Optional[Short] = None
    sweep: dict[str, Any] = Field(description="the request, with the implementation list resolved")


class ResultRow(AliasModel):
    """One case's result. Times are null unless ``status`` is ``"ok"`` or ``"wrong"`` (timed, but failed the
    correctness gate); ``reason`` says why otherwise."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    run_id: Annotated[str, Field(max_length=200)]
    impl: Name
    pass_: Pass = Field(alias="pass")
    dtype: Annotated[str, Field(max_length=16)]
    M: int = Field(ge=1)
    N: int = Field(ge=1)
    status: Status
    reason: Optional[Annotated[str, Field(max_length=4000)]] = None
    median_us: Optional[Time] = None
    min_us: Optional[Time] = None
    max_us: Optional[Time] = None
    q1_us: Optional[Time] = None
    q3_us: Optional[Time] = None
    repetitions: int = Field(default=0, ge=0)
    bytes: int = Field(ge=0, description="minimum bytes of the pass (engine.byte_model)")
    actual_bytes: Optional[int] = Field(default=None, ge=0, description="bytes incl. known extra traffic, where known")
    GBps: Optional[float] = Field(default=None, ge=0, description="bytes / median time, 1e9 bytes per second")
    pct_of_ceiling: Optional[float] = Field(
        default=None, ge=0, description="GBps as a percentage (0–100) of the run's ceiling"
    )
    mode: Mode
    device: RowDevice
    launch: Optional[dict[str, Any]] = None
    device_mallocs: Optional[int] = Field(
        default=None,
        ge=0,
        description="cudaMalloc calls made during the timed repetitions (CUDA events timing): "
        "nonzero means some timed calls waited for an allocation; null: not counted (CPU, CUDA graphs, older files)",
    )
    peak_bytes: Optional[int] = Field(
        default=None,
        ge=0,
        description="bytes the pass itself allocates at its peak (outputs and temporaries, "
        "inputs not counted): the CUDA caching allocator's peak during one call after the timed ones, less what "
        "was allocated as it began; null: not measured (peak_bytes_note says why: CPU, CUDA graphs, older files)",
    )
    set_medians_us: Optional[list[Time]] = Field(
        default=None,
        max_length=64,
        description="median time of the repetitions on each rotating input set, in set order (CUDA events timing, "
        "two sets or more): sets far apart mean the time depends on where the inputs lie, not on the kernel alone",
    )
    started_at: float = Field(ge=0)
    ended_at: float = Field(ge=0)
    verified: Optional[bool] = Field(
        default=None,
        description="true: matched the fp64 reference on this case's inputs; false: did not (status "
        "wrong); null: not checked (older files, skipped/error rows, verify off)",
    )
    max_rel_err: Optional[float] = Field(default=None, ge=0, description="largest relative error of y (dx, dγ) found")
    tolerance: Optional[float] = Field(default=None, ge=0, description="the relative error the check allowed")
    profile: Optional[dict[str, Any]] = Field(
        default=None,
        description='kernel breakdown when the sweep asked for it: {"source": "cuda"|"cpu", '
        '"kernels": [{"name", "median_us", "calls"}], "kernel_us", "busy_us", "host_us", "gap_us"}',
    )

    def case(self) -> Case:
        return Case(impl=self.impl, pass_=self.pass_, dtype=self.dtype, M=self.M, N=self.N)


class RunFile(AliasModel):
    """A result file / ``GET /api/runs/{id}``: ``{"run": header, "rows": [...], "summary": {...}}``."""

    run: RunHeader
    rows: list[ResultRow] = Field(default_factory=list)
    summary: dict[str, Any] = Field(default_factory=dict)


def format_validation_error(exc: ValidationError) -> str:
    """One short line per problem, each starting with the field it is about."""
    lines = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(p) for p in err.get("loc", ())) or "request"
        msg = err.get("msg", "invalid")
        msg = msg[len("Value error, ") :] if msg.startswith("Value error, ") else msg
        lines.append(f"{field}: {msg}")
    return "\n".join(lines)
