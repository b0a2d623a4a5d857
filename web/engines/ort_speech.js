// ONNX Runtime Web running Whisper exported in Python (engines/ort/onnx_speech.py): an encoder
// graph (Python's log-mel features in; the encoder's output and every decoder layer's cross-
// attention keys and values out) and a decoder-step graph with a fixed-length, right-aligned
// self-attention cache ("past.N.*" in, "present.N.*" out), the greedy id computed in the graph
// ("next_id", with the additive "suppress" bias of decoding.py's rule). Per clip: the encoder
// once, the prompt's step over an all-masked cache, then one step per id until the end of text
// or max_tokens, each new id read back (the per-token timestamps). The cross keys and values and
// the cache stay where the provider computes (GPU buffers, MLTensors; wasm memory). WebNN takes
// static shapes only: one decoder session per pass shape (prompt, step), sharing one MLContext.
// ORT has no front end here: frontend_ms is null. Returns raw samples and facts.
import {timeTranscriptions, writeTranscripts} from '../transcription.js';
import {layerProvider, ortFacts, timingFacts} from './ort_common.js';
import {RUN, WHERE, layerNames, loopPage, loopSessions, releaser, zeroCache} from './ort_loop.js';

export async function run(spec, client) {
  return loopPage(spec, async ({ort, opts, half, at, open, disposable}) => {
    const cfg = opts.model;
    const L = cfg.decoder_layers, V = cfg.vocab, C = opts.context, P = opts.prompt.rows;
    const {cross, past, present} = layerNames(L, ['cross', 'past', 'present']);
    const [encoderGraph, decoderGraph] = [new Uint8Array(await client.tensor('encoder_model')),
                                          new Uint8Array(await client.tensor('decoder_model'))];
    const features = new Float32Array(await client.tensor('features'));
    const prompt = new Int32Array(await client.tensor(opts.prompt.tensor));
    const suppress = [new Float32Array(await client.tensor('suppress.first')),
                      new Float32Array(await client.tensor('suppress.rest'))];

    at.stage = 'session';
    const base = {...opts, profile: false};
    if (opts.provider === 'webnn') base.ml_context = await navigator.ml.createContext({deviceType: opts.device_type});
    const on = (names, where) => Object.fromEntries(names.map((name) => [name, where]));
    // ORT Web 1.30 on WebNN: a graph output computed by a node ORT moved to its CPU provider
    // (MatMulNBits at 4/2 bits: the cross keys and values) and bound to an MLTensor came back
    // wrong (first logits' error 3.0 against the reference); the same output on the CPU is right.
    // A session that needed the CPU fallback keeps its cross keys and values on the CPU.
    const encoder = {graph: encoderGraph, location: {encoder_out: 'cpu', ...on(cross, WHERE[opts.provider])}, dims: {},
                     fallbackLocation: opts.provider === 'webnn' ? {encoder_out: 'cpu', ...on(cross, 'cpu')} : null};
    const decoder = (rows) => ({graph: decoderGraph, location: {logits: 'cpu', next_id: 'cpu', ...on(present, WHERE[opts.provider])},
                                dims: {sequence: rows, total: C + rows, past: C}});
    const {sessions, compileMs, fallback} = await loopSessions(ort, opts, base,
      {'encoder': encoder, 'decoder prompt': decoder(P), 'decoder step': decoder(1)}, open);
    const [enc, decPrompt, decStep] = [sessions.encoder, sessions['decoder prompt'], sessions['decoder step']];
    const decPlaced = opts.static_shapes ? decStep.placed : decPrompt.placed;
    const placed = mergedPlacement([enc.placed, decPlaced]);
    // Each layer's provider from its own graph's session (null: the strict session was taken).
    const inEncoder = new Set(opts.encoder_layers);
    const provider = (name) => layerProvider(inEncoder.has(name) ? enc.placed : decPlaced, name, opts.provider);

    at.stage = 'tensors';
    const cacheDims = [1, cfg.heads, C, cfg.head_dim];
    const zeros = await zeroCache(ort, opts, base.ml_context, cacheDims, disposable);
    const release = releaser(zeros);
    const feeds = stepFeeds(ort, C, {cross, past}, zeros, suppress.map((bias) => new ort.Tensor('float32', bias, [V])));

    const outBytes = new ArrayBuffer(spec.output_bytes);
    const encBytes = 4 * cfg.source_positions * cfg.d_model;
    const transcribe = transcriber({ort, opts, sessions: [enc, decPrompt, decStep], feeds, release, features, prompt,
                                    names: {cross, present}, outBytes, encBytes});

    at.stage = 'run';
    const {timed, records, transcripts} = await timeTranscriptions(spec, opts.clips, transcribe);
    writeTranscripts(outBytes, encBytes + 4 * V, transcripts, opts.max_tokens);

    const layers = opts.ort_layers.map((l) => ({
      name: l.name, weight_dtype: `${l.weight_dtype}@${provider(l.name)}`, weight_bytes: l.weight_bytes, gpu_ms: null}));
    const cacheBytes = cacheDims.reduce((a, b) => a * b, 4);
    return {
      ...ortFacts(ort, opts, layers, {fallback, placed}),
      ...await timingFacts({half, timed, compileMs, gpuMs: null, gpuNote: 'per-clip wall clock (each new id read ' +
        `back); ${decPrompt === decStep ? 1 : 2} decoder session(s); ORT loads and compiles a session in one call, ` +
        'so load_weights_ms is session creation'}),
      layers,
      speech: {upload_ms: compileMs,
               memory: {weights: opts.weight_bytes, kv_cache: 2 * L * (cacheBytes + encBytes), scratch: cacheBytes},
               clips: records},
      output: outBytes,
    };
  });
}

// The sessions' node placements merged (null when every session was a strict one).
function mergedPlacement(placements) {
  if (!placements.some(Boolean)) return null;
  const placed = {};
  for (const p of placements) {
    if (!p) continue;
    for (const [ep, nodes] of Object.entries(p)) placed[ep] = [...(placed[ep] ?? []), ...nodes];
  }
  return placed;
}

// A decoder step's feeds: `ids` from position p; row r (position p + r) sees the cache's last p
// rows and the new rows up to itself; `first`: the first position's suppress rule; the cross keys
// and values; `cache`: the past tensors (null: the zero cache).
function stepFeeds(ort, C, names, zeros, [firstBias, restBias]) {
  const i32 = (values, dims) => new ort.Tensor('int32', Int32Array.from(values), dims);
  return (ids, p, first, crossKv, cache) => {
    const rows = ids.length, total = C + rows;
    const bias = new Float32Array(rows * total).fill(-1e9);
    for (let r = 0; r < rows; r++) bias.fill(0, r * total + C - p, r * total + C + r + 1);
    const f = {input_ids: i32(ids, [1, rows]), position_ids: i32(Array.from({length: rows}, (_, r) => p + r), [1, rows]),
               attention_bias: new ort.Tensor('float32', bias, [1, 1, rows, total]), suppress: first ? firstBias : restBias};
    names.cross.forEach((name, j) => { f[name] = crossKv[j]; });
    names.past.forEach((name, j) => { f[name] = cache ? cache[j] : zeros; });
    return f;
  };
}

// One clip's transcription (timeTranscriptions' callback): the encoder, the prompt's step over an
// all-masked cache, then one step per id until the end of text or max_tokens, each id read back;
// the first (`check`) also writes the encoder's output and the first logits for Python's checks.
function transcriber({ort, opts, sessions: [enc, decPrompt, decStep], feeds, release, features, prompt, names,
                      outBytes, encBytes}) {
  const cfg = opts.model, V = cfg.vocab, P = opts.prompt.rows;
  const F = cfg.mels * 2 * cfg.source_positions;  // features per clip
  const {cross, present} = names;
  return async (c, check) => {
    const t0 = performance.now();
    const input = new ort.Tensor('float32', features.subarray(c * F, (c + 1) * F), [1, cfg.mels, F / cfg.mels]);
    const encOut = await enc.session.run({input_features: input}, ['encoder_out', ...cross], RUN);
    const crossKv = cross.map((name) => encOut[name]);
    if (check) new Float32Array(outBytes, 0, encBytes / 4).set(await encOut.encoder_out.getData());
    release([encOut.encoder_out]);
    const t1 = performance.now();
    let out = await decPrompt.session.run(feeds(prompt, 0, true, crossKv, null), ['logits', 'next_id', ...present], RUN);
    if (check) new Float32Array(outBytes, encBytes, V).set(await out.logits.getData());
    let id = Number((await out.next_id.getData())[0]);
    let cache = present.map((name) => out[name]);
    release([out.logits, out.next_id]);
    const t2 = performance.now();
    const ids = [], tokenMs = [];
    let last = t2;
    while (id !== opts.eot) {
      ids.push(id);
      if (ids.length >= opts.max_tokens) break;
      out = await decStep.session.run(feeds([id], P + ids.length - 1, false, crossKv, cache), ['next_id', ...present], RUN);
      id = Number((await out.next_id.getData())[0]);
      release(cache);
      cache = present.map((name) => out[name]);
      release([out.next_id]);
      const now = performance.now();
      tokenMs.push(now - last);
      last = now;
    }
    release(cache);
    release(crossKv);
    return {clip: c, frontend_ms: null, encoder_ms: t1 - t0, first_token_ms: t2 - t1, token_ms: tokenMs,
            total_ms: last - t0, ids};
  };
}
