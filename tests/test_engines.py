"""Every registered engine and browser loads (wptrunner's "every product loads"), and each engine
reads a page's reply into what ran, using fake replies where a real browser is not the point."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from fixed_web_platform.browsers import PRODUCTS, DriverKind
from fixed_web_platform.browsers.sessions import LAUNCHERS
from fixed_web_platform.engines.base import Engine, EngineJob, Executed, Refusal
from fixed_web_platform.engines.registry import (
    ENGINES,
    RUNS,
    build_job,
    engine_for,
    engines_for_platform,
    kind_runner,
    read_reply,
)
from fixed_web_platform.page_protocol import PageDataError, PageReply
from fixed_web_platform.paths import WEB_DIR
from fixed_web_platform.plan import RunSpec, TimingConfig, build_plan
from fixed_web_platform.vocabulary import (
    BrowserName,
    EngineName,
    Outcome,
    Platform,
    PrecisionMode,
)
from fixed_web_platform.workloads import MatmulWorkload

W = MatmulWorkload("tiny", 2, 64, 16)
TIMING = TimingConfig(min_iterations=1, max_iterations=4)


class FakeBrowser:
    """What an engine may ask of a browser, answered from a dict."""

    def __init__(self, contexts: dict[str, dict]) -> None:
        self.contexts = contexts
        self.asked: list[str] = []

    async def webnn_context(self, device: str) -> dict:
        self.asked.append(device)
        return self.contexts.get(device, {"available": False, "error": "no such device"})

    async def adapter_limits(self) -> dict[str, int]:
        return {}


LIMITS = {
    "dequantizeLinear": {"input": {"dataTypes": ["int8", "uint8", "int4"]},
                         "zeroPoint": {"dataTypes": ["int8", "uint8", "int4"]}},
    "matmul": {"a": {"dataTypes": ["float32", "float16"]}, "b": {"dataTypes": ["float32", "float16"]}},
    "constant": {"dataTypes": ["float32", "float16", "int8", "uint8", "int4"]},
}


def _run(engine: EngineName, platform: Platform, bits: int,
         mode: PrecisionMode = PrecisionMode.STANDARD) -> RunSpec:
    return build_plan([BrowserName.CHROME], [platform], [W], [bits], engines=[engine],
                      precision_mode=mode)[0]


def _job(engine: Engine, run: RunSpec, browser: FakeBrowser | None = None) -> EngineJob | Refusal:
    assert (run.engine, run.platform) == (engine.name, engine.platform)
    return asyncio.run(build_job(run, TIMING, browser or FakeBrowser({"cpu": {"available": True,
                                                                               "limits": LIMITS}})))


def _interpret(run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
    return read_reply(run, job, page)


def _reply(**fields: object) -> PageReply:
    return PageReply(status="ok", compute_dtype="f32", wall_ms=(1.0,), cold_ms=1.0, compile_ms=1.0,
                     **({"backend": "native"} | fields))


# ------------------------------------------------------------------------------ every product loads


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: f"{e.name}-{e.platform}")
def test_every_engine_loads_and_has_its_page_runner(engine: Engine) -> None:
    assert engine_for(engine.name, engine.platform) is engine
    kinds = [k for (name, platform, k) in RUNS if (name, platform) == (engine.name, engine.platform)]
    assert kinds and all((WEB_DIR / "engines" / f"{kind_runner(engine.name, engine.platform, k).runner}.js").is_file()
                         for k in kinds)
    if "matmul" not in kinds:  # wllama: decoders only (tests/test_wllama.py)
        return
    runner = kind_runner(engine.name, engine.platform, "matmul")
    assert runner is not None
    job = _job(engine, _run(engine.name, engine.platform, 8))
    assert isinstance(job, EngineJob)
    spec = job.spec.to_json()
    assert spec["runner"] == runner.runner and spec["engine"] == engine.name
    assert set(spec["bindings"]) == set(job.tensors)


def test_registry_is_one_engine_per_name_and_platform() -> None:
    pairs = [(e.name, e.platform) for e in ENGINES]
    assert len(pairs) == len(set(pairs))
    assert engines_for_platform(Platform.WASM) == [EngineName.ORT, EngineName.WLLAMA, EngineName.TRANSFORMERSJS]
    assert engine_for(EngineName.HARNESS, Platform.WASM) is None


@pytest.mark.parametrize("name", list(BrowserName))
def test_every_browser_product_loads(name: BrowserName) -> None:
    product = PRODUCTS[name]
    assert product.name is name and product.binaries and product.install_hint
    kinds = [product.driver_kind, product.fallback_driver_kind]
    assert all(k in LAUNCHERS for k in kinds if k is not None)
    assert set(LAUNCHERS) == set(DriverKind)


# ----------------------------------------------------------------------------------- the plan


def test_plan_pairs_only_what_an_engine_runs() -> None:
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU, Platform.WASM], [W], [4],
                      engines=[EngineName.HARNESS, EngineName.ORT])
    assert [(r.engine, r.platform) for r in plan] == [
        (EngineName.HARNESS, Platform.WEBGPU), (EngineName.ORT, Platform.WEBGPU),
        (EngineName.ORT, Platform.WASM)]
    with pytest.raises(ValueError, match="no chosen engine runs platform wasm"):
        build_plan([BrowserName.CHROME], [Platform.WASM], [W], [4], engines=[EngineName.HARNESS])


# ------------------------------------------------------------------------------------ WGSL


def test_wgsl_reads_bits_from_the_bound_buffer() -> None:
    engine = engine_for(EngineName.HARNESS, Platform.WEBGPU)
    run = _run(EngineName.HARNESS, Platform.WEBGPU, 4)
    job = _job(engine, run)
    good = _interpret(run, job, _reply(shader="matmul_quant_gemv.wgsl",
                                             weight_buffer_bytes=W.n * W.k // 2))
    assert (good.bits, good.compute_dtype, good.executed_on, good.problem) == (4, "f32", "webgpu", "")
    assert good.kernel_variant == "quant-w4-gemv tile 2x4"  # 2 rows: one invocation holds both (GEMV kernel)
    wide = _interpret(run, job, _reply(shader="matmul_quant_gemv.wgsl", weight_buffer_bytes=W.n * W.k))
    assert wide.bits == 8 and "not 4-bit" in wide.problem
    for shader in ("matmul_f32.wgsl", "matmul_quant.wgsl"):  # the GEMM kernel is not this tile's
        other = _interpret(run, job, _reply(shader=shader, weight_buffer_bytes=1))
        assert "did not offer" in other.problem
    with pytest.raises(PageDataError, match="weight_buffer_bytes"):
        _interpret(run, job, _reply(shader="matmul_quant_gemv.wgsl"))


def test_wgsl_gemm_dequantizes_once_then_runs_the_float32_kernel() -> None:
    """M spanning several row tiles: the job's one variant is the float32 kernel with the
    dequantize step before it (weights -> scratch, then x, out, scratch), the scratch sized as
    float32 W; the row names both and still reads the bits from the packed buffer."""
    engine = engine_for(EngineName.HARNESS, Platform.WEBGPU)
    gemm = MatmulWorkload("gemm", 37, 64, 65)  # three row tiles of 13
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [gemm], [4], engines=[EngineName.HARNESS])[0]
    job = _job(engine, run)
    (variant,) = job.spec.options["variants"]
    assert variant["shader"] == "dequantize.wgsl>matmul_f32.wgsl"
    assert variant["layout"] == ["x", "out", "wf"] and variant["constants"] == {"M": 37, "K": 64, "N": 65}
    prologue = variant["prologue"]
    assert prologue["layout"] == ["w", "scales", "zero_points", "wf"]
    assert prologue["constants"] == {"K": 64, "N": 65, "BITS": 4, "BLOCK_SIZE": 32}
    assert prologue["workgroups"] == [3, 1]  # 65 x 2 blocks, 64 per workgroup
    assert variant["scratch"] == {"wf": 65 * 64 * 4}
    # 4-bit: two vec4s per word, one store each; the workgroup size filled in
    assert prologue["source"].count("wf[base + ") == 2 and "{WORKGROUP}" not in prologue["source"]
    good = _interpret(run, job, _reply(shader=variant["shader"], weight_buffer_bytes=65 * 64 // 2))
    assert (good.bits, good.compute_dtype, good.problem) == (4, "f32", "")
    assert good.kernel_variant == "dequant-w4-f32 tile 13x4"
    for shader in ("matmul_f32.wgsl", "matmul_quant.wgsl"):  # neither ran what the job asked
        assert "did not offer" in _interpret(run, job, _reply(shader=shader, weight_buffer_bytes=1)).problem


def test_wgsl_dequantize_dispatch_folds_into_two_dimensions() -> None:
    from fixed_web_platform.engines.wgsl import kernels as wgsl

    for k, n in ((64, 65), (4096, 4096), (32768, 16384)):  # up to 16M blocks of 32
        x, y = wgsl.dequantize_dispatch(k, n, 4, 32)["workgroups"]
        assert x <= wgsl.MAX_GROUPS_X and x * y * wgsl.DEQUANTIZE_WORKGROUP >= n * k // 32
        assert x * (y - 1) * wgsl.DEQUANTIZE_WORKGROUP < n * k // 32  # no whole row of idle workgroups


def test_wgsl_job_carries_composed_kernels_and_the_dispatch() -> None:
    engine = engine_for(EngineName.HARNESS, Platform.WEBGPU)
    job = _job(engine, _run(EngineName.HARNESS, Platform.WEBGPU, 16))
    options = job.spec.options
    assert [v["shader"] for v in options["variants"]] == ["matmul_f16.wgsl", "matmul_f16_unpack.wgsl"]
    f16 = options["variants"][0]["source"]
    assert f16.startswith("enable f16;") and "fn main(" in f16 and "fn accumulate(" in f16
    assert "{TILE_M}" not in f16
    assert options["layout"] == ["x", "out", "w"]
    assert options["workgroups"] == [1, 1]  # 16 columns / 64, 2 rows / one tile of 2
    assert "const TILE_M: u32 = 2u;" in f16 and "const TILE_N: u32 = 4u;" in f16
    assert "//@" not in f16.split("fn accumulate")[1] and "acc1_3" in f16 and "acc2_0" not in f16  # unrolled 2 x 4
    assert options["tiling"] == {"tile_m": 2, "tile_n": 4, "workgroup_x": 16}


@pytest.mark.parametrize(("m", "n", "tile_m", "tile_n", "workgroup_x"), [
    (1, 3072, 1, 4, 64), (1, 768, 1, 4, 16), (1, 1, 1, 1, 16), (2, 16, 2, 4, 16), (16, 4096, 16, 4, 64),
    (17, 4096, 9, 4, 64), (128, 768, 16, 4, 64), (100, 3072, 15, 4, 64), (37, 65, 13, 4, 16)])
def test_wgsl_tile_follows_the_shape(m: int, n: int, tile_m: int, tile_n: int, workgroup_x: int) -> None:
    """GEMV: one invocation holds every row; GEMM: equal tiles of at most MAX_TILE_M rows; TILE_N
    columns; the workgroup shrinks while the dispatch has too few workgroups for the threads."""
    from fixed_web_platform.engines.wgsl import kernels as wgsl

    tiling = wgsl.tiling_for(m, n)
    assert (tiling.tile_m, tiling.tile_n, tiling.workgroup_x) == (tile_m, tile_n, workgroup_x)
    groups_x, groups_y = tiling.workgroups(m, n)
    assert tiling.tile_m * groups_y >= m > tiling.tile_m * (groups_y - 1)
    assert groups_x * tiling.workgroup_x * tiling.tile_n >= n


def test_wgsl_unrolls_marked_lines_per_group_row_and_column() -> None:
    from fixed_web_platform.engines.wgsl import kernels as wgsl

    source = wgsl.shader_source("matmul_quant.wgsl", wgsl.Tiling(3, 2), 2, zero="packed")
    assert "//@" not in source.split("fn accumulate")[1]
    # 2-bit: four vec4s per word, each met by 3 rows x 2 columns
    assert source.count("+= dot(") == 4 * 3 * 2
    assert "let q3_1 = " in source and "let x3_2 = " in source


# ------------------------------------------------------------------------------------ WebNN


def test_webnn_refuses_before_loading_a_page_when_there_is_no_context() -> None:
    engine = engine_for(EngineName.HARNESS, Platform.WEBNN)
    browser = FakeBrowser({"cpu": {"available": False, "error": "NotSupportedError: nope"}})
    refusal = _job(engine, _run(EngineName.HARNESS, Platform.WEBNN, 8), browser)
    assert isinstance(refusal, Refusal) and refusal.outcome is Outcome.UNSUPPORTED
    assert "NotSupportedError: nope" in refusal.reason and browser.asked == ["cpu"]


def test_webnn_standard_mode_upgrades_4_bit_and_reads_the_operand() -> None:
    engine = engine_for(EngineName.HARNESS, Platform.WEBNN)
    run = _run(EngineName.HARNESS, Platform.WEBNN, 4)
    job = _job(engine, run)
    assert job.weight_dtype == "int8" and "standard precision mode ran it as 8-bit" in job.note
    ran = _interpret(run, job, _reply(weight_operand_dtype="int8"))
    assert (ran.bits, ran.problem) == (8, "")
    lied = _interpret(run, job, _reply(weight_operand_dtype="int4"))
    assert "held weights as int4, not int8" in lied.problem
    with pytest.raises(PageDataError):
        _interpret(run, job, _reply())


def test_webnn_experimental_asks_for_int4_and_a_refusal_is_the_browsers_answer() -> None:
    engine = engine_for(EngineName.HARNESS, Platform.WEBNN)
    job = _job(engine, _run(EngineName.HARNESS, Platform.WEBNN, 2, PrecisionMode.EXPERIMENTAL))
    assert job.weight_dtype == "int2" and job.refusal_is_unsupported
    assert "build" in engine.refusal_stages


# ------------------------------------------------------------------------------------ ORT


@pytest.mark.parametrize("platform", [Platform.WEBGPU, Platform.WEBNN, Platform.WASM])
def test_ort_job_is_a_model_from_the_same_quantized_values(platform: Platform) -> None:
    engine = engine_for(EngineName.ORT, platform)
    harness = _job(engine_for(EngineName.HARNESS, Platform.WEBGPU), _run(EngineName.HARNESS, Platform.WEBGPU, 4))
    job = _job(engine, _run(EngineName.ORT, platform, 4))
    assert list(job.tensors) == ["x", "model"] and job.tensors["x"] == harness.tensors["x"]
    assert job.tensors["model"][:2] != b""  # serialized ONNX
    assert job.spec.options["provider"] == platform.value
    assert job.weight_dtype == "uint4"  # harness int4 shifted by 8, zero points too
    assert (job.prepared.ref_dequantized == harness.prepared.ref_dequantized).all()


def test_ort_fallback_is_a_note_with_the_providers_words() -> None:
    engine = engine_for(EngineName.ORT, Platform.WEBNN)
    run = _run(EngineName.ORT, Platform.WEBNN, 4)
    job = _job(engine, run)
    ran = _interpret(run, job, _reply(executed_on="wasm", fallback="uint4 not supported"))
    assert (ran.bits, ran.executed_on, ran.problem) == (4, "wasm", "")
    assert "placed the weight-bearing node on wasm" in ran.note and "uint4 not supported" in ran.note
    native = _interpret(run, job, _reply(executed_on="webnn"))
    assert native.note == "" and native.executed_on == "webnn"
    with pytest.raises(PageDataError, match="executed_on"):
        _interpret(run, job, _reply(executed_on="cuda"))
    with pytest.raises(PageDataError):
        _interpret(run, job, _reply())


def test_ort_16_bit_is_judged_with_the_f16_tolerance() -> None:
    engine = engine_for(EngineName.ORT, Platform.WEBGPU)
    run = _run(EngineName.ORT, Platform.WEBGPU, 16)
    job = _job(engine, run)
    assert _interpret(run, job, _reply(executed_on="webgpu")).compute_dtype == "f16"
    assert replace(job, note="x").note == "x"


def test_ort_on_webgpu_says_which_implementation_ran_and_in_what_its_kernels_took_the_activations() -> None:
    (run,) = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [MatmulWorkload("dp4a", 2, 128, 16)], [4],
                        engines=[EngineName.ORT], accuracy_level=["4"])  # K a multiple of ORT's 128-value blocks
    job = _job(engine_for(EngineName.ORT, Platform.WEBGPU), run)
    dp4a = ("matmul&MatMulNBits&DP4AMatMulQuantize", "matmul&MatMulNBits&DP4AMatMulNBitsSmallM")
    ran = _interpret(run, job, _reply(executed_on="webgpu", programs=tuple(p.split("&")[2] for p in dp4a)))
    assert (ran.backend, ran.act_executed, ran.problem) == ("native", "int8", "")
    assert ran.check is not None and "DP4A" in ran.note  # checked against ORT's own activation rule
    floats = _interpret(run, job, _reply(executed_on="webgpu", programs=("MatMulNBitsWideTile",)))
    assert (floats.act_executed, floats.check) == ("float", None)
    other = _interpret(run, job, _reply(executed_on="webgpu", backend="jsep"))
    assert other.problem == "ran ORT's jsep WebGPU implementation, not native"
    with pytest.raises(PageDataError):
        _interpret(run, job, _reply(executed_on="webgpu", backend=""))


def test_ort_speech_at_accuracy_level_4_on_native_webgpu_is_refused_with_why() -> None:
    """Its page does not read which layers ran DP4A, so its kernel check would have no reference of
    what ran; level 0, JSEP (no int8 path) and wasm run."""
    from types import SimpleNamespace

    from fixed_web_platform.engines.ort.speech import OrtSpeech

    def refusal(platform: Platform, level: str, backend: str = "") -> str:
        return OrtSpeech().refuse(SimpleNamespace(platform=platform, accuracy_level=level, backend=backend))

    assert "does not read which layers" in refusal(Platform.WEBGPU, "4")
    assert "does not read which layers" in refusal(Platform.WEBGPU, "4", "native")
    assert refusal(Platform.WEBGPU, "0") == refusal(Platform.WEBGPU, "4", "jsep") == refusal(Platform.WASM, "4") == ""
