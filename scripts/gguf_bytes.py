"""What a decoded token reads, counted from a GGUF v3 file's header: the weight bytes and the KV
cache and recurrent state bytes (scripts/bench-peers' docstring says which tensors count)."""
import struct
import sys

# GGUF tensor types: bytes per block and weights per block.
GGML_TYPES = {0: (4, 1), 1: (2, 1), 2: (18, 32), 8: (34, 32), 30: (2, 1)}  # F32 F16 Q4_0 Q8_0 BF16


def gguf_header(path):
    """A GGUF v3 file's metadata (scalars, strings, numeric arrays; string arrays as their length)
    and the bytes of each tensor; reads the header only."""
    with open(path, "rb") as f:
        def take(fmt):
            n = struct.calcsize("<" + fmt)
            return struct.unpack("<" + fmt, f.read(n))[0]

        def value(t):
            if t == 8:
                return f.read(take("Q")).decode("utf-8", "replace")
            if t == 9:
                et, n = take("I"), take("Q")
                if et == 8:
                    for _ in range(n):
                        f.seek(take("Q"), 1)
                    return n
                if et == 9:
                    return [value(9) for _ in range(n)]
                if n > 4096:  # a long numeric array (token scores, types): not needed here
                    f.seek(n * struct.calcsize("<" + SCALARS[et]), 1)
                    return n
                return [take(SCALARS[et]) for _ in range(n)]
            return take(SCALARS[t])

        if take("I") != 0x46554747 or take("I") != 3:
            sys.exit(f"gguf_bytes: {path} is not a GGUF v3 file")
        n_t, n_kv = take("Q"), take("Q")
        meta = {}
        for _ in range(n_kv):
            key = f.read(take("Q")).decode("utf-8", "replace")
            meta[key] = value(take("I"))
        sizes = {}
        for _ in range(n_t):
            name = f.read(take("Q")).decode("utf-8", "replace")
            dims = [take("Q") for _ in range(take("I"))]
            ttype = take("I")
            take("Q")  # offset
            if ttype not in GGML_TYPES:
                sys.exit(f"gguf_bytes: {path}: tensor {name} has GGML type {ttype}, which this count does not know")
            count = 1
            for d in dims:
                count *= d
            bpb, wpb = GGML_TYPES[ttype]
            sizes[name] = count // wpb * bpb
    return meta, sizes


def gguf_weight_bytes(path):
    """Bytes a decoded token reads from a GGUF v3 file's tensors (see the docstring); header only."""
    _, sizes = gguf_header(path)
    if "output.weight" in sizes:
        sizes.pop("token_embd.weight", None)
    return sum(sizes.values())


KV_BYTES = {"f32": 4, "f16": 2}


def gguf_cache_bytes(path, prefill, decode, kv):
    """Bytes a decoded token reads from the KV cache (at the mean position it attends to) and from a
    linear-attention model's recurrent state (see the docstring)."""
    meta, _ = gguf_header(path)
    arch = meta["general.architecture"]

    def key(k, default=None):
        v = meta.get(f"{arch}.{k}", default)
        if v is None:
            sys.exit(f"gguf_bytes: {path} has no {arch}.{k}")
        return v

    layers = key("block_count")
    interval = key("full_attention_interval", 0)  # Qwen3.5: every interval-th layer attends
    attn_layers = layers // interval if interval else layers
    row = key("attention.head_count_kv") * (key("attention.key_length") + key("attention.value_length"))
    positions = prefill + (decode + 1) / 2
    kv_bytes = attn_layers * row * KV_BYTES[kv] * positions
    state = 0
    if interval:
        heads, k_dim, inner = key("ssm.time_step_rank"), key("ssm.state_size"), key("ssm.inner_size")
        conv = (key("ssm.conv_kernel") - 1) * (inner + 2 * key("ssm.group_count") * k_dim)
        state = (layers - attn_layers) * (heads * k_dim * (inner // heads) + conv) * 4
    return int(kv_bytes + state)


SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
