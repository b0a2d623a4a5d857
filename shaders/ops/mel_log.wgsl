// Whisper's front end, step 2: the mel filter bank and log10, features[m, t] =
// log10(max(1e-10, sum_f filters[f, m] power[t, f])), mel-major [MELS, FRAMES] as
// WhisperFeatureExtractor returns them. One invocation per (mel bin, frame).
override FRAMES: u32;
override MELS: u32;
const BINS: u32 = 201u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= FRAMES * MELS) { return; }
  let m = gid.x / FRAMES;
  let t = gid.x % FRAMES;
  var s = 0.0;
  for (var f = 0u; f < BINS; f++) { s += filters[f * MELS + m] * power[t * BINS + f]; }
  features[m * FRAMES + t] = log(max(s, 1e-10)) * 0.43429448190325176;
}
