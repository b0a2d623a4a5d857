// The encoder's convolutions (kernel 3, padding 1, stride STRIDE) with GELU, written time-major:
// out[t, c] = gelu(bias[c] + sum_{i, j} w[c, i, j] in(i, t * STRIDE + j - 1)) (+ pos[t, c] when
// ADD_POS: the sinusoidal positions after the second). The input is channel-major [IN, FRAMES]
// (the log-mel features) or, with IN_TIME_MAJOR, time-major [FRAMES, IN] (the first conv's
// output). Weights stay float32. One invocation per output (t, c).
override FRAMES_IN: u32;
override FRAMES_OUT: u32;
override IN: u32;
override OUT: u32;
override STRIDE: u32;
override IN_TIME_MAJOR: bool;
override ADD_POS: bool;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

fn erfc_nr(v: f32) -> f32 {
  let z = abs(v);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277)))))))));
  return select(2.0 - r, r, v >= 0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= FRAMES_OUT * OUT) { return; }
  let t = gid.x / OUT;
  let c = gid.x % OUT;
  var s = bias[c];
  for (var j = 0u; j < 3u; j++) {
    let src = i32(t * STRIDE + j) - 1;
    if (src < 0 || src >= i32(FRAMES_IN)) { continue; }
    let u = u32(src);
    for (var i = 0u; i < IN; i++) {
      let v = select(x[i * FRAMES_IN + u], x[u * IN + i], IN_TIME_MAJOR);
      s += w[(c * IN + i) * 3u + j] * v;
    }
  }
  var g = 0.5 * s * erfc_nr(-s * 0.70710678118654752);
  if (ADD_POS) { g += pos[t * OUT + c]; }
  out[t * OUT + c] = g;
}
