// The self-attention KV cache: rows 0..ROWS-1 of k and v written at positions pos .. pos+ROWS-1.
override ROWS: u32;
override WIDTH: u32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ROWS * WIDTH) { return; }
  let at = pos[0] * WIDTH + gid.x;
  kcache[at] = k[gid.x];
  vcache[at] = v[gid.x];
}
