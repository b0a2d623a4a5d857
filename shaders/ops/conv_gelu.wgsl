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

//@include gelu.wgsl

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
  var g = gelu(s);
  if (ADD_POS) { g += pos[t * OUT + c]; }
  out[t * OUT + c] = g;
}
