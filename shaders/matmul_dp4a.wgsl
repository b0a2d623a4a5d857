// int8 activations x 8- or 4-bit weights (W8A8, W4A8) with the WGSL packed_4x8_integer_dot_product
// built-ins: dot4I8Packed multiplies four signed int8 pairs and sums them in i32, exactly.
//   * x holds int8 activations, four to a u32 word (first in the lowest bits), with one
//     calibrated scale and zero point for the tensor, read from the x_quant buffer at binding 6
//     (float32 scale, int32 zero point), not override constants: layers of one shape share one
//     pipeline whatever their calibration;
//   * 8-bit weight words are already four int8; a 4-bit word becomes two such words
//     (extractBits sign-extends each field, pack4xI8 packs four of them);
//   * per block of BLOCK_SIZE along K, in integers: sum (qx - zx)(qw - zw)
//       = sum qx*qw - zw * sum qx - zx * sum qw + BLOCK_SIZE * zx * zw
//     (sum qx and sum qw by dot4I8Packed with 0x01010101), exact in i32; then one float
//     multiply by the block's weight scale, and x's scale once at the end.
// The //@groups / //@rows / //@cols lines are unrolled by Python as in matmul_quant.wgsl ({g}: one
// int8 word per group: 1 per weight word at 8 bits, 2 at 4 bits).
requires packed_4x8_integer_dot_product;
override BITS: u32;
override BLOCK_SIZE: u32;

struct ActQuant {
  scale: f32,
  zero_point: i32,
}

@group(0) @binding(2) var<storage, read> wq: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read> zero_points: array<u32>;
@group(0) @binding(6) var<storage, read> x_quant: ActQuant;

const ONES: u32 = 0x01010101u;

// Four signed int8 fields packed in a u32: group g of a weight word.
fn weight_int8x4(word: u32, g: u32) -> u32 {
  if (BITS == 8u) { return word; }
  let w = i32(word);
  let base = g * 16u;
  return pack4xI8(vec4<i32>(extractBits(w, base, 4u), extractBits(w, base + 4u, 4u),
                            extractBits(w, base + 8u, 4u), extractBits(w, base + 12u, 4u)));
}

fn accumulate(n0: u32, m0: u32) -> array<f32, TILE_M * TILE_N> {
  let per_word = 32u / BITS;
  let blocks = K / BLOCK_SIZE;
  let words_per_block = BLOCK_SIZE / per_word;
  let k4 = K / 4u;
  let x_scale = x_quant.scale;
  let x_zero = x_quant.zero_point;
  let corner = i32(BLOCK_SIZE) * x_zero;
  //@cols let col{j} = min(n0 + {j}u, N - 1u);
  //@rows let row{t} = min(m0 + {t}u, M - 1u) * k4;
  //@rows //@cols var acc{t}_{j} = 0.0;
  for (var b = 0u; b < blocks; b++) {
    //@cols let p{j} = col{j} * blocks + b;
    //@cols let zp_bit{j} = p{j} * BITS;
    //@cols let zw{j} = extractBits(i32(zero_points[zp_bit{j} / 32u]), zp_bit{j} % 32u, BITS);
    //@rows //@cols var dot{t}_{j} = 0i;
    //@rows var sx{t} = 0i;
    //@cols var sw{j} = 0i;
    for (var wi = 0u; wi < words_per_block; wi++) {
      //@cols let word{j} = wq[p{j} * words_per_block + wi];
      let kx = (b * BLOCK_SIZE + wi * per_word) / 4u;
      //@groups //@cols let w{g}_{j} = weight_int8x4(word{j}, {g}u);
      //@groups //@cols sw{j} += dot4I8Packed(w{g}_{j}, ONES);
      //@groups //@rows let x{g}_{t} = x[row{t} + kx + {g}u];
      //@groups //@rows sx{t} += dot4I8Packed(x{g}_{t}, ONES);
      //@groups //@rows //@cols dot{t}_{j} += dot4I8Packed(x{g}_{t}, w{g}_{j});
    }
    //@cols let scale{j} = scales[p{j}];
    //@rows //@cols acc{t}_{j} += scale{j} * f32(dot{t}_{j} - zw{j} * sx{t} - x_zero * sw{j} + corner * zw{j});
  }
  var acc: array<f32, TILE_M * TILE_N>;
  //@rows //@cols acc[{t}u * TILE_N + {j}u] = x_scale * acc{t}_{j};
  return acc;
}
