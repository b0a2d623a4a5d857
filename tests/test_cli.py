"""Unit tests for fixed_web_platform.cli: bad input is one stderr line and exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import fixed_web_platform.sweep as sweep_module
from fixed_web_platform.cli import main as cli
from fixed_web_platform.cli import run as cli_run
from fixed_web_platform.results.rows import ResultRow
from fixed_web_platform.vocabulary import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
ENTRY = ROOT / "run_real_webgpu_webnn.py"


class SweepStarted(Exception):
    """Raised if bad input got past validation: no results folder, no browser."""


@pytest.fixture(autouse=True)
def no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise SweepStarted("validation let the sweep start")

    monkeypatch.setattr(sweep_module, "new_results_dir", refuse)
    monkeypatch.setattr(sweep_module, "ResultWriter", refuse)
    monkeypatch.setattr(sweep_module, "execute", refuse)


BAD_INPUT = {
    "bits-3": (["--bits", "3"], ["bits 3"]),
    "bits-not-int": (["--bits", "four"], ["four"]),
    "unknown-browser": (["--browser", "opera"], ["opera"]),
    "zero-dim-shape": (["--shape", "0x1x1"], ["0x1x1"]),
    "k-not-block-multiple": (["--shape", "1x100x8", "--only-shapes", "--bits", "4"], ["K=100", "32"]),
    "only-shapes-without-shape": (["--only-shapes"], ["--shape"]),
    "webnn-device": (["--platform", "webnn", "--webnn-device", "tpu"], ["tpu"]),
    "capabilities-browser": (["capabilities", "--browser", "opera"], ["opera"]),
    "unknown-platform": (["--platform", "webgl"], ["webgl"]),
    "mixed-precision": (["--mixed-precision"], ["--mixed-precision"]),
    "model-unknown": (["--model", "foo"], ["foo", "available", "all-MiniLM-L6-v2"]),
    "model-no-weights": (["--model", "bert-base-uncased"], ["--random-weights"]),
    "model-missing-path": (["--model", "./no/such/folder"], ["does not exist"]),
    "seq-len-over-max": (["--model", "all-MiniLM-L6-v2", "--seq-len", "513"], ["513", "512"]),
    "batch-0": (["--model", "all-MiniLM-L6-v2", "--batch-size", "0"], ["--batch-size"]),
    "random-weights-alone": (["--random-weights"], ["--random-weights", "--model"]),
    "rules-and-mixed": (["--model", "all-MiniLM-L6-v2", "--mixed-precision", "--precision-rules", "r.json"],
                        ["choose one"]),
    "rules-missing": (["--model", "all-MiniLM-L6-v2", "--precision-rules", "/no/rules.json"], ["/no/rules.json"]),
    "missing-binary": (["--browser-binary", "/nonexistent", "--browser", "chrome"], ["/nonexistent"]),
    "ambiguous-binary": (["--browser-binary", "/bin/sh", "--browser", "chrome", "firefox"], ["NAME=PATH"]),
    "missing-driver": (["--driver", "firefox=/nonexistent/geckodriver"], ["/nonexistent/geckodriver"]),
    "iterations-0": (["--iterations", "0"], ["--iterations", "0"]),
    "repetitions-0": (["--repetitions", "0"], ["--repetitions"]),
    "warmup-negative": (["--warmup", "-1"], ["--warmup"]),
    "timeout-0": (["--timeout", "0"], ["timeout"]),
    "warmup-time-word": (["--warmup-time", "soon"], ["--warmup-time", "soon"]),
    "steady-maybe": (["--steady", "maybe"], ["--steady", "maybe"]),
    "steady-cap-0": (["--steady-cap", "0"], ["--steady-cap"]),
    "unknown-flag": (["--frobnicate"], ["--frobnicate"]),
    "remote-not-http": (["--remote", "grid.example:4444"], ["--remote", "http(s) URL"]),
    "remote-with-driver": (["--remote", "http://127.0.0.1:4444", "--driver", "chrome=/bin/sh",
                            "--browser", "chrome"], ["--driver", "--remote"]),
    "serve-host-not-here": (["--serve-host", "192.0.2.1"], ["--serve-host", "192.0.2.1"]),
    "parallel-0": (["--parallel", "0"], ["--parallel"]),
    "weight-quant-unknown": (["--weight-quant", "gptq2"], ["--weight-quant", "gptq2", "hqq"]),
    "dtype-without-its-engine": (["--model", "all-MiniLM-L6-v2", "--dtype", "q4"],
                                 ["--dtype", "ONNX file", "transformersjs"]),
    "dtype-unknown": (["--model", "all-MiniLM-L6-v2", "--engine", "transformersjs", "--dtype", "q3"],
                      ["--dtype q3", "q4f16", "bnb4"]),
    "dtype-bits-left-out": (["--model", "all-MiniLM-L6-v2", "--engine", "transformersjs", "--dtype", "q4",
                             "--bits", "8"], ["--dtype q4", "4 bits", "--bits 8"]),
    "engine-of-no-workload": (["--engine", "transformersjs"], ["--engine transformersjs", "matmul", "--model"]),
    "engine-of-another-kind": (["--model", "all-MiniLM-L6-v2", "--engine", "wllama"], ["--engine wllama", "encoder"]),
    "weight-quant-no-low-bits": (["--weight-quant", "gptq", "--bits", "32"], ["--weight-quant gptq", "--bits 32"]),
    "block-size-not-words": (["--block-size", "7"], ["block size 7", "multiple of 4"]),
    "block-size-not-dividing-k": (["--block-size", "64", "--shape", "1x96x8", "--only-shapes", "--bits", "8"],
                                  ["block size 64", "K=96"]),
    "output-dir-pseudo-fs": (["--output-dir", "/proc/no-such-folder/x"], ["--output-dir /proc/no-such-folder/x"]),
    "findings-data-missing": (["findings", "--data", "/nonexistent"], ["--data /nonexistent"]),
}


@pytest.mark.parametrize(("argv", "mentions"), list(BAD_INPUT.values()), ids=list(BAD_INPUT))
def test_bad_input_is_one_error_line_and_exit_2(
    argv: list[str], mentions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:")
    for word in mentions:
        assert word in lines[0]


def _one_error_line(argv: list[str], capsys: pytest.CaptureFixture[str], *mentions: str) -> None:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("error:"), err
    for word in mentions:
        assert word in err


def test_an_output_dir_that_is_a_file_names_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    _one_error_line(["--output-dir", str(tmp_path / "file")], capsys, f"--output-dir {tmp_path / 'file'}", "a file")
    _one_error_line(["--output-dir", str(tmp_path / "file" / "under")], capsys, "--output-dir", "a file")
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_a_model_folder_with_a_corrupt_graph_is_refused_before_a_browser(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """As a bare corrupt .onnx is: the folder's onnx/model.onnx is parsed when the plan is made."""
    folder = tmp_path / "model"
    (folder / "onnx").mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "onnx" / "model.onnx").write_bytes(b"not a protobuf")
    _one_error_line(["--model", str(folder)], capsys, "onnx/model.onnx is not an ONNX model")


def test_findings_from_a_folder_without_results_is_one_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _one_error_line(["findings", "--data", str(tmp_path), "--check"], capsys, f"--data {tmp_path}", "results.csv")


def test_timeout_nan_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        rc = cli.main(["--timeout", "nan"])
    except SweepStarted:
        pytest.fail("--timeout nan was accepted and the sweep started")
    assert rc == 2
    assert capsys.readouterr().err.startswith("error:")


def test_entry_script_bad_bits_subprocess(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ENTRY), "--bits", "3"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error:") and "bits 3" in lines[0]
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def _row(**overrides: object) -> ResultRow:
    base = dict(
        schema_version=SCHEMA_VERSION, run_id=0, repetition=0, timestamp_utc="t", browser="chrome",
        browser_version="150", engine="harness", platform="webgpu", executed_on="webgpu",
        precision_mode="standard", adapter="",
        device_type="", weight_dtype="int4", scale_dtype="float32", zero_point_dtype="int4",
        kind="matmul", workload="w", bits_requested=4, bits_executed=4,
        weight_format="int4-block32-asymmetric", compute_dtype="f32", block_size=32,
        outcome="ok", reason="", kind_fields={"m": 1, "k": 768, "n": 3072},
    )
    core = {k: v for k, v in (base | overrides).items() if k in ResultRow.core_columns() or k == "kind_fields"}
    return ResultRow(**core).with_fields(**{k: v for k, v in overrides.items() if k not in core})


def _cells(line: str) -> list[str]:
    assert line.startswith("| ") and line.endswith(" |"), line
    return [c.strip() for c in line[2:-2].split(" | ")]


def test_format_table() -> None:
    ok = _row(latency_ms_median=1.23456, latency_ms_p10=1.0, latency_ms_p90=2.0, gflops=3.8234,
              rel_error_vs_float=0.0123, rel_error_vs_dequantized=4.56e-7)
    failed = _row(browser="firefox", m=128, k=768, n=768, bits_requested=2, bits_executed=None,
                  executed_on="", outcome="timeout", reason="no result")
    lines = cli_run.format_table([ok, failed]).splitlines()
    assert len(lines) == 4
    header = _cells(lines[0])
    assert header[:8] == ["browser", "engine", "platform", "on", "shape", "bits", "exec", "outcome"]
    assert lines[1] == "|" + "---|" * len(header)
    assert _cells(lines[2]) == [
        "chrome", "harness", "webgpu", "webgpu", "1x768x3072", "4", "4", "ok", "1.235",
        "1.000-2.000", "3.82", "1.23e-02", "4.6e-07",
    ]
    assert _cells(lines[3]) == [
        "firefox", "harness", "webgpu", "-", "128x768x768", "2", "-", "timeout", "-", "-", "-", "-", "-",
    ]


def test_format_table_without_rows_is_header_only() -> None:
    assert len(cli_run.format_table([]).splitlines()) == 2
