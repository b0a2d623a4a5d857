// RMSNorm in place: each of the ROWS rows of HIDDEN values of x becomes
// x[r] / sqrt(mean(x[r]^2) + EPS) * (w + OFFSET): Gemma's norms after attention and after the
// feed-forward, and its per-head query and key norms (a value of several heads normed as rows x
// heads rows of the head's size). One invocation per row.
override ROWS: u32;
override HIDDEN: u32;
override EPS: f32;
override OFFSET: f32 = 0.0;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ROWS) { return; }
  let o = gid.x * HIDDEN;
  var sq = 0.0;
  for (var j = 0u; j < HIDDEN; j++) {
    let v = x[o + j];
    sq += v * v;
  }
  let inv = inverseSqrt(sq / f32(HIDDEN) + EPS);
  for (var j = 0u; j < HIDDEN; j++) {
    x[o + j] = x[o + j] * inv * (w[j] + OFFSET);
  }
}
