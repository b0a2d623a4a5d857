// 8/4/2-bit weights: signed integers packed into u32 words (first element in the lowest bits,
// rows contiguous), blockwise float32 scales and packed zero points along K. Dequantized in the
// shader as (q - zero_point) * scale, exactly as WebNN dequantizeLinear; f32 accumulation.
// Each word is dequantized into vec4s that meet the activations 4 at a time.
override M: u32;
override K: u32;
override N: u32;
override BITS: u32;
override BLOCK_SIZE: u32;
const TILE_M: u32 = 4u;

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> wq: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zero_points: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

fn signed_field(word: u32, offset: u32) -> f32 {
  // extractBits on i32 sign-extends the field.
  return f32(extractBits(bitcast<i32>(word), offset, BITS));
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let n = gid.x;
  let m0 = gid.y * TILE_M;
  if (n >= N || m0 >= M) { return; }
  let per_word = 32u / BITS;
  let k4 = K / 4u;
  let blocks = K / BLOCK_SIZE;
  let words_per_block = BLOCK_SIZE / per_word;
  var acc = array<f32, TILE_M>(0.0, 0.0, 0.0, 0.0);
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
  for (var t = 0u; t < TILE_M; t++) {
    if (m0 + t < M) { out[(m0 + t) * N + n] = acc[t]; }
  }
}
