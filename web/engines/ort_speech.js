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
import {jsHeap} from '../memory.js';
import {timeTranscriptions, writeTranscripts} from '../transcription.js';
import {layerProvider, loadOrt, makeSession, ortFacts, ortFailure, preflight} from './ort_common.js';
import {timingReply} from '../timing.js';

const WHERE = {webgpu: 'gpu-buffer', webnn: 'ml-tensor', wasm: 'cpu'};
const RUN = {logSeverityLevel: 2};

export async function run(spec, client) {
  const opts = spec.options;
  const cfg = opts.model;
  const L = cfg.decoder_layers, H = cfg.heads, D = cfg.head_dim, V = cfg.vocab;
  const F = cfg.mels * 2 * cfg.source_positions;  // features per clip
  const C = opts.context, P = opts.prompt.rows;
  const cross = [], past = [], present = [];
  for (let i = 0; i < L; i++) {
    for (const part of ['key', 'value']) {
      cross.push(`cross.${i}.${part}`); past.push(`past.${i}.${part}`); present.push(`present.${i}.${part}`);
    }
  }
  let stage = 'load';
  const sessions = [];
  const disposable = [];
  try {
    const half = opts.ort_layers.some((l) => l.bits === 16);
    const refused = await preflight(opts, half, stage);
    if (refused) return refused;
    const ort = await loadOrt(opts);
    const encoderGraph = new Uint8Array(await client.tensor('encoder_model'));
    const decoderGraph = new Uint8Array(await client.tensor('decoder_model'));
    const features = new Float32Array(await client.tensor('features'));
    const prompt = new Int32Array(await client.tensor(opts.prompt.tensor));
    const suppressFirst = new Float32Array(await client.tensor('suppress.first'));
    const suppressRest = new Float32Array(await client.tensor('suppress.rest'));

    stage = 'session';
    const where = WHERE[opts.provider];
    const base = {...opts, profile: false};
    if (opts.provider === 'webnn') base.ml_context = await navigator.ml.createContext({deviceType: opts.device_type});
    const encLocation = {encoder_out: 'cpu'};
    for (const name of cross) encLocation[name] = where;
    // ORT Web 1.30 on WebNN: a graph output computed by a node ORT moved to its CPU provider
    // (MatMulNBits at 4/2 bits: the cross keys and values) and bound to an MLTensor came back
    // wrong (first logits' error 3.0 against the reference); the same output on the CPU is right.
    // A session that needed the CPU fallback keeps its cross keys and values on the CPU.
    const encFallbackLocation = opts.provider === 'webnn' ?
      {...encLocation, ...Object.fromEntries(cross.map((name) => [name, 'cpu']))} : null;
    const decLocation = {logits: 'cpu', next_id: 'cpu'};
    for (const name of present) decLocation[name] = where;
    let sessionMs = 0;
    let fallback = '';
    const placed = {};
    const made = async (graph, location, dims, label, fallbackLocation = null) => {
      const m = await makeSession(ort, graph, {...base, output_location: location,
                                               fallback_output_location: fallbackLocation}, dims);
      sessions.push(m.session);
      sessionMs += m.compileMs;
      if (m.fallback && !fallback) fallback = `${label} session: ${m.fallback}`;
      return m;
    };
    const enc = await made(encoderGraph, encLocation, {}, 'encoder', encFallbackLocation);
    const decSessions = {};
    let decPlaced = null;
    for (const [pass, rows] of [['prompt', P], ['step', 1]]) {
      if (!opts.static_shapes && Object.keys(decSessions).length) { decSessions[pass] = decSessions.prompt; continue; }
      const dims = opts.static_shapes ? {sequence: rows, total: C + rows, past: C} : {};
      const m = await made(decoderGraph, decLocation, dims, `decoder ${pass}`);
      decSessions[pass] = m.session;
      if (pass === 'step' || !opts.static_shapes) decPlaced = m.placed;
    }
    const anyPlaced = enc.placed || decPlaced;
    if (anyPlaced) {
      for (const p of [enc.placed, decPlaced]) {
        if (!p) continue;
        for (const [ep, nodes] of Object.entries(p)) placed[ep] = [...(placed[ep] ?? []), ...nodes];
      }
    }
    // Each layer's provider from its own graph's session (null: the strict session was taken).
    const inEncoder = new Set(opts.encoder_layers);
    const provider = (name) => layerProvider(inEncoder.has(name) ? enc.placed : decPlaced, name, opts.provider);

    stage = 'tensors';
    const cacheDims = [1, H, C, D];
    const cacheBytes = H * C * D * 4;
    let zeros;
    if (opts.provider === 'webgpu') {
      const device = await ort.env.webgpu.device;
      const buffer = device.createBuffer({size: cacheBytes,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST});
      disposable.push(() => buffer.destroy());
      zeros = ort.Tensor.fromGpuBuffer(buffer, {dataType: 'float32', dims: cacheDims});
    } else if (opts.provider === 'webnn') {
      const ml = base.ml_context;
      const tensor = await ml.createTensor({dataType: 'float32', shape: cacheDims, writable: true, readable: true});
      ml.writeTensor(tensor, new Float32Array(H * C * D));
      disposable.push(() => tensor.destroy());
      zeros = ort.Tensor.fromMLTensor(tensor, {dataType: 'float32', dims: cacheDims});
    } else {
      zeros = new ort.Tensor('float32', new Float32Array(H * C * D), cacheDims);
    }
    const i32 = (values, dims) => new ort.Tensor('int32', Int32Array.from(values), dims);
    const firstBias = new ort.Tensor('float32', suppressFirst, [V]);
    const restBias = new ort.Tensor('float32', suppressRest, [V]);
    const release = (tensors) => { for (const t of tensors ?? []) if (t && t !== zeros && t.dispose) t.dispose(); };
    // Row r (position p + r) sees the cache's last p rows and the new rows up to itself.
    const feeds = (ids, p, first, crossKv, cache) => {
      const rows = ids.length, total = C + rows;
      const bias = new Float32Array(rows * total).fill(-1e9);
      for (let r = 0; r < rows; r++) bias.fill(0, r * total + C - p, r * total + C + r + 1);
      const f = {input_ids: i32(ids, [1, rows]), position_ids: i32(Array.from({length: rows}, (_, r) => p + r), [1, rows]),
                 attention_bias: new ort.Tensor('float32', bias, [1, 1, rows, total]), suppress: first ? firstBias : restBias};
      cross.forEach((name, j) => { f[name] = crossKv[j]; });
      past.forEach((name, j) => { f[name] = cache ? cache[j] : zeros; });
      return f;
    };

    const outBytes = new ArrayBuffer(spec.output_bytes);
    const encBytes = 4 * cfg.source_positions * cfg.d_model;
    const transcribe = async (c, check) => {
      const t0 = performance.now();
      const input = new ort.Tensor('float32', features.subarray(c * F, (c + 1) * F), [1, cfg.mels, F / cfg.mels]);
      const encOut = await enc.session.run({input_features: input}, ['encoder_out', ...cross], RUN);
      const crossKv = cross.map((name) => encOut[name]);
      if (check) new Float32Array(outBytes, 0, encBytes / 4).set(await encOut.encoder_out.getData());
      release([encOut.encoder_out]);
      const t1 = performance.now();
      let out = await decSessions.prompt.run(feeds(prompt, 0, true, crossKv, null), ['logits', 'next_id', ...present], RUN);
      if (check) new Float32Array(outBytes, encBytes, V).set(await out.logits.getData());
      let id = Number((await out.next_id.getData())[0]);
      let cache = present.map((name) => out[name]);
      release([out.logits, out.next_id]);
      const t2 = performance.now();
      const ids = [];
      const tokenMs = [];
      let last = t2;
      while (id !== opts.eot) {
        ids.push(id);
        if (ids.length >= opts.max_tokens) break;
        out = await decSessions.step.run(feeds([id], P + ids.length - 1, false, crossKv, cache),
                                         ['next_id', ...present], RUN);
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

    stage = 'run';
    const {timed, records, transcripts} = await timeTranscriptions(spec, opts.clips, transcribe);
    writeTranscripts(outBytes, encBytes + 4 * V, transcripts, opts.max_tokens);

    const layers = opts.ort_layers.map((l) => ({
      name: l.name, weight_dtype: `${l.weight_dtype}@${provider(l.name)}`, weight_bytes: l.weight_bytes, gpu_ms: null}));
    const copies = new Set(Object.values(decSessions)).size;
    return {
      ...ortFacts(ort, opts, layers, {fallback, placed: anyPlaced ? placed : null}),
      compute_dtype: half ? 'f16' : 'f32',
      timestamp_query: false,
      gpu_note: `per-clip wall clock (each new id read back); ${copies} decoder session(s); ORT loads and compiles ` +
        'a session in one call, so load_weights_ms is session creation',
      compile_ms: sessionMs,
      ...timingReply(timed),
      gpu_buffer_bytes: null,
      js_heap: await jsHeap(),
      layers,
      speech: {upload_ms: sessionMs,
               memory: {weights: opts.weight_bytes, kv_cache: 2 * L * (cacheBytes + encBytes), scratch: cacheBytes},
               clips: records},
      output: outBytes,
    };
  } catch (e) {
    return ortFailure(stage, e);
  } finally {
    for (const session of new Set(sessions)) await session.release().catch(() => {});
    for (const destroy of disposable) { try { destroy(); } catch { /* already gone */ } }
  }
}
