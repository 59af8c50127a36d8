"""PyTorch's side of the bench: the same model in plain PyTorch eager, timed like npformer's.

PyTorch is never a dependency of npformer: this module imports it only when called.
"""

from __future__ import annotations

import os
from typing import Any

from ..tokens import PAD_ID
from .measure import time_steps
from .workloads import PRESETS, WARMUP_STEPS, random_batches


def torch_translator(name: str, device: Any = "cpu") -> tuple[Any, Any]:
    """PyTorch eager's twin of the preset ``name``: ``torch.nn.Transformer`` with the same sizes,
    post-norm, dropout 0, sinusoidal positions, and its textbook step ``step(src, tgt) -> loss``
    (forward, cross-entropy over the non-<pad> targets, backward, Adam), on ``device``.
    Returns ``(model, step)``; ``src`` and ``tgt`` are torch tensors on ``device``."""
    import torch

    preset = PRESETS[name]
    d_model, vocab_src, vocab_tgt = preset["d_model"], preset["src_vocab"], preset["tgt_vocab"]

    class TorchTranslator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.src_embed = torch.nn.Embedding(vocab_src, d_model)
            self.tgt_embed = torch.nn.Embedding(vocab_tgt, d_model)
            self.transformer = torch.nn.Transformer(
                d_model, preset["n_heads"], preset["n_layers"], preset["n_layers"], preset["d_ff"],
                dropout=0.0, batch_first=True, norm_first=False)
            self.out_proj = torch.nn.Linear(d_model, vocab_tgt)
            position = torch.arange(512).unsqueeze(1)
            frequency = torch.exp(torch.arange(0, d_model, 2) * (-torch.log(torch.tensor(10000.0)) / d_model))
            table = torch.zeros(512, d_model)
            table[:, 0::2] = torch.sin(position * frequency)
            table[:, 1::2] = torch.cos(position * frequency)
            self.register_buffer("positions", table)

        def forward(self, src: Any, tgt: Any) -> Any:
            scale = d_model ** 0.5
            x = self.src_embed(src) * scale + self.positions[: src.shape[1]]
            y = self.tgt_embed(tgt) * scale + self.positions[: tgt.shape[1]]
            causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
            src_padding = torch.zeros(src.shape, device=src.device).masked_fill(src == PAD_ID, float("-inf"))
            tgt_padding = torch.zeros(tgt.shape, device=tgt.device).masked_fill(tgt == PAD_ID, float("-inf"))
            out = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_padding,
                                   tgt_key_padding_mask=tgt_padding, memory_key_padding_mask=src_padding)
            return self.out_proj(out)

    model = TorchTranslator().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD_ID)

    def step(src: Any, tgt: Any) -> float:
        logits = model(src, tgt[:, :-1])
        loss = criterion(logits.reshape(-1, vocab_tgt), tgt[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return model, step


def measure_torch(name: str, steps: int) -> dict:
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    # On the CuPy backend, compare with PyTorch on the GPU; otherwise on the CPU.
    on_gpu = os.environ.get("NPFORMER_BACKEND", "") == "cupy" and torch.cuda.is_available()
    device = torch.device("cuda" if on_gpu else "cpu")
    _, step = torch_translator(name, device)
    batches = [(torch.from_numpy(s).to(device), torch.from_numpy(t).to(device))
               for s, t in random_batches(PRESETS[name], steps + WARMUP_STEPS)]
    seconds, memory = time_steps(step, batches)
    return {"seconds_per_step": seconds, "peak_memory_mb": memory,
            "torch_version": torch.__version__, "device": str(device)}


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None
