// Residual + layer norm, in place: x = LayerNorm(y + x) over the hidden size, y the linear
// layer's output (bias included). One invocation per token row.
override ROWS: u32;
override HIDDEN: u32;
override EPS: f32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  if (r >= ROWS) { return; }
  let o = r * HIDDEN;
  var sum = 0.0;
  for (var j = 0u; j < HIDDEN; j++) {
    let v = y[o + j] + x[o + j];
    x[o + j] = v;
    sum += v;
  }
  let mean = sum / f32(HIDDEN);
  var sq = 0.0;
  for (var j = 0u; j < HIDDEN; j++) {
    let d = x[o + j] - mean;
    sq += d * d;
  }
  let inv = inverseSqrt(sq / f32(HIDDEN) + EPS);
  for (var j = 0u; j < HIDDEN; j++) {
    x[o + j] = (x[o + j] - mean) * inv * gamma[j] + beta[j];
  }
}
