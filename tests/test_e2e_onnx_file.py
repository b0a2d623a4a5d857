"""End-to-end: a user's own ONNX file (a small two-input classifier built by tests/onnx_models.py)
through ONNX Runtime Web in real Chrome and Firefox, on webgpu, webnn and wasm, in its variants:
every planned run has a row with an honest outcome, what the browser returned is on disk with
what it was fed, the figures recompute from it, placement is counted and listed, and the report
says which variant to ship. The file keeps its weights in an external data file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import require_browser
from onnx_models import tiny_classifier

from fixed_web_platform.engines.ort import DEFAULT_ORT
from fixed_web_platform import sweep
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.precision.quant import cosine_similarity
from fixed_web_platform.report.render import build_report
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads.onnx_file import OnnxFileWorkload, graph

pytestmark = pytest.mark.browser
QUICK = TimingConfig(warmup=0, min_iterations=2, min_time_s=0, max_iterations=2, timeout_s=90)
PLATFORMS = [Platform.WEBGPU, Platform.WEBNN, Platform.WASM]


def _sweep(browser: BrowserName, out: Path) -> tuple[list, dict]:  # noqa: ANN401
    require_browser(browser)
    assert (DEFAULT_ORT.directory / "ort.webgpu.min.mjs").is_file(), "run scripts/setup.sh first"
    # saved as onnx.save writes models over 2 GB: the fp32 variant (the file as given) loads its
    # weights from the data file beside it; the variants the harness makes are single files
    model = tiny_classifier(out.parent / f"tiny-{browser}.onnx", external_data=True)
    assert graph.external_data(model) == (f"tiny-{browser}.onnx.data",)
    workload = OnnxFileWorkload.create(str(model), dims={"batch": 2, "seq": 6}, q4f16=True, held=True)
    plan = build_plan([browser], PLATFORMS, [workload], [32, 16, 8, 4], act_bits=[32, 8],
                      engines=[EngineName.ORT], weight_quant=["minmax", "offset"])
    # the held variant (the harness's quantizer as MatMulNBits) at 4 bits in Chrome: minmax's integer zero
    # points on webgpu, offset's float ones on wasm (the one provider whose MatMulNBits takes them)
    plan = [r for r in plan if r.weight_format != "held" or (browser, r.platform, r.bits, r.weight_quant) in HELD]
    # W4A8 is refused before launch (test_onnx_file); int8-qdq on WebNN is left out: Chromium 153
    # takes ORT's QDQ graph and never answers (the timeout rows of docs/findings/ocr.md), which here would only
    # cost the timeout
    plan = [r for r in plan if not r.refused and not (r.platform is Platform.WEBNN and r.act_bits == 8)]
    writer = sweep.start(plan, QUICK, output_dir=out)  # with plan.json, from which the report writes its picks
    rows = asyncio.run(run_sweep(plan, writer, SweepOptions(timing=QUICK)))
    return plan, {(r.platform, r.format_requested): r for r in rows}


@pytest.fixture(scope="module")
def chrome(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, dict]:
    out = tmp_path_factory.mktemp("onnx-chrome") / "results"
    return (out, *_sweep(BrowserName.CHROME, out))


@pytest.fixture(scope="module")
def firefox(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, dict]:
    out = tmp_path_factory.mktemp("onnx-firefox") / "results"
    return (out, *_sweep(BrowserName.FIREFOX, out))


VARIANTS = ("fp32", "fp16", "q8-nbits", "int8-qdq", "q4", "q4f16")  # int8-qdq 4th: not planned on WebNN
HELD = {(BrowserName.CHROME, Platform.WEBGPU, 4, "minmax"), (BrowserName.CHROME, Platform.WASM, 4, "offset")}


def _check_rows(out: Path, plan: list, rows: dict) -> None:
    held = sum(r.weight_format == "held" for r in plan)
    assert len(rows) == len(plan) == len(PLATFORMS) * len(VARIANTS) - 1 + held
    outcomes = {}
    for (platform, variant), row in rows.items():
        outcomes[(platform, variant)] = row.outcome
        assert row.kind == "onnx" and row.engine == "ort" and row["input_shapes"] == \
            "pixels:2x3x8x8 ids:2x6 attention_mask:2x6"
        if row.outcome != Outcome.OK:
            assert row.outcome in (Outcome.UNSUPPORTED, Outcome.FAILED) and row.reason, (platform, variant)
            continue
        assert row.latency_ms_median > 0 and row.n_samples >= QUICK.min_iterations, (platform, variant)
        if platform == "wasm":  # ORT Web's CPU provider: the CPU kernels the reference ran, compiled to wasm
            assert row.rel_error_vs_dequantized < 1e-3, (variant, row.rel_error_vs_dequantized)
        quantized = {"fp32": 0, "fp16": 3, "q8-nbits": 2, "q4": 2, "q4f16": 3, "int8-qdq": 3, "held": 2}
        assert row["nodes_quantized"] == quantized[variant]
        assert row.weight_bytes < row.weight_bytes_f32 or variant == "fp32"
        # what the file holds, read from its nodes: each variant holds what its name says
        held = {"fp32": "MatMul/float32 x2", "fp16": "MatMul/float16 x2", "q8-nbits": "MatMulNBits/int8 x2",
                "q4": "MatMulNBits/int4 x2", "q4f16": "MatMulNBits/int4 x2", "int8-qdq": "DequantizeLinear/int8 x3",
                "held": "MatMulNBits/int4 x2"}
        assert held[variant] in row["onnx_inventory"], (variant, row["onnx_inventory"])
        assert row["precision_promise"] == "", (variant, row["precision_promise"])
        # the figures recompute from what the browser returned, saved beside what it was fed
        saved = np.load(out / row.outputs_file)
        assert {"input:pixels", "input:ids", "input:attention_mask", "output:logits", "output:features",
                "fp32:logits", "fp32:features"} <= set(saved.files)
        cos = min(cosine_similarity(saved[f"output:{n}"], saved[f"fp32:{n}"]) for n in ("logits", "features"))
        assert cos == pytest.approx(row["outputs_cosine_min"], abs=1e-9)
        assert row["outputs_cosine_min"] > (0.999 if variant in ("fp32", "fp16") else 0.9), (platform, variant)
        if platform == "wasm":
            assert row.executed_on == "wasm" and row["nodes_fallback"] == 0
    # every configuration ran somewhere: fp32 everywhere this browser has the provider
    assert outcomes[("wasm", "fp32")] == outcomes[("webgpu", "fp32")] == Outcome.OK
    for variant in VARIANTS:
        assert outcomes[("wasm", variant)] == Outcome.OK, (variant, rows[("wasm", variant)].reason)


def _check_placement(out: Path, rows: dict) -> None:
    """A node ORT put on another provider is counted in the row and listed in samples.jsonl."""
    samples = {json.loads(line)["run_id"]: json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()}
    layers = pd.read_csv(out / "layers.csv")
    for (platform, variant), row in rows.items():
        if row.outcome != Outcome.OK:
            continue
        listed = samples[row.run_id]["kind"][0]["fallback_nodes"]
        refused = "refused a session without CPU fallback" in row.reason  # at least 1 node, listed or not
        assert row["nodes_fallback"] == max(len(listed), int(refused)), (platform, variant)
        if listed:
            assert all(n.rsplit("@", 1)[1] != platform for n in listed)
            assert f"{len(listed)} of {row['nodes_placed']} nodes ran off {platform}" in row.reason
        mine = layers[layers["run_id"] == row.run_id]
        assert list(mine["layer"]) == ["conv", "fc1", "head"]
        assert all(str(d).rsplit("@", 1)[1] in ("webgpu", "webnn", "wasm", "?") for d in mine["weight_dtype"])


def test_chrome_runs_every_variant_with_honest_outcomes(chrome) -> None:  # noqa: ANN001
    out, plan, rows = chrome
    _check_rows(out, plan, rows)
    for platform, quantizer in ((Platform.WEBGPU, "minmax"), (Platform.WASM, "offset")):
        held = rows[(platform, "held")]
        assert held.outcome == Outcome.OK and held.weight_quant == quantizer, (platform, held.reason)
        assert held.weight_dtype == "uint4" and held.weight_bytes < rows[(platform, "fp32")].weight_bytes
        # the embedding table as GatherBlockQuantized where the provider runs it (and the quantizer's zeros are integers)
        assert ("GatherBlockQuantized" in held["onnx_inventory"]) == (platform is Platform.WEBGPU), held["onnx_inventory"]
    assert rows[(Platform.WEBNN, "fp32")].outcome == Outcome.OK, rows[(Platform.WEBNN, "fp32")].reason
    _check_placement(out, rows)


def test_firefox_runs_every_variant_and_says_it_has_no_webnn(firefox) -> None:  # noqa: ANN001
    out, plan, rows = firefox
    _check_rows(out, plan, rows)
    for variant in VARIANTS[:3] + VARIANTS[4:]:
        row = rows[(Platform.WEBNN, variant)]
        assert row.outcome == Outcome.UNSUPPORTED and "no WebNN" in row.reason, (variant, row.reason)
    _check_placement(out, rows)


def test_the_report_says_which_variant_to_ship_and_writes_it(chrome, tmp_path: Path) -> None:  # noqa: ANN001
    """Each picked variant is written with its card; onnxruntime on the written file, fed what the
    browser was fed, gives the accuracy of the rows it was picked from."""
    import onnxruntime

    out, _, rows = chrome
    report = build_report([out], tmp_path / "report")
    text = report.markdown.read_text()
    assert "## Your ONNX files" in text and "Which variant to ship here:" in text
    assert "chrome · ort wasm: ship **" in text
    assert (tmp_path / "report" / "plots" / "onnx_accuracy_vs_latency.png").is_file()
    written = sorted((tmp_path / "report" / "ship").glob("*.onnx"))
    assert written and "## Files to ship (ship/)" in text
    for path in written:
        variant = path.name.split(".")[1]  # tiny-chrome.<variant>.onnx; held: 'held-<quantizer>-<bits>bit.<provider>'
        card = path.with_suffix(".md").read_text()
        assert card.startswith(f"# {path.stem}\n") and "Picked for chrome · ort " in card
        picked_for = card.split("\n")[2].split(":")[0]  # 'Picked for chrome · ort wasm, ...'
        platform = next(p for p in PLATFORMS if f"chrome · ort {p.value}" in picked_for)
        row = rows[(platform, "held" if variant.startswith("held-") else variant)]
        saved = np.load(out / row.outputs_file)
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = dict(zip([o.name for o in session.get_outputs()],
                       session.run(None, {n: saved[f"input:{n}"] for n in ("pixels", "ids", "attention_mask")})))
        cos = min(cosine_similarity(got[n], saved[f"fp32:{n}"]) for n in ("logits", "features"))
        assert cos == pytest.approx(row["outputs_cosine_min"], abs=1e-4), (path.name, cos)
        assert f"{row['outputs_cosine_min']:.4f}" in card


def test_transformers_js_dtypes_run_in_chrome_and_say_what_they_hold(tmp_path: Path) -> None:
    """Dynamic int8 (transformers.js's q8) and NF4 (bnb4), made as its conversion makes them: ORT
    Web's CPU provider runs both; on WebGPU each row says where the nodes it could not take went."""
    require_browser(BrowserName.CHROME)
    model = tiny_classifier(tmp_path / "tiny.onnx")
    workload = OnnxFileWorkload.create(str(model), dims={"batch": 2, "seq": 6}, dtypes=("q8", "bnb4"))
    plan = build_plan([BrowserName.CHROME], [Platform.WASM, Platform.WEBGPU], [workload], [8, 4],
                      engines=[EngineName.ORT])
    assert sorted((r.platform, r.weight_format) for r in plan) == [
        (Platform.WASM, "bnb4"), (Platform.WASM, "q8"), (Platform.WEBGPU, "bnb4"), (Platform.WEBGPU, "q8")]
    rows = {(r.platform, r.format_requested): r
            for r in asyncio.run(run_sweep(plan, ResultWriter(tmp_path / "results"), SweepOptions(timing=QUICK)))}
    held = {"q8": ("MatMulInteger/uint8 x2", "DynamicQuantizeLinear x"), "bnb4": ("MatMulBnb4/nf4 x2",)}
    for (platform, dtype), row in rows.items():
        if row.outcome != Outcome.OK:
            assert row.outcome in (Outcome.UNSUPPORTED, Outcome.FAILED) and row.reason, (platform, dtype)
            continue
        assert all(h in row["onnx_inventory"] for h in held[dtype]) and row["precision_promise"] == "", row
        assert row["outputs_cosine_min"] > 0.9 and row.weight_bytes < row.weight_bytes_f32, (platform, dtype)
        if platform == "wasm":
            assert row.executed_on == "wasm" and row["nodes_fallback"] == 0
            assert row.rel_error_vs_dequantized < 1e-3, (dtype, row.rel_error_vs_dequantized)
        elif row["nodes_fallback"]:
            assert "ran off webgpu" in row.reason, row.reason
    assert rows[(Platform.WASM, "q8")].outcome == rows[(Platform.WASM, "bnb4")].outcome == Outcome.OK, rows
