"""`npformer bench` runs end to end (numbers are reported in benchmarks/RESULTS.md, never asserted)."""

import io

from npformer import bench


def test_bench_measures_a_preset_without_torch():
    out = io.StringIO()
    results = bench.run(["tiny"], steps=1, with_torch=False, stream=out)
    tiny = results["presets"]["tiny"]
    assert results["gemm_gflops"] > 0 and tiny["gflops"] > 0 and 0 < tiny["mfu"]
    assert tiny["tokens_per_second"] > 0 and tiny["decoding"]["speedup"] > 0
    assert "tiny" in out.getvalue() and "GFLOP/s" in out.getvalue()


def test_random_batches_have_lengths_between_half_and_full():
    preset = bench.PRESETS["small"]
    for src, tgt in bench.random_batches(preset, 3):
        src_lengths = (src != 0).sum(1)
        assert src.shape == (64, 16) and src_lengths.min() >= 8 and src_lengths.max() <= 16
        assert (tgt[:, 0] == 1).all() and ((tgt == 2).sum(1) == 1).all()
