// SwiGLU: g = silu(g) * u, element by element (g the gate projection's output, u the up one's).
override COUNT: u32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= COUNT) { return; }
  let a = g[i];
  g[i] = a / (1.0 + exp(-a)) * u[i];
}
