// Sentence embeddings: mean of the last hidden state over the attention mask, then unit L2
// norm (sentence-transformers), as workloads/encoder/prepared.py mean_pool_normalize. One invocation per
// (batch row b, hidden column j) sums over the sequence; the workgroup then reduces the row's
// squared norm. WORKGROUP is filled in by Python; HIDDEN may exceed it (columns are strided).
override SEQ: u32;
override HIDDEN: u32;
const WORKGROUP: u32 = {WORKGROUP}u;

var<workgroup> partial: array<f32, WORKGROUP>;

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let b = wid.x;
  var count = 0.0;
  for (var s = 0u; s < SEQ; s++) { count += f32(mask[b * SEQ + s]); }
  let denom = max(count, 1e-9);
  var sq = 0.0;
  for (var j = lid; j < HIDDEN; j += WORKGROUP) {
    var sum = 0.0;
    for (var s = 0u; s < SEQ; s++) {
      sum += x[(b * SEQ + s) * HIDDEN + j] * f32(mask[b * SEQ + s]);
    }
    let pooled = sum / denom;
    out[b * HIDDEN + j] = pooled;
    sq += pooled * pooled;
  }
  partial[lid] = sq;
  workgroupBarrier();
  for (var stride = WORKGROUP / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { partial[lid] += partial[lid + stride]; }
    workgroupBarrier();
  }
  let inv = 1.0 / max(sqrt(partial[0]), 1e-12);
  for (var j = lid; j < HIDDEN; j += WORKGROUP) {
    out[b * HIDDEN + j] = out[b * HIDDEN + j] * inv;
  }
}
