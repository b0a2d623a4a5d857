// ONNX Runtime Web, a user's own ONNX file (the onnx workload kind, engines/ort/onnx.py):
// one session runs the job's precision variant, fed the job's inputs (any dtype the graph takes),
// every output returned: float outputs as float32, integer and bool outputs as int32, in the
// job's order. A graph whose weights are in external data files gets them as ORT's externalData
// (fetched from the job, named as the graph names them). Symbolic dimensions are fixed per job (freeDimensionOverrides: ORT's WebNN
// provider takes static shapes only). Timing as the other ORT runners (ort_common.js): the
// session's creation and the cold run apart, warm-ups, then timed session.run calls; on WebGPU
// the outputs stay on the GPU during timed runs and the run ends at queue completion. Placement:
// a session without CPU fallback first; if the provider refuses it, the fallback session's
// verbose log says where every node went: counted, and the nodes off the provider listed.
import {timeIterations} from '../timing.js';
import {EP_PLATFORM, layerProvider, loadOrt, makeSession, mostCommon, ortFacts, ortFailure, preflight, sessionCalls,
  timingFacts, gpuFacts} from './ort_common.js';

const MAX_FALLBACK_LISTED = 2000;

const TYPED = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  int16: Int16Array, int8: Int8Array, uint8: Uint8Array, uint16: Uint16Array, bool: Uint8Array,
};

function feedTensor(ort, meta, bytes) {
  if (meta.dtype === 'float16') {  // ORT takes float16 data as Float16Array or as its raw bits
    const data = typeof Float16Array === 'function' ? new Float16Array(bytes) : new Uint16Array(bytes);
    return new ort.Tensor('float16', data, meta.shape);
  }
  const Typed = TYPED[meta.dtype];
  if (!Typed) throw new TypeError(`input ${meta.name}: element type ${meta.dtype} cannot be fed`);
  return new ort.Tensor(meta.dtype, new Typed(bytes), meta.shape);
}

// A float16's raw bits (ORT's float16 output data where Float16Array is missing) as a number.
function halfBits(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

// Every node in ORT's placement log as '<op> (<node>)@<provider>'; null when the strict session
// was accepted (every node on the provider, none listed).
function placedNodes(placed) {
  if (!placed) return null;
  const nodes = [];
  for (const [ep, list] of Object.entries(placed)) {
    for (const entry of list) nodes.push(`${entry}@${EP_PLATFORM[ep] ?? ep}`);
  }
  return nodes;
}

export async function run(spec, client) {
  const opts = spec.options;
  let stage = 'load';
  let session = null;
  try {
    const refused = await preflight(opts, opts.half, stage);
    if (refused) return refused;
    const ort = await loadOrt(opts);
    const graph = new Uint8Array(await client.tensor(opts.onnx_model));
    const externalData = [];  // the files holding the graph's weights, by the names it gives them
    for (const e of opts.external_data || []) {
      externalData.push({path: e.path, data: new Uint8Array(await client.tensor(e.key))});
    }
    const feeds = {};
    for (const meta of opts.inputs) feeds[meta.name] = feedTensor(ort, meta, await client.tensor(meta.key));

    stage = 'session';
    const made = await makeSession(ort, graph, {...opts, externalData}, opts.dims);
    session = made.session;
    const {fallback, placed, compileMs} = made;

    stage = 'run';
    const calls = await sessionCalls(ort, opts, session);
    const timed = await timeIterations(spec, calls.timedOnce(feeds));
    const out = await calls.run(feeds);
    const output = await outputBytes(out, spec.outputs);
    for (const t of Object.values(out)) if (t && t.dispose) t.dispose();

    const {gpuMs, note: gpuNote, programs} =
      await gpuFacts(ort, opts, session, calls.count, calls.timed, () => calls.run(feeds));

    const nodes = placedNodes(placed);
    const ranOn = nodes ? mostCommon(nodes.map((n) => n.split('@').pop()), opts.provider) : opts.provider;
    const off = nodes ? nodes.filter((n) => n.split('@').pop() !== opts.provider) : [];
    const layers = opts.ort_layers.map((l) => ({
      name: l.name, weight_dtype: `${l.weight_dtype}@${layerProvider(placed, l.node, opts.provider)}`,
      weight_bytes: null, gpu_ms: null,
    }));
    return {
      ...ortFacts(ort, opts, layers, {fallback, placed}),
      executed_on: ranOn,  // of every node ORT placed, not only the weight-bearing ones
      placement: off.slice(0, 40).join(', '),
      ...await timingFacts({half: opts.half, timed, compileMs, gpuMs, gpuNote}),
      programs,
      layers,
      nodes_placed: nodes ? nodes.length : 0,
      fallback_nodes: off.slice(0, MAX_FALLBACK_LISTED),
      output,
    };
  } catch (e) {
    return ortFailure(stage, e);
  } finally {
    if (session) await session.release().catch(() => {});
  }
}

// The session's outputs the job lists, in order, as float32 or int32 values (int64 and float16
// converted).
async function outputBytes(out, outputs) {
  let total = 0;
  for (const o of outputs) total += o.shape.reduce((a, b) => a * b, 1) * 4;
  const output = new ArrayBuffer(total);
  let at = 0;
  for (const o of outputs) {
    const tensor = out[o.name];
    if (!tensor) throw new RangeError(`the session returned no output ${o.name}`);
    const data = await tensor.getData();
    const count = o.shape.reduce((a, b) => a * b, 1);
    if (data.length !== count) throw new RangeError(`output ${o.name} has ${data.length} values, expected ${count}`);
    const view = o.dtype === 'float32' ? new Float32Array(output, at, count) : new Int32Array(output, at, count);
    if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
      for (let i = 0; i < count; i++) view[i] = Number(data[i]);
    } else if (tensor.type === 'float16' && data instanceof Uint16Array) {
      for (let i = 0; i < count; i++) view[i] = halfBits(data[i]);
    } else {
      view.set(data);
    }
    at += count * 4;
  }
  return output;
}
