// ONNX Runtime Web runner: loads the local onnxruntime-web bundle, creates a session for the
// one-node model the job carries on the execution provider it names, and times session.run with
// the shared protocol (cold run apart, warm-ups, timed runs). ORT silently moves nodes a provider
// cannot take to its CPU (wasm) provider, so the session is first created with that fallback
// disabled: if the provider refuses, its words are kept and the session is made again with the
// fallback, and the reply says the node ran on wasm.
import {jsHeap} from '../memory.js';
import {timeIterations} from '../timing.js';

function errorText(e) { return `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}`; }

function providerOption(opts) {
  if (opts.provider === 'webnn') return {name: 'webnn', deviceType: opts.device_type};
  return opts.provider;
}

async function createSession(ort, model, opts, m, allowFallback) {
  // A static M: ORT's WebNN provider takes no node with a dynamic dimension. On WebGPU the output
  // stays on the GPU during the timed runs, so a run is timed from submit to queue completion,
  // as the harness's own kernels are; it is read back once at the end.
  const options = {executionProviders: [providerOption(opts)], graphOptimizationLevel: 'all',
                   freeDimensionOverrides: {M: m}};
  if (opts.provider === 'webgpu') options.preferredOutputLocation = 'gpu-buffer';
  if (!allowFallback) options.extra = {session: {disable_cpu_ep_fallback: '1'}};
  return ort.InferenceSession.create(model, options);
}

export async function run(spec, client) {
  const opts = spec.options;
  let stage = 'load';
  try {
    const ort = await import(`${opts.assets}${opts.bundle}`);
    ort.env.wasm.wasmPaths = opts.assets;
    ort.env.wasm.numThreads = opts.threads;
    ort.env.logLevel = 'error';
    if (opts.provider === 'webgpu' && !('gpu' in navigator)) {
      return {status: 'unsupported', stage, reason: 'WebGPU: navigator.gpu is missing'};
    }
    if (opts.provider === 'webnn' && !('ml' in navigator)) {
      return {status: 'unsupported', stage, reason: 'navigator.ml is missing: this browser has no WebNN'};
    }
    const model = new Uint8Array(await client.tensor(opts.model));
    const x32 = new Float32Array(await client.tensor(opts.input));
    const half = spec.bits === 16;
    if (half && typeof Float16Array !== 'function') {
      return {status: 'unsupported', stage, reason: 'Float16Array is missing: cannot feed a float16 model'};
    }
    if (half && opts.provider === 'webgpu') {
      const adapter = await navigator.gpu.requestAdapter();
      if (!adapter || !adapter.features.has('shader-f16')) {
        return {status: 'unsupported', stage,
                reason: 'WebGPU adapter lacks shader-f16, which ORT\'s float16 MatMul needs'};
      }
    }

    stage = 'session';
    const t0 = performance.now();
    let session;
    let fallback = '';
    let executedOn = opts.provider;
    if (opts.provider === 'wasm') {
      session = await createSession(ort, model, opts, spec.m, true);
    } else {
      try {
        session = await createSession(ort, model, opts, spec.m, false);
      } catch (e) {
        fallback = errorText(e);
        session = await createSession(ort, model, opts, spec.m, true);
        executedOn = 'wasm';
      }
    }
    const compileMs = performance.now() - t0;

    stage = 'run';
    const input = new ort.Tensor(half ? 'float16' : 'float32', half ? new Float16Array(x32) : x32,
                                 [spec.m, spec.k]);
    const feeds = {[session.inputNames[0]]: input};
    const outputName = session.outputNames[0];
    const device = executedOn === 'webgpu' ? ort.env.webgpu.device : null;
    let last = null;
    const once = async (_index) => {
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
    await session.release();
    const versions = ort.env.versions || {};
    return {
      status: 'ok',
      executed_on: executedOn,
      fallback,
      engine_version: String(versions.web || versions.common || ''),
      threads: Number(ort.env.wasm.numThreads),
      compute_dtype: half ? 'f16' : 'f32',
      timestamp_query: false,
      gpu_note: 'ORT Web exposes no kernel timestamps to the page; wall clock around session.run',
      compile_ms: compileMs,
      cold_ms: coldMs,
      wall_ms: wallMs,
      gpu_ms: null,
      gpu_buffer_bytes: null,
      js_heap: await jsHeap(),
      output,
    };
  } catch (e) {
    const refused = stage === 'session';
    return {status: refused ? 'unsupported' : 'failed', stage,
            reason: `ONNX Runtime Web ${stage}: ${errorText(e)}`};
  }
}
