// A decoder LLM as the harness's own WebNN graphs (engines/webnn/decoder.py chose every layer's
// data types and lowered the architecture's passes: options.passes, built by webnn_ops.js). Three
// passes with static shapes, built from the same tensors:
//   prefill  the prompt's P rows from position 0: the greedy id of its last row (end of sequence
//            suppressed, argMax in the graph) and every layer's keys and values, padded with zeros
//            to the cache's C positions ("present.<layer>.k/v", [kv_heads, C, head_dim]);
//   decode   one row at position p: its id, the caches ("past.*") and p's one-hot slot and mask;
//            returns the next id and the caches with row p written ("present.*");
//   score    an evaluation row's E tokens from position 0: every position's logits.
// Each pass is one graph per segment of layers (the last also holds the final norm and the head),
// chained through a hidden-state MLTensor: Python splits a model whose quantized graph would be
// too large for the browser in one piece.
// The KV cache lives in MLTensors passed from one dispatch to the next (two sets, read one and
// write the other), and so does each new id: the page reads the id back after every step (the
// per-token timestamps) but never writes it. The forward is architectures/llama/graph.py.
// Returns raw samples and facts; decides nothing about them.
import {timeGenerations} from '../generation.js';
import {errorText, modelReply, openModel, typedView} from './webnn_graph.js';
import {cacheSlots, loopState} from './webnn_loop.js';
import {passGraphs} from './webnn_ops.js';

export async function run(spec, client) {
  const opened = await openModel(spec, client);
  if (opened.reply) return opened.reply;
  const {nn, form, linears, plans, context, tensors} = opened;
  const cfg = nn.model;
  const H = cfg.hidden, KVH = cfg.kv_heads, V = cfg.vocab, C = nn.context, P = nn.prompt.rows, E = nn.score.rows;
  const at = {stage: 'tensor fetch', constantMs: 0, buildMs: 0};
  try {
    const passes = {prefill: P, decode: 1, score: E};
    const linearOptions = {linears, plans, form, act: nn.webnn_act};  // int8 inputs where a layer has `act`
    const graphs = await passGraphs(context, tensors, linearOptions, nn.passes, Object.keys(passes), at);
    at.stage = 'tensors';
    const slots = cacheSlots(graphs.decode);
    const loop = await loopState(context, slots, [KVH, C, cfg.head_dim], C);
    const hidden = await handOver(context, graphs, passes, H);
    const promptIds = await context.createTensor({dataType: 'int32', shape: [P], writable: true});
    context.writeTensor(promptIds, typedView('int32', tensors[nn.prompt.tensor], P));
    // One pass through its graphs, chained through `hidden`: `first` are the first graph's own
    // inputs, `last` the last graph's outputs; from/to: the cache sets read and written.
    const dispatchPass = (kind, first, last, from = -1, to = -1) => {
      const list = graphs[kind];
      list.forEach((g, s) => loop.dispatch(g, {...loop.step, ...(s === 0 ? first : {hidden: hidden[kind][(s - 1) % 2]})},
                                           s === list.length - 1 ? last : {hidden: hidden[kind][s % 2]}, from, to));
    };

    at.stage = 'dispatch';
    const {timed, generations, firstForwardMs, generated} = await timeGenerations(spec, nn.new_tokens, {
      prefill: async () => {
        dispatchPass('prefill', {ids: promptIds}, {id: loop.ids[0]}, -1, 0);
        return loop.readId(loop.ids[0]);
      },
      decode: async (i) => {
        const from = (i - 1) % 2, to = i % 2;
        loop.at(P + i - 1);  // the position of the id the last step wrote
        dispatchPass('decode', {ids: loop.ids[from]}, {id: loop.ids[to]}, from, to);
        return loop.readId(loop.ids[to]);
      },
    });

    at.stage = 'score';
    const output = await scoreTexts(context, nn, tensors, (ids, logits) => dispatchPass('score', {ids}, {logits}),
                                   V, spec.output_bytes);
    new Int32Array(output, nn.score.texts * E * V * 4, nn.new_tokens).set(generated);

    const layers = [];  // what each linear layer held, from the decode pass's graphs
    for (const g of graphs.decode) g.layerFacts.forEach((fact, i) => { if (fact) layers[i] = fact; });
    const weights = layers.reduce((a, l) => a + l.weight_bytes, 0) + graphs.decode.reduce((a, g) => a + g.floatBytes, 0);
    const kvBytes = 2 * slots.length * KVH * C * cfg.head_dim * 4;
    const hiddenBytes = Object.entries(passes).reduce((a, [kind, rows]) => a + hidden[kind].length * rows * H * 4, 0);
    const scratch = (2 + P + 1 + E) * 4 + 2 * C * 4 + E * V * 4 + hiddenBytes;
    return {
      ...await modelReply({
        form, plans, layers, compileMs: at.buildMs, timed,
        gpuNote: 'per-token wall clock (each new id read back); WebNN has no GPU timestamps; the prefill, decode ' +
          `and score passes each hold their own copy of the weights; ${graphs.decode.length} graph(s) per pass`}),
      decoder: {upload_ms: at.constantMs, first_forward_ms: firstForwardMs, kv_cache_on_device: true,
                memory: {weights, kv_cache: kvBytes, scratch}, generations},
      output,
    };
  } catch (e) {
    return {status: 'failed', stage: at.stage, reason: `WebNN ${at.stage} error: ${errorText(e)}`};
  } finally {
    if (context.destroy) context.destroy();
  }
}

// Per pass, the two [rows, H] tensors its graphs hand the stream on in (none for one graph).
async function handOver(context, graphs, passes, H) {
  const hidden = {};
  for (const [kind, rows] of Object.entries(passes)) {
    hidden[kind] = [];
    for (let i = 0; i < Math.min(2, graphs[kind].length - 1); i++) {
      hidden[kind].push(await context.createTensor({dataType: 'float32', shape: [rows, H]}));
    }
  }
  return hidden;
}

// Teacher-forced scoring: each evaluation row from position 0, every position's logits, into the
// output buffer (the generated ids follow them).
async function scoreTexts(context, nn, tensors, dispatchScore, V, outputBytes) {
  const E = nn.score.rows;
  const evalIds = await context.createTensor({dataType: 'int32', shape: [E], writable: true});
  const logits = await context.createTensor({dataType: 'float32', shape: [E, V], readable: true});
  const output = new ArrayBuffer(outputBytes);
  for (let t = 0; t < nn.score.texts; t++) {
    context.writeTensor(evalIds, typedView('int32', tensors[nn.score.tensor], E, t * E * 4));
    dispatchScore(evalIds, logits);
    new Uint8Array(output, t * E * V * 4, E * V * 4).set(new Uint8Array(await context.readTensor(logits)));
  }
  return output;
}
