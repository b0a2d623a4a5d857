// Float zero points (a float offset per block: the offset and hqq quantizers,
// precision/quantizers.py): one float32 per block, in the unsigned code domain the kernels decode
// the weights into, so a weight is (code - zero_point) * scale as the quantizer holds it.
// Appended to a packed-weight kernel by engines/wgsl/kernels.py, {ZERO_BINDING} filled in.
@group(0) @binding({ZERO_BINDING}) var<storage, read> zero_points: array<f32>;

fn zero_point(p: u32) -> f32 {
  return zero_points[p];
}
