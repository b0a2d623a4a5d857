"""Plain torch.onnx.export of LlamaForCausalLM with KV cache as flat inputs/outputs.
usage: python export_torch_kv.py MODEL_DIR OUT.onnx [dynamo|legacy] [sdpa|eager]
Inputs : input_ids[b,s] int64, attention_mask[b,past+s] int64, position_ids[b,s] int64,
         past_key_values.{i}.key / .value [b, kv_heads, past, head_dim] float32
Outputs: logits[b,s,vocab], present.{i}.key / .value [b, kv_heads, past+s, head_dim]
"""
import sys, time, torch, numpy as np, transformers
from transformers import LlamaForCausalLM, DynamicCache

model_dir, out = sys.argv[1], sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else "dynamo"
attn = sys.argv[4] if len(sys.argv) > 4 else "sdpa"

class KVWrapper(torch.nn.Module):
    def __init__(self, m):
        super().__init__(); self.m = m; self.cfg = m.config
        self.L = m.config.num_hidden_layers
    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = DynamicCache(config=self.cfg)
        for i in range(self.L):
            cache.update(past[2 * i], past[2 * i + 1], i)
        o = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                   past_key_values=cache, use_cache=True, return_dict=True)
        pres = []
        for layer in o.past_key_values.layers:
            pres += [layer.keys, layer.values]
        return (o.logits, *pres)

m = LlamaForCausalLM.from_pretrained(model_dir, attn_implementation=attn).eval()
cfg = m.config
L, KV, HD = cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
w = KVWrapper(m).eval()

def make_inputs(b, s, p, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, cfg.vocab_size, (b, s), generator=g)
    am = torch.ones(b, p + s, dtype=torch.int64)
    pos = torch.arange(p, p + s).unsqueeze(0).expand(b, s).contiguous()
    past = [torch.randn(b, KV, p, HD, generator=g) for _ in range(2 * L)]
    return ids, am, pos, past

in_names = ["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{i}.{t}" for i in range(L) for t in ("key", "value")]
out_names = ["logits"] + [f"present.{i}.{t}" for i in range(L) for t in ("key", "value")]
ids, am, pos, past = make_inputs(2, 3, 4)   # non-degenerate sizes for tracing
args = (ids, am, pos, *past)
t0 = time.time()
if mode == "legacy":
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
           "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    for n in in_names[3:]: dyn[n] = {0: "batch", 2: "past"}
    for n in out_names[1:]: dyn[n] = {0: "batch", 2: "total"}
    torch.onnx.export(w, args, out, input_names=in_names, output_names=out_names,
                      dynamic_axes=dyn, opset_version=18, dynamo=False)
else:
    D = torch.export.Dim.DYNAMIC   # let torch.export infer relations (total = seq + past)
    ds = ({0: D, 1: D}, {0: D, 1: D}, {0: D, 1: D}, tuple({0: D, 2: D} for _ in range(2 * L)))  # *past is one tuple arg
    ep = torch.onnx.export(w, args, None, input_names=in_names, output_names=out_names,
                           dynamic_shapes=ds, opset_version=18, dynamo=True)
    ep.save(out)
    # Dim.DYNAMIC leaves names like s10/s70; give the graph I/O readable, consistent names
    import onnx
    mp = onnx.load(out)
    names = {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "total"], "position_ids": ["batch", "seq"],
             "logits": ["batch", "seq", None]}
    for vi in list(mp.graph.input) + list(mp.graph.output):
        want = names.get(vi.name) or (["batch", None, "past", None] if vi.name.startswith("past") else ["batch", None, "total", None])
        for d, n in zip(vi.type.tensor_type.shape.dim, want):
            if n: d.dim_param = n
    onnx.save(mp, out)
print(f"exported {mode}/{attn} in {time.time()-t0:.1f}s -> {out}")

import onnxruntime as ort
sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
print("inputs :", [(i.name, i.shape) for i in sess.get_inputs()])
print("outputs:", [(o.name, o.shape) for o in sess.get_outputs()])
from collections import Counter
import onnx
print("ops:", dict(Counter(n.op_type for n in onnx.load(out).graph.node)))

def check(b, s, p, seed):
    ids, am, pos, past = make_inputs(b, s, p, seed)
    with torch.no_grad(): ref = w(ids, am, pos, *past)
    feed = {n: t.numpy() for n, t in zip(in_names, (ids, am, pos, *past))}
    got = sess.run(out_names, feed)
    d = max(float(np.abs(r.numpy() - g).max()) for r, g in zip(ref, got))
    print(f"  b={b} s={s} past={p}: present shape {got[1].shape}, max|diff|={d:.2e}")
    return d

# prefill (past=0), decode (s=1), and a real greedy loop: prefill then 1 decode step
for b, s, p in [(1, 5, 0), (1, 1, 5), (2, 3, 4), (1, 7, 9)]:
    check(b, s, p, b * 100 + s * 10 + p)

# end-to-end: prefill 5 tokens, then one decode step, vs HF generate-free forward
ids = torch.tensor([[1, 5, 6, 7, 8]])
feed = {"input_ids": ids.numpy(), "attention_mask": np.ones((1, 5), np.int64), "position_ids": np.arange(5)[None]}
for n in in_names[3:]: feed[n] = np.zeros((1, KV, 0, HD), np.float32)
o = sess.run(out_names, feed); nxt = int(o[0][0, -1].argmax())
feed = {"input_ids": np.array([[nxt]]), "attention_mask": np.ones((1, 6), np.int64), "position_ids": np.array([[5]])}
for n, v in zip(in_names[3:], o[1:]): feed[n] = v
o2 = sess.run(out_names, feed)
with torch.no_grad(): full = m(torch.cat([ids, torch.tensor([[nxt]])], 1)).logits[0, -1].numpy()
print("prefill+decode vs full-sequence logits max|diff| =", float(np.abs(o2[0][0, -1] - full).max()))
