"""The kernel comparison runs at tiny sizes and every backend agrees with the reference.

Times are printed, never asserted (benchmarks measure speed; tests measure correctness).
"""

import json

import pytest

from rfl_fast.app import bench
from rfl_fast.app.cli import main


@pytest.mark.full  # every kernel's timing through the CLI: ~30 s of timing loops
def test_compare_smoke_runs_and_backends_agree(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench.main(["--smoke", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    kernels = {row["kernel"] for row in result["rows"]}
    assert "stiefel_retr_polar" in kernels and "sym_logm" in kernels
    for row in result["rows"]:
        assert row["agree"], row
        assert all(row["agree"].values()), row
    assert result["machine"]["copy_bandwidth_GBps"] > 0
    assert "kernel" in capsys.readouterr().out


def test_cli_bench_and_info(capsys):
    assert main(["bench", "--smoke", "--only", "sphere_exp"]) == 0
    assert "sphere_exp" in capsys.readouterr().out
    assert main(["info"]) == 0
    assert "backends" in capsys.readouterr().out
