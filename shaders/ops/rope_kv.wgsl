// Rotary positions, and the KV cache filled: for each row r of this pass (position pos + r),
// query head slots rotate q in place; key/value head slots rotate k and write it, and v, into the
// caches at that position. Pairs (i, i + HEAD_DIM/2) rotate by the angle of pair i, from the
// cos/sin tables Python computed in float64 ([positions, HEAD_DIM/2]), as transformers' rotate_half.
override ROWS: u32;
override HEADS: u32;
override KV_HEADS: u32;
const HEAD_DIM: u32 = {HEAD_DIM}u;
const HALF: u32 = HEAD_DIM / 2u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let slots = HEADS + KV_HEADS;
  if (gid.x >= ROWS * slots) { return; }
  let r = gid.x / slots;
  let slot = gid.x % slots;
  let p = pos[0] + r;
  let t = p * HALF;
  if (slot < HEADS) {
    let o = (r * HEADS + slot) * HEAD_DIM;
    for (var i = 0u; i < HALF; i++) {
      let a = q[o + i];
      let b = q[o + i + HALF];
      q[o + i] = a * cos_t[t + i] - b * sin_t[t + i];
      q[o + i + HALF] = b * cos_t[t + i] + a * sin_t[t + i];
    }
    return;
  }
  let j = slot - HEADS;
  let src = (r * KV_HEADS + j) * HEAD_DIM;
  let dst = (p * KV_HEADS + j) * HEAD_DIM;
  for (var i = 0u; i < HALF; i++) {
    let a = k[src + i];
    let b = k[src + i + HALF];
    kcache[dst + i] = a * cos_t[t + i] - b * sin_t[t + i];
    kcache[dst + i + HALF] = b * cos_t[t + i] + a * sin_t[t + i];
  }
  for (var i = 0u; i < HEAD_DIM; i++) {
    vcache[dst + i] = v[src + i];
  }
}
