// The decoder's input rows: x[r] = tokens[ids[r]] + positions[pos + r] (learned positions; the
// position is how far the KV cache has reached). One invocation per element.
override ROWS: u32;
override HIDDEN: u32;
override VOCAB: u32;

@group(0) @binding(0) var<storage, read> ids: array<i32>;
@group(0) @binding(1) var<storage, read> tokens: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<u32>;
@group(0) @binding(4) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ROWS * HIDDEN) { return; }
  let r = gid.x / HIDDEN;
  let j = gid.x % HIDDEN;
  let id = u32(clamp(ids[r], 0, i32(VOCAB) - 1));
  x[gid.x] = tokens[id * HIDDEN + j] + positions[(pos[0] + r) * HIDDEN + j];
}
