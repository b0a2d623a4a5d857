// Token embeddings: x[r, :] = table[ids[r], :] * SCALE for the ROWS rows of this forward pass
// (Gemma scales by sqrt(hidden)).
override ROWS: u32;
override HIDDEN: u32;
override VOCAB: u32;
override SCALE: f32 = 1.0;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= ROWS * HIDDEN) { return; }
  let r = i / HIDDEN;
  let token = u32(clamp(ids[r], 0, i32(VOCAB) - 1));
  x[i] = table[token * HIDDEN + i % HIDDEN] * SCALE;
}
