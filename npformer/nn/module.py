"""The ``Module`` base class: named parameters, their gradients, and the tree of sub-modules.

A module owns parameters (arrays registered with ``add_param``) and
sub-modules (any attribute that is a ``Module``, found in the order they were
assigned). ``params()`` and ``grads()`` walk that tree and return dicts with
the same dotted keys, e.g. ``encoder.layers.0.self_attn.q.W``.

Conventions, as in PyTorch:

* ``forward`` keeps what ``backward`` needs in the module (its caches);
* ``backward`` **adds** each parameter's gradient into ``module.grad[name]``,
  so a parameter used twice (tied embeddings) receives both contributions.
  Call ``zero_grad()`` before each backward pass;
* ``train()`` / ``eval()`` switch dropout on and off in every sub-module;
  ``with model.evaluating():`` runs a block in eval mode and then restores
  the mode each module had (decoding and evaluation use it).

Attributes whose name starts with ``_`` are never children: a module can hold
a reference to another (a tied weight) without owning it twice.

Calling ``backward`` before ``forward`` raises ``BackwardBeforeForwardError``,
which says so in words: the caches that ``backward`` reads (attributes named
``_..._cache``) exist only after a forward pass.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy

from .. import backend
from ..backend import xp


class BackwardBeforeForwardError(AttributeError):
    """``backward`` (or anything else that reads a forward pass's cache) ran before ``forward``."""


class Module:
    """Base class of every layer and model."""

    # Replaced whenever any module gains, replaces or loses a sub-module: ``named_modules`` keeps
    # the tree it walked with the token it saw, and walks again when the token has changed (a
    # training step asks for the tree four times). A token, not a count: a copied or unpickled
    # model's token is a new object, so its kept tree is never taken for current.
    _tree_token = object()

    def __setattr__(self, name: str, value: Any) -> None:
        changes_tree = not name.startswith("_") and (isinstance(value, Module)
                                                      or isinstance(self.__dict__.get(name), Module))
        object.__setattr__(self, name, value)
        if changes_tree:  # after the change: a walk in between is kept under the old token
            Module._tree_token = object()

    def __delattr__(self, name: str) -> None:
        changes_tree = isinstance(self.__dict__.get(name), Module)
        object.__delattr__(self, name)
        if changes_tree:
            Module._tree_token = object()

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: a missing cache means no forward pass has run.
        if name.startswith("_") and name.endswith("cache"):
            raise BackwardBeforeForwardError(
                f"{type(self).__name__}.backward ran before its forward: backward reads what a forward "
                f"pass keeps, so call the model's forward first, then backward")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __init__(self) -> None:
        self.training = True
        self._param_names: list[str] = []
        self.grad: dict[str, Any] = {}

    # -- building -----------------------------------------------------------------------

    def add_param(self, name: str, value: Any) -> Any:
        """Register ``value`` as the parameter ``name`` (also reachable as ``self.<name>``)."""
        setattr(self, name, value)
        self._param_names.append(name)
        self.grad[name] = xp.zeros_like(value)
        return value

    def children(self) -> Iterator[tuple[str, "Module"]]:
        """Direct sub-modules, in the order they were assigned."""
        for name, value in vars(self).items():
            if isinstance(value, Module) and not name.startswith("_"):
                yield name, value

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        """This module and every descendant, with dotted names ("" for this one), parents first."""
        token = Module._tree_token
        kept = self.__dict__.get("_descendants")
        if kept is None or kept[0] is not token:
            kept = (token, self._walk_descendants())
            object.__setattr__(self, "_descendants", kept)
        yield prefix, self
        for path, module in kept[1]:
            yield f"{prefix}.{path}" if prefix else path, module

    def _walk_descendants(self) -> list[tuple[str, Module]]:
        """Every module below this one (not itself: a module that kept itself would never be freed
        by ``del``), in the order of ``named_modules``: each child, then the child's own tree."""
        return [(f"{name}.{path}" if path else name, module)
                for name, child in self.children()
                for path, module in child.named_modules()]

    # -- parameters and gradients -------------------------------------------------------

    def params(self) -> dict[str, Any]:
        """Every parameter, by dotted key. The arrays themselves: updating them updates the model."""
        return {
            f"{path}.{name}" if path else name: getattr(module, name)
            for path, module in self.named_modules()
            for name in module._param_names
        }

    def grads(self) -> dict[str, Any]:
        """Every parameter's gradient, with the keys of ``params()``."""
        return {
            f"{path}.{name}" if path else name: module.grad[name]
            for path, module in self.named_modules()
            for name in module._param_names
        }

    def zero_grad(self) -> None:
        """Set every gradient to zero, in place."""
        for _, module in self.named_modules():
            for grad in module.grad.values():
                grad.fill(0)

    def num_params(self) -> int:
        """The number of scalar parameters (a tied weight counts once)."""
        return sum(int(value.size) for value in self.params().values())

    # -- modes ----------------------------------------------------------------------------

    def train(self, mode: bool = True) -> "Module":
        """Training mode (dropout on) for this module and all sub-modules."""
        for _, module in self.named_modules():
            module.training = mode
        return self

    def eval(self) -> "Module":
        """Evaluation mode (dropout off)."""
        return self.train(False)

    @contextlib.contextmanager
    def evaluating(self) -> Iterator["Module"]:
        """Eval mode inside the ``with`` block; afterwards every module is back in the mode it had."""
        modes = [(module, module.training) for _, module in self.named_modules()]
        self.eval()
        try:
            yield self
        finally:
            for module, mode in modes:
                module.training = mode

    # -- saving and loading ---------------------------------------------------------------

    def state_dict(self) -> dict[str, numpy.ndarray]:
        """Host (NumPy) copies of every parameter, by dotted key."""
        return {key: backend.to_numpy(value).copy() for key, value in self.params().items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Copy ``state`` into the parameters, in place.

        Every key must match (a missing or unexpected key raises ``KeyError``
        naming it), and every array must have the parameter's shape
        (``ValueError``) and dtype (``TypeError``). Nothing is changed unless
        everything matches.
        """
        params = self.params()
        missing = sorted(set(params) - set(state))
        unexpected = sorted(set(state) - set(params))
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"missing keys {missing}")
            if unexpected:
                parts.append(f"unexpected keys {unexpected}")
            raise KeyError(f"load_state_dict: {'; '.join(parts)}")
        for key, value in state.items():
            target = params[key]
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError(
                    f"load_state_dict: {key} must have shape {tuple(target.shape)}, "
                    f"got {tuple(value.shape)}"
                )
            if numpy.dtype(value.dtype) != numpy.dtype(target.dtype):
                raise TypeError(
                    f"load_state_dict: {key} must have dtype {target.dtype}, got {value.dtype}"
                )
        for key, value in state.items():
            params[key][...] = backend.asarray(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.num_params():,} parameters)"


class ModuleList(Module):
    """An ordered list of sub-modules, keyed "0", "1", ... (``layers.0.self_attn``)."""

    def __init__(self, modules: list[Module]) -> None:
        super().__init__()
        self._modules = list(modules)

    def children(self) -> Iterator[tuple[str, Module]]:
        for index, module in enumerate(self._modules):
            yield str(index), module

    def __getitem__(self, index: int) -> Module:
        return self._modules[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules)
