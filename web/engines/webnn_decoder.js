// A decoder LLM as the harness's own WebNN graphs (engines/webnn/decoder.py chose every layer's
// data types). Three passes with static shapes, built from the same tensors:
//   prefill  the prompt's P rows from position 0: the greedy id of its last row (end of sequence
//            suppressed, argMax in the graph) and every layer's keys and values, padded with zeros
//            to the cache's C positions ("present.<layer>.k/v", [kv_heads, C, head_dim]);
//   decode   one row at position p: its id, the caches ("past.*") and p's one-hot slot and mask;
//            returns the next id and the caches with row p written ("present.*");
//   score    an evaluation row's E tokens from position 0: every position's logits.
// Each pass is one graph per segment of layers (options.segments, [first, end) layer ranges; the
// last segment also holds the final norm and the head), chained through a hidden-state MLTensor:
// Python splits a model whose quantized graph would be too large for the browser in one piece.
// The KV cache lives in MLTensors passed from one dispatch to the next (two sets, read one and
// write the other), and so does each new id: the page reads the id back after every step (the
// per-token timestamps) but never writes it. The forward is architectures/llama/reference.py.
// Returns raw samples and facts; decides nothing about them.
import {jsHeap} from '../memory.js';
import {timeGenerations} from '../generation.js';
import {errorText, linearLayers, openModel, typedView} from './webnn_graph.js';
import {timingReply} from '../timing.js';

const MASKED = -1e30;
const LINEARS_PER_LAYER = 7;  // q, k, v, o, gate, up, down  // an additive attention mask's value for a position a row may not see

function product(shape) { return shape.reduce((a, b) => a * b, 1); }

export async function run(spec, client) {
  const opened = await openModel(spec, client);
  if (opened.reply) return opened.reply;
  const {nn, form, linears, plans, context, tensors} = opened;
  const cfg = nn.model;
  const H = cfg.hidden, D = cfg.head_dim, half = D / 2, heads = cfg.heads, KVH = cfg.kv_heads;
  const G = heads / KVH, V = cfg.vocab, C = nn.context, P = nn.prompt.rows, E = nn.score.rows;
  let stage = 'tensor fetch';
  try {
    const repacked = new Map();
    let constantMs = 0;
    let buildMs = 0;
    const cacheNames = [];
    for (let i = 0; i < cfg.layers; i++) cacheNames.push(`${i}.k`, `${i}.v`);

    // One graph of `rows` rows; kind is 'prefill', 'decode' or 'score'.
    const buildGraph = async (kind, rows, [l0, l1], last) => {
      stage = 'graph building';
      const t0 = performance.now();
      const builder = new MLGraphBuilder(context);
      const {linear, layerFacts} = linearLayers(builder, tensors, {linears, plans, form, act: null, repacked});
      let floatBytes = 0;
      const param = (name, shape) => {
        if (!tensors[name]) throw new Error(`tensor ${name} was not sent`);
        floatBytes += product(shape) * 4;
        return builder.constant({dataType: 'float32', shape}, typedView('float32', tensors[name], product(shape)));
      };
      const scalar = (value) => builder.constant({dataType: 'float32', shape: []}, new Float32Array([value]));
      const decode = kind === 'decode';
      const keys = decode ? C : rows;  // positions a row's attention spans
      let cos, sin, mask, slot;
      if (decode) {
        const position = builder.input('position', {dataType: 'int32', shape: [1]});
        cos = builder.gather(param('rope.cos', [C, half]), position, {axis: 0});
        sin = builder.gather(param('rope.sin', [C, half]), position, {axis: 0});
        mask = builder.input('mask', {dataType: 'float32', shape: [1, C]});
        slot = builder.input('slot', {dataType: 'float32', shape: [1, C, 1]});
      } else {
        cos = builder.slice(param('rope.cos', [C, half]), [0, 0], [rows, half]);
        sin = builder.slice(param('rope.sin', [C, half]), [0, 0], [rows, half]);
        const causal = new Float32Array(rows * rows);
        for (let r = 0; r < rows; r++) for (let c = r + 1; c < rows; c++) causal[r * rows + c] = MASKED;
        mask = builder.constant({dataType: 'float32', shape: [rows, rows]}, causal);
      }
      cos = builder.reshape(cos, [rows, 1, half]);
      sin = builder.reshape(sin, [rows, 1, half]);
      // x [rows, n * D] rotated pairwise (i, i + D/2) per head: [rows, n, D]
      const rope = (x, n) => {
        const x3 = builder.reshape(x, [rows, n, D]);
        const x1 = builder.slice(x3, [0, 0, 0], [rows, n, half]);
        const x2 = builder.slice(x3, [0, 0, half], [rows, n, half]);
        return builder.concat([builder.sub(builder.mul(x1, cos), builder.mul(x2, sin)),
                               builder.add(builder.mul(x2, cos), builder.mul(x1, sin))], 2);
      };
      const eps = scalar(cfg.eps);
      const rmsNorm = (x, name) => {
        const meanSquare = builder.reduceMean(builder.mul(x, x), {axes: [1], keepDimensions: true});
        return builder.mul(builder.div(x, builder.sqrt(builder.add(meanSquare, eps))), param(name, [H]));
      };
      const invSqrtD = scalar(1 / Math.sqrt(D));
      const one = scalar(1);
      const outputs = {};
      let x = l0 === 0 ?
        builder.gather(param('model.embed_tokens.weight', [V, H]),
                       builder.input('ids', {dataType: 'int32', shape: [rows]}), {axis: 0}) :
        builder.input('hidden', {dataType: 'float32', shape: [rows, H]});  // [rows, H]
      let li = l0 * LINEARS_PER_LAYER;
      for (let i = l0; i < l1; i++) {
        const pre = `model.layers.${i}.`;
        let h = rmsNorm(x, `${pre}input_layernorm.weight`);
        const q = rope(linear(h, li++), heads);                                              // [rows, heads, D]
        let k = builder.transpose(rope(linear(h, li++), KVH), {permutation: [1, 0, 2]});      // [KVH, rows, D]
        let v = builder.transpose(builder.reshape(linear(h, li++), [rows, KVH, D]), {permutation: [1, 0, 2]});
        if (decode) {
          // Row p written into the cache: past * (1 - slot) + slot * new, [KVH, C, D].
          const keep = builder.sub(one, slot);
          const pastK = builder.input(`past.${i}.k`, {dataType: 'float32', shape: [KVH, C, D]});
          const pastV = builder.input(`past.${i}.v`, {dataType: 'float32', shape: [KVH, C, D]});
          k = builder.add(builder.mul(pastK, keep), builder.mul(slot, k));
          v = builder.add(builder.mul(pastV, keep), builder.mul(slot, v));
          outputs[`present.${i}.k`] = k;
          outputs[`present.${i}.v`] = v;
        } else if (kind === 'prefill') {
          outputs[`present.${i}.k`] = builder.pad(k, [0, 0, 0], [0, C - rows, 0]);
          outputs[`present.${i}.v`] = builder.pad(v, [0, 0, 0], [0, C - rows, 0]);
        }
        // Grouped-query attention: query head h reads kv head h / G; queries [KVH, G * rows, D].
        const qg = builder.reshape(builder.transpose(builder.reshape(q, [rows, KVH, G, D]), {permutation: [1, 2, 0, 3]}),
                                   [KVH, G * rows, D]);
        const scores = builder.mul(builder.matmul(qg, builder.transpose(k, {permutation: [0, 2, 1]})), invSqrtD);
        const masked = builder.add(builder.reshape(scores, [KVH, G, rows, keys]), mask);
        const probs = builder.reshape(builder.softmax(builder.reshape(masked, [KVH * G * rows, keys]), 1),
                                      [KVH, G * rows, keys]);
        const ctx = builder.reshape(builder.transpose(builder.reshape(builder.matmul(probs, v), [KVH, G, rows, D]),
                                                      {permutation: [2, 0, 1, 3]}), [rows, heads * D]);
        x = builder.add(x, linear(ctx, li++));
        h = rmsNorm(x, `${pre}post_attention_layernorm.weight`);
        const gate = linear(h, li++);
        const up = linear(h, li++);
        x = builder.add(x, linear(builder.mul(builder.mul(gate, builder.sigmoid(gate)), up), li++));
      }
      if (!last) {
        outputs.hidden = x;
      } else if (kind === 'score') {
        outputs.logits = linear(rmsNorm(x, 'model.norm.weight'), li++);  // every row's
      } else {
        let logits = linear(rmsNorm(builder.slice(x, [rows - 1, 0], [1, H]), 'model.norm.weight'), li++);
        if (nn.suppress >= 0) {
          const never = new Float32Array(V);
          never[nn.suppress] = -Infinity;
          logits = builder.add(logits, builder.constant({dataType: 'float32', shape: [1, V]}, never));
        }
        outputs.id = builder.argMax(logits, 1, {keepDimensions: false, outputDataType: 'int32'});
      }
      if (li !== (last ? linears.length : l1 * LINEARS_PER_LAYER)) {
        throw new Error(`layers ${l0}-${l1} used linear layers up to ${li}, the job lists ${linears.length}`);
      }
      constantMs += performance.now() - t0;
      stage = 'build';
      const t1 = performance.now();
      const graph = await builder.build(outputs);
      buildMs += performance.now() - t1;
      return {graph, layerFacts, floatBytes};
    };

    const segments = nn.segments;
    if (!Array.isArray(segments) || !segments.length || segments[0][0] !== 0 ||
        segments[segments.length - 1][1] !== cfg.layers) {
      return {status: 'failed', stage: 'setup', reason: 'options.segments do not cover the layers'};
    }
    const passes = {prefill: P, decode: 1, score: E};
    const graphs = {};
    for (const [kind, rows] of Object.entries(passes)) {
      graphs[kind] = [];
      for (let s = 0; s < segments.length; s++) {
        graphs[kind].push(await buildGraph(kind, rows, segments[s], s === segments.length - 1));
      }
    }

    stage = 'tensors';
    const cacheDesc = {dataType: 'float32', shape: [KVH, C, D]};
    const caches = [{}, {}];
    for (const set of caches) for (const name of cacheNames) set[name] = await context.createTensor(cacheDesc);
    const hidden = {};  // per pass, two [rows, H] tensors the segments hand on in turn
    for (const [kind, rows] of Object.entries(passes)) {
      hidden[kind] = [];
      for (let i = 0; i < Math.min(2, segments.length - 1); i++) {
        hidden[kind].push(await context.createTensor({dataType: 'float32', shape: [rows, H]}));
      }
    }
    const idTensors = [];
    for (let i = 0; i < 2; i++) idTensors.push(await context.createTensor({dataType: 'int32', shape: [1], readable: true}));
    const promptIds = await context.createTensor({dataType: 'int32', shape: [P], writable: true});
    context.writeTensor(promptIds, typedView('int32', tensors[nn.prompt.tensor], P));
    const position = await context.createTensor({dataType: 'int32', shape: [1], writable: true});
    const mask = await context.createTensor({dataType: 'float32', shape: [1, C], writable: true});
    const slot = await context.createTensor({dataType: 'float32', shape: [1, C, 1], writable: true});
    const evalIds = await context.createTensor({dataType: 'int32', shape: [E], writable: true});
    const logits = await context.createTensor({dataType: 'float32', shape: [E, V], readable: true});
    const maskData = new Float32Array(C);
    const slotData = new Float32Array(C);
    // One pass through its segments' graphs: `first` are the first graph's own inputs, `every`
    // go to every graph, `last` are the last graph's outputs; cacheIn/cacheOut name the cache set
    // a layer reads and writes (-1: none).
    const dispatchPass = (kind, {first, every = {}, last, cacheIn = -1, cacheOut = -1}) => {
      const list = graphs[kind];
      for (let s = 0; s < list.length; s++) {
        const inputs = {...every, ...(s === 0 ? first : {hidden: hidden[kind][(s - 1) % 2]})};
        const outputs = s === list.length - 1 ? {...last} : {hidden: hidden[kind][s % 2]};
        for (let i = segments[s][0]; i < segments[s][1]; i++) {
          for (const part of ['k', 'v']) {
            if (cacheIn >= 0) inputs[`past.${i}.${part}`] = caches[cacheIn][`${i}.${part}`];
            if (cacheOut >= 0) outputs[`present.${i}.${part}`] = caches[cacheOut][`${i}.${part}`];
          }
        }
        context.dispatch(list[s].graph, inputs, outputs);
      }
    };
    const readId = async (tensor) => new Int32Array(await context.readTensor(tensor))[0];

    stage = 'dispatch';
    const {timed, generations, firstForwardMs, generated} = await timeGenerations(spec, nn.new_tokens, {
      prefill: async () => {
        dispatchPass('prefill', {first: {ids: promptIds}, last: {id: idTensors[0]}, cacheOut: 0});
        return readId(idTensors[0]);
      },
      decode: async (i) => {
        const p = P + i - 1;  // the position of the id the last step wrote
        const from = (i - 1) % 2, to = i % 2;
        maskData.fill(MASKED);
        maskData.fill(0, 0, p + 1);
        slotData.fill(0);
        slotData[p] = 1;
        context.writeTensor(position, new Int32Array([p]));
        context.writeTensor(mask, maskData);
        context.writeTensor(slot, slotData);
        dispatchPass('decode', {first: {ids: idTensors[from]}, every: {position, mask, slot}, last: {id: idTensors[to]},
                                cacheIn: from, cacheOut: to});
        return readId(idTensors[to]);
      },
    });

    // Teacher-forced scoring: each evaluation row from position 0, every position's logits.
    stage = 'score';
    const logitsBytes = nn.score.texts * E * V * 4;
    const output = new ArrayBuffer(spec.output_bytes);
    for (let t = 0; t < nn.score.texts; t++) {
      context.writeTensor(evalIds, typedView('int32', tensors[nn.score.tensor], E, t * E * 4));
      dispatchPass('score', {first: {ids: evalIds}, last: {logits}});
      new Uint8Array(output, t * E * V * 4, E * V * 4).set(new Uint8Array(await context.readTensor(logits)));
    }
    new Int32Array(output, logitsBytes, nn.new_tokens).set(generated);

    const heap = await jsHeap();
    const layers = [];  // what each linear layer held, from the decode pass's graphs
    for (const g of graphs.decode) g.layerFacts.forEach((fact, i) => { if (fact) layers[i] = fact; });
    const linearBytes = layers.reduce((a, l) => a + l.weight_bytes, 0);
    const floatBytes = graphs.decode.reduce((a, g) => a + g.floatBytes, 0);
    const kvBytes = 2 * cacheNames.length * KVH * C * D * 4;
    const hiddenBytes = Object.entries(passes).reduce((a, [kind, rows]) => a + hidden[kind].length * rows * H * 4, 0);
    const scratch = (2 + P + 1 + E) * 4 + 2 * C * 4 + E * V * 4 + hiddenBytes;
    const f16 = plans.some((p) => p.matmul_dtype === 'float16');
    return {
      status: 'ok',
      shader: `webnn ${form}`,
      compute_dtype: f16 ? 'f16' : 'f32',
      weight_operand_dtype: layers.length ? layers[0].weight_dtype : '',
      layers,
      timestamp_query: false,
      gpu_note: 'per-token wall clock (each new id read back); WebNN has no GPU timestamps; ' +
        `the prefill, decode and score passes each hold their own copy of the weights; ${segments.length} ` +
        `graph(s) per pass`,
      compile_ms: buildMs,
      ...timingReply(timed),
      gpu_buffer_bytes: kvBytes + scratch,
      js_heap: heap,
      decoder: {upload_ms: constantMs, first_forward_ms: firstForwardMs, kv_cache_on_device: true,
                memory: {weights: linearBytes + floatBytes, kv_cache: kvBytes, scratch}, generations},
      output,
    };
  } catch (e) {
    return {status: 'failed', stage, reason: `WebNN ${stage} error: ${errorText(e)}`};
  } finally {
    if (context.destroy) context.destroy();
  }
}
