"""benchmarks/tier_control.py: the pinned sweep runs only the browsers with a verified tier pin,
each with it, and a configuration is judged on the median of its page loads."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("tier_control", ROOT / "benchmarks" / "tier_control.py")
tier_control = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tier_control)


def test_the_pinned_sweep_keeps_the_browsers_with_a_pin_and_adds_it():
    args = ["--browser", "chrome", "firefox", "--engine", "ort", "--bits", "8"]
    pinned = tier_control.pinned_args(args)
    assert pinned == [*args, "--browser", "firefox", "--browser-pref", "firefox=javascript.options.wasm_baselinejit=false"]
    assert tier_control.browsers_asked(pinned) == ["firefox"]  # the repeated --browser is the one in effect
    assert "firefox" in tier_control.browsers_asked(["--engine", "ort"])  # the main command's default browsers
    assert tier_control.pinned_args(["--browser", "chrome", "edge"]) is None


def test_a_configuration_is_the_median_of_its_page_loads():
    rows = pd.DataFrame({"browser": "firefox", "engine": "ort", "platform": "wasm", "workload": "w",
                         "bits_requested": 8, "weight_format": "", "outcome": ["ok", "ok", "ok", "failed"],
                         "latency_ms_median": [10.0, 30.0, 11.0, 1.0], "steady_class": ["flat", "flat", "warm-up", ""]})
    (one,) = tier_control._per_configuration(rows).itertuples()
    assert (one.latency_ms_median, one.page_loads, one.steady_class) == (11.0, 3, "flat, warm-up")
