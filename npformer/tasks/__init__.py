"""What the models are used for, each on top of ``npformer.training``.

* ``translation``: English -> French (decoding, ``Translator``, ``npformer train``);
* ``language_id``: is a sentence English or French? (the encoder-only classifier);
* ``language_model``: French text generation (the decoder-only language model);
* ``masked_lm``: filling in hidden French words (the BERT-style masked language model);
* ``images``: telling four generated shapes apart (the Vision Transformer).
"""

from . import images, language_id, language_model, masked_lm, translation

__all__ = ["translation", "language_id", "language_model", "masked_lm", "images"]
