// Ops (architectures/ops.py, lowered by engines/webnn/lower.py) into WebNN graph-builder calls: one
// function per op, over `env` (value name -> operand; the page puts its inputs there). `h` is what
// the page lends: param(name, shape) (a float32 tensor as a constant), rows(name, rows, width) (its
// first rows), scalar(value) and linear(x, index) (webnn_graph.js's linear layers). The calls are
// made in the order the ops come, which is the order the page wrote them in by hand before.
const OPS = {
  Embed(b, op, env, h) {
    const word = h.param(op.table, [op.vocab, op.width]);
    const position = h.rows(op.positions, op.seq, op.width);
    const type = op.token_types ? h.param(op.type_table, [op.type_vocab, op.width]) : null;
    let e = b.add(b.gather(word, env[op.ids], {axis: 0}), position);
    if (type) e = b.add(e, b.gather(type, env[op.token_types], {axis: 0}));
    env[op.out] = b.reshape(e, [op.rows, op.width]);
  },

  Norm(b, op, env, h) {
    if (op.kind !== 'layer') throw new Error(`no WebNN lowering of a ${op.kind} norm here yet`);
    const x = op.residual ? b.add(env[op.residual], env[op.x]) : env[op.x];
    if (op.residual) env[op.x] = x;
    env[op.out] = b.layerNormalization(x, {
      scale: h.param(op.weight, [op.width]), bias: h.param(op.bias, [op.width]), axes: [1], epsilon: op.eps,
    });
  },

  Linear(b, op, env, h) {
    const y = h.linear(env[op.x], op.layer);
    env[op.out] = op.gelu ? b.gelu(y) : y;
  },

  // The additive padding mask ((mask - 1) * 1e30: 0 or -1e30, [B, 1, 1, S]) and 1 / sqrt(head size).
  AttentionConstants(b, op, env, h) {
    const mask = env[op.mask];
    const batch = mask.shape[0];
    env['attention.mask_bias'] = b.reshape(b.mul(b.sub(mask, h.scalar(1)), h.scalar(1e30)), [batch, 1, 1, op.seq]);
    env['attention.scale'] = h.scalar(1 / Math.sqrt(op.head_dim));
  },

  Attention(b, op, env) {
    if (op.source !== 'self') throw new Error(`no WebNN lowering of ${op.source} attention here yet`);
    const d = op.width / op.heads;
    const B = op.rows / op.seq;
    const heads = (x, permutation) => b.transpose(b.reshape(x, [B, op.seq, op.heads, d]), {permutation});
    const qh = heads(env[op.q], [0, 2, 1, 3]);
    const kt = heads(env[op.k], [0, 2, 3, 1]);
    const vh = heads(env[op.v], [0, 2, 1, 3]);
    const scores = b.add(b.mul(b.matmul(qh, kt), env['attention.scale']), env['attention.mask_bias']);
    const probs = b.softmax(scores, 3);
    env[op.out] = b.reshape(b.transpose(b.matmul(probs, vh), {permutation: [0, 2, 1, 3]}), [op.rows, op.width]);
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
};

export function buildOps(builder, ops, env, h) {
  for (const op of ops) {
    if (!OPS[op.op]) throw new Error(`no WebNN lowering of op ${op.op}`);
    OPS[op.op](builder, op, env, h);
  }
  return env;
}
