// The self-attention KV cache: rows 0..ROWS-1 of k and v written at positions pos .. pos+ROWS-1.
override ROWS: u32;
override WIDTH: u32;

@group(0) @binding(0) var<storage, read> k: array<f32>;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read> pos: array<u32>;
@group(0) @binding(3) var<storage, read_write> kcache: array<f32>;
@group(0) @binding(4) var<storage, read_write> vcache: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ROWS * WIDTH) { return; }
  let at = pos[0] * WIDTH + gid.x;
  kcache[at] = k[gid.x];
  vcache[at] = v[gid.x];
}
