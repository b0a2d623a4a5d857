"""Layer sensitivity and the plan search on a small synthetic encoder whose sensitivities are
planted: one layer's weights carry an outlier in every quantization block (low bits wipe out the
rest of its block), one layer is almost zero (nothing to lose). No browser: the predictions
(numpy float64 forward vs PyTorch fp32) and the search."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fixed_web_platform.architectures.bert import BERT
from fixed_web_platform.architectures.bert.config import BertConfig as EncoderConfig
from fixed_web_platform.cli import main as cli
from fixed_web_platform.models import source
from fixed_web_platform.workloads.encoder import EncoderWorkload, sensitivity
from fixed_web_platform.workloads.encoder.plan_search import (
    Budget,
    parse_budget,
    search,
    workload_predictor,
)

FRAGILE = "encoder.layer.1.output.dense"
ROBUST = "encoder.layer.0.attention.self.key"
CFG = EncoderConfig(layers=2, hidden=64, heads=4, intermediate=128, vocab=30522, max_positions=64,
                    type_vocab=2, eps=1e-12)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face BERT folder: config, safetensors weights, MiniLM's tokenizer files."""
    from safetensors.numpy import save_file
    from transformers import BertConfig

    folder = tmp_path_factory.mktemp("tiny-bert")
    BertConfig(vocab_size=CFG.vocab, hidden_size=CFG.hidden, num_hidden_layers=CFG.layers,
               num_attention_heads=CFG.heads, intermediate_size=CFG.intermediate,
               max_position_embeddings=CFG.max_positions, type_vocab_size=2).save_pretrained(folder)
    weights = BERT.random_weights(CFG, seed=7, init_range=0.08)
    fragile = weights[f"{FRAGILE}.weight"]
    fragile *= 4  # it carries much of the signal...
    fragile[:, ::32] = 12.0  # ...and an outlier in every block of 32 along K
    weights[f"{ROBUST}.weight"] *= 1e-3
    save_file(weights, str(folder / "model.safetensors"))
    minilm = source.resolve("all-MiniLM-L6-v2").folder
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (minilm / name).is_file():
            shutil.copy(minilm / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> EncoderWorkload:
    return EncoderWorkload.from_options(str(tiny_dir), batch_size=4, seq_len=16)


def test_probes_cover_every_layer_once_per_grouping() -> None:
    names = [layer.name for layer in CFG.linear_layers()]
    for grouping, count in (("layer", 12), ("kind", 6), ("block", 4)):
        probes = sensitivity.probes(BERT, CFG, grouping)
        assert len(probes) == count
        covered = [n for p in probes for n in p.layers]
        assert sorted(covered) == sorted(names)
        for p in probes:  # each probe's rule selects exactly its layers
            rule = sensitivity.probe_rules(p, 4, 32)[0]
            assert [n for n in names if rule.matches(n)] == list(p.layers)
    # 'output.dense' of the FFN is not the attention's output.dense
    down = next(p for p in sensitivity.probes(BERT, CFG, "kind") if p.name == "all FFN down (output)")
    assert down.layers == ("encoder.layer.0.output.dense", "encoder.layer.1.output.dense")
    with pytest.raises(ValueError, match="--group"):
        sensitivity.probes(BERT, CFG, "head")


def test_predicted_sensitivity_finds_the_planted_layers(tiny: EncoderWorkload) -> None:
    drops = {}
    base = sensitivity.figures(sensitivity.predicted(
        sensitivity.probe_workload(tiny, None, None, 32), 32, 32, 0)[0])
    for probe in sensitivity.probes(tiny.architecture(), tiny.config(), "layer"):
        acc, _ = sensitivity.predicted(sensitivity.probe_workload(tiny, probe, 2, 32), 32, 32, 0)
        drops[probe.name] = base["cosine_mean"] - acc.cosine_mean
    ranked = sorted(drops, key=drops.get, reverse=True)
    assert ranked[0] == FRAGILE
    assert drops[FRAGILE] > 2 * sorted(drops.values())[-2]  # clearly apart
    assert ranked[-1] == ROBUST or drops[ROBUST] < 1e-4


def test_plan_search_keeps_the_fragile_layer_and_lowers_the_rest(tiny: EncoderWorkload) -> None:
    probes = sensitivity.probes(tiny.architecture(), tiny.config(), "layer")
    predict = workload_predictor(tiny, 32, 0)
    drops: dict[int, dict[str, float]] = {}
    base = predict(())["cosine_mean"]
    for bits in (4, 2):
        drops[bits] = {}
        for p in probes:
            rules = sensitivity.probe_rules(p, bits, 32)
            drops[bits][p.name] = base - predict(rules)["cosine_mean"]
    ranking = {b: sorted(probes, key=lambda p: drops[b][p.name]) for b in drops}
    budget = Budget("cosine_mean", 0.99)
    found = search(ranking, budget, predict, baseline_bits=32, block_size=32)
    moved = {p.name: b for p, b in found.assignment}
    assert FRAGILE not in moved  # its outliers cost too much even at 4-bit
    assert len(moved) >= 8 and moved.get(ROBUST) == 2
    assert found.predicted["cosine_mean"] >= 0.99
    # every check of the search is on the record, and the accepted plan is the best one tried
    assert found.checks and all(c.met == (c.value >= 0.99) for c in found.checks)
    # the rules reproduce the plan exactly (predicted again from the rules file's content)
    layers = [layer.name for layer in tiny.config().linear_layers()]
    rules = found.rules(layers)
    assert rules[-1].match == "*" and rules[-1].bits == 32  # the fragile layer stays at the baseline
    again = predict(rules)
    assert again["cosine_mean"] == pytest.approx(found.predicted["cosine_mean"], abs=1e-12)
    doc = found.rules_json(layers)
    assert json.loads(json.dumps(doc))["rules"][0]["bits"] in (2, 4)
    # a budget the baseline cannot meet is refused
    with pytest.raises(ValueError, match="baseline"):
        search(ranking, Budget("cosine_mean", 1.0), lambda _r: {"cosine_mean": 0.999},
               baseline_bits=32, block_size=32)


def test_plan_search_keeps_the_cheaper_uniform_plan_when_lowering_to_2_bits_first_spends_the_budget() -> None:
    """The greedy from 2 bits moves the one cheap-at-2 probe, then only two fit at 4 (42 bytes);
    from 4 bits all four fit (16 bytes): the search keeps the plan with fewer bytes (MiniLM
    gptq-offset, where uniform 4-bit met the budget at fewer MiB than the 2/4/8 plan found)."""
    probes = [sensitivity.Probe(name, name, (name,)) for name in "abcd"]
    cost = {2: {"a": 0.005, "b": 0.02, "c": 0.02, "d": 0.02}, 4: dict.fromkeys("abcd", 0.0024)}

    def predict(rules: tuple) -> dict[str, float | None]:
        bits = {r.match: r.bits for r in rules}
        return {"cosine_mean": 1 - sum(cost[b][p] for p, b in bits.items()),
                "weight_bytes": float(sum(bits.get(p.name, 32) for p in probes))}

    found = search({2: probes, 4: probes}, Budget("cosine_mean", 0.99), predict, baseline_bits=32, block_size=32)
    assert {p.name: b for p, b in found.assignment} == dict.fromkeys("abcd", 4)
    assert found.predicted["weight_bytes"] == 16
    from_2 = [c for c in found.checks if c.floor == 2 and c.met]
    assert max(c.moved for c in from_2 if c.bits == 4) == 2  # the pass from 2 bits stopped short
    assert {c.floor for c in found.checks} == {2, 4}


def test_probes_and_predictions_hold_the_quantizer_asked_for(tiny_dir: Path, tiny: EncoderWorkload) -> None:
    """--weight-quant offset: every probe run holds offset's codes, and the plan search predicts with
    them (the fragile layer's outliers cost less on a float minimum per block than on minmax's grid)."""
    from fixed_web_platform.cli.sensitivity import build_parser, plan_probes

    runs, _ = plan_probes(build_parser().parse_args(["--model", str(tiny_dir), "--bits", "4", "--weight-quant", "offset"]))
    assert {r.weight_quant for r in runs if r.bits < 32 or r.workload.rules} == {"offset"}
    fragile = next(p for p in sensitivity.probes(tiny.architecture(), tiny.config(), "layer") if p.name == FRAGILE)
    rules = sensitivity.probe_rules(fragile, 4, 32)
    minmax, offset = (workload_predictor(tiny, 32, 0, q)(rules)["cosine_mean"] for q in ("minmax", "offset"))
    assert minmax != offset


@pytest.mark.parametrize("text", ["cosine>=0.99", "COSINE_MIN >= 0.95", "top1>=0.9", "spearman>=.97"])
def test_budgets_parse(text: str) -> None:
    b = parse_budget(text)
    assert b.threshold <= 1 and b.metric in sensitivity.METRICS


@pytest.mark.parametrize("argv", [
    ["sensitivity", "--accuracy-budget", "cosine<0.9"],
    ["sensitivity", "--accuracy-budget", "latency>=0.9"],
    ["sensitivity", "--accuracy-budget", "cosine>=1.5"],
    ["sensitivity", "--group", "head"],
    ["sensitivity", "--bits", "32"],
    ["sensitivity", "--mixed-precision"],
    ["sensitivity", "--model", "./no/such/model"],
    ["sensitivity", "--weight-quant", "minmax", "hqq"],
])
def test_bad_sensitivity_input_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    assert cli.main([*argv, "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    assert not (tmp_path / "out").exists()  # nothing started


def test_numbers_are_read_not_trusted() -> None:
    assert sensitivity.number("0.5") == 0.5
    assert sensitivity.number("") is None and sensitivity.number("nan") is None
    assert np.isnan(float("nan"))


def test_an_onnx_files_bad_sensitivity_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An ONNX file is judged by its lowest output cosine and top-1, and probed MatMul by MatMul."""
    from onnx_models import tiny_classifier

    model = str(tiny_classifier(tmp_path / "tiny.onnx"))
    for extra, needle in ((["--accuracy-budget", "cosine>=0.99"], "an ONNX file is judged by its lowest output cosine"),
                          (["--group", "block"], "--group block: an ONNX file's MatMuls are probed one by one")):
        argv = ["sensitivity", "--model", model, "--dims", "batch=2", "seq=6", *extra, "--output-dir", str(tmp_path / "out")]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "out").exists()
