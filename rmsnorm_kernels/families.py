"""How a backward reduces dγ over the rows: its **family**, declared by the implementation, never guessed.

dγ[n] = Σ_rows dy·x·rstd is a reduction over all M rows, and how a backward does it decides how many extra
bytes it moves and how much memory it needs on top of dx: an ``atomic`` backward adds every program's
partial into one fp32 vector, a ``workspace`` or ``persistent`` one writes a [G, N] fp32 partial buffer and
sums it in a second kernel. A `BackwardFamily` says that in numbers, from the implementation's launch grid:

- ``partial_rows(grid, M, N)``: rows of the fp32 dγ partial buffer (memory: ``partial_rows · N · 4``, or
  ``partial_bytes(grid, M, N)`` when its scratch is more than that buffer);
- ``extra_bytes(grid, M, N)``: traffic on top of the pass's minimum bytes (default: that buffer written and
  read back, ``2 · partial_rows · N · 4``), with ``extra_bytes_note`` saying what it is and whether it is an
  estimate.

An implementation registered with ``family=<BackwardFamily>`` has its ``launch(M, N, sm_count)`` return its
grid plus these numbers (`FamilyLaunch`); the engine's byte model and memory estimate read them through
`extra_traffic` and `partial_bytes`, and the API lists the family (`Implementation.describe`). A new dγ
strategy is therefore one Python file: its kernels, its `BackwardFamily`, its ``@register`` (plus one
painter in the dashboard's dock, which draws an unknown family generically until it has one).

Torch-free and Triton-free: the registry, the engine and the service import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

PARTIAL_BYTES = 4
"""dγ partials are accumulated and stored in fp32."""

GENERIC_FAMILIES = {
    "baseline": "a peer the kernels are measured against (opaque: no launch grid)",
    "other": "no dγ reduction of its own to draw (e.g. a forward-only kernel)",
}
"""Family names that are not a dγ strategy; any other name is a family (declared or only drawn by name)."""

Numbers = Callable[[dict, int, int], int]


def programs(grid: dict, M: int, N: int) -> int:
    """One partial row per program (the workspace and persistent strategies)."""
    return int(grid["programs"])


@dataclass(frozen=True)
class BackwardFamily:
    """A dγ strategy: its name (what the dock draws), one line on how it reduces, and its numbers."""

    name: str
    description: str
    partial_rows: Numbers = field(default=programs, compare=False)
    """``(grid, M, N) -> rows`` of the fp32 partial buffer its backward writes and reads back."""
    extra_bytes: Optional[Numbers] = field(default=None, compare=False)
    """``(grid, M, N) -> bytes`` moved on top of the minimum; ``None``: the partial buffer written and read."""
    extra_bytes_note: Optional[Callable[[dict, int, int], str]] = field(default=None, compare=False)
    """``(grid, M, N) -> text``: what ``extra_bytes`` counts (say "estimate" where it is one)."""
    partial_bytes: Optional[Numbers] = field(default=None, compare=False)
    """``(grid, M, N) -> bytes`` of dγ scratch its backward allocates (the memory estimate); ``None``: the fp32
    partial buffer, ``partial_rows · N · 4``. (The naive CUDA chain adds its M×N tensor of contributions.)"""
    partial_rows_text: str = "one per program"
    """The rule for ``partial_rows`` in words (the listing shows it)."""
    extra_bytes_text: str = "2·partial_rows·N·4: the fp32 partials written and read back"
    """The rule for ``extra_bytes`` in words."""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str) or not _is_family_name(self.name):
            raise ValueError(f"family name must be lowercase letters, digits, '-' or '_', got {self.name!r}")
        if self.name in GENERIC_FAMILIES:
            raise ValueError(f"{self.name!r} is not a dγ family but a generic label; choose another name")

    def numbers(self, grid: dict, M: int, N: int) -> dict:
        """What the family adds to a launch dict for an [M, N] input with this ``grid``."""
        rows = int(self.partial_rows(grid, M, N))
        if self.extra_bytes is None:
            extra, note = partials_traffic(rows, N)
        else:
            extra = int(self.extra_bytes(grid, M, N))
            note = (
                self.extra_bytes_note(grid, M, N)
                if self.extra_bytes_note is not None
                else "+ extra traffic declared by the implementation"
            )
        scratch = rows * N * PARTIAL_BYTES if self.partial_bytes is None else int(self.partial_bytes(grid, M, N))
        return {
            "family": self.name,
            "partial_rows": rows,
            "partial_bytes": scratch,
            "extra_bytes": extra,
            "extra_bytes_note": note,
        }

    def describe(self) -> dict:
        """JSON-ready: the family and its rules in words (the listing of ``/api/implementations``)."""
        return {
            "name": self.name,
            "description": self.description,
            "partial_rows": self.partial_rows_text,
            "extra_bytes": self.extra_bytes_text,
        }


def _is_family_name(name: str) -> bool:
    return name[0].isalpha() and all(c.islower() or c.isdigit() or c in "-_" for c in name)


def check_family_name(name: object) -> str:
    """A family given by name only (drawn by that name; no numbers of its own): ``baseline``, ``other`` or
    a lowercase name such as ``workspace``."""
    if not isinstance(name, str) or not name or not _is_family_name(name):
        raise ValueError(
            f"family must be a BackwardFamily or a lowercase name ({', '.join(GENERIC_FAMILIES)}, "
            f"or a dγ strategy such as 'workspace'), got {name!r}"
        )
    return name


class FamilyLaunch:
    """``launch(M, N, sm_count)``: the implementation's grid, then its family's numbers (`BackwardFamily.numbers`).
    The registry builds it; ``grid`` and ``family`` stay readable."""

    def __init__(self, grid: Callable[[int, int, int], dict], family: BackwardFamily) -> None:
        self.grid = grid.grid if isinstance(grid, FamilyLaunch) else grid
        self.family = family

    def __call__(self, M: int, N: int, sm_count: int) -> dict:
        grid = dict(self.grid(M, N, sm_count))
        return {**grid, **self.family.numbers(grid, M, N)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FamilyLaunch) and (self.grid, self.family) == (other.grid, other.family)

    def __hash__(self) -> int:
        return hash((self.grid, self.family))

    def __repr__(self) -> str:
        return f"FamilyLaunch({getattr(self.grid, '__name__', self.grid)!r}, {self.family.name!r})"


def partials_traffic(rows: int, N: int) -> tuple[int, str]:
    """The fp32 partial buffer of ``rows`` rows, written and read back: (bytes, note)."""
    return 2 * rows * N * PARTIAL_BYTES, f"+ fp32 dγ partials written and read back (2·{rows}·N·4)"


def extra_traffic(launch: Optional[dict], N: int) -> Optional[tuple[int, str]]:
    """(extra bytes, note) a backward's launch dict declares, or ``None`` when it declares none. A launch that
    gives only ``partial_rows`` (a plugin without a `BackwardFamily`) counts its partials written and read."""
    if not launch:
        return None
    if launch.get("extra_bytes") is not None:
        return int(launch["extra_bytes"]), str(
            launch.get("extra_bytes_note") or "+ extra traffic declared by the implementation"
        )
    if launch.get("partial_rows"):
        return partials_traffic(int(launch["partial_rows"]), N)
    return None


def partial_bytes(launch: Optional[dict], N: int) -> int:
    """Bytes of the fp32 dγ partial buffer a launch dict declares (0 when none)."""
    if not launch:
        return 0
    if launch.get("partial_bytes") is not None:
        return int(launch["partial_bytes"])
    return int(launch.get("partial_rows") or 0) * N * PARTIAL_BYTES
