#!/usr/bin/env python3
# Writes tests/model/template_cases.inc: the expected renderings of tests/model/test_template.cpp,
# produced by jinja2 configured as transformers' apply_chat_template configures it
# (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, the {% generation %}
# tag, transformers' tojson and raise_exception). jinja2 is the oracle; rerun after changing cases:
#   KRAFLA_SHARED=../shared python3 tests/tools/jinja2_cases.py > tests/model/template_cases.inc
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_DATE = '26 Jul 2024'


def raise_exception(m):
    raise jinja2.exceptions.TemplateError(m)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class Generation(Extension):  # transformers' AssistantTracker, minus the tracking
    tags = {'generation'}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(['name:endgeneration'], drop_needle=True)
        return nodes.CallBlock(self.call_method('_render'), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def render(t, ctx):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, Generation])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = lambda fmt: FIXED_DATE
    return env.from_string(t).render(**ctx)


C = []  # (name, template, context): one construct at a time
def c(name, t, ctx=None): C.append((name, t, ctx or {}))
M = [{"role":"system","content":"S"},{"role":"user","content":"U1"},{"role":"assistant","content":"A1"},{"role":"user","content":"U2"}]
# text and whitespace
c("text", "plain text")
c("trailing newline dropped", "a\n")
c("two trailing newlines", "a\n\n")
c("crlf normalised", "a\r\nb\rc")
c("trim_blocks", "{% if true %}\nx\n{% endif %}\ny")
c("lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc")
c("lstrip not for output", "a\n    {{ 'b' }}\nc")
c("lstrip only at line start", "a  {% if true %}b{% endif %}")
c("minus trims", "a   {{- 'b' -}}   c  {%- if true -%}  d  {%- endif %}")
c("minus trims newlines", "x\n\n  {%- if true %}\n  y\n  {%- endif %}\n\nz")
c("plus disables lstrip", "a\n    {%+ if true %}b{% endif %}")
c("comment", "a{# gone #}b")
c("comment trim", "a\n  {# c #}\nb")
c("comment minus", "a  {#- c -#}  b")
c("raw", "{% raw %}{{ x }}{% endraw %}")
c("output newline kept", "{{ 'a' }}\n{{ 'b' }}\n")
# literals and printing
c("none and bools", "{{ none }} {{ true }} {{ false }} {{ None }} {{ True }} {{ False }}")
c("numbers", "{{ 1 + 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 * 3 - 1 }} {{ -4 }} {{ 1.5 + 1 }}")
c("division", "{{ 7 / 2 }} {{ 4 / 2 }} {{ 1 / 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2.0 ** 3 }}")
c("floats", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ 100.0 }} {{ 3.14159 }} {{ -0.0 }} {{ 1e100 }}")
c("string escapes", "{{ 'a\\nb\\t\"c\"' }}|{{ \"it's\" }}|{{ '\\u00e9\\x41\\\\' }}|{{ '\\q' }}")
c("adjacent strings", "{{ 'a' 'b' \"c\" }}")
c("list print", "{{ [1, 'a', none, true, 2.5, [3]] }}")
c("dict print", "{{ {'a': 1, 'b': 'x', 'c': [none]} }}")
c("tuple print", "{{ (1, 'a') }} {{ (1,) }} {{ () }}")
c("repr quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n', 'tab\\t', 'back\\\\slash'] }}")
c("repr unicode", "{{ ['é', '日本', '\\x00', '\\x7f', '\\u00a0', '\\u200b'] }}")
c("undefined prints nothing", "[{{ missing }}]")
c("context values", "{{ s }} {{ i }} {{ f }} {{ b }} {{ n }} {{ l }} {{ d }}", {"s":"str","i":42,"f":2.5,"b":True,"n":None,"l":[1,"x"],"d":{"k":[1,2]}})
# statements
c("if elif else", "{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %},{% endfor %}")
c("loop variables", "{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", {"items":["a","b","c"]})
c("loop previtem nextitem", "{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}")
c("loop cycle", "{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{% endfor %}")
c("for else", "{% for x in [] %}x{% else %}empty{% endfor %}")
c("for filter", "{% for x in [1, 2, 3, 4] if x % 2 == 0 %}{{ loop.index }}:{{ x }}/{{ loop.length }}{% if not loop.last %},{% endif %}{% endfor %}")
c("for unpack items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d":{"x":1,"y":"z"}})
c("for unpack filter", "{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", {"d":{"x":1,"y":"z"}})
c("for over dict", "{% for k in d %}{{ k }}{% endfor %}", {"d":{"a":1,"b":2}})
c("for over string", "{% for ch in 'héllo' %}[{{ ch }}]{% endfor %}")
c("for over undefined", "{% for x in nothing %}x{% else %}none{% endfor %}")
c("nested loops", "{% for a in [1,2] %}{% for b in ['x','y'] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}")
c("break continue", "{% for n in [1, 2, 3, 4] %}{% if n == 2 %}{% continue %}{% endif %}{% if n == 4 %}{% break %}{% endif %}{{ n }}{% endfor %}")
c("set and loop scope", "{% set a = 1 %}{% for x in [1] %}{% set a = 2 %}{{ a }}{% endfor %}{{ a }}{% if true %}{% set b = 3 %}{% endif %}{{ b }}")
c("set per iteration", "{% for x in [1, 2] %}{% if x == 1 %}{% set a = 'one' %}{% endif %}[{{ a }}]{% endfor %}")
c("namespace", "{% set ns = namespace(total=0, seen=false) %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}{% if x == 2 %}{% set ns.seen = true %}{% endif %}{% endfor %}{{ ns.total }} {{ ns.seen }}")
c("namespace empty", "{% set ns = namespace() %}{% set ns.a = 'x' %}{{ ns.a }}")
c("set tuple", "{% set a, b = [1, 2] %}{{ b }}{{ a }}")
c("set block", "{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]")
c("set block filter", "{% set x | upper %}abc{% endset %}{{ x }}")
c("macro", "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}")
c("macro recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}")
c("macro sees globals", "{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", {"g":"G"})
c("call block", "{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('b') %}inside{% endcall %}")
c("call block args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1,2]) %}[{{ item }}]{% endcall %}")
c("filter block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}")
c("with", "{% with a = 1, b = 'x' %}{{ a }}{{ b }}{% endwith %}[{{ a }}]")
c("generation", "{% generation %}gen {{ 1 }}{% endgeneration %}")
# expressions
c("comparisons", "{{ 1 < 2 }}{{ 2 <= 1 }}{{ 'a' == 'a' }}{{ 'a' != 'a' }}{{ 3 > 2 }}{{ 1 >= 1 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'b' > 'a' }}{{ [1, 2] < [1, 3] }}")
c("chained compare", "{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}")
c("logic", "{{ true and false }}{{ true or false }}{{ not true }}{{ not (1 == 2) }}{{ 0 or 'x' }}{{ 'a' and 'b' }}{{ '' or [] }}")
c("in", "{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in d }}{{ 'q' not in d }}{{ '' in 'abc' }}", {"d":{"k":1}})
c("tests", "{{ x is defined }}{{ y is defined }}{{ y is not defined }}{{ y is undefined }}{{ n is none }}{{ s is string }}{{ x is number }}{{ x is integer }}{{ 1.5 is float }}{{ d is mapping }}", {"x":1,"n":None,"s":"s","d":{}})
c("more tests", "{{ s is iterable }}{{ l is iterable }}{{ 1 is iterable }}{{ l is sequence }}{{ d is sequence }}{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ true is number }}", {"s":"x","l":[1],"d":{}})
c("number tests", "{{ 3 is odd }}{{ 3 is even }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 'a' is in 'cat' }}{{ 2 is in [1] }}")
c("compare tests", "{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 1 is gt 2 }}{{ 2 is ge 2 }}{{ 1 is le 0 }}{{ 'a' is lower }}{{ 'A' is upper }}{{ none is sameas none }}")
c("callable test", "{% macro m() %}{% endmacro %}{{ m is callable }}{{ 'x'.strip is callable }}{{ 1 is callable }}{{ range is callable }}")
c("conditional expression", "{{ 'yes' if flag else 'no' }}[{{ 'a' if false }}]{{ 1 if 0 else 2 if 0 else 3 }}", {"flag":True})
c("concat operator", "{{ 'n=' ~ 3 ~ true ~ none ~ [1] }}")
c("string plus", "{{ 'a' + 'b' }}{{ [1] + [2, 3] }}{{ 'ab' * 3 }}{{ [0] * 2 }}")
c("unary", "{{ -(3) }}{{ +4 }}{{ - 2 ** 2 }}{{ -2.5|abs }}")
c("precedence", "{{ 1 + 2 * 3 }}{{ (1 + 2) * 3 }}{{ 2 ** 3 ** 2 }}{{ 10 - 2 - 3 }}{{ 'a' ~ 2 * 3 }}{{ not 1 == 2 }}")
c("filter binds tighter than plus", "{{ 'a' + ' b ' | trim + 'c' }}")
c("subscripts", "{{ xs[0] }}{{ xs[-1] }}{{ d['k'] }}{{ d.k }}{{ xs.1 }}[{{ xs[10] }}][{{ d.nope }}]{{ 'hello'[1] }}{{ 'héllo'[1] }}", {"xs":[1,2,3],"d":{"k":"v"}})
c("slices", "{{ xs[1:] }}{{ xs[:2] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[1::2] }}{{ xs[-1:0:-1] }}{{ xs[:-2:-1] }}{{ xs[-2:] }}{{ xs[10:] }}", {"xs":[1,2,3,4,5]})
c("string slices", "{{ 'hello'[1:3] }}{{ 'abc'[::-1] }}{{ 'héllo wörld'[1:8] }}{{ 'héllo'[::-1] }}{{ 'abcdef'[::2] }}")
c("list and dict literals", "{{ [1, 'a'][1] }}{{ {'k': 1}['k'] }}{{ {'a': 1, 'a': 2} }}{{ [1, 2,] }}{{ {1: 'x', none: 2} }}")
c("dict attr vs item", "{{ d.items is callable }}|{{ d['items'] }}", {"d":{"items":"mine"}})
# filters
c("trim", "[{{ '  x  ' | trim }}][{{ '\\n\\tx\\n' | trim }}][{{ 'xxaxx' | trim('x') }}][{{ '\\u3000x\\u00a0' | trim }}]")
c("length", "{{ xs | length }}{{ 'héllo' | length }}{{ d | length }}{{ missing | length }}{{ xs | count }}", {"xs":[1,2,3],"d":{"a":1}})
c("case", "{{ 'Ab cD' | upper }} {{ 'Ab cD' | lower }} {{ 'hello wORLD-foo(bar)' | title }} {{ 'hello WORLD' | capitalize }}")
c("default", "{{ missing | default('d') }} {{ none | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ x | d('e') }} {{ missing | default }}|", {"x":"X"})
c("join", "{{ xs | join('-') }} {{ xs | join }} {{ ms | join(', ', attribute='n') }}", {"xs":[1,"a",None],"ms":[{"n":"a"},{"n":"b"}]})
c("first last", "{{ xs | first }}{{ xs | last }}{{ 'abc' | first }}{{ 'abc' | last }}[{{ [] | first }}]", {"xs":[1,2,3]})
c("list", "{{ 'ab' | list }}{{ d | list }}{{ (1, 2) | list }}", {"d":{"a":1,"b":2}})
c("string filter", "{{ 5 | string }}{{ [1, 'a'] | string }}{{ none | string }}[{{ missing | string }}]{{ (1 | string) + 'x' }}")
c("int float", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ true | int }} {{ '3' | float }} {{ 'x' | float }} {{ 2 | float }} {{ ' 12 ' | int }} {{ '0x1A' | int(0, 16) }}")
c("abs round", "{{ -3 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 1.55 | round(1) }} {{ 3.14159 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(0, 'floor') }} {{ 5 | round }} {{ -2.5 | round }}")
c("replace", "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'abc' | replace('', '-') }} {{ 'a.b'.replace('.', '::') }}")
c("safe escape", "{{ '<b>' | safe }} {{ '<a href=\"x\">&\\'' | escape }} {{ '<' | e }}")
c("items dictsort", "{{ d | items | list }} {{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ d | dictsort(by='value') }}", {"d":{"b":2,"a":3,"C":1}})
c("selectattr", "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} {{ (msgs | selectattr('role', 'equalto', 'user') | list)[-1].content }} {{ msgs | rejectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}", {"msgs":M})
c("selectattr truthy", "{% for i in items | selectattr('on') %}{{ i.n }}{% endfor %}|{% for i in items | rejectattr('on') %}{{ i.n }}{% endfor %}|{{ items | selectattr('on', 'undefined') | map(attribute='n') | list }}", {"items":[{"n":1,"on":True},{"n":2,"on":False},{"n":3}]})
c("select reject", "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ [1,5,3] | select('gt', 2) | list }} {{ ['a', 'code', 'b'] | reject('equalto', 'code') | join(', ') }}")
c("map", "{{ ['a', 'b'] | map('upper') | list }} {{ ms | map(attribute='n') | list }} {{ ms | map(attribute='z', default='-') | list }} {{ ['1', '2'] | map('int') | sum }}", {"ms":[{"n":"a"},{"n":"b"}]})
c("unique sort reverse", "{{ [3, 1, 2, 1] | unique | list }} {{ ['b', 'A', 'a'] | unique | list }} {{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }}")
c("sort attribute", "{{ ms | sort(attribute='n') | map(attribute='n') | join }}", {"ms":[{"n":"b"},{"n":"a"},{"n":"c"}]})
c("min max sum", "{{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [1, 2, 3] | sum }} {{ [1.5, 2] | sum }} {{ ['b', 'A'] | min }}")
c("indent", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'x\\ny' | indent('> ') }}")
c("tojson", "{{ {'a': [1, 'x', none, true, 2.5]} | tojson }} {{ 'é\"\\n<>&' | tojson }} {{ [] | tojson }} {{ {} | tojson }}")
c("tojson indent", "{{ {'b': [1, {'c': 'x'}], 'a': {}, 'e': []} | tojson(indent=4) }}")
c("tojson indent 2", "{{ [1, [2, 3]] | tojson(indent=2) }}")
c("tojson ensure_ascii", "{{ {'k': 'é日🦙\"'} | tojson(ensure_ascii=true) }} {{ 'ü' | tojson(ensure_ascii=false) }}")
c("unicode case and space", "{{ 'ÉCOLE ÀÖ ΣΟΦΙΑ ПРИВЕТ ŁÓDŹ' | lower }} {{ 'straße éa ñ ω я' | upper }} {{ 'élan vital' | title }} {{ 'ÿes'.capitalize() }} [{{ '\u2003x\u3000' | trim }}] {{ 'a\u00a0b'.split() }}")
c("unicode methods", "{{ 'héllo wörld'.title() }} {{ 'ÀB'.lower() }} {{ 'ß'.upper() == 'ß' }} {{ 'Łódź'.upper() }}")
c("tojson sort keys", "{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}")
c("tojson context", "{{ t | tojson }}", {"t":{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}},"n":[1,-2,3.25,1e20]}})
c("wordcount center", "{{ 'hello big world' | wordcount }} [{{ 'ab' | center(6) }}] [{{ 'abc' | center(6) }}]")
c("attr filter", "{{ d | attr('k') }}", {"d":{"k":"v"}})
c("count filter", "{{ [1,2] | count }}")
# methods
c("string methods", "{{ ' x '.strip() }}{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('x') }}{{ 'ab'.upper() }}{{ 'hello world-foo'.title() }}{{ ' x '.lstrip() }}|{{ ' x '.rstrip() }}|{{ 'aBc'.lower() }}{{ 'abc'.capitalize() }}")
c("strip characters", "[{{ '\\n\\nx\\n'.strip('\\n') }}][{{ 'xxay'.lstrip('x') }}][{{ 'ayyx'.rstrip('xy') }}][{{ ' a '.strip(none) }}]")
c("split", "{{ 'a<b>c<b>'.split('<b>') }}{{ ' a  b '.split() }}{{ 'x'.split(',') }}{{ 'r</think>a'.split('</think>')[-1] }}{{ 'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ ''.split() }}{{ ''.split(',') }}{{ ' a b c '.split(none, 1) }}")
c("startswith tuple", "{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith(('b', 'x')) }}")
c("find count", "{{ 'hello'.find('l') }}{{ 'hello'.find('z') }}{{ 'hello'.rfind('l') }}{{ 'hello'.count('l') }}{{ 'héllo'.find('l') }}")
c("str join format", "{{ ', '.join(['a', 'b']) }} {{ '{} and {}'.format('x', 1) }} {{ '{0}{0}'.format('y') }} {{ '{n}!'.format(n='z') }} {{ '{{}}'.format() }}")
c("splitlines is", "{{ 'a\\nb\\r\\nc'.splitlines() }}{{ '123'.isdigit() }}{{ 'a1'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ 'ab'.islower() }}{{ 'AB'.isupper() }}")
c("dict methods", "{{ d.get('k') }}{{ d.get('q', 'dflt') }}{{ d.get('q') }}{{ d.keys() | list }}{{ d.values() | list }}{{ d.items() | list }}", {"d":{"k":"v","n":1}})
# globals
c("range", "{% for i in range(3) %}{{ i }}{% endfor %}{{ range(1, 8, 3) | list }}{{ range(3, -1, -1) | list }}{{ range(0, 3, -1) | list }}")
c("dict global", "{{ dict(a=1, b='x') }}{{ dict({'z': 0}, y=1) }}")
c("strftime_now defined", "{{ strftime_now is defined }} {{ raise_exception is defined }} {{ range is defined }} {{ namespace is defined }} {{ nothing is defined }}")
c("messages", "{% for m in messages %}{{ m.role }}:{{ m['content'] }};{% endfor %}", {"messages":M})
c("loop index into list", "{% for m in messages %}{% if loop.index0 > 0 %}{{ messages[loop.index0 - 1].role }}>{% endif %}{{ m.role }} {% endfor %}", {"messages":M})
c("unicode content", "{{ s }}|{{ s | length }}|{{ s[2] }}|{{ s | upper }}", {"s":"日本語 ü 🦙"})
c("whitespace control mix", "{%- for x in [1,2] -%}\n  {{ x }}\n{%- endfor -%}\n")
c("if expr with filter", "{% if messages | length > 2 and messages[0].role == 'system' %}yes{% endif %}", {"messages":M})
c("set from filter chain", "{% set last = messages | selectattr('role', 'equalto', 'user') | list | last %}{{ last.content }}", {"messages":M})
c("undefined in boolean ops", "{{ missing or 'x' }}{{ missing and 'x' }}|{{ not missing }}")
c("undefined equality", "{{ missing == missing }}{{ missing == none }}{{ missing != 1 }}")
c("undefined member", "{{ d.missing is defined }}{{ d.missing is undefined }}{{ d['missing'] | default('z') }}", {"d":{}})
c("string attribute on str", "{{ s.content is defined }}", {"s":"text"})
c("bool arithmetic", "{{ true + 1 }}{{ true + true }}{{ 2 * false }}")
c("int overflow to float", "{{ 9223372036854775807 }}")
c("in on list of dicts", "{{ {'a': 1} in [{'a': 1}] }}{{ [1] == [1] }}{{ (1, 2) == (1, 2) }}")
c("loop.index in nested macro", "{% macro row(x) %}{{ x }}{% endmacro %}{% for x in ['a', 'b'] %}{{ row(loop.index ~ x) }}{% endfor %}")

shared = os.environ.get('KRAFLA_SHARED', os.path.join(os.path.dirname(__file__), '..', '..', '..', 'shared'))
# Real templates (path relative to shared/ or to the repository, a context).
CONV = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi ü 🦙"},
        {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!"}, {"role": "user", "content": "  Bye  "}]
REAL = [
    ('shared:data/hf/qwen2.5-0.5b-instruct/tokenizer_config.json', {"messages": CONV, "add_generation_prompt": True}),
    ('shared:data/hf/qwen3-0.6b/tokenizer_config.json', {"messages": CONV, "add_generation_prompt": True, "enable_thinking": False}),
    ('shared:data/hf/tinyllama-1.1b-chat-v1.0/tokenizer_config.json', {"messages": CONV, "add_generation_prompt": True, "eos_token": "</s>"}),
    ('shared:data/hf/gemma-3-tokenizer_config/tokenizer_config.models-gemma-3.json', {"messages": CONV[1:], "add_generation_prompt": True, "bos_token": "<bos>"}),
    ('shared:data/hf/chat-templates-llamacpp/meta-llama-Llama-3.2-3B-Instruct.jinja', {"messages": CONV, "add_generation_prompt": True, "bos_token": "<|begin_of_text|>"}),
    ('repo:tests/data/chat_templates/mistral-7b-instruct-v0.3.jinja', {"messages": CONV[:3] + [{"role": "user", "content": "Bye"}], "bos_token": "<s>", "eos_token": "</s>"}),
]


def load(spec):
    kind, rel = spec.split(':', 1)
    base = shared if kind == 'shared' else os.path.join(os.path.dirname(__file__), '..', '..')
    text = open(os.path.join(base, rel), encoding='utf-8').read()
    return json.loads(text)['chat_template'] if rel.endswith('.json') else text


def c_str(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch == '\\': out.append('\\\\')
        elif ch == '"': out.append('\\"')
        elif ch == '\n': out.append('\\n')
        elif ch == '\t': out.append('\\t')
        elif ch == '\r': out.append('\\r')
        elif o < 0x20 or o == 0x7f: out.append('\\%03o' % o)
        elif ch == '?': out.append('\\?')  # no trigraph surprises
        else: out.append(ch)
    return '"' + ''.join(out) + '"'


print('// Generated by tests/tools/jinja2_cases.py from jinja2 %s (transformers\' configuration); do not edit.' % jinja2.__version__)
print('// {name, template, context (JSON), expected rendering}')
print('static const TemplateCase kJinja2Cases[] = {')
for name, t, ctx in C:
    print('    {%s, %s, %s, %s},' % (c_str(name), c_str(t), c_str(json.dumps(ctx, ensure_ascii=False)), c_str(render(t, ctx))))
print('};')
print('// {template file (shared: or repo:), context (JSON), expected rendering}')
print('static const RealCase kRealCases[] = {')
for spec, ctx in REAL:
    full = dict(ctx, strftime_now_fixed=FIXED_DATE)  # krafla's strftime_now answer (jinja2 ignores it)
    print('    {%s, %s, %s},' % (c_str(spec), c_str(json.dumps(full, ensure_ascii=False)), c_str(render(load(spec), full))))
print('};')
