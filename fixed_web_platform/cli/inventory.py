"""`inventory PATH [PATH ...] [--json]`: what each ONNX file holds, read from its nodes
(formats/onnx_inventory.py), and whether that is what its name promises. A folder is searched
for .onnx files (a transformers.js model folder's ``onnx/``); no browser starts, and external
data is not loaded. Exit 0 with a table (or JSON lines); a path that does not exist, holds no
.onnx file or is not an ONNX model: one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import OneLineArgumentParser, UsageError, first_line
from ..formats import onnx_inventory

MIB = 2**20


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(
        prog="run_real_webgpu_webnn.py inventory",
        description="What each ONNX file holds, read from its nodes: weight matmuls by bits, weight nodes by "
                    "kind, MiB by precision, and a flag where the name promises a precision (model_q4.onnx, "
                    "an int4 build) that most of its weight matmuls do not hold. No browser.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="ONNX files, or folders searched for .onnx files (e.g. a transformers.js folder)")
    parser.add_argument("--json", action="store_true", help="one JSON object per file instead of the table")
    return parser


def onnx_files(paths: list[Path]) -> list[Path]:
    """The .onnx files the paths name, in order (a folder's sorted)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(path.rglob("*.onnx"))
            if not inside:
                raise UsageError(f"{path}: no .onnx file in this folder")
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))


def _read(path: Path) -> onnx_inventory.Inventory:
    try:
        return onnx_inventory.read(path)
    except Exception as exc:  # noqa: BLE001 - onnx's parse errors vary; the user gets the first line
        raise UsageError(f"{path}: not an ONNX model ({first_line(exc)})") from None


def inventory_command(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    files = onnx_files(args.paths)
    reads = [(path, inv, onnx_inventory.promise(path.name, inv)) for path in files for inv in [_read(path)]]
    if args.json:
        for path, inv, flag in reads:
            print(json.dumps({"file": str(path), **inv.to_json(), "promise": flag}))
        return 0
    print("| file | weight matmuls by bits | weight nodes | MiB by precision | name's promise |")
    print("|---|---|---|---|---|")
    for path, inv, flag in reads:
        bits = ", ".join(f"{n} at {b}" for b, n in sorted(inv.matmul_bits().items(), key=lambda kv: -kv[1]))
        mib = ", ".join(f"{p} {size / MIB:.1f}" for p, size in inv.bytes_by_precision().items() if size >= MIB / 10)
        shown = f"**{flag}**" if flag else "holds"
        print(f"| {path} | {bits or '-'} | {inv.text() or '-'} | {mib or '-'} | {shown} |")
    flagged = sum(1 for _, _, flag in reads if flag)
    print(f"\n{len(reads)} file{'s' if len(reads) != 1 else ''}; "
          f"{flagged} whose name promises a precision most of its weight matmuls do not hold")
    return 0
