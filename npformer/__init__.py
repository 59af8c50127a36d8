"""npformer: a Transformer in pure NumPy, every backward pass written by hand.

Layers, each importing only the ones below it::

    cli, gradcheck   the command and the finite-difference checks
    optim            SGD, Adam, AdamW, learning-rate schedules, gradient clipping
    nn               modules with parameters and hand-written backward passes
    ops              pure forward/backward functions
    backend          the array module (NumPy or CuPy) and the default dtype
"""

from . import backend, nn, ops, optim

__version__ = "0.1.0"
__all__ = ["backend", "ops", "nn", "optim", "__version__"]
