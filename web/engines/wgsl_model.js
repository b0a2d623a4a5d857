// A whole encoder on the harness's own WGSL kernels (WebGPU): the forward loop. Python writes the
// forward pass as one list of steps (engines/wgsl/encoder.py, the architecture's graph lowered);
// StepRunner (wgsl_steps.js) compiles, uploads and binds them. This page runs them as told: ONE
// command submission per forward pass (the pass's token ids copied in, every dispatch, the
// sentence embeddings copied out), all passes' outputs read back once at the end. Each linear
// layer runs in a compute pass of its own, so with timestamp queries it has its own GPU time.
// Returns raw samples and facts (bound weight buffer sizes, shaders used); decides nothing about them.
import {jsHeap} from '../memory.js';
import {timeIterations, timingReply} from '../timing.js';
import {StepRunner, dispatchSteps} from './wgsl_steps.js';

const QUERY_RESOLVE_ALIGN = 256;

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

// Timestamps: begin/end of each linear layer's pass, then begin of the first pass and end of the
// last (the whole forward pass), resolved into one slot of a ring of `ring` slots (timing.js).
function timestampRing(device, layers, ring) {
  const count = 2 * layers + 2;
  const slot = Math.ceil(count * 8 / QUERY_RESOLVE_ALIGN) * QUERY_RESOLVE_ALIGN;
  return {layers, count, slot, querySet: device.createQuerySet({type: 'timestamp', count}),
          resolve: device.createBuffer({size: slot * ring, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC})};
}

// One forward pass (pass `pass` of the job's inputs) into a command buffer; with a ring slot, its
// timestamps are written and resolved there.
function encodeForward(device, runner, opts, stamps, output, pass, ringSlot) {
  const {buffers} = runner;
  const steps = runner.passes.forward;
  const encoder = device.createCommandEncoder();
  for (const p of opts.pass_inputs) encoder.copyBufferToBuffer(buffers[p.from], pass * p.bytes, buffers[p.to], 0, p.bytes);
  const stamped = stamps && ringSlot !== null;
  let layer = 0;
  let i = 0;
  while (i < steps.length) {
    // A linear layer gets its own pass (its timestamps); the steps between share one.
    const group = steps[i].op === 'linear' ? [steps[i++]] : [];
    if (!group.length) while (i < steps.length && steps[i].op !== 'linear') group.push(steps[i++]);
    const desc = {};
    if (stamped) {
      const tw = {querySet: stamps.querySet};
      if (group[0].op === 'linear') {
        tw.beginningOfPassWriteIndex = 2 * layer;
        tw.endOfPassWriteIndex = 2 * layer + 1;
      }
      if (group[0] === steps[0]) tw.beginningOfPassWriteIndex = 2 * stamps.layers;
      if (group[group.length - 1] === steps[steps.length - 1]) tw.endOfPassWriteIndex = 2 * stamps.layers + 1;
      if ('beginningOfPassWriteIndex' in tw || 'endOfPassWriteIndex' in tw) desc.timestampWrites = tw;
    }
    const cp = encoder.beginComputePass(desc);
    dispatchSteps(cp, group);
    cp.end();
    if (group[0].op === 'linear') layer++;
  }
  const bytes = opts.result.bytes;
  encoder.copyBufferToBuffer(buffers[opts.result.buffer], 0, output, pass * bytes, bytes);
  if (stamped) encoder.resolveQuerySet(stamps.querySet, 0, stamps.count, stamps.resolve, ringSlot * stamps.slot);
  return encoder.finish();
}

// The whole pass's GPU ms per timed iteration and each linear layer's median, from the ring
// (`iterations` slots in use, read in timing.js's gpuOrder); null and a note where they are unusable.
async function gpuTimes(runner, stamps, timed, iterations) {
  if (!stamps) return {gpuMs: null, layerMs: [], note: "the adapter has no 'timestamp-query' feature"};
  if (iterations === 0) return {gpuMs: null, layerMs: [], note: 'no timed iterations'};
  const ts = new BigUint64Array(await runner.read(stamps.resolve, stamps.slot * iterations));
  const span = (it, a, b) => Number(ts[it * stamps.slot / 8 + b] - ts[it * stamps.slot / 8 + a]) / 1e6;
  const n = stamps.layers;
  let gpuMs = timed.gpuOrder.map((it) => span(it, 2 * n, 2 * n + 1));
  const perLayer = Array.from({length: n}, (_, l) => timed.gpuOrder.map((it) => span(it, 2 * l, 2 * l + 1)));
  const notes = [];
  if (gpuMs.some((ms) => !(ms > 0))) {  // a pair that does not increase is a broken timestamp: wall clock leads
    gpuMs = null;
    notes.push('timestamp queries of the whole pass did not increase');
  }
  const broken = perLayer.some((xs) => xs.some((ms) => !(ms >= 0) || !Number.isFinite(ms)));
  if (broken) notes.push('a linear layer\'s timestamps went backwards');
  return {gpuMs, layerMs: broken ? [] : perLayer.map(median), note: notes.join('; ')};
}

export async function run(spec, client) {
  const opts = spec.options;
  return StepRunner.page(spec, client, {forward: opts.steps}, async (runner, at) => {
    const {device} = runner;
    const linearSteps = runner.passes.forward.filter((s) => s.op === 'linear');
    const stamps = runner.hasTimestamps ? timestampRing(device, linearSteps.length, spec.max_iterations) : null;
    const output = device.createBuffer({label: 'output', size: spec.output_bytes,
                                        usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC});
    const forward = (pass, ringSlot) => encodeForward(device, runner, opts, stamps, output, pass, ringSlot);

    at.stage = 'dispatch';
    const timed = await timeIterations(spec, async (index, ringSlot) => {
      const commands = forward(0, ringSlot);
      const t0 = performance.now();
      device.queue.submit([commands]);
      await device.queue.onSubmittedWorkDone();
      return performance.now() - t0;
    });
    for (let p = 0; p < opts.model.passes; p++) {
      device.queue.submit([forward(p, null)]);
      await device.queue.onSubmittedWorkDone();
    }

    at.stage = 'readback';
    const outBytes = await runner.read(output, spec.output_bytes);
    const gpu = await gpuTimes(runner, stamps, timed, Math.min(timed.wallMs.length, spec.max_iterations));
    const heap = await jsHeap();
    const failure = await runner.failure(at.stage);
    if (failure) return failure;

    const {memory, ...facts} = runner.facts(opts, linearSteps, {extra: [output, ...(stamps ? [stamps.resolve] : [])],
                                                                gpuMs: gpu.layerMs.length ? gpu.layerMs : linearSteps.map(() => null)});
    const reply = {
      status: 'ok',
      ...facts,
      shader: [...new Set(linearSteps.map((s) => runner.chosen[s.kernel].shader))].join('+'),
      timestamp_query: runner.hasTimestamps,
      ...timingReply(timed, gpu.gpuMs),
      js_heap: heap,
      output: outBytes,
    };
    if (gpu.note) reply.gpu_note = gpu.note;
    return reply;
  }, {timestamps: true});
}
