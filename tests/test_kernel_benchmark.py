"""benchmarks/kernels.py and the matmuls findings page: the kernels table divides the right medians and
shows runs that did not end ok; the benchmark refuses a folder that is not results."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from fixed_web_platform.findings.matmuls import ratio_table

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("kernels_benchmark", ROOT / "benchmarks" / "kernels.py")
kernels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernels)


def _row(engine: str, bits: int, median: float, spread: float = 1.0, m: int = 128) -> dict:
    return {"browser": "chrome", "engine": engine, "platform": "webgpu", "m": m, "k": 768, "n": 768,
            "bits_requested": bits, "kernel_variant": f"{engine}-{bits}", "latency_ms_median": median,
            "latency_ms_p10": median - spread, "latency_ms_p90": median + spread}


def test_ratios_are_ort_over_harness_and_low_bit_over_f32_judged_on_the_spreads() -> None:
    summary = pd.DataFrame([_row("harness", 32, 40.0), _row("ort", 32, 80.0), _row("harness", 8, 42.0, 2.0),
                            _row("harness", 4, 50.0), _row("ort", 4, 100.0), _row("harness", 2, 30.0)])
    rows = pd.DataFrame([{**_row("ort", 2, 0.0), "outcome": "timeout"}])
    lines = ratio_table(summary, rows).splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert cells[0] == ["chrome", "128x768x768", "32", "harness-32", "40.0 (39.0-41.0)", "80.0 (79.0-81.0)", "2.00", "1"]
    assert cells[1][-1] == "1.05 (same within spread)"  # 40-44 overlaps 39-41
    assert cells[2] == ["chrome", "128x768x768", "4", "harness-4", "50.0 (49.0-51.0)", "100.0 (99.0-101.0)",
                        "2.00", "1.25 (slower)"]
    assert cells[3] == ["chrome", "128x768x768", "2", "harness-2", "30.0 (29.0-31.0)", "timeout", "-",
                        "0.75 (faster)"]


def test_a_folder_that_is_not_results_is_exit_2(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert kernels.main(["--from", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error:")
