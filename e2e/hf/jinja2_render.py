#!/usr/bin/env python3
# Renders chat templates with jinja2 as transformers' apply_chat_template does (the second oracle
# of templates.test.mjs): ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
# loopcontrols and the {% generation %} tag, transformers' tojson and raise_exception, and
# strftime_now answering the context's strftime_now_fixed.
# stdin: a JSON array of {"text": template, "ctx": context}; stdout: a JSON array of
# {"ok": true, "out": rendering} or {"ok": false, "msg": error message}.
# `jinja2_render.py --version` prints jinja2's version (exit 1 when jinja2 is missing).
import json
import sys

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit(1)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class Generation(Extension):  # transformers' AssistantTracker, without the mask bookkeeping
    tags = {'generation'}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(['name:endgeneration'], drop_needle=True)
        return nodes.CallBlock(self.call_method('_render'), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def render(text, ctx):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, Generation])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    fixed = ctx.get('strftime_now_fixed')
    env.globals['strftime_now'] = lambda fmt: fixed
    return env.from_string(text).render(**ctx)


if __name__ == '__main__':
    if sys.argv[1:] == ['--version']:
        print(jinja2.__version__)
        sys.exit(0)
    out = []
    for item in json.load(sys.stdin):
        try:
            out.append({'ok': True, 'out': render(item['text'], item['ctx'])})
        except Exception as e:  # the message, as transformers would raise it
            out.append({'ok': False, 'msg': str(e)})
    json.dump(out, sys.stdout, ensure_ascii=False)
