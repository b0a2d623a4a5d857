"""all-MiniLM-L6-v2 as a plain ONNX file a user brings (issue 69's sweep of docs/guides/onnx-file.md):
its fp32 graph as transformers.js's folders hold it (the harness's export, ``onnx/model.onnx``:
``input_ids``, ``attention_mask``, ``token_type_ids`` int64 -> ``last_hidden_state``), with inputs
from the built-in texts, tokenized by the model's own tokenizer, saved as .npz files:

- ``minilm.onnx``: the graph (a copy of the export);
- ``minilm_eval.npz``: the first 8 evaluation sentences, [8, 32] (``--inputs``: what accuracy is
  judged on);
- ``minilm_calibration.npz``: the 44 calibration sentences, [44, 32], none of them an evaluation
  sentence (``--calibration``: what int8-qdq and gptq fit to).

    .venv/bin/python benchmarks/minilm_onnx.py OUT_DIR
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

MODEL = "all-MiniLM-L6-v2"
EVAL_TEXTS = 8
SEQ_LEN = 32


def feeds(texts: tuple[str, ...], tok: object) -> dict[str, np.ndarray]:
    from fixed_web_platform.models.inputs import tokenize

    batches = tokenize(tok, texts, len(texts), SEQ_LEN)
    return {"input_ids": batches.input_ids[0].astype(np.int64), "attention_mask": batches.attention_mask[0].astype(np.int64),
            "token_type_ids": batches.token_type_ids[0].astype(np.int64)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("target", type=Path, help="the folder to write")
    args = p.parse_args(argv)
    from fixed_web_platform.engines.transformersjs import folders
    from fixed_web_platform.models import calibration, inputs, source

    resolved = source.resolve(MODEL)
    folder = folders.made_folder(source.load(resolved), "encoder")
    tok = source.tokenizer(resolved)
    args.target.mkdir(parents=True, exist_ok=True)
    shutil.copy(folder.files["onnx/model.onnx"], args.target / "minilm.onnx")
    np.savez(args.target / "minilm_eval.npz", **feeds(inputs.builtin_texts()[:EVAL_TEXTS], tok))
    np.savez(args.target / "minilm_calibration.npz", **feeds(calibration.builtin_calibration_texts(), tok))
    print(f"wrote {args.target / 'minilm.onnx'}, minilm_eval.npz and minilm_calibration.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
