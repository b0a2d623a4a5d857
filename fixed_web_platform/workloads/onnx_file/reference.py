"""The references an ONNX file's runs are judged by, from onnxruntime in Python on the CPU
provider:

- what precision costs: the fp32 file (the user's own) on the inputs fed;
- is the browser right: the same variant file the browser ran, on the same inputs.

Two CPU runs of one variant, with ORT's graph optimizations on and off, differ only by
arithmetic order and fusions; how far apart they land (``spread``) is what a correct provider's
own order may move the outputs too (a deep or saturating graph moves more, and int8 QDQ graphs
flip rounding steps). The kernel tolerance is a multiple of that spread, never below a floor for
the arithmetic the provider ran in.

Dynamic int8 graphs (``DynamicQuantizeLinear``: transformers.js's q8, int8, uint8) quantize each
activation tensor with a scale from its own minimum and maximum, so a last-bit difference in one
extreme moves every value of the tensor and the next layers' steps: implementations that are all
right land far apart (MiniLM's q8: ORT's CPU provider 0.065 from onnx's own reference evaluator,
Chrome's wasm 0.126 from ORT's CPU, each 0.26 from fp32). For them the spread is also measured
against onnx's reference evaluator (``evaluate``: numpy, the ops' definitions), the third
implementation; a graph is dynamic when its inventory says so (formats/onnx_inventory.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .graph import OnnxFileError

TOLERANCE_FLOOR = {"f32": 1e-3, "f16": 8e-2}
"""Relative RMS error over all float outputs vs the CPU run of the same variant below which a
provider is right whatever the graph: float32 arithmetic in another order through a deep graph,
or float16 arithmetic where the CPU provider casts float16 nodes up to float32 (ORT WebGPU's
float16 kernels landed 0.024 from it on PP-OCRv5 rec in Firefox, at cosine 0.9997 with fp32)."""
QDQ_FLOOR = 5e-2
"""int8 QDQ graphs: a provider that runs DequantizeLinear -> float op -> QuantizeLinear instead
of the CPU's fused integer kernels rounds differently and flips int8 steps."""
SPREAD_FACTOR = 4.0


def _session(path: Path, optimized: bool) -> object:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run(path: Path, feeds: Mapping[str, np.ndarray], optimized: bool = True) -> dict[str, np.ndarray]:
    """Every output of the graph at ``path`` on the CPU provider, by name; OnnxFileError (one line)
    when onnxruntime cannot load or run it."""
    try:
        session = _session(path, optimized)
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, dict(feeds))
    except Exception as exc:  # noqa: BLE001 - onnxruntime's errors are the user's answer
        text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise OnnxFileError(f"onnxruntime {'' if optimized else '(unoptimized) '}cannot run {path.name}: {text}") from None
    return {n: np.asarray(v) for n, v in zip(names, values)}


EVALUATOR_OPSET = 19
"""onnx's reference evaluator implements DequantizeLinear from opset 19 on (18's is the same for
the int8 and uint8 a dynamic graph's Gather holds)."""


def evaluate(path: Path, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output of the graph at ``path`` from onnx's reference evaluator (numpy: seconds to a
    minute for an encoder); OnnxFileError when it cannot run the graph."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    model = onnx.load(str(path))
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version < EVALUATOR_OPSET:
            opset.version = EVALUATOR_OPSET
    try:
        evaluator = ReferenceEvaluator(model)
        values = evaluator.run(None, dict(feeds))
    except Exception as exc:  # noqa: BLE001 - the evaluator's error is the reason
        raise OnnxFileError(f"onnx's reference evaluator cannot run {path.name}: {str(exc)[:200]}") from None
    return {o.name: np.asarray(v) for o, v in zip(model.graph.output, values)}


_RUNS: dict[tuple[str, str, str, bool], dict[str, np.ndarray]] = {}
_KEEP = 16


def cached_run(path: Path, digest: str, feeds: Mapping[str, np.ndarray], feeds_digest: str,
               optimized: bool = True) -> dict[str, np.ndarray]:
    """``run`` once per (file, content, inputs, optimization) in this process: every variant's rows
    share the fp32 reference."""
    key = (str(path), digest, feeds_digest, optimized)
    if key not in _RUNS:
        if len(_RUNS) >= _KEEP:
            _RUNS.pop(next(iter(_RUNS)))
        _RUNS[key] = run(path, feeds, optimized)
    return _RUNS[key]


def float_outputs(values: Mapping[str, np.ndarray]) -> list[str]:
    return [n for n, v in values.items() if np.asarray(v).dtype.kind == "f"]


def rel_rms(out: np.ndarray, ref: np.ndarray) -> float:
    out, ref = np.asarray(out, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    norm = float(np.sqrt(np.mean(ref * ref))) if ref.size else 0.0
    err = float(np.sqrt(np.mean((out - ref) ** 2))) if ref.size else 0.0
    return err / norm if norm > 0 else err


def spread(optimized: Mapping[str, np.ndarray], unoptimized: Mapping[str, np.ndarray]) -> float:
    """Relative RMS between two CPU runs over all float outputs joined."""
    names = float_outputs(optimized)
    if not names:
        return 0.0
    a = np.concatenate([np.asarray(optimized[n], np.float64).ravel() for n in names])
    b = np.concatenate([np.asarray(unoptimized[n], np.float64).ravel() for n in names])
    return rel_rms(b, a)


def tolerance(compute_dtype: str, qdq: bool, spread_value: float) -> float:
    floor = max(TOLERANCE_FLOOR.get(compute_dtype, TOLERANCE_FLOOR["f16"]), QDQ_FLOOR if qdq else 0.0)
    return max(floor, SPREAD_FACTOR * spread_value) if np.isfinite(spread_value) else floor
