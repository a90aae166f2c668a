"""A Sphinx extension for the book: each script once per page.

sphinx-thebe registers its configuration script (`const THEBE_JS_URL = ...`) once per reading of the sources, and
Jupyter Book reads them twice, so every page declared the constant twice and the browser logged a SyntaxError.
"""


def _key(script) -> tuple:
    filename = getattr(script, "filename", script)  # a Sphinx _JavaScript, or a plain path on older Sphinx
    attributes = getattr(script, "attributes", {}) or {}
    return str(filename or ""), tuple(sorted((k, str(v)) for k, v in attributes.items()))


def _once(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for script in context.get("script_files", []):
        if _key(script) not in seen:
            seen.add(_key(script))
            kept.append(script)
    context["script_files"][:] = kept



def setup(app):
    app.connect("html-page-context", _once, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
