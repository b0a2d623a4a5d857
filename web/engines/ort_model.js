// ONNX Runtime Web, whole models: one session runs the encoder exported in Python
// (engines/ort/onnx_encoder.py: the model's graph with pooling and L2 normalisation inside, every
// linear layer a node named after the layer: MatMulNBits for 8/4/2 bits, a float16 MatMul between
// Casts for 16, MatMul for 32). Batch and sequence are fixed per job (freeDimensionOverrides);
// the int32 inputs become BigInt64Array when the graph takes int64. Timing as the matmul path
// (ort.js): cold run apart, warm-ups, timed session.run of pass 0, then every pass once for the
// output. Placement: a session with CPU fallback disabled first (the provider's refusal is kept),
// then, if refused, one with the fallback whose verbose log says where each layer's node ran.
import {timeIterations} from '../timing.js';
import {layerProvider, loadOrt, makeSession, ortFacts, ortFailure, preflight, sessionCalls, timingFacts,
        gpuFacts, layerKey} from './ort_common.js';

function inputType(session, name, fallback) {
  const meta = Array.isArray(session.inputMetadata) ?
    session.inputMetadata.find((m) => m && m.name === name) : null;
  return meta && meta.type ? meta.type : fallback;
}

export async function run(spec, client) {
  const opts = spec.options;
  const model = opts.model;
  const [batch, seq] = [model.batch, model.seq];
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
    const feedsOf = modelFeeds(ort, session, opts, raw, batch * seq, [batch, seq]);
    const feeds0 = feedsOf(0);
    const outputName = session.outputNames.includes(opts.output) ? opts.output : session.outputNames[0];
    const calls = await sessionCalls(ort, opts, session);
    const timed = await timeIterations(spec, calls.timedOnce(feeds0));
    const runOnce = async (feeds) => (await calls.run(feeds))[outputName];
    const output = await passOutputs(runOnce, feeds0, feedsOf, opts, batch, model.hidden);
    const {gpuMs, note: gpuNote, byKey: layerMs, programs, programsByKey} =
      await gpuFacts(ort, opts, session, calls.count, calls.timed, () => runOnce(feeds0), layerKey(opts));
    const layers = opts.ort_layers.map((l) => {
      const ran = layerProvider(placed, l.name, opts.provider);
      return {name: l.name, weight_dtype: `${l.weight_dtype}@${ran}`, weight_bytes: l.weight_bytes,
              gpu_ms: layerMs.get(l.name) ?? null, programs: programsByKey.get(l.name) ?? []};
    });
    return {
      ...ortFacts(ort, opts, layers, {fallback, placed}),
      ...await timingFacts({half, timed, compileMs, gpuMs, gpuNote}),
      programs,
      layers,
      output: output.buffer,
    };
  } catch (e) {
    return ortFailure(stage, e);
  } finally {
    if (session) await session.release().catch(() => {});
  }
}

// The feeds of pass `pass`: each input the graph uses, [batch, seq], as the type it declares.
function modelFeeds(ort, session, opts, raw, per, dims) {
  return (pass) => {
    const feeds = {};
    for (const name of opts.inputs) {
      if (!session.inputNames.includes(name)) continue;  // an input the graph does not use
      const ints = raw[name].subarray(pass * per, (pass + 1) * per);
      const type = inputType(session, name, opts.input_dtype);
      const data = type === 'int64' ? BigInt64Array.from(ints, (v) => BigInt(v)) : Int32Array.from(ints);
      feeds[name] = new ort.Tensor(type === 'int64' ? 'int64' : 'int32', data, dims);
    }
    return feeds;
  };
}

// Every pass once, its [batch, hidden] output in order.
async function passOutputs(runOnce, feeds0, feedsOf, opts, batch, hidden) {
  const output = new Float32Array(opts.output_rows * hidden);
  for (let p = 0; p < opts.model.passes; p++) {
    const out = await runOnce(p === 0 ? feeds0 : feedsOf(p));
    const data = await out.getData();
    if (data.length !== batch * hidden) {
      throw new RangeError(`pass ${p}: output has ${data.length} values, expected ${batch * hidden}`);
    }
    output.set(data instanceof Float32Array ? data : Float32Array.from(data), p * batch * hidden);
    if (out.dispose) out.dispose();
  }
  return output;
}

