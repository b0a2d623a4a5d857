"""End to end: versions as a run axis, in real Chromium. Two builds of ONNX Runtime Web, its two
WebGPU implementations and two MatMulNBits accuracy levels side by side in one sweep, each row saying
what ran; and two Chromium binaries (the WebNN build set-up installs, Debian's) in one sweep, each
row carrying its own version."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import require_browser

from fixed_web_platform.analysis.compare import compare_builds
from fixed_web_platform.engines.ort import ORT_BUILDS
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.reader import load
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, Outcome, Platform
from fixed_web_platform.workloads import MatmulWorkload

pytestmark = pytest.mark.browser
SMALL = MatmulWorkload("test-small", 4, 128, 64)  # K a multiple of 128, N of 16: ORT's DP4A kernels apply
QUICK = TimingConfig(warmup=0, min_iterations=2, min_time_s=0, max_iterations=2, timeout_s=90)


def test_ort_builds_backends_and_accuracy_levels_each_say_what_ran(tmp_path) -> None:  # noqa: ANN001
    require_browser(BrowserName.CHROME)
    engines = [f"ort@{b.version}" for b in ORT_BUILDS]
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], [4], engines=engines,
                      backend=["native", "jsep"], accuracy_level=["0", "4"])
    assert len(plan) == len(ORT_BUILDS) * 2 * 2
    rows = asyncio.run(run_sweep(plan, ResultWriter(tmp_path), SweepOptions(timing=QUICK)))
    for run, row in zip(plan, rows, strict=True):
        assert row.outcome == Outcome.OK, f"{run.label}: {row.reason}"
        assert (row.engine_build, row.engine_version) == (run.engine_build, run.engine_build)
        assert row.backend == run.backend  # as the page read it from ORT, not as asked
        assert row.accuracy_level == run.accuracy_level
        # native: the profile names the kernels; at level 4 they took int8 activations (this
        # SwiftShader has subgroups), checked against ORT's own activation rule (engines/ort/dp4a.py);
        # JSEP's programs (read with its own profiling) have no int8 path at any level
        expected = "int8" if (run.backend, run.accuracy_level) == ("native", "4") else "float"
        assert row.act_executed == expected, run.label
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance, run.label
        assert ("DP4A" in row.reason) == (expected == "int8")
    pairs = compare_builds(load(tmp_path))
    assert {(p.axis, p.baseline, p.current) for p in pairs} == {
        ("engine", f"ort@{ORT_BUILDS[0].version}", f"ort@{ORT_BUILDS[1].version}")}
    assert len(pairs) == 4 and all(p.entry.version_change for p in pairs)


def test_two_chromium_binaries_in_one_sweep_each_carry_their_version(tmp_path) -> None:  # noqa: ANN001
    require_browser(BrowserName.CHROME)
    plan = build_plan(["chrome@webnn", "chrome@chromium"], [Platform.WEBGPU], [SMALL], [32])
    rows = asyncio.run(run_sweep(plan, ResultWriter(tmp_path), SweepOptions(timing=QUICK)))
    assert [r.outcome for r in rows] == [Outcome.OK, Outcome.OK], [r.reason for r in rows]
    assert [r.browser_build for r in rows] == ["webnn", "chromium"]
    assert rows[0].browser_version != rows[1].browser_version
    browsers = json.loads((tmp_path / "environment.json").read_text())["browsers"]
    assert {k: v["version"] for k, v in browsers.items()} == {
        "chrome@webnn": rows[0].browser_version, "chrome@chromium": rows[1].browser_version}
    (pair,) = compare_builds(load(tmp_path))
    assert (pair.axis, pair.baseline, pair.current) == ("browser", "chrome@webnn", "chrome@chromium")
    assert pair.entry.version_change == f"chrome {rows[0].browser_version} -> {rows[1].browser_version}"



def test_whole_models_at_accuracy_level_4_are_checked_against_ort_dp4a_rule(tmp_path) -> None:  # noqa: ANN001
    """MiniLM and a tiny Llama at 4 bits and accuracy_level 4 on ORT's native WebGPU: the profile
    names the programs of each layer's node (the decoder's from one more profiled scoring pass),
    the layers that ran DP4A say int8 (the Llama's head, N = 30,522 not a multiple of 16, does not),
    and each run is judged against the float64 forward with ORT's activation rule on those layers
    (dp4a.model_check), which lies nearer what ran than the float-activation reference (MiniLM:
    0.021 against 0.038; the Llama: 1.5e-7 against 0.0095, so that check alone made both invalid)."""
    import numpy as np
    from shared_sweeps import MINILM, MINILM_TEXTS
    from test_decoder import tiny_hf_config

    from fixed_web_platform.precision.quant import error_metrics
    from fixed_web_platform.workloads import DecoderWorkload, EncoderWorkload

    require_browser(BrowserName.CHROME)
    tiny_hf_config(vocab_size=30522, hidden_size=128, intermediate_size=256, max_position_embeddings=128,
                   num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2).save_pretrained(tmp_path / "llama")
    workloads = [EncoderWorkload.create(MINILM, batch_size=2, seq_len=8, texts=MINILM_TEXTS[:2]),
                 DecoderWorkload.create(str(tmp_path / "llama"), prompt_len=8, new_tokens=2, eval_len=16,
                                        random_weights=True)]
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], workloads, [4], engines=["ort"], accuracy_level=["4"])
    out = tmp_path / "sweep"
    timing = TimingConfig(warmup=0, min_iterations=1, min_time_s=0, max_iterations=1, timeout_s=120)
    encoder, decoder = asyncio.run(run_sweep(plan, ResultWriter(out), SweepOptions(timing=timing)))
    layers = load(out).layers
    for row, int8_layers, total in ((encoder, 36, 36), (decoder, 7, 8)):
        assert row.outcome == Outcome.OK, row.reason
        assert row.act_executed == "int8"
        assert f"in {int8_layers} of {total} linear layers: the kernel check is against that rule's reference" in row.reason
        assert row.rel_error_vs_dequantized <= row.kernel_tolerance
        mine = layers[layers["run_id"] == row.run_id]
        assert (mine["act_dtype"] == "int8").sum() == int8_layers
    assert mine.loc[mine["layer"] == "lm_head", "act_dtype"].fillna("").tolist() == [""]
    saved = np.load(out / "outputs" / f"{encoder.run_id}.npz")  # the reference it was judged on is kept
    assert np.isclose(error_metrics(saved["embeddings"], saved["reference_engine_rule_f64"])["rel_error"],
                      encoder.rel_error_vs_dequantized, rtol=1e-6)
    float_acts = error_metrics(saved["embeddings"], saved["reference_dequantized_f64"])["rel_error"]
    assert encoder.rel_error_vs_dequantized < float_acts
    assert decoder.rel_error_vs_dequantized < 1e-4  # the decoder's rule is ORT's to float32 rounding
