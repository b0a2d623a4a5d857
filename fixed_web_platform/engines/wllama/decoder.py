"""The decoder kind on wllama (web/engines/wllama_decoder.js): llama.cpp loads the run's GGUF file
from the local server, generates greedily from the prompt (end of sequence ignored, so every
engine generates the same count), then scores each evaluation row position by position.

Prompts go to llama.cpp as text (wllama 3.8.1's completion rejects token-id prompts): the
decoded ids of the model's tokenizer without the special ids it puts first (Gemma's
beginning-of-sequence id, which llama.cpp adds itself), tokenized again by llama.cpp from the
same GGUF vocabulary. The page returns how many tokens llama.cpp made of every prompt, and a count that
differs from the harness's makes the row invalid (the texts would not be the same tokens).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from typing import Any

from ...page_protocol import PageReply
from ...precision.quantizers import QUANTIZERS
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import DEFAULT_GRANULARITY, BrowserName, Outcome, Platform
from ...workloads.decoder import DecoderWorkload
from ...workloads.decoder.prepared import held_decoder
from ..base import BrowserFacts, Engine, EngineJob, Executed, KindRunner, Refusal
from . import GGUF_DIR, GGUF_URL, HELD, NO_FORMAT, SHIPPED, WllamaEngine, gguf_files
from .prepared import TOP_K, prepare_gguf

RUNNER = "wllama_decoder"
THREADS = 2
"""llama.cpp threads asked for (the page is cross-origin isolated; the number in effect is reported)."""
CONTEXT_ROUND = 256
LOAD_TIMEOUT_S = 120.0
"""How long the page waits for llama.cpp to load a model before it reports a failure (loading
SmolLM2-135M at F32, 540 MB, takes about 10 s here; its WebGPU start-up hangs in Firefox)."""
BUFFER_LINE = re.compile(r"(\S+)\s+(model|LoRA|KV|RS|compute|output|rotation|layer input) buffer size\s*=\s*([0-9.]+) MiB")
"""llama.cpp's own log lines saying which backend holds which buffer ('CPU model buffer size = 92.10 MiB')."""
CPU_BUFFERS = ("CPU", "CPU_Mapped", "CPU_REPACK")
HANGS = {(BrowserName.FIREFOX, Platform.WEBGPU): (
    "not attempted: wllama's WebGPU start-up in Firefox never returned here (3.8.1, 2026-11-25: no reply "
    "in 600 s, the page's own 120 s limit never fired; 3.13.0, 2026-12-04: SmolLM2-135M Q8_0, no result "
    "in 300 s). Set WLLAMA_TRY_HANGS=1 to attempt it")}
"""Browser x platform pairs where the page was seen to hang, refused when the plan is built so a
sweep does not lose its time limit to each (``WLLAMA_TRY_HANGS=1`` attempts them)."""
COMPUTE_DTYPE = {"F32": "f32", "F16": "f16", "Q8_0": "i8dot", "Q4_0": "i8dot", "Q4_1": "i8dot"}
"""What llama.cpp's CPU backend computes each format's matmuls in: f32; f16; for quantized
weights, integer dot products with the activations quantized to 8 bits (its vec_dot_q*_q8)."""


def buffers(log: str) -> dict[str, dict[str, float]]:
    """Backend -> {buffer kind -> MiB} from llama.cpp's log lines (what the page forwarded)."""
    out: dict[str, dict[str, float]] = {}
    for line in log.splitlines():
        m = BUFFER_LINE.search(line)
        if m:
            kinds = out.setdefault(m.group(1), {})
            kinds[m.group(2)] = kinds.get(m.group(2), 0.0) + float(m.group(3))
    return out


class WllamaDecoder(KindRunner):
    runner = RUNNER
    weight_quants = tuple(QUANTIZERS)
    """Every quantizer's codes, in ``held`` files (Q4_1 holds integer and float zeros alike); its
    other formats round by llama.cpp's rules and are planned once, as the default's."""

    def refusal(self, engine: Engine, run: RunSpec) -> str:
        why = super().refusal(engine, run)
        if why:
            return why
        workload = run.workload
        hang = HANGS.get((run.browser, engine.platform))
        if hang and os.environ.get("WLLAMA_TRY_HANGS") != "1":
            return hang
        if not run.weight_format:
            return NO_FORMAT.get(run.bits, f"wllama has no llama.cpp format planned for {run.bits}-bit weights")
        if run.weight_format == HELD and (run.bits, run.block_size, run.granularity) != (
                gguf_files.HELD_BITS, gguf_files.HELD_BLOCK, DEFAULT_GRANULARITY):
            return (f"the harness's codes go into llama.cpp's {gguf_files.HELD_TYPE}, which holds {gguf_files.HELD_BITS}-bit "
                    f"blocks of {gguf_files.HELD_BLOCK} along K, not {run.bits}-bit {run.granularity} blocks of "
                    f"{run.block_size}")
        if not isinstance(workload, DecoderWorkload):
            return f"wllama runs decoder workloads, not {workload.kind}"
        if workload.rules:
            return ("per-layer precision rules are not written into GGUF files here (the 'shipped' row is "
                    "llama.cpp's own mix of formats)")
        if gguf_files.model_file(workload.model, workload.random_weights) is None:
            return (f"wllama runs GGUF files; model {workload.model} is not one"
                    + (" (--random-weights)" if workload.random_weights else ""))
        return ""

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob | Refusal:
        assert isinstance(engine, WllamaEngine)
        workload = run.workload
        assert isinstance(workload, DecoderWorkload)
        why = self.refusal(engine, run)
        if why:
            return Refusal(Outcome.UNSUPPORTED, why)
        source_file = gguf_files.model_file(workload.model, False)
        assert source_file is not None
        as_shipped, as_held = run.weight_format == SHIPPED, run.weight_format == HELD
        if as_held:
            held = await asyncio.to_thread(held_decoder, workload, run.bits, run.block_size, run.seed,
                                           weight_quant=run.weight_quant)
            path = await asyncio.to_thread(gguf_files.held_file_for, source_file, held, GGUF_DIR)
        else:
            path = await asyncio.to_thread(gguf_files.file_for, source_file, run.weight_format, GGUF_DIR)
        fmt = (gguf_files.shipped_format(workload.model, False) if as_shipped
               else gguf_files.HELD_TYPE if as_held else run.weight_format)
        prepared = await asyncio.to_thread(prepare_gguf, workload, fmt, path, as_shipped)
        tokens = prepared.tokens
        texts, length = tokens.eval_ids.shape
        decode = tokens.text
        options: dict[str, Any] = {
            "assets": engine.build(run).url,
            "model_url": GGUF_URL + path.name,
            "gpu_layers": engine.gpu_layers,
            "threads": THREADS,
            "load_timeout_ms": int(min(LOAD_TIMEOUT_S, timing.timeout_s / 2) * 1000),
            "n_ctx": -(-max(workload.prompt_len + workload.new_tokens, length) // CONTEXT_ROUND) * CONTEXT_ROUND,
            "prompt": {"text": decode(tokens.prompt), "tokens": int(len(tokens.prompt))},
            "new_tokens": workload.new_tokens,
            "score": {"prefixes": [[decode(row[:t + 1]) for t in range(length)] for row in tokens.eval_ids],
                      "next_ids": [[int(i) for i in row[1:]] for row in tokens.eval_ids],
                      "top_k": TOP_K, "texts": texts, "rows": length},
        }
        spec = self.spec(engine, run, timing, {}, prepared.outputs, options)
        label = f"gguf {fmt}" + (" (as shipped)" if as_shipped else f" (the harness's {run.weight_quant} codes)"
                                 if as_held else "")
        types = Counter(gguf_files.tensor_types(path).values())
        return EngineJob(spec=spec, tensors={}, prepared=prepared, weight_format=label,
                         weight_dtype=",".join(f"{t}x{n}" for t, n in types.most_common()),
                         details={"gguf": path.name, "tensor_types": dict(types)})

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        prepared = job.prepared
        held = buffers(page.placement)
        if not held:
            return Executed(None, "", "", "the page sent none of llama.cpp's buffer lines (where the model was held)")
        backends = {b for b, kinds in held.items() if "model" in kinds}
        on_cpu = all(b in CPU_BUFFERS for b in backends)
        executed_on = Platform.WASM.value if on_cpu else Platform.WEBGPU.value
        note = ""
        if engine.platform is Platform.WEBGPU and on_cpu:
            note = ("llama.cpp found no WebGPU device it could use and ran on its CPU backend "
                    f"({page.fallback or 'no reason logged'})")
        fmt = getattr(prepared, "weight_format", "")
        bits = gguf_files.format_bits(fmt)
        problem = ""
        tokens = page.kind_fields.get("decoder", {}).get("engine_tokens")
        if not isinstance(tokens, dict):
            problem = "the page sent no llama.cpp prompt token counts"
        else:
            length = prepared.tokens.eval_ids.shape[1]
            expected = [t + 1 for _ in range(prepared.tokens.eval_ids.shape[0]) for t in range(length)]
            scored = tokens["scored"]
            differ = sum(a != b for a, b in zip(scored, expected)) + abs(len(scored) - len(expected))
            if tokens["prompt"] != len(prepared.tokens.prompt):
                problem = (f"llama.cpp made {tokens['prompt']} tokens of the prompt text, not the "
                           f"{len(prepared.tokens.prompt)} the other engines get")
            elif differ:
                problem = (f"llama.cpp tokenized {differ} of the {len(expected)} scored prefixes to a different "
                           "length than the model's tokenizer")
        compute = COMPUTE_DTYPE.get(fmt, "") if on_cpu else ""
        return Executed(bits, compute, executed_on, problem, note,
                        kernel_variant="llama.cpp " + "+".join(sorted(backends)))
