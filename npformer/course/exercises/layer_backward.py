"""Lessons 9 and 10: a whole layer's (and the decoder's) backward pass walked through its residual blocks,
and the checkable parts of those lessons' open questions.

    encoder_layer_backward     lesson 9: the blocks of an encoder layer, with each sub-layer's and each norm's
                               parameter gradients, which the student must take from the right gradient
    sandwich_backward          lesson 9, question 1: x + Drop(Norm2(F(Norm1(x))))
    encoder_layer_parameters   lesson 9, question 3: an encoder layer's parameter count
    decoder_backward           lesson 10: a decoder of layers of blocks, some reading the memory, with the final
                               norm of a pre-norm stack
    decoder_layer_parameters   lesson 10, question 3: a decoder layer's parameter count
    queries_attending_nothing  lesson 10, question 4: the queries whose attention output is all zero

As in ``blocks_and_training``, the backward functions a case hands the student are linear maps with their
own random matrices (what a sub-layer, a norm frozen at a point, a dropout mask do to a gradient), so a
path missing or a function called in the wrong place changes the numbers. The references walk them with
npformer's own rules (``nn.residual_backward``, ``nn.stack_backward_with_memory``) and count with npformer's
layers; nothing here stores an answer.
"""

from __future__ import annotations

import numpy

from ... import nn, ops
from ...tokens import PAD_ID
from ..hints import explains
from .base import Case, Exercise, WrongSolution, normal, size
from .blocks_and_training import dropout_map, linear_map, memory_map, parameter_count_hint

# -- an encoder layer, block by block, with the parameters' gradients (lesson 9) ------------------------------


def _encoder_block(rng, shape):
    """(sublayer_backward, norm_backward, dropout_backward) of one block, each a linear map of ``g (B, T, D)``:
    the sub-layer's returns ``(d_input, d_weights (D, D))``, the norm's ``(d_input, d_norm (2, D))`` (its
    gain's and its shift's gradients)."""
    d_model = shape[-1]
    to_input, to_norm_input = linear_map(rng, d_model), linear_map(rng, d_model)
    seen, x_hat = normal(rng, *shape).reshape(-1, d_model), normal(rng, *shape).reshape(-1, d_model)

    def sublayer_backward(g):
        return to_input(g), seen.T @ g.reshape(-1, d_model)

    def norm_backward(g):
        rows = g.reshape(-1, d_model)
        return to_norm_input(g), numpy.stack([(rows * x_hat).sum(axis=0), rows.sum(axis=0)])
    return sublayer_backward, norm_backward, dropout_map(rng, shape)


def _encoder_layer_backward(dout, blocks, pre_norm):
    """(dx, [d_weights per block], [d_norm per block]), the lists in the forward pass's order."""
    d, d_sublayers, d_norms = dout, [], []
    for sublayer_backward, norm_backward, dropout_backward in reversed(blocks):
        caught = {}

        def through_sublayer(g, backward=sublayer_backward):
            d_input, caught["sublayer"] = backward(g)
            return d_input

        def through_norm(g, backward=norm_backward):
            d_input, caught["norm"] = backward(g)
            return d_input
        d = nn.residual_backward(d, through_sublayer, through_norm, dropout_backward, pre_norm)
        d_sublayers.insert(0, caught["sublayer"])
        d_norms.insert(0, caught["norm"])
    return d, d_sublayers, d_norms


def _stacked(arrays, count, shape, name):
    arrays = list(arrays)
    if len(arrays) != count:
        raise TypeError(f"{name} holds {len(arrays)} arrays for {count} blocks")
    for index, array in enumerate(arrays):
        if numpy.shape(array) != shape:
            raise ValueError(f"{name}[{index}] has shape {numpy.shape(array)}, expected {shape}")
    return numpy.stack([numpy.asarray(array, dtype=numpy.float64) for array in arrays])


def _encoder_outputs(result, inputs):
    dx, d_sublayers, d_norms = result
    count, d_model = len(inputs["blocks"]), numpy.shape(inputs["dout"])[-1]
    return (numpy.asarray(dx, dtype=numpy.float64), _stacked(d_sublayers, count, (d_model, d_model), "d_sublayers"),
            _stacked(d_norms, count, (2, d_model), "d_norms"))


def _encoder_case(rng, label, shape, count, pre_norm):
    return Case(label, {"dout": normal(rng, *shape), "blocks": [_encoder_block(rng, shape) for _ in range(count)],
                        "pre_norm": pre_norm})


def _encoder_cases(rng):
    return [_encoder_case(rng, "post-norm, 2 blocks, (2, 3, 4)", (2, 3, 4), 2, False),
            _encoder_case(rng, "pre-norm, 2 blocks, (2, 3, 4)", (2, 3, 4), 2, True),
            _encoder_case(rng, "pre-norm, 3 blocks, one position (1, 1, 3)", (1, 1, 3), 3, True),
            _encoder_case(rng, "post-norm, 1 block, (3, 2, 5)", (3, 2, 5), 1, False)]


def _unseen_encoder(rng):
    shape, count, pre_norm = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5)), size(rng, 2, 3), bool(rng.integers(2))
    label = f"{'pre' if pre_norm else 'post'}-norm, {count} blocks, {shape}"
    return [_encoder_case(rng, label, shape, count, pre_norm)]


def _walk(dout, blocks, pre_norm, forward_order=False, identity=True, norm_from_output=False):
    """The encoder layer's walk, NumPy only, with one mistake switched on (for the hints and the catalogue)."""
    d, d_sublayers, d_norms = dout, [], []
    for sublayer_backward, norm_backward, dropout_backward in (blocks if forward_order else reversed(blocks)):
        if pre_norm:
            d_normed, d_sublayer = sublayer_backward(dropout_backward(d))
            d_input, d_norm = norm_backward(d_normed)
            d_norm = norm_backward(d)[1] if norm_from_output else d_norm
            d = d_input + (d if identity else 0)
        else:
            d_sum, d_norm = norm_backward(d)
            d_input, d_sublayer = sublayer_backward(dropout_backward(d if norm_from_output else d_sum))
            d = d_input + (d_sum if identity else 0)
        d_sublayers.append(d_sublayer)
        d_norms.append(d_norm)
    order = slice(None) if forward_order else slice(None, None, -1)
    return d, d_sublayers[order], d_norms[order]


def _encoder_hint(got, expected, inputs, output):
    """Which walk the answer is: blocks in the forward order, no identity path, a parameter gradient taken from
    the gradient at the block's output, the lists last block first."""
    dout, blocks, pre_norm = inputs["dout"], inputs["blocks"], inputs["pre_norm"]
    index = ("dx", "d_sublayers", "d_norms").index(output)

    def walked(**mistake):
        return _encoder_outputs(_walk(dout, blocks, pre_norm, **mistake), inputs)[index]
    if len(blocks) > 1 and output == "dx" and explains(walked(forward_order=True), got):
        return ("dx is what the blocks give when walked first block first: the first block's backward then receives "
                "the gradient at the last block's output")
    if output == "dx" and explains(walked(identity=False), got):
        return ("dx is exactly what comes back through the sub-layers: x also reaches each block's output around "
                "its sub-layer")
    if output != "dx" and explains(walked(norm_from_output=True), got):
        kind, which = ("pre-norm", "d_norms") if pre_norm else ("post-norm", "d_sublayers")
        if output == which:
            return (f"{output} holds what each backward gives for the gradient at its block's output; in a {kind} "
                    "block that gradient does not reach this function directly")
    if output != "dx" and len(blocks) > 1 and explains(expected[::-1], got):
        return (f"{output} holds the blocks' gradients last block first; the blocks are given in the forward "
                "pass's order")
    return ""


# -- question 1 of lesson 9: the sandwich ------------------------------------------------------------------

def _sandwich_backward(dout, sublayer_backward, norm1_backward, norm2_backward, dropout_backward):
    """dx of y = x + Drop(Norm2(F(Norm1(x)))): a pre-norm block whose sub-layer is F followed by Norm2."""
    return nn.residual_backward(dout, lambda g: sublayer_backward(norm2_backward(g)), norm1_backward,
                                dropout_backward, True)


def _sandwich_inputs(rng, shape):
    return {"dout": normal(rng, *shape), "sublayer_backward": linear_map(rng, shape[-1]),
            "norm1_backward": linear_map(rng, shape[-1]), "norm2_backward": linear_map(rng, shape[-1]),
            "dropout_backward": dropout_map(rng, shape)}


def _sandwich_cases(rng):
    return [Case(label, _sandwich_inputs(rng, shape))
            for label, shape in (("(2, 3, 4)", (2, 3, 4)), ("one position (1, 1, 5)", (1, 1, 5)),
                                 ("(3, 2, 3)", (3, 2, 3)))]


def _unseen_sandwich(rng):
    shape = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5))
    return [Case(f"{shape}", _sandwich_inputs(rng, shape))]


def _sandwich_hint(got, expected, inputs, output):
    dout, sub, norm1, norm2, drop = (inputs[name] for name in ("dout", "sublayer_backward", "norm1_backward",
                                                                "norm2_backward", "dropout_backward"))
    if explains(norm1(sub(norm2(drop(dout)))), got):
        return "dx is exactly what comes back through the sub-layer and the norms: x also reaches y around them"
    if explains(dout + norm2(sub(norm1(drop(dout)))), got):
        return ("dx is what the two norms give called in the order the forward pass applies them, and a gradient "
                "goes back through a chain in the reverse order")
    if explains(dout + norm1(sub(norm2(dout))), got):
        return "dx does not depend on dropout_backward: the entries dropout set to 0 send no gradient back"
    return ""


# -- the decoder: layers of blocks, the memory read by some of them (lesson 10) -------------------------------

def _decoder_layer(rng, shape, memory_length, kinds):
    """A layer's blocks in the forward order: ``kinds`` says which read the memory (cross-attention)."""
    return [(memory_map(rng, shape, memory_length) if reads else linear_map(rng, shape[-1]),
             linear_map(rng, shape[-1]), dropout_map(rng, shape), reads) for reads in kinds]


def _block_backward(block, pre_norm):
    sublayer_backward, norm_backward, dropout_backward, reads_memory = block
    if reads_memory:
        return lambda d: nn.residual_backward_with_memory(d, sublayer_backward, norm_backward, dropout_backward,
                                                          pre_norm)
    return lambda d: (nn.residual_backward(d, sublayer_backward, norm_backward, dropout_backward, pre_norm), 0)


def _decoder_backward(dout, layers, pre_norm, final_norm_backward):
    """(dx, d_memory) of a decoder: the final norm (pre-norm), then every layer's blocks, last first."""
    d = final_norm_backward(dout) if pre_norm else dout
    layer_backwards = [lambda g, blocks=blocks: nn.stack_backward_with_memory(
        g, [_block_backward(block, pre_norm) for block in blocks]) for blocks in layers]
    return nn.stack_backward_with_memory(d, layer_backwards)


STANDARD = (False, True, False)  # self-attention, cross-attention, feed-forward


def _decoder_case(rng, label, shape, memory_length, layer_kinds, pre_norm):
    return Case(label, {"dout": normal(rng, *shape),
                        "layers": [_decoder_layer(rng, shape, memory_length, kinds) for kinds in layer_kinds],
                        "pre_norm": pre_norm, "final_norm_backward": linear_map(rng, shape[-1]) if pre_norm else None})


def _decoder_cases(rng):
    return [_decoder_case(rng, "post-norm, 2 layers, (2, 3, 4), memory 5", (2, 3, 4), 5, [STANDARD] * 2, False),
            _decoder_case(rng, "pre-norm, 2 layers, (2, 3, 4), memory 2", (2, 3, 4), 2, [STANDARD] * 2, True),
            _decoder_case(rng, "pre-norm, 1 layer, one position (1, 1, 3), memory 4", (1, 1, 3), 4, [STANDARD], True),
            _decoder_case(rng, "post-norm, 1 layer reading the memory twice, (2, 2, 3), memory 3", (2, 2, 3), 3,
                          [(False, True, True, False)], False)]


def _unseen_decoder(rng):
    shape, memory, count, pre_norm = (size(rng, 1, 3), size(rng, 1, 4), size(rng, 2, 5)), size(rng, 1, 5), \
        size(rng, 1, 3), bool(rng.integers(2))
    return [_decoder_case(rng, f"{'pre' if pre_norm else 'post'}-norm, {count} layers, {shape}, memory {memory}",
                          shape, memory, [STANDARD] * count, pre_norm)]


def _decoder_hint(got, expected, inputs, output):
    """The decoder's mistakes: the final norm skipped, the layers or blocks walked first to last, the memory's
    gradient from one block, or none."""
    dout, layers, pre_norm, final = (inputs[name] for name in ("dout", "layers", "pre_norm", "final_norm_backward"))
    index = ("dx", "d_memory").index(output)
    readers = sum(block[3] for blocks in layers for block in blocks)
    if output == "d_memory" and not numpy.any(got) and numpy.any(expected):
        return f"d_memory is zero, but {readers} block(s) of this case read the memory"
    if pre_norm and explains(_decoder_backward(dout, layers, pre_norm, lambda g: g)[index], got):
        return (f"{output} is what the layers give for dout itself, but in a pre-norm decoder the last layer's output "
                "is not the decoder's output")
    blocks_reversed = [list(reversed(blocks)) for blocks in reversed(layers)]
    if explains(_decoder_backward(dout, blocks_reversed, pre_norm, final)[index], got):
        return (f"{output} is what the blocks give when walked from the first layer's first block: each backward then "
                "receives the gradient at the wrong output")
    if output == "d_memory" and readers > 1:
        d = final(dout) if pre_norm else dout
        for blocks in reversed(layers):
            for block in reversed(blocks):
                d, d_memory = _block_backward(block, pre_norm)(d)
                if block[3] and explains(d_memory, got):
                    return (f"d_memory is what one block sends back to the memory, and {readers} blocks of this "
                            "case read it")
    return ""


# -- the counts of questions 3, and question 4 of lesson 10 ------------------------------------------------

def _layer_count(layer, d_model, d_ff):
    return layer(d_model, n_heads=1, d_ff=d_ff, activation="relu", rng=numpy.random.default_rng(0), dropout=0.0,
                 dropout_rng=None, pre_norm=False).num_params()


def _encoder_layer_parameters(d_model, d_ff):
    """The parameters of ``nn.EncoderLayer(d_model, d_ff=d_ff)``, counted by npformer."""
    return _layer_count(nn.EncoderLayer, d_model, d_ff)


def _decoder_layer_parameters(d_model, d_ff):
    """The parameters of ``nn.DecoderLayer(d_model, d_ff=d_ff)``, counted by npformer."""
    return _layer_count(nn.DecoderLayer, d_model, d_ff)


def _count_cases(rng):
    return [Case(f"D={d_model}, d_ff={d_ff}", {"d_model": d_model, "d_ff": d_ff})
            for d_model, d_ff in ((8, 32), (4, 4), (128, 512), (3, 17))]


def _unseen_count(rng):
    d_model, d_ff = size(rng, 2, 200), size(rng, 2, 800)
    return [Case(f"D={d_model}, d_ff={d_ff}", {"d_model": d_model, "d_ff": d_ff})]


def _queries_attending_nothing(tgt_ids):
    """(B, T) bool: True where attention under the decoder's mask returns an all-zero output (npformer's
    ``ops.attention_forward`` on random queries, keys and values)."""
    batch, length = tgt_ids.shape
    mask = ops.padding_mask(tgt_ids) & ops.causal_mask(length)
    q, k, v = (numpy.random.default_rng(seed).standard_normal((batch, 1, length, 3)) + 0.5 for seed in range(3))
    context, _ = ops.attention_forward(q, k, v, mask)
    return ~numpy.any(context != 0, axis=-1)[:, 0]


def _attending_cases(rng):
    return [Case("B=2, T=4, the second sentence all <pad>", {"tgt_ids": numpy.array([[5, 6, 7, 8], [PAD_ID] * 4])}),
            Case("B=3, T=5, right-padded",
                 {"tgt_ids": numpy.array([[4, 5, 6, 0, 0], [4, 5, 6, 7, 8], [9, 0, 0, 0, 0]])}),
            Case("B=2, T=5, left-padded", {"tgt_ids": numpy.array([[0, 0, 4, 5, 6], [0, 7, 8, 9, 3]])})]


def _unseen_attending(rng):
    batch, length = size(rng, 2, 4), size(rng, 2, 6)
    ids = numpy.where(rng.random((batch, length)) < 0.4, PAD_ID, rng.integers(1, 20, (batch, length)))
    ids[rng.integers(batch)] = PAD_ID
    return [Case(f"B={batch}, T={length}, <pad> anywhere", {"tgt_ids": ids})]


def _attending_hint(got, expected, inputs, output):
    if got.shape != expected.shape:
        return f"shape {got.shape} instead of {expected.shape}: one answer per query, (B, T)"
    ids = numpy.asarray(inputs["tgt_ids"])
    extra, missing = got & ~expected, ~got & expected
    if extra.any():
        pads = bool(numpy.all(ids[extra] == PAD_ID))
        where = "queries holding <pad> " if pads else "queries "
        return f"True at {int(extra.sum())} {where}that have a real token at or before them, which they may attend to"
    if missing.any():
        return f"False at {int(missing.sum())} queries whose row of the decoder mask is all False"
    return ""


EXERCISES: list[Exercise] = [
    Exercise("encoder_layer_backward", "encoder_layer_backward(dout, blocks, pre_norm) -> (dx, d_sublayers, d_norms): "
             "blocks in the forward order, each (sublayer_backward, norm_backward, dropout_backward); "
             "sublayer_backward(g) -> (d_input, d_weights), norm_backward(g) -> (d_input, d_norm); dout (B, T, D); "
             "the lists in the forward order", "09", _encoder_layer_backward, _encoder_cases,
             ("dx", "d_sublayers", "d_norms"), hints=(_encoder_hint,), convert=_encoder_outputs,
             unseen=_unseen_encoder, points=2),
    Exercise("sandwich_backward", "sandwich_backward(dout, sublayer_backward, norm1_backward, norm2_backward, "
             "dropout_backward) -> dx of y = x + Drop(Norm2(F(Norm1(x)))), all (B, T, D)", "09", _sandwich_backward,
             _sandwich_cases, ("dx",), hints=(_sandwich_hint,), unseen=_unseen_sandwich, question=1),
    Exercise("encoder_layer_parameters", "encoder_layer_parameters(d_model, d_ff) -> int, an encoder layer's "
             "parameters", "09", _encoder_layer_parameters, _count_cases, ("count",), exact=True,
             hints=(parameter_count_hint,), unseen=_unseen_count, question=3),
    Exercise("decoder_backward", "decoder_backward(dout, layers, pre_norm, final_norm_backward) -> (dx, d_memory): "
             "layers in the forward order, each a list of blocks (sublayer_backward, norm_backward, "
             "dropout_backward, reads_memory); a memory-reading sublayer_backward(g) -> (d_input, d_memory); "
             "final_norm_backward None for post-norm; dout (B, T, D), d_memory (B, S, D)", "10", _decoder_backward,
             _decoder_cases, ("dx", "d_memory"), hints=(_decoder_hint,), unseen=_unseen_decoder, points=2),
    Exercise("decoder_layer_parameters", "decoder_layer_parameters(d_model, d_ff) -> int, a decoder layer's "
             "parameters", "10", _decoder_layer_parameters, _count_cases, ("count",), exact=True,
             hints=(parameter_count_hint,), unseen=_unseen_count, question=3),
    Exercise("queries_attending_nothing", "queries_attending_nothing(tgt_ids) -> (B, T) bool: True where attention "
             "under the decoder's mask returns an all-zero output", "10", _queries_attending_nothing, _attending_cases,
             ("nothing",), exact=True, hints=(_attending_hint,), unseen=_unseen_attending, question=4),
]

# What the grader shows once an exercise passes: npformer's compact form.
TEXTBOOK: dict[str, str] = {
    "encoder_layer_backward": ("walk the blocks last first; post-norm: d_sum, d_norm = norm_backward(d), then "
                               "d_input, d_weights = sublayer_backward(dropout_backward(d_sum)), d = d_sum + d_input; "
                               "pre-norm: d_normed, d_weights = sublayer_backward(dropout_backward(d)), d_input, "
                               "d_norm = norm_backward(d_normed), d = d + d_input"),
    "sandwich_backward": "dx = dout + norm1_backward(sublayer_backward(norm2_backward(dropout_backward(dout))))",
    "decoder_backward": ("d = final_norm_backward(dout) if pre_norm else dout; then every layer last first and in "
                         "each its blocks last first, each by the residual rule (with memory where it reads it); "
                         "d_memory = the sum of what every memory-reading block sends back"),
}


# -- the mistakes students make -----------------------------------------------------------------------------

def _encoder_forward_order(dout, blocks, pre_norm):
    return _walk(dout, blocks, pre_norm, forward_order=True)


def _encoder_norm_from_output(dout, blocks, pre_norm):
    return _walk(dout, blocks, pre_norm, norm_from_output=True)


def _encoder_lists_reversed(dout, blocks, pre_norm):
    d, d_sublayers, d_norms = _walk(dout, blocks, pre_norm)
    return d, d_sublayers[::-1], d_norms[::-1]  # appended while walking back, never put in order


def _sandwich_norms_in_forward_order(dout, sublayer_backward, norm1_backward, norm2_backward, dropout_backward):
    return dout + norm2_backward(sublayer_backward(norm1_backward(dropout_backward(dout))))


def _sandwich_without_identity(dout, sublayer_backward, norm1_backward, norm2_backward, dropout_backward):
    return norm1_backward(sublayer_backward(norm2_backward(dropout_backward(dout))))


def _encoder_count_without_attention_biases(d_model, d_ff):
    return 4 * d_model**2 + 2 * d_model * d_ff + d_ff + d_model + 4 * d_model


def _decoder_walk(dout, layers, pre_norm, final_norm_backward, final=True, keep_last_memory=False):
    d = final_norm_backward(dout) if pre_norm and final else dout
    d_memory = 0
    for blocks in reversed(layers):
        for sublayer_backward, norm_backward, dropout_backward, reads_memory in reversed(blocks):
            d_sum = d if pre_norm else norm_backward(d)
            back = sublayer_backward(dropout_backward(d_sum))
            d_input, d_block = back if reads_memory else (back, 0)
            if reads_memory:
                d_memory = d_block if keep_last_memory else d_memory + d_block
            d = d_sum + (norm_backward(d_input) if pre_norm else d_input)
    return d, d_memory


def _decoder_without_final_norm(dout, layers, pre_norm, final_norm_backward):
    return _decoder_walk(dout, layers, pre_norm, final_norm_backward, final=False)


def _decoder_memory_overwritten(dout, layers, pre_norm, final_norm_backward):
    return _decoder_walk(dout, layers, pre_norm, final_norm_backward, keep_last_memory=True)


def _decoder_forward_order(dout, layers, pre_norm, final_norm_backward):
    return _decoder_walk(dout, [blocks[::-1] for blocks in layers[::-1]], pre_norm, final_norm_backward)


def _decoder_count_one_attention(d_model, d_ff):
    return 4 * d_model**2 + 2 * d_model * d_ff + d_ff + 9 * d_model  # an encoder layer's


def _attending_every_pad(tgt_ids):
    return tgt_ids == PAD_ID  # every <pad> query, even one with real tokens before it


def _attending_all_pad_sentences(tgt_ids):
    return numpy.broadcast_to(numpy.all(tgt_ids == PAD_ID, axis=1, keepdims=True), tgt_ids.shape)


WRONG_SOLUTIONS = [
    WrongSolution("encoder_layer_backward", "blocks walked first to last", _encoder_forward_order, "first block first"),
    WrongSolution("encoder_layer_backward", "the norm's (pre) or sub-layer's (post) parameters from the block's dout",
                  _encoder_norm_from_output, "at its block's output"),
    WrongSolution("encoder_layer_backward", "the parameter lists last block first", _encoder_lists_reversed,
                  "last block first"),
    WrongSolution("sandwich_backward", "the two norms in the forward pass's order", _sandwich_norms_in_forward_order,
                  "reverse order"),
    WrongSolution("sandwich_backward", "the identity path left out", _sandwich_without_identity, "around them"),
    WrongSolution("encoder_layer_parameters", "the attention's biases left out",
                  _encoder_count_without_attention_biases, "x d_model"),
    WrongSolution("decoder_backward", "the pre-norm stack's final norm skipped", _decoder_without_final_norm,
                  "not the decoder's output"),
    WrongSolution("decoder_backward", "d_memory overwritten by each block", _decoder_memory_overwritten, "one block"),
    WrongSolution("decoder_backward", "layers and blocks walked first to last", _decoder_forward_order, "first layer"),
    WrongSolution("decoder_layer_parameters", "one attention block, as in the encoder", _decoder_count_one_attention,
                  "off by"),
    WrongSolution("queries_attending_nothing", "every <pad> query", _attending_every_pad, "holding <pad>"),
    WrongSolution("queries_attending_nothing", "only the sentences that are all <pad>", _attending_all_pad_sentences,
                  "all False"),
]
