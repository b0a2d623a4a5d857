// ONNX Runtime Web running a decoder LLM exported in Python (engines/ort/onnx_decoder.py): one
// graph with a fixed-length, right-aligned KV cache ("past.N.key/value" in, "present.N.key/value"
// out, the same shape), the greedy id of the last row computed in the graph ("next_id", end of
// sequence suppressed), and logits only for the rows asked ("logit_rows"). Three passes:
//   prefill  the prompt's P rows over an all-masked cache: the first id and the cache;
//   decode   one row at position p over the cache: the next id and the cache with the row in;
//   score    an evaluation row's E tokens over an all-masked cache: every position's logits.
// WebGPU and wasm: one session with free dimensions. WebNN takes static shapes only: one session
// per pass, each with its dimensions fixed (freeDimensionOverrides), sharing one MLContext so the
// cache one session writes is the next one's input. The cache stays where the provider computes
// (GPU buffers, MLTensors; wasm memory) from step to step; each new id is read back (4 bytes, the
// per-token timestamps) and fed to the next step. Placement: a session with CPU fallback
// disabled first, then, if refused, one with the fallback whose log says where each layer ran.
// Returns raw samples and facts; decides nothing about them.
import {jsHeap} from '../memory.js';
import {timeGenerations} from '../generation.js';
import {layerProvider, loadOrt, makeSession, ortFacts, ortFailure, preflight} from './ort_common.js';
import {timingReply} from '../timing.js';

const WHERE = {webgpu: 'gpu-buffer', webnn: 'ml-tensor', wasm: 'cpu'};
// Runs log warnings only: a session made with the fallback logs verbosely (its placement), and a
// verbose log costs every step time.
const RUN = {logSeverityLevel: 2};

export async function run(spec, client) {
  const opts = spec.options;
  const cfg = opts.model;
  const L = cfg.layers, KVH = cfg.kv_heads, D = cfg.head_dim, V = cfg.vocab;
  const C = opts.context, P = opts.prompt.rows, E = opts.score.rows, N = opts.new_tokens;
  const pastNames = [], presentNames = [];
  for (let i = 0; i < L; i++) {
    for (const part of ['key', 'value']) { pastNames.push(`past.${i}.${part}`); presentNames.push(`present.${i}.${part}`); }
  }
  let stage = 'load';
  const sessions = new Map();
  const disposable = [];
  try {
    const half = opts.ort_layers.some((l) => l.bits === 16);
    const refused = await preflight(opts, half, stage);
    if (refused) return refused;
    const ort = await loadOrt(opts);
    const graph = new Uint8Array(await client.tensor(opts.onnx_model));
    const prompt = new Int32Array(await client.tensor(opts.prompt.tensor));
    const evalIds = new Int32Array(await client.tensor(opts.score.tensor));

    // Sessions: the cache outputs stay on the provider's device; ids and logits come to the CPU.
    stage = 'session';
    const where = WHERE[opts.provider];
    const location = {logits: 'cpu', next_id: 'cpu'};
    for (const name of presentNames) location[name] = where;
    const sessionOpts = {...opts, profile: false, output_location: location};
    if (opts.provider === 'webnn') sessionOpts.ml_context = await navigator.ml.createContext({deviceType: opts.device_type});
    const passRows = {prefill: [P, 1], decode: [1, 1], score: [E, E]};
    let sessionMs = 0;
    let fallback = '';
    let placed = null;
    for (const [pass, [rows, logitRows]] of Object.entries(passRows)) {
      if (!opts.static_shapes && sessions.size) { sessions.set(pass, sessions.values().next().value); continue; }
      const dims = opts.static_shapes ? {sequence: rows, total: C + rows, rows: logitRows, past: C} : {};
      const made = await makeSession(ort, graph, sessionOpts, dims);
      sessions.set(pass, made.session);
      sessionMs += made.compileMs;
      if (made.fallback && !fallback) fallback = `${pass} session: ${made.fallback}`;
      if (pass === 'decode' || (!opts.static_shapes && pass === 'prefill')) placed = made.placed;
    }

    // A zero cache for the passes that start from position 0 (every position masked), made once
    // on the device the provider reads it from.
    stage = 'tensors';
    const cacheDims = [1, KVH, C, D];
    const cacheBytes = KVH * C * D * 4;
    let zeros;
    if (opts.provider === 'webgpu') {
      const device = await ort.env.webgpu.device;
      const buffer = device.createBuffer({size: cacheBytes,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST});
      disposable.push(() => buffer.destroy());
      zeros = ort.Tensor.fromGpuBuffer(buffer, {dataType: 'float32', dims: cacheDims});
    } else if (opts.provider === 'webnn') {
      const ml = sessionOpts.ml_context;
      const tensor = await ml.createTensor({dataType: 'float32', shape: cacheDims, writable: true, readable: true});
      ml.writeTensor(tensor, new Float32Array(KVH * C * D));
      disposable.push(() => tensor.destroy());
      zeros = ort.Tensor.fromMLTensor(tensor, {dataType: 'float32', dims: cacheDims});
    } else {
      zeros = new ort.Tensor('float32', new Float32Array(KVH * C * D), cacheDims);
    }
    const i32 = (values, dims) => new ort.Tensor('int32', Int32Array.from(values), dims);
    // Feeds of `rows` tokens from position p; `cache`: the past tensors (null: the zero cache).
    const feeds = (ids, p, logitRows, cache) => {
      const rows = ids.length;
      const mask = new Int32Array(C + rows);
      mask.fill(1, C - p);
      const f = {input_ids: i32(ids, [1, rows]), position_ids: i32(Array.from({length: rows}, (_, r) => p + r), [1, rows]),
                 attention_mask: new ort.Tensor('int32', mask, [1, C + rows]), logit_rows: i32(logitRows, [logitRows.length])};
      pastNames.forEach((name, j) => { f[name] = cache ? cache[j] : zeros; });
      return f;
    };
    const release = (tensors) => { for (const t of tensors ?? []) if (t && t !== zeros && t.dispose) t.dispose(); };
    // One step: the pass's session, its next id read back, the new cache (the old one released).
    const step = async (pass, ids, p, cache) => {
      const out = await sessions.get(pass).run(feeds(ids, p, [ids.length - 1], cache), ['next_id', ...presentNames],
                                                 RUN);
      const id = Number((await out.next_id.getData())[0]);
      release(cache);
      return {id, cache: presentNames.map((name) => out[name])};
    };

    let cache = null;
    stage = 'run';
    const {timed, generations, firstForwardMs, generated} = await timeGenerations(spec, N, {
      prefill: async () => { let id; ({id, cache} = await step('prefill', prompt, 0, null)); return id; },
      decode: async (i, previous) => { let id; ({id, cache} = await step('decode', [previous], P + i - 1, cache)); return id; },
      after: () => { release(cache); cache = null; },
    });

    // Teacher-forced scoring: each evaluation row from position 0, every position's logits.
    stage = 'score';
    const output = new ArrayBuffer(spec.output_bytes);
    const every = Array.from({length: E}, (_, r) => r);
    for (let t = 0; t < opts.score.texts; t++) {
      const out = await sessions.get('score').run(feeds(evalIds.subarray(t * E, (t + 1) * E), 0, every, null),
                                                   ['logits'], RUN);
      const data = await out.logits.getData();
      if (data.length !== E * V) throw new RangeError(`text ${t}: ${data.length} logits, expected ${E * V}`);
      new Float32Array(output, t * E * V * 4, E * V).set(data);
      release(Object.values(out));
    }
    new Int32Array(output, opts.score.texts * E * V * 4, N).set(generated);

    const layers = opts.ort_layers.map((l) => ({
      name: l.name, weight_dtype: `${l.weight_dtype}@${layerProvider(placed, l.name, opts.provider)}`,
      weight_bytes: l.weight_bytes, gpu_ms: null}));
    const copies = new Set(sessions.values()).size;
    return {
      ...ortFacts(ort, opts, layers, {fallback, placed}),
      compute_dtype: half ? 'f16' : 'f32',
      timestamp_query: false,
      gpu_note: `per-token wall clock (each new id read back); ${copies} session(s), each holding the model's ` +
        'weights; ORT loads and compiles a session in one call, so load_weights_ms is session creation; ' +
        'scratch counts the page\'s own logits and zero cache, not ORT\'s activation arena',
      compile_ms: sessionMs,
      ...timingReply(timed),
      gpu_buffer_bytes: null,
      js_heap: await jsHeap(),
      layers,
      decoder: {upload_ms: sessionMs, first_forward_ms: firstForwardMs, kv_cache_on_device: opts.provider !== 'wasm',
                memory: {weights: opts.weight_bytes * copies, kv_cache: 2 * L * 2 * cacheBytes,
                         scratch: E * V * 4 + cacheBytes}, generations},
      output,
    };
  } catch (e) {
    return ortFailure(stage, e);
  } finally {
    for (const session of new Set(sessions.values())) await session.release().catch(() => {});
    for (const destroy of disposable) { try { destroy(); } catch { /* already gone */ } }
  }
}
