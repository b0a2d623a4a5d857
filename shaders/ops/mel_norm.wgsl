// Whisper's front end, step 3 (one workgroup): clamp every log-mel value to at most 8 below the
// clip's maximum, then (v + 4) / 4, in place.
override COUNT: u32;
const WG: u32 = 256u;

var<workgroup> best: array<f32, WG>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  var m = -3.4e38;
  for (var i = t; i < COUNT; i += WG) { m = max(m, features[i]); }
  best[t] = m;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (t < stride) { best[t] = max(best[t], best[t + stride]); }
    workgroupBarrier();
  }
  let floor_v = best[0] - 8.0;
  for (var i = t; i < COUNT; i += WG) { features[i] = (max(features[i], floor_v) + 4.0) / 4.0; }
}
