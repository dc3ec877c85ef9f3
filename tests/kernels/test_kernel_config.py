"""The kernels' configuration: the rule, the candidates the tuner tries, the tables and their nearest-neighbour lookup
(with the register guard), the run header's description — on fresh random widths, not only the tuned ones."""

import json
from dataclasses import replace
import math
import random

import pytest

from engine import tune
from engine.presets import get_preset
from rmsnorm_kernels import kernel_config as kc
from rmsnorm_kernels.kernel_config import BackwardConfig, ForwardConfig

RANDOM = random.Random()  # fresh widths every run; the failing width is in the assertion message


def random_widths(k=12):
    return sorted(RANDOM.randint(1, 20000) for _ in range(k))


def table(entries, **meta):
    doc = {
        "schema": 1,
        "arch": "sm90",
        "device": "NVIDIA Test",
        "created_at": "2026-12-06T00:00:00Z",
        **meta,
        "entries": {
            kind: [{"N": n, "M": m, "config": kc.config_to_dict(c)} for n, m, c in rows]
            for kind, rows in entries.items()
        },
    }
    return kc.parse_table(doc, "test.json"), doc


@pytest.mark.parametrize("kind", kc.KINDS)
def test_rule_and_candidates_are_valid_at_any_width(kind):
    for n in random_widths() + [1, 16, 65536]:
        base = kc.rule(kind, n)
        found = kc.candidates(kind, n)
        assert found and base in found, n
        for c in found:
            assert c.num_warps in (1, 2, 4, 8, 16, 32) and c.rows >= 1 and c.rows & (c.rows - 1) == 0, (n, c)
            if kind != "fwd":
                assert c.stages in (1, 3) and c.programs_per_sm in (1, 2), (n, c)


def test_rule_keeps_the_backward_tile_under_16k_elements_and_the_registers_fit():
    for n in random_widths() + [5376, 11008, 3840, 1792]:
        c = kc.rule_backward("persistent", n)
        p = kc.row_segments(n).padded
        assert c.rows == 1 or c.rows * p < kc.BACKWARD_TILE_ELEMENTS, n
        if p < 32768:
            # split odd rows hold γ whatever the model says: it is not calibrated for them (H200 probe, 15253:
            # split over 16 warps, one stage, γ held ran 44.7 % of the copy ceiling, γ reloaded 34.9 %)
            assert kc.register_slack(c, n) >= 0 or c.reload_weight or c.split, (n, c)
    assert kc.rule_backward("persistent", 5376).rows == 2  # not the one row that left the H100 at 61 %


def test_lookup_takes_the_nearest_measured_width_then_the_nearest_m():
    a, b = BackwardConfig(rows=2, num_warps=8), BackwardConfig(rows=1, num_warps=8, reload_weight=True)
    c = BackwardConfig(rows=4, num_warps=8)
    t, _ = table({"persistent": [(4096, 4096, c), (4096, 32768, a), (8192, 32768, b)]})
    assert t.lookup("persistent", 4096, 16384) == a  # log2 distance: 32768 is nearer 16384 than 4096? equal → smaller M
    assert t.lookup("persistent", 4096, 1000) == c
    assert t.lookup("persistent", 7000, 20000) == b
    assert t.lookup("persistent", 5000, 20000) == a
    assert t.lookup("workspace", 5000, 20000) is None  # no entry of that kind: the rule answers


def test_lookup_passes_over_a_neighbour_that_would_spill_here():
    """4096's winner (4 rows × 16 warps, one segment) at 3840 (three segments, one masked) spilled 240 B (ptxas):
    the next nearest entry that fits is taken instead."""
    spills_at_3840 = BackwardConfig(rows=4, num_warps=16, stages=1)
    fits = BackwardConfig(rows=2, num_warps=8)
    t, _ = table({"persistent": [(4096, 32768, spills_at_3840), (3584, 32768, fits)]})
    assert t.lookup("persistent", 4096, 32768) == spills_at_3840  # at its own width the measured winner stands
    assert kc.register_slack(spills_at_3840, 3840) < min(0, kc.register_slack(spills_at_3840, 4096))
    assert t.lookup("persistent", 3840, 32768) == fits


def test_lookup_prefers_a_near_width_of_the_same_layout_class():
    """7936 (4096 + 2048 + a masked 2048) is nearer 8192 (one segment) than 7680 (the same layout class): the
    class decides; where no width of the class lies within `CLASS_WINDOW` the nearest width answers (a sparse
    table's far same-class entry must not beat a near one: 11008 ran at 92 % on 11264's configuration)."""
    one, masked, two = (BackwardConfig(rows=r, num_warps=w) for r, w in ((2, 8), (1, 8), (2, 4)))
    t, _ = table({"persistent": [(8192, 32768, one), (7680, 32768, masked), (3072, 32768, two)]})
    assert kc.layout_class(7936) == kc.layout_class(7680) != kc.layout_class(8192)
    assert t.lookup("persistent", 7936, 32768) == masked
    assert t.lookup("persistent", 8192, 32768) == one
    assert kc.layout_class(12288) == kc.layout_class(3072)  # two segments, two octaves apart: a nearer width answers
    assert t.lookup("persistent", 12288, 32768) in (one, masked)
    near, far = (
        BackwardConfig(rows=1, num_warps=8, reload_weight=True),
        BackwardConfig(rows=1, num_warps=32, reload_weight=True),
    )
    t, _ = table({"persistent": [(11264, 32768, near), (15360, 32768, far)]})
    assert kc.layout_class(11008) == kc.layout_class(15360) != kc.layout_class(11264)
    assert abs(math.log2(15360 / 11008)) > kc.CLASS_WINDOW and t.lookup("persistent", 11008, 32768) == near


def test_lookup_keeps_rows_aligned_alike_together_past_the_class_window():
    """15651 (rows not 16-byte aligned) is 0.06 octave from 16384 and 0.38 from 12001, the nearest unaligned width:
    past `CLASS_WINDOW` the width aligned alike within `ALIGNMENT_WINDOW` answers (on the H100 16384's forward ran at
    51 % of the ceiling at 15651, the unaligned widths' configuration at 70–81 %); farther than that, the nearest."""
    aligned_cfg, scalar_cfg, short_cfg = (
        ForwardConfig("rows", rows=1, num_warps=32),
        ForwardConfig("chunked", chunk=1024, num_warps=8),
        ForwardConfig("rows", rows=16, num_warps=4),
    )
    t, _ = table({"fwd": [(16384, 16384, aligned_cfg), (12001, 16384, scalar_cfg), (320, 16384, short_cfg)]})
    for n in (15651, 15678, 16383, 13001):
        assert not kc.aligned(n) and t.lookup("fwd", n, 16384) == scalar_cfg, n
    assert kc.CLASS_WINDOW < abs(math.log2(12001 / 15651)) <= kc.ALIGNMENT_WINDOW
    assert t.lookup("fwd", 16376, 16384) == aligned_cfg  # aligned: 16384 stays its neighbour
    assert abs(math.log2(12001 / 301)) > kc.ALIGNMENT_WINDOW and t.lookup("fwd", 301, 16384) == short_cfg


def test_even_unaligned_rows_take_their_own_alignment_first_then_the_odd_widths():
    """8298 (N ≡ 2 mod 4: 4-byte loads) is its own class: an entry of its alignment answers before a nearer odd one;
    in a table without one (tuned before the grid had them) the odd widths' choice still answers, not 8192's."""
    odd_cfg, two_cfg, four_cfg, wide_cfg = (
        ForwardConfig("chunked", chunk=1024, num_warps=8),
        ForwardConfig("chunked", chunk=2048, num_warps=4),
        ForwardConfig("rows", rows=1, num_warps=8),
        ForwardConfig("rows", rows=1, num_warps=16),
    )
    assert [kc.layout_class(n)[2] for n in (8297, 8298, 8300, 8304)] == [1, 2, 4, 8]
    full, _ = table(
        {"fwd": [(8192, 16384, wide_cfg), (8001, 16384, odd_cfg), (7002, 16384, two_cfg), (7004, 16384, four_cfg)]}
    )
    assert full.lookup("fwd", 8298, 16384) == two_cfg and full.lookup("fwd", 8300, 16384) == four_cfg
    assert full.lookup("fwd", 8297, 16384) == odd_cfg and full.lookup("fwd", 8304, 16384) == wide_cfg
    older, _ = table({"fwd": [(8192, 16384, wide_cfg), (8001, 16384, odd_cfg)]})
    assert older.lookup("fwd", 8298, 16384) == older.lookup("fwd", 8300, 16384) == odd_cfg
    assert all(kc.layout_class(n)[2] < 8 for n in tune.UNALIGNED_WIDTHS)
    assert {kc.layout_class(n)[2] for n in tune.UNALIGNED_WIDTHS} == {1, 2, 4}


def test_unaligned_rows_are_their_own_class_and_get_more_warps():
    """N % 8 ≠ 0: every load is scalar with its own address (ptxas: 14155 at 16 warps spilled 472 B); the rule
    spreads such a row over more threads than its aligned neighbour, and the lookup keeps the classes apart."""
    for n in random_widths():
        odd = n | 1
        assert kc.layout_class(odd)[2] == 1 and kc.layout_class(odd * 8)[2] == 8
        rule_odd, rule_even = (
            kc.rule_backward("persistent", odd),
            kc.rule_backward("persistent", odd + 7 - (odd + 7) % 8),
        )
        per_thread = [
            c.rows * kc.padded_width(w) / c.num_warps
            for c, w in ((rule_odd, odd), (rule_even, odd + 7 - (odd + 7) % 8))
        ]
        assert per_thread[0] <= per_thread[1], (odd, rule_odd, rule_even)
        even = odd + 7 - (odd + 7) % 8
        assert kc.rows_rule_forward(odd).num_warps >= kc.rows_rule_forward(even).num_warps, odd
        if kc.rule_forward(odd).kernel == "chunked":  # its body loaded in whole vectors, the edges apart
            assert kc.rule_forward(odd).split and not kc.rule_forward(even).split, odd
    aligned_winner, odd_winner = (
        BackwardConfig(rows=2, num_warps=8),
        BackwardConfig(rows=1, num_warps=32, reload_weight=True),
    )
    t, _ = table({"persistent": [(5120, 32768, aligned_winner), (4999, 32768, odd_winner)]})
    assert t.lookup("persistent", 5112, 32768) == aligned_winner
    assert t.lookup("persistent", 5111, 32768) == odd_winner


def test_config_for_uses_the_table_named_by_the_environment(monkeypatch, tmp_path):
    winner = ForwardConfig("chunked", chunk=1024, num_warps=4)
    _, doc = table({"fwd": [(4096, 16384, winner)]})
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv(kc.TABLE_ENV, str(path))
    kc.table_for.cache_clear()
    try:
        assert kc.config_for("fwd", 3900, 16384) == winner
        assert kc.config_for("persistent", 3900, 16384) == kc.rule_backward("persistent", 3900)
        described = kc.describe("sm90")
        assert described["table"] == "t.json" and described["source"] == "table" and described["override"] is True
    finally:
        kc.table_for.cache_clear()


@pytest.mark.parametrize(
    "bad",
    [
        {"schema": 2},
        {"schema": 1, "entries": {"fwd": [{"N": 0, "M": 1, "config": {}}]}},
        {"schema": 1, "entries": {"fwd": [{"N": 8, "M": 1, "config": {"warps": 4}}]}},
        {"schema": 1, "entries": {"nope": [{"N": 8, "M": 1, "config": {}}]}},
    ],
)
def test_a_malformed_table_is_refused_with_the_reason(bad):
    with pytest.raises(ValueError):
        kc.parse_table(bad, "bad.json")


@pytest.mark.parametrize("path", sorted(kc.CONFIG_DIR.glob("*.json")), ids=lambda p: p.name)
def test_the_shipped_tables_read_and_cover_every_kind(path):
    t = kc.load_table(path)
    assert set(t.entries) == set(kc.KINDS)
    assert t.meta["device"] and t.meta["created_at"] and t.meta["versions"]["triton"]
    assert t.meta["arch"] == path.stem  # the key `arch_of` gives the cards it serves
    for kind, rows in t.entries.items():
        for n, m, winner in rows:  # at a measured point the measured winner stands (the guards never overrule it)
            assert t.lookup(kind, n, m) == winner, (kind, n, m)
            assert kc.config_for(kind, n, m, path.stem) == winner, (kind, n, m)  # and runs as measured
        for n in random_widths(4):  # elsewhere: a measured neighbour, else the rule, fitted to the width
            found = t.lookup(kind, n, 4096)
            found = found if found is not None else kc.rule(kind, n, 4096)
            assert kc.config_for(kind, n, 4096, path.stem) == kc.fitted(kind, found, n)


def test_wide_tail_pads_a_thin_last_segment_and_is_a_candidate_only_where_it_changes_the_layout():
    """8448 = 8192 + 256 over 8 warps leaves one element per thread in the tail; with ``wide_tail`` the tail is 512
    wide, masked (two per thread). The tuner tries the twin where, and only where, the layout differs."""
    thin = BackwardConfig(rows=1, num_warps=8)
    wide = BackwardConfig(rows=1, num_warps=8, wide_tail=True)
    assert kc.row_layout(thin, 8448).widths == (8192, 256) and kc.row_layout(thin, 8448).masks == (False,) * 3
    assert kc.row_layout(wide, 8448).widths == (8192, 512) and kc.row_layout(wide, 8448).masks[1]
    assert kc.row_layout(wide, 8704) == kc.row_layout(thin, 8704)  # a 512 tail: two per thread already
    assert kc.row_layout(BackwardConfig(rows=2, num_warps=8, wide_tail=True), 8448).widths == (8192, 256)
    twins = [c for c in kc.candidates("persistent", 8448) if c.wide_tail]
    assert twins and all(kc.row_layout(c, 8448) != kc.row_layout(replace(c, wide_tail=False), 8448) for c in twins)
    assert not any(c.wide_tail for c in kc.candidates("persistent", 8192))
    assert kc.config_from_dict("persistent", {"rows": 1, "num_warps": 8}).wide_tail is False  # older tables read


def test_pipelined_backwards_get_a_wide_tail_where_a_borrowed_configuration_leaves_a_thin_one():
    """cp.async moves 4 bytes or more: a last segment of one bf16 per thread would be loaded synchronously inside the
    pipelined loop (8448 = 8192 + 256 over 8 warps ran at 81 % on the H100, 8704 = 8192 + 512 at 94 %). `config_for`
    widens it for the persistent and workspace backwards; not for the atomic one (no pipeline), a configuration
    without a pipeline (stages 1), rows of odd width (2-byte loads throughout) or a tail already two per thread."""
    thin = BackwardConfig(rows=1, num_warps=8)
    assert kc.fitted("persistent", thin, 8448) == replace(thin, wide_tail=True)
    assert kc.fitted("workspace", thin, 8448).wide_tail
    assert kc.fitted("atomic", thin, 8448) == thin
    assert kc.fitted("persistent", replace(thin, stages=1), 8448) == replace(thin, stages=1)
    assert kc.fitted("persistent", thin, 8449) == thin
    assert kc.fitted("persistent", thin, 8704) == thin and kc.fitted("persistent", thin, 8192) == thin
    t, doc = table({"persistent": [(8192, 16384, thin)]})
    assert t.lookup("persistent", 8448, 16384) == thin  # the table answers as measured; config_for fits it
    for n in get_preset("widths")["N"]:  # whatever the shipped table says: a thin tail only where widening spills
        for kind in kc.PIPELINED_KINDS:
            c = kc.config_for(kind, n, 16384)
            wide = replace(c, wide_tail=True)
            assert (
                c.stages < 2
                or c.padded
                or kc.row_layout(wide, n) == kc.row_layout(c, n)
                or kc.register_slack(wide, n, kind) < min(0, kc.register_slack(c, n, kind))
            ), (kind, n, c)


def test_a_wide_tail_is_not_given_where_it_would_spill():
    """12544 = 8192 + 4096 + 256 over 8 warps: ptxas (sm_90) gave the thin tail 255 registers and no spill, the
    masked 512-wide one 96 B of spill stack, and the H100 ran it at 0.86×; 10496 (one segment less wide) gained."""
    config = BackwardConfig(rows=1, num_warps=8)
    assert kc.register_slack(replace(config, wide_tail=True), 12544) < kc.register_slack(config, 12544) < 0
    assert kc.fitted("persistent", config, 12544) == config
    assert kc.fitted("persistent", config, 10496).wide_tail
    # γ reloaded frees the registers in the persistent kernel only: the workspace kernel holds it anyway (ptxas: the
    # same 96 B spilled there with the wide tail)
    reloads = replace(config, reload_weight=True, rows_per_program=64)
    assert kc.fitted("persistent", reloads, 12544).wide_tail and kc.fitted("workspace", reloads, 12544) == reloads
    # the budget follows the layout a configuration is compiled for: the masked tail costs its mask's registers
    assert kc.register_budget(12544, 8, kc.row_layout(replace(config, wide_tail=True), 12544)) == (
        kc.register_budget(12544, 8) - 16
    )


def test_the_forward_widens_a_tail_only_where_it_leaves_threads_idle():
    """8448 = 8192 + 256 over 16 warps: half the threads idle on the tail (1.07× widened, on the H100); 8704's
    512-wide tail, one element per thread, ran at 95.5 % as it was; the chunked kernel has no segments."""
    rows16 = ForwardConfig("rows", rows=1, num_warps=16)
    assert kc.fitted("fwd", rows16, 8448) == replace(rows16, wide_tail=True)
    assert kc.row_layout(replace(rows16, wide_tail=True), 8448).widths == (8192, 1024)
    assert kc.fitted("fwd", rows16, 8704) == rows16
    assert kc.fitted("fwd", replace(rows16, padded=True), 8448).wide_tail is False
    chunked = ForwardConfig("chunked", chunk=1024, num_warps=8)
    assert kc.fitted("fwd", chunked, 8448) == chunked


def test_rows_partly_aligned_are_tuned_over_both_rules_neighbourhoods():
    """8298 (4-byte loads since the alignment hint) is tried around the unaligned rule's choice (32 warps, scalar
    loads in mind) and around the aligned rule's (8 warps): which suits it is for the tuner to measure. Odd and
    aligned widths keep one neighbourhood."""
    for kind in ("persistent", "fwd"):
        tried = kc.candidates(kind, 8298)
        assert kc.rule(kind, 8298) in tried
        assert (
            kc.rule_backward(kind, 8298, vector=True) if kind != "fwd" else kc.rule_forward(8298, vector=True)
        ) in tried
    assert kc.partly_aligned(8298) and kc.partly_aligned(8300) and not kc.partly_aligned(8297)
    assert not kc.partly_aligned(8304)
    odd_vector = kc.rule_backward("persistent", 8297, vector=True)
    assert odd_vector != kc.rule("persistent", 8297) and odd_vector not in kc.candidates("persistent", 8297)


def test_rows_not_aligned_are_also_tried_without_a_pipeline():
    """Rows not 16-byte aligned load 2, 4 or 8 bytes at a time: every pipelined persistent candidate of such a width
    has a one-stage twin (14155's three-stage rule ran at 23 % of the copy ceiling on an H100); aligned widths do
    not."""
    for n in (14155, 8298, 12001):
        tried = kc.candidates("persistent", n)
        pipelined = [c for c in tried if c.stages > 1]
        assert pipelined and all(replace(c, stages=1) in tried for c in pipelined)
    aligned = kc.candidates("persistent", 12288)
    pipelined = [c for c in aligned if c.stages > 1]
    assert pipelined and not any(replace(c, stages=1) in aligned for c in pipelined)


def test_a_padded_forward_block_is_not_lent_where_the_row_fills_far_less_of_it():
    """11264's padded 16384-wide block, lent to 8960 (the same layout class, 0.33 octave away), leaves 45 % of its
    lanes masked where 11264 left 31 %: the H100 ran it at 90 % of the copy ceiling there, 8704's segments at 97 %.
    The guard passes it over (`PADDED_FILL_RATIO`) for the next nearest; a width that fills the block nearly as well
    keeps it, and a block that is not padded is lent whatever the fill."""
    padded, segments = ForwardConfig("rows", rows=1, num_warps=16, padded=True), ForwardConfig("rows", num_warps=8)
    t, _ = table({"fwd": [(11264, 16384, padded), (8704, 16384, segments)]})
    assert kc.layout_class(8960) == kc.layout_class(11264) == kc.layout_class(10752)
    assert kc.padded_fill(8960) < kc.PADDED_FILL_RATIO * kc.padded_fill(11264) <= kc.padded_fill(10752)
    assert t.lookup("fwd", 8960, 16384) == segments
    assert t.lookup("fwd", 10752, 16384) == padded
    for n in random_widths():  # whatever answers is an entry of the table or, none left, the rule's
        found = t.lookup("fwd", n, 16384)
        assert found in (padded, segments, None), n
        if found == padded and n != 11264:
            assert kc.padded_fill(n) >= kc.PADDED_FILL_RATIO * kc.padded_fill(11264), n
    only_padded, _ = table({"fwd": [(11264, 16384, padded)]})
    assert only_padded.lookup("fwd", 8960, 16384) is None  # none fits: the caller takes the rule


def test_a_card_with_a_table_of_its_own_gets_it_and_the_others_their_architectures(monkeypatch, tmp_path):
    """The H200 and the H100 are both sm_90 and wanted different forwards (the H200 ran whole rows at 80-93 % of its
    copy ceiling where chunks ran 97-98 %): ``configs/sm90-h200.json`` serves an H200, ``sm90.json`` every other
    sm_90 card; a model with no file of its own, or no name, gets the architecture's."""
    for name, rows in (("sm90", 8), ("sm90-h200", 2)):
        _, doc = table({"fwd": [(4096, 16384, ForwardConfig("rows", rows=rows, num_warps=8))]}, arch=name)
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    monkeypatch.setattr(kc, "CONFIG_DIR", tmp_path)
    monkeypatch.delenv(kc.TABLE_ENV, raising=False)
    for cache in (kc.arch_of, kc.table_for):
        cache.cache_clear()
    try:
        assert kc.arch_of((9, 0), "NVIDIA H200") == "sm90-h200"
        assert kc.arch_of((9, 0), "NVIDIA H100 80GB HBM3") == kc.arch_of((9, 0)) == "sm90"
        assert kc.arch_of((8, 0), "NVIDIA A100-SXM4-80GB") == "sm80" and kc.arch_of(None, "NVIDIA H200") == "sm90"
        assert kc.config_for("fwd", 4096, 16384, kc.arch_of((9, 0), "NVIDIA H200")).rows == 2
        assert kc.config_for("fwd", 4096, 16384, kc.arch_of((9, 0), "NVIDIA H100 PCIe")).rows == 8
        assert kc.describe(kc.arch_of((9, 0), "NVIDIA H200"))["arch"] == "sm90-h200"
    finally:
        for cache in (kc.arch_of, kc.table_for):
            cache.cache_clear()
    assert [kc.model_of(n) for n in ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090", "")] == [
        "h200",
        "h100",
        "rtx4090",
        None,
    ]


def test_the_rule_pipelines_no_wide_odd_row():
    """Odd rows load 2 bytes at a time, which `cp.async` cannot move: from `ODD_ONE_STAGE_FROM` on the rule gives
    them one stage (the H100 ran 14155 on its three at 23 % of the copy ceiling); aligned and even rows keep three
    below 16 K, every row one from 16 K. The persistent kernel splits odd rows from `SPLIT_FROM` (a vector body):
    one stage from `SPLIT_ONE_STAGE_FROM`."""
    for kind in ("persistent", "workspace"):
        for n in random_widths(40):
            config = kc.rule_backward(kind, n)
            p = kc.padded_width(n)
            split = kind == "persistent" and n % 2 == 1 and p >= kc.SPLIT_FROM
            assert config.split == split, (kind, n)
            if split:
                one = p >= kc.SPLIT_ONE_STAGE_FROM
            else:
                one = p >= 16384 or (n % 2 == 1 and p >= kc.ODD_ONE_STAGE_FROM)
            assert config.stages == (1 if one else 3), (kind, n)
    assert kc.rule_backward("persistent", 14155).stages == 1 and kc.rule_backward("persistent", 14154).stages == 3
