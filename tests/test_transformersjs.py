"""transformers.js's model folders as the harness makes them (engines/transformersjs/folders.py)
and its runs as planned: each dtype's file under transformers.js's name holds what the name
promises, the fp32 graph is the architecture's pass (PyTorch's hidden states), and --bits /
--dtype pick the dtypes as its users name them."""

from __future__ import annotations

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
