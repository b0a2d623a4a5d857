// What the harness's WebNN model pages share (webnn_model.js: encoders, webnn_decoder.js:
// decoders): typed views of the job's tensors, re-packing a weight transposed, and the linear
// layer y = x @ W^T (+ b) as a graph in one of the graph forms below, with the data types Python
// chose per layer (engines/webnn/*.py).
//
// Graph forms of a linear layer (options.graph_form), W stored [N, K]:
//   'transpose'     matmul(x, transpose(W)) + b          (a transpose op in the graph)
//   'gemm'          gemm(x, W, {bTranspose: true, c: b})
//   'pretransposed' matmul(x, W^T) + b, W^T re-packed [K, N] in this page before it becomes a
//                   constant (quantized values, scales and zero points transposed alike)
//   'pretransposed_gemm'  gemm(x, W^T, {c: b}) with the same re-packed constant
//   'blockrows'     q given as [N * K/block, block] with one scale and zero point per row (the
//                   same bytes and values: per-axis, not blockwise), dequantizeLinear, reshape to
//                   [N, K], then matmul(x, transpose(W)) + b
//   'blockrows_gemm'  the same weight, gemm(x, W, {bTranspose: true, c: b})
//   'gemm_scale'    per-channel symmetric int8 layers: gemm(x, cast(q, float32), {bTranspose: true})
//                   times the per-channel scales [N], then + b: the same numbers (W = scale * q, zero
//                   point 0), but the backend casts the int8 constant instead of dequantizing it
//                   (cast, subtract, multiply over all of W) on every dispatch; other layers 'gemm'
//   'gemm_qdq'      the 'gemm' form with int8 activations in front and a calibrated
//                   quantizeLinear -> dequantizeLinear on gemm's output (the layer's `out` scale
//                   and zero point), the bias added after it: the dequantizeLinear -> gemm ->
//                   quantizeLinear pattern Chromium's TFLite backend fuses into an int8
//                   FULLY_CONNECTED (engines/webnn/forms.py has the conditions)
// (float layers: the blockrows forms are the transpose and gemm forms)
// W is dequantizeLinear(q, scale, zeroPoint) for 8/4/2-bit layers (a float zero point, a layer's
// zero_point_dtype float32: dequantizeLinear with a zero of 0, then the block offsets subtracted,
// subtractBlockOffsets), a constant otherwise; b is the tensor `<name>.bias` when the job sent one.
// Int8 activations (options.webnn_act, a layer's `act` scale and zero point): x becomes
// dequantizeLinear(quantizeLinear(x, s, z), s, z) in front of the layer, s and z [1, 1] constants
// of options.webnn_act.dtype (the zero point shifted by its zero_point_offset), built once per
// input and parameters (Q, K and V share theirs, as in the WGSL engine). A per-token input
// (`act.per_token`): x divided by its row's peak |x| (at least PER_TOKEN_MIN_PEAK) goes through int8
// at the constant scale, and the layer's product (after its output's int8) is multiplied by the
// peaks before the bias: a float reduction around the same fused pattern (architectures/int8.py).

import {jsHeap} from '../memory.js';
import {timingReply} from '../timing.js';

const PER_TOKEN_MIN_PEAK = 1e-30;  // architectures/int8.py PER_TOKEN_MIN_PEAK
const ELEMENT_BYTES = {float32: 4, float16: 2, int8: 1, uint8: 1, int32: 4, uint32: 4};
const SUB_BYTE_BITS = {int4: 4, uint4: 4, int2: 2, uint2: 2};
export const FORMS = ['transpose', 'gemm', 'pretransposed', 'pretransposed_gemm', 'blockrows', 'blockrows_gemm',
                      'gemm_scale', 'gemm_qdq'];

export function byteLength(dataType, elements) {
  const sub = SUB_BYTE_BITS[dataType];
  if (sub) return Math.ceil(elements * sub / 8);
  return elements * ELEMENT_BYTES[dataType];
}

export function typedView(dataType, buffer, elements, byteOffset = 0) {
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
export function transposed(dataType, buffer, rows, cols) {
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

// How every WebNN page opens: the browser's WebNN and a context of the job's device type, or the
// reply that says why not ({context} or {reply}).
export async function openContext(nn) {
  if (!('ml' in navigator)) {
    return {reply: {status: 'unsupported', reason: 'navigator.ml is missing: this browser has no WebNN'}};
  }
  try {
    return {context: await navigator.ml.createContext({deviceType: nn.device_type})};
  } catch (e) {
    return {reply: {status: 'unsupported', reason: `createContext(${nn.device_type}) rejected: ${errorText(e)}`}};
  }
}

// The options every model page checks before it opens a context: the graph form and one data
// type plan per linear layer (a reply to return, or null).
export function modelOptionsProblem(nn) {
  const form = nn.graph_form || 'pretransposed_gemm';
  if (!FORMS.includes(form)) return {status: 'failed', stage: 'setup', reason: `unknown graph_form ${form}`};
  if (!Array.isArray(nn.webnn_layers) || !Array.isArray(nn.linears) || nn.webnn_layers.length !== nn.linears.length) {
    return {status: 'failed', stage: 'setup', reason: 'options.webnn_layers does not match options.linears'};
  }
  return null;
}

// How every model page opens (webnn_model.js, webnn_decoder.js, webnn_speech.js): the options
// checked, a context of the job's device type, the job's tensors fetched. {reply} to return, or
// {nn, form, linears, plans, context, tensors}; the page destroys the context when done.
export async function openModel(spec, client) {
  const nn = spec.options;
  const problem = modelOptionsProblem(nn);
  if (problem) return {reply: problem};
  const {context, reply} = await openContext(nn);
  if (reply) return {reply};
  const tensors = {};
  try {
    for (const name of spec.bindings) tensors[name] = await client.tensor(name);
  } catch (e) {
    if (context.destroy) context.destroy();
    return {reply: {status: 'failed', stage: 'tensor fetch', reason: `WebNN tensor fetch error: ${errorText(e)}`}};
  }
  return {nn, form: nn.graph_form || 'pretransposed_gemm', linears: nn.linears, plans: nn.webnn_layers, context, tensors};
}

export function errorText(e) { return `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}`; }

// The linear layers of one graph: `linear(x, index)` builds layer `index` of `linears` (the job's
// list, with `plans` its data types) on x [rows, K]; `layerFacts` collects what each layer holds.
// `repacked` (a Map, optional) keeps the re-packed buffers for the next graph built from the same
// tensors.
export function linearLayers(builder, tensors, {linears, plans, form, act, repacked = new Map()}) {
  const repack = (key, dataType, buffer, rows, cols) => {
    if (!repacked.has(key)) repacked.set(key, transposed(dataType, buffer, rows, cols));
    return repacked.get(key);
  };
  const layerFacts = [];
  const int8Inputs = new Map();  // x operand -> [scale/zero point, its pair]: Q, K and V share one
  const qdq = (x, params) => {  // x through int8 and back with one [1, 1] scale and zero point
    const s = builder.constant({dataType: 'float32', shape: [1, 1]}, new Float32Array([params.scale]));
    const zValue = params.zero_point + act.zero_point_offset;
    const zData = act.dtype === 'uint8' ? new Uint8Array([zValue]) : new Int8Array([zValue]);
    const z = builder.constant({dataType: act.dtype, shape: [1, 1]}, zData);
    const q = builder.quantizeLinear(x, s, z);
    return [builder.dequantizeLinear(q, s, z), String(q.dataType)];
  };
  const tokenScaled = new Map();  // x operand -> [its peaks [rows, 1], x divided by them]: shared alike
  const perToken = (x) => {  // x / max(peak |x| of its row, PER_TOKEN_MIN_PEAK), and the peaks
    if (!tokenScaled.has(x)) {
      const rowPeak = builder.reduceMax(builder.abs(x), {axes: [x.shape.length - 1], keepDimensions: true});
      const floor = builder.constant({dataType: 'float32', shape: [1, 1]}, new Float32Array([PER_TOKEN_MIN_PEAK]));
      const peak = builder.max(rowPeak, floor);
      tokenScaled.set(x, [peak, builder.div(x, peak)]);
    }
    return tokenScaled.get(x);
  };
  const int8Input = (x, L) => {
    const key = `${L.act.scale}/${L.act.zero_point}`;
    const hit = int8Inputs.get(x);
    if (hit && hit[0] === key) return hit[1];
    const pair = qdq(x, L.act);
    int8Inputs.set(x, [key, pair]);
    return pair;
  };
  const linear = (xIn, index) => {
    const L = linears[index];
    const p = plans[index];
    let x = xIn;
    let actDtype = '';
    let peak = null;
    if (L.act) {
      if (!act) throw new Error(`layer ${L.name} has int8 input parameters but the job has no webnn_act`);
      if (L.act.per_token) [peak, x] = perToken(xIn);
      [x, actDtype] = int8Input(x, L);
    }
    const {n, name} = L;
    const useGemm = form.endsWith('gemm') || form === 'gemm_qdq' || form === 'gemm_scale';
    if (L.out && !(useGemm && L.act && p.matmul_dtype === 'float32')) {
      throw new Error(`layer ${name}: output quantization needs the gemm form, int8 inputs and float32 arithmetic`);
    }
    const held = layerWeight(builder, tensors, L, p, form, repack);
    let weight = held.weight;
    const biasBuffer = tensors[`${name}.bias`];
    const bias = biasBuffer ?
      builder.constant({dataType: 'float32', shape: [n]}, typedView('float32', biasBuffer, n)) : null;
    layerFacts[index] = {name, weight_dtype: String(held.stored.dataType), weight_bytes: held.bytes, gpu_ms: null,
                         act_dtype: actDtype};
    let lhs = x;
    if (p.matmul_dtype === 'float16') {
      lhs = builder.cast(x, 'float16');
      if (weight.dataType !== 'float16') weight = builder.cast(weight, 'float16');
    } else if (weight.dataType !== 'float32') {
      weight = builder.cast(weight, 'float32');
    }
    const args = {L, p, form, useGemm, scaleAfter: held.scaleAfter, qdq, tensors};
    if (!peak) return layerProduct(builder, lhs, weight, bias, args);
    const out = builder.mul(layerProduct(builder, lhs, weight, null, args), peak);  // back to x's scale
    return bias ? builder.add(out, bias) : out;
  };
  return {linear, layerFacts};
}

// A linear layer's weight in its graph form: {weight (the operand the product takes), stored (the
// constant holding the layer's values: its dataType is what the reply says the layer held), bytes,
// scaleAfter ('gemm_scale': the per-channel scales, applied to gemm's output)}.
function layerWeight(builder, tensors, L, p, form, repack) {
  const {k, n, name} = L;
  const wBuffer = tensors[`${name}.w`];
  const transposeHere = form.startsWith('pretransposed');
  const blockRows = form.startsWith('blockrows');
  // other layers of a 'gemm_scale' graph (float, blockwise, other bits) take the 'gemm' form
  if (form === 'gemm_scale' && p.weight_dtype === 'int8' && p.block_size === k && !L.out) {
    const zeros = typedView('int8', tensors[`${name}.zero_points`], n);
    if (zeros.some((z) => z !== 0)) throw new Error(`layer ${name}: graph form gemm_scale needs zero point 0`);
    const stored = builder.constant({dataType: 'int8', shape: [n, k]}, typedView('int8', wBuffer, n * k));
    const weight = builder.cast(stored, 'float32');
    const scaleAfter = builder.constant({dataType: 'float32', shape: [n]}, typedView('float32', tensors[`${name}.scales`], n));
    return {weight, stored, scaleAfter, bytes: byteLength('int8', n * k) + byteLength('float32', n) + byteLength('int8', n)};
  }
  if (p.weight_dtype === 'float32' || p.weight_dtype === 'float16') {
    const buffer = transposeHere ? repack(`${name}.w`, p.weight_dtype, wBuffer, n, k) : wBuffer;
    const shape = transposeHere ? [k, n] : [n, k];
    const weight = builder.constant({dataType: p.weight_dtype, shape}, typedView(p.weight_dtype, buffer, n * k));
    return {weight, stored: weight, scaleAfter: null, bytes: byteLength(p.weight_dtype, n * k)};
  }
  const blocks = k / p.block_size;
  let qBuf = wBuffer, sBuf = tensors[`${name}.scales`], zBuf = tensors[`${name}.zero_points`];
  let qShape = [n, k], sShape = [n, blocks];
  if (blockRows) {
    qShape = [n * blocks, p.block_size];
    sShape = [n * blocks, 1];
  } else if (transposeHere) {
    qBuf = repack(`${name}.w`, p.weight_dtype, qBuf, n, k);
    sBuf = repack(`${name}.scales`, p.scale_dtype, sBuf, n, blocks);
    zBuf = repack(`${name}.zero_points`, p.zero_point_dtype, zBuf, n, blocks);
    qShape = [k, n];
    sShape = [blocks, n];
  }
  const q = builder.constant({dataType: p.weight_dtype, shape: qShape}, typedView(p.weight_dtype, qBuf, n * k));
  const scale = builder.constant({dataType: p.scale_dtype, shape: sShape}, typedView(p.scale_dtype, sBuf, n * blocks));
  const floatZero = p.zero_point_dtype === 'float32';
  // a float zero point: dequantizeLinear with an integer zero of 0, then the block's offset
  // (zero - shift) * scale subtracted (the codes are q + shift: shift 2^(bits-1) when signed)
  const zeroPoint = builder.constant({dataType: floatZero ? p.weight_dtype : p.zero_point_dtype, shape: sShape},
    floatZero ? typedView(p.weight_dtype, new ArrayBuffer(byteLength(p.weight_dtype, n * blocks)), n * blocks)
      : typedView(p.zero_point_dtype, zBuf, n * blocks));
  let weight = builder.dequantizeLinear(q, scale, zeroPoint);
  if (floatZero) {
    const layout = blockRows ? 'blockrows' : transposeHere ? 'transposed' : 'rows';
    weight = subtractBlockOffsets(builder, weight, scale, typedView('float32', zBuf, n * blocks), p, {n, k, blocks, layout});
  }
  if (blockRows) weight = builder.reshape(weight, [n, k]);
  return {weight, stored: q, scaleAfter: null,
          bytes: byteLength(p.weight_dtype, n * k) + byteLength(p.scale_dtype, n * blocks) +
            byteLength(p.zero_point_dtype, n * blocks)};
}

// x @ W^T (+ b) in the graph form, lhs and weight already in the arithmetic's type.
function layerProduct(builder, lhs, weight, bias, {L, p, form, useGemm, scaleAfter, qdq, tensors}) {
  const transposeHere = form.startsWith('pretransposed');
  let out;
  const floatChannels = (L.out && L.out.float_channels) || [];
  if (scaleAfter) {
    out = builder.mul(builder.gemm(lhs, weight, {bTranspose: true}), scaleAfter);
    if (bias) out = builder.add(out, bias);
  } else if (L.out && floatChannels.length) {  // outlier output channels apart: see splitRows
    const [main, outliers, order] = splitRows(builder, L, p, tensors, floatChannels);
    const [fused] = qdq(builder.gemm(lhs, main, {bTranspose: true}), L.out);
    const apart = builder.gemm(lhs, outliers, {bTranspose: true});
    out = builder.gather(builder.concat([fused, apart], 1), order, {axis: 1});
    if (bias) out = builder.add(out, bias);
  } else if (L.out) {  // the fusable pattern: no c (a float bias would need int32 and a/b scales)
    out = builder.gemm(lhs, weight, {bTranspose: !transposeHere});
    [out] = qdq(out, L.out);
    if (bias) out = builder.add(out, bias);
  } else if (useGemm) {
    // c in gemm has the arithmetic's type: a float16 gemm adds its float32 bias after the cast
    const inGemm = bias && p.matmul_dtype !== 'float16';
    out = builder.gemm(lhs, weight, inGemm ? {bTranspose: !transposeHere, c: bias} : {bTranspose: !transposeHere});
    if (p.matmul_dtype === 'float16') out = builder.cast(out, 'float32');
    if (bias && !inGemm) out = builder.add(out, bias);
  } else {
    out = builder.matmul(lhs, transposeHere ? weight : builder.transpose(weight));
    if (p.matmul_dtype === 'float16') out = builder.cast(out, 'float32');
    if (bias) out = builder.add(out, bias);
  }
  return out;
}


// W - (zero - shift) * scale per block, for a float zero point (precision/held.py: one float32 per
// block in the unsigned code domain); `weight` is dequantizeLinear's output with a zero of 0 in its
// form's layout: 'blockrows' [N * blocks, block], 'transposed' [K, N] or 'rows' [N, K]. The
// offsets are constants of the graph (zero times scale), subtracted per block through a size-1 axis.
function subtractBlockOffsets(builder, weight, scale, zeros, p, {n, k, blocks, layout}) {
  const bits = SUB_BYTE_BITS[p.weight_dtype] || 8 * ELEMENT_BYTES[p.weight_dtype];
  const shift = p.weight_dtype.startsWith('u') ? 0 : 2 ** (bits - 1);
  let zero = builder.constant({dataType: 'float32', shape: scale.shape}, zeros.map((z) => z - shift));
  if (scale.dataType !== 'float32') zero = builder.cast(zero, scale.dataType);
  const offsets = builder.mul(zero, scale);
  if (layout === 'blockrows') return builder.sub(weight, offsets);  // one offset per row [N * blocks, 1]
  const block = k / blocks;
  const [viewed, perBlock, back] = layout === 'transposed' ?
    [[blocks, block, n], [blocks, 1, n], [k, n]] : [[n, blocks, block], [n, blocks, 1], [n, k]];
  return builder.reshape(builder.sub(builder.reshape(weight, viewed), builder.reshape(offsets, perBlock)), back);
}

// A per-channel int8 layer whose output keeps some channels in float (options' out.float_channels,
// outliers int8 cannot hold beside the rest): its weight rows split into two constants, the
// int8-output rows and the float ones, each dequantizeLinear'd (per-channel scales [rows, 1]);
// `order` puts [int8 rows, float rows] back in channel order (a gather on axis 1).
function splitRows(builder, L, p, tensors, floatChannels) {
  if (p.weight_dtype !== 'int8' || p.block_size !== L.k) {
    throw new Error(`layer ${L.name}: float output channels need per-channel int8 weights`);
  }
  const {k, n, name} = L;
  const q = typedView('int8', tensors[`${name}.w`], n * k);
  const scales = typedView('float32', tensors[`${name}.scales`], n);
  const zeros = typedView('int8', tensors[`${name}.zero_points`], n);
  const apart = new Set(floatChannels);
  const rows = [[], []];
  for (let r = 0; r < n; r++) rows[apart.has(r) ? 1 : 0].push(r);
  const part = (list) => {
    const qs = new Int8Array(list.length * k), ss = new Float32Array(list.length), zs = new Int8Array(list.length);
    list.forEach((r, i) => { qs.set(q.subarray(r * k, (r + 1) * k), i * k); ss[i] = scales[r]; zs[i] = zeros[r]; });
    return builder.dequantizeLinear(
      builder.constant({dataType: 'int8', shape: [list.length, k]}, qs),
      builder.constant({dataType: 'float32', shape: [list.length, 1]}, ss),
      builder.constant({dataType: 'int8', shape: [list.length, 1]}, zs));
  };
  const position = new Int32Array(n);
  [...rows[0], ...rows[1]].forEach((r, i) => { position[r] = i; });
  const order = builder.constant({dataType: 'int32', shape: [n]}, position);
  return [part(rows[0]), part(rows[1]), order];
}

// The reply fields every model page gives: what ran (the graph form, the compute type, what each
// linear layer held), the timing and the memory.
export async function modelReply({form, plans, layers, gpuNote, compileMs, timed}) {
  return {
    status: 'ok',
    shader: `webnn ${form}`,
    compute_dtype: plans.some((p) => p.matmul_dtype === 'float16') ? 'f16' : 'f32',
    weight_operand_dtype: layers.length ? layers[0].weight_dtype : '',
    layers,
    timestamp_query: false,
    gpu_note: gpuNote,
    compile_ms: compileMs,
    ...timingReply(timed),
    js_heap: await jsHeap(),
  };
}
