"""The decoder kind without a browser: the harness's float64 numpy decoder against PyTorch
(grouped-query attention, the KV cache, greedy generation with end of sequence suppressed), the
accuracy figures, the page's per-token reply checked, and bad input as one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixed_web_platform.architectures.llama import LLAMA, reference
from fixed_web_platform.errors import PageDataError
from fixed_web_platform.models import rules
from fixed_web_platform.workloads.base import PageIterations
from fixed_web_platform.workloads.decoder import DECODER, accuracy, timing



def tiny_hf_config(**kw):  # noqa: ANN003, ANN201
    import transformers

    shape = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, tie_word_embeddings=True)
    return transformers.LlamaConfig(**(shape | kw))


@pytest.fixture(scope="module")
def tiny():  # noqa: ANN201
    cfg = LLAMA.config(tiny_hf_config(), "tiny")
    weights = LLAMA.random_weights(cfg, 3)
    # larger weights than the initialisation's, so the logits are far from uniform
    weights = {k: (v * 8 if v.ndim == 2 else v) for k, v in weights.items()}
    weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    return cfg, weights


def test_numpy_decoder_matches_pytorch_with_grouped_query_attention(tiny) -> None:  # noqa: ANN001
    import torch

    cfg, weights = tiny
    assert cfg.heads == 2 * cfg.kv_heads  # two query heads share each key/value head
    ids = np.array([3, 5, 7, 11, 13, 2, 40, 50, 60, 1])
    ours, _ = reference.forward(cfg, weights, ids)
    with torch.no_grad():
        theirs = LLAMA.torch_module(cfg, weights)(torch.tensor(ids[None])).logits[0].double().numpy()
    assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()
    # a wrong head grouping is not within that: the check can fail
    wrong = dict(weights)
    wrong["model.layers.0.self_attn.k_proj.weight"] = weights["model.layers.0.self_attn.k_proj.weight"][::-1].copy()
    assert np.abs(reference.forward(cfg, wrong, ids)[0] - theirs).max() > 1e-2 * np.abs(theirs).max()


def test_kv_cache_steps_equal_the_full_forward(tiny) -> None:  # noqa: ANN001
    cfg, weights = tiny
    ids = np.array([3, 5, 7, 11, 13, 2, 40, 50])
    full, cache_full = reference.forward(cfg, weights, ids)
    first, cache = reference.forward(cfg, weights, ids[:5])
    rest = []
    for token in ids[5:]:
        logits, cache = reference.forward(cfg, weights, [token], cache)
        rest.append(logits[0])
    assert np.allclose(np.vstack([first, *rest]), full, atol=1e-12)
    assert cache.length == cache_full.length == len(ids)
    assert cache.keys[0].shape == (cfg.kv_heads, len(ids), cfg.head_dim)


def test_greedy_equals_transformers_generate_with_end_of_sequence_suppressed(tiny) -> None:  # noqa: ANN001
    import torch

    cfg, weights = tiny
    prompt = [3, 5, 7, 11]
    plain = LLAMA.reference_greedy(cfg, weights, prompt, 8)
    eos = plain[0]  # suppress the first choice: the continuation must change
    ours = LLAMA.reference_greedy(cfg, weights, prompt, 8, suppress=(eos,))
    assert eos not in ours and ours != plain
    net = LLAMA.torch_module(cfg, weights)
    with torch.no_grad():
        out = net.generate(torch.tensor([prompt]), max_new_tokens=8, min_new_tokens=8, do_sample=False,
                           suppress_tokens=[eos], eos_token_id=None, pad_token_id=0)
    assert out[0, len(prompt):].tolist() == ours


def test_accuracy_figures() -> None:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 6, 11))
    ids = rng.integers(0, 11, (2, 6))
    same = accuracy.compare(logits, logits, ids)
    assert same.top1_agreement == 1.0 and abs(same.kl_mean) < 1e-12 and same.perplexity == same.perplexity_fp32
    # uniform logits: perplexity is the vocabulary size
    uniform = accuracy.compare(np.zeros_like(logits), logits, ids)
    assert uniform.perplexity == pytest.approx(11.0)
    assert uniform.kl_mean > 0 and uniform.top1_agreement < 1.0
    lp = accuracy.next_token_logprob(logits, ids)
    assert np.isnan(lp[:, -1]).all() and np.isfinite(lp[:, :-1]).all()
    assert accuracy.leading_equal(np.array([1, 2, 3, 4]), np.array([1, 2, 9, 4])) == 2
    assert accuracy.leading_equal(np.array([1, 2]), np.array([1, 2])) == 2


def _reply(**decoder) -> dict:  # noqa: ANN003
    doc = {"upload_ms": 10.0, "first_forward_ms": 5.0, "kv_cache_on_device": True,
           "memory": {"weights": 100, "kv_cache": 10, "scratch": 20},
           "generations": [{"ttft_ms": 50.0, "token_ms": [10.0, 20.0, 30.0]},
                           {"ttft_ms": 70.0, "token_ms": [10.0, 10.0, 10.0]}]}
    return {"wall_ms": [110.0, 100.0], "decoder": doc | decoder}


def test_reply_fields_are_checked_and_give_the_speed_figures() -> None:
    fields = DECODER.reply_fields(_reply(), 10)
    figures = timing.speed_figures(16, [PageIterations(fields, (0.0, 110.0), 0)])
    assert figures["ttft_ms"] == 60.0
    assert figures["prefill_tokens_per_s"] == pytest.approx(16 / 0.060)
    assert figures["decode_tokens_per_s"] == pytest.approx(np.median([3 / 0.060, 3 / 0.030]))
    assert figures["token_ms_first"] == 10.0 and figures["token_ms_last"] == 20.0
    assert figures["kv_cache_bytes"] == 10 and figures["kv_cache_on_device"] == "yes"
    bad = [
        _reply(generations=[{"ttft_ms": 50.0, "token_ms": [1.0]}]),  # not one per timed iteration
        _reply(generations=[{"ttft_ms": 5.0, "token_ms": [1.0]}, {"ttft_ms": 5.0, "token_ms": [1.0, 2.0]}]),
        _reply(generations=[{"ttft_ms": -5.0, "token_ms": []}, {"ttft_ms": 5.0, "token_ms": []}]),
        _reply(memory={"weights": "many", "kv_cache": 1, "scratch": 1}),
        {"wall_ms": [1.0]},
    ]
    for payload in bad:
        with pytest.raises(PageDataError):
            DECODER.reply_fields(payload, 10)


def _cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    """The command in this process (the entry script's own exit codes: tests/test_cli.py):
    its exit code and what it wrote on stderr."""
    from fixed_web_platform.cli.main import main

    capsys.readouterr()
    code = main([*args, "--output-dir", "/dev/null/x"])
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:  # noqa: ANN001
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_hf_config(vocab_size=30522, max_position_embeddings=48).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("args, message", [
    (["--new-tokens", "0"], "--new-tokens"),
    (["--prompt-len", "40", "--new-tokens", "16"], "longer than the model's context (48 positions)"),
    (["--eval-len", "4"], "evaluation length must be at least 8"),
])
def test_bad_decoder_input_is_one_line_and_exit_2(tiny_folder: Path, args: list[str], message: str, capsys) -> None:  # noqa: ANN001
    code, err = _cli(capsys, "--model", str(tiny_folder), "--random-weights", *args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err


def test_a_gguf_that_does_not_parse_and_an_unknown_architecture(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00 not really")
    code, err = _cli(capsys, "--model", str(broken))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "GGUF file broken.gguf does not load" in err
    other = tmp_path / "gpt2"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    code, err = _cli(capsys, "--model", str(other), "--random-weights")
    assert code == 2 and "architecture 'gpt2' is not supported" in err, err


def test_webnn_decoder_splits_quantized_passes_into_graphs_under_the_budget() -> None:
    from fixed_web_platform.engines.webnn.decoder import QUANTIZED_PER_GRAPH, segments

    smollm2 = LLAMA.config(tiny_hf_config(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                                          num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3),
                           "smollm2-135m shapes")
    linears = smollm2.linear_layers()
    decode = LLAMA.graph(smollm2, prompt_len=2, eval_len=2, context=4).passes["decode"]
    assert segments(decode, rules.assign(linears, (), 32, 32)) == [[0, 30]]  # float weights: one graph
    split = segments(decode, rules.assign(linears, (), 8, 32))
    assert split[0][0] == 0 and split[-1][1] == 30 and len(split) > 1
    assert all(a[1] == b[0] for a, b in zip(split, split[1:]))  # contiguous, every layer once
    per_layer = sum(layer.k * layer.n for layer in linears[:7])
    head = linears[-1].k * linears[-1].n
    sizes = [(end - start) * per_layer + (head if end == 30 else 0) for start, end in split]
    assert max(sizes) <= QUANTIZED_PER_GRAPH
    # a float head with 8-bit layers: the head does not count against the last graph
    float_head = (rules.PrecisionRule(match="lm_head", bits=32, block_size=32),)
    assert segments(decode, rules.assign(linears, float_head, 8, 32))[-1][0] < split[-1][0]


def test_a_quantized_layer_past_one_graphs_budget_is_held_in_float32() -> None:
    """Gemma 3 270M's tied head at 8 bits (262,144 x 640) crashed Chromium's tab building its graph;
    the WebNN decoder's plan holds it in float32 by name and says so."""
    from test_gemma3 import tiny_gemma_config

    from fixed_web_platform.architectures.gemma3 import GEMMA3
    from fixed_web_platform.engines.webnn.decoder import WebnnDecoder
    from fixed_web_platform.engines.webnn.layers import over_budget

    gemma = GEMMA3.config(tiny_gemma_config(vocab_size=262144, hidden_size=640), "gemma3-270m shapes")
    linears = gemma.linear_layers()
    budget = WebnnDecoder().quantized_per_graph()
    names, note = over_budget(rules.assign(linears, (), 8, 32), budget)
    assert names == ("lm_head",)
    assert note.startswith("1 layer held in float32 (lm_head's 8-bit weights, 167,772,160 elements, pass the "
                           "48,000,000 one WebNN graph may hold"), note
    float_head = (rules.PrecisionRule(match="lm_head", bits=32, block_size=32),)
    assert over_budget(rules.assign(linears, float_head, 8, 32), budget) == ((), "")
    assert over_budget(rules.assign(linears, (), 32, 32), budget) == ((), "")


def test_onnx_runtimes_webnn_graph_past_the_int8_budget_is_refused_in_standard_mode(tiny_folder: Path) -> None:
    """ORT's WebNN graph of a whole model's 8-bit MatMulNBits layers crashed Chromium's tab on
    SmolLM2-135M and Gemma 3 270M: refused before the page by the harness's WebNN budget, unless
    experimental mode asks to try; float32, 4 bits (MatMulNBits4 runs on the CPU) and wasm run."""
    from types import SimpleNamespace

    from fixed_web_platform.engines.ort.decoder import OrtDecoder
    from fixed_web_platform.vocabulary import Platform, PrecisionMode
    from fixed_web_platform.workloads import DecoderWorkload

    tiny = DecoderWorkload.create(str(tiny_folder), random_weights=True, prompt_len=4, new_tokens=2, eval_len=16)
    with pytest.MonkeyPatch.context() as patch:  # the tiny 8-bit layers hold about 1M elements
        patch.setattr("fixed_web_platform.engines.ort.decoder.QUANTIZED_PER_GRAPH", 500_000)

        def refusal(bits: int, platform: Platform = Platform.WEBNN,
                    mode: PrecisionMode = PrecisionMode.STANDARD) -> str:
            return OrtDecoder().refuse(SimpleNamespace(workload=tiny, platform=platform, precision_mode=mode,
                                                       bits=bits, weight_block=32))

        assert ("int8 weight elements (its 8-bit layers: MatMulNBits, or QDQ with int8 activations), past the "
                "500,000") in refusal(8)
        assert refusal(8, mode=PrecisionMode.EXPERIMENTAL) == refusal(8, Platform.WASM) == ""
        assert refusal(32) == refusal(4) == ""


def test_a_split_pass_hands_the_stream_on_and_runs_every_layer_once() -> None:
    """The WebNN lowering of a pass cut into graphs (engines/webnn/lower.py): each graph but the
    first takes the residual stream as its ``hidden`` input, each but the last ends with the cut
    layer's residual add and gives the stream as ``hidden``, and the graphs' linear layers are the
    pass's, each once."""
    from fixed_web_platform.engines.webnn.lower import loop_pass

    cfg = LLAMA.config(tiny_hf_config(num_hidden_layers=3), "tiny")
    decode = LLAMA.graph(cfg, prompt_len=2, eval_len=2, context=4).passes["decode"]
    layers = decode.linears()
    graphs = loop_pass(decode, layers, cache="write", context=4, cuts=[1, 2])
    assert len(graphs) == 3
    for i, ops in enumerate(graphs):
        names = [op["op"] for op in ops]
        assert names[0] == "Positions"  # every graph reads where the step is
        assert (ops[1] == {"op": "Input", "name": "hidden", "value": "x", "dtype": "float32",
                           "shape": [1, cfg.hidden]}) == (i > 0)
        assert (names[-2:] == ["Add", "Output"] and ops[-1]["name"] == "hidden") == (i < 2)
        if i > 0:
            assert next(op for op in ops if op["op"] == "Norm")["residual"] == ""  # added before the cut
    used = [op["layer"] for ops in graphs for op in ops if op["op"] == "Linear"]
    assert sorted(used) == list(range(len(layers)))
    assert graphs[-1][-1] == {"op": "Output", "name": "id", "value": "next_id", "heads": 0, "first": False}
    with pytest.raises(ValueError, match="split only before a layer"):
        loop_pass(decode, layers, cache="write", context=4, cuts=[3])
