"""What a student sees in a real browser: the course's widgets render and react, and Validate answers.

A real JupyterLab (the venv's, in a scratch HOME and Jupyter config, set up like Binder's
student view) serves a scratch copy of course/release/ with solved copies of 05_gpt and
03_attention beside the student versions; headless Chromium, driven by selenium, opens them,
runs all cells from the Run menu, moves a slider, types into a text box, picks from a dropdown,
ticks a checkbox, and clicks nbgrader's Validate button.

Widget kinds covered: `widgets.interactive` with sliders and a text box (05_gpt's sampler) and
with a text box, dropdowns and a checkbox drawing a matplotlib image (03_attention's explorer).

Screenshots (a failing Validate dialog, each rendered widget) are saved under the test's
tmp_path and their paths printed (`pytest -s`); set PLMCOURSE_BROWSER_SHOTS to a folder to get
copies there as well.

Needs selenium (pip), chromium and chromedriver (Debian: `apt-get install chromium
chromium-driver`); the module is skipped without them.
"""

import importlib.util
import json
import os
import shutil
import sys
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import COURSE
from support import NO_BROWSER, TOKEN, chromium, free_port, jupyter_server, server_args, venv_env, wait

if NO_BROWSER:
    pytest.skip(NO_BROWSER, allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

pytestmark = pytest.mark.notebook

SOLVED = ["03_attention", "05_gpt"]
PAGE_SECONDS = 60        # JupyterLab loads, a notebook opens, its kernel starts
RUN_ALL_SECONDS = 240    # a notebook cut to its widget, or 03 whole: seconds, minutes on busy cores
RUN_LONG_SECONDS = 480   # 07 and 11: the cells their widgets need (more on shared cores)
REACT_SECONDS = 60       # a widget redraws after a change
VALIDATE_SECONDS = 240   # nbgrader runs the whole notebook on the server

# The visible notebook (JupyterLab hides the other tabs' panels with lm-mod-hidden).
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


# ---------------------------------------------------------------- server and browser


def _tasks():
    """tasks.py as a module: the plugin list and the contents manager `python3 tasks.py lab` uses."""
    spec = importlib.util.spec_from_file_location("plmcourse_tasks", Path(__file__).parents[1] / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TASKS = _tasks()


def _student_lab_config(home: Path) -> dict:
    """Scratch Jupyter dirs, set up as binder/postBuild and `tasks.py lab` set up a student's JupyterLab."""
    dirs = {"HOME": home, "JUPYTER_CONFIG_DIR": home / ".jupyter",
            "JUPYTER_DATA_DIR": home / ".local/share/jupyter", "JUPYTER_RUNTIME_DIR": home / "runtime",
            "IPYTHONDIR": home / ".ipython"}
    config = dirs["JUPYTER_CONFIG_DIR"]
    settings = config / "lab" / "user-settings" / "@jupyterlab"
    files = {
        # Students get Validate only (as binder/postBuild): no formgrader or exchange lists; notebooks
        # are read with the kernel's language_info (plmcourse/labserver.py).
        config / "jupyter_server_config.json": {"ServerApp": {
            "jpserver_extensions": {f"nbgrader.server_extensions.{ext}": False
                                    for ext in ["formgrader", "assignment_list", "course_list"]},
            "contents_manager_class": TASKS.CONTENTS_MANAGER}},
        # The frontend plugins tasks.py hides: nbgrader's instructor tools, its menu, the news prompt.
        config / "labconfig" / "page_config.json": {"disabledExtensions": {
            plugin: True for plugin in TASKS.STUDENT_HIDDEN_PLUGINS}},
        # Every cell in the DOM (the default windowing skips rendering cells out of view).
        settings / "notebook-extension" / "tracker.jupyterlab-settings": {"windowingMode": "none"},
    }
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    env = venv_env(**{k: str(v) for k, v in dirs.items()})
    env.pop("MPLBACKEND", None)  # CI sets Agg; a student's kernel draws inline images
    return env


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Path:
    """A scratch copy of course/release/ with `<assignment>_solved.ipynb` beside each student version."""
    from plmcourse.release import solved_release

    root = tmp_path_factory.mktemp("release")
    shutil.copytree(COURSE / "release", root, dirs_exist_ok=True)
    for assignment in SOLVED:
        nbformat.write(solved_release(COURSE, assignment), root / assignment / f"{assignment}_solved.ipynb")
    slider = widget_only(solved_release(COURSE, "11_in_context_learning"), "widgets.interact(show_heads",
                         {"V_REP, T_REP, REP_STEPS = 32, 48, 2000": "V_REP, T_REP, REP_STEPS = 32, 48, 300"})
    nbformat.write(slider, root / "11_in_context_learning" / "11_heads_slider.ipynb")
    # 05's sampler needs the tokenizer, the model and the filters, not the minute of training (an untrained model
    # samples too: the test reads that each control changes the sample, not what it says).
    sampler = widget_only(solved_release(COURSE, "05_gpt"), "widgets.interactive(\n    show_sample", {})
    nbformat.write(sampler, root / "05_gpt" / "05_sampler.ipynb")
    # 07's attention widget needs MiniLM and what finds its default head, not the tiny BERT's training.
    heads = widget_only(solved_release(COURSE, "07_inside_a_real_bert"), "lambda sentence, layer, head: show_head", {})
    nbformat.write(heads, root / "07_inside_a_real_bert" / "07_attention_widget.ipynb")
    return root


def widget_only(nb, marker: str, shorter: dict):
    """The notebook cut to the code cell containing `marker` and the earlier cells it needs (those that
    define a global it reads, and theirs), with each text of `shorter` replaced (a shorter training):
    the widget's own test without the rest of the notebook's run."""
    from plmcourse.autograde.demos import cell_names

    code = [c for c in nb.cells if c.cell_type == "code"]
    last = next(i for i, c in enumerate(code) if marker in c.source)
    needed, reads = [last], set(cell_names(code[last].source)[1])
    for i in range(last - 1, -1, -1):
        defines, reads_here = cell_names(code[i].source)
        if defines & reads:
            needed.append(i)
            reads |= reads_here
    cells = [code[i] for i in sorted(needed)]
    for old, new in shorter.items():
        hits = [c for c in cells if old in c.source]
        assert len(hits) == 1, f"expected {old!r} in one kept cell of the notebook, found it in {len(hits)}"
        hits[0].source = hits[0].source.replace(old, new)
    return nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)


@pytest.fixture(scope="module")
def lab(served, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    env = _student_lab_config(home)
    port = free_port()
    cmd = [sys.executable, "-m", "jupyterlab", *server_args(port), f"--ServerApp.root_dir={served}"]
    with jupyter_server(cmd, env, port) as base:
        yield base


@pytest.fixture(scope="module")
def browser(lab, tmp_path_factory):
    # Leaving a notebook with unsaved outputs may ask "leave site?": answer yes, as a student would.
    with chromium(tmp_path_factory.mktemp("chromium"), prompts="accept") as driver:
        driver.get(f"{lab}/lab?token={TOKEN}")  # logs in: the server sets a cookie
        wait(driver, PAGE_SECONDS, "JupyterLab's main window to load",
             lambda d: d.find_elements(By.CSS_SELECTOR, "#jp-main-dock-panel"))
        yield driver


@pytest.fixture(autouse=True)
def no_kernels_left(lab):
    """After each test, stop every kernel the server runs: the next notebook gets both cores."""
    yield
    headers = {"Authorization": f"token {TOKEN}"}
    request = urllib.request.Request(f"{lab}/api/kernels", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        kernels = json.loads(response.read())
    for kernel in kernels:
        url = f"{lab}/api/kernels/{kernel['id']}"
        urllib.request.urlopen(urllib.request.Request(url, method="DELETE", headers=headers), timeout=30).close()


# ---------------------------------------------------------------- helpers


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def panel_text(driver) -> str:
    return js(driver, f"const p = document.querySelector('{PANEL}'); return p ? p.textContent : '';")


def open_notebook(driver, base: str, path: str) -> None:
    """Open a notebook in a fresh workspace (`?reset`), then wait until its kernel is idle."""
    driver.get(f"{base}/lab/tree/{path}?reset")
    wait(driver, PAGE_SECONDS, f"{path} to open with an idle kernel", lambda d: js(d, f"""
        const p = document.querySelector('{PANEL}');
        const name = p && p.querySelector('.jp-KernelName');
        const status = p && p.querySelector('.jp-Notebook-ExecutionIndicator');
        // Before the kernel connects the indicator already says idle, next to "No Kernel".
        return p && p.querySelector('.jp-Cell') && name && name.textContent.includes('Python 3')
            && status && status.dataset.status === 'idle';"""))


def run_all_cells(driver, path: str, seconds: float = RUN_ALL_SECONDS) -> None:
    """Run > Run All Cells from the menu bar, then wait until every code cell ran and the kernel is idle."""
    run_menu = next(item for item in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")
                    if item.text.strip() == "Run")
    run_menu.click()
    run_all = wait(driver, 10, "the Run menu to open with a 'Run All Cells' item", lambda d: [
        item for item in d.find_elements(By.CSS_SELECTOR, "#jp-mainmenu-run .lm-Menu-item .lm-Menu-itemLabel")
        if item.text.strip() == "Run All Cells"])
    run_all[0].click()
    # First some cell must be queued or running ([*]), so the idle check below cannot pass too early.
    wait(driver, 10, f"Run All Cells to start running {path}", lambda d: js(d, f"""
        const p = document.querySelector('{PANEL}');
        return [...p.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].some(e => e.textContent.includes('*'))
            || p.querySelector('.jp-Notebook-ExecutionIndicator').dataset.status !== 'idle';"""))
    wait(driver, seconds, f"every code cell of {path} to finish with the kernel idle",
         lambda d: js(d, f"""
        const p = document.querySelector('{PANEL}');
        const prompts = [...p.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
            .map(e => e.textContent.trim());
        return prompts.length > 0 && prompts.every(t => /^\\[\\d+\\]:$/.test(t))
            && p.querySelector('.jp-Notebook-ExecutionIndicator').dataset.status === 'idle';"""))


def assert_widgets_render(driver, path: str) -> None:
    text = panel_text(driver)
    for bad, meaning in [("Error displaying widget", "a widget failed to render"),
                         ("interactive(children=", "a widget showed as its text repr instead of rendering"),
                         ("Traceback (most recent call last)", "a cell raised an error")]:
        assert bad not in text, f"{path}: {meaning} ({bad!r} is in the notebook's output)"


def interact_box(driver, path: str):
    """The (first) rendered `interactive` widget of the open notebook, scrolled into view."""
    box = wait(driver, REACT_SECONDS, f"{path} to show a rendered interactive widget (.widget-interact)",
               lambda d: d.find_elements(By.CSS_SELECTOR, f"{PANEL} .jupyter-widgets.widget-interact"))[0]
    js(driver, "arguments[0].scrollIntoView({block: 'center'});", box)
    return box


def control(box, kind: str, label: str):
    """The control of `kind` (a CSS class such as widget-slider) whose description is `label`."""
    for element in box.find_elements(By.CSS_SELECTOR, f".{kind}"):
        if label in [e.text.strip() for e in element.find_elements(By.CSS_SELECTOR, ".widget-label")]:
            return element
    raise AssertionError(f"expected a {kind} labelled {label!r} in the widget; it is not there")


def dropdown(box, label: str) -> Select:
    return Select(control(box, "widget-dropdown", label).find_element(By.TAG_NAME, "select"))


def output_of(driver, box) -> dict:
    """What the widget's output area shows: its text and the src of its images."""
    return js(driver, """
        const out = arguments[0].querySelector('.widget-output');
        return {text: out ? out.textContent : '',
                images: out ? [...out.querySelectorAll('img')].map(i => i.src) : []};
        """, box)


def kernel_idle(driver) -> bool:
    return js(driver, f"""const s = document.querySelector('{PANEL} .jp-Notebook-ExecutionIndicator');
                          return s && s.dataset.status === 'idle';""")


def wait_for_change(driver, box, before: dict, what: str, key: str) -> dict:
    """Wait until the widget's output (`key`: text or images) differs from `before` and the kernel is idle
    again (a text box sends every keystroke: the last one's redraw is what stays)."""
    wait(driver, REACT_SECONDS, f"the widget's output ({key}) to change after {what}",
         lambda d: (now := output_of(d, box))[key] and now[key] != before[key])
    wait(driver, REACT_SECONDS, f"the kernel to be idle again after {what}", kernel_idle)
    return output_of(driver, box)


def save_shot(driver, element, path: Path) -> Path:
    (element.screenshot if element is not None else driver.save_screenshot)(str(path))
    print(f"screenshot: {path}")
    shots = os.environ.get("PLMCOURSE_BROWSER_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        print(f"copied to: {shutil.copy(path, shots)}")
    return path


def validate(driver, path: str) -> tuple[str, str]:
    """Click nbgrader's Validate button; returns (result class, dialog text) once its dialog is up."""
    button = wait(driver, PAGE_SECONDS, f"nbgrader's Validate button in the toolbar of {path}",
                  lambda d: d.find_elements(By.CSS_SELECTOR, f"{PANEL} jp-button.validate-button"))[0]
    button.click()  # saves the notebook, then the server runs it with nbgrader's Validator
    message = wait(driver, VALIDATE_SECONDS, f"nbgrader's 'Validation Results' dialog for {path}",
                   lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-Dialog #validation-message"))[0]
    classes = message.get_attribute("class").split()
    text = driver.find_element(By.CSS_SELECTOR, ".jp-Dialog-content").text
    print(f"\n--- Validate dialog for {path} ({' '.join(classes)}) ---\n{text}\n---")
    return next((c for c in classes if c.startswith("validation-")), ""), text


def close_dialog(driver) -> None:
    driver.find_element(By.CSS_SELECTOR, ".jp-Dialog .jp-Dialog-button.jp-mod-accept").click()
    wait(driver, 10, "the dialog to close after OK",
         lambda d: not d.find_elements(By.CSS_SELECTOR, ".jp-Dialog"))


# ---------------------------------------------------------------- tests


def test_gpt_sampler_sliders_and_prompt_rerun_the_sample(browser, lab, tmp_path):
    """05_gpt's `widgets.interactive` sampler: four sliders and a text box; each change prints a new sample.
    The notebook is cut to the widget and the cells it needs (test_notebooks.py runs the whole of it)."""
    path = "05_gpt/05_sampler.ipynb"
    open_notebook(browser, lab, path)
    run_all_cells(browser, path)
    assert_widgets_render(browser, path)
    box = interact_box(browser, path)
    for label in ["temperature", "top-k (0: off)", "top-p", "seed"]:
        control(box, "widget-slider", label)
    wait(browser, REACT_SECONDS, "the sampler to print a first sample",
         lambda d: output_of(d, box)["text"].strip())
    save_shot(browser, box, tmp_path / "05_gpt-sampler.png")

    # Move the seed slider one step with the keyboard: a new sample.
    before = output_of(browser, box)
    handle = control(box, "widget-slider", "seed").find_element(By.CSS_SELECTOR, ".noUi-handle")
    handle.send_keys(Keys.ARROW_RIGHT)
    after = wait_for_change(browser, box, before, "pressing → on the seed slider", "text")
    readout = control(box, "widget-slider", "seed").find_element(By.CSS_SELECTOR, ".widget-readout").text
    assert readout.strip() == "1", f"expected the seed slider to read 1 after one →, it reads {readout!r}"

    # Type a new prompt (the text box submits on Enter): the sample starts with it.
    text_box = control(box, "widget-text", "prompt").find_element(By.CSS_SELECTOR, "input")
    text_box.send_keys(Keys.CONTROL, "a")
    text_box.send_keys("The list ", Keys.ENTER)
    typed = wait_for_change(browser, box, after, "typing a new prompt", "text")
    assert typed["text"].startswith("The list "), (
        f"expected the sample to start with the typed prompt 'The list '; it starts {typed['text'][:40]!r}")
    assert_widgets_render(browser, path)


def test_attention_explorer_redraws_on_every_control(browser, lab, tmp_path):
    """03_attention's explorer: text box, two dropdowns and a checkbox, each redraws the heat map; then
    Validate on the solved notebook reports success."""
    path = "03_attention/03_attention_solved.ipynb"
    open_notebook(browser, lab, path)
    run_all_cells(browser, path)
    assert_widgets_render(browser, path)
    box = interact_box(browser, path)
    wait(browser, REACT_SECONDS, "the attention explorer to draw its first heat map",
         lambda d: output_of(d, box)["images"])
    shot = save_shot(browser, box, tmp_path / "03_attention-explorer.png")

    state = output_of(browser, box)
    dropdown(box, "head").select_by_visible_text("previous token")
    state = wait_for_change(browser, box, state, "choosing the 'previous token' head", "images")
    dropdown(box, "mask").select_by_visible_text("causal")
    state = wait_for_change(browser, box, state, "choosing the causal mask", "images")
    checkbox = box.find_element(By.CSS_SELECTOR, ".widget-checkbox input[type=checkbox]")
    assert checkbox.is_selected(), "expected 'divide by sqrt(d_k)' to start ticked"
    checkbox.click()
    state = wait_for_change(browser, box, state, "unticking 'divide by sqrt(d_k)'", "images")
    sentence = control(box, "widget-text", "sentence").find_element(By.CSS_SELECTOR, "input")
    sentence.send_keys(Keys.END, " again")
    wait_for_change(browser, box, state, "typing into the sentence box", "images")
    assert_widgets_render(browser, path)
    save_shot(browser, box, shot.with_name("03_attention-explorer-changed.png"))

    # Validate the solved notebook: nbgrader runs it on the server and every test passes.
    kind, text = validate(browser, path)
    assert kind == "validation-success" and "Success" in text, (
        f"expected Validate on the solved {path} to report success; the dialog says: {text[:300]!r}")
    close_dialog(browser)


def test_validate_on_the_unsolved_attention_notebook_says_what_failed(browser, lab, tmp_path):
    """What a student sees on pressing Validate before doing the exercises: which checks failed, and why."""
    path = "03_attention/03_attention.ipynb"
    open_notebook(browser, lab, path)
    kind, text = validate(browser, path)
    save_shot(browser, None, tmp_path / "03_attention-validate-failed.png")
    assert kind == "validation-failed" and "failed" in text, (
        f"expected Validate on the unsolved {path} to report failed cells; the dialog says: {text[:300]!r}")
    assert "NotImplementedError" in text and "check_softmax failed on case" in text, (
        "expected the first failure to be check_softmax's sentence about the stub's NotImplementedError; "
        f"the dialog says: {text[:300]!r}")
    close_dialog(browser)


def _with_language_info(notebook: dict, language_info) -> dict:
    copy = json.loads(json.dumps(notebook))
    if language_info is None:
        copy["metadata"].pop("language_info", None)
    else:
        copy["metadata"]["language_info"] = language_info
    return copy


def test_notebooks_open_unmodified_whatever_python_and_no_instructor_menu_or_news(browser, lab, served):
    """A notebook opens clean (no unsaved-changes dot) whatever Python version its metadata names; the
    menu bar has no empty Nbgrader menu; JupyterLab does not ask about fetching news."""
    shipped = json.loads((served / "00_welcome" / "00_welcome.ipynb").read_text())
    other_python = {"name": "python", "version": "3.99.0", "mimetype": "text/x-python",
                    "codemirror_mode": {"name": "ipython", "version": 3}, "pygments_lexer": "ipython3",
                    "nbconvert_exporter": "python", "file_extension": ".py"}
    variants = {"as shipped": shipped["metadata"].get("language_info"), "another Python": other_python,
                "no language_info": None}
    for index, (what, language_info) in enumerate(variants.items()):
        path = f"00_welcome/metadata_{index}.ipynb"
        (served / path).write_text(json.dumps(_with_language_info(shipped, language_info)))
        open_notebook(browser, lab, path)
        # JupyterLab copies the kernel's language_info into the notebook once the kernel connects;
        # give it time to do so, then look at the tab's unsaved-changes mark.
        js(browser, "return new Promise(done => setTimeout(done, 2000));")
        dirty = js(browser, """return [...document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty')]
                                .map(t => t.textContent.trim());""")
        assert not dirty, (f"{path} ({what}: language_info {language_info}) opened marked modified "
                           f"(tabs {dirty}): the kernel's language_info differs from the notebook's")
        menus = [item.text.strip() for item in browser.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")]
        assert "Run" in menus and "Nbgrader" not in menus, f"the menu bar shows {menus}"
        body = js(browser, "return document.body.textContent;")
        assert "official Jupyter news" not in body, "JupyterLab asks whether to fetch news on first start"


def test_inside_bert_sentence_box_shows_its_whole_sentence(browser, lab, tmp_path):
    """07's attention widget: the sentence box is wide enough for its default sentence (not cut off)."""
    path = "07_inside_a_real_bert/07_attention_widget.ipynb"
    open_notebook(browser, lab, path)
    run_all_cells(browser, path, RUN_LONG_SECONDS)
    assert_widgets_render(browser, path)
    box = interact_box(browser, path)
    text_box = control(box, "widget-text", "sentence").find_element(By.CSS_SELECTOR, "input")
    shown, needed = js(browser, "return [arguments[0].clientWidth, arguments[0].scrollWidth];", text_box)
    save_shot(browser, box, tmp_path / "07-attention-widget.png")
    assert text_box.get_attribute("value").endswith("river ."), "expected the default sentence in the box"
    assert needed <= shown, f"the sentence box is {shown} px wide but its sentence needs {needed} px: it is cut off"


def test_induction_head_slider_reads_training_steps(browser, lab, tmp_path):
    """11's attention-over-training widget: the slider reads the training step, not an evaluation index.
    The notebook is cut to the widget and what it needs, with 300 training steps instead of 2,000."""
    path = "11_in_context_learning/11_heads_slider.ipynb"
    open_notebook(browser, lab, path)
    run_all_cells(browser, path, RUN_LONG_SECONDS)
    assert_widgets_render(browser, path)
    box = interact_box(browser, path)
    wait(browser, REACT_SECONDS, "the widget to draw its first heat maps", lambda d: output_of(d, box)["images"])
    slider = control(box, "widget-slider", "step")
    readout = slider.find_element(By.CSS_SELECTOR, ".widget-readout").text.strip()
    title = output_of(browser, box)["text"]
    save_shot(browser, box, tmp_path / "11-heads-widget.png")
    assert readout.isdigit() and int(readout) > 100, f"expected the slider to read a training step, it reads {readout!r}"
    before = output_of(browser, box)
    slider.find_element(By.CSS_SELECTOR, ".noUi-handle").send_keys(Keys.HOME)
    wait_for_change(browser, box, before, "pressing Home on the step slider", "images")
    first = slider.find_element(By.CSS_SELECTOR, ".widget-readout").text.strip()
    assert first.isdigit() and int(first) < int(readout), (
        f"expected the first evaluation's step, below {readout}, after Home; the slider reads {first!r} ({title[:80]})")
