"""The model sizes that have names, written once.

``MODEL_PRESETS[name]`` holds the architecture sizes of a ``TransformerConfig``
(``d_model``, ``n_heads``, ``d_ff``, ``n_layers``); the vocabularies, ``max_len``,
dropout and the rest come from whoever builds the model:

* ``tiny``, ``small``, ``base``: CPU sizes, trained in minutes (``npformer train
  --preset``, ``tasks.translation.PRESETS``) and timed by ``npformer bench``;
* ``large``: the base model of "Attention Is All You Need" (Vaswani et al., 2017,
  Table 3: 512 / 8 / 2048 / 6, the defaults of ``TransformerConfig``), for GPUs.
"""

from __future__ import annotations

__all__ = ["MODEL_PRESETS"]

MODEL_PRESETS = {
    "tiny": dict(d_model=64, n_heads=4, d_ff=256, n_layers=2),
    "small": dict(d_model=128, n_heads=4, d_ff=512, n_layers=2),
    "base": dict(d_model=256, n_heads=8, d_ff=1024, n_layers=3),
    "large": dict(d_model=512, n_heads=8, d_ff=2048, n_layers=6),
}
