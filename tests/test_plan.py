"""Unit tests for fixed_web_platform.plan: the sweep is listed and validated before any launch."""

from __future__ import annotations

import itertools

import pytest

from fixed_web_platform.plan import build_plan
from fixed_web_platform.vocabulary import BrowserName, Platform, PrecisionMode
from fixed_web_platform.workloads import parse_shape
from fixed_web_platform.workloads.matmul import MatmulWorkload as Workload

SMALL = Workload("small", 2, 64, 16)
OTHER = Workload("other", 1, 128, 8)


def test_plan_size_and_nesting_order() -> None:
    browsers = [BrowserName.CHROME, BrowserName.FIREFOX]
    workloads = [SMALL, OTHER]
    bits = [32, 4, 2]
    platforms = [Platform.WEBGPU, Platform.WEBNN]
    plan = build_plan(browsers, platforms, workloads, bits, repetitions=2)

    assert len(plan) == 2 * 2 * 3 * 2 * 2
    # rounds x browsers x workloads x bits x platforms, the last varying fastest.
    expected = list(itertools.product(range(2), browsers, workloads, bits, platforms))
    got = [(r.repetition, r.browser, r.workload, r.bits, r.platform) for r in plan]
    assert got == expected


def test_run_ids_are_sequential_from_zero() -> None:
    plan = build_plan([BrowserName.CHROME, BrowserName.EDGE], [Platform.WEBGPU], [SMALL], [32, 8],
                      repetitions=3)
    assert [r.run_id for r in plan] == list(range(len(plan)))


def test_options_are_copied_into_every_run() -> None:
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], [4], block_size=16,
                      precision_mode=PrecisionMode.EXPERIMENTAL, seed=7)
    assert len(plan) == 1
    run = plan[0]
    assert (run.block_size, run.precision_mode, run.seed) == (16, PrecisionMode.EXPERIMENTAL, 7)


def test_duplicates_are_collapsed_keeping_first_order() -> None:
    plan = build_plan(
        [BrowserName.FIREFOX, BrowserName.CHROME, BrowserName.FIREFOX],
        [Platform.WEBGPU, Platform.WEBGPU],
        [SMALL, Workload("small", 2, 64, 16), SMALL],
        [8, 4, 8, 4],
    )
    assert len(plan) == 2 * 1 * 1 * 2
    assert [r.browser for r in plan] == ["firefox", "firefox", "chrome", "chrome"]
    assert [r.bits for r in plan] == [8, 4, 8, 4]
    assert [r.run_id for r in plan] == [0, 1, 2, 3]


@pytest.mark.parametrize("bad", [3, 0])
def test_unsupported_bits_rejected_naming_the_value(bad: int) -> None:
    with pytest.raises(ValueError, match=rf"\bbits {bad}\b"):
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], [32, bad])


def test_k_not_multiple_of_block_size_rejected() -> None:
    with pytest.raises(ValueError) as info:
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], [Workload("odd", 1, 100, 8)], [4])
    message = str(info.value)
    assert "K=100" in message
    assert "block size 32" in message


def test_k_not_multiple_of_block_size_is_fine_for_float_weights() -> None:
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [Workload("odd", 1, 100, 8)], [32, 16])
    assert [r.bits for r in plan] == [32, 16]


@pytest.mark.parametrize(("bits", "block_size", "per_word"), [(2, 8, 16), (4, 4, 8), (8, 2, 4)])
def test_block_size_must_fill_whole_packed_words(bits: int, block_size: int, per_word: int) -> None:
    # K is a multiple of the block size, so only the packing rule can object.
    workload = Workload("w", 1, 64, 8)
    with pytest.raises(ValueError) as info:
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], [workload], [bits], block_size=block_size)
    message = str(info.value)
    assert f"block size {block_size}" in message
    assert f"multiple of {per_word}" in message


def test_block_size_that_fills_words_is_accepted() -> None:
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [Workload("w", 1, 64, 8)], [2, 4, 8],
                      block_size=16)
    assert len(plan) == 3


@pytest.mark.parametrize("repetitions", [0, -1])
def test_repetitions_below_one_rejected(repetitions: int) -> None:
    with pytest.raises(ValueError, match="repetitions"):
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], [SMALL], [32], repetitions=repetitions)


def test_parse_shape_accepts_mxkxn() -> None:
    workload = parse_shape("1x768x3072")
    assert (workload.m, workload.k, workload.n) == (1, 768, 3072)
    assert workload.shape == "1x768x3072"
    assert parse_shape(" 4X64x32 ").shape == "4x64x32"


@pytest.mark.parametrize("text", ["0x1x1", "abc", "1x2", "1x2x3x4", "-1x2x3", ""])
def test_parse_shape_rejects_bad_text(text: str) -> None:
    with pytest.raises(ValueError, match="shape"):
        parse_shape(text)


def test_buffer_cache_modes_multiply_only_the_engines_that_take_one() -> None:
    """ORT on WebGPU runs once per cache mode asked (its default, named, when none is); its wasm
    runs and the harness's once, with no mode; a mode on a sweep without such an engine, or a mode
    ORT does not have, is an error before anything runs."""
    from fixed_web_platform.vocabulary import EngineName

    shape = [Workload("s", 8, 64, 32)]
    runs = build_plan([BrowserName.CHROME], [Platform.WEBGPU, Platform.WASM], shape, [8],
                      engines=[EngineName.HARNESS, EngineName.ORT], buffer_cache=["bucket", "simple"])
    assert sorted((r.engine.value, r.platform.value, r.buffer_cache) for r in runs) == [
        ("harness", "webgpu", ""), ("ort", "wasm", ""), ("ort", "webgpu", "bucket"), ("ort", "webgpu", "simple")]
    default = build_plan([BrowserName.CHROME], [Platform.WEBGPU], shape, [8], engines=[EngineName.ORT])
    assert [r.buffer_cache for r in default] == ["bucket"]
    with pytest.raises(ValueError, match="--buffer-cache simple sets ONNX Runtime's WebGPU buffer cache"):
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], shape, [8], buffer_cache=["simple"])
    with pytest.raises(ValueError, match="not one of ONNX Runtime Web's: bucket, simple"):
        build_plan([BrowserName.CHROME], [Platform.WEBGPU], shape, [8], engines=[EngineName.ORT],
                   buffer_cache=["huge"])
