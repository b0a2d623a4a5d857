// ONNX Runtime Web runner: loads the local onnxruntime-web bundle, creates a session for the
// one-node model the job carries on the execution provider it names, and times session.run with
// the shared protocol (cold run apart, warm-ups, timed runs). ORT silently moves nodes a provider
// cannot take to its CPU (wasm) provider, so the session is first created with that fallback
// disabled: if the provider refuses, its words are kept, the session is made again with the
// fallback, and ORT's own verbose node-placement log says where the weight-bearing node (named
// "matmul" by engines/ort/onnx_matmul.py) ran. Whole models: ort_model.js; shared pieces: ort_common.js.
import {timeIterations} from '../timing.js';
import {EP_PLATFORM, backendOf, loadOrt, makeSession, ortFailure, placementText, preflight, gpuFacts, timingFacts} from './ort_common.js';

function weightNodeProvider(placed) {
  for (const [ep, nodes] of Object.entries(placed)) {
    if (nodes.some((n) => /\(matmul\)$/.test(n))) return EP_PLATFORM[ep] ?? ep;
  }
  const others = Object.keys(placed).filter((ep) => ep !== 'CPUExecutionProvider');
  if (others.length === 1) return EP_PLATFORM[others[0]] ?? others[0];
  return 'wasm';
}

export async function run(spec, client) {
  const opts = spec.options;
  let stage = 'load';
  let session = null;
  try {
    const half = spec.bits === 16;
    const refused = await preflight(opts, half, stage);
    if (refused) return refused;
    const ort = await loadOrt(opts);
    const model = new Uint8Array(await client.tensor(opts.model));
    const x32 = new Float32Array(await client.tensor(opts.input));

    stage = 'session';
    // A static M: ORT's WebNN provider takes no node with a dynamic dimension.
    const made = await makeSession(ort, model, opts, {M: opts.m});
    session = made.session;
    const {fallback, compileMs} = made;
    const placement = made.placed && fallback ? placementText(made.placed) : '';
    const executedOn = made.placed && fallback ? weightNodeProvider(made.placed) : opts.provider;

    stage = 'run';
    const input = new ort.Tensor(half ? 'float16' : 'float32', half ? new Float16Array(x32) : x32,
                                 [opts.m, opts.k]);
    const feeds = {[session.inputNames[0]]: input};
    const outputName = session.outputNames[0];
    const device = opts.provider === 'webgpu' ? await ort.env.webgpu.device : null;
    let last = null;
    let calls = 0;
    const timedCalls = [];
    const once = async (index) => {
      if (index !== null) timedCalls.push(calls);  // every iteration after the cold one
      calls += 1;
      const t = performance.now();
      const out = await session.run(feeds);
      if (device) await device.queue.onSubmittedWorkDone();
      const ms = performance.now() - t;
      if (last && last !== out[outputName] && last.dispose) last.dispose();
      last = out[outputName];
      return ms;
    };
    const timed = await timeIterations(spec, once);
    const data = await last.getData();
    const output = (half ? Float32Array.from(data) : new Float32Array(data)).buffer;
    if (last.dispose) last.dispose();

    const {gpuMs, note: gpuNote, programs} =
      await gpuFacts(ort, opts, session, calls, timedCalls, () => session.run(feeds));
    const versions = ort.env.versions || {};
    return {
      status: 'ok',
      executed_on: executedOn,
      fallback,
      placement,
      engine_version: String(versions.web || versions.common || ''),
      backend: backendOf(ort, opts),
      programs,
      threads: Number(ort.env.wasm.numThreads),
      ...await timingFacts({half, timed, compileMs, gpuMs, gpuNote}),
      output,
    };
  } catch (e) {
    return ortFailure(stage, e);
  } finally {
    if (session) await session.release().catch(() => {});
  }
}
