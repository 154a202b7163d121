#!/usr/bin/python3
"""Plain text of a folder of HTML documentation pages, for the corpus of prepare-corpus.sh.

    html_to_text.py FOLDER >> corpus.txt

Pages are read in sorted path order, so the same files always give the same bytes. Of a Sphinx
page only its main content is kept (the element with role="main", class "body" or
itemprop="articleBody"); a page without one (DocBook) is kept whole. Scripts, styles,
navigation, headers, footers and Sphinx's pilcrow anchors are dropped; so are index, search and
module-index pages, which are lists of names, and translations/ (the corpus is English).
Running text is folded to single spaces; <pre> blocks keep their lines. Only the standard
library is used: the bytes depend on nothing but the packages and this file.
"""
import html.parser
import os
import re
import sys

DROPPED = {"script", "style", "nav", "header", "footer", "head", "title"}
BLOCKS = {"p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6",
          "tr", "table", "section", "pre", "blockquote", "hr", "article", "figcaption", "caption",
          "td", "th"}
EMPTY = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "param",
         "source", "track", "wbr"}
SKIPPED_PAGES = re.compile(r"(^|/)(translations/.*|genindex[^/]*|search|py-modindex|modindex|"
                           r"bookindex)\.html$")


def is_main_content(tag, attributes):
    classes = (attributes.get("class") or "").split()
    return tag in ("div", "main", "article") and (
        attributes.get("role") == "main" or "body" in classes
        or attributes.get("itemprop") == "articleBody")


class PageText(html.parser.HTMLParser):
    def __init__(self, main_only):
        super().__init__(convert_charrefs=True)
        self.main_only = main_only
        self.open = []          # open elements, innermost last
        self.dropped = 0        # depth inside dropped elements
        self.main_depth = None  # len(self.open) where the main content began
        self.found_main = False
        self.pre = 0
        self.parts = []

    def handle_starttag(self, tag, attrs):
        if tag in EMPTY:
            if tag in ("br", "hr"):
                self.parts.append("\n")
            return
        attributes = dict(attrs)
        drop = tag in DROPPED or (tag == "a" and "headerlink" in (attributes.get("class") or ""))
        self.open.append((tag, drop))
        self.dropped += drop
        if self.main_only and self.main_depth is None and is_main_content(tag, attributes):
            self.main_depth = len(self.open)
            self.found_main = True
        self.pre += tag == "pre"
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in EMPTY or all(name != tag for name, _ in self.open):
            return
        # Closes every element left open inside this one, as browsers do.
        while self.open:
            name, drop = self.open.pop()
            self.dropped -= drop
            self.pre -= name == "pre"
            if self.main_depth is not None and len(self.open) < self.main_depth:
                self.main_depth = None
            if name == tag:
                break
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.dropped or (self.main_only and self.main_depth is None):
            return
        self.parts.append(data if self.pre else re.sub(r"\s+", " ", data))

    def text(self):
        lines = (line.rstrip() for line in "".join(self.parts).split("\n"))
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def page_text(path):
    with open(path, "rb") as page:
        markup = page.read().decode("utf-8", "replace")
    for main_only in (True, False):
        parser = PageText(main_only)
        parser.feed(markup)
        parser.close()
        if parser.found_main or not main_only:
            return parser.text()
    return ""


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: html_to_text.py FOLDER (a folder of .html pages)")
    root = sys.argv[1]
    pages = []
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".html") and not SKIPPED_PAGES.search(os.path.relpath(path, root)):
                pages.append(path)
    out = sys.stdout.buffer
    for path in sorted(pages):
        text = page_text(path)
        if text:
            out.write((text + "\n\n").encode("utf-8"))


if __name__ == "__main__":
    main()
