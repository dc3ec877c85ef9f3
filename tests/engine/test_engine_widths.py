"""Width scans: the widths preset, random widths drawn from a seed (recorded in the sweep), the check's widths, and
`rmsnorm-dash tune`'s whole procedure on tiny problems under Triton's interpreter (numbers meaningless, the flow
real: candidates compiled and checked, timed, the table written and read back)."""

import json
import random

import pytest

from engine.models import MAX_WIDTHS, Sweep
from engine.presets import get_preset, random_widths


def test_widths_preset_scans_every_multiple_of_256():
    p = get_preset("widths")
    assert p["N"] == list(range(256, 16385, 256)) and p["M"] == [16384]


def test_random_widths_are_seeded_distinct_and_not_multiples_of_64():
    seed = random.randrange(2**31)
    a, b = random_widths(8, seed), random_widths(8, seed)
    assert a == b and len(set(a)) == 8 and all(n % 64 and 65 <= n <= 16384 for n in a), seed
    assert random_widths(8, seed + 1) != a


def test_a_sweep_records_the_seed_and_validating_it_again_adds_nothing():
    s = Sweep(preset="widths", random_widths=8)
    assert s.seed is not None and len(s.N) == 72 and s.N == sorted(s.N)
    assert set(random_widths(8, s.seed)) <= set(s.N)
    again = Sweep.model_validate(json.loads(s.model_dump_json(by_alias=True)))
    assert again.N == s.N and again.seed == s.seed


def test_too_many_widths_is_refused_naming_n():
    with pytest.raises(ValueError, match="N has"):
        Sweep(N=list(range(1, MAX_WIDTHS + 2)))


def test_check_widths_adds_the_scan_and_random_widths(capsys, monkeypatch):
    from engine import check

    seen = {}

    def fake_run(names, dtypes, shapes, device, seed, on_row=None):
        seen["shapes"] = shapes
        return []

    monkeypatch.setattr(check, "run_check", fake_run)
    assert (
        check.check_main(
            ["--impl", "eager", "--widths", "--random-widths", "3", "--width-seed", "5", "--device", "cpu"]
        )
        == 0
    )
    widths = {n for _, n in seen["shapes"]}
    assert set(get_preset("widths")["N"]) <= widths and set(random_widths(3, 5)) <= widths
    assert "random widths (seed 5)" in capsys.readouterr().out


def test_tune_on_cpu_writes_a_table_that_reads_back(tmp_path, monkeypatch):
    from engine import tune
    from rmsnorm_kernels import kernel_config

    monkeypatch.setattr(tune, "FIRST_REPS", 1)
    monkeypatch.setattr(tune, "FINAL_REPS", 1)
    monkeypatch.setattr(tune, "FINALISTS", 1)
    lines = []
    doc = tune.tune(widths=(40,), ms=(5,), kinds=("fwd",), workers=0, device="cpu", say=lines.append)
    path = tune.write_table(doc, tmp_path / "cpu.json")
    table = kernel_config.load_table(path)
    entry = doc["entries"]["fwd"][0]
    assert (entry["N"], entry["M"]) == (40, 5) and entry["candidates"] == len(kernel_config.candidates("fwd", 40))
    assert table.lookup("fwd", 40, 5) == kernel_config.config_from_dict("fwd", entry["config"])
    assert doc["complete"] and doc["grid"] == {"N": [40], "M": [5], "kinds": ["fwd"]}
    assert any("compiled" in line for line in lines)


def test_a_tune_of_some_kinds_keeps_the_other_kinds_of_the_table_it_replaces():
    from engine.tune import carry_over
    from rmsnorm_kernels import kernel_config

    old = json.loads(kernel_config.table_path("sm90").read_text())
    new = {
        "schema": 1,
        "arch": "sm90",
        "device": "NVIDIA Test",
        "created_at": "2026-12-07T00:00:00Z",
        "grid": {"N": [4096], "M": [4096], "kinds": ["fwd", "persistent"]},
        "entries": {
            "fwd": [{"N": 4096, "M": 4096, "config": {"kernel": "rows", "rows": 1, "num_warps": 4}}],
            "persistent": [],
        },
    }
    merged = carry_over(new, old)
    assert merged["entries"]["fwd"] == new["entries"]["fwd"]  # what was tuned now is never replaced
    assert merged["entries"]["workspace"] == old["entries"]["workspace"]
    assert merged["entries"]["atomic"] == old["entries"]["atomic"]
    assert set(merged["carried_over"]) == {"workspace", "atomic"}
    # the date of whoever made the entries: the old table, or the table it had carried them over from
    made = (old.get("carried_over") or {}).get("atomic", {}).get("created_at", old["created_at"])
    assert merged["carried_over"]["atomic"]["created_at"] == made
    assert "persistent" not in merged["carried_over"]  # tuned now, even with no entry
    assert set(merged.get("kept_entries") or {}) <= {"workspace", "atomic"}  # notes of tuned kinds go with them
    # a table that made its own atomic entries is named as their origin
    own = {**old, "carried_over": {}, "created_at": "2026-12-01T00:00:00Z"}
    assert carry_over(new, own)["carried_over"]["atomic"]["created_at"] == "2026-12-01T00:00:00Z"
    table = kernel_config.parse_table(merged, "merged")
    assert table.lookup("atomic", 4096, 4096) is not None
    assert carry_over(new, {**old, "arch": "sm80"}) == new  # another architecture's table lends nothing


def test_a_tune_of_some_widths_mends_the_table_instead_of_replacing_it():
    from engine.tune import carry_over
    from rmsnorm_kernels import kernel_config

    old = json.loads(kernel_config.table_path("sm90").read_text())
    tuned_n = old["entries"]["fwd"][-1]["N"]  # a width the old table has, re-tuned now
    fresh = {"N": tuned_n, "M": 4096, "config": {"kernel": "rows", "rows": 1, "num_warps": 4}}
    new = {
        "schema": 1,
        "arch": "sm90",
        "device": "NVIDIA Test",
        "created_at": "2026-12-08T00:00:00Z",
        "grid": {"N": [301, tuned_n], "M": [4096], "kinds": ["fwd"]},
        "entries": {"fwd": [fresh, {"N": 301, "M": 4096, "config": {"kernel": "rows", "rows": 4, "num_warps": 4}}]},
    }
    merged = carry_over(new, old, other_widths=True)
    rows = merged["entries"]["fwd"]
    assert [e for e in rows if e["N"] == tuned_n] == [fresh]  # what was tuned now replaces the old entry
    others = [e for e in old["entries"]["fwd"] if e["N"] not in (301, tuned_n)]
    assert [e for e in rows if e["N"] not in (301, tuned_n)] == others  # every other width's entry kept, in order
    assert [(e["N"], e["M"]) for e in rows] == sorted((e["N"], e["M"]) for e in rows)
    assert merged["carried_over"]["fwd"]["widths"] == sorted({e["N"] for e in others})
    assert merged["entries"]["persistent"] == old["entries"]["persistent"]  # kinds not tuned, as before
    table = kernel_config.parse_table(merged, "mended")
    assert table.lookup("fwd", 4096, 4096) is not None
    # a whole-grid tune (no --widths) keeps nothing of the kinds it tuned
    assert carry_over(new, old)["entries"]["fwd"] == new["entries"]["fwd"]


def test_the_rule_keeps_its_place_unless_beaten_by_more_than_the_margin():
    from engine.tune import RULE_MARGIN, winner

    rule, other, third = "rule", "other", "third"
    inside = {rule: 100.0, other: 100.0 / (1 + RULE_MARGIN / 2), third: 120.0}
    assert winner(inside, rule) == rule
    beyond = {rule: 100.0, other: 100.0 / (1 + 2 * RULE_MARGIN), third: 120.0}
    assert winner(beyond, rule) == other
    assert winner({other: 90.0, third: 80.0}, rule) == third  # the rule not timed (dropped): the fastest
