// What the ONNX Runtime Web runners share (ort.js: one MatMul node; ort_model.js: a whole
// encoder): loading the local bundle, the checks before it, session creation with or without CPU
// fallback, the console tap that reads ORT's verbose node-placement log and its WebGPU profile.

import {jsHeap} from '../memory.js';
import {timingReply} from '../timing.js';

export const EP_PLATFORM = {
  WebGpuExecutionProvider: 'webgpu', JsExecutionProvider: 'webgpu',
  WebNNExecutionProvider: 'webnn', CPUExecutionProvider: 'wasm',
};

export function errorText(e) { return `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}`; }

// Where whole-model runners' layers ran (ort_model.js, ort_decoder.js), from ORT's placement log.
const MAX_LISTED = 40;

// The provider that ran a layer's node: the node named `layer` (or `layer/...`, the name ORT
// gives a fusion of it; its Casts excepted) in ORT's placement log.
export function layerProvider(placed, layer, fallbackProvider) {
  if (!placed) return fallbackProvider;  // the strict session was accepted: every node is on it
  const eps = Object.keys(placed);
  for (const [ep, nodes] of Object.entries(placed)) {
    for (const entry of nodes) {
      const m = entry.match(/^(\S+) \((.*)\)$/);
      if (!m || m[1] === 'Cast') continue;
      if (m[2] === layer || m[2].startsWith(`${layer}/`)) return EP_PLATFORM[ep] ?? ep;
    }
  }
  if (eps.length === 1) return EP_PLATFORM[eps[0]] ?? eps[0];  // "All nodes placed on [EP]"
  return '?';
}

export function placementSummary(placed, provider) {
  if (!placed) return '';
  return Object.entries(placed).map(([ep, nodes]) => {
    if (!nodes.length) return `${ep}: all`;
    if (EP_PLATFORM[ep] === provider) return `${ep}: ${nodes.length} nodes`;
    const shown = nodes.slice(0, MAX_LISTED).join(', ');
    return `${ep}: ${nodes.length} nodes (${shown}${nodes.length > MAX_LISTED ? ', ...' : ''})`;
  }).join('; ');
}

export function mostCommon(values, prefer) {
  const counts = new Map();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  let best = prefer;
  for (const [v, c] of counts) {
    if (c > (counts.get(best) ?? 0)) best = v;
  }
  return best;
}

// ORT writes its log and its WebGPU profile through console.log/console.error, bound once when
// its wasm module starts, so the tap is installed when this module loads (before ORT is imported).
class ConsoleTap {
  constructor() {
    this.lines = null;
    for (const level of ['log', 'error']) {
      const original = console[level];
      console[level] = (...args) => {
        if (this.lines) this.lines.push(args.map(String).join(' '));
        original.apply(console, args);
      };
    }
  }
  start() { this.lines = []; }
  stop() { const lines = this.lines ?? []; this.lines = null; return lines; }
}
export const tap = new ConsoleTap();

// "Node placements" from ORT's verbose session log: {CPUExecutionProvider: ['MatMulNBits (matmul)']}.
// When every node went to one provider ORT logs only "All nodes placed on [EP]": an empty list.
// Several sessions' logs (a pipeline's encoder and decoder) add up: no session's nodes are lost.
export function parsePlacement(lines) {
  const placed = {};
  let current = null;
  for (const line of lines) {
    const body = line.replace(/^.*VerifyEachNodeIsAssignedToAnEp\]/, '');
    if (body === line) { current = null; continue; }
    const header = body.match(/(?:All nodes|Node\(s\)) placed on \[(\w+)\]/);
    if (header) { current = header[1]; placed[current] ??= []; continue; }
    const node = body.match(/^\s+(\S+ \(.*\))\s*$/);
    if (current && node) placed[current].push(node[1]);
  }
  return placed;
}

export function placementText(placed) {
  return Object.entries(placed)
      .map(([ep, nodes]) => `${ep}: ${nodes.join(', ') || 'all'}`).join('; ');
}

// GPU kernel time per session.run from the WebGPU provider's session profile: its "Api" events
// carry GPU timestamp durations (us), are named "<node>&<op>&<program>", and fall inside their
// run's "model_run" event. `nodeKey(node, op)` (optional) groups kernels, e.g. by layer.
function profileEvents(lines) {
  const events = [];
  for (const line of lines) {
    if (!line.startsWith('{"cat"')) continue;
    try { events.push(JSON.parse(line.replace(/,\s*$/, ''))); } catch { /* not an event line */ }
  }
  return events;
}

// The distinct kernel programs a profile names (the third part of its "Api" events' names), in
// order: what ORT's WebGPU kernels really ran (its DP4A MatMulNBits programs take int8 activations).
function profilePrograms(events) {
  const names = events.filter((e) => e.cat === 'Api').map((e) => String(e.name).split('&')[2] || '');
  return [...new Set(names.filter(Boolean))].slice(0, 200);
}

function profileRuns(events, runCount, nodeKey) {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run')
      .sort((a, b) => a.ts - b.ts);
  const kernels = events.filter((e) => e.cat === 'Api');
  if (runs.length !== runCount || kernels.length === 0) return null;
  const ms = runs.map(() => 0);
  const byKey = runs.map(() => new Map());
  const programs = new Map();  // key -> the distinct programs its kernels ran
  for (const k of kernels) {
    const i = runs.findLastIndex((r) => r.ts <= k.ts);
    if (i < 0) return null;
    ms[i] += k.dur / 1000;
    const [node, op, program] = String(k.name).split('&');
    const key = nodeKey ? nodeKey(node, op) : null;
    if (key === null || key === undefined) continue;
    byKey[i].set(key, (byKey[i].get(key) ?? 0) + k.dur / 1000);
    if (program) programs.set(key, (programs.get(key) ?? new Set()).add(program));
  }
  return {ms, byKey, programs};
}

export function profileGpuMs(lines, runCount) {
  const runs = profileRuns(profileEvents(lines), runCount, null);
  return runs ? runs.ms : null;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// `opts.ml_context`: an MLContext the sessions share (their MLTensors pass from one to another).
// The execution provider entry of a session's options; on WebGPU with the storage-buffer cache
// mode the run names (`opts.buffer_cache`, ORT's storageBufferCacheMode).
export function providerOption(opts) {
  if (opts.provider === 'webnn') {
    return opts.ml_context ? {name: 'webnn', context: opts.ml_context} : {name: 'webnn', deviceType: opts.device_type};
  }
  if (opts.provider === 'webgpu' && opts.buffer_cache) return {name: 'webgpu', storageBufferCacheMode: opts.buffer_cache};
  return opts.provider;
}

// `dims`: free dimension name -> size (ORT's WebNN provider takes no node with a dynamic
// dimension). On WebGPU the outputs stay on the GPU during the timed runs, so a run is timed
// from submit to queue completion, as the harness's own kernels are; they are read back once at
// the end. Profiling gives the WebGPU provider's kernel timestamps. A runner may name where each
// output stays (`opts.output_location`, ORT's preferredOutputLocation) and turn profiling off
// (`opts.profile === false`).
export async function createSession(ort, model, opts, dims, {fallback, verbose}) {
  const options = {executionProviders: [providerOption(opts)], graphOptimizationLevel: opts.graph_optimization || 'all',
                   freeDimensionOverrides: dims, logSeverityLevel: verbose ? 0 : 2};
  if (opts.provider === 'webgpu') {
    options.preferredOutputLocation = 'gpu-buffer';
    options.enableProfiling = opts.profile !== false;
  }
  if (opts.output_location) options.preferredOutputLocation = opts.output_location;
  if (opts.externalData && opts.externalData.length) options.externalData = opts.externalData;
  if (!fallback) options.extra = {session: {disable_cpu_ep_fallback: '1'}};
  return ort.InferenceSession.create(model, options);
}

// The checks before ORT loads: a reply {status:'unsupported', ...} or null.
export async function preflight(opts, half, stage) {
  if (opts.provider === 'webgpu' && !('gpu' in navigator)) {
    return {status: 'unsupported', stage, reason: 'WebGPU: navigator.gpu is missing'};
  }
  if (opts.provider === 'webnn' && !('ml' in navigator)) {
    return {status: 'unsupported', stage, reason: 'navigator.ml is missing: this browser has no WebNN'};
  }
  if (half && typeof Float16Array !== 'function') {
    return {status: 'unsupported', stage, reason: 'Float16Array is missing: cannot feed a float16 model'};
  }
  if (half && opts.provider === 'webgpu') {
    // ORT's WebGPU provider accepts float16 nodes on adapters without shader-f16 and fails
    // (or returns zeros) only when it builds the shader: ask the adapter first.
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter || !adapter.features.has('shader-f16')) {
      return {status: 'unsupported', stage,
              reason: 'WebGPU adapter lacks shader-f16, which ORT\'s float16 MatMul needs'};
    }
  }
  return null;
}

// Which WebGPU implementation this ORT ran, read from ORT itself: JSEP defines env.webgpu.adapter
// when it starts; the native implementation never sets it. '' off WebGPU.
export function backendOf(ort, opts) {
  if (opts.provider !== 'webgpu') return '';
  return Object.getOwnPropertyDescriptor(ort.env.webgpu, 'adapter') ? 'jsep' : 'native';
}

export async function loadOrt(opts) {
  const ort = await import(`${opts.assets}${opts.bundle}`);
  ort.env.wasm.wasmPaths = opts.assets;
  ort.env.wasm.numThreads = opts.threads;  // read once, at ORT's first session
  return ort;
}

// Sessions the way both runners make them: wasm with its own CPU provider; any other provider
// first with CPU fallback disabled (its refusal is kept), then, if it refused, with the fallback
// and ORT's verbose log, whose node placement is returned (`placed` is null when the provider
// took the strict session: then every node is on it). `opts.fallback_output_location` (optional)
// replaces `opts.output_location` for the session with CPU fallback.
export async function makeSession(ort, model, opts, dims) {
  let t0 = performance.now();
  let fallback = '';
  let placed = null;
  let session;
  if (opts.provider === 'wasm') {
    session = await createSession(ort, model, opts, dims, {fallback: true, verbose: false});
  } else {
    try {
      session = await createSession(ort, model, opts, dims, {fallback: false, verbose: false});
    } catch (e) {
      fallback = errorText(e);
      tap.start();
      t0 = performance.now();
      try {
        const fallbackOpts = opts.fallback_output_location ?
          {...opts, output_location: opts.fallback_output_location} : opts;
        session = await createSession(ort, model, fallbackOpts, dims, {fallback: true, verbose: true});
      } catch (e2) {  // the strict session's refusal is the cause; the second's may only echo it
        throw new Error(`${fallback}; with CPU fallback: ${errorText(e2)}`);
      } finally {
        placed = parsePlacement(tap.stop());
      }
    }
  }
  return {session, fallback, placed, compileMs: performance.now() - t0};
}

// GPU ms of the timed runs from the WebGPU session profile (ends profiling), or null and why;
// `byKey`: key -> median GPU ms over the timed runs of the kernels `nodeKey` groups under it;
// `programsByKey`: key -> the distinct programs those kernels ran.
async function webgpuProfile(session, calls, timedCalls, nodeKey = null) {
  tap.start();
  await session.endProfiling();
  const events = profileEvents(tap.stop());
  const runs = profileRuns(events, calls, nodeKey);
  const perRun = runs ? runs.ms : null;
  const byKey = new Map();
  if (runs && nodeKey && timedCalls.length) {
    const keys = new Set(timedCalls.flatMap((c) => [...runs.byKey[c].keys()]));
    for (const key of keys) byKey.set(key, median(timedCalls.map((c) => runs.byKey[c].get(key) ?? 0)));
  }
  let gpuMs = perRun ? timedCalls.map((c) => perRun[c]) : null;
  const note = gpuMs ? 'sum of the GPU kernel events of each run in ORT\'s session profile'
                     : 'ORT\'s session profile held no GPU kernel events for every run';
  if (gpuMs && !gpuMs.every((v) => v > 0)) gpuMs = null;
  const programsByKey = new Map([...(runs ? runs.programs : new Map())]  // page_protocol.LAYER_PROGRAMS: 16 a layer
    .map(([k, v]) => [k, [...v].slice(0, 16)]));
  return {gpuMs, note, byKey: gpuMs ? byKey : new Map(), programs: profilePrograms(events), programsByKey};
}

// The layer a WebGPU kernel belongs to: its node is the layer's node or a fusion of it
// ("<layer>/..."); the 16-bit Casts around it are not the layer's matmul.
export function layerKey(opts) {
  const names = new Set(opts.ort_layers.map((l) => l.name));
  return (node, op) => {
    if (op === 'Cast') return null;
    const layer = node.split('/')[0];
    return names.has(layer) ? layer : null;
  };
}

// Each linear layer's programs (`layerKey`) in one run of a session of `graph` made with ORT's
// profile on: for a page whose timed session runs without it (the decoders' per-token wall
// clock), asked for after its timed work. `run(session)` makes the run and disposes its outputs.
export async function nodePrograms(ort, graph, opts, run) {
  const {session} = await makeSession(ort, graph, {...opts, profile: true}, {});
  try {
    await run(session);
    return (await webgpuProfile(session, 1, [0], layerKey(opts))).programsByKey;
  } finally {
    await session.release().catch(() => {});
  }
}

// What the WebGPU provider says of the timed runs: per run its GPU ms, per `nodeKey` key the
// median GPU ms (`byKey`) and the programs its kernels ran (`programsByKey`, native only), and the
// kernel programs that ran. The native implementation says it
// in its session profile (webgpuProfile). JSEP says nothing there: its programs come from one more
// run (`run()`: its outputs, disposed here), untimed, with its own profiling on (its timestamps flush the queue after every dispatch on
// adapters that cannot time inside a pass, so the timed runs keep the wall clock).
export async function gpuFacts(ort, opts, session, calls, timedCalls, run, nodeKey = null) {
  if (opts.provider !== 'webgpu') {
    return {gpuMs: null, note: 'no GPU timestamps on this provider', byKey: new Map(), programs: [],
            programsByKey: new Map()};
  }
  if (backendOf(ort, opts) === 'native') return webgpuProfile(session, calls, timedCalls, nodeKey);
  return {gpuMs: null, byKey: new Map(), programs: await jsepPrograms(ort, run), programsByKey: new Map(),
          note: 'JSEP\'s kernel timestamps are not read (they would flush the queue after every dispatch)'};
}

// The programs JSEP's kernels ran in one run with its profiling on (each dispatch's programName).
async function jsepPrograms(ort, run) {
  const names = new Set();
  const device = await ort.env.webgpu.device;
  ort.env.webgpu.profiling = {mode: 'default', ondata: (d) => names.add(String(d.programName))};
  try {
    const out = await run();  // a tensor, or the session's outputs by name
    for (const t of out && out.dispose ? [out] : Object.values(out || {})) if (t && t.dispose) t.dispose();
    await device.queue.onSubmittedWorkDone();
    for (let i = 0; i < 50 && !names.size; i++) await new Promise((r) => setTimeout(r, 10));
  } finally {
    ort.env.webgpu.profiling = {mode: 'off'};
  }
  return [...names].slice(0, 200);
}

// What every whole-model ORT reply says of the run: where most layers ran, the provider's refusal
// of a strict session and ORT's placement, its version and wasm threads in effect.
export function ortFacts(ort, opts, layers, {fallback, placed}) {
  const versions = ort.env.versions || {};
  return {
    status: 'ok',
    executed_on: mostCommon(layers.map((l) => l.weight_dtype.split('@')[1]), opts.provider),
    fallback,
    placement: placementSummary(placed, opts.provider),
    engine_version: String(versions.web || versions.common || ''),
    backend: backendOf(ort, opts),
    threads: Number(ort.env.wasm.numThreads),
    shader: `onnxruntime-web ${opts.provider}`,
  };
}

// The timing and memory facts of every ORT reply (the page protocol's names).
export async function timingFacts({half, timed, compileMs, gpuMs, gpuNote}) {
  return {
    compute_dtype: half ? 'f16' : 'f32',
    timestamp_query: gpuMs !== null,
    gpu_note: gpuNote,
    compile_ms: compileMs,
    ...timingReply(timed, gpuMs),
    js_heap: await jsHeap(),
  };
}

// ORT's own allocator out of memory: a C++ std::bad_alloc in the error's text.
export function outOfMemory(text) { return /std::bad_alloc/.test(text); }

// The reply of a runner that stopped at `stage`: ORT's own allocator out of memory (a C++
// std::bad_alloc: the WebAssembly memory ORT grows from inside, which the meter cannot see) is
// out-of-memory; otherwise a session ORT would not make is the provider's refusal (unsupported),
// anything later a failure.
export function ortFailure(stage, e) {
  tap.stop();
  const text = errorText(e);
  const status = outOfMemory(text) ? 'out-of-memory' : stage === 'session' ? 'unsupported' : 'failed';
  return {status, stage, reason: `ONNX Runtime Web ${stage}: ${text}`};
}

// A whole-model session's runs as the timing protocol takes them: `run(feeds)` counts the call
// (the WebGPU profile is per call) and waits for the device on WebGPU; `timedOnce(feeds)` is
// timeIterations' callback (one run, its outputs released after the clock stops), noting which
// calls were timed.
export async function sessionCalls(ort, opts, session) {
  const device = opts.provider === 'webgpu' ? await ort.env.webgpu.device : null;
  const calls = {count: 0, timed: []};
  calls.run = async (feeds) => {
    calls.count += 1;
    const out = await session.run(feeds);
    if (device) await device.queue.onSubmittedWorkDone();
    return out;
  };
  calls.timedOnce = (feeds) => async (index) => {
    if (index !== null) calls.timed.push(calls.count);  // every iteration after the cold one
    const t = performance.now();
    const out = await calls.run(feeds);
    const ms = performance.now() - t;
    for (const tensor of Object.values(out)) if (tensor && tensor.dispose) tensor.dispose();
    return ms;
  };
  return calls;
}
