"""Findings: transformers.js's pipelines at its dtypes beside ONNX Runtime Web and the harness
(issue 45's sweeps): MiniLM, SmolLM2-135M and Whisper tiny.en, and which ORT build runs under it."""

from __future__ import annotations

import re

import pandas as pd

from ..report.markdown import markdown_lines
from ..report.plots import plot_model_accuracy_latency
from .page import PLATFORM_NAMES, Data, Page, Plot, count, mib, number, pivot, rows_of, where

MINILM = ("tjs-minilm",)
SMOLLM2 = ("tjs-smollm2-chrome-wasm", "tjs-smollm2-firefox", "tjs-smollm2-chrome-wasm-ort130",
           "tjs-smollm2-chrome-webgpu")
WHISPER = ("tjs-whisper",)
WHICH_ORT = ("tjs-minilm-bundled-x3", "tjs-minilm-ort130-x3", "tjs-minilm-file-ort-x3")
CPU_NODES = re.compile(r"CPUExecutionProvider: (\d+) nodes")


def minilm(data: Data) -> list[str]:
    rows = mib(rows_of(data, *MINILM))
    shape = " or ".join(f"{count(b)} x {count(n)}" for b, n in {(r.batch_size, r.seq_len) for r in rows.itertuples()})
    return [f"## MiniLM (all-MiniLM-L6-v2, {shape} tokens)", "",
            "Median ms of one forward pass (transformers.js: the `feature-extraction` pipeline's call; ORT: "
            "`session.run`; the harness: its own graphs), the outcome where none was measured; weight MiB, cosine "
            "of the embeddings with PyTorch fp32 and the kernel error against onnxruntime's CPU on the same file "
            "(its tolerance) from the first measured row.", "",
            *pivot(rows, "latency_ms_median", {"weight_mib": "weight MiB", "cosine_mean": "cos mean"}), ""]


def smollm2(data: Data) -> list[str]:
    rows = mib(rows_of(data, *SMOLLM2))
    shapes = "; ".join(f"{count(p)} prompt tokens and {count(n)} new on "
                       + ", ".join(dict.fromkeys(g.apply(where, axis=1)))
                       for (p, n), g in rows.groupby(["prompt_len", "new_tokens"]))
    return ["## SmolLM2-135M (greedy)", "",
            f"Decode tokens/s after the first ({shapes}); TTFT, weight MiB, next-token top-1 and KL against "
            "PyTorch fp32 (teacher-forced on the evaluation texts) and how many greedy tokens lead equal to "
            "PyTorch's from the first measured row.", "",
            *pivot(rows, "decode_tokens_per_s", {"ttft_ms": "TTFT ms", "weight_mib": "weight MiB",
                                                 "next_token_top1": "top-1", "kl_mean": "KL",
                                                 "leading_tokens_equal": "leading equal"}), ""]


def whisper(data: Data) -> list[str]:
    rows = mib(rows_of(data, *WHISPER))
    clips = " or ".join(sorted({count(c) for c in rows["clips"] if c == c}))
    return [f"## Whisper tiny.en ({clips} clips, greedy, no timestamps)", "",
            "Median ms of one clip end to end (transformers.js: the `automatic-speech-recognition` pipeline with "
            "its own front end); weight MiB, WER against the clips' texts and transcripts equal to PyTorch fp32's "
            "from the first measured row.", "",
            *pivot(rows, "latency_ms_median", {"weight_mib": "weight MiB", "wer": "WER",
                                               "clips_equal_fp32": "= fp32"}), ""]


def which_ort(data: Data) -> list[str]:
    """Each page load's median: the library on its bundled ORT, on the harness's ORT 1.30, and
    ORT 1.30 alone running the same fp32 file (the onnx kind: session.run, shapes fixed)."""
    rows = rows_of(data, *WHICH_ORT)
    rows = rows[rows["outcome"] == "ok"]
    tjs = rows[rows["engine"] == "transformersjs"]
    loads = " or ".join(sorted({count(n) for n in tjs.groupby(["folder", "platform", "format_requested"]).size()}))
    lines = [f"## Which ORT runs under the library (MiniLM, Chrome, {loads} page loads each)", "",
             "Each page load's median ms, in the order run. *bundled*: transformers.js on the ORT it bundles; "
             "*ORT 1.30 under it*: on the harness's ONNX Runtime Web 1.30 (`FWP_TJS_ORT=harness`); *ORT 1.30 "
             "alone*: `session.run` on the same fp32 `model.onnx` (`--model` that file, its shapes fixed).", ""]
    body = []
    for (platform, dtype), group in tjs.groupby(["platform", "format_requested"], sort=False):
        alone = rows[(rows["folder"] == WHICH_ORT[2]) & (rows["platform"] == platform)] if dtype == "fp32" else None
        cells = [", ".join(number(v) for v in part["latency_ms_median"]) if part is not None and len(part) else "-"
                 for part in (group[group["folder"] == WHICH_ORT[0]], group[group["folder"] == WHICH_ORT[1]], alone)]
        body.append([PLATFORM_NAMES[platform], dtype, *cells])
    return [*lines, *markdown_lines(["platform", "dtype", "bundled", "ORT 1.30 under it", "ORT 1.30 alone"], body), ""]


def _first(rows: pd.DataFrame, **match: str) -> pd.Series | None:
    for column, value in match.items():
        rows = rows[rows[column].astype(str) == value]
    rows = rows[rows["outcome"] == "ok"]
    return rows.iloc[0] if len(rows) else None


def what_it_says(data: Data) -> list[str]:
    enc, dec = rows_of(data, *MINILM), rows_of(data, *SMOLLM2)
    asr, ort = rows_of(data, *WHISPER), rows_of(data, *WHICH_ORT)
    tjs_enc, tjs_dec = enc[enc["engine"] == "transformersjs"], dec[dec["engine"] == "transformersjs"]
    fp32 = tjs_enc[(tjs_enc["format_requested"] == "fp32") & (tjs_enc["outcome"] == "ok")]
    dec32 = _first(tjs_dec, format_requested="fp32")
    asr32 = _first(asr[asr["engine"] == "transformersjs"], format_requested="fp32")
    q8, nbits8 = _first(tjs_dec, format_requested="q8"), _first(dec[dec["engine"] == "ort"], bits_requested="8")
    lines = ["## What it says", ""]
    if len(fp32) and dec32 is not None and asr32 is not None:
        lines.append(f"- **fp32 through the library is PyTorch's**: MiniLM's embeddings at a lowest cosine of "
                     f"{number(fp32['cosine_min'].min(), 6)} on every browser and device, SmolLM2's next "
                     f"token top-1 {number(dec32['next_token_top1'])} with all {int(dec32['leading_tokens_equal'])} "
                     f"greedy tokens PyTorch's, Whisper's transcripts equal on {int(asr32['clips_equal_fp32'])} of "
                     f"{int(asr32['clips'])} clips.")
    if q8 is not None and nbits8 is not None:
        lines.append(f"- **transformers.js's `q8` (dynamic int8, its default on wasm) is the costly 8 bits**: on "
                     f"SmolLM2 it agrees with fp32's next token on {number(100 * q8['next_token_top1'], 2)}% of "
                     f"positions (KL {number(q8['kl_mean'], 2)}), where ORT's 8-bit MatMulNBits keeps "
                     f"{number(100 * nbits8['next_token_top1'], 2)}% (KL {number(nbits8['kl_mean'], 2)}).")
    moved = tjs_enc[(tjs_enc["platform"] != "wasm") & tjs_enc["format_requested"].isin(["q8", "int8", "uint8"])]
    counts = {(r["browser"], r["platform"], r["format_requested"]): int(m.group(1))
              for _, r in moved.iterrows() if (m := CPU_NODES.search(str(r["reason"])))}
    if counts:
        where = ", ".join(f"{d} on {b.capitalize()} {PLATFORM_NAMES[p]}: {n}"
                          for (b, p, d), n in sorted(counts.items()))
        lines.append(f"- **Dynamic int8 leaves the device it was asked for**: ORT moves its `MatMulInteger` and "
                     f"`DynamicQuantizeLinear` nodes to its CPU provider (nodes moved, {where}); each row's reason "
                     "lists them.")
    ok = ort[ort["outcome"] == "ok"]
    for platform in ("wasm", "webnn"):
        tjs = ok[(ok["platform"] == platform) & (ok["engine"] == "transformersjs") & (ok["format_requested"] == "fp32")]
        alone = ok[(ok["platform"] == platform) & (ok["folder"] == WHICH_ORT[2])]
        if len(tjs) and len(alone):
            lines.append(f"- **The library's call on {PLATFORM_NAMES[platform]}** (fp32, page medians "
                         f"{number(tjs['latency_ms_median'].min())}-{number(tjs['latency_ms_median'].max())} ms "
                         f"on either ORT) against ORT 1.30 alone on the same file "
                         f"({number(alone['latency_ms_median'].min())}-{number(alone['latency_ms_median'].max())} "
                         f"ms): {number(tjs['latency_ms_median'].median() / alone['latency_ms_median'].median(), 2)}x "
                         "the median.")
    lines.append(_ort_verdicts(data))
    return [*lines, ""]


def _ort_verdicts(data: Data) -> str:
    """What `compare` says of the library on its bundled ORT (baseline) against ORT 1.30 (current)."""
    from ..analysis.compare import compare

    both = compare(data[WHICH_ORT[0]], data[WHICH_ORT[1]], force=True)
    judged = [e for e in both.entries if e.config_dict["engine"] == "transformersjs"]
    verdicts = sorted({str(e.verdict) for e in judged})
    called = [e for e in judged if e.verdict.value in ("regression", "improvement")]
    pages = sorted({e.pages_baseline for e in judged} | {e.pages_current for e in judged})
    text = (f"- **Which ORT runs under the library**: `compare` of the two settings ({len(judged)} configurations, "
            f"{'/'.join(map(str, pages))} page loads a side) calls {', '.join(verdicts)}")
    if called:
        return text + ": " + ", ".join(f"{e.config_dict['platform']} {e.config_dict['format_requested']} "
                                       f"{e.verdict} {number(100 * e.effect, 2)}%" for e in called) + "."
    return text + ": the two runtimes are not told apart by these page loads."


def body(data: Data) -> list[str]:
    return [*what_it_says(data), *minilm(data), *smollm2(data), *whisper(data), *which_ort(data)]


PAGE = Page("transformers-js", "transformers.js beside ONNX Runtime Web and the harness",
            (*MINILM, *SMOLLM2, *WHISPER, *WHICH_ORT), body,
            (Plot("minilm-accuracy-latency", "MiniLM: accuracy against PyTorch fp32 against median ms, every engine, "
                  "dtype and device", MINILM, plot_model_accuracy_latency),))
