// wllama (llama.cpp in WebAssembly, with its WebGPU backend): a decoder LLM from a GGUF file
// (engines/wllama/decoder.py builds the job). Load the file from the local server; time greedy
// generations of the prompt (stream, end of sequence ignored, a fresh prefill each time); then
// generate once more untimed with n_probs 1 for the ids; then score every evaluation row
// position by position: one token asked for each prefix, the text's next token forced by a logit
// bias, with the top-K log-probabilities (llama.cpp computes them from the raw logits).
// Per-token decode times are llama.cpp's own (timings_per_token: its cumulative predicted_ms),
// because wllama polls its stream and chunk arrival can batch tokens; TTFT is the page's wall
// clock from the request to the first token. llama.cpp's buffer log lines go back as they are:
// Python reads from them where the model was held.
import {jsHeap} from '../memory.js';
import {timeIterations, timingReply} from '../timing.js';

const BUFFER_LINE = /(model|LoRA|KV|RS|compute|output|rotation|layer input) buffer size\s*=\s*([0-9.]+) MiB/;
// What each of llama.cpp's buffer kinds holds, in the page protocol's memory parts: the weights
// (the model's, a LoRA adapter's), the cache (attention's KV, a recurrent model's state), and
// scratch (the graph's compute buffers, the logits, 3.13's rotation and layer-input buffers).
const BUFFER_PART = {model: 'weights', LoRA: 'weights', KV: 'kv_cache', RS: 'kv_cache', compute: 'scratch',
                     output: 'scratch', rotation: 'scratch', 'layer input': 'scratch'};
const MIB = 1024 * 1024;

function errorText(e) {
  return `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`.slice(0, 600);
}

export async function run(spec, client) {
  const opts = spec.options;
  let stage = 'load engine';
  let wllama = null;
  const log = [];
  const keep = (level) => (...args) => {
    const line = args.map(String).join(' ');
    if (BUFFER_LINE.test(line) || /webgpu|ggml_wgpu|offload/i.test(line) || level === 'E') log.push(line);
  };
  try {
    const {Wllama} = await import(`${opts.assets}index.js`);
    const wasm = new URL(`${opts.assets}wasm/wllama.wasm`, location.href).href;
    wllama = new Wllama({default: wasm}, {suppressNativeLog: false,
      logger: {debug: keep('D'), log: keep('L'), warn: keep('W'), error: keep('E')}});

    stage = 'load model';
    const t0 = performance.now();
    await loadModel(wllama, opts);
    const uploadMs = performance.now() - t0;
    const version = `wllama (llama.cpp ${Wllama.getLibllamaVersion ? Wllama.getLibllamaVersion() : '?'})`;

    stage = 'dispatch';
    const state = {generations: [], firstForwardMs: null, promptTokens: null};
    const timed = await timeIterations(spec, generator(wllama, opts, state), {batchable: false});

    stage = 'generate ids';
    const ids = await wllama.createCompletion({
      prompt: opts.prompt.text, max_tokens: opts.new_tokens, temperature: 0, top_k: 1, stream: false,
      ignore_eos: true, cache_prompt: false, n_probs: 1});
    const generated = (ids.choices[0].logprobs?.content ?? []).map((c) => c.id);
    if (ids.usage) state.promptTokens = ids.usage.prompt_tokens;

    stage = 'score';
    const {parts, scored} = await scoreRows(wllama, opts.score);

    stage = 'readback';
    const gen = new Int32Array(opts.new_tokens).fill(-1);
    generated.slice(0, opts.new_tokens).forEach((v, k) => { gen[k] = v; });
    const {mib, kvOnCpu, placement} = bufferFacts(log);
    const heap = await jsHeap();
    const gpuLines = [await adapterNote(opts), ...log.filter((l) => !BUFFER_LINE.test(l)).slice(0, 8)]
      .filter(Boolean).join(' | ');
    return {
      status: 'ok',
      shader: '',
      compute_dtype: 'f32',
      timestamp_query: false,
      gpu_note: 'per-token times from llama.cpp\'s own timings; TTFT by the page\'s clock',
      compile_ms: uploadMs,  // llama.cpp's whole set-up: file fetched, weights placed, graph reserved
      ...timingReply(timed),
      js_heap: heap,
      threads: wllama.getNumThreads(),
      engine_version: version,
      placement,
      fallback: gpuLines,
      decoder: {upload_ms: uploadMs, first_forward_ms: state.firstForwardMs, kv_cache_on_device: !kvOnCpu,
                memory: Object.fromEntries(Object.entries(mib).map(([part, v]) => [part, Math.round(v * MIB)])),
                generations: state.generations, engine_tokens: {prompt: state.promptTokens ?? 0, scored}},
      output: packed([...parts, gen]),
    };
  } catch (e) {
    return {status: 'failed', stage, reason: errorText(e) + (log.length ? ` (llama.cpp: ${log.slice(-3).join(' | ')})` : '')};
  } finally {
    if (wllama) { try { await wllama.exit(); } catch (e) { /* the page is closing anyway */ } }
  }
}

// The model loaded, with a bounded wait: llama.cpp's WebGPU start-up can hang in a worker (seen
// in Firefox), and the row should say so in minutes, not at the run's time limit.
async function loadModel(wllama, opts) {
  let timer = null;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(
      `llama.cpp did not finish loading the model within ${opts.load_timeout_ms / 1000} s ` +
      `(n_gpu_layers ${opts.gpu_layers})`)), opts.load_timeout_ms);
  });
  try {
    await Promise.race([limit, wllama.loadModelFromUrl(new URL(opts.model_url, location.href).href, {
      n_ctx: opts.n_ctx, n_gpu_layers: opts.gpu_layers, n_threads: opts.threads, useCache: false, seed: 0})]);
  } finally {
    clearTimeout(timer);
  }
}

// One greedy generation of the prompt (timeIterations' callback): its wall time; a timed one's
// TTFT and per-token times (llama.cpp's cumulative predicted_ms) go to state.generations.
function generator(wllama, opts, state) {
  return async (index) => {
    const start = performance.now();
    const chunks = await wllama.createCompletion({
      prompt: opts.prompt.text, max_tokens: opts.new_tokens, temperature: 0, top_k: 1, stream: true,
      ignore_eos: true, cache_prompt: false, timings_per_token: true});
    let firstAt = null;
    const predictedMs = new Map();  // tokens so far -> llama.cpp's cumulative generation ms
    let last = null;
    for await (const chunk of chunks) {
      const t = chunk.timings;
      if (firstAt === null && t && t.predicted_n >= 1) firstAt = performance.now();
      if (t && Number.isFinite(t.predicted_n)) predictedMs.set(t.predicted_n, t.predicted_ms);
      if (t) last = t;
      if (chunk.usage) state.promptTokens = chunk.usage.prompt_tokens;
    }
    const end = performance.now();
    if (firstAt === null || !last || last.predicted_n !== opts.new_tokens) {
      throw new Error(`llama.cpp generated ${last ? last.predicted_n : 0} tokens, ${opts.new_tokens} asked`);
    }
    const tokenMs = [];
    for (let n = 2; n <= opts.new_tokens; n++) {
      const a = n === 2 ? 0 : predictedMs.get(n - 1);
      const b = predictedMs.get(n);
      if (!Number.isFinite(a) || !Number.isFinite(b)) throw new Error(`llama.cpp sent no timings at token ${n}`);
      tokenMs.push(Math.max(0, b - a));
    }
    if (state.firstForwardMs === null) state.firstForwardMs = firstAt - start;
    if (index !== null) state.generations.push({ttft_ms: firstAt - start, token_ms: tokenMs});
    return end - start;
  };
}

// Every evaluation row scored position by position: one token asked for each prefix, the text's
// next token forced by a logit bias, with the top-K log-probabilities. Returns the arrays the
// output holds ({parts: [top1, refLogprob, topIds, topLogprobs]}) and each request's prompt tokens.
async function scoreRows(wllama, sc) {
  const K = sc.top_k;
  const top1 = new Int32Array(sc.texts * sc.rows);
  const refLogprob = new Float32Array(sc.texts * (sc.rows - 1));
  const topIds = new Int32Array(sc.texts * sc.rows * K);
  const topLogprobs = new Float32Array(sc.texts * sc.rows * K).fill(-Infinity);
  const scored = [];
  for (let i = 0; i < sc.texts; i++) {
    for (let t = 0; t < sc.rows; t++) {
      const next = t < sc.rows - 1 ? sc.next_ids[i][t] : null;
      const res = await wllama.createCompletion({
        prompt: sc.prefixes[i][t], max_tokens: 1, temperature: 0, top_k: 1, stream: false, n_probs: K,
        cache_prompt: true, ...(next === null ? {} : {logit_bias: [[next, 100]]})});
      const content = res.choices[0].logprobs?.content?.[0];
      if (!content || !Array.isArray(content.top_logprobs)) throw new Error('llama.cpp returned no log-probabilities');
      scored.push(res.usage ? res.usage.prompt_tokens : 0);
      const top = content.top_logprobs;
      top1[i * sc.rows + t] = top.length ? top[0].id : -1;
      top.slice(0, K).forEach((e, k) => {
        topIds[(i * sc.rows + t) * K + k] = e.id;
        topLogprobs[(i * sc.rows + t) * K + k] = e.logprob;
      });
      if (next !== null) {
        if (content.id !== next) throw new Error(`the logit bias did not force token ${next} (got ${content.id})`);
        refLogprob[i * (sc.rows - 1) + t] = content.logprob;
      }
    }
  }
  return {parts: [top1, refLogprob, topIds, topLogprobs], scored};
}

// Typed arrays one after another in one buffer.
function packed(parts) {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(new Uint8Array(p.buffer, p.byteOffset, p.byteLength), offset);
    offset += p.byteLength;
  }
  return out.buffer;
}

// llama.cpp's buffer log lines: MiB per memory part (BUFFER_PART), whether the KV cache stayed on
// the CPU, and the lines themselves (Python reads where the model was held from them).
function bufferFacts(log) {
  const mib = {weights: 0, kv_cache: 0, scratch: 0};
  let kvOnCpu = true;
  for (const line of log) {
    const m = line.match(BUFFER_LINE);
    if (!m) continue;
    mib[BUFFER_PART[m[1]]] += Number(m[2]);
    if (m[1] === 'KV' && !/\bCPU\b/.test(line)) kvOnCpu = false;
  }
  const placement = log.filter((l) => BUFFER_LINE.test(l)).map((l) => l.replace(/^.*?:\s*/, '')).join('\n');
  return {mib, kvOnCpu, placement};
}

// Why llama.cpp may have found no WebGPU device: the adapter's facts ('' without GPU layers).
async function adapterNote(opts) {
  if (opts.gpu_layers <= 0) return '';
  const adapter = navigator.gpu ? await navigator.gpu.requestAdapter() : null;
  return !navigator.gpu ? 'no navigator.gpu' : !adapter ? 'no WebGPU adapter' :
    adapter.features.has('shader-f16') ? 'the adapter has shader-f16' :
    'the adapter has no shader-f16, which llama.cpp\'s WebGPU backend requires';
}
