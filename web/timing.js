import {markPhase} from './meter.js';

// The timing protocol shared by the runners (docs/concepts/steady-state.md). One cold iteration
// kept apart; then every sample is recorded (its wall-clock milliseconds and its start offset
// from the first warm one) until the page stops, and Python decides which of them are steady.
// A sample is one iteration, or, for work faster than `sample_min_ms` (microseconds a run, below
// what the clock resolves), the mean of a batch of iterations timed by one clock read around
// them: a sample that spans less than half of sample_min_ms grows the batch to span it (so a
// slow first iteration does not fix it small; `iterationsPerSample`, the largest; only where
// `batchable`: runners that record something per iteration are not). The floor, `warmup`
// samples and `warmup_min_ms` of them, always runs and never counts as steady; it ends by a third
// of the page's budget and of its record cap whatever it asked, so that samples after it fit, and
// a window after it that covers half the elapsed time (the steady stop) can.
// After it:
// - steady mode stops once the trailing window is steady: a window of the latest samples,
//   starting after the floor, covering at least half the elapsed time and at least
//   min_iterations samples, whose halves' medians (of batches spanning at least batch_ms, one
//   sample each where the clock is fine) agree within `steady_tolerance`; and it needs
//   min_iterations and min_time_ms after the floor too. Otherwise it stops at `steady_cap_ms`
//   of elapsed time ('cap'), once it has `least_samples` after the floor.
// - counts mode (--steady off, the old protocol) stops once min_iterations and min_time_ms are
//   met after the floor, or at max_iterations after it.
// Both stop at the page's time budget ('budget') and at record_cap samples ('record-cap').
// `once(i, slot)` runs iteration i (null for the cold one) and returns its milliseconds; `slot`
// is the sample's index modulo max_iterations, the GPU timestamp slot of a ring that keeps the
// last max_iterations samples (gpuOrder says which slots, oldest first; in a batch the last
// iteration's).
export async function timeIterations(spec, once, {clock = performance, batchable = true} = {}) {
  const now = () => clock.now();
  const budgetStart = now();  // the budget covers the cold iteration and the floor too
  markPhase('warmup');
  const coldMs = await once(null, null);
  const ring = spec.max_iterations;
  const wallMs = [];
  const startMs = [];
  const t0 = now();
  const floorMs = Math.min(spec.warmup_min_ms || 0, spec.budget_ms / 3);
  const floorCap = Math.floor(spec.record_cap / 3);
  const least = spec.least_samples || 1;
  let perSample = 1;
  let floor = null;  // samples in the floor, once it is over
  let nextCheck = 0;
  let stopReason = null;
  for (;;) {
    const n = wallMs.length;
    const elapsed = now() - t0;
    if (floor === null && n >= Math.min(spec.warmup, floorCap) && (elapsed >= floorMs || n >= floorCap)) {
      floor = n;
      markPhase('measured');
    }
    if (floor !== null) {
      const after = n - floor;
      const afterMs = after > 0 ? elapsed - startMs[floor] : 0;
      const enough = after >= spec.min_iterations && afterMs >= spec.min_time_ms;
      if (!spec.steady) {
        if (enough) stopReason = 'counts';
        else if (after >= spec.max_iterations) stopReason = 'max-iterations';
      } else if (enough && n >= nextCheck) {
        nextCheck = n + Math.max(1, Math.ceil(0.05 * n));  // a check costs a sort: not every time
        if (steadyWindow(wallMs, startMs, floor, elapsed, spec)) stopReason = 'steady';
      }
      if (!stopReason && spec.steady && elapsed >= spec.steady_cap_ms && after >= least) stopReason = 'cap';
    }
    if (!stopReason && n >= spec.record_cap) stopReason = 'record-cap';
    if (!stopReason && n > 0 && now() - budgetStart >= spec.budget_ms) stopReason = 'budget';
    if (stopReason) break;
    const begin = now();
    startMs.push(begin - t0);
    if (perSample > 1) {
      for (let k = 0; k < perSample; k++) await once(n, n % ring);
      wallMs.push((now() - begin) / perSample);
    } else {
      wallMs.push(await once(n, n % ring));
    }
    const spanned = now() - begin;
    if (batchable && spec.sample_min_ms > 0 && spanned < spec.sample_min_ms / 2) {
      perSample = Math.min(spec.record_cap, Math.ceil(perSample * spec.sample_min_ms / Math.max(spanned, 1e-3)));
    }
  }
  return {coldMs, wallMs, startMs, floorIterations: floor ?? wallMs.length, stopReason,
    iterationsPerSample: perSample, gpuOrder: gpuOrder(wallMs.length, ring)};
}

// The ring slots holding the last min(n, ring) iterations' GPU timestamps, oldest first.
export function gpuOrder(n, ring) {
  const kept = Math.min(n, ring);
  return Array.from({length: kept}, (_, k) => (n - kept + k) % ring);
}

// The reply's timing fields from timeIterations' result (and the GPU series in iteration order).
export function timingReply(timed, gpuMs = null) {
  return {
    cold_ms: timed.coldMs, wall_ms: timed.wallMs, start_ms: timed.startMs,
    floor_iterations: timed.floorIterations, stop_reason: timed.stopReason, gpu_ms: gpuMs,
    iterations_per_sample: timed.iterationsPerSample,
  };
}

// The steady-mode stop rule (above), on the series so far; exported for the node test.
export function steadyWindow(wallMs, startMs, floor, elapsed, spec) {
  let w = wallMs.length - 1;  // the latest start that makes the window cover half the time
  while (w >= floor && startMs[w] > elapsed / 2) w--;
  if (w < floor || wallMs.length - w < spec.min_iterations) return false;
  const batches = batchMeans(wallMs.slice(w), spec.batch_ms || 0);
  const half = Math.floor(batches.length / 2);
  if (half < 3) return false;
  const a = median(batches.slice(0, half));
  const b = median(batches.slice(batches.length - half));
  return a > 0 && Math.abs(b / a - 1) <= spec.steady_tolerance;
}

function batchMeans(ms, batchMs) {
  const out = [];
  let sum = 0;
  let count = 0;
  for (const x of ms) {
    sum += x;
    count++;
    if (sum >= batchMs) {
      out.push(sum / count);
      sum = 0;
      count = 0;
    }
  }
  return out;
}

function median(xs) {
  const s = [...xs].sort((p, q) => p - q);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
