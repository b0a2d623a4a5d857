// 8/4/2-bit weights: signed integers packed into u32 words (first element in the lowest bits,
// rows contiguous), blockwise float32 scales and packed zero points along K. Dequantized in the
// shader as (q - zero_point) * scale, exactly as WebNN dequantizeLinear; f32 accumulation.
// Each word is dequantized into vec4s that meet the activations 4 at a time.
override BITS: u32;
override BLOCK_SIZE: u32;

@group(0) @binding(2) var<storage, read> wq: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read> zero_points: array<u32>;

fn signed_field(word: u32, offset: u32) -> f32 {
  // extractBits on i32 sign-extends the field.
  return f32(extractBits(bitcast<i32>(word), offset, BITS));
}

fn accumulate(n: u32, m0: u32) -> array<f32, TILE_M> {
  let per_word = 32u / BITS;
  let k4 = K / 4u;
  let blocks = K / BLOCK_SIZE;
  let words_per_block = BLOCK_SIZE / per_word;
  var acc: array<f32, TILE_M>;
  for (var b = 0u; b < blocks; b++) {
    let p = n * blocks + b;
    let scale = scales[p];
    let zp_bit = p * BITS;
    let zp = vec4<f32>(signed_field(zero_points[zp_bit / 32u], zp_bit % 32u));
    let word0 = (n * K + b * BLOCK_SIZE) / per_word;
    for (var wi = 0u; wi < words_per_block; wi++) {
      let word = wq[word0 + wi];
      let k0 = b * BLOCK_SIZE + wi * per_word;
      for (var g = 0u; g < per_word / 4u; g++) {
        let o = 4u * g * BITS;
        let q = vec4<f32>(signed_field(word, o), signed_field(word, o + BITS),
                          signed_field(word, o + 2u * BITS), signed_field(word, o + 3u * BITS));
        let wv = (q - zp) * scale;
        let kx = (k0 + 4u * g) / 4u;
        for (var t = 0u; t < TILE_M; t++) {
          if (m0 + t < M) { acc[t] += dot(x[(m0 + t) * k4 + kx], wv); }
        }
      }
    }
  }
  return acc;
}
