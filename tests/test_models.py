"""Whole models, Python side: the float64 reference vs PyTorch, tokenisation, precision rules,
accuracy figures, model sources and the held bytes; and bad model input at the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import fixed_web_platform.sweep as sweep_module
from fixed_web_platform.architectures.bert import BERT
from fixed_web_platform.architectures.bert.config import BertConfig as EncoderConfig
from fixed_web_platform.cli import main as cli
from fixed_web_platform.models import rules, source
from fixed_web_platform.models.inputs import builtin_texts, read_texts, tokenize
from fixed_web_platform.models.quantized import hold_model
from fixed_web_platform.workloads import EncoderWorkload
from fixed_web_platform.workloads.encoder import accuracy
from fixed_web_platform.workloads.encoder.prepared import (
    embed,
    prepare_model,
    pytorch_reference,
)

MINILM = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def minilm() -> source.LoadedModel:
    return source.load(source.resolve(MINILM))


@pytest.fixture(scope="module")
def minilm_batches():
    return tokenize(source.tokenizer(source.resolve(MINILM)), builtin_texts()[:6], 4, 24)


def test_a_model_is_loaded_once_however_the_call_is_spelt(minilm) -> None:
    # each workload kind spells the call its own way; SmolLM2 was read twice from its GGUF (16 s)
    resolved = source.resolve(MINILM)
    assert source.load(resolved, False, 0) is minilm and source.load(resolved, random_weights=False) is minilm


# --- the reference forward -------------------------------------------------------------------

def test_numpy_reference_matches_pytorch_on_minilm(minilm, minilm_batches) -> None:
    ids, mask, tt = minilm_batches.flat()
    ours = embed(minilm, minilm.weights, ids, mask, tt)
    torch_fp32 = pytorch_reference(minilm, ids, mask, tt)
    assert ours.shape == (6, 384)
    assert np.abs(ours - torch_fp32).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0)


def test_numpy_reference_matches_pytorch_with_random_weights_and_padding() -> None:
    cfg = EncoderConfig(layers=2, hidden=64, heads=4, intermediate=128, vocab=50, max_positions=16,
                        type_vocab=2, eps=1e-12)
    weights = BERT.random_weights(cfg, seed=3, init_range=0.2)
    model = source.LoadedModel(source.ResolvedModel("tiny", None, "test"), BERT, cfg, weights, True, 3)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, size=(3, 10)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0  # padded keys must not change the unpadded positions
    mask[2, 3:] = 0
    tt = np.zeros_like(ids)
    ours = embed(model, weights, ids, mask, tt)
    assert np.abs(ours - pytorch_reference(model, ids, mask, tt)).max() < 1e-5
    # the padding is masked: changing padded token ids changes nothing
    ids2 = ids.copy()
    ids2[1, 6:] = 7
    assert np.abs(embed(model, weights, ids2, mask, tt) - ours).max() < 1e-12


# --- tokenisation ----------------------------------------------------------------------------

def test_tokenize_pads_truncates_and_fills_the_last_batch() -> None:
    tok = source.tokenizer(source.resolve(MINILM))
    texts = ("a short one", "word " * 40, "third text")
    b = tokenize(tok, texts, batch_size=2, seq_len=8)
    assert b.input_ids.shape == (2, 2, 8) and b.input_ids.dtype == np.int32
    assert b.count == 3 and b.passes == 2 and b.truncated == 1
    ids, mask, _ = b.flat()
    assert ids.shape == (3, 8)
    assert ids[0, 0] == tok.cls_token_id and mask[1].all()  # the long text fills every position
    assert mask[0].sum() < 8 and ids[0, mask[0].sum():].tolist() == [tok.pad_token_id] * (8 - mask[0].sum())
    assert b.input_ids[1, 1].tolist() == b.input_ids[0, 0].tolist()  # the filler is the first text


def test_builtin_texts_are_a_few_dozen() -> None:
    texts = builtin_texts()
    assert 30 <= len(texts) <= 60 and len(set(texts)) == len(texts)


@pytest.mark.parametrize(("content", "message"), [
    (b"", "has no texts"), (b"# only a comment\n\n", "has no texts"), (b"\x00\x01", "not text"),
    (b"\xff\xfe bad", "not UTF-8"),
])
def test_unusable_inputs_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        read_texts(path)


# --- precision rules -------------------------------------------------------------------------

LAYERS = EncoderConfig(6, 384, 12, 1536, 30522, 512, 2, 1e-12).linear_layers()


def test_first_matching_rule_wins_and_the_rest_take_bits() -> None:
    rs = rules.parse_rules([{"match": "encoder.layer.0.*", "bits": 2},
                            {"match": "re:encoder\\.layer\\.[0-9]+\\.attention\\..*", "bits": 8, "block_size": 64},
                            {"match": "*.intermediate.dense", "bits": 16}], "test")
    plan = rules.assign(LAYERS, rs, 4, 32)
    by = {p.layer.name: p for p in plan}
    assert by["encoder.layer.0.attention.self.query"].bits == 2  # first rule, though the second matches too
    assert by["encoder.layer.1.attention.self.query"].bits == 8
    assert by["encoder.layer.1.attention.self.query"].block_size == 64
    assert by["encoder.layer.3.intermediate.dense"].bits == 16
    assert by["encoder.layer.3.output.dense"].bits == 4 and by["encoder.layer.3.output.dense"].rule == "--bits"
    assert rules.summary(plan) == "mixed:16x5,8x20,4x5,2x6"


def test_mixed_precision_rules_keep_ffn_up_and_values_at_8_bits() -> None:
    plan = rules.assign(LAYERS, rules.mixed_precision_rules(), 4, 32)
    assert rules.summary(plan) == "mixed:8x12,4x24"
    kept = {p.layer.name.split(".", 3)[-1] for p in plan if p.bits == 8}
    assert kept == {"intermediate.dense", "attention.self.value"}
    assert rules.summary(rules.assign(LAYERS, (), 4, 32)) == "uniform:4"


def test_a_rule_matching_nothing_is_an_error() -> None:
    rs = rules.parse_rules([{"match": "encoder.layer.*.attention.*", "bits": 8},
                            {"match": "decoder.*", "bits": 4}], "test")
    with pytest.raises(ValueError, match="'decoder.\\*' matches no layer"):
        rules.assign(LAYERS, rs, 4, 32)


@pytest.mark.parametrize(("text", "suffix", "message"), [
    ("[{\"match\": ", ".json", "does not parse"),
    ("rules: [", ".yaml", "does not parse"),
    ("[]", ".json", "non-empty list"),
    ("[{\"match\": \"*\", \"bits\": 3}]", ".json", "bits 3"),
    ("[{\"match\": \"re:(\", \"bits\": 4}]", ".json", "bad regular expression"),
    ("[{\"match\": \"*\", \"bits\": 4, \"colour\": 1}]", ".json", "unknown keys colour"),
    ("[{\"bits\": 4}]", ".json", "'match' and 'bits'"),
])
def test_bad_rules_files(tmp_path: Path, text: str, suffix: str, message: str) -> None:
    path = tmp_path / f"rules{suffix}"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        rules.load_rules(path)


def test_yaml_rules_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_text("- match: '*.output.dense'\n  bits: 2\n")
    assert rules.load_rules(path) == (rules.PrecisionRule("*.output.dense", 2, 32),)


# --- accuracy figures ------------------------------------------------------------------------

def test_accuracy_of_the_reference_itself_is_perfect() -> None:
    ref = np.random.default_rng(1).standard_normal((8, 16))
    acc = accuracy.compare(ref * 3.0, ref)  # scale does not matter: cosine
    assert acc.cosine_min == pytest.approx(1.0) and acc.spearman == pytest.approx(1.0)
    assert acc.top1_agreement == 1.0


def test_accuracy_sees_swapped_embeddings() -> None:
    ref = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    out = ref[[0, 2, 1, 3]]  # texts 1 and 2 come out as each other
    acc = accuracy.compare(out, ref)
    assert acc.cosine_min < 0.2
    assert acc.top1_agreement == 0.0  # every nearest neighbour changed
    assert acc.spearman < 0


# --- sources and held bytes ------------------------------------------------------------------

def test_unknown_model_names_what_was_searched_and_what_exists() -> None:
    with pytest.raises(source.ModelError) as err:
        source.resolve("no-such-model")
    text = str(err.value)
    assert "Hugging Face cache" in text and MINILM in text and "\n" not in text


def test_folder_problems(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match="'gpt2' is not supported"):
        EncoderWorkload.create(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 64,
                                                      "num_attention_heads": 4, "num_hidden_layers": 1,
                                                      "intermediate_size": 128}))
    with pytest.raises(ValueError, match="has no weights"):
        EncoderWorkload.create(str(tmp_path))


def test_bert_base_random_weights_needs_no_files() -> None:
    w = EncoderWorkload.create("bert-base-uncased", random_weights=True, batch_size=1, seq_len=8,
                             texts=("hello world",))
    cfg = w.config()
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.intermediate) == (12, 768, 12, 3072)
    assert 105e6 < cfg.parameters < 115e6
    assert w.row_fields(4, 32)["weights"] == "random"
    assert w.row_fields(4, 32)["precision_plan"] == "uniform:4"


def test_held_bytes_shrink_with_bits_and_dequantize_to_what_the_reference_uses(minilm) -> None:
    sizes = {}
    for bits in (32, 16, 8, 4, 2):
        plan = tuple(rules.assign(minilm.config.linear_layers(), (), bits, 32))
        held = hold_model(minilm, plan)
        sizes[bits] = held.weight_bytes
        layer = held.layers[0]
        assert layer.name == "encoder.layer.0.attention.self.query"
        w = held.exec_weights()[f"{layer.name}.weight"]
        err = np.abs(w - minilm.weights[f"{layer.name}.weight"]).max()
        assert (err == 0) if bits == 32 else (0 < err < {16: 1e-3, 8: 0.02, 4: 0.2, 2: 1.0}[bits])
    assert sizes[32] > sizes[16] > sizes[8] > sizes[4] > sizes[2]
    assert sizes[32] == hold_model(minilm, tuple(rules.assign(minilm.config.linear_layers(), (), 32, 32))).weight_bytes_f32


def test_prepared_model_accuracy_is_ordered_by_bits() -> None:
    """Fake-quantised in Python (no browser): what quantization costs, by bits."""
    w = EncoderWorkload.create(MINILM, batch_size=8, seq_len=32)
    cos = {}
    for bits in (32, 8, 4, 2):
        p = prepare_model(w, bits, 32, 0)
        cos[bits] = accuracy.compare(p.ref_dequantized, p.ref_float).cosine_mean
        assert p.output_shape == (40, 384) and p.judged({"embeddings": np.zeros((40, 384))}).shape == (40, 384)
    assert cos[32] > 0.99999 > cos[8] > 0.999 and cos[8] > cos[4] > cos[2]


def test_model_layer_shapes_must_divide_the_block(minilm) -> None:
    w = EncoderWorkload.create(MINILM, batch_size=1, seq_len=8, texts=("x",))
    with pytest.raises(ValueError, match="block size 100 must be a multiple of 8"):
        w.validate(4, 100)


def test_model_workload_round_trips_through_the_plan_file() -> None:
    w = EncoderWorkload.create(MINILM, batch_size=2, seq_len=16, texts=("a", "b"),
                             rules=rules.mixed_precision_rules(), rules_name="mixed-precision")
    assert EncoderWorkload.from_json(json.loads(json.dumps(w.to_json()))) == w


def test_rules_file_that_does_not_parse_is_exit_2(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sweep_module, "execute", lambda *a, **k: pytest.fail("sweep started"))
    bad = tmp_path / "rules.yaml"
    bad.write_text("- match: [unclosed\n")
    assert cli.main(["--model", MINILM, "--precision-rules", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "does not parse" in err[0]
