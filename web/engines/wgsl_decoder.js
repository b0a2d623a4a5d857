// A decoder LLM on the harness's own WGSL kernels (WebGPU). Python writes three forward passes
// as step lists (engines/wgsl/decoder.py): `prefill` (the prompt, its keys and values into the
// KV cache, the greedy argmax of its last row), `decode` (one row at the position the cache has
// reached) and `score` (an evaluation row, every position's logits). This page compiles the
// kernels, uploads the weights, then times generations: per generation one submission for the
// prefill and one per decode step, the new id read back after each (the per-token timestamps).
// The KV cache, position and generated ids stay on the device. Then it scores the evaluation rows
// and posts their logits and the last generation's ids. Returns raw samples and facts; decides
// nothing about them.
import {timeGenerations} from '../generation.js';
import {StepRunner, align4} from './wgsl_steps.js';

export async function run(spec, client) {
  const opts = spec.options;
  return StepRunner.page(spec, client, opts.forwards, async (runner, at) => {
    const {device, buffers} = runner;
    const logitsBytes = opts.score.texts * opts.score.row_bytes;
    const outputAll = device.createBuffer({label: 'output', size: align4(spec.output_bytes),
                                           usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC});
    const linearSteps = runner.passes.score.filter((s) => s.op === 'linear');

    const zero = new Uint32Array([0]);
    at.stage = 'dispatch';
    const {timed, generations, firstForwardMs} = await timeGenerations(spec, opts.new_tokens, {
      before: async () => {
        device.queue.writeBuffer(buffers.pos, 0, zero);
        device.queue.writeBuffer(buffers.count, 0, zero);
        const encoder = device.createCommandEncoder();
        encoder.copyBufferToBuffer(buffers[opts.prompt.tensor], 0, buffers.ids, 0, opts.prompt.rows * 4);
        device.queue.submit([encoder.finish()]);
        await device.queue.onSubmittedWorkDone();
      },
      prefill: () => runner.submit('prefill', {readId: true}),
      decode: () => runner.submit('decode', {readId: true}),
    });

    // Teacher-forced scoring: each evaluation row from position 0, every position's logits.
    at.stage = 'score';
    for (let t = 0; t < opts.score.texts; t++) {
      device.queue.writeBuffer(buffers.pos, 0, zero);
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(buffers[opts.score.tensor], t * opts.score.rows * 4, buffers.ids, 0, opts.score.rows * 4);
      runner.encode(encoder, 'score');
      encoder.copyBufferToBuffer(buffers.logits, 0, outputAll, t * opts.score.row_bytes, opts.score.row_bytes);
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
    }

    at.stage = 'readback';
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffers.generated, 0, outputAll, logitsBytes, opts.new_tokens * 4);
    device.queue.submit([encoder.finish()]);
    const outBytes = await runner.read(outputAll, spec.output_bytes);

    const done = await runner.loopReply(at.stage, opts, linearSteps, {
      kernelSteps: linearSteps.concat(runner.passes.decode), extra: [outputAll], timed,
      gpuNote: 'per-token wall clock (each new id read back)'});
    if (done.failure) return done.failure;
    return {
      ...done.reply,
      decoder: {upload_ms: runner.uploadMs, first_forward_ms: firstForwardMs, kv_cache_on_device: true,
                memory: done.memory, generations},
      output: outBytes,
    };
  });
}
