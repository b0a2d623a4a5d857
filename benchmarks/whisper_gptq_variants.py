"""How far Whisper tiny.en's 4-bit word error rate moves under equally principled GPTQ choices: the
dampening, how many calibration clips, and which part stays at 8 bits. Each variant's weights are
held by the harness's own code (models/quantized.hold_model, the bytes every engine holds) and
transcribed in PyTorch fp32 with them over the built-in clips, by the harness's decoding rule; for
plain ``gptq`` this is the browsers' own figure (5.9% on 30 clips in Firefox's WGSL, ORT wasm and
WebNN alike). docs/design/weight-quantizers.md#whisper-tinyen-at-4-bits-30-clips cites it.

    .venv/bin/python benchmarks/whisper_gptq_variants.py [--clips 30] [--variants base damp0.03 ...]

About 2.5 min per variant here (2 cores), 5 min for the 120-clip calibration (its clips spoken once).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import time
from fnmatch import fnmatch
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixed_web_platform.architectures.whisper import torch_module  # noqa: E402
from fixed_web_platform.models import rules, source  # noqa: E402
from fixed_web_platform.models.calibration import builtin_calibration_texts  # noqa: E402
from fixed_web_platform.models.quantized import hold_model  # noqa: E402
from fixed_web_platform.precision import quantizers  # noqa: E402
from fixed_web_platform.report.markdown import markdown_lines  # noqa: E402
from fixed_web_platform.workloads.speech import accuracy, audio, calibration, prepared  # noqa: E402
from fixed_web_platform.workloads.speech.workload import SpeechWorkload  # noqa: E402

EXTRA = Path(__file__).parent / "data" / "whisper_extra_calibration.txt"


@dataclasses.dataclass(frozen=True)
class Variant:
    what: str
    damp: float = quantizers.GPTQ_DAMP
    calibration_clips: int | None = None
    """The first this many built-in calibration clips (None: all 40)."""
    extra: bool = False
    """The 40 built-in calibration clips and the 80 of EXTRA spoken too."""
    at_8_bits: tuple[str, ...] = ()
    """Layers whose name matches one of these patterns (fnmatch) stay at 8 bits (gptq too)."""


VARIANTS = {
    "base": Variant("gptq as the harness runs it: dampening 0.1, the 40 calibration clips"),
    "damp0.03": Variant("dampening 0.03", damp=0.03),
    "damp0.3": Variant("dampening 0.3", damp=0.3),
    "calib20": Variant("the first 20 calibration clips", calibration_clips=20),
    "calib120": Variant("120 calibration clips (40 + the 80 of benchmarks/data)", extra=True),
    "head8": Variant("the head (proj_out) at 8 bits", at_8_bits=("proj_out",)),
    "encoder8": Variant("the encoder at 8 bits (decoder and head at 4)", at_8_bits=("model.encoder.*",)),
    "head-crosskv8": Variant("the head and the cross-attention keys and values at 8 bits (the --mixed-precision "
                             "rules before this measurement)",
                             at_8_bits=("proj_out", "*.encoder_attn.k_proj", "*.encoder_attn.v_proj")),
    "decoder8": Variant("the decoder and the head at 8 bits (the encoder at 4)", at_8_bits=("model.decoder.*", "proj_out")),
    "encoder-attn8": Variant("the encoder's attention at 8 bits (its feed-forward at 4)",
                             at_8_bits=("model.encoder.*.self_attn.*",)),
    "encoder-ffn8": Variant("the encoder's feed-forward at 8 bits (its attention at 4)",
                            at_8_bits=("model.encoder.*.fc1", "model.encoder.*.fc2")),
}


def run(variant: Variant, workload: SpeechWorkload, loaded: source.LoadedModel, bits: int, block: int
        ) -> tuple[float, int, int]:
    """(WER against fp32's transcripts, clips equal to fp32's, bytes of the held linear layers)."""
    cfg = loaded.config
    plan = tuple(dataclasses.replace(p, bits=8) if any(fnmatch(p.layer.name, pat) for pat in variant.at_8_bits) else p
                 for p in rules.assign(cfg.linear_layers(), workload.rules, bits, block))
    texts = builtin_calibration_texts()
    if variant.extra:
        texts += tuple(line.strip() for line in EXTRA.read_text().splitlines() if line.strip() and not line.startswith("#"))
    clips = audio.spoken(texts)[:variant.calibration_clips]
    original, damp = calibration.calibration_clips, quantizers.GPTQ_DAMP
    calibration.calibration_clips = lambda count=None: clips[:count]
    quantizers.GPTQ_DAMP = variant.damp
    calibration.clip_moments.cache_clear()
    hold_model.cache_clear()
    try:
        moments = functools.partial(calibration.clip_moments, loaded, workload.max_tokens)
        held = hold_model(loaded, plan, False, "gptq", moments)
    finally:
        calibration.calibration_clips, quantizers.GPTQ_DAMP = original, damp
    net = torch_module.whisper_module(cfg, held.exec_weights())
    tokenizer = prepared.tokenizer_for(workload)
    hypotheses = []
    for clip in workload.clips:
        encoded = torch_module.encode(net, audio.features(audio.read_wav(clip.path), cfg.mels))
        hypotheses.append(tokenizer.decode(torch_module.greedy(cfg, net, encoded, workload.max_tokens),
                                           skip_special_tokens=True))
    _, _, reference_ids = prepared.fp32_references(loaded, workload)
    references = [tokenizer.decode(ids, skip_special_tokens=True) for ids in reference_ids]
    return (accuracy.wer(references, hypotheses), sum(a == b for a, b in zip(references, hypotheses)),
            sum(layer.held.weight_bytes for layer in held.layers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=30)
    parser.add_argument("--bits", type=int, default=4)
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()
    workload = SpeechWorkload.from_options("whisper-tiny.en", clips=args.clips)
    loaded = source.load(source.resolve(workload.model, False), False, 0)
    body = []
    for name in args.variants:
        start = time.monotonic()
        wer, same, nbytes = run(VARIANTS[name], workload, loaded, args.bits, args.block_size)
        body.append([name, VARIANTS[name].what, f"{nbytes / 2**20:.1f}", f"{100 * wer:.1f}%", f"{same} of {len(workload.clips)}"])
        print(f"{name}: WER vs fp32 {100 * wer:.1f}%, {same} clips = fp32, linear layers {nbytes / 2**20:.1f} MiB "
              f"({time.monotonic() - start:.0f} s)", flush=True)
    print(f"\nwhisper-tiny.en, {args.clips} clips, gptq at {args.bits} bits, block {args.block_size}: WER against fp32's transcripts")
    print("\n".join(markdown_lines(["variant", "what", "linear layers MiB", "WER vs fp32", "clips = fp32"], body)))


if __name__ == "__main__":
    main()
