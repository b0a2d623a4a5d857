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
  const largest = Math.max(spec.output_bytes, ...Object.values(tensors).map((t) => t.byteLength));
  if (largest > adapter.limits.maxStorageBufferBindingSize) {
    return unsupported(`WebGPU: a ${largest}-byte buffer exceeds maxStorageBufferBindingSize ` +
                       `${adapter.limits.maxStorageBufferBindingSize}`);
  }
  const [groupsX, groupsY] = opts.workgroups;
  const pro = variant.prologue || null;
  const scratchBytes = Object.values(variant.scratch || {});
  if (Math.max(0, ...scratchBytes) > adapter.limits.maxStorageBufferBindingSize) {
    return unsupported(`WebGPU: a ${Math.max(...scratchBytes)}-byte scratch buffer exceeds ` +
                       `maxStorageBufferBindingSize ${adapter.limits.maxStorageBufferBindingSize}`);
  }
  if (Math.max(groupsX, groupsY, ...(pro ? pro.workgroups : [])) > adapter.limits.maxComputeWorkgroupsPerDimension) {
    return unsupported('WebGPU: dispatch exceeds maxComputeWorkgroupsPerDimension');
  }

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
    const module = device.createShaderModule({code: variant.source, label: variant.shader});
    const errors = await compilationErrors(module);
    if (errors.length) return {status: 'failed', reason: `WGSL compile error: ${errors.join('; ')}`};
    const pipeline = await device.createComputePipelineAsync({
      layout: 'auto', compute: {module, entryPoint: 'main', constants: variant.constants || opts.constants},
    });
    let proPipeline = null;
    if (pro) {
      const proModule = device.createShaderModule({code: pro.source, label: pro.shader});
      const proErrors = await compilationErrors(proModule);
      if (proErrors.length) return {status: 'failed', reason: `WGSL compile error: ${proErrors.join('; ')}`};
      proPipeline = await device.createComputePipelineAsync({
        layout: 'auto', compute: {module: proModule, entryPoint: 'main', constants: pro.constants},
      });
    }
    const compileMs = performance.now() - tSetup;

    const buffers = spec.bindings.map((name) => {
      const data = tensors[name];
      const buffer = device.createBuffer({
        label: name, size: align4(data.byteLength),
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
      });
      device.queue.writeBuffer(buffer, 0, data);
      return buffer;
    });
    const output = device.createBuffer({
      label: 'out', size: spec.output_bytes,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC,
    });
    const byName = {out: output};
    spec.bindings.forEach((name, i) => { byName[name] = buffers[i]; });
    const scratch = Object.entries(variant.scratch || {}).map(([name, bytes]) => {
      byName[name] = device.createBuffer({label: name, size: align4(bytes), usage: GPUBufferUsage.STORAGE});
      return byName[name];
    });
    // A layout names the buffer of each binding index; null: the kernel has no such binding
    // (the DP4A kernel's x scale and zero point sit past the model prelude's bias binding).
    const bindGroupFor = (p, layout) => device.createBindGroup({
      layout: p.getBindGroupLayout(0),
      entries: layout.flatMap((name, binding) => (name === null ? [] :
        [{binding, resource: {buffer: byName[name]}}])),
    });
    const bindGroup = bindGroupFor(pipeline, variant.layout || opts.layout);
    const proBindGroup = pro ? bindGroupFor(proPipeline, pro.layout) : null;
    await device.queue.onSubmittedWorkDone();

    const querySet = hasTimestamps ?
      device.createQuerySet({type: 'timestamp', count: 2 * spec.max_iterations}) : null;

    const dispatchOnce = async (index, slot) => {
      const encoder = device.createCommandEncoder();
      const passDesc = {};
      if (querySet && slot !== null) {
        passDesc.timestampWrites = {
          querySet, beginningOfPassWriteIndex: 2 * slot,
          endOfPassWriteIndex: 2 * slot + 1,
        };
      }
      const pass = encoder.beginComputePass(passDesc);
      if (pro) {
        pass.setPipeline(proPipeline);
        pass.setBindGroup(0, proBindGroup);
        pass.dispatchWorkgroups(...pro.workgroups);
      }
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groupsX, groupsY);
      pass.end();
      const t0 = performance.now();
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
      return performance.now() - t0;
    };

    const timed = await timeIterations(spec, dispatchOnce);
    const slots = timed.gpuOrder;  // the ring's slots, oldest iteration first
    const iterations = Math.min(timed.wallMs.length, spec.max_iterations);

    let gpuMs = null;
    const encoder = device.createCommandEncoder();
    const readback = device.createBuffer({
      size: spec.output_bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    encoder.copyBufferToBuffer(output, 0, readback, 0, spec.output_bytes);
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
    if (tsRead) {
      await tsRead.mapAsync(GPUMapMode.READ);
      const ts = new BigUint64Array(tsRead.getMappedRange().slice(0));
      tsRead.unmap();
      gpuMs = slots.map((s) => Number(ts[2 * s + 1] - ts[2 * s]) / 1e6);
      // A pair that does not increase is a broken timestamp: wall clock leads then.
      if (gpuMs.some((ms) => !(ms > 0))) gpuMs = null;
    }

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
      gpu_buffer_bytes: [...buffers, ...scratch, output].reduce((sum, b) => sum + b.size, 0),
      js_heap: heap,
      output: outBytes,
    };
  } finally {
    device.destroy();
  }
}
