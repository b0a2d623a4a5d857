// What ONNX Runtime Web's generate and transcribe pages share (ort_decoder.js, ort_speech.js):
// the cache's names, a zero cache made once on the device the provider reads it from (the passes
// that start from position 0 see it all masked), its sessions' output placement, and releasing a
// step's outputs once the next step has them.
import {loadOrt, makeSession, ortFailure, preflight} from './ort_common.js';

// Where the provider keeps a session output bound to it.
export const WHERE = {webgpu: 'gpu-buffer', webnn: 'ml-tensor', wasm: 'cpu'};
// Runs log warnings only: a session made with the fallback logs verbosely (its placement), and a
// verbose log costs every step time.
export const RUN = {logSeverityLevel: 2};

// Per layer, `${prefix}.${i}.key` and `.value` for each prefix: {past: [...], present: [...]}.
export function layerNames(layers, prefixes) {
  const out = Object.fromEntries(prefixes.map((p) => [p, []]));
  for (let i = 0; i < layers; i++) for (const part of ['key', 'value']) for (const p of prefixes) out[p].push(`${p}.${i}.${part}`);
  return out;
}

// The sessions of a loop's passes ({pass: {graph, location, dims, fallbackLocation}}, in order),
// made as makeSession makes them: on a provider with free dimensions one session per graph serves
// every pass of it; static shapes (WebNN) take one per pass, its dimensions fixed. Returns
// {sessions: {pass: makeSession's result}, compileMs, fallback (the first refusal)}; each new
// session is pushed to `open` as soon as it exists (the page releases them).
export async function loopSessions(ort, opts, base, passes, open) {
  const sessions = {};
  const byGraph = new Map();
  let compileMs = 0;
  let fallback = '';
  for (const [pass, {graph, location, dims, fallbackLocation = null}] of Object.entries(passes)) {
    if (!opts.static_shapes && byGraph.has(graph)) { sessions[pass] = byGraph.get(graph); continue; }
    const m = await makeSession(ort, graph, {...base, output_location: location, fallback_output_location: fallbackLocation},
                                opts.static_shapes ? dims : {});
    open.push(m.session);
    compileMs += m.compileMs;
    if (m.fallback && !fallback) fallback = `${pass} session: ${m.fallback}`;
    sessions[pass] = m;
    byGraph.set(graph, m);
  }
  return {sessions, compileMs, fallback};
}

// A zero float32 tensor of `dims` where the provider reads it; `disposable` gets its destructor.
export async function zeroCache(ort, opts, mlContext, dims, disposable) {
  const elements = dims.reduce((a, b) => a * b, 1);
  if (opts.provider === 'webgpu') {
    const device = await ort.env.webgpu.device;
    const buffer = device.createBuffer({size: elements * 4,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST});
    disposable.push(() => buffer.destroy());
    return ort.Tensor.fromGpuBuffer(buffer, {dataType: 'float32', dims});
  }
  if (opts.provider === 'webnn') {
    const tensor = await mlContext.createTensor({dataType: 'float32', shape: dims, writable: true, readable: true});
    mlContext.writeTensor(tensor, new Float32Array(elements));
    disposable.push(() => tensor.destroy());
    return ort.Tensor.fromMLTensor(tensor, {dataType: 'float32', dims});
  }
  return new ort.Tensor('float32', new Float32Array(elements), dims);
}

// Disposes of tensors a step no longer needs (never the zero cache).
export function releaser(zeros) {
  return (tensors) => { for (const t of tensors ?? []) if (t && t !== zeros && t.dispose) t.dispose(); };
}

// How a loop's page runs: the checks before ORT loads, ORT loaded, then `body({ort, opts, half,
// at, open, disposable})`, whose reply it returns; a throw is the reply of the stage `at.stage`
// names. The sessions in `open` are released and the `disposable` destructors called at the end.
export async function loopPage(spec, body) {
  const opts = spec.options;
  const at = {stage: 'load'};
  const open = [];
  const disposable = [];
  try {
    const half = opts.ort_layers.some((l) => l.bits === 16);
    const refused = await preflight(opts, half, at.stage);
    if (refused) return refused;
    const ort = await loadOrt(opts);
    return await body({ort, opts, half, at, open, disposable});
  } catch (e) {
    return ortFailure(at.stage, e);
  } finally {
    for (const session of open) await session.release().catch(() => {});
    for (const destroy of disposable) { try { destroy(); } catch { /* already gone */ } }
  }
}
