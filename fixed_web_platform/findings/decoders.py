"""What every decoder LLM's findings page shows (smollm2.py, gemma3.py): per prompt length, each
engine's decode tokens/s and time to first token at every width, in every browser and platform,
beside its token-by-token accuracy against PyTorch fp32, and the report's pick per setting."""

from __future__ import annotations

import pandas as pd

from ..report.decoders import plot_decoder_accuracy_speed, plot_decoder_speed
from ..report.steady import tally_line
from .page import Data, Plot, count, engine_name, label, mib, number, pick_lines, pivot, rows_of, where

ACCURACY = {"weight_mib": "weight MiB", "next_token_top1": "top-1", "kl_mean": "KL", "perplexity": "perplexity"}


def engines(data: Data) -> list[str]:
    rows = mib(rows_of(data, *data))
    prompts = sorted({int(p) for p in rows["prompt_len"].dropna()})
    new = " or ".join(sorted({count(n) for n in rows["new_tokens"].dropna()}, key=int))
    fp32 = rows["perplexity_fp32"].dropna()
    lines = [f"## Every engine (prompts of {' and '.join(map(str, prompts))} tokens, {new} new tokens)", "",
             tally_line(rows, "decode_steady_class", "decode tokens/s (its decode steps)"), "",
             tally_line(rows, "ttft_steady_class", "time to first token"), "",
             "Which precision to pick per setting (the report's rule: of the precisions whose next-token top-1 "
             "agreement with PyTorch fp32 is at least 90%, the fastest; of those as fast within noise, the fewest "
             "weight bytes):", "", *pick_lines(data, *data), "",
             "Accuracy is teacher-forced over the built-in texts, the same at every prompt length"
             + (f" (PyTorch fp32's perplexity {fp32.iloc[0]:.2f})" if len(fp32) else "") + "; leading = fp32 counts "
             "the greedy tokens equal to PyTorch fp32's at that prompt length. llama.cpp's KL is a lower bound (from "
             "its top-40 log-probabilities). Each run's reason (in the data) says what ran where when it differs "
             "from what was asked.", ""]
    lines += [spread_line(rows), "", *tokens_lines(rows)]
    for prompt in prompts:
        at = rows[rows["prompt_len"] == prompt]
        made = " or ".join(sorted({count(n) for n in at["new_tokens"].dropna()}, key=int))
        accuracy = {**ACCURACY, "leading_tokens_equal": f"leading = fp32 (of {made})"}
        lines += [f"### Prompt of {prompt} tokens: decode tokens/s", "",
                  "Median decode tokens/s after the first token (the median of the runs' medians), or the outcome "
                  "where none was measured; the other figures from the first measured run.", "",
                  *pivot(at, "decode_tokens_per_s", accuracy),
                  "",
                  f"### Prompt of {prompt} tokens: time to first token (ms)", "",
                  *pivot(at, "ttft_ms", {}, kernel=False), ""]
    return lines


def tokens_lines(rows: pd.DataFrame) -> list[str]:
    """Where some runs generate another number of new tokens than most (a slow engine asked for
    fewer), which ones."""
    counts = rows["new_tokens"].dropna().astype(int).value_counts()
    if len(counts) < 2:
        return []
    usual = counts.idxmax()
    odd = rows[rows["new_tokens"].notna() & (rows["new_tokens"].astype(float) != usual)]
    named = "; ".join(f"{engine_name(r)} on {where(r)}: {int(r['new_tokens'])}"
                      for _, r in odd.drop_duplicates(["engine", "browser", "platform"]).iterrows())
    return [f"New tokens per generation: {usual}, except {named}.", ""]


SPREAD = 1.5
"""A whole generation's p90 / p10 beyond which a run's figures are named as spread."""


def spread_line(rows: pd.DataFrame) -> str:
    """Each configuration is one page load of a few whole generations: the runs whose generations
    spread widely, named, so a reader weighs their medians."""
    ok = rows[rows["outcome"] == "ok"]
    ratio = pd.to_numeric(ok["latency_ms_p90"]) / pd.to_numeric(ok["latency_ms_p10"])
    wide = ok[ratio > SPREAD]
    named = "; ".join(f"{label(r)} on {where(r)}, prompt {int(r['prompt_len'])}: {number(r['latency_ms_p10'])}-"
                      f"{number(r['latency_ms_p90'])} ms" for _, r in wide.iterrows())
    timed = sorted({int(n) for n in pd.to_numeric(ok["n_samples"]).dropna()})
    span = f"{timed[0]} to {timed[-1]}" if len(timed) > 2 else " or ".join(map(str, timed))
    return (f"Each configuration is one page load timing {span} "
            f"whole generations after its warm-up. Runs whose generations spread by more than {SPREAD}x (p10-p90 of "
            f"a whole generation), whose medians a second page load could move: " + (named or "none") + ".")



def plots(model: str, folders: tuple[str, ...]) -> tuple[Plot, ...]:
    """A decoder page's plots: speed against bits, and accuracy against speed."""
    return (Plot("speed", f"{model}: decode and prefill tokens/s and time to first token against bits", folders,
                 plot_decoder_speed),
            Plot("accuracy-speed", f"{model}: next-token accuracy against decode tokens/s", folders,
                 plot_decoder_accuracy_speed))
