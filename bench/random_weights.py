"""A speed fixture: a copy of a GGUF whose quantised matrices are random blocks of another format.

For formats no tool here quantises to (llama.cpp quantises IQ2_XXS only with an importance
matrix; gguf.quants has no IQ quantiser): every 2-D tensor but the token embeddings whose rows
are a whole number of the format's blocks becomes random blocks, with each block's f16 scale
drawn around --scale (the weights' magnitude then stays near a trained model's, so activations
neither vanish nor overflow). The model's logits are noise: time it (bench/vs_llamacpp.py
--model PATH), do not judge its tokens.

    PYTHONPATH=python python bench/random_weights.py --model qwen15 --type IQ2_XXS OUT.gguf
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import gguf
import numpy as np

from ds4 import known_models

# Per format this fixture writes: the byte offset of a block's one f16 scale (IQ1_M: of the four
# u16 whose top nibbles hold it) and the default scale, which keeps the weights near 0.02.
FORMATS = {
    "IQ1_S": (0, 3e-3), "IQ1_M": (48, 3e-3), "IQ2_XXS": (0, 4e-4), "IQ2_XS": (0, 4e-4), "IQ2_S": (0, 4e-4),
    "IQ3_XXS": (0, 4e-4), "IQ3_S": (0, 4e-4), "IQ4_XS": (0, 4e-4), "Q6_K": (208, 4e-4), "Q8_0": (0, 4e-4),
    "TQ1_0": (52, 2e-2), "TQ2_0": (64, 2e-2),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", default="qwen15", help="a known model's name or a GGUF path")
    ap.add_argument("--type", default="IQ2_XXS", choices=sorted(FORMATS))
    ap.add_argument("--scale", type=float, help="the blocks' f16 scale, +-50 %% (default: the format's, FORMATS)")
    args = ap.parse_args()
    src = args.model if os.path.exists(args.model) else str(known_models.model_path(args.model))
    qt = gguf.GGMLQuantizationType[args.type]
    block, size = gguf.GGML_QUANT_SIZES[qt]
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(args.out, str(r.fields["general.architecture"].contents()))
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        w.add_key_value(name, f.contents(), f.types[0], sub_type=f.types[1] if f.types[0] == gguf.GGUFValueType.ARRAY else None)
    rng = np.random.default_rng(0)
    replaced = 0
    for t in r.tensors:
        ne = [int(x) for x in t.shape]
        quantised = t.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
        if t.name != "token_embd.weight" and len(ne) == 2 and ne[0] % block == 0 and quantised:
            nb = ne[0] * ne[1] // block
            raw = rng.integers(0, 256, (nb, size), dtype=np.uint8)
            at, scale = FORMATS[args.type]
            d = ((args.scale or scale) * rng.uniform(0.5, 1.5, nb)).astype(np.float16)
            if args.type == "IQ1_M":
                for k, bits in enumerate(d.view(np.uint16) >> np.arange(0, 16, 4, dtype=np.uint16)[:, None]):
                    raw[:, at + 2 * k + 1] = (raw[:, at + 2 * k + 1] & 0x0F) | ((bits & 0x0F) << 4).astype(np.uint8)
            else:
                raw[:, at:at + 2] = d.view(np.uint8).reshape(nb, 2)
            shape = [ne[1], ne[0] // block * size]
            w.add_tensor(t.name, raw.reshape(shape), raw_shape=shape, raw_dtype=qt)
            replaced += 1
        else:
            w.add_tensor(t.name, np.array(t.data), raw_shape=list(t.data.shape), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: {replaced} matrices of random {args.type} blocks, {args.out.stat().st_size / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
