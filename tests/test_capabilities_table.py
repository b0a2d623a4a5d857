"""capabilities.to_markdown / write on hand-made probe entries (the shape probe_browser returns).
No browser is launched."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from fixed_web_platform.cli import capabilities
from fixed_web_platform.cli.capabilities import (
    FEATURES,
    LIMITS,
    WEBNN_OPERANDS,
    WGSL_FEATURES,
    to_markdown,
)
from fixed_web_platform.vocabulary import SCHEMA_VERSION

DEVICES = ("cpu", "gpu")

CPU_LIMITS = {
    "input": {"dataTypes": ["float32", "float16", "int32", "int8", "uint8", "int4"]},
    "constant": {"dataTypes": ["float32", "float16", "int32", "int8", "uint8", "int4", "uint4"]},
    "matmul": {"a": {"dataTypes": ["float32", "float16"]}, "b": {"dataTypes": ["float32", "float16"]}},
    "dequantizeLinear": {
        "input": {"dataTypes": ["int32", "int8", "uint8", "int4"]},
        "scale": {"dataTypes": ["float32", "float16"]},
        "zeroPoint": {"dataTypes": ["int32", "int8", "uint8", "int4"]},
    },
    # quantizeLinear deliberately absent: its cell must be "-"
}

GPU_ERROR = "NotSupportedError: no GPU | backend available"

CHROMIUM = {
    "browser": "chrome",
    "binary": "/opt/chrome/chrome",
    "driver_kind": "chromedriver",
    "version": "131.0.6778.85",
    "status": "ok",
    "probe": {
        "userAgent": "Mozilla/5.0 ... Chrome/131",
        "webgpu": {
            "available": True,
            "adapter": {"vendor": "nvidia", "architecture": "ampere", "device": "", "description": "",
                        "isFallbackAdapter": False},
            "features": ["float32-filterable", "shader-f16", "subgroups"],
            "wgslLanguageFeatures": ["packed_4x8_integer_dot_product", "readonly_and_readwrite_storage_textures"],
            "limits": {"maxStorageBufferBindingSize": 2147483644, "maxBufferSize": 4294967296,
                       "maxComputeWorkgroupStorageSize": 32768},
        },
        "webnn": {"present": True},
    },
    "webnn": {
        "present": True,
        "contexts": {
            "cpu": {"available": True, "limits": CPU_LIMITS},
            "gpu": {"available": False, "error": GPU_ERROR},
        },
    },
}

FIREFOX = {
    "browser": "firefox",
    "binary": "/usr/bin/firefox-esr",
    "driver_kind": "marionette",
    "version": "140.0",
    "status": "ok",
    "probe": {
        "webgpu": {
            "available": True,
            "adapter": {"vendor": "", "architecture": "", "isFallbackAdapter": True},
            "features": ["timestamp-query"],
            "wgslLanguageFeatures": [],
            "limits": {"maxStorageBufferBindingSize": 134217728},
        },
        "webnn": {"present": False},
    },
    "webnn": {"present": False, "reason": "navigator.ml is missing: this browser has no WebNN"},
}

SAFARI = {"browser": "safari", "status": "unavailable", "reason": "safaridriver not found on PATH"}

ENTRIES = [CHROMIUM, FIREFOX, SAFARI]

AVAILABILITY_HEAD = ["browser", "version", "WebGPU adapter", "fallback", *FEATURES, *WGSL_FEATURES, *LIMITS,
                     *(f"WebNN {d}" for d in DEVICES)]
TYPES_HEAD = ["browser", "device", *(label for label, _, _ in WEBNN_OPERANDS)]


UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def split_row(line: str) -> list[str]:
    assert line.startswith("| ") and line.endswith(" |"), line
    return [c.strip().replace("\\|", "|") for c in UNESCAPED_PIPE.split(line[2:-2])]


def column_bars(line: str) -> int:
    """The '|' that separate columns (a cell's own '|' is escaped as '\\|')."""
    return len(UNESCAPED_PIPE.findall(line))


def sections(markdown: str) -> dict[str, list[str]]:
    """Heading text -> the non-empty lines under it."""
    out: dict[str, list[str]] = {}
    current = None
    for line in markdown.splitlines():
        if line.startswith("## "):
            current = line[3:]
            out[current] = []
        elif line.strip():
            assert current is not None, f"text before the first heading: {line!r}"
            out[current].append(line)
    return out


def table(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """(header, rows); checks the separator line and that every row has the header's column count
    (counting every unescaped '|' so that a raw '|' inside a cell is caught)."""
    header = split_row(lines[0])
    assert lines[1] == "|" + "---|" * len(header)
    rows = []
    for line in lines[2:]:
        assert column_bars(line) == len(header) + 1, f"column count broken: {line!r}"
        rows.append(split_row(line))
    return header, rows


def availability(markdown: str) -> dict[str, dict[str, str]]:
    header, rows = table(sections(markdown)["WebGPU and WebNN availability"])
    assert header == AVAILABILITY_HEAD
    return {r[0]: dict(zip(header, r, strict=True)) for r in rows}


def data_types(markdown: str) -> list[dict[str, str]]:
    header, rows = table(sections(markdown)["WebNN data types (opSupportLimits)"])
    assert header == TYPES_HEAD
    return [dict(zip(header, r, strict=True)) for r in rows]


@pytest.fixture
def markdown() -> str:
    return to_markdown(ENTRIES, DEVICES)


def test_two_sections_in_order(markdown: str) -> None:
    assert list(sections(markdown)) == ["WebGPU and WebNN availability", "WebNN data types (opSupportLimits)"]
    assert markdown.endswith("\n")


def test_one_availability_row_per_browser_in_order(markdown: str) -> None:
    header, rows = table(sections(markdown)["WebGPU and WebNN availability"])
    assert [r[0] for r in rows] == ["chrome", "firefox", "safari"]


def test_chromium_row(markdown: str) -> None:
    row = availability(markdown)["chrome"]
    assert row["version"] == "131.0.6778.85"
    assert row["WebGPU adapter"] == "nvidia/ampere"
    assert row["fallback"] == "no"
    assert row["shader-f16"] == "yes"
    assert row["timestamp-query"] == "no"
    assert row["subgroups"] == "yes"
    assert row["packed_4x8_integer_dot_product"] == "yes"
    assert row["maxStorageBufferBindingSize"] == "2147483644"
    assert row["maxBufferSize"] == "4294967296"
    assert row["maxComputeWorkgroupStorageSize"] == "32768"
    assert row["WebNN cpu"] == "yes"
    assert row["WebNN gpu"].startswith("no: NotSupportedError: no GPU")
    assert "backend available" in row["WebNN gpu"]


def test_firefox_row(markdown: str) -> None:
    row = availability(markdown)["firefox"]
    assert row["version"] == "140.0"
    assert row["WebGPU adapter"] == "(not disclosed)"
    assert row["fallback"] == "yes"
    assert row["shader-f16"] == "no"
    assert row["timestamp-query"] == "yes"
    assert row["subgroups"] == "no"
    assert row["packed_4x8_integer_dot_product"] == "no"
    assert row["maxStorageBufferBindingSize"] == "134217728"
    assert row["maxBufferSize"] == "-"
    reason = "no: navigator.ml is missing: this browser has no WebNN"
    assert row["WebNN cpu"] == reason
    assert row["WebNN gpu"] == reason


def test_unavailable_row(markdown: str) -> None:
    row = availability(markdown)["safari"]
    assert row["version"] == "-"
    assert row["WebGPU adapter"] == "unavailable: safaridriver not found on PATH"
    assert all(row[h] == "-" for h in AVAILABILITY_HEAD[3:])


def test_webgpu_unavailable_is_shown_with_reason() -> None:
    entry = copy.deepcopy(FIREFOX)
    entry["probe"]["webgpu"] = {"available": False, "reason": "navigator.gpu is missing"}
    row = availability(to_markdown([entry], DEVICES))["firefox"]
    assert row["WebGPU adapter"] == "none: navigator.gpu is missing"
    assert row["fallback"] == "-"
    assert row["shader-f16"] == "no"
    assert row["maxBufferSize"] == "-"


def test_pipe_in_webnn_error_does_not_break_columns(markdown: str) -> None:
    chrome_line = next(line for line in sections(markdown)["WebGPU and WebNN availability"]
                       if line.startswith("| chrome "))
    assert column_bars(chrome_line) == len(AVAILABILITY_HEAD) + 1
    assert GPU_ERROR not in markdown  # the raw '|' is not in the output


def test_pipe_in_webnn_absent_reason_does_not_break_columns() -> None:
    entry = copy.deepcopy(FIREFOX)
    entry["webnn"]["reason"] = "navigator.ml | missing"
    availability(to_markdown([entry], DEVICES))  # asserts the column count


def test_pipe_in_unavailable_reason_does_not_break_columns() -> None:
    entry = dict(SAFARI, status="failed", reason="browser failed to start: a | b")
    availability(to_markdown([entry], DEVICES))


def test_newline_in_webnn_error_does_not_split_the_row() -> None:
    entry = copy.deepcopy(CHROMIUM)
    entry["webnn"]["contexts"]["gpu"]["error"] = "UnknownError: first line\nsecond line"
    assert set(availability(to_markdown([entry], DEVICES))) == {"chrome"}


def test_data_types_table_has_rows_only_for_available_contexts(markdown: str) -> None:
    rows = data_types(markdown)
    assert [(r["browser"], r["device"]) for r in rows] == [("chrome", "cpu")]


def test_data_types_table_cells(markdown: str) -> None:
    (row,) = data_types(markdown)
    assert row["input"] == "float32, float16, int32, int8, uint8, int4"
    assert "uint4" in row["constant"].split(", ")
    assert row["matmul"] == "float32, float16"
    assert "int4" in row["dequantizeLinear input"].split(", ")
    assert row["dequantizeLinear input"] == "int32, int8, uint8, int4"
    assert row["dequantizeLinear scale"] == "float32, float16"
    assert "int4" in row["dequantizeLinear zeroPoint"].split(", ")
    assert row["quantizeLinear output"] == "-"


def test_no_data_types_section_without_an_available_context() -> None:
    md = to_markdown([FIREFOX, SAFARI], DEVICES)
    assert list(sections(md)) == ["WebGPU and WebNN availability"]


def test_webnn_columns_follow_devices_argument() -> None:
    md = to_markdown([CHROMIUM], ("gpu", "npu"))
    header, rows = table(sections(md)["WebGPU and WebNN availability"])
    assert header[-2:] == ["WebNN gpu", "WebNN npu"]
    row = dict(zip(header, rows[0], strict=True))
    assert row["WebNN gpu"].startswith("no: NotSupportedError")
    assert row["WebNN npu"] == "no:"  # no context probed for npu
    assert "WebNN data types (opSupportLimits)" not in sections(md)


def test_write_produces_strict_json_and_markdown(tmp_path: Path) -> None:
    entries = copy.deepcopy(ENTRIES)
    entries[0]["probe"]["webgpu"]["limits"]["maxBufferSize"] = float("nan")
    entries[1]["probe"]["webgpu"]["limits"]["maxBufferSize"] = float("inf")
    directory = tmp_path / "caps" / "nested"
    json_path, md_path = capabilities.write(entries, DEVICES, directory)
    assert json_path == directory / "capabilities.json"
    assert md_path == directory / "capabilities.md"

    def reject(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    doc = json.loads(json_path.read_text(), parse_constant=reject)
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["webnn_devices"] == list(DEVICES)
    assert [b["browser"] for b in doc["browsers"]] == ["chrome", "firefox", "safari"]
    assert doc["browsers"][2] == SAFARI
    assert doc["browsers"][0]["webnn"]["contexts"]["cpu"]["limits"] == CPU_LIMITS
    assert doc["browsers"][0]["probe"]["webgpu"]["limits"]["maxBufferSize"] is None
    assert doc["browsers"][1]["probe"]["webgpu"]["limits"]["maxBufferSize"] == "inf"
    assert isinstance(doc["machine"], dict)
    assert doc["created_utc"].endswith("Z")
    assert md_path.read_text() == to_markdown(entries, DEVICES)
    # the caller's entries are not changed by writing them
    assert entries[1]["probe"]["webgpu"]["limits"]["maxBufferSize"] == float("inf")
