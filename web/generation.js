// How the decoder runners time greedy generation: one timed iteration (timing.js) is one whole
// generation, the prefill then new_tokens - 1 decode steps, each new id read back after its step
// (the per-token timestamps). `prefill()` resolves to the first id, `decode(i, id)` to the i-th
// given the one before; `before()` and `after()` (optional) run untimed around each generation.
// Returns the timing protocol's result (`timed`, timing.js) with the generations of every iteration
// after the cold one ({ttft_ms, token_ms}), the first (cold) prefill's time and the ids of the
// last generation.
import {timeIterations} from './timing.js';

export async function timeGenerations(spec, newTokens, {prefill, decode, before = null, after = null}) {
  const generations = [];
  let firstForwardMs = null;
  let generated = [];
  const generate = async (index) => {
    if (before) await before();
    const t0 = performance.now();
    const ids = [await prefill()];
    const tFirst = performance.now();
    const tokenMs = [];
    let last = tFirst;
    for (let i = 1; i < newTokens; i++) {
      ids.push(await decode(i, ids[i - 1]));
      const now = performance.now();
      tokenMs.push(now - last);
      last = now;
    }
    if (after) await after();
    if (firstForwardMs === null) firstForwardMs = tFirst - t0;
    if (index !== null) {
      generations.push({ttft_ms: tFirst - t0, token_ms: tokenMs});
      generated = ids;
    }
    return last - t0;
  };
  const timed = await timeIterations(spec, generate, {batchable: false});
  return {timed, generations, firstForwardMs, generated};
}
