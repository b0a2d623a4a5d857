"""The ``decoder`` workload: a decoder LLM asked to generate, and scored on a fixed text.

One workload is one prompt length: a run prefills ``prompt_len`` tokens (the beginning of the
evaluation texts), then generates ``new_tokens`` greedily with end of sequence suppressed (every
engine generates the same count). Accuracy is scored teacher-forced on the first ``eval_len``
tokens of each evaluation text (the built-in paragraphs or ``--inputs``, one text per line).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

from ...architectures import DecoderArchitecture, DecoderConfig
from ...models import rules as layer_rules
from ...models import calibration, smoothing, source
from ...models.calibration import CALIBRATION_NAME
from ...models.inputs import BUILTIN_NAME, read_texts
from .int8 import int8_output_misses
from .tokens import TokenPlan, token_plan

BUILTIN_TEXTS = Path(__file__).parent / "data" / "evaluation.txt"
DEFAULT_PROMPT_LEN = 16
DEFAULT_NEW_TOKENS = 32
DEFAULT_EVAL_LEN = 64
MIN_EVAL_LEN = 8
DECODER_RULES = Path(__file__).parent / "data" / "mixed_precision.json"
"""--mixed-precision for decoders (chosen from a measured sensitivity run: docs/guides/decoders.md)."""


def builtin_texts() -> tuple[str, ...]:
    return read_texts(BUILTIN_TEXTS, "built-in evaluation text")


@dataclass(frozen=True)
class DecoderWorkload:
    name: str
    """The model as the user named it (a name, a folder or a GGUF file)."""
    model: str
    prompt_len: int = DEFAULT_PROMPT_LEN
    new_tokens: int = DEFAULT_NEW_TOKENS
    eval_len: int = DEFAULT_EVAL_LEN
    random_weights: bool = False
    texts: tuple[str, ...] = ()
    inputs_name: str = BUILTIN_NAME
    rules: tuple[layer_rules.PrecisionRule, ...] = ()
    rules_name: str = ""
    kind: ClassVar[str] = "decoder"

    @classmethod
    def create(cls, model: str, *, prompt_len: int = DEFAULT_PROMPT_LEN, new_tokens: int = DEFAULT_NEW_TOKENS,
               eval_len: int = DEFAULT_EVAL_LEN, random_weights: bool = False, texts: tuple[str, ...] | None = None,
               inputs_name: str = BUILTIN_NAME, rules: tuple[layer_rules.PrecisionRule, ...] = (),
               rules_name: str = "", random_weights_hint: str = source.RANDOM_WEIGHTS_FLAG) -> DecoderWorkload:
        """The workload, checked now (the model, the lengths against its context and texts)."""
        resolved = source.resolve(model, random_weights, random_weights_hint)
        arch, cfg = source.architecture(resolved)
        if arch.kind != cls.kind:
            raise ValueError(f"model {model}: the {arch.name} architecture is run by the {arch.kind!r} "
                             f"workload kind, not {cls.kind!r}")
        if new_tokens < 1:
            raise ValueError(f"new tokens must be at least 1, got {new_tokens}")
        if prompt_len < 1:
            raise ValueError(f"prompt length must be at least 1, got {prompt_len}")
        if eval_len < MIN_EVAL_LEN:
            raise ValueError(f"evaluation length must be at least {MIN_EVAL_LEN} tokens, got {eval_len}")
        if prompt_len + new_tokens > cfg.max_positions:
            raise ValueError(f"prompt length {prompt_len} + {new_tokens} new tokens is longer than the "
                             f"model's context ({cfg.max_positions} positions)")
        if eval_len > cfg.max_positions:
            raise ValueError(f"evaluation length {eval_len} is longer than the model's context "
                             f"({cfg.max_positions} positions)")
        if not random_weights and resolved.folder is not None and not resolved.onnx_only:
            source.load(resolved, False, 0)  # weights that do not load fail here, in one line
        workload = cls(name=resolved.name if resolved.folder is None or model == resolved.name else model,
                       model=model, prompt_len=prompt_len, new_tokens=new_tokens, eval_len=eval_len,
                       random_weights=random_weights, texts=tuple(texts) if texts is not None else builtin_texts(),
                       inputs_name=inputs_name, rules=tuple(rules), rules_name=rules_name)
        workload.tokens()  # the texts must be long enough: one line now, not in a run
        return workload

    @classmethod
    def from_options(cls, model: str, *, prompt_len: int = DEFAULT_PROMPT_LEN, new_tokens: int = DEFAULT_NEW_TOKENS,
                     eval_len: int = DEFAULT_EVAL_LEN, random_weights: bool = False,
                     inputs: str | Path | None = None, mixed_precision: bool = False,
                     precision_rules: str | Path | None = None,
                     random_weights_hint: str = source.RANDOM_WEIGHTS_FLAG) -> DecoderWorkload:
        rules, rules_name = layer_rules.chosen_rules(mixed_precision, precision_rules, DECODER_RULES)
        texts, inputs_name = None, BUILTIN_NAME
        if inputs is not None:
            texts, inputs_name = read_texts(inputs), str(inputs)
        return cls.create(model, prompt_len=prompt_len, new_tokens=new_tokens, eval_len=eval_len,
                          random_weights=random_weights, texts=texts, inputs_name=inputs_name, rules=rules,
                          rules_name=rules_name, random_weights_hint=random_weights_hint)

    @property
    def label(self) -> str:
        extra = f" {self.rules_name}" if self.rules_name else ""
        return f"{self.name} p{self.prompt_len}+{self.new_tokens}{extra}"

    @property
    def calibration_label(self) -> str:
        """What int8 activations and a calibrated weight quantizer (gptq) see: the built-in calibration set, whose
        sentences are not in the evaluation text (models/calibration.py: DecoderRows)."""
        return CALIBRATION_NAME

    def int8_outputs_held(self, bits: int, block_size: int, seed: int, observer: str) -> DecoderWorkload:
        """This workload for the fused int8 form (int8 inputs and outputs): the 8-bit layers whose
        outputs int8 cannot hold (int8.int8_output_misses) held in float32 by exact-name rules
        before the run's own, so every engine plans and holds them so."""
        misses = int8_output_misses(self, bits, block_size, seed, observer)
        return dataclasses.replace(self, rules=layer_rules.float32_first(misses, self.rules)) if misses else self

    @property
    def act_scale(self) -> str:
        """How its int8 inputs are scaled (the row's ``act_scale``: models/calibration.DecoderRows)."""
        return calibration.act_scale(calibration.DecoderRows)

    @property
    def act_smoothing(self) -> str:
        """How its int8 inputs are smoothed (the row's ``act_smoothing``: models/smoothing.py)."""
        return smoothing.label(self.architecture(), self.config())

    def tokens(self) -> TokenPlan:
        """The token ids of the prompt and the evaluation rows (tokens.py)."""
        return token_plan(self.model, self.random_weights, self.texts, self.inputs_name, self.eval_len,
                          self.prompt_len)

    @property
    def weights(self) -> str:
        return source.weights_name(self.model, self.random_weights)

    def config(self) -> DecoderConfig:
        return _architecture(self.model, self.random_weights)[1]

    def architecture(self) -> DecoderArchitecture:
        return _architecture(self.model, self.random_weights)[0]

    def op_needs(self, passes: tuple[str, ...] | None = None) -> frozenset[str]:
        """What the architecture's graph at this workload's lengths asks of a lowering (``passes``
        only, if given: architectures/ops.py)."""
        context = max(self.prompt_len + self.new_tokens, self.eval_len)
        return self.architecture().graph(self.config(), prompt_len=self.prompt_len, eval_len=self.eval_len,
                                         context=context).needs(passes)

    @property
    def flops(self) -> int:
        """Multiply-adds x2 of one generation: every position through the layers, the head on the
        prefill's last position and each new token, attention's two matmuls over the context."""
        cfg = self.config()
        layers = cfg.linear_layers()
        body = sum(layer.k * layer.n for layer in layers[:-1])
        head = layers[-1].k * layers[-1].n
        positions = self.prompt_len + self.new_tokens - 1
        attention = cfg.layers * 2 * cfg.q_dim * positions * (positions + 1) // 2
        return 2 * (body * positions + head * self.new_tokens + attention)

    def validate(self, bits: int, block_size: int) -> None:
        layer_rules.check_packing(layer_rules.assign(self.config().linear_layers(), self.rules, bits, block_size))

    def row_fields(self, bits: int, block_size: int) -> dict[str, Any]:
        plan = layer_rules.assign(self.config().linear_layers(), self.rules, bits, block_size)
        return {"model": self.name, "weights": self.weights, "inputs": self.inputs_name,
                "prompt_len": self.prompt_len, "new_tokens": self.new_tokens, "eval_len": self.eval_len,
                "precision_plan": layer_rules.summary(plan), "precision_rules": self.rules_name}

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "model": self.model, "prompt_len": self.prompt_len,
                "new_tokens": self.new_tokens, "eval_len": self.eval_len, "random_weights": self.random_weights,
                "texts": list(self.texts), "inputs_name": self.inputs_name,
                "rules": [r.to_json() for r in self.rules], "rules_name": self.rules_name}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> DecoderWorkload:
        return cls(name=str(doc["name"]), model=str(doc["model"]), prompt_len=int(doc["prompt_len"]),
                   new_tokens=int(doc["new_tokens"]), eval_len=int(doc["eval_len"]),
                   random_weights=bool(doc["random_weights"]), texts=tuple(str(t) for t in doc["texts"]),
                   inputs_name=str(doc["inputs_name"]),
                   rules=layer_rules.parse_rules(doc["rules"], "plan") if doc["rules"] else (),
                   rules_name=str(doc["rules_name"]))


@functools.lru_cache(maxsize=8)
def _architecture(model: str, random_weights: bool) -> tuple[DecoderArchitecture, DecoderConfig]:
    arch, cfg = source.architecture(source.resolve(model, random_weights))
    if not isinstance(arch, DecoderArchitecture):
        raise ValueError(f"model {model}: the {arch.name} architecture is not a decoder")
    return arch, cast(DecoderConfig, cfg)
