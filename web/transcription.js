// How the speech runners time transcription (one timed iteration is one clip end to end): clip 0
// cold (the transcription that copies out the checks), warm-ups, then timed iterations taking the
// clips in turn, at least one per clip; then, untimed, every clip no iteration reached, so every
// clip has its ids. `transcribe(clip, check)` resolves to {clip, frontend_ms, encoder_ms,
// first_token_ms, token_ms, total_ms, ids}. Returns the timing protocol's result (`timed`,
// timing.js), the records of every iteration after the cold one (the reply's speech.clips) and
// each clip's ids.
import {timeIterations} from './timing.js';

export async function timeTranscriptions(spec, clips, transcribe) {
  const transcripts = new Array(clips).fill(null);
  const records = [];
  let cold = true;
  const once = async (index) => {
    const {ids, total_ms: totalMs, ...record} = await transcribe(index === null ? 0 : index % clips, cold);
    cold = false;
    transcripts[record.clip] = ids;
    if (index !== null) records.push(record);
    return totalMs;
  };
  const every = Math.min(spec.max_iterations, Math.max(spec.min_iterations, clips));  // every clip timed
  const timing = {...spec, min_iterations: every, least_samples: Math.max(spec.least_samples || 1, every)};
  const timed = await timeIterations(timing, once, {batchable: false});
  for (let c = 0; c < clips; c++) if (transcripts[c] === null) transcripts[c] = (await transcribe(c, false)).ids;
  return {timed, records, transcripts};
}

// Each clip's ids into the reply's int32 [clips, maxTokens] output at `byteOffset`, -1 after its end.
export function writeTranscripts(output, byteOffset, transcripts, maxTokens) {
  const tokens = new Int32Array(output, byteOffset, transcripts.length * maxTokens).fill(-1);
  transcripts.forEach((ids, c) => tokens.set(ids, c * maxTokens));
}
