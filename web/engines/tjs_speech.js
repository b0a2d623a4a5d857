// transformers.js, Whisper (engines/transformersjs/speech.py): the automatic-speech-recognition
// pipeline on the model folder at the run's dtype. One timed iteration is one clip end to end,
// the pipeline as users call it (its own front end, the encoder, greedy decoding without
// timestamps; the folder's generation_config.json pins the harness's decoding rule). From inside
// it the page times the library's front end (its processor) and its encoder session, and each
// new id from a streamer; the ids are the transcript (the end of text dropped). Then, for Python's
// checks: the library's features of the first clip, and the encoder's output and the first logits
// of the pipeline's model on Python's features of it and the prompt.
import {timeTranscriptions, writeTranscripts} from '../transcription.js';
import {int64Tensor, tjsPage} from './tjs_common.js';

export async function run(spec, client) {
  const opts = spec.options;
  const cfg = opts.model;
  return tjsPage(spec, client, 'automatic-speech-recognition', async ({T, pipe, at, loadMs}) => {
    const probe = hooks(pipe);

    const pcm = new Float32Array(await client.tensor('audio'));
    const starts = opts.clip_samples.reduce((acc, n) => [...acc, acc.at(-1) + n], [0]);
    let libraryFeatures = null;
    const transcribe = async (c) => {
      const marks = [];
      const ids = [];
      let prompt = true;  // the library puts the prompt's ids first
      const streamer = {put: (value) => {
        if (prompt) { prompt = false; return; }
        marks.push(performance.now());
        ids.push(Number(value[0][0]));
      }, end: () => {}};
      probe.reset();
      const t0 = performance.now();
      await pipe(pcm.subarray(starts[c], starts[c + 1]), {return_timestamps: false, max_new_tokens: opts.max_tokens,
                                                          streamer});
      const total = performance.now() - t0;
      if (!marks.length || probe.encoderEnd === null) throw new Error('the pipeline ran no encoder or made no token');
      if (c === 0 && libraryFeatures === null) libraryFeatures = probe.features;
      if (ids.at(-1) === opts.eot) ids.pop();
      return {clip: c, frontend_ms: probe.frontendMs, encoder_ms: probe.encoderMs,
              first_token_ms: marks[0] - probe.encoderEnd, token_ms: marks.slice(1).map((m, i) => m - marks[i]),
              total_ms: total, ids};
    };
    const {timed, records, transcripts} = await timeTranscriptions(spec, opts.clips, transcribe);

    at.stage = 'score';
    const out = new ArrayBuffer(spec.output_bytes);
    const melBytes = 4 * cfg.mels * cfg.frames, encBytes = 4 * cfg.source_positions * cfg.d_model;
    new Float32Array(out, 0, cfg.mels * cfg.frames).set(libraryFeatures.data.subarray(0, cfg.mels * cfg.frames));
    const features = new T.Tensor('float32', new Float32Array(await client.tensor('features')), [1, cfg.mels, cfg.frames]);
    const prompt = new Int32Array(await client.tensor(opts.prompt.tensor));
    const result = await pipe.model({input_features: features, decoder_input_ids: int64Tensor(T, prompt, [1, prompt.length])});
    new Float32Array(out, melBytes, cfg.source_positions * cfg.d_model).set(probe.encoderOut.data);
    const V = cfg.vocab;
    const logits = result.logits.data;  // the last row's (the graph keeps it alone)
    new Float32Array(out, melBytes + encBytes, V).set(logits.subarray(logits.length - V));
    writeTranscripts(out, melBytes + encBytes + 4 * V, transcripts, opts.max_tokens);
    return {
      timed,
      note: 'per-clip wall clock of the pipeline; its front end and encoder timed from inside it, each ' +
        'new id by a streamer; load_weights_ms is the pipeline\'s creation (files fetched, sessions made)',
      speech: {upload_ms: loadMs, memory: {weights: opts.weight_bytes, kv_cache: opts.kv_cache_bytes, scratch: 4 * V},
               clips: records},
      output: out,
    };
  });
}

// Times inside the pipeline: its processor (the log-mel front end, kept: its features) and the
// encoder's session run (kept: its output, the last one's).
function hooks(pipe) {
  const probe = {frontendMs: null, encoderMs: null, encoderEnd: null, features: null, encoderOut: null,
                 reset() { this.frontendMs = this.encoderMs = this.encoderEnd = null; }};
  const processor = pipe.processor;
  pipe.processor = new Proxy(processor, {apply: async (target, self, args) => {
    const t = performance.now();
    const result = await Reflect.apply(target, self, args);
    probe.frontendMs = performance.now() - t;
    probe.features = result.input_features;
    return result;
  }});
  const session = pipe.model.sessions.model;
  const runSession = session.run.bind(session);
  session.run = async (...args) => {
    const t = performance.now();
    const result = await runSession(...args);
    probe.encoderEnd = performance.now();
    probe.encoderMs = probe.encoderEnd - t;
    probe.encoderOut = Object.values(result)[0];
    return result;
  };
  return probe;
}
