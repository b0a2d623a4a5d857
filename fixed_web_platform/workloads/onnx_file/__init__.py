"""The ``onnx`` workload kind: any ONNX file a user brings (``--model PATH.onnx``, or a folder
holding one), run by ONNX Runtime Web alone (the harness's own engines run the architectures
they know and refuse it), swept over the precision variants people ship (variants.py), judged
against onnxruntime on the CPU provider (reference.py).

graph.py: what is read of the file; inputs.py: what it is fed; variants.py: fp32, fp16, q8/q4/q2,
q4f16, int8-qdq; reference.py: the references and the kernel tolerance; prepared.py: a run
prepared in Python and its figures; workload.py: the workload.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from ...models.rules import load_rules
from ...precision.quantizers import DEFAULT_QUANTIZER
from ..base import Column, KindTiming, PageIterations, WorkloadKind
from ..model_columns import MODEL_COLUMNS, MODEL_IDENTITY
from .graph import OnnxFileError, is_onnx_model
from .inputs import parse_dims, parse_id_range
from .variants import WIDTHS
from .workload import OnnxFileWorkload


class OnnxFileKind(WorkloadKind):
    name = OnnxFileWorkload.kind
    kind_timing = KindTiming(warmup=0, min_iterations=10, steady_cap_s=60.0)
    """A file's run: from microseconds (one MatMulNBits node, timed in batches) to PP-OCRv5's
    recognizer's 32-40 ms on WebAssembly and 6-49 s on a software WebGPU adapter: 60 s hold 10
    of a 6 s pass."""
    columns = (
        *MODEL_COLUMNS,
        Column("onnx_sha256", str, "ONNX files: the first 16 hex digits of the file's SHA-256."),
        Column("input_shapes", str, "ONNX files: every input's shape as fed ('x:1x3x48x320')."),
        Column("nodes", int, "ONNX files: nodes in the variant's graph."),
        Column("nodes_quantized", int, "ONNX files: weight nodes (MatMul, Gemm, Conv) the variant holds "
                                       "below float32."),
        Column("nodes_placed", int, "ONNX files: nodes in ONNX Runtime Web's placement log (0: the "
                                    "provider took the whole graph, no node was listed)."),
        Column("nodes_fallback", int, "ONNX files: nodes ONNX Runtime Web placed on another provider than "
                                      "the one asked (its CPU provider); listed in samples.jsonl. At least 1 "
                                      "when the provider refused a session without CPU fallback, even where "
                                      "ORT's placement log lists no node (nodes_placed 0)."),
        Column("outputs_cosine_min", float, "ONNX files: the lowest cosine of a float output with fp32's "
                                            "(onnxruntime CPU, the user's file)."),
        Column("top1_vs_fp32", float, "ONNX files: share of positions of class-score outputs (float, rank 2 "
                                      "or 3, last dimension >= 2) whose top class is one fp32 ranks first."),
        Column("output_figures", str, "ONNX files: per output vs fp32: cosine, rel_rms, max_abs, top1."),
    )
    identity = (*MODEL_IDENTITY, "onnx_sha256", "input_shapes")

    def from_json(self, doc: Mapping[str, Any]) -> OnnxFileWorkload:
        return OnnxFileWorkload.from_json(dict(doc))

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--dims", nargs="+", default=None, metavar="NAME=VALUE",
                            help="with --model FILE.onnx: the size of each symbolic input dimension")
        parser.add_argument("--id-range", default=None, metavar="LO:HI",
                            help="with --model FILE.onnx: integer inputs (ids) are drawn in [LO, HI) "
                                 "(default 0:100; inputs named *mask* are ones)")
        parser.add_argument("--q4f16", action="store_true",
                            help="with --model FILE.onnx: also the q4f16 variant at --bits 4 (float16, "
                                 "then 4-bit MatMulNBits)")
        parser.add_argument("--dtype", nargs="+", default=None, metavar="NAME",
                            help="with --model FILE.onnx: the variants to make, by name, each at its own bits "
                                 "(which --bits must include): fp32 fp16 q8 int8 uint8 (dynamic int8, as "
                                 "transformers.js names them) q8-nbits q4 q4f16 q2 (MatMulNBits) bnb4 (NF4), "
                                 "int8-qdq (with --act-bits 8), held (the harness's --weight-quant quantizers as "
                                 "MatMulNBits, at 8/4/2 bits; also planned when --weight-quant names a quantizer "
                                 "other than the default); without it --bits picks fp32 fp16 q8-nbits q4 q2. "
                                 "With --engine transformersjs: its dtypes (fp32 fp16 q8 int8 uint8 q4 q4f16 "
                                 "bnb4, and held: the harness's --weight-quant quantizers as the q4 file); "
                                 "without it --bits picks those of that width")

    def model_workloads(self, model: str, options: Mapping[str, Any]) -> tuple[OnnxFileWorkload]:
        inputs = options.get("inputs")
        if inputs is not None and not str(inputs).endswith(".npz"):
            raise OnnxFileError(f"--inputs {inputs}: an ONNX file's inputs are an .npz file of named arrays")
        for flag in ("mixed_precision", "random_weights"):
            if options.get(flag) not in (None, False):
                raise OnnxFileError(f"--{flag.replace('_', '-')} is not taken by ONNX files (their precision "
                                    "is the variant, by --bits, or --precision-rules per MatMul)")
        rules_file = options.get("precision_rules")
        rules = load_rules(rules_file) if rules_file is not None else ()
        dtypes, bits = tuple(options.get("dtype") or ()), options.get("bits")
        unplanned = [d for d in dtypes if d in WIDTHS and bits and WIDTHS[d] not in bits]
        if unplanned:
            raise OnnxFileError(f"--dtype {unplanned[0]} runs at {WIDTHS[unplanned[0]]} bits, which --bits "
                                f"{' '.join(map(str, bits))} leaves out")
        calibration = options.get("calibration")
        if calibration is not None and not str(calibration).endswith(".npz"):
            raise OnnxFileError(f"--calibration {calibration}: an ONNX file's calibration inputs are an .npz file "
                                "of named arrays, as --inputs")
        quantizers = options.get("weight_quant") or ()
        return (OnnxFileWorkload.create(
            model, dims=parse_dims(options.get("dims")), id_range=parse_id_range(options.get("id_range")),
            inputs_file=inputs, seed=int(options.get("seed") or 0), q4f16=bool(options.get("q4f16")),
            dtypes=dtypes, held=any(q != DEFAULT_QUANTIZER for q in quantizers), calibration=calibration,
            rules=rules, rules_name=str(rules_file or "")),)

    def shape(self, row: Mapping[str, Any]) -> str:
        return str(row.get("input_shapes") or "?")

    def reply_fields(self, payload: Mapping[str, Any], max_iterations: int) -> dict[str, Any]:
        """Where ORT placed the graph's nodes: ``nodes_placed`` (count in its log),
        ``fallback_nodes`` (['<op> (<node>)@<provider>', ...], those off the asked provider) and
        ``nodes_off_at_least``: how many nodes surely ran off it. A provider that refused a session
        without CPU fallback (the reply's ``fallback``) proves at least one did, whatever the log lists."""
        from ...errors import PageDataError

        placed = payload.get("nodes_placed", 0)
        fallback = payload.get("fallback_nodes", [])
        if not isinstance(placed, int) or isinstance(placed, bool) or placed < 0:
            raise PageDataError("nodes_placed is not a count")
        if not isinstance(fallback, list) or not all(isinstance(n, str) and len(n) < 400 for n in fallback):
            raise PageDataError("fallback_nodes is not a list of node texts")
        if len(fallback) > placed:
            raise PageDataError(f"{len(fallback)} fallback nodes of {placed} placed")
        refused = isinstance(payload.get("fallback"), str) and bool(payload["fallback"].strip())
        return {"nodes_placed": placed, "fallback_nodes": fallback,
                "nodes_off_at_least": max(len(fallback), int(refused))}

    def speed_figures(self, workload: Any, pages: Sequence[PageIterations]) -> dict[str, Any]:
        """Placement counts of the first page load (each load makes the same session)."""
        if not pages:
            return {}
        first = pages[0].fields
        return {"nodes_placed": first.get("nodes_placed"),
                "nodes_fallback": first.get("nodes_off_at_least", len(first.get("fallback_nodes", ())))}


ONNX_FILE = OnnxFileKind()

__all__ = ["ONNX_FILE", "OnnxFileError", "OnnxFileKind", "OnnxFileWorkload", "is_onnx_model"]
