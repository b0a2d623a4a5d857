"""The encoder kind on transformers.js (page: web/engines/tjs_encoder.js): the model's folder in
transformers.js's layout (folders.py) at the run's dtype, loaded by its ``feature-extraction``
pipeline.

- Timing: the pipeline as users call it, ``extractor(texts, {pooling: 'mean', normalize: true})``
  on the first batch's texts (tokenizing, the session run, reading the hidden states back and
  pooling), its tokenizer cutting at the workload's sequence length as the other engines' inputs
  are cut.
- Accuracy: the pipeline's model called on the same token ids as every other engine, pooled and
  normalised by the library's own ``mean_pooling`` and ``normalize``: what precision costs is
  judged against PyTorch fp32 (the workload's), whether the browser is right against onnxruntime
  on the CPU running the same dtype file on the same ids (as an ONNX file's variants are judged,
  workloads/onnx_file/reference.py: the tolerance a multiple of that file's own spread between
  ORT's graph optimizations on and off, at least the arithmetic's floor).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...formats import onnx_inventory
from ...page_protocol import PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Outcome, Platform
from ...workloads.base import TensorSpec
from ...workloads.encoder import EncoderWorkload
from ...workloads.encoder.prepared import INPUT_TENSORS, PreparedModel, mean_pool_normalize, prepare_model
from ...workloads.onnx_file import reference
from ...workloads.onnx_file.variants import VariantRefused
from ..base import BrowserFacts, Engine, EngineJob, Executed, Refusal
from . import HALF_DTYPES, TjsKindRunner, TransformersJsEngine, folders
from .placement import executed


@dataclass(frozen=True, eq=False)
class PreparedTjsEncoder:
    """The encoder's float preparation (inputs, PyTorch fp32, figures) with the dtype file's own
    reference in place of the harness's held bytes."""

    base: PreparedModel
    dtype: str
    file: Path
    file_name: str
    """Its name in the folder ('onnx/model_q4.onnx'): what it promises."""
    ref_dequantized: np.ndarray
    """onnxruntime (CPU) on the same dtype file and ids, pooled: is the browser right."""
    spread: float
    dynamic: bool
    """The file quantizes activations at run time (reference.is_dynamic)."""
    inventory: onnx_inventory.Inventory

    @property
    def ref_float(self) -> np.ndarray:
        return self.base.ref_float

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.base.outputs

    @property
    def weight_bytes(self) -> int:
        """Every constant byte of the dtype file (float tensors included), as a held model's."""
        return sum(self.inventory.bytes_by_precision().values())

    @property
    def weight_bytes_f32(self) -> int:
        return self.base.weight_bytes_f32

    @property
    def layers(self) -> tuple[Any, ...]:
        return ()

    @property
    def tolerance_basis(self) -> str:
        return (f"{reference.SPREAD_FACTOR:g}x the spread of the {self.dtype} file's onnxruntime CPU runs with and "
                f"without graph optimizations{' and onnx reference evaluator' if self.dynamic else ''} "
                f"({self.spread:.2g}), at least the arithmetic's floor")

    def judged(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.base.judged(outputs)

    def tolerance(self, compute_dtype: str) -> float:
        return reference.tolerance(compute_dtype, False, self.spread)

    def kernel_problem(self, judged: np.ndarray) -> str:
        return "" if np.isfinite(judged).all() else "the outputs hold NaN or infinity"

    def figures(self, outputs: Mapping[str, np.ndarray], median_ms: float | None) -> dict[str, Any]:
        return self.base.figures(outputs, median_ms) | {
            "onnx_inventory": self.inventory.text(),
            "precision_promise": onnx_inventory.promise(self.file_name, self.inventory)}

    def output_arrays(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = self.base.output_arrays(outputs)
        arrays.pop("reference_dequantized_f64", None)
        return arrays | {"reference_onnxruntime_cpu": self.ref_dequantized}


def _embeddings(path: Path, base: PreparedModel, how: str) -> np.ndarray:
    """The dtype file's sentence embeddings on the run's ids: onnxruntime's CPU provider with graph
    optimizations ('optimized') or without ('unoptimized'), or onnx's reference evaluator."""
    ids, mask, tt = base.batches.flat()
    feeds = {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64),
             "token_type_ids": tt.astype(np.int64)}
    outputs = reference.evaluate(path, feeds) if how == "evaluator" else reference.run(path, feeds, how == "optimized")
    return mean_pool_normalize(np.asarray(outputs[folders.ENCODER_OUTPUT], np.float64), mask)


@functools.lru_cache(maxsize=8)
def prepare(workload: EncoderWorkload, dtype: str, seed: int) -> tuple[PreparedTjsEncoder, folders.ModelFolder]:
    from ...models import source

    base = prepare_model(workload, 32, 32, seed)
    loaded = source.load(source.resolve(workload.model, workload.random_weights), workload.random_weights, seed)
    folder = folders.with_dtype(folders.encoder_folder(loaded), dtype)
    name = folders.file_name("model", dtype)
    path = folder.files[name]
    held = _embeddings(path, base, "optimized")
    others = ("unoptimized", "evaluator") if reference.is_dynamic(path) else ("unoptimized",)
    spread = max(reference.rel_rms(_embeddings(path, base, how), held) for how in others)
    return PreparedTjsEncoder(base, dtype, path, name, held, spread, len(others) > 1, onnx_inventory.read(path)), folder


def first_texts(workload: EncoderWorkload) -> list[str]:
    """The texts of the first batch, as models/inputs.tokenize fills it."""
    texts = list(workload.texts)
    return [texts[i % len(texts)] for i in range(workload.batch_size)]


class TjsEncoder(TjsKindRunner):
    runner = "tjs_encoder"

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        assert isinstance(engine, TransformersJsEngine)
        workload = run.workload
        assert isinstance(workload, EncoderWorkload)
        try:
            prepared, folder = await asyncio.to_thread(prepare, workload, run.weight_format, run.seed)
        except VariantRefused as exc:
            return Refusal(Outcome.UNSUPPORTED, str(exc))
        files = folder.for_dtype(run.weight_format)
        keys = {name: f"file{i}" for i, name in enumerate(files)}
        tensors: dict[str, Any] = prepared.base.input_tensors() | {keys[n]: p for n, p in files.items()}
        options = {**engine.page_options(run), **prepared.base.options(), "files": keys,
                   "texts": first_texts(workload), "output": folders.ENCODER_OUTPUT}
        spec = self.spec(engine, run, timing, tensors, prepared.outputs, options)
        inventory = prepared.inventory
        return EngineJob(
            spec=spec, tensors=tensors, prepared=prepared, weight_format=run.weight_format,
            weight_dtype=inventory.matmul_precision(),
            details={"tjs_files": {n: p.stat().st_size for n, p in files.items()}, "tjs_folder": folder.made_by,
                     "onnx_inventory": {folders.file_name("model", run.weight_format): inventory.to_json()}},
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        half = run.weight_format in HALF_DTYPES and engine.platform is not Platform.WASM
        return executed(engine, run, page, "f16" if half else "f32")


__all__ = ["INPUT_TENSORS", "TjsEncoder"]
