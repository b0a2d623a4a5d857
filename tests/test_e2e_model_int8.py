"""End to end: all-MiniLM-L6-v2 with int8 activations (W8A8, W4A8) in real Chromium (WebGPU's DP4A
kernels and WebNN's quantizeLinear -> dequantizeLinear) and Firefox (WebGPU), beside weight-only
runs of the same sweep: the browser ran int8 inputs (what each layer says), its output is the
float64 reference's within the flip-aware tolerance, and what int8 activations cost in accuracy
is what Python predicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from shared_sweeps import Swept, minilm_small

from fixed_web_platform.report.activations import activation_table
from fixed_web_platform.report.render import load_sweeps, summary_table
from fixed_web_platform.vocabulary import Outcome
from fixed_web_platform.workloads.encoder import accuracy
from fixed_web_platform.workloads.encoder.prepared import prepare_model

pytestmark = pytest.mark.browser


def _by_act_bits(swept: Swept) -> dict:
    """The shared MiniLM sweep's harness rows and ORT's refusals by (engine, platform, bits, act bits)."""
    return {(r.engine, r.platform, r.bits_requested, r.act_bits): r for r in swept.rows
            if r.engine == "harness" or r.act_bits == 8}


@pytest.fixture(scope="module")
def chrome(minilm_chrome: Swept):  # noqa: ANN201
    return minilm_chrome.out, _by_act_bits(minilm_chrome)


def _predicted_cosine(bits: int) -> float:
    p = prepare_model(minilm_small(), bits, 32, 0, act_bits=8, observer="minmax")
    return accuracy.compare(p.ref_dequantized[: p.batches.count], p.ref_float).cosine_mean


@pytest.mark.parametrize("platform", ["webgpu", "webnn"])
def test_int8_activation_rows_are_ok_and_cost_what_python_predicts(chrome, platform: str) -> None:  # noqa: ANN001
    _, rows = chrome
    for bits in (8, 4):
        a8, w_only = rows[("harness", platform, bits, 8)], rows[("harness", platform, bits, 32)]
        assert a8.outcome == Outcome.OK, a8.reason
        assert w_only.outcome == Outcome.OK, w_only.reason
        assert a8.observer == "minmax" and a8.calibration == "builtin-calibration"
        assert a8.rel_error_vs_dequantized <= a8.kernel_tolerance < 0.1
        assert "kernel tolerance" in a8.reason  # the row says why the tolerance is what it is
        assert a8.cosine_mean < w_only.cosine_mean  # int8 activations cost accuracy...
        # ...what the reference says, at the bits that ran (WebNN's standard mode runs 4-bit as 8-bit)
        assert abs(a8.cosine_mean - _predicted_cosine(a8.bits_executed)) < 5e-3
    if platform == "webgpu":
        assert rows[("harness", "webgpu", 8, 8)].compute_dtype == "i8dot"
        assert rows[("harness", "webgpu", 8, 8)].kernel_variant.startswith("dp4a-w8a8")
        assert rows[("harness", "webgpu", 4, 8)].kernel_variant.startswith("dp4a-w4a8")


def test_every_layer_says_its_input_was_int8(chrome) -> None:  # noqa: ANN001
    out, rows = chrome
    layers = pd.read_csv(out / "layers.csv", keep_default_na=False)
    for platform in ("webgpu", "webnn"):
        for act_bits, want in ((8, "int8"), (32, "")):
            run_id = rows[("harness", platform, 8, act_bits)].run_id
            got = layers[layers["run_id"] == run_id]["act_dtype"]
            assert len(got) == 36 and set(got) == {want}, (platform, act_bits, set(got))


def test_ort_says_its_int8_activations_need_per_channel_weights(chrome) -> None:  # noqa: ANN001
    _, rows = chrome
    for platform in ("webgpu", "webnn"):
        row = rows.get(("ort", platform, 8, 8))
        if row is not None:  # blockwise weights here: ORT's QDQ models are per-channel
            assert row.outcome == Outcome.UNSUPPORTED and "--granularity per-channel" in row.reason


def test_report_sets_int8_activations_beside_weight_only(chrome) -> None:  # noqa: ANN001
    out, _ = chrome
    sweeps = load_sweeps([out])
    table = activation_table(summary_table(sweeps.rows, sweeps.samples))
    harness = table[table["setting"].str.contains("harness")]
    assert len(harness) == 4  # 2 platforms x 2 weight bits, one observer
    assert (harness["cosine mean: weight-only"] != "").all()
    assert all(float(a) < float(w) for a, w in zip(harness["cosine mean: int8 acts"],
                                                   harness["cosine mean: weight-only"]))
    assert harness["int8 acts / weight-only"].str.match(r"^\d+\.\d\dx \((same|faster|slower)\)$").all()


def test_firefox_runs_w8a8_on_webgpu(minilm_firefox: Swept) -> None:
    rows = _by_act_bits(minilm_firefox)
    a8 = rows[("harness", "webgpu", 8, 8)]
    assert a8.outcome == Outcome.OK, a8.reason
    assert a8.compute_dtype == "i8dot" and np.isfinite(a8.cosine_mean)
    assert a8.rel_error_vs_dequantized <= a8.kernel_tolerance
