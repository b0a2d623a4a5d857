"""Unit tests of the onnx workload kind (a user's own ONNX file): the variants onnxruntime's and
onnx's tools make (node counts, bytes, refusals, cache), inputs made from signatures or read from
an .npz, the references and figures, the plan, and bad input as one line with exit status 2."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import NoBrowser
from onnx_models import tiny_classifier

from fixed_web_platform.cli import main as cli
from fixed_web_platform.engines.base import EngineJob, Refusal
from fixed_web_platform.engines.registry import build_job, planned_refusal
from fixed_web_platform.plan import build_plan
from fixed_web_platform.precision.quantizers import QUANTIZERS
from fixed_web_platform.probes.adapter import adapter_limits
from fixed_web_platform.run_spec import TimingConfig
from fixed_web_platform.vocabulary import BrowserName, EngineName, Outcome, Platform
from fixed_web_platform.workloads import ONNX_FILE, model_workloads
from fixed_web_platform.workloads.onnx_file import OnnxFileError, OnnxFileWorkload, graph, inputs, reference
from fixed_web_platform.workloads.onnx_file import variants as v
from fixed_web_platform.workloads.onnx_file.prepared import prepare, top1_agreement

DIMS = {"batch": 2, "seq": 6}
K1, N1, K2, N2 = 512, 64, 64, 32  # the tiny classifier's two MatMuls


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_classifier(tmp_path_factory.mktemp("onnx") / "tiny.onnx")


@pytest.fixture(scope="module")
def conv_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_classifier(tmp_path_factory.mktemp("onnx") / "conv_only.onnx", with_matmul=False)


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(v, "CACHE_DIR", tmp_path / "variants")
    return tmp_path / "variants"


def _workload(path: Path, **kw: object) -> OnnxFileWorkload:
    return OnnxFileWorkload.create(str(path), dims=dict(DIMS), **kw)  # type: ignore[arg-type]


def _make(w: OnnxFileWorkload, name: str, block: int = 32, observer: str = "minmax", bits: int = 0,
          quantizer: str = "minmax") -> v.Variant:
    fp32 = reference.run(w.file, w.feeds().arrays)
    fit = w.calibration_feeds()
    return v.make(w.file, w.sha256, name, block, computed={n: a.shape for n, a in fp32.items()},
                  calibration=fit.arrays, calibration_digest=fit.digest, observer=observer, bits=bits,
                  quantizer=quantizer)


# ---------------------------------------------------------------------------------------- variants


def test_weight_only_variants_quantize_both_matmuls_into_the_bytes_blocks_say(tiny: Path) -> None:
    w = _workload(tiny)
    fp32 = _make(w, "fp32")
    assert fp32.path == tiny and fp32.nodes_quantized == 0 and fp32.weight_bytes == w.weight_bytes_f32
    float_matmuls = (K1 * N1 + K2 * N2) * 4
    for name, bits in (("q8-nbits", 8), ("q4", 4), ("q2", 2)):
        made = _make(w, name)
        assert made.nodes_quantized == 2, made.node_dtypes
        assert made.node_dtypes["fc1"].startswith(f"MatMulNBits{bits}=") and made.node_dtypes["head"].startswith(
            f"MatMulNBits{bits}=")
        assert made.node_dtypes["conv"] == "Conv:float32"
        # symmetric blocks of 32 along K: packed values plus one float32 scale per block and column
        packed = sum(n * (k // 32) * (32 * bits // 8) + n * (k // 32) * 4 for k, n in ((K1, N1), (K2, N2)))
        assert made.weight_bytes == w.weight_bytes_f32 - float_matmuls + packed, name


def test_a_bigger_block_holds_fewer_scales(tiny: Path) -> None:
    w = _workload(tiny)
    assert _make(w, "q4", block=128).weight_bytes < _make(w, "q4", block=32).weight_bytes


def test_fp16_and_q4f16_hold_float16_and_keep_float32_inputs_and_outputs(tiny: Path) -> None:
    import onnx

    w = _workload(tiny)
    half = _make(w, "fp16")
    assert half.nodes_quantized == 3 and set(half.node_dtypes.values()) == {"Conv:float16", "MatMul:float16"}
    assert half.weight_bytes < w.weight_bytes_f32 * 0.51
    q4f16 = _make(w, "q4f16")
    assert q4f16.node_dtypes["conv"] == "Conv:float16" and q4f16.node_dtypes["fc1"].startswith("MatMulNBits4")
    model = onnx.load(str(q4f16.path))
    assert {i.type.tensor_type.elem_type for i in model.graph.input} == {onnx.TensorProto.FLOAT, onnx.TensorProto.INT64}
    assert {o.type.tensor_type.elem_type for o in model.graph.output} == {onnx.TensorProto.FLOAT}


def test_int8_qdq_quantizes_conv_and_matmul_weights(tiny: Path, conv_only: Path) -> None:
    made = _make(_workload(tiny), v.QDQ)
    assert made.nodes_quantized == 3, made.node_dtypes
    assert made.node_dtypes == {"conv": "Conv:QDQ8", "fc1": "Gemm:QDQ8=fc1/MatMulAddFusion", "head": "MatMul:QDQ8"}
    conv = _make(_workload(conv_only), v.QDQ)
    assert conv.nodes_quantized == 3


@pytest.mark.parametrize(("quantizer", "block"), [*((q, 32) for q in QUANTIZERS), ("minmax", 128), ("gptq", 128)])
def test_the_held_variant_is_each_quantizers_codes_as_matmulnbits(tiny: Path, quantizer: str, block: int,
                                                                  tmp_path: Path) -> None:
    """Both MatMuls become MatMulNBits holding the quantizer's values (gptq's fit to the
    calibration inputs), and the embedding table GatherBlockQuantized (on the quantizer's grid,
    where its zero points are integers): onnxruntime on the written file computes what the float
    graph computes with the dequantized values in their place. Block 128: head's K of 64 is
    padded with zero weights to one block (and the table's rows, 64 wide, are not a block: float)."""
    import onnx
    from onnx import numpy_helper

    from fixed_web_platform.precision.held import hold_weights

    w = _workload(tiny, held=True)
    assert [w.variants(b) for b in (32, 16, 8, 4, 2)] == [("fp32",), ("fp16",), ("q8-nbits", "held"),
                                                          ("q4", "held"), ("q2", "held")]
    made = w.variant(v.HELD, 4, block, quantizer=quantizer, tables=True)  # as a WebGPU run makes it
    if quantizer == "minmax":  # elsewhere the tables stay float32 (ORT Web's wasm has no GatherBlockQuantized)
        assert "GatherBlockQuantized" not in w.variant(v.HELD, 4, block, quantizer=quantizer).tool
    assert made.node_dtypes == {"conv": "Conv:float32", "fc1": "MatMulNBits4=fc1_Q4", "head": "MatMulNBits4=head_Q4"}
    assert made.tool.startswith(f"the harness's {quantizer} quantizer")
    plain = onnx.load(str(tiny))
    moments = v._input_moments(plain, ["flat", "joined"], w.calibration_feeds().arrays)
    for init, x in zip((i for i in plain.graph.initializer if i.name in ("w1", "w2")), ("flat", "joined")):
        w_t = numpy_helper.to_array(init)
        k, pad = w_t.shape[0], -w_t.shape[0] % block
        held = hold_weights(np.pad(w_t.T, ((0, 0), (0, pad))), 4, block, unsigned=True, quantizer=quantizer,
                            hessian=np.pad(moments[x], ((0, pad), (0, pad))) if QUANTIZERS[quantizer].calibrated
                            else None)
        init.CopyFrom(numpy_helper.from_array(held.w_exec[:, :k].T.astype(np.float32), init.name))
    grid = v.GATHER_GRID.get(quantizer, quantizer)
    gathered = block == 32 and not QUANTIZERS[grid].float_zero
    assert ("GatherBlockQuantized" in made.tool) == gathered and made.weight_bytes < w.weight_bytes_f32
    if gathered:
        emb = next(i for i in plain.graph.initializer if i.name == "emb")
        table = hold_weights(numpy_helper.to_array(emb), 4, block, unsigned=True, quantizer=grid)
        emb.CopyFrom(numpy_helper.from_array(table.w_exec.astype(np.float32), "emb"))
    onnx.save(plain, str(tmp_path / "dequantized.onnx"))
    feeds = w.feeds().arrays
    want, got = reference.run(tmp_path / "dequantized.onnx", feeds), reference.run(made.path, feeds)
    for name in ("logits", "features"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def test_weight_only_variants_of_a_conv_graph_are_refused_with_the_tools_reason(conv_only: Path) -> None:
    with pytest.raises(v.VariantRefused, match="no MatMul with a constant weight.*--act-bits 8"):
        _make(_workload(conv_only), "q4")


def test_an_observer_onnxruntime_has_not_is_refused(tiny: Path) -> None:
    with pytest.raises(v.VariantRefused, match="--observer mse"):
        _make(_workload(tiny), v.QDQ, observer="mse")


def test_variants_are_cached_by_content(tiny: Path, private_cache: Path) -> None:
    w = _workload(tiny)
    first = _make(w, "q4")
    made = os.stat(first.path)
    again = _make(w, "q4")  # read, not written again (a hit only marks it used: its time, not its inode)
    used = os.stat(again.path)
    assert again.path == first.path and used.st_ino == made.st_ino and used.st_mtime_ns >= made.st_mtime_ns
    assert again.node_dtypes == first.node_dtypes
    assert _make(w, "q4", block=64).path != first.path
    assert len(list(private_cache.glob("*.onnx"))) == 2


def test_a_file_with_external_data_is_hashed_whole_and_variants_too_big_for_one_file_keep_theirs(
        tmp_path: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_classifier(tmp_path / "ext.onnx", external_data=True)
    w = _workload(model)
    fp32 = _make(w, "fp32")
    assert fp32.path == model and fp32.external == ("ext.onnx.data",)
    data = tmp_path / "ext.onnx.data"
    changed = bytearray(data.read_bytes())
    changed[-1] ^= 1
    before = graph.sha256(model)
    data.write_bytes(bytes(changed))
    assert graph.sha256(model) != before  # the weights are part of the file's identity
    monkeypatch.setattr(v, "PROTOBUF_LIMIT", 1000)  # as if the q4 variant were over 2 GB
    q4 = _make(_workload(model), "q4")
    assert q4.external == (f"{q4.path.name}.data",) and (q4.path.parent / q4.external[0]).is_file()
    feeds = w.feeds().arrays
    assert reference.run(q4.path, feeds)["logits"].shape == (2, 32)
    assert _make(_workload(model), "q4").external == q4.external  # and so read back from the cache
    data.unlink()
    with pytest.raises(OnnxFileError, match=r"^ext.onnx keeps its weights in ext.onnx.data, which is not beside it"):
        _workload(model)


def test_a_declared_output_shape_that_contradicts_onnxruntime_is_cleared_and_said(tmp_path: Path) -> None:
    import onnx

    model = onnx.load(str(tiny_classifier(tmp_path / "t.onnx")))
    del model.graph.output[0].type.tensor_type.shape.dim[:]  # declared rank 0, as stripped exports do
    onnx.save(model, str(tmp_path / "stripped.onnx"))
    w = OnnxFileWorkload.create(str(tmp_path / "stripped.onnx"), dims=dict(DIMS))
    made = _make(w, "fp32")
    assert made.path != w.file and "logits declared [], computed [2, 32]" in made.repairs
    assert not onnx.load(str(made.path)).graph.output[0].type.tensor_type.HasField("shape")
    assert _make(_workload(tmp_path / "t.onnx"), "fp32").repairs == ""


# ------------------------------------------------------------------------------------------ inputs


def test_inputs_from_signatures(tiny: Path) -> None:
    feeds = _workload(tiny).feeds()
    assert feeds.dims == DIMS
    assert feeds.arrays["pixels"].shape == (2, 3, 8, 8) and feeds.arrays["pixels"].dtype == np.float32
    assert -1 <= feeds.arrays["pixels"].min() and feeds.arrays["pixels"].max() < 1
    assert feeds.arrays["attention_mask"].dtype == np.int64 and (feeds.arrays["attention_mask"] == 1).all()
    ids = feeds.arrays["ids"]
    assert ids.shape == (2, 6) and ids.min() >= 0 and ids.max() < 100 and len(np.unique(ids)) > 3
    assert "ids int64[2,6] ids in [0,100)" in feeds.description and "attention_mask" in feeds.description
    again = _workload(tiny).feeds()
    assert again.digest == feeds.digest  # seeded: every run of a sweep feeds the same values
    other = OnnxFileWorkload.create(str(tiny), dims=dict(DIMS), seed=1).feeds()
    assert other.digest != feeds.digest
    narrow = OnnxFileWorkload.create(str(tiny), dims=dict(DIMS), id_range=(5, 7)).feeds()
    assert set(np.unique(narrow.arrays["ids"])) <= {5, 6}


def test_a_symbolic_dimension_without_a_value_names_it(tiny: Path) -> None:
    with pytest.raises(OnnxFileError, match=r"symbolic dimension 'seq' with no value: give --dims seq=VALUE"):
        OnnxFileWorkload.create(str(tiny), dims={"batch": 1})
    with pytest.raises(OnnxFileError, match="--dims width: the graph's inputs have no dimension of that name"):
        OnnxFileWorkload.create(str(tiny), dims={**DIMS, "width": 3})


def test_an_inputs_file_is_checked_against_the_signatures(tiny: Path, tmp_path: Path) -> None:
    good = {"pixels": np.zeros((1, 3, 8, 8), np.float32), "ids": np.arange(8, dtype=np.int64).reshape(1, 8),
            "attention_mask": np.ones((1, 8), np.int64)}
    np.savez(tmp_path / "good.npz", **good)
    w = OnnxFileWorkload.create(str(tiny), inputs_file=tmp_path / "good.npz")
    assert w.feeds().dims == {"batch": 1, "seq": 8} and w.input_shapes == "pixels:1x3x8x8 ids:1x8 attention_mask:1x8"
    cases = {
        "missing": ({k: a for k, a in good.items() if k != "ids"}, "has no array 'ids'"),
        "dtype": ({**good, "ids": good["ids"].astype(np.int32)}, "ids is int32, the graph takes int64"),
        "rank": ({**good, "pixels": np.zeros((3, 8, 8), np.float32)}, "pixels has shape"),
        "fixed": ({**good, "pixels": np.zeros((1, 1, 8, 8), np.float32)}, "pixels has shape"),
        "dims": ({**good, "attention_mask": np.ones((1, 7), np.int64)}, "dimension seq is 8 in one input and 7"),
    }
    for name, (arrays, message) in cases.items():
        np.savez(tmp_path / f"{name}.npz", **arrays)
        with pytest.raises(OnnxFileError, match=message):
            OnnxFileWorkload.create(str(tiny), inputs_file=tmp_path / f"{name}.npz")
    with pytest.raises(OnnxFileError, match="not both"):
        OnnxFileWorkload.create(str(tiny), dims=dict(DIMS), inputs_file=tmp_path / "good.npz")


def test_dims_and_id_range_words() -> None:
    assert inputs.parse_dims(["batch=2", "seq=16"]) == {"batch": 2, "seq": 16}
    assert inputs.parse_id_range("3:9") == (3, 9)
    for bad in (["batch"], ["batch=0"], ["=3"], ["batch=x"]):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            inputs.parse_dims(bad)
    for bad in ("3", "9:3", "a:b"):
        with pytest.raises(ValueError, match="--id-range"):
            inputs.parse_id_range(bad)


# ----------------------------------------------------------------------------- references, figures


def test_references_are_onnxruntime_cpu_on_fp32_and_on_the_variant(tiny: Path) -> None:
    w = _workload(tiny)
    feeds = w.feeds()
    q4 = _make(w, "q4")
    prepared = prepare(w, q4, 4, 32)
    fp32 = reference.run(tiny, feeds.arrays)
    held = reference.run(q4.path, feeds.arrays)
    assert [o.name for o in prepared.outputs] == ["logits", "features"]
    assert [o.shape for o in prepared.outputs] == [(2, 32), (2, 64)]
    np.testing.assert_array_equal(prepared.ref_float, np.concatenate([fp32["logits"].ravel(), fp32["features"].ravel()]))
    np.testing.assert_array_equal(prepared.ref_dequantized,
                                  np.concatenate([held["logits"].ravel(), held["features"].ravel()]))
    # the browser returning fp32's own outputs: perfect against fp32, the variant's error against itself
    as_fp32 = prepared.figures(fp32, 1.0)
    assert as_fp32["outputs_cosine_min"] == pytest.approx(1.0) and as_fp32["top1_vs_fp32"] == 1.0
    assert as_fp32["nodes_quantized"] == 2 and "logits: cosine 1" in as_fp32["output_figures"]
    as_held = prepared.figures(held, 1.0)
    assert 0.9 < as_held["outputs_cosine_min"] < 0.99999  # 4-bit weights cost something, not everything
    assert [p.bits for p in prepared.layers] == [32, 4, 4] and [p.rule for p in prepared.layers][0] == "kept float by the tool"
    # a wrong browser lands outside the tolerance; the CPU spread of a float32 graph is tiny
    assert prepared.tolerance("f32") == reference.TOLERANCE_FLOOR["f32"] and prepared.spread < 1e-5
    wrong = {n: a * 1.01 for n, a in held.items()}
    assert reference.rel_rms(prepared.judged(wrong), prepared.ref_dequantized) > prepared.tolerance("f32")
    arrays = prepared.output_arrays(held)
    assert set(arrays) == {"input:pixels", "input:ids", "input:attention_mask", "output:logits", "output:features",
                           "fp32:logits", "fp32:features"}


def test_top1_counts_positions_and_accepts_fp32_ties() -> None:
    ref = np.array([[0.1, 0.9, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    out = np.array([[0.0, 1.0, 0.0], [0.0, 0.4, 0.6], [0.6, 0.3, 0.1]])
    assert top1_agreement(out, ref) == pytest.approx(1 / 3)
    tied = np.array([[0.0, 1.0, 0.0], [0.6, 0.4, 0.0], [0.0, 0.0, 1.0]])
    assert top1_agreement(tied, ref) == 1.0


def test_int8_qdq_tolerance_is_never_below_its_floor(tiny: Path) -> None:
    w = _workload(tiny)
    prepared = prepare(w, _make(w, v.QDQ), 8, 32)
    assert prepared.tolerance("f32") >= reference.QDQ_FLOOR
    assert all(p.bits == 8 for p in prepared.layers)


# -------------------------------------------------------------------------------------------- plan


def test_transformers_js_dtypes_are_made_as_its_conversion_makes_them(tiny: Path) -> None:
    """q8/int8/uint8: dynamic int8 (MatMulInteger, ConvInteger; q8 uint8 weights here, the graph
    having a Conv); bnb4: NF4 MatMulBnb4; each layer says what it holds, and --dtype plans them."""
    w = _workload(tiny)
    for name, held in (("q8", "uint8"), ("int8", "int8"), ("uint8", "uint8")):
        made = _make(w, name)
        assert made.node_dtypes["fc1"].startswith(f"MatMulInteger:{held}=fc1_quant"), made.node_dtypes
        assert made.node_dtypes["conv"].startswith(f"ConvInteger:{held}="), made.node_dtypes
        assert made.nodes_quantized == 3 and "IntegerOps" in made.tool
    bnb4 = _make(w, "bnb4")
    assert bnb4.node_dtypes["head"] == "MatMulBnb4=head_Bnb4" and bnb4.node_dtypes["conv"] == "Conv:float32"
    assert bnb4.nodes_quantized == 2 and "NF4 block 64" in bnb4.tool
    chosen = OnnxFileWorkload.create(str(tiny), dims=dict(DIMS), dtypes=("q8", "bnb4", "fp32", "q4"))
    assert [chosen.variants(b) for b in (32, 16, 8, 4)] == [("fp32",), (), ("q8",), ("bnb4", "q4")]
    assert chosen.variants(8, act_bits=8) == ()
    with pytest.raises(OnnxFileError, match="--dtype q3: an ONNX file's variants are fp32, fp16"):
        OnnxFileWorkload.create(str(tiny), dims=dict(DIMS), dtypes=("q3",))


def test_folders_from_before_schema_13_read_q8_as_q8_nbits(tiny: Path, tmp_path: Path) -> None:
    import pandas as pd

    from fixed_web_platform.results import reader
    from fixed_web_platform.results.rows import ResultRow

    plan = build_plan([BrowserName.CHROME], [Platform.WASM], [_workload(tiny)], [8], engines=[EngineName.ORT])
    frame = pd.DataFrame([ResultRow.without_measurement(r, "ok", "").record() for r in plan])
    assert list(frame["format_requested"]) == ["q8-nbits"]
    for version, name, read_as in ((12, "q8", "q8-nbits"), (13, "q8", "q8")):  # today's q8 is dynamic int8
        folder = tmp_path / str(version)
        folder.mkdir()
        frame.assign(schema_version=version, format_requested=name).to_csv(folder / "results.csv", index=False)
        assert list(reader.load(folder).rows["format_requested"]) == [read_as], version


def test_the_plan_runs_variants_on_ort_and_the_harness_refuses_the_kind(tiny: Path) -> None:
    w = OnnxFileWorkload.create(str(tiny), dims=dict(DIMS), q4f16=True)
    plan = build_plan([BrowserName.CHROME], [Platform.WEBNN], [w], [32, 16, 8, 4], act_bits=[32, 8],
                      engines=[EngineName.HARNESS, EngineName.ORT])
    ort = [(r.bits, r.act_bits, r.weight_format, r.refused) for r in plan if r.engine is EngineName.ORT]
    assert ort == [(32, 32, "fp32", ""), (16, 32, "fp16", ""), (8, 32, "q8-nbits", ""), (8, 8, v.QDQ, ""),
                   (4, 32, "q4", ""), (4, 32, "q4f16", ""),
                   (4, 8, v.QDQ, "int8 activations of an ONNX file are its int8-qdq variant, which holds 8-bit "
                                 "weights (--bits 8), not 4-bit ones")]
    harness = [r for r in plan if r.engine is EngineName.HARNESS]
    assert harness and all("does not run onnx workloads (engines that do: ort/wasm, ort/webgpu, ort/webnn)"
                           in r.refused for r in harness)
    per_channel = build_plan([BrowserName.CHROME], [Platform.WASM], [w], [4], engines=[EngineName.ORT],
                             granularity="per-channel")
    assert "per-channel weights are the int8-qdq variant's" in planned_refusal(per_channel[0])


def test_a_model_path_ending_in_onnx_or_a_folder_of_one_is_the_onnx_kind(tiny: Path) -> None:
    assert graph.is_onnx_model(str(tiny)) and graph.is_onnx_model(str(tiny.parent))
    (workload,) = model_workloads(str(tiny), {"dims": ["batch=1", "seq=4"], "seed": 0})
    assert workload.kind == "onnx" and workload.input_shapes == "pixels:1x3x8x8 ids:1x4 attention_mask:1x4"


# --------------------------------------------------------------------------------------- bad input


def test_bad_input_is_one_line_and_exit_2(tiny: Path, tmp_path: Path, no_browser: None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.onnx").write_bytes(b"this is not a protobuf")
    (tmp_path / "texts.txt").write_text("hello\n")
    np.savez(tmp_path / "partial.npz", pixels=np.zeros((1, 3, 8, 8), np.float32))
    np.savez(tmp_path / "full.npz", **_workload(tiny).feeds().arrays)
    import onnx

    future = onnx.load(str(tiny))
    future.opset_import[0].version = 99  # an opset no tool here knows
    onnx.save(future, str(tmp_path / "future.onnx"))
    cases = {
        "not onnx": (["--model", str(tmp_path / "junk.onnx")], "is not an ONNX model"),
        "missing file": (["--model", str(tmp_path / "nowhere.onnx")], "does not exist"),
        "unset dim": (["--model", str(tiny), "--dims", "batch=1"], "give --dims seq=VALUE"),
        "npz missing input": (["--model", str(tiny), "--inputs", str(tmp_path / "partial.npz")], "has no array 'ids'"),
        "inputs not npz": (["--model", str(tiny), "--inputs", str(tmp_path / "texts.txt")], "an .npz file"),
        "bits 3": (["--model", str(tiny), "--dims", "batch=1", "seq=4", "--bits", "3"], "bits 3"),
        "block 48": (["--model", str(tiny), "--dims", "batch=1", "seq=4", "--bits", "4", "--block-size", "48"],
                     "--block-size 48: MatMulNBits blocks are a power of two"),
        "opset 99": (["--model", str(tmp_path / "future.onnx"), "--dims", "batch=1", "seq=4"],
                     "onnxruntime cannot run future.onnx"),
        "rules": (["--model", str(tiny), "--dims", "batch=1", "seq=4", "--mixed-precision"],
                  "--mixed-precision is not taken by ONNX files"),
        "dtype q3": (["--model", str(tiny), "--dims", "batch=1", "seq=4", "--dtype", "q8", "q3"],
                     "--dtype q3: an ONNX file's variants are fp32, fp16, q8-nbits"),
        "dtype alone": (["--dtype", "q8"], "--dtype goes with --model"),
        "calibration is the inputs": (["--model", str(tiny), "--inputs", str(tmp_path / "full.npz"), "--calibration",
                                       str(tmp_path / "full.npz")], "full.npz is the --inputs file"),
        "calibration texts": (["--model", str(tiny), "--dims", "batch=1", "seq=4", "--calibration",
                               str(tmp_path / "texts.txt")], "calibration inputs are an .npz file"),
        "dtype off bits": (["--model", str(tiny), "--dims", "batch=1", "seq=4", "--dtype", "q8", "--bits", "32", "4"],
                           "--dtype q8 runs at 8 bits, which --bits 32 4 leaves out"),
        "dtype of a model": (["--model", "all-MiniLM-L6-v2", "--dtype", "q8"],
                             "--dtype names the variants of an ONNX file"),
    }
    for name, (argv, message) in cases.items():
        assert cli.main(argv) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, (name, err)


def test_the_placement_figures_come_from_the_first_page_load() -> None:
    from fixed_web_platform.workloads.base import PageIterations

    pages = [PageIterations({"nodes_placed": 3, "fallback_nodes": ["Gather"]}, (0.0,), 0),
             PageIterations({"nodes_placed": 9, "fallback_nodes": []}, (0.0,), 0)]
    assert ONNX_FILE.speed_figures(None, pages) == {"nodes_placed": 3, "nodes_fallback": 1}


class _Adapter(NoBrowser):
    """A browser whose WebGPU adapter has ``limits``, as a page reports them."""

    def __init__(self, limits: dict) -> None:
        self.limits = limits

    async def adapter_limits(self) -> dict:
        return adapter_limits({"webgpu": {"available": True, "limits": self.limits}})


def test_a_constant_over_the_adapters_max_buffer_size_is_refused_before_its_page(tiny: Path) -> None:
    (run,) = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [_workload(tiny)], [32], engines=[EngineName.ORT])
    w1 = 512 * 64 * 4  # the tiny classifier's largest initializer, fp32

    def job(limits: dict) -> object:
        return asyncio.run(build_job(run, TimingConfig(), _Adapter(limits)))

    refused = job({"maxBufferSize": w1 - 4, "maxStorageBufferBindingSize": 1024})
    assert isinstance(refused, Refusal) and refused.outcome is Outcome.UNSUPPORTED
    assert refused.reason == (f"ort on WebGPU: its largest constant, w1 ({w1:,} bytes), exceeds the adapter's "
                              f"maxBufferSize {w1 - 4:,}: no WebGPU buffer can hold it")
    # at the limit it loads; a binding limit below the constant is no refusal (ORT binds in segments);
    # a page's forged limit is not a number
    for limits in ({"maxBufferSize": w1, "maxStorageBufferBindingSize": 1024}, {"maxBufferSize": "1"},
                   {"maxBufferSize": float("nan")}, {"maxBufferSize": True}):
        fits = job(limits)
        assert isinstance(fits, EngineJob) and fits.largest_constant == ("w1", w1), limits


REFUSED = ("Error: Can't create a session. ERROR_CODE: 1, ERROR_MESSAGE: This session contains graph nodes that "
           "are assigned to the default CPU EP, but fallback to CPU EP has been explicitly disabled by the user.")


@pytest.mark.parametrize("refused", [REFUSED, ""], ids=["refused", "accepted"])
def test_a_session_refused_without_cpu_fallback_is_a_fallback_row_even_where_the_log_is_silent(
        tiny: Path, refused: str) -> None:
    """Planted: Chrome's ORT WebNN provider on a one-node MatMulNBits file refused the strict session;
    the harness ran it with CPU fallback, and ORT's placement log listed no node. The refusal
    proves at least one node ran on the CPU: the row, its report table and the first screen say so."""
    from fixed_web_platform.engines.registry import read_reply
    from fixed_web_platform.page_protocol import PROTOCOL_VERSION, parse_page_reply
    from fixed_web_platform.report.glance import what_ran
    from fixed_web_platform.report.onnx_files import _fallback
    from fixed_web_platform.workloads.base import PageIterations

    (run,) = build_plan([BrowserName.CHROME], [Platform.WEBNN], [_workload(tiny)], [4], engines=[EngineName.ORT])
    job = asyncio.run(build_job(run, TimingConfig(), NoBrowser()))
    assert isinstance(job, EngineJob)
    layers = [{"name": w["name"], "weight_dtype": f"{w['weight_dtype']}@webnn", "weight_bytes": None, "gpu_ms": None}
              for w in job.spec.options["ort_layers"]]
    page = parse_page_reply({"protocol_version": PROTOCOL_VERSION, "status": "ok", "compute_dtype": "f32",
                             "wall_ms": [1.0], "start_ms": [0.0], "floor_iterations": 0, "stop_reason": "counts",
                             "iterations_per_sample": 1, "compile_ms": 5.0, "cold_ms": 2.0, "executed_on": "webnn",
                             "fallback": refused,
                             "layers": layers, "nodes_placed": 0, "fallback_nodes": []}, kind=ONNX_FILE)
    executed = read_reply(run, job, page)
    figures = ONNX_FILE.speed_figures(None, [PageIterations(page.kind_fields, (1.0,), 0)])
    row = {"bits_requested": 4, "bits_executed": 4, "platform": "webnn", "executed_on": executed.executed_on,
           **figures}
    if refused:
        assert figures == {"nodes_placed": 0, "nodes_fallback": 1}
        assert "at least 1 node ran off webnn (ORT's placement log listed none)" in executed.note
        assert _fallback(figures) == "at least 1" and what_ran(row) == "at least 1 node on the CPU"
    else:  # the strict session was accepted: every node on the provider
        assert figures == {"nodes_placed": 0, "nodes_fallback": 0} and "ran off" not in executed.note
        assert _fallback(figures) == "0" and what_ran(row) == ""


def test_calibration_is_kept_apart_from_the_evaluated_inputs(tiny: Path, tmp_path: Path) -> None:
    """What int8-qdq and gptq fit to: the next seed's synthesized inputs, or the --calibration file,
    refused when it is the --inputs file or shares a sample (every array's row) with them."""
    w = _workload(tiny)
    assert w.calibration_label == "synthesized seed 1 (the evaluated inputs: seed 0)"
    assert inputs.shared_sample(w.calibration_feeds(), w.feeds()) is None
    evaluated = w.feeds().arrays
    np.savez(tmp_path / "eval.npz", **evaluated)
    other = OnnxFileWorkload.create(str(tiny), dims=dict(DIMS), seed=5).feeds().arrays
    np.savez(tmp_path / "apart.npz", **other)
    np.savez(tmp_path / "shared.npz", **{n: np.concatenate([other[n][:1], evaluated[n][1:]]) for n in evaluated})
    apart = OnnxFileWorkload.create(str(tiny), inputs_file=tmp_path / "eval.npz", calibration=tmp_path / "apart.npz")
    assert apart.calibration_label == str(tmp_path / "apart.npz")
    assert np.array_equal(apart.calibration_feeds().arrays["ids"], other["ids"])
    assert OnnxFileWorkload.create(str(tiny), inputs_file=tmp_path / "eval.npz").calibration_label == \
        f"synthesized seed 1 (the evaluated inputs: {tmp_path / 'eval.npz'})"
    with pytest.raises(OnnxFileError, match=r"--calibration .*eval.npz is the --inputs file"):
        OnnxFileWorkload.create(str(tiny), inputs_file=tmp_path / "eval.npz", calibration=tmp_path / "eval.npz")
    with pytest.raises(OnnxFileError, match=r"shared.npz: sample 1 is also an evaluated input"):
        OnnxFileWorkload.create(str(tiny), inputs_file=tmp_path / "eval.npz", calibration=tmp_path / "shared.npz")


def test_a_quantizer_a_provider_cannot_hold_is_refused_before_any_page(tiny: Path) -> None:
    """The held variant is planned once per quantizer (ORT's own variants once); float zero points
    (offset) only on wasm's MatMulNBits, and there not at 8 bits."""
    w = _workload(tiny, held=True)
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU, Platform.WASM], [w], [8, 4], engines=[EngineName.ORT],
                      weight_quant=["minmax", "offset", "gptq"])
    refused = {(str(r.platform), r.bits, r.weight_format, r.quantized_by): r.refused for r in plan}
    assert sorted(k for k in refused if k[0] == "wasm") == [
        ("wasm", 4, "held", "gptq"), ("wasm", 4, "held", "minmax"), ("wasm", 4, "held", "offset"), ("wasm", 4, "q4", ""),
        ("wasm", 8, "held", "gptq"), ("wasm", 8, "held", "minmax"), ("wasm", 8, "held", "offset"),
        ("wasm", 8, "q8-nbits", "")]
    assert refused["webgpu", 4, "held", "offset"].startswith(
        "weights made by the offset quantizer (a float zero point per block) are not held by engine ort on webgpu")
    assert refused["wasm", 8, "held", "offset"].startswith("ORT's MatMulNBits computes float zero points (the "
                                                           "offset quantizer's) at 4 and 2 bits only, not 8")
    assert not any(refused[p, 4, "held", q] for p in ("wasm", "webgpu") for q in ("minmax", "gptq"))
    assert refused["wasm", 4, "held", "offset"] == ""


def test_sensitivity_probes_each_matmul_and_the_plan_search_keeps_the_budget(tiny: Path) -> None:
    """Each MatMul alone at 4 bits (the held variant with one rule, the rest float32), predicted by
    onnxruntime on the file; the encoders' plan search over those predictions meets the budget."""
    from fixed_web_platform.workloads.encoder.plan_search import parse_budget, search
    from fixed_web_platform.workloads.onnx_file import sensitivity as s

    w = _workload(tiny)
    probes = s.probes(w, "layer")
    assert [p.name for p in probes] == ["fc1", "head"]
    with pytest.raises(ValueError, match="--group block: an ONNX file's MatMuls are probed one by one"):
        s.probes(w, "block")
    alone = s.probe_workload(w, probes[1], 4, 32)
    assert alone.variants(32) == ("held",) and alone.rules_name == "sensitivity: head at 4-bit"
    made = alone.variant("held", 32, 32, quantizer="gptq")
    assert made.node_dtypes["head"] == "MatMulNBits4=head_Q4" and made.node_dtypes["fc1"] == "MatMul:float32"
    assert alone.row_fields(32, 32)["precision_plan"] == "mixed:32x1,4x1"
    base, _ = s.predicted(w, 32, 32, "minmax")
    each = {p.name: s.predicted(s.probe_workload(w, p, 4, 32), 32, 32, "minmax")[0]["cosine_min"] for p in probes}
    both = s.predicted(w, 4, 32, "minmax")[0]["cosine_min"]
    assert base["cosine_min"] == pytest.approx(1.0) and both < min(each.values()) < 1.0
    least = max(each, key=each.__getitem__)  # the least sensitive MatMul
    budget = parse_budget(f"cosine_min>={(each[least] + both) / 2}")  # one MatMul at 4 bits fits, two do not
    found = search({4: sorted(probes, key=lambda p: -each[p.name])}, budget, s.predictor(w, 32, "minmax"),
                   baseline_bits=32, block_size=32)
    assert [(p.name, b) for p, b in found.assignment] == [(least, 4)] and budget.met(found.predicted)
