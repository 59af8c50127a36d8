"""The interactive attention explorer (``viz.attention_explorer``), driven in a real headless browser.

Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium``, ``/usr/bin/chromedriver``),
driven by Selenium; nothing downloads a browser. ``.ci/run`` installs both and sets
``NPFORMER_REQUIRE_BROWSER=1``, which turns a missing browser from a skip into a failure.

The page's data are known weights (a softmax of seeded random scores), so every check compares
what is drawn with what was given. To take a screenshot of any explorer file by hand::

    python tests/test_explorer.py explorer.html screenshot.png [hovered token]
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy
import pytest

from npformer import viz

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def _softmax(scores: numpy.ndarray) -> numpy.ndarray:
    weights = numpy.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


@dataclass
class Shown:
    """What the explorer reads of a ``Translation``: the sentence, its text, the maps and their labels."""

    sentence: str
    text: str
    attention: dict
    labels: dict


def make_attention(source: list[str], target: list[str], n_layers: int = 2, n_heads: int = 3,
                   seed: int = 0) -> Shown:
    """Seeded random weights of the right shapes (causal decoder), labelled as a ``Translation`` is."""
    rng = numpy.random.default_rng(seed)
    n_src, n_tgt = len(source), len(target) + 1
    causal = numpy.tril(numpy.ones((n_tgt, n_tgt), dtype=bool))
    maps = {"encoder": [_softmax(rng.normal(size=(n_heads, n_src, n_src)) * 2) for _ in range(n_layers)],
            "decoder": [_softmax(numpy.where(causal, rng.normal(size=(n_heads, n_tgt, n_tgt)) * 2, -numpy.inf))
                    for _ in range(n_layers)],
            "cross": [_softmax(rng.normal(size=(n_heads, n_tgt, n_src)) * 2) for _ in range(n_layers)]}
    labels = {"encoder": (source, source), "decoder": (["<bos>"] + target, ["<bos>"] + target),
              "cross": (target + ["<eos>"], source)}
    return Shown(" ".join(source), " ".join(target), maps, labels)


SENTENCES = [
    make_attention("the black cat eats the apple .".split(), "le chat noir mange la pomme .".split()),
    make_attention(("the small white dog of the old man does not like the big red car that the young "
                    "woman with the green hat bought yesterday in the town .").split(),
                   ("le petit chien blanc du vieil homme n' aime pas la grande voiture rouge que la jeune "
                    "femme au chapeau vert a achetée hier en ville .").split(), seed=1),
]


# -- without a browser: the file itself --------------------------------------------------------

def _payload(page: str) -> dict:
    block = re.search(r'<script id="attention-data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(block.group(1))


def test_the_page_is_self_contained_and_holds_the_weights(tmp_path):
    path = tmp_path / "explorer.html"
    explorer = viz.attention_explorer(SENTENCES, path=path)
    page = path.read_text(encoding="utf-8")
    assert page == explorer.html
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page), "nothing may load from the network"
    data = _payload(page)
    assert [s["sentence"] for s in data["sentences"]] == [s.sentence for s in SENTENCES]
    for shown, given in zip(data["sentences"], SENTENCES):
        for kind in ("encoder", "decoder", "cross"):
            assert (shown["kinds"][kind]["rows"], shown["kinds"][kind]["cols"]) == given.labels[kind]
            numpy.testing.assert_allclose(numpy.array(shown["kinds"][kind]["layers"]),
                                          numpy.array(given.attention[kind]), atol=5e-5)


def test_a_token_that_closes_the_script_cannot_break_the_page():
    tricky = make_attention(["</script>", "<b>"], ["x"])
    page = viz.attention_explorer(tricky).html
    assert page.count("</script>") == 2, "the data block and the program: a token must not close either"
    assert _payload(page)["sentences"][0]["kinds"]["encoder"]["rows"] == ["</script>", "<b>"]


def test_the_notebook_display_is_an_iframe_holding_the_page():
    explorer = viz.attention_explorer(SENTENCES[0])
    shown = explorer._repr_html_()
    assert shown.startswith("<iframe srcdoc=\"") and "&lt;svg" not in shown[:50]
    import html

    assert html.unescape(shown.split('srcdoc="', 1)[1].split('" style=', 1)[0]) == explorer.html


def test_no_sentence_is_a_clear_error():
    with pytest.raises(ValueError, match="no sentences"):
        viz.attention_explorer([])


# -- in the browser --------------------------------------------------------------------------------

def _browser():
    """A headless Chromium driven by Selenium, or a skip (a failure where CI requires it)."""
    missing = [name for name in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(name)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the Python package selenium")
    if missing:
        reason = f"browser test needs {', '.join(missing)} (apt-get install chromium chromium-driver)"
        if os.environ.get("NPFORMER_REQUIRE_BROWSER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1400,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def browser():
    driver = _browser()
    yield driver
    driver.quit()


def _cells(browser) -> list[dict]:
    return browser.execute_script(
        "return [...document.querySelectorAll('#view rect.cell')].map(c => ({q: +c.dataset.q, k: +c.dataset.k, "
        "w: +c.dataset.w, head: +c.closest('svg').dataset.head, cls: c.getAttribute('class'), "
        "fill: c.getAttribute('fill')}))")


def _weights(cells: list[dict], head: int) -> numpy.ndarray:
    mine = [c for c in cells if c["head"] == head]
    table = numpy.zeros((max(c["q"] for c in mine) + 1, max(c["k"] for c in mine) + 1))
    for cell in mine:
        table[cell["q"], cell["k"]] = cell["w"]
    return table


def _choose(browser, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", select_id)).select_by_value(value)


def _hover(browser, selector: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).move_to_element(browser.find_element("css selector", selector)).perform()


def test_explorer_in_a_real_browser(browser, tmp_path):
    path = tmp_path / "explorer.html"
    viz.attention_explorer(SENTENCES, path=path)
    browser.get(path.as_uri())
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, f"the page's script failed: {errors}"
    first = SENTENCES[0]

    # Opens on cross-attention, layer 0, all heads: one panel per head, every weight drawn.
    cells = _cells(browser)
    n_heads = first.attention["cross"][0].shape[0]
    assert len(browser.find_elements("css selector", "#view .panel")) == n_heads
    for head in range(n_heads):
        numpy.testing.assert_allclose(_weights(cells, head), first.attention["cross"][0][head], atol=5e-5)
    largest = max(cells, key=lambda c: c["w"])
    assert largest["fill"] == "rgb(253, 231, 37)", "the largest weight on the page is the top of the scale"
    assert "cross-attention" in browser.find_element("id", "caption").text.lower()

    # Layer 1, then head 2 alone.
    _choose(browser, "layer", "1")
    numpy.testing.assert_allclose(_weights(_cells(browser), 0), first.attention["cross"][1][0], atol=5e-5)
    _choose(browser, "head", "2")
    cells = _cells(browser)
    assert {c["head"] for c in cells} == {2}
    numpy.testing.assert_allclose(_weights(cells, 2), first.attention["cross"][1][2], atol=5e-5)

    # Hovering an output token (a row of cross-attention) highlights its row: what it attends to.
    rows, columns = first.labels["cross"]
    _hover(browser, "text.query[data-q='1']")
    cells = _cells(browser)
    focused = {(c["q"], c["k"]) for c in cells if "focus" in c["cls"]}
    assert focused == {(1, k) for k in range(len(columns))}
    assert all("dim" in c["cls"] for c in cells if c["q"] != 1)
    details = browser.find_element("id", "details").text
    top = columns[int(first.attention["cross"][1][2][1].argmax())]
    assert f'"{rows[1]}" attends to: {top}' in details, details
    # ... and a source token (a column): what attends to it.
    _hover(browser, "text.key[data-k='2']")
    focused = {(c["q"], c["k"]) for c in _cells(browser) if "focus" in c["cls"]}
    assert focused == {(q, 2) for q in range(len(rows))}
    hint = "Hover a token: a row shows what it attends to"
    for select_id, value in (("head", "1"), ("layer", "0"), ("head", "2")):
        _hover(browser, "text.query[data-q='1']")
        _hover(browser, f"#{select_id}")          # the pointer leaves the map for the menu, as a reader's does
        _choose(browser, select_id, value)
        assert browser.find_element("id", "details").text.startswith(hint), "the hover line kept an old map's text"
    _choose(browser, "layer", "1")

    # Encoder self-attention: a token is a query and a key; hovering it shows its row and column.
    browser.find_element("css selector", "#kinds button[data-kind='encoder']").click()
    cells = _cells(browser)
    assert {c["head"] for c in cells} == {2}, "the chosen head is kept across kinds"
    numpy.testing.assert_allclose(_weights(cells, 2), first.attention["encoder"][1][2], atol=5e-5)
    _hover(browser, "text.query[data-q='3']")
    focused = {(c["q"], c["k"]) for c in _cells(browser) if "focus" in c["cls"]}
    n_src = len(first.labels["encoder"][0])
    assert focused == {(3, k) for k in range(n_src)} | {(q, 3) for q in range(n_src)}
    labels = browser.find_elements("css selector", "text.token.focus")
    assert sorted(label.text for label in labels) == sorted([first.labels["encoder"][0][3]] * 2)

    # The decoder's self-attention is causal: nothing above the diagonal.
    browser.find_element("css selector", "#kinds button[data-kind='decoder']").click()
    assert all(c["w"] == 0 for c in _cells(browser) if c["k"] > c["q"])

    # The second sentence, 29 source and 31 target tokens, all heads: every label is drawn and none overlap.
    _choose(browser, "sentence", "1")
    browser.find_element("css selector", "#kinds button[data-kind='cross']").click()
    _choose(browser, "head", "all")
    second = SENTENCES[1]
    assert len(_cells(browser)) == second.attention["cross"][0].size
    boxes = browser.execute_script(
        "const svg = document.querySelector('#view svg');"
        "return [...svg.querySelectorAll('text.query')].map(t => {const b = t.getBBox(); return [b.y, b.height]});")
    for (y0, h0), (y1, _) in zip(boxes, boxes[1:]):
        assert y0 + h0 <= y1 + 1.0, "row labels overlap"
    texts = browser.execute_script(
        "return [...document.querySelector('#view svg').querySelectorAll('text.key')].map(t => t.textContent)")
    assert texts == second.labels["cross"][1] and len(texts) == 29

    # A screenshot of the view, looked at by the test (not blank) and kept for a person.
    _choose(browser, "sentence", "0")
    _hover(browser, "text.query[data-q='2']")
    shot = tmp_path / "explorer.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000
    if os.environ.get("NPFORMER_SCREENSHOTS"):
        shutil.copy(shot, Path(os.environ["NPFORMER_SCREENSHOTS"]) / "explorer-test.png")


def test_the_notebook_iframe_runs_the_page(browser, tmp_path):
    """What Jupyter shows: the iframe of ``_repr_html_`` inside another page draws the heatmaps."""
    host = tmp_path / "notebook.html"
    host.write_text("<html><body>" + viz.attention_explorer(SENTENCES[0])._repr_html_() + "</body></html>",
                    encoding="utf-8")
    browser.get(host.as_uri())
    browser.switch_to.frame(browser.find_element("tag name", "iframe"))
    assert len(_cells(browser)) == SENTENCES[0].attention["cross"][0].size
    browser.switch_to.default_content()


def screenshot(html_path: str, png_path: str, hovered: str | None = None, width: int = 1400,
               height: int = 900) -> None:
    """Open an explorer file and save a screenshot, hovering the first row token ``hovered``."""
    driver = _browser()
    try:
        driver.set_window_size(width, height)
        driver.get(Path(html_path).resolve().as_uri())
        if hovered:
            labels = [t for t in driver.find_elements("css selector", "text.query") if t.text == hovered]
            from selenium.webdriver.common.action_chains import ActionChains

            ActionChains(driver).move_to_element(labels[0]).perform()
        driver.save_screenshot(png_path)
    finally:
        driver.quit()


if __name__ == "__main__":
    screenshot(*sys.argv[1:3], *(sys.argv[3:4] or [None]))
