"""npformer: a Transformer in pure NumPy, every backward pass written by hand.

Layers, each importing only the ones below it::

    ops      pure forward/backward functions (npformer.ops)
    backend  the array module (NumPy or CuPy) and the default dtype
    gradcheck  finite-difference checks of any op
"""

from . import backend, ops

__version__ = "0.1.0"
__all__ = ["backend", "ops", "__version__"]
