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
  for (var j = 0u; j < HIDDEN; j++) { x[o + j] = y[o + j] + x[o + j]; }
  let stats = norm_stats(o);
  for (var j = 0u; j < HIDDEN; j++) {
    x[o + j] = (x[o + j] - stats.x) * stats.y * gamma[j] + beta[j];
  }
}

//@include norm_stats.wgsl
