"""The async Python API rejects bad arguments before any browser starts or any results folder is
made. run_sweep (the only path to a browser) is replaced so no browser can launch."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from pathlib import Path

import pytest

import fixed_web_platform.api as api
import fixed_web_platform.sweep as sweep_module
from fixed_web_platform.api import run_real_webgpu_test, run_real_webnn_test
from fixed_web_platform.vocabulary import (
    BrowserName,
    EngineName,
    Outcome,
    Platform,
    PrecisionMode,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the API gets as far as running a sweep or picking a default results folder."""

    async def forbidden_sweep(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("run_sweep was called: argument validation did not stop the run")

    def forbidden_dir(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("new_results_dir was called: a results folder would be created")

    monkeypatch.setattr(sweep_module, "execute", forbidden_sweep)
    monkeypatch.setattr(sweep_module, "new_results_dir", forbidden_dir)


@pytest.fixture
def fake_sweep(monkeypatch: pytest.MonkeyPatch) -> list:
    """Record the plan instead of running it; returns the list of plans seen."""
    seen: list = []

    async def sweep(plan, writer, options):  # noqa: ANN001, ANN202
        seen.append((plan, writer))
        return []

    monkeypatch.setattr(sweep_module, "execute", sweep)
    return seen


API_FUNCTIONS = pytest.mark.parametrize("fn", [run_real_webnn_test, run_real_webgpu_test],
                                        ids=["webnn", "webgpu"])


@API_FUNCTIONS
def test_unknown_model_raises_one_line_before_any_browser(fn, no_sweep: None, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "x"
    with pytest.raises(ValueError) as info:
        asyncio.run(fn(model="bert", output_dir=out))
    message = str(info.value)
    assert "'bert' not found" in message and "all-MiniLM-L6-v2" in message
    assert "\n" not in message and "Traceback" not in message
    assert not out.exists()


@API_FUNCTIONS
def test_mixed_precision_without_a_model_raises(fn, no_sweep: None, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "x"
    with pytest.raises(ValueError) as info:
        asyncio.run(fn(mixed_precision=True, output_dir=out))
    assert "model" in str(info.value) and "\n" not in str(info.value)
    assert not out.exists()


@API_FUNCTIONS
def test_model_plan_has_the_model_and_its_rules(fn, fake_sweep: list, tmp_path: Path) -> None:  # noqa: ANN001
    asyncio.run(fn(model="all-MiniLM-L6-v2", bits=4, mixed_precision=True, batch_size=2, seq_len=16,
                   output_dir=tmp_path / "x"))
    (plan, writer), = fake_sweep
    writer.close()
    assert len(plan) == 1 and plan[0].workload.kind == "encoder"
    assert plan[0].workload.rules_name == "mixed-precision" and plan[0].workload.batch_size == 2
    assert (tmp_path / "x" / "plan.json").is_file()


@API_FUNCTIONS
@pytest.mark.parametrize("bits", [3, [8, 3], (3,)], ids=["int", "list", "tuple"])
def test_bits_3_raises_before_any_browser(fn, bits, no_sweep: None, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "x"
    with pytest.raises(ValueError, match="bits 3"):
        asyncio.run(fn(bits=bits, output_dir=out))
    assert not out.exists()


@API_FUNCTIONS
def test_unknown_browser_raises_value_error(fn, no_sweep: None, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "x"
    with pytest.raises(ValueError, match="opera"):
        asyncio.run(fn(browser="opera", output_dir=out))
    with pytest.raises(ValueError, match="opera"):
        asyncio.run(fn(browser=["chrome", "opera"], output_dir=out))
    assert not out.exists()


@pytest.mark.parametrize(
    "kwargs",
    [{"webnn_device": "tpu"}, {"shapes": ["1x768"]}, {"repetitions": 0}, {"block_size": 0}],
    ids=["device", "shape", "repetitions", "block-size"],
)
def test_other_bad_arguments_raise_before_any_browser(kwargs: dict, no_sweep: None, tmp_path: Path) -> None:
    out = tmp_path / "x"
    with pytest.raises(ValueError):
        asyncio.run(run_real_webnn_test(output_dir=out, **kwargs))
    assert not out.exists()


def test_an_output_dir_that_cannot_be_made_raises_naming_the_argument(no_sweep: None, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", tmp_path / "file" / "under", Path("/proc/no-such-folder/x")):
        with pytest.raises(ValueError, match=rf"^output_dir {bad}: ") as info:
            asyncio.run(run_real_webgpu_test(output_dir=bad))
        assert "\n" not in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_the_default_bits_are_4_beside_the_float32_baseline(fake_sweep: list, tmp_path: Path) -> None:
    """The API's documented default (api.DEFAULT_BITS): the pick and the speed-ups need the baseline."""
    asyncio.run(run_real_webgpu_test(shapes=["1x64x32"], output_dir=tmp_path / "x"))
    ((plan, _),) = fake_sweep
    assert [r.bits for r in plan] == [32, 4]


# Valid arguments do reach run_sweep: shows the patched run_sweep above is the real path to a browser,
# so the checks above are not passing by accident.


def test_valid_webnn_arguments_reach_the_sweep(fake_sweep: list, tmp_path: Path) -> None:
    out = tmp_path / "x"
    rows = asyncio.run(run_real_webnn_test(browser="Chrome", bits=[8, 4], experimental_precision=True,
                                           shapes=["1x64x32"], webnn_device="gpu", output_dir=out))
    assert rows == []
    ((plan, writer),) = fake_sweep
    assert writer.directory == out and out.is_dir()
    assert {r.platform for r in plan} == {Platform.WEBNN}
    assert {r.browser for r in plan} == {BrowserName.CHROME}
    assert [r.bits for r in plan] == [8, 4]
    assert {r.precision_mode for r in plan} == {PrecisionMode.EXPERIMENTAL}
    assert {r.webnn_device for r in plan} == {"gpu"}
    assert {r.workload.shape for r in plan} == {"1x64x32"}


def test_valid_webgpu_arguments_reach_the_sweep(fake_sweep: list, tmp_path: Path) -> None:
    asyncio.run(run_real_webgpu_test(browser=["firefox"], bits=2, shapes=["1x64x32"], output_dir=tmp_path / "y"))
    ((plan, _),) = fake_sweep
    assert {r.platform for r in plan} == {Platform.WEBGPU}
    assert {r.browser for r in plan} == {BrowserName.FIREFOX}
    assert [r.bits for r in plan] == [2]
    assert {r.precision_mode for r in plan} == {PrecisionMode.STANDARD}


def test_top_level_script_module_exposes_coroutine_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    module = importlib.import_module("run_real_webgpu_webnn")
    assert Path(module.__file__).resolve() == ROOT / "run_real_webgpu_webnn.py"
    for name in ("run_real_webnn_test", "run_real_webgpu_test", "run_real_test"):
        fn = getattr(module, name)
        assert inspect.iscoroutinefunction(fn), name
        assert name in module.__all__
    assert module.run_real_webnn_test is api.run_real_webnn_test
    assert module.run_real_webgpu_test is api.run_real_webgpu_test
    assert callable(module.main)


def test_api_saves_the_plan_first_and_a_sweep_can_be_resumed(fake_sweep: list, tmp_path: Path) -> None:
    """The API takes the CLI's path: plan.json is on disk before anything runs, and resume_test
    runs exactly what has no row yet."""
    out = tmp_path / "api"
    asyncio.run(api.run_real_test(["webgpu", "wasm"], engines=["harness", "ort"], bits=[8, 4],
                                  shapes=["2x64x16"], output_dir=out))
    plan, writer = fake_sweep[-1]
    assert (out / "plan.json").is_file() and writer.directory == out
    assert [(r.engine, r.platform) for r in plan[:3]] == [
        (EngineName.HARNESS, Platform.WEBGPU), (EngineName.ORT, Platform.WEBGPU),
        (EngineName.ORT, Platform.WASM)]
    from fixed_web_platform.results.rows import ResultRow

    writer.add(ResultRow.without_measurement(plan[0], Outcome.UNSUPPORTED, "pretend"), {})
    asyncio.run(api.resume_test(out))
    resumed, _ = fake_sweep[-1]
    assert [r.run_id for r in resumed] == [r.run_id for r in plan[1:]]


def test_platform_helpers_have_the_real_signature() -> None:
    """help(run_real_webnn_test) lists every argument: run_real_test's, less the platforms."""
    full = dict(inspect.signature(api.run_real_test).parameters)
    full.pop("platforms")
    for fn in (run_real_webnn_test, run_real_webgpu_test):
        params = inspect.signature(fn).parameters
        assert "kwargs" not in params
        assert {n: (p.default, p.annotation) for n, p in params.items()} == \
            {n: (p.default, p.annotation) for n, p in full.items()}, fn.__name__


@pytest.mark.parametrize("env, asked, mode", [
    ("1", None, PrecisionMode.EXPERIMENTAL), ("", None, PrecisionMode.STANDARD),
    ("1", False, PrecisionMode.STANDARD), ("", True, PrecisionMode.EXPERIMENTAL)])
def test_api_honours_webnn_experimental_precision_like_the_cli(env: str, asked: bool | None, mode: PrecisionMode,
                                                               fake_sweep: list, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBNN_EXPERIMENTAL_PRECISION", env)
    kwargs = {} if asked is None else {"experimental_precision": asked}
    asyncio.run(run_real_webnn_test(bits=4, shapes=["2x64x16"], output_dir=tmp_path / "x", **kwargs))
    (plan, writer), = fake_sweep
    writer.close()
    assert {r.precision_mode for r in plan} == {mode}


def test_a_model_without_weights_names_the_apis_own_argument(no_sweep: None, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        asyncio.run(run_real_webgpu_test(model="bert-base-uncased", output_dir=tmp_path / "x"))
    message = str(info.value)
    assert "random_weights=True" in message and "--random-weights" not in message


def test_an_engine_that_runs_none_of_the_workloads_raises(no_sweep: None, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--engine transformersjs runs .*none of this sweep's \\(matmul\\)"):
        asyncio.run(run_real_webgpu_test(engines="transformersjs", output_dir=tmp_path / "x"))
    assert not (tmp_path / "x").exists()
