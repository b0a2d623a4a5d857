"""The tables a sweep prints when it ends, one per workload kind (its entry in report/sections.py
names its table); a kind without one gets the shared core table. Each shows the run's steady-state
class beside its latency figure, marked where there is no steady state (``class_columns``;
report/steady.py says how)."""

from __future__ import annotations

from collections.abc import Sequence

from ..precision.quantizers import DEFAULT_QUANTIZER
from ..results.rows import ResultRow
from .markdown import markdown_lines
from .steady import COLUMN, terminal_class, terminal_judged, terminal_marked


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def bits_label(r: ResultRow) -> str:
    """'8', '8 a8 minmax' for int8 activations calibrated by that observer, '4 Q4_0' for an
    engine's named weight format, '8 per-channel' for per-channel weights, '4 hqq' for weights
    made by a quantizer other than the default, '[gemm_qdq]' for the
    WebNN graph form built, 'cache:simple' for ONNX Runtime's WebGPU buffer cache mode."""
    fmt = f" {r.format_requested}" if r.format_requested else ""
    group = " per-channel" if r.granularity == "per-channel" else ""
    group += f" {r.weight_quant}" if r.weight_quant not in ("", DEFAULT_QUANTIZER) else ""
    form = f" [{r.graph_form}]" if r.graph_form else ""
    form += f" cache:{r.buffer_cache}" if r.buffer_cache else ""
    return (str(r.bits_requested) + fmt + group + (f" a{r.act_bits} {r.observer}" if r.act_bits != 32 else "")
            + form)


def class_columns(header: list[str], body: list[list[str]], rows: Sequence[ResultRow], figure: str, *,
                  column: str = "steady_class", name: str = COLUMN, after: bool = False
                  ) -> tuple[list[str], list[list[str]]]:
    """The table with the rows' class of ``column`` in a column ``name`` before the column
    ``figure`` (after it with ``after``), that figure marked by it; unchanged when no row has a
    class (a sweep without an ok run, rows from before the steady-state protocol)."""
    if not terminal_judged(rows, column):
        return header, body
    at = header.index(figure)
    where = at + 1 if after else at
    body = [[*(cells[:at]), terminal_marked(cells[at], r, column), *cells[at + 1:]] for cells, r in zip(body, rows)]
    return ([*header[:where], name, *header[where:]],
            [[*cells[:where], terminal_class(r, column), *cells[where:]] for cells, r in zip(body, rows)])


def format_model_table(rows: Sequence[ResultRow]) -> str:
    if not rows:
        return ""
    header = ["browser", "engine", "platform", "on", "model", "bits", "plan", "outcome", "median ms",
              "tokens/s", "weight MiB", "cos min", "cos mean", "Spearman", "top-1", "kernel err"]
    body = [[
        r.browser_key, r.engine_key, r.platform, r.executed_on or "-", f"{r['model']} {r['batch_size']}x{r['seq_len']}",
        bits_label(r), r["precision_plan"] or "-", r.outcome, _fmt(r.latency_ms_median, ".1f"),
        _fmt(r["tokens_per_s"], ".0f"), _fmt(None if r.weight_bytes is None else r.weight_bytes / 2**20, ".1f"),
        _fmt(r["cosine_min"], ".5f"), _fmt(r["cosine_mean"], ".5f"), _fmt(r["spearman"], ".4f"),
        _fmt(r["top1_agreement"], ".3f"), _fmt(r.rel_error_vs_dequantized, ".1e"),
    ] for r in rows]
    return "\n".join(markdown_lines(*class_columns(header, body, rows, "median ms")))


def format_matmul_table(rows: Sequence[ResultRow]) -> str:
    header = ["browser", "engine", "platform", "on", "shape", "bits", "exec", "outcome", "median ms",
              "p10-p90 ms", "GFLOP/s", "rel err vs float", "kernel err"]
    body = [[
        r.browser_key, r.engine_key, r.platform, r.executed_on or "-", f"{r['m']}x{r['k']}x{r['n']}",
        bits_label(r),
        "-" if r.bits_executed is None else str(r.bits_executed), r.outcome,
        _fmt(r.latency_ms_median, ".3f"),
        "-" if r.latency_ms_p10 is None else f"{r.latency_ms_p10:.3f}-{r.latency_ms_p90:.3f}",
        _fmt(r.gflops, ".2f"), _fmt(r.rel_error_vs_float, ".2e"), _fmt(r.rel_error_vs_dequantized, ".1e"),
    ] for r in rows]
    return "\n".join(markdown_lines(*class_columns(header, body, rows, "median ms")))


def core_table(rows: Sequence[ResultRow]) -> str:
    """What every row has: for a kind without a table of its own."""
    header = ["browser", "engine", "platform", "on", "workload", "bits", "exec", "outcome", "median ms"]
    body = [[r.browser_key, r.engine_key, r.platform, r.executed_on or "-", r.workload, bits_label(r),
             "-" if r.bits_executed is None else str(r.bits_executed), r.outcome,
             _fmt(r.latency_ms_median, ".3f")] for r in rows]
    return "\n".join(markdown_lines(*class_columns(header, body, rows, "median ms")))
