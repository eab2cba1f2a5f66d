"""The prepared GPU check (``benchmarks/gpu.py``, issue 41) runs at toy sizes on the CPU: every
case's answer through the array seam has the caller's type and device and agrees with the NumPy
reference, and every hand-written torch candidate it times computes the same map. Times are
printed, never asserted."""

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (the torch extra)")
def test_gpu_script_smoke_on_the_cpu(tmp_path):
    if not SCRIPT.exists():
        pytest.skip(f"{SCRIPT} is not in this copy of the tests")
    spec = importlib.util.spec_from_file_location("gpu_bench", SCRIPT)
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    lines = []
    rows = gpu.run("cpu", smoke=True, repeats=1, log=lines.append)
    assert {r["kernel"] for r in rows} >= {"stiefel_retr_polar", "stiefel_inv_retr_polar",
                                          "spd_exp", "sphere_exp"}
    for r in rows:
        assert r["ok"], r
        for name, c in r["candidates"].items():
            # float64 on both sides; the candidates are other algorithms for the same map
            assert c["max_err"] <= 1e-6, (r["case"], name, c)
    assert len(lines) == len(rows)
    assert gpu.main(["--device", "cpu", "--smoke", "--repeats", "1",
                     "--json", str(tmp_path / "gpu.json")]) == 0
