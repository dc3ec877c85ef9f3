"""Named shape presets: the one source of truth for the engine, the API (``"preset"`` in a sweep,
``GET /api/presets``), and the CLI (``--preset``).

``models``: the hidden sizes of widely used models (the RMSNorm row width N), each with the models it stands
for (``hidden_size`` of the models' published configurations), at M = 4096, 16384 and 65536 rows
(tokens per step). ``widths``: every multiple of 256 up to 16384 at 16384 rows (a scan for cliffs). ``default``: the
power-of-two sweep every committed result file before it used. `random_widths` draws widths that are not multiples of
64 from a seed (``random_widths`` and ``seed`` in a sweep).
"""

from __future__ import annotations

from typing import Any

MODEL_WIDTHS: dict[int, tuple[str, ...]] = {
    2048: ("Llama 3.2 1B", "Qwen2.5 3B", "Gemma 2B"),
    2304: ("Gemma 2 2B",),
    2560: ("Phi-2", "Qwen3 4B", "Gemma 3 4B"),
    2880: ("GPT-OSS 20B", "GPT-OSS 120B"),
    3072: ("Llama 3.2 3B", "Phi-3 mini", "Gemma 7B"),
    3584: ("Qwen2.5 7B", "Gemma 2 9B"),
    4096: ("Llama 3.1 8B", "Mistral 7B", "Mixtral 8x7B", "Qwen3 8B"),
    4608: ("Gemma 2 27B",),
    5120: ("Qwen2.5 14B", "Qwen2.5 32B", "Mistral NeMo 12B", "Phi-3 medium"),
    6144: ("Mixtral 8x22B",),
    7168: ("DeepSeek-V3", "DeepSeek-R1"),
    8192: ("Llama 3.1 70B", "Qwen2.5 72B"),
    12288: ("Mistral Large 2",),
    16384: ("Llama 3.1 405B",),
}

PRESETS: dict[str, dict[str, Any]] = {
    "models": {
        "description": "hidden sizes of widely used models (Llama 3.x, Qwen 2.5/3, Gemma 2/3, Mistral/Mixtral, "
        "DeepSeek-V3, Phi, GPT-OSS) at 4096 / 16384 / 65536 tokens",
        "M": [4096, 16384, 65536],
        "N": sorted(MODEL_WIDTHS),
        "labels": {n: list(names) for n, names in MODEL_WIDTHS.items()},
    },
    "widths": {
        "description": "a width scan: every multiple of 256 from 256 to 16384 at 16384 rows (cliffs between the "
        "widths anyone tuned show as dips in a line of GB/s over N)",
        "M": [16384],
        "N": list(range(256, 16384 + 1, 256)),
        "labels": {},
    },
    "default": {
        "description": "powers of two, N 512 … 16384 at 4096 / 16384 / 65536 rows",
        "M": [4096, 16384, 65536],
        "N": [512, 1024, 2048, 4096, 8192, 16384],
        "labels": {},
    },
}


RANDOM_WIDTH_RANGE = (65, 16384)


def random_widths(count: int, seed: int) -> list[int]:
    """``count`` distinct widths in `RANDOM_WIDTH_RANGE`, none a multiple of 64 (no kernel's power-of-two tiles
    fit them), drawn from ``seed`` (the same seed gives the same widths everywhere)."""
    import random

    rng = random.Random(seed)
    low, high = RANDOM_WIDTH_RANGE
    chosen: set[int] = set()
    while len(chosen) < count:
        n = rng.randint(low, high)
        if n % 64:
            chosen.add(n)
    return sorted(chosen)


def preset_names() -> list[str]:
    return list(PRESETS)


def get_preset(name: str) -> dict[str, Any]:
    """The preset called ``name``; ValueError naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None


def model_names(n: int) -> list[str]:
    """The models whose hidden size is ``n`` (empty when none is listed)."""
    return list(MODEL_WIDTHS.get(int(n), ()))


def presets_document() -> list[dict[str, Any]]:
    """``GET /api/presets``: every preset with its shapes and, per N, the model names (keys as strings)."""
    return [
        {
            "name": name,
            "description": p["description"],
            "M": list(p["M"]),
            "N": list(p["N"]),
            "labels": {str(n): names for n, names in p["labels"].items()},
        }
        for name, p in PRESETS.items()
    ]
