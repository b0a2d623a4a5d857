// Integer zero points (the minmax quantizer's): packed into u32 words like the weights (first
// block in the lowest bits), as signed fields decoded to the unsigned code domain by the same
// offset-binary XOR as the weights, so (q + offset) - (zero_point + offset) is exact in f32.
// Appended to a packed-weight kernel by engines/wgsl/kernels.py, {ZERO_BINDING} filled in.
@group(0) @binding({ZERO_BINDING}) var<storage, read> zero_points: array<u32>;

fn zero_point(p: u32) -> f32 {
  let bit = p * BITS;
  return f32(((zero_points[bit / 32u] ^ SIGN_BITS) >> (bit % 32u)) & FIELD_MASK);
}
