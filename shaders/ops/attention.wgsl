// Scaled dot-product self-attention with the padding mask: for each (batch b, head h, query i)
// ctx = softmax(q k^T / sqrt(HEAD_DIM) + (mask ? 0 : -1e30 for padded keys)) v, as
// architectures/bert/reference.py. One invocation per query row of a head; an online softmax (running max
// and sum) over the keys, so no row of scores is stored. q, k, v, ctx are [BATCH*SEQ, HIDDEN]
// with head h in columns h*HEAD_DIM.. (HEAD_DIM filled in by Python; a multiple of 4).
override BATCH: u32;
override SEQ: u32;
override HEADS: u32;
override HIDDEN: u32;
const HEAD_DIM: u32 = {HEAD_DIM}u;
const D4: u32 = HEAD_DIM / 4u;
const MASKED: f32 = -1e30;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x;
  if (idx >= BATCH * HEADS * SEQ) { return; }
  let i = idx % SEQ;
  let h = (idx / SEQ) % HEADS;
  let b = idx / (SEQ * HEADS);
  let h4 = HIDDEN / 4u;
  let scale = 1.0 / sqrt(f32(HEAD_DIM));
  var qi: array<vec4<f32>, D4>;
  var acc: array<vec4<f32>, D4>;
  let qo = (b * SEQ + i) * h4 + h * D4;
  for (var d = 0u; d < D4; d++) { qi[d] = q[qo + d]; }
  var mx = -3.0e38;
  var l = 0.0;
  for (var j = 0u; j < SEQ; j++) {
    let ko = (b * SEQ + j) * h4 + h * D4;
    var s = 0.0;
    for (var d = 0u; d < D4; d++) { s += dot(qi[d], k[ko + d]); }
    s = s * scale + select(MASKED, 0.0, mask[b * SEQ + j] > 0);
    let m_new = max(mx, s);
    let corr = exp(mx - m_new);
    let p = exp(s - m_new);
    l = l * corr + p;
    for (var d = 0u; d < D4; d++) { acc[d] = acc[d] * corr + p * v[ko + d]; }
    mx = m_new;
  }
  let inv = 1.0 / l;
  for (var d = 0u; d < D4; d++) { ctx[qo + d] = acc[d] * inv; }
}
