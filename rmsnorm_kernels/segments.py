"""How a row of N elements is laid over Triton's power-of-two tensor shapes (one home for it): the host-side
layout (`row_segments`) and the device-side loads and stores of one segment.

A Triton block is a power of two wide. Padding a row of N = 5120 to one 8192-wide block leaves 37.5 % of
every thread's lanes masked off: fewer bytes in flight per instruction, so a memory-bound kernel loses
bandwidth (measured on the H200: the padded backward ran at 79 % at 16384×5120 against 95 % at ×8192).
Instead every kernel here holds a row as up to three power-of-two **segments** laid end to end:
the two largest powers of two that fit, then the rest padded to a power of two,

    5120 = 4096 + 1024          2880 = 2048 + 512 + [320 → 512]         12288 = 8192 + 4096

so the masked-off part is at most the last segment's padding (≤ 1/8 of the row for any N ≥ 16; 0 for the
hidden sizes of most models). Only the last segment can run past N; the others are always full, and their
loads need no column mask.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import triton
import triton.language as tl

MIN_SEGMENT = 16
"""Narrowest segment: narrower ones would leave most of a warp idle; a rest below it is padded to it."""


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


class Segments(NamedTuple):
    """A row's segments: widths ``w0`` ≥ ``w1`` ≥ ``w2`` (0 = absent), each a power of two; ``masks`` says
    which of them run past N (only ever the last present one)."""

    w0: int
    w1: int
    w2: int
    n: int
    align: int = 1
    """Elements every row start and N are a multiple of (a power of two up to a 16-byte vector: `row_alignment`)."""

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(w for w in (self.w0, self.w1, self.w2) if w)

    @property
    def padded(self) -> int:
        return self.w0 + self.w1 + self.w2

    @property
    def masks(self) -> tuple[bool, bool, bool]:
        """Per segment: does it need a column mask (does it end past N)?"""
        ends = (self.w0, self.w0 + self.w1, self.padded)
        return tuple(bool(w) and end > self.n for w, end in zip((self.w0, self.w1, self.w2), ends))

    def layout(self) -> tuple:
        """The kernels' one constexpr ``ROW``: (w0, w1, w2, masked0, masked1, masked2, align). The helpers below
        take it with a segment index K: segment K spans columns w0·[K > 0] + w1·[K > 1] … + its width."""
        return (self.w0, self.w1, self.w2, *self.masks, self.align)


def row_alignment(n: int, strides=(), element_size: int = 2) -> int:
    """The largest power of two, up to one 16-byte vector of elements, that divides N and every row stride: what
    the kernels promise the compiler (`known_multiple`). Triton's launcher only tells it about integers divisible
    by 16, so rows of 8298 elements (4-byte aligned) were loaded one 2-byte element at a time."""
    g = math.gcd(int(n), *(int(s) for s in strides))
    return min(g & -g, max(1, 16 // element_size)) if g else 1


@functools.lru_cache(maxsize=None)
def row_segments(n: int, max_segments: int = 3, min_segment: int = MIN_SEGMENT) -> Segments:
    """N as up to ``max_segments`` power-of-two segments (see the module text); 1 segment = one padded block.
    A rest narrower than ``min_segment`` (a power of two) becomes one masked segment of that width: a program of
    many threads should not spread a 256-wide segment one element per thread (`kernel_config.row_layout`)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"a row needs at least one element, got N = {n}")
    widths: list[int] = []
    rest = n
    while rest > 0 and len(widths) < max_segments - 1:
        w = 1 << (rest.bit_length() - 1)  # the largest power of two ≤ rest
        if w < min_segment:
            break
        widths.append(w)
        rest -= w
    if rest > 0:
        widths.append(max(min_segment if widths else 1, next_power_of_two(rest)))
    widths += [0] * (3 - len(widths))
    return Segments(widths[0], widths[1], widths[2], n)


@triton.jit
def known_multiple(value, ALIGN: tl.constexpr):
    """``value`` (a multiple of ALIGN, as the launcher checked), written so that the compiler knows it: Triton's
    launcher marks only integers divisible by 16, and `tl.multiple_of` does not reach a kernel argument. With it, rows
    of 8298 bf16 elements load 4 bytes at a time instead of 2."""
    if ALIGN > 1:
        return value // ALIGN * ALIGN
    return value


def split_vector(*rows2d) -> int:
    """The vector width (elements) a split row may use for these [M, N] tensors — a head up to the next 16-byte
    boundary, a body of whole vectors, a tail (`split_row`) — or 0 where one head cannot serve them all: their rows
    must share one stride and start from 16-byte aligned bases."""
    same_stride = len({t.stride(0) for t in rows2d}) == 1
    aligned_bases = not any(t.data_ptr() & 15 for t in rows2d)
    return 16 // rows2d[0].element_size() if same_stride and aligned_bases else 0


@triton.jit
def split_row(start, N, VEC: tl.constexpr):
    """A row starting at element offset ``start`` as (head, body, edge_cols, edge_live): the head runs up to the next
    VEC-element boundary (fewer than VEC columns), the body is whole vectors from there (the compiler may load it
    16 bytes at a time), and the head's and tail's columns are ``edge_cols`` [2·VEC] where ``edge_live``."""
    head = tl.minimum((VEC - start % VEC) % VEC, N)
    body = (N - head) // VEC * VEC
    edge = tl.arange(0, 2 * VEC)
    edge_cols = tl.where(edge < VEC, edge, head + body + edge - VEC)
    edge_live = tl.where(edge < VEC, edge < head, edge_cols < N)
    return head, body, edge_cols, edge_live


@triton.jit
def row_starts(rows, stride, ROW: tl.constexpr):
    """Where ``rows`` start (int64 offsets in elements), as multiples of the rows' alignment the compiler knows."""
    ALIGN: tl.constexpr = ROW[6]
    return rows.to(tl.int64) * known_multiple(stride, ALIGN)


@triton.jit
def load_segment(PTR, rows, M, N, stride, ROW: tl.constexpr, K: tl.constexpr):
    """Segment K of the given rows (`Segments.layout` ``ROW``) as fp32 [ROWS, width] (zeros outside the matrix).
    Only a segment that runs past N carries a column mask."""
    return load_segment_at(PTR, row_starts(rows, stride, ROW), rows < M, N, ROW, K)


@triton.jit
def load_segment_at(PTR, starts, live, N, ROW: tl.constexpr, K: tl.constexpr):
    """`load_segment` of rows that start at ``starts`` (``live``: which of them exist)."""
    OFF: tl.constexpr = ROW[0] * (K > 0) + ROW[1] * (K > 1)
    W: tl.constexpr = ROW[K]
    ALIGN: tl.constexpr = ROW[6]
    cols = OFF + tl.arange(0, W)
    if ROW[3 + K]:
        mask = live[:, None] & (cols < known_multiple(N, ALIGN))[None, :]
    else:
        mask = live[:, None]
    return tl.load(PTR + starts[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)


@triton.jit
def store_segment(PTR, value, rows, M, N, stride, ROW: tl.constexpr, K: tl.constexpr):
    store_segment_at(PTR, value, row_starts(rows, stride, ROW), rows < M, N, ROW, K)


@triton.jit
def store_segment_at(PTR, value, starts, live, N, ROW: tl.constexpr, K: tl.constexpr):
    OFF: tl.constexpr = ROW[0] * (K > 0) + ROW[1] * (K > 1)
    W: tl.constexpr = ROW[K]
    ALIGN: tl.constexpr = ROW[6]
    cols = OFF + tl.arange(0, W)
    if ROW[3 + K]:
        mask = live[:, None] & (cols < known_multiple(N, ALIGN))[None, :]
    else:
        mask = live[:, None]
    tl.store(PTR + starts[:, None] + cols[None, :], value.to(PTR.dtype.element_ty), mask=mask)


@triton.jit
def load_vector(PTR, N, ROW: tl.constexpr, K: tl.constexpr):
    """γ (or any [N] vector) over segment K, fp32 [width]."""
    OFF: tl.constexpr = ROW[0] * (K > 0) + ROW[1] * (K > 1)
    W: tl.constexpr = ROW[K]
    ALIGN: tl.constexpr = ROW[6]
    cols = OFF + tl.arange(0, W)
    if ROW[3 + K]:
        return tl.load(PTR + cols, mask=cols < known_multiple(N, ALIGN), other=0.0).to(tl.float32)
    return tl.load(PTR + cols).to(tl.float32)


@triton.jit
def store_vector(PTR, value, N, ROW: tl.constexpr, K: tl.constexpr):
    OFF: tl.constexpr = ROW[0] * (K > 0) + ROW[1] * (K > 1)
    W: tl.constexpr = ROW[K]
    ALIGN: tl.constexpr = ROW[6]
    cols = OFF + tl.arange(0, W)
    if ROW[3 + K]:
        tl.store(PTR + cols, value.to(PTR.dtype.element_ty), mask=cols < known_multiple(N, ALIGN))
    else:
        tl.store(PTR + cols, value.to(PTR.dtype.element_ty))
