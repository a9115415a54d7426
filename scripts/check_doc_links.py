#!/usr/bin/env python3
"""Checks that every relative link in the project's Markdown resolves.

A link resolves when its file exists and, with a #fragment into a Markdown file, that file has a
heading with that anchor (GitHub's rule: lower case, punctuation dropped, spaces to hyphens, -N
for the Nth repeat) or an explicit <a name/id>. Links in code spans and fenced blocks are text,
not links; absolute URLs are not followed (nothing outside the machine is reachable).

  scripts/check_doc_links.py [ROOT]      # ROOT: the repository (default: the current directory)
  scripts/check_doc_links.py --self-test # the checker against a planted tree of good and bad links

Exit: 0 every link resolves, 1 some do not (each printed as FILE:LINE: TARGET: why), 64 usage.
"""
import pathlib
import re
import sys
import tempfile
import unicodedata

LINK = re.compile(r'!?\[(?:[^\][]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
SKIPPED_DIRS = ('.', 'build')  # hidden folders and build trees (build, build-asan, ...)


def slug(text):
    text = re.sub(r'`([^`]*)`', r'\1', text)
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)
    out = []
    for ch in text.strip().lower():
        if ch == ' ':
            out.append('-')
        elif ch in '-_' or unicodedata.category(ch)[0] in 'LN':
            out.append(ch)
    return ''.join(out)


def text_lines(path):
    """(line number, line) of the lines outside fenced blocks."""
    fenced = False
    for no, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield no, line


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, names = {}, set()
        for _, line in text_lines(path):
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                names.add(s if s not in seen else f'{s}-{seen[s]}')
                seen[s] = seen.get(s, 0) + 1
            names.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', line))
        _anchors[path] = names
    return _anchors[path]


def markdown_files(root):
    for p in sorted(root.rglob('*.md')):
        folders = p.relative_to(root).parts[:-1]
        if not any(f.startswith(SKIPPED_DIRS) for f in folders):
            yield p


def broken_links(root, files):
    bad = []
    for md in files:
        for no, line in text_lines(md):
            for target in LINK.findall(re.sub(r'`[^`]*`', '', line)):
                if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):
                    continue  # http:, mailto:, ...
                path, _, frag = target.partition('#')
                dest = (md.parent / path).resolve() if path else md
                where = f'{md.relative_to(root)}:{no}: {target}'
                if not dest.exists():
                    bad.append(f'{where}: no such file')
                elif frag and dest.suffix == '.md' and frag not in anchors(dest):
                    bad.append(f'{where}: no heading with anchor #{frag} in {dest.relative_to(root)}')
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / 'docs').mkdir()
        (root / 'docs' / 'a.md').write_text(
            '# Top\n## The `x` part (two)\n## Top\n'
            '[ok](b.md) [ok](#top-1) [ok](#the-x-part-two) [ok](b.md#far) ![ok](b.md)\n'
            '`[code](nowhere.md)` [web](https://example.org/x)\n'
            '```\n[fenced](nowhere.md)\n```\n'
            '[bad](nowhere.md)\n[bad](b.md#near)\n[bad](#nowhere)\n', encoding='utf-8')
        (root / 'docs' / 'b.md').write_text('<a name="far"></a>\n# B\n', encoding='utf-8')
        (root / 'build').mkdir()
        (root / 'build' / 'c.md').write_text('[skipped](nowhere.md)\n', encoding='utf-8')
        got = broken_links(root, list(markdown_files(root)))
    want = ['docs/a.md:9: nowhere.md: no such file',
            'docs/a.md:10: b.md#near: no heading with anchor #near in docs/b.md',
            'docs/a.md:11: #nowhere: no heading with anchor #nowhere in docs/a.md']
    if got != want:
        print('check_doc_links --self-test: expected', want, 'got', got)
        return 1
    print('check_doc_links --self-test: ok')
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith('-')):
        print(__doc__, file=sys.stderr)
        return 64
    root = pathlib.Path(argv[1] if len(argv) == 2 else '.').resolve()
    files = list(markdown_files(root))
    bad = broken_links(root, files)
    for b in bad:
        print(b)
    print(f'check_doc_links: {len(files)} Markdown files, {len(bad)} broken link(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
