"""How the Triton kernels are configured for a row width N and a row count M: one rule, and per-architecture
tables that `rmsnorm-dash tune` measures over a grid of widths and row counts.

A kernel's choices (tile rows, warps, programs per SM, pipeline stages, which forward kernel) come from

1. the table of the GPU's architecture (``configs/sm90.json`` serves the H100 and any other sm_90 card), or of its
   model where one is shipped (``configs/sm90-h200.json``: `arch_of`); ``RMSNORM_CONFIG_TABLE`` names another file;
   read by **nearest neighbour**: the tuned width nearest N on a log scale among those of
   the same layout class (`layout_class`: how many power-of-two segments the row has, whether the last is masked,
   how many elements the rows' starts are aligned to) within `CLASS_WINDOW` octaves, else of the same alignment
   within `ALIGNMENT_WINDOW`, else aligned or not alike within it, else among all; then the tuned row count nearest
   M. Every configuration is valid at every width (the row layout comes from N itself,
   `rmsnorm_kernels.segments.row_segments`), so a width nobody measured gets a measured neighbour's choice, never an
   untested fallback — unless that choice would hold more than a thread's registers here than at its own width (more
   segments, a masked one, scalar loads: `register_slack`) or, a forward's padded block, leave far more of its lanes
   masked (`PADDED_FILL_RATIO`), when the next nearest is taken;
2. else **the rule** (`rule_forward`, `rule_backward`), which a GPU with no table gets and which the tuner
   searches around. It is a memory-bound kernel's rule of thumb, in elements of the padded row P:

   * backward: a tile of R rows with R·P just under 16 K elements (R a power of two; 5376 → R = 2, not the one
     row that left the H100's memory system idle at 61 %), about 32 elements per thread and tensor
     (warps = R·P / 1024, 4 … 16; γ reloaded per tile, or half the warps, where x, dy, the partial and γ would not
     fit a thread's registers: `register_budget`), two programs per SM when a tile is small (R·P ≤ 4 K), three pipeline
     stages (one, with γ reloaded per row, for rows of 16 K and more, whose registers are full);
   * forward: short rows (P ≤ 1024) several to a program (R·P = 4 K, 16 elements per thread); longer ones one
     row a program held in registers as segments, 16 elements per thread (4 … 32 warps); from 4 K on the chunked
     kernel (chunks of 2 K / 4 K, 8 warps, 16 from 7 K), its last chunk masked;
   * rows that do not start 16-byte aligned (N % 8 ≠ 0 for 2-byte elements) are loaded one element at a time,
     each with its own 64-bit address: half the backward tile, and warps enough for the addresses' registers (odd
     rows from `ODD_ONE_STAGE_FROM`: one pipeline stage, their 2-byte loads are not `cp.async`); twice the forward's
     warps (its chunked kernel: ``split``, 8 warps). The persistent backward splits odd rows from `SPLIT_FROM`
     (`split_rule_backward`): a head and tail element by element, the body in whole vectors.

The tables hold, for each (kind, N, M) the tuner measured, the winning configuration and both its and the
rule's bandwidth (how much the table is worth over the rule, per width). Kinds: ``fwd``, ``persistent``,
``workspace``, ``atomic``. This module imports no torch."""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from rmsnorm_kernels.segments import MIN_SEGMENT, Segments, next_power_of_two, row_alignment, row_segments

CONFIG_DIR = Path(__file__).with_name("configs")
TABLE_ENV = "RMSNORM_CONFIG_TABLE"
KINDS = ("fwd", "persistent", "workspace", "atomic")
DEFAULT_ARCH = "sm90"
"""The architecture assumed where no GPU answers (CPU, the interpreter): the grids there look like an H100's."""

BACKWARD_TILE_ELEMENTS = 16384
"""A backward tile's rows × padded width stays under this (x and dy of ~12 K elements in flight per program)."""
FORWARD_MULTI_ROW_ELEMENTS = 4096
ODD_ONE_STAGE_FROM = 8192
"""Odd rows this wide get the backward rule's one pipeline stage: their 2-byte loads cannot be `cp.async`, so stages
only cost shared memory (H100, 2026-12-07: 14155 on the rule's three stages ran at 23 % of the copy ceiling, 15651 /
15678 on one 1.12-1.18x faster than on a borrowed three; H200 probe: at 14155 and 15253 the best candidates had one
stage, 45-46 % against 38 % for three)."""
SPLIT_FROM = 3072
"""Odd rows padded to this width and more (`padded_width`: 2999 pads to 3072) get the persistent backward's ``split``
rule (`split_rule_backward`): on the H100 (tune of 2026-12-07 15:11, `results/checks/tune-h100-2026-12-07c.log`) the
split won at every odd tuned width from 2999, 1.6-2.3x the unsplit rule (2999: 74 % of the copy ceiling against 41 %;
12001: 57 % against 32 %); at 1001 four rows a tile won. At 13 odd widths it was not tuned at, 1.04-1.66x the unsplit
configurations (`results/nvidia-h100-2026-12-08-odd-split-{before,after}-bwd-bf16.json`)."""
SPLIT_ONE_STAGE_FROM = 14336
"""Split rows padded to this width and more take one pipeline stage (H200 probe at 14155 / 15253: split over 16 warps,
one stage 45-46 % of the copy ceiling, three stages 38 %)."""
CHUNKED_FROM = 4096
"""The forward's rule takes the chunked kernel from this width on (H200, 2026-12-07, `bench/probe_band.py`: chunks of
2048 / 4096 ran 93-98 % of the copy ceiling from 4096 to 16384 where whole rows in registers ran 80-93 %)."""
MAX_WARPS = 32
CLASS_WINDOW = 0.35
"""How far (octaves) the lookup looks for a width of the same layout class before it takes the nearest width of any:
`engine.tune`'s grid has each class within 0.33 octave of any aligned width from 256 up (a few rare ones aside); a
sparser table's far same-class entry loses to a near one (the first H100 table's 11008 ran at 92 % on 11264's
configuration)."""
ALIGNMENT_WINDOW = 0.6
"""Past `CLASS_WINDOW`, a width whose rows are aligned alike (`aligned`) within this many octaves comes before a nearer
one that is not: scalar loads change the best configuration more than the segments do (the H100's 15651 ran the
forward at 51 % of the copy ceiling on 16384's configuration; the unaligned tune widths' chunked one gives 70–81 %
from 5299 to 14155). The grid's unaligned widths lie at most 0.6 octave apart."""


PADDED_FILL_RATIO = 0.9
"""A forward configuration with a ``padded`` block is lent to another width only if the block's share of live lanes
(`padded_fill`) there is at least this fraction of its share where it was measured: its masked lanes cost time the
row does not pay back (H100 scan, 2026-12-07: 8960–9984 ran at 90–92 % of the copy ceiling on 11264's and 11776's
16384-wide block, 0.91–0.94× torch.compile; 8704, 9216 and 10240 in segments at 97–98 %)."""


@dataclass(frozen=True)
class ForwardConfig:
    """``kernel``: "rows" (ROWS whole rows per program, held in registers) or "chunked" (one row per program
    in CHUNK-wide pieces, two passes, the second from L2). ``padded``: the row as one masked power-of-two block
    instead of its segments; ``wide_tail``: no segment after the first narrower than `TAIL_ELEMENTS_PER_THREAD`
    elements per thread (`row_layout`); ``split`` (chunked): each row as a head to the next 16-byte boundary, a body
    of whole vectors and a tail, for rows that do not start aligned."""

    kernel: str = "rows"
    rows: int = 1
    num_warps: int = 8
    chunk: int = 0
    padded: bool = False
    wide_tail: bool = False
    split: bool = False


@dataclass(frozen=True)
class BackwardConfig:
    """One program's view of the backward: ``rows`` rows at a time, ``num_warps`` warps, ``stages`` loads in
    flight (software pipelining); ``programs_per_sm`` (k) for the persistent grid; ``rows_per_program`` for
    the workspace's runs of rows (0: the rule's); ``reload_weight``: load γ for every tile instead of keeping
    it in registers (wide rows); ``padded``: the row as one masked power-of-two block; ``wide_tail``: as the
    forward's; ``split`` (persistent, one row a tile): each row as a vector body and a head and tail
    (`triton_backward.persistent`)."""

    rows: int = 1
    num_warps: int = 8
    programs_per_sm: int = 1
    stages: int = 3
    rows_per_program: int = 0
    reload_weight: bool = False
    padded: bool = False
    wide_tail: bool = False
    split: bool = False


def config_class(kind: str):
    if kind not in KINDS:
        raise ValueError(f"unknown kernel kind {kind!r}; known: {', '.join(KINDS)}")
    return ForwardConfig if kind == "fwd" else BackwardConfig


def config_from_dict(kind: str, data: dict):
    cls = config_class(kind)
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{kind} config has unknown fields {sorted(unknown)}")
    return cls(**data)


def config_to_dict(config) -> dict:
    return asdict(config)


# --- the rule -----------------------------------------------------------------------------------------------


def floor_power_of_two(n: float) -> int:
    return 1 << max(0, int(math.floor(math.log2(max(1.0, n)))))


def nearest_power_of_two(n: float) -> int:
    return 1 << max(0, round(math.log2(max(1.0, n))))


def padded_width(n: int) -> int:
    return row_segments(n).padded


def padded_fill(n: int) -> float:
    """The share of a ``padded`` configuration's power-of-two block that a row of ``n`` elements fills."""
    return n / next_power_of_two(n)


TAIL_ELEMENTS_PER_THREAD = 2
"""With ``wide_tail``, a segment after the first spans at least this many elements per thread of the program (per
row of its tile), the narrower rest padded and masked (8448 over 8 warps: 8192 + [256 → 512]): two bf16 elements
are the 4 bytes cp.async needs (`fitted`). A candidate of the tuner; the pipelined backwards get it at widths whose
borrowed configuration would leave a thinner tail."""


def split_layout(config, n: int, vec: int) -> tuple:
    """The ``ROW`` of the split persistent backward's body: the segments of the widest body (N rounded down to whole
    vectors), its last one masked (a body one vector shorter, for some heads), aligned to the vector."""
    widest = n // vec * vec
    return row_layout(config, widest)._replace(n=widest - 1, align=vec).layout()


def row_layout(config, n: int, strides=(), element_size: int = 2) -> Segments:
    """The column segments a kernel is compiled for at row width ``n`` with ``config`` (forward or backward): one
    masked power-of-two block for a ``padded`` configuration, else the row's segments (with ``wide_tail``, none after
    the first narrower than `TAIL_ELEMENTS_PER_THREAD` elements per thread); with the rows' alignment
    (`segments.row_alignment` of ``n`` and the tensors' row ``strides``) where a launch gives them."""
    align = row_alignment(n, strides, element_size) if strides else 1
    if config.padded:
        return Segments(next_power_of_two(n), 0, 0, n, align)
    floor = MIN_SEGMENT
    if config.wide_tail:
        threads = 32 * config.num_warps
        floor = max(floor, next_power_of_two(-(-TAIL_ELEMENTS_PER_THREAD * threads // max(1, config.rows))))
    return row_segments(n, min_segment=floor)._replace(align=align)


def rule_backward(kind: str, n: int, m: int = 16384, vector: bool | None = None) -> BackwardConfig:
    """The backward's configuration by the rule (module text); ``vector``: the unsplit rule as if rows were (not)
    16-byte aligned (the tuner's candidates are built around it)."""
    p = padded_width(n)
    if kind == "persistent" and n % 2 and p >= SPLIT_FROM and vector is None:
        return split_rule_backward(p)
    vector = aligned(n) if vector is None else vector
    rows = max(1, floor_power_of_two((BACKWARD_TILE_ELEMENTS // (1 if vector else 2) - 1) / p))
    tile = rows * p
    wide = p >= 16384
    first = min(16, max(4, nearest_power_of_two(tile / 1024)))
    per_sm = 2 if tile <= 4096 else 1
    options = [(w, reload) for w in (first, first // 2, 2 * first, 4 * first) for reload in (False, True)]
    fits = [
        (w, reload)
        for w, reload in options
        if 4 <= w <= MAX_WARPS and live_values(tile, w, reload, vector) <= register_budget(n, w * per_sm)
    ]
    warps, reload = fits[0] if fits else (first if vector else min(MAX_WARPS, 4 * first), True)
    if p >= 32768:
        warps = MAX_WARPS
    return BackwardConfig(
        rows=rows,
        num_warps=warps,
        programs_per_sm=per_sm,
        stages=1 if wide or (n % 2 and p >= ODD_ONE_STAGE_FROM) else 3,
        reload_weight=reload or wide,
        rows_per_program=workspace_rows_rule(rows, p) if kind == "workspace" else 0,
    )


def split_rule_backward(p: int) -> BackwardConfig:
    """The persistent backward's rule for odd rows from `SPLIT_FROM`: one row a tile, ``split`` (its body loads whole
    vectors), warps as for an aligned row of the padded width P, γ held, one pipeline stage from
    `SPLIT_ONE_STAGE_FROM`."""
    return BackwardConfig(
        rows=1,
        num_warps=min(16, max(4, nearest_power_of_two(p / 1024))),
        programs_per_sm=2 if p <= 4096 else 1,
        stages=1 if p >= SPLIT_ONE_STAGE_FROM else 3,
        split=True,
    )


def aligned(n: int) -> bool:
    """Do rows of 2-byte elements start 16-byte aligned (vector loads)? Otherwise every element is a scalar load
    with its own 64-bit address (ptxas, sm_90: 14155 at 16 warps spills 472 B where 14336 spills none)."""
    return n % 8 == 0


def live_values(tile: int, warps: int, reload_weight: bool, vector_loads: bool = True) -> float:
    """fp32 values one backward thread holds live: x, dy and the dγ partial of its share of the tile, and γ's
    unless it is reloaded per tile; with scalar loads also the two 64-bit addresses of x and dy per element."""
    return tile / (32 * warps) * ((3 if reload_weight else 4) + (0 if vector_loads else 4))


def layout_class(n: int) -> tuple[int, bool, int]:
    """What decides whether one width's configuration suits another besides their distance: the row's number of
    segments, whether the last is masked, and the elements its rows are aligned to (`segments.row_alignment`: 8 for
    16-byte vectors, 4 or 2 for even widths that are not, loaded 8 or 4 bytes at a time, 1 for odd ones, loaded
    element by element). 3840 (three segments, one masked) took 4096's winner (one segment) and ran at 54 % of the
    copy ceiling beside 4096's 90 %."""
    layout = row_segments(n)
    return len(layout.widths), any(layout.masks), row_alignment(n)


def register_budget(n: int, warps: int, layout: Segments | None = None) -> int:
    """Registers a thread may give those values before ptxas spills: 64 K per SM over the program's threads (at most
    255), less what addresses, masks and row indices take — 32, +16 per extra segment, +16 for a masked one
    (calibrated on ptxas's reports for sm_90: 5376 at 8 warps holds 168 values in 240 registers, 11008 spilled
    16 B at 176, 1792 × 8 rows at 16 warps spilled 128 B at 84). ``layout``: the row's segments if not
    `row_segments` (a ``wide_tail`` configuration's)."""
    layout = layout or row_segments(n)
    overhead = 32 + 16 * (len(layout.widths) - 1) + (16 if any(layout.masks) else 0)
    return min(255, 65536 // (32 * warps)) - overhead


def register_slack(config: "BackwardConfig", n: int, kind: str = "persistent") -> float:
    """`register_budget` less `live_values` of a backward configuration at width ``n`` (negative: ptxas spills).
    Only the persistent kernel reloads γ per tile; the workspace and atomic ones hold it whatever the configuration
    says (ptxas, sm_90: the workspace kernel at 12544 over 8 warps spilled 96 B with a wide tail, as the persistent).
    ``kind`` is given where a configuration is fitted (`fitted`); the lookup's guard, tuned with it left out, keeps
    the persistent kernel's reading for every kind (giving it the kind would change 61 lookups nobody measured)."""
    layout = row_layout(config, n)
    # a padded block keeps the budget of the row's own segments, which the model was calibrated with
    budget = register_budget(n, config.num_warps * config.programs_per_sm, None if config.padded else layout)
    reload = config.reload_weight and kind == "persistent"
    vector = aligned(n) or (config.split and config.rows == 1)  # a split row's body loads whole vectors
    return budget - live_values(config.rows * layout.padded, config.num_warps, reload, vector)


def workspace_rows_rule(rows: int, p: int) -> int:
    """Rows per workspace program: enough tiles to pipeline, few enough partial rows (fp32 [M / this, N])."""
    return max(4 * rows, 256 if p <= 512 else 128 if p <= 8192 else 32)


def rule_forward(n: int, m: int = 16384, vector: bool | None = None) -> ForwardConfig:
    """The forward's configuration by the rule (module text); ``vector``: as if rows were (not) 16-byte aligned."""
    if n < CHUNKED_FROM:
        return rows_rule_forward(n, m, vector)
    scalar = not (aligned(n) if vector is None else vector)
    return ForwardConfig(
        "chunked", chunk=2048 if n < 6144 else 4096, num_warps=8 if scalar or n < 7168 else 16, split=scalar
    )


def rows_rule_forward(n: int, m: int = 16384, vector: bool | None = None) -> ForwardConfig:
    """The rule's whole-rows kernel at any width (the rule below `CHUNKED_FROM`; above it the tuner's other family):
    short rows several to a program, longer ones one a program, 16 elements per thread."""
    p = padded_width(n)
    scalar = 1 if (aligned(n) if vector is None else vector) else 2  # scalar loads: half the elements per thread
    if p <= 1024:
        rows = max(1, FORWARD_MULTI_ROW_ELEMENTS // next_power_of_two(p))
        warps = scalar * rows * next_power_of_two(p) // 512
        return ForwardConfig("rows", rows=rows, num_warps=min(8 * scalar, max(1, warps)))
    return ForwardConfig("rows", rows=1, num_warps=min(MAX_WARPS, max(4, scalar * nearest_power_of_two(p / 512))))


def rule(kind: str, n: int, m: int = 16384):
    return rule_forward(n, m) if kind == "fwd" else rule_backward(kind, n, m)


# --- what the tuner tries -------------------------------------------------------------------------------------


def _around(value: int, low: int, high: int) -> list[int]:
    return sorted({v for v in (value // 2, value, value * 2) if low <= v <= high})


def partly_aligned(n: int) -> bool:
    """Rows of an even width that is not a multiple of 8: loaded 4 or 8 bytes at a time (`segments.row_alignment`),
    neither element by element like odd ones nor in 16-byte vectors like aligned ones."""
    return not aligned(n) and row_alignment(n) > 1


def backward_candidates(kind: str, n: int, m: int = 16384) -> list[BackwardConfig]:
    """The rule's choice and its neighbours: rows and warps halved and doubled (2 … 64 elements per thread
    and tensor), k = 1 or 2 for small tiles, γ reloaded or kept for wide rows, the padded layout where the
    segments pad less; the workspace also tries half and double its run of rows. Rows `partly_aligned` also get
    the aligned rule's choice and its neighbours; rows not aligned, for the persistent kernel, ``split`` and one
    stage (odd ones from `SPLIT_FROM`: the rule itself is split)."""
    # around the unsplit rule (the split one's neighbours with more rows a tile would not split: the same kernel)
    out = _backward_around(kind, rule_backward(kind, n, m, vector=aligned(n)), n)
    if partly_aligned(n):
        out += _backward_around(kind, rule_backward(kind, n, m, vector=True), n)
    out = list(dict.fromkeys(out + wide_tail_variants(out, n)))
    if kind == "persistent" and not aligned(n):  # rows not starting aligned: the split twin of one-row tiles
        out += [replace(c, split=True) for c in out if c.rows == 1 and not c.padded]
        # and each without a pipeline: such rows load 2, 4 or 8 bytes at a time, which cp.async serves in small pieces
        # or (2 bytes) not at all (H100, 2026-12-07: 15651 and 15678 ran 1.12-1.18x faster at the rule's one stage
        # than at a borrowed three; 14155 at three fell to 23 % of the copy ceiling)
        out += [replace(c, stages=1) for c in out if c.stages > 1]
    return list(dict.fromkeys([rule_backward(kind, n, m), *out]))


def _backward_around(kind: str, base: BackwardConfig, n: int) -> list[BackwardConfig]:
    p = padded_width(n)
    out = []
    for rows in _around(base.rows, 1, 512):
        tile = rows * p
        if tile > 2 * BACKWARD_TILE_ELEMENTS and rows > 1:
            continue
        for warps in _around(base.num_warps, 2, MAX_WARPS):
            per_thread = tile / (32 * warps)
            if not 4 <= per_thread <= 64:
                continue
            for per_sm in (1, 2) if kind == "persistent" and tile <= 8192 else (1,):
                wide = tile >= 16384
                for reload in (False, True) if wide else (False,):
                    stages = 1 if wide else 3
                    out.append(
                        replace(
                            base,
                            rows=rows,
                            num_warps=warps,
                            programs_per_sm=per_sm,
                            stages=stages,
                            reload_weight=reload,
                            rows_per_program=workspace_rows_rule(rows, p) if kind == "workspace" else 0,
                        )
                    )
    if kind == "workspace":
        out += [
            replace(base, rows_per_program=r)
            for r in (base.rows_per_program // 2, base.rows_per_program * 2)
            if r >= 4 * base.rows
        ]
    if len(row_segments(n).widths) > 1:
        out.append(replace(base, padded=True))
    if base not in out:
        out.insert(0, base)
    return out


def wide_tail_variants(configs, n: int) -> list:
    """``wide_tail`` twins of the candidates whose layout it changes (a tail under two elements per thread)."""
    twins = [replace(c, wide_tail=True) for c in configs if not c.padded and getattr(c, "kernel", "rows") == "rows"]
    return [t for t in twins if row_layout(t, n) != row_layout(replace(t, wide_tail=False), n)]


CHUNKS = (512, 1024, 2048, 4096)
WIDE_CHUNK = 2048


def forward_candidates(n: int, m: int = 16384) -> list[ForwardConfig]:
    """The rule's choice; the rule's whole rows (`rows_rule_forward`) with warps halved and doubled, rows halved and
    doubled for short rows, the padded layout; and for rows of 2 K and more the chunked kernel with the chunks that
    pad the row least and the wide ones (`WIDE_CHUNK` up) at up to 16 warps. Rows
    `partly_aligned` also get the aligned rule's choice and its neighbours, and rows not aligned the chunked
    kernel's ``split`` (a prototype ran 1.06–1.27× the unsplit chunked kernel at 7 of 8 such widths on an H100)."""
    out = [rule_forward(n, m)]
    out += _forward_around(rows_rule_forward(n, m), n)
    if partly_aligned(n):
        out += _forward_around(rows_rule_forward(n, m, vector=True), n)
    if n >= 2048:
        for chunk in CHUNKS:
            # a wide chunk is tried whatever its last one masks (TorchInductor's looped reduction does so): the
            # H200 ran 2048 / 4096 at 16 warps at 97-98 % of the copy ceiling from 7168 to 16384, rows 80-93 %
            wide = chunk >= WIDE_CHUNK
            if wide or (chunk < n and (-(-n // chunk) * chunk - n) <= n / 16):
                for w in (4, 8, 16) if wide else (4, 8):
                    out.append(ForwardConfig("chunked", chunk=chunk, num_warps=w))
                    if not aligned(n):
                        out.append(ForwardConfig("chunked", chunk=chunk, num_warps=w, split=True))
    return list(dict.fromkeys(out + wide_tail_variants(out, n)))


def _forward_around(base: ForwardConfig, n: int) -> list[ForwardConfig]:
    p = padded_width(n)
    out = [base]
    for rows in _around(base.rows, 1, 1024):
        for warps in _around(base.num_warps, 1, MAX_WARPS):
            per_thread = rows * next_power_of_two(p) / (32 * warps) if rows > 1 else p / (32 * warps)
            if 4 <= per_thread <= 64:
                out.append(ForwardConfig("rows", rows=rows, num_warps=warps))
    if base.rows == 1 and len(row_segments(n).widths) > 1:
        out.append(replace(base, padded=True))
    return out


def candidates(kind: str, n: int, m: int = 16384) -> list:
    return forward_candidates(n, m) if kind == "fwd" else backward_candidates(kind, n, m)


# --- the tables -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigTable:
    """A tuned table: ``entries[kind]`` = ((N, M, config), …); ``meta`` its header (device, versions, date, grid)."""

    name: str
    meta: dict
    entries: dict
    _found: dict = field(default_factory=dict, compare=False, repr=False)
    """Answers already given, by (kind, n, m): a launch asks every call, and the search over the table's widths
    (a layout class per width) costs ~0.1 ms of a slow host's Python each time."""

    def lookup(self, kind: str, n: int, m: int):
        key = (kind, n, m)
        if key not in self._found:
            if len(self._found) >= 4096:  # a service asked for many shapes: start over rather than grow
                self._found.clear()
            self._found[key] = self._search(kind, n, m)
        return self._found[key]

    def measured_width(self, kind: str, n: int) -> bool:
        """Did the tuner measure ``kind`` at width ``n`` (at some row count)? Asked at every launch."""
        return n in self._widths.get(kind, ())

    @functools.cached_property
    def _widths(self) -> dict:
        return {kind: frozenset(row[0] for row in rows) for kind, rows in self.entries.items()}

    def _search(self, kind: str, n: int, m: int):
        """The configuration of the measured (N, M) nearest (n, m): the nearest width on a log scale of the same
        `layout_class` within `CLASS_WINDOW` octaves, else the nearest of the same alignment within
        `ALIGNMENT_WINDOW`, else the nearest as (un)aligned (`aligned`) within it, else the nearest width; then the
        nearest row count. A backward configuration that would hold more than a thread's registers at ``n`` than at
        the width it was measured at (`register_slack`: more segments, a masked one, scalar loads), and a forward one
        whose padded block ``n`` fills far less than its own width did (`PADDED_FILL_RATIO`), is passed over for the
        next. None when no entry fits."""
        rows = self.entries.get(kind)
        if not rows:
            return None
        ln, lm, cls = math.log2(max(1, n)), math.log2(max(1, m)), layout_class(n)

        def order(w):
            distance = abs(math.log2(w) - ln)
            if layout_class(w) == cls and distance <= CLASS_WINDOW:
                return (0, distance, w)
            if distance <= ALIGNMENT_WINDOW:
                # a table tuned before the even unaligned widths were in the grid lends them the odd ones' choice
                return (1 if row_alignment(w) == cls[2] else 2 if aligned(w) == aligned(n) else 3, distance, w)
            return (3, distance, w)

        for width in sorted({r[0] for r in rows}, key=order):
            config = min((r for r in rows if r[0] == width), key=lambda r: (abs(math.log2(r[1]) - lm), r[1]))[2]
            if kind == "fwd":
                if not config.padded or padded_fill(n) >= PADDED_FILL_RATIO * padded_fill(width):
                    return config
            elif register_slack(config, n) >= min(0, register_slack(config, width)):
                return config
        return None

    def describe(self) -> dict:
        return {
            "table": self.name,
            "arch": self.meta.get("arch"),
            "device": self.meta.get("device"),
            "created_at": self.meta.get("created_at"),
            "widths": len({r[0] for rows in self.entries.values() for r in rows}),
        }


def parse_table(document: dict, name: str) -> ConfigTable:
    """A table from its JSON document (as `rmsnorm-dash tune` writes it); ValueError on anything malformed."""
    if not isinstance(document, dict) or document.get("schema") != 1:
        raise ValueError(f"{name}: not a kernel config table (schema 1)")
    entries = {}
    for kind, rows in (document.get("entries") or {}).items():
        parsed = []
        for row in rows:
            n, m = int(row["N"]), int(row["M"])
            if n < 1 or m < 1:
                raise ValueError(f"{name}: {kind} entry with N={n}, M={m}")
            parsed.append((n, m, config_from_dict(kind, row["config"])))
        entries[kind] = tuple(parsed)
    meta = {k: v for k, v in document.items() if k != "entries"}
    return ConfigTable(name, meta, entries)


def load_table(path: str | os.PathLike) -> ConfigTable:
    path = Path(path)
    return parse_table(json.loads(path.read_text()), path.name)


def table_path(arch: str) -> Path:
    return CONFIG_DIR / f"{arch}.json"


def table_source(arch: str) -> Path | None:
    """The file of the table in force for ``arch`` ("sm90"): ``RMSNORM_CONFIG_TABLE``'s if set, else the shipped
    one, else None (the rule)."""
    override = os.environ.get(TABLE_ENV)
    if override:
        return Path(override)
    path = table_path(arch)
    return path if path.exists() else None


@functools.lru_cache(maxsize=None)
def table_for(arch: str) -> ConfigTable | None:
    """The table in force for ``arch`` (`table_source`), read once per process; None: the rule."""
    source = table_source(arch)
    return load_table(source) if source is not None else None


@functools.lru_cache(maxsize=None)
def arch_of(capability: tuple[int, int] | None, name: str | None = None) -> str:
    """The key of the table in force: "sm90" for compute capability (9, 0), or "sm90-h200" where the card ``name``
    ("NVIDIA H200") has a table of its own beside its architecture's (`model_of`); `DEFAULT_ARCH` when there is no
    capability (CPU, interpreter). Cards of one architecture can want different choices: the H200's faster memory
    ran the forward's whole-row kernel at 80-93 % of its copy ceiling where the chunked one, which the H100's tune
    did not pick, ran 97-98 % (2026-12-07)."""
    if not capability:
        return DEFAULT_ARCH
    base = f"sm{capability[0]}{capability[1]}"
    model = model_of(name)
    return f"{base}-{model}" if model and table_path(f"{base}-{model}").exists() else base


def model_of(name: str | None) -> str | None:
    """The card model in a device name, as table files are named: "NVIDIA H200" → "h200", "NVIDIA H100 80GB HBM3" →
    "h100", "NVIDIA A100-SXM4-80GB" → "a100"; None for no name."""
    words = (name or "").lower().replace("_", " ").replace("-", " ").split()
    words = [w for w in words if w not in ("nvidia", "amd", "tesla", "geforce", "instinct", "radeon")]
    model = ""
    for word in words:  # up to the first word with a digit: "RTX 4090" → "rtx4090"
        model += "".join(c for c in word if c.isalnum())
        if any(c.isdigit() for c in word):
            break
    return model or None


def config_for(kind: str, n: int, m: int, arch: str = DEFAULT_ARCH):
    """The configuration a kernel of ``kind`` launches with for an [m, n] problem on ``arch``."""
    table = table_for(arch)
    found = table.lookup(kind, n, m) if table is not None else None
    if found is not None and table.measured_width(kind, n):
        return found  # what the tuner measured at this very width runs as measured
    return fitted(kind, found if found is not None else rule(kind, n, m), n)


PIPELINED_KINDS = ("persistent", "workspace")


@functools.lru_cache(maxsize=4096)
def fitted(kind: str, config, n: int):
    """``config`` as it should run at width ``n``: ``wide_tail`` where its last segment would hold under two elements
    per thread (`TAIL_ELEMENTS_PER_THREAD`) and widening it costs no spill. The tuner measures configurations as
    given (the twins among them), so this is for borrowed ones and the rule's: `config_for` runs a tuned width's own
    winner as measured.

    * The pipelined backwards (stages ≥ 2): cp.async moves 4 bytes at least, so a tail of one bf16 per thread was
      loaded synchronously inside the pipelined loop, every tile (PTX for sm_90 at 8448 = 8192 + 256 over 8 warps:
      ``ld.global.b16`` beside the ``cp.async``). On the H100, A/B at the configuration in force: 6400, 6656, 8448,
      8960, 9472 1.10–1.50×, 10496 1.02×.
    * The forward's rows kernel where the tail leaves threads idle (under one element each; 8448 over 16 warps:
      1.07×). 8704's 512 over 16 warps, one each, ran at 95.5 % of the ceiling as it was: left alone.
    * Not where `register_slack` says the wider, masked tail would spill where the thin one did not: 12544 over
      8 warps (ptxas: 255 registers and no spill thin, 96 B spilled wide) ran at 0.86×.

    Rows of odd width (2-byte loads throughout) are left as they are."""
    if kind not in (*PIPELINED_KINDS, "fwd") or config.padded or config.wide_tail or n % 2:
        return config
    if getattr(config, "kernel", "rows") != "rows" or getattr(config, "stages", 2) < 2:
        return config
    wide = replace(config, wide_tail=True)
    if row_layout(wide, n) == row_layout(config, n):
        return config
    if kind == "fwd":
        tail = row_layout(config, n).widths[-1] * config.rows
        return wide if tail < 32 * config.num_warps else config
    return wide if register_slack(wide, n, kind) >= min(0, register_slack(config, n, kind)) else config


def describe(arch: str = DEFAULT_ARCH) -> dict:
    """What a run header records of the configuration in force: the table (name, device, date) or the rule."""
    table = table_for(arch)
    if table is None:
        return {"table": None, "arch": arch, "source": "rule"}
    return {**table.describe(), "arch": arch, "source": "table", "override": bool(os.environ.get(TABLE_ENV))}
