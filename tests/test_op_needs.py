"""What an architecture's graph asks of an engine's lowering (architectures/ops.py ``needs``), and
the plan's refusal of a run whose graph needs an op or op parameter its engine does not lower."""

from __future__ import annotations

import dataclasses

import pytest
from test_decoder import tiny_hf_config
from test_gemma3 import tiny_gemma_config

from fixed_web_platform.architectures import ARCHITECTURES, ops
from fixed_web_platform.architectures.llama import LLAMA
from fixed_web_platform.engines.registry import RUNS
from fixed_web_platform.plan import build_plan
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform
from fixed_web_platform.workloads import DecoderWorkload

SHAPES = {"encoder": dict(batch=1, seq=4), "decoder": dict(prompt_len=2, eval_len=3, context=8), "speech": {}}


def _graph(arch):  # noqa: ANN001, ANN202
    hf = tiny_gemma_config(sliding_window=16) if arch.name == "gemma3" else arch.default_hf_config(arch.config_only[0])
    return arch.graph(arch.config(hf, "test"), **SHAPES[arch.kind])


@pytest.mark.parametrize("key", [k for k, runner in RUNS.items() if runner.supports is not None],
                         ids=lambda k: "-".join(map(str, k)))
def test_each_lowering_declares_every_need_of_the_graphs_it_runs_today(key) -> None:  # noqa: ANN001
    """A declaration that forgot an op a built-in architecture uses would refuse its runs."""
    runner = RUNS[key]
    for arch in (a for a in ARCHITECTURES if a.kind == key[2]):
        assert not _graph(arch).needs(runner.lowered_passes) - runner.supports, arch.name


def test_a_need_names_the_op_its_choices_and_only_the_options_set() -> None:
    assert ops.needs(ops.GatedAct("g", "u", 8)) == ["GatedAct", "GatedAct.act=silu"]
    # an option at its default asks nothing; set, even to a falsy value, it is named
    assert ops.needs(ops.Argmax("logits", 1, 10)) == ["Argmax"]
    assert ops.needs(ops.Argmax("logits", 1, 10, suppress_from=0)) == ["Argmax", "Argmax.suppress_from"]


def test_a_graph_needing_what_a_lowering_lacks_is_refused_in_the_plan_naming_it(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    tiny_hf_config(vocab_size=30522, hidden_size=64, intermediate_size=128, max_position_embeddings=64,
                   num_attention_heads=4, num_key_value_heads=2).save_pretrained(tmp_path)
    workload = DecoderWorkload.create(str(tmp_path), prompt_len=4, new_tokens=2, eval_len=8, random_weights=True)
    real = LLAMA.graph

    def planted(cfg, **shapes):  # noqa: ANN001, ANN003, ANN202 - Llama's graph with a squared-ReLU gate (no engine lowers one)
        graph = real(cfg, **shapes)
        return dataclasses.replace(graph, passes={name: dataclasses.replace(p, ops=tuple(
            dataclasses.replace(op, act="relu_squared") if isinstance(op, ops.GatedAct) else op for op in p.ops))
            for name, p in graph.passes.items()})

    monkeypatch.setattr(LLAMA, "graph", planted)
    runs = build_plan([BrowserName.CHROME], list(Platform), [workload], [32],
                      engines=[EngineName.HARNESS, EngineName.ORT, EngineName.TRANSFORMERSJS, EngineName.WLLAMA])
    lowering = {(r.engine, r.platform): r.refused for r in runs if r.engine is not EngineName.WLLAMA}
    assert len(lowering) == 8  # harness on WebGPU and WebNN, ORT and transformers.js on all three
    for (engine, platform), why in lowering.items():
        assert "no lowering of GatedAct.act=relu_squared, which the llama graph needs" in why, (engine, platform, why)
    # llama.cpp lowers no graph of the harness's: wllama's rows keep their own reasons
    assert all("GatedAct" not in r.refused for r in runs if r.engine is EngineName.WLLAMA)
