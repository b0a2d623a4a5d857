// Ops (architectures/ops.py, lowered by engines/webnn/lower.py) into WebNN graph-builder calls: one
// function per op, over `env` (value name -> operand). `h` is what the page lends: param(name,
// shape) (a float32 tensor as a constant), table(name, width) (a whole [rows, width] table, its rows
// from its bytes), rows(name, rows, width) (its first rows), scalar(value), linear(x, index)
// (webnn_graph.js's linear layers), data(name) (a tensor's bytes, not counted as weights),
// input(name, dataType, shape) and output(name, operand). The calls are made in the order the ops
// come.
import {linearLayers, typedView} from './webnn_graph.js';

export const MASKED = -1e30;  // an additive attention mask's value for a position a row may not see

// [rows, n * d] -> [n, rows, d]
const splitHeads = (b, x, rows, n, d) => b.transpose(b.reshape(x, [rows, n, d]), {permutation: [1, 0, 2]});

// A sliding window's additive mask (Gemma's local layers): a row at position p sees keys
// p - window < key <= p. Writing one row: the row of a [C, C] table at the `position` input;
// from position 0: a [rows, rows] constant. Built once per graph and window.
function windowMask(b, op, env) {
  const name = `attention.window.${op.window}`;
  if (env[name]) return env[name];
  const at = Boolean(env.position), n = at ? op.keys : op.rows;
  const table = new Float32Array(n * n).fill(MASKED);
  for (let p = 0; p < n; p++) table.fill(0, p * n + Math.max(0, p - op.window + 1), p * n + p + 1);
  const t = b.constant({dataType: 'float32', shape: [n, n]}, table);
  env[name] = at ? b.gather(t, env.position, {axis: 0}) : t;
  return env[name];
}

const OPS = {
  Input(b, op, env, h) { env[op.value] = h.input(op.name, op.dtype, op.shape); },

  Output(b, op, env, h) {
    let x = env[op.value];
    if (op.heads) x = splitHeads(b, x, x.shape[0], op.heads, x.shape[1] / op.heads);
    if (op.first) x = b.slice(x, [0, 0], [1, 1]);
    h.output(op.name, x);
  },

  Add(b, op, env) { env[op.x] = b.add(env[op.x], env[op.residual]); },

  // Where a pass over a KV cache is: from position 0 (a causal mask, the RoPE tables' first rows)
  // or one row at the `position` input (its `mask` over the cache [1, C] and one-hot `slot`
  // [1, C, 1] are inputs too). Each RoPE table (`ropes`: Gemma has one per base) by its name.
  Positions(b, op, env, h) {
    const at = op.cache === 'write';
    if (at) env.position = h.input('position', 'int32', [1]);
    for (const {cos, sin, half} of op.ropes) {
      for (const table of [cos, sin]) {
        const t = h.param(table, [op.context, half]);
        env[table] = b.reshape(at ? b.gather(t, env.position, {axis: 0}) : b.slice(t, [0, 0], [op.rows, half]),
                               [op.rows, 1, half]);
      }
    }
    if (at) {
      env['attention.mask'] = h.input('mask', 'float32', [1, op.context]);
      env['attention.slot'] = h.input('slot', 'float32', [1, op.context, 1]);
    } else {
      const causal = new Float32Array(op.rows * op.rows);
      for (let r = 0; r < op.rows; r++) for (let c = r + 1; c < op.rows; c++) causal[r * op.rows + c] = MASKED;
      env['attention.mask'] = b.constant({dataType: 'float32', shape: [op.rows, op.rows]}, causal);
    }
  },

  Embed(b, op, env, h) {
    const word = h.param(op.table, [op.vocab, op.width]);
    let position = null;
    if (op.at_pos) {
      const table = h.table(op.positions, op.width);
      position = op.at_position ? b.gather(table, env.position, {axis: 0}) : b.slice(table, [0, 0], [op.rows, op.width]);
    } else if (op.positions) {
      position = h.rows(op.positions, op.seq, op.width);
    }
    const type = op.token_types ? h.param(op.type_table, [op.type_vocab, op.width]) : null;
    let e = b.gather(word, env[op.ids], {axis: 0});
    if (op.scale !== 1) e = b.mul(e, h.scalar(op.scale));
    if (position) e = b.add(e, position);
    if (type) e = b.add(e, b.gather(type, env[op.token_types], {axis: 0}));
    env[op.out] = b.reshape(e, [op.rows, op.width]);
  },

  // Over rows of `width` values: a value of several heads ([rows, heads * D], Gemma's query and key
  // norms) is normed as [rows * heads, D] and keeps its shape.
  Norm(b, op, env, h) {
    let x = op.residual ? b.add(env[op.x], env[op.residual]) : env[op.x];
    if (op.residual) env[op.x] = x;
    const shape = x.shape;
    const perHead = shape[shape.length - 1] !== op.width;
    if (perHead) x = b.reshape(x, [op.rows, op.width]);
    if (op.last) x = b.slice(x, [op.rows - 1, 0], [1, op.width]);
    const weight = () => {  // Gemma's norms scale by (1 + weight)
      const w = h.param(op.weight, [op.width]);
      return op.offset ? b.add(w, h.scalar(op.offset)) : w;
    };
    let y;
    if (op.kind === 'layer') {
      y = b.layerNormalization(x, {scale: weight(), bias: h.param(op.bias, [op.width]), axes: [1], epsilon: op.eps});
    } else {  // rms: x / sqrt(mean(x^2) + eps) * weight
      const meanSquare = b.reduceMean(b.mul(x, x), {axes: [1], keepDimensions: true});
      y = b.mul(b.div(x, b.sqrt(b.add(meanSquare, h.scalar(op.eps)))), weight());
    }
    env[op.out] = perHead ? b.reshape(y, shape) : y;
  },

  Linear(b, op, env, h) {
    const y = h.linear(env[op.x], op.layer);
    env[op.out] = op.gelu ? b.gelu(y) : y;
  },

  // q and k [rows, n * D] rotated pairwise (i, i + D/2) per head: [rows, n, D].
  Rope(b, op, env) {
    const half = op.head_dim / 2;
    const cos = env[op.cos], sin = env[op.sin];
    const rotate = (x, n) => {
      const x3 = b.reshape(x, [op.rows, n, op.head_dim]);
      const x1 = b.slice(x3, [0, 0, 0], [op.rows, n, half]);
      const x2 = b.slice(x3, [0, 0, half], [op.rows, n, half]);
      return b.concat([b.sub(b.mul(x1, cos), b.mul(x2, sin)), b.add(b.mul(x2, cos), b.mul(x1, sin))], 2);
    };
    env[op.q] = rotate(env[op.q], op.heads);
    env[op.k] = rotate(env[op.k], op.kv_heads);
  },

  // The rows' keys and values as [kv_heads, rows, D]; writing at a position, the cache in (past)
  // with that row written (past * (1 - slot) + slot * new, [kv_heads, C, D]); from position 0,
  // the rows padded with zeros to the cache's C positions. Either is the graph's `present` output.
  KvWrite(b, op, env, h) {
    const D = op.width / op.kv_heads;
    let k = splitHeads(b, env[op.k], op.rows, op.kv_heads, D);
    let v = splitHeads(b, env[op.v], op.rows, op.kv_heads, D);
    if (op.cache === 'write') {
      const slot = env['attention.slot'];
      const keep = b.sub(h.scalar(1), slot);
      const cacheDesc = [op.kv_heads, op.context, D];
      k = b.add(b.mul(h.input(op.past[0], 'float32', cacheDesc), keep), b.mul(slot, k));
      v = b.add(b.mul(h.input(op.past[1], 'float32', cacheDesc), keep), b.mul(slot, v));
      h.output(op.present[0], k);
      h.output(op.present[1], v);
    } else if (op.cache === 'pad') {
      h.output(op.present[0], b.pad(k, [0, 0, 0], [0, op.context - op.rows, 0]));
      h.output(op.present[1], b.pad(v, [0, 0, 0], [0, op.context - op.rows, 0]));
    }
    env[op.cache_k] = k;
    env[op.cache_v] = v;
  },

  // The additive padding mask ((mask - 1) * 1e30: 0 or -1e30, [B, 1, 1, S]) and 1 / sqrt(head size).
  AttentionConstants(b, op, env, h) {
    const mask = env[op.mask];
    const batch = mask.shape[0];
    env['attention.mask_bias'] = b.reshape(b.mul(b.sub(mask, h.scalar(1)), h.scalar(1e30)), [batch, 1, 1, op.seq]);
    env['attention.scale'] = h.scalar(1 / Math.sqrt(op.head_dim));
  },

  Attention(b, op, env, h) {
    const D = op.width / op.heads;
    if (op.source === 'self' && op.mask) {  // sequences of seq rows under a padding mask
      const B = op.rows / op.seq;
      const heads = (x, permutation) => b.transpose(b.reshape(x, [B, op.seq, op.heads, D]), {permutation});
      const qh = heads(env[op.q], [0, 2, 1, 3]);
      const kt = heads(env[op.k], [0, 2, 3, 1]);
      const vh = heads(env[op.v], [0, 2, 1, 3]);
      const scores = b.add(b.mul(b.matmul(qh, kt), env['attention.scale']), env['attention.mask_bias']);
      const probs = b.softmax(scores, 3);
      env[op.out] = b.reshape(b.transpose(b.matmul(probs, vh), {permutation: [0, 2, 1, 3]}), [op.rows, op.width]);
      return;
    }
    // Grouped-query: query head i reads kv head i / G; queries [KVH, G * rows, D], keys and values
    // [KVH, keys, D] (self: the rows' own; cache: KvWrite's; cross: inputs).
    const rows = op.rows, KVH = op.kv_heads, G = op.heads / KVH, keys = op.keys;
    const own = op.source === 'self';
    const k = own ? splitHeads(b, env[op.k], rows, KVH, D) : env[op.k];
    const v = own ? splitHeads(b, env[op.v], rows, KVH, D) : env[op.v];
    const q = G === 1 ? splitHeads(b, env[op.q], rows, KVH, D) :
      b.reshape(b.transpose(b.reshape(env[op.q], [rows, KVH, G, D]), {permutation: [1, 2, 0, 3]}), [KVH, G * rows, D]);
    let scores = b.mul(b.matmul(q, b.transpose(k, {permutation: [0, 2, 1]})), h.scalar(1 / Math.sqrt(D)));
    if (op.source === 'cache') {
      const mask = op.window ? windowMask(b, op, env) : env['attention.mask'];
      scores = b.add(G === 1 ? scores : b.reshape(scores, [KVH, G, rows, keys]), mask);
    }
    const probs = b.reshape(b.softmax(b.reshape(scores, [KVH * G * rows, keys]), 1), [KVH, G * rows, keys]);
    const ctx = b.matmul(probs, v);
    env[op.out] = G === 1 ? b.reshape(b.transpose(ctx, {permutation: [1, 0, 2]}), [rows, op.width]) :
      b.reshape(b.transpose(b.reshape(ctx, [KVH, G, rows, D]), {permutation: [2, 0, 1, 3]}), [rows, op.width]);
  },

  GatedAct(b, op, env, h) {
    const gate = env[op.gate];
    let act;
    if (op.act === 'silu') {
      act = b.mul(gate, b.sigmoid(gate));
    } else if (op.act === 'gelu_tanh') {  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      const inner = b.mul(b.add(gate, b.mul(b.mul(b.mul(gate, gate), gate), h.scalar(0.044715))),
                          h.scalar(Math.sqrt(2 / Math.PI)));
      act = b.mul(b.mul(gate, h.scalar(0.5)), b.add(b.tanh(inner), h.scalar(1)));
    } else {
      throw new Error(`no WebNN lowering of a ${op.act} gate`);
    }
    env[op.gate] = b.mul(act, env[op.x]);
  },

  // x [1, channels_in, 1, frames_in] (NCHW) -> gelu(conv2d(kernel 1 x 3, padding 1, stride) + bias);
  // with positions, time-major [frames_out, channels_out] plus the positions.
  Conv1d(b, op, env, h) {
    const weight = b.reshape(h.param(op.weight, [op.channels_out, op.channels_in, 3]), [op.channels_out, op.channels_in, 1, 3]);
    const y = b.gelu(b.conv2d(env[op.x], weight, {padding: [0, 0, 1, 1], strides: [1, op.stride],
                                                   bias: h.param(op.bias, [op.channels_out])}));
    env[op.out] = op.positions ?
      b.add(b.transpose(b.reshape(y, [op.channels_out, op.frames_out])), h.param(op.positions, [op.frames_out, op.channels_out])) :
      y;
  },

  // Mean pooling over the mask, then L2 normalisation: [batch, width].
  Pool(b, op, env, h) {
    const mask = env[op.mask];
    const masked = b.mul(b.reshape(env[op.x], [op.batch, op.seq, op.width]), b.reshape(mask, [op.batch, op.seq, 1]));
    const summed = b.reduceSum(masked, {axes: [1]});
    const count = b.max(b.reduceSum(mask, {axes: [1], keepDimensions: true}), h.scalar(1e-9));
    const pooled = b.div(summed, count);
    const norm = b.max(b.reduceL2(pooled, {axes: [1], keepDimensions: true}), h.scalar(1e-12));
    env[op.out] = b.div(pooled, norm);
  },

  // The greedy id of the last row's logits, after the bias tensor or with one id suppressed.
  Argmax(b, op, env, h) {
    let logits = env[op.logits];
    if (op.bias) {
      logits = b.add(logits, b.constant({dataType: 'float32', shape: [1, op.vocab]}, typedView('float32', h.data(op.bias), op.vocab)));
    } else if (op.suppress >= 0) {
      const never = new Float32Array(op.vocab);
      never[op.suppress] = -Infinity;
      logits = b.add(logits, b.constant({dataType: 'float32', shape: [1, op.vocab]}, never));
    }
    env.next_id = b.argMax(logits, 1, {keepDimensions: false, outputDataType: 'int32'});
  },
};

export function buildOps(builder, ops, env, h) {
  for (const op of ops) {
    if (!OPS[op.op]) throw new Error(`no WebNN lowering of op ${op.op}`);
    OPS[op.op](builder, op, env, h);
  }
  return env;
}

function product(shape) { return shape.reduce((a, b) => a * b, 1); }

// One graph from a lowered op list (its Input and Output ops name the graph's inputs and outputs).
// `layers`: linearLayers' options; `at.stage` follows the work for the page's error reply, and
// at.constantMs / at.buildMs add up the time. Returns {graph, layerFacts, floatBytes, inputs,
// outputs} (the names).
export async function buildGraph(context, tensors, layers, ops, at) {
  at.stage = 'graph building';
  const t0 = performance.now();
  const builder = new MLGraphBuilder(context);
  const {linear, layerFacts} = linearLayers(builder, tensors, layers);
  let floatBytes = 0;
  const inputs = [];
  const outputs = {};
  const f32 = (name, shape) => {
    if (!tensors[name]) throw new Error(`tensor ${name} was not sent`);
    floatBytes += product(shape) * 4;
    return builder.constant({dataType: 'float32', shape}, typedView('float32', tensors[name], product(shape)));
  };
  buildOps(builder, ops, {}, {
    param: f32,
    rows: (name, rows, width) => f32(name, [rows, width]),
    table: (name, width) => f32(name, [(tensors[name] ? tensors[name].byteLength : 0) / 4 / width, width]),
    scalar: (value) => builder.constant({dataType: 'float32', shape: []}, new Float32Array([value])),
    linear,
    data: (name) => tensors[name],
    input: (name, dataType, shape) => { inputs.push(name); return builder.input(name, {dataType, shape}); },
    output: (name, operand) => { outputs[name] = operand; },
  });
  at.constantMs += performance.now() - t0;
  at.stage = 'build';
  const t1 = performance.now();
  const graph = await builder.build(outputs);
  at.buildMs += performance.now() - t1;
  return {graph, layerFacts, floatBytes, inputs, outputs: Object.keys(outputs)};
}

// Each named pass's graphs (options.passes: pass -> one lowered op list per graph), built in the
// order of `names` and sharing re-packed weights; an error if no graph runs one of the job's
// linear layers.
export async function passGraphs(context, tensors, layers, passes, names, at) {
  const shared = {...layers, repacked: new Map()};
  const graphs = {};
  const used = new Set();
  for (const name of names) {
    if (!Array.isArray(passes[name]) || !passes[name].length) throw new Error(`options.passes has no ${name} pass`);
    graphs[name] = [];
    for (const ops of passes[name]) {
      const g = await buildGraph(context, tensors, shared, ops, at);
      g.layerFacts.forEach((fact, i) => { if (fact) used.add(i); });
      graphs[name].push(g);
    }
  }
  const unused = layers.linears.filter((_, i) => !used.has(i));
  if (unused.length) throw new Error(`no graph runs linear layer ${unused[0].name}`);
  return graphs;
}
