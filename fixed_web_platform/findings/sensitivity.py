"""Findings: which layers can take fewer bits. A sensitivity sweep (``run_real_webgpu_webnn.py
sensitivity``) quantizes one group of linear layers at a time, measures the accuracy drop in the
browser beside the numpy float64 prediction, then searches the precision plan with the fewest
weight bytes within an accuracy budget and verifies it in the browser. The page reads the
sweep's ``sensitivity.csv`` and ``frontier.csv`` (written by that command from its rows) and
shows them as the report does (report/sensitivity.py)."""

from __future__ import annotations

import pandas as pd

from ..report.markdown import markdown_table
from ..report.render import outcome_counts
from ..report.sensitivity import FRONTIER_FILE, TABLE_FILE, ranked_markdown
from .page import Data, Page, mib, number, rows_of, rows_table

ENCODERS = ("sensitivity-minilm", "sensitivity-minilm-gptq-offset")
"""Folders of the ``sensitivity`` command (an encoder's probes, sensitivity.csv and frontier.csv)."""
DECODERS = ("decoder-sensitivity-4bit", "decoder-sensitivity-2bit", "decoder-sensitivity-4bit-gptq-offset")
"""Folders of benchmarks/decoder_sensitivity.py (a decoder's roles one at a time at the low bits, the
rest at 8: an ordinary results folder, one row per probe)."""
TEXT = ("browser", "engine", "platform", "plan", "precision_plan", "outcome", "budget")
"""frontier.csv's text columns (the others are figures: weight MiB and the budget's metric)."""
ENGINE = ["browser", "engine", "platform"]
"""What tells one engine's probes from another's."""


def says(table: pd.DataFrame, frontier: pd.DataFrame) -> list[str]:
    """Per browser, engine and platform: the most and least sensitive probe at each low bits, how
    far the browser's drops are from Python's, and the found plan's verdict in the browser; a
    statement several engines share is said once, naming them."""
    said: dict[str, list[str]] = {}
    for (browser, engine, platform), group in table.groupby(ENGINE, sort=False):
        where = f"{browser} {engine} {platform}"
        ok = group[group["outcome"] == "ok"]
        for bits, at in ok.groupby("bits", sort=False):
            drop = pd.to_numeric(at["drop_cosine_mean"], errors="coerce")
            if drop.notna().any():
                most, least = at.loc[drop.idxmax()], at.loc[drop.idxmin()]
                ran = {str(b) for b in at["bits_executed"] if str(b)} - {str(bits)}
                ran_at = f" (ran at {'/'.join(sorted(ran))})" if ran else ""
                said.setdefault(f"{bits}-bit probes{ran_at}: most sensitive {most['probe']} (cosine mean drop "
                                f"{number(most['drop_cosine_mean'])}), least {least['probe']} "
                                f"({number(least['drop_cosine_mean'])}).", []).append(where)
        gap = (pd.to_numeric(ok["drop_cosine_mean"], errors="coerce")
               - pd.to_numeric(ok["predicted_drop_cosine_mean"], errors="coerce")).abs()
        if gap.notna().any():
            said.setdefault(f"the browser's drops differ from Python's prediction by at most {number(gap.max())} "
                            f"(cosine mean) over {int(gap.notna().sum())} probes.", []).append(where)
        found = frontier[(frontier["browser"] == browser) & (frontier["engine"] == engine)
                         & (frontier["platform"] == platform) & (frontier["plan"] == "found plan")]
        for _, plan in found[found["outcome"] == "ok"].iterrows():
            said.setdefault(f"the found plan `{plan['precision_plan']}`, {plan['weight MiB']} MiB of weights: "
                            f"{plan['budget']}.", []).append(where)
    return [f"- {', '.join(wheres)}: {text}" for text, wheres in said.items()]



def outcomes(rows: pd.DataFrame) -> str:
    return f"{len(rows)} runs (the baselines and probes): {outcome_counts(rows)}."


def not_run(rows: pd.DataFrame) -> list[str]:
    """One line per browser, engine and platform with runs that were not ok: how many, and why
    (the first reason of each outcome)."""
    lines = []
    for key, group in rows.groupby(ENGINE, sort=False):
        bad = group[group["outcome"] != "ok"]
        if bad.empty:
            continue
        why = "; ".join(f"{len(g)} {outcome}: {' '.join(str(g['reason'].iloc[0]).split())}"
                        for outcome, g in bad.groupby("outcome", sort=False))
        lines.append(f"- {' '.join(key)}{' (every run)' if len(bad) == len(group) else ''}: {why}")
    return lines


def _measured(frame: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The lines of engines that ran at least once (the others are one line of ``not_run``)."""
    ran = {tuple(k) for k in rows.loc[rows["outcome"] == "ok", ENGINE].astype(str).itertuples(index=False)}
    return frame[[tuple(k) in ran for k in frame[ENGINE].astype(str).itertuples(index=False)]]


def sweep(data: Data, name: str) -> list[str]:
    directory = data[name].directory
    rows = rows_of(data, name)
    table = _measured(pd.read_csv(directory / TABLE_FILE, keep_default_na=False), rows)
    frontier = _measured(pd.read_csv(directory / FRONTIER_FILE, keep_default_na=False), rows) \
        if (directory / FRONTIER_FILE).is_file() else pd.DataFrame(columns=[*ENGINE, "plan"])
    head = table.iloc[0]
    missing = not_run(rows)
    lines = [f"### `{name}`: {rows['workload'].iloc[0]}, probes by {len(set(table['probe']))} groups at "
             f"{', '.join(str(b) for b in sorted(set(table['bits']), reverse=True))} bits, the rest at "
             f"{head['baseline_bits']}", "", outcomes(rows), "", *missing, *([""] if missing else []),
             *says(table, frontier), "",
             "Each engine's probes, most sensitive first (the drop of the mean cosine with PyTorch fp32 against the "
             "all-baseline run of the same engine, measured in the browser and predicted by the numpy float64 "
             "forward with the same weights):", "", ranked_markdown(table, limit=len(table)), ""]
    if len(frontier):
        shown = frontier.assign(**{c: frontier[c].map(lambda v: number(v, 5)) for c in frontier
                                   if c not in TEXT and c != "weight MiB"})
        lines += ["Precision plans under the budget, verified in the browser (the found plan beside uniform and "
                  "`--mixed-precision` ones):", "", markdown_table(shown), ""]
    return lines


def decoder(data: Data, name: str) -> list[str]:
    """A decoder's roles, one at a time at the low bits with the rest at 8, beside uniform 8 and
    low bits: teacher-forced KL and next-token top-1 against PyTorch fp32, costliest first."""
    rows = mib(rows_of(data, name))
    rules = rows["precision_rules"].fillna("").astype(str)
    rows = rows.assign(probe=[r.removeprefix("probe:") or f"uniform {int(b)}-bit"
                              for r, b in zip(rules, rows["bits_requested"])],
                       _kl=pd.to_numeric(rows["kl_mean"], errors="coerce"))
    uniform = rows[rules == ""].sort_values("bits_requested", ascending=False)
    probes = rows[rules != ""].sort_values("_kl", ascending=False, na_position="last")
    measured = probes.dropna(subset=["_kl"])

    def named(part: pd.DataFrame) -> str:
        return ", ".join(f"{r['probe']} ({number(r['kl_mean'])})" for _, r in part.iterrows())
    said = [f"- Costliest at the low bits (KL): {named(measured.head(3))}; cheapest: "
            f"{named(measured.tail(2).iloc[::-1])}."] if len(measured) else []
    first = rows.iloc[0]
    quantizer = first["weight_quant"] if isinstance(first["weight_quant"], str) and first["weight_quant"] else "minmax"
    return [f"### `{name}`: {first['model']}, each role at the low bits, the rest at 8 ({quantizer})", "",
            outcomes(rows), "", *said, *([""] if said else []),
            *rows_table(pd.concat([uniform, probes]),
                        {"probe": "probe (the rest 8-bit)", "precision_plan": "plan", "weight_mib": "weight MiB",
                         "kl_mean": "KL", "next_token_top1": "top-1", "perplexity": "perplexity"}), ""]


def body(data: Data) -> list[str]:
    lines = ["## Layer sensitivity and precision plans", "",
             "Accuracy figures: each probe run times one pass (the timing protocol does not move them).", ""]
    for name in ENCODERS:
        lines += sweep(data, name)
    if DECODERS:
        lines += ["## A decoder's layer roles", "",
                  "`benchmarks/decoder_sensitivity.py`: every linear layer of the decoder at 8 bits except one role "
                  "at the low bits, on the harness's WGSL decoder, teacher-forced over the built-in texts against "
                  "PyTorch fp32 (KL(fp32 || engine) and next-token top-1), beside uniform 8 and low bits.", ""]
    for name in DECODERS:
        lines += decoder(data, name)
    return lines


PAGE = Page("sensitivity", "Which layers can take fewer bits: sensitivity and precision plans", ENCODERS + DECODERS,
            body, figure=(TABLE_FILE, "drop_cosine_mean"))
