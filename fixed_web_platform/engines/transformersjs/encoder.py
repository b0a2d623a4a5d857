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
  on the CPU running the same dtype file on the same ids (prepared.py).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS
from ...run_spec import RunSpec
from ...workloads.onnx_file.inputs import Feeds
from ...workloads.encoder import EncoderWorkload
from ...workloads.encoder.prepared import PreparedModel, mean_pool_normalize, prepare_model
from . import TjsKindRunner, exports, folders
from .prepared import PreparedTjs, RunFile, judge_files, run_graph


def _embeddings(base: PreparedModel) -> RunFile:
    """The dtype file's sentence embeddings on the run's ids (prepared.run_graph), pooled."""
    ids, mask, tt = base.batches.flat()
    feeds = {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64),
             "token_type_ids": tt.astype(np.int64)}

    def run(files: Mapping[str, Path], how: str) -> np.ndarray:
        (path,) = files.values()
        hidden = run_graph(path, feeds, how)[exports.ENCODER_OUTPUT]
        return mean_pool_normalize(np.asarray(hidden, np.float64), mask)
    return run


@functools.lru_cache(maxsize=8)
def prepare(workload: EncoderWorkload, dtype: str, seed: int, quantizer: str = DEFAULT_QUANTIZER
            ) -> tuple[PreparedTjs, folders.ModelFolder]:
    base, user, weightless = folders.float_preparation(workload, "encoder", prepare_model, seed)
    if weightless:
        ref = _embeddings(base)(user.graph_files("fp32"), "optimized")
        base = dataclasses.replace(base, ref_float=ref, ref_dequantized=ref)
    fit = calibration_feeds(workload) if QUANTIZERS[quantizer].calibrated else None
    folder, dtype = folders.at_dtype(user or folders.made_folder(base.held.model, "encoder"), dtype, quantizer, fit,
                                     make=user is None)
    return judge_files(base, dtype, folder.graph_files(dtype), _embeddings(base)), folder


def calibration_feeds(workload: EncoderWorkload) -> Feeds:
    """The graph's inputs on the calibration texts (the workload's --calibration, else the built-in
    set: never the evaluated ones), tokenized by the model's tokenizer at the run's sequence length."""
    from ...models import calibration

    texts = workload.calibration_texts or calibration.builtin_calibration_texts()
    return Feeds(_token_feeds(workload, texts, len(texts)), {}, workload.calibration_label)


def _token_feeds(workload: EncoderWorkload, texts: Any, rows: int) -> dict[str, np.ndarray]:
    """The first ``rows`` of ``texts`` as an encoder graph's int64 inputs, by the model's tokenizer."""
    from ...models import source
    from ...models.inputs import tokenize

    batches = tokenize(source.tokenizer(source.resolve(workload.model, True)), tuple(texts), rows, workload.seq_len)
    arrays = {"input_ids": batches.input_ids[0], "attention_mask": batches.attention_mask[0],
              "token_type_ids": batches.token_type_ids[0]}
    return {n: a.astype(np.int64) for n, a in arrays.items()}


def as_onnx_file(workload: EncoderWorkload) -> Any:
    """A transformers.js folder's float graph (``onnx/model.onnx``) as the ONNX file it is, fed the
    workload's first batch of texts and calibrated on its calibration texts, both tokenized by the
    folder's tokenizer and written as .npz files (cached by content): how ``sensitivity`` probes a
    folder without weights."""
    from ...paths import ONNX_CACHE_DIR
    from ...workloads.onnx_file import OnnxFileWorkload, graph

    model = folders.user_folder(workload.model, "encoder")
    fp32 = model.files.get(folders.file_name("model", "fp32")) if model is not None else None
    if fp32 is None:
        raise ValueError(f"{workload.model}: no onnx/model.onnx to probe")
    names = {s.name for s in graph.inputs(graph.load(fp32, graph.sha256(fp32)))}
    paths = []
    for texts, rows in ((workload.texts, workload.batch_size), (calibration_feeds(workload).arrays, 0)):
        arrays = _token_feeds(workload, texts, rows) if rows else texts
        arrays = {n: a for n, a in arrays.items() if n in names}
        path = ONNX_CACHE_DIR / "inputs" / f"{Feeds(arrays, {}, '').digest[:16]}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **arrays)
        paths.append(path)
    return OnnxFileWorkload.create(str(fp32), inputs_file=paths[0], calibration=paths[1])


def first_texts(workload: EncoderWorkload) -> list[str]:
    """The texts of the first batch, as models/inputs.tokenize fills it."""
    texts = list(workload.texts)
    return [texts[i % len(texts)] for i in range(workload.batch_size)]


class TjsEncoder(TjsKindRunner):
    runner = "tjs_encoder"
    preparer = staticmethod(prepare)

    def page(self, run: RunSpec, prepared: PreparedTjs) -> tuple[dict[str, bytes], dict[str, Any]]:
        assert isinstance(run.workload, EncoderWorkload)
        base = prepared.base
        return base.input_tensors(), {**base.options(), "texts": first_texts(run.workload),
                                      "output": exports.ENCODER_OUTPUT}
