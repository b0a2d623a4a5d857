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

from ...run_spec import RunSpec
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
def prepare(workload: EncoderWorkload, dtype: str, seed: int) -> tuple[PreparedTjs, folders.ModelFolder]:
    base, user, weightless = folders.float_preparation(workload, "encoder", prepare_model, seed)
    if weightless:
        ref = _embeddings(base)(user.graph_files("fp32"), "optimized")
        base = dataclasses.replace(base, ref_float=ref, ref_dequantized=ref)
    folder = user or folders.with_dtype(folders.made_folder(base.held.model, "encoder"), dtype)
    return judge_files(base, dtype, folder.graph_files(dtype), _embeddings(base)), folder


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
