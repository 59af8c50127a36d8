"""Shared source and target embeddings (``TransformerConfig(share_embeddings=True)``, a joint
vocabulary): one table, counted once, whose gradient is the sum of its uses; checked against
finite differences and against an unshared twin holding the same numbers."""

import numpy as np
import pytest
from conftest import import_crosscheck, loss_gradients

from npformer import backend, gradcheck, models, optim
from npformer.gradcheck.modules import TINY_MODEL

JOINT = dict(src_vocab=TINY_MODEL["src_vocab"], tgt_vocab=TINY_MODEL["src_vocab"])


def host(array):
    return np.array(backend.to_numpy(array), copy=True)


@pytest.mark.parametrize("tie", [False, True], ids=["shared", "shared-and-tied"])
def test_every_tensor_of_a_shared_model_passes_the_finite_difference_check(tie):
    """Every tensor along two random directions (the fast check, 2 s against 11 s for 20 entries a
    tensor); the shared table's gradient is compared entry by entry in the test below."""
    report = gradcheck.check_model(seed=2, directions=2, share_embeddings=True, tie_embeddings=tie,
                                   dropout=0.0, **JOINT)
    assert report.passed, str(report)
    tensors = {result.tensor for result in report.results}
    assert "src_embed.W" in tensors and "tgt_embed.W" not in tensors
    assert ("out_proj.W" in tensors) != tie


def test_the_shared_table_is_one_parameter_and_its_gradient_sums_both_uses():
    shared, src, tgt_in, tgt_out = gradcheck.model_case(seed=3, share_embeddings=True, dropout=0.0, **JOINT)
    twin = gradcheck.model_case(seed=3, dropout=0.0, **JOINT)[0]
    shared_params, twin_params = shared.params(), twin.params()
    assert shared.tgt_embed.table is shared.src_embed.W and not shared.tgt_embed.params()
    assert set(twin_params) == set(shared_params) | {"tgt_embed.W"}
    assert shared.num_params() == twin.num_params() - shared_params["src_embed.W"].size
    for name, value in shared_params.items():
        twin_params[name][...] = value
    twin_params["tgt_embed.W"][...] = shared_params["src_embed.W"]

    shared_grads, twin_grads = loss_gradients(shared, src, tgt_in, tgt_out), loss_gradients(twin, src, tgt_in, tgt_out)
    np.testing.assert_allclose(shared_grads["src_embed.W"], twin_grads["src_embed.W"] + twin_grads["tgt_embed.W"],
                               rtol=1e-12, atol=1e-14)
    assert np.abs(twin_grads["src_embed.W"]).max() > 0 and np.abs(twin_grads["tgt_embed.W"]).max() > 0


def test_adam_updates_the_shared_table_once_per_step():
    model = gradcheck.model_case(seed=4, share_embeddings=True, **JOINT)[0]
    optimizer = optim.Adam(model, lr=0.1)
    before = host(model.src_embed.W)
    model.zero_grad()
    model.grads()["src_embed.W"][...] = 1.0
    optimizer.step()
    np.testing.assert_allclose(host(model.src_embed.W), before - 0.1, rtol=0, atol=1e-6)  # one step of lr, not two
    assert len(optimizer.state) == len(model.params())


def test_sharing_needs_one_vocabulary():
    with pytest.raises(ValueError, match="share_embeddings needs one joint vocabulary"):
        models.TransformerConfig(src_vocab=10, tgt_vocab=12, share_embeddings=True)


@pytest.mark.parametrize("tie", [False, True])
def test_the_pytorch_twin_shares_the_table_too(tie):
    torch = import_crosscheck("torch", "PyTorch is not installed (optional cross-check): pip install torch==2.13.0")
    from npformer import interop

    model = gradcheck.model_case(seed=5, share_embeddings=True, tie_embeddings=tie, dropout=0.0, **JOINT)[0]
    src, tgt_in = gradcheck.model_case(seed=5, share_embeddings=True, dropout=0.0, **JOINT)[1:3]
    twin = interop.to_torch(model)
    assert twin.tgt_embed is twin.src_embed
    with torch.no_grad():
        twin_logits = twin(torch.from_numpy(host(src)), torch.from_numpy(host(tgt_in))).numpy()
    model.eval()
    np.testing.assert_allclose(twin_logits, host(model.forward(src, tgt_in)), rtol=1e-10, atol=1e-12)
    back = interop.from_torch(twin)
    assert set(back.params()) == set(model.params())
    for key, value in model.params().items():
        np.testing.assert_array_equal(host(back.params()[key]), host(value))
