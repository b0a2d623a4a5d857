// Whisper's front end, step 1: the power spectrum of every frame. The clip's samples (at
// clip[0] in `audio`, clip[1] of them) are zero-padded to 30 s, then reflect-padded by
// N_FFT / 2 at both ends (center=True, as WhisperFeatureExtractor); frame t starts at t * HOP.
// power[t, f] = |sum_n window[n] x[t*HOP + n] e^(-2 pi i f n / N_FFT)|^2 for f in 0..N_FFT/2,
// a direct DFT (cos/sin tables indexed by f*n mod N_FFT). One invocation per (frame, bin).
override FRAMES: u32;
override TOTAL: u32;      // samples of the padded window (30 s)
const N_FFT: u32 = 400u;
const HOP: u32 = 160u;
const BINS: u32 = N_FFT / 2u + 1u;

fn sample(i: i32) -> f32 {
  // reflect padding of the zero-padded window: -1 -> 1, TOTAL -> TOTAL - 2
  var j = i;
  if (j < 0) { j = -j; }
  if (j >= i32(TOTAL)) { j = 2 * (i32(TOTAL) - 1) - j; }
  let u = u32(j);
  if (u >= clip[1]) { return 0.0; }
  return audio[clip[0] + u];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= FRAMES * BINS) { return; }
  let t = gid.x / BINS;
  let f = gid.x % BINS;
  let start = i32(t * HOP) - i32(N_FFT / 2u);
  var re = 0.0;
  var im = 0.0;
  for (var n = 0u; n < N_FFT; n++) {
    let v = window[n] * sample(start + i32(n));
    let k = (f * n) % N_FFT;
    re += v * cos_t[k];
    im -= v * sin_t[k];
  }
  power[t * BINS + f] = re * re + im * im;
}
