"""The ``npformer`` command (also ``python -m npformer``): parse the arguments, call the layers below.

One module per command: ``train``, ``translate``, ``evaluate``, ``attention`` (the translator);
``language_id``, ``lm`` (the small models); ``bench``; ``gradcheck``; ``course`` (a subcommand per
action). Each adds its parser (``add_parser``) and runs it (``run``). The shared pieces:
``arguments`` (one-line parse errors, an argument no parser takes named with its command, checked
numbers, options read from the signature of the function or dataclass that receives them, so a
default is written once, in the library) and ``inputs`` (the run, the sentences, the student's ops
and the output paths a command reads before it works).

Bad input never ends in a traceback:

* every number is checked as it is parsed, by the rule of ``tasks.checks`` (positive;
  ``seed >= 0``; ``dropout``, ``label_smoothing`` and ``unk_rate`` in [0, 1)), and every
  combination and output path before any work starts;
* a user error (a value out of range, a missing or damaged run folder, a data file that is not
  a TSV of pairs, empty input, a path that cannot be written) is a ``UsageError`` from any layer:
  one line on stderr, exit status 2;
* an unexpected exception is one line with a request to report it, exit status 1;
  ``npformer --debug ...`` (or ``NPFORMER_DEBUG=1``) shows the full traceback;
* Ctrl-C outside training stops with exit status 130 and one line.
"""

from .main import build_parser, main

__all__ = ["main", "build_parser"]
