"""The files to ship: each file the report picks (its first screen's rule: per browser, engine and
provider, the fastest precision whose accuracy meets the kind's bar) written into the report's
folder, for the picks of work a user brings as files:

- an ONNX file's variant (ONNX Runtime Web): ``ship/<file>.<variant>.onnx``, with its external
  data files where it has any;
- a transformers.js dtype (any model, the user's folder or the harness's): a folder in the
  library's layout, ``ship/<model>.<dtype>/`` (config, tokenizer, ``onnx/<graph><suffix>.onnx``),
  that its pipelines load under the usual dtype name (the held variant as ``q4``);

each beside a card ``ship/<name>.md``: what it holds (its inventory, read from its nodes), its
bytes, how it was made, its accuracy and every latency this sweep measured of it, per browser and
provider. The file is made again from the run's plan (plan.json: the model, its inputs and
calibration, the run's bits, block and quantizer) by the same content-addressed make the run
used, so it is the file that ran; one that cannot be made again is a line saying why.
"""

from __future__ import annotations

import html
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..formats import onnx_inventory
from ..formats.transformersjs_folder import FolderError
from ..plan import PLAN_FILE, load_plan
from ..precision.quantizers import QUANTIZERS
from ..run_spec import RunSpec
from ..values import number
from ..vocabulary import HELD_FORMAT, EngineName, Platform
from ..engines.ort.onnx import TABLE_PROVIDERS
from ..workloads.onnx_file import OnnxFileError, OnnxFileWorkload, graph
from ..workloads.onnx_file.variants import VariantRefused, variant_for
from .glance import Glance, median_text, picks, setting_name
from .onnx_files import ONNX_GLANCE
from .steady import steady_text

SHIP_DIR = "ship"
VARIANT_KEY = ("sweep", "engine", "kind", "workload", "shape", "inputs", "format_requested", "weight_quant",
               "bits_requested", "block_size", "act_bits", "observer")
"""Summary rows with these equal ran one file (on several browsers and providers)."""
SHIP_NOTE = ("Each file is a pick above (per browser, engine and provider), made again from the run's plan by the "
             "same content-addressed make the run used: an ONNX file's variant, or a folder in transformers.js's "
             "layout its pipelines load under the dtype named. Its card says what it holds, how it was made, its "
             "accuracy and every latency this sweep measured of it.")


@dataclass(frozen=True)
class Shipped:
    """One pick: its file (or folder) and card, or why none was written."""

    name: str
    """'<file>.<variant>' ('minilm.held-gptq-4bit', 'all-MiniLM-L6-v2.q4')."""
    picked_for: tuple[str, ...]
    """The settings it was picked for ('chrome · ort wasm')."""
    path: Path | None = None
    card: Path | None = None
    why_not: str = ""

    @property
    def line(self) -> str:
        where = ", ".join(self.picked_for)
        if self.path is None:
            return f"{self.name} (picked for {where}): not written: {self.why_not}"
        shown = f"{self.path.name}/" if self.path.is_dir() else self.path.name
        return f"{SHIP_DIR}/{shown} (picked for {where}; card {SHIP_DIR}/{self.card.name if self.card else '-'})"


def ship_name(run: RunSpec) -> str:
    """'<model>.<variant>': the model's own name (a folder's or file's last part, never a path); an
    ONNX file's held variant per provider ('.webgpu': its tables as the provider runs them)."""
    provider = f".{run.platform}" if isinstance(run.workload, OnnxFileWorkload) and \
        run.weight_format == HELD_FORMAT else ""
    return f"{Path(str(run.workload.name)).name}.{variant_label(run)}{provider}"


def variant_label(run: RunSpec) -> str:
    """'q4', 'fp32', 'held-gptq-4bit': the variant or dtype and, for the held one, its quantizer and bits."""
    name = variant_for(run.bits, run.act_bits, run.weight_format) if isinstance(run.workload, OnnxFileWorkload) \
        else run.weight_format
    return f"{name}-{run.weight_quant}-{run.bits}bit" if name == HELD_FORMAT else name


def _same(a: Any, b: Any) -> bool:
    na, nb = number(a), number(b)
    if na is not None or nb is not None:
        return na == nb
    return str(a if isinstance(a, str) else "") == str(b if isinstance(b, str) else "")


def _run_of(plan: Sequence[RunSpec], row: pd.Series) -> RunSpec | None:
    """The first planned run of the picked configuration (its row's precision columns as the
    result row writes them: results/rows.py)."""
    for run in plan:
        block = run.block_size if run.bits <= 8 and run.granularity == "block" else 0
        if all(_same(a, row.get(c)) for a, c in (
                (run.engine, "engine"), (run.platform, "platform"), (run.workload.kind, "kind"),
                (run.workload.name, "workload"),
                (run.weight_format, "format_requested"), (run.quantized_by, "weight_quant"),
                (run.bits, "bits_requested"), (block, "block_size"), (run.act_bits, "act_bits"),
                (run.observer, "observer"))) and _same(_fed(run.workload), row.get("inputs")):
            return run
    return None


def _fed(workload: Any) -> str:
    """A workload's ``inputs`` column (the row's), '' where it cannot be read again."""
    try:
        return str(workload.row_fields(32, 32).get("inputs", ""))
    except (OnnxFileError, ValueError, OSError):  # its inputs file is gone
        return ""


def _shippable(summary: pd.DataFrame) -> list[tuple[Glance, pd.DataFrame]]:
    """The picks' pools: ONNX files' rows (their bar), and each kind's transformers.js rows (the kind's bar)."""
    from .sections import SECTIONS

    if summary.empty:
        return []
    pools = []
    onnx = summary[summary["kind"] == OnnxFileWorkload.kind]
    if not onnx.empty:
        pools.append((ONNX_GLANCE, onnx))
    tjs = summary[(summary["engine"].str.partition("@")[0] == EngineName.TRANSFORMERSJS.value) & (summary["kind"] != OnnxFileWorkload.kind)]
    for kind, rows in tjs.groupby("kind", sort=False):
        part = SECTIONS.get(str(kind))
        if part is not None:
            pools.append((part.glance, rows))
    return pools


def ship_files(directories: Sequence[Path], names: Sequence[str], summary: pd.DataFrame, out_dir: Path
               ) -> list[Shipped]:
    """Write each pick and its card into ``out_dir`` / SHIP_DIR (module doc)."""
    pools = _shippable(summary)
    if not pools:
        return []
    plans = {name: load_plan(d)[0] for d, name in zip(directories, names) if (Path(d) / PLAN_FILE).is_file()}
    shipped = []
    for glance, mine in pools:
        show_sweep = mine["sweep"].nunique() > 1
        chosen: dict[tuple[str, ...], tuple[pd.Series, list[str]]] = {}
        for pick in picks(mine, glance):
            if pick.chosen is not None:  # an ONNX file's held file differs by provider (its tables)
                held = pick.chosen.get("format_requested") == HELD_FORMAT
                key = tuple(str(pick.chosen.get(c)) for c in (*VARIANT_KEY, *(["platform"] if held else [])))
                chosen.setdefault(key, (pick.chosen, []))[1].append(pick.setting)
        for row, settings in chosen.values():
            run = _run_of(plans.get(row["sweep"], ()), row)
            if run is None:
                shipped.append(Shipped(f"{row['workload']}.{row['format_requested']}", tuple(settings),
                                       why_not="its run is not in the folder's plan.json"))
                continue
            measured = mine[[all(_same(r.get(c), row.get(c)) for c in VARIANT_KEY) for _, r in mine.iterrows()]]
            card = Card(glance, row, measured, tuple(settings), show_sweep)
            write = _write_onnx if isinstance(run.workload, OnnxFileWorkload) else _write_tjs
            shipped.append(write(run, card, Path(out_dir) / SHIP_DIR))
    return shipped


@dataclass(frozen=True)
class Card:
    """What a card says of a pick besides its file: the bar, the row, where it was measured."""

    glance: Glance
    row: pd.Series
    measured: pd.DataFrame
    settings: tuple[str, ...]
    show_sweep: bool

    def text(self, name: str, file_line: str, made: str, holds: str, weight_bytes: float | None,
             calibration: str) -> str:
        accuracy = self.glance.accuracy
        f32 = number(self.row.get("weight_bytes_f32"))
        value = number(self.row.get(accuracy.column))
        lines: list[str | None] = [
            f"# {name}", "",
            f"Picked for {', '.join(self.settings)}: the fastest precision whose {accuracy.label} meets the bar "
            f"({accuracy.bar_text}).", "",
            f"- **Files**: {file_line}",
            f"- **Made**: {made}",
            f"- **Holds**: {holds}",
            (f"- **Weights**: {weight_bytes / 2**20:.2f} MiB"
             + (f" ({f32 / weight_bytes:.1f}x less than float32's {f32 / 2**20:.2f} MiB)"
                if f32 and f32 / weight_bytes >= 1.05 else "")) if weight_bytes else None,
            f"- **Calibrated on**: {calibration}" if calibration else None,
            f"- **Accuracy**: {accuracy.label} {accuracy.text(value)}, inputs {self.row.get('inputs') or '-'}",
            "", "## Measured in this sweep", "",
            f"| setting | median ms (p10-p90) | steady | {accuracy.label} |", "|---|---|---|---|",
        ]
        for _, r in self.measured.iterrows():
            lines.append(f"| {setting_name(r, self.show_sweep)} | {median_text(r)} | {steady_text(r)} | "
                         f"{accuracy.text(number(r.get(accuracy.column)))} |")
        return "\n".join(line for line in lines if line is not None) + "\n"


def _write_onnx(run: RunSpec, card: Card, folder: Path) -> Shipped:
    workload = run.workload
    assert isinstance(workload, OnnxFileWorkload)
    name = ship_name(run)
    try:
        if not workload.file.is_file() or graph.sha256(workload.file) != workload.sha256:
            raise OnnxFileError(f"{workload.file} is gone or changed since the sweep")
        variant = workload.variant(variant_for(run.bits, run.act_bits, run.weight_format), run.bits, run.block_size,
                                   run.observer, run.weight_quant, tables=run.platform in TABLE_PROVIDERS)
    except (OnnxFileError, VariantRefused) as exc:
        return Shipped(name, card.settings, why_not=str(exc))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.onnx"
    shutil.copyfile(variant.path, target)
    for location in variant.external:  # the graph names its data files: they keep their names
        shutil.copyfile(variant.path.parent / location, folder / location)
    size = sum(f.stat().st_size for f in (target, *(folder / loc for loc in variant.external)))
    data = f" with {', '.join(variant.external)}" if variant.external else ""
    files = f"{target.name}{data}, {size:,} bytes"
    made = f"from {workload.file} (sha256 {workload.sha256[:16]}) by {variant.tool}"
    calibrated = run.act_bits == 8 or variant.name == HELD_FORMAT and QUANTIZERS[run.weight_quant].calibrated
    path = folder / f"{name}.md"
    path.write_text(card.text(name, files, made, onnx_inventory.read(target).text(), variant.weight_bytes,
                              workload.calibration_label if calibrated else ""))
    return Shipped(name, card.settings, target, path)


def _write_tjs(run: RunSpec, card: Card, folder: Path) -> Shipped:
    from ..engines.registry import kind_runner

    name = ship_name(run)
    runner = kind_runner(run.engine, Platform(run.platform), run.workload.kind)
    try:
        prepared, made = runner.preparer(  # type: ignore[union-attr]
            run.workload, run.weight_format, run.seed, run.weight_quant)
    except (VariantRefused, FolderError, OnnxFileError, ValueError) as exc:
        return Shipped(name, card.settings, why_not=str(exc))
    target = folder / name
    if target.exists():
        shutil.rmtree(target)
    files = made.for_dtype(prepared.dtype)
    for relative, source in files.items():
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target / relative)
    size = sum(p.stat().st_size for p in files.values())
    support = made.support_files()
    onnx = ", ".join(sorted(set(files) - set(support)))  # the dtype's graphs and their data chunks
    file_line = (f"{target.name}/ ({onnx}; {len(support)} config and tokenizer files), {size:,} bytes; "
                 f"transformers.js loads it with dtype '{prepared.dtype}'")
    path = folder / f"{name}.md"
    calibrated = run.weight_format == HELD_FORMAT and QUANTIZERS[run.weight_quant].calibrated
    path.write_text(card.text(name, file_line, f"{made.made_by}", prepared.inventory.text(), prepared.weight_bytes,
                              run.workload.calibration_label if calibrated else ""))
    return Shipped(name, card.settings, target, path)


def ship_section(shipped: Sequence[Shipped]) -> tuple[list[str], list[str]]:
    """The report's "Files to ship" section (markdown lines, html parts); none without picks."""
    if not shipped:
        return [], []
    md = [f"## Files to ship ({SHIP_DIR}/)", "", SHIP_NOTE, "", *(f"- {s.line}" for s in shipped), ""]
    items = "".join(f"<li>{html.escape(s.line)}</li>" for s in shipped)
    return md, [f'<h2 id="ship">Files to ship ({SHIP_DIR}/)</h2>', f'<p class="note">{html.escape(SHIP_NOTE)}</p>',
                f"<ul>{items}</ul>"]
