"""The Triton forward kernel, called directly with NaN-poisoned outputs, against the fp64 reference."""

import pytest
import torch
from kernel_inputs import DTYPES, ODD_N, random_inputs, spy_launches

from rmsnorm_kernels.poison import poisoned_outputs
from rmsnorm_kernels.reference import relative_error, rmsnorm_reference, tolerance_for
from rmsnorm_kernels.segments import row_alignment, row_segments
from rmsnorm_kernels.kernel_config import CHUNKED_FROM, ForwardConfig, forward_candidates, rule_forward
from rmsnorm_kernels.triton_forward import rmsnorm_forward, rmsnorm_fwd_rows_kernel


def check_forward(x, w):
    with poisoned_outputs():
        y, x2d, rstd = rmsnorm_forward(x, w, 1e-6)
    y_ref, rstd_ref = rmsnorm_reference(x, w, 1e-6)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert rstd.dtype == torch.float32 and rstd.shape == (x2d.shape[0],)
    assert relative_error(y, y_ref) <= tolerance_for(x.dtype)
    assert relative_error(rstd, rstd_ref.reshape(-1)) <= 1e-6


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", ODD_N)
def test_forward_matches_reference(n, dtype):
    x, w, _ = random_inputs((9, n), dtype)
    check_forward(x, w)


def test_forward_any_leading_shape_and_widest_row():
    x, w, _ = random_inputs((2, 3, 5, 33), torch.bfloat16)
    check_forward(x, w)
    x, w, _ = random_inputs((2, 65536), torch.float32)
    check_forward(x, w)


def test_forward_non_contiguous_input():
    base, w, _ = random_inputs((40, 2 * 300), torch.float32)
    strided_rows = base[::3, :300]  # row stride 3·600, unit column stride: used in place
    check_forward(strided_rows, w[:300].contiguous())
    transposed = torch.randn(300, 12).t()  # column stride 12: copied to rows
    check_forward(transposed, torch.randn(300))


@pytest.mark.parametrize("config", [None, ForwardConfig("chunked", chunk=128, num_warps=4)], ids=["rows", "chunked"])
def test_forward_rows_whose_stride_is_less_aligned_than_their_width(config):
    """Rows of 300 (a multiple of 4) at a stride of 302 (of 2): the alignment promised to the compiler
    (`segments.row_alignment`) comes from the strides as well as N, or rows after the first are misread."""
    base, w, _ = random_inputs((11, 302), torch.bfloat16)
    x, w = base[:, :300], w[:300].contiguous()
    assert row_alignment(300, (300,)) == 4 and row_alignment(300, (302, 300)) == 2
    with poisoned_outputs():
        y, _, rstd = rmsnorm_forward(x, w, 1e-6, config=config)
    y_ref, rstd_ref = rmsnorm_reference(x, w, 1e-6)
    assert relative_error(y, y_ref) <= tolerance_for(x.dtype)
    assert relative_error(rstd, rstd_ref.reshape(-1)) <= 1e-6


def test_row_alignment():
    """The largest power of two up to a 16-byte vector dividing N and every stride."""
    assert [row_alignment(n, (n,)) for n in (8298, 8450, 8200, 4096, 5299, 12)] == [2, 2, 8, 8, 1, 4]
    assert row_alignment(4096, (4096,), element_size=4) == 4 and row_alignment(4096, (4100,)) == 4
    assert row_alignment(8298, ()) == 2 and row_alignment(7, (0,)) == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1000, 1024, 3000, 20000])
def test_chunked_two_pass_forward(n, dtype):
    """The chunked kernel (Σx² over CHUNK-wide pieces, then x read again to write y) at widths that are
    one chunk, several chunks and several chunks plus a partial one."""
    x, w, _ = random_inputs((5, n), dtype)
    with poisoned_outputs():
        y, _, rstd = rmsnorm_forward(x, w, 1e-6, config=ForwardConfig("chunked", chunk=512, num_warps=4))
    y_ref, rstd_ref = rmsnorm_reference(x, w, 1e-6)
    assert relative_error(y, y_ref) <= tolerance_for(dtype)
    assert relative_error(rstd, rstd_ref.reshape(-1)) <= 1e-6


@pytest.mark.parametrize(
    "n, chunks",
    [
        (16384, {512, 1024, 2048, 4096}),
        (2560, {512, 2048, 4096}),
        (5120, {512, 1024, 2048, 4096}),
        (3000, {512, 1024, 2048, 4096}),
        (2048, {512, 1024, 2048, 4096}),
        (1024, set()),
        (200, set()),
    ],
)
def test_chunked_candidates_are_the_chunks_that_pad_the_row_least_and_the_wide_ones(n, chunks):
    """Narrow chunks only where the last one is nearly full; 2048 and 4096 at any width from 2048, up to 16 warps,
    however much of the last one is masked (the H200 ran 4096 × 16 warps at 97–98 % of its copy ceiling at 8960,
    where the last chunk holds 768 of 4096)."""
    found = [c for c in forward_candidates(n) if c.kernel == "chunked"]
    assert {c.chunk for c in found} == chunks
    assert all(c.num_warps <= (16 if c.chunk >= 2048 else 8) for c in found)
    assert any(c.num_warps == 16 for c in found) == bool(chunks)


def test_poisoning_catches_an_unwritten_row():
    x, w, _ = random_inputs((6, 700), torch.float32)
    with poisoned_outputs():
        from rmsnorm_kernels.poison import new_output

        y = new_output((6, 700), torch.float32, "cpu")
        rstd = new_output((6,), torch.float32, "cpu")
    rmsnorm_fwd_rows_kernel[(5,)](
        x, w, y, rstd, 6, x.stride(0), y.stride(0), 700, 1e-6, ROWS=1, ROW=row_segments(700).layout()
    )  # one row short
    y_ref, _ = rmsnorm_reference(x, w)
    assert relative_error(y[:5], y_ref[:5]) < 1e-6
    assert relative_error(y, y_ref) == float("inf")


@pytest.mark.parametrize("n", [1, 511, 512, 513, 2048, 2049, 3000, 5120, 8192, 8193, 65536])
def test_forward_candidates_give_every_thread_a_fair_share_of_the_tile(n):
    found = forward_candidates(n)
    assert found and found[0] == rule_forward(n)  # the rule first: the tuner keeps it unless beaten (RULE_MARGIN)
    assert found[0].kernel == ("chunked" if n >= CHUNKED_FROM else "rows")
    assert any(c.kernel == "rows" for c in found)  # whole rows stay a candidate at every width
    for c in found:
        if c.kernel == "rows" and c.rows == 1 and not c.padded:
            assert row_segments(n).padded // (32 * c.num_warps) >= 4 or n < 128


@pytest.mark.parametrize("n", [2304, 2560, 2880, 3072, 3584, 4608, 5120, 6144, 7168, 12288, 1000, 5000, 12345])
def test_segments_cover_the_row_with_little_padding(n):
    seg = row_segments(n)
    assert seg.padded >= n and all(w & (w - 1) == 0 for w in seg.widths)
    assert seg.padded - n <= max(16, n // 8)
    assert seg.masks == tuple(i == len(seg.widths) - 1 and seg.padded > n for i in range(3))


@pytest.mark.parametrize("n", [1000, 2304, 2880, 5120, 12345])
def test_padded_and_segmented_rows_give_the_same_answer(n):
    x, w, _ = random_inputs((9, n), torch.float32)
    y_ref, rstd_ref = rmsnorm_reference(x, w)
    for padded in (False, True):
        with poisoned_outputs():
            y, _, rstd = rmsnorm_forward(x, w, 1e-6, config=ForwardConfig(num_warps=4, padded=padded))
        assert relative_error(y, y_ref) <= 1e-6
        assert relative_error(rstd, rstd_ref) <= 1e-6


@pytest.mark.parametrize("n", [7, 300, 1000, 4097])
def test_every_forward_candidate_gives_the_same_answer(n):
    """Whatever the table picks for a width, the answer is the reference's: every candidate the tuner may choose
    (rows, warps, padded layout, chunked kernel) on fresh inputs with poisoned outputs."""
    x, w, _ = random_inputs((13, n), torch.float32)
    y_ref, rstd_ref = rmsnorm_reference(x, w)
    for config in forward_candidates(n):
        with poisoned_outputs():
            y, _, rstd = rmsnorm_forward(x, w, 1e-6, config=config)
        assert relative_error(y, y_ref) <= 1e-6, config
        assert relative_error(rstd, rstd_ref) <= 1e-6, config


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [3, 7, 9, 17, 1001, 2050, 3003])
def test_split_chunked_forward_at_rows_starting_anywhere(n, dtype, monkeypatch):
    """``split``: each row a head up to the next 16-byte boundary, a vector body and a tail. 13 rows of an odd width
    start at every alignment; rows narrower than a vector are all head and tail. Checked against fp64 with poisoned
    outputs, and the split path is the one that ran (VEC > 0); a row stride that differs between x and y, or a base
    not 16-byte aligned, runs unsplit with the same answer."""
    from rmsnorm_kernels import triton_forward

    launched = spy_launches(monkeypatch, triton_forward, "VEC")
    config = ForwardConfig("chunked", chunk=512, num_warps=4, split=True)
    x, w, _ = random_inputs((13, n), dtype)
    y_ref, rstd_ref = rmsnorm_reference(x, w, 1e-6)
    with poisoned_outputs():
        y, _, rstd = rmsnorm_forward(x, w, 1e-6, config=config)
    assert launched[-1][1] == 16 // x.element_size()
    assert relative_error(y, y_ref) <= tolerance_for(dtype)
    assert relative_error(rstd, rstd_ref.reshape(-1)) <= 1e-6
    base = torch.cat([x, x[:, :3]], dim=1)[:, :n]  # row stride n + 3: y's is n
    unaligned = torch.cat([x.new_zeros(1), x.reshape(-1)])[1:].view(13, n)  # base 2 or 4 bytes off
    for other in (base, unaligned):
        with poisoned_outputs():
            y, _, _ = rmsnorm_forward(other, w, 1e-6, config=config)
        assert launched[-1][1] == 0 and relative_error(y, y_ref) <= tolerance_for(dtype)


def test_split_is_offered_only_where_rows_are_not_aligned():
    assert any(c.split for c in forward_candidates(4999)) and any(c.split for c in forward_candidates(8298))
    assert not any(c.split for c in forward_candidates(8192)) and not any(c.split for c in forward_candidates(1001))
