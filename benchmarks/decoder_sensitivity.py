"""Decoder sensitivity: which of a decoder's layer roles can take fewer bits. Every linear layer at
8-bit except one role (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head)
at the low bits, measured in the browser on the harness's WGSL decoder, beside uniform 8-bit and
uniform low-bit; teacher-forced KL(fp32 || engine) and next-token top-1 agreement per probe. What
fixed_web_platform/workloads/decoder/data/mixed_precision.json was chosen from (docs/guides/decoders.md).

    .venv/bin/python benchmarks/decoder_sensitivity.py [--model smollm2-135m] [--low-bits 4] [--weight-quant gptq-offset]
        [--output-dir DIR]      # resumable: run_real_webgpu_webnn.py --resume DIR finishes it
    .venv/bin/python benchmarks/decoder_sensitivity.py --from results/<dir>
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform import sweep  # noqa: E402
from fixed_web_platform.harness.runner import SweepOptions  # noqa: E402
from fixed_web_platform.models.rules import PrecisionRule  # noqa: E402
from fixed_web_platform.paths import RESULTS_ROOT  # noqa: E402
from fixed_web_platform.plan import TimingConfig, build_plan  # noqa: E402
from fixed_web_platform.precision.quantizers import DEFAULT_QUANTIZER, QUANTIZERS  # noqa: E402
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402
from fixed_web_platform.vocabulary import BrowserName, Platform  # noqa: E402
from fixed_web_platform.workloads import DecoderWorkload  # noqa: E402

ROLES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
         "mlp.up_proj", "mlp.down_proj", "lm_head")
TIMING = TimingConfig(warmup=0, min_iterations=1, min_time_s=0, max_iterations=1, timeout_s=600)


def workloads(model: str, low: int, eval_len: int) -> list[DecoderWorkload]:
    base = DecoderWorkload.create(model, prompt_len=8, new_tokens=4, eval_len=eval_len)
    out = [base]
    for role in ROLES:
        match = role if role == "lm_head" else f"model.layers.*.{role}"
        out.append(DecoderWorkload.create(model, prompt_len=8, new_tokens=4, eval_len=eval_len,
                                          rules=(PrecisionRule(match, low),), rules_name=f"probe:{role}@{low}"))
    return out


def table(directory: Path) -> str:
    rows = pd.read_csv(directory / "results.csv", keep_default_na=False)
    header = ["probe", "plan", "quantizer", "outcome", "KL(fp32 || engine)", "next-token top-1", "perplexity", "weight MiB"]
    body = [[r["precision_rules"] or f"uniform {r['bits_requested']}-bit", r["precision_plan"],
             r.get("weight_quant", "") or "minmax", r["outcome"],
             f"{float(r['kl_mean']):.4f}" if r["kl_mean"] != "" else "", f"{float(r['next_token_top1']):.3f}"
             if r["next_token_top1"] != "" else "", f"{float(r['perplexity']):.2f}" if r["perplexity"] != "" else "",
             f"{float(r['weight_bytes']) / 2**20:.1f}" if r["weight_bytes"] != "" else ""]
            for _, r in rows.iterrows()]
    return "\n".join(markdown_lines(header, body))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--low-bits", type=int, default=4)
    parser.add_argument("--eval-len", type=int, default=64)
    parser.add_argument("--browser", default="chrome")
    parser.add_argument("--weight-quant", default=DEFAULT_QUANTIZER, choices=list(QUANTIZERS),
                        help="the quantizer of every 8- and low-bit layer (default %(default)s)")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="the results folder (default results/decoder_sensitivity_<model>_<bits>bit"
                             "[_<quantizer>]); run_real_webgpu_webnn.py --resume DIR finishes an interrupted one")
    parser.add_argument("--from", dest="source", type=Path, default=None)
    args = parser.parse_args()
    if args.source is None:
        quantizer = "" if args.weight_quant == DEFAULT_QUANTIZER else f"_{args.weight_quant}"
        out = args.output_dir or RESULTS_ROOT / f"decoder_sensitivity_{args.model}_{args.low_bits}bit{quantizer}"
        probes = workloads(args.model, args.low_bits, args.eval_len)
        browser = [BrowserName(args.browser)]
        runs = (build_plan(browser, [Platform.WEBGPU], probes, [8], weight_quant=args.weight_quant)
                + build_plan(browser, [Platform.WEBGPU], probes[:1], [args.low_bits], weight_quant=args.weight_quant))
        plan = [replace(r, run_id=i) for i, r in enumerate(runs)]
        try:
            writer = sweep.start(plan, TIMING, output_dir=out)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        asyncio.run(sweep.execute(plan, writer, SweepOptions(timing=TIMING)))
        args.source = out
    print(table(args.source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
