"""Run-to-run comparison: ``rmsnorm-dash compare BASE.json NEW.json`` and ``GET /api/compare``.

Per shape (``"<pass>/<dtype>/<M>x<N>"``) and implementation measured ``ok`` in both runs: NEW/BASE GB/s. Shapes
only in one run are listed. Runs timed in different modes (CUDA events vs CUDA-graph replays) measure
different things; comparing them raises `MixedTiming` unless ``allow_mixed_timing``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from engine.models import RunFile
from engine.summary import geomean, shape_key

DEFAULT_FAIL_BELOW = 0.97


class MixedTiming(ValueError):
    """The two runs were timed in different modes."""


def _document(run: Union[RunFile, Mapping[str, Any]]) -> dict[str, Any]:
    return run.model_dump() if isinstance(run, RunFile) else dict(run)


def timing_mode(run: Union[RunFile, Mapping[str, Any]]) -> str:
    """A run's timing mode: the sweep's ``timing`` ("events" | "cuda-graph"); else the rows' (CPU rows say
    ``perf_counter``); "events" when neither says (older files)."""
    doc = _document(run)
    sweep = (doc.get("run") or {}).get("sweep") or {}
    if sweep.get("timing"):
        return str(sweep["timing"])
    modes = {r.get("timing") for r in doc.get("rows", []) if r.get("timing")}
    return modes.pop() if len(modes) == 1 else ("mixed" if modes else "events")


def _measured(doc: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    shapes: dict[str, dict[str, dict[str, Any]]] = {}
    for r in doc.get("rows", []):
        key = shape_key(r["pass"], r["dtype"], r["M"], r["N"])
        by_impl = shapes.setdefault(key, {})
        if r.get("status") == "ok" and r.get("GBps"):
            by_impl[r["impl"]] = r
    return shapes


def compare_runs(
    base: Union[RunFile, Mapping[str, Any]], new: Union[RunFile, Mapping[str, Any]], allow_mixed_timing: bool = False
) -> dict[str, Any]:
    """The comparison document (the shape of ``GET /api/compare``); raises `MixedTiming`."""
    b, n = _document(base), _document(new)
    tb, tn = timing_mode(b), timing_mode(n)
    if tb != tn and not allow_mixed_timing:
        raise MixedTiming(
            f"the runs were timed differently (base: {tb}, new: {tn}); their GB/s are not comparable. "
            "Compare runs of one timing mode, or allow mixed timing modes explicitly "
            "(--allow-mixed-timing / allow_mixed_timing=true)"
        )
    mb, mn = _measured(b), _measured(n)
    rows = []
    for key, by_impl in mn.items():
        if key not in mb:
            continue
        for impl, new_row in by_impl.items():
            old = mb[key].get(impl)
            if old is None:
                continue
            rows.append(
                {
                    "key": key,
                    "pass": new_row["pass"],
                    "dtype": new_row["dtype"],
                    "M": new_row["M"],
                    "N": new_row["N"],
                    "impl": impl,
                    "base_GBps": old["GBps"],
                    "new_GBps": new_row["GBps"],
                    "ratio": new_row["GBps"] / old["GBps"],
                }
            )
    return {
        "base": {"run_id": b["run"]["run_id"], "timing": tb},
        "new": {"run_id": n["run"]["run_id"], "timing": tn},
        "rows": rows,
        "only_in_base": [k for k in mb if k not in mn],
        "only_in_new": [k for k in mn if k not in mb],
        "min_ratio": min((r["ratio"] for r in rows), default=None),
    }


def below(doc: Mapping[str, Any], fail_below: float = DEFAULT_FAIL_BELOW) -> list[dict[str, Any]]:
    """The compared rows whose ratio is under ``fail_below``."""
    return [r for r in doc["rows"] if r["ratio"] < fail_below]


def format_comparison(doc: Mapping[str, Any], fail_below: Optional[float] = DEFAULT_FAIL_BELOW) -> str:
    """Plain text: one line per shape and implementation, then the shapes only in one run and the verdict."""
    lines = [
        f"base {doc['base']['run_id']} ({doc['base']['timing']})  →  new {doc['new']['run_id']} "
        f"({doc['new']['timing']}): NEW/BASE GB/s",
        f"{'shape':<28} {'implementation':<22} {'base GB/s':>10} {'new GB/s':>10} {'ratio':>7}",
    ]
    for r in doc["rows"]:
        flag = "  BELOW" if fail_below is not None and r["ratio"] < fail_below else ""
        lines.append(
            f"{r['key']:<28} {r['impl']:<22} {r['base_GBps']:>10.1f} {r['new_GBps']:>10.1f} {r['ratio']:>7.3f}{flag}"
        )
    for label, keys in (("only in base", doc["only_in_base"]), ("only in new", doc["only_in_new"])):
        if keys:
            lines.append(f"{label}: {', '.join(keys)}")
    if not doc["rows"]:
        lines.append("no shape and implementation measured ok in both runs")
    elif fail_below is not None:
        bad = below(doc, fail_below)
        lines.append(
            f"{len(bad)} of {len(doc['rows'])} below {fail_below:g}"
            if bad
            else f"all {len(doc['rows'])} at or above {fail_below:g} (min {doc['min_ratio']:.3f})"
        )
    return "\n".join(lines)


def trends(runs: list[Union[RunFile, Mapping[str, Any]]], fail_below: float = DEFAULT_FAIL_BELOW) -> dict[str, Any]:
    """Performance across runs (of one device and timing mode: the caller picks them), per pass and implementation.

    The runs are ordered by ``created_at`` (then commit). For each (pass, implementation), each run that measured it
    is compared with the latest earlier run that measured it at one shape (dtype, M, N) or more in common
    (``base_run_id``; runs of other shapes in between are passed over): ``base_GBps`` and ``new_GBps`` are the
    geometric means of the two runs' GB/s over the ``shared`` shapes, ``ratio`` = new / base (the geometric mean of
    the per-shape NEW/BASE ratios of `compare_runs`), and ``regression`` is ``ratio < fail_below``: the threshold of
    ``rmsnorm-dash compare --fail-below``, applied to the mean. ``index`` chains the ratios (1.0 at the series'
    first run; null for a later run that shares no shape with an earlier one). ``GBps``: the run's geometric mean
    over all its shapes of that pass (not comparable across runs of different shapes)."""
    docs = sorted(
        (_document(r) for r in runs),
        key=lambda d: (str(d["run"].get("created_at") or ""), str(d["run"].get("git_commit") or "")),
    )
    series: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        by_pass_impl: dict[tuple[str, str], dict[str, float]] = {}
        for key, by_impl in _measured(doc).items():
            for impl, row in by_impl.items():
                by_pass_impl.setdefault((row["pass"], impl), {})[key] = row["GBps"]
        for (pass_, impl), gbps in sorted(by_pass_impl.items()):
            s = series.setdefault((pass_, impl), {"pass": pass_, "impl": impl, "points": [], "_gbps": []})
            point = {
                "run_id": doc["run"]["run_id"],
                "created_at": doc["run"].get("created_at"),
                "git_commit": doc["run"].get("git_commit"),
                "shapes": len(gbps),
                "GBps": geomean(gbps.values()),
                "base_run_id": None,
                "shared": 0,
                "base_GBps": None,
                "new_GBps": None,
                "ratio": None,
                "index": None if s["points"] else 1.0,
                "regression": False,
            }
            for earlier, last in zip(reversed(s["points"]), reversed(s["_gbps"])):
                shared = sorted(set(gbps) & set(last))
                if not shared:
                    continue
                base, new = geomean(last[k] for k in shared), geomean(gbps[k] for k in shared)
                ratio = new / base
                point.update(
                    base_run_id=earlier["run_id"],
                    shared=len(shared),
                    base_GBps=base,
                    new_GBps=new,
                    ratio=ratio,
                    regression=ratio < fail_below,
                    index=earlier["index"] * ratio if earlier["index"] is not None else None,
                )
                break
            s["points"].append(point)
            s["_gbps"].append(gbps)
    out = []
    for s in series.values():
        s.pop("_gbps")
        out.append(s)
    return {
        "fail_below": fail_below,
        "runs": [
            {
                "run_id": d["run"]["run_id"],
                "created_at": d["run"].get("created_at"),
                "git_commit": d["run"].get("git_commit"),
                "complete": bool((d.get("summary") or {}).get("complete", True)),
            }
            for d in docs
        ],
        "series": out,
        "regressions": [
            {"pass": s["pass"], "impl": s["impl"], **p} for s in out for p in s["points"] if p["regression"]
        ],
    }
