"""API-only models: the benchmark request (the engine's `Sweep` plus scheduling fields), the stream's line
envelopes, the run listing and the health document. Result rows and run headers are the engine's own models.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.models import DEVICE_RE, ResultRow, RunFile, RunHeader, Sweep

FAKE_CPU_DEVICE = re.compile(r"^cpu:\d{1,3}$")
"""A spelling the service adds to the engine's (`rmsnorm_kernels.limits.DEVICE_RE`): a fake CPU device's label."""
GPU_MODEL = re.compile(r"^[a-z0-9][a-z0-9._+-]{1,15}$")
"""The other: a GPU model (``h100``, ``a100-80g``, ``l40s``): any device whose model or name contains it."""
NODE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
RUN_ID_REGEX = r"^(?!import$)(?!.*\.(?:csv|json)$)[A-Za-z0-9][A-Za-z0-9_.:\-]{0,199}$"
RUN_ID_PATTERN = re.compile(RUN_ID_REGEX)
"""A run id /api/runs/{id} can address: starts with a letter or digit (so never \".\" or \"..\"), is not
\"import\" and does not end in .csv/.json (those URLs are other operations')."""


class BenchmarkRequest(Sweep):
    """`POST /benchmark`: a `Sweep`, where to run it, and whether to spread it over every device."""

    device: str = Field(
        default="auto",
        max_length=16,
        description='"auto" (the least busy device), "cpu"/"cuda" (the least busy of that kind), one device: '
        '"cuda:<index>" / "cpu:<index>" as listed by /api/health, or a GPU model ("H100": the least busy device '
        'whose model or name contains it)',
    )
    split: bool = Field(
        default=False,
        description="spread the cases over every device (each case goes to whichever worker is free)",
    )
    node: Optional[str] = Field(
        default=None,
        max_length=128,
        pattern=NODE_NAME,
        description="only the devices of this node (a fleet's host name, address or node id, as /api/health lists)",
    )
    fleet: Optional[Literal["each-model"]] = Field(
        default=None,
        description='"each-model": one run per GPU model among the devices the request may use, linked by a '
        '"group_id" (each header also lists every run of the group in "linked_runs")',
    )

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:  # replaces Sweep's check: fake CPU devices have indices, GPUs models
        value = value.strip().lower()
        if not (DEVICE_RE.match(value) or FAKE_CPU_DEVICE.match(value) or GPU_MODEL.match(value)):
            raise ValueError(
                f'device must be "auto", "cpu", "cuda", "cpu:<index>", "cuda:<index>" or a GPU model '
                f'such as "H100", got {value!r}'
            )
        return value

    def engine_sweep(self) -> Sweep:
        """The engine's `Sweep` part, as validated here (not validated again: the fields are the same and so are
        their checks); its device is ``auto`` (each worker runs it on its own device)."""
        fields = {name: getattr(self, name) for name in Sweep.model_fields}
        fields["device"] = "auto"
        return Sweep.model_construct(_fields_set=set(self.model_fields_set) & set(Sweep.model_fields), **fields)


class Summary(BaseModel):
    model_config = ConfigDict(extra="allow")

    run_id: Optional[str] = None
    rows: int = 0
    ok: int = 0
    skipped: int = 0
    error: int = 0
    complete: bool = False
    best: dict[str, Any] = Field(default_factory=dict, description="per pass, the case with the highest GB/s")


class RunDocument(BaseModel):
    """A run as one document (a result file): header, rows, summary; ``headers`` (one per device) when a split
    run used several devices."""

    run: Optional[RunHeader] = Field(description="null only when no device could start the run")
    rows: list[ResultRow]
    summary: Summary
    headers: Optional[list[RunHeader]] = None


class QueuedLine(BaseModel):
    type: Literal["queued"] = "queued"
    run_id: str
    position: int = Field(description="0 = starting now; n = n jobs ahead on that device")
    device: str
    devices: Optional[list[str]] = Field(default=None, description="split runs: every device it is queued on")


class RunListing(BaseModel):
    run_id: str
    created_at: Optional[str] = None
    device_name: Optional[str] = None
    kind: Optional[str] = None
    rows: int
    complete: bool
    source: Literal["live", "import"]
    timing: Optional[str] = Field(
        None,
        description='how its rows were timed: "events" or "cuda-graph" (launch '
        'overhead left out; not comparable with event timings)',
    )
    label: Optional[str] = Field(None, description="the imported file's name (results/ at start, or ?label= on import)")
    git_commit: Optional[str] = None
    git_dirty: Optional[bool] = None
    versions: dict[str, Optional[str]] = Field(default_factory=dict, description="torch and triton versions")
    shapes: Optional[dict[str, Any]] = Field(
        None,
        description="its sweep's M, N and dtypes as asked for (one sweep's forward and backward files share them)",
    )
    counts: dict[str, int] = Field(
        default_factory=dict,
        description='rows per status: "ok", "skipped" (e.g. "does not provide this pass"), "error", "wrong"',
    )
    implementations: list[str] = Field(
        default_factory=list,
        description="the implementations with a measured "
        '("ok") row, sorted (the first look prefers the run with the most)',
    )
    passes: list[str] = Field(default_factory=list, description='the passes with a measured row: "bwd", "fwd"')


class DeviceStatus(BaseModel):
    label: str = Field(description='the name a request pins: "cuda:0", "cpu:1"')
    index: Optional[int] = None
    name: str
    uuid: Optional[str] = None
    queue_length: int = Field(description="jobs running or waiting on this device")
    busy: bool
    ready: bool = Field(description="its worker process is up")
    restarts: int = Field(description="times its worker was restarted after dying")
    ceiling_GBps: Optional[float] = None
    error: Optional[str] = None
    self_check: Optional[dict[str, Any]] = None
    node: Optional[str] = Field(default=None, description="a fleet's GPU: the Ray node id of its machine")
    host: Optional[str] = Field(default=None, description="a fleet's GPU: the host name of its machine")
    model: Optional[str] = Field(default=None, description="a fleet's GPU: its model as Ray knows it (\"H100\")")
    kind: Optional[str] = Field(
        default=None, description="a fleet's GPU: what its actor measures on, \"cuda\" or \"cpu\" (a node without CUDA)"
    )


class Health(BaseModel):
    version: str
    device: str = Field(description='the (first) GPU name, or "cpu"')
    cpu_only: bool
    triton_native: bool = Field(description="Triton kernels compile for a GPU here (not the CPU interpreter)")
    ceiling_GBps: Optional[float] = Field(description="copy ceiling of the first device, once measured")
    gpus: list[DeviceStatus] = Field(description="every benchmark device (fake CPU devices too), with its queue")
    max_queue: int
    token_required: bool = Field(description="writes from where this request came need the API token")
    message: str
    fleet: Optional[dict[str, Any]] = Field(
        default=None,
        description='with a Ray cluster (serve --ray): {"nodes": [{"node_id", "host", "address", '
        '"alive", "models", "gpus": [{"label", "index", "name", "uuid", "queue_length", "busy", "ready"}]}], "gpus", '
        '"ready"}',
    )
    self_check: Optional[dict[str, Any]] = Field(
        default=None,
        description='RMSNORM_SELF_CHECK=gpu: {"ok": true|false|null (pending), "detail"}; a failure '
        'answers 503 (the image\'s HEALTHCHECK sees it)',
    )


def _addressable_run_id_schema(schema: dict, cls) -> None:
    """The import's ``run.run_id`` pattern in its schema too (`_addressable_run_id` checks it), so that a
    schema-valid upload is one the server accepts; RunHeader's own schema (also the responses') is left as is."""
    schema["properties"]["run"] = {
        "allOf": [
            schema["properties"]["run"],
            {
                "type": "object",
                "properties": {"run_id": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": RUN_ID_REGEX}},
            },
        ]
    }


class RunFileUpload(RunFile):
    """`POST /api/runs/import`: a result file; ``headers`` (one per device) is kept when a split run has it.
    Validated strictly (no "8" for 8, no true for 1), numbers finite, times and sizes not negative."""

    model_config = ConfigDict(json_schema_extra=_addressable_run_id_schema)

    headers: Optional[list[RunHeader]] = Field(default=None, max_length=64)
    rows: list[ResultRow] = Field(default_factory=list, max_length=200_000)

    @field_validator("run")
    @classmethod
    def _addressable_run_id(cls, run: RunHeader) -> RunHeader:
        run_id = run.run_id
        if not RUN_ID_PATTERN.match(run_id):
            raise ValueError(
                f"run.run_id must be 1-200 letters, digits, '-', '_', '.' or ':', start with a letter or "
                "digit, not be 'import' and not end in .csv/.json"
                f" so that /api/runs/{{id}} can address it, got {run_id!r}"
            )
        return run


class ImportResult(BaseModel):
    run_id: str
    imported: bool = Field(description="false when a run with this id was already stored (nothing changed)")
    rows: int


class Deleted(BaseModel):
    run_id: str
    deleted: bool = True


class ErrorBody(BaseModel):
    detail: Any
