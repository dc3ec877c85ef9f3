import pytest

from engine.byte_model import actual_bytes, element_size, min_bytes


def test_forward_bytes_known_shape():
    # read x 4096·1024·2 + read γ 1024·2 + write y 4096·1024·2 + write rstd 4096·4
    assert min_bytes("fwd", 4096, 1024, "bfloat16") == 8388608 + 2048 + 8388608 + 16384 == 16795648


def test_backward_bytes_known_shape():
    # read x, dy 2·4096·1024·2 + read γ 2048 + read rstd 16384 + write dx 8388608 + write dγ 2048
    assert min_bytes("bwd", 4096, 1024, "float16") == 16777216 + 2048 + 16384 + 8388608 + 2048 == 25186304


def test_float32_doubles_the_tensor_bytes():
    assert min_bytes("fwd", 2, 3, "float32") == 2 * 3 * 4 + 3 * 4 + 2 * 3 * 4 + 2 * 4 == 68
    assert element_size("float32") == 4 and element_size("bfloat16") == 2


def test_actual_bytes_partials_written_and_read():
    got = actual_bytes("bwd", 16384, 4096, "bfloat16", {"programs": 132, "rows_per_program": 125, "partial_rows": 132})
    assert got.bytes == min_bytes("bwd", 16384, 4096, "bfloat16") + 2 * 132 * 4096 * 4
    assert "partials" in got.note


def test_actual_bytes_the_atomic_launch_declares_its_estimate():
    from rmsnorm_kernels.registry import default_registry

    launch = default_registry().get("triton-atomic").launch(1024, 512, 132)
    got = actual_bytes("bwd", 1024, 512, "bfloat16", launch)
    assert got.bytes == min_bytes("bwd", 1024, 512, "bfloat16") + launch["programs"] * 512 * 4 * 2
    assert got.note.startswith("estimate") and launch["programs"] > 1


def test_declared_extra_bytes_win_over_the_partials_rule():
    got = actual_bytes("bwd", 64, 64, "float32", {"partial_rows": 8, "extra_bytes": 12345, "extra_bytes_note": "mine"})
    assert got.bytes == min_bytes("bwd", 64, 64, "float32") + 12345 and got.note == "mine"


@pytest.mark.parametrize("pass_, launch", [("fwd", {"partial_rows": 8}), ("bwd", None), ("bwd", {"programs": 3})])
def test_actual_bytes_unknown(pass_, launch):
    assert actual_bytes(pass_, 64, 64, "bfloat16", launch) is None


def test_bad_pass_and_dtype_rejected():
    with pytest.raises(ValueError):
        min_bytes("sideways", 1, 1, "bfloat16")
    with pytest.raises(ValueError):
        min_bytes("fwd", 1, 1, "int8")
