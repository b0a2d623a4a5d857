"""The decoder kind on transformers.js (page: web/engines/tjs_decoder.js): the model's folder in
transformers.js's layout (exports.py: ``onnx/model.onnx`` with a growing KV cache) at the run's
dtype, loaded by its ``text-generation`` pipeline.

- Timing: the pipeline as users call it on the prompt's text, greedy (``do_sample: false``),
  ``max_new_tokens`` and ``min_new_tokens`` both the workload's new tokens (the end of sequence
  cannot end it early, as every engine's generation here), TTFT and per-token times from a
  streamer the library calls after each new token. The page checks that the library's tokenizer
  makes the prompt's text into the prompt's ids (``engine_tokens``: a count that differs makes
  the row invalid).
- Accuracy: the pipeline's model called on each evaluation row (teacher-forced, every position's
  logits), the same ids every engine gets: next-token top-1 and KL against PyTorch fp32; the
  greedy ids against PyTorch's; whether the browser is right against onnxruntime on the CPU
  running the same dtype file on the same rows (prepared.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...page_protocol import PageReply
from ...prepared_caches import per_configuration
from ...precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS
from ...run_spec import RunSpec
from ...workloads.decoder import DecoderWorkload, accuracy
from ...workloads.decoder.prepared import PreparedDecoder, prepare_decoder
from ...workloads.onnx_file.inputs import Feeds
from ..base import Engine, EngineJob, Executed
from . import TjsKindRunner, exports, folders
from .prepared import PreparedTjs, RunFile, judge_files, run_graph


class PreparedTjsDecoder(PreparedTjs):
    def saved_reference(self) -> np.ndarray:
        """The CPU reference's log-probability of each next token (its logits are vocab-wide)."""
        if self.unloadable:
            return self.ref_dequantized
        return accuracy.next_token_logprob(self.ref_dequantized, self.base.tokens.eval_ids)


def _logits(base: PreparedDecoder) -> RunFile:
    """The dtype file's logits of every evaluation row from position 0, an empty cache."""
    cfg = base.config

    def run(files: Mapping[str, Path], how: str) -> np.ndarray:
        (path,) = files.values()
        rows = []
        for ids in base.tokens.eval_ids:
            n = len(ids)
            feeds = {"input_ids": ids[None].astype(np.int64), "attention_mask": np.ones((1, n), np.int64),
                     "position_ids": np.arange(n, dtype=np.int64)[None]}
            feeds |= {name: np.zeros((1, cfg.kv_heads, 0, cfg.head_dim), np.float32)
                      for name in exports.past_names(cfg.layers)}
            rows.append(np.asarray(run_graph(path, feeds, how)[exports.LOGITS][0], np.float64))
        return np.stack(rows)
    return run


@per_configuration(maxsize=4)
def prepare(workload: DecoderWorkload, dtype: str, seed: int, quantizer: str = DEFAULT_QUANTIZER
            ) -> tuple[PreparedTjs, folders.ModelFolder]:
    base, user, weightless = folders.float_preparation(workload, "decoder", prepare_decoder, seed)
    if weightless:
        fp32 = user.graph_files("fp32")
        logits, greedy = _logits(base)(fp32, "optimized"), _greedy(fp32[folders.file_name("model", "fp32")], base)
        base = dataclasses.replace(base, ref_float=logits, ref_dequantized=logits, generated_fp32=greedy,
                                   generated_reference=greedy)
    fit = _calibration_feeds(workload, base) if QUANTIZERS[quantizer].calibrated else None
    folder, dtype = folders.at_dtype(user or folders.made_folder(base.held.model, "decoder"), dtype, quantizer, fit,
                                     make=user is None)
    return judge_files(base, dtype, folder.graph_files(dtype), _logits(base), PreparedTjsDecoder), folder


def _calibration_feeds(workload: DecoderWorkload, base: PreparedDecoder) -> Feeds:
    """The graph's inputs on the calibration texts (never the evaluated ones), their tokens joined
    into one sequence from position 0 (as far as the model's positions reach), an empty cache: what
    a calibrated quantizer's E[x x^T] is taken over (models/calibration.DecoderRows joins them
    the same way for the harness's engines)."""
    from ...models import calibration, source

    cfg = base.config
    tok = source.tokenizer(source.resolve(workload.model, True))
    ids = [i for text in calibration.builtin_calibration_texts()
           for i in tok(text, add_special_tokens=False)["input_ids"]][: cfg.max_positions]
    n = len(ids)
    arrays = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, n), np.int64),
              "position_ids": np.arange(n, dtype=np.int64)[None]}
    arrays |= {name: np.zeros((1, cfg.kv_heads, 0, cfg.head_dim), np.float32) for name in exports.past_names(cfg.layers)}
    return Feeds(arrays, {}, workload.calibration_label)


def _greedy(path: Path, base: PreparedDecoder) -> np.ndarray:
    """The file's greedy continuation of the prompt on onnxruntime's CPU, the end of sequence never
    chosen (PyTorch fp32's rule, workloads/decoder/prepared.pytorch_greedy), its cache growing."""
    cfg, tokens = base.config, base.tokens
    step, seen, out = np.asarray(tokens.prompt, np.int64), 0, []
    past = {name: np.zeros((1, cfg.kv_heads, 0, cfg.head_dim), np.float32) for name in exports.past_names(cfg.layers)}
    for _ in range(base.workload.new_tokens):
        feeds = {"input_ids": step[None], "attention_mask": np.ones((1, seen + len(step)), np.int64),
                 "position_ids": np.arange(seen, seen + len(step), dtype=np.int64)[None]} | past
        results = run_graph(path, feeds, "optimized")
        logits = np.asarray(results[exports.LOGITS][0, -1], np.float64)
        logits[list(tokens.eos)] = -np.inf
        out.append(int(np.argmax(logits)))
        past = dict(zip(past, (results[n] for n in exports.present_names(cfg.layers))))
        seen, step = seen + len(step), np.array(out[-1:], np.int64)
    return np.array(out, np.int32)


class TjsDecoder(TjsKindRunner):
    runner = "tjs_decoder"
    preparer = staticmethod(prepare)

    def page(self, run: RunSpec, prepared: PreparedTjs) -> tuple[dict[str, bytes], dict[str, Any]]:
        base = prepared.base
        assert isinstance(base, PreparedDecoder)
        tokens, cfg = base.tokens, base.config
        texts, length = tokens.eval_ids.shape
        positions = len(tokens.prompt) + base.workload.new_tokens
        return base.input_tensors(), {
            "prompt": {"text": tokens.decode(tokens.prompt), "ids": [int(i) for i in tokens.prompt]},
            "new_tokens": base.workload.new_tokens,
            "score": {"texts": texts, "rows": length, "tensor": "eval_ids"},
            "model": {"vocab": cfg.vocab, "layers": cfg.layers},
            # float32 in every dtype: the float16 files keep their inputs and outputs float32
            "kv_cache_bytes": 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * positions * 4,
        }

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        done = super().interpret(engine, run, job, page)
        tokens = page.kind_fields.get("decoder", {}).get("engine_tokens")
        prompt = job.prepared.base.tokens.prompt
        if not isinstance(tokens, dict):
            problem = "the page sent no count of the library's prompt tokens"
        elif tokens["prompt"] != len(prompt):
            problem = (f"transformers.js's tokenizer made {tokens['prompt']} tokens of the prompt text, not the "
                       f"{len(prompt)} the other engines get")
        else:
            return done
        return Executed(done.bits, done.compute_dtype, done.executed_on, problem, done.note)
