// What the transformers.js runners share (engines/transformersjs/): loading the library from
// the local server fully offline, every model file fetched through the job, and reading what
// ORT really ran from its verbose session log.
//
// Offline: remote models off, local models on, Cache Storage off for the files and the wasm (so
// load cost is not hidden), ORT's wasm from the local copy of the build the library bundles. With
// `opts.ort` the page first hands the library the harness's ONNX Runtime Web build
// (globalThis[Symbol.for('onnxruntime')], read once when transformers.js is evaluated).
import {jsHeap} from '../memory.js';
import {timingReply} from '../timing.js';
import {errorText, parsePlacement, placementSummary, mostCommon, EP_PLATFORM, outOfMemory, providerOption,
        tap} from './ort_common.js';

export const MODEL_ID = 'model';
const MODEL_PATH = '/models/';

export async function loadLibrary(opts, client) {
  if (opts.ort) globalThis[Symbol.for('onnxruntime')] = await import(`${opts.ort.assets}${opts.ort.bundle}`);
  const T = await import(`${opts.assets}${opts.module}`);
  Object.assign(T.env, {allowLocalModels: true, allowRemoteModels: false, localModelPath: MODEL_PATH,
                        useBrowserCache: false, useWasmCache: false});
  T.env.fetch = folderFetch(opts.files, client);
  const wasm = T.env.backends.onnx.wasm;
  wasm.wasmPaths = opts.ort ? opts.ort.assets : opts.assets;
  wasm.numThreads = opts.threads;
  return T;
}

// The library asks for `${MODEL_PATH}${MODEL_ID}/<file>`; the job holds the folder's files by
// name (`files`: relative name -> tensor key). A file the folder lacks is a 404, as from a server.
function folderFetch(files, client) {
  const prefix = `${MODEL_PATH}${MODEL_ID}/`;
  return async (url) => {
    const path = decodeURIComponent(new URL(String(url), location.href).pathname);
    const key = path.startsWith(prefix) ? files[path.slice(prefix.length)] : undefined;
    if (key === undefined) return new Response('not in the model folder', {status: 404, statusText: 'Not Found'});
    const body = await client.tensor(key);
    return new Response(body, {status: 200, headers: {'Content-Length': String(body.byteLength)}});
  };
}

// A pipeline made the way users make one, with ORT's verbose log on while its sessions are
// created: which provider got each node (`placed`: provider -> nodes, as ort_common reads it).
// With an injected ORT the library lists no device (it fills its list only for the build it
// bundles), so the page asks for device 'auto' and names ORT's execution provider itself.
export async function makePipeline(T, task, opts, sessionOptions = {}) {
  tap.start();
  const t0 = performance.now();
  let pipe, placed;
  // the library passes session options through: a WebGPU run names ORT's buffer cache mode there
  const provider = providerOption(opts);
  const named = opts.ort || (opts.provider === 'webgpu' && opts.buffer_cache);
  const [device, providers] = named ? [opts.ort ? 'auto' : opts.device, {executionProviders: [provider]}] : [opts.device, {}];
  try {
    // a graph with its weights in external data chunks: the library loads as many as the folder holds
    const external = opts.external_data && Object.keys(opts.external_data).length ?
      {use_external_data_format: opts.external_data} : {};
    pipe = await T.pipeline(task, MODEL_ID, {
      device, dtype: opts.dtype, ...external,
      session_options: {logSeverityLevel: 0, logVerbosityLevel: 0, ...providers, ...sessionOptions}});
  } finally {
    placed = parsePlacement(tap.stop());
  }
  return {pipe, loadMs: performance.now() - t0, placed};
}

// The facts every transformers.js reply carries: versions, where the nodes ran.
function libraryFacts(T, opts, placed) {
  const counts = [];
  for (const [ep, nodes] of Object.entries(placed)) {
    const where = EP_PLATFORM[ep] ?? ep;
    for (let i = 0; i < Math.max(1, nodes.length); i++) counts.push(where);
  }
  const allOn = Object.entries(placed).filter(([, nodes]) => nodes.length === 0).map(([ep]) => EP_PLATFORM[ep] ?? ep);
  const executedOn = allOn.length === 1 && Object.keys(placed).length === 1 ? allOn[0] :
    mostCommon(counts, opts.provider);
  const ort = T.env.backends.onnx.versions || {};
  const offProvider = Object.entries(placed).some(([ep]) => (EP_PLATFORM[ep] ?? ep) !== opts.provider);
  return {
    status: 'ok',
    executed_on: Object.keys(placed).length ? executedOn : '?',
    placement: offProvider ? placementSummary(placed, opts.provider) : '',
    fallback: '',
    engine_version: `transformers.js ${T.env.version} ORT ${ort.web || ort.common || '?'}`,
    threads: Number(T.env.backends.onnx.wasm.numThreads),
    shader: `transformers.js ${opts.device} ${opts.dtype}`,
  };
}

// A page that stopped at `stage`, with the library's own error text: ORT's allocator out of memory
// is out-of-memory; else Python says whether a model it would not load is its refusal
// (unsupported: files onnxruntime's CPU runs) or a failure.
function tjsFailure(stage, e) {
  tap.stop();
  const text = errorText(e);
  return {status: outOfMemory(text) ? 'out-of-memory' : 'failed', stage,
          reason: `transformers.js ${stage}: ${text}`};
}

// int32 ids from the job as the int64 tensor the library's models take, [rows, seq].
export function int64Tensor(T, ints, dims) {
  return new T.Tensor('int64', BigInt64Array.from(ints, (v) => BigInt(v)), dims);
}

// A transformers.js page: the library and the task's pipeline loaded (a failure while loading the
// model is the library's refusal), then `body({T, pipe, at, loadMs})` measures and returns
// {timed, note, ...its own reply fields and output}; the facts every reply carries are added here.
export async function tjsPage(spec, client, task, body, sessionOptions = {}) {
  const opts = spec.options;
  const at = {stage: 'load library'};
  try {
    const T = await loadLibrary(opts, client);
    at.stage = 'load model';
    const {pipe, loadMs, placed} = await makePipeline(T, task, opts, sessionOptions);
    at.stage = 'run';
    const {timed, note, ...own} = await body({T, pipe, at, loadMs});
    return {
      ...libraryFacts(T, opts, placed),
      compute_dtype: opts.provider !== 'wasm' && ['fp16', 'q4f16'].includes(opts.dtype) ? 'f16' : 'f32',
      timestamp_query: false,
      gpu_note: note,
      compile_ms: loadMs,
      ...timingReply(timed, null),
      js_heap: await jsHeap(),
      layers: [],
      ...own,
    };
  } catch (e) {
    return tjsFailure(at.stage, e);
  }
}
