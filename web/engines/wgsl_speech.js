// Whisper on the harness's own WGSL kernels (WebGPU). Python writes four passes as step lists
// (engines/wgsl/speech.py): `frontend` (the clip's PCM to log-mel features), `encoder` (the
// convolutions, the encoder layers, every decoder layer's cross-attention keys and values),
// `prompt` (the decoder over the prompt's ids, the greedy argmax on the device) and `decode`
// (one id at the position the KV cache has reached). This page compiles the kernels, uploads
// the weights and every clip's PCM, then transcribes clips: per clip one submission for the
// front end, one for the encoder, one for the prompt and one per decode step, each new id read
// back after its step (the per-token timestamps), until the end of text or max_tokens. The
// first transcription (clip 0, cold) also copies out its features, encoder output and first
// logits for the checks in Python. Timed iterations take the clips in turn; clips no timed
// iteration reached are transcribed afterwards, untimed, so every clip has its ids. Returns raw
// samples and facts; decides nothing about them.
import {timeTranscriptions, writeTranscripts} from '../transcription.js';
import {StepRunner, align4} from './wgsl_steps.js';

// One clip end to end: the front end, the encoder, the prompt, then decode steps until the end of
// text or max_tokens, each new id read back. `check` ({checks, outSpec}) copies out the clip's
// features, encoder output and first logits for Python's checks.
async function transcribeClip(runner, opts, c, check) {
  const {device, buffers} = runner;
  const zero = new Uint32Array([0]);
  const [offset, length] = opts.clips[c];
  device.queue.writeBuffer(buffers.clip, 0, new Uint32Array([offset, length]));
  device.queue.writeBuffer(buffers.pos, 0, zero);
  device.queue.writeBuffer(buffers.count, 0, zero);
  const copy = (src, at, name) => (check ? [[buffers[src], check.checks, at, check.outSpec[name]]] : []);
  const o = check ? check.outSpec : {};
  const t0 = performance.now();
  await runner.submit('frontend', {copies: copy('features', 0, 'features')});
  const t1 = performance.now();
  await runner.submit('encoder', {copies: copy('enc', o.features, 'encoder_out')});
  const t2 = performance.now();
  const prime = device.createCommandEncoder();
  prime.copyBufferToBuffer(buffers[opts.prompt.tensor], 0, buffers.ids, 0, opts.prompt.rows * 4);
  device.queue.submit([prime.finish()]);
  const ids = [];
  let id = await runner.submit('prompt', {readId: true, copies: copy('logits', o.features + o.encoder_out, 'first_logits')});
  const t3 = performance.now();
  const tokenMs = [];
  let last = t3;
  while (id !== opts.eot) {
    ids.push(id);
    if (ids.length >= opts.max_tokens) break;
    id = await runner.submit('decode', {readId: true});
    const now = performance.now();
    tokenMs.push(now - last);
    last = now;
  }
  return {clip: c, frontend_ms: t1 - t0, encoder_ms: t2 - t1, first_token_ms: t3 - t2, token_ms: tokenMs,
          total_ms: last - t0, ids};
}

export async function run(spec, client) {
  const opts = spec.options;
  const clips = opts.clips.length;
  const maxTokens = opts.max_tokens;
  return StepRunner.page(spec, client, opts.passes, async (runner, at) => {
    const {device, buffers} = runner;
    const floatBytes = spec.outputs.filter((o) => o.dtype === 'float32')
        .reduce((a, o) => a + 4 * o.shape.reduce((x, y) => x * y, 1), 0);
    const checks = device.createBuffer({label: 'checks', size: align4(floatBytes),
                                        usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC});
    // Every linear layer once, in the plan's order, with the weight buffer it bound.
    const linearByName = new Map();
    for (const name of ['encoder', 'decode']) {
      for (const s of runner.passes[name]) if (s.op === 'linear' && !linearByName.has(s.name)) linearByName.set(s.name, s);
    }
    const linearSteps = opts.layer_order.map((name) => {
      const s = linearByName.get(name);
      if (!s) throw new Error(`no pass runs layer ${name}`);
      return s;
    });

    const outSpec = Object.fromEntries(spec.outputs.map((o) => [o.name, 4 * o.shape.reduce((x, y) => x * y, 1)]));
    const transcribe = (c, check) => transcribeClip(runner, opts, c, check ? {checks, outSpec} : null);

    at.stage = 'dispatch';
    const {timed, records, transcripts} = await timeTranscriptions(spec, clips, transcribe);

    at.stage = 'readback';
    const out = new Uint8Array(spec.output_bytes);
    out.set(new Uint8Array(await runner.read(checks, floatBytes)), 0);
    writeTranscripts(out.buffer, floatBytes, transcripts, maxTokens);

    const done = await runner.loopReply(at.stage, opts, linearSteps, {
      kernelSteps: Object.values(runner.passes).flat(), extra: [checks], timed,
      gpuNote: 'per-clip wall clock (each new id read back)'});
    if (done.failure) return done.failure;
    return {...done.reply, speech: {upload_ms: runner.uploadMs, memory: done.memory, clips: records}, output: out.buffer};
  });
}
