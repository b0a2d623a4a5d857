// A decoder LLM on the harness's own WGSL kernels (WebGPU). Python writes three forward passes
// as step lists (engines/wgsl/decoder.py): `prefill` (the prompt, its keys and values into the
// KV cache, the greedy argmax of its last row), `decode` (one row at the position the cache has
// reached) and `score` (an evaluation row, every position's logits). This page compiles the
// kernels, uploads the weights, then times generations: per generation one submission for the
// prefill and one per decode step, the new id read back after each (the per-token timestamps).
// The KV cache, position and generated ids stay on the device. Then it scores the evaluation rows
// and posts their logits and the last generation's ids. Returns raw samples and facts; decides
// nothing about them.
import {jsHeap} from '../memory.js';
import {timeGenerations} from '../generation.js';
import {chooseVariant, deviceFeatures, needsText} from '../webgpu_variants.js';

const DEFAULT_MAX_STORAGE_BINDING = 134217728;
const DEFAULT_MAX_BUFFER = 268435456;

function unsupported(reason) { return {status: 'unsupported', reason}; }

function align4(n) { return Math.ceil(Math.max(n, 4) / 4) * 4; }

class StageError extends Error {
  constructor(stage, message) { super(message); this.stage = stage; }
}

async function compilationErrors(module) {
  const info = await module.getCompilationInfo();
  return info.messages.filter((m) => m.type === 'error')
      .map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
}

export async function run(spec, client) {
  const opts = spec.options;
  let stage = 'adapter';
  if (!('gpu' in navigator)) return unsupported('WebGPU: navigator.gpu is missing');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return unsupported('WebGPU: requestAdapter() returned null');

  const chosen = {};
  for (const [kernel, variants] of Object.entries(opts.linear_variants)) {
    const v = chooseVariant(adapter, variants);
    if (!v) return unsupported(`WebGPU adapter lacks the features the ${kernel} kernel needs (${needsText(variants)})`);
    chosen[kernel] = v;
  }
  const requiredFeatures = deviceFeatures(Object.values(chosen));
  const allSteps = Object.values(opts.forwards).flat().flatMap((s) => (s.prologue ? [s.prologue, s] : [s]));

  let device = null;
  try {
    // Every buffer's size is known from the job, so a model too large for the adapter is
    // refused before its weights are fetched.
    stage = 'limits';
    const sizes = {};
    for (const name of spec.bindings) sizes[name] = align4(opts.tensor_bytes[name]);
    for (const [name, bytes] of Object.entries(opts.activations)) sizes[name] = align4(bytes);
    const [largestName, largest] = Object.entries(sizes).concat([['output', spec.output_bytes]])
        .reduce((a, b) => (b[1] > a[1] ? b : a));
    const al = adapter.limits;
    for (const [limit, value] of [['maxStorageBufferBindingSize', al.maxStorageBufferBindingSize],
                                  ['maxBufferSize', al.maxBufferSize]]) {
      if (largest > value) {
        return unsupported(`WebGPU: buffer ${largestName} (${largest} bytes) exceeds the adapter's ${limit} ${value}`);
      }
    }
    const requiredLimits = {};
    if (largest > DEFAULT_MAX_STORAGE_BINDING) requiredLimits.maxStorageBufferBindingSize = al.maxStorageBufferBindingSize;
    if (largest > DEFAULT_MAX_BUFFER) requiredLimits.maxBufferSize = al.maxBufferSize;
    for (const step of allSteps) {
      const most = Math.max(...step.workgroups);
      if (most > al.maxComputeWorkgroupsPerDimension) {
        return unsupported(`WebGPU: a ${step.op} dispatch of ${most} workgroups exceeds ` +
                           `maxComputeWorkgroupsPerDimension ${al.maxComputeWorkgroupsPerDimension}`);
      }
      const storage = step.bindings.filter((b) => b !== null).length;
      if (storage > al.maxStorageBuffersPerShaderStage) {
        return unsupported(`WebGPU: the ${step.op} kernel binds ${storage} storage buffers; ` +
                           `maxStorageBuffersPerShaderStage is ${al.maxStorageBuffersPerShaderStage}`);
      }
      if (storage > 8) requiredLimits.maxStorageBuffersPerShaderStage = al.maxStorageBuffersPerShaderStage;
    }

    stage = 'device';
    device = await adapter.requestDevice({requiredFeatures, requiredLimits});
    let lostInfo = null;
    device.lost.then((info) => { lostInfo = info; });
    const uncaptured = [];
    device.addEventListener('uncapturederror', (e) => uncaptured.push(String(e.error.message)));
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');

    stage = 'compile';
    const tCompile = performance.now();
    const modules = new Map();
    const moduleFor = (key, code) => {
      if (!modules.has(key)) modules.set(key, device.createShaderModule({code, label: key}));
      return modules.get(key);
    };
    const pipelines = new Map();
    const pipelineKey = (step) => {
      const [key, code] = step.op === 'linear' ?
        [`${chosen[step.kernel].shader}@${step.kernel}`, chosen[step.kernel].source] :
        [step.program, opts.programs[step.program]];
      const pkey = `${key}|${JSON.stringify(step.constants)}`;
      if (!pipelines.has(pkey)) {
        pipelines.set(pkey, device.createComputePipelineAsync({
          layout: 'auto', label: pkey,
          compute: {module: moduleFor(key, code), entryPoint: 'main', constants: step.constants},
        }));
      }
      return pkey;
    };
    for (const step of allSteps) step.pkey = pipelineKey(step);
    for (const [key, module] of modules) {
      const errors = await compilationErrors(module);
      if (errors.length) throw new StageError('compile', `WGSL compile error in ${key}: ${errors.join('; ')}`);
    }
    const built = new Map();
    for (const [pkey, promise] of pipelines) built.set(pkey, await promise);
    const compileMs = performance.now() - tCompile;

    stage = 'fetch';
    const tensors = {};
    for (const name of spec.bindings) {
      tensors[name] = await client.tensor(name);
      if (align4(tensors[name].byteLength) !== sizes[name]) {
        throw new StageError('fetch', `tensor ${name} has ${tensors[name].byteLength} bytes, the job said ${opts.tensor_bytes[name]}`);
      }
    }

    // Load phase: the weights to the device (and the inputs, a few bytes).
    stage = 'upload';
    const tUpload = performance.now();
    const buffers = {};
    for (const name of spec.bindings) {
      buffers[name] = device.createBuffer({
        label: name, size: sizes[name], usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
      });
      device.queue.writeBuffer(buffers[name], 0, tensors[name]);
    }
    await device.queue.onSubmittedWorkDone();
    const uploadMs = performance.now() - tUpload;
    for (const name of Object.keys(opts.activations)) {
      buffers[name] = device.createBuffer({
        label: name, size: sizes[name], usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
    }
    const logitsBytes = opts.score.texts * opts.score.row_bytes;
    const outputAll = device.createBuffer({label: 'output', size: align4(spec.output_bytes),
                                           usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC});
    const idRead = device.createBuffer({size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    for (const name of Object.keys(tensors)) delete tensors[name];

    const bind = (step) => {
      const pipeline = built.get(step.pkey);
      const entries = [];
      step.bindings.forEach((name, binding) => {
        if (name === null) return;
        if (!buffers[name]) throw new StageError('upload', `step ${step.op} binds unknown buffer ${name}`);
        entries.push({binding, resource: {buffer: buffers[name]}});
      });
      return {...step, pipeline, bindGroup: device.createBindGroup({layout: pipeline.getBindGroupLayout(0), entries}),
              prologue: step.prologue ? bind(step.prologue) : null};
    };
    const forwards = {};
    for (const [name, steps] of Object.entries(opts.forwards)) forwards[name] = steps.map(bind);
    const linearSteps = forwards.score.filter((s) => s.op === 'linear');
    const layerWeightBytes = linearSteps.map((s) => {
      const bound = s.prologue ? s.prologue.bindings[0] : s.bindings[2];
      if (bound !== s.weights) throw new StageError('upload', `layer ${s.name} binds ${bound} as its weights, not ${s.weights}`);
      return sizes[bound];
    });

    const encodeForward = (encoder, name) => {
      const cp = encoder.beginComputePass();
      for (const s of forwards[name]) {
        if (s.prologue) {
          cp.setPipeline(s.prologue.pipeline);
          cp.setBindGroup(0, s.prologue.bindGroup);
          cp.dispatchWorkgroups(...s.prologue.workgroups);
        }
        cp.setPipeline(s.pipeline);
        cp.setBindGroup(0, s.bindGroup);
        cp.dispatchWorkgroups(...s.workgroups);
      }
      cp.end();
    };
    const zero = new Uint32Array([0]);
    // One step: its forward, the new id copied out and read back (when the token is the user's).
    const step = async (name) => {
      const encoder = device.createCommandEncoder();
      encodeForward(encoder, name);
      encoder.copyBufferToBuffer(buffers.ids, 0, idRead, 0, 4);
      device.queue.submit([encoder.finish()]);
      await idRead.mapAsync(GPUMapMode.READ);
      const id = new Int32Array(idRead.getMappedRange().slice(0))[0];
      idRead.unmap();
      return id;
    };
    stage = 'dispatch';
    const {coldMs, wallMs, generations, firstForwardMs} = await timeGenerations(spec, opts.new_tokens, {
      before: async () => {
        device.queue.writeBuffer(buffers.pos, 0, zero);
        device.queue.writeBuffer(buffers.count, 0, zero);
        const encoder = device.createCommandEncoder();
        encoder.copyBufferToBuffer(buffers[opts.prompt.tensor], 0, buffers.ids, 0, opts.prompt.rows * 4);
        device.queue.submit([encoder.finish()]);
        await device.queue.onSubmittedWorkDone();
      },
      prefill: () => step('prefill'),
      decode: () => step('decode'),
    });

    // Teacher-forced scoring: each evaluation row from position 0, every position's logits.
    stage = 'score';
    for (let t = 0; t < opts.score.texts; t++) {
      device.queue.writeBuffer(buffers.pos, 0, zero);
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(buffers[opts.score.tensor], t * opts.score.rows * 4, buffers.ids, 0, opts.score.rows * 4);
      encodeForward(encoder, 'score');
      encoder.copyBufferToBuffer(buffers.logits, 0, outputAll, t * opts.score.row_bytes, opts.score.row_bytes);
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
    }

    stage = 'readback';
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffers.generated, 0, outputAll, logitsBytes, opts.new_tokens * 4);
    const readback = device.createBuffer({size: align4(spec.output_bytes), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    encoder.copyBufferToBuffer(outputAll, 0, readback, 0, align4(spec.output_bytes));
    device.queue.submit([encoder.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const outBytes = readback.getMappedRange().slice(0, spec.output_bytes);
    readback.unmap();

    const heap = await jsHeap();
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    if (validation) return {status: 'failed', stage, reason: `WebGPU validation error: ${validation.message}`};
    if (oom) return {status: 'failed', stage, reason: `WebGPU out of memory: ${oom.message}`};
    if (lostInfo) return {status: 'failed', stage, reason: `WebGPU device lost: ${lostInfo.message}`};
    if (uncaptured.length) return {status: 'failed', stage, reason: `WebGPU error: ${uncaptured[0]}`};

    const sum = (names) => names.reduce((a, n) => a + buffers[n].size, 0);
    const weights = sum(opts.weight_tensors);
    const kv = sum(opts.kv_cache);
    const all = Object.values(buffers).reduce((a, b) => a + b.size, 0) + outputAll.size;
    const kernelsUsed = [...new Set(linearSteps.concat(forwards.decode.filter((s) => s.op === 'linear'))
        .map((s) => `${s.kernel}=${chosen[s.kernel].shader}`))];
    return {
      status: 'ok',
      shader: kernelsUsed.join('+'),
      compute_dtype: Object.values(chosen).some((v) => v.compute_dtype === 'f16') ? 'f16' : 'f32',
      weight_buffer_bytes: layerWeightBytes.reduce((a, b) => a + b, 0),
      timestamp_query: false,
      gpu_note: 'per-token wall clock (each new id read back)',
      compile_ms: compileMs,
      cold_ms: coldMs,
      wall_ms: wallMs,
      gpu_ms: null,
      gpu_buffer_bytes: all,
      js_heap: heap,
      layers: linearSteps.map((s, l) => ({name: s.name, weight_dtype: chosen[s.kernel].weight_dtype,
                                          weight_bytes: layerWeightBytes[l]})),
      decoder: {upload_ms: uploadMs, first_forward_ms: firstForwardMs, kv_cache_on_device: true,
                memory: {weights, kv_cache: kv, scratch: all - weights - kv}, generations},
      output: outBytes,
    };
  } catch (e) {
    const reason = `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`;
    return {status: 'failed', stage: (e && e.stage) || stage, reason};
  } finally {
    if (device) device.destroy();
  }
}
