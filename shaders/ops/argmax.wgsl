// Greedy choice on the device: the argmax of one row of logits (the lowest id among equal maxima,
// as numpy), written as the next step's input id and appended to the generated ids; then the
// position advances by the ROWS this pass added to the KV cache. Ids never chosen: SUPPRESS (a
// decoder's end of sequence), every id from SUPPRESS_FROM on (Whisper's timestamps), and for the
// first id of a transcript (count 0) BEGIN_A and BEGIN_B (a blank, the end of text:
// architectures/whisper/decoding.py's rule); -1 (and SUPPRESS_FROM's default) for none. One
// workgroup.
override VOCAB: u32;
override ROWS: u32;
override SUPPRESS: i32 = -1;
override SUPPRESS_FROM: u32 = 0xffffffffu;
override BEGIN_A: i32 = -1;
override BEGIN_B: i32 = -1;
const WG: u32 = 256u;

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  let first = count[0] == 0u;
  var bv = -3.4e38;
  var bi = 0xffffffffu;
  for (var i = t; i < min(VOCAB, SUPPRESS_FROM); i += WG) {
    let v = logits[i];
    let id = i32(i);
    if (id == SUPPRESS || (first && (id == BEGIN_A || id == BEGIN_B))) { continue; }
    if (v > bv || (v == bv && i < bi)) {
      bv = v;
      bi = i;
    }
  }
  best_v[t] = bv;
  best_i[t] = bi;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (t < stride) {
      let ov = best_v[t + stride];
      let oi = best_i[t + stride];
      if (ov > best_v[t] || (ov == best_v[t] && oi < best_i[t])) {
        best_v[t] = ov;
        best_i[t] = oi;
      }
    }
    workgroupBarrier();
  }
  if (t == 0u) {
    let id = i32(best_i[0]);
    ids[0] = id;
    generated[count[0]] = id;
    count[0] = count[0] + 1u;
    pos[0] = pos[0] + ROWS;
  }
}
