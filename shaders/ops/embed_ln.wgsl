// Embeddings of a BERT encoder: word[input_id] + position[s] + token_type[type], then layer
// norm over the hidden size. One invocation per token row (ROWS = batch * seq, row = b*SEQ + s).
override ROWS: u32;
override SEQ: u32;
override HIDDEN: u32;
override VOCAB: u32;
override TYPE_VOCAB: u32;
override EPS: f32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  if (r >= ROWS) { return; }
  let s = r % SEQ;
  let id = min(u32(max(input_ids[r], 0)), VOCAB - 1u);
  let tt = min(u32(max(token_type_ids[r], 0)), TYPE_VOCAB - 1u);
  let o = r * HIDDEN;
  for (var j = 0u; j < HIDDEN; j++) {
    x[o + j] = word[id * HIDDEN + j] + position[s * HIDDEN + j] + token_type[tt * HIDDEN + j];
  }
  let stats = norm_stats(o);
  for (var j = 0u; j < HIDDEN; j++) {
    x[o + j] = (x[o + j] - stats.x) * stats.y * gamma[j] + beta[j];
  }
}

//@include norm_stats.wgsl
