// Harness WGSL kernels on WebGPU: builds the pipeline from the kernel source the job carries
// (composed in Python), runs one cold iteration, warm-ups, then timed iterations, and reads the
// output back once. Returns raw samples; decides nothing about them. Binding order, constants and
// the dispatch size come from the job, so nothing about the kernels is repeated here. A variant
// may carry a prologue (the GEMM path's dequantize step): it is dispatched first in the same
// compute pass, so the timestamps cover both, and writes the variant's scratch buffers.
import {jsHeap} from '../memory.js';
import {timeIterations, timingReply} from '../timing.js';
import {chooseVariant, deviceFeatures, needsText} from '../webgpu_variants.js';

function unsupported(reason) { return {status: 'unsupported', reason}; }

function align4(n) { return Math.ceil(n / 4) * 4; }

async function compilationErrors(module) {
  const info = await module.getCompilationInfo();
  return info.messages.filter((m) => m.type === 'error')
      .map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
}

export async function run(spec, client) {
  const opts = spec.options;
  if (!('gpu' in navigator)) return unsupported('WebGPU: navigator.gpu is missing');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return unsupported('WebGPU: requestAdapter() returned null');

  const variant = chooseVariant(adapter, opts.variants);
  if (!variant) {
    return unsupported(`WebGPU adapter lacks the features this kernel needs (${needsText(opts.variants)})`);
  }
  const hasTimestamps = adapter.features.has('timestamp-query');
  const requiredFeatures = deviceFeatures([variant]);
  if (hasTimestamps) requiredFeatures.push('timestamp-query');

  const tensors = {};
  for (const name of spec.bindings) tensors[name] = await client.tensor(name);
  if (!tensors.w) return {status: 'failed', reason: 'job has no weight tensor "w"'};
  const beyond = beyondLimits(adapter.limits, spec, opts, variant, tensors);
  if (beyond) return unsupported(beyond);
  const pro = variant.prologue || null;

  const device = await adapter.requestDevice({
    requiredFeatures,
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    },
  });
  let lostInfo = null;
  device.lost.then((info) => { lostInfo = info; });
  const uncaptured = [];
  device.addEventListener('uncapturederror', (e) => uncaptured.push(String(e.error.message)));

  try {
    device.pushErrorScope('validation');
    const tSetup = performance.now();
    const main = await pipelineOf(device, variant.source, variant.shader, variant.constants || opts.constants);
    if (main.reply) return main.reply;
    const prologue = pro ? await pipelineOf(device, pro.source, pro.shader, pro.constants) : null;
    if (prologue && prologue.reply) return prologue.reply;
    const compileMs = performance.now() - tSetup;

    const {byName, all} = jobBuffers(device, spec, tensors, variant);
    const bindGroup = bindGroupFor(device, main.pipeline, variant.layout || opts.layout, byName);
    const proBindGroup = pro ? bindGroupFor(device, prologue.pipeline, pro.layout, byName) : null;
    await device.queue.onSubmittedWorkDone();

    const querySet = hasTimestamps ?
      device.createQuerySet({type: 'timestamp', count: 2 * spec.max_iterations}) : null;

    const dispatchOnce = dispatcher(device, querySet, [
      prologue && {...prologue, bindGroup: proBindGroup, workgroups: pro.workgroups},
      {...main, bindGroup, workgroups: opts.workgroups}]);
    const timed = await timeIterations(spec, dispatchOnce);
    const {outBytes, gpuMs} = await readBack(device, byName.out, spec.output_bytes, querySet, timed, spec.max_iterations);

    const heap = await jsHeap();
    const validation = await device.popErrorScope();
    if (validation) return {status: 'failed', reason: `WebGPU validation error: ${validation.message}`};
    if (lostInfo) return {status: 'failed', reason: `WebGPU device lost: ${lostInfo.message}`};
    if (uncaptured.length) return {status: 'failed', reason: `WebGPU error: ${uncaptured[0]}`};

    return {
      status: 'ok',
      shader: variant.shader,
      compute_dtype: variant.compute_dtype,
      weight_buffer_bytes: tensors.w.byteLength,
      timestamp_query: hasTimestamps,
      compile_ms: compileMs,
      ...timingReply(timed, gpuMs),
      js_heap: heap,
      output: outBytes,
    };
  } finally {
    device.destroy();
  }
}

// Why the adapter cannot run the job (a buffer or a dispatch beyond its limits), or ''.
function beyondLimits(limits, spec, opts, variant, tensors) {
  const largest = Math.max(spec.output_bytes, ...Object.values(tensors).map((t) => t.byteLength));
  if (largest > limits.maxStorageBufferBindingSize) {
    return `WebGPU: a ${largest}-byte buffer exceeds maxStorageBufferBindingSize ${limits.maxStorageBufferBindingSize}`;
  }
  const scratchBytes = Object.values(variant.scratch || {});
  if (Math.max(0, ...scratchBytes) > limits.maxStorageBufferBindingSize) {
    return `WebGPU: a ${Math.max(...scratchBytes)}-byte scratch buffer exceeds ` +
      `maxStorageBufferBindingSize ${limits.maxStorageBufferBindingSize}`;
  }
  const pro = variant.prologue;
  if (Math.max(...opts.workgroups, ...(pro ? pro.workgroups : [])) > limits.maxComputeWorkgroupsPerDimension) {
    return 'WebGPU: dispatch exceeds maxComputeWorkgroupsPerDimension';
  }
  return '';
}

// A compute pipeline from WGSL source: {pipeline}, or {reply} with the compile errors.
async function pipelineOf(device, code, label, constants) {
  const module = device.createShaderModule({code, label});
  const errors = await compilationErrors(module);
  if (errors.length) return {reply: {status: 'failed', reason: `WGSL compile error: ${errors.join('; ')}`}};
  return {pipeline: await device.createComputePipelineAsync({layout: 'auto', compute: {module, entryPoint: 'main', constants}})};
}

// A layout names the buffer of each binding index; null: the kernel has no such binding (the DP4A
// kernel's x scale and zero point sit past the model prelude's bias binding).
function bindGroupFor(device, pipeline, layout, byName) {
  return device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: layout.flatMap((name, binding) => (name === null ? [] : [{binding, resource: {buffer: byName[name]}}])),
  });
}

// The job's tensors as storage buffers (written), the output and the variant's scratch buffers:
// {byName, all}.
function jobBuffers(device, spec, tensors, variant) {
  const byName = {};
  const all = spec.bindings.map((name) => {
    const data = tensors[name];
    const buffer = device.createBuffer({
      label: name, size: align4(data.byteLength),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    device.queue.writeBuffer(buffer, 0, data);
    byName[name] = buffer;
    return buffer;
  });
  for (const [name, bytes] of Object.entries(variant.scratch || {})) {
    byName[name] = device.createBuffer({label: name, size: align4(bytes), usage: GPUBufferUsage.STORAGE});
    all.push(byName[name]);
  }
  byName.out = device.createBuffer({
    label: 'out', size: spec.output_bytes,
    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC,
  });
  all.push(byName.out);
  return {byName, all};
}

// The output read back, and the timed iterations' GPU ms from the timestamp ring (null without
// timestamps, or when a pair does not increase: wall clock leads then).
async function readBack(device, output, outputBytes, querySet, timed, maxIterations) {
  const slots = timed.gpuOrder;  // the ring's slots, oldest iteration first
  const iterations = Math.min(timed.wallMs.length, maxIterations);
  const encoder = device.createCommandEncoder();
  const readback = device.createBuffer({size: outputBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
  encoder.copyBufferToBuffer(output, 0, readback, 0, outputBytes);
  let tsRead = null;
  if (querySet && iterations > 0) {
    const resolve = device.createBuffer({
      size: 16 * iterations, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
    tsRead = device.createBuffer({
      size: 16 * iterations, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    encoder.resolveQuerySet(querySet, 0, 2 * iterations, resolve, 0);
    encoder.copyBufferToBuffer(resolve, 0, tsRead, 0, 16 * iterations);
  }
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const outBytes = readback.getMappedRange().slice(0);
  readback.unmap();
  let gpuMs = null;
  if (tsRead) {
    await tsRead.mapAsync(GPUMapMode.READ);
    const ts = new BigUint64Array(tsRead.getMappedRange().slice(0));
    tsRead.unmap();
    gpuMs = slots.map((s) => Number(ts[2 * s + 1] - ts[2 * s]) / 1e6);
    if (gpuMs.some((ms) => !(ms > 0))) gpuMs = null;
  }
  return {outBytes, gpuMs};
}

// One timed iteration (timeIterations' callback): the passes' pipelines ({pipeline, bindGroup,
// workgroups}; a null one is skipped) dispatched in one compute pass, its timestamps written into
// the ring's `slot`; the wall time of submit to done.
function dispatcher(device, querySet, steps) {
  return async (index, slot) => {
    const encoder = device.createCommandEncoder();
    const passDesc = {};
    if (querySet && slot !== null) {
      passDesc.timestampWrites = {querySet, beginningOfPassWriteIndex: 2 * slot, endOfPassWriteIndex: 2 * slot + 1};
    }
    const pass = encoder.beginComputePass(passDesc);
    for (const step of steps) {
      if (!step) continue;
      pass.setPipeline(step.pipeline);
      pass.setBindGroup(0, step.bindGroup);
      pass.dispatchWorkgroups(...step.workgroups);
    }
    pass.end();
    const t0 = performance.now();
    device.queue.submit([encoder.finish()]);
    await device.queue.onSubmittedWorkDone();
    return performance.now() - t0;
  };
}
