// A whole encoder on the harness's own WGSL kernels (WebGPU). Python writes the forward pass as
// a list of steps (kernel, buffers by binding, override constants, dispatch size) and sends the
// kernel sources; this page compiles them, uploads the tensors, and runs the steps as told: ONE
// command submission per forward pass (the pass's token ids copied in, every dispatch, the
// sentence embeddings copied out), all passes' outputs read back once at the end. Linear layers
// pick, per bits, the first kernel variant whose features the adapter has; a linear step may carry
// a prologue (the dequantize step), dispatched in the layer's own pass right before its kernel.
// Returns raw samples and facts (bound weight buffer sizes, shaders used); decides nothing about them.
import {jsHeap} from '../memory.js';
import {timeIterations, timingReply} from '../timing.js';
import {chooseVariant, deviceFeatures, needsText} from '../webgpu_variants.js';
import {StageError, bindStep, compilePipelines, dispatchSteps, limitsFor, unsupported, watchErrors} from './wgsl_steps.js';

const QUERY_RESOLVE_ALIGN = 256;

function align4(n) { return Math.ceil(n / 4) * 4; }

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

export async function run(spec, client) {
  const opts = spec.options;
  let stage = 'adapter';
  if (!('gpu' in navigator)) return unsupported('WebGPU: navigator.gpu is missing');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return unsupported('WebGPU: requestAdapter() returned null');

  // One variant per linear kernel ('8', '4', '8a8': bits, and int8 inputs): the first whose
  // features the adapter (or its WGSL) has.
  const chosen = {};
  for (const [kernel, variants] of Object.entries(opts.linear_variants)) {
    const v = chooseVariant(adapter, variants);
    if (!v) {
      return unsupported(`WebGPU adapter lacks the features the ${kernel} kernel needs (${needsText(variants)})`);
    }
    chosen[kernel] = v;
  }
  const hasTimestamps = adapter.features.has('timestamp-query');
  const requiredFeatures = deviceFeatures(Object.values(chosen));
  if (hasTimestamps) requiredFeatures.push('timestamp-query');

  let device = null;
  try {
    stage = 'fetch';
    const tensors = {};
    for (const name of spec.bindings) tensors[name] = await client.tensor(name);

    // Every buffer this run creates, by name and size: tensors, activations, the outputs.
    stage = 'limits';
    const passes = opts.model.passes;
    const sizes = {};
    for (const name of spec.bindings) sizes[name] = align4(tensors[name].byteLength);
    for (const [name, bytes] of Object.entries(opts.activations)) sizes[name] = align4(bytes);
    const allSteps = opts.steps.flatMap((s) => (s.prologue ? [s.prologue, s] : [s]));
    const limits = limitsFor(adapter, sizes, spec.output_bytes, allSteps);
    if (limits.reply) return limits.reply;
    const requiredLimits = limits.required;
    const [largestName, largest] = Object.entries(sizes).concat([['output', spec.output_bytes]])
        .reduce((a, b) => (b[1] > a[1] ? b : a));

    stage = 'device';
    device = await adapter.requestDevice({requiredFeatures, requiredLimits});
    if (largest > device.limits.maxStorageBufferBindingSize || largest > device.limits.maxBufferSize) {
      return unsupported(`WebGPU: buffer ${largestName} (${largest} bytes) exceeds the device's ` +
                         `maxStorageBufferBindingSize ${device.limits.maxStorageBufferBindingSize} / ` +
                         `maxBufferSize ${device.limits.maxBufferSize}`);
    }
    const failure = watchErrors(device);

    stage = 'compile';
    const {pipelineOf, compileMs} = await compilePipelines(device, chosen, opts.programs, allSteps);

    // Buffers: every tensor, every activation; per-pass inputs are copied from the full ones.
    stage = 'upload';
    const buffers = {};
    const inputs = new Set(opts.pass_inputs.map((p) => p.from));
    for (const name of spec.bindings) {
      const data = tensors[name];
      const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | (inputs.has(name) ? GPUBufferUsage.COPY_SRC : 0);
      buffers[name] = device.createBuffer({label: name, size: sizes[name], usage});
      device.queue.writeBuffer(buffers[name], 0, data);
    }
    for (const name of Object.keys(opts.activations)) {
      buffers[name] = device.createBuffer({
        label: name, size: sizes[name],
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
    }
    const outputAll = device.createBuffer({
      label: 'output', size: spec.output_bytes,
      usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
    });
    for (const name of Object.keys(tensors)) delete tensors[name];  // the GPU holds them now

    const steps = opts.steps.map((step) => bindStep(device, buffers, pipelineOf, step));
    const linearSteps = steps.filter((s) => s.op === 'linear');
    const layerCount = linearSteps.length;
    // What each linear layer had bound as its weights (the packed/float `.w`): binding 2 of its
    // kernel, or binding 0 of its dequantize step, which the kernel then reads as float32.
    const layerWeightBytes = linearSteps.map((s) => {
      const bound = s.prologue ? s.prologue.bindings[0] : s.bindings[2];
      if (bound !== s.weights) throw new StageError('upload', `layer ${s.name} binds ${bound} as its weights, not ${s.weights}`);
      return sizes[bound];
    });
    await device.queue.onSubmittedWorkDone();

    // Timestamps: begin/end of each linear layer's pass, then begin of the first pass and end
    // of the last (the whole forward pass); resolved into one slot of a ring of max_iterations (timing.js).
    const queryCount = 2 * layerCount + 2;
    const slot = Math.ceil(queryCount * 8 / QUERY_RESOLVE_ALIGN) * QUERY_RESOLVE_ALIGN;
    const querySet = hasTimestamps ? device.createQuerySet({type: 'timestamp', count: queryCount}) : null;
    const resolveBuffer = hasTimestamps ? device.createBuffer({
      size: slot * spec.max_iterations, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    }) : null;

    const resultBytes = opts.result.bytes;
    const encodeForward = (pass, ringSlot) => {
      const encoder = device.createCommandEncoder();
      for (const p of opts.pass_inputs) {
        encoder.copyBufferToBuffer(buffers[p.from], pass * p.bytes, buffers[p.to], 0, p.bytes);
      }
      const stamped = querySet && ringSlot !== null;
      let layer = 0;
      let i = 0;
      while (i < steps.length) {
        // A linear layer gets its own pass (its timestamps); the steps between share one.
        const group = steps[i].op === 'linear' ? [steps[i++]] : [];
        if (!group.length) while (i < steps.length && steps[i].op !== 'linear') group.push(steps[i++]);
        const desc = {};
        if (stamped) {
          const first = group[0] === steps[0];
          const last = group[group.length - 1] === steps[steps.length - 1];
          const tw = {querySet};
          if (group[0].op === 'linear') {
            tw.beginningOfPassWriteIndex = 2 * layer;
            tw.endOfPassWriteIndex = 2 * layer + 1;
          }
          if (first) tw.beginningOfPassWriteIndex = 2 * layerCount;
          if (last) tw.endOfPassWriteIndex = 2 * layerCount + 1;
          if ('beginningOfPassWriteIndex' in tw || 'endOfPassWriteIndex' in tw) desc.timestampWrites = tw;
        }
        const cp = encoder.beginComputePass(desc);
        dispatchSteps(cp, group);
        cp.end();
        if (group[0].op === 'linear') layer++;
      }
      encoder.copyBufferToBuffer(buffers[opts.result.buffer], 0, outputAll, pass * resultBytes, resultBytes);
      if (stamped) encoder.resolveQuerySet(querySet, 0, queryCount, resolveBuffer, ringSlot * slot);
      return encoder.finish();
    };

    stage = 'dispatch';
    const forwardOnce = async (index, ringSlot) => {
      const commands = encodeForward(0, ringSlot);
      const t0 = performance.now();
      device.queue.submit([commands]);
      await device.queue.onSubmittedWorkDone();
      return performance.now() - t0;
    };
    const timed = await timeIterations(spec, forwardOnce);
    const iterations = Math.min(timed.wallMs.length, spec.max_iterations);  // ring slots in use
    for (let p = 0; p < passes; p++) {
      device.queue.submit([encodeForward(p, null)]);
      await device.queue.onSubmittedWorkDone();
    }

    stage = 'readback';
    const encoder = device.createCommandEncoder();
    const readback = device.createBuffer({
      size: spec.output_bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    encoder.copyBufferToBuffer(outputAll, 0, readback, 0, spec.output_bytes);
    let tsRead = null;
    if (querySet && iterations > 0) {
      tsRead = device.createBuffer({
        size: slot * iterations, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      });
      encoder.copyBufferToBuffer(resolveBuffer, 0, tsRead, 0, slot * iterations);
    }
    device.queue.submit([encoder.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const outBytes = readback.getMappedRange().slice(0);
    readback.unmap();

    let gpuMs = null;
    let layerGpuMs = new Array(layerCount).fill(null);
    let gpuNote = hasTimestamps ? '' : "the adapter has no 'timestamp-query' feature";
    if (tsRead) {
      await tsRead.mapAsync(GPUMapMode.READ);
      const ts = new BigUint64Array(tsRead.getMappedRange().slice(0));
      tsRead.unmap();
      const span = (it, a, b) => Number(ts[it * slot / 8 + b] - ts[it * slot / 8 + a]) / 1e6;
      gpuMs = [];
      const perLayer = Array.from({length: layerCount}, () => []);
      for (const it of timed.gpuOrder) {
        gpuMs.push(span(it, 2 * layerCount, 2 * layerCount + 1));
        for (let l = 0; l < layerCount; l++) perLayer[l].push(span(it, 2 * l, 2 * l + 1));
      }
      // A pair that does not increase is a broken timestamp: wall clock leads then.
      if (gpuMs.some((ms) => !(ms > 0))) {
        gpuMs = null;
        gpuNote = 'timestamp queries of the whole pass did not increase';
      }
      if (perLayer.some((xs) => xs.some((ms) => !(ms >= 0) || !Number.isFinite(ms)))) {
        gpuNote = [gpuNote, 'a linear layer\'s timestamps went backwards'].filter(Boolean).join('; ');
      } else {
        layerGpuMs = perLayer.map(median);
      }
    } else if (hasTimestamps) {
      gpuNote = 'no timed iterations';
    }

    const heap = await jsHeap();
    const failed = await failure(stage);
    if (failed) return failed;

    const variantsUsed = [...new Set(linearSteps.map((s) => chosen[s.kernel]))];
    const shadersUsed = [...new Set(variantsUsed.map((v) => v.shader))];
    const gpuBufferBytes = Object.values(buffers).reduce((sum, b) => sum + b.size, 0) +
        outputAll.size + (resolveBuffer ? resolveBuffer.size : 0);
    const reply = {
      status: 'ok',
      shader: shadersUsed.join('+'),
      compute_dtype: variantsUsed.some((v) => v.compute_dtype === 'f16') ? 'f16' : 'f32',
      weight_buffer_bytes: layerWeightBytes.reduce((a, b) => a + b, 0),
      timestamp_query: hasTimestamps,
      compile_ms: compileMs,
      ...timingReply(timed, gpuMs),
      gpu_buffer_bytes: gpuBufferBytes,
      js_heap: heap,
      layers: linearSteps.map((s, l) => ({
        name: s.name, weight_dtype: chosen[s.kernel].weight_dtype,
        weight_bytes: layerWeightBytes[l], gpu_ms: layerGpuMs[l],
      })),
      output: outBytes,
    };
    if (gpuNote) reply.gpu_note = gpuNote;
    return reply;
  } catch (e) {
    const reason = `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`;
    return {status: 'failed', stage: (e && e.stage) || stage, reason};
  } finally {
    if (device) device.destroy();
  }
}
