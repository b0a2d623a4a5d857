// ONNX Runtime Web, whole models: one session runs the encoder exported in Python
// (engines/ort/onnx_encoder.py: the model's graph with pooling and L2 normalisation inside, every
// linear layer a node named after the layer: MatMulNBits for 8/4/2 bits, a float16 MatMul between
// Casts for 16, MatMul for 32). Batch and sequence are fixed per job (freeDimensionOverrides);
// the int32 inputs become BigInt64Array when the graph takes int64. Timing as the matmul path
// (ort.js): cold run apart, warm-ups, timed session.run of pass 0, then every pass once for the
// output. Placement: a session with CPU fallback disabled first (the provider's refusal is kept),
// then, if refused, one with the fallback whose verbose log says where each layer's node ran.
import {timeIterations} from '../timing.js';
import {layerProvider, loadOrt, makeSession, ortFacts, ortFailure, preflight, webgpuProfile, timingFacts} from './ort_common.js';

function inputType(session, name, fallback) {
  const meta = Array.isArray(session.inputMetadata) ?
    session.inputMetadata.find((m) => m && m.name === name) : null;
  return meta && meta.type ? meta.type : fallback;
}

export async function run(spec, client) {
  const opts = spec.options;
  const model = opts.model;
  const [batch, seq, passes] = [model.batch, model.seq, model.passes];
  let stage = 'load';
  let session = null;
  try {
    const half = opts.linears.some((l) => l.bits === 16);
    const refused = await preflight(opts, half, stage);
    if (refused) return refused;
    const ort = await loadOrt(opts);
    const graph = new Uint8Array(await client.tensor(opts.onnx_model));
    const raw = {};
    for (const name of opts.inputs) raw[name] = new Int32Array(await client.tensor(name));

    stage = 'session';
    const made = await makeSession(ort, graph, opts, opts.dims);
    session = made.session;
    const {fallback, placed, compileMs} = made;

    stage = 'run';
    const per = batch * seq;
    const feedsOf = (pass) => {
      const feeds = {};
      for (const name of opts.inputs) {
        if (!session.inputNames.includes(name)) continue;  // an input the graph does not use
        const ints = raw[name].subarray(pass * per, (pass + 1) * per);
        const type = inputType(session, name, opts.input_dtype);
        const data = type === 'int64' ? BigInt64Array.from(ints, (v) => BigInt(v)) : Int32Array.from(ints);
        feeds[name] = new ort.Tensor(type === 'int64' ? 'int64' : 'int32', data, [batch, seq]);
      }
      return feeds;
    };
    const feeds0 = feedsOf(0);
    const outputName = session.outputNames.includes(opts.output) ? opts.output : session.outputNames[0];
    const device = opts.provider === 'webgpu' ? await ort.env.webgpu.device : null;
    let calls = 0;
    const timedCalls = [];
    const runOnce = async (feeds) => {
      calls += 1;
      const out = await session.run(feeds);
      if (device) await device.queue.onSubmittedWorkDone();
      return out[outputName];
    };
    let last = null;
    const once = async (index) => {
      if (index !== null) timedCalls.push(calls);  // every iteration after the cold one
      const t = performance.now();
      const out = await runOnce(feeds0);
      const ms = performance.now() - t;
      if (last && last !== out && last.dispose) last.dispose();
      last = out;
      return ms;
    };
    const timed = await timeIterations(spec, once);
    if (last && last.dispose) last.dispose();

    const hidden = model.hidden;
    const output = new Float32Array(opts.output_rows * hidden);
    for (let p = 0; p < passes; p++) {
      const out = await runOnce(p === 0 ? feeds0 : feedsOf(p));
      const data = await out.getData();
      if (data.length !== batch * hidden) {
        throw new RangeError(`pass ${p}: output has ${data.length} values, expected ${batch * hidden}`);
      }
      output.set(data instanceof Float32Array ? data : Float32Array.from(data), p * batch * hidden);
      if (out.dispose) out.dispose();
    }

    let gpuMs = null;
    let gpuNote = 'no GPU timestamps on this provider';
    let layerMs = new Map();
    if (opts.provider === 'webgpu') {
      // A kernel belongs to a layer when its node is the layer's node or a fusion of it
      // ("<layer>/..."); the 16-bit Casts around it are not the layer's matmul.
      const names = new Set(opts.ort_layers.map((l) => l.name));
      const nodeKey = (node, op) => {
        if (op === 'Cast') return null;
        const layer = node.split('/')[0];
        return names.has(layer) ? layer : null;
      };
      ({gpuMs, note: gpuNote, byKey: layerMs} = await webgpuProfile(session, calls, timedCalls, nodeKey));
    }

    const layers = opts.ort_layers.map((l) => {
      const ran = layerProvider(placed, l.name, opts.provider);
      return {name: l.name, weight_dtype: `${l.weight_dtype}@${ran}`, weight_bytes: l.weight_bytes,
              gpu_ms: layerMs.get(l.name) ?? null};
    });
    return {
      ...ortFacts(ort, opts, layers, {fallback, placed}),
      ...await timingFacts({half, timed, compileMs, gpuMs, gpuNote}),
      layers,
      output: output.buffer,
    };
  } catch (e) {
    return ortFailure(stage, e);
  } finally {
    if (session) await session.release().catch(() => {});
  }
}
