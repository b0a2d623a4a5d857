// Whisper as the harness's own WebNN graphs (engines/webnn/speech.py chose every layer's data
// types). Three graphs with static shapes, built from the same tensors:
//   encoder  Python's log-mel features [1, mels, 1, frames] -> conv2d (1 x 3, padding 1) + GELU,
//            conv2d (stride 2) + GELU, + sinusoidal positions, the pre-norm layers, the final
//            layer norm ("encoder_out" [positions, d]); then every decoder layer's cross-attention
//            keys and values ("cross.<layer>.k/v", [heads, positions, head_dim]);
//   prompt   the prompt's P rows from position 0: the greedy id of the last row (argMax over the
//            first position's suppress bias), its logits, and every layer's keys and values padded
//            with zeros to the cache's C positions ("present.<layer>.k/v", [heads, C, head_dim]);
//   decode   one row at position p: its id, the caches ("past.*"), p's one-hot slot and mask;
//            the next id (the later positions' bias) and the caches with row p written.
// Per clip: the features written, the encoder dispatched and a one-value probe of its output read
// (the encoder's time), the prompt, then one step per id until the end of text or max_tokens, each
// new id read back (the per-token timestamps). The cross keys and values, the caches (two sets,
// read one and write the other) and each new id stay MLTensors. The first transcription (clip 0,
// cold) also reads its encoder output and first logits for the checks in Python. Timed iterations
// take the clips in turn; clips no timed iteration reached are transcribed afterwards, untimed.
// The forward is architectures/whisper/reference.py. Returns raw samples and facts.
import {timeTranscriptions, writeTranscripts} from '../transcription.js';
import {errorText, modelReply, openModel, typedView} from './webnn_graph.js';
import {cacheSlots, loopState} from './webnn_loop.js';
import {passGraphs} from './webnn_ops.js';

export async function run(spec, client) {
  const opened = await openModel(spec, client);
  if (opened.reply) return opened.reply;
  const {nn, form, linears, plans, context, tensors} = opened;
  const cfg = nn.model;
  const d = cfg.d_model, heads = cfg.heads, D = cfg.head_dim, V = cfg.vocab, S = cfg.source_positions;
  const M = cfg.mels, F = 2 * S, L = cfg.decoder_layers, C = nn.context, P = nn.prompt.rows;
  const at = {stage: 'tensor fetch', constantMs: 0, buildMs: 0};
  try {
    const features = new Float32Array(tensors.features);
    if (features.length !== nn.clips * M * F) throw new Error(`features hold ${features.length} values, not ${nn.clips} clips`);
    const graphs = await passGraphs(context, tensors, {linears, plans, form, act: nn.webnn_act}, nn.passes,
                                    ['encoder', 'prompt', 'decode'], at);
    const [encoder, prompt, decode] = [graphs.encoder[0], graphs.prompt[0], graphs.decode[0]];

    at.stage = 'tensors';
    const loop = await loopState(context, cacheSlots(graphs.decode), [heads, C, D], C);
    const tensor = (shape, flags = {}, dataType = 'float32') => context.createTensor({dataType, shape, ...flags});
    const io = {features: await tensor([1, M, 1, F], {writable: true}), ids: await tensor([P], {writable: true}, 'int32')};
    context.writeTensor(io.ids, typedView('int32', tensors[nn.prompt.tensor], P));
    const [encOut, probe, logits] = [await tensor([S, d], {readable: true}), await tensor([1, 1], {readable: true}),
                                     await tensor([1, V], {readable: true})];
    const cross = {};
    for (const name of encoder.outputs) if (name.startsWith('cross.')) cross[name] = await tensor([heads, S, D]);
    for (const name of Object.keys(tensors)) if (name !== 'features') delete tensors[name];

    const output = new ArrayBuffer(spec.output_bytes);
    const encBytes = 4 * S * d;
    const transcribe = async (c, check) => {
      const start = performance.now();
      context.writeTensor(io.features, features.subarray(c * M * F, (c + 1) * M * F));
      loop.dispatch(encoder, io, {encoder_out: encOut, probe, ...cross});
      await context.readTensor(probe);
      const t1 = performance.now();
      if (check) new Uint8Array(output, 0, encBytes).set(new Uint8Array(await context.readTensor(encOut)));
      const t1b = performance.now();
      loop.dispatch(prompt, {...io, ...cross}, {id: loop.ids[0], logits}, -1, 0);
      const id = await loop.readId(loop.ids[0]);
      const t2 = performance.now();
      if (check) new Uint8Array(output, encBytes, 4 * V).set(new Uint8Array(await context.readTensor(logits)));
      const after = performance.now();
      const checksMs = (t1b - t1) + (after - t2);  // reading the checks out is not the clip's time
      const {ids, tokenMs, last} = await decodeSteps(loop, decode, cross, nn, id, after);
      return {clip: c, frontend_ms: null, encoder_ms: t1 - start, first_token_ms: t2 - t1b, token_ms: tokenMs,
              total_ms: last - start - checksMs, ids};
    };

    at.stage = 'dispatch';
    const {timed, records, transcripts} = await timeTranscriptions(spec, nn.clips, transcribe);
    writeTranscripts(output, encBytes + 4 * V, transcripts, nn.max_tokens);

    const layers = linears.map((_, i) => encoder.layerFacts[i] || decode.layerFacts[i]);
    const weights = [encoder, prompt, decode].reduce((a, g) => a + g.floatBytes + g.layerFacts.reduce((s, f) => s + (f ? f.weight_bytes : 0), 0), 0);
    const kv = 2 * 2 * L * heads * C * D * 4 + 2 * L * S * d * 4;
    const scratch = M * F * 4 + S * d * 4 + 4 + V * 4 + (2 + P + 1) * 4 + 2 * C * 4;
    return {
      ...await modelReply({
        form, plans, layers, compileMs: at.buildMs, timed,
        gpuNote: 'per-clip wall clock (each new id read back); WebNN has no GPU timestamps; the encoder, prompt ' +
          'and decode graphs each hold their own copy of the weights they use'}),
      speech: {upload_ms: at.constantMs, memory: {weights, kv_cache: kv, scratch}, clips: records},
      output,
    };
  } catch (e) {
    return {status: 'failed', stage: at.stage, reason: `WebNN ${at.stage} error: ${errorText(e)}`};
  } finally {
    if (context.destroy) context.destroy();
  }
}

// Decode steps from the prompt's id until the end of text or max_tokens, each new id read back
// (the per-token timestamps): the ids, each step's ms from `last` (when the previous id came),
// and the time the last one came.
async function decodeSteps(loop, decode, cross, nn, first, last) {
  const ids = [], tokenMs = [];
  let id = first;
  while (id !== nn.eot) {
    ids.push(id);
    if (ids.length >= nn.max_tokens) break;
    const from = (ids.length - 1) % 2, to = ids.length % 2;
    loop.at(nn.prompt.rows + ids.length - 1);  // the position of the id the last step wrote
    loop.dispatch(decode, {ids: loop.ids[from], ...loop.step, ...cross}, {id: loop.ids[to]}, from, to);
    id = await loop.readId(loop.ids[to]);
    const now = performance.now();
    tokenMs.push(now - last);
    last = now;
  }
  return {ids, tokenMs, last};
}
