"""Bad data files, through every entry point that reads one: one checked path
(``npformer.data.read_pairs_file``), one ``DataError`` naming the file, raised before any training.

The entry points: ``load_pairs``, the translation trainer (``load_splits`` and ``train``),
``train_language_id``, ``train_french_lm`` and ``train_french_mlm`` (all given ``data=FILE``), and
the command line's ``train``, ``evaluate``, ``language-id`` and ``lm`` with ``--data FILE``.
"""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npformer import cli
from npformer.data import DataError, load_pairs, read_pairs_file
from npformer.data import files as data_files
from npformer.tasks import language_id, language_model, masked_lm
from npformer.tasks.translation import TrainOptions, train
from npformer.tasks.translation import trainer as translation_trainer

PAIRS = [("The cat sleeps.", "Le chat dort."), ("Go.", "Va !"), ("Hi.", "Salut !")]

# name -> (bytes of the file, or None for no file / "dir" for a directory; a piece of the message)
BAD_FILES = {
    "missing": (None, "no such file"),
    "directory": ("dir", "a directory"),
    "empty": (b"", "empty"),
    "blank lines": (b"\n  \n\n", "only blank lines"),
    "no tab": (b"The cat sleeps. Le chat dort.\nGo. Va !\n", "no line has a tab"),
    "zip archive": (b"PK\x03\x04\x14\x00\x00\x00\x08\x00 payload", "NUL byte at byte offset 5"),
    "utf-16": ("Go.\tVa !\n".encode("utf-16"), "UTF-16 byte-order mark"),
    "latin-1": ("Café.\tCafé.\nÉcoute.\tÉcoute.\nOù ?\tOù ?\n".encode("latin-1"),
                "byte 0xE9 at byte offset 3 (line 1) is not UTF-8"),
    "too small to split": ("".join(f"{e}\t{f}\n" for e, f in PAIRS).encode(), None),
}


def bad_file(tmp_path, name):
    content, _ = BAD_FILES[name]
    path = tmp_path / f"{name.replace(' ', '_')}.tsv"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    return str(path)


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if any entry point gets as far as building or training a model."""
    def started(*args, **kwargs):
        raise AssertionError("training started on bad data")

    monkeypatch.setattr(translation_trainer.Trainer, "_build", started)
    for module in (language_id, language_model, masked_lm):
        monkeypatch.setattr(module, "fit", started)


def train_translator(path, tmp_path):
    return train(TrainOptions(data=path, runs_dir=str(tmp_path / "runs"), max_steps=1))


ENTRY_POINTS = {
    "load_pairs": lambda path, tmp_path: load_pairs(path, max_words=8),
    "trainer.load_splits": lambda path, tmp_path: translation_trainer.load_splits(
        TrainOptions(data=path), log=lambda text: None),
    "train": train_translator,
    "train_language_id": lambda path, tmp_path: language_id.train_language_id(data=path, steps=1),
    "train_french_lm": lambda path, tmp_path: language_model.train_french_lm(data=path, steps=1),
    "train_french_mlm": lambda path, tmp_path: masked_lm.train_french_mlm(data=path, steps=1),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("name", BAD_FILES)
def test_every_entry_point_says_what_is_wrong_with_the_file_and_names_it(entry, name, tmp_path, no_training):
    path = bad_file(tmp_path, name)
    expected = BAD_FILES[name][1]
    if name == "too small to split":
        if entry == "load_pairs":  # three good pairs are a fine file; splitting them is the problem
            pairs, report = load_pairs(path)
            assert pairs == PAIRS and report.kept == 3
            return
        expected = "too few pairs to split: 3 pairs"
    with pytest.raises(DataError) as raised:
        ENTRY_POINTS[entry](path, tmp_path)
    message = str(raised.value)
    assert message.startswith(f"data file {path}: "), message
    assert expected in message, message
    assert "\n" not in message
    assert not (tmp_path / "runs").exists()  # the trainer wrote no run folder


def test_a_missing_file_is_still_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_pairs(str(tmp_path / "missing.tsv"))


def test_an_unreadable_file_says_permission_denied(tmp_path, monkeypatch):
    path = tmp_path / "locked.tsv"
    path.write_text("Go.\tVa !\n")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(data_files, "open", denied, raising=False)  # root reads any file: pretend
    with pytest.raises(DataError, match=re.escape(f"data file {path}: cannot be read: permission denied")):
        load_pairs(str(path))


def test_the_too_small_split_says_how_many_each_split_got_and_what_to_do(tmp_path, no_training):
    path = tmp_path / "small.tsv"
    path.write_text("".join(f"sentence {i}.\tphrase {i}.\n" for i in range(20)))
    with pytest.raises(DataError) as raised:
        translation_trainer.load_splits(TrainOptions(data=str(path), max_pairs=20), log=lambda text: None)
    message = str(raised.value)
    assert "20 pairs (20 distinct English sentences) give training 19, validation 0, test 1" in message
    assert "the validation split is empty" in message and "at least 26 distinct English sentences" in message
    assert "use a bigger file, or a larger --max-pairs (now 20)" in message
    # 26 sentences fill every split: the translation trainer takes them
    path.write_text("".join(f"sentence {i}.\tphrase {i}.\n" for i in range(26)))
    splits, _ = translation_trainer.load_splits(TrainOptions(data=str(path)), log=lambda text: None)
    assert [len(splits.train), len(splits.valid), len(splits.test)] == [24, 1, 1]
    # the language model needs a held-out split, not a validation one: 20 sentences are enough
    path.write_text("".join(f"sentence {i}.\tphrase {i}.\n" for i in range(20)))
    with pytest.raises(AssertionError, match="training started"):
        language_model.train_french_lm(data=str(path), steps=1)


def test_one_damaged_line_in_a_large_file_is_reported_not_fatal(tmp_path):
    lines = [f"sentence {i}.\tphrase {i}.\n".encode() for i in range(200)]
    lines[50] = b"broken \xff\tbytes\n"
    path = tmp_path / "damaged.tsv"
    path.write_bytes(b"".join(lines))
    pairs, report = load_pairs(str(path))
    assert len(pairs) == 199 and report.problems == {"not UTF-8": [51]}
    lines[60] = lines[70] = lines[80] = b"more \xe9\tbroken\n"  # 4 of 200 lines: another encoding
    path.write_bytes(b"".join(lines))
    with pytest.raises(DataError, match=r"not UTF-8: byte 0xFF at byte offset \S+ \(line 51\) .*4 of 200 lines"):
        load_pairs(str(path))


def test_a_utf8_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "bom.tsv"
    path.write_bytes("\ufeffGo.\tVa !\n".encode("utf-8"))
    assert load_pairs(str(path))[0] == [("Go.", "Va !")]
    assert [line.offset for line in read_pairs_file(str(path))] == [3]


FEW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _not_utf8(data):
    try:
        data.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


@FEW
@given(data=st.binary(min_size=1).map(lambda b: b[: len(b) // 2] + b"\x00" + b[len(b) // 2:]))
def test_load_pairs_on_binary_bytes(data, tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(data)
    with pytest.raises(DataError, match=re.escape(f"data file {path}: ") + "not (text|UTF-8)"):
        load_pairs(str(path))


@FEW
@given(data=st.binary(min_size=1).filter(lambda b: b"\n" not in b and b"\x00" not in b).filter(_not_utf8))
def test_load_pairs_on_bytes_that_are_not_utf8(data, tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(data)
    with pytest.raises(DataError, match=re.escape(f"data file {path}: not UTF-8")):
        load_pairs(str(path))


@pytest.mark.parametrize("entry", [name for name in ENTRY_POINTS if name != "load_pairs"])
@FEW
@given(data=st.binary())
def test_training_entry_points_on_random_bytes(entry, data, tmp_path, no_training):
    path = tmp_path / "random.bin"
    path.write_bytes(data)
    with pytest.raises(DataError, match=re.escape(f"data file {path}: ")):
        ENTRY_POINTS[entry](str(path), tmp_path)


CLI_COMMANDS = {
    "train": lambda path, tmp_path: ["train", "--data", path, "--runs-dir", str(tmp_path / "runs"),
                                     "--max-steps", "1"],
    "evaluate": lambda path, tmp_path: ["evaluate", "--data", path, "--pretrained", "toy"],
    "language-id": lambda path, tmp_path: ["language-id", "--data", path, "--steps", "1"],
    "lm": lambda path, tmp_path: ["lm", "--data", path, "--steps", "1"],
}


@pytest.mark.parametrize("command", CLI_COMMANDS)
def test_the_command_line_reports_a_binary_data_file_in_one_line(command, tmp_path, capsys, no_training):
    path = bad_file(tmp_path, "zip archive")
    status = cli.main(CLI_COMMANDS[command](path, tmp_path))
    err = capsys.readouterr().err
    assert status != 0
    assert "unexpected error" not in err
    assert f"data file {path}: not text" in err and len(err.strip().splitlines()) == 1
