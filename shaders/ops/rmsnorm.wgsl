// Residual + RMSNorm: for rows ROW0 .. ROW0 + ROWS_OUT - 1, x[r] += y[r] (when ADD), then
// h[r - ROW0] = x[r] / sqrt(mean(x[r]^2) + EPS) * (w + OFFSET), as architectures/llama/reference.py
// (Gemma's norms: OFFSET 1). One invocation per row.
override ROWS_OUT: u32;
override ROW0: u32 = 0u;
override HIDDEN: u32;
override EPS: f32;
override ADD: bool = true;
override OFFSET: f32 = 0.0;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ROWS_OUT) { return; }
  let o = (ROW0 + gid.x) * HIDDEN;
  let out = gid.x * HIDDEN;
  var sq = 0.0;
  for (var j = 0u; j < HIDDEN; j++) {
    var v = x[o + j];
    if (ADD) {
      v += y[o + j];
      x[o + j] = v;
    }
    sq += v * v;
  }
  let inv = inverseSqrt(sq / f32(HIDDEN) + EPS);
  for (var j = 0u; j < HIDDEN; j++) {
    h[out + j] = x[o + j] * inv * (w[j] + OFFSET);
  }
}
