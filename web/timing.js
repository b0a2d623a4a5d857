// The timing protocol shared by the runners: one cold iteration kept apart, warm-ups discarded,
// then timed iterations until both a minimum count and a minimum time are reached, with a cap on
// the count and a time budget (a run that hits the budget first comes back short, and Python
// marks it). `once(index)` runs one iteration and returns its wall-clock milliseconds; `index`
// is the timed iteration number, or null for cold and warm-up iterations.
export async function timeIterations(spec, once) {
  const budgetStart = performance.now();  // the budget covers cold and warm-up iterations too
  const coldMs = await once(null);
  const warmStart = performance.now();  // warm-ups: the count, and at least warmup_min_ms of them
  const warming = (i) => i < spec.warmup || performance.now() - warmStart < (spec.warmup_min_ms || 0);
  for (let i = 0; warming(i) && performance.now() - budgetStart < spec.budget_ms; i++) {
    await once(null);
  }
  const wallMs = [];
  const start = performance.now();
  while (wallMs.length < spec.max_iterations) {
    const elapsed = performance.now() - start;
    if (wallMs.length >= spec.min_iterations && elapsed >= spec.min_time_ms) break;
    if (wallMs.length > 0 && performance.now() - budgetStart >= spec.budget_ms) break;
    wallMs.push(await once(wallMs.length));
  }
  return {coldMs, wallMs};
}
