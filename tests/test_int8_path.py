"""Per-channel weights and WebNN's graph forms, in Python: the bytes, the plan's axes and checks,
which form a run builds, the int8-output reference of the fused form, and reading folders from
before these columns existed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fixed_web_platform.cli import main as cli
from fixed_web_platform.engines.webnn.forms import QDQ_FORM, SCALE_AFTER_FORM, choose_form
from fixed_web_platform.models.rules import LayerPrecision, load_rules
from fixed_web_platform.plan import build_plan
from fixed_web_platform.precision import quant
from fixed_web_platform.precision.held import hold_weights
from fixed_web_platform.precision.observers import fake_quantize
from fixed_web_platform.results import reader
from fixed_web_platform.vocabulary import PER_CHANNEL_BLOCK, BrowserName, Platform
from fixed_web_platform.workloads import parse_shape
from fixed_web_platform.workloads.matmul import prepare

SHAPE = parse_shape("8x96x48")


def _w(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((48, 96)).astype(np.float32)


@pytest.mark.parametrize("bits", [8, 4, 2])
def test_per_channel_weights_are_symmetric_one_scale_per_row(bits: int) -> None:
    w = _w()
    held = hold_weights(w, bits, PER_CHANNEL_BLOCK)
    assert held.block_size == 96 and held.weight_format == f"int{bits}-per-channel-symmetric"
    scales = np.frombuffer(held.tensors["scales"], dtype=np.float32)
    assert scales.shape == (48,)
    qmax = (1 << (bits - 1)) - 1
    np.testing.assert_allclose(scales, np.abs(w).max(axis=1) / qmax, rtol=1e-6)
    zero_points = quant.unpack_bits(np.frombuffer(held.tensors["zero_points"], dtype=np.uint8), bits, 48, True)
    assert not np.any(zero_points)
    # every value is within half a step of its row's scale
    assert np.all(np.abs(held.w_exec - w) <= scales[:, None] / 2 + 1e-7)


def test_unsigned_per_channel_weights_shift_values_and_zero_points_alike() -> None:
    signed, unsigned = hold_weights(_w(), 8, PER_CHANNEL_BLOCK), hold_weights(_w(), 8, PER_CHANNEL_BLOCK, True)
    np.testing.assert_array_equal(signed.w_exec, unsigned.w_exec)
    assert unsigned.weight_format == "uint8-per-channel-symmetric"


def test_a_layer_plan_resolves_per_channel_to_its_own_k() -> None:
    from fixed_web_platform.architectures import LinearLayer

    layer = LinearLayer("l", "ffn", 1536, 384)
    assert LayerPrecision(layer, 8, PER_CHANNEL_BLOCK, "--bits").block == 1536
    assert LayerPrecision(layer, 8, 32, "--bits").block == 32


def test_rules_file_takes_per_channel(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([{"match": "*", "bits": 8, "block_size": "per-channel"}]))
    (rule,) = load_rules(path)
    assert rule.block_size == PER_CHANNEL_BLOCK and rule.to_json()["block_size"] == "per-channel"
    path.write_text(json.dumps([{"match": "*", "bits": 8, "block_size": "per-row"}]))
    with pytest.raises(ValueError, match="positive integer or \"per-channel\""):
        load_rules(path)


def test_plan_multiplies_granularity_and_forms_where_they_apply() -> None:
    runs = build_plan([BrowserName.CHROME], [Platform.WEBNN, Platform.WEBGPU], [SHAPE], [32, 8],
                      act_bits=[32, 8], granularity=["block", "per-channel"], graph_form=["", "gemm", QDQ_FORM])
    webgpu = [r for r in runs if r.platform == "webgpu"]
    # float weights have no granularity; WebGPU builds one form
    assert sorted((r.bits, r.granularity, r.act_bits) for r in webgpu) == [
        (8, "block", 8), (8, "block", 32), (8, "per-channel", 8), (8, "per-channel", 32), (32, "block", 32)]
    assert {r.graph_form for r in webgpu} == {""}
    webnn = [r for r in runs if r.platform == "webnn"]
    # the int8-output form only where activations are int8
    assert {(r.act_bits, r.graph_form) for r in webnn if r.bits == 8} == {
        (32, ""), (32, "gemm"), (8, ""), (8, "gemm"), (8, QDQ_FORM)}
    assert not any(r.refused for r in runs)


@pytest.mark.parametrize(("kw", "message"), [
    ({"granularity": ["per-row"]}, "granularity 'per-row' is not one of block, per-channel"),
    ({"graph_form": ["fused"]}, "graph form 'fused' is not one of"),
    ({"graph_form": [QDQ_FORM]}, "add --act-bits 8"),
])
def test_plan_rejects_bad_granularity_and_forms(kw, message: str) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match=message):
        build_plan([BrowserName.CHROME], [Platform.WEBNN], [SHAPE], [8], **kw)


def test_per_channel_needs_whole_words_of_k() -> None:
    with pytest.raises(ValueError, match="per-channel 8-bit weights need K=30 to be a multiple of 4"):
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], [parse_shape("4x30x8")], [8],
                   granularity=["per-channel"])


def test_cli_rejects_an_unknown_granularity_in_one_line(capsys) -> None:  # noqa: ANN001
    assert cli.main(["--granularity", "rows", "--platform", "webnn"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "granularity" in err[0]


def _run(**kw):  # noqa: ANN003, ANN202
    (run,) = [r for r in build_plan([BrowserName.CHROME], [Platform.WEBNN], [SHAPE], [kw.pop("bits", 8)], **kw)
              if r.graph_form == kw.get("graph_form", "")]
    return run


def test_which_form_a_run_builds(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delenv("FWP_WEBNN_GRAPH_FORM", raising=False)
    assert choose_form(_run(act_bits=[8], granularity="per-channel"), "transpose") == (QDQ_FORM, "")
    assert choose_form(_run(granularity="per-channel"), "transpose") == (SCALE_AFTER_FORM, "")
    assert choose_form(_run(act_bits=[8]), "transpose") == ("transpose", "")  # blockwise: no fusion
    assert choose_form(_run(bits=32), "pretransposed_gemm") == ("pretransposed_gemm", "")
    assert choose_form(_run(act_bits=[8], granularity="per-channel", graph_form="gemm"), "x") == ("gemm", "")
    monkeypatch.setenv("FWP_WEBNN_GRAPH_FORM", QDQ_FORM)
    form, why = choose_form(_run(bits=32), "transpose")
    assert form == QDQ_FORM and "--act-bits 8" in why
    monkeypatch.delenv("FWP_WEBNN_GRAPH_FORM")
    form, why = choose_form(_run(graph_form=SCALE_AFTER_FORM), "transpose")  # blockwise weights
    assert form == SCALE_AFTER_FORM and "--granularity per-channel" in why


def test_fused_reference_carries_the_int8_output_and_its_tolerance_one_step() -> None:
    p = prepare(SHAPE, 8, PER_CHANNEL_BLOCK, 0, act_bits=8, observer="minmax", out_int8=True)
    plain = prepare(SHAPE, 8, PER_CHANNEL_BLOCK, 0, act_bits=8, observer="minmax")
    assert p.out_scale > 0 and plain.out_scale == 0
    np.testing.assert_allclose(p.ref_dequantized, fake_quantize(plain.ref_dequantized, np.float32(p.out_scale),
                                                                np.int64(p.out_zero_point), 8))
    # the output holds 256 levels: the reference is on them, and differs from the float one
    levels = np.unique(np.rint(p.ref_dequantized / p.out_scale))
    assert len(levels) <= 256 and not np.allclose(p.ref_dequantized, plain.ref_dequantized)
    rms = np.sqrt(np.mean(p.ref_dequantized ** 2))
    assert p.tolerance("f32") == pytest.approx(1e-5 + p.out_scale / rms)
    assert "one int8 output step" in p.tolerance_basis and plain.tolerance_basis == ""
    with pytest.raises(ValueError, match="int8 outputs go with int8 activations"):
        prepare(SHAPE, 8, PER_CHANNEL_BLOCK, 0, out_int8=True)


def test_folders_from_before_read_as_blockwise_and_the_default_forms(tmp_path) -> None:  # noqa: ANN001
    import pandas as pd

    from fixed_web_platform.results.rows import ResultRow

    run = build_plan([BrowserName.CHROME], [Platform.WEBNN, Platform.WEBGPU], [SHAPE], [32, 8])
    rows = [ResultRow.without_measurement(r, "ok", "").record() for r in run]
    frame = pd.DataFrame(rows).drop(columns=["granularity", "graph_form"]).assign(schema_version=9)
    frame.to_csv(tmp_path / "results.csv", index=False)
    loaded = reader.load(tmp_path).rows
    got = sorted(zip(loaded["platform"], loaded["bits_requested"], loaded["granularity"], loaded["graph_form"]))
    assert got == [("webgpu", 8, "block", ""), ("webgpu", 32, "", ""),
                   ("webnn", 8, "block", "transpose"), ("webnn", 32, "", "transpose")]
