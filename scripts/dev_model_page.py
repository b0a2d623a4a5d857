"""Developer tool: run one whole-model job in one real browser and print how its output compares.

Not part of the sweep (no rows are written); for working on a model page runner:

    .venv/bin/python scripts/dev_model_page.py --engine harness --platform webgpu --bits 4 \
        --browser chrome --batch-size 2 --seq-len 16 --texts 4

prints the page's status/reason, its timings, per-layer facts, and the output's relative RMS
error vs the float64 dequantized reference (the engine's correctness) and cosine vs PyTorch fp32.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.browsers import resolve  # noqa: E402
from fixed_web_platform.engines.base import Refusal  # noqa: E402
from fixed_web_platform.engines.registry import build_job, engine_for, read_reply  # noqa: E402
from fixed_web_platform.harness.page import leave_page, visit_page  # noqa: E402
from fixed_web_platform.harness.runner import BrowserRunner, SweepOptions, asset_mounts  # noqa: E402
from fixed_web_platform.harness.server import JobServer  # noqa: E402
from fixed_web_platform.models.inputs import builtin_texts  # noqa: E402
from fixed_web_platform.page_protocol import parse_outputs, parse_page_reply  # noqa: E402
from fixed_web_platform.plan import RunSpec, TimingConfig  # noqa: E402
from fixed_web_platform.precision import quant  # noqa: E402
from fixed_web_platform.results.writer import ResultWriter  # noqa: E402
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform, PrecisionMode  # noqa: E402
from fixed_web_platform.workloads import EncoderWorkload  # noqa: E402


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="harness")
    ap.add_argument("--platform", default="webgpu")
    ap.add_argument("--browser", default="chrome")
    ap.add_argument("--bits", type=int, default=32)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--random-weights", action="store_true")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--texts", type=int, default=4, help="how many built-in texts")
    ap.add_argument("--experimental-precision", action="store_true")
    ap.add_argument("--iterations", type=int, default=3)
    a = ap.parse_args()
    texts = builtin_texts()[: a.texts]
    workload = EncoderWorkload.create(a.model, batch_size=a.batch_size, seq_len=a.seq_len,
                                    random_weights=a.random_weights, texts=texts)
    mode = PrecisionMode.EXPERIMENTAL if a.experimental_precision else PrecisionMode.STANDARD
    run = RunSpec(0, BrowserName(a.browser), Platform(a.platform), workload, a.bits, 32, 0, mode, 0,
                  engine=EngineName(a.engine))
    engine = engine_for(run.engine, run.platform)
    if engine is None:
        print(f"no engine {a.engine} on {a.platform}")
        return 2
    timing = TimingConfig(warmup=1, min_iterations=a.iterations, min_time_s=0.0, timeout_s=600)
    with tempfile.TemporaryDirectory() as tmp:
        writer = ResultWriter(Path(tmp))
        async with JobServer(asset_mounts()) as server:
            runner = BrowserRunner(server, resolve(run.browser), writer, SweepOptions(timing=timing))
            try:
                session = await runner.ensure_session()
                job = await build_job(run, timing, runner)
                if isinstance(job, Refusal):
                    print("refused:", job.outcome, job.reason)
                    return 1
                visit = await visit_page(server, session, job.spec, job.tensors, timing.timeout_s)
                print("visit:", visit.outcome, visit.reason[:500])
                if visit.payload is None:
                    return 1
                page = parse_page_reply(visit.payload, timing.max_iterations)
                show = {k: v for k, v in visit.payload.items() if k not in ("probe", "layers")}
                print(json.dumps(show, indent=1)[:3000])
                for layer in page.layers[:8]:
                    print("  layer", layer)
                if page.status != "ok":
                    return 1
                prepared = job.prepared
                out = prepared.judged(parse_outputs(visit.output, prepared.outputs))
                executed = read_reply(run, job, page)
                print("executed:", executed.bits, executed.compute_dtype, executed.executed_on,
                      executed.problem, executed.note)
                print("rel error vs float64 dequantized reference:",
                      quant.rel_rms_error(out, prepared.ref_dequantized))
                cos = (out * prepared.ref_float).sum(1) / np.linalg.norm(out, axis=1)
                print(f"cosine vs PyTorch fp32: min {cos.min():.6f} mean {cos.mean():.6f}")
                await leave_page(session)
            finally:
                await runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
