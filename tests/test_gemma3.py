"""Gemma 3 (architectures/gemma3) without a browser: its float64 decoder against PyTorch
(transformers' Gemma3ForCausalLM: sliding windows, per-head query/key norms, (1 + weight) norms,
the scaled embedding, GELU-tanh gating, one key/value head), its KV cache, and its graph lowered
for ONNX Runtime (engines/ort/torch_ops.py) run in onnxruntime against the float64 decoder."""

from __future__ import annotations

import numpy as np
import pytest

from fixed_web_platform.architectures.gemma3 import GEMMA3, reference


def tiny_gemma_config(**kw):  # noqa: ANN003, ANN201
    import transformers

    shape = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16, max_position_embeddings=64,
                 rms_norm_eps=1e-6, sliding_window=4, layer_types=["sliding_attention", "sliding_attention",
                                                                   "full_attention"],
                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                  "full_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                 tie_word_embeddings=True)
    return transformers.Gemma3TextConfig(**(shape | kw))


@pytest.fixture(scope="module")
def tiny():  # noqa: ANN201
    cfg = GEMMA3.config(tiny_gemma_config(), "tiny")
    weights = GEMMA3.random_weights(cfg, 5)
    weights = {k: (v * 8 if v.ndim == 2 else v) for k, v in weights.items()}  # logits far from uniform
    weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    return cfg, weights


def _pytorch(cfg, weights, ids: np.ndarray) -> np.ndarray:  # noqa: ANN001
    import torch

    with torch.no_grad():
        return GEMMA3.torch_module(cfg, weights)(torch.tensor(ids[None])).logits[0].double().numpy()


def test_numpy_gemma3_matches_pytorch_across_the_sliding_window(tiny) -> None:  # noqa: ANN001
    cfg, weights = tiny
    ids = np.array([3, 5, 7, 11, 13, 2, 40, 50, 60, 1])  # longer than the window of 4
    theirs = _pytorch(cfg, weights, ids)
    ours, _ = reference.forward(cfg, weights, ids)
    assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()
    # each of Gemma's own parts is needed to match: the check can fail
    for broken in (cfg.__class__(**{**cfg.to_json(), "sliding_window": 64}),  # no window
                   cfg.__class__(**{**cfg.to_json(), "rope_local": cfg.rope_global})):  # one RoPE base
        assert np.abs(reference.forward(broken, weights, ids)[0] - theirs).max() > 1e-3 * np.abs(theirs).max()
    unnormed = weights | {"model.layers.0.self_attn.q_norm.weight": np.full(cfg.head_dim, -1.0, np.float32) + 1e-3}
    assert np.abs(reference.forward(cfg, unnormed, ids)[0] - theirs).max() > 1e-3 * np.abs(theirs).max()


def test_kv_cache_steps_equal_the_full_forward_past_the_window(tiny) -> None:  # noqa: ANN001
    cfg, weights = tiny
    ids = np.array([3, 5, 7, 11, 13, 2, 40, 50])
    full, _ = reference.forward(cfg, weights, ids)
    first, cache = reference.forward(cfg, weights, ids[:3])
    rest = []
    for token in ids[3:]:
        logits, cache = reference.forward(cfg, weights, [token], cache)
        rest.append(logits[0])
    assert np.allclose(np.vstack([first, *rest]), full, atol=1e-12)


def test_greedy_equals_transformers_generate(tiny) -> None:  # noqa: ANN001
    import torch

    cfg, weights = tiny
    prompt = [3, 5, 7]
    ours = GEMMA3.reference_greedy(cfg, weights, prompt, 6)
    with torch.no_grad():
        out = GEMMA3.torch_module(cfg, weights).generate(torch.tensor([prompt]), max_new_tokens=6, min_new_tokens=6,
                                                         do_sample=False, eos_token_id=None, pad_token_id=0)
    assert out[0, len(prompt):].tolist() == ours


@pytest.fixture(scope="module")
def workload(tmp_path_factory):  # noqa: ANN001, ANN201
    from fixed_web_platform.workloads import DecoderWorkload

    folder = tmp_path_factory.mktemp("tiny-gemma3")
    tiny_gemma_config(vocab_size=30522).save_pretrained(folder)  # a window of 4: within the rows scored
    return DecoderWorkload.create(str(folder), prompt_len=6, new_tokens=5, eval_len=12, random_weights=True,
                                  texts=("The quick brown fox jumps over the lazy dog and runs far away.",
                                         "A second text, with words enough for twelve tokens of evaluation."))


@pytest.mark.parametrize("bits", [32, 4])
def test_the_ort_lowering_of_the_graph_computes_the_float64_decoder(workload, bits: int) -> None:  # noqa: ANN001
    """ONNX Runtime's export of Gemma's prefill pass (torch_ops: the offset and per-head norms, the
    scaled embedding, the GELU-tanh gate, the two RoPE tables, the sliding window over its cache),
    run in onnxruntime on the CPU, scores each evaluation row as the float64 decoder with the held
    weights does."""
    from test_ort_decoder import _feeds, _session, _zeros

    from fixed_web_platform.engines.ort import onnx_decoder
    from fixed_web_platform.workloads.decoder.prepared import prepare_decoder

    prepared = prepare_decoder(workload, bits, 32, 0, unsigned=True)
    session = _session(onnx_decoder.decoder_model(prepared).data)
    _, length = prepared.tokens.eval_ids.shape
    out = np.stack([session.run([onnx_decoder.LOGITS],
                                _feeds(row, 0, np.arange(length), prepared.context) | _zeros(prepared))[0][0]
                    for row in prepared.tokens.eval_ids])
    ref = prepared.ref_dequantized
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5


def test_the_window_is_asked_only_past_it(workload) -> None:  # noqa: ANN001
    """Within the window, a sliding layer attends as a full one, so the graph asks no window (and
    an engine without one could run it); past it, the window is asked of every engine's lowering."""
    import dataclasses

    short = dataclasses.replace(workload, prompt_len=2, new_tokens=2, eval_len=4)
    assert "Attention.window" not in short.op_needs() and "Attention.window" in workload.op_needs()
    assert {"Norm.offset", "Embed.scale", "GatedAct.act=gelu_tanh"} <= short.op_needs()


@pytest.mark.budget(90, why="Gemma 3 270M's GGUF joined and read through transformers (about 30 s here)")
def test_the_real_gemma3_270m_is_read_offline_and_its_float64_decoder_is_pytorchs() -> None:
    """gemma3-270m from its chunk packages: the configuration read from the GGUF (sliding layers,
    two RoPE bases), its tokenizer's beginning-of-sequence id first in the prompt and every row
    (and left out of the text llama.cpp tokenizes again), and the float64 decoder on the real
    weights (norm weights as transformers stores them) against PyTorch's logits."""
    from fixed_web_platform.models import source
    from fixed_web_platform.workloads import DecoderWorkload

    workload = DecoderWorkload.create("gemma3-270m", prompt_len=8, new_tokens=2, eval_len=12)
    cfg, tokens = workload.config(), workload.tokens()
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.vocab) == (18, 640, 4, 1, 256, 262144)
    assert [i for i, s in enumerate(cfg.sliding) if not s] == [5, 11, 17]
    assert (cfg.sliding_window, cfg.rope_local, cfg.rope_global) == (512, 10_000.0, 1_000_000.0)
    bos = tokens.tokenizer.bos_token_id
    assert tokens.lead == (bos,) and tokens.prompt[0] == bos and (tokens.eval_ids[:, 0] == bos).all()
    assert tokens.text(tokens.prompt) == tokens.decode(tokens.prompt[1:])
    loaded = source.load(source.resolve("gemma3-270m", False))
    ids = tokens.eval_ids[0]
    ours = GEMMA3.reference_forward(cfg, loaded.weights, {"input_ids": ids})
    theirs = _pytorch(cfg, loaded.weights, ids)
    assert np.abs(ours - theirs).max() <= 1e-3 * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()


def test_the_fp32_activation_peak_is_found_and_judged_against_float16(tiny) -> None:  # noqa: ANN001
    """The float16 verdict (workloads/decoder/prepared.py ``ActivationPeak``): PyTorch fp32's largest
    activation, found by hooks on every module, is at least the residual stream's largest value;
    planted past 65,504 (the embedding scaled up, as Gemma's grows), the verdict names it, and
    non-finite logits are named however small the peak."""
    from types import SimpleNamespace

    import torch

    from fixed_web_platform.workloads.decoder.prepared import ActivationPeak, pytorch_logits

    cfg, weights = tiny
    ids = np.array([[3, 5, 7, 11, 13, 2, 40, 50]])
    for scale, overflows in ((1.0, False), (1e6, True)):
        planted = weights | {"model.embed_tokens.weight": weights["model.embed_tokens.weight"] * scale}
        net = GEMMA3.torch_module(cfg, planted)
        logits, peak = pytorch_logits(SimpleNamespace(module=lambda net=net: net), ids)
        with torch.no_grad():
            hidden = net(input_ids=torch.tensor(ids), output_hidden_states=True).hidden_states
        assert peak.value >= max(float(h.abs().max()) for h in hidden) > 0
        assert np.allclose(logits[0], _pytorch(cfg, planted, ids[0]))
        verdict = peak.overflow(logits, "f16")
        assert ("past float16's 65,504" in verdict) == overflows, verdict
        assert verdict.startswith("none") != overflows and peak.where in verdict
        assert peak.overflow(logits, "f32") == ""
    broken = np.array([[1.0, np.inf, np.nan]])
    assert ActivationPeak(10.0, "x").overflow(broken, "f16").startswith("2 non-finite logits")
