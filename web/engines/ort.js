// ONNX Runtime Web runner: loads the local onnxruntime-web bundle, creates a session for the
// one-node model the job carries on the execution provider it names, and times session.run with
// the shared protocol (cold run apart, warm-ups, timed runs). ORT silently moves nodes a provider
// cannot take to its CPU (wasm) provider, so the session is first created with that fallback
// disabled: if the provider refuses, its words are kept, the session is made again with the
// fallback, and ORT's own verbose node-placement log says where the weight-bearing node (named
// "matmul" by engines/ort_model.py) ran.
import {jsHeap} from '../memory.js';
import {timeIterations} from '../timing.js';

const EP_PLATFORM = {
  WebGpuExecutionProvider: 'webgpu', JsExecutionProvider: 'webgpu',
  WebNNExecutionProvider: 'webnn', CPUExecutionProvider: 'wasm',
};

function errorText(e) { return `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}`; }

// ORT writes its log and its WebGPU profile through console.log/console.error, bound once when
// its wasm module starts, so the tap is installed when this module loads.
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
const tap = new ConsoleTap();

// "Node placements" from ORT's verbose session log: {CPUExecutionProvider: ['MatMulNBits (matmul)']}.
function parsePlacement(lines) {
  const placed = {};
  let current = null;
  for (const line of lines) {
    const body = line.replace(/^.*VerifyEachNodeIsAssignedToAnEp\]/, '');
    if (body === line) { current = null; continue; }
    const header = body.match(/(?:All nodes|Node\(s\)) placed on \[(\w+)\]/);
    if (header) { current = header[1]; placed[current] = []; continue; }
    const node = body.match(/^\s+(\S+ \(.*\))\s*$/);
    if (current && node) placed[current].push(node[1]);
  }
  return placed;
}

function weightNodeProvider(placed) {
  for (const [ep, nodes] of Object.entries(placed)) {
    if (nodes.some((n) => /\(matmul\)$/.test(n))) return EP_PLATFORM[ep] ?? ep;
  }
  const others = Object.keys(placed).filter((ep) => ep !== 'CPUExecutionProvider');
  if (others.length === 1) return EP_PLATFORM[others[0]] ?? others[0];
  return 'wasm';
}

// GPU kernel time per session.run from the WebGPU provider's session profile: its "Api" events
// carry GPU timestamp durations (us) and fall inside their run's "model_run" event.
function profileGpuMs(lines, runCount) {
  const events = [];
  for (const line of lines) {
    if (!line.startsWith('{"cat"')) continue;
    try { events.push(JSON.parse(line.replace(/,\s*$/, ''))); } catch { /* not an event line */ }
  }
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run')
      .sort((a, b) => a.ts - b.ts);
  const kernels = events.filter((e) => e.cat === 'Api');
  if (runs.length !== runCount || kernels.length === 0) return null;
  const ms = runs.map(() => 0);
  for (const k of kernels) {
    const i = runs.findLastIndex((r) => r.ts <= k.ts);
    if (i < 0) return null;
    ms[i] += k.dur / 1000;
  }
  return ms;
}

function providerOption(opts) {
  if (opts.provider === 'webnn') return {name: 'webnn', deviceType: opts.device_type};
  return opts.provider;
}

async function createSession(ort, model, opts, m, {fallback, verbose}) {
  // A static M: ORT's WebNN provider takes no node with a dynamic dimension. On WebGPU the output
  // stays on the GPU during the timed runs, so a run is timed from submit to queue completion,
  // as the harness's own kernels are; it is read back once at the end. Profiling gives the
  // WebGPU provider's kernel timestamps.
  const options = {executionProviders: [providerOption(opts)], graphOptimizationLevel: 'all',
                   freeDimensionOverrides: {M: m}, logSeverityLevel: verbose ? 0 : 2};
  if (opts.provider === 'webgpu') {
    options.preferredOutputLocation = 'gpu-buffer';
    options.enableProfiling = true;
  }
  if (!fallback) options.extra = {session: {disable_cpu_ep_fallback: '1'}};
  return ort.InferenceSession.create(model, options);
}

export async function run(spec, client) {
  const opts = spec.options;
  let stage = 'load';
  let session = null;
  try {
    if (opts.provider === 'webgpu' && !('gpu' in navigator)) {
      return {status: 'unsupported', stage, reason: 'WebGPU: navigator.gpu is missing'};
    }
    if (opts.provider === 'webnn' && !('ml' in navigator)) {
      return {status: 'unsupported', stage, reason: 'navigator.ml is missing: this browser has no WebNN'};
    }
    const half = spec.bits === 16;
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
    const ort = await import(`${opts.assets}${opts.bundle}`);
    ort.env.wasm.wasmPaths = opts.assets;
    ort.env.wasm.numThreads = opts.threads;  // read once, at ORT's first session
    const model = new Uint8Array(await client.tensor(opts.model));
    const x32 = new Float32Array(await client.tensor(opts.input));

    stage = 'session';
    let t0 = performance.now();
    let fallback = '';
    let placement = '';
    let executedOn = opts.provider;
    if (opts.provider === 'wasm') {
      session = await createSession(ort, model, opts, spec.m, {fallback: true, verbose: false});
    } else {
      try {
        session = await createSession(ort, model, opts, spec.m, {fallback: false, verbose: false});
      } catch (e) {
        fallback = errorText(e);
        tap.start();
        t0 = performance.now();
        try {
          session = await createSession(ort, model, opts, spec.m, {fallback: true, verbose: true});
        } finally {
          const placed = parsePlacement(tap.stop());
          placement = Object.entries(placed)
              .map(([ep, nodes]) => `${ep}: ${nodes.join(', ') || 'all'}`).join('; ');
          executedOn = weightNodeProvider(placed);
        }
      }
    }
    const compileMs = performance.now() - t0;

    stage = 'run';
    const input = new ort.Tensor(half ? 'float16' : 'float32', half ? new Float16Array(x32) : x32,
                                 [spec.m, spec.k]);
    const feeds = {[session.inputNames[0]]: input};
    const outputName = session.outputNames[0];
    const device = opts.provider === 'webgpu' ? await ort.env.webgpu.device : null;
    let last = null;
    let calls = 0;
    const timedCalls = [];
    const once = async (index) => {
      if (index !== null) timedCalls.push(calls);
      calls += 1;
      const t = performance.now();
      const out = await session.run(feeds);
      if (device) await device.queue.onSubmittedWorkDone();
      const ms = performance.now() - t;
      if (last && last !== out[outputName] && last.dispose) last.dispose();
      last = out[outputName];
      return ms;
    };
    const {coldMs, wallMs} = await timeIterations(spec, once);
    const data = await last.getData();
    const output = (half ? Float32Array.from(data) : new Float32Array(data)).buffer;
    if (last.dispose) last.dispose();

    let gpuMs = null;
    let gpuNote = 'no GPU timestamps on this provider';
    if (opts.provider === 'webgpu') {
      tap.start();
      await session.endProfiling();
      const perRun = profileGpuMs(tap.stop(), calls);
      gpuMs = perRun ? timedCalls.map((c) => perRun[c]) : null;
      gpuNote = gpuMs ? 'sum of the GPU kernel events of each run in ORT\'s session profile'
                      : 'ORT\'s session profile held no GPU kernel events for every run';
      if (gpuMs && !gpuMs.every((v) => v > 0)) gpuMs = null;
    }
    const versions = ort.env.versions || {};
    return {
      status: 'ok',
      executed_on: executedOn,
      fallback,
      placement,
      engine_version: String(versions.web || versions.common || ''),
      threads: Number(ort.env.wasm.numThreads),
      compute_dtype: half ? 'f16' : 'f32',
      timestamp_query: gpuMs !== null,
      gpu_note: gpuNote,
      compile_ms: compileMs,
      cold_ms: coldMs,
      wall_ms: wallMs,
      gpu_ms: gpuMs,
      gpu_buffer_bytes: null,
      js_heap: await jsHeap(),
      output,
    };
  } catch (e) {
    tap.stop();
    return {status: stage === 'session' ? 'unsupported' : 'failed', stage,
            reason: `ONNX Runtime Web ${stage}: ${errorText(e)}`};
  } finally {
    if (session) await session.release().catch(() => {});
  }
}
