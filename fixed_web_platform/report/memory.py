"""The report's "Memory" section: per workload kind, each engine's setting at each precision, the
weights as held (computed: the bytes handed to the engine) beside what was measured: the WebGPU
buffers live at once, the WebAssembly memory, the bytes handed to WebNN as constants (web/meter.js,
every engine alike) and the browser's process tree (psutil). A blank cell is a figure the run did
not have (no device, no memory of that kind), never a zero.
"""

from __future__ import annotations

import pandas as pd

from .markdown import fmt_bytes, how_to_read_html, how_to_read_markdown, html_table, markdown_table, number

MEASURED = {"gpu_peak_bytes": "GPU peak", "gpu_measured_peak_bytes": "GPU while timed",
            "gpu_largest_buffer_bytes": "largest GPU buffer", "wasm_peak_bytes": "wasm peak",
            "webnn_constant_bytes": "WebNN constants", "proc_rss_peak_bytes": "process RSS peak"}
"""The measured columns the section shows, in this order, and their headers."""
NOTE = ("Memory: 'weights held' is computed (the bytes of the weights handed to the engine: packed "
        "values, scales and zero points); every other column is measured in the run. GPU peak: the most "
        "bytes of WebGPU buffers live at once in the page and its workers, from createBuffer to destroy "
        "or collection, load and upload staging included; 'GPU while timed' the same over the timed "
        "iterations only. wasm peak: the WebAssembly memories' bytes (a memory never shrinks). WebNN "
        "constants: bytes handed to the browser's graph builder (it may repack them). Process RSS peak: "
        "the browser's whole process tree, sampled every 100 ms. Each the median over the "
        "configuration's runs; compare within one table.")


def memory_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One line per configuration that has a measured memory figure, by kind, setting and bits."""
    shown = [c for c in MEASURED if c in summary]
    if summary.empty or not shown or not summary[shown].notna().any().any():
        return pd.DataFrame()
    lines = []
    keep = summary[summary[shown].notna().any(axis=1)]
    order = keep.sort_values(["kind", "workload", "browser", "engine", "platform", "bits_requested"],
                             ascending=[True, True, True, True, True, False], kind="stable")
    for _, row in order.iterrows():
        line = {"kind": row["kind"], "workload": f"{row['workload']} {row.get('shape', '')}".strip(),
                "setting": " ".join(str(v) for v in (row["browser"], f"{row['engine']}/{row['platform']}",
                                                     row.get("buffer_cache", "")) if v and str(v) != "nan"),
                "precision": f"{int(row['bits_requested'])}-bit",
                "weights held": fmt_bytes(row.get("weight_bytes")) or ""}
        for column in shown:
            value = number(row.get(column))
            line[MEASURED[column]] = fmt_bytes(value) if value is not None else ""
        lines.append(line)
    return pd.DataFrame(lines)


def memory_section(summary: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(Markdown lines, HTML parts) of the section; nothing when no run measured memory."""
    table = memory_table(summary)
    if table.empty:
        return [], []
    md = ["## Memory: held and measured", "", markdown_table(table), "", *how_to_read_markdown([NOTE])]
    parts = ['<h2 id="memory">Memory: held and measured</h2>', html_table(table), how_to_read_html([NOTE])]
    return md, parts
