// Runs web/timing.js under node with a fake clock, for tests/test_timing_js.py.
// argv[2]: the absolute file URL of web/timing.js. Jobs come one JSON object a line on stdin;
// each gets one JSON line on stdout ({"error": ...} if it threw), in order, until stdin closes.
//   {"op": "run", "spec": {...}, "series": "<JS expression of (i, t) => ms>"}
//     runs timeIterations(spec, once, {clock}) where the clock starts at 0 and only `once` moves
//     it: once(i, slot) advances it by series(i, t) (i null for the cold iteration, t the fake
//     time at the call) and returns that. Reply: the result, every [i, slot] `once` got, and
//     the fake time at the end.
//   {"op": "window", "wallMs": [...], "startMs": [...], "floor": f, "elapsed": e, "spec": {...}}
//     replies {"steady": steadyWindow(wallMs, startMs, floor, elapsed, spec)}.
//   {"op": "firstSteady", "wallMs": [...], "startMs": [...], "floor": f, "spec": {...}}
//     replies {"n": the fewest iterations after which the steady-mode stop holds (min_iterations
//     and min_time_ms after the floor, and steadyWindow on that prefix), null if none does}.
import {createInterface} from 'node:readline';

const timing = await import(process.argv[2]);

async function runJob(job) {
  if (job.op === 'run') {
    const series = new Function(`return (${job.series});`)();
    let time = 0;
    const clock = {now: () => time};
    const calls = [];
    const once = async (i, slot) => {
      calls.push([i, slot]);
      const ms = series(i, time);
      time += ms;
      return ms;
    };
    const result = await timing.timeIterations(job.spec, once, {clock, batchable: job.batchable ?? true});
    return {...result, calls, endTime: time};
  }
  if (job.op === 'window') {
    return {steady: timing.steadyWindow(job.wallMs, job.startMs, job.floor, job.elapsed, job.spec)};
  }
  if (job.op === 'firstSteady') {
    const {wallMs, startMs, floor, spec} = job;
    for (let n = floor + 1; n <= wallMs.length; n++) {
      const elapsed = startMs[n - 1] + wallMs[n - 1];
      if (n - floor < spec.min_iterations || elapsed - startMs[floor] < spec.min_time_ms) continue;
      if (timing.steadyWindow(wallMs.slice(0, n), startMs.slice(0, n), floor, elapsed, spec)) return {n};
    }
    return {n: null};
  }
  throw new Error(`unknown op ${job.op}`);
}

for await (const line of createInterface({input: process.stdin, crlfDelay: Infinity})) {
  if (!line.trim()) continue;
  let reply;
  try {
    reply = await runJob(JSON.parse(line));
  } catch (err) {
    reply = {error: String(err && err.stack || err)};
  }
  process.stdout.write(JSON.stringify(reply) + '\n');
}
