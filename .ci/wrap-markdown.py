#!/usr/bin/env python3
# Wraps the prose of Markdown files at 100 columns, in place: paragraphs and list items; code blocks,
# tables, headings and HTML stay as they are, and no line is made to start like a block of its own.
# Run: python3 .ci/wrap-markdown.py README.md docs/*.md
import re, sys, textwrap
WIDTH = 100
BLOCKISH = re.compile(r'^([-*+]\s|\d+[.)]\s|#|>|\||```|<)')
def wrap_block(text, first, rest):
    # A continuation line must not start like a block of its own (a list item, a heading, a quote, a table row).
    for width in range(WIDTH, WIDTH - 30, -1):
        lines = textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False)
        if not any(BLOCKISH.match(l[len(rest):]) for l in lines[1:]):
            return '\n'.join(lines)
    raise SystemExit('cannot wrap: ' + text[:80])
def rewrap(src):
    out=[]; lines=src.split('\n'); i=0; in_code=False
    while i < len(lines):
        line=lines[i]
        if line.startswith('```'):
            in_code = not in_code; out.append(line); i+=1; continue
        if in_code or line.startswith('|') or line.startswith('#') or line.strip()=='' or line.startswith('    ') or line.startswith('<'):
            out.append(line); i+=1; continue
        m=re.match(r'^(\s*)([-*]|\d+\.)\s+', line)
        if m:
            first=line[:m.end()]; rest=' '*len(first); body=[line[m.end():]]
            i+=1
            while i < len(lines) and lines[i].strip()!='' and not re.match(r'^\s*([-*]|\d+\.)\s+', lines[i]) and not lines[i].startswith(('|','#','```')) and lines[i].startswith(' '):
                body.append(lines[i].strip()); i+=1
            out.append(wrap_block(' '.join(body), first, rest)); continue
        body=[line]; i+=1
        while i < len(lines) and lines[i].strip()!='' and not re.match(r'^\s*([-*]|\d+\.)\s+', lines[i]) and not lines[i].startswith(('|','#','```','    ','<')):
            body.append(lines[i].strip()); i+=1
        out.append(wrap_block(' '.join(body), '', ''))
    return '\n'.join(out)
for p in sys.argv[1:]:
    s=open(p).read(); open(p,'w').write(rewrap(s))
