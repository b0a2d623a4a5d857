"""The ``speech`` workload: a speech-recognition model (Whisper) transcribing a set of clips.

One workload is one model on one set of clips (the built-in espeak-ng set, its first ``clips``,
or a folder of WAV files), each clip one 30-second window, decoded greedily up to ``max_tokens``
(architectures/whisper/decoding.py's rule on every engine).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...architectures import Architecture
from ...architectures.whisper.config import WhisperConfig
from ...models import rules as layer_rules
from ...models import calibration as models_calibration
from ...models import smoothing, source
from ...models.calibration import CALIBRATION_NAME
from ...models.inputs import BUILTIN_NAME
from .audio import Clip, builtin_clips, folder_clips
from .calibration import SpeechClips, int8_output_misses

DEFAULT_CLIPS = 8
"""Built-in clips a run transcribes by default (of the 30 in data/sentences.txt: --clips)."""
DEFAULT_MAX_TOKENS = 48
RULES = Path(__file__).parent / "data" / "mixed_precision.json"
"""--mixed-precision for Whisper (data/mixed_precision.json)."""


@dataclass(frozen=True)
class SpeechWorkload:
    name: str
    """The model that runs (a substituted name says what ran, not what was asked)."""
    model: str
    clips: tuple[Clip, ...]
    max_tokens: int = DEFAULT_MAX_TOKENS
    random_weights: bool = False
    inputs_name: str = BUILTIN_NAME
    rules: tuple[layer_rules.PrecisionRule, ...] = ()
    rules_name: str = ""
    asked: str = ""
    """The model the user named when another runs in its place ('' otherwise)."""
    kind: ClassVar[str] = "speech"

    @classmethod
    def from_options(cls, model: str, *, clips: int = DEFAULT_CLIPS, max_tokens: int = DEFAULT_MAX_TOKENS,
                     random_weights: bool = False, inputs: str | Path | None = None,
                     mixed_precision: bool = False, precision_rules: str | Path | None = None,
                     random_weights_hint: str = source.RANDOM_WEIGHTS_FLAG) -> SpeechWorkload:
        resolved = source.resolve(model, random_weights, random_weights_hint)
        arch, cfg = source.architecture(resolved)
        if arch.kind != cls.kind:
            raise ValueError(f"model {model}: the {arch.name} architecture is run by the {arch.kind!r} "
                             f"workload kind, not {cls.kind!r}")
        assert isinstance(cfg, WhisperConfig)
        if not 1 <= max_tokens <= cfg.target_positions - len(cfg.prompt):
            raise ValueError(f"--max-tokens must be between 1 and {cfg.target_positions - len(cfg.prompt)}, "
                             f"got {max_tokens}")
        rules, rules_name = layer_rules.chosen_rules(mixed_precision, precision_rules, RULES)
        if inputs is not None:
            chosen, inputs_name = folder_clips(inputs), str(inputs)
        else:
            chosen, inputs_name = builtin_clips(clips), BUILTIN_NAME
        if not random_weights and resolved.folder is not None and not resolved.onnx_only:
            source.load(resolved, False, 0)  # weights that do not load fail here, in one line
        return cls(name=resolved.name, model=resolved.name if resolved.asked else model, clips=chosen,
                   max_tokens=max_tokens, random_weights=random_weights, inputs_name=inputs_name,
                   rules=tuple(rules), rules_name=rules_name, asked=resolved.asked)

    @property
    def label(self) -> str:
        extra = f" {self.rules_name}" if self.rules_name else ""
        return f"{self.name} {len(self.clips)} clips{extra}"

    @property
    def calibration_label(self) -> str:
        """What int8 activations and a calibrated weight quantizer (gptq) see: the built-in calibration sentences,
        spoken (calibration.py)."""
        return CALIBRATION_NAME

    @property
    def weights(self) -> str:
        return source.weights_name(self.model, self.random_weights)

    def config(self) -> WhisperConfig:
        return _architecture(self.model, self.random_weights)[1]

    def int8_outputs_held(self, bits: int, block_size: int, seed: int, observer: str) -> SpeechWorkload:
        """This workload for the fused int8 form: the 8-bit layers whose outputs int8 cannot hold
        (calibration.int8_output_misses) held in float32 by exact-name rules before the run's own,
        so every engine plans and holds them so."""
        misses = int8_output_misses(self, bits, block_size, seed, observer)
        return dataclasses.replace(self, rules=layer_rules.float32_first(misses, self.rules)) if misses else self

    @property
    def act_scale(self) -> str:
        """How its int8 inputs are scaled (the row's ``act_scale``: speech/calibration.SpeechClips)."""
        return models_calibration.act_scale(SpeechClips)

    @property
    def act_smoothing(self) -> str:
        """How its int8 inputs are smoothed (the row's ``act_smoothing``: models/smoothing.py)."""
        return smoothing.label(self.architecture(), self.config())

    def architecture(self) -> Architecture:
        return _architecture(self.model, self.random_weights)[0]

    def op_needs(self, passes: tuple[str, ...] | None = None) -> frozenset[str]:
        """What the architecture's graph asks of a lowering (``passes`` only, if given:
        architectures/ops.py)."""
        return self.architecture().graph(self.config()).needs(passes)

    @property
    def flops(self) -> int:
        return 0  # decoding length is data-dependent: no GFLOP/s for speech rows

    def validate(self, bits: int, block_size: int) -> None:
        layer_rules.check_packing(layer_rules.assign(self.config().linear_layers(), self.rules, bits, block_size))

    def row_fields(self, bits: int, block_size: int) -> dict[str, Any]:
        plan = layer_rules.assign(self.config().linear_layers(), self.rules, bits, block_size)
        return {"model": self.name, "weights": self.weights, "inputs": self.inputs_name,
                "clips": len(self.clips), "max_tokens": self.max_tokens,
                "precision_plan": layer_rules.summary(plan), "precision_rules": self.rules_name}

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "model": self.model, "max_tokens": self.max_tokens,
                "clips": [{"name": c.name, "path": c.path, "reference": c.reference} for c in self.clips],
                "random_weights": self.random_weights, "inputs_name": self.inputs_name,
                "rules": [r.to_json() for r in self.rules], "rules_name": self.rules_name, "asked": self.asked}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SpeechWorkload:
        return cls(name=str(doc["name"]), model=str(doc["model"]), max_tokens=int(doc["max_tokens"]),
                   clips=tuple(Clip(str(c["name"]), str(c["path"]), str(c["reference"])) for c in doc["clips"]),
                   random_weights=bool(doc["random_weights"]), inputs_name=str(doc["inputs_name"]),
                   rules=layer_rules.parse_rules(doc["rules"], "plan") if doc["rules"] else (),
                   rules_name=str(doc["rules_name"]), asked=str(doc.get("asked", "")))


@functools.lru_cache(maxsize=8)
def _architecture(model: str, random_weights: bool) -> tuple[Architecture, WhisperConfig]:
    arch, cfg = source.architecture(source.resolve(model, random_weights))
    if not isinstance(cfg, WhisperConfig):
        raise ValueError(f"model {model}: the {arch.name} configuration is not Whisper's")
    return arch, cfg
