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
import {timeGenerations} from '../generation.js';
import {layerProvider, nodePrograms, ortFacts, timingFacts} from './ort_common.js';
import {RUN, WHERE, layerNames, loopPage, loopSessions, releaser, zeroCache} from './ort_loop.js';

export async function run(spec, client) {
  return loopPage(spec, async ({ort, opts, half, at, open, disposable}) => {
    const cfg = opts.model;
    const KVH = cfg.kv_heads, V = cfg.vocab, C = opts.context, P = opts.prompt.rows, E = opts.score.rows;
    const {past: pastNames, present: presentNames} = layerNames(cfg.layers, ['past', 'present']);
    const graph = new Uint8Array(await client.tensor(opts.onnx_model));
    const prompt = new Int32Array(await client.tensor(opts.prompt.tensor));
    const evalIds = new Int32Array(await client.tensor(opts.score.tensor));

    // Sessions: the cache outputs stay on the provider's device; ids and logits come to the CPU.
    at.stage = 'session';
    const location = {logits: 'cpu', next_id: 'cpu', ...Object.fromEntries(presentNames.map((n) => [n, WHERE[opts.provider]]))};
    const base = {...opts, profile: false};
    if (opts.provider === 'webnn') base.ml_context = await navigator.ml.createContext({deviceType: opts.device_type});
    const pass = (rows, logitRows) => ({graph, location, dims: {sequence: rows, total: C + rows, rows: logitRows, past: C}});
    const {sessions, compileMs, fallback} = await loopSessions(ort, opts, base,
      {prefill: pass(P, 1), decode: pass(1, 1), score: pass(E, E)}, open);
    const placed = (opts.static_shapes ? sessions.decode : sessions.prefill).placed;

    at.stage = 'tensors';
    const cacheDims = [1, KVH, C, cfg.head_dim];
    const zeros = await zeroCache(ort, opts, base.ml_context, cacheDims, disposable);
    const release = releaser(zeros);
    const feeds = decoderFeeds(ort, C, pastNames, zeros);
    // One step: the pass's session, its next id read back, the new cache (the old one released).
    const step = async (name, ids, p, cache) => {
      const out = await sessions[name].session.run(feeds(ids, p, [ids.length - 1], cache), ['next_id', ...presentNames], RUN);
      const id = Number((await out.next_id.getData())[0]);
      release(cache);
      return {id, cache: presentNames.map((n) => out[n])};
    };

    let cache = null;
    at.stage = 'run';
    const {timed, generations, firstForwardMs, generated} = await timeGenerations(spec, opts.new_tokens, {
      prefill: async () => { let id; ({id, cache} = await step('prefill', prompt, 0, null)); return id; },
      decode: async (i, previous) => { let id; ({id, cache} = await step('decode', [previous], P + i - 1, cache)); return id; },
      after: () => { release(cache); cache = null; },
    });

    at.stage = 'score';
    const output = await scoreTexts(sessions.score.session, feeds, opts, evalIds, release, spec.output_bytes, V);
    new Int32Array(output, opts.score.texts * E * V * 4, opts.new_tokens).set(generated);

    // The programs each layer's node ran in a scoring pass (what its MatMulNBits computed: ORT's
    // DP4A programs take int8 activations), from one more session with ORT's profile on, where
    // the job asks (native WebGPU at accuracy_level 4); the timed session runs without it.
    at.stage = 'programs';
    const every = Array.from({length: E}, (_, r) => r);
    const programsByLayer = !opts.node_programs ? new Map() : await nodePrograms(ort, graph,
      {...base, output_location: location}, async (session) => release(Object.values(
        await session.run(feeds(evalIds.subarray(0, E), 0, every, null), ['logits'], RUN))));

    const layers = opts.ort_layers.map((l) => ({
      name: l.name, weight_dtype: `${l.weight_dtype}@${layerProvider(placed, l.name, opts.provider)}`,
      weight_bytes: l.weight_bytes, gpu_ms: null, programs: programsByLayer.get(l.name) ?? []}));
    const copies = open.length;
    const cacheBytes = cacheDims.reduce((a, b) => a * b, 4);
    return {
      ...ortFacts(ort, opts, layers, {fallback, placed}),
      ...await timingFacts({half, timed, compileMs, gpuMs: null, gpuNote: `per-token wall clock (each new id read ` +
        `back); ${copies} session(s), each holding the model's weights; ORT loads and compiles a session in one ` +
        'call, so load_weights_ms is session creation; scratch counts the page\'s own logits and zero cache, not ' +
        'ORT\'s activation arena'}),
      layers,
      programs: [...new Set([...programsByLayer.values()].flat())],
      decoder: {upload_ms: compileMs, first_forward_ms: firstForwardMs, kv_cache_on_device: opts.provider !== 'wasm',
                memory: {weights: opts.weight_bytes * copies, kv_cache: 2 * cfg.layers * 2 * cacheBytes,
                         scratch: E * V * 4 + cacheBytes}, generations},
      output,
    };
  });
}

// Feeds of `ids` (rows tokens) from position p: logits for `logitRows`; `cache`: the past tensors
// (null: the zero cache). The cache is right-aligned: its last p rows are unmasked.
function decoderFeeds(ort, C, pastNames, zeros) {
  const i32 = (values, dims) => new ort.Tensor('int32', Int32Array.from(values), dims);
  return (ids, p, logitRows, cache) => {
    const rows = ids.length;
    const mask = new Int32Array(C + rows);
    mask.fill(1, C - p);
    const f = {input_ids: i32(ids, [1, rows]), position_ids: i32(Array.from({length: rows}, (_, r) => p + r), [1, rows]),
               attention_mask: new ort.Tensor('int32', mask, [1, C + rows]), logit_rows: i32(logitRows, [logitRows.length])};
    pastNames.forEach((name, j) => { f[name] = cache ? cache[j] : zeros; });
    return f;
  };
}

// Teacher-forced scoring: each evaluation row from position 0, every position's logits, into the
// output buffer (the generated ids follow them).
async function scoreTexts(session, feeds, opts, evalIds, release, outputBytes, V) {
  const E = opts.score.rows;
  const output = new ArrayBuffer(outputBytes);
  const every = Array.from({length: E}, (_, r) => r);
  for (let t = 0; t < opts.score.texts; t++) {
    const out = await session.run(feeds(evalIds.subarray(t * E, (t + 1) * E), 0, every, null), ['logits'], RUN);
    const data = await out.logits.getData();
    if (data.length !== E * V) throw new RangeError(`text ${t}: ${data.length} logits, expected ${E * V}`);
    new Float32Array(output, t * E * V * 4, E * V).set(data);
    release(Object.values(out));
  }
  return output;
}
