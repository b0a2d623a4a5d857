// WebNN whole-model runner: ONE MLGraph for a BERT-style encoder's forward pass (embeddings,
// every layer, mean pooling, L2 normalisation), with dequantizeLinear -> matmul/gemm for every
// quantized linear layer and WebNN ops for the rest. The data types of each layer were chosen in
// Python (engines/webnn/encoder.py); the page builds exactly that and reports the dataType of each
// layer's stored weight operand. The forward is architectures/bert/reference.py.
//
// Graph forms of a linear layer (options.graph_form), y = x @ W^T + b with W stored [N, K]:
//   'transpose'     matmul(x, transpose(W)) + b          (a transpose op in the graph)
//   'gemm'          gemm(x, W, {bTranspose: true, c: b})
//   'pretransposed' matmul(x, W^T) + b, W^T re-packed [K, N] in this page before it becomes a
//                   constant (quantized values, scales and zero points transposed alike)
//   'pretransposed_gemm'  gemm(x, W^T, {c: b}) with the same re-packed constant
//   'blockrows'     q given as [N * K/block, block] with one scale and zero point per row (the
//                   same bytes and values: per-axis, not blockwise), dequantizeLinear, reshape to
//                   [N, K], then matmul(x, transpose(W)) + b
//   'blockrows_gemm'  the same weight, gemm(x, W, {bTranspose: true, c: b})
// (float layers: the blockrows forms are the transpose and gemm forms)
// W is dequantizeLinear(q, scale, zeroPoint) for 8/4/2-bit layers, a constant otherwise.
// Int8 activations (options.webnn_act, a layer's `act` scale and zero point): x becomes
// dequantizeLinear(quantizeLinear(x, s, z), s, z) in front of the layer, s and z [1, 1] constants
// of options.webnn_act.dtype (the zero point shifted by its zero_point_offset), built once per
// input and parameters (Q, K and V share theirs, as in the WGSL engine).
import {jsHeap} from '../memory.js';
import {timeIterations} from '../timing.js';

const ELEMENT_BYTES = {float32: 4, float16: 2, int8: 1, uint8: 1, int32: 4, uint32: 4};
const SUB_BYTE_BITS = {int4: 4, uint4: 4, int2: 2, uint2: 2};
const FORMS = ['transpose', 'gemm', 'pretransposed', 'pretransposed_gemm', 'blockrows', 'blockrows_gemm'];

function byteLength(dataType, elements) {
  const sub = SUB_BYTE_BITS[dataType];
  if (sub) return Math.ceil(elements * sub / 8);
  return elements * ELEMENT_BYTES[dataType];
}

function typedView(dataType, buffer, elements, byteOffset = 0) {
  const length = byteLength(dataType, elements);
  if (byteOffset + length > buffer.byteLength) {
    throw new RangeError(`tensor too short: ${elements} ${dataType} need ${length} bytes at ${byteOffset}, ` +
                         `have ${buffer.byteLength}`);
  }
  const bytes = buffer.slice(byteOffset, byteOffset + length);
  switch (dataType) {
    case 'float32': return new Float32Array(bytes);
    case 'float16': return typeof Float16Array === 'function' ?
      new Float16Array(bytes) : new Uint16Array(bytes);
    case 'int8': return new Int8Array(bytes);
    case 'int32': return new Int32Array(bytes);
    case 'uint32': return new Uint32Array(bytes);
    default: return new Uint8Array(bytes); // uint8 and sub-byte types, packed low bits first
  }
}

// A [rows, cols] tensor of `dataType` (sub-byte types packed contiguously, first element in the
// lowest bits) transposed to [cols, rows], packed the same way.
function transposed(dataType, buffer, rows, cols) {
  const out = new ArrayBuffer(byteLength(dataType, rows * cols));
  const sub = SUB_BYTE_BITS[dataType];
  if (!sub) {
    const size = ELEMENT_BYTES[dataType];
    const src = new Uint8Array(buffer, 0, rows * cols * size);
    const dst = new Uint8Array(out);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const from = (r * cols + c) * size;
        const to = (c * rows + r) * size;
        for (let b = 0; b < size; b++) dst[to + b] = src[from + b];
      }
    }
    return out;
  }
  const perByte = 8 / sub;
  const mask = (1 << sub) - 1;
  const src = new Uint8Array(buffer);
  const dst = new Uint8Array(out);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const from = r * cols + c;
      const value = (src[(from / perByte) | 0] >> (sub * (from % perByte))) & mask;
      const to = c * rows + r;
      dst[(to / perByte) | 0] |= value << (sub * (to % perByte));
    }
  }
  return out;
}

function errorText(e) { return `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}`; }

export async function run(spec, client) {
  if (!('ml' in navigator)) {
    return {status: 'unsupported', reason: 'navigator.ml is missing: this browser has no WebNN'};
  }
  const nn = spec.options;
  const cfg = nn.model;
  const form = nn.graph_form || 'pretransposed_gemm';
  if (!FORMS.includes(form)) return {status: 'failed', stage: 'setup', reason: `unknown graph_form ${form}`};
  const linears = nn.linears;
  const plans = nn.webnn_layers;
  if (!Array.isArray(plans) || plans.length !== linears.length) {
    return {status: 'failed', stage: 'setup', reason: 'options.webnn_layers does not match options.linears'};
  }
  const B = cfg.batch, S = cfg.seq, H = cfg.hidden, heads = cfg.heads, d = H / heads, T = B * S;
  const passes = cfg.passes;
  let context;
  try {
    context = await navigator.ml.createContext({deviceType: nn.device_type});
  } catch (e) {
    return {status: 'unsupported', reason: `createContext(${nn.device_type}) rejected: ${errorText(e)}`};
  }
  let stage = 'tensor fetch';
  try {
    const tensors = {};
    for (const name of spec.bindings) tensors[name] = await client.tensor(name);
    stage = 'graph building';
    const tBuild = performance.now();
    const builder = new MLGraphBuilder(context);
    const f32 = (buffer, shape, elements) =>
      builder.constant({dataType: 'float32', shape}, typedView('float32', buffer, elements));
    const scalar = (value) => builder.constant({dataType: 'float32', shape: []}, new Float32Array([value]));
    const param = (name, shape) => {
      const elements = shape.reduce((a, b) => a * b, 1);
      if (!tensors[name]) throw new Error(`tensor ${name} was not sent`);
      return f32(tensors[name], shape, elements);
    };

    const layerFacts = [];
    const act = nn.webnn_act;
    const int8Inputs = new Map();  // x operand -> [scale/zero point, its pair]: Q, K and V share one
    const int8Input = (x, L) => {
      const key = `${L.act.scale}/${L.act.zero_point}`;
      const hit = int8Inputs.get(x);
      if (hit && hit[0] === key) return hit[1];
      const s = builder.constant({dataType: 'float32', shape: [1, 1]}, new Float32Array([L.act.scale]));
      const zValue = L.act.zero_point + act.zero_point_offset;
      const zData = act.dtype === 'uint8' ? new Uint8Array([zValue]) : new Int8Array([zValue]);
      const z = builder.constant({dataType: act.dtype, shape: [1, 1]}, zData);
      const q = builder.quantizeLinear(x, s, z);
      const pair = [builder.dequantizeLinear(q, s, z), String(q.dataType)];
      int8Inputs.set(x, [key, pair]);
      return pair;
    };
    const linear = (xIn, index) => {
      const L = linears[index];
      const p = plans[index];
      let x = xIn;
      let actDtype = '';
      if (L.act) {
        if (!act) throw new Error(`layer ${L.name} has int8 input parameters but the job has no webnn_act`);
        [x, actDtype] = int8Input(xIn, L);
      }
      const {k, n, name} = L;
      const wBuffer = tensors[`${name}.w`];
      const transposeHere = form.startsWith('pretransposed');
      const blockRows = form.startsWith('blockrows');
      const useGemm = form.endsWith('gemm');
      let weight;
      let stored;
      let bytes = 0;
      if (p.weight_dtype === 'float32' || p.weight_dtype === 'float16') {
        const buffer = transposeHere ? transposed(p.weight_dtype, wBuffer, n, k) : wBuffer;
        const shape = transposeHere ? [k, n] : [n, k];
        weight = builder.constant({dataType: p.weight_dtype, shape}, typedView(p.weight_dtype, buffer, n * k));
        stored = weight;
        bytes = byteLength(p.weight_dtype, n * k);
      } else {
        const blocks = k / p.block_size;
        let qBuf = wBuffer, sBuf = tensors[`${name}.scales`], zBuf = tensors[`${name}.zero_points`];
        let qShape = [n, k], sShape = [n, blocks];
        if (blockRows) {
          qShape = [n * blocks, p.block_size];
          sShape = [n * blocks, 1];
        } else if (transposeHere) {
          qBuf = transposed(p.weight_dtype, qBuf, n, k);
          sBuf = transposed(p.scale_dtype, sBuf, n, blocks);
          zBuf = transposed(p.zero_point_dtype, zBuf, n, blocks);
          qShape = [k, n];
          sShape = [blocks, n];
        }
        const q = builder.constant({dataType: p.weight_dtype, shape: qShape}, typedView(p.weight_dtype, qBuf, n * k));
        const scale = builder.constant({dataType: p.scale_dtype, shape: sShape},
                                       typedView(p.scale_dtype, sBuf, n * blocks));
        const zeroPoint = builder.constant({dataType: p.zero_point_dtype, shape: sShape},
                                           typedView(p.zero_point_dtype, zBuf, n * blocks));
        weight = builder.dequantizeLinear(q, scale, zeroPoint);
        if (blockRows) weight = builder.reshape(weight, [n, k]);
        stored = q;
        bytes = byteLength(p.weight_dtype, n * k) + byteLength(p.scale_dtype, n * blocks) +
          byteLength(p.zero_point_dtype, n * blocks);
      }
      const bias = param(`${name}.bias`, [n]);
      layerFacts[index] = {name, weight_dtype: String(stored.dataType), weight_bytes: bytes, gpu_ms: null,
                           act_dtype: actDtype};
      let lhs = x;
      if (p.matmul_dtype === 'float16') {
        lhs = builder.cast(x, 'float16');
        if (weight.dataType !== 'float16') weight = builder.cast(weight, 'float16');
      } else if (weight.dataType !== 'float32') {
        weight = builder.cast(weight, 'float32');
      }
      let out;
      if (useGemm) {
        // c in gemm has the arithmetic's type: a float16 gemm adds its float32 bias after the cast
        const withBias = p.matmul_dtype !== 'float16';
        out = builder.gemm(lhs, weight, withBias ? {bTranspose: !transposeHere, c: bias} : {bTranspose: !transposeHere});
        if (!withBias) out = builder.add(builder.cast(out, 'float32'), bias);
      } else {
        out = builder.matmul(lhs, transposeHere ? weight : builder.transpose(weight));
        if (p.matmul_dtype === 'float16') out = builder.cast(out, 'float32');
        out = builder.add(out, bias);
      }
      return out;
    };
    const layerNorm = (x, prefix) => builder.layerNormalization(x, {
      scale: param(`${prefix}.weight`, [H]), bias: param(`${prefix}.bias`, [H]), axes: [1], epsilon: cfg.eps,
    });

    // Inputs of one forward pass: int32 [B, S] each.
    const ids = builder.input('input_ids', {dataType: 'int32', shape: [B, S]});
    const maskIn = builder.input('attention_mask', {dataType: 'int32', shape: [B, S]});
    const types = builder.input('token_type_ids', {dataType: 'int32', shape: [B, S]});
    const maskF = builder.cast(maskIn, 'float32');  // [B, S]

    // Embeddings: word[ids] + position[0..S) + token_type[types], then LayerNorm.
    const word = param('embeddings.word_embeddings.weight', [cfg.vocab, H]);
    const position = builder.constant({dataType: 'float32', shape: [S, H]},
      typedView('float32', tensors['embeddings.position_embeddings.weight'], S * H));
    const tokenType = param('embeddings.token_type_embeddings.weight', [cfg.type_vocab, H]);
    let e = builder.add(builder.gather(word, ids, {axis: 0}), position);  // [B, S, H]
    e = builder.add(e, builder.gather(tokenType, types, {axis: 0}));
    let x = layerNorm(builder.reshape(e, [T, H]), 'embeddings.LayerNorm');

    // Additive attention mask for padded keys: (mask - 1) * 1e30 -> 0 or -1e30, [B, 1, 1, S].
    const maskBias = builder.reshape(builder.mul(builder.sub(maskF, scalar(1)), scalar(1e30)), [B, 1, 1, S]);
    const invSqrtD = scalar(1 / Math.sqrt(d));
    let li = 0;
    for (let layer = 0; layer < cfg.layers; layer++) {
      const prefix = `encoder.layer.${layer}`;
      const q = linear(x, li++);
      const kk = linear(x, li++);
      const v = linear(x, li++);
      const qh = builder.transpose(builder.reshape(q, [B, S, heads, d]), {permutation: [0, 2, 1, 3]});
      const kt = builder.transpose(builder.reshape(kk, [B, S, heads, d]), {permutation: [0, 2, 3, 1]});
      const vh = builder.transpose(builder.reshape(v, [B, S, heads, d]), {permutation: [0, 2, 1, 3]});
      const scores = builder.add(builder.mul(builder.matmul(qh, kt), invSqrtD), maskBias);  // [B, h, S, S]
      const probs = builder.softmax(scores, 3);
      const ctx = builder.reshape(builder.transpose(builder.matmul(probs, vh), {permutation: [0, 2, 1, 3]}), [T, H]);
      x = layerNorm(builder.add(linear(ctx, li++), x), `${prefix}.attention.output.LayerNorm`);
      const inter = builder.gelu(linear(x, li++));
      x = layerNorm(builder.add(linear(inter, li++), x), `${prefix}.output.LayerNorm`);
    }
    if (li !== linears.length) throw new Error(`the graph used ${li} linear layers, the job lists ${linears.length}`);

    // Mean pooling over the attention mask, then L2 normalisation: [B, H].
    const masked = builder.mul(builder.reshape(x, [B, S, H]), builder.reshape(maskF, [B, S, 1]));
    const summed = builder.reduceSum(masked, {axes: [1]});
    const count = builder.max(builder.reduceSum(maskF, {axes: [1], keepDimensions: true}), scalar(1e-9));
    const pooled = builder.div(summed, count);
    const norm = builder.max(builder.reduceL2(pooled, {axes: [1], keepDimensions: true}), scalar(1e-12));
    const out = builder.div(pooled, norm);
    stage = 'build';
    const graph = await builder.build({out});
    const buildMs = performance.now() - tBuild;

    stage = 'dispatch';
    const inputDesc = {dataType: 'int32', shape: [B, S], writable: true};
    const passInputs = [];
    const passOutputs = [];
    for (let pass = 0; pass < passes; pass++) {
      const feeds = {};
      for (const name of nn.inputs) {
        const t = await context.createTensor(inputDesc);
        context.writeTensor(t, typedView('int32', tensors[name], B * S, pass * B * S * 4));
        feeds[name] = t;
      }
      passInputs.push(feeds);
      passOutputs.push(await context.createTensor({dataType: 'float32', shape: [B, H], readable: true}));
    }
    const once = async (_index) => {
      const t0 = performance.now();
      context.dispatch(graph, passInputs[0], {out: passOutputs[0]});
      await context.readTensor(passOutputs[0]);
      return performance.now() - t0;
    };
    const {coldMs, wallMs} = await timeIterations(spec, once);
    for (let pass = 0; pass < passes; pass++) context.dispatch(graph, passInputs[pass], {out: passOutputs[pass]});
    const output = new Float32Array(passes * B * H);
    for (let pass = 0; pass < passes; pass++) {
      output.set(new Float32Array(await context.readTensor(passOutputs[pass])), pass * B * H);
    }
    const heap = await jsHeap();
    const f16 = plans.some((p) => p.matmul_dtype === 'float16');
    return {
      status: 'ok',
      shader: `webnn ${form}`,
      compute_dtype: f16 ? 'f16' : 'f32',
      weight_operand_dtype: layerFacts.length ? layerFacts[0].weight_dtype : '',
      layers: layerFacts,
      timestamp_query: false,
      gpu_note: 'WebNN has no GPU timestamps',
      compile_ms: buildMs,
      cold_ms: coldMs,
      wall_ms: wallMs,
      gpu_ms: null,
      gpu_buffer_bytes: null,
      js_heap: heap,
      output: output.buffer,
    };
  } catch (e) {
    return {status: 'failed', stage, reason: `WebNN ${stage} error: ${errorText(e)}`};
  } finally {
    if (context.destroy) context.destroy();
  }
}
