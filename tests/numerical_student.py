"""A student who does not derive: every backward pass by central differences of the stated forward,
each input entry perturbed in turn (lesson 1's ``central_difference``, applied to every input). The
tests hand it in as a function and, as its source, in a lesson file."""


def numerical_backward(forward, positions, *args, entries=None):
    """The gradients, with respect to the inputs at ``positions``, of ``sum(forward(*inputs) * dout)``,
    ``args`` being the forward's inputs and then ``dout``. ``entries(array)``: the flat indices to
    difference (default: all; the others are left 0)."""
    import numpy as np
    *inputs, dout = args
    inputs = [np.array(value, dtype=float) if isinstance(value, np.ndarray) and value.dtype.kind == "f" else value
              for value in inputs]
    gradients = []
    for index in positions:
        array, gradient = inputs[index], np.zeros_like(inputs[index])
        for flat in range(array.size) if entries is None else entries(array):
            where = np.unravel_index(flat, array.shape)
            kept = array[where]
            array[where] = kept + 1e-5
            plus = np.sum(forward(*inputs) * dout)
            array[where] = kept - 1e-5
            minus = np.sum(forward(*inputs) * dout)
            array[where] = kept
            gradient[where] = (plus - minus) / 2e-5
        gradients.append(gradient)
    return tuple(gradients) if len(gradients) > 1 else gradients[0]


def numerical_step(forward, node, *args):
    """A derivation's step by central differences: ``dL/d node`` for the intermediate ``node`` of a
    forward written with ``node(name, value)`` marks, each of its entries perturbed in turn (a tuple
    of names: each one's, in order)."""
    import numpy as np
    if isinstance(node, tuple):
        return tuple(numerical_step(forward, name, *args) for name in node)
    *inputs, dout = args
    held = {}

    def mark(name, value):
        if name != node:
            return value
        return held.setdefault(name, np.array(value, dtype=float))

    forward(*inputs, node=mark)
    value = held[node]
    gradient = np.zeros_like(value)
    for flat in range(value.size):
        where = np.unravel_index(flat, value.shape)
        kept = value[where]
        value[where] = kept + 1e-5
        plus = np.sum(forward(*inputs, node=mark) * dout)
        value[where] = kept - 1e-5
        minus = np.sum(forward(*inputs, node=mark) * dout)
        value[where] = kept
        gradient[where] = (plus - minus) / 2e-5
    return gradient
