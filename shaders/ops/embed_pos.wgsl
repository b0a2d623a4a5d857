// The decoder's input rows: x[r] = tokens[ids[r]] * SCALE + positions[pos + r] (learned positions; the
// position is how far the KV cache has reached). One invocation per element.
override ROWS: u32;
override HIDDEN: u32;
override VOCAB: u32;
override SCALE: f32 = 1.0;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ROWS * HIDDEN) { return; }
  let r = gid.x / HIDDEN;
  let j = gid.x % HIDDEN;
  let id = u32(clamp(ids[r], 0, i32(VOCAB) - 1));
  x[gid.x] = tokens[id * HIDDEN + j] * SCALE + positions[(pos[0] + r) * HIDDEN + j];
}
