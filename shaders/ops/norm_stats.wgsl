// The mean of row o of x (HIDDEN values) and 1 / sqrt(its variance + EPS), in two passes: what
// every layer norm kernel normalises a row with.
fn norm_stats(o: u32) -> vec2<f32> {
  var sum = 0.0;
  for (var j = 0u; j < HIDDEN; j++) { sum += x[o + j]; }
  let mean = sum / f32(HIDDEN);
  var sq = 0.0;
  for (var j = 0u; j < HIDDEN; j++) {
    let d = x[o + j] - mean;
    sq += d * d;
  }
  return vec2<f32>(mean, inverseSqrt(sq / f32(HIDDEN) + EPS));
}
