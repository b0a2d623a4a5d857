// What the WGSL model pages share. The pieces (limitsFor, compilePipelines, bindStep,
// dispatchSteps, watchErrors) serve the encoder's page (wgsl_model.js) too; the pages that run
// Python's step lists as named passes (wgsl_decoder.js, wgsl_speech.js) use all of them through
// StepRunner:
// `StepRunner.open` picks each linear kernel's variant for the adapter, refuses a job whose
// buffers or dispatches exceed the adapter's limits before any weight is fetched, makes the
// device, compiles every step's pipeline, fetches and uploads the tensors (the load phase),
// makes the activation buffers and binds every step of every pass. Then a page encodes passes,
// submits them, reads new ids back and, at the end, asks `failure()` for any WebGPU error the
// device reported. Steps: {op, program | kernel, bindings, constants, workgroups, prologue?}.
import {jsHeap} from '../memory.js';
import {timingReply} from '../timing.js';
import {chooseVariant, deviceFeatures, needsText} from '../webgpu_variants.js';

const DEFAULT_MAX_STORAGE_BINDING = 134217728;
const DEFAULT_MAX_BUFFER = 268435456;

export function align4(n) { return Math.ceil(Math.max(n, 4) / 4) * 4; }

export class StageError extends Error {
  constructor(stage, message) { super(message); this.stage = stage; }
}

export function unsupported(reason) { return {status: 'unsupported', reason}; }

async function compilationErrors(module) {
  const info = await module.getCompilationInfo();
  return info.messages.filter((m) => m.type === 'error')
      .map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
}

// The limits a job's buffers and steps need ({reply} when the adapter cannot meet them).
export function limitsFor(adapter, sizes, outputBytes, steps) {
  const [largestName, largest] = Object.entries(sizes).concat([['output', outputBytes]])
      .reduce((a, b) => (b[1] > a[1] ? b : a));
  const al = adapter.limits;
  for (const [limit, value] of [['maxStorageBufferBindingSize', al.maxStorageBufferBindingSize],
                                ['maxBufferSize', al.maxBufferSize]]) {
    if (largest > value) {
      return {reply: unsupported(`WebGPU: buffer ${largestName} (${largest} bytes) exceeds the adapter's ${limit} ${value}`)};
    }
  }
  const required = {};
  if (largest > DEFAULT_MAX_STORAGE_BINDING) required.maxStorageBufferBindingSize = al.maxStorageBufferBindingSize;
  if (largest > DEFAULT_MAX_BUFFER) required.maxBufferSize = al.maxBufferSize;
  for (const step of steps) {
    const most = Math.max(...step.workgroups);
    if (most > al.maxComputeWorkgroupsPerDimension) {
      return {reply: unsupported(`WebGPU: a ${step.op} dispatch of ${most} workgroups exceeds ` +
                                 `maxComputeWorkgroupsPerDimension ${al.maxComputeWorkgroupsPerDimension}`)};
    }
    const storage = step.bindings.filter((b) => b !== null).length;
    if (storage > al.maxStorageBuffersPerShaderStage) {
      return {reply: unsupported(`WebGPU: the ${step.op} kernel binds ${storage} storage buffers; ` +
                                 `maxStorageBuffersPerShaderStage is ${al.maxStorageBuffersPerShaderStage}`)};
    }
    if (storage > 8) required.maxStorageBuffersPerShaderStage = al.maxStorageBuffersPerShaderStage;
  }
  return {required};
}

// Compile every step's pipeline: one shader module per source (a linear kernel's per chosen
// variant and kernel key, other steps' per program), one pipeline per (source, constants).
// Throws StageError('compile') with the WGSL errors. Returns {pipelineOf(step), compileMs}.
export async function compilePipelines(device, chosen, programs, steps) {
  const t0 = performance.now();
  const modules = new Map();
  const moduleFor = (key, code) => {
    if (!modules.has(key)) modules.set(key, device.createShaderModule({code, label: key}));
    return modules.get(key);
  };
  const pending = new Map();
  const keyOf = new Map();
  for (const step of steps) {
    // A linear kernel's source depends on its bits (Python unrolls per packed word): one module per kernel.
    const [key, code] = step.op === 'linear' ?
      [`${chosen[step.kernel].shader}@${step.kernel}`, chosen[step.kernel].source] :
      [step.program, programs[step.program]];
    const pkey = `${key}|${JSON.stringify(step.constants)}`;
    if (!pending.has(pkey)) {
      pending.set(pkey, device.createComputePipelineAsync({
        layout: 'auto', label: pkey,
        compute: {module: moduleFor(key, code), entryPoint: 'main', constants: step.constants},
      }));
    }
    keyOf.set(step, pkey);
  }
  for (const [key, module] of modules) {
    const errors = await compilationErrors(module);
    if (errors.length) throw new StageError('compile', `WGSL compile error in ${key}: ${errors.join('; ')}`);
  }
  const built = new Map();
  for (const [pkey, promise] of pending) built.set(pkey, await promise);
  return {pipelineOf: (step) => built.get(keyOf.get(step)), compileMs: performance.now() - t0};
}

// A step ready to dispatch: its pipeline and a bind group of the named buffers (null bindings
// skipped), its prologue likewise. Throws StageError('upload') for a buffer that does not exist.
export function bindStep(device, buffers, pipelineOf, step) {
  const pipeline = pipelineOf(step);
  const entries = [];
  step.bindings.forEach((name, binding) => {
    if (name === null) return;
    if (!buffers[name]) throw new StageError('upload', `step ${step.op} binds unknown buffer ${name}`);
    entries.push({binding, resource: {buffer: buffers[name]}});
  });
  return {...step, pipeline, bindGroup: device.createBindGroup({layout: pipeline.getBindGroupLayout(0), entries}),
          prologue: step.prologue ? bindStep(device, buffers, pipelineOf, step.prologue) : null};
}

// Watch a new device for errors: push its validation and out-of-memory scopes, listen for loss
// and uncaptured errors. Returns `failure(stage)`: the first error as a failed reply, or null
// (call it once, at the end: it pops the scopes).
export function watchErrors(device) {
  let lostInfo = null;
  device.lost.then((info) => { lostInfo = info; });
  const uncaptured = [];
  device.addEventListener('uncapturederror', (e) => uncaptured.push(String(e.error.message)));
  device.pushErrorScope('out-of-memory');
  device.pushErrorScope('validation');
  return async (stage) => {
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    if (validation) return {status: 'failed', stage, reason: `WebGPU validation error: ${validation.message}`};
    if (oom) return {status: 'failed', stage, reason: `WebGPU out of memory: ${oom.message}`};
    if (lostInfo) return {status: 'failed', stage, reason: `WebGPU device lost: ${lostInfo.message}`};
    if (uncaptured.length) return {status: 'failed', stage, reason: `WebGPU error: ${uncaptured[0]}`};
    return null;
  };
}

// Bound steps into an open compute pass, each step's prologue right before it.
export function dispatchSteps(cp, steps) {
  for (const s of steps) {
    if (s.prologue) {
      cp.setPipeline(s.prologue.pipeline);
      cp.setBindGroup(0, s.prologue.bindGroup);
      cp.dispatchWorkgroups(...s.prologue.workgroups);
    }
    cp.setPipeline(s.pipeline);
    cp.setBindGroup(0, s.bindGroup);
    cp.dispatchWorkgroups(...s.workgroups);
  }
}

export class StepRunner {
  // {reply} (the adapter cannot run the job) or {runner}. `passes`: name -> steps (from the job's
  // options); `setStage(name)` follows the stages for the caller's error reports; `timestamps`:
  // ask for 'timestamp-query' where the adapter has it (runner.hasTimestamps). A throw after the
  // device exists destroys it.
  // How a page runs on a StepRunner: opened (or the reply that says why not), then
  // `body(runner, at)`, whose reply it returns; a throw is the failed reply of the stage `at.stage`
  // names; the runner is destroyed at the end.
  static async page(spec, client, passes, body, options = {}) {
    const at = {stage: 'adapter'};
    let runner = null;
    try {
      const opened = await StepRunner.open(spec, client, passes, (s) => { at.stage = s; }, options);
      if (opened.reply) return opened.reply;
      runner = opened.runner;
      return await body(runner, at);
    } catch (e) {
      return failedReply(e, at.stage);
    } finally {
      if (runner) runner.destroy();
    }
  }

  static async open(spec, client, passes, setStage, {timestamps = false} = {}) {
    const opts = spec.options;
    setStage('adapter');
    if (!('gpu' in navigator)) return {reply: unsupported('WebGPU: navigator.gpu is missing')};
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return {reply: unsupported('WebGPU: requestAdapter() returned null')};
    const chosen = {};
    for (const [kernel, variants] of Object.entries(opts.linear_variants)) {
      const v = chooseVariant(adapter, variants);
      if (!v) return {reply: unsupported(`WebGPU adapter lacks the features the ${kernel} kernel needs (${needsText(variants)})`)};
      chosen[kernel] = v;
    }
    const allSteps = Object.values(passes).flat().flatMap((s) => (s.prologue ? [s.prologue, s] : [s]));

    // Every buffer's size is known from the job, so a model too large for the adapter is
    // refused before its weights are fetched.
    setStage('limits');
    const sizes = {};
    for (const name of spec.bindings) sizes[name] = align4(opts.tensor_bytes[name]);
    for (const [name, bytes] of Object.entries(opts.activations)) sizes[name] = align4(bytes);
    const limits = limitsFor(adapter, sizes, spec.output_bytes, allSteps);
    if (limits.reply) return {reply: limits.reply};

    setStage('device');
    const hasTimestamps = timestamps && adapter.features.has('timestamp-query');
    const requiredFeatures = deviceFeatures(Object.values(chosen)).concat(hasTimestamps ? ['timestamp-query'] : []);
    const device = await adapter.requestDevice({requiredFeatures, requiredLimits: limits.required});
    const runner = new StepRunner(device, chosen, sizes);
    runner.hasTimestamps = hasTimestamps;
    try {
      await runner.build(spec, client, passes, allSteps, setStage);
    } catch (e) {
      runner.destroy();
      throw e;
    }
    return {runner};
  }

  constructor(device, chosen, sizes) {
    this.device = device;
    this.chosen = chosen;
    this.sizes = sizes;
    this.buffers = {};
    this.passes = {};
    this.failure = watchErrors(device);  // failure(stage): the device's first error as a reply, or null
    this.idRead = device.createBuffer({size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
  }

  async build(spec, client, passes, allSteps, setStage) {
    const {device, chosen, sizes} = this;
    const opts = spec.options;
    setStage('compile');
    const {pipelineOf, compileMs} = await compilePipelines(device, chosen, opts.programs, allSteps);
    this.compileMs = compileMs;

    setStage('fetch');
    const tensors = {};
    for (const name of spec.bindings) {
      tensors[name] = await client.tensor(name);
      if (align4(tensors[name].byteLength) !== sizes[name]) {
        throw new StageError('fetch', `tensor ${name} has ${tensors[name].byteLength} bytes, the job said ${opts.tensor_bytes[name]}`);
      }
    }

    // Load phase: the weights (and the job's other tensors) to the device.
    setStage('upload');
    const tUpload = performance.now();
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    for (const name of spec.bindings) {
      this.buffers[name] = device.createBuffer({label: name, size: sizes[name], usage});
      device.queue.writeBuffer(this.buffers[name], 0, tensors[name]);
      delete tensors[name];
    }
    await device.queue.onSubmittedWorkDone();
    this.uploadMs = performance.now() - tUpload;
    for (const name of Object.keys(opts.activations)) {
      this.buffers[name] = device.createBuffer({label: name, size: sizes[name], usage});
    }
    for (const [name, steps] of Object.entries(passes)) {
      this.passes[name] = steps.map((step) => bindStep(device, this.buffers, pipelineOf, step));
    }
  }

  // Bytes of the weight buffer each linear step binds (its prologue's first binding when it
  // dequantizes first), checked against the step's own `weights`.
  weightBytes(steps) {
    return steps.map((s) => {
      const bound = s.prologue ? s.prologue.bindings[0] : s.bindings[2];
      if (bound !== s.weights) throw new StageError('upload', `layer ${s.name} binds ${bound} as its weights, not ${s.weights}`);
      return this.sizes[bound];
    });
  }

  encode(encoder, name) {
    const cp = encoder.beginComputePass();
    dispatchSteps(cp, this.passes[name]);
    cp.end();
  }

  // One pass in one submission, then `copies` ([src, dst, dstOffset, bytes]); with `readId`, the
  // id the pass wrote to buffer `ids` is read back (and returned).
  async submit(name, {copies = [], readId = false} = {}) {
    const {device} = this;
    const encoder = device.createCommandEncoder();
    this.encode(encoder, name);
    for (const [src, dst, offset, bytes] of copies) encoder.copyBufferToBuffer(src, 0, dst, offset, bytes);
    if (!readId) {
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
      return null;
    }
    encoder.copyBufferToBuffer(this.buffers.ids, 0, this.idRead, 0, 4);
    device.queue.submit([encoder.finish()]);
    await this.idRead.mapAsync(GPUMapMode.READ);
    const id = new Int32Array(this.idRead.getMappedRange().slice(0))[0];
    this.idRead.unmap();
    return id;
  }

  // A device buffer's first `bytes` bytes, read back (an ArrayBuffer of exactly `bytes`).
  async read(src, bytes) {
    const readback = this.device.createBuffer({size: align4(bytes), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    const encoder = this.device.createCommandEncoder();
    encoder.copyBufferToBuffer(src, 0, readback, 0, align4(bytes));
    this.device.queue.submit([encoder.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const out = readback.getMappedRange().slice(0, bytes);
    readback.unmap();
    readback.destroy();
    return out;
  }

  // The reply's facts every step-list page gives: the kernels `kernelSteps` used, each linear
  // layer's bound weight bytes (and GPU ms where measured), the compile time, every buffer's
  // bytes (the runner's and `extra`) and the weights' and caches' share of them (`memory`).
  // The reply of a loop's page (generate, transcribe; per-step wall clock): {failure} when the
  // device reported one at `stage`, else {reply} (status, the facts, the timing, the heap) and the
  // memory for the loop's own field.
  async loopReply(stage, opts, linearSteps, {kernelSteps, extra, timed, gpuNote}) {
    const heap = await jsHeap();
    const failure = await this.failure(stage);
    if (failure) return {failure};
    const {memory, ...facts} = this.facts(opts, linearSteps, {kernelSteps, extra});
    return {memory, reply: {status: 'ok', ...facts, timestamp_query: false, gpu_note: gpuNote, ...timingReply(timed),
                            js_heap: heap}};
  }

  facts(opts, linearSteps, {kernelSteps = linearSteps, extra = [], gpuMs = []} = {}) {
    const weightBytes = this.weightBytes(linearSteps);
    const sum = (names) => names.reduce((a, n) => a + this.buffers[n].size, 0);
    const all = Object.values(this.buffers).reduce((a, b) => a + b.size, 0) + extra.reduce((a, b) => a + b.size, 0);
    const weights = sum(opts.weight_tensors || []);
    const kv = sum(opts.kv_cache || []);
    return {
      ...this.kernelFacts(kernelSteps),
      weight_buffer_bytes: weightBytes.reduce((a, b) => a + b, 0),
      compile_ms: this.compileMs,
      layers: linearSteps.map((s, l) => ({name: s.name, weight_dtype: this.chosen[s.kernel].weight_dtype,
                                          weight_bytes: weightBytes[l], ...(gpuMs.length ? {gpu_ms: gpuMs[l]} : {})})),
      memory: {weights, kv_cache: kv, scratch: all - weights - kv},
    };
  }

  // The kernels the linear steps used, 'kernel=shader' joined by '+', and the compute dtype.
  kernelFacts(steps) {
    const used = [...new Set(steps.filter((s) => s.op === 'linear').map((s) => `${s.kernel}=${this.chosen[s.kernel].shader}`))];
    const f16 = Object.values(this.chosen).some((v) => v.compute_dtype === 'f16');
    return {shader: used.join('+'), compute_dtype: f16 ? 'f16' : 'f32'};
  }

  destroy() { this.device.destroy(); }
}

// A failed reply from an exception (its own stage when it carries one).
export function failedReply(e, stage) {
  const reason = `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`;
  return {status: 'failed', stage: (e && e.stage) || stage, reason};
}
