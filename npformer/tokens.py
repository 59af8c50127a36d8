"""The special tokens and their ids, shared by every vocabulary, model and task.

Every vocabulary starts with the same four tokens, so their ids are fixed::

    0 <pad>   padding: masked out of attention and ignored by the loss
    1 <bos>   begin of sentence: the decoder's first input
    2 <eos>   end of sentence: the decoder's last target; decoding stops there
    3 <unk>   a word the vocabulary does not hold

The masked language model adds one more token right after them (``[MASK]``,
id 4); no other vocabulary has it.
"""

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(len(SPECIAL_TOKENS))

MASK_TOKEN = "[MASK]"
MASK_ID = len(SPECIAL_TOKENS)  # only in masked-LM vocabularies, right after the special tokens
