"""The matmul kind on ONNX Runtime Web (page: web/engines/ort.js): a one-node ONNX model built
from THE SAME quantized values the harness kernels get (onnx_matmul.py: MatMulNBits for 8/4/2
bits with the harness's blocks and zero points, MatMul for 32, a float16 MatMul for 16).

Int8 activations (``--act-bits 8``, with ``--bits 8 --granularity per-channel``): an int8 QDQ
model instead, the standard QuantizeLinear/DequantizeLinear form onnxruntime's quantization tools
write, with the harness's calibrated activation and output parameters and its per-channel int8
weights (onnx_matmul.qdq_matmul_model): the same numbers as the harness's WebNN ``gemm_qdq``
form, so ORT's providers are judged beside it on the same references.

Weights from a quantizer that keeps a float zero per block (``--weight-quant offset`` / ``hqq``):
MatMulNBits with float32 zero points, on the wasm provider only (``WASM_QUANTIZERS``)."""

from __future__ import annotations

from ...page_protocol import PageDataError, PageReply
from ...run_spec import RunSpec, TimingConfig
from ...vocabulary import Platform
from ...workloads.matmul import MatmulWorkload, PreparedWorkload, float_input, prepare
from ..base import BrowserFacts, Engine, EngineJob, Executed
from . import QDQ_FORM, QDQ_WEBNN_OPTIMIZATION, OrtKindRunner, OrtWebEngine
from .onnx_matmul import matmul_model, qdq_matmul_model


class OrtMatmul(OrtKindRunner):
    runner = "ort"
    act_bits = (32, 8)

    async def job(self, engine: Engine, run: RunSpec, timing: TimingConfig,
                  browser: BrowserFacts) -> EngineJob:
        assert isinstance(engine, OrtWebEngine)
        # MatMulNBits stores unsigned values with zero points: the harness's signed values
        # shifted by 2^(bits-1), zero points too, so the dequantized weights are identical.
        w = run.workload
        assert isinstance(w, MatmulWorkload)
        if run.act_bits == 8:
            return self._qdq_job(engine, run, timing, w)
        prepared = prepare(w, run.bits, run.weight_block, run.seed, unsigned=True, weight_quant=run.weight_quant)
        t = prepared.tensors
        float_zero = prepared.zero_point_dtype == "float32"
        model = matmul_model(k=w.k, n=w.n, bits=prepared.bits,
                             block_size=prepared.block_size, w=t["w"], scales=t.get("scales"),
                             zero_points=t.get("zero_points"), float_zero=float_zero)
        tensors = {"x": t["x"], "model": model}
        options = {
            **engine.session_options(run),
            "m": w.m, "k": w.k, "n": w.n,
            "model": "model",
            "input": "x",
        }
        zeros = ", float zero points" if float_zero else ""
        node = ("MatMul" if prepared.bits >= 16
                else f"MatMulNBits(bits={prepared.bits}, block_size={prepared.block_size}{zeros})")
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, options, prepared.bits),
            tensors=tensors, prepared=prepared,
            **prepared.held_fields(),
            details={"onnx_node": node, "model_bytes": len(model)},
        )

    def _qdq_job(self, engine: OrtWebEngine, run: RunSpec, timing: TimingConfig, w: MatmulWorkload) -> EngineJob:
        """The int8 QDQ model: signed per-channel weights, calibrated int8 input and output."""
        prepared = prepare(w, run.bits, run.weight_block, run.seed, unsigned=False, act_bits=8,
                           observer=run.observer, out_int8=True)
        t = prepared.tensors
        model = qdq_matmul_model(k=w.k, n=w.n, w=t["w"], scales=t["scales"], zero_points=t["zero_points"],
                                 act=(prepared.act_scale, prepared.act_zero_point),
                                 out=(prepared.out_scale, prepared.out_zero_point))
        # The model quantizes x itself (QuantizeLinear): the page feeds it float32.
        tensors = {"x": float_input(w, run.seed).tobytes(), "model": model}
        level = QDQ_WEBNN_OPTIMIZATION if engine.platform == Platform.WEBNN else "all"
        options = {**engine.session_options(run, level), "m": w.m, "k": w.k, "n": w.n, "model": "model", "input": "x"}
        return EngineJob(
            spec=self.spec(engine, run, timing, tensors, prepared.outputs, options, prepared.bits),
            tensors=tensors, prepared=prepared,
            weight_format=prepared.weight_format, weight_dtype=prepared.weight_dtype,
            scale_dtype="float32", zero_point_dtype=prepared.weight_dtype,
            details={"onnx_node": "QDQ Gemm(transB=1), int8 input and output", "model_bytes": len(model),
                     "graph_optimization": level},
            note=(f"ORT graph optimizations {level} (so the WebNN backend can fuse the int8 pattern)"
                  if level != "all" else ""),
            graph_form=QDQ_FORM,
        )

    def interpret(self, engine: Engine, run: RunSpec, job: EngineJob, page: PageReply) -> Executed:
        prepared = job.prepared
        assert isinstance(prepared, PreparedWorkload)
        compute = "f16" if prepared.bits == 16 else "f32"
        ran_on = page.executed_on
        if ran_on not in {p.value for p in Platform}:
            raise PageDataError(f"executed_on {ran_on!r:.40} is not a provider this engine uses")
        note = ""
        if ran_on != engine.platform.value:
            note = f"ORT placed the weight-bearing node on {ran_on}, not {engine.platform}"
            if page.placement:
                note += f" (ORT's placement: {page.placement})"
            if page.fallback:
                note += f"; with CPU fallback disabled {engine.platform} refused it: {page.fallback}"
        # The model's weights are the bits asked for; ORT has no other form to run them in.
        return Executed(prepared.bits, compute, ran_on, note=note)

