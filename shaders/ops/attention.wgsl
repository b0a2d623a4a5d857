// Scaled dot-product attention of each query row over a set of keys, for one (row, head) per
// invocation: ctx = softmax(q k^T / sqrt(HEAD_DIM) (+ mask)) v with an online softmax (running
// max and sum), so no row of scores is stored. q and ctx are [ROWS, HEADS * HEAD_DIM]; k and v
// rows hold KV_HEADS heads (grouped-query: query head h reads key/value head h / (HEADS /
// KV_HEADS)). Which keys, by SOURCE:
//   0 self:  the SEQ rows of the query's own sequence (rows are sequences of SEQ), a key whose
//            aux (the padding mask) is 0 masked with -1e30;
//   1 cache: the KV cache's positions 0 .. aux[0] + row (causal; aux[0] the position the cache
//            had reached before this pass), with a WINDOW only the last WINDOW of them;
//   2 cross: all KEYS rows (the encoder's keys and values).
// HEAD_DIM is filled in by Python (a multiple of 4).
override ROWS: u32;
override HEADS: u32;
override KV_HEADS: u32;
override SOURCE: u32;
override SEQ: u32 = 1u;
override KEYS: u32 = 0u;
override WINDOW: u32 = 0u;
const HEAD_DIM: u32 = {HEAD_DIM}u;
const D4: u32 = HEAD_DIM / 4u;
const MASKED: f32 = -1e30;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ROWS * HEADS) { return; }
  let r = gid.x / HEADS;
  let h = gid.x % HEADS;
  let kvh = h / (HEADS / KV_HEADS);
  var key0 = 0u;
  var count = KEYS;
  if (SOURCE == 0u) {
    key0 = r / SEQ * SEQ;
    count = SEQ;
  } else if (SOURCE == 1u) {
    count = aux[0] + r + 1u;
    if (WINDOW > 0u && count > WINDOW) {
      key0 = count - WINDOW;
      count = WINDOW;
    }
  }
  let scale = 1.0 / sqrt(f32(HEAD_DIM));
  var qi: array<vec4<f32>, D4>;
  var acc: array<vec4<f32>, D4>;
  let qo = (r * HEADS + h) * D4;
  for (var d = 0u; d < D4; d++) { qi[d] = q[qo + d]; }
  var mx = -3.0e38;
  var l = 0.0;
  for (var j = 0u; j < count; j++) {
    let ko = ((key0 + j) * KV_HEADS + kvh) * D4;
    var s = 0.0;
    for (var d = 0u; d < D4; d++) { s += dot(qi[d], k[ko + d]); }
    if (SOURCE == 0u) {
      s = s * scale + select(MASKED, 0.0, aux[key0 + j] > 0u);
    } else {
      s = s * scale;
    }
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
