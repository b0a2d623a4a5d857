"""Report on whole-model rows: a results folder written with ResultWriter from hand-made ResultRow
objects (no browser, no model download), reported with build_report; and compare telling model
configurations apart."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from fixed_web_platform.analysis.compare import Verdict, compare
from fixed_web_platform.models.rules import PrecisionRule
from fixed_web_platform.plan import RunSpec
from fixed_web_platform.report.glance import headline_columns, headline_rows, picks
from fixed_web_platform.report.sections import ENCODER_GLANCE
from fixed_web_platform.report.render import build_report, load_sweeps, summary_table
from fixed_web_platform.results.reader import load
from fixed_web_platform.results.rows import LayerRow, ResultRow
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import (
    BrowserName,
    EngineName,
    Outcome,
    Platform,
    PrecisionMode,
)
from fixed_web_platform.workloads.encoder import EncoderWorkload
from fixed_web_platform.workloads.matmul import MatmulWorkload

MODEL = "all-MiniLM-L6-v2"
WORKLOAD = EncoderWorkload(name=MODEL, model=MODEL, batch_size=8, seq_len=32, texts=("a", "b"))
MIXED = dataclasses.replace(WORKLOAD, rules=(PrecisionRule("encoder.layer.*.attention.*", 8),),
                            rules_name="mixed-precision")
F32 = 90_000_000
MODEL_PLOTS = {"model_latency_vs_bits", "model_accuracy_vs_bits", "model_accuracy_vs_latency",
               "model_accuracy_vs_weight_bytes"}
LAYERS = [(f"encoder.layer.{i}.{part}", kind, k, n)
          for i in range(2)
          for part, kind, k, n in (("attention.self.query", "attention", 384, 384),
                                   ("intermediate.dense", "ffn", 384, 1536),
                                   ("output.dense", "ffn", 1536, 384))]


def _spec(run_id: int, bits: int, *, engine=EngineName.HARNESS, platform=Platform.WEBGPU,
          workload: EncoderWorkload = WORKLOAD, repetition: int = 0) -> RunSpec:
    return RunSpec(run_id=run_id, browser=BrowserName.CHROME, platform=platform, workload=workload,
                   bits=bits, block_size=32, repetition=repetition,
                   precision_mode=PrecisionMode.STANDARD, seed=0, engine=engine)


def _model_ok(spec: RunSpec, latency: float, *, plan: str, weight_bytes: int, cosine: float,
              spearman: float, top1: float, bits_executed: int | None = None) -> ResultRow:
    base = ResultRow.without_measurement(spec, Outcome.OK, "", browser_version="150.0")
    tokens = 200
    return base.with_fields(
        bits_executed=spec.bits if bits_executed is None else bits_executed,
        executed_on=str(spec.platform), latency_ms_median=latency, latency_ms_p10=latency * 0.95,
        latency_ms_p90=latency * 1.05, n_samples=5, timing_source="wall-clock", gflops=1.5e3 / latency,
        weight_bytes=weight_bytes, weight_bytes_f32=F32, compression=F32 / weight_bytes,
        rel_error_vs_float=1 - cosine, rel_error_vs_dequantized=2e-4, kernel_tolerance=1e-2,
        precision_plan=plan, sequences_per_s=8 * 1000 / latency, tokens_per_s=tokens * 1000 / latency,
        cosine_min=cosine - 0.01, cosine_mean=cosine, spearman=spearman, top1_agreement=top1,
        outputs_file=f"outputs/{spec.run_id}.npz",
    )


def _layers(run_id: int, bits_for, *, executed: bool = True, gpu: bool = True) -> list[LayerRow]:
    out = []
    for j, (name, kind, k, n) in enumerate(LAYERS):
        bits = bits_for(kind)
        out.append(LayerRow(run_id=run_id, layer=name, kind=kind, k=k, n=n, bits_requested=bits,
                            rule="encoder.layer.*.attention.*" if kind == "attention" and bits == 8 else "--bits",
                            bits_executed=bits if executed else None,
                            weight_dtype=("" if not executed else "uint32" if bits <= 8
                                          else "float16" if bits == 16 else "float32"),
                            weight_bytes=k * n * bits // 8 if executed else None,
                            gpu_ms=0.01 * (j + 1) if gpu and executed else None))
    return out


def write_model_folder(path: Path, *, with_plan: bool = True, slower: float = 1.0) -> Path:
    """chrome: harness/webgpu 32, 16, 4 uniform and 4 mixed ok; ort/wasm 4 ok;
    harness/webnn 4 unsupported; harness/webgpu 2 mixed (refused: no plan on its row)."""
    writer = ResultWriter(path)
    writer.record_browser("chrome", {"version": "150.0"})
    specs = [
        _spec(0, 32), _spec(1, 16), _spec(2, 4), _spec(3, 4, workload=MIXED),
        _spec(4, 4, engine=EngineName.ORT, platform=Platform.WASM),
        _spec(5, 4, platform=Platform.WEBNN), _spec(6, 2, workload=MIXED),
    ]
    if with_plan:
        (path / "plan.json").write_text(json.dumps(
            {"schema_version": 1, "timing": {}, "runs": [s.to_json() for s in specs]}, default=str))
    uniform = lambda bits: (lambda kind: bits)  # noqa: E731
    mixed = lambda kind: 8 if kind == "attention" else 4  # noqa: E731
    rows = [
        (_model_ok(specs[0], 40.0 * slower, plan="uniform:32", weight_bytes=F32, cosine=1.0,
                   spearman=1.0, top1=1.0), _layers(0, uniform(32))),
        (_model_ok(specs[1], 30.0 * slower, plan="uniform:16", weight_bytes=F32 // 2, cosine=0.99999,
                   spearman=0.9999, top1=1.0), _layers(1, uniform(16))),
        (_model_ok(specs[2], 20.0 * slower, plan="uniform:4", weight_bytes=F32 // 6, cosine=0.9812,
                   spearman=0.95, top1=0.875), _layers(2, uniform(4))),
        (_model_ok(specs[3], 25.0 * slower, plan="mixed:8x2,4x4", weight_bytes=F32 // 5, cosine=0.9931,
                   spearman=0.98, top1=1.0), _layers(3, mixed)),
        (_model_ok(specs[4], 60.0 * slower, plan="uniform:4", weight_bytes=F32 // 6, cosine=0.9810,
                   spearman=0.949, top1=0.875), _layers(4, uniform(4), gpu=False)),
    ]
    for row, layers in rows:
        samples = [row.latency_ms_median * f for f in (0.95, 0.98, 1.0, 1.02, 1.05)]
        writer.add(row, {"timing_source": "wall-clock", "wall_ms": samples, "samples_per_page": [2, 2, 1]}, layers)
    unsupported = ResultRow.without_measurement(specs[5], Outcome.UNSUPPORTED, "WebNN has no int4 on cpu",
                                                browser_version="150.0").with_fields(precision_plan="uniform:4")
    writer.add(unsupported, {}, _layers(5, uniform(4), executed=False))
    writer.add(ResultRow.without_measurement(specs[6], Outcome.UNSUPPORTED, "2-bit refused",
                                             browser_version="150.0"))
    writer.close()
    return path


@pytest.fixture
def model_dir(tmp_path) -> Path:
    return write_model_folder(tmp_path / "20990101T000000Z_models")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One report for the tests that only read it (plots take a few seconds)."""
    root = tmp_path_factory.mktemp("model-report")
    return build_report([write_model_folder(root / "20990101T000000Z_models")], root / "out")


def test_reader_types_model_columns_and_loads_layers(model_dir):
    rs = load(model_dir)
    ok = rs.rows[rs.rows["outcome"] == "ok"]
    for column in ("batch_size", "seq_len", "tokens_per_s", "cosine_min", "cosine_mean", "spearman",
                   "top1_agreement", "sequences_per_s"):
        assert pd.api.types.is_numeric_dtype(rs.rows[column]), column
    assert set(ok["batch_size"]) == {8} and set(ok["seq_len"]) == {32}
    assert ok["cosine_mean"].max() == pytest.approx(1.0)
    assert len(rs.layers) == 6 * len(LAYERS)
    assert pd.api.types.is_numeric_dtype(rs.layers["gpu_ms"])
    assert set(rs.layers["run_id"]) == {0, 1, 2, 3, 4, 5}


def test_reader_rejects_a_non_number_in_a_model_column(model_dir):
    from fixed_web_platform.results.reader import ResultSchemaError

    csv_path = model_dir / "results.csv"
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    rows.loc[0, "cosine_mean"] = "high"
    rows.to_csv(csv_path, index=False)
    with pytest.raises(ResultSchemaError, match="cosine_mean"):
        load(model_dir)


def test_folder_without_model_columns_or_layers_still_loads(tmp_path):
    spec = RunSpec(run_id=0, browser=BrowserName.CHROME, platform=Platform.WEBGPU,
                   workload=MatmulWorkload("w", 2, 64, 32), bits=4, block_size=32, repetition=0,
                   precision_mode=PrecisionMode.STANDARD, seed=0)
    writer = ResultWriter(tmp_path / "old")
    writer.add(ResultRow.without_measurement(spec, Outcome.UNSUPPORTED, "nope"))
    writer.close()
    csv_path = writer.csv_path
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    model_columns = ["model", "weights", "batch_size", "seq_len", "inputs", "precision_plan",
                     "sequences_per_s", "tokens_per_s", "cosine_min", "cosine_mean", "spearman",
                     "top1_agreement", "outputs_file"]
    rows.drop(columns=model_columns).to_csv(csv_path, index=False)
    writer.layers_path.unlink()
    rs = load(writer.directory)
    assert rs.layers.empty and "gpu_ms" in rs.layers
    assert (rs.rows["model"] == "").all() and rs.rows["cosine_mean"].isna().all()
    files = build_report([writer.directory], tmp_path / "out")
    assert "Whole models" not in files.markdown.read_text()


def test_model_section_tables_and_plots(built):
    md = built.markdown.read_text()
    page = built.html.read_text()
    assert "## Whole models" in md and '<h2 id="models">Whole models</h2>' in page
    section = md.split("## Whole models")[1].split("## Plots")[0]
    assert f"### {MODEL}, pretrained weights, 8x32 tokens" in section
    table = [line for line in section.splitlines() if line.startswith("| chrome")]
    # every configuration, ok or not: 4 harness webgpu, ort wasm, webnn unsupported, 2-bit refused
    assert len(table) == 7, table
    uniform4 = next(line for line in table if "| 4 (uniform:4) |" in line and "webgpu" in line)
    cells = [c.strip() for c in uniform4.strip("|").split("|")]
    header = [c.strip() for c in section.split(f"### {MODEL}")[1].splitlines()[2].strip("|").split("|")]
    row = dict(zip(header, cells))
    assert row["browser · engine platform"] == "chrome · harness webgpu"
    assert row["median ms (p10-p90)"] == "20 (19.2-20.8)"  # pooled samples' p10-p90
    assert row["tokens/s"] == "10,000"
    assert row["weight MiB"] == f"{F32 / 6 / 2**20:.1f} (6.0x less than float32)"
    assert row["cosine min / mean vs PyTorch fp32"] == "0.9712 / 0.9812"
    assert row["Spearman"] == "0.9500"
    assert row["top-1 agreement"] == "87.5%"
    assert row["kernel error"] == "2.0e-04"
    assert row["outcome"] == "ok"
    mixed = next(line for line in table if "mixed:8x2,4x4" in line)
    assert "| 4 (mixed:8x2,4x4) |" in mixed and "0.9831 / 0.9931" in mixed and "100.0%" in mixed
    f32 = next(line for line in table if "| 32 (uniform:32) |" in line)
    assert "(float32)" in f32
    webnn = next(line for line in table if "webnn" in line)
    assert "unsupported: WebNN has no int4 on cpu" in webnn and "| 4 (uniform:4) |" in webnn
    ort = next(line for line in table if "ort wasm" in line)
    assert "| 60 (57.7-62.3) |" in ort
    # the section's plots: there, readable, referenced once from the section
    names = {p.stem for p in built.plots}
    assert MODEL_PLOTS <= names
    for p in built.plots:
        if p.stem in MODEL_PLOTS:
            image = mpimg.imread(p)
            assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
            assert f'<img src="plots/{p.name}"' in page and f"](plots/{p.name})" in section
    # model rows are not drawn on the matmul plots (no matmul rows here)
    assert not names & {"latency_vs_bits", "error_vs_bits", "accuracy_vs_latency"}
    assert "Only runs with a section of their own: their plots are in the Whole models section." in md


def test_layers_table_is_collapsed_and_counts_bits(built):
    page = built.html.read_text()
    details = page.split('<details id="layers">')[1].split("</details>")[0]
    assert "<summary>Per-layer precision (layers.csv): 6 runs, 36 layer lines</summary>" in details
    assert "2 at 8-bit, 4 at 4-bit" in details  # the mixed run, planned and executed
    assert "6 at 4-bit" in details
    assert "not reported" in details  # the unsupported webnn run: nothing executed
    assert "Per-layer GPU ms" in details and "encoder.layer.1.output.dense" in details
    assert "0.06 (4b)" in details  # sixth layer of a 4-bit run
    md = built.markdown.read_text()
    assert "<details>" in md and "</details>" in md


def test_existing_tables_show_batch_by_sequence(built):
    md = built.markdown.read_text()
    assert "0x0x0" not in md and "0x0x0" not in built.html.read_text()
    summary = pd.read_csv(built.summary_csv)
    assert set(summary["shape"]) == {"8x32 tokens"}
    assert set(summary["precision_plan"]) == {"uniform:32", "uniform:16", "uniform:4", "mixed:8x2,4x4"}
    harness = summary[(summary["engine"] == "harness") & (summary["platform"] == "webgpu")]
    by_plan = harness.set_index("precision_plan")
    assert by_plan.loc["uniform:4", "speedup_vs_f32"] == pytest.approx(2.0)
    assert by_plan.loc["mixed:8x2,4x4", "speedup_vs_f32"] == pytest.approx(40.0 / 25.0)
    assert by_plan.loc["uniform:4", "gflops"] == pytest.approx(1.5e3 / 20.0)  # the row's figure
    ort = summary[summary["engine"] == "ort"].iloc[0]
    assert pd.isna(ort["latency_vs_harness"])  # no harness row on wasm to set it against
    not_ok = pd.read_csv(built.not_ok_csv)
    assert set(not_ok["shape"]) == {"8x32 tokens"}
    summary_part = md.split("## Summary (ok runs)")[1].split("## Runs without")[0]
    assert "| precision plan |" in summary_part and "| 8x32 tokens |" in summary_part


def test_glance_takes_model_rows_as_their_own_settings(built):
    summary = pd.read_csv(built.summary_csv, keep_default_na=False, na_values=[""])
    for column in ("model", "weights", "inputs", "precision_plan", "sweep", "device_type", "fallback",
                   "executed_on"):
        summary[column] = summary[column].astype(object).fillna("").astype(str)
    rows, _ = headline_rows(summary, ENCODER_GLANCE)
    assert len(rows) == len(summary)
    columns = headline_columns(ENCODER_GLANCE)
    text = {(r[0].text, r[2].text): dict(zip(columns, r)) for r in rows}
    uniform4 = text[("chrome · harness webgpu", "4-bit")]
    assert uniform4["workload"].text == f"{MODEL} 8x32 tokens"
    assert uniform4["vs float32"].text == "2.00x faster" and uniform4["vs float32"].tone == "better"
    assert uniform4["cosine vs fp32"].text == "0.9812" and uniform4["cosine vs fp32"].tone == "worse"
    mixed = text[("chrome · harness webgpu", "4-bit mixed:8x2,4x4")]
    assert mixed["vs float32"].text == "1.60x faster" and mixed["cosine vs fp32"].tone == "better"
    assert text[("chrome · harness webgpu", "float32")]["vs float32"].text == "baseline"
    ort = text[("chrome · ort wasm", "4-bit")]
    assert ort["vs float32"].text == "-"  # no float32 ort row: no baseline borrowed
    # the pick: 4-bit misses the cosine bar, the mixed plan meets it and is the fastest that does
    chosen = {p.setting: p for p in picks(summary, ENCODER_GLANCE)}
    assert chosen["chrome · harness webgpu"].precision == "4-bit mixed:8x2,4x4"
    assert "cosine vs fp32 0.9931" in chosen["chrome · harness webgpu"].costs
    assert chosen["chrome · ort wasm"].precision == "none"


def test_matmul_only_folder_has_no_model_section(tmp_path):
    workload = MatmulWorkload("unit", 2, 64, 32)
    writer = ResultWriter(tmp_path / "matmul")
    spec = RunSpec(run_id=0, browser=BrowserName.CHROME, platform=Platform.WEBGPU, workload=workload,
                   bits=4, block_size=32, repetition=0, precision_mode=PrecisionMode.STANDARD, seed=0)
    row = dataclasses.replace(
        ResultRow.without_measurement(spec, Outcome.OK, ""), bits_executed=4, latency_ms_median=1.0,
        latency_ms_p10=0.9, latency_ms_p90=1.1, n_samples=3, timing_source="wall-clock",
        weight_bytes=512, weight_bytes_f32=8192, rel_error_vs_float=0.05, rel_error_vs_dequantized=1e-7)
    writer.add(row)
    writer.close()
    files = build_report([writer.directory], tmp_path / "out")
    md, page = files.markdown.read_text(), files.html.read_text()
    assert "Whole models" not in md and 'id="models"' not in page and '<details id="layers"' not in page
    assert not {p.stem for p in files.plots} & MODEL_PLOTS
    assert "| 2x64x32 |" in md
    assert "precision plan" not in md


def test_mixed_sweeps_keep_matmul_plots_and_model_section_apart(model_dir, tmp_path):
    workload = MatmulWorkload("unit", 2, 64, 32)
    writer = ResultWriter(tmp_path / "matmul")
    for run_id, bits in enumerate((32, 4)):
        spec = RunSpec(run_id=run_id, browser=BrowserName.CHROME, platform=Platform.WEBGPU,
                       workload=workload, bits=bits, block_size=32, repetition=0,
                       precision_mode=PrecisionMode.STANDARD, seed=0)
        writer.add(dataclasses.replace(
            ResultRow.without_measurement(spec, Outcome.OK, ""), bits_executed=bits,
            latency_ms_median=2.0 / (1 + run_id), latency_ms_p10=0.9, latency_ms_p90=2.1, n_samples=3,
            timing_source="wall-clock", weight_bytes=8192 // (1 + 7 * run_id), weight_bytes_f32=8192,
            rel_error_vs_float=1e-7 + 0.05 * run_id, rel_error_vs_dequantized=1e-7))
    writer.close()
    files = build_report([model_dir, writer.directory], tmp_path / "out")
    names = {p.stem for p in files.plots}
    assert MODEL_PLOTS <= names and "latency_vs_bits" in names
    md = files.markdown.read_text()
    section = md.split("## Whole models")[1].split("## Plots")[0]
    assert "20990101T000000Z_models: chrome · harness webgpu" in section  # the sweep is named
    assert "unit" not in section


# ------------------------------------------------------------------------------------ compare


def test_compare_matches_model_configurations(tmp_path):
    base = load(write_model_folder(tmp_path / "base"))
    cur = load(write_model_folder(tmp_path / "cur", slower=1.5))
    comparison = compare(base, cur)
    # 7 configurations on each side, every one matched (none added or removed)
    assert len(comparison.entries) == 7
    assert not {Verdict.ADDED, Verdict.REMOVED} & {e.verdict for e in comparison.entries}
    plans = {(e.config_dict["engine"], e.config_dict["platform"], e.config_dict["bits_requested"],
              e.config_dict["precision_plan"]): e for e in comparison.entries}
    assert plans[("harness", "webgpu", 4, "uniform:4")].verdict is Verdict.REGRESSION
    mixed = plans[("harness", "webgpu", 4, "mixed:8x2,4x4")]
    assert mixed.verdict is Verdict.REGRESSION
    assert mixed.config_dict["batch_size"] == "8" and mixed.config_dict["model"] == MODEL
    assert mixed.shape == "8x32 tokens mixed:8x2,4x4"
    assert "8x32 tokens" in mixed.label and "0x0x0" not in mixed.label


def test_compare_tells_batch_sizes_and_weights_apart(tmp_path):
    base = load(write_model_folder(tmp_path / "base"))
    cur_dir = write_model_folder(tmp_path / "cur")
    csv_path = cur_dir / "results.csv"
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    rows.loc[rows["run_id"] == "2", "batch_size"] = "16"
    rows.loc[rows["run_id"] == "1", "weights"] = "random"
    rows.to_csv(csv_path, index=False)
    comparison = compare(base, load(cur_dir))
    verdicts = [e.verdict for e in comparison.entries]
    assert verdicts.count(Verdict.ADDED) == 2 and verdicts.count(Verdict.REMOVED) == 2


def test_compare_lines_up_a_row_refused_before_its_plan_was_known(tmp_path):
    """A model row written without a precision plan (refused before the model was prepared)
    gets uniform:<bits> from plan.json (no rules), so a new failure is not added + removed."""
    base = load(write_model_folder(tmp_path / "base"))
    cur_dir = write_model_folder(tmp_path / "cur")
    csv_path = cur_dir / "results.csv"
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    at = rows["run_id"] == "2"
    rows.loc[at, "outcome"] = "failed"
    rows.loc[at, "precision_plan"] = ""
    rows.loc[at, "reason"] = "browser failed to start"
    rows.to_csv(csv_path, index=False)
    cur = load(cur_dir)
    assert cur.rows.loc[cur.rows["run_id"] == 2, "precision_plan"].iloc[0] == "uniform:4"
    comparison = compare(base, cur)
    assert len(comparison.entries) == 7
    new = [e for e in comparison.entries if e.verdict is Verdict.NEW_FAILURE]
    assert len(new) == 1 and new[0].config_dict["precision_plan"] == "uniform:4"
    assert comparison.has_regression


def test_a_blank_mixed_plan_takes_the_plan_of_its_rules_at_the_same_bits(tmp_path):
    folder = write_model_folder(tmp_path / "f")
    csv_path = folder / "results.csv"
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    rows.loc[rows["run_id"] == "3", "precision_plan"] = ""
    rows.loc[rows["run_id"] == "3", "outcome"] = "timeout"
    extra = rows[rows["run_id"] == "2"].copy()  # a second mixed rep at 4 bits that has its plan
    extra["run_id"], extra["precision_plan"], extra["repetition"] = "7", "mixed:8x2,4x4", "1"
    pd.concat([rows, extra]).to_csv(csv_path, index=False)
    plan = json.loads((folder / "plan.json").read_text())
    run7 = dict(plan["runs"][3], run_id=7, repetition=1)
    plan["runs"].append(run7)
    (folder / "plan.json").write_text(json.dumps(plan))
    rs = load(folder)
    assert rs.rows.loc[rs.rows["run_id"] == 3, "precision_plan"].iloc[0] == "mixed:8x2,4x4"
    # without plan.json nothing is guessed
    (folder / "plan.json").unlink()
    assert load(folder).rows.loc[lambda r: r["run_id"] == 3, "precision_plan"].iloc[0] == ""


def test_summary_table_keeps_model_settings_apart(model_dir, tmp_path):
    other = write_model_folder(tmp_path / "other")
    csv_path = other / "results.csv"
    rows = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    rows["batch_size"] = rows["batch_size"].replace({"8": "1"})
    rows.to_csv(csv_path, index=False)
    sweeps = load_sweeps([model_dir])
    both = pd.concat([sweeps.rows, load_sweeps([other]).rows.assign(sweep=sweeps.names[0])],
                     ignore_index=True)
    summary = summary_table(both)
    assert len(summary) == 10  # 5 ok configurations at batch 8, 5 at batch 1
    assert set(summary["shape"]) == {"8x32 tokens", "1x32 tokens"}
    # each batch size's 4-bit row is set against its own float32 row
    assert np.allclose(summary.loc[summary["precision_plan"] == "uniform:32", "speedup_vs_f32"], 1.0)
    assert re.search("tokens", " ".join(summary["shape"]))
