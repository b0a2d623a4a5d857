// WebNN whole-model runner: ONE MLGraph for a BERT-style encoder's forward pass (embeddings,
// every layer, mean pooling, L2 normalisation), with dequantizeLinear -> matmul/gemm for every
// quantized linear layer and WebNN ops for the rest. The data types of each layer were chosen in
// Python (engines/webnn/encoder.py); the page builds exactly that and reports the dataType of each
// layer's stored weight operand. The forward is architectures/bert/reference.py.
//
// Graph forms of a linear layer (options.graph_form) and int8 activations: see webnn_graph.js.
import {jsHeap} from '../memory.js';
import {timeIterations, timingReply} from '../timing.js';
import {errorText, linearLayers, openModel, typedView} from './webnn_graph.js';

export async function run(spec, client) {
  const opened = await openModel(spec, client);
  if (opened.reply) return opened.reply;
  const {nn, form, linears, plans, context, tensors} = opened;
  const cfg = nn.model;
  const B = cfg.batch, S = cfg.seq, H = cfg.hidden, heads = cfg.heads, d = H / heads, T = B * S;
  const passes = cfg.passes;
  let stage = 'tensor fetch';
  try {
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

    const {linear, layerFacts} = linearLayers(builder, tensors, {linears, plans, form, act: nn.webnn_act});
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
    const timed = await timeIterations(spec, once);
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
      ...timingReply(timed),
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
