// transformers.js, decoder LLMs (engines/transformersjs/decoder.py): the `text-generation`
// pipeline on the model folder at the run's dtype. Timed: the pipeline as users call it on the
// prompt's text, greedy, exactly new_tokens new tokens (min = max: the end of sequence cannot stop
// it early); a streamer the library calls after each new token gives TTFT and per-token times.
// The library's tokenizer must make the prompt's text into the prompt's ids (`engine_tokens`).
// Then, for accuracy, the pipeline's model on each evaluation row (teacher-forced, an empty cache,
// every position's logits): float32 [texts, rows, vocab], then the last generation's ids.
import {timeIterations} from '../timing.js';
import {int64Tensor, tjsPage} from './tjs_common.js';

export async function run(spec, client) {
  const opts = spec.options;
  const N = opts.new_tokens;
  return tjsPage(spec, client, 'text-generation', async ({T, pipe, at, loadMs}) => {
    const promptIds = Array.from(pipe.tokenizer(opts.prompt.text, {add_special_tokens: false}).input_ids.data, Number);
    const generations = [];
    let generated = [];
    let firstForwardMs = null;
    const timed = await timeIterations(spec, async (index) => {
      const marks = [];
      const ids = [];
      let prompt = true;  // the library puts the prompt's ids first
      const streamer = {put: (value) => {
        if (prompt) { prompt = false; return; }
        marks.push(performance.now());
        ids.push(Number(value[0][0]));
      }, end: () => {}};
      const t0 = performance.now();
      await pipe(opts.prompt.text, {max_new_tokens: N, min_new_tokens: N, do_sample: false, add_special_tokens: false,
                                    return_full_text: false, streamer});
      const ms = performance.now() - t0;
      if (marks.length !== N) throw new RangeError(`the streamer saw ${marks.length} new tokens, not ${N}`);
      if (firstForwardMs === null) firstForwardMs = marks[0] - t0;
      if (index !== null) {
        generations.push({ttft_ms: marks[0] - t0, token_ms: marks.slice(1).map((m, i) => m - marks[i])});
        generated = ids;
      }
      return ms;
    }, {batchable: false});

    at.stage = 'score';
    const {texts, rows} = opts.score;
    const V = opts.model.vocab;
    const evalIds = new Int32Array(await client.tensor(opts.score.tensor));
    const output = new ArrayBuffer(spec.output_bytes);
    for (let t = 0; t < texts; t++) {
      const ids = int64Tensor(T, evalIds.subarray(t * rows, (t + 1) * rows), [1, rows]);
      const mask = int64Tensor(T, new Int32Array(rows).fill(1), [1, rows]);
      const out = await pipe.model({input_ids: ids, attention_mask: mask});
      const logits = out.logits;
      const data = logits.data ?? await logits.getData();
      if (data.length !== rows * V) throw new RangeError(`text ${t}: ${data.length} logits, expected ${rows * V}`);
      new Float32Array(output, t * rows * V * 4, rows * V).set(data);
      for (const tensor of Object.values(out)) if (tensor && tensor.dispose) tensor.dispose();
    }
    new Int32Array(output, texts * rows * V * 4, N).set(generated);
    return {
      timed,
      note: 'the pipeline\'s wall clock; per-token times from a streamer the library calls after each ' +
        'new token; load_weights_ms is the pipeline\'s creation (files fetched, sessions made); the KV cache ' +
        'is the one the library grows to prompt + new tokens; scratch counts one step\'s logits read back',
      decoder: {upload_ms: loadMs, first_forward_ms: firstForwardMs, kv_cache_on_device: opts.provider === 'webgpu',
                memory: {weights: opts.weight_bytes, kv_cache: opts.kv_cache_bytes, scratch: V * 4},
                generations, engine_tokens: {prompt: promptIds.length, scored: []}},
      output,
    };
  });
}
