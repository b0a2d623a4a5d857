"""benchmarks/kernels.py: its table divides the right medians and shows runs that did not end ok."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("kernels_benchmark", ROOT / "benchmarks" / "kernels.py")
kernels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernels)


def _row(engine: str, bits: int, median: float | None, outcome: str = "ok", m: int = 128) -> dict:
    return {"browser": "chrome", "engine": engine, "platform": "webgpu", "m": m, "k": 768, "n": 768,
            "bits_requested": bits, "outcome": outcome, "latency_ms_median": median}


def test_ratios_are_ort_over_harness_and_low_bit_over_f32() -> None:
    rows = [_row("harness", 32, 40.0), _row("ort", 32, 80.0), _row("harness", 4, 50.0), _row("ort", 4, 100.0),
            _row("harness", 2, 30.0), _row("ort", 2, None, "timeout")]
    lines = kernels.ratio_table(rows).splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert cells[0] == ["chrome", "128x768x768", "32", "40.0", "80.0", "2.00", "1"]
    assert cells[1] == ["chrome", "128x768x768", "4", "50.0", "100.0", "2.00", "1.25"]
    assert cells[2] == ["chrome", "128x768x768", "2", "30.0", "timeout", "-", "0.75"]


def test_a_folder_that_is_not_results_is_exit_2(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert kernels.main(["--from", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error:")
