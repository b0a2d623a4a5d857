// Int8 activations of a whole model's linear layer (W8A8 / W4A8): x float32 [ROWS, K] becomes
// int8, four to a u32 word (first in the lowest bits), the layout shaders/matmul_dp4a.wgsl reads.
// q = clamp(round(x / scale) + zero_point, -128, 127), round half to even (WGSL round), with the
// layer input's calibrated scale and zero point (models/calibration.py) read from the x_quant
// buffer (float32 scale, int32 zero point; the buffer the layer's DP4A kernel binds too), so
// layers of one shape share one pipeline; the float64 reference quantizes the same way
// (architectures/bert/reference.py). One invocation per word; WORDS = ROWS * K / 4.
override WORDS: u32;

struct ActQuant {
  scale: f32,
  zero_point: i32,
}

@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= WORDS) { return; }
  // Clamped in float (exact for these small integers), so the conversion never overflows.
  let q = vec4<i32>(clamp(round(x[i] / x_quant.scale) + f32(x_quant.zero_point), vec4<f32>(-128.0), vec4<f32>(127.0)));
  let b = vec4<u32>(q) & vec4<u32>(0xffu);
  xq[i] = b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}
