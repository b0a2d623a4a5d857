"""The wllama engine without a browser: GGUF files re-written at llama.cpp's formats (a small
synthetic file), the KL lower bound from top-K log-probabilities, how a reply is read (where
llama.cpp held the model, prompts tokenized to other lengths), and what the plan makes of
wllama's formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixed_web_platform.engines.registry import engine_for, read_reply
from fixed_web_platform.engines.wllama import HELD, NO_FORMAT, SHIPPED, gguf_files
from fixed_web_platform.engines.wllama.decoder import buffers
from fixed_web_platform.engines.wllama.prepared import kl_lower_bound
from fixed_web_platform.page_protocol import PageReply
from fixed_web_platform.plan import build_plan
from fixed_web_platform.precision.quantizers import input_moment, quantize
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform
from fixed_web_platform.workloads import DecoderWorkload
from fixed_web_platform.workloads.decoder import accuracy

CPU_LOG = ("load_tensors:          CPU model buffer size =    92.10 MiB\n"
           "llama_kv_cache:        CPU KV buffer size =    11.25 MiB\n"
           "sched_reserve:        CPU compute buffer size =    14.01 MiB")


@pytest.fixture(scope="module")
def small_gguf(tmp_path_factory) -> Path:  # noqa: ANN001
    import gguf

    path = tmp_path_factory.mktemp("gguf") / "small.gguf"
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_block_count(1)
    writer.add_file_type(0)
    writer.add_tensor("blk.0.attn_q.weight", rng.standard_normal((16, 64)).astype(np.float32))
    writer.add_tensor("blk.0.attn_norm.weight", rng.standard_normal(64).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _values(path: Path, name: str) -> np.ndarray:
    import gguf

    tensor = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == name)
    return gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float64)


@pytest.mark.parametrize("fmt, step", [("Q8_0", 1 / 127), ("Q4_0", 1 / 8), ("Q4_1", 1 / 15), ("F16", 1e-3)])
def test_requantize_writes_the_format_and_stays_within_its_step(small_gguf: Path, tmp_path: Path,
                                                                fmt: str, step: float) -> None:
    import gguf

    out = gguf_files.requantize(small_gguf, tmp_path / f"{fmt}.gguf", fmt)
    types = gguf_files.tensor_types(out)
    assert types == {"blk.0.attn_q.weight": fmt, "blk.0.attn_norm.weight": "F32"}  # norms stay float32
    before, after = _values(small_gguf, "blk.0.attn_q.weight"), _values(out, "blk.0.attn_q.weight")
    blocks = before.reshape(16, -1, 32)
    span = np.abs(blocks).max(axis=-1, keepdims=True) * 2  # a block's range bounds its step
    assert np.all(np.abs(after - before).reshape(blocks.shape) <= span * step)
    assert not np.array_equal(after, before) or fmt == "F16"
    assert np.array_equal(_values(out, "blk.0.attn_norm.weight"), _values(small_gguf, "blk.0.attn_norm.weight"))
    field = gguf.GGUFReader(str(out)).fields[gguf.Keys.General.FILE_TYPE]
    assert int(field.contents()) == gguf_files.FILE_TYPES[fmt]


def test_a_file_that_is_not_gguf_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(gguf_files.GgufError, match="bad.gguf does not parse") as err:
        gguf_files.requantize(bad, tmp_path / "out.gguf", "Q8_0")
    assert "\n" not in str(err.value)
    with pytest.raises(gguf_files.GgufError, match="not one of"):
        gguf_files.requantize(bad, tmp_path / "out.gguf", "Q2_K")


def test_file_for_writes_once_and_copies_the_shipped_file(small_gguf: Path, tmp_path: Path) -> None:
    first = gguf_files.file_for(small_gguf, "Q8_0", tmp_path)
    stamp = first.stat().st_mtime_ns
    assert gguf_files.file_for(small_gguf, "Q8_0", tmp_path) == first and first.stat().st_mtime_ns == stamp
    shipped = gguf_files.file_for(small_gguf, SHIPPED, tmp_path)
    assert shipped.read_bytes() == small_gguf.read_bytes()


def test_kl_lower_bound_is_exact_with_the_whole_vocabulary_and_below_it_otherwise() -> None:
    rng = np.random.default_rng(1)
    p = accuracy.log_softmax(rng.standard_normal((3, 50)) * 2)
    q = accuracy.log_softmax(np.log(np.exp(p)) + rng.standard_normal((3, 50)) * 0.5)
    full = (np.exp(p) * (p - q)).sum(axis=-1)
    order = np.argsort(-q, axis=-1)
    whole = kl_lower_bound(p, order, np.take_along_axis(q, order, axis=-1))
    assert np.allclose(whole, full, atol=1e-12)
    top5 = kl_lower_bound(p, order[:, :5], np.take_along_axis(q, order[:, :5], axis=-1))
    assert np.all(top5 <= full + 1e-12) and np.all(top5 > 0)
    assert np.allclose(kl_lower_bound(p, order[:, :5], np.take_along_axis(p, order[:, :5], axis=-1)), 0, atol=1e-12)


def test_buffers_are_read_from_llama_cpp_log_lines() -> None:
    held = buffers(CPU_LOG + "\nload_tensors:       WebGPU model buffer size =    80.00 MiB\nsomething else")
    assert held == {"CPU": {"model": 92.10, "KV": 11.25, "compute": 14.01}, "WebGPU": {"model": 80.0}}


@pytest.fixture(scope="module")
def smollm2() -> DecoderWorkload:
    return DecoderWorkload.create("smollm2-135m", prompt_len=8, new_tokens=4, eval_len=8)


def test_the_plan_has_a_run_per_llama_cpp_format_and_refuses_2_bit(smollm2: DecoderWorkload) -> None:
    plan = build_plan([BrowserName.CHROME], [Platform.WASM], [smollm2], [8, 4, 2], engines=[EngineName.WLLAMA])
    assert [(r.bits, r.weight_format) for r in plan] == [(8, "Q8_0"), (4, "Q4_0"), (4, "Q4_1"), (4, HELD),
                                                         (4, SHIPPED), (2, "")]
    assert [r.refused for r in plan[:5]] == [""] * 5
    assert plan[5].refused == NO_FORMAT[2]
    assert "Q4_0" in plan[1].label


def test_held_files_are_planned_per_quantizer_and_refused_off_q4_1s_block(smollm2: DecoderWorkload) -> None:
    plan = build_plan([BrowserName.CHROME], [Platform.WASM], [smollm2], [4], engines=[EngineName.WLLAMA],
                      weight_quant=["minmax", "gptq-offset"])
    assert [(r.weight_format, r.weight_quant) for r in plan] == [
        ("Q4_0", "minmax"), ("Q4_1", "minmax"), (HELD, "minmax"), (SHIPPED, "minmax"), (HELD, "gptq-offset")]
    assert all(not r.refused for r in plan)
    [odd] = [r for r in build_plan([BrowserName.CHROME], [Platform.WASM], [smollm2], [4], block_size=64,
                                   engines=[EngineName.WLLAMA]) if r.weight_format == HELD]
    assert "blocks of 32" in odd.refused and "blocks of 64" in odd.refused


@pytest.mark.parametrize("quantizer", ["offset", "minmax", "gptq"])
def test_q4_1_blocks_hold_the_codes_and_offsets_are_gguf_s_own_bytes(quantizer: str) -> None:
    import gguf

    rng = np.random.default_rng(1)
    w = (rng.standard_normal((8, 128)) * rng.uniform(0.01, 1, (8, 1))).astype(np.float32)
    x = rng.standard_normal((256, 128))
    codes = quantize(w, 4, 32, quantizer, input_moment(x))
    blocks = gguf_files.q4_1_blocks(codes)
    held = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q4_1)
    assert held.shape == w.shape
    if quantizer == "offset":  # Q4_1's own rule: llama.cpp's bytes exactly
        assert np.array_equal(blocks, gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q4_1))
    # the codes' values, with the scale and offset in float16 (half an ulp of each, times 15 steps)
    step = codes.scale.repeat(32, axis=1)
    assert np.abs(held - codes.dequantize()).max() <= float((step * 2.0 ** -11 * 16).max())
    with pytest.raises(gguf_files.GgufError, match="blocks of 32"):
        gguf_files.q4_1_blocks(quantize(w, 4, 64))


@pytest.mark.budget(60, why="SmolLM2-135M's weights read through transformers (about 15 s)")
def test_offset_codes_of_smollm2_written_for_llama_cpp_are_its_shipped_bytes(smollm2: DecoderWorkload) -> None:
    """SmolLM2's body ships in Q4_1 and offset re-finds that grid (docs/design/weight-quantizers.md):
    the harness's codes, packed and row-ordered for llama.cpp (query and key rows permuted), are the
    shipped tensors byte for byte, which checks the packing, the names and the permutation."""
    from fixed_web_platform.models import source
    from fixed_web_platform.precision.held import hold_weights

    loaded = source.load(source.resolve("smollm2-135m"))
    shipped = {t.name: t for t in gguf_files._reader(gguf_files.model_file("smollm2-135m", False)).tensors}
    for layer, name in [("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("mlp.down_proj", "ffn_down")]:
        codes = hold_weights(loaded.weights[f"model.layers.0.{layer}.weight"], 4, 32, quantizer="offset").codes
        ordered = loaded.architecture.gguf_rows(loaded.config, f"model.layers.0.{layer}", gguf_files.q4_1_blocks(codes))
        assert np.array_equal(ordered, np.asarray(shipped[f"blk.0.{name}.weight"].data)), name


def test_models_that_are_not_gguf_and_rule_sets_are_refused_when_planned(tmp_path: Path) -> None:
    from test_decoder import tiny_hf_config

    tiny_hf_config(vocab_size=30522, hidden_size=64, intermediate_size=128, max_position_embeddings=128,
                   num_attention_heads=4, num_key_value_heads=2).save_pretrained(tmp_path)
    random = DecoderWorkload.create(str(tmp_path), prompt_len=4, new_tokens=2, eval_len=8, random_weights=True)
    mixed = DecoderWorkload.from_options("smollm2-135m", prompt_len=8, new_tokens=4, eval_len=8, mixed_precision=True)
    plan = build_plan([BrowserName.CHROME], [Platform.WASM], [random], [8], engines=[EngineName.WLLAMA])
    assert "runs GGUF files" in plan[0].refused and "--random-weights" in plan[0].refused
    plan = build_plan([BrowserName.CHROME], [Platform.WASM], [mixed], [8], engines=[EngineName.WLLAMA])
    assert "precision rules" in plan[0].refused


def _job(run):  # noqa: ANN001, ANN202
    from types import SimpleNamespace

    from fixed_web_platform.engines.base import EngineJob

    tokens = SimpleNamespace(eval_ids=np.zeros((2, 3), np.int32), prompt=np.zeros(8, np.int32))
    return EngineJob(spec=None, tensors={}, prepared=SimpleNamespace(weight_format="Q8_0", tokens=tokens),  # type: ignore[arg-type]
                     weight_format="gguf Q8_0", weight_dtype="Q8_0x1")


def _reply(log: str, prompt: int = 8, scored: tuple[int, ...] = (1, 2, 3, 1, 2, 3), fallback: str = "") -> PageReply:
    return PageReply(status="ok", compute_dtype="f32", placement=log, fallback=fallback,
                     kind_fields={"decoder": {"engine_tokens": {"prompt": prompt, "scored": list(scored)}}})


def test_a_webgpu_run_held_on_the_cpu_says_it_fell_back(smollm2: DecoderWorkload) -> None:
    [run] = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [smollm2], [8], engines=[EngineName.WLLAMA])
    ran = read_reply(run, _job(run), _reply(CPU_LOG, fallback="the adapter has no shader-f16"))
    assert ran.executed_on == "wasm" and ran.bits == 8 and ran.compute_dtype == "i8dot" and not ran.problem
    assert "CPU backend" in ran.note and "shader-f16" in ran.note
    gpu = read_reply(run, _job(run), _reply("WebGPU model buffer size = 80.00 MiB\nCPU KV buffer size = 1.00 MiB"))
    assert gpu.executed_on == "webgpu" and not gpu.note and gpu.compute_dtype == ""
    assert engine_for(run.engine, Platform.WASM) is not None


def test_prompts_llama_cpp_tokenized_to_other_lengths_make_the_row_invalid(smollm2: DecoderWorkload) -> None:
    [run] = build_plan([BrowserName.CHROME], [Platform.WASM], [smollm2], [8], engines=[EngineName.WLLAMA])
    assert "prompt text" in read_reply(run, _job(run), _reply(CPU_LOG, prompt=9)).problem
    other = _reply(CPU_LOG, scored=(1, 2, 4, 1, 2, 3))
    assert "1 of the 6 scored prefixes" in read_reply(run, _job(run), other).problem
    assert "buffer lines" in read_reply(run, _job(run), _reply("")).problem


def test_a_pair_seen_to_hang_is_refused_when_planned_unless_asked(smollm2: DecoderWorkload, monkeypatch) -> None:  # noqa: ANN001
    def plan():  # noqa: ANN202
        return build_plan([BrowserName.FIREFOX, BrowserName.CHROME], [Platform.WEBGPU], [smollm2], [8],
                          engines=[EngineName.WLLAMA])

    firefox, chrome = plan()
    assert firefox.refused.startswith("not attempted") and "WLLAMA_TRY_HANGS" in firefox.refused
    assert chrome.refused == ""
    monkeypatch.setenv("WLLAMA_TRY_HANGS", "1")
    assert [r.refused for r in plan()] == ["", ""]
