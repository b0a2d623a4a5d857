// Pre-norm residual step: x += y (when ADD), then h = LayerNorm(x) over HIDDEN for rows
// ROW0 .. ROW0 + ROWS_OUT - 1 of x, written to h's rows 0 .. ROWS_OUT - 1. With ADD the sum is
// written back to every row of x (ROWS of them), so the residual stream stays whole.
override ROWS: u32;
override ROWS_OUT: u32;
override ROW0: u32 = 0u;
override HIDDEN: u32;
override EPS: f32;
override ADD: bool;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  if (r >= ROWS) { return; }
  let o = r * HIDDEN;
  if (ADD) {
    for (var j = 0u; j < HIDDEN; j++) { x[o + j] = x[o + j] + y[o + j]; }
  }
  if (r < ROW0 || r >= ROW0 + ROWS_OUT) { return; }
  let stats = norm_stats(o);
  let ho = (r - ROW0) * HIDDEN;
  for (var j = 0u; j < HIDDEN; j++) { h[ho + j] = (x[o + j] - stats.x) * stats.y * gamma[j] + beta[j]; }
}

//@include norm_stats.wgsl
