"""The ``encoder`` workload: a transformer encoder run end to end on a fixed set of texts.

The workload names the model (resolved offline, see models/source.py), the shapes of a forward
pass (batch x sequence length), the texts, and the precision rules that give each linear layer
its bits (no rules: every layer at the run's bits). Everything else lives in ``models/``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from ...architectures import ArchConfig, Architecture
from ...models import rules as layer_rules
from ...models import source
from ...models.calibration import CALIBRATION_NAME
from ...models.inputs import BUILTIN_NAME, builtin_texts, read_texts


@runtime_checkable
class EncoderConfig(ArchConfig, Protocol):
    """What the encoder kind reads of an architecture's configuration (BERT's has it all)."""

    @property
    def layers(self) -> int: ...

    @property
    def hidden(self) -> int: ...

    @property
    def heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def intermediate(self) -> int: ...

    @property
    def vocab(self) -> int: ...

    @property
    def type_vocab(self) -> int: ...

    @property
    def eps(self) -> float: ...


DEFAULT_BATCH_SIZE = 4
DEFAULT_SEQ_LEN = 32


@dataclass(frozen=True)
class EncoderWorkload:
    name: str
    """The model as the user named it (a name or a folder)."""
    model: str
    batch_size: int = DEFAULT_BATCH_SIZE
    seq_len: int = DEFAULT_SEQ_LEN
    random_weights: bool = False
    texts: tuple[str, ...] = ()
    inputs_name: str = BUILTIN_NAME
    rules: tuple[layer_rules.PrecisionRule, ...] = ()
    rules_name: str = ""
    """'' (every layer at --bits), 'mixed-precision', or the rules file's path."""
    calibration_texts: tuple[str, ...] = ()
    """What int8-activation runs calibrate on (models/calibration.py); () is the built-in set."""
    calibration_name: str = ""
    """'' (the built-in calibration set) or the ``--calibration`` file's path."""
    kind: ClassVar[str] = "encoder"

    @classmethod
    def create(cls, model: str, *, batch_size: int = DEFAULT_BATCH_SIZE, seq_len: int = DEFAULT_SEQ_LEN,
               random_weights: bool = False, texts: tuple[str, ...] | None = None, inputs_name: str = BUILTIN_NAME,
               rules: tuple[layer_rules.PrecisionRule, ...] = (), rules_name: str = "",
               calibration_texts: tuple[str, ...] = (), calibration_name: str = "",
               random_weights_hint: str = source.RANDOM_WEIGHTS_FLAG) -> EncoderWorkload:
        """The workload with the built-in texts unless ``texts`` are given; checks the model now.
        ``random_weights_hint`` is how the caller's words ask for random weights (the CLI's
        --random-weights, the API's random_weights=True): a model without weights names it."""
        resolved = source.resolve(model, random_weights, random_weights_hint)
        arch, cfg = source.architecture(resolved)
        if arch.kind != cls.kind:
            raise ValueError(f"model {model}: the {arch.name} architecture is run by the {arch.kind!r} "
                             f"workload kind, not {cls.kind!r}")
        if batch_size < 1:
            raise ValueError(f"batch size must be at least 1, got {batch_size}")
        if not 2 <= seq_len <= cfg.max_positions:
            raise ValueError(f"sequence length {seq_len} is outside 2..{cfg.max_positions} "
                             f"(the model's maximum positions)")
        if not random_weights and resolved.folder is not None and not resolved.onnx_only:
            source.load(resolved, False, 0)  # a folder without usable weights fails here, in one line
        shared = set(calibration_texts) & set(texts if texts is not None else builtin_texts())
        if shared:  # what a precision is fit to (int8 activations, gptq) is never what it is judged on
            raise ValueError(f"--calibration {calibration_name or '(given)'} shares {len(shared)} of its "
                             f"{len(set(calibration_texts))} texts with the evaluated inputs ({inputs_name}): "
                             "what a precision is fit to must be apart from what its accuracy is judged on")
        return cls(name=resolved.name if resolved.folder is None or model == resolved.name else model,
                   model=model, batch_size=batch_size, seq_len=seq_len, random_weights=random_weights,
                   texts=tuple(texts) if texts is not None else builtin_texts(), inputs_name=inputs_name,
                   rules=tuple(rules), rules_name=rules_name, calibration_texts=tuple(calibration_texts),
                   calibration_name=calibration_name)

    @classmethod
    def from_options(cls, model: str, *, batch_size: int = DEFAULT_BATCH_SIZE, seq_len: int = DEFAULT_SEQ_LEN,
                     random_weights: bool = False, inputs: str | Path | None = None,
                     mixed_precision: bool = False, precision_rules: str | Path | None = None,
                     calibration: str | Path | None = None,
                     random_weights_hint: str = source.RANDOM_WEIGHTS_FLAG) -> EncoderWorkload:
        """The CLI's and the API's words as a workload; ValueError (one line) for anything unusable."""
        rules, rules_name = layer_rules.chosen_rules(mixed_precision, precision_rules)
        texts, inputs_name = None, BUILTIN_NAME
        if inputs is not None:
            texts, inputs_name = read_texts(inputs), str(inputs)
        calibration_texts = read_texts(calibration, "calibration file") if calibration is not None else ()
        return cls.create(model, batch_size=batch_size, seq_len=seq_len, random_weights=random_weights,
                          texts=texts, inputs_name=inputs_name, rules=rules, rules_name=rules_name,
                          calibration_texts=calibration_texts,
                          calibration_name=str(calibration) if calibration is not None else "",
                          random_weights_hint=random_weights_hint)

    @property
    def label(self) -> str:
        extra = f" {self.rules_name}" if self.rules_name else ""
        return f"{self.name} {self.batch_size}x{self.seq_len}{extra}"

    @property
    def calibration_label(self) -> str:
        """What int8-activation runs of this workload calibrate on (the row's ``calibration``)."""
        return self.calibration_name or CALIBRATION_NAME

    @property
    def weights(self) -> str:
        return source.weights_name(self.model, self.random_weights)

    def config(self) -> EncoderConfig:
        return _architecture(self.model, self.random_weights)[1]

    def architecture(self) -> Architecture:
        return _architecture(self.model, self.random_weights)[0]

    def op_needs(self, passes: tuple[str, ...] | None = None) -> frozenset[str]:
        """What the architecture's graph at this batch and length asks of a lowering (``passes``
        only, if given: architectures/ops.py)."""
        return self.architecture().graph(self.config(), batch=self.batch_size, seq=self.seq_len).needs(passes)

    @property
    def flops(self) -> int:
        """Multiply-adds x2 of one forward pass: the linear layers and attention's two matmuls."""
        cfg = self.config()
        tokens = self.batch_size * self.seq_len
        linear = sum(layer.k * layer.n for layer in cfg.linear_layers())
        attention = cfg.layers * 2 * self.batch_size * self.seq_len * self.seq_len * cfg.hidden
        return 2 * (linear * tokens + attention)

    def validate(self, bits: int, block_size: int) -> None:
        layer_rules.check_packing(layer_rules.assign(self.config().linear_layers(), self.rules, bits, block_size))

    def row_fields(self, bits: int, block_size: int) -> dict[str, Any]:
        plan = layer_rules.assign(self.config().linear_layers(), self.rules, bits, block_size)
        return {"model": self.name, "weights": self.weights,
                "batch_size": self.batch_size, "seq_len": self.seq_len, "inputs": self.inputs_name,
                "precision_plan": layer_rules.summary(plan), "precision_rules": self.rules_name}

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "model": self.model, "batch_size": self.batch_size,
                "seq_len": self.seq_len, "random_weights": self.random_weights, "texts": list(self.texts),
                "inputs_name": self.inputs_name, "rules": [r.to_json() for r in self.rules],
                "rules_name": self.rules_name, "calibration_texts": list(self.calibration_texts),
                "calibration_name": self.calibration_name}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> EncoderWorkload:
        return cls(name=str(doc["name"]), model=str(doc["model"]), batch_size=int(doc["batch_size"]),
                   seq_len=int(doc["seq_len"]), random_weights=bool(doc["random_weights"]),
                   texts=tuple(str(t) for t in doc["texts"]), inputs_name=str(doc["inputs_name"]),
                   rules=layer_rules.parse_rules(doc["rules"], "plan") if doc["rules"] else (),
                   rules_name=str(doc["rules_name"]),
                   calibration_texts=tuple(str(t) for t in doc.get("calibration_texts", ())),
                   calibration_name=str(doc.get("calibration_name", "")))


@functools.lru_cache(maxsize=8)
def _architecture(model: str, random_weights: bool) -> tuple[Architecture, EncoderConfig]:
    """Resolved once per process: rows, flops and validation all ask for it."""
    arch, cfg = source.architecture(source.resolve(model, random_weights))
    if not isinstance(cfg, EncoderConfig):
        raise ValueError(f"model {model}: the {arch.name} configuration lacks what an encoder needs")
    return arch, cfg
