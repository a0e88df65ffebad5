"""What comes back out of the sandbox is inert: no view of a graded notebook runs a student's code.

Two halves (plmcourse.autograde.inert does the work):

1. A catalogue of active-content tricks, each planted in a notebook where a student can put it
   (markdown, an output of each type, a raw cell, an attachment, metadata). Each notebook is
   rendered to HTML by nbconvert's classic template, the one nbgrader's feedback and formgrader
   pages build on, before and after `inert.clean_notebook`; a small HTML reader counts what a
   browser could run beyond what the template itself carries. Before: the trick is live (where
   nbconvert itself does not already stop it). After: nothing. Honest content (a PNG plot, a
   pandas-style table, TeX, a matplotlib SVG, a course cell, a test's sentence) stays.

2. The real thing: a class of two graded through `python -m plmcourse grade all` (bubblewrap on),
   one submission planting every kind of active content, one honest submission with a plot, a
   table and a formula. Headless Chromium then opens each student's feedback HTML from file://
   and each submission in the formgrader of a real Jupyter server run on the course (the
   instructor's view), clicks every planted link, and checks that nothing planted ran, nothing
   navigated, and the honest plot, table and formula are there.

MathJax: every view loads it from a CDN, which the offline test machine cannot reach, so the
browser test checks that the TeX is on the page, not that it was typeset.
"""

import base64
import html
import json
import re
import sys
import time
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter

from plmcourse.autograde import inert, sandbox
from support import NO_BROWSER, chromium

# ----------------------------------------------------------------------------
# An independent reader of what a browser could run on a page


def _unsafe(value: str, image: bool) -> bool:
    flat = re.sub(r"[\s\x00-\x20]+", "", html.unescape(value or "")).lower()
    if image and flat.startswith("data:image/"):
        return False
    return bool(re.match(r"(?:javascript|vbscript|livescript):|data:", flat))


class Live(HTMLParser):
    """Counts what could run: scripts, frames, forms, meta refreshes, base, SVG, MathML, style
    imports, event handlers, unsafe URLs, and TeX links to unsafe addresses (MathJax makes them)."""

    ELEMENTS = {"script", "iframe", "frame", "object", "embed", "applet", "form", "base", "svg", "math",
                "foreignobject", "link", "animate", "set"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found = Counter()
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in self.ELEMENTS:
            self.found[f"<{tag}>"] += 1
        if tag == "meta" and "http-equiv" in attrs:
            self.found["<meta http-equiv>"] += 1
        self.in_style = tag == "style"
        for name, value in attrs.items():
            if name.startswith("on"):
                self.found[f"{name}="] += 1
            elif name in ("href", "src", "action", "formaction", "data", "srcdoc", "xlink:href"):
                if name == "srcdoc" or _unsafe(value, image=name == "src" and tag == "img"):
                    self.found[f"{tag} {name}=unsafe"] += 1

    def handle_data(self, data):
        if self.in_style and "@import" in data:
            self.found["@import"] += 1
        for match in re.finditer(r"\\(?:href|url)\s*\{([^}]*)\}", data):
            if _unsafe(match.group(1), image=False):
                self.found["TeX link"] += 1

    def handle_endtag(self, tag):
        self.in_style = False


def live(page: str) -> Counter:
    reader = Live()
    reader.feed(page)
    reader.close()
    return reader.found


def rendered(nb) -> str:
    """The notebook as nbconvert's classic template shows it (feedback and formgrader extend it)."""
    page, _ = HTMLExporter(template_name="classic").from_notebook_node(nbformat.v4.nbjson.reads(json.dumps(nb)))
    return page


def notebook(*cells, metadata=None) -> dict:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                   **(metadata or {})}
    nb.cells = [nbformat.from_dict(cell) for cell in cells]
    return nbformat.v4.nbjson.reads(nbformat.writes(nb))   # as inert reads it from disk


def markdown(source, **fields) -> dict:
    return {**nbformat.v4.new_markdown_cell(source), **fields}


def code(*outputs, source="x = 1", **fields) -> dict:
    cell = nbformat.v4.new_code_cell(source, execution_count=1)
    cell["outputs"] = list(outputs)
    return {**cell, **fields}


def display(data, metadata=None) -> dict:
    return {"output_type": "display_data", "data": data, "metadata": metadata or {}}


def mark(tag: str) -> str:
    """JavaScript that leaves a trace when planted code runs."""
    return f"window.__pwned=(window.__pwned||[]).concat(['{tag}']);document.title='pwned'"


PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb"
       "6QAAAABJRU5ErkJggg==")
SVG_PLOT = ('<?xml version="1.0" encoding="utf-8" standalone="no"?>\n'
            '<svg xmlns:xlink="http://www.w3.org/1999/xlink" width="72pt" height="36pt" viewBox="0 0 72 36" '
            'xmlns="http://www.w3.org/2000/svg" version="1.1">\n <defs>\n  <style type="text/css">*{stroke-linejoin: '
            'round; stroke-linecap: butt}</style>\n'
            '  <path id="m1" d="M 0 0 L 3 3" style="stroke: #000000"/>\n </defs>\n'
            ' <g id="line2d_1"><path d="M 7 29 L 36 18 L 65 7" style="fill: none; stroke: #1f77b4"/>'
            '<use xlink:href="#m1" x="7" y="29"/></g>\n</svg>\n')
PANDAS_TABLE = ('<div>\n<table border="1" class="dataframe">\n  <thead>\n    <tr style="text-align: right;">\n'
                '      <th></th>\n      <th>query</th>\n      <th>weight</th>\n    </tr>\n  </thead>\n  <tbody>\n'
                '    <tr>\n      <th>0</th>\n      <td>the</td>\n      <td>0.25</td>\n    </tr>\n  </tbody>\n'
                '</table>\n</div>')
TEX = r"The scores are divided by $\sqrt{d_k}$: $$\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$$"
EVIL_SVG = (f'<svg xmlns="http://www.w3.org/2000/svg" onload="{mark("svg-onload")}">'
            f'<script>{mark("svg-script")}</script>'
            '<foreignObject width="100" height="100"><body xmlns="http://www.w3.org/1999/xhtml">'
            f'<img src="x" onerror="{mark("svg-fo")}"/></body></foreignObject>'
            '<use href="http://pwned.invalid/x.svg#a"/>'
            f'<a href="#"><set attributeName="href" to="javascript:{mark("svg-set")}"/><text>click me</text></a>'
            '</svg>')

# name -> (notebook with the trick, whether nbconvert's template already renders it inert by itself)
TRICKS = {
    "script tag": (notebook(markdown(f"<script>{mark('s')}</script>")), False),
    "script tag in odd case and spacing": (notebook(markdown(f"text\n\n<ScRiPt\n>{mark('s')}</sCrIpT >")), False),
    "img onerror": (notebook(markdown(f'<img src=x onerror="{mark("img")}">')), False),
    "svg onload": (notebook(markdown(f'<svg onload="{mark("svg")}"></svg>')), False),
    "svg with a script": (notebook(markdown(f"<svg><script>{mark('svg')}</script></svg>")), False),
    "javascript: link in odd case": (notebook(markdown(f'<a href="jAvAsCrIpT:{mark("a")}">x</a>')), False),
    "entity-encoded javascript&#58;": (notebook(markdown(f'<a href="javascript&#58;{mark("a")}">x</a>')), False),
    "iframe srcdoc": (notebook(markdown(f'<iframe srcdoc="<script>{mark("f")}</script>"></iframe>')), False),
    "math/mglyph/style mutation XSS": (notebook(markdown(
        f'<math><mtext><table><mglyph><style><img src=x onerror="{mark("mx")}">')), False),
    "style @import": (notebook(markdown('<style>@import url("http://pwned.invalid/x.css");</style>')), False),
    "meta refresh": (notebook(markdown('<meta http-equiv="refresh" content="0;url=javascript:alert(1)">')), False),
    "form action": (notebook(markdown(f'<form action="javascript:{mark("f")}"><button>go</button></form>')), False),
    "markdown link to javascript:": (notebook(markdown(f"[click](javascript:{mark('md')})")), False),
    "markdown link, entity-encoded scheme": (notebook(markdown(f"[click](javascript&#58;{mark('md')})")), False),
    "markdown reference link to javascript:": (notebook(markdown(f"[click][r]\n\n[r]: JAVASCRIPT:{mark('r')}")),
                                               False),
    "markdown image beside raw HTML with onerror": (notebook(markdown(
        f'![plot](attachment:p.png) <img src="p.png" onerror="{mark("i")}">',
        attachments={"p.png": {"image/png": PNG}})), False),
    "mermaid code block (nbconvert passes it raw)": (notebook(markdown(
        f'```mermaid\n<img src=x onerror="{mark("mermaid")}">\n```')), False),
    "base href": (notebook(markdown('<base href="http://pwned.invalid/">')), False),
    "object data and embed": (notebook(markdown(
        f'<object data="javascript:{mark("o")}"></object><embed src="javascript:{mark("e")}">')), False),
    "data:text/html link": (notebook(markdown("[d](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)")),
                            False),
    "details ontoggle": (notebook(markdown(f'<details open ontoggle="{mark("d")}">x</details>')), False),
    "TeX \\href to javascript: (MathJax makes a link)": (notebook(markdown(
        r"$\href{javascript:alert(1)}{click}$")), False),
    "application/javascript output": (notebook(code(display(
        {"application/javascript": mark("js"), "text/plain": "<IPython.core.display.Javascript object>"}))), False),
    "widget view output and saved widget state": (notebook(code(display(
        {"application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2, "version_minor": 0},
         "text/plain": "HTML(value='...')"})), metadata={"widgets": {
            "application/vnd.jupyter.widget-state+json": {"state": {"m1": {"model_name": "HTMLModel", "state": {
                "value": f'<img src=x onerror="{mark("w")}">'}}}, "version_major": 2, "version_minor": 0}}}),
        False),
    "text/html output with a script": (notebook(code(display(
        {"text/html": f'<b>hi</b><script>{mark("h")}</script><img src=x onerror="{mark("h2")}">'}))), False),
    "text/html output marked isolated (an iframe of it)": (notebook(code(display(
        {"text/html": f"<script>{mark('iso')}</script>"}, {"text/html": {"isolated": True}}))), False),
    "text/markdown output with a javascript: link": (notebook(code(display(
        {"text/markdown": f"[x](javascript:{mark('m')})"}))), False),
    "text/latex output with \\href": (notebook(code(display(
        {"text/latex": r"$\href{javascript:alert(1)}{x}$"}))), False),
    "SVG output with script, foreignObject, use and set": (notebook(code(display(
        {"image/svg+xml": EVIL_SVG}))), True),   # nbconvert >= 7.? shows SVG as an image already
    "PNG output whose data breaks out of src": (notebook(code(display(
        {"image/png": f'x" onerror="{mark("png")}'}))), True),  # nbconvert 7 escapes it; older ones did not
    "raw cell with a script": (notebook({**nbformat.v4.new_raw_cell(f"<script>{mark('raw')}</script>"),
                                         "metadata": {"raw_mimetype": "text/html"}}), True),
    "attachment holding HTML": (notebook(markdown("![x](attachment:evil.html)", attachments={
        "evil.html": {"text/html": base64.b64encode(f"<script>{mark('att')}</script>".encode()).decode()}})),
        True),  # an <img> of text/html runs nothing; kept out all the same
    "cell tags that break out of class=": (notebook(markdown("x", metadata={
        "tags": [f'x" onmouseover="{mark("tag")}" y']})), True),
}


def honest_notebook() -> dict:
    return notebook(
        markdown(TEX),
        markdown("A course of *attention*: see [the paper](https://arxiv.org/abs/1706.03762), `List<int>`."),
        code(display({"image/png": PNG, "text/plain": "<Figure>"}, {"needs_background": "light"}),
             source="plt.plot([1, 2])"),
        code(display({"text/html": PANDAS_TABLE, "text/plain": "   query  weight"}), source="df"),
        code(display({"image/svg+xml": SVG_PLOT, "text/plain": "<Figure>"}), source="svg"),
        code({"output_type": "stream", "name": "stdout",
              "text": "softmax: 1 of 3 cases failed: softmax([1, 2]) should be [0.27, 0.73], got [0.5, 0.5]\n"},
             source="check_softmax(softmax)"))


# ----------------------------------------------------------------------------
# 1. The catalogue


BASELINE = live(rendered(notebook(markdown("plain text"))))


@pytest.mark.parametrize("trick", list(TRICKS))
def test_each_trick_is_made_inert(trick):
    nb, nbconvert_blocks_it = TRICKS[trick]
    before = live(rendered(nb)) - BASELINE
    if not nbconvert_blocks_it:
        assert before, f"{trick}: the planted content is not live even before cleaning; the test proves nothing"
    cleaned, found = inert.clean_notebook(nb, set())
    after = live(rendered(cleaned)) - BASELINE
    assert not after, f"{trick}: still live after cleaning: {dict(after)}\n{json.dumps(cleaned['cells'])[:2000]}"
    assert found, f"{trick}: removed, but the report would not say so"
    nbformat.validate(nbformat.from_dict(cleaned))   # still a notebook nbgrader and Jupyter open
    again, found_again = inert.clean_notebook(cleaned, set())
    assert again == cleaned and not found_again, f"{trick}: cleaning twice changes it again"


def test_the_catalogue_is_big_enough():
    assert len(TRICKS) >= 20


def test_dropped_outputs_keep_their_text():
    nb, _ = TRICKS["application/javascript output"]
    cleaned, _ = inert.clean_notebook(nb, set())
    assert cleaned["cells"][0]["outputs"][0]["data"] == {"text/plain": "<IPython.core.display.Javascript object>"}
    nb, _ = TRICKS["widget view output and saved widget state"]
    cleaned, _ = inert.clean_notebook(nb, set())
    assert cleaned["cells"][0]["outputs"][0]["data"] == {"text/plain": "HTML(value='...')"}
    assert "widgets" not in cleaned["metadata"] and cleaned["metadata"]["kernelspec"]["name"] == "python3"


def test_outputs_past_the_caps_are_dropped_with_a_line_and_the_check_sentences_stay():
    def printed(megabytes):
        return {"output_type": "stream", "name": "stdout", "text": "x" * int(megabytes * 1024 ** 2)}

    sentence = {"output_type": "error", "ename": "CheckFailed", "evalue": "check_softmax failed on case 3",
                "traceback": ["CheckFailed: check_softmax failed on case 3"]}
    cells = [nbformat.v4.new_code_cell("print(x)", outputs=[printed(1), printed(3.5), sentence]),  # 4.5 MB
             *[nbformat.v4.new_code_cell("print(y)", outputs=[printed(3)]) for _ in range(5)],     # 15 MB more
             nbformat.v4.new_code_cell("plt.plot()", outputs=[printed(0.1)])]
    nb = nbformat.v4.new_notebook(cells=cells)
    cleaned, found = inert.clean_notebook(nb, set())
    outputs = [cell["outputs"] for cell in cleaned["cells"]]
    sizes = [sum(len(json.dumps(o)) for o in cell) for cell in outputs]
    assert found == Counter({inert.OVER_CAP: 2}), found
    # cell 1: the 3.5 MB print is past the cell's 4 MB, the failure sentence after it stays
    assert [o.get("ename") for o in outputs[0]] == [None, "CheckFailed", None]
    assert outputs[0][-1]["text"].startswith("[3.5 MB of this cell's output dropped while grading")
    # cells 2-5 fit in the notebook's 16 MB with cell 1's 1 MB, cell 6 does not; the small last one still does
    assert [len(cell) for cell in outputs[1:]] == [1, 1, 1, 1, 1, 1] and "dropped" in outputs[5][0]["text"]
    assert outputs[6][0]["text"] == "x" * int(0.1 * 1024 ** 2) and sum(sizes) <= inert.MAX_NOTEBOOK_OUTPUT + 3 * 1024
    assert inert.clean_notebook(cleaned, set())[0] == cleaned  # idempotent: a second pass drops nothing more


def test_output_the_executor_dropped_as_it_arrived_is_reported_too():
    """The grading executor drops output past the caps, or a message too big to read, before inert sees it; the
    cell's line is then what tells the report."""
    from plmcourse.autograde.nbgrader_ext import ExecuteForGrading  # noqa: F401  (the executor that writes them)

    kept = {"output_type": "stream", "name": "stdout", "text": "first lines\n"}
    for note in (inert.dropped_note(9 * 1024 ** 2), {"output_type": "stream", "name": "stderr", "text": inert.LOST_NOTE}):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(x)", outputs=[kept, note]),
                                             nbformat.v4.new_code_cell("print(y)", outputs=[kept])])
        cleaned, found = inert.clean_notebook(nb, set())
        assert found == Counter({inert.OVER_CAP: 1}) and cleaned["cells"][0]["outputs"][-1]["text"] == note["text"]


@pytest.mark.parametrize("source", [
    "![plot](files/../gradebook.db)", "![x](/api/contents/source/03_attention/03_attention.ipynb)",
    "![x][r]\n\n[r]: /hub/api/users", "<img src=\"/tree/source\">", "<img src=\"http://127.0.0.1:8888/api/contents\">",
    "<img srcset=\"/api/x 2x\" src=\"data:image/png;base64,iVBORw0KGgo=\">",
])
def test_an_image_is_shown_only_from_inside_the_notebook(source):
    """A browser fetches an image by itself, with the session of whoever opens the page (the instructor's, in
    the formgrader): a student's image from any address, relative or absolute, keeps no address."""
    nb = notebook(markdown(source))
    cleaned, found = inert.clean_notebook(nb, set())
    page = rendered(cleaned)
    fetched = re.findall(r"<img[^>]*\ssrcs?e?t?=\"([^\"]*)\"", page)
    assert all(url.startswith("data:image/") for url in fetched), fetched
    assert "api/" not in page.split("<body")[-1] and "gradebook" not in page.split("<body")[-1]


def test_honest_content_is_kept():
    nb = honest_notebook()
    cleaned, found = inert.clean_notebook(nb, set())
    assert not found, f"an honest notebook is reported: {dict(found)}"
    cells = cleaned["cells"]
    # TeX and a markdown cell without HTML or unsafe links: kept byte for byte.
    assert cells[0]["source"] == TEX
    # `List<int>` looks like HTML: re-rendered, but it still reads the same and the link stays.
    page = rendered(cleaned)
    assert "List&lt;int&gt;" in page and 'href="https://arxiv.org/abs/1706.03762"' in page
    # The PNG plot, byte for byte, with its background hint.
    assert cells[2]["outputs"][0]["data"]["image/png"] == PNG
    assert cells[2]["outputs"][0]["metadata"] == {"needs_background": "light"}
    # The pandas table: still a table with its class, header alignment and cells.
    table = cells[3]["outputs"][0]["data"]["text/html"]
    assert '<table border="1" class="dataframe">' in table and 'style="text-align:right"' in table.replace(" ", "")
    assert "<th>query</th>" in table and "<td>0.25</td>" in table
    # The matplotlib SVG: now an <img> of exactly the same SVG.
    img = cells[4]["outputs"][0]["data"]["text/html"]
    src = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', img).group(1)
    assert base64.b64decode(src).decode() == SVG_PLOT
    assert "image/svg+xml" not in cells[4]["outputs"][0]["data"]
    # A check's sentence, as the test cell printed it.
    assert cells[5]["outputs"] == nb["cells"][5]["outputs"]
    assert inert.clean_notebook(cleaned, set())[0] == cleaned


def test_tex_survives_a_cell_that_had_to_be_cleaned():
    source = TEX + f"\n\nand $x_{{<t}}$\n\n<script>{mark('s')}</script>"
    cleaned, found = inert.clean_notebook(notebook(markdown(source)), set())
    page = rendered(cleaned)
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert r"$\sqrt{d_k}$" in text and r"\frac{QK^\top}{\sqrt{d_k}}" in text and "$x_{<t}$" in text
    assert found["<script>"] == 1 and not live(page) - BASELINE


def test_course_cells_and_code_stay_as_they_are():
    course_md = f"<details><summary>Hint</summary><img src=x onerror=\"{mark('course')}\"></details>"
    answer = "def softmax(x):\n    return '<script>' + x  # javascript:alert(1)\n"
    nb = notebook(markdown(course_md), code(source=answer))
    cleaned, found = inert.clean_notebook(nb, {course_md})
    assert cleaned["cells"][0]["source"] == course_md and cleaned["cells"][1]["source"] == answer
    assert not found


def test_nbgrader_metadata_is_kept_and_foreign_metadata_dropped():
    grader = {"grade": True, "grade_id": "test_softmax", "locked": True, "points": 2, "schema_version": 3,
              "solution": False, "task": False, "checksum": "0a1b"}
    cell = code(source="check_softmax(softmax)", metadata={
        "nbgrader": {**grader, "comment": f"<script>{mark('c')}</script>"}, "tags": ["demo", "a b\"<"],
        "editable": False, "deletable": False, "colab": {"id": "x"},
        "execution": {"iopub.status.busy": "2024-01-01T00:00:00.000000Z"}}, id="bad id\"")
    cleaned, found = inert.clean_notebook(notebook(cell), set())
    meta = cleaned["cells"][0]["metadata"]
    assert meta["nbgrader"] == grader and meta["tags"] == ["demo"]
    assert meta["editable"] is False and "colab" not in meta and "execution" in meta
    assert re.fullmatch(r"[A-Za-z0-9_-]+", cleaned["cells"][0]["id"])
    assert found["nbgrader metadata that is not nbgrader's"] == 1


def test_image_size_metadata_must_be_numbers():
    out = display({"image/png": PNG}, {"image/png": {"width": f'1 onload="{mark("w")}"', "height": 20},
                                       "isolated": True, "filenames": {"image/png": "../../x.png"}})
    cleaned, _ = inert.clean_notebook(notebook(code(out)), set())
    assert cleaned["cells"][0]["outputs"][0]["metadata"] == {"image/png": {"height": 20}}


# ----------------------------------------------------------------------------
# neutralise_graded on a course folder


def _course_with(tmp_path, notebooks: dict) -> Path:
    course = tmp_path / "course"
    (course / "source" / "a1").mkdir(parents=True)
    nbformat.write(nbformat.from_dict(notebook(markdown("<b>Course text</b> with <br> HTML"))),
                   course / "source" / "a1" / "a1.ipynb")
    for student, content in notebooks.items():
        folder = course / "autograded" / student / "a1"
        folder.mkdir(parents=True)
        path = folder / "a1.ipynb"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return course


def test_neutralise_graded_rewrites_in_place_reports_once_and_is_idempotent(tmp_path):
    evil = notebook(markdown("<b>Course text</b> with <br> HTML"), markdown(f"<script>{mark('s')}</script>"))
    course = _course_with(tmp_path, {"evil": evil, "honest": honest_notebook(),
                                     "broken": '{"cells": [', "odd": {"nbformat": 3, "worksheets": []}})
    lines = inert.neutralise_graded(course, "a1")
    by_student = {line.split(":")[0]: line for line in lines}
    assert set(by_student) == {"evil", "broken", "odd"}, lines
    assert "<script> (1)" in by_student["evil"]
    assert "could not be made safe to display" in by_student["broken"]
    assert all("\n" not in line and len(line) <= 400 for line in lines)
    evil_after = nbformat.read(course / "autograded/evil/a1/a1.ipynb", as_version=4)
    assert evil_after["cells"][0]["source"] == "<b>Course text</b> with <br> HTML"   # the course's own
    assert "script" not in evil_after["cells"][1]["source"]
    broken_after = nbformat.read(course / "autograded/broken/a1/a1.ipynb", as_version=4)
    assert "could not be shown safely" in broken_after.cells[0].source
    snapshot = {p: p.read_bytes() for p in (course / "autograded").rglob("*.ipynb")}
    assert inert.neutralise_graded(course, "a1") == []
    assert {p: p.read_bytes() for p in (course / "autograded").rglob("*.ipynb")} == snapshot
    assert not list((course / "autograded").rglob("*.inert"))


def test_neutralise_graded_does_not_follow_links(tmp_path):
    outside = tmp_path / "outside.ipynb"
    outside.write_text(json.dumps(notebook(markdown(f"<script>{mark('s')}</script>"))))
    course = _course_with(tmp_path, {})
    folder = course / "autograded" / "linker" / "a1"
    folder.mkdir(parents=True)
    (folder / "a1.ipynb").symlink_to(outside)
    before = outside.read_bytes()
    assert inert.neutralise_graded(course, "a1") == []
    assert outside.read_bytes() == before and (folder / "a1.ipynb").is_symlink()


def test_one_student_only(tmp_path):
    evil = notebook(markdown(f"<script>{mark('s')}</script>"))
    course = _course_with(tmp_path, {"alice": evil, "bob": evil})
    assert [line.split(":")[0] for line in inert.neutralise_graded(course, "a1", "alice")] == ["alice"]
    assert "<script>" in (course / "autograded/bob/a1/a1.ipynb").read_text()


def course_config():
    """course/nbgrader_config.py, run as nbgrader runs it."""
    from traitlets.config import Config

    path = Path(__file__).resolve().parents[1] / "course" / "nbgrader_config.py"
    config = Config()
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: config, "__file__": str(path)})
    return config


def test_the_course_config_sanitises_feedback_and_honest_output_still_renders():
    """The course's config switches on nbconvert's sanitising with inert.clean_html as its filter:
    honest outputs still render (nbconvert's own filter shows <p>, <img>, <thead> as text) and a
    planted output script is gone even from a notebook inert never saw."""
    config = course_config()
    assert config.HTMLExporter.sanitize_html is True
    exporter = HTMLExporter(template_name="classic", config=config)
    page, _ = exporter.from_notebook_node(nbformat.from_dict(inert.clean_notebook(honest_notebook(), set())[0]))
    assert '<table border="1" class="dataframe">' in page and "&lt;table" not in page
    assert "data:image/svg+xml;base64," in page and f"data:image/png;base64,{PNG}" in page
    assert r"\sqrt{d_k}" in page and "&lt;p&gt;" not in page
    raw, _ = TRICKS["text/html output with a script"]
    page, _ = exporter.from_notebook_node(nbformat.from_dict(raw))
    assert not live(page) - BASELINE and "<b>hi</b>" in page


# ----------------------------------------------------------------------------
# 2. Graded for real, opened in a real browser: the feedback page and the formgrader

GRADED = [pytest.mark.nbgrader, pytest.mark.skipif(sandbox.available() is not None,
                                                   reason=f"grading needs the sandbox: {sandbox.available()}")]
IN_BROWSER = GRADED + [pytest.mark.skipif(bool(NO_BROWSER), reason=NO_BROWSER)]

PLANTED_MARKDOWN = "\n\n".join([
    "## What I planted",
    f"<script>{mark('md-script')}</script>",
    f"<ScRiPt >{mark('md-script-case')}</sCrIpT >",
    f'<img src="x" onerror="{mark("md-img")}">',
    f'<svg onload="{mark("md-svg")}"><script>{mark("md-svg-script")}</script></svg>',
    f'<details open ontoggle="{mark("md-details")}"><summary>more</summary>hidden</details>',
    f'<input autofocus onfocus="{mark("md-autofocus")}">',
    f'<a class="pwn" href="jAvAsCrIpT:{mark("md-a")}">click me 1</a>',
    f"[click me 2](javascript:{mark('md-link')})",
    f"[click me 3](javascript&#58;{mark('md-entity')})",
    f'<a class="pwn" href="data:text/html;base64,{base64.b64encode(b"<script>alert(4)</script>").decode()}">'
    'click me 4</a>',
    f'<iframe srcdoc="<script>parent.__pwned=[\'iframe\']</script>"></iframe>',
    f'<form action="javascript:{mark("md-form")}"><button class="pwn">click me 5</button></form>',
    f'<object data="javascript:{mark("md-object")}"></object><embed src="javascript:{mark("md-embed")}">',
    '<base href="http://pwned.invalid/">',
    '<style>@import url("http://pwned.invalid/x.css");</style>',
    '<meta http-equiv="refresh" content="2;url=about:blank#navigated">',
    f'<math><mtext><table><mglyph><style><img src=x onerror="{mark("md-mxss")}">',
])
HTML_OUTPUT = (f'<script>{mark("html-script")}</script><img src=x onerror="{mark("html-img")}">'
               f'<a class="pwn" href="javascript:{mark("html-a")}">click me 6</a>')
TEX_OUTPUT = "$\\href{javascript:" + mark("tex") + "}{click me 8}$"
MARKDOWN_OUTPUT = f"[click me 7](javascript:{mark('markdown-output')})"
WIDGET_OUTPUT = f'<img src=x onerror="{mark("widget")}">'
PLANTED_OUTPUTS = "\n".join([
    "from IPython.display import HTML, SVG, Javascript, Latex, Markdown, display",
    "import ipywidgets",
    f"display(HTML({HTML_OUTPUT!r}))",
    f"display(Javascript({mark('js-output')!r}))",
    f"display(SVG({EVIL_SVG!r}))",
    f"display(Markdown({MARKDOWN_OUTPUT!r}))",
    f"display(Latex({TEX_OUTPUT!r}))",
    f"display(ipywidgets.HTML({WIDGET_OUTPUT!r}))",
    "print('<script>printed text stays text</script>')",
])
HONEST_PLOT = ("%matplotlib inline\nimport matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(3, 2))\n"
               "ax.plot([0, 1, 2], [0, 1, 4])\nplt.show()")
HONEST_SVG = ("import io\nfrom IPython.display import SVG, display\nbuffer = io.StringIO()\n"
              "fig.savefig(buffer, format='svg')\ndisplay(SVG(buffer.getvalue()))")
HONEST_TABLE = f"from IPython.display import HTML, display\ndisplay(HTML({PANDAS_TABLE!r}))"
STUDENTS = ("planter", "honest")


def submissions():
    """student -> the 03_attention notebook they hand in: solved, with active content or honest extras."""
    from support import solved

    planter = solved()
    planter.cells += [nbformat.v4.new_markdown_cell(PLANTED_MARKDOWN), nbformat.v4.new_code_cell(PLANTED_OUTPUTS),
                      nbformat.v4.new_raw_cell(f"<script>{mark('raw')}</script>")]
    attached = nbformat.v4.new_markdown_cell("![dot](attachment:dot.png) ![x](attachment:evil.html)")
    attached.attachments = {"dot.png": {"image/png": PNG}, "evil.html": {
        "text/html": base64.b64encode(f"<script>{mark('attachment')}</script>".encode()).decode()}}
    attached.metadata["tags"] = [f'x" autofocus onfocus="{mark("tag")}" y']
    planter.cells.append(attached)
    honest = solved()
    honest.cells += [nbformat.v4.new_markdown_cell(TEX), nbformat.v4.new_code_cell(HONEST_PLOT),
                     nbformat.v4.new_code_cell(HONEST_SVG), nbformat.v4.new_code_cell(HONEST_TABLE)]
    return {"planter": planter, "honest": honest}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A scratch course with 03_attention released, both submissions graded by `plmcourse grade all`."""
    from support import plmcourse_grade, scratch_course
    from support import ASSIGNMENT

    course = scratch_course(tmp_path_factory, tmp_path_factory.mktemp("inert"), ASSIGNMENT)
    export = course / "downloads"
    export.mkdir()
    for student, nb in submissions().items():
        nbformat.write(nb, export / f"{student}_{ASSIGNMENT}.ipynb")
    start = time.perf_counter()
    report = plmcourse_grade(course, "all", ASSIGNMENT, str(export))
    print(f"\ngraded {len(STUDENTS)} submissions in {time.perf_counter() - start:.0f} s")
    return course, report


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    # No host name resolves (offline, and a page's CDN scripts fail at once); a planted alert() stays open.
    with chromium(tmp_path_factory.mktemp("chromium"), size="1200,900", prompts="ignore", offline=True) as driver:
        yield driver


@pytest.fixture(scope="module")
def formgrader(graded, tmp_path_factory):
    """A real Jupyter server on the graded course, started in course/ as an instructor starts it
    (`tasks.py lab --instructor`), so that nbgrader's formgrader reads course/nbgrader_config.py."""
    from support import free_port, jupyter_server, server_args, venv_env

    course, _ = graded
    home = tmp_path_factory.mktemp("home")
    env = venv_env(HOME=str(home), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
                   JUPYTER_CONFIG_DIR=str(home / ".jupyter"), JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"))
    port = free_port()
    in_course = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', str(course)]
    with jupyter_server([*in_course, sys.executable, "-m", "jupyter_server", *server_args(port)], env, port) as base:
        yield base


PLANTED_LINKS = "//*[contains(text(), 'click me')]"
SETTLE_SECONDS = 3   # the planted meta refresh fires after 2 s; failed images and toggles at once


TRACE = "return [window.__pwned === undefined ? null : String(window.__pwned), document.title, location.href]"


def what_ran(driver, url: str) -> tuple[list[str], int]:
    """Open `url`, let it settle, click every planted link: a sentence per thing planted that ran
    (code, an alert, a navigation), and how many planted links there were to click."""
    from selenium.common.exceptions import NoAlertPresentException

    driver.get(url)
    here = driver.current_url
    traces = [driver.execute_script(TRACE)]   # before the planted refresh (2 s) could leave the page
    time.sleep(SETTLE_SECONDS)
    traces.append(driver.execute_script(TRACE))
    links = driver.find_elements("xpath", PLANTED_LINKS) if traces[-1][2] == here else []
    for link in links:
        driver.execute_script("arguments[0].click()", link)
        time.sleep(0.3)
        try:
            alert = driver.switch_to.alert
            traces.append([f"an alert said {alert.text!r}", "", here])
            alert.accept()
        except NoAlertPresentException:
            pass
        traces.append(driver.execute_script(TRACE))
    problems = []
    for ran, title, location in traces:
        if ran is not None:
            problems.append(f"planted code ran: {ran}")
        if "pwned" in title:
            problems.append(f"planted code set the title to {title!r}")
        if location != here:
            problems.append(f"the page went from {here} to {location}")
    return sorted(set(problems)), len(links)


def honest_content(driver) -> dict:
    return driver.execute_script("""
        const widths = kind => [...document.images].filter(i => i.src.startsWith('data:image/' + kind))
                                                   .map(i => i.naturalWidth);
        return {png: widths('png'), svg: widths('svg+xml'),
                cells: document.querySelectorAll('table.dataframe td').length,
                text: document.body.innerText,
                typeset: !!document.querySelector('.MathJax, .MathJax_Display, mjx-container')};""")


def assert_honest_content(driver, where: str):
    seen = honest_content(driver)
    assert seen["png"] and max(seen["png"]) > 100, f"{where}: the plot is not an image that loaded: {seen['png']}"
    assert seen["svg"] and max(seen["svg"]) > 100, f"{where}: the SVG plot is not an image that loaded: {seen['svg']}"
    assert seen["cells"] >= 2, f"{where}: the table is not a table"
    assert r"\sqrt{d_k}" in seen["text"] or seen["typeset"], f"{where}: the formula is gone"
    shown = "typeset by MathJax" if seen["typeset"] else "present as TeX (MathJax not reachable offline)"
    print(f"{where}: formula {shown}")




@pytest.mark.parametrize("student", STUDENTS)
@GRADED[0]
@GRADED[1]
def test_both_keep_full_marks_and_only_the_planter_is_reported(graded, student):
    from support import FULL, scores

    course, report = graded
    assert sum(scores(course)[student].values()) == FULL
    lines = [line for line in report.splitlines() if f"{student}: " in line and "browser would run" in line]
    if student == "planter":
        assert len(lines) == 1 and "<script> (" in lines[0] and "event handlers (" in lines[0], report
    else:
        assert lines == [], lines


@IN_BROWSER[0]
@IN_BROWSER[1]
@IN_BROWSER[2]
def test_feedback_pages_run_nothing_planted(graded, browser):
    course, _ = graded
    for student in STUDENTS:
        page = course / "feedback" / student / "03_attention" / "03_attention.html"
        problems, clicked = what_ran(browser, page.as_uri())
        assert problems == [], f"{student}'s feedback page: {problems}"
        if student == "planter":
            assert clicked >= 5, "the planted links are not on the page: the test clicked nothing"
        else:
            assert_honest_content(browser, "feedback")


@IN_BROWSER[0]
@IN_BROWSER[1]
@IN_BROWSER[2]
def test_formgrader_runs_nothing_planted(graded, formgrader, browser):
    from nbgrader.api import Gradebook

    from support import TOKEN

    course, _ = graded
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        ids = {s: gradebook.find_submission_notebook("03_attention", "03_attention", s).id for s in STUDENTS}
    browser.get(f"{formgrader}/formgrader?token={TOKEN}")   # logs in: the server sets a cookie
    for student, submission in ids.items():
        url = f"{formgrader}/formgrader/submissions/{submission}/"
        problems, clicked = what_ran(browser, url)
        assert problems == [], f"{student} in the formgrader: {problems}"
        assert "Student's answer" in browser.page_source, f"the formgrader did not show {student}'s submission"
        if student == "planter":
            assert clicked >= 5, "the planted links are not on the page: the test clicked nothing"
        else:
            assert_honest_content(browser, "formgrader")
