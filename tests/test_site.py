"""The course as a website (``npformer course site``).

A lesson's page is the student edition with the instructor run's outputs: the first tests, in every
run of the suite, check that on a lesson's own notebook. The others check a built site, the one
``NPFORMER_SITE`` names (CI's site step builds it after the suite and runs them): every page opened
in Chromium has its math typeset, its images loaded and no request outside the site; no page holds
a solution, an instructor cell or a traceback; every link inside the site resolves; the search finds
"layer norm"; lesson 15's explorer answers a hover.
"""

import html
import json
import os
import pathlib
import re
import shutil

import pytest

from npformer.course import BEGIN
from npformer.course.edition import instructor_only, student_source
from npformer.course.site import lesson_page

LESSONS = pathlib.Path(__file__).resolve().parents[1] / "lessons"
SITE = os.environ.get("NPFORMER_SITE")


def _notebook(lesson: str) -> dict:
    """The lesson as the executed notebook's cells would hold it (tags in metadata, an output each)."""
    import jupytext

    notebook = jupytext.reads((LESSONS / lesson).read_text(encoding="utf-8"), fmt="py:percent")
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "exercise passed; textbook form"}]
    return json.loads(json.dumps(notebook))


def _leaks(source: str, page: str) -> list[str]:
    """The lines that only the instructor edition of ``source`` holds (a solution, an instructor cell) and
    ``page`` shows."""
    student = student_source(source)
    return [line for line in _distinctive_lines(instructor_only(source)) if line not in student and line in page]


def _distinctive_lines(text: str) -> list[str]:
    """The lines of ``text`` long and particular enough that finding one elsewhere is no coincidence."""
    return [line.strip() for line in text.splitlines()
            if len(line.strip()) > 30 and not line.strip().startswith(("#", '"""', "def ", "print(", "return "))]


@pytest.mark.parametrize("lesson", ["04_layer_normalization.py", "08_multi_head_attention.py"])
def test_a_page_is_the_student_edition_with_the_runs_outputs(lesson):
    notebook = _notebook(lesson)
    page = lesson_page(notebook)
    text = "\n".join(cell["source"] for cell in page["cells"])
    assert BEGIN not in text and "NotImplementedError" in text
    leaked = _leaks((LESSONS / lesson).read_text(encoding="utf-8"), text)
    assert not leaked, leaked[:3]
    stubs = [cell for cell in page["cells"] if "NotImplementedError" in cell["source"]]
    assert stubs and all(cell.get("outputs") == [] for cell in stubs), "a solution cell's output is dropped"
    others = [cell for cell in page["cells"] if cell["cell_type"] == "code" and cell not in stubs]
    assert others and all(cell["outputs"] for cell in others), "the run's other outputs stay"
    # the instructor's site keeps every cell, without the markers
    full = lesson_page(notebook, instructor=True)
    assert len(full["cells"]) == len(notebook["cells"]) > len(page["cells"])
    assert BEGIN not in "\n".join(cell["source"] for cell in full["cells"])


needs_site = pytest.mark.skipif(not SITE, reason="NPFORMER_SITE names no built site (CI's site step sets it)")


def _pages() -> list[pathlib.Path]:
    return sorted(path for path in pathlib.Path(SITE).rglob("*.html")
                  if "_static" not in path.parts and "_sources" not in path.parts)


def _text(path: pathlib.Path) -> str:
    body = path.read_text(encoding="utf-8")
    body = re.sub(r"<script.*?</script>|<style.*?</style>", "", body, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", "", body))


@needs_site
def test_no_page_holds_a_solution_an_instructor_cell_or_a_traceback():
    lesson_pages = {path.stem: _text(path) for path in _pages() if path.parent.name == "lessons"}
    assert len(lesson_pages) == len(list(LESSONS.glob("[0-9][0-9]_*.py")))
    for lesson in sorted(LESSONS.glob("[0-9][0-9]_*.py")):
        text, source = lesson_pages[lesson.stem], lesson.read_text(encoding="utf-8")
        leaked = _leaks(source, text)
        assert not leaked, f"{lesson.stem}: {leaked[:3]}"
        assert "BEGIN SOLUTION" not in text and "(instructor edition)" not in text, lesson.stem
    for path in _pages():
        assert "Traceback (most recent call last)" not in _text(path), path


@needs_site
def test_the_student_site_leaves_out_the_instructors_guide_and_the_build_leftovers():
    site = pathlib.Path(SITE)
    assert not (site / "guides" / "instructor.html").exists(), "the instructor's guide is on the TAs' site only"
    assert not list((site / "downloads").glob("*.html")), "the downloads are files, not pages"
    assert not (site / ".doctrees").exists() and not (site / ".buildinfo").exists()


@needs_site
def test_every_link_inside_the_site_resolves_and_nothing_is_fetched_from_outside():
    for path in _pages():
        page = path.read_text(encoding="utf-8")
        for tag, target in re.findall(r"<(script|img|iframe|link)[^>]*?(?:src|href)=\"([^\"]+)\"", page):
            assert not re.match(r"^(https?:)?//", target), f"{path}: {tag} fetches {target}"
        for target in re.findall(r"<a [^>]*href=\"([^\"#]+)[^\"]*\"", page):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                assert (path.parent / html.unescape(target)).exists(), f"{path.relative_to(SITE)}: {target}"


@pytest.fixture(scope="module")
def browser():
    from test_explorer import _browser

    driver = _browser()
    yield driver
    driver.quit()


def _wait(browser, script: str, seconds: float = 10.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, seconds).until(lambda driver: driver.execute_script(script))


def _screenshot(browser, name: str) -> None:
    if os.environ.get("NPFORMER_SCREENSHOTS"):
        browser.save_screenshot(str(pathlib.Path(os.environ["NPFORMER_SCREENSHOTS"]) / name))


@needs_site
def test_every_page_in_a_browser_typesets_its_math_and_loads_its_images_from_the_site(browser):
    for path in _pages():
        browser.get(path.as_uri())
        has_math = "\\(" in path.read_text(encoding="utf-8") or "\\[" in path.read_text(encoding="utf-8")
        if has_math:
            _wait(browser, "return document.querySelectorAll('mjx-container').length > 0 "
                           "&& !document.querySelector('.math:not(:has(mjx-container))')", 20)
        _wait(browser, "return [...document.images].every(image => image.complete)")
        broken = browser.execute_script("return [...document.images].filter(i => !i.naturalWidth).map(i => i.src)")
        assert not broken, f"{path}: {broken}"
        outside = browser.execute_script(
            "return performance.getEntriesByType('resource').map(r => r.name).filter(n => !n.startsWith('file:'))")
        assert not outside, f"{path}: {outside}"
        if path.stem == "04_layer_normalization":
            _screenshot(browser, "site-lesson-04.png")
        if path.stem == "ops" and path.parent.name == "api":
            _screenshot(browser, "site-api-ops.png")


@needs_site
def test_the_search_finds_layer_norm(browser):
    browser.get((pathlib.Path(SITE) / "search.html").as_uri() + "?q=layer+norm")
    found = _wait(browser, "const hits = document.querySelectorAll('#search-results li a');"
                           "return hits.length ? [...hits].map(a => a.textContent) : null", 30)
    assert any("layer" in hit.lower() and "norm" in hit.lower() for hit in found), found


@needs_site
def test_the_explorer_on_lesson_15_answers_a_hover(browser):
    from selenium.webdriver.common.action_chains import ActionChains

    [page] = [path for path in _pages() if path.stem.startswith("15_") and path.parent.name == "lessons"]
    browser.get(page.as_uri())
    frame = browser.find_element("css selector", "iframe.npformer-explorer")
    browser.execute_script("arguments[0].scrollIntoView()", frame)
    browser.switch_to.frame(frame)
    _wait(browser, "return document.querySelectorAll('#view rect.cell').length > 0", 30)   # the heatmaps drawn

    def hovered(driver):  # the pointer onto a target token, until the page answers (a cold browser is slow)
        token = driver.find_element("css selector", "text.query[data-q='1']")
        ActionChains(driver).move_to_element_with_offset(token, 0, 1).move_to_element(token).perform()
        return driver.execute_script("return document.querySelectorAll('#view rect.cell.focus').length")

    from selenium.webdriver.support.ui import WebDriverWait

    assert WebDriverWait(browser, 30, poll_frequency=0.5).until(hovered)
    browser.switch_to.default_content()
    _screenshot(browser, "site-lesson-15-explorer.png")
    if os.environ.get("NPFORMER_SCREENSHOTS"):
        shutil.copy(page, pathlib.Path(os.environ["NPFORMER_SCREENSHOTS"]) / "lesson-15.html")
