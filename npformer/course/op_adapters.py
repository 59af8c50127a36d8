"""A student's functions, written with their exercises' natural signatures, as ops with the model's.

The model calls ``linear_backward(dy, cache)``; the student wrote ``linear_backward(x, W, b, dout)``.
Each adapter here makes the pair of ops an exercise gives: a forward that keeps the inputs in its
cache (the forward itself is the textbook's, or the student's own where they wrote one: attention,
the masks, the positional table) and a backward that hands those inputs and the upstream gradient to
the student's function::

    linear_forward(x, W, b)  ->  y, {"x": x, "W": W, "b": b}          (textbook y = x @ W + b)
    linear_backward(dy, cache)  ->  student.linear_backward(x, W, b, dy)

``ops_from`` gathers the ops of every usable exercise; ``course.student_ops`` grades the functions
first and builds the op set.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import backend, ops
from ..tokens import PAD_ID


def _cast(values: Any, dtype: Any) -> Any:
    """The student's result(s) in the model's dtype: NumPy turns float32 into float64 at the first
    NumPy scalar (``x / np.sqrt(d)``), and the lessons' exercises are graded in float64."""
    if isinstance(values, tuple):
        return tuple(_cast(value, dtype) for value in values)
    if values is None or not hasattr(values, "astype") or values.dtype.kind != "f":
        return values
    return values.astype(dtype, copy=False)


def _as_sequences(array: Any) -> Any:
    """``(B, T, D)`` as it is; any other shape ``(..., D)`` as one batch of rows ``(1, N, D)``."""
    return array if array.ndim == 3 else array.reshape(1, -1, array.shape[-1])


def _linear(student: Callable) -> dict[str, Callable]:
    def linear_forward(x: Any, W: Any, b: Any = None) -> tuple[Any, dict]:
        y, _ = ops.linear.linear_forward(x, W, b)
        return y, {"x": x, "W": W, "b": b}

    def linear_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
        x, W, b = cache["x"], cache["W"], cache["b"]
        bias = b if b is not None else backend.xp.zeros(W.shape[1], dtype=W.dtype)
        # the exercise's x is (B, T, Din): rows of any other shape go in as one sequence
        dx, dW, db = _cast(student(_as_sequences(x), W, bias, _as_sequences(dy)), W.dtype)
        return dx.reshape(x.shape), dW, db if b is not None else None

    return {"linear_forward": linear_forward, "linear_backward": linear_backward}


def _elementwise(name: str, student: Callable, textbook: Any) -> dict[str, Callable]:
    """ReLU or GELU: the student's backward for the exact function; GELU's tanh approximation,
    which the exercise does not cover, keeps the textbook's backward."""
    forward, backward = getattr(textbook, f"{name}_forward"), getattr(textbook, f"{name}_backward")

    def op_forward(x: Any, **options: Any) -> tuple[Any, dict]:
        out, cache = forward(x, **options)
        return out, {"x": x, "textbook": cache, "theirs": options.get("approximate", "none") == "none"}

    def op_backward(dout: Any, cache: dict) -> Any:
        if not cache["theirs"]:
            return backward(dout, cache["textbook"])
        return _cast(student(cache["x"], dout), dout.dtype)

    return {f"{name}_forward": op_forward, f"{name}_backward": op_backward}


def _layernorm(student: Callable) -> dict[str, Callable]:
    def layernorm_forward(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> tuple[Any, dict]:
        return ops.layernorm.layernorm_forward(x, gamma, beta, eps)[0], {"x": x, "gamma": gamma, "beta": beta}

    def layernorm_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
        return _cast(student(cache["x"], cache["gamma"], cache["beta"], dy), dy.dtype)

    return {"layernorm_forward": layernorm_forward, "layernorm_backward": layernorm_backward}


def _embedding(student: Callable) -> dict[str, Callable]:
    def embedding_forward(ids: Any, W: Any) -> tuple[Any, dict]:
        return ops.embedding.embedding_forward(ids, W)[0], {"ids": ids, "W": W}

    def embedding_backward(dout: Any, cache: dict) -> Any:
        return _cast(student(cache["ids"], cache["W"], dout), cache["W"].dtype)

    return {"embedding_forward": embedding_forward, "embedding_backward": embedding_backward}


def _dropout(student: Callable) -> dict[str, Callable]:
    def dropout_forward(x: Any, p: float, rng: Any, training: bool) -> tuple[Any, dict]:
        out, cache = ops.dropout.dropout_forward(x, p, rng, training)
        keep = None if cache["keep_scale"] is None else cache["keep_scale"] > 0
        return out, {"x": x, "keep": keep, "p": p}

    def dropout_backward(dout: Any, cache: dict) -> Any:
        return dout if cache["keep"] is None else _cast(student(cache["x"], cache["keep"], cache["p"], dout), dout.dtype)

    return {"dropout_forward": dropout_forward, "dropout_backward": dropout_backward}


def _attention(student_forward: Callable | None, student_backward: Callable | None) -> dict[str, Callable]:
    """The weights in the cache come from the textbook forward (the model keeps them for plots);
    the output is the student's own when ``attention`` is theirs."""
    functions: dict[str, Callable] = {}

    def attention_forward(q: Any, k: Any, v: Any, mask: Any = None) -> tuple[Any, dict]:
        out, cache = ops.attention.attention_forward(q, k, v, mask)
        if student_forward is not None:
            out = _cast(student_forward(q, k, v, mask), q.dtype)
        return out, {**cache, "mask": mask}

    def attention_backward(dout: Any, cache: dict) -> tuple[Any, Any, Any]:
        q, k, mask = cache["q"], cache["k"], cache["mask"]
        if mask is None:  # the exercise always passes a mask
            mask = backend.xp.ones((1, 1, q.shape[2], k.shape[2]), dtype=bool)
        return _cast(student_backward(q, k, cache["v"], mask, dout), dout.dtype)

    functions["attention_forward"] = attention_forward
    if student_backward is not None:
        functions["attention_backward"] = attention_backward
    return functions


def _multi_head_attention(student: Callable) -> dict[str, Callable]:
    """The block's rule from lesson 08's ``multi_head_attention_backward(query, memory, Wq, Wk, Wv, Wo, n_heads,
    mask, dout)``, which has no biases. A bias is one more row of its weight, read by an input column of
    ones: ``x @ W + b = [x | 1] @ [W ; b]``, so the student's function, given ``[query | 1]``, ``[Wq ; bq]``
    and the like, returns the biases' gradients as its weights' last rows. The output's bias adds after
    everything the function computes: its gradient is ``dout`` summed over the rows."""
    xp = backend.xp

    def with_ones(rows: Any) -> Any:
        return xp.concatenate([rows, xp.ones(rows.shape[:-1] + (1,), dtype=rows.dtype)], axis=-1)  # (B, T, D + 1)

    def multi_head_attention_backward(query: Any, memory: Any, weights: dict, n_heads: int, mask: Any,
                                      dout: Any) -> tuple[Any, Any, dict]:
        if mask is None:  # the exercise always passes a mask
            mask = xp.ones((1, 1, query.shape[1], memory.shape[1]), dtype=bool)
        stacked = {name: xp.concatenate([weights[f"{name}.W"], weights[f"{name}.b"][None]]) for name in "qkv"}
        d_query, d_memory, dWq, dWk, dWv, dWo = _cast(student(
            with_ones(query), with_ones(memory), stacked["q"], stacked["k"], stacked["v"], weights["o.W"], n_heads,
            mask, dout), dout.dtype)
        grads = {f"{name}.{part}": (grad[:-1] if part == "W" else grad[-1])
                 for name, grad in (("q", dWq), ("k", dWk), ("v", dWv)) for part in "Wb"}
        grads.update({"o.W": dWo, "o.b": dout.reshape(-1, dout.shape[-1]).sum(axis=0)})
        return d_query[..., :-1], d_memory[..., :-1], grads

    return {"multi_head_attention_backward": multi_head_attention_backward}


def _cross_entropy(plain: Callable | None, smoothed: Callable | None) -> dict[str, Callable]:
    """``cross_entropy_backward(logits, targets, dloss)`` serves the loss without smoothing and
    ``smoothed_cross_entropy_backward(logits, targets, label_smoothing, dloss)`` the loss with it;
    a loss the student has no function for keeps npformer's backward."""

    def cross_entropy_forward(logits: Any, targets: Any, ignore_index: int | None = PAD_ID,
                              label_smoothing: float = 0.0) -> tuple[Any, dict]:
        loss, cache = ops.cross_entropy.cross_entropy_forward(logits, targets, ignore_index, label_smoothing)
        return loss, {**cache, "logits": logits, "targets": targets, "ignore_index": ignore_index}

    def cross_entropy_backward(dloss: Any, cache: dict) -> Any:
        smoothing = cache["label_smoothing"]
        student = smoothed if smoothing > 0 else plain
        if student is None or cache["ignore_index"] != PAD_ID:  # the exercises ignore <pad> = 0
            return ops.cross_entropy.cross_entropy_backward(dloss, cache)
        logits, targets = _as_sequences(cache["logits"]), cache["targets"].reshape(_as_sequences(cache["logits"]).shape[:-1])
        if smoothing > 0:
            dlogits = student(logits, targets, smoothing, dloss)
        else:
            dlogits = student(logits, targets, dloss)
        return _cast(dlogits, logits.dtype).reshape(cache["logits"].shape)

    return {"cross_entropy_forward": cross_entropy_forward, "cross_entropy_backward": cross_entropy_backward}


def _padding_mask(student: Callable) -> dict[str, Callable]:
    def padding_mask(ids: Any, pad_id: int = PAD_ID) -> Any:
        if pad_id != PAD_ID:  # the exercise masks <pad> = 0
            return ops.masks.padding_mask(ids, pad_id)
        return student(ids)

    return {"padding_mask": padding_mask}


def _positional(student: Callable) -> dict[str, Callable]:
    def positional_encoding(max_len: int, d_model: int, dtype: Any = None) -> Any:
        table = backend.asarray(student(max_len, d_model))
        return table.astype(dtype or backend.get_default_dtype())

    return {"positional_encoding": positional_encoding}


def _rmsnorm(student: Callable) -> dict[str, Callable]:
    def rmsnorm_forward(x: Any, gamma: Any, eps: float = 1e-5) -> tuple[Any, dict]:
        out, cache = ops.rmsnorm.rmsnorm_forward(x, gamma, eps)
        return out, {**cache, "x": x, "eps": eps}

    def rmsnorm_backward(dy: Any, cache: dict) -> tuple[Any, Any]:
        if cache["eps"] != 1e-5:  # the exercise's epsilon; another keeps the textbook backward
            return ops.rmsnorm.rmsnorm_backward(dy, cache)
        return _cast(student(cache["x"], cache["gamma"], dy), dy.dtype)

    return {"rmsnorm_forward": rmsnorm_forward, "rmsnorm_backward": rmsnorm_backward}


def _rope(student: Callable) -> dict[str, Callable]:
    def rope_forward(x: Any, offset: int = 0, base: float = 10000.0) -> tuple[Any, dict]:
        out, cache = ops.rope.rope_forward(x, offset, base)
        return out, {**cache, "x": x, "offset": offset, "base": base}

    def rope_backward(dy: Any, cache: dict) -> Any:
        if cache["base"] != 10000.0:  # the exercise's base; another keeps the textbook backward
            return ops.rope.rope_backward(dy, cache)
        return _cast(student(cache["x"], cache["offset"], dy), dy.dtype)

    return {"rope_forward": rope_forward, "rope_backward": rope_backward}


def _swiglu(student: Callable) -> dict[str, Callable]:
    def swiglu_forward(x: Any, W_gate: Any, W_up: Any) -> tuple[Any, dict]:
        return ops.swiglu.swiglu_forward(x, W_gate, W_up)[0], {"x": x, "W_gate": W_gate, "W_up": W_up}

    def swiglu_backward(dy: Any, cache: dict) -> tuple[Any, Any, Any]:
        return _cast(student(cache["x"], cache["W_gate"], cache["W_up"], dy), dy.dtype)

    return {"swiglu_forward": swiglu_forward, "swiglu_backward": swiglu_backward}


def _grouped_query_attention(student: Callable) -> dict[str, Callable]:
    """Attention's textbook backward (the grouped forward ran the textbook attention, whose cache it holds),
    then the student's sum over each shared head's group."""
    def grouped_query_attention_backward(dout: Any, cache: dict) -> tuple[Any, Any, Any]:
        dq, dk_rep, dv_rep = ops.attention.attention_backward(dout, cache["attention"])  # the forward's own (textbook)
        group, kv_heads = cache["group"], dk_rep.shape[1] // cache["group"]
        shared = backend.xp.zeros((dk_rep.shape[0], kv_heads, *dk_rep.shape[2:]), dtype=dk_rep.dtype)
        dk = _cast(student(shared, group, dk_rep), dk_rep.dtype)
        dv = _cast(student(backend.xp.zeros((dv_rep.shape[0], kv_heads, *dv_rep.shape[2:]), dtype=dv_rep.dtype),
                           group, dv_rep), dv_rep.dtype)
        return dq, dk, dv

    return {"grouped_query_attention_backward": grouped_query_attention_backward}


def ops_from(usable: dict[str, Callable]) -> dict[str, Callable]:
    """The op functions that the usable exercises give."""
    functions: dict[str, Callable] = {}
    if "linear_backward" in usable:
        functions.update(_linear(usable["linear_backward"]))
    for name, textbook in (("relu", ops.relu), ("gelu", ops.gelu)):
        if f"{name}_backward" in usable:
            functions.update(_elementwise(name, usable[f"{name}_backward"], textbook))
    if "layernorm_backward" in usable:
        functions.update(_layernorm(usable["layernorm_backward"]))
    if "embedding_backward" in usable:
        functions.update(_embedding(usable["embedding_backward"]))
    if "dropout_backward" in usable:
        functions.update(_dropout(usable["dropout_backward"]))
    if "attention" in usable or "attention_backward" in usable:
        functions.update(_attention(usable.get("attention"), usable.get("attention_backward")))
    if "cross_entropy_backward" in usable or "smoothed_cross_entropy_backward" in usable:
        functions.update(_cross_entropy(usable.get("cross_entropy_backward"),
                                        usable.get("smoothed_cross_entropy_backward")))
    if "padding_mask" in usable:
        functions.update(_padding_mask(usable["padding_mask"]))
    if "causal_mask" in usable:
        functions["causal_mask"] = usable["causal_mask"]
    if "positional_encoding" in usable:
        functions.update(_positional(usable["positional_encoding"]))
    for name in ("residual_backward", "residual_backward_with_memory", "stack_backward_with_memory",
                 "encoder_layer_backward", "decoder_backward", "transformer_backward"):
        if name in usable:  # the blocks' backward passes and walks: the rule has the exercise's own signature
            functions[name] = usable[name]
    for name, adapter in (("multi_head_attention_backward", _multi_head_attention), ("rmsnorm_backward", _rmsnorm), ("rope_backward", _rope), ("swiglu_backward", _swiglu),
                          ("repeat_kv_backward", _grouped_query_attention)):
        if name in usable:
            functions.update(adapter(usable[name]))
    if "adam_step" in usable:
        def adam_step(param: Any, grad: Any, m: Any, v: Any, step: int, lr: float, beta1: float,
                      beta2: float, eps: float) -> tuple[Any, Any, Any]:
            return _cast(usable["adam_step"](param, grad, m, v, step, lr, beta1, beta2, eps), param.dtype)
        functions["adam_step"] = adam_step
    return functions
