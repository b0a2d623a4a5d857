"""The decoder ONNX model handed to ONNX Runtime Web (engines/ort/onnx_decoder.py) computes what
the harness's float64 decoder computes with the weights the run holds: run in onnxruntime (CPU)
its scored logits match ``prepared.ref_dequantized``, and a prefill then decode steps over its
fixed-length, right-aligned KV cache give the float64 decoder's greedy ids."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from conftest import NoBrowser

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("torch")

from test_decoder import tiny_hf_config  # noqa: E402

from fixed_web_platform.engines.ort import onnx_decoder  # noqa: E402
from fixed_web_platform.engines.ort.onnx_matmul import IR_VERSION  # noqa: E402
from fixed_web_platform.vocabulary import PER_CHANNEL_BLOCK  # noqa: E402
from fixed_web_platform.workloads import DecoderWorkload  # noqa: E402
from fixed_web_platform.workloads.decoder.prepared import prepare_decoder  # noqa: E402


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> DecoderWorkload:  # noqa: ANN001
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_hf_config(vocab_size=30522, hidden_size=64, intermediate_size=128, max_position_embeddings=128,
                   num_attention_heads=4, num_key_value_heads=2).save_pretrained(folder)
    return DecoderWorkload.create(str(folder), prompt_len=6, new_tokens=5, eval_len=12, random_weights=True,
                                  texts=("The quick brown fox jumps over the lazy dog and runs far away.",
                                         "A second text, with words enough for twelve tokens of evaluation."))


def _session(data: bytes):  # noqa: ANN202
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def _zeros(prepared) -> dict[str, np.ndarray]:  # noqa: ANN001
    cfg = prepared.config
    shape = (1, cfg.kv_heads, prepared.context, cfg.head_dim)
    return {name: np.zeros(shape, np.float32) for name in onnx_decoder.past_names(cfg.layers)}


def _feeds(ids: np.ndarray, p: int, rows: np.ndarray, context: int) -> dict[str, np.ndarray]:
    s = len(ids)
    mask = np.concatenate([np.zeros(context - p, np.int32), np.ones(p + s, np.int32)])[None]
    return {"input_ids": ids.astype(np.int32)[None], "position_ids": np.arange(p, p + s, dtype=np.int32)[None],
            "attention_mask": mask, "logit_rows": rows.astype(np.int32)}


@pytest.mark.parametrize("bits", [32, 16, 8, 4, 2])
def test_scored_logits_match_the_dequantized_reference(workload, bits: int) -> None:  # noqa: ANN001
    prepared = prepare_decoder(workload, bits, 32, 0, unsigned=True)
    model = onnx_decoder.decoder_model(prepared)
    parsed = onnx.load_from_string(model.data)
    assert parsed.ir_version == IR_VERSION
    names = [layer.name for layer in prepared.held.layers]
    assert [layer.name for layer in model.layers] == names and names[-1] == "lm_head"
    by_name = {node.name: node for node in parsed.graph.node}
    assert all(by_name[name].op_type == ("MatMulNBits" if bits <= 8 else "MatMul") for name in names)
    session = _session(model.data)
    _, length = prepared.tokens.eval_ids.shape
    out = np.stack([session.run([onnx_decoder.LOGITS],
                                _feeds(row, 0, np.arange(length), prepared.context) | _zeros(prepared))[0][0]
                    for row in prepared.tokens.eval_ids])
    ref = prepared.ref_dequantized
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert rel < (3e-3 if bits == 16 else 1e-5), rel


def test_int8_qdq_decoder_matches_the_int8_activation_reference(workload) -> None:  # noqa: ANN001
    """W8A8 in ORT's int8 QDQ form (onnxruntime's CPU kernels, the wasm build's): the scored
    logits land within the int8 tolerance of the float64 decoder with the same int8 activations,
    nearer it than the float-activation one, with one row or twelve per pass (the form's reshapes)."""
    prepared = prepare_decoder(workload, 8, PER_CHANNEL_BLOCK, 0, unsigned=False, act_bits=8, observer="minmax",
                               out_int8=True)
    model = onnx_decoder.decoder_model(prepared)
    assert {layer.weight_dtype for layer in model.layers} == {"QDQ8"}
    per_token = [a for a in prepared.act_quant if a and a.per_token]  # a decoder's int8 inputs: per token
    assert len(per_token) == len(model.layers)
    ops = Counter(node.op_type for node in onnx.load_from_string(model.data).graph.node)
    assert ops["ReduceMax"] == len(model.layers) and ops["QuantizeLinear"] >= len(model.layers)
    session = _session(model.data)
    _, length = prepared.tokens.eval_ids.shape
    out = np.stack([session.run([onnx_decoder.LOGITS],
                                _feeds(row, 0, np.arange(length), prepared.context) | _zeros(prepared))[0][0]
                    for row in prepared.tokens.eval_ids])
    rel = np.linalg.norm(out - prepared.ref_dequantized) / np.linalg.norm(prepared.ref_dequantized)
    assert rel <= prepared.tolerance("f32"), rel
    assert prepared.kernel_problem(out) == ""
    first = prepared.tokens.eval_ids[0, :1]  # one row through the same graph: what the scored row's first was
    (one,) = session.run([onnx_decoder.LOGITS], _feeds(first, 0, np.arange(1), prepared.context) | _zeros(prepared))
    np.testing.assert_allclose(one[0, 0], out[0, 0], rtol=1e-4, atol=1e-4)


def test_generation_over_the_static_cache_is_the_reference_greedy(workload) -> None:  # noqa: ANN001
    prepared = prepare_decoder(workload, 4, 32, 0, unsigned=True)
    session = _session(onnx_decoder.decoder_model(prepared).data)
    cache = _zeros(prepared)
    outputs = [onnx_decoder.NEXT_ID, *onnx_decoder.present_names(prepared.config.layers)]
    ids, ids_in, p = [], prepared.tokens.prompt, 0
    for _ in range(workload.new_tokens):
        got = session.run(outputs, _feeds(ids_in, p, np.array([len(ids_in) - 1]), prepared.context) | cache)
        cache = dict(zip(cache, got[1:]))
        assert got[1].shape == next(iter(_zeros(prepared).values())).shape  # the cache keeps its length
        ids.append(int(got[0][0, 0]))
        p += len(ids_in)
        ids_in = np.array([ids[-1]])
    assert ids == list(prepared.generated_reference)


def test_the_suppressed_id_is_never_the_next(workload) -> None:  # noqa: ANN001
    prepared = prepare_decoder(workload, 32, 32, 0, unsigned=True)
    prompt = prepared.tokens.prompt
    feeds = _feeds(prompt, 0, np.array([len(prompt) - 1]), prepared.context) | _zeros(prepared)
    logits, first = _session(onnx_decoder.decoder_model(prepared).data).run(
        [onnx_decoder.LOGITS, onnx_decoder.NEXT_ID], feeds)
    assert int(first[0, 0]) == int(np.argmax(logits[0, -1]))
    banned = int(first[0, 0])
    held = prepared.held
    model = onnx_decoder.rewrite(onnx_decoder.export_fp32(held.model, banned), prepared)
    (again,) = _session(model.data).run([onnx_decoder.NEXT_ID], feeds)
    masked = logits[0, -1].copy()
    masked[banned] = -np.inf
    assert int(again[0, 0]) == int(np.argmax(masked)) != banned


def test_free_dimensions_are_named_for_the_page(workload) -> None:  # noqa: ANN001
    prepared = prepare_decoder(workload, 32, 32, 0, unsigned=True)
    graph = onnx.load_from_string(onnx_decoder.decoder_model(prepared).data).graph
    dims = {vi.name: [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]
            for vi in [*graph.input, *graph.output]}
    assert dims["input_ids"] == [1, "sequence"] and dims["attention_mask"] == [1, "total"]
    assert dims["logit_rows"] == ["rows"] and dims["logits"] == [1, "rows", prepared.config.vocab]
    assert dims["past.0.key"] == dims["present.0.key"] == [1, 2, "past", 16]


def test_signed_bytes_are_refused(workload) -> None:  # noqa: ANN001
    prepared = prepare_decoder(workload, 4, 32, 0, unsigned=False)
    with pytest.raises(ValueError, match="unsigned"):
        onnx_decoder.rewrite(b"", prepared)


def _job(workload: DecoderWorkload, bits: int, platform: str):  # noqa: ANN202
    import asyncio

    from fixed_web_platform.engines.registry import build_job
    from fixed_web_platform.plan import RunSpec, TimingConfig
    from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform, PrecisionMode

    run = RunSpec(0, BrowserName.CHROME, Platform(platform), workload, bits, 32, 0, PrecisionMode.STANDARD, 0,
                  engine=EngineName.ORT)
    return asyncio.run(build_job(run, TimingConfig(), NoBrowser()))


def test_the_job_fixes_dimensions_on_webnn_only(workload) -> None:  # noqa: ANN001
    for platform, static in (("webnn", True), ("webgpu", False), ("wasm", False)):
        job = _job(workload, 8, platform)
        spec = job.spec.to_json()
        assert spec["runner"] == "ort_decoder" and spec["options"]["static_shapes"] is static
        assert set(spec["bindings"]) == {"eval_ids", "prompt_ids", "onnx_model"}
        assert spec["options"]["context"] == max(6 + 5, 12)
        assert len(spec["options"]["ort_layers"]) == 2 * 7 + 1
        assert job.weight_format == "MatMulNBits8" and job.zero_point_dtype == "uint8"


def test_a_model_too_large_for_one_onnx_file_is_refused_before_any_export() -> None:
    from fixed_web_platform.engines.base import Refusal
    from fixed_web_platform.vocabulary import Outcome

    big = DecoderWorkload.create("tinyllama-1.1b", prompt_len=4, new_tokens=2, eval_len=8, random_weights=True)
    refusal = _job(big, 4, "wasm")
    assert isinstance(refusal, Refusal) and refusal.outcome == Outcome.UNSUPPORTED
    assert "GiB" in refusal.reason and "one ONNX file" in refusal.reason


def test_gptq_calibrates_on_the_builtin_set_and_the_onnx_rewrite_holds_its_bytes(workload) -> None:  # noqa: ANN001
    """A decoder's gptq weights: each layer's input second moment from the built-in calibration
    sentences through the float model (never the evaluation text), codes on minmax's grid, and
    ONNX Runtime's MatMulNBits rewrite reproduces the float64 reference on those very bytes."""
    from fixed_web_platform.models import calibration

    prepared = prepare_decoder(workload, 4, 32, 0, unsigned=True, weight_quant="gptq")
    minmax = prepare_decoder(workload, 4, 32, 0, unsigned=True)
    assert {layer.held.quantizer for layer in prepared.held.layers} == {"gptq"}
    assert workload.calibration_label == calibration.CALIBRATION_NAME
    names = tuple(layer.name for layer in prepared.held.layers)
    moments = calibration.input_moments(prepared.held.model,
                                        calibration.DecoderRows(calibration.builtin_calibration_texts()), names)
    assert all(m.shape == (p.layer.k, p.layer.k) for m, p in zip(moments.values(), prepared.plan))
    changed = [a.held.tensors["w"] != b.held.tensors["w"] for a, b in zip(prepared.held.layers, minmax.held.layers)]
    assert all(changed)  # the error feedback moved codes in every layer
    session = _session(onnx_decoder.decoder_model(prepared).data)
    _, length = prepared.tokens.eval_ids.shape
    out = np.stack([session.run([onnx_decoder.LOGITS],
                                _feeds(row, 0, np.arange(length), prepared.context) | _zeros(prepared))[0][0]
                    for row in prepared.tokens.eval_ids])
    assert np.linalg.norm(out - prepared.ref_dequantized) / np.linalg.norm(prepared.ref_dequantized) < 1e-5


def test_matmul_nbits_blocks_ort_does_not_take_are_refused_before_the_page(tmp_path) -> None:  # noqa: ANN001
    """Per-channel weights are one block of K; ORT's MatMulNBits takes 16-256 only (SmolLM2's
    K=576 failed in the session), so such a run is refused naming the layer; its QDQ form is not."""
    from fixed_web_platform.engines.ort.loop import nbits_block_refusal
    from fixed_web_platform.plan import build_plan
    from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform

    tiny_hf_config(vocab_size=30522, hidden_size=96, intermediate_size=128).save_pretrained(tmp_path)
    odd = DecoderWorkload.create(str(tmp_path), prompt_len=4, new_tokens=2, eval_len=8, random_weights=True)
    runs = build_plan([BrowserName.CHROME], [Platform.WASM], [odd], [8, 4], engines=[EngineName.ORT],
                      act_bits=(32, 8), granularity=("per-channel", "block"))
    why = {(r.bits, r.granularity, r.act_bits): nbits_block_refusal(r) for r in runs}
    assert "model.layers.0.self_attn.q_proj's 96 along K (per channel)" in why[(8, "per-channel", 32)]
    assert why[(8, "per-channel", 8)] == why[(8, "block", 32)] == why[(4, "block", 32)] == ""
