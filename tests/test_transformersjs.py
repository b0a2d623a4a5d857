"""transformers.js's model folders as the harness makes them (engines/transformersjs/folders.py)
and its runs as planned: each dtype's file under transformers.js's name holds what the name
promises, the fp32 graph is the architecture's pass (PyTorch's hidden states), and --bits /
--dtype pick the dtypes as its users name them."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import numpy as np
import pytest

from fixed_web_platform.engines.transformersjs import exports, folders
from fixed_web_platform.formats import onnx_inventory
from fixed_web_platform.models import source
from fixed_web_platform.plan import build_plan
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform
from fixed_web_platform.workloads import EncoderWorkload


def tiny_bert(folder: Path) -> Path:
    """A random-weight BERT of two layers with MiniLM's tokenizer (its weights seeded by the run)."""
    from transformers import BertConfig

    BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
               max_position_embeddings=64).save_pretrained(folder)
    minilm = source.resolve("all-MiniLM-L6-v2").folder
    assert minilm is not None
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (minilm / name).is_file():
            shutil.copy(minilm / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> EncoderWorkload:
    return EncoderWorkload.create(str(tiny_bert(tmp_path_factory.mktemp("tiny-bert"))), batch_size=2, seq_len=8,
                                  random_weights=True)


HELD = {  # dtype -> what its weight matmuls hold, and a node kind its file must have
    "fp16": ("float16", "MatMul/float16"),
    "q8": ("int8", "DynamicQuantizeLinear"),
    "int8": ("int8", "MatMulInteger/int8"),
    "uint8": ("uint8", "MatMulInteger/uint8"),
    "q4": ("int4", "MatMulNBits/int4"),
    "q4f16": ("int4", "MatMulNBits/int4"),
    "bnb4": ("nf4", "MatMulBnb4/nf4"),
}


def test_a_made_folder_is_in_transformers_js_layout_and_each_dtype_holds_its_name(tiny: EncoderWorkload) -> None:
    import onnxruntime as ort

    loaded = source.load(source.resolve(tiny.model, True), True, 0)
    folder = folders.made_folder(loaded, "encoder")
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx"} <= set(folder.files)
    assert folder.lacks("q4") == ["onnx/model_q4.onnx"]
    # the fp32 graph is the architecture's pass: PyTorch's last hidden state, as optimum exports it
    ids = np.array([[101, 2023, 2003, 102, 0, 0], [101, 7592, 2088, 999, 1012, 102]], np.int64)
    mask = (ids != 0).astype(np.int64)
    session = ort.InferenceSession(str(folder.files["onnx/model.onnx"]), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == list(exports.ENCODER_INPUTS)
    (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    import torch

    with torch.no_grad():
        want = loaded.module()(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).last_hidden_state
    assert hidden.shape == (2, 6, 32)
    np.testing.assert_allclose(hidden, want.numpy(), atol=2e-5)
    for dtype, (held, kind) in HELD.items():
        made = folders.with_dtype(folder, dtype)
        name = f"onnx/model{folders.DTYPE_SUFFIX[dtype]}.onnx"
        assert not made.lacks(dtype) and set(made.for_dtype(dtype)) == set(folder.support_files()) | {name}
        inventory = onnx_inventory.read(made.files[name])
        assert inventory.matmul_precision() == held, (dtype, inventory.text())
        assert kind in inventory.text(), (dtype, inventory.text())
        assert onnx_inventory.promise(name, inventory) == "", dtype
    with pytest.raises(folders.FolderError, match="q3.*fp32, fp16, q8"):
        folders.with_dtype(folder, "q3")


def test_bits_pick_transformers_js_dtypes_and_dtype_keeps_those_it_names(tiny: EncoderWorkload) -> None:
    def planned(bits: list[int], dtypes: tuple[str, ...] = ()) -> dict[str, str]:
        runs = build_plan([BrowserName.CHROME], [Platform.WASM], [tiny], bits, engines=[EngineName.TRANSFORMERSJS],
                          dtypes=dtypes)
        return {f"{r.bits}:{r.weight_format}": r.refused for r in runs}

    assert planned([32, 16, 8, 4]) == {k: "" for k in ("32:fp32", "16:fp16", "8:q8", "8:int8", "8:uint8", "4:q4",
                                                         "4:q4f16", "4:bnb4")}
    assert planned([32, 8, 4], ("q4", "fp32", "q8")) == {"32:fp32": "", "8:q8": "", "4:q4": ""}
    two = planned([2])
    assert list(two) == ["2:"] and "no dtype at 2 bits" in two["2:"] and "q4f16 4" in two["2:"]
    int8_acts = build_plan([BrowserName.CHROME], [Platform.WASM], [tiny], [8], act_bits=[8],
                           engines=[EngineName.TRANSFORMERSJS])
    assert int8_acts and all("8-bit activations" in r.refused for r in int8_acts if r.act_bits == 8)


def test_whispers_merged_decoder_makes_the_cross_keys_once_and_steps_as_pytorch(tmp_path_factory) -> None:  # noqa: ANN001
    """encoder_model + decoder_model_merged as optimum's: the first step (use_cache_branch false)
    makes every layer's cross keys and values from encoder_hidden_states, a later step takes them
    from the past; both steps' logits are PyTorch's. The folder pins the harness's decoding rule."""
    import json

    import onnxruntime as ort
    import torch
    from speech_models import tiny_whisper
    from transformers.modeling_outputs import BaseModelOutput

    model = source.load(source.resolve(str(tiny_whisper(tmp_path_factory.mktemp("tiny-whisper"))), True), True, 0)
    cfg = model.config
    folder = folders.made_folder(model, "speech")
    assert {"onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx", "generation_config.json",
            "preprocessor_config.json"} <= set(folder.files)
    generation = json.loads(folder.files["generation_config.json"].read_text())
    assert generation["decoder_start_token_id"] == cfg.prompt[0]
    assert generation["no_timestamps_token_id"] == cfg.prompt[-1]
    assert generation["suppress_tokens"][0] == cfg.timestamp_begin
    assert generation["begin_suppress_tokens"] == [220, cfg.eot]
    assert json.loads(folder.files["tokenizer_config.json"].read_text())["tokenizer_class"] == "WhisperTokenizer"
    merged = onnx_inventory.read(folder.files["onnx/decoder_model_merged.onnx"])  # the If's projections counted
    assert merged.kinds()["MatMul/float32"] == sum(1 for layer in cfg.linear_layers() if ".decoder." in layer.name) + 1
    encoder, decoder = (ort.InferenceSession(str(folder.files[f"onnx/{g}.onnx"])) for g in ("encoder_model",
                                                                                             "decoder_model_merged"))
    hidden = encoder.run(None, {"input_features": np.random.default_rng(0).standard_normal(
        (1, cfg.mels, cfg.frames)).astype(np.float32)})[0]
    names = exports.speech_names(cfg.decoder_layers)
    empty = np.zeros((1, cfg.heads, 0, cfg.head_dim), np.float32)
    net = model.module()

    def pytorch(ids: list[int]) -> np.ndarray:
        with torch.no_grad():
            return net(encoder_outputs=BaseModelOutput(last_hidden_state=torch.from_numpy(hidden)),
                       decoder_input_ids=torch.tensor([ids])).logits[0, -1].numpy()

    outputs = [o.name for o in decoder.get_outputs()]
    first = dict(zip(outputs, decoder.run(None, {
        "input_ids": np.array([list(cfg.prompt)], np.int64), "encoder_hidden_states": hidden,
        "use_cache_branch": np.array([False])} | {n: empty for n in names["past"] + names["past_cross"]})))
    np.testing.assert_allclose(first["logits"][0, -1], pytorch(list(cfg.prompt)), atol=1e-5)
    token = int(np.argmax(first["logits"][0, -1]))
    past = {p: first[p.replace("past_key_values", "present")] for p in names["past"] + names["past_cross"]}
    later = decoder.run(["logits"], {"input_ids": np.array([[token]], np.int64), "encoder_hidden_states": hidden,
                                     "use_cache_branch": np.array([True])} | past)
    np.testing.assert_allclose(later[0][0, -1], pytorch([*cfg.prompt, token]), atol=1e-5)


def users_folder(made: folders.ModelFolder, out: Path, dtypes: tuple[str, ...]) -> Path:
    """A user's transformers.js folder without weights: ``made``'s config and tokenizer files and
    the graphs of ``dtypes``."""
    made = functools.reduce(folders.with_dtype, dtypes, made)
    keep = {f for d in dtypes for f in made.dtype_files(d)} | set(made.support_files())
    for name in keep:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(made.files[name], out / name)
    return out


def test_a_users_folder_runs_the_files_it_holds_judged_against_its_own_fp32_graph(tiny: EncoderWorkload,
                                                                                   tmp_path: Path) -> None:
    """A folder without weights (seed 1's, the run's seed 0): its rows are its files (a dtype it
    lacks names the file; engines that need weights refuse), and the float reference is its fp32
    graph: PyTorch's on the folder's own weights, not the seeded ones that only give shapes."""
    from fixed_web_platform.cli.run import folder_dtypes
    from fixed_web_platform.engines.transformersjs import encoder
    from fixed_web_platform.plan import default_engines
    from fixed_web_platform.workloads.encoder.prepared import prepare_model

    made = folders.made_folder(source.load(source.resolve(tiny.model, True), True, 1), "encoder")
    users = EncoderWorkload.create(str(users_folder(made, tmp_path / "users", ("fp32", "q8"))), batch_size=2,
                                   seq_len=8)
    assert users.weights == source.ONNX_WEIGHTS
    assert default_engines([users]) == [EngineName.TRANSFORMERSJS] and folder_dtypes([users]) == ("fp32", "q8")
    runs = build_plan([BrowserName.CHROME], [Platform.WASM], [users], [32, 8, 4],
                      engines=[EngineName.TRANSFORMERSJS, EngineName.ORT], dtypes=("fp32", "q8", "q4"))
    refused = {(str(r.engine), r.weight_format or str(r.bits)): r.refused for r in runs}
    assert refused["transformersjs", "fp32"] == refused["transformersjs", "q8"] == ""
    assert refused["transformersjs", "q4"].startswith("the folder has no onnx/model_q4.onnx (it holds fp32, q8)")
    assert all("holds no weights" in refused["ort", b] for b in ("32", "8", "4"))
    prepared, folder = encoder.prepare(users, "q8", 0)
    assert folder.made_by.startswith("the user's folder") and list(prepared.files) == ["onnx/model_quantized.onnx"]
    own = prepare_model(tiny, 32, 32, 1).ref_float  # PyTorch on the folder's weights
    seeded = prepare_model(tiny, 32, 32, 0).ref_float
    assert np.abs(prepared.ref_float - own).max() < 1e-4 < np.abs(prepared.ref_float - seeded).max()


def test_a_folders_external_data_chunks_go_with_their_graph(tmp_path: Path) -> None:
    """transformers.js's names for a big graph's weights (onnx/model.onnx_data, ..._data_1): served
    with the graph's dtype, counted for its use_external_data_format option; others are not served."""
    from fixed_web_platform.formats import transformersjs_folder as tf

    (tmp_path / "onnx").mkdir()
    (tmp_path / "config.json").write_text("{}")
    for name in ("model.onnx", "model.onnx_data", "model.onnx_data_1", "model_q4.onnx", "model_q4.onnx_data_2",
                 "other.onnx_data"):
        (tmp_path / "onnx" / name).write_bytes(b"")
    folder = tf.read(tmp_path, "encoder")
    assert folder.data_chunks("fp32") == {"model.onnx": 2}
    assert folder.data_chunks("q4") == {}  # a chunk 2 without 0 and 1 is no chunk series
    assert [f for f in folder.for_dtype("fp32") if f.startswith("onnx/")] == [
        "onnx/model.onnx", "onnx/model.onnx_data", "onnx/model.onnx_data_1"]
    assert "onnx/other.onnx_data" not in folder.files


def test_a_users_decoder_folder_generates_its_reference_greedily_on_its_own_graph(tmp_path: Path) -> None:
    """Without weights a decoder's greedy ids and teacher-forced logits come from its fp32 graph
    (a growing cache on onnxruntime's CPU): PyTorch's on the folder's own weights."""
    from test_decoder import tiny_hf_config

    from fixed_web_platform.engines.transformersjs import decoder
    from fixed_web_platform.workloads import DecoderWorkload
    from fixed_web_platform.workloads.decoder.prepared import prepare_decoder

    tiny_hf_config(vocab_size=30522, hidden_size=64, intermediate_size=128, max_position_embeddings=128,
                   num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False).save_pretrained(
        tmp_path / "llama")  # untied: a random head does not echo the last token
    shutil.copy(source.resolve("all-MiniLM-L6-v2").folder / "tokenizer.json", tmp_path / "llama")
    seeded = DecoderWorkload.create(str(tmp_path / "llama"), prompt_len=12, new_tokens=5, eval_len=16,
                                    random_weights=True)
    own = prepare_decoder(seeded, 32, 32, 1)
    made = folders.made_folder(own.held.model, "decoder")
    users = DecoderWorkload.create(str(users_folder(made, tmp_path / "users", ("fp32",))), prompt_len=12,
                                   new_tokens=5, eval_len=16)
    prepared, _ = decoder.prepare(users, "fp32", 0)
    assert np.array_equal(prepared.base.generated_fp32, own.generated_fp32) and len(set(own.generated_fp32)) > 1
    other = prepare_decoder(seeded, 32, 32, 0).ref_float  # the seeded weights that gave only shapes
    assert np.abs(prepared.ref_float - own.ref_float).max() < 1e-3 < np.abs(prepared.ref_float - other).max()
    # gptq's held q4 file, fit to the calibration texts joined into one sequence from position 0
    held, folder = decoder.prepare(users, "held", 0, "gptq")
    assert held.dtype == "q4" and "MatMulNBits/int4" in held.inventory.text() and folder.made_by.endswith("gptq quantizer")
    assert np.isfinite(held.ref_dequantized).all() and held.promise() == ""


@pytest.mark.parametrize("folder, error", [
    ({"onnx/model.onnx"}, "has no config.json, which transformers.js loads first"),
    ({"config.json", "tokenizer.json", "onnx/weird.onnx"}, "onnx/ holds no file transformers.js would load"),
    ({"config.json", "tokenizer.json", "onnx/model_quantized.onnx"}, "holds no weights and no onnx/model.onnx"),
])
def test_a_folder_transformers_js_would_not_load_is_one_line_before_any_browser(
        tiny: EncoderWorkload, tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: set[str],
        error: str) -> None:
    from fixed_web_platform.cli import main as cli

    made = folders.with_dtype(folders.made_folder(source.load(source.resolve(tiny.model, True), True, 0), "encoder"),
                              "q8")
    for name in folder:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(made.files[name if name != "onnx/weird.onnx" else "onnx/model.onnx"], tmp_path / name)
    assert cli.main(["--model", str(tmp_path), "--browser", "chrome", "--platform", "wasm"]) == 2
    err = capsys.readouterr().err
    assert error in err and err.count("\n") == 1


def test_the_held_variant_is_the_harness_quantizers_codes_as_the_folders_q4_file(tiny: EncoderWorkload) -> None:
    """--weight-quant on transformers.js: one held run per quantizer at 4 bits, its graph the fp32
    one with the quantizer's codes as MatMulNBits under the name the library loads 4-bit files by
    (gptq fit to the calibration texts); float zero points only on wasm."""
    from fixed_web_platform.engines.registry import engine_for
    from fixed_web_platform.engines.transformersjs import encoder

    runs = build_plan([BrowserName.CHROME], [Platform.WASM, Platform.WEBGPU], [tiny], [4],
                      engines=[EngineName.TRANSFORMERSJS], weight_quant=["minmax", "offset", "gptq"])
    assert [r.weight_format for r in runs if r.platform is Platform.WASM and r.quantized_by in ("", "minmax")] == [
        "q4", "q4f16", "bnb4", "held"]
    held = {(str(r.platform), r.quantized_by): r for r in runs if r.weight_format == "held"}
    assert len(held) == 6 and not held["wasm", "offset"].refused and not held["webgpu", "gptq"].refused
    assert held["webgpu", "offset"].refused.startswith("weights made by the offset quantizer (a float zero point")
    engine = engine_for(EngineName.TRANSFORMERSJS, Platform.WEBGPU)
    assert engine.page_options(held["webgpu", "gptq"])["dtype"] == "q4"  # the library loads onnx/model_q4.onnx
    prepared, folder = encoder.prepare(tiny, "held", 0, "gptq")
    own, _ = encoder.prepare(tiny, "q4", 0)
    assert prepared.dtype == "q4" and list(prepared.files) == ["onnx/model_q4.onnx"]
    assert prepared.files["onnx/model_q4.onnx"] != own.files["onnx/model_q4.onnx"]  # not the library's own q4
    assert "MatMulNBits/int4" in prepared.inventory.text() and folder.made_by.endswith("harness's gptq quantizer")
    assert prepared.promise() == ""  # a q4 file holding 4-bit MatMulNBits: what its name promises


def test_sensitivity_of_a_folder_without_weights_probes_its_float_graph_as_an_onnx_file(
        tiny: EncoderWorkload, tmp_path: Path) -> None:
    """sensitivity --model FOLDER (no weights): onnx/model.onnx probed MatMul by MatMul on ORT, fed
    the first batch of texts and calibrated on the calibration texts, tokenized by the folder."""
    from fixed_web_platform.cli.sensitivity import build_parser, plan_probes
    from fixed_web_platform.models import calibration

    made = folders.made_folder(source.load(source.resolve(tiny.model, True), True, 1), "encoder")
    users = users_folder(made, tmp_path / "users", ("fp32",))
    args = build_parser().parse_args(["--model", str(users), "--browser", "chrome", "--platform", "wasm",
                                      "--bits", "4", "--batch-size", "2", "--seq-len", "8"])
    plan, _ = plan_probes(args)
    assert {r.workload.kind for r in plan} == {"onnx"} and {str(r.engine) for r in plan} == {"ort"}
    assert len(plan) == 1 + 12  # the baseline and the 12 MatMuls of two BERT layers
    base = plan[0].workload
    assert base.file == users / "onnx" / "model.onnx" and base.feeds().arrays["input_ids"].shape == (2, 8)
    fit = base.calibration_feeds().arrays["input_ids"]
    assert len(fit) == len(calibration.builtin_calibration_texts()) and fit.shape[1] == 8
