// Cross-attention of the decoder's rows over all KEYS encoder positions: for row r and head h,
// ctx = softmax(q k^T / sqrt(HEAD_DIM)) v, k and v the layer's keys and values of the encoder's
// output [KEYS, HEADS * HEAD_DIM], computed once per clip. One invocation per (row, head); an
// online softmax (running max and sum).
override ROWS: u32;
override HEADS: u32;
override KEYS: u32;
const HEAD_DIM: u32 = {HEAD_DIM}u;
const D4: u32 = HEAD_DIM / 4u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ROWS * HEADS) { return; }
  let r = gid.x / HEADS;
  let h = gid.x % HEADS;
  let scale = 1.0 / sqrt(f32(HEAD_DIM));
  var qi: array<vec4<f32>, D4>;
  var acc: array<vec4<f32>, D4>;
  let qo = (r * HEADS + h) * D4;
  for (var d = 0u; d < D4; d++) { qi[d] = q[qo + d]; }
  var mx = -3.0e38;
  var l = 0.0;
  for (var j = 0u; j < KEYS; j++) {
    let ko = (j * HEADS + h) * D4;
    var s = 0.0;
    for (var d = 0u; d < D4; d++) { s += dot(qi[d], k[ko + d]); }
    s = s * scale;
    let m_new = max(mx, s);
    let corr = exp(mx - m_new);
    let e = exp(s - m_new);
    l = l * corr + e;
    for (var d = 0u; d < D4; d++) { acc[d] = acc[d] * corr + e * v[ko + d]; }
    mx = m_new;
  }
  let inv = 1.0 / l;
  for (var d = 0u; d < D4; d++) { ctx[qo + d] = acc[d] * inv; }
}
