"""Capability matrix: what each browser's WebGPU adapter and WebNN contexts say they support.

Launches each browser once, opens the harness page on a 'probe' job, and writes JSON plus a
Markdown table. Browsers that are not installed appear with the reason.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..browsers import BrowserUnavailable, launch
from ..errors import OneLineArgumentParser, UsageError, first_line
from ..harness.page import visit_page
from ..harness.runner import PROBE_TIMEOUT_S, SweepOptions, resolve_browser
from ..harness.server import JobServer
from ..page_protocol import probe_spec
from ..precision.webnn_precision import data_types
from ..probes.adapter import adapter_label
from ..report.markdown import markdown_lines
from ..results.rows import utc_now
from ..results.writer import json_safe, machine_info, new_results_dir, write_atomically
from ..vocabulary import SCHEMA_VERSION, WEBNN_DEVICES, BrowserName, Outcome
from .run import add_launch_options, browser_arg, launch_options

FEATURES = ("shader-f16", "timestamp-query", "subgroups")
WGSL_FEATURES = ("packed_4x8_integer_dot_product",)
LIMITS = ("maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize")
WEBNN_OPERANDS = (
    ("input", "input", ""),
    ("constant", "constant", ""),
    ("matmul", "matmul", "a"),
    ("dequantizeLinear input", "dequantizeLinear", "input"),
    ("dequantizeLinear scale", "dequantizeLinear", "scale"),
    ("dequantizeLinear zeroPoint", "dequantizeLinear", "zeroPoint"),
    ("quantizeLinear output", "quantizeLinear", "output"),
)


async def probe_browser(server: JobServer, name: BrowserName, devices: Sequence[str],
                        options: SweepOptions) -> dict[str, Any]:
    entry: dict[str, Any] = {"browser": name.value}
    resolved = resolve_browser(name, options)
    if isinstance(resolved, BrowserUnavailable):
        return entry | {"status": Outcome.UNAVAILABLE.value, "reason": str(resolved)}
    entry |= {"binary": str(resolved.binary), "driver_kind": resolved.driver_kind.value}
    try:
        session = await asyncio.to_thread(launch, resolved)
    except Exception as exc:  # noqa: BLE001
        return entry | {"status": Outcome.FAILED.value,
                        "reason": f"browser failed to start: {first_line(exc)}"}
    try:
        reply = await visit_page(server, session, probe_spec(list(devices)), {}, PROBE_TIMEOUT_S)
    finally:
        await asyncio.to_thread(session.close)
    entry["version"] = session.version
    if reply.outcome is not Outcome.OK or not isinstance(reply.payload, dict):
        return entry | {"status": reply.outcome.value, "reason": reply.reason}
    payload = reply.payload
    return entry | {
        "status": Outcome.OK.value,
        "probe": payload.get("probe") if isinstance(payload.get("probe"), dict) else {},
        "webnn": payload.get("webnn") if isinstance(payload.get("webnn"), dict) else {},
    }


async def collect(browsers: Sequence[BrowserName], devices: Sequence[str],
                  options: SweepOptions = SweepOptions()) -> list[dict[str, Any]]:
    """``options``: the binaries, drivers and extra flags a sweep would launch each browser with."""
    async with JobServer() as server:
        return [await probe_browser(server, b, devices, options) for b in browsers]


def _types(limits: dict[str, Any], op: str, operand: str) -> str:
    return ", ".join(data_types(limits, op, operand)) or "-"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def to_markdown(entries: Sequence[dict[str, Any]], devices: Sequence[str]) -> str:
    head = ["browser", "version", "WebGPU adapter", "fallback", *FEATURES, *WGSL_FEATURES,
            *LIMITS, *(f"WebNN {d}" for d in devices)]
    rows: list[list[str]] = []
    details: list[list[str]] = []
    for e in entries:
        if e.get("status") != "ok":
            cells = [e["browser"], e.get("version", "-"), f"{e.get('status')}: {e.get('reason', '')}"]
            rows.append(cells + ["-"] * (len(head) - len(cells)))
            continue
        gpu = e["probe"].get("webgpu") or {}
        adapter = gpu.get("adapter") or {}
        features = set(gpu.get("features") or [])
        wgsl = set(gpu.get("wgslLanguageFeatures") or [])
        limits = gpu.get("limits") or {}
        contexts = (e["webnn"].get("contexts") or {}) if e["webnn"].get("present") else {}
        cells = [
            e["browser"], e.get("version", ""),
            adapter_label(gpu, mark_fallback=False) or f"none: {gpu.get('reason', '')}",
            _yes(bool(adapter.get("isFallbackAdapter"))) if gpu.get("available") else "-",
            *(_yes(f in features) for f in FEATURES),
            *(_yes(f in wgsl) for f in WGSL_FEATURES),
            *(str(limits.get(k, "-")) for k in LIMITS),
        ]
        for d in devices:
            if not e["webnn"].get("present"):
                cells.append(f"no: {e['webnn'].get('reason', '')}")
                continue
            ctx = contexts.get(d) or {}
            cells.append("yes" if ctx.get("available") else f"no: {ctx.get('error', '')}")
            if ctx.get("available"):
                limits_d = ctx.get("limits") or {}
                details.append([e["browser"], d, *(_types(limits_d, op, operand)
                                                   for _, op, operand in WEBNN_OPERANDS)])
        rows.append(cells)
    lines = ["## WebGPU and WebNN availability", "", *markdown_lines(head, rows)]
    if details:
        cols = ["browser", "device", *(label for label, _, _ in WEBNN_OPERANDS)]
        lines += ["", "## WebNN data types (opSupportLimits)", "", *markdown_lines(cols, details)]
    return "\n".join(lines) + "\n"


def write(entries: Sequence[dict[str, Any]], devices: Sequence[str], directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "capabilities.json"
    md_path = directory / "capabilities.md"
    doc = {"schema_version": SCHEMA_VERSION, "created_utc": utc_now(), "machine": machine_info(),
           "webnn_devices": list(devices), "browsers": list(entries)}
    json_path.write_text(json.dumps(json_safe(doc), indent=2) + "\n")
    md_path.write_text(to_markdown(entries, devices))
    return json_path, md_path


def build_parser() -> OneLineArgumentParser:
    p = OneLineArgumentParser(
        prog="run_real_webgpu_webnn.py capabilities",
        description="Launch each browser once and write its WebGPU/WebNN capability matrix.",
    )
    p.add_argument("--browser", nargs="+", type=browser_arg, default=list(BrowserName),
                   help="browsers to probe (default: every one; those not installed are listed with why)")
    p.add_argument("--webnn-device", nargs="+", choices=list(WEBNN_DEVICES), default=list(WEBNN_DEVICES),
                   help="WebNN deviceTypes to ask for a context on")
    add_launch_options(p)
    p.add_argument("--output-dir", type=Path, default=None,
                   help="where to write capabilities.json and capabilities.md (default "
                        "results/<UTC time>_capabilities/)")
    return p


def capabilities_command(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    browsers = list(dict.fromkeys(args.browser))
    devices = list(dict.fromkeys(args.webnn_device))
    try:
        options = SweepOptions(**launch_options(args, browsers))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out_dir = args.output_dir or new_results_dir("capabilities")
    try:  # before any browser starts: a folder we cannot write is bad input
        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(out_dir / "capabilities.json", "{}\n")
    except OSError as exc:
        raise UsageError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    entries = asyncio.run(collect(browsers, devices, options))
    json_path, md_path = write(entries, devices, out_dir)
    print(md_path.read_text())
    print(f"capabilities: {json_path} {md_path}")
    return 1 if any(e["status"] in ("failed", "crash", "timeout") for e in entries) else 0
