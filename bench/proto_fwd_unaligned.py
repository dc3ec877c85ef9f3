"""One-off prototype (issue 33, 2026-12-07 on an H100: results/checks/probe-fwd-unaligned-h100-2026-12-07.json): the
chunked forward with each row split into a scalar head up to the next 16-byte boundary, a vector body and a scalar
tail, against the shipped chunked kernel at rows not a multiple of 8."""

import triton
import triton.language as tl


@triton.jit
def chunked_aligned(X, W, Y, RSTD, stride_x, stride_y, N: tl.constexpr, eps, CHUNK: tl.constexpr, VEC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = row * stride_x
    head = (VEC - start % VEC) % VEC
    body = N - head
    body = body - body % VEC
    body = tl.multiple_of(body, VEC)
    xb = X + tl.multiple_of(start + head, VEC)
    yb = Y + tl.multiple_of(row * stride_y + head, VEC)
    cols = tl.arange(0, CHUNK)
    squares = tl.zeros([CHUNK], dtype=tl.float32)
    for s in tl.range(0, N, CHUNK):
        x = tl.load(xb + s + cols, mask=s + cols < body, other=0.0).to(tl.float32)
        squares += x * x
    e = tl.arange(0, 2 * VEC)
    emask = tl.where(e < VEC, e < head, head + body + e - VEC < N)
    edge_col = tl.where(e < VEC, e, head + body + e - VEC)
    xe = tl.load(X + start + edge_col, mask=emask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt((tl.sum(squares, axis=0) + tl.sum(xe * xe, axis=0)) / N + eps)
    for s in tl.range(0, N, CHUNK):
        m = s + cols < body
        x = tl.load(xb + s + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(W + head + s + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(yb + s + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=m)
    we = tl.load(W + edge_col, mask=emask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_y + edge_col, (xe * rstd * we).to(Y.dtype.element_ty), mask=emask)
    tl.store(RSTD + row, rstd)


def bench():
    import torch
    import json
    import os
    from triton.testing import do_bench
    from rmsnorm_kernels.triton_forward import rmsnorm_forward
    from rmsnorm_kernels.kernel_config import ForwardConfig

    out = []
    M = 16384
    for N in (1001, 2999, 5299, 8298, 10668, 14155, 15651, 12001, 4096, 5120):
        x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
        ref = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
        nb = 2 * M * N * 2
        res = {"N": N}
        for chunk in (512, 1024, 2048):
            for warps in (4, 8):
                cfg = ForwardConfig("chunked", chunk=chunk, num_warps=warps)
                t = do_bench(lambda: rmsnorm_forward(x, w, 1e-6, config=cfg), warmup=10, rep=60)
                res[f"old {chunk}x{warps}"] = round(nb / t / 1e6)
                y = torch.empty_like(x)
                r = torch.empty(M, device="cuda")

                def f():
                    return chunked_aligned[(M,)](
                        x, w, y, r, x.stride(0), y.stride(0), N, 1e-6, CHUNK=chunk, VEC=8, num_warps=warps
                    )

                f()
                torch.cuda.synchronize()
                err = (y.double() - ref).abs().max().item()
                t = do_bench(f, warmup=10, rep=60)
                res[f"new {chunk}x{warps}"] = round(nb / t / 1e6)
                res[f"err {chunk}x{warps}"] = err
        try:
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction

            t = do_bench(lambda: LigerRMSNormFunction.apply(x, w, 1e-6), warmup=10, rep=60)
            res["liger"] = round(nb / t / 1e6)
        except Exception as e:
            res["liger"] = str(e)[:80]
        t = do_bench(lambda: rmsnorm_forward(x, w, 1e-6), warmup=10, rep=60)
        res["in force"] = round(nb / t / 1e6)
        print(json.dumps(res), flush=True)
        out.append(res)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "proto_fwd.json"), "w"), indent=1)


if __name__ == "__main__":
    bench()
