// Whisper's greedy choice on the device (architectures/whisper/decoding.py's rule): the argmax of
// one row of logits, the lowest id among equal maxima, with every id from SUPPRESS_FROM on (the
// timestamps) never chosen and, for the first id of a transcript (count 0), BEGIN_A and BEGIN_B
// (a blank, the end of text) not either. Writes it as the next step's input id and appends it
// to the generated ids; the position advances by the ROWS this pass added to the KV cache. One
// workgroup.
override VOCAB: u32;
override ROWS: u32;
override SUPPRESS_FROM: u32;
override BEGIN_A: u32;
override BEGIN_B: u32;
const WG: u32 = 256u;

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> generated: array<i32>;
@group(0) @binding(3) var<storage, read_write> pos: array<u32>;
@group(0) @binding(4) var<storage, read_write> count: array<u32>;

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
    if (first && (i == BEGIN_A || i == BEGIN_B)) { continue; }
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
