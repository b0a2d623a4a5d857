// The steady-state rule's own check (docs/concepts/steady-state.md): iterations that keep the
// main thread busy for a scheduled time instead of running an engine, so a test (and anyone
// doubting the rule) can watch timing.js and Python's classification meet a known series.
// options.schedule: 'step' (slow_ms until switch_ms after the first warm iteration, then
// fast_ms: a warm-up) or 'drift' (base_ms growing by growth_per_s each second: never steady).
import {timeIterations, timingReply} from '../timing.js';

export async function run(spec) {
  const o = spec.options;
  let t0 = null;
  const once = async (index) => {
    const now = performance.now();
    if (index !== null && t0 === null) t0 = now;
    const elapsed = t0 === null ? 0 : now - t0;
    const ms = o.schedule === 'drift' ? o.base_ms * (1 + o.growth_per_s * elapsed / 1000)
      : (elapsed < o.switch_ms ? o.slow_ms : o.fast_ms);
    while (performance.now() - now < ms) { /* busy: the scheduled work */ }
    const took = performance.now() - now;
    await new Promise((resolve) => setTimeout(resolve, 0));  // let the page's events run, untimed
    return took;
  };
  // never batched: an iteration is its scheduled busy time, which it measures itself (its yield
  // to the page's events is not part of it, and a batch's one clock read would count it)
  const timed = await timeIterations(spec, once, {batchable: false});
  return {status: 'ok', shader: `schedule ${o.schedule}`, compute_dtype: 'f32', compile_ms: 0,
    ...timingReply(timed)};
}
