"""The speed paths of training, beside the textbook core: the same numbers, less work.

The core (``nn/``, ``models/``) reads like the paper: one forward and one backward per block,
on padded ``(B, T, D)`` batches, each projection its own product. This folder runs the same
blocks faster, and each piece names its twin and is proven equal to it in float64
(``tests/test_fastpath.py``):

* ``packing``: the real tokens of a padded batch side by side, ``(1, N, D)``, so that no
  position-wise work is spent on ``<pad>`` (twin: the padded layout);
* ``fused``: the q, k and v projections as one product of one ``(D, 3D)`` weight, fused once
  (the layers' parameters become views of it) (twin: three ``Linear`` calls);
* ``attention``: a core attention block on packed rows with fused projections (twin:
  ``nn.SelfAttention`` and ``nn.MultiHeadAttention``);
* ``transformer``: ``PackedTransformer``, a core ``Transformer``'s forward and backward on the
  real tokens, projecting only the counted targets onto the vocabulary (twin:
  ``Transformer.forward`` and ``backward``); ``training.train_step(..., only_counted_targets=True)``
  runs it.

The other speed work sits lower, beside the layer it speeds up: the fast op forms in
``npformer/ops/fast/`` (chosen by the active op set, ``ops.using``), and npformer's CPU threads
with the BLAS hold in ``npformer/threads.py``, which those forms use.
"""

from .attention import PackedCrossAttention, PackedSelfAttention
from .fused import FusedProjections, fuse
from .packing import Packing
from .transformer import PackedTransformer

__all__ = ["Packing", "FusedProjections", "fuse", "PackedSelfAttention", "PackedCrossAttention",
           "PackedTransformer"]
