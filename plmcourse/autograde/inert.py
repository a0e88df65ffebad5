"""What comes back out of the sandbox, made inert before anyone opens it.

The rule: a graded notebook is hostile data. Everything in it that the student's kernel or the
student wrote (markdown, outputs, metadata, attachments) may try to run script in whoever opens
it: the student's feedback page, and the instructor's formgrader, which shows the submission
inside the instructor's own Jupyter session, with the instructor's rights. So right after
autograding, `neutralise_graded` rewrites each notebook in course/autograded/ (written beside
and moved over, never through a link) so that no view of it can run anything:

- a markdown or raw cell whose text is not the course's own, and that holds raw HTML (or a link
  to anything but http, https, mailto or a relative address, or an image from outside the
  notebook), is replaced by the HTML that
  nbconvert renders of it (the same renderer the feedback and the formgrader use), cleaned by
  nh3 with an allow-list: no script, event handler, frame, form, style, meta, base, object,
  embed, SVG or MathML, and only http(s), mailto and relative links; an image only from inside the
  notebook (data:image/..., attachment:), since a browser fetches any other address by itself, with
  the session of whoever opens the page. A cell without HTML or such links is kept as it is;
- outputs: text/html is cleaned the same way; text/markdown like a markdown cell; PNG, JPEG and
  GIF are kept if they are base64; an SVG becomes an <img> of itself, because a browser shows
  an SVG image without running its scripts or loading anything, so a matplotlib SVG still
  looks the same and a hostile one is dead; application/javascript, widget views and every
  other type are dropped, their text/plain stays. Streams and errors stay: every view prints
  them as escaped text, so the test cells' sentences read as before;
- TeX: MathJax turns \\href{url} into a link, so a TeX link to anything but http(s), mailto or
  a relative address becomes a link to `#`;
- size: a cell keeps MAX_CELL_OUTPUT bytes of outputs and the notebook MAX_NOTEBOOK_OUTPUT
  (`cap_outputs`); what is past them is dropped, with one line in the cell and in the report;
- metadata: a cell keeps only nbgrader's keys, tags, the editing and hiding flags and the
  execution times, each with the type nbgrader and Jupyter write; the notebook keeps only its
  kernelspec and language_info (widget state goes: the page would load a widget manager to
  show it); markdown attachments keep only base64 images.

Course cells stay exactly as they are (their text is the instructor's own), and so does code:
no view runs it. `clean_html` is also the `clean_html` filter of nbconvert's templates in
course/nbgrader_config.py, a second net under the feedback HTML.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import uuid
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import nh3

# ---------------------------------------------------------------- the HTML allow-list

TAGS = set(nh3.ALLOWED_TAGS) | {"tfoot"}
# Removed with everything inside them, not only the tags: their content is code, a document or
# a form, never text an honest notebook shows.
CONTENT_REMOVED = {"script", "style", "template", "iframe", "frame", "frameset", "object", "embed",
                   "applet", "noscript", "noembed", "noframes", "svg", "math", "textarea", "select",
                   "title", "xmp", "plaintext"}
ATTRIBUTES = {tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()}
ATTRIBUTES["*"] = {"class", "style", "title", "align", "lang", "dir"}
ATTRIBUTES["table"] |= {"border", "cellpadding", "cellspacing", "width"}
for _cell in ("td", "th"):
    ATTRIBUTES[_cell] |= {"width", "valign", "nowrap"}
# Inline styles keep what a table or a coloured word needs; nothing that positions a box over
# the page or loads an address (position, background-image, content, ...).
STYLE_PROPERTIES = {
    "text-align", "vertical-align", "color", "background-color", "font-weight", "font-style",
    "font-size", "font-family", "text-decoration", "white-space", "line-height", "list-style-type",
    "border", "border-top", "border-bottom", "border-left", "border-right", "border-color",
    "border-style", "border-width", "border-collapse", "border-spacing",
    "padding", "padding-top", "padding-bottom", "padding-left", "padding-right",
    "margin", "margin-top", "margin-bottom", "margin-left", "margin-right",
    "width", "height", "max-width", "min-width"}
URL_SCHEMES = {"http", "https", "mailto", "data", "attachment"}  # narrowed per attribute below
IMAGE_DATA = re.compile(r"data:image/(?:png|jpeg|gif|webp|svg\+xml)[;,]")
SCHEME = re.compile(r"([a-z][a-z0-9+.-]*):")


def _flat(value: str) -> str:
    """An address as a browser reads its scheme: entities decoded, no controls, spaces or \\."""
    for _ in range(2):
        value = html.unescape(value)
    return re.sub(r"[\s\x00-\x20\x7f\\]+", "", value).lower()


def safe_url(value: str, image: bool = False) -> bool:
    """For a link: a relative address, http(s) or mailto (followed only when clicked). For an image, which a
    browser loads by itself, only what is inside the notebook: attachment: and data:image/. A relative or
    http(s) image would make whoever opens the page (the instructor's logged-in Jupyter session) request an
    address the student chose, on the same server."""
    flat = _flat(value)
    scheme = SCHEME.match(flat)
    if image:
        return scheme is not None and (scheme.group(1) == "attachment" or bool(IMAGE_DATA.match(flat)))
    return scheme is None or scheme.group(1) in ("http", "https", "mailto")


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """nh3's attribute_filter: image sources and links each get their own list of schemes."""
    if attribute == "src":
        return value if safe_url(value, image=True) else None
    if attribute in ("href", "cite"):
        return value if safe_url(value) else None
    return value


def _cleaner_options() -> dict:
    options = dict(tags=TAGS, clean_content_tags=CONTENT_REMOVED, attributes=ATTRIBUTES,
                   attribute_filter=_keep_attribute, url_schemes=URL_SCHEMES, strip_comments=True,
                   link_rel="noopener noreferrer", filter_style_properties=STYLE_PROPERTIES)
    try:
        nh3.clean("", **options)
    except TypeError:  # an nh3 too old to filter style properties: no inline styles at all
        del options["filter_style_properties"]
        options["attributes"] = {tag: names - {"style"} for tag, names in ATTRIBUTES.items()}
    return options


CLEAN_OPTIONS = _cleaner_options()


# Every element name HTML knows. Anything else that looks like a tag (`<mask>`, `<pad>`, a custom
# element) is shown as the text it is: browsers would show its content, nh3 may drop it.
HTML_ELEMENTS = set("""
a abbr acronym address applet area article aside audio b base basefont bdi bdo bgsound big blink
blockquote body br button canvas caption center cite code col colgroup data datalist dd del details
dfn dialog dir div dl dt em embed fieldset figcaption figure font footer form frame frameset h1 h2 h3
h4 h5 h6 head header hgroup hr html i iframe image img input ins isindex kbd keygen label legend li
link listing main map mark marquee math menu menuitem meta meter multicol nav nextid nobr noembed
noframes noscript object ol optgroup option output p param picture plaintext pre progress q rb rp rt
rtc ruby s samp script search section select slot small source spacer span strike strong style sub
summary sup svg table tbody td template textarea tfoot th thead time title tr track tt u ul var video
wbr xmp""".split())
TAG_LIKE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)(?=[\s/>]|$)")


def _show_unknown_tags(fragment: str) -> str:
    """`<mask>` and other names HTML does not know become text; replacing a `<` adds no markup."""
    return TAG_LIKE.sub(lambda m: m.group(0) if m.group(2).lower() in HTML_ELEMENTS else "&lt;" + m.group(0)[1:],
                        fragment)


def clean_html(fragment) -> str:
    """The HTML fragment with only allow-listed tags, attributes, styles and addresses (nh3).

    Also nbconvert's `clean_html` template filter (course/nbgrader_config.py), which may hand
    over bytes.
    """
    if isinstance(fragment, bytes):
        fragment = fragment.decode("utf-8", "replace")
    return nh3.clean(_show_unknown_tags(str(fragment)), **CLEAN_OPTIONS)


# ---------------------------------------------------------------- TeX and markdown

TEX_LINK = re.compile(r"\\(?:href|url)(?![A-Za-z])\s*\{")


def defang_tex(text: str) -> str:
    """Turn each TeX link (\\href{...}, \\url{...}) to an unsafe address into a link to `#...`.

    MathJax makes these links wherever it finds TeX on the page; `#` in front makes whatever
    follows a fragment of the page itself.
    """
    def fix(match):
        argument = text[match.end():match.end() + 500].split("}", 1)[0]
        return match.group(0) if safe_url(argument) else match.group(0) + "#"
    return TEX_LINK.sub(fix, text)


# Where a markdown renderer may pass HTML through: `<` and a tag name followed by a space, `/`,
# `>` or the end, or `<!`, `<?` (CommonMark's raw HTML and HTML blocks start no other way;
# `a < b` and `x_{<t}` do not match).
RAW_HTML = re.compile(r"<(?:/?[A-Za-z][A-Za-z0-9-]*(?=[\s/>]|$)|[!?])")
UNSAFE_LINK = re.compile(r"(?<!#)(?:java|vb|live)script:|(?:^|[(<:\"'=\[])data:(?!image/(?:png|jpe?g|gif|webp)[;,])")
ATTACHMENT_REF = re.compile(r"attachment:([^\s)\"'<>]*)")


MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]*)|!\[[^\]]*\]\s*\[")  # ![a](url), ![a][ref]


def needs_rendering(markdown: str, attachments: dict) -> bool:
    """True if rendering `markdown` could carry raw HTML, an unsafe link, an image the browser would fetch
    from an address (not one inside the notebook) or a missing attachment."""
    if RAW_HTML.search(markdown) or UNSAFE_LINK.search(_flat(markdown)):
        return True
    if any(not safe_url(target, image=True) for target in MARKDOWN_IMAGE.findall(markdown)):
        return True  # a reference-style image has no target here (""): rendered, its source checked there
    # nbconvert gives up on a notebook whose markdown shows an attachment it does not have.
    return any(name not in attachments for name in ATTACHMENT_REF.findall(html.unescape(markdown)))


class _Attachments(dict):
    """A cell's attachments for the renderer; a missing one is an empty image, not an error."""

    def __contains__(self, name):
        return True

    def __missing__(self, name):
        return {"image/png": ""}


def render_markdown(markdown: str, attachments: dict) -> str:
    """The HTML that nbconvert's own markdown renderer (feedback, formgrader) makes of `markdown`."""
    try:
        from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

        renderer = IPythonRenderer(escape=False, attachments=_Attachments(attachments))
        return MarkdownWithMath(renderer=renderer).render(markdown)
    except Exception:  # an older nbconvert, or text its renderer cannot take: show it as text
        return f"<pre>{html.escape(markdown)}</pre>"


def as_html_block(fragment: str) -> str:
    """`fragment` as markdown that every renderer passes through unchanged: one HTML block line.

    A blank line would end the block, so line breaks become `&#10;`, which HTML reads as the
    same line break (inside <pre> too).
    """
    body = fragment.strip().replace("\r\n", "\n").replace("\r", "\n").replace("\n", "&#10;")
    return f"<div>{body}</div>"


def clean_markdown(markdown: str, attachments: dict | None = None) -> str:
    """`markdown` as it is when rendering it can carry nothing active; else its cleaned rendering."""
    markdown = defang_tex(markdown)
    if not needs_rendering(markdown, attachments or {}) or is_clean_block(markdown):
        return markdown
    return as_html_block(clean_html(render_markdown(markdown, attachments or {})))


def is_clean_block(markdown: str) -> bool:
    """True if `markdown` is already what clean_markdown makes: one <div> line of cleaned HTML."""
    inner = markdown[len("<div>"):-len("</div>")]
    return (markdown.startswith("<div>") and markdown.endswith("</div>") and "\n" not in markdown
            and as_html_block(clean_html(inner)) == markdown)


# ---------------------------------------------------------------- what the report says was removed

ACTIVE_TAGS = {"script", "iframe", "frame", "frameset", "object", "embed", "applet", "form", "meta", "base",
               "link", "style", "svg", "math", "template", "noscript", "input", "button", "textarea",
               "select", "foreignobject", "animate", "set", "use"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "xlink:href", "srcdoc", "poster", "background"}


class _Active(HTMLParser):
    """Counts what of an HTML fragment could run, for the report only: the cleaning is nh3's."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found = Counter()

    def handle_starttag(self, tag, attrs):
        if tag in ACTIVE_TAGS:
            self.found[f"<{tag}>"] += 1
        for name, value in attrs:
            if name.startswith("on"):
                self.found["event handlers"] += 1
            elif name in URL_ATTRIBUTES and value and not safe_url(value, image=name == "src"):
                self.found["unsafe links"] += 1


def active(text: str) -> Counter:
    """What in `text` (HTML, markdown or TeX) a browser could run, by kind."""
    parser = _Active()
    try:
        parser.feed(text)
        parser.close()
    except Exception:  # html.parser gives up on some input; the report then says less
        pass
    found = parser.found
    found["TeX links to unsafe addresses"] = sum(
        1 for m in TEX_LINK.finditer(text) if not safe_url(text[m.end():m.end() + 500].split("}", 1)[0]))
    markdown_links = len(UNSAFE_LINK.findall(_flat(text))) - found["TeX links to unsafe addresses"]
    found["unsafe links"] = max(found["unsafe links"], markdown_links)
    return +found


def removed(before: str, after: str, markdown: bool = False, attachments: dict | None = None) -> Counter:
    """What of `before` that could run is no longer in `after` (markdown is read as rendered)."""
    if before == after:
        return Counter()
    if markdown:
        before = render_markdown(before, attachments or {})
    return +(active(before) - active(after))


# ---------------------------------------------------------------- outputs

RASTER = {"image/png", "image/jpeg", "image/gif"}
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
STREAMS = {"stdout", "stderr"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SVG_PARTS = {"<svg>", "<style>", "<use>"}  # every matplotlib SVG has them


def _text(value) -> str | None:
    """A notebook string, which nbformat may store as a list of lines; None if it is neither."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(value)
    return None


def svg_as_image(svg: str) -> str:
    """An <img> showing the SVG: a browser runs no script and loads nothing for an SVG image."""
    data = base64.b64encode(svg.encode("utf-8", "replace")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="SVG image">'


def clean_data(data, found: Counter) -> dict:
    """An output's data with only the types a browser shows inertly, each made inert."""
    kept, svg = {}, None
    for mime, value in (data.items() if isinstance(data, dict) else ()):
        text = _text(value)
        if mime == WIDGET_VIEW:  # an honest output that needs a live kernel: dropped, not reported
            continue
        if text is None:
            found[f"{mime} outputs"] += 1
        elif mime == "text/plain":
            kept[mime] = text
        elif mime == "text/html":
            kept[mime] = clean_html(defang_tex(text))
            found.update(removed(text, kept[mime]))
        elif mime == "text/markdown":
            kept[mime] = clean_markdown(text)
            found.update(removed(text, kept[mime], markdown=True))
        elif mime == "text/latex":
            kept[mime] = defang_tex(text)
            found.update(removed(text, kept[mime]))
        elif mime in RASTER and BASE64.fullmatch(text):
            kept[mime] = text
        elif mime == "image/svg+xml":
            svg = text
            if set(active(svg)) - SVG_PARTS:
                found["SVG with script (now an image)"] += 1
        else:
            found[f"{mime} outputs"] += 1
    if svg is not None and "text/html" not in kept:
        kept["text/html"] = svg_as_image(svg)
    if data and not kept:  # say so where the output was, rather than show nothing
        kept["text/plain"] = "(an output that could not be shown safely was removed)"
    return kept


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e6


IMAGE_METADATA = {"width": _number, "height": _number, "unconfined": lambda v: isinstance(v, bool),
                  "needs_background": lambda v: v in ("light", "dark")}


def clean_output_metadata(metadata, data: dict) -> dict:
    """Only an image's size and background, as numbers and flags (templates print them into tags)."""
    metadata = metadata if isinstance(metadata, dict) else {}
    kept = {key: value for key, value in metadata.items() if key in IMAGE_METADATA and IMAGE_METADATA[key](value)}
    for mime in data:
        inner = metadata.get(mime)
        if isinstance(inner, dict):
            inner = {k: v for k, v in inner.items() if k in IMAGE_METADATA and IMAGE_METADATA[k](v)}
            if inner:
                kept[mime] = inner
    return kept


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def clean_output(output, found: Counter) -> dict | None:
    """One output made inert, or None for something that is not an output."""
    kind = output.get("output_type") if isinstance(output, dict) else None
    if kind == "stream":
        name = output.get("name") if output.get("name") in STREAMS else "stdout"
        return {"output_type": kind, "name": name, "text": _text(output.get("text")) or ""}
    if kind == "error":
        traceback = output.get("traceback")
        return {"output_type": kind, "ename": str(output.get("ename", "")), "evalue": str(output.get("evalue", "")),
                "traceback": [str(line) for line in traceback] if isinstance(traceback, list) else []}
    if kind in ("display_data", "execute_result"):
        data = clean_data(output.get("data"), found)
        cleaned = {"output_type": kind, "data": data, "metadata": clean_output_metadata(output.get("metadata"), data)}
        if kind == "execute_result":
            cleaned["execution_count"] = _count(output.get("execution_count"))
        return cleaned
    found["outputs of no known type"] += 1
    return None


# ---------------------------------------------------------------- cells and the notebook

SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
NBGRADER_KEYS = {
    "grade": lambda v: isinstance(v, bool), "solution": lambda v: isinstance(v, bool),
    "locked": lambda v: isinstance(v, bool), "task": lambda v: isinstance(v, bool),
    "grade_id": lambda v: isinstance(v, str) and SAFE_NAME.fullmatch(v) is not None,
    "points": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "schema_version": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "checksum": lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{1,128}", v) is not None,
    "cell_type": lambda v: v in ("code", "markdown")}
FLAG = lambda v: isinstance(v, bool)  # noqa: E731
CELL_METADATA = {
    "editable": FLAG, "deletable": FLAG, "collapsed": FLAG,
    "scrolled": lambda v: v is True or v is False or v == "auto",
    "jupyter": lambda v: isinstance(v, dict) and all(k in ("source_hidden", "outputs_hidden") and FLAG(x)
                                                     for k, x in v.items()),
    "execution": lambda v: isinstance(v, dict) and all(isinstance(k, str) and SAFE_NAME.fullmatch(k) and
                                                       isinstance(x, str) and re.fullmatch(r"[0-9T:.Z+-]{1,40}", x)
                                                       for k, x in v.items())}


def clean_cell_metadata(metadata, found: Counter) -> dict:
    """nbgrader's keys, tags and Jupyter's own flags, each only with the type they are written with."""
    metadata = metadata if isinstance(metadata, dict) else {}
    kept = {key: value for key, value in metadata.items() if key in CELL_METADATA and CELL_METADATA[key](value)}
    nbgrader = metadata.get("nbgrader")
    if isinstance(nbgrader, dict):
        kept["nbgrader"] = {k: v for k, v in nbgrader.items() if k in NBGRADER_KEYS and NBGRADER_KEYS[k](v)}
        if len(kept["nbgrader"]) < len(nbgrader):
            found["nbgrader metadata that is not nbgrader's"] += 1
    tags = metadata.get("tags")
    if isinstance(tags, list):
        kept["tags"] = [tag for tag in tags if isinstance(tag, str) and SAFE_NAME.fullmatch(tag)]
        if len(kept["tags"]) < len(tags):
            found["cell tags that are not names"] += 1
    return kept


def clean_attachments(attachments, found: Counter) -> dict:
    """Only images stored as base64 (a name never reaches the page: the image is put in its place)."""
    kept = {}
    for name, bundle in (attachments.items() if isinstance(attachments, dict) else ()):
        bundle = bundle if isinstance(bundle, dict) else {}
        images = {mime: data for mime, data in bundle.items()
                  if mime in RASTER | {"image/svg+xml"} and isinstance(data, str) and BASE64.fullmatch(data)}
        if images:
            kept[name] = images
        if len(images) < len(bundle) or not bundle:
            found["attachments that are not images"] += 1
    return kept


def clean_cell(cell, course_texts: set, found: Counter) -> dict | None:
    """One cell made inert; a course cell's text and any cell's code stay exactly as they are."""
    if not isinstance(cell, dict):
        return None
    kind = cell.get("cell_type")
    source = _text(cell.get("source")) or ""
    cleaned = {"cell_type": kind, "metadata": clean_cell_metadata(cell.get("metadata"), found), "source": source}
    if "id" in cell:  # nbformat's own pattern; anything else gets a new id
        valid = isinstance(cell["id"], str) and CELL_ID.fullmatch(cell["id"])
        cleaned["id"] = cell["id"] if valid else uuid.uuid4().hex[:8]
    if kind == "code":
        cleaned["execution_count"] = _count(cell.get("execution_count"))
        outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        cleaned["outputs"] = [o for o in (clean_output(output, found) for output in outputs) if o is not None]
        return cleaned
    if kind not in ("markdown", "raw"):
        cleaned["cell_type"] = kind = "raw"  # a kind no view knows: shown as a raw cell, cleaned below
    if "attachments" in cell:
        cleaned["attachments"] = clean_attachments(cell["attachments"], found)
    if source not in course_texts:
        cleaned["source"] = (clean_markdown(source, cleaned.get("attachments")) if kind == "markdown"
                             else clean_html(defang_tex(source)))
        found.update(removed(source, cleaned["source"], kind == "markdown", cleaned.get("attachments")))
    return cleaned


NOTEBOOK_METADATA = ("kernelspec", "language_info")


def _strings(value, depth: int = 0):
    """Every string inside a JSON value (bounded depth)."""
    if isinstance(value, str):
        yield value
    elif depth < 20 and isinstance(value, (dict, list)):
        for item in (value.values() if isinstance(value, dict) else value):
            yield from _strings(item, depth + 1)


def clean_notebook(nb: dict, course_texts: set) -> tuple[dict, Counter]:
    """The notebook made inert, and a count of what active content was removed, by kind."""
    if not isinstance(nb, dict) or nb.get("nbformat") != 4 or not isinstance(nb.get("cells"), list):
        raise ValueError("it is not a version 4 notebook")
    found = Counter()
    metadata = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    if active("\n".join(_strings(metadata.get("widgets")))):  # saved widget state goes in any case
        found["widget state holding HTML that runs"] += 1
    cleaned = {key: nb[key] for key in ("nbformat", "nbformat_minor") if key in nb}
    cleaned["metadata"] = {key: metadata[key] for key in NOTEBOOK_METADATA if isinstance(metadata.get(key), dict)}
    cleaned["cells"] = [c for c in (clean_cell(cell, course_texts, found) for cell in nb["cells"]) if c is not None]
    cap_outputs(cleaned["cells"], found)
    return cleaned, +found


# ---------------------------------------------------------------- output size

MAX_CELL_OUTPUT = 4 * 1024 ** 2       # bytes of outputs (as JSON) one cell may keep; the course's biggest plot
MAX_NOTEBOOK_OUTPUT = 16 * 1024 ** 2  # cells are about 0.1 MB, its notebooks' outputs under 3 MB in all
KEPT_ERROR = 8 * 1024                 # an error output this small is kept past a cap: it holds a check's sentence
OVER_CAP = "outputs over the size cap"
MAX_MESSAGE = 16 * 1024 ** 2          # one message from a kernel: a bigger one is refused unread (nbgrader_ext)
LOST_NOTE = (f"[some of this cell's output never reached the grader: one message over {MAX_MESSAGE // 1024 ** 2} MB "
             f"is dropped unread]\n")


def cap_outputs(cells: list, found: Counter) -> None:
    """Drop, in place, the outputs past MAX_CELL_OUTPUT in a cell or MAX_NOTEBOOK_OUTPUT in the notebook, in
    their order (small error outputs stay), each cell that lost any ending with one line saying so."""
    left = MAX_NOTEBOOK_OUTPUT
    for cell in cells:
        kept, dropped, size = [], 0, 0
        for output in cell.get("outputs", []):
            n = len(json.dumps(output))
            if size + n <= min(MAX_CELL_OUTPUT, left) or (output["output_type"] == "error" and n <= KEPT_ERROR):
                kept.append(output)
                size += n
            else:
                dropped += n
        left -= size
        if dropped:
            kept.append(dropped_note(dropped))
            cell["outputs"] = kept
        if dropped or any(_is_dropped_note(output) for output in kept):  # or dropped as it arrived (nbgrader_ext)
            found[OVER_CAP] += 1


def dropped_note(dropped: int) -> dict:
    """The one line a cell ends with when `dropped` bytes of its output were dropped."""
    return {"output_type": "stream", "name": "stderr",
            "text": f"[{dropped / 1024 ** 2:.1f} MB of this cell's output dropped while grading: a cell "
                    f"keeps {MAX_CELL_OUTPUT // 1024 ** 2} MB, a notebook {MAX_NOTEBOOK_OUTPUT // 1024 ** 2} MB]\n"}


DROPPED_NOTE = re.compile(r"\[\d+\.\d MB of this cell's output dropped while grading: |\[some of this cell's output "
                          r"never reached the grader: ")


def _is_dropped_note(output) -> bool:
    """Whether an output is dropped_note's line. A kernel could print the same words: that only adds a
    line to the report, which is evidence, never a grade."""
    return output.get("output_type") == "stream" and isinstance(output.get("text"), str) \
        and DROPPED_NOTE.match(output["text"]) is not None


# ---------------------------------------------------------------- files

MAX_NOTEBOOK = 64 * 1024 ** 2


def course_texts(course: Path, assignment: str) -> set[str]:
    """The text of every markdown and raw cell the course itself gives out for `assignment`."""
    texts = set()
    for path in sorted((course / "source" / assignment).glob("*.ipynb")) + \
            sorted((course / "release" / assignment).glob("*.ipynb")):
        try:
            texts |= {c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type in ("markdown", "raw")}
        except Exception:  # the course's own notebooks are checked elsewhere
            continue
    return texts


def _read(path: Path) -> dict:
    """The notebook JSON at `path`, not following a link, with its strings joined (nbformat's reader)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as file:
        raw = file.read(MAX_NOTEBOOK + 1)
    if len(raw) > MAX_NOTEBOOK:
        raise ValueError(f"it is over {MAX_NOTEBOOK // 1024 ** 2} MB")
    return nbformat.v4.nbjson.reads(raw.decode("utf-8", "replace"))


def _write(path: Path, nb: dict) -> None:
    """Write `nb` beside `path` and move it over `path`: never written through a link."""
    beside = path.with_name(path.name + ".inert")
    if beside.is_symlink() or beside.exists():
        beside.unlink()
    fd = os.open(beside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(nbformat.v4.nbjson.writes(nbformat.from_dict(nb)) + "\n")
    os.replace(beside, path)


def placeholder(why: str) -> dict:
    """What stands in for a notebook that could not be made inert: one cell saying so."""
    text = (f"This submission could not be shown safely ({why}). The file as handed in is in "
            "course/submitted/; its grades are unchanged.")
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(clean_markdown(html.escape(text))))
    return nb


def _printable(text: str, limit: int = 200) -> str:
    """One line of at most `limit` printable characters (a report line never carries controls)."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))[:limit]


def _describe(err: Exception) -> str:
    return f"{type(err).__name__}: {_printable(err, 120)}"


def neutralise_file(path: Path, student: str, texts: set) -> list[str]:
    """Make one autograded notebook inert in place; a report line if anything active was removed.

    A notebook that cannot be read or cleaned is replaced by a note saying so; one that cannot
    be rewritten is deleted (the submitted copy stays). Either way: one line, never an error.
    """
    label = f"{_printable(student)}: {_printable(path.name)}"
    try:
        nb = _read(path)
        cleaned, found = clean_notebook(nb, texts)
    except Exception as err:  # whatever the student's JSON holds
        cleaned, found = placeholder(_describe(err)), None
        line = f"{label} could not be made safe to display ({_describe(err)}); replaced by a note in autograded/"
    try:
        if found is None or cleaned != nb:
            _write(path, cleaned)
    except OSError as err:
        path.unlink(missing_ok=True)
        return [f"{label} could not be rewritten ({_describe(err)}); removed from autograded/, the submitted "
                f"file is kept"]
    if found is None:
        return [line]
    lines = []
    if found.pop(OVER_CAP, 0):
        lines.append(_printable(f"{label}: outputs over the size cap dropped ({MAX_CELL_OUTPUT // 1024 ** 2} MB a cell, "
                                f"{MAX_NOTEBOOK_OUTPUT // 1024 ** 2} MB a notebook); each such cell says so", 400))
    if not found:
        return lines
    what = ", ".join(f"{kind} ({n})" for kind, n in sorted(found.items(), key=lambda item: (-item[1], item[0])))
    return lines + [_printable(f"{label}: removed what a browser would run before anyone opens it: {what}", 400)]


def neutralise_graded(course: Path, assignment: str, student: str | None = None) -> list[str]:
    """Make every autograded notebook of `assignment` inert; one report line per student changed.

    Links and anything that is not a regular file are left alone (clean-up removes them).
    Running it again changes nothing.
    """
    course = Path(course).resolve()
    texts = course_texts(course, assignment)
    lines = []
    for folder in sorted((course / "autograded").glob(f"{student or '*'}/{assignment}")):
        if folder.parent.is_symlink() or folder.is_symlink() or not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.ipynb")):
            if not path.is_symlink() and path.is_file():
                lines += neutralise_file(path, folder.parent.name, texts)
    return lines
