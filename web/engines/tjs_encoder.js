// transformers.js, encoders (engines/transformersjs/encoder.py): the `feature-extraction`
// pipeline on the model folder at the run's dtype. Timed: the pipeline as users call it,
// extractor(texts, {pooling: 'mean', normalize: true}) on the first batch's texts, its tokenizer
// cutting and padding them to the workload's sequence length, the shape every engine runs (and
// the one WebNN's session is fixed to, by freeDimensionOverrides as its users must). Then, for
// accuracy, the pipeline's model on every pass's token ids (the ones every engine gets), pooled
// by the library's mean_pooling and normalize: float32 [passes * batch, hidden].
import {timeIterations} from '../timing.js';
import {int64Tensor, tjsPage} from './tjs_common.js';

export async function run(spec, client) {
  const opts = spec.options;
  const {batch, seq, hidden, passes} = opts.model;
  const overrides = opts.provider === 'webnn' ? {freeDimensionOverrides: {batch_size: batch, sequence_length: seq}} : {};
  return tjsPage(spec, client, 'feature-extraction', async ({T, pipe, at}) => {
    const tokenizer = pipe.tokenizer;  // cut and padded where every engine's inputs are (WebNN needs one shape)
    pipe.tokenizer = (texts, o) => tokenizer(texts, {...o, padding: 'max_length', truncation: true, max_length: seq});
    const shape = pipe.tokenizer(opts.texts, {padding: true, truncation: true}).input_ids.dims;
    const timed = await timeIterations(spec, async () => {
      const t = performance.now();
      const out = await pipe(opts.texts, {pooling: 'mean', normalize: true});
      const ms = performance.now() - t;
      if (out.dispose) out.dispose();
      return ms;
    });

    at.stage = 'score';
    const raw = {};
    for (const name of opts.inputs) raw[name] = new Int32Array(await client.tensor(name));
    const output = new Float32Array(opts.output_rows * hidden);
    const per = batch * seq;
    for (let p = 0; p < passes; p++) {
      const feeds = {};
      for (const name of opts.inputs) feeds[name] = int64Tensor(T, raw[name].subarray(p * per, (p + 1) * per), [batch, seq]);
      const out = await pipe.model(feeds);
      const pooled = T.mean_pooling(out[opts.output], feeds.attention_mask).normalize(2, -1);
      output.set(pooled.data, p * batch * hidden);
    }
    return {timed, note: `the pipeline's wall clock (tokenize, run, read back, pool) on ${shape.join(' x ')} tokens`,
            output: output.buffer};
  }, overrides);
}
